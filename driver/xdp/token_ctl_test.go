//go:build linux

package xdp

// Token's control operations, queue, ring consumer and Wait, through
// BPF_PROG_TEST_RUN.

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/exo-rack/exo/exo"
)

// rawState reads the whole state value (lost and the MAC included).
func (h *tokHarness) rawState() exoExoState {
	h.tb.Helper()
	var v exoExoState
	if err := h.p.objs.ExoStateMap.LookupWithFlags(uint32(0), &v, ebpf.LookupLock); err != nil {
		h.tb.Fatal(err)
	}
	return v
}

// predRun runs the predecessor's next frame for the program's state and
// returns the action.
func (h *tokHarness) predRun() Action {
	h.tb.Helper()
	st, err := h.tok.Read()
	if err != nil {
		h.tb.Fatal(err)
	}
	act, _ := h.run(testSrcMAC, seal(predFrame(st, 0, nil), tokKeys))
	return act
}

func TestTokenControl(t *testing.T) {
	h := newTokHarness(t, LoadOptions{})
	st, err := h.tok.Read()
	if err != nil {
		t.Fatal(err)
	}
	if st.Kseq != 0 || st.On {
		t.Fatalf("fresh state %+v", st.Tx)
	}
	if err := h.p.SetKeys(tokKeys); err != nil {
		t.Fatal(err)
	}

	// ARM writes every field but kseq (and lost), and the MAC.
	e := tokBase()
	e.Kseq = 12345 // not written
	h.tok.testReset(0, e.QHead)
	if ok, err := h.tok.Arm(e); ok || err != nil {
		t.Fatalf("arm with kseq 12345 against 0: %v %v, want false", ok, err)
	}
	if got, _ := h.tok.Read(); got != st {
		t.Fatalf("a failed arm wrote the state: %+v", got.Tx)
	}
	e.Kseq = 0
	if ok, err := h.tok.Arm(e); !ok || err != nil {
		t.Fatalf("arm: %v %v", ok, err)
	}
	if got, _ := h.tok.Read(); got != e {
		t.Fatalf("after arm\n\tgot  %s %+v\n\twant %s %+v", StateString(got.Pointers), got.Tx, StateString(e.Pointers), e.Tx)
	}
	if raw := h.rawState(); !bytes.Equal(raw.Mac[:], tokMAC) || raw.Lost != 0 {
		t.Fatalf("raw state: mac %x lost %d", raw.Mac, raw.Lost)
	}

	// A record between the control plane's read and its arm: the
	// compare-and-set fails until the record is stepped.
	if act := h.predRun(); act != ActionTX {
		t.Fatalf("pred's frame: %s, want XDP_TX", act)
	}
	e2 := e
	e2.IdleRun = 30
	if ok, err := h.tok.Arm(e2); ok || err != nil {
		t.Fatalf("arm with a stale kseq: %v %v, want false", ok, err)
	}
	recs := h.records()
	if len(recs) != 1 || recs[0].Kseq != 0 || !recs[0].Sent {
		t.Fatalf("records %+v", recs)
	}
	cur, _ := h.tok.Read()
	e2 = cur
	e2.IdleRun = 30
	if ok, err := h.tok.Arm(e2); !ok || err != nil {
		t.Fatalf("arm after stepping: %v %v", ok, err)
	}
	if got, _ := h.tok.Read(); got != e2 || got.Kseq != 1 {
		t.Fatalf("after the second arm: %+v", got.Tx)
	}

	// HALT: the program stops sending; its frames are HALTED records.
	hs, err := h.tok.Halt()
	if err != nil || !hs.Halted || hs.Kseq != 1 {
		t.Fatalf("halt: %+v %v", hs.Tx, err)
	}
	if act := h.predRun(); act != ActionDrop {
		t.Fatalf("pred's frame while halted: %s, want XDP_DROP", act)
	}
	recs = h.records()
	if len(recs) != 1 || recs[0].Reason != exo.ReasonHalted || recs[0].Armed || recs[0].Halt || recs[0].Kseq != 1 {
		t.Fatalf("record while halted: %+v", recs)
	}

	// Arm refuses a qhead the queue's tail is not within 64 of.
	bad := hs
	bad.Kseq = 2
	bad.QHead = hs.QHead + 1
	if ok, err := h.tok.Arm(bad); ok || err == nil {
		t.Fatalf("arm with qhead beyond the tail: %v %v", ok, err)
	}
	bad.QHead = hs.QHead - 65
	if ok, err := h.tok.Arm(bad); ok || err == nil {
		t.Fatalf("arm with qhead 65 below the tail: %v %v", ok, err)
	}

	// An unknown operation is refused.
	if _, err := h.p.ctl(9, 0, nil); err == nil {
		t.Fatal("operation 9 accepted")
	}

	// Lost: no arm, Halt and Read say ErrLost with the state.
	raw := h.rawState()
	raw.Lost = 1
	if err := h.p.objs.ExoStateMap.Update(uint32(0), &raw, ebpf.UpdateLock); err != nil {
		t.Fatal(err)
	}
	if ok, err := h.tok.Arm(hs); ok || !errors.Is(err, ErrLost) {
		t.Fatalf("arm when lost: %v %v", ok, err)
	}
	if s, err := h.tok.Read(); !errors.Is(err, ErrLost) || s.Kseq != 2 {
		t.Fatalf("read when lost: %+v %v", s.Tx, err)
	}
	if _, err := h.tok.Halt(); !errors.Is(err, ErrLost) {
		t.Fatalf("halt when lost: %v", err)
	}

	// One handle at a time; a closed one says so.
	if _, err := h.p.Token(tokMAC); err == nil {
		t.Fatal("a second handle opened")
	}
	h.tok.Close()
	if _, err := h.tok.Read(); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	t2, err := h.p.Token(tokMAC)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t2.Close()
}

