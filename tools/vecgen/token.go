package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/exo-rack/exo/exo"
)

// The transmit side (format 5): the token in the kernel (docs/token.md).
// A case with a Tx runs through exo.Engine.Step instead of Classify and
// Accept: the state before is the pointers and the exo.Tx, the head of the
// transmit queue is the batch the fast path would send, and the
// expectation is the verdict, the pointers and the exo.Tx after, what Step
// did (record, send, pop, hand off, halt) and the bytes of the frame it
// sent. Like every other expectation, all of it is the Go core's (Step);
// the turn each case was built for only checks the generator.
//
// The pipeline of a case, as the fast path runs it: UnmarshalBinary (a
// codec error is a drop: nothing recorded, nothing changed), the group
// and then the tag under the slot the frame's key phase names (BAD_TAG is
// a drop), then Step(f, head, key of slot Tx.Phase). These cases are not
// in vectors.hex, which stays the receive side of format 4; vectors_tx.hex
// holds them in records of their own (txhex.go).

// slotMax is the payload room of one transmit queue slot (struct exo_slot,
// docs/token.md section 2): a batch is at most this many bytes.
const slotMax = 4064

// turn is what Step did besides the verdict, as flags: the intent of a
// transmit case and the counts of the header.
type turn uint8

const (
	tRecord turn = 1 << iota
	tSent
	tPopped
	tHandoff
	tHalt
)

// Shorthands of the turns the suite is built on.
const (
	tNone turn = 0
	tRec       = tRecord                   // recorded, nothing sent
	tPass      = tRecord | tSent           // recorded, an empty pass sent
	tPop       = tRecord | tSent | tPopped // recorded, the head batch sent
	tHand      = tRecord | tHandoff | tHalt
	tStop      = tRecord | tHalt // a slow-path verdict: recorded, halted
)

func (t turn) String() string {
	if t == 0 {
		return "nothing"
	}
	var s []string
	for i, n := range []string{"record", "sent", "popped", "handoff", "halt"} {
		if t&(1<<i) != 0 {
			s = append(s, n)
		}
	}
	return strings.Join(s, "+")
}

func turnOf(t exo.Turn) turn {
	var x turn
	for _, b := range []struct {
		on bool
		f  turn
	}{{t.Record, tRecord}, {t.Sent, tSent}, {t.Popped, tPopped}, {t.Handoff, tHandoff}, {t.Halt, tHalt}} {
		if b.on {
			x |= b.f
		}
	}
	return x
}

// txCase is the transmit side of a case.
type txCase struct {
	In    exo.Tx
	Queue []exo.Batch // the batches waiting, head first
	// Arm: a stream step whose state and tx were set again (the control
	// plane's ARM) rather than carried from the step before.
	Arm  bool
	Want turn // the turn the case was built to exercise
}

// checkBatch reports whether b can sit in a transmit queue slot: exactly
// Count records, at most slotMax bytes.
func checkBatch(b exo.Batch) error {
	if len(b.Payload) > slotMax {
		return fmt.Errorf("a batch of %d bytes does not fit a %d-byte slot", len(b.Payload), slotMax)
	}
	n := 0
	if err := exo.ForEachRecord(b.Payload, b.Count, func([]byte) error { n++; return nil }); err != nil {
		return fmt.Errorf("batch of %d records: %v", b.Count, err)
	}
	return nil
}

// evaluateTx runs the fast path with the transmit side: the codec, the
// group and the tag (ClassifyTagged's first two checks), then
// exo.Engine.Step with the queue's head and the key of slot tx.Phase.
func evaluateTx(in exo.Pointers, tc *txCase, b []byte, key1 bool) (result, error) {
	res := result{Out: in, TxOut: tc.In}
	if tc.In.Phase > 1 {
		return res, fmt.Errorf("phase %d: a fast path sends under slot 0 or 1", tc.In.Phase)
	}
	if tc.In.Phase == 1 && !key1 {
		return res, fmt.Errorf("phase 1 with key slot 1 empty: the fast path is armed with a key it holds")
	}
	for i, q := range tc.Queue {
		if err := checkBatch(q); err != nil {
			return res, fmt.Errorf("queue[%d]: %v", i, err)
		}
	}
	buf := append([]byte(nil), b...)
	var f exo.Frame
	if err := f.UnmarshalBinary(buf); err != nil {
		res.Reason = exo.ReasonOf(err)
		res.Stage = stageCodec
		return res, nil
	}
	res.Decoded = &f
	res.ExoLen = exo.HeaderLen + len(f.History) + len(f.Payload)
	kr := ring(key1)
	res.TagValid = kr.Verify(&f)
	if f.Group == in.Group && !res.TagValid {
		res.Reason = exo.ReasonBadTag
		res.Stage = stageState
		return res, nil
	}
	e := exo.Engine{Pointers: in, Tx: tc.In}
	var head *exo.Batch
	if len(tc.Queue) > 0 {
		h := exo.Batch{Count: tc.Queue[0].Count, Payload: append([]byte(nil), tc.Queue[0].Payload...)}
		head = &h
	}
	key := kr.Key[tc.In.Phase]
	res.Reason, res.Turn = e.Step(&f, head, key)
	res.Out, res.TxOut = e.Pointers, e.Tx
	res.Stage = stageState
	if res.Reason == exo.ReasonAccept {
		res.Stage = stageAccept
	}
	if res.Turn.Sent {
		sent, err := res.Turn.Frame.AppendBinary(nil)
		if err != nil {
			return res, fmt.Errorf("the frame Step sent does not encode: %v", err)
		}
		res.Sent = sent
	}
	return res, checkTurn(in, tc, b, key, key1, res)
}

// checkTurn checks a Step result against the rule as docs/token.md states
// it, so that a generator bug cannot write a case the rule does not give.
func checkTurn(in exo.Pointers, tc *txCase, b []byte, key [exo.TagKeyLen]byte, key1 bool, res result) error {
	rx, err := evaluate(in, b, key1)
	if err != nil {
		return err
	}
	if rx.Reason != res.Reason {
		return fmt.Errorf("exo.Engine.Step says %s, Classify %s", res.Reason, rx.Reason)
	}
	t := res.Turn
	want := rx.Out
	wantTx := tc.In
	if res.Reason == exo.ReasonAccept {
		if res.Decoded.Count == 0 {
			wantTx.EmptyRun = satInc(wantTx.EmptyRun)
		} else {
			wantTx.EmptyRun = 0
		}
	}
	if t.Record {
		wantTx.Kseq++
	}
	if t.Halt {
		want.Halted = true
	}
	if t.Sent {
		var g exo.Frame
		if err := g.UnmarshalBinary(res.Sent); err != nil {
			return fmt.Errorf("the frame sent does not decode: %v", err)
		}
		if !exo.VerifyTag(res.Sent, key) {
			return fmt.Errorf("the frame sent is not sealed under the key of slot %d", tc.In.Phase)
		}
		next := rx.Out.Next(tc.In.Me, g.Count, uint16(tc.In.Phase)<<14, g.Payload)
		next.Seal(key)
		if !next.Equal(&g) {
			return fmt.Errorf("the frame sent is not Pointers.Next of the state after the received frame")
		}
		if t.Popped != (len(tc.Queue) > 0) || t.Popped && (g.Count != tc.Queue[0].Count || !bytes.Equal(g.Payload, tc.Queue[0].Payload)) {
			return fmt.Errorf("the frame sent does not carry the queue's head")
		}
		want.Accept(tc.In.Me, g.Seq)
		if g.Count == 0 {
			wantTx.EmptyRun = satInc(wantTx.EmptyRun)
		} else {
			wantTx.EmptyRun = 0
		}
		if t.Popped {
			wantTx.QHead++
		}
	}
	if res.Out != want || res.TxOut != wantTx {
		return fmt.Errorf("exo.Engine.Step left %s %+v, the rule gives %s %+v", stateString(res.Out), res.TxOut, stateString(want), wantTx)
	}
	return nil
}

