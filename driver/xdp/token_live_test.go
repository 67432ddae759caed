//go:build linux

package xdp

// Token mode on the wire: two namespaces joined by a veth pair, the
// program attached in generic mode on both ends, in token mode with n = 2
// (a's pred is b and b's pred is a). One frame of b, injected with
// AF_PACKET, starts a token ring that runs in the kernel: each end accepts
// the other's frame and answers it with XDP_TX, carrying its queue's
// batches, then empty passes until the idle run hands the token off and
// the ring stops on its own.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exo-rack/exo/exo"
)

// liveEnd is one end of the ring.
type liveEnd struct {
	name string
	ns   string
	mac  net.HardwareAddr
	me   uint8
	p    *Program
	tok  *Token
}

// liveRun is what one ring session did.
type liveRun struct {
	recs    [2][]Record
	elapsed time.Duration // from the injection to the hand-off record read
	hops    int           // frames accepted (records), both ends
	carried [2]int        // batches each end sent (popped records)
}

// htons for AF_PACKET.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// injector is an AF_PACKET socket on exo0 in a namespace.
func injector(tb testing.TB, ns string) (fd int, sa *unix.SockaddrLinklayer) {
	tb.Helper()
	mustNetns(tb, ns, func() error {
		ifc, err := net.InterfaceByName(vethIf)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		sa = &unix.SockaddrLinklayer{Protocol: htons(exo.EtherType), Ifindex: ifc.Index, Halen: 6}
		return nil
	})
	tb.Cleanup(func() { unix.Close(fd) })
	return fd, sa
}

// session arms both ends (a: me 0, pred 1; b: me 1, pred 0), queues
// batches[i] at end i (fed as the queue frees slots), injects b's frame
// at seq s0 from b's side, and collects the records until a hand-off and
// a quiet ring.
func liveSession(t *testing.T, ends [2]*liveEnd, s0 uint64, idleRun uint32, batches [2][]exo.Batch, injectRecord int, spin bool) liveRun {
	t.Helper()
	var run liveRun
	for i, e := range ends {
		if _, err := e.tok.Halt(); err != nil {
			t.Fatal(err)
		}
		e.tok.Records(func(*Record) {})
		e.tok.Release()
		if _, err := e.tok.Reclaim(); err != nil {
			t.Fatal(err)
		}
		cur, err := e.tok.Read()
		if err != nil {
			t.Fatal(err)
		}
		eng := exo.Engine{Pointers: exo.NewPointers(7, 2, 1024)}
		eng.Epoch = 1
		// a expects b's frame s0 (history [a]); b sent it (history [b]).
		eng.Append, eng.Agreed, eng.History[0] = s0, s0-1, 0
		if i == 1 {
			eng.Append, eng.Agreed, eng.History[0] = s0+1, s0, 1
		}
		eng.Tx = exo.Tx{On: true, Me: e.me, Pred: 1 - e.me, IdleRun: idleRun, Kseq: cur.Kseq, QHead: cur.QHead}
		if ok, err := e.tok.Arm(eng); !ok || err != nil {
			t.Fatalf("%s: arm: %v %v", e.name, ok, err)
		}
		if err := e.p.ResetCounters(); err != nil {
			t.Fatal(err)
		}
	}
	// Consumers: read records, feed the queue, stop after a hand-off and
	// a quiet ring.
	var (
		mu      sync.Mutex
		handoff time.Time
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	var next [2]int
	for i, e := range ends {
		// The first batches before the injection; the rest as the
		// records free the slots.
		for next[i] < len(batches[i]) {
			ok, err := e.tok.Push(batches[i][next[i]])
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			next[i]++
		}
	}
	for i, e := range ends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := next[i]
			feed := func() {
				for next < len(batches[i]) {
					ok, err := e.tok.Push(batches[i][next])
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						return
					}
					next++
				}
			}
			for {
				_, err := e.tok.Records(func(r *Record) {
					run.recs[i] = append(run.recs[i], recCopy(r))
					if r.Handoff {
						mu.Lock()
						if handoff.IsZero() {
							handoff = time.Now()
						}
						mu.Unlock()
					}
				})
				if err != nil {
					t.Error(err)
					return
				}
				if err := e.tok.Release(); err != nil {
					t.Error(err)
					return
				}
				feed()
				select {
				case <-stop:
					return
				default:
				}
				if spin {
					runtime.Gosched()
					continue
				}
				if err := e.tok.Wait(time.Now().Add(20 * time.Millisecond)); err != nil && !os.IsTimeout(err) {
					t.Error(err)
					return
				}
			}
		}()
	}
	// b's frame s0, from b's side of the pair: a receives it.
	fd, sa := injector(t, ends[1].ns)
	f := exo.Frame{Type: exo.FrameData, Group: 7, Sender: 1, Epoch: 1, Seq: s0, History: []uint8{0}}
	if injectRecord > 0 {
		f.Count, f.Payload = 1, payloadOf(injectRecord)
	}
	b := EthernetFrame(ends[1].mac, seal(f, tokKeys))
	b = append(b, make([]byte, max(0, exo.MinEthFrame-len(b)))...)
	t0 := time.Now()
	if err := unix.Sendto(fd, b, 0, sa); err != nil {
		t.Fatalf("inject: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		h := handoff
		mu.Unlock()
		if !h.IsZero() {
			run.elapsed = h.Sub(t0)
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("no hand-off within 60 s: %d and %d records", len(run.recs[0]), len(run.recs[1]))
		}
	}
	time.Sleep(100 * time.Millisecond) // quiet: nothing after the hand-off
	close(stop)
	wg.Wait()
	for i, e := range ends {
		e.tok.Records(func(r *Record) { run.recs[i] = append(run.recs[i], recCopy(r)) })
	}
	run.hops = len(run.recs[0]) + len(run.recs[1])
	for i := range ends {
		for _, r := range run.recs[i] {
			if r.Popped {
				run.carried[i]++
			}
		}
	}
	return run
}

