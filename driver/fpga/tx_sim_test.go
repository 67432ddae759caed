//go:build fpgasim && cgo

package fpga

// The transmit side of the simulated engine (register map 1.3, token
// mode) against the Go rule, exo.Engine.Step: every transmit case of the
// golden vectors (format 5), then a rack's traffic in lockstep with the
// rule (the frame sent byte for byte, the record's flags, the state), the
// control operations (Arm's compare-and-set, Push, Reclaim, the MACs), and
// the speculation of the next frame's tag.

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/goldvec"
)

// setEngine loads s into the engine, halted while it is written: the
// pointers, the transmit side (Kseq included), the queue emptied (tail =
// qhead) and filled with q (the slots the engine has), then halted as s
// says.
func setEngine(tb testing.TB, e *Engine, s exo.Engine, q []exo.Batch) {
	tb.Helper()
	p := s.Pointers
	p.Halted = true
	if err := e.SetState(p); err != nil {
		tb.Fatal(err)
	}
	if err := e.SetTx(s.Tx); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.Reclaim(); err != nil {
		tb.Fatal(err)
	}
	for _, b := range q[:min(len(q), e.Info().Tx.QueueSlots)] {
		if ok, err := e.Push(b); err != nil || !ok {
			tb.Fatalf("push %d bytes: %v %v", len(b.Payload), ok, err)
		}
	}
	if !s.Halted {
		if err := e.Release(); err != nil {
			tb.Fatal(err)
		}
	}
}

// turnOf is the Go rule's turn as the engine's sideband says it.
func turnOf(v Verdict) goldvec.Turn {
	t := goldvec.Turn{Record: v.Token.Record, Popped: v.Token.Popped, Handoff: v.Token.Handoff, Halt: v.Token.Halt}
	if v.Token.Sent {
		t.Sent = []byte{} // the bytes are compared apart
	}
	return t
}

// ethHeader is the Ethernet header of the frames the engine sends from
// src (broadcast, EtherType 0x88B5).
func ethHeader(src net.HardwareAddr) []byte {
	return EthernetFrame(src, nil)
}