func satInc(x uint32) uint32 {
	if x < math.MaxUint32 {
		return x + 1
	}
	return x
}

func stateString(p exo.Pointers) string {
	return fmt.Sprintf("{hosts %d epoch %d halted %v append %d agreed %d epoch_start %d history %v}",
		p.Hosts, p.Epoch, p.Halted, p.Append, p.Agreed, p.EpochStart, p.Hist())
}

// checkTokenOff checks that a receive-side case (no Tx) is what Step gives
// with a zero exo.Tx (token mode off): the same verdict and state, nothing
// recorded nor sent, and the Tx zero but for EmptyRun, which follows every
// accepted entry even with token mode off (1 after a token pass).
func checkTokenOff(in exo.Pointers, frame []byte, key1 bool, rx result) error {
	res, err := evaluateTx(in, &txCase{}, frame, key1)
	if err != nil {
		return err
	}
	var tx exo.Tx
	if rx.Reason == exo.ReasonAccept && rx.Decoded.Count == 0 {
		tx.EmptyRun = 1
	}
	if res.Reason != rx.Reason || res.Stage != rx.Stage || res.Out != rx.Out || res.TxOut != tx || turnOf(res.Turn) != 0 {
		return fmt.Errorf("exo.Engine.Step with token mode off says %s %s %s, turn %s; Classify and Accept say %s %s %s",
			res.Reason, res.Stage, stateString(res.Out), turnOf(res.Turn), rx.Reason, rx.Stage, stateString(rx.Out))
	}
	return nil
}

// ---- building the cases ---------------------------------------------

// batch is a queue entry of the given records.
func batch(recs ...[]byte) exo.Batch {
	p, c := records(recs...)
	return exo.Batch{Count: c, Payload: p}
}

// fill returns n bytes, v, v+1, ...
func fill(n int, v byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = v + byte(i)
	}
	return b
}

// nrecs returns n records of size bytes each.
func nrecs(n, size int) [][]byte {
	r := make([][]byte, n)
	for i := range r {
		r[i] = fill(size, byte(i))
	}
	return r
}

// active lists the positions of an n-host rack not in skip, in token order.
func active(n int, skip []uint8) []uint8 {
	var a []uint8
	for i := range n {
		if !bytes.Contains(skip, []byte{uint8(i)}) {
			a = append(a, uint8(i))
		}
	}
	return a
}

// nextPos is the active position after x in token order.
func nextPos(n int, skip []uint8, x uint8) uint8 {
	for i := 1; i <= n; i++ {
		y := uint8((int(x) + i) % n)
		if !bytes.Contains(skip, []byte{y}) {
			return y
		}
	}
	return x
}

// ringState is the state of a host of an n-host rack (group 1, epoch 0)
// at append a, in token rotation over the positions not in skip, where
// the frame of seq a is pred's: the history holds the h active positions
// before pred, most recent first (X where a is below h), agreed a-h.
func ringState(n int, skip []uint8, pred uint8, a uint64) exo.Pointers {
	act := active(n, skip)
	k := bytes.IndexByte(act, pred)
	p := exo.NewPointers(1, n, exo.DefaultSeqWindow)
	p.Append = a
	h := p.H()
	for i := 0; i < h && uint64(i) < a; i++ {
		p.History[i] = act[((k-1-i)%len(act)+len(act))%len(act)]
	}
	if a >= uint64(h) {
		p.Agreed = a - uint64(h)
	}
	return p
}

// txOf is the transmit side of host me of an n-host rack whose
// predecessor is pred: token on, phase 0, no empty run, the core's idle
// run (4n), and counters well away from 0 (Kseq 1000, QHead 40).
func txOf(n int, me, pred uint8) exo.Tx {
	return exo.Tx{On: true, Me: me, Pred: pred, IdleRun: uint32(4 * n), Kseq: 1000, QHead: 40}
}

// withTx returns a copy of t changed by fn.
func withTx(t exo.Tx, fn func(*exo.Tx)) exo.Tx {
	fn(&t)
	return t
}

// txVec adds a transmit case of suite token.
func (g *gen) txVec(name, desc string, intent exo.Reason, want turn, in exo.Pointers, tx exo.Tx, q []exo.Batch, r *raw) *vector {
	const suite = "token"
	full := suite + "/" + name
	if g.names[full] {
		g.errorf("duplicate vector name %s", full)
	}
	g.names[full] = true
	v := &vector{Suite: suite, Name: name, Desc: desc, Intent: intent, In: in, Frame: r.bytes(), Stream: noStream,
		HexIndex: -1, Key1Valid: !r.NoKey1, Tx: &txCase{In: tx, Queue: q, Want: want}}
	g.run(v)
	g.vectors = append(g.vectors, v)
	return v
}

// qs is a queue.
func qs(b ...exo.Batch) []exo.Batch { return b }