// checkLive checks a session: every record an ACCEPT of the other end's
// frame in sequence, every one sent but the last (the hand-off, at one
// end only), each end's batches carried in order to the other, then
// empty passes; the ends' counters; the halted end and the armed one.
func checkLive(t *testing.T, ends [2]*liveEnd, run liveRun, s0 uint64, batches [2][]exo.Batch, injectRecord int) {
	t.Helper()
	// a's first frame is the injected one (one record if injectRecord).
	skipFirst := func(i int) int {
		if i == 0 && injectRecord > 0 {
			return 1
		}
		return 0
	}
	handoffs := 0
	for i, e := range ends {
		recs := run.recs[i]
		other := 1 - i
		var got []exo.Batch
		tx := 0
		for k, r := range recs {
			if r.Reason != exo.ReasonAccept || !r.Armed {
				t.Fatalf("%s record %d: %s armed %v", e.name, k, r.Reason, r.Armed)
			}
			if k > 0 && r.Kseq != recs[k-1].Kseq+1 {
				t.Fatalf("%s record %d: kseq %d after %d", e.name, k, r.Kseq, recs[k-1].Kseq)
			}
			var f exo.Frame
			if err := f.UnmarshalBinary(r.Frame); err != nil {
				t.Fatalf("%s record %d: %v", e.name, k, err)
			}
			wantSeq := s0 + uint64(2*k) + uint64(i)
			if f.Sender != ends[other].me || f.Seq != wantSeq || !bytes.Equal(r.Src, ends[other].mac) {
				t.Fatalf("%s record %d: sender %d seq %d src %v, want %d %d %v", e.name, k, f.Sender, f.Seq, r.Src, ends[other].me, wantSeq, ends[other].mac)
			}
			if f.Count > 0 {
				got = append(got, exo.Batch{Count: f.Count, Payload: append([]byte(nil), f.Payload...)})
			}
			if r.Sent {
				tx++
			}
			if r.Handoff {
				handoffs++
				if k != len(recs)-1 || r.Sent {
					t.Fatalf("%s: hand-off at record %d of %d (sent %v)", e.name, k, len(recs), r.Sent)
				}
			} else if !r.Sent {
				t.Fatalf("%s record %d: not sent, no hand-off", e.name, k)
			}
		}
		if k := len(got) - skipFirst(i); k != run.carried[other] {
			t.Errorf("%s received %d batches, %s sent %d", e.name, k, ends[other].name, run.carried[other])
		}
		got = got[skipFirst(i):]
		for k := range got {
			if w := batches[other][k]; got[k].Count != w.Count || !bytes.Equal(got[k].Payload, w.Payload) {
				t.Fatalf("%s: batch %d out of order or changed", e.name, k)
			}
		}
		tc, err := e.p.TokenCounters()
		if err != nil {
			t.Fatal(err)
		}
		if tc.TX != uint64(tx) || tc.RingFull != 0 || tc.Lost != 0 || tc.TXErr != 0 || tc.Mode != 0 {
			t.Errorf("%s: counters %+v, %d frames sent", e.name, tc, tx)
		}
		st, err := e.tok.Read()
		if err != nil {
			t.Fatal(err)
		}
		last := len(recs) > 0 && recs[len(recs)-1].Handoff
		if st.Halted != last {
			t.Errorf("%s: halted %v, handed off %v", e.name, st.Halted, last)
		}
		t.Logf("%s: %d frames accepted, %d sent (%d batches, %d empty passes), %d batches received; hand-off %v (no room: %d)",
			e.name, len(recs), tc.TX, tc.TX-tc.TXEmpty, tc.TXEmpty, len(got), last, tc.TXNoRoom)
	}
	if handoffs != 1 {
		t.Errorf("%d hand-offs, want 1", handoffs)
	}
}