// TestSimTxVectors runs every transmit case of the golden vectors
// (format 5, suite token and the token streams) through the engine: the
// case's state and queue loaded (the state set again at each step, so a
// stream is a list of cases here; the streams' chaining is the rule's
// business, checked by internal/goldvec), the frame in, then the verdict,
// the record's sideband (record, sent, popped, hand-off, halt, kseq,
// qhead), the frame on the TX port byte for byte (this engine's Ethernet
// header, then the case's frame) and the whole state after.
func TestSimTxVectors(t *testing.T) {
	vs := loadJSONVectors(t)
	if len(vs.TxCases) == 0 {
		t.Fatalf("%s: no transmit case (format 5 has them)", vs.Format)
	}
	e, s := openSim(t)
	src := net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x07}
	if err := e.SetTxMACs(src, net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	hdr := ethHeader(src)
	var ran, skipped, sent, handoffs, halts, records int
	var latMin, latMax int
	logged := 0
	fail := func(c *goldvec.Case, format string, args ...any) {
		if logged++; logged <= 20 {
			t.Errorf("%s: "+format, append([]any{c.Where}, args...)...)
		}
	}
	for i := range vs.TxCases {
		c := &vs.TxCases[i]
		if int(c.In.Hosts) > e.Info().MaxHosts {
			skipped++
			continue
		}
		tooLong := false
		for _, b := range c.Queue[:min(len(c.Queue), e.Info().Tx.QueueSlots)] {
			tooLong = tooLong || len(b.Payload) > e.Info().Tx.SlotBytes()
		}
		if tooLong {
			// A batch longer than this engine's slot: it cannot be
			// queued here (the rule hands such a batch off anyway).
			skipped++
			continue
		}
		ran++
		if err := e.SetKeys(vs.Keys(c)); err != nil {
			t.Fatal(err)
		}
		setEngine(t, e, exo.Engine{Pointers: c.In, Tx: c.TxIn}, c.Queue)
		if _, err := s.Settle(0); err != nil {
			t.Fatal(err)
		}
		v, err := e.Process(EthernetFrame(testSrcMAC, c.Frame))
		if err != nil {
			t.Fatalf("%s: %v", c.Where, err)
		}
		if v.Reason != c.Reason {
			fail(c, "verdict %s, want %s", v.Reason, c.Reason)
		}
		want := c.Turn
		if want.Sent != nil {
			want.Sent = []byte{}
		}
		if got := turnOf(v); got.Record != want.Record || (got.Sent == nil) != (want.Sent == nil) || got.Popped != want.Popped ||
			got.Handoff != want.Handoff || got.Halt != want.Halt {
			fail(c, "turn %+v, want %+v", got, want)
		}
		if c.Turn.Sent != nil {
			sent++
			if w := append(append([]byte(nil), hdr...), c.Turn.Sent...); !bytes.Equal(v.TX, w) {
				fail(c, "sent\n\t%x\nwant\n\t%x", v.TX, w)
			}
			if latMin == 0 || v.TxLatency < latMin {
				latMin = v.TxLatency
			}
			latMax = max(latMax, v.TxLatency)
		} else if v.TX != nil {
			fail(c, "sent %x, want nothing", v.TX)
		}
		if c.Turn.Record {
			records++
			if v.Token.Kseq != c.TxIn.Kseq || v.Token.QHead != c.TxOut.QHead || v.Token.Armed != !c.In.Halted {
				fail(c, "record kseq %d qhead %d armed %v, want %d %d %v", v.Token.Kseq, v.Token.QHead, v.Token.Armed,
					c.TxIn.Kseq, c.TxOut.QHead, !c.In.Halted)
			}
		}
		if c.Turn.Handoff {
			handoffs++
		}
		if c.Turn.Halt {
			halts++
		}
		st, err := e.TokenState()
		if err != nil {
			t.Fatal(err)
		}
		if st.Pointers != c.Out || st.Tx != c.TxOut {
			fail(c, "state after %s %+v\n\twant %s %+v", goldvec.StateString(st.Pointers), st.Tx, goldvec.StateString(c.Out), c.TxOut)
		}
	}
	c, err := e.TxCounters()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d of %d transmit cases run (%d skipped: hosts > %d or a head batch longer than a slot): %d records, %d frames sent, %d hand-offs, %d halts; tlast -> first TX beat %d..%d cycles; tx counters %+v",
		vs.Format, ran, len(vs.TxCases), skipped, e.Info().MaxHosts, records, sent, handoffs, halts, latMin, latMax, c)
	if ran == 0 || sent == 0 {
		t.Fatal("no case sent a frame")
	}
}

// rackSim is a rack of n hosts in Go (the senders of the frames the
// engine hears) around one engine at position me, whose Go twin (twin)
// runs exo.Engine.Step on the same frames.
type rackSim struct {
	tb   testing.TB
	e    *Engine
	s    *Sim
	key  [exo.TagKeyLen]byte
	twin exo.Engine
	q    []exo.Batch // the twin's queue
	n    int
	hdr  []byte
	macs []net.HardwareAddr
	rng  *rand.Rand
}

