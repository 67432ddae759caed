//go:build linux

package xdp

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/exo"
)

// TestDeliveryMeasure measures the two ways the frames the program passes
// reach user space, side by side in one run, on a veth pair between two
// namespaces (a sends, b receives with the program attached), directly
// and through a Linux bridge as in the lab: AF_PACKET (XDP_PASS,
// broadcast.PacketConn, recvmmsg through the Go poller, as the daemon
// reads today) and AF_XDP (XDP_REDIRECT to an XSKConn: the Go poller,
// ppoll(2), and busy polls of 10 and 100 us), each with the program
// attached in generic and in native mode. It runs only with
// EXO_XDP_MEASURE=1 (a few minutes); EXO_XDP_FRAMES, EXO_XDP_SAMPLES,
// EXO_XDP_ROUNDS and EXO_XDP_TOPOLOGY change the flood length, the latency
// samples, the rounds and the topologies (defaults 300000, 20000, 3 and
// "direct,bridge"). docs/xdp.md section 4 has the figures.
//
// Frames: every frame is a sealed in-order ACCEPT (n = 2, h = 1, senders
// 0 and 1 alternating, both ids on a's MAC in the roster, one 64-byte
// record), so the program runs its whole check (codec, group, tag, MAC,
// pointers) and moves its pointers on each.
//
//   - flood: a sends frames back to back from one thread; b reads
//     batches of up to 64. rx rate = frames received / (last - first
//     receive time); lost = sent - received (socket queue or ring full).
//     On a 2-CPU machine the sender is the bottleneck: its thread also
//     runs the receive path in the kernel.
//   - queued: a sends 2000 frames while b does not read (nobody waits, so
//     no wake-ups), then b reads them back to back: the sender thread's
//     CPU per frame (sending, plus b's kernel receive path: veth, XDP,
//     the copy into the UMEM or the skb onto the socket queue) and b's
//     time per frame (its receive capacity in user space).
//   - latency: one frame at a time; the payload carries the send time
//     (same host clock; taken before sealing, so ~0.2 us of sealing is
//     included); b records receive time - send time; a waits for the
//     frame to be read, then 50 us, so that b is blocked again (or still
//     spinning, with busy poll) when the next one comes.
//   - CPU: the receiver's is the process's (getrusage RUSAGE_SELF) less
//     the sender thread's (RUSAGE_THREAD; locked to its thread), per frame
//     received: the receive path in user space, Go runtime included. The
//     sender thread's CPU per frame includes the kernel's receive path on
//     b (veth, XDP, the copy into the socket), which runs in the sender's
//     softirq on this machine.
func TestDeliveryMeasure(t *testing.T) {
	if os.Getenv("EXO_XDP_MEASURE") == "" {
		t.Skip("delivery measurement: set EXO_XDP_MEASURE=1 to run it (see docs/xdp.md)")
	}
	frames := envInt(t, "EXO_XDP_FRAMES", 300000)
	samples := envInt(t, "EXO_XDP_SAMPLES", 20000)
	rounds := envInt(t, "EXO_XDP_ROUNDS", 3)
	topos := strings.Split(os.Getenv("EXO_XDP_TOPOLOGY"), ",")
	if topos[0] == "" {
		topos = []string{"direct", "bridge"}
	}
	for _, topo := range topos {
		switch topo {
		case "direct", "bridge":
		default:
			t.Fatalf("EXO_XDP_TOPOLOGY: %q is neither direct nor bridge", topo)
		}
		t.Run(topo, func(t *testing.T) { measureTopology(t, topo, frames, samples, rounds) })
	}
}