// suiteToken: the transmit rule, exo.Engine.Step (docs/token.md section 1).
func (g *gen) suiteToken() {
	A := exo.ReasonAccept
	// The base: n=5, this host is 2, its predecessor 1; the state is at
	// append 101, whose frame is host 1's (history [0,4]), agreed 99.
	st := steady(5, 101)
	tx := txOf(5, 2, 1)
	pf := from(st, 1) // the predecessor's frame, a token pass
	one := batch([]byte("hello"))
	q3 := qs(one, batch([]byte("second")), batch([]byte("third"), []byte("x")))

	// The predecessor's frame with a batch queued.
	g.txVec("pred_one_record", "n=5, host 2 after host 1: host 1's pass (seq 101) hands it the token, the queue's head (one record) goes out as seq 102 with history [1,0], under slot 0's key; the queue had 3 batches",
		A, tPop, st, tx, q3, pf)
	g.txVec("pred_one_record_padded", "the same, host 1's frame padded to the Ethernet minimum with 0xAA (as a NIC delivers it): the frame sent is built, not copied, and carries no padding",
		A, tPop, st, tx, q3, mod(pf, func(r *raw) { r.padTo(0xAA) }))
	g.txVec("pred_batch_40", "a batch of 40 records of 8 bytes (400 payload bytes)", A, tPop, st, tx, qs(batch(nrecs(40, 8)...)), pf)
	g.txVec("pred_batch_empty_records", "a batch of 3 empty records (count 3, 6 payload bytes): not a token pass (EmptyRun resets)", A, tPop, st,
		withTx(tx, func(t *exo.Tx) { t.EmptyRun = 7 }), qs(batch(nil, nil, nil)), pf)
	g.txVec("pred_batch_4062_one", "the largest batch a frame of this rack holds: one record of 4060 bytes (4062 payload bytes; the frame sent is 4096 bytes = MaxFastFrame, the frame received 34)",
		A, tPop, st, tx, qs(batch(fill(4060, 0x30))), pf)
	g.txVec("pred_batch_4062_many", "4062 payload bytes in 1 record of 30 bytes and 126 of 30 with one 28-byte record", A, tPop, st, tx, qs(batch(append(nrecs(126, 30), fill(28, 0x31))...)), pf)
	g.txVec("pred_batch_4062_2031_empty", "4062 payload bytes in 2031 empty records (count 2031)", A, tPop, st, tx, qs(batch(nrecs(2031, 0)...)), pf)
	g.txVec("pred_batch_4063_too_long", "one record of 4061 bytes (4063 payload bytes): the frame would be 4097 bytes, over MaxFastFrame: hand-off, the batch stays queued",
		A, tHand, st, tx, qs(batch(fill(4061, 0x41))), pf)
	g.txVec("pred_batch_4064_too_long", "the largest batch a slot holds, 4064 payload bytes in 127 records of 30: over MaxFastFrame with h = 2: hand-off", A, tHand, st, tx, qs(batch(nrecs(127, 30)...)), pf)
	g.txVec("pred_big_frame_small_batch", "host 1's frame carries 1200 payload bytes (a 1234-byte frame), the batch one record of 1 byte: the frame sent (37 bytes) is much shorter than the one received (a fast path that rewrites the received buffer shrinks it)",
		A, tPop, st, tx, qs(batch([]byte("z"))), mod(pf, func(r *raw) { r.withRecords(fill(1198, 0x50)) }))
	for _, c := range []struct {
		name string
		rec  []byte
		why  string
	}{
		{"short_empty_record", []byte{}, "one empty record: a 36-byte frame"},
		{"short_3", []byte("abc"), "one 3-byte record: a 39-byte frame"},
		{"short_45", fill(9, 0x61), "one 9-byte record: a 45-byte frame, one byte short of the 46 after the Ethernet header"},
		{"exact_46", fill(10, 0x61), "one 10-byte record: a 46-byte frame, exactly the Ethernet minimum (60 with its header)"},
		{"over_47", fill(11, 0x61), "one 11-byte record: a 47-byte frame"},
	} {
		g.txVec("pred_"+c.name, c.why+" (sent as encoded; a sender pads it on the wire to 60 bytes with the Ethernet header)", A, tPop, st, tx, qs(batch(c.rec)), pf)
	}

	// The predecessor's frame with an empty queue.
	g.txVec("pred_pass", "empty queue, EmptyRun 3 < IdleRun 20: host 1's pass makes it 4, this host sends an empty pass (seq 102, a 34-byte frame), EmptyRun 5",
		A, tPass, st, withTx(tx, func(t *exo.Tx) { t.EmptyRun = 3 }), nil, pf)
	g.txVec("pred_pass_after_records", "empty queue, EmptyRun 0, host 1's frame carries a record (EmptyRun stays 0): an empty pass, EmptyRun 1",
		A, tPass, st, tx, nil, mod(pf, func(r *raw) { r.withRecords([]byte("from 1")) }))
	g.txVec("pred_pass_run_18", "empty queue, EmptyRun 18: host 1's pass makes it 19 < 20: an empty pass, EmptyRun 20",
		A, tPass, st, withTx(tx, func(t *exo.Tx) { t.EmptyRun = 18 }), nil, pf)
	g.txVec("idle_handoff", "empty queue, EmptyRun 19: host 1's pass makes it 20 = IdleRun: the fast path hands the token to the control plane (halted, nothing sent)",
		A, tHand, st, withTx(tx, func(t *exo.Tx) { t.EmptyRun = 19 }), nil, pf)
	g.txVec("idle_handoff_beyond", "empty queue, EmptyRun 100 > IdleRun: hand-off", A, tHand, st, withTx(tx, func(t *exo.Tx) { t.EmptyRun = 100 }), nil, pf)
	g.txVec("idle_but_batch", "EmptyRun 30 >= IdleRun 20 but a batch queued: it is sent, EmptyRun 0", A, tPop, st,
		withTx(tx, func(t *exo.Tx) { t.EmptyRun = 30 }), qs(one), pf)
	g.txVec("idle_pred_records", "EmptyRun 40 >= IdleRun, empty queue, but host 1's frame carries a record: EmptyRun 0 < IdleRun, so an empty pass (EmptyRun 1)",
		A, tPass, st, withTx(tx, func(t *exo.Tx) { t.EmptyRun = 40 }), nil, mod(pf, func(r *raw) { r.withRecords([]byte("wake")) }))
	g.txVec("idle_run_0", "IdleRun 0 (every empty queue hands off), EmptyRun 0, host 1's frame with a record: EmptyRun 0 >= 0, hand-off",
		A, tHand, st, withTx(tx, func(t *exo.Tx) { t.IdleRun = 0 }), nil, mod(pf, func(r *raw) { r.withRecords([]byte("r")) }))
	keyAnn := append(append(append([]byte(nil), exo.KeyMagic...), 1), fill(8, 0x90)...)
	g.txVec("pred_key_announcement", "EmptyRun 30 >= IdleRun, empty queue, host 1's frame carries one record that is a key announcement: Step counts records only (count 1: EmptyRun 0), so it sends an empty pass",
		A, tPass, st, withTx(tx, func(t *exo.Tx) { t.EmptyRun = 30 }), nil, mod(pf, func(r *raw) { r.withRecords(keyAnn) }))

	// No idle back-off, and EmptyRun saturating at 2^32-1.
	noIdle := withTx(tx, func(t *exo.Tx) { t.IdleRun = exo.NoIdleRun })
	g.txVec("no_idle_run", "IdleRun NoIdleRun (2^32-1, the back-off off), EmptyRun 1000, empty queue: an empty pass", A, tPass, st,
		withTx(noIdle, func(t *exo.Tx) { t.EmptyRun = 1000 }), nil, pf)
	g.txVec("no_idle_run_near_saturation", "NoIdleRun, EmptyRun 2^32-3: host 1's pass makes it 2^32-2 < 2^32-1, an empty pass, EmptyRun 2^32-1 (saturated)",
		A, tPass, st, withTx(noIdle, func(t *exo.Tx) { t.EmptyRun = math.MaxUint32 - 2 }), nil, pf)
	g.txVec("no_idle_run_saturated", "NoIdleRun, EmptyRun 2^32-1 (saturated, = NoIdleRun): with the back-off off the rule never hands off: an empty pass",
		A, tPass, st, withTx(noIdle, func(t *exo.Tx) { t.EmptyRun = math.MaxUint32 }), nil, pf)
	g.txVec("no_idle_run_saturated_batch", "NoIdleRun, EmptyRun 2^32-1, a batch queued: sent, EmptyRun 0", A, tPop, st,
		withTx(noIdle, func(t *exo.Tx) { t.EmptyRun = math.MaxUint32 }), qs(one), pf)
	g.txVec("empty_run_saturated", "IdleRun 20, EmptyRun 2^32-1: host 1's pass leaves it at 2^32-1 (no wrap to 0), hand-off", A, tHand, st,
		withTx(tx, func(t *exo.Tx) { t.EmptyRun = math.MaxUint32 }), nil, pf)
	g.txVec("empty_run_saturated_records", "IdleRun 20, EmptyRun 2^32-1, host 1's frame with a record: EmptyRun 0, an empty pass", A, tPass, st,
		withTx(tx, func(t *exo.Tx) { t.EmptyRun = math.MaxUint32 }), nil, mod(pf, func(r *raw) { r.withRecords([]byte("r")) }))

	// Accepted, but not the token for this host.
	s100 := steady(5, 100) // seq 100 is host 0's
	g.txVec("not_pred", "host 0's frame (host 0 is not the predecessor of host 2): recorded, nothing sent, the queue untouched",
		A, tRec, s100, tx, q3, from(s100, 0))
	g.txVec("not_pred_idle", "host 0's pass with EmptyRun 19 and an empty queue: recorded, no hand-off (only the predecessor's frame hands the token)",
		A, tRec, s100, withTx(tx, func(t *exo.Tx) { t.EmptyRun = 19 }), nil, from(s100, 0))
	g.txVec("takeover_by_successor", "host 3 takes over seq 101 instead of host 1 (accepted: the fast path does not check token order): recorded, not the token for host 2",
		A, tRec, st, tx, q3, from(st, 3))
	g.txVec("own_sender", "a frame that names this host (2) as its sender at seq 101 (2 not in the history [0,4]): accepted and recorded, never answered",
		A, tRec, st, tx, q3, from(st, 2))
	inHist := with(st, func(p *exo.Pointers) { p.History[0], p.History[1] = 2, 4 }) // host 2 sent seq 100
	g.txVec("me_in_history", "history [2,4] (this host sent seq 100): host 1's frame makes it [1,2]; this host may not send (a receiver would say SENDER_IN_HISTORY): recorded, nothing sent, the queue untouched",
		A, tRec, inHist, tx, q3, from(inHist, 1))
	g.txVec("me_in_history_idle", "the same with EmptyRun 19 and an empty queue: no hand-off either", A, tRec, inHist,
		withTx(tx, func(t *exo.Tx) { t.EmptyRun = 19 }), nil, from(inHist, 1))

	// Slow-path verdicts with token mode on: recorded; all but HALTED halt.
	gapF := mod(pf, func(r *raw) { r.Seq = 103; r.History = []uint8{0, 4} })
	g.txVec("gap", "host 1's frame at seq 103 (append 101): GAP, recorded, the fast path halts; nothing sent", exo.ReasonGap, tStop, st, tx, q3, gapF)
	g.txVec("seq_too_far", "host 1's frame beyond the window (seq 101+1025): SEQ_TOO_FAR, recorded, halted", exo.ReasonSeqTooFar, tStop, st, tx, q3,
		mod(pf, func(r *raw) { r.Seq = 101 + 1025 }))
	g.txVec("divergence_history", "host 1's frame at seq 101 with history [3,4]: DIVERGENCE, recorded, halted", exo.ReasonDivergence, tStop, st, tx, q3,
		mod(pf, func(r *raw) { r.History = []uint8{3, 4} }))
	g.txVec("divergence_old_seq", "seq 100 from host 3 (the history says host 0): DIVERGENCE, recorded, halted", exo.ReasonDivergence, tStop, st, tx, q3,
		from(steady(5, 100), 3))
	g.txVec("future_epoch", "host 1's frame of epoch 1 (state epoch 0): FUTURE_EPOCH, recorded, halted", exo.ReasonFutureEpoch, tStop, st, tx, q3,
		mod(pf, func(r *raw) { r.Epoch = 1 }))
	halted := with(st, func(p *exo.Pointers) { p.Halted = true })
	g.txVec("halted", "the fast path is halted (disarmed): host 1's frame is HALTED, recorded, no halt flag (it is halted already), nothing sent",
		exo.ReasonHalted, tRec, halted, tx, q3, pf)
	g.txVec("halted_idle", "halted, EmptyRun 19, empty queue: HALTED, recorded, no hand-off", exo.ReasonHalted, tRec, halted,
		withTx(tx, func(t *exo.Tx) { t.EmptyRun = 19 }), nil, pf)
	g.txVec("future_epoch_halted", "halted, a frame of epoch 1: FUTURE_EPOCH, recorded, and the halt flag set again", exo.ReasonFutureEpoch, tStop, halted, tx, q3,
		mod(pf, func(r *raw) { r.Epoch = 1 }))
	g.txVec("gap_idle", "GAP with EmptyRun 19 and an empty queue: halted, not a hand-off", exo.ReasonGap, tStop, st,
		withTx(tx, func(t *exo.Tx) { t.EmptyRun = 19 }), nil, gapF)

	// Drops: nothing recorded, nothing changed.
	drop := func(name, desc string, r exo.Reason, in exo.Pointers, f *raw) {
		g.txVec("drop_"+name, desc+": dropped, nothing recorded (Kseq unchanged), nothing sent, the queue untouched", r, tNone, in, tx, q3, f)
	}
	drop("duplicate", "host 0's seq 100 again (a retransmission)", exo.ReasonDuplicate, st, from(steady(5, 100), 0))
	s102 := steady(5, 102)
	drop("duplicate_of_pred", "host 1's seq 101 again after it was accepted (append 102): not the token a second time", exo.ReasonDuplicate, s102, from(st, 1))
	drop("stale_epoch", "host 1's frame of epoch 2 in epoch 3", exo.ReasonStaleEpoch, with(st, func(p *exo.Pointers) { p.Epoch = 3 }),
		mod(pf, func(r *raw) { r.Epoch = 2 }))
	drop("sender_in_history", "host 0 (in the history [0,4]) sends seq 101", exo.ReasonSenderInHistory, st, from(st, 0))
	drop("bad_group", "host 1's frame of group 2", exo.ReasonBadGroup, st, mod(pf, func(r *raw) { r.Group = 2 }))
	drop("bad_sender", "sender 5 in a rack of 5", exo.ReasonBadSender, st, mod(pf, func(r *raw) { r.Sender = 5 }))
	drop("bad_histlen", "host 1's frame with hist_len 3 (h = 2)", exo.ReasonBadHistlen, st, mod(pf, func(r *raw) { r.History = []uint8{0, 4, 3}; r.fix() }))
	drop("bad_history_id", "host 1's frame with history [0,9] (9 >= n)", exo.ReasonBadHistoryID, st, mod(pf, func(r *raw) { r.History = []uint8{0, 9} }))
	// A later epoch's frame that does not fit the roster: the rack
	// changed its membership and this host missed it; the core catches
	// up from such frames, so the fast path hands them up and halts.
	later := func(r *raw) { r.Epoch = 1 }
	g.txVec("later_roster_bad_sender", "sender 5 in a rack of 5, epoch 1 (state epoch 0): the roster grew: BAD_SENDER, recorded, halted",
		exo.ReasonBadSender, tStop, st, tx, q3, mod(pf, func(r *raw) { r.Sender = 5; later(r) }))
	g.txVec("later_roster_bad_histlen", "host 1's frame of epoch 1 with hist_len 3 (h = 2 here): a roster of 6 or 7: BAD_HISTLEN, recorded, halted",
		exo.ReasonBadHistlen, tStop, st, tx, q3, mod(pf, func(r *raw) { r.History = []uint8{0, 4, 3}; r.fix(); later(r) }))
	g.txVec("later_roster_bad_history_id", "host 1's frame of epoch 1 with history [0,9] (9 >= n): BAD_HISTORY_ID, recorded, halted",
		exo.ReasonBadHistoryID, tStop, st, tx, q3, mod(pf, func(r *raw) { r.History = []uint8{0, 9}; later(r) }))
	g.txVec("later_roster_halted", "halted, sender 5 of epoch 1: BAD_SENDER, recorded, the halt flag set again",
		exo.ReasonBadSender, tStop, halted, tx, q3, mod(pf, func(r *raw) { r.Sender = 5; later(r) }))
	drop("stale_roster_bad_sender", "sender 5 of epoch 2 in epoch 3 (an older roster)", exo.ReasonBadSender, with(st, func(p *exo.Pointers) { p.Epoch = 3 }),
		mod(pf, func(r *raw) { r.Sender = 5; r.Epoch = 2 }))
	drop("bad_tag", "host 1's frame with its tag's last bit flipped", exo.ReasonBadTag, st, after(pf, flip(exo.OffTag+7, 0)))
	drop("bad_tag_phase1_no_key1", "host 1's frame in key phase 1 with slot 1 empty", exo.ReasonBadTag, st, noKey1(phase1(pf)))
	drop("malformed", "host 1's frame cut to 20 bytes", exo.ReasonMalformed, st, mod(pf, func(r *raw) { r.Trunc = 20 }))
	drop("bad_version", "host 1's frame with version 2", exo.ReasonBadVersion, st, mod(pf, func(r *raw) { r.Version = 2 }))
	drop("bad_type", "host 1's frame with type 2", exo.ReasonBadType, st, mod(pf, func(r *raw) { r.Type = 2 }))
	drop("bad_flags", "host 1's frame with flags 0x0001", exo.ReasonBadFlags, st, mod(pf, func(r *raw) { r.Flags = 1 }))
	drop("bad_payload", "host 1's frame with count 1 and no payload", exo.ReasonBadPayload, st, mod(pf, func(r *raw) { r.Count = 1 }))
	drop("bad_histlen_codec", "host 1's frame with hist_len 200", exo.ReasonBadHistlen, st, mod(pf, func(r *raw) { r.HistLen = 200 }))
	drop("bad_history_id_codec", "host 1's frame with history [0,0]", exo.ReasonBadHistoryID, st, mod(pf, func(r *raw) { r.History = []uint8{0, 0} }))

	// Token mode off: Classify and Accept, nothing else.
	off := withTx(tx, func(t *exo.Tx) { t.On = false })
	g.txVec("off_pred", "token mode off (every other field set): host 1's frame is accepted, not recorded, nothing sent, Kseq and QHead unchanged, EmptyRun moves (+1)",
		A, tNone, st, off, q3, pf)
	g.txVec("off_pred_idle", "token mode off, EmptyRun 19, empty queue: accepted, no hand-off", A, tNone, st,
		withTx(off, func(t *exo.Tx) { t.EmptyRun = 19 }), nil, pf)
	g.txVec("off_gap", "token mode off: GAP is not recorded and does not halt", exo.ReasonGap, tNone, st, off, q3, gapF)
	g.txVec("off_halted", "token mode off, halted: HALTED, not recorded", exo.ReasonHalted, tNone, halted, off, q3, pf)
	g.txVec("off_zero", "token mode off with a zero exo.Tx (every case before format 5): Step is Classify and Accept", A, tNone, st, exo.Tx{}, nil, pf)

	// Key phase 1: the frame sent carries flags 0x4000 and is sealed under
	// slot 1's key.
	ph1 := withTx(tx, func(t *exo.Tx) { t.Phase = 1 })
	g.txVec("phase1_batch", "Phase 1: the batch goes out with flags 0x4000, sealed under tag_key_1", A, tPop, st, ph1, q3, pf)
	g.txVec("phase1_pass", "Phase 1, empty queue: an empty pass with flags 0x4000 under tag_key_1", A, tPass, st, ph1, nil, pf)
	g.txVec("phase1_pred_phase1", "Phase 1, host 1's frame also in phase 1", A, tPop, st, ph1, q3, phase1(pf))
	g.txVec("phase0_pred_phase1", "Phase 0, host 1's frame in phase 1 (it switched first): the frame sent is in phase 0, flags 0, under tag_key",
		A, tPop, st, tx, q3, phase1(pf))
	g.txVec("phase0_no_key1", "Phase 0 with slot 1 empty: sent under tag_key", A, tPop, st, tx, q3, noKey1(pf))
	g.txVec("pred_readmit", "host 1's frame carries READMIT|3: the frame sent carries no flags (Next with the phase bit only)", A, tPop, st, tx, q3,
		mod(pf, func(r *raw) { r.Flags = exo.FlagReadmit | 3 }))
	g.txVec("phase1_pred_readmit", "Phase 1, host 1's frame KEY_PHASE|READMIT|3: the frame sent carries 0x4000 only", A, tPop, st, ph1, q3,
		phase1(mod(pf, func(r *raw) { r.Flags = exo.FlagReadmit | 3 })))

	// Agreement moved by the received frame and then by the own frame.
	g.expectAgreed(g.txVec("agree_both", "n=5 at append 101, agreed 99: host 1's seq 101 agrees seq 99 (agreed 100), this host's seq 102 agrees seq 100 (agreed 101)",
		A, tPop, st, tx, qs(one), pf), 101)
	es := installed(5, 1000, 1001, 995) // host 0 sent seq 1000; host 1 sends 1001
	g.expectAgreed(g.txVec("agree_epoch_start_boundary", "n=5, epoch 3 began at append 1000, agreed 995: host 1's seq 1001 agrees nothing (1001-1000 < h), this host's seq 1002 = epoch_start+h agrees seq 1000 (agreed 1001)",
		A, tPop, es, tx, qs(one), from(es, 1)), 1001)
	es0 := installed(5, 1000, 1000, 995)
	tx10 := txOf(5, 1, 0)
	g.expectAgreed(g.txVec("agree_epoch_start_held", "n=5, epoch 3 began at append 1000: host 0's seq 1000 and this host's (1) seq 1001 are the first two of the epoch: agreed stays 995",
		A, tPop, es0, tx10, qs(one), from(es0, 0)), 995)
	es3 := installed(3, 1000, 1000, 998)
	g.expectAgreed(g.txVec("agree_epoch_start_n3", "n=3 (h=1), epoch began at 1000: host 1's seq 1000 agrees nothing, this host's (2) seq 1001 agrees seq 1000 (agreed 1001)",
		A, tPass, es3, txOf(3, 2, 1), nil, from(es3, 1)), 1001)
	es7 := installed(7, 1000, 1002, 990)
	g.expectAgreed(g.txVec("agree_epoch_start_n7", "n=7 (h=3), epoch began at 1000: host 1's seq 1002 agrees nothing, this host's (2) seq 1003 = epoch_start+h agrees seq 1000 (agreed 1001)",
		A, tPop, es7, txOf(7, 2, 1), qs(one), from(es7, 1)), 1001)
	esMax := installed(5, top, 1001, 995)
	g.expectAgreed(g.txVec("agree_epoch_start_max", "n=5, epoch_start 2^64-1: neither frame agrees anything", A, tPop, esMax, tx, qs(one), from(esMax, 1)), 995)

	// Rack sizes, with and without skipped positions before this host.
	for _, c := range []struct {
		n         int
		me, pred  uint8
		skip      []uint8
		a         uint64
		q         []exo.Batch
		want      turn
		what      string
		sizeLabel string
	}{
		{2, 1, 0, nil, 50, qs(one), tPop, "host 1 after host 0", "n2"},
		{2, 0, 1, nil, 51, nil, tPass, "host 0 after host 1, empty queue", "n2_pass"},
		{3, 0, 2, nil, 50, qs(one), tPop, "host 0 after host 2 (wrapping)", "n3"},
		{3, 2, 0, []uint8{1}, 50, qs(one), tPop, "host 2 after host 0, host 1 skipped", "n3_skip"},
		{4, 3, 2, nil, 50, nil, tPass, "host 3 after host 2", "n4"},
		{4, 3, 1, []uint8{2}, 50, qs(one), tPop, "host 3 after host 1, host 2 skipped", "n4_skip"},
		{5, 2, 0, []uint8{1}, 50, qs(one), tPop, "host 2 after host 0, host 1 skipped", "n5_skip"},
		{5, 0, 3, []uint8{4}, 50, nil, tPass, "host 0 after host 3, host 4 skipped (wrapping)", "n5_skip_wrap"},
		{7, 6, 5, nil, 50, qs(one), tPop, "host 6 after host 5", "n7"},
		{7, 4, 1, []uint8{2, 3}, 50, qs(one), tPop, "host 4 after host 1, hosts 2 and 3 skipped", "n7_skip"},
		{16, 8, 7, nil, 70, qs(one), tPop, "host 8 after host 7", "n16"},
		{16, 0, 13, []uint8{14, 15}, 70, qs(one), tPop, "host 0 after host 13, hosts 14 and 15 skipped (wrapping)", "n16_skip"},
		{64, 33, 32, nil, 1000, qs(one), tPop, "host 33 after host 32", "n64"},
		{64, 10, 7, []uint8{8, 9}, 1000, nil, tPass, "host 10 after host 7, hosts 8 and 9 skipped", "n64_skip"},
		{255, 0, 254, nil, 5000, qs(one), tPop, "host 0 after host 254 (wrapping)", "n255"},
		{255, 100, 96, []uint8{97, 98, 99}, 5000, qs(batch(nrecs(10, 100)...)), tPop, "host 100 after host 96, hosts 97 to 99 skipped", "n255_skip"},
		{255, 254, 253, nil, 5000, nil, tPass, "host 254 after host 253, empty queue", "n255_pass"},
	} {
		p := ringState(c.n, c.skip, c.pred, c.a)
		if me := nextPos(c.n, c.skip, c.pred); me != c.me {
			g.errorf("token/%s: host %d follows %d, not %d", c.sizeLabel, me, c.pred, c.me)
		}
		g.txVec(c.sizeLabel, fmt.Sprintf("n=%d (h=%d): %s at append %d; the frame sent carries the history after host %d's frame",
			c.n, c.n/2, c.what, c.a, c.pred), A, c.want, p, txOf(c.n, c.me, c.pred), c.q, from(p, c.pred))
		if len(c.skip) > 0 {
			g.txVec(c.sizeLabel+"_skipped_sends", fmt.Sprintf("n=%d: the skipped host %d sends at append %d instead (it came back): accepted, recorded, not the token for host %d",
				c.n, c.skip[0], c.a, c.me), A, tRec, p, txOf(c.n, c.me, c.pred), c.q, from(p, c.skip[0]))
		}
	}

	// Counters and sequence numbers near their limits.
	for _, c := range []struct {
		name, what string
		kseq, qh   uint64
	}{
		{"counters_2e32", "Kseq and QHead 2^32-1: both become 2^32 (64-bit counters)", e32 - 1, e32 - 1},
		{"counters_top", "Kseq and QHead 2^64-2: both become 2^64-1", top - 1, top - 1},
		{"qhead_slot_63", "QHead 63: the head is slot 63 of 64, QHead becomes 64 (slot 0)", 7, 63},
		{"qhead_slot_64", "QHead 64: the head is in slot 0 again", 8, 64},
		{"counters_zero", "Kseq 0 and QHead 0 (the first record, the first batch)", 0, 0},
	} {
		g.txVec(c.name, c.what, A, tPop, st, withTx(tx, func(t *exo.Tx) { t.Kseq, t.QHead = c.kseq, c.qh }), q3, pf)
	}
	g.txVec("kseq_top_drop", "Kseq 2^64-2, a dropped frame: Kseq unchanged", exo.ReasonDuplicate, tNone, s102,
		withTx(tx, func(t *exo.Tx) { t.Kseq = top - 1 }), q3, from(st, 1))
	for _, c := range []struct {
		name, what string
		a          uint64
	}{
		{"seq_2e32", "host 1's seq 2^32-2, this host's 2^32-1: append 2^32", e32 - 2},
		{"seq_2e32_own_at", "host 1's seq 2^32-1, this host's 2^32", e32 - 1},
		{"seq_top_minus_2", "host 1's seq 2^64-3, this host's 2^64-2: append 2^64-1", top - 2},
		{"seq_top", "host 1's seq 2^64-2, this host's 2^64-1: the append pointer wraps to 0 (64-bit adders; the protocol gives seq 2^64 no meaning)", top - 1},
	} {
		p := ringState(5, nil, 1, c.a)
		g.txVec(c.name, c.what, A, tPop, p, tx, qs(one), from(p, 1))
	}

	// Other groups and epochs: the frame sent carries the state's.
	ge := with(st, func(p *exo.Pointers) { p.Group = 0xABCD; p.Epoch = 0xDEADBEEF })
	g.txVec("group_epoch", "group 0xABCD, epoch 0xDEADBEEF: the frame sent carries both", A, tPop, ge, tx, q3, from(ge, 1))
	x := with(steady(5, 40), func(p *exo.Pointers) { p.ClearHistory(); p.Epoch = 3; p.Agreed = 37; p.EpochStart = 40 })
	g.txVec("after_view_change", "right after a view change: history [X,X], epoch 3; host 1's seq 40 ([X,X]) then this host's seq 41 with history [1,X]",
		A, tPop, x, tx, q3, from(x, 1))
}