// step hands the engine one frame of sender from (at the twin's append
// pointer: the next entry of the rack's log) and checks it against the
// twin; it returns the verdict.
func (r *rackSim) step(f *exo.Frame) Verdict {
	r.tb.Helper()
	b, err := f.AppendBinary(nil)
	if err != nil {
		r.tb.Fatal(err)
	}
	var head *exo.Batch
	if len(r.q) > 0 {
		head = &r.q[0]
	}
	kseq, armed := r.twin.Kseq, !r.twin.Halted
	reason, turn := r.twin.Step(f, head, r.key)
	if turn.Popped {
		r.q = r.q[1:]
	}
	v, err := r.e.Process(EthernetFrame(r.macs[f.Sender], b))
	if err != nil {
		r.tb.Fatal(err)
	}
	if v.Reason != reason || v.Token.Record != turn.Record || v.Token.Sent != turn.Sent || v.Token.Popped != turn.Popped ||
		v.Token.Handoff != turn.Handoff || v.Token.Halt != turn.Halt {
		r.tb.Fatalf("seq %d from %d: engine %s %+v, the rule %s %+v", f.Seq, f.Sender, v.Reason, v.Token, reason, turn)
	}
	if turn.Record && (v.Token.Kseq != kseq || v.Token.QHead != r.twin.QHead || v.Token.Armed != armed) {
		r.tb.Fatalf("seq %d: record %+v, the rule's kseq %d qhead %d armed %v", f.Seq, v.Token, kseq, r.twin.QHead, armed)
	}
	if turn.Sent {
		want, err := turn.Frame.AppendBinary(append([]byte(nil), r.hdr...))
		if err != nil {
			r.tb.Fatal(err)
		}
		if !bytes.Equal(v.TX, want) {
			r.tb.Fatalf("seq %d: the engine sent\n\t%x\nthe rule\n\t%x", f.Seq, v.TX, want)
		}
	} else if v.TX != nil {
		r.tb.Fatalf("seq %d: the engine sent %x, the rule nothing", f.Seq, v.TX)
	}
	return v
}

// next returns the frame host from sends at the twin's append pointer,
// with count records of payload, sealed.
func (r *rackSim) next(from uint8, recs int) *exo.Frame {
	var payload []byte
	for range recs {
		rec := make([]byte, 1+r.rng.IntN(200))
		for i := range rec {
			rec[i] = byte(r.rng.Uint32())
		}
		payload, _ = exo.AppendRecord(payload, rec)
	}
	f := r.twin.Next(from, uint16(recs), 0, payload)
	f.History = append([]uint8(nil), f.History...)
	f.Seal(r.key)
	return &f
}

