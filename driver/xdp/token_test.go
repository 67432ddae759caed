//go:build linux

package xdp

// Token mode through BPF_PROG_TEST_RUN: every case is a state (armed with
// exo_ctl's ARM), a transmit queue (pushed), a key ring and a received
// frame, run through exo_xdp (which tail-calls exo_tok), and compared with
// exo.Engine.Step: the action, the bytes of the frame sent, the state
// after (exo_ctl's READ), the record in the ring and the counters.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/exo-rack/exo/exo"
)

var (
	tokMAC = net.HardwareAddr{0x02, 0x70, 0x6b, 0x00, 0x00, 0x01}
	tokDst = net.HardwareAddr{0x01, 0x00, 0x5e, 0x45, 0x58, 0x4f}
)

// tokHarness runs token-mode cases on one loaded program.
type tokHarness struct {
	tb   testing.TB
	p    *Program
	tok  *Token
	room int // the largest packet (Ethernet header included) a test run's buffer holds
}

func newTokHarness(tb testing.TB, o LoadOptions) *tokHarness {
	tb.Helper()
	return newTokHarnessBench(tb, false, o)
}

// newTokHarnessBench is newTokHarness on the benchmark variant if bench.
func newTokHarnessBench(tb testing.TB, bench bool, o LoadOptions) *tokHarness {
	tb.Helper()
	p := loadOrSkipWith(tb, bench, o)
	tok, err := p.Token(tokMAC)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tok.Close() })
	return &tokHarness{tb: tb, p: p, tok: tok, room: testRunRoom(tb, p)}
}