func measureTopology(t *testing.T, topo string, frames, samples, rounds int) {
	p := loadOrSkip(t, false)
	var pair *vethPair
	if topo == "bridge" {
		pair = newBridgedPair(t)
	} else {
		pair = newVethPair(t, 1)
	}
	setKey(t, p, benchKey)
	if err := p.SetRoster([]net.HardwareAddr{vethMACA, vethMACA}); err != nil {
		t.Fatal(err)
	}
	tx := listenIn(t, pair.A, broadcast.Options{})
	defer tx.Close()

	var configs []deliveryConfig
	for _, m := range []Mode{ModeGeneric, ModeNative} {
		configs = append(configs,
			deliveryConfig{m, "AF_PACKET", 0, false},
			deliveryConfig{m, "AF_XDP", 0, false},
			deliveryConfig{m, "AF_XDP", 0, true},
			deliveryConfig{m, "AF_XDP", 10 * time.Microsecond, false},
			deliveryConfig{m, "AF_XDP", 100 * time.Microsecond, false})
	}
	res := make([][]deliveryResult, len(configs))
	seq := uint64(2)
	for r := range rounds {
		for j := range configs {
			i := (j + r) % len(configs) // rotate the order from round to round
			c := configs[i]
			d := measureDelivery(t, p, pair, tx, c, &seq, frames, samples)
			t.Logf("round %d %s: %s", r+1, c, d)
			res[i] = append(res[i], d)
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%s veth pair: median of %d rounds (min-max); %d flood frames, %d latency samples, n=2 sealed in-order ACCEPT frames, 99-byte Exo frames\n", topo, rounds, frames, samples)
	sb.WriteString("| attach | delivery | flood rx (kframes/s) | lost | flood rx CPU/frame (ns) | flood tx CPU/frame (ns) | queued: tx+kernel CPU/frame (ns) | queued: rx ns/frame | latency p50 (us) | p99 (us) | rx CPU/frame, one at a time (ns) |\n")
	sb.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, c := range configs {
		col := func(f func(deliveryResult) float64, scale float64, prec int) string {
			var v []float64
			for _, d := range res[i] {
				v = append(v, f(d)/scale)
			}
			slices.Sort(v)
			m := v[len(v)/2]
			if len(v) == 1 {
				return strconv.FormatFloat(m, 'f', prec, 64)
			}
			return fmt.Sprintf("%s (%s-%s)", strconv.FormatFloat(m, 'f', prec, 64),
				strconv.FormatFloat(v[0], 'f', prec, 64), strconv.FormatFloat(v[len(v)-1], 'f', prec, 64))
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.mode, c.delivery(),
			col(func(d deliveryResult) float64 { return d.rxRate }, 1000, 0),
			col(func(d deliveryResult) float64 { return float64(d.lost) }, 1, 0),
			col(func(d deliveryResult) float64 { return d.rxCPU }, 1, 0),
			col(func(d deliveryResult) float64 { return d.txCPU }, 1, 0),
			col(func(d deliveryResult) float64 { return d.drainTx }, 1, 0),
			col(func(d deliveryResult) float64 { return d.drain }, 1, 0),
			col(func(d deliveryResult) float64 { return float64(d.p50) }, 1000, 1),
			col(func(d deliveryResult) float64 { return float64(d.p99) }, 1000, 1),
			col(func(d deliveryResult) float64 { return d.latCPU }, 1, 0))
	}
	t.Log(sb.String())
}

type deliveryConfig struct {
	mode  Mode
	path  string // "AF_PACKET" or "AF_XDP"
	busy  time.Duration
	ppoll bool
}

func (c deliveryConfig) delivery() string {
	s := c.path
	if c.ppoll {
		s += ", ppoll"
	} else if c.path == "AF_XDP" {
		s += ", Go poller"
	}
	if c.busy > 0 {
		s += fmt.Sprintf(", busy poll %v", c.busy)
	}
	return s
}

func (c deliveryConfig) String() string { return c.mode.String() + " " + c.delivery() }

type deliveryResult struct {
	sent, got, lost int
	rxRate          float64 // frames/s
	txRate          float64
	rxCPU, txCPU    float64 // ns per frame received
	p50, p99        time.Duration
	latCPU          float64 // receiver ns per frame in the latency run
	drain           float64 // ns per frame reading frames already queued
	drainTx         float64 // sender thread CPU per frame, nobody waiting: send + the kernel's receive path
	drainLost       int
	notAccept       int // frames the program did not accept (GAP after a loss)
	preXDP          int // frames lost before the program ran
}

func (d deliveryResult) String() string {
	return fmt.Sprintf("flood: sent %d at %.0f/s, received %d at %.0f/s (lost %d), rx CPU %.0f ns/frame, tx CPU %.0f ns/frame; drain: tx CPU %.0f ns/frame, rx %.0f ns/frame (lost %d); latency p50 %v p99 %v, rx CPU %.0f ns/frame; lost before XDP %d, not ACCEPT %d",
		d.sent, d.txRate, d.got, d.rxRate, d.lost, d.rxCPU, d.txCPU, d.drainTx, d.drain, d.drainLost, d.p50, d.p99, d.latCPU, d.preXDP, d.notAccept)
}

func envInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// floodFrames builds the in-order frames from seq on: sender seq%2,
// history [the other one], one 64-byte record whose first 8 bytes are the
// send time.
type floodFrames struct {
	b    []byte
	base time.Time
}

const tsOff = exo.HeaderLen + 1 + exo.RecordLenSize // the record's first byte (h = 1)

func newFloodFrames(tb testing.TB, base time.Time) *floodFrames {
	rec, err := exo.AppendRecord(nil, make([]byte, 64))
	if err != nil {
		tb.Fatal(err)
	}
	f := exo.Frame{Type: exo.FrameData, Group: 1, Count: 1, History: []uint8{1}, Payload: rec}
	b, err := f.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return &floodFrames{b: b, base: base}
}

// at returns frame seq, stamped now.
func (f *floodFrames) at(seq uint64) []byte {
	b := f.b
	binary.BigEndian.PutUint64(b[exo.OffSeq:], seq)
	b[exo.OffSender] = byte(seq % 2)
	b[exo.OffHistory] = byte((seq + 1) % 2)
	binary.BigEndian.PutUint64(b[tsOff:], uint64(time.Since(f.base)))
	_ = exo.Seal(b, benchKey)
	return b
}

// stateAt is the n=2 state that accepts frame seq next.
func stateAt(seq uint64) exo.Pointers {
	st := exo.NewPointers(1, 2, 1<<20)
	st.Append, st.Agreed = seq, seq-1
	st.History[0] = byte((seq + 1) % 2)
	return st
}

// receiver is the receiving side of one configuration.
type receiver struct {
	read  func(ms []broadcast.Message, vs []Verdict) (int, error)
	dl    func(time.Time) error
	close func() error
}

func measureDelivery(t *testing.T, p *Program, pair *vethPair, tx *broadcast.PacketConn, c deliveryConfig, seq *uint64, frames, samples int) deliveryResult {
	t.Helper()
	att := attachIn(t, pair.B, p, c.mode)
	defer att.Close()
	var rx receiver
	if c.path == "AF_XDP" {
		x := xskIn(t, pair.B, p, XSKOptions{BusyPoll: c.busy, Ppoll: c.ppoll})
		rx = receiver{read: x.ReadFramesVerdicts, dl: x.SetReadDeadline, close: x.Close}
	} else {
		pc := listenIn(t, pair.B, broadcast.Options{ReadBuffer: 8 << 20}) // as the daemon
		rx = receiver{read: func(ms []broadcast.Message, _ []Verdict) (int, error) { return pc.ReadFrames(ms) }, dl: pc.SetReadDeadline, close: pc.Close}
	}
	defer rx.close()
	var d deliveryResult
	base := time.Now()
	ff := newFloodFrames(t, base)
	ms := make([]broadcast.Message, broadcast.MaxBatch)
	vs := make([]Verdict, broadcast.MaxBatch)
	for i := range ms {
		ms[i].Buf = make([]byte, 1600)
		ms[i].Src = make(net.HardwareAddr, 6)
	}

	// Flood.
	if err := p.SetState(stateAt(*seq)); err != nil {
		t.Fatal(err)
	}
	if err := p.ResetCounters(); err != nil {
		t.Fatal(err)
	}
	var sendDone atomic.Bool
	txc := make(chan [2]time.Duration, 1) // sender CPU, send duration
	self0 := rusage(unix.RUSAGE_SELF)
	first := *seq
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c0, t0 := rusage(unix.RUSAGE_THREAD), time.Now()
		for i := range uint64(frames) {
			if err := tx.WriteFrame(ff.at(first + i)); err != nil {
				t.Error(err)
				break
			}
		}
		el := time.Since(t0)
		txc <- [2]time.Duration{rusage(unix.RUSAGE_THREAD) - c0, el}
		sendDone.Store(true)
	}()
	*seq += uint64(frames)
	var tFirst, tLast time.Time
	for d.got < frames {
		if err := rx.dl(time.Now().Add(300 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := rx.read(ms, vs)
		if err != nil {
			if sendDone.Load() {
				break // the rest was lost
			}
			continue
		}
		now := time.Now()
		if d.got == 0 {
			tFirst = now
		}
		tLast = now
		if c.path == "AF_XDP" {
			for _, v := range vs[:n] {
				if v.Reason != exo.ReasonAccept {
					d.notAccept++
				}
			}
		}
		d.got += n
	}
	tc := <-txc
	self := rusage(unix.RUSAGE_SELF) - self0
	d.sent = frames
	d.lost = frames - d.got
	d.txRate = float64(frames) / tc[1].Seconds()
	if el := tLast.Sub(tFirst); el > 0 {
		d.rxRate = float64(d.got-1) / el.Seconds()
	}
	d.txCPU = float64(tc[0]) / float64(frames)
	d.rxCPU = float64(self-tc[0]) / math.Max(1, float64(d.got))
	// Frames lost before the program (native veth: its ring of 256
	// frames overflows when its NAPI poll falls behind, e.g. to
	// ksoftirqd) make the later ones GAP: passed, not ACCEPT.
	cnt, _ := p.Counters()
	var seen uint64
	for _, n := range cnt {
		seen += n
	}
	d.preXDP = frames - int(seen)
	if c.path == "AF_PACKET" {
		d.notAccept = int(seen - cnt[exo.ReasonAccept])
	}

	// Drain: batches of drainBatch frames queued while b does not read,
	// then read back to back: b's own cost per frame, without wake-ups.
	const drainBatch = 2000
	var drainTime, drainTx time.Duration
	drained, sentDrain := 0, 0
	runtime.LockOSThread()
	for range max(1, frames/3/drainBatch) {
		c0 := rusage(unix.RUSAGE_THREAD)
		for range drainBatch {
			if err := tx.WriteFrame(ff.at(*seq)); err != nil {
				t.Fatal(err)
			}
			*seq++
		}
		drainTx += rusage(unix.RUSAGE_THREAD) - c0
		sentDrain += drainBatch
		time.Sleep(5 * time.Millisecond) // native veth: let NAPI finish
		t0, got := time.Now(), 0
		for got < drainBatch {
			if err := rx.dl(time.Now().Add(100 * time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			n, err := rx.read(ms, vs)
			if err != nil {
				break
			}
			got += n
		}
		if got < drainBatch { // lost: do not count the wait for them
			d.drainLost += drainBatch - got
			continue
		}
		drainTime += time.Since(t0)
		drained += got
	}
	runtime.UnlockOSThread()
	d.drain = float64(drainTime) / math.Max(1, float64(drained))
	d.drainTx = float64(drainTx) / float64(sentDrain)

	// Latency: one frame at a time.
	if err := p.SetState(stateAt(*seq)); err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	lat := make([]time.Duration, 0, samples)
	done := make(chan time.Duration, 1)
	first = *seq
	self0 = rusage(unix.RUSAGE_SELF)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c0 := rusage(unix.RUSAGE_THREAD)
		for i := range samples {
			if err := tx.WriteFrame(ff.at(first + uint64(i))); err != nil {
				t.Error(err)
				break
			}
			give := time.Now().Add(time.Second)
			for read.Load() <= int64(i) && time.Now().Before(give) {
			}
			for end := time.Now().Add(50 * time.Microsecond); time.Now().Before(end); {
			}
		}
		done <- rusage(unix.RUSAGE_THREAD) - c0
	}()
	*seq += uint64(samples)
	for len(lat) < samples {
		if err := rx.dl(time.Now().Add(2 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := rx.read(ms, vs)
		now := time.Since(base)
		if err != nil {
			t.Errorf("%s: latency run: %d of %d frames: %v", c, len(lat), samples, err)
			break
		}
		for _, m := range ms[:n] {
			lat = append(lat, now-time.Duration(binary.BigEndian.Uint64(m.Buf[tsOff:])))
		}
		read.Add(int64(n))
	}
	txl := <-done
	self = rusage(unix.RUSAGE_SELF) - self0
	d.latCPU = float64(self-txl) / math.Max(1, float64(len(lat)))
	if len(lat) > 0 {
		slices.Sort(lat)
		d.p50 = lat[len(lat)/2]
		d.p99 = lat[len(lat)*99/100]
	}
	return d
}

// rusage returns the user + system CPU time of who (RUSAGE_SELF or
// RUSAGE_THREAD).
func rusage(who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