// TestTokenModeFallback: with token mode on but exo_tok missing from the
// program array (a failed tail call), exo_xdp's receive-only path finds
// tx_on under its lock and drops the frame untouched (CounterMode).
func TestTokenModeFallback(t *testing.T) {
	h := newTokHarness(t, LoadOptions{})
	e := tokBase()
	h.set(e, nil, tokKeys)
	if err := h.p.objs.ExoProgs.Delete(uint32(0)); err != nil {
		t.Fatal(err)
	}
	if act := h.predRun(); act != ActionDrop {
		t.Fatalf("action %s, want XDP_DROP", act)
	}
	tc, _ := h.p.TokenCounters()
	if tc.Mode != 1 {
		t.Fatalf("counters %+v, want Mode 1", tc)
	}
	if got, _ := h.tok.Read(); got != e {
		t.Fatalf("state moved: %+v", got.Tx)
	}
	if n := len(h.records()); n != 0 {
		t.Fatalf("%d records", n)
	}
}

func TestTokenQueue(t *testing.T) {
	h := newTokHarness(t, LoadOptions{})
	e := tokBase()
	e.QHead = 60 // the slots wrap at 64
	h.set(e, nil, tokKeys)
	batch := func(i int) exo.Batch { return batchOf(i%50, 7) }
	for i := range QueueSlots {
		if ok, err := h.tok.Push(batch(i)); !ok || err != nil {
			t.Fatalf("push %d: %v %v", i, ok, err)
		}
	}
	if ok, err := h.tok.Push(batch(64)); ok || err != nil {
		t.Fatalf("push into a full queue: %v %v", ok, err)
	}
	if _, err := h.tok.Push(exo.Batch{Count: 1, Payload: make([]byte, SlotData+1)}); err == nil {
		t.Fatal("a batch over SlotData was pushed")
	}
	if _, err := h.tok.Reclaim(); !errors.Is(err, ErrNotHalted) {
		t.Fatalf("reclaim while armed: %v", err)
	}

	// The program takes the head; once its record is read, the slot is
	// free again.
	if act := h.predRun(); act != ActionTX {
		t.Fatalf("pred's frame: %s", act)
	}
	if ok, _ := h.tok.Push(batch(64)); ok {
		t.Fatal("pushed before the record showed the slot taken")
	}
	recs := h.records()
	if len(recs) != 1 || !recs[0].Popped || recs[0].QHead != 61 {
		t.Fatalf("records %+v", recs)
	}
	if q, tail := h.tok.Queue(); q != 61 || tail != 124 {
		t.Fatalf("queue %d..%d, want 61..124", q, tail)
	}
	if ok, err := h.tok.Push(batch(64)); !ok || err != nil {
		t.Fatalf("push after the record: %v %v", ok, err)
	}

	// Halted, the queue comes back in order and empties.
	if _, err := h.tok.Halt(); err != nil {
		t.Fatal(err)
	}
	got, err := h.tok.Reclaim()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != QueueSlots {
		t.Fatalf("reclaimed %d batches, want %d", len(got), QueueSlots)
	}
	for i, b := range got {
		w := batch(i + 1)
		if b.Count != w.Count || !bytes.Equal(b.Payload, w.Payload) {
			t.Fatalf("reclaimed batch %d differs", i)
		}
	}
	if q, tail := h.tok.Queue(); q != 61 || tail != 61 {
		t.Fatalf("after reclaim: queue %d..%d, want 61..61", q, tail)
	}
	if again, _ := h.tok.Reclaim(); len(again) != 0 {
		t.Fatalf("second reclaim: %d batches", len(again))
	}

	// Armed again, a new batch goes out from its slot (61 % 64).
	nb := batchOf(33, 44)
	if ok, err := h.tok.Push(nb); !ok || err != nil {
		t.Fatal(ok, err)
	}
	cur, _ := h.tok.Read()
	re := tokBase() // host 1's frame next again
	re.Kseq, re.QHead = cur.Kseq, cur.QHead
	if ok, err := h.tok.Arm(re); !ok || err != nil {
		t.Fatalf("arm: %v %v", ok, err)
	}
	st, _ := h.tok.Read()
	act, out := h.run(testSrcMAC, seal(predFrame(st, 0, nil), tokKeys))
	if act != ActionTX {
		t.Fatalf("action %s (state %+v, records %+v)", act, st.Tx, h.records())
	}
	var f exo.Frame
	if err := f.UnmarshalBinary(out[exo.EthHeaderLen:]); err != nil || f.Count != nb.Count || !bytes.Equal(f.Payload, nb.Payload) {
		t.Fatalf("frame sent: %v count %d payload %d bytes", err, f.Count, len(f.Payload))
	}
}