// ---- token streams --------------------------------------------------

// newTxStream starts a stream with a transmit side.
func (g *gen) newTxStream(name, desc string, in exo.Pointers, tx exo.Tx) *stream {
	s := g.newStream(name, desc, in)
	s.Tx = &tx
	s.curTx = tx
	return s
}

// push queues batches (the control plane publishes them).
func (s *stream) push(b ...exo.Batch) { s.queue = append(s.queue, b...) }

// takeBack empties the queue as a quiescing control plane does (tail =
// qhead): its batches go to the core.
func (s *stream) takeBack() { s.queue = nil }

// rearm sets the state the next step starts from: the control plane's
// ARM, which succeeds only if Kseq is the fast path's.
func (s *stream) rearm(p exo.Pointers, tx exo.Tx) {
	if tx.Kseq != s.curTx.Kseq {
		s.g.errorf("stream %s: ARM with Kseq %d, the fast path is at %d", s.Name, tx.Kseq, s.curTx.Kseq)
	}
	s.cur, s.curTx, s.arm = p, tx, true
}

// coreSends is the state after the core (with the fast path halted) sends
// this host's next frame of count records itself: the control plane arms
// the fast path with it.
func (s *stream) coreSends(count uint16) (exo.Pointers, exo.Tx) {
	p, tx := s.cur, s.curTx
	p.Halted = false
	p.Accept(tx.Me, p.Append)
	if count == 0 {
		tx.EmptyRun = satInc(tx.EmptyRun)
	} else {
		tx.EmptyRun = 0
	}
	return p, tx
}