// testRunRoom finds the linear part of a test run's buffer (a page less
// the XDP headroom and the skb_shared_info tailroom; longer test data
// goes to fragments the program does not see): the most a frame grown by
// bpf_xdp_adjust_tail can reach there. The receive-only path decodes a
// frame whose payload ends in the linear part (then BAD_TAG: no key is
// loaded yet) and calls one that does not BAD_PAYLOAD.
func testRunRoom(tb testing.TB, p *Program) int {
	tb.Helper()
	if err := p.SetState(exo.NewPointers(1, 1, 16)); err != nil {
		tb.Fatal(err)
	}
	decodes := func(l int) bool {
		payload := payloadOf(l - exo.EthHeaderLen - exo.HeaderLen - exo.RecordLenSize)
		f := exo.Frame{Type: exo.FrameData, Group: 1, Count: 1, Payload: payload}
		b, err := f.AppendBinary(nil)
		if err != nil {
			tb.Fatal(err)
		}
		v, err := p.Run(EthernetFrame(testSrcMAC, b))
		if err != nil {
			tb.Fatal(err)
		}
		return v.Reason != exo.ReasonBadPayload
	}
	lo, hi := 100, exo.EthHeaderLen+MaxFrame+1 // lo decodes, hi does not
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; decodes(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// testReset sets the Token's bookkeeping (the program halted): records
// below kseq read, the queue empty at qhead.
func (t *Token) testReset(kseq, qhead uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kseq, t.qhead, t.tail = kseq, qhead, qhead
	clear(t.early)
	atomic.StoreUint64(t.tailPos, qhead)
}

// recCopy is a Record with its bytes copied out of the ring.
func recCopy(r *Record) Record {
	c := *r
	c.Src = append(net.HardwareAddr(nil), r.Src...)
	c.Frame = append([]byte(nil), r.Frame...)
	return c
}

// records reads every record now in the ring.
func (h *tokHarness) records() []Record {
	h.tb.Helper()
	var out []Record
	if _, err := h.tok.Records(func(r *Record) { out = append(out, recCopy(r)) }); err != nil {
		h.tb.Fatal(err)
	}
	if err := h.tok.Release(); err != nil {
		h.tb.Fatal(err)
	}
	return out
}

// set makes e (Kseq and QHead included) the program's state, with queue
// waiting and keys in the key slots: halt, read what is left in the ring,
// write the state halted with e's Kseq (a raw map update: ARM does not
// write kseq), reset the queue at e.QHead, push, then ARM (a
// compare-and-set on e.Kseq), which writes the rest of e.
func (h *tokHarness) set(e exo.Engine, queue []exo.Batch, keys exo.KeyRing) {
	h.tb.Helper()
	if _, err := h.tok.Halt(); err != nil {
		h.tb.Fatal(err)
	}
	h.records()
	raw := stateOf(&e, h.tok.mac, 0)
	raw.Halted = 1
	if err := h.p.objs.ExoStateMap.Update(uint32(0), &raw, ebpf.UpdateLock); err != nil {
		h.tb.Fatal(err)
	}
	h.tok.testReset(e.Kseq, e.QHead)
	for i, b := range queue {
		ok, err := h.tok.Push(b)
		if err != nil || !ok {
			h.tb.Fatalf("push batch %d: %v %v", i, ok, err)
		}
	}
	armed, err := h.tok.Arm(e)
	if err != nil || !armed {
		h.tb.Fatalf("arm: %v %v", armed, err)
	}
	if err := h.p.SetKeys(keys); err != nil {
		h.tb.Fatal(err)
	}
}

// run runs the received frame (after an Ethernet header from src to
// tokDst) through exo_xdp; the output buffer leaves room to grow.
func (h *tokHarness) run(src net.HardwareAddr, frame []byte) (Action, []byte) {
	h.tb.Helper()
	in := EthernetFrame(src, frame)
	copy(in[0:6], tokDst)
	opts := ebpf.RunOptions{Data: in, DataOut: make([]byte, 4096+256)}
	ret, err := h.p.objs.ExoXdp.Run(&opts)
	if err != nil {
		h.tb.Fatalf("run: %v", err)
	}
	return Action(ret), opts.DataOut
}

// tokExpect is what a case must do, from exo.Engine.Step.
type tokExpect struct {
	reason  exo.Reason
	stepped bool // passed the codec, the group and the tag: Step ran
	after   exo.Engine
	turn    exo.Turn
	noroom  bool   // Step sent, but the frame does not fit the buffer: a hand-off instead
	sent    []byte // the frame sent, encoded (turn.Frame), no padding
	action  Action
}

// tokModel runs the case through the Go rule: the codec, the group, the
// tag (exo.KeyRing.Verify), then exo.Engine.Step with the queue's head and
// the key of slot Phase. A frame Step sends that would not fit room bytes
// (Ethernet header and padding to 60 included) is a hand-off instead (the
// program's rule when the buffer cannot grow): Step again with no head
// and IdleRun 0.
func tokModel(e exo.Engine, frame []byte, queue []exo.Batch, keys exo.KeyRing, room int) tokExpect {
	x := tokExpect{after: e, action: ActionDrop}
	var f exo.Frame
	if err := f.UnmarshalBinary(frame); err != nil {
		x.reason = exo.ReasonOf(err)
		return x
	}
	if f.Group != e.Group {
		x.reason = exo.ReasonBadGroup
		return x
	}
	if !keys.Verify(&f) {
		x.reason = exo.ReasonBadTag
		return x
	}
	x.stepped = true
	var head *exo.Batch
	if len(queue) > 0 {
		head = &queue[0]
	}
	key := keys.Key[e.Phase&1]
	x.reason, x.turn = x.after.Step(&f, head, key)
	if x.turn.Sent {
		enc, err := x.turn.Frame.AppendBinary(nil)
		if err != nil {
			panic(err)
		}
		if max(exo.MinEthFrame, exo.EthHeaderLen+len(enc)) > room || len(enc) > MaxFrame {
			x.noroom = true
			x.after = e
			idle := x.after.IdleRun
			x.after.IdleRun = 0
			x.reason, x.turn = x.after.Step(&f, nil, key)
			x.after.IdleRun = idle
		} else {
			x.sent = enc
		}
	}
	switch {
	case !e.On && (x.reason == exo.ReasonAccept || x.reason.SlowPath()):
		x.action = ActionPass
	case x.turn.Sent:
		x.action = ActionTX
	}
	return x
}

// tokCase is one case of the rule.
type tokCase struct {
	name  string
	e     exo.Engine
	queue []exo.Batch
	keys  exo.KeyRing
	src   net.HardwareAddr
	frame []byte
	// roster: SetRoster before the run (nil: none).
	roster []net.HardwareAddr
	// foreign: the frame is dropped for its source MAC (the model does
	// not know the roster).
	foreign bool
}

// tokStats counts what the cases covered.
type tokStats struct {
	cases, sent, popped, pass, handoff, noroom, halt, record, drop, rxPath, phase1, grown int
	reasons                                                                               [exo.NumReasons]int
}

func (s *tokStats) String() string {
	var rs []string
	for r, n := range s.reasons {
		if n > 0 {
			rs = append(rs, fmt.Sprintf("%s %d", exo.Reason(r), n))
		}
	}
	return fmt.Sprintf("%d cases: %d sent (%d popped, %d empty passes, %d phase 1, %d grown), %d hand-offs (%d no room), %d halts, %d records, %d not recorded, %d with token mode off; %v",
		s.cases, s.sent, s.popped, s.pass, s.phase1, s.grown, s.handoff, s.noroom, s.halt, s.record, s.drop, s.rxPath, rs)
}

// check sets c's state and queue, runs c and compares everything with
// the model; it reports whether the case agreed.
func (h *tokHarness) check(c *tokCase, st *tokStats) bool {
	h.tb.Helper()
	h.set(c.e, c.queue, c.keys)
	if err := h.p.SetRoster(c.roster); err != nil {
		h.tb.Fatal(err)
	}
	x := tokModel(c.e, c.frame, c.queue, c.keys, h.room)
	if c.foreign {
		x = tokExpect{reason: exo.ReasonBadSender, after: c.e, action: ActionDrop}
	}
	ok := h.runCase(c, &x, st)
	if err := h.p.SetRoster(nil); err != nil {
		h.tb.Fatal(err)
	}
	return ok
}

// runCase runs c on the program as it is (state, queue, keys and roster
// set) and compares the action, the frame sent, the state after, the
// record and the counters with x.
func (h *tokHarness) runCase(c *tokCase, x *tokExpect, st *tokStats) bool {
	tb := h.tb
	tb.Helper()
	before, err := h.p.counters()
	if err != nil {
		tb.Fatal(err)
	}
	src := c.src
	if src == nil {
		src = testSrcMAC
	}
	act, out := h.run(src, c.frame)
	got, err := h.tok.Read()
	if err != nil {
		tb.Fatal(err)
	}
	recs := h.records()
	after, err := h.p.counters()
	if err != nil {
		tb.Fatal(err)
	}
	ok := true
	fail := func(format string, args ...any) {
		tb.Helper()
		tb.Errorf("%s: "+format, append([]any{c.name}, args...)...)
		ok = false
	}

	if act != x.action {
		fail("action %s, want %s (reason %s, record %v sent %v popped %v handoff %v halt %v, noroom %v)", act, x.action, x.reason,
			x.turn.Record, x.turn.Sent, x.turn.Popped, x.turn.Handoff, x.turn.Halt, x.noroom)
	}
	if x.turn.Sent && act == ActionTX {
		want := make([]byte, max(exo.MinEthFrame, exo.EthHeaderLen+len(x.sent)))
		copy(want[0:6], tokDst)
		copy(want[6:12], tokMAC)
		binary.BigEndian.PutUint16(want[12:], exo.EtherType)
		copy(want[exo.EthHeaderLen:], x.sent)
		if !bytes.Equal(out, want) {
			i := 0
			for i < min(len(out), len(want)) && out[i] == want[i] {
				i++
			}
			fail("frame sent: %d bytes, want %d, first difference at byte %d\n\tgot  %x\n\twant %x", len(out), len(want), i,
				out[:min(len(out), 96)], want[:min(len(want), 96)])
		}
		if len(want) > exo.EthHeaderLen+len(c.frame) {
			st.grown++
		}
	}
	if !c.e.On && c.e.Pointers == x.after.Pointers && x.stepped {
		// The receive-only path: the verdict is in the metadata.
		if m, mok := ParseMeta(out); !mok || m.Reason != x.reason {
			fail("token mode off: metadata %v %v, want %s", m, mok, x.reason)
		}
	}
	if got != x.after {
		fail("state after\n\tgot  %s %+v\n\twant %s %+v", StateString(got.Pointers), got.Tx, StateString(x.after.Pointers), x.after.Tx)
	}

	// The record.
	wantRec := c.e.On && x.turn.Record && !c.foreign
	switch {
	case !wantRec && len(recs) != 0:
		fail("%d records, want none: %+v", len(recs), recs[0])
	case wantRec && len(recs) != 1:
		fail("%d records, want 1", len(recs))
	case wantRec:
		r := recs[0]
		w := Record{Kseq: c.e.Kseq, QHead: x.after.QHead, Reason: x.reason, Armed: !c.e.Halted,
			Sent: x.turn.Sent, Popped: x.turn.Popped, Handoff: x.turn.Handoff, Halt: x.turn.Halt, Src: src, Frame: c.frame}
		if x.turn.Sent {
			w.TxTag = x.turn.Frame.Tag
		}
		if r.Kseq != w.Kseq || r.QHead != w.QHead || r.TxTag != w.TxTag || r.Reason != w.Reason ||
			r.Armed != w.Armed || r.Sent != w.Sent || r.Popped != w.Popped || r.Handoff != w.Handoff ||
			r.Halt != w.Halt || !bytes.Equal(r.Src, w.Src) || !bytes.Equal(r.Frame, w.Frame) {
			fail("record\n\tgot  %s\n\twant %s", recString(&r), recString(&w))
		}
	}

	// The counters: the verdict (or a foreign MAC), and token mode's.
	var want [numCounters]uint64
	switch {
	case c.foreign:
		want[CounterForeignMAC] = 1
	default:
		want[x.reason] = 1
	}
	if c.e.On && x.stepped {
		if x.turn.Sent {
			want[CounterTX] = 1
			if !x.turn.Popped {
				want[CounterTXEmpty] = 1
			}
		}
		if x.turn.Handoff {
			want[CounterHandoff] = 1
		}
		if x.noroom {
			want[CounterTXNoRoom] = 1
		}
	}
	for i := range want {
		if d := after[i] - before[i]; d != want[i] {
			fail("counter %s moved by %d, want %d", counterName(i), d, want[i])
		}
	}

	st.cases++
	st.reasons[x.reason]++
	switch {
	case !c.e.On:
		st.rxPath++
	case wantRec:
		st.record++
	default:
		st.drop++
	}
	if x.turn.Sent {
		st.sent++
		if x.turn.Popped {
			st.popped++
		} else {
			st.pass++
		}
		if c.e.Phase == 1 {
			st.phase1++
		}
	}
	if x.turn.Handoff {
		st.handoff++
	}
	if x.noroom {
		st.noroom++
	}
	if x.turn.Halt {
		st.halt++
	}
	return ok
}

// StateString is goldvec.StateString (kept here: that package is for
// the vectors).
func StateString(p exo.Pointers) string {
	return fmt.Sprintf("{group %d hosts %d epoch %d halted %v window %d append %d agreed %d epoch_start %d history %v}",
		p.Group, p.Hosts, p.Epoch, p.Halted, p.Window, p.Append, p.Agreed, p.EpochStart, p.Hist())
}

func recString(r *Record) string {
	return fmt.Sprintf("{kseq %d qhead %d tx_tag %016x %s armed %v sent %v popped %v handoff %v halt %v src %v frame %d bytes %x}",
		r.Kseq, r.QHead, r.TxTag, r.Reason, r.Armed, r.Sent, r.Popped, r.Handoff, r.Halt, r.Src, len(r.Frame), r.Frame[:min(len(r.Frame), 64)])
}

func counterName(i int) string {
	if i < exo.NumReasons {
		return exo.Reason(i).String()
	}
	return [...]string{"NOT_EXO", "UNCLASSIFIED", "NO_META", "FOREIGN_MAC", "RING_FULL", "LOST", "TX", "TX_EMPTY",
		"HANDOFF", "TX_NOROOM", "MODE", "TX_ERR"}[i-exo.NumReasons]
}

// The cases' keys: slot 0 tokKey0, slot 1 tokKey1.
var (
	tokKey0 = [exo.TagKeyLen]byte{0x70, 0x6b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	tokKey1 = [exo.TagKeyLen]byte{0x70, 0x6b, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	tokKeys = exo.KeyRing{Key: [2][exo.TagKeyLen]byte{tokKey0, tokKey1}, Valid: [2]bool{true, true}}
)

// records returns count records of the given sizes as a payload.
func payloadOf(sizes ...int) []byte {
	var p []byte
	for i, n := range sizes {
		r := make([]byte, n)
		for j := range r {
			r[j] = byte(i*31 + j)
		}
		var err error
		if p, err = exo.AppendRecord(p, r); err != nil {
			panic(err)
		}
	}
	return p
}

func batchOf(sizes ...int) exo.Batch {
	return exo.Batch{Count: uint16(len(sizes)), Payload: payloadOf(sizes...)}
}

// seal encodes f sealed under the slot its key phase names.
func seal(f exo.Frame, keys exo.KeyRing) []byte {
	b, err := f.AppendSealed(nil, keys.Key[exo.KeyPhaseOf(f.Flags)])
	if err != nil {
		panic(err)
	}
	return b
}

// tokBase is an n=5 state at append 101, this host 2 after host 1, with
// host 1's frame next: history [0 4] (h = 2).
func tokBase() exo.Engine {
	e := exo.Engine{Pointers: exo.NewPointers(7, 5, 1024)}
	e.Epoch = 3
	e.Append, e.Agreed, e.EpochStart = 101, 99, 0
	e.History[0], e.History[1] = 0, 4
	e.Tx = exo.Tx{On: true, Me: 2, Pred: 1, IdleRun: 20, Kseq: 1000, QHead: 40}
	return e
}

// predFrame is the frame of e.Pred at e.Append with e's history.
func predFrame(e exo.Engine, count uint16, payload []byte) exo.Frame {
	return exo.Frame{Type: exo.FrameData, Group: e.Group, Sender: e.Pred, Epoch: e.Epoch, Seq: e.Append,
		Count: count, History: append([]uint8(nil), e.Hist()...), Payload: payload}
}

// targetedCases are hand-built cases of each kind.
func targetedCases(room int) []tokCase {
	var cs []tokCase
	add := func(name string, e exo.Engine, queue []exo.Batch, f exo.Frame) {
		cs = append(cs, tokCase{name: name, e: e, queue: queue, keys: tokKeys, frame: seal(f, tokKeys)})
	}
	b := tokBase()
	empty := predFrame(b, 0, nil)
	add("batch", b, []exo.Batch{batchOf(5), batchOf(7, 9)}, empty)
	add("batch_40_records", b, []exo.Batch{batchOf(make([]int, 40)...)}, empty)
	add("pass", b, nil, empty)
	e := b
	e.EmptyRun = 18
	add("pass_18", e, nil, empty)
	e.EmptyRun = 19
	add("handoff_19", e, nil, empty)
	e.EmptyRun = 19
	add("batch_despite_idle", e, []exo.Batch{batchOf(3)}, empty)
	add("pred_with_records_resets_run", e, nil, predFrame(e, 1, payloadOf(4)))
	e = b
	e.IdleRun = 0
	add("idle_run_0", e, nil, empty)
	e.IdleRun = exo.NoIdleRun
	e.EmptyRun = math.MaxUint32 - 2
	add("no_idle_run_near_max", e, nil, empty)
	e.EmptyRun = math.MaxUint32
	add("no_idle_run_saturated", e, nil, empty)
	// Sizes: the largest slot, around the room of the test buffer, a
	// received frame larger than the frame sent, short frames.
	h := b.H()
	add("slot_full_4064", b, []exo.Batch{{Count: 1, Payload: payloadOf(SlotData - 2)}}, empty)
	fit := room - exo.EthHeaderLen - exo.HeaderLen - h
	add("fits_room_exactly", b, []exo.Batch{{Count: 1, Payload: payloadOf(fit - 2)}}, empty)
	add("room_plus_1", b, []exo.Batch{{Count: 1, Payload: payloadOf(fit - 1)}}, empty)
	add("large_received_short_sent", b, nil, predFrame(b, 1, payloadOf(1400)))
	add("large_received_larger_sent", b, []exo.Batch{batchOf(1500)}, predFrame(b, 1, payloadOf(1400)))
	for _, n := range []int{0, 1, 10, 11, 12, 13, 14, 15, 20} {
		add(fmt.Sprintf("sent_payload_%d", n), b, []exo.Batch{{Count: 1, Payload: payloadOf(n)[:n+2]}}, empty)
	}
	// Not the token.
	o := b
	o.Pred = 3
	add("other_sender", o, []exo.Batch{batchOf(5)}, empty)
	o = b
	o.Me = 0 // 0 is in f's history after it: [1 0]
	add("me_in_history", o, []exo.Batch{batchOf(5)}, empty)
	o.Me = 4 // 4 is f's oldest history id: leaves the history
	add("me_oldest_leaves", o, nil, empty)
	o = b
	o.Me = 1
	add("me_is_sender", o, nil, empty)
	// The slow path and the drops.
	g := empty
	g.Seq = b.Append + 3
	add("gap", b, []exo.Batch{batchOf(5)}, g)
	g.Seq = b.Append + b.Window + 1
	add("seq_too_far", b, nil, g)
	g = empty
	g.History = []uint8{4, 0}
	add("divergence_history", b, nil, g)
	g = empty
	g.Seq = b.Append - 1
	add("divergence_back", b, nil, g)
	g.Sender = 0
	add("duplicate", b, []exo.Batch{batchOf(5)}, g)
	g = empty
	g.Epoch = b.Epoch + 1
	add("future_epoch", b, nil, g)
	hb := b
	hb.Halted = true
	add("future_epoch_halted", hb, nil, g)
	add("halted", hb, []exo.Batch{batchOf(5)}, empty)
	g = empty
	g.Epoch = b.Epoch - 1
	add("stale_epoch", b, nil, g)
	g = empty
	g.Sender = 0
	add("sender_in_history", b, nil, g)
	g = empty
	g.Sender = 9
	add("bad_sender", b, nil, g)
	g = empty
	g.History = []uint8{0, 4, 3}
	add("bad_histlen", b, nil, g)
	g = empty
	g.History = []uint8{0, 9}
	add("bad_history_id", b, nil, g)
	// A frame of a later epoch that does not fit this roster is recorded
	// and halts (exo's laterRoster); of this epoch it is a drop.
	for _, later := range []uint32{0, 1} {
		g = empty
		g.Epoch += later
		g.Sender = 9
		add(fmt.Sprintf("bad_sender_later_%d", later), b, nil, g)
		g = empty
		g.Epoch += later
		g.History = []uint8{0, 4, 3}
		add(fmt.Sprintf("bad_histlen_later_%d", later), b, nil, g)
		g = empty
		g.Epoch += later
		g.History = []uint8{0, 9}
		add(fmt.Sprintf("bad_history_id_later_%d", later), b, nil, g)
	}
	g = empty
	g.Group = 8
	add("bad_group", b, nil, g)
	bad := seal(empty, tokKeys)
	bad[exo.OffTag+7] ^= 1
	cs = append(cs, tokCase{name: "bad_tag", e: b, keys: tokKeys, frame: bad})
	cs = append(cs, tokCase{name: "bad_version", e: b, keys: tokKeys, frame: append([]byte{2}, bad[1:]...)})
	cs = append(cs, tokCase{name: "malformed", e: b, keys: tokKeys, frame: bad[:20]})
	one := exo.KeyRing{Key: tokKeys.Key, Valid: [2]bool{true, false}}
	p1 := empty
	p1.Flags = exo.FlagKeyPhase
	cs = append(cs, tokCase{name: "phase1_slot1_empty", e: b, keys: one, frame: seal(p1, tokKeys)})
	// Key phases.
	ph := b
	ph.Phase = 1
	add("phase1_batch", ph, []exo.Batch{batchOf(5)}, empty)
	add("phase1_pass_phase1_received", ph, nil, p1)
	add("phase0_pass_phase1_received", b, nil, p1)
	rd := empty
	rd.Flags = exo.FlagReadmit | 3
	add("readmit_received", b, nil, rd)
	// Rack sizes and positions.
	for _, r := range []struct{ n, me, pred int }{{1, 0, 0}, {2, 1, 0}, {2, 0, 1}, {3, 2, 1}, {4, 3, 1}, {7, 4, 1}, {16, 0, 13}, {64, 10, 7}, {255, 100, 96}, {255, 0, 254}} {
		e := exo.Engine{Pointers: exo.NewPointers(0xabcd, r.n, 64)}
		e.Epoch = 0xdeadbeef
		e.Append, e.Agreed = 5000, 4990
		// The history before pred's frame: the positions before pred,
		// skipping none, newest first, not pred and not me where
		// possible.
		k := 0
		for id := r.pred - 1; k < e.H(); id-- {
			idm := (id + 2*r.n) % r.n
			e.History[k] = uint8(idm)
			k++
		}
		e.Tx = exo.Tx{On: true, Me: uint8(r.me), Pred: uint8(r.pred), IdleRun: 20, Kseq: 7, QHead: 63}
		add(fmt.Sprintf("n%d_me%d_pred%d_batch", r.n, r.me, r.pred), e, []exo.Batch{batchOf(8)}, predFrame(e, 0, nil))
		e.QHead = 64
		add(fmt.Sprintf("n%d_me%d_pred%d_pass", r.n, r.me, r.pred), e, nil, predFrame(e, 0, nil))
	}
	// Counters and sequence numbers at their limits.
	for _, v := range []uint64{1<<32 - 1, 1<<32 - 2, math.MaxUint64 - 1, math.MaxUint64, 0} {
		e := b
		e.Kseq, e.QHead = v, v
		add(fmt.Sprintf("kseq_qhead_%d", v), e, []exo.Batch{batchOf(2)}, empty)
	}
	for _, v := range []uint64{1<<32 - 2, 1<<32 - 1, math.MaxUint64 - 2, math.MaxUint64 - 1} {
		e := b
		e.Append, e.Agreed = v, v-2
		add(fmt.Sprintf("own_seq_%d", v+1), e, nil, predFrame(e, 0, nil))
	}
	// Agreement moved by both frames, and epoch_start.
	e = b
	e.Agreed = 90
	add("agree_both", e, nil, empty)
	for _, n := range []int{3, 5, 7} {
		e := exo.Engine{Pointers: exo.NewPointers(7, n, 1024)}
		h := e.H()
		e.EpochStart = 1000
		e.Append = 1000 + uint64(h) - 1
		e.Agreed = 1000
		for i := 0; i < h; i++ {
			e.History[i] = uint8((n - 2 - i + 2*n) % n)
		}
		e.Tx = exo.Tx{On: true, Me: uint8(n - 1), Pred: uint8(n - 2), IdleRun: 20}
		add(fmt.Sprintf("epoch_start_n%d", n), e, nil, predFrame(e, 0, nil))
	}
	e = b
	e.EpochStart = math.MaxUint64
	add("epoch_start_max", e, nil, empty)
	// After a view change: history all X.
	e = b
	e.ClearHistory()
	add("history_x", e, []exo.Batch{batchOf(1)}, predFrame(e, 0, nil))
	// Token mode off, every other field set: the receive-only path.
	e = b
	e.On = false
	add("off_accept", e, []exo.Batch{batchOf(5)}, empty)
	g = empty
	g.Seq += 2
	add("off_gap", e, nil, g)
	add("off_zero_tx", exo.Engine{Pointers: b.Pointers}, nil, empty)
	// The source MAC: padding after the frame and a foreign MAC.
	cs = append(cs, tokCase{name: "padded_received", e: b, keys: tokKeys, frame: append(seal(empty, tokKeys), make([]byte, 20)...)})
	roster := []net.HardwareAddr{{2, 0, 0, 0, 0, 0}, testSrcMAC, {2, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0, 3}, {2, 0, 0, 0, 0, 4}}
	cs = append(cs, tokCase{name: "roster_mac_ok", e: b, keys: tokKeys, frame: seal(empty, tokKeys), roster: roster, queue: []exo.Batch{batchOf(5)}})
	cs = append(cs, tokCase{name: "roster_mac_foreign", e: b, keys: tokKeys, frame: seal(empty, tokKeys), roster: roster,
		src: net.HardwareAddr{2, 9, 9, 9, 9, 9}, foreign: true, queue: []exo.Batch{batchOf(5)}})
	return cs
}

// TestTokenRule runs the targeted and the random cases through the program
// and requires every one to agree with exo.Engine.Step.
func TestTokenRule(t *testing.T) {
	h := newTokHarness(t, LoadOptions{})
	t.Logf("a test run's buffer holds %d bytes", h.room)
	var st tokStats
	bad := 0
	cases := targetedCases(h.room)
	rng := rand.New(rand.NewPCG(0x746f6b, 0x656e))
	nRandom := 3000
	if testing.Short() {
		nRandom = 300
	}
	for i := range nRandom {
		cases = append(cases, randomTokCase(rng, i))
	}
	for i := range cases {
		if !h.check(&cases[i], &st) {
			if bad++; bad > 20 {
				t.Fatal("too many disagreements")
			}
		}
	}
	t.Logf("%s", &st)
	if st.sent == 0 || st.popped == 0 || st.pass == 0 || st.handoff == 0 || st.noroom == 0 || st.halt == 0 || st.phase1 == 0 || st.grown == 0 || st.rxPath == 0 {
		t.Errorf("a kind of case is missing: %s", &st)
	}
	tc, err := h.p.TokenCounters()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RingFull != 0 || tc.Lost != 0 || tc.Mode != 0 || tc.TXErr != 0 {
		t.Errorf("token counters %+v", tc)
	}
}

// randomTokCase draws a state, a queue and a frame: mostly the next frame
// of a random sender (often pred), sometimes mutated.
func randomTokCase(rng *rand.Rand, i int) tokCase {
	ns := []int{1, 2, 3, 4, 5, 5, 5, 7, 9, 16, 33, 128, 255}
	n := ns[rng.IntN(len(ns))]
	e := exo.Engine{Pointers: exo.NewPointers(uint16(rng.IntN(3)), n, uint64(rng.IntN(2000)))}
	h := e.H()
	e.Epoch = uint32(rng.IntN(4))
	switch rng.IntN(8) {
	case 0:
		e.Append = math.MaxUint64 - uint64(rng.IntN(4))
	case 1:
		e.Append = 1<<32 - 2 + uint64(rng.IntN(4))
	default:
		e.Append = uint64(rng.IntN(100000))
	}
	e.Agreed = e.Append - uint64(rng.IntN(2*h+2))
	switch rng.IntN(5) {
	case 0:
		e.EpochStart = e.Append - uint64(rng.IntN(h+2))
	case 1:
		e.EpochStart = math.MaxUint64
	}
	perm := rng.Perm(n)
	for k := 0; k < h; k++ {
		e.History[k] = uint8(perm[k])
	}
	if rng.IntN(10) == 0 { // after a view change: X at the end
		for k := rng.IntN(h + 1); k < h; k++ {
			e.History[k] = exo.HistoryNone
		}
	}
	e.Halted = rng.IntN(12) == 0
	// The sender: one not in the history (perm[h:]), sometimes another.
	sender := uint8(perm[h+rng.IntN(n-h)])
	if rng.IntN(10) == 0 {
		sender = uint8(rng.IntN(n))
	}
	e.Tx = exo.Tx{On: rng.IntN(15) != 0, Phase: uint8(rng.IntN(2)), Kseq: rng.Uint64(), QHead: rng.Uint64()}
	e.Pred = sender
	if rng.IntN(5) == 0 {
		e.Pred = uint8(rng.IntN(n))
	}
	// me: not in the history after the frame (sender, history but the
	// oldest) mostly.
	after := append([]uint8{sender}, e.Hist()...)
	if h > 0 {
		after = after[:h]
	} else {
		after = nil
	}
	var free []uint8
	for id := 0; id < n; id++ {
		in := false
		for _, x := range after {
			if int(x) == id {
				in = true
			}
		}
		if !in {
			free = append(free, uint8(id))
		}
	}
	e.Me = uint8(rng.IntN(n))
	if len(free) > 0 && rng.IntN(5) != 0 {
		e.Me = free[rng.IntN(len(free))]
	}
	switch rng.IntN(6) {
	case 0:
		e.IdleRun = exo.NoIdleRun
	case 1:
		e.IdleRun = 0
	default:
		e.IdleRun = uint32(rng.IntN(30))
	}
	e.EmptyRun = uint32(rng.IntN(35))
	if rng.IntN(20) == 0 {
		e.EmptyRun = math.MaxUint32 - uint32(rng.IntN(3))
	}
	var queue []exo.Batch
	if rng.IntN(2) == 0 {
		for range 1 + rng.IntN(3) {
			var sizes []int
			total := 0
			limit := []int{30, 300, 1500, SlotData}[rng.IntN(4)]
			for k := rng.IntN(6); k > 0 || len(sizes) == 0; k-- {
				s := rng.IntN(limit)
				if total+2+s > SlotData {
					break
				}
				sizes = append(sizes, s)
				total += 2 + s
			}
			queue = append(queue, batchOf(sizes...))
		}
	}
	keys := tokKeys
	if e.Phase == 0 && rng.IntN(5) == 0 {
		keys.Valid[1] = false
	}
	var count uint16
	var payload []byte
	if rng.IntN(2) == 0 {
		sizes := make([]int, 1+rng.IntN(4))
		for k := range sizes {
			sizes[k] = rng.IntN([]int{20, 200, 1000}[rng.IntN(3)])
		}
		count, payload = uint16(len(sizes)), payloadOf(sizes...)
	}
	f := exo.Frame{Type: exo.FrameData, Group: e.Group, Sender: sender, Epoch: e.Epoch, Seq: e.Append,
		Count: count, History: append([]uint8(nil), e.Hist()...), Payload: payload}
	if rng.IntN(4) == 0 && keys.Valid[1] {
		f.Flags = exo.FlagKeyPhase
	}
	name := fmt.Sprintf("random_%d", i)
	mut := ""
	if rng.IntN(4) == 0 {
		switch rng.IntN(9) {
		case 0:
			f.Seq += uint64(1 + rng.IntN(3))
			mut = "seq+"
		case 1:
			f.Seq -= uint64(1 + rng.IntN(h+1))
			mut = "seq-"
		case 2:
			f.Epoch += uint32(rng.IntN(3)) - 1
			mut = "epoch"
		case 3:
			if h > 0 {
				f.History[rng.IntN(h)] = uint8(rng.IntN(n))
				mut = "history"
			}
		case 4:
			f.Group++
			mut = "group"
		case 5:
			f.Seq += e.Window + 1
			mut = "too_far"
		case 6:
			if h > 0 {
				f.Sender = f.History[rng.IntN(h)]
				mut = "sender_in_history"
			}
		case 7:
			f.Sender = uint8(n + rng.IntN(3))
			mut = "bad_sender"
		case 8:
			f.History = append(f.History, 0)
			mut = "histlen"
		}
	}
	frame, err := f.AppendSealed(nil, keys.Key[exo.KeyPhaseOf(f.Flags)])
	if err != nil {
		// A mutation the codec refuses to encode (a repeated history
		// id): encode it by hand, unsealed.
		frame = encodeRaw(&f)
		mut += "_raw"
	}
	switch rng.IntN(12) {
	case 0:
		frame[exo.OffTag+rng.IntN(8)] ^= 1 << rng.IntN(8)
		mut += "_tag"
	case 1:
		frame = frame[:rng.IntN(len(frame))]
		mut += "_truncated"
	case 2:
		frame = append(frame, make([]byte, rng.IntN(30))...)
		mut += "_padded"
	}
	if mut != "" {
		name += "_" + mut
	}
	return tokCase{name: name, e: e, queue: queue, keys: keys, frame: frame}
}

// encodeRaw encodes f without the codec's checks (a repeated history id).
func encodeRaw(f *exo.Frame) []byte {
	b := make([]byte, exo.HeaderLen, exo.HeaderLen+len(f.History)+len(f.Payload))
	b[exo.OffVersion] = exo.Version
	b[exo.OffType] = uint8(f.Type)
	binary.BigEndian.PutUint16(b[exo.OffGroup:], f.Group)
	b[exo.OffSender] = f.Sender
	b[exo.OffHistLen] = uint8(len(f.History))
	binary.BigEndian.PutUint16(b[exo.OffPayloadLen:], uint16(len(f.Payload)))
	binary.BigEndian.PutUint32(b[exo.OffEpoch:], f.Epoch)
	binary.BigEndian.PutUint16(b[exo.OffCount:], f.Count)
	binary.BigEndian.PutUint16(b[exo.OffFlags:], f.Flags)
	binary.BigEndian.PutUint64(b[exo.OffSeq:], f.Seq)
	b = append(b, f.History...)
	return append(b, f.Payload...)
}