func TestTokenLive(t *testing.T) {
	for _, c := range []struct {
		topo string
		mode Mode
	}{{"veth", ModeGeneric}, {"bridge", ModeGeneric}, {"veth", ModeNative}} {
		t.Run(c.topo+"_"+c.mode.String(), func(t *testing.T) { testTokenLive(t, c.topo, c.mode) })
	}
}

func testTokenLive(t *testing.T, topo string, mode Mode) {
	var vp *vethPair
	if topo == "veth" {
		vp = newVethPair(t, 1)
	} else {
		vp = newBridgedPair(t)
	}
	ends := [2]*liveEnd{
		{name: "a", ns: vp.A, mac: vethMACA, me: 0},
		{name: "b", ns: vp.B, mac: vethMACB, me: 1},
	}
	for _, e := range ends {
		e.p = loadOrSkip(t, false)
		tok, err := e.p.Token(e.mac)
		if err != nil {
			t.Fatal(err)
		}
		e.tok = tok
		t.Cleanup(func() { tok.Close() })
		if err := e.p.SetKeys(tokKeys); err != nil {
			t.Fatal(err)
		}
		a := attachIn(t, e.ns, e.p, mode)
		t.Cleanup(func() { a.Close() })
	}
	batchesOf := func(tag byte, n int, sizes ...int) []exo.Batch {
		var bs []exo.Batch
		for k := range n {
			var p []byte
			for j, s := range sizes {
				r := bytes.Repeat([]byte{tag, byte(k), byte(j)}, s/3+1)[:s]
				p, _ = exo.AppendRecord(p, r)
			}
			bs = append(bs, exo.Batch{Count: uint16(len(sizes)), Payload: p})
		}
		return bs
	}
	s0 := uint64(1000)
	nextS0 := func() uint64 { s0 += 1 << 24; return s0 }

	t.Run("batches_then_idle", func(t *testing.T) {
		// 60 small batches each way (the queue holds 64), then empty
		// passes up to idle_run 40: every batch carried, in order, then
		// the hand-off.
		batches := [2][]exo.Batch{batchesOf('a', 60, 5, 7), batchesOf('b', 60, 4)}
		s := nextS0()
		run := liveSession(t, ends, s, 40, batches, 0, false)
		checkLive(t, ends, run, s, batches, 0)
		if run.carried != [2]int{60, 60} {
			t.Errorf("batches carried %v, want 60 each way", run.carried)
		}
		t.Logf("%d hops in %v", run.hops, run.elapsed)
	})

	t.Run("growth", func(t *testing.T) {
		// How much larger than the frame it answers may the frame sent
		// be? a answers b's injected 60-byte frame with one batch of
		// size bytes (one record): sent, or handed off for no room
		// (bpf_xdp_adjust_tail cannot grow the buffer that far).
		sends := func(size int) bool {
			batches := [2][]exo.Batch{batchesOf('a', 1, size), nil}
			s := nextS0()
			run := liveSession(t, ends, s, 2, batches, 0, false)
			checkLive(t, ends, run, s, batches, 0)
			tc, _ := ends[0].p.TokenCounters()
			return tc.TXNoRoom == 0 && tc.TX > tc.TXEmpty
		}
		lo, hi := 0, 1400 // lo is sent, hi is not
		if sends(hi) {
			t.Logf("a batch of %d bytes answers a 60-byte frame", hi)
			return
		}
		for hi-lo > 1 {
			if mid := (lo + hi) / 2; sends(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		t.Logf("%s, %s mode: the largest batch (one record of r bytes, frame %d bytes on the wire) sent in answer to a 60-byte frame: r = %d; r = %d hands off (TX_NOROOM)",
			topo, mode, exo.EthHeaderLen+exo.HeaderLen+1+exo.RecordLenSize+lo, lo, hi)
	})

	t.Run("throughput", func(t *testing.T) {
		const idle = 100000
		var rates []float64
		for round := range 3 {
			s := nextS0()
			run := liveSession(t, ends, s, idle, [2][]exo.Batch{}, 0, false)
			checkLive(t, ends, run, s, [2][]exo.Batch{}, 0)
			rate := float64(run.hops) / run.elapsed.Seconds()
			rates = append(rates, rate)
			t.Logf("round %d: %d hops in %v: %.0f hops/s (%.2f us per hop)", round, run.hops, run.elapsed, rate, 1e6/rate)
		}
		t.Logf("token ring of 2 hosts, %s XDP, %s: %s hops/s (empty passes)", mode, topo, fmtRates(rates))
	})

	t.Run("throughput_batches", func(t *testing.T) {
		// Every frame may carry a batch of 8 records of 100 bytes (a
		// 896-byte frame): the consumers feed the queues as records
		// free the slots, spinning (a consumer parked in Wait refills
		// too late: the ring runs dry and passes empty tokens); b's
		// injected frame carries 900 bytes so that the buffer has room.
		// The ring runs until the batches are gone and 2000 more empty
		// passes.
		const n = 20000
		sizes := []int{100, 100, 100, 100, 100, 100, 100, 100}
		batches := [2][]exo.Batch{batchesOf('a', n, sizes...), batchesOf('b', n, sizes...)}
		s := nextS0()
		run := liveSession(t, ends, s, 2000, batches, 900, true)
		checkLive(t, ends, run, s, batches, 900)
		carried := run.carried[0] + run.carried[1]
		t.Logf("token ring of 2 hosts, %s XDP, %s, 8 x 100-byte records per batch: %d hops in %v (%.0f hops/s), %d batches carried (%.0f records/s, %.1f%% of the hops)",
			mode, topo, run.hops, run.elapsed, float64(run.hops)/run.elapsed.Seconds(), carried,
			8*float64(carried)/run.elapsed.Seconds(), 100*float64(carried)/float64(run.hops))
	})
}

func fmtRates(r []float64) string {
	s := ""
	for i, v := range r {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.0f", v)
	}
	return s
}