// txStep runs frame r through the stream's fast path.
func (s *stream) txStep(note string, intent exo.Reason, want turn, r *raw) *vector {
	v := &vector{
		Suite: "stream", Name: fmt.Sprintf("%s#%d", s.Name, len(s.Steps)), Desc: note,
		Intent: intent, In: s.cur, Frame: r.bytes(),
		Stream: s.idx, Step: len(s.Steps), HexIndex: -1, Key1Valid: !r.NoKey1,
		Tx: &txCase{In: s.curTx, Queue: append([]exo.Batch(nil), s.queue...), Arm: s.arm, Want: want},
	}
	if s.Tx == nil {
		s.g.errorf("stream %s: txStep on a receive-only stream", s.Name)
	}
	s.arm = false
	s.g.run(v)
	s.cur, s.curTx = v.Res.Out, v.Res.TxOut
	if v.Res.Turn.Popped {
		s.queue = s.queue[1:]
	}
	s.Steps = append(s.Steps, v)
	return v
}

// ringNext is the frame of the next host of the rotation (the active
// position after the newest sender), with the given records.
func (s *stream) ringNext(n int, skip []uint8, recs ...[]byte) *raw {
	return from(s.cur, nextPos(n, skip, s.cur.History[0])).withRecords(recs...).padTo(0)
}