// TestTokenRingWrap writes many records of many sizes through a small
// ring (512 KiB): first without reading until the program refuses frames
// (RING_FULL: less than RingRoom free), then with the consumer behind by
// a varying amount, wrapping the ring many times; every record must come
// out once, whole, in kseq order (one CPU).
func TestTokenRingWrap(t *testing.T) {
	const ringSize = 512 << 10
	h := newTokHarness(t, LoadOptions{RingSize: ringSize})
	e := tokBase()
	e.Halted = true // every frame of the epoch is a HALTED record
	h.set(e, nil, tokKeys)
	base := predFrame(e, 0, nil)
	frameOf := func(k int) []byte {
		n := (k*7919)%3000 + k%7
		f := base
		f.Count, f.Payload = 1, payloadOf(n)
		return seal(f, tokKeys)
	}
	var sent [][]byte
	var ringFull uint64
	next := uint64(0) // the next kseq to read
	read := func(max int) int {
		t.Helper()
		n := 0
		_, err := h.tok.Records(func(r *Record) {
			if r.Kseq != e.Kseq+next || r.Reason != exo.ReasonHalted || !bytes.Equal(r.Frame, sent[next]) {
				t.Fatalf("record %d: kseq %d %s, %d bytes; want kseq %d, %d bytes", next, r.Kseq, r.Reason, len(r.Frame), e.Kseq+next, len(sent[next]))
			}
			next++
			n++
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.tok.Release(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	produce := func() bool {
		t.Helper()
		b := frameOf(len(sent))
		act, _ := h.run(testSrcMAC, b)
		if act != ActionDrop {
			t.Fatalf("action %s", act)
		}
		tc, _ := h.p.TokenCounters()
		if tc.RingFull != ringFull {
			ringFull = tc.RingFull
			return false
		}
		sent = append(sent, b)
		return true
	}
	// Fill without reading.
	for produce() {
	}
	var used int
	for _, b := range sent {
		used += (ringHdrLen + RecordHeaderLen + len(b) + 7) &^ 7
	}
	if free := ringSize - used; free >= RingRoom || free < RingRoom-(ringHdrLen+RecordHeaderLen+MaxFrame+7) {
		t.Errorf("RING_FULL with %d bytes free, want just under %d", free, RingRoom)
	}
	t.Logf("ring of %d bytes full after %d records (%d bytes, %d free)", ringSize, len(sent), used, ringSize-used)
	// A full ring drops only what it would record: a frame from a foreign
	// MAC and one of a stale epoch keep their verdicts (an attack on a
	// host whose control plane is behind is still counted as such).
	mac := func(i byte) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, i} }
	roster := []net.HardwareAddr{mac(0), mac(1), mac(2), mac(3), mac(4)}
	roster[e.Tx.Pred] = testSrcMAC
	if err := h.p.SetRoster(roster); err != nil {
		t.Fatal(err)
	}
	foreign0, _ := h.p.ForeignMACs()
	reasons0, _ := h.p.Counters()
	stale := base
	stale.Epoch--
	for _, in := range []struct {
		src   net.HardwareAddr
		frame []byte
	}{{mac(9), frameOf(0)}, {testSrcMAC, seal(stale, tokKeys)}} {
		if act, _ := h.run(in.src, in.frame); act != ActionDrop {
			t.Fatalf("action %s", act)
		}
	}
	foreign1, _ := h.p.ForeignMACs()
	reasons1, _ := h.p.Counters()
	if tc, _ := h.p.TokenCounters(); tc.RingFull != ringFull || foreign1 != foreign0+1 || reasons1[exo.ReasonStaleEpoch] != reasons0[exo.ReasonStaleEpoch]+1 {
		t.Fatalf("full ring: RING_FULL %d -> %d, FOREIGN_MAC %d -> %d, STALE_EPOCH %d -> %d; want the verdicts counted, not RING_FULL",
			ringFull, tc.RingFull, foreign0, foreign1, reasons0[exo.ReasonStaleEpoch], reasons1[exo.ReasonStaleEpoch])
	}
	if err := h.p.SetRoster(nil); err != nil {
		t.Fatal(err)
	}
	if n := read(0); n != len(sent) {
		t.Fatalf("read %d of %d", n, len(sent))
	}
	if got, _ := h.tok.Read(); got.Kseq != e.Kseq+uint64(len(sent)) {
		t.Fatalf("state kseq %d, want %d", got.Kseq, e.Kseq+uint64(len(sent)))
	}
	// Then the consumer behind by up to ~200 records, many times round.
	var total int
	for round := 0; total < 40*ringSize; round++ {
		for k := 0; k < 1+round%200; k++ {
			if !produce() {
				t.Fatalf("RING_FULL with the consumer %d records behind", len(sent)-int(next))
			}
			total += (ringHdrLen + RecordHeaderLen + len(sent[len(sent)-1]) + 7) &^ 7
		}
		read(0)
	}
	if int(next) != len(sent) {
		t.Fatalf("read %d of %d records", next, len(sent))
	}
	t.Logf("%d records, %d bytes through the ring: %.0f times round", len(sent), total, float64(total)/ringSize)
}

func TestTokenWait(t *testing.T) {
	h := newTokHarness(t, LoadOptions{})
	e := tokBase()
	e.Halted = true
	h.set(e, nil, tokKeys)
	frame := seal(predFrame(e, 0, nil), tokKeys)

	// Nothing to read: the deadline.
	start := time.Now()
	if err := h.tok.Wait(start.Add(50 * time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("wait: %v, want the deadline", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("waited %v for a 50 ms deadline", d)
	}

	// A record wakes a parked Wait, every time (the consumer caught up
	// before each: the kernel wakes it when a record lands at the
	// consumer position).
	var worst time.Duration
	for i := range 200 {
		done := make(chan error, 1)
		go func() { done <- h.tok.Wait(time.Now().Add(5 * time.Second)) }()
		if i%2 == 0 {
			time.Sleep(time.Millisecond) // let it park
		}
		t0 := time.Now()
		h.run(testSrcMAC, frame)
		if err := <-done; err != nil {
			t.Fatalf("wake-up %d: %v", i, err)
		}
		worst = max(worst, time.Since(t0))
		if n := len(h.records()); n != 1 {
			t.Fatalf("wake-up %d: %d records", i, n)
		}
	}
	t.Logf("200 wake-ups, the slowest %v after the record", worst)

	// Data already there: at once, even past the deadline.
	h.run(testSrcMAC, frame)
	if err := h.tok.Wait(time.Now().Add(-time.Second)); err != nil {
		t.Fatalf("wait with a record ready: %v", err)
	}
	h.records()

	// Close unblocks a Wait without a deadline.
	done := make(chan error, 1)
	go func() { done <- h.tok.Wait(time.Time{}) }()
	time.Sleep(20 * time.Millisecond)
	h.tok.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("wait after close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not unblock Wait")
	}
	if err := h.tok.Wait(time.Time{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("wait on a closed handle: %v", err)
	}
	if _, err := h.tok.Records(func(*Record) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("records on a closed handle: %v", err)
	}
}

// TestTokenWaitWakes checks what wakes Wait (exo_waiter): a record worth
// a wake-up (an agreement that may include records), not one that agrees
// empty passes only; with SetUrgentOnly, only a record the control plane
// must act on (the slow path, a halt), unless it is turned off while Wait
// sleeps.
func TestTokenWaitWakes(t *testing.T) {
	h := newTokHarness(t, LoadOptions{})
	// wait parks a Wait, runs fn, and returns what Wait returned.
	wait := func(d time.Duration, fn func()) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- h.tok.Wait(time.Now().Add(d)) }()
		time.Sleep(20 * time.Millisecond) // let it park
		fn()
		select {
		case err := <-done:
			return err
		case <-time.After(d + 5*time.Second):
			t.Fatal("Wait did not return after its deadline")
			return nil
		}
	}
	pass := func() {
		t.Helper()
		if act := h.predRun(); act != ActionTX {
			t.Fatalf("the predecessor's frame: %v, want TX", act)
		}
	}
	// from runs the next frame, sent by host x (not the predecessor).
	from := func(x uint8) {
		t.Helper()
		st, err := h.tok.Read()
		if err != nil {
			t.Fatal(err)
		}
		f := predFrame(st, 0, nil)
		f.Sender = x
		if act, _ := h.run(testSrcMAC, seal(f, tokKeys)); act != ActionDrop {
			t.Fatalf("the frame of host %d: %v, want DROP (accepted, nothing sent)", x, act)
		}
	}

	// Armed anew, the payloads of the last entries are unknown: the
	// first agreement is worth a wake-up.
	h.set(tokBase(), nil, tokKeys)
	if err := wait(5*time.Second, pass); err != nil {
		t.Fatalf("an agreement: %v, want a wake-up", err)
	}
	h.records()
	// Two rotations later (hosts 3, 4, 0, then the predecessor 1, which
	// this host, 2, answers) the entries agreed are known empty passes.
	for range 2 {
		for _, x := range []uint8{3, 4, 0} {
			from(x)
		}
		pass()
	}
	h.records()
	if err := wait(200*time.Millisecond, func() { from(3) }); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("empty passes agreed: %v, want no wake-up (the deadline)", err)
	}
	if n := len(h.records()); n != 1 {
		t.Fatalf("%d records after the pass, want 1", n)
	}

	// Urgent only: an agreement does not wake it...
	h.tok.SetUrgentOnly(true)
	h.set(tokBase(), nil, tokKeys)
	if err := wait(200*time.Millisecond, pass); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("urgent only, an agreement: %v, want no wake-up", err)
	}
	if rs := h.records(); len(rs) != 1 || !rs[0].Armed || rs[0].Halt {
		t.Fatalf("records %+v, want one armed record", rs)
	}
	// ...a slow-path record does.
	if _, err := h.tok.Halt(); err != nil {
		t.Fatal(err)
	}
	if err := wait(5*time.Second, func() { h.predRun() }); err != nil {
		t.Fatalf("urgent only, the slow path: %v, want a wake-up", err)
	}
	if rs := h.records(); len(rs) != 1 || rs[0].Armed {
		t.Fatalf("records %+v, want one record of the halted program", rs)
	}
	// Turned off while Wait sleeps: the next agreement wakes it.
	h.set(tokBase(), nil, tokKeys)
	if err := wait(5*time.Second, func() {
		h.tok.SetUrgentOnly(false)
		pass()
	}); err != nil {
		t.Fatalf("urgent only turned off during the wait, an agreement: %v, want a wake-up", err)
	}
	h.records()
}