// TestSimTxLockstep: a 5-host rack's log as the engine at position 2
// hears it (the other four hosts' frames built in Go, in token order, with
// random batches), batches queued at random through the CSR window: every
// frame's verdict, record and answer agree with exo.Engine.Step on the
// same state, byte for byte; the engine's state after equals the rule's.
// With the clock run between frames (Sim.Settle: the hardware's clock
// never stops) every token finds the next frame's tag ready: no
// speculation miss, and the first TX beat leaves with the verdict.
func TestSimTxLockstep(t *testing.T) {
	e, s := openSim(t)
	const n, me = 5, 2
	r := &rackSim{tb: t, e: e, s: s, key: goldvec.TestKey(), n: n, rng: rand.New(rand.NewPCG(1, 2))}
	for i := range n {
		r.macs = append(r.macs, net.HardwareAddr{0x02, 0xe0, 0, 0, 0, byte(i + 1)})
	}
	if err := e.SetRoster(r.macs); err != nil {
		t.Fatal(err)
	}
	if err := e.SetTxMACs(r.macs[me], net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	r.hdr = ethHeader(r.macs[me])
	r.twin = exo.Engine{Pointers: exo.NewPointers(7, n, 1024), Tx: exo.Tx{On: true, Me: me, Pred: me - 1, IdleRun: 4 * n}}
	setEngine(t, e, r.twin, nil)
	if err := e.ClearCounters(); err != nil {
		t.Fatal(err)
	}
	sent, popped, lat := 0, 0, map[int]int{}
	for round := 0; round < 400; round++ {
		// Batches for this host, at random, as the control plane pushes
		// them between frames.
		if len(r.q) < e.Info().Tx.QueueSlots && r.rng.IntN(3) == 0 {
			f := r.next(me, 1+r.rng.IntN(6))
			b := exo.Batch{Count: f.Count, Payload: f.Payload}
			if ok, err := e.Push(b); err != nil || !ok {
				t.Fatalf("push: %v %v", ok, err)
			}
			r.q = append(r.q, b)
		}
		if _, err := s.Settle(0); err != nil {
			t.Fatal(err)
		}
		// The next sender in token order after the last entry.
		from := uint8((int(r.twin.History[0]) + 1) % n)
		if r.twin.Append == 0 {
			from = 0
		}
		if from == me {
			t.Fatalf("round %d: the engine did not answer its predecessor's frame", round)
		}
		v := r.step(r.next(from, r.rng.IntN(3)))
		if v.Token.Handoff {
			// An idle run: the control plane sends the pass; here the
			// test does (the twin and the engine accept it as this
			// host's entry: its own frame never comes back in), and
			// arms again.
			f := r.next(me, 0)
			r.twin.Accept(me, f.Seq)
			r.twin.EmptyRun++
			r.twin.Halted = false
			ok, err := e.Arm(r.twin)
			if err != nil || !ok {
				t.Fatalf("arm after a hand-off: %v %v", ok, err)
			}
			continue
		}
		if v.Token.Sent {
			sent++
			lat[v.TxLatency]++
			if v.Token.Popped {
				popped++
			}
		}
	}
	st, err := e.TokenState()
	if err != nil {
		t.Fatal(err)
	}
	if st != r.twin {
		t.Errorf("state after: engine %s %+v, the rule %s %+v", goldvec.StateString(st.Pointers), st.Tx, goldvec.StateString(r.twin.Pointers), r.twin.Tx)
	}
	c, err := e.TxCounters()
	if err != nil {
		t.Fatal(err)
	}
	if int(c.Sent) != sent || int(c.Sent-c.Empty) != popped || c.SpecMiss != 0 || c.BusyDrop != 0 || c.PushFull != 0 {
		t.Errorf("tx counters %+v: want %d sent, %d with a batch, no speculation miss", c, sent, popped)
	}
	if sent < 50 || popped < 10 {
		t.Errorf("%d frames sent, %d with a batch: the test drove too little", sent, popped)
	}
	t.Logf("400 frames of 4 hosts: %d answered (%d with a batch), %d hand-offs; tlast -> first TX beat (cycles: frames) %v; tx counters %+v",
		sent, popped, c.Handoff, lat, c)
}

// TestSimTxSpeculationOff: with tx_ctrl.spec 0 the engine hashes its
// frame after the verdict: the same frame, later (tx_spec_miss counts
// every one, tx_turnaround the wait).
func TestSimTxSpeculationOff(t *testing.T) {
	e, s := openSim(t)
	const n, me = 3, 1
	r := &rackSim{tb: t, e: e, s: s, key: goldvec.TestKey(), n: n, rng: rand.New(rand.NewPCG(3, 4))}
	for i := range n {
		r.macs = append(r.macs, net.HardwareAddr{0x02, 0xe0, 0, 0, 0, byte(i + 1)})
	}
	if err := e.SetTxMACs(r.macs[me], net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	r.hdr = ethHeader(r.macs[me])
	r.twin = exo.Engine{Pointers: exo.NewPointers(7, n, 1024), Tx: exo.Tx{On: true, Me: me, Pred: 0, IdleRun: exo.NoIdleRun}}
	setEngine(t, e, r.twin, nil)
	if err := e.SetSpeculation(false); err != nil {
		t.Fatal(err)
	}
	var lats []int
	for range 4 {
		f := r.next(me, 3)
		b := exo.Batch{Count: f.Count, Payload: f.Payload}
		if ok, err := e.Push(b); err != nil || !ok {
			t.Fatal(ok, err)
		}
		r.q = append(r.q, b)
		v := r.step(r.next(0, 1)) // the token: sent
		if !v.Token.Sent {
			t.Fatalf("no frame sent: %+v", v.Token)
		}
		lats = append(lats, v.TxLatency)
		r.step(r.next(2, 0))
	}
	c, err := e.TxCounters()
	if err != nil {
		t.Fatal(err)
	}
	if c.SpecMiss != 4 || c.TurnaroundMax == 0 {
		t.Errorf("speculation off: tx counters %+v, want 4 misses and a turnaround", c)
	}
	t.Logf("speculation off: tlast -> first TX beat %v cycles; tx counters %+v", lats, c)
}

// TestSimTxControl: the control operations on the registers. Arm is a
// compare-and-set on tx_kseq (a wrong Kseq writes nothing); the queue
// takes QUEUE_SLOTS batches and refuses one more without counting a
// refused push (Push looks first); Reclaim empties it; the MACs read back;
// a batch longer than a slot is an error; Halt stops sending.
func TestSimTxControl(t *testing.T) {
	e, _ := openSim(t)
	info := e.Info()
	if info.Tx.QueueSlots < 2 || info.Tx.SlotWords < 1 {
		t.Fatalf("tx caps %+v", info.Tx)
	}
	t.Logf("%s", info)
	src, dst := net.HardwareAddr{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}, net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x07}
	if err := e.SetTxMACs(src, dst); err != nil {
		t.Fatal(err)
	}
	if gs, gd, err := e.TxMACs(); err != nil || gs.String() != src.String() || gd.String() != dst.String() {
		t.Errorf("tx macs %s %s %v, want %s %s", gs, gd, err, src, dst)
	}
	s := exo.Engine{Pointers: exo.NewPointers(7, 5, 64), Tx: exo.Tx{On: true, Me: 3, Pred: 2, IdleRun: 20, Kseq: 9, QHead: 41}}
	setEngine(t, e, s, nil)
	armed := s
	armed.Append, armed.Agreed, armed.Kseq = 100, 98, 8
	if ok, err := e.Arm(armed); err != nil || ok {
		t.Fatalf("arm with kseq 8 on an engine at 9: %v %v", ok, err)
	}
	if st, _ := e.TokenState(); st.Append != 0 || !st.Halted || st.Kseq != 9 {
		t.Errorf("a refused arm wrote %+v", st)
	}
	armed.Kseq = 9
	if ok, err := e.Arm(armed); err != nil || !ok {
		t.Fatalf("arm with kseq 9: %v %v", ok, err)
	}
	if st, _ := e.TokenState(); st != armed {
		t.Errorf("armed state %+v, want %+v", st, armed)
	}
	if err := e.Halt(); err != nil {
		t.Fatal(err)
	}
	for i := range info.Tx.QueueSlots {
		if ok, err := e.Push(exo.Batch{Count: 1, Payload: []byte{0, 1, byte(i)}}); err != nil || !ok {
			t.Fatalf("push %d: %v %v", i, ok, err)
		}
	}
	if ok, err := e.Push(exo.Batch{Count: 1, Payload: []byte{0, 1, 9}}); err != nil || ok {
		t.Fatalf("push into a full queue: %v %v", ok, err)
	}
	if st, err := e.TxStatus(); err != nil || !st.Full {
		t.Errorf("tx status %+v %v, want full", st, err)
	}
	head, tail, err := e.QueuePointers()
	if err != nil || head != 41 || tail != 41+uint64(info.Tx.QueueSlots) {
		t.Errorf("queue %d..%d %v", head, tail, err)
	}
	if n, err := e.Reclaim(); err != nil || n != info.Tx.QueueSlots {
		t.Errorf("reclaim: %d %v", n, err)
	}
	if head, tail, _ := e.QueuePointers(); head != tail {
		t.Errorf("after reclaim: queue %d..%d", head, tail)
	}
	if _, err := e.Push(exo.Batch{Count: 1, Payload: make([]byte, info.Tx.SlotBytes()+1)}); err == nil {
		t.Error("a batch longer than a slot: no error")
	}
	if c, err := e.TxCounters(); err != nil || c.PushFull != 0 {
		t.Errorf("tx counters %+v %v: a push refused by Push itself counts nothing", c, err)
	}
}

// TestSimTxBackToBack: frames one after the other in one run
// (ProcessBatch, padded to the Ethernet minimum, an inter-frame gap of 3
// cycles) while the engine answers every second one: each answer is
// collected with its verdict, the last one waited for, and each is the
// rule's. With 3 hosts, a token comes two frames after the engine's own
// answer, as on a wire where the other hosts answer in turn: the answer
// has left by then (no tx_busy_drop), and the next tag is ready (no
// speculation miss).
func TestSimTxBackToBack(t *testing.T) {
	e, s := openSim(t)
	const n, me = 3, 2
	r := &rackSim{tb: t, e: e, s: s, key: goldvec.TestKey(), n: n, rng: rand.New(rand.NewPCG(5, 6))}
	for i := range n {
		r.macs = append(r.macs, net.HardwareAddr{0x02, 0xe0, 0, 0, 0, byte(i + 1)})
	}
	if err := e.SetTxMACs(r.macs[me], net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	r.hdr = ethHeader(r.macs[me])
	r.twin = exo.Engine{Pointers: exo.NewPointers(7, n, 1024), Tx: exo.Tx{On: true, Me: me, Pred: 1, IdleRun: exo.NoIdleRun}}
	setEngine(t, e, r.twin, nil)
	// Frames of hosts 0 and 1 in turn, host 2's answers taken as given
	// (a rack in which host 2 answered: the twin accepts its frames).
	var frames [][]byte
	var want []exo.Turn
	for range 12 {
		for _, from := range []uint8{0, 1} {
			f := r.next(from, 0)
			b, _ := f.AppendBinary(nil)
			b = append(b, make([]byte, exo.MinEthFrame-exo.EthHeaderLen-len(b))...)
			frames = append(frames, EthernetFrame(r.macs[from], b))
			_, turn := r.twin.Step(f, nil, r.key)
			want = append(want, turn)
		}
	}
	vs, err := s.ProcessBatch(frames, 3)
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	for i, v := range vs {
		if v.Token.Sent != want[i].Sent {
			t.Fatalf("frame %d: sent %v, the rule %v", i, v.Token.Sent, want[i].Sent)
		}
		if v.Token.Sent {
			sent++
			w, _ := want[i].Frame.AppendBinary(append([]byte(nil), r.hdr...))
			if !bytes.Equal(v.TX, w) {
				t.Fatalf("frame %d: sent %x, the rule %x", i, v.TX, w)
			}
		}
	}
	if sent != 12 {
		t.Errorf("%d answers, want 12", sent)
	}
	if c, err := e.TxCounters(); err != nil || c.Sent != 12 || c.SpecMiss != 0 || c.BusyDrop != 0 {
		t.Errorf("tx counters %+v %v: want 12 sent, no speculation miss, no busy drop", c, err)
	}
}

// TestSimTxBusyDrop: frames fed back to back without a wire's causality
// (unpadded, no gap, a token two frames after the engine's own answer,
// whose tag was not ready: it left late) find the TX port busy: the
// engine does not answer, halts (the record says so) and counts a busy
// drop. The Go rule would have answered; on a wire the token answers the
// engine's own frame, which has left by then (docs/token.md section 7).
func TestSimTxBusyDrop(t *testing.T) {
	e, s := openSim(t)
	const n, me = 3, 2
	r := &rackSim{tb: t, e: e, s: s, key: goldvec.TestKey(), n: n, rng: rand.New(rand.NewPCG(7, 8))}
	for i := range n {
		r.macs = append(r.macs, net.HardwareAddr{0x02, 0xe0, 0, 0, 0, byte(i + 1)})
	}
	r.twin = exo.Engine{Pointers: exo.NewPointers(7, n, 1024), Tx: exo.Tx{On: true, Me: me, Pred: 1, IdleRun: exo.NoIdleRun}}
	setEngine(t, e, r.twin, nil)
	var frames [][]byte
	for _, from := range []uint8{0, 1, 0, 1} {
		f := r.next(from, 0)
		b, _ := f.AppendBinary(nil)
		frames = append(frames, EthernetFrame(r.macs[from], b))
		r.twin.Step(f, nil, r.key)
	}
	vs, err := s.ProcessBatch(frames, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !vs[1].Token.Sent || vs[3].Token.Sent || !vs[3].Token.Halt || !vs[3].Token.Record || vs[3].Token.Handoff {
		t.Fatalf("answers %+v / %+v: want the first token answered, the second halted unanswered", vs[1].Token, vs[3].Token)
	}
	c, err := e.TxCounters()
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.State()
	if err != nil {
		t.Fatal(err)
	}
	if c.BusyDrop != 1 || c.SpecMiss != 1 || !st.Halted {
		t.Errorf("tx counters %+v, halted %v: want one busy drop after one speculation miss, halted", c, st.Halted)
	}
	t.Logf("back to back, unpadded: the first answer waited %d cycles for its tag, the next token came while it left: %+v", c.TurnaroundLast, c)
}