func (g *gen) tokenStreams() {
	A := exo.ReasonAccept
	{
		// A 5-host ring seen from host 2 (predecessor 1): its own frames
		// are Step's, and the others' frames carry them in their history.
		const n, me, pred = 5, 2, 1
		st := steady(n, 10) // seq 10 is host 0's
		tx := exo.Tx{On: true, Me: me, Pred: pred, IdleRun: 4 * n, Kseq: 0, QHead: 0}
		s := g.newTxStream("token_ring_n5", "n=5 seen from host 2 (predecessor 1, IdleRun 20), token mode on from a fresh Kseq and QHead: three batches go out on three turns, a retransmission of the predecessor's frame is a duplicate, the queue runs dry and the empty passes run up to IdleRun, the predecessor's pass hands off (halted), a late retransmission is HALTED; the control plane sends this host's pass and re-arms, the next idle turn hands off again; the core sends a batch itself and re-arms, and a batch queued while armed goes out on the next turn",
			st, tx)
		s.push(batch([]byte("a1")), batch([]byte("b1"), []byte("b2")), batch(nrecs(20, 16)...))
		say := func(r *raw, what string) string {
			return fmt.Sprintf("host %d seq %d (%d records): %s", r.Sender, r.Seq, r.Count, what)
		}
		var last *raw
		step := func(want turn, what string, recs ...[]byte) *vector {
			last = s.ringNext(n, nil, recs...)
			return s.txStep(say(last, what), A, want, last)
		}
		step(tRec, "recorded", []byte("from 0"))
		step(tPop, "the token: batch 0 goes out as seq 12")
		p1 := last
		step(tRec, "carries host 2's seq 12 in its history", []byte("from 3"))
		step(tRec, "recorded")
		s.txStep("host 1's seq 11 again (a retransmission): duplicate, not the token again", exo.ReasonDuplicate, tNone, p1)
		step(tRec, "recorded")
		step(tPop, "the token: batch 1 goes out")
		for range 3 {
			step(tRec, "recorded")
		}
		step(tPop, "the token: batch 2 (20 records) goes out; the queue is empty")
		// Empty passes, this host's among them, up to IdleRun.
		for {
			if nextPos(n, nil, s.cur.History[0]) != pred {
				step(tRec, "a pass, recorded")
				continue
			}
			if satInc(s.curTx.EmptyRun) >= s.curTx.IdleRun {
				break
			}
			step(tPass, fmt.Sprintf("the token, empty queue, EmptyRun %d+1 < 20: an empty pass", s.curTx.EmptyRun))
		}
		step(tHand, fmt.Sprintf("the token with EmptyRun %d+1 >= IdleRun and an empty queue: hand-off, halted", s.curTx.EmptyRun))
		s.txStep("host 1 retransmits that pass (nobody followed it yet): HALTED, recorded, no halt flag", exo.ReasonHalted, tRec, last)
		// The core sends this host's pass after its back-off and re-arms.
		p, t := s.coreSends(0)
		s.rearm(p, t)
		step(tRec, "armed again (the core sent this host's pass itself after its back-off: EmptyRun one more); recorded")
		step(tRec, "recorded")
		step(tRec, "recorded")
		step(tHand, "the token, still idle: hand-off again")
		// A publish wakes the rack: the core sends it, then re-arms.
		p, t = s.coreSends(1)
		s.rearm(p, t)
		step(tRec, "armed again after the core sent a batch itself (EmptyRun 0); recorded", []byte("after wake"))
		step(tRec, "recorded")
		s.push(batch([]byte("queued while armed")))
		step(tRec, "recorded (a batch was queued meanwhile)")
		step(tPop, "the token: the queued batch goes out")
		step(tRec, "recorded")
	}
	{
		// A gap halts the fast path; the control plane repairs it, takes
		// the queue back, sends, and re-arms.
		const n, me, pred = 5, 2, 1
		st := steady(n, 20)
		tx := exo.Tx{On: true, Me: me, Pred: pred, IdleRun: 4 * n, Kseq: 500, QHead: 7}
		s := g.newTxStream("token_gap_n5", "n=5 seen from host 2: host 0's seq 20 is lost, host 1's seq 21 is a GAP (recorded, halted); host 0's retransmission is HALTED (recorded); the control plane repairs the log, takes the queued batch back and the core sends it, then re-arms; the rotation goes on and the next batch goes out from the fast path",
			st, tx)
		s.push(batch([]byte("held back")))
		c := &chain{st}
		f20 := c.send(0, []byte("lost"))
		f21 := c.send(1)
		s.txStep("host 1's seq 21 before host 0's seq 20 (lost): GAP, recorded, halted", exo.ReasonGap, tStop, f21)
		s.txStep("host 0's seq 20 (retransmitted): HALTED, recorded", exo.ReasonHalted, tRec, f20)
		s.txStep("host 1's seq 21 again: HALTED, recorded", exo.ReasonHalted, tRec, f21)
		// The core steps both records, accepts 20 and 21, and sends 22
		// with the batch the control plane took back.
		p := s.cur
		p.Halted = false
		p.Accept(0, 20)
		p.Accept(1, 21)
		s.cur = p
		s.takeBack()
		s.rearm(s.coreSends(1))
		r := s.ringNext(n, nil)
		s.txStep(fmt.Sprintf("armed again after the core sent seq 22 (the batch taken back); host 3 seq %d: recorded", r.Seq), A, tRec, r)
		for range 2 {
			r := s.ringNext(n, nil)
			s.txStep(fmt.Sprintf("host %d seq %d: recorded", r.Sender, r.Seq), A, tRec, r)
		}
		s.push(batch([]byte("next")), batch([]byte("after")))
		r = s.ringNext(n, nil)
		s.txStep(fmt.Sprintf("host 1 seq %d: the token, the head batch goes out (QHead 7 -> 8)", r.Seq), A, tPop, r)
		r = s.ringNext(n, nil)
		s.txStep(fmt.Sprintf("host 3 seq %d: recorded", r.Seq), A, tRec, r)
		r = mod(s.ringNext(n, nil), func(r *raw) { r.Epoch = 1 })
		s.txStep("host 4's frame of epoch 1 (a view change elsewhere): FUTURE_EPOCH, recorded, halted", exo.ReasonFutureEpoch, tStop, r)
	}
	{
		// n=7 with host 3 skipped: host 4 follows host 2.
		const n, me, pred = 7, 4, 2
		skip := []uint8{3}
		st := ringState(n, skip, 0, 30) // seq 30 is host 0's
		tx := exo.Tx{On: true, Me: me, Pred: pred, IdleRun: 4 * n, Kseq: 1 << 40, QHead: 1 << 33}
		s := g.newTxStream("token_skip_n7", "n=7 seen from host 4, host 3 skipped: its predecessor is host 2; two rotations over 6 hosts with batches and passes, and the skipped host's frame when it comes back (accepted, recorded, no send)",
			st, tx)
		s.push(batch([]byte("s1")), batch(nrecs(3, 5)...))
		for range 12 {
			snd := nextPos(n, skip, s.cur.History[0])
			r := s.ringNext(n, skip)
			want := tRec
			what := "recorded"
			if snd == pred {
				want, what = tPass, "the token: an empty pass"
				if len(s.queue) > 0 {
					want, what = tPop, "the token: the head batch goes out"
				}
			}
			s.txStep(fmt.Sprintf("host %d seq %d: %s", r.Sender, r.Seq, what), A, want, r)
		}
		r := from(s.cur, 3).padTo(0)
		s.txStep(fmt.Sprintf("host 3 (skipped) sends seq %d: accepted, recorded", r.Seq), A, tRec, r)
		r = from(s.cur, 2).padTo(0)
		s.txStep(fmt.Sprintf("host 2 (not in the history after host 3's frame) sends seq %d: the token, an empty pass", r.Seq), A, tPass, r)
	}
	{
		// A key rotation: the control plane re-arms in phase 1.
		const n, me, pred = 3, 1, 0
		st := steady(n, 60) // seq 60 is host 0's
		tx := exo.Tx{On: true, Me: me, Pred: pred, IdleRun: 4 * n, Kseq: 77, QHead: 3}
		s := g.newTxStream("token_phase_switch_n3", "n=3 seen from host 1, both key slots valid: its frames go out in phase 0, then the control plane re-arms it in phase 1 (its key switch) and its frames go out with flags 0x4000 under tag_key_1, while the others switch one by one",
			st, tx)
		s.push(batch([]byte("p0")), batch([]byte("p1")), batch([]byte("p1 again")))
		r := s.ringNext(n, nil)
		s.txStep("host 0, phase 0: the token, sent in phase 0", A, tPop, r)
		r = s.ringNext(n, nil)
		s.txStep("host 2, phase 0: recorded", A, tRec, r)
		// quiesce and re-arm in phase 1
		t := s.curTx
		t.Phase = 1
		s.rearm(s.cur, t)
		r = phase1(s.ringNext(n, nil))
		s.txStep("armed again in phase 1; host 0 in phase 1: the token, sent in phase 1 under tag_key_1", A, tPop, r)
		r = s.ringNext(n, nil)
		s.txStep("host 2, still phase 0: recorded", A, tRec, r)
		r = s.ringNext(n, nil)
		s.txStep("host 0's next frame in phase 0 (both slots hold keys, frames of either phase are taken): the token, sent in phase 1", A, tPop, r)
		r = phase1(s.ringNext(n, nil))
		s.txStep("host 2 in phase 1: recorded", A, tRec, r)
		r = phase1(s.ringNext(n, nil))
		s.txStep("host 0 in phase 1, empty queue: an empty pass in phase 1", A, tPass, r)
	}
	{
		// n=2: every frame of the other host is the token.
		const n, me, pred = 2, 1, 0
		st := steady(n, 8) // seq 8 is host 0's
		tx := exo.Tx{On: true, Me: me, Pred: pred, IdleRun: 4 * n, Kseq: 9, QHead: 2}
		s := g.newTxStream("token_alternation_n2", "n=2 (h=1) seen from host 1: every frame of host 0 is the token; batches then passes until EmptyRun reaches IdleRun 8 and the token is handed off",
			st, tx)
		s.push(batch([]byte("x")), batch([]byte("y")))
		for {
			r := s.ringNext(n, nil)
			want := tPass
			switch {
			case len(s.queue) > 0:
				want = tPop
			case satInc(s.curTx.EmptyRun) >= s.curTx.IdleRun:
				want = tHand
			}
			s.txStep(fmt.Sprintf("host 0 seq %d, EmptyRun %d before: %s", r.Seq, s.curTx.EmptyRun, want), A, want, r)
			if want == tHand {
				break
			}
		}
	}
}