// TestTokenCloseInCallback: a Records callback may call the other
// methods and even Close; the mappings stay until Records returns.
func TestTokenCloseInCallback(t *testing.T) {
	h := newTokHarness(t, LoadOptions{})
	e := tokBase()
	e.Halted = true
	h.set(e, nil, tokKeys)
	frame := seal(predFrame(e, 0, nil), tokKeys)
	for range 3 {
		h.run(testSrcMAC, frame)
	}
	seen := 0
	n, err := h.tok.Records(func(r *Record) {
		seen++
		if seen == 1 {
			if ok, err := h.tok.Push(batchOf(3)); !ok || err != nil {
				t.Errorf("push in the callback: %v %v", ok, err)
			}
			if err := h.tok.Close(); err != nil {
				t.Errorf("close in the callback: %v", err)
			}
			if _, err := h.tok.Read(); !errors.Is(err, ErrClosed) {
				t.Errorf("read after close, in the callback: %v", err)
			}
		}
		if len(r.Frame) != len(frame) || !bytes.Equal(r.Frame, frame) {
			t.Errorf("record %d read after Close: frame changed", seen)
		}
	})
	if err != nil || n != 3 {
		t.Fatalf("records: %d %v", n, err)
	}
	if _, err := h.tok.Records(func(*Record) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("records after close: %v", err)
	}
	if h.tok.cons != nil || h.tok.prod != nil {
		t.Fatal("still mapped after the last method returned")
	}
}