// txStreams counts the streams with a transmit side.
func (g *gen) txStreams() int {
	n := 0
	for _, s := range g.streams {
		if s.Tx != nil {
			n++
		}
	}
	return n
}

// txKinds names what a transmit case exercises, for checkTxCoverage.
func txKinds(v *vector) []string {
	if v.Tx == nil {
		return nil
	}
	var k []string
	add := func(s string, ok bool) {
		if ok {
			k = append(k, s)
		}
	}
	in, tc, res := v.In, v.Tx, v.Res
	t, r := res.Turn, res.Reason
	on := tc.In.On
	f := res.Decoded
	fromPred := f != nil && f.Sender == tc.In.Pred
	add("sent: the head batch", t.Popped)
	add("sent: an empty pass", t.Sent && !t.Popped)
	add("sent: key phase 1 (flags 0x4000, tag_key_1)", t.Sent && t.Frame.Flags&exo.FlagKeyPhase != 0)
	add("sent: shorter than the Ethernet minimum", t.Sent && len(res.Sent) < exo.MinEthFrame-exo.EthHeaderLen)
	add("sent: a frame of MaxFastFrame bytes", t.Popped && t.Frame.EncodedLen() == exo.MaxFastFrame)
	add("sent: EmptyRun >= IdleRun but a batch queued", t.Popped && tc.In.EmptyRun >= tc.In.IdleRun)
	add("sent: NoIdleRun", t.Sent && tc.In.IdleRun == exo.NoIdleRun)
	add("sent: the own frame moves the agreement pointer", t.Sent && res.Out.Agreed == t.Frame.Seq-uint64(in.H())+1 && in.H() > 0)
	add("sent: with epoch_start > 0", t.Sent && in.EpochStart > 0)
	add("sent: Kseq and QHead near 2^64", t.Popped && tc.In.Kseq > top-4 && tc.In.QHead > top-4)
	add("sent: seq near 2^64", t.Sent && t.Frame.Seq > top-4)
	add("sent: a skipped predecessor", t.Sent && int(tc.In.Pred) != (int(tc.In.Me)+int(in.Hosts)-1)%int(in.Hosts))
	if t.Sent {
		k = append(k, fmt.Sprintf("sent: n=%d", in.Hosts))
	}
	add("hand-off", t.Handoff)
	add("hand-off: EmptyRun saturated", t.Handoff && res.TxOut.EmptyRun == math.MaxUint32)
	add("hand-off in a stream", t.Handoff && v.Stream != noStream)
	add("armed stream step", tc.Arm)
	if on && t.Halt && !t.Handoff {
		k = append(k, "halt: "+r.String())
	}
	add("HALTED: recorded, no halt", on && r == exo.ReasonHalted && t.Record && !t.Halt)
	if on && !t.Record {
		k = append(k, "drop with token on: "+r.String())
	}
	add("ACCEPT not from the predecessor: recorded, nothing sent", on && r == exo.ReasonAccept && !fromPred && !t.Sent && !t.Halt)
	add("ACCEPT from the predecessor, this host in the history: nothing sent", on && r == exo.ReasonAccept && fromPred && !t.Sent && !t.Halt)
	add("token off: ACCEPT from the predecessor, not recorded", !on && r == exo.ReasonAccept && fromPred && !t.Record)
	add("token off: slow path, not recorded", !on && r.SlowPath() && !t.Record)
	add("DUPLICATE of the predecessor's frame: not the token twice", on && r == exo.ReasonDuplicate && fromPred)
	return k
}

// checkTxCoverage fails generation when a required transmit case is
// missing.
func (g *gen) checkTxCoverage() error {
	have := map[string]bool{}
	for _, v := range g.all() {
		for _, k := range txKinds(v) {
			have[k] = true
		}
	}
	want := []string{"sent: the head batch", "sent: an empty pass", "sent: key phase 1 (flags 0x4000, tag_key_1)",
		"sent: shorter than the Ethernet minimum", "sent: a frame of MaxFastFrame bytes", "sent: EmptyRun >= IdleRun but a batch queued",
		"sent: NoIdleRun", "sent: the own frame moves the agreement pointer", "sent: with epoch_start > 0",
		"sent: Kseq and QHead near 2^64", "sent: seq near 2^64", "sent: a skipped predecessor",
		"hand-off", "hand-off: EmptyRun saturated", "hand-off in a stream", "armed stream step",
		"HALTED: recorded, no halt", "ACCEPT not from the predecessor: recorded, nothing sent",
		"ACCEPT from the predecessor, this host in the history: nothing sent",
		"token off: ACCEPT from the predecessor, not recorded", "token off: slow path, not recorded",
		"DUPLICATE of the predecessor's frame: not the token twice"}
	for _, n := range []int{2, 3, 4, 5, 7, 16, 64, 255} {
		want = append(want, fmt.Sprintf("sent: n=%d", n))
	}
	for r := range exo.Reason(exo.NumReasons) {
		switch {
		case r == exo.ReasonAccept || r == exo.ReasonHalted:
		case r.SlowPath():
			want = append(want, "halt: "+r.String())
		default:
			want = append(want, "drop with token on: "+r.String())
		}
	}
	var missing []string
	for _, k := range want {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("transmit coverage: no case for %q", missing)
	}
	return nil
}
