package fpga

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/exo/token"
)

// Token is the engine in token mode (register map 1.3, docs/token.md) as
// its control plane drives it: exo/token's FastPath and the daemon's
// TokenPath (Wait, TokenCounters, Since, SetUrgentOnly) over the engine's
// registers, and Receive, the engine's receive port, which the embedder
// feeds with every frame the host's interface receives and which sends
// the engine's answers.
//
// It is made for the simulated engine (Sim), which runs in the daemon's
// process: there a goroutine plays the NIC (it reads the socket, hands each
// frame to Receive, which runs it through the Verilated RTL and sends the
// frame the engine put on its TX port), and the records the engine's
// verdict sideband describes are queued in memory for Records. A real NIC
// would write the records to host memory by DMA; the control operations
// (Halt, Set, Push, Reclaim) are register sequences that work on either.
//
// Receive and the control operations hold one mutex, the simulation's: a
// control operation never runs in the middle of a frame, and Halt's Kseq
// counts only records already queued. Beside the engine, Token runs the
// Go rule (exo.Engine.Step) on the same frames from the same state (the
// shadow, written by every Set) and counts every frame on which the two
// differ (TokenCounters' RULE_DIFFERS): the verdict, the record's flags,
// Kseq and QHead, and the frame sent, byte for byte.
type Token struct {
	eng    *Engine
	settle func() error // runs the simulated clock before a token (Sim.Settle), or nil

	mu       sync.Mutex // the engine: one frame or control operation at a time
	shadow   exo.Engine // the Go rule's state: the engine's, as far as the rule goes
	queue    []exo.Batch
	slots    []takenSlot // each queue slot's batch, for Taken
	tail     uint64      // batches pushed (tx_qtail)
	keys     exo.KeyRing
	roster   []net.HardwareAddr
	src, dst net.HardwareAddr
	hdr      [exo.EthHeaderLen]byte // the Ethernet header of the frames the engine sends
	bits     uint64                 // bit i: entry append-1-i has records (all ones after Set: unknown)
	closed   bool
	c        tokenCounters
	diffs    []string // the first differences, for the log

	qmu      sync.Mutex // the records (Receive writes them, Records reads them)
	recs     []queuedRecord
	arena    []byte // the frames and source MACs of recs
	spare    []queuedRecord
	spareAr  []byte
	waitMode int // waitNone, waitWorth, waitUrgent: what wakes the Wait asleep
	wake     chan struct{}
	done     chan struct{}
	urgent   atomic.Bool // SetUrgentOnly
	start    time.Time   // Record.Written counts from it
	timer    *time.Timer
}

// tokenCounters are Token's own counters (TokenCounters).
type tokenCounters struct {
	frames, records, ringFull, checked, differs, stateDiffers, simErrs, txErrs uint64
	txLatLast, txLatMax                                                        uint64
	sendNs                                                                     uint64
}

// takenSlot is one queue slot's batch (number i), kept for Taken.
type takenSlot struct {
	i  uint64
	b  exo.Batch
	ok bool
}

// queuedRecord is a record waiting for Records: its frame and source MAC
// are in the arena it was queued with.
type queuedRecord struct {
	r      token.Record
	off, n int // the frame in the arena
	srcOff int // the source MAC in the arena (6 bytes)
}

const (
	waitNone = iota
	waitWorth
	waitUrgent
)

// MaxQueuedRecords bounds the records waiting to be read: a frame that
// would make one more is dropped before the engine sees it (RING_FULL, as
// the XDP program drops a frame when its ring is short of room: the rack
// retransmits), and from half of it on every record wakes the control
// plane.
const MaxQueuedRecords = 1 << 16

// maxDiffs is how many descriptions of differences Token keeps.
const maxDiffs = 16

// TokenOptions set a Token up.
type TokenOptions struct {
	// Src is the Ethernet source MAC of the frames the engine sends (this
	// host's interface); Dst their destination (nil: broadcast).
	Src, Dst net.HardwareAddr
	// NoSettle: do not run the simulated clock before a token
	// (Sim.Settle). The simulation runs only while it is driven; a token
	// that comes right after a change of the state or the queue may then
	// find its tag not ready (tx_spec_miss), which the hardware, whose
	// clock runs between frames, would have had ready.
	NoSettle bool
}

// NewToken returns the control plane's handle of engine e in token mode:
// e's back end must take frames from the host (FrameEngine: the simulated
// engine) and have a transmit side (ErrNoTx). It halts the engine, writes
// the MACs of the frames it sends, and reads its state, keys and roster
// (the driver's copies) for the Go rule beside it: give the Token the
// keys and the roster from then on (SetKeys, SetRoster). The control
// plane arms it with Set.
func NewToken(e *Engine, opts TokenOptions) (*Token, error) {
	if _, ok := e.Regs().(FrameEngine); !ok {
		return nil, ErrNoFrameInput
	}
	if err := e.checkTx(); err != nil {
		return nil, err
	}
	if opts.Dst == nil {
		opts.Dst = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	t := &Token{eng: e, src: append(net.HardwareAddr(nil), opts.Src...), dst: append(net.HardwareAddr(nil), opts.Dst...),
		slots: make([]takenSlot, e.Info().Tx.QueueSlots), bits: ^uint64(0),
		wake: make(chan struct{}, 1), done: make(chan struct{}), start: time.Now()}
	if s, ok := e.Regs().(interface{ Settle(int) (int, error) }); ok && !opts.NoSettle {
		t.settle = func() error { _, err := s.Settle(0); return err }
	}
	copy(t.hdr[0:6], t.dst)
	copy(t.hdr[6:12], t.src)
	binary.BigEndian.PutUint16(t.hdr[12:], exo.EtherType)
	if err := e.Halt(); err != nil {
		return nil, err
	}
	if err := e.SetTxMACs(t.src, t.dst); err != nil {
		return nil, err
	}
	st, err := e.TokenState()
	if err != nil {
		return nil, err
	}
	_, tail, err := e.QueuePointers()
	if err != nil {
		return nil, err
	}
	if tail != st.QHead {
		// A queue left by someone else: its batches are unknown here.
		if _, err := e.Reclaim(); err != nil {
			return nil, err
		}
		tail = st.QHead
	}
	t.shadow, t.tail = st, tail
	if t.keys, err = e.Keys(); err != nil {
		return nil, err
	}
	t.roster = e.Roster()
	return t, nil
}

// ErrTokenClosed is returned by Receive after Close.
var ErrTokenClosed = errors.New("fpga: token: closed")

// Close ends the Token's waits (Wait returns an error matching
// net.ErrClosed) and its Receive. The control operations go on working
// (the daemon quiesces the engine at its stop, after its socket closed);
// the Engine is the caller's to close.
func (t *Token) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.qmu.Lock()
	defer t.qmu.Unlock()
	select {
	case <-t.done:
	default:
		close(t.done)
	}
}

// SetKeys writes both key slots of the engine (Engine.SetKeys) and gives
// them to the Go rule beside it.
func (t *Token) SetKeys(ring exo.KeyRing) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.eng.SetKeys(ring); err != nil {
		return err
	}
	t.keys = ring
	return nil
}

// SetRoster writes the engine's roster MAC table (Engine.SetRoster) and
// gives it to the Go rule beside it.
func (t *Token) SetRoster(macs []net.HardwareAddr) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.eng.SetRoster(macs); err != nil {
		return err
	}
	t.roster = t.eng.Roster()
	return nil
}

// settleLocked runs the simulated clock until the engine is idle and the
// tag of the next token's frame is ready (mu held): Receive does before a
// frame of the predecessor, which the hardware's clock, never stopped,
// would have had ready since the last change of the state or the queue.
func (t *Token) settleLocked() error {
	if t.settle == nil {
		return nil
	}
	if err := t.settle(); err != nil {
		t.c.simErrs++
		return err
	}
	return nil
}

// Receive runs one received frame through the engine, as the NIC's MAC
// hands it over: eth is the whole Ethernet frame (the engine parses from
// the destination MAC on; no FCS). When the engine answers it, send is
// called with the frame from its TX port (Ethernet header included, not
// padded) before Receive returns, under the Token's lock: no control
// operation comes between the engine's send and the frame on the wire.
// When the verdict is one the control plane reads (ACCEPT, the slow
// path, a later epoch's roster), the record is queued for Records and
// wakes a Wait that waits for it. Receive returns the engine's verdict.
// A send that fails is counted (TX_ERR): the frame is lost on the wire,
// as a frame the NIC could not send, and the rack retransmits.
func (t *Token) Receive(eth []byte, send func([]byte) error) (Verdict, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return Verdict{}, ErrTokenClosed
	}
	if len(eth) < exo.EthHeaderLen {
		return Verdict{}, fmt.Errorf("fpga: token: a frame of %d bytes, shorter than its Ethernet header", len(eth))
	}
	t.qmu.Lock()
	full := len(t.recs) >= MaxQueuedRecords
	t.qmu.Unlock()
	if full {
		t.c.ringFull++
		return Verdict{}, nil
	}
	arrived := time.Now()
	t.c.frames++
	if s := &t.shadow; s.On && !s.Halted && len(eth) > exo.EthHeaderLen+exo.OffSender && eth[exo.EthHeaderLen+exo.OffSender] == s.Pred {
		// Maybe the token: the clock runs as it would have since the
		// last frame, until the speculation of the frame it answers with
		// is done (at once as a rule: the last frames gave it time).
		if err := t.settleLocked(); err != nil {
			return Verdict{}, err
		}
	}
	x := t.expect(eth)
	v, err := t.eng.Process(eth)
	if err != nil {
		t.c.simErrs++
		return v, err
	}
	t.compare(&v, &x)
	if v.Token.Sent && v.TX != nil {
		if err := send(v.TX); err != nil {
			t.c.txErrs++
		}
		t.c.sendNs += uint64(time.Since(arrived))
		t.c.txLatLast = uint64(v.TxLatency)
		t.c.txLatMax = max(t.c.txLatMax, t.c.txLatLast)
	}
	if v.Token.Record {
		t.c.records++
		t.queueRecord(&v, eth, x.worth)
	}
	return v, nil
}

// expectation is what the Go rule does with a frame (expect).
type expectation struct {
	reason exo.Reason
	turn   exo.Turn
	armed  bool
	kseq   uint64
	tx     []byte // the Ethernet frame sent, or nil
	worth  bool   // an entry with records agreed: its publisher waits
}

// expect runs the Go rule on eth from the shadow state and moves it: the
// checks the engine makes before the rule (the codec, the group, the tag
// under the key slot the frame names, the sender's roster MAC unless the
// frame is of a later epoch), then exo.Engine.Step with the queue's head.
func (t *Token) expect(eth []byte) expectation {
	x := expectation{armed: !t.shadow.Halted, kseq: t.shadow.Kseq}
	var f exo.Frame
	if err := f.UnmarshalBinary(eth[exo.EthHeaderLen:]); err != nil {
		x.reason = exo.ReasonOf(err)
		return x
	}
	s := &t.shadow
	switch {
	case f.Group != s.Group:
		x.reason = exo.ReasonBadGroup
		return x
	case !t.keys.Verify(&f):
		x.reason = exo.ReasonBadTag
		return x
	case len(t.roster) > 0 && int(f.Sender) < int(s.Hosts) && f.Epoch <= s.Epoch &&
		(int(f.Sender) >= len(t.roster) || !bytes.Equal(t.roster[f.Sender], eth[6:12])):
		x.reason = exo.ReasonBadSender
		return x
	}
	var head *exo.Batch
	if len(t.queue) > 0 {
		head = &t.queue[0]
	}
	agreed := s.Agreed
	x.reason, x.turn = s.Step(&f, head, t.keys.Key[s.Phase&1])
	if x.turn.Popped {
		t.queue = t.queue[1:]
	}
	if x.reason == exo.ReasonAccept {
		t.bits = t.bits<<1 | b2u(f.Count != 0)
		if x.turn.Sent {
			t.bits = t.bits<<1 | b2u(x.turn.Frame.Count != 0)
		}
		// Worth a wake-up: an entry with records newly agreed.
		for q := agreed; q < s.Agreed && !x.worth; q++ {
			back := s.Append - 1 - q
			x.worth = back >= 64 || t.bits>>back&1 == 1
		}
	}
	if x.turn.Sent {
		x.tx = append(x.tx, t.hdr[:]...)
		var err error
		if x.tx, err = x.turn.Frame.AppendBinary(x.tx); err != nil {
			x.tx = nil
		}
	}
	return x
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// compare counts a frame on which the engine and the Go rule differ, and
// keeps the first differences' descriptions.
func (t *Token) compare(v *Verdict, x *expectation) {
	t.c.checked++
	var why []string
	tv := v.Token
	if v.Reason != x.reason {
		why = append(why, fmt.Sprintf("verdict %s, the rule %s", v.Reason, x.reason))
	}
	if tv.Record != x.turn.Record || tv.Sent != x.turn.Sent || tv.Popped != x.turn.Popped ||
		tv.Handoff != x.turn.Handoff || tv.Halt != x.turn.Halt {
		why = append(why, fmt.Sprintf("record/sent/popped/handoff/halt %v/%v/%v/%v/%v, the rule %v/%v/%v/%v/%v",
			tv.Record, tv.Sent, tv.Popped, tv.Handoff, tv.Halt,
			x.turn.Record, x.turn.Sent, x.turn.Popped, x.turn.Handoff, x.turn.Halt))
	}
	if tv.Record && (tv.Kseq != x.kseq || tv.QHead != t.shadow.QHead || tv.Armed != x.armed) {
		why = append(why, fmt.Sprintf("kseq %d qhead %d armed %v, the rule %d %d %v", tv.Kseq, tv.QHead, tv.Armed,
			x.kseq, t.shadow.QHead, x.armed))
	}
	if !bytes.Equal(v.TX, x.tx) {
		why = append(why, fmt.Sprintf("sent %x, the rule %x", v.TX, x.tx))
	}
	if len(why) == 0 {
		return
	}
	t.c.differs++
	if len(t.diffs) < maxDiffs {
		t.diffs = append(t.diffs, fmt.Sprintf("frame %d (seq %d from %d): %v", t.c.frames, v.Seq, v.Sender, why))
	}
}

// Differences returns descriptions of the first frames on which the
// engine and the Go rule differed (at most 16), for the log.
func (t *Token) Differences() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.diffs...)
}

// NumDifferences returns how many descriptions Differences holds.
func (t *Token) NumDifferences() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.diffs)
}

// queueRecord queues the record of a verdict (mu held).
func (t *Token) queueRecord(v *Verdict, eth []byte, worth bool) {
	r := token.Record{Kseq: v.Token.Kseq, QHead: v.Token.QHead, Reason: v.Reason, Armed: v.Token.Armed,
		Sent: v.Token.Sent, Popped: v.Token.Popped, Handoff: v.Token.Handoff, Halt: v.Token.Halt,
		Written: time.Since(t.start)}
	if v.Token.Sent && len(v.TX) >= exo.EthHeaderLen+exo.OffTag+8 {
		r.TxTag = binary.BigEndian.Uint64(v.TX[exo.EthHeaderLen+exo.OffTag:])
	}
	t.qmu.Lock()
	defer t.qmu.Unlock()
	q := queuedRecord{r: r, off: len(t.arena), n: len(eth) - exo.EthHeaderLen, srcOff: len(t.arena) + len(eth) - exo.EthHeaderLen}
	t.arena = append(t.arena, eth[exo.EthHeaderLen:]...)
	t.arena = append(t.arena, eth[6:12]...)
	t.recs = append(t.recs, q)
	urgent := v.Reason != exo.ReasonAccept || v.Token.Halt || len(t.recs) > MaxQueuedRecords/2
	if t.waitMode == waitNone || (t.waitMode == waitUrgent && !urgent) || (t.waitMode == waitWorth && !worth && !urgent) {
		return
	}
	t.waitMode = waitNone
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Records calls fn for every record queued, in the order the engine made
// them (Kseq order), and returns how many. A record's Frame and Src are
// valid during the call only.
func (t *Token) Records(fn func(*token.Record)) (int, error) {
	t.qmu.Lock()
	recs, arena := t.recs, t.arena
	t.recs, t.arena = t.spare[:0], t.spareAr[:0]
	t.qmu.Unlock()
	for i := range recs {
		q := &recs[i]
		q.r.Frame = arena[q.off : q.off+q.n : q.off+q.n]
		q.r.Src = arena[q.srcOff : q.srcOff+6 : q.srcOff+6]
		fn(&q.r)
		q.r.Frame, q.r.Src = nil, nil
	}
	t.qmu.Lock()
	t.spare, t.spareAr = recs[:0], arena[:0]
	t.qmu.Unlock()
	return len(recs), nil
}

// Wait blocks until records can be read, deadline passes
// (os.ErrDeadlineExceeded; the zero time: no deadline) or the Token is
// closed (an error matching net.ErrClosed). Records waiting already
// return at once; else the next record worth a wake-up wakes it: one
// that agrees an entry with records, the slow path, a halt, or with
// SetUrgentOnly on only the last two (and a queue half full), as the XDP
// program's exo_waiter does (docs/token.md section 2).
func (t *Token) Wait(deadline time.Time) error {
	t.qmu.Lock()
	select {
	case <-t.done:
		t.qmu.Unlock()
		return fmt.Errorf("fpga: token: %w", net.ErrClosed)
	default:
	}
	select {
	case <-t.wake: // a stale wake-up
	default:
	}
	if len(t.recs) > 0 {
		t.qmu.Unlock()
		return nil
	}
	t.waitMode = waitWorth
	if t.urgent.Load() {
		t.waitMode = waitUrgent
	}
	t.qmu.Unlock()
	var expired <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			t.stopWait()
			return os.ErrDeadlineExceeded
		}
		if t.timer == nil {
			t.timer = time.NewTimer(d)
		} else {
			t.timer.Reset(d)
		}
		defer t.timer.Stop()
		expired = t.timer.C
	}
	select {
	case <-t.wake:
		return nil
	case <-expired:
		t.stopWait()
		return os.ErrDeadlineExceeded
	case <-t.done:
		t.stopWait()
		return fmt.Errorf("fpga: token: %w", net.ErrClosed)
	}
}

func (t *Token) stopWait() {
	t.qmu.Lock()
	t.waitMode = waitNone
	t.qmu.Unlock()
}

// SetUrgentOnly sets what wakes Wait (Wait's comment). Turned off, a Wait
// asleep waits for every record worth a wake-up from then on.
func (t *Token) SetUrgentOnly(on bool) {
	if t.urgent.Swap(on) == on || on {
		return
	}
	t.qmu.Lock()
	if t.waitMode == waitUrgent {
		t.waitMode = waitWorth
	}
	t.qmu.Unlock()
}

// Since returns how long ago a record's Written was.
func (t *Token) Since(written time.Duration) time.Duration {
	if written == 0 {
		return 0
	}
	return time.Since(t.start) - written
}

// Halt stops the engine (halted = 1: it accepts and sends nothing until
// Set) and returns its state, read from its registers: Kseq is the number
// of records it produced, all of them queued. A state that differs from
// the Go rule's is counted (STATE_DIFFERS).
func (t *Token) Halt() (exo.Engine, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.eng.Halt(); err != nil {
		return exo.Engine{}, err
	}
	t.shadow.Halted = true
	st, err := t.eng.TokenState()
	if err != nil {
		return st, err
	}
	if st != t.shadow {
		t.c.stateDiffers++
		if len(t.diffs) < maxDiffs {
			t.diffs = append(t.diffs, fmt.Sprintf("halted at kseq %d: the engine's state %+v, the rule's %+v", st.Kseq, st, t.shadow))
		}
		t.shadow = st
	}
	return st, nil
}

// Set is the compare-and-set of the control plane (Engine.Arm): it writes
// e, all but Kseq, if the engine has produced exactly e.Kseq records, and
// reports whether it did. The Go rule beside it takes the same state.
func (t *Token) Set(e exo.Engine) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ok, err := t.eng.Arm(e)
	if err != nil || !ok {
		// Arm halts before it compares (the engine was halted anyway).
		t.shadow.Halted = true
		return false, err
	}
	t.shadow = e
	t.bits = ^uint64(0)
	return true, nil
}

// Push publishes a batch at the tail of the engine's queue (Engine.Push);
// false if the queue is full.
func (t *Token) Push(b exo.Batch) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ok, err := t.eng.Push(b)
	if err != nil || !ok {
		return false, err
	}
	b.Payload = append([]byte(nil), b.Payload...)
	t.queue = append(t.queue, b)
	t.slots[t.tail%uint64(len(t.slots))] = takenSlot{i: t.tail, b: b, ok: true}
	t.tail++
	return true, nil
}

// Reclaim takes back the batches the halted engine has not taken
// (Engine.Reclaim: tail = qhead) and returns how many.
func (t *Token) Reclaim() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.eng.Reclaim()
	if err != nil {
		return n, err
	}
	t.queue = nil
	t.tail = t.shadow.QHead
	return n, nil
}

// Release does nothing: the simulated engine goes with the daemon's
// process, so no record outlives its control plane (nothing is pinned).
func (t *Token) Release() error { return nil }

// Taken returns batch i (QHead i+1 after the engine took it) while its
// slot still holds it.
func (t *Token) Taken(i uint64) (exo.Batch, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots[i%uint64(len(t.slots))]
	if !s.ok || s.i != i {
		return exo.Batch{}, false
	}
	return s.b, true
}

// TokenCounters returns the engine's transmit counters (TX, TX_EMPTY,
// TX_UNDERRUN, HANDOFF, HALTS, SPEC_MISS, BUSY_DROP, PUSH_FULL,
// TURNAROUND_LAST, TURNAROUND_MAX: cycles from a token's verdict to its
// frame's first beat) and Token's own: RECORDS, RING_FULL (frames dropped
// for a full record queue), TX_ERR (frames the socket did not take),
// RULE_CHECKED and RULE_DIFFERS (frames compared with the Go rule, and
// those on which the two differed), STATE_DIFFERS (halts that found the
// engine's state not the rule's), SIM_ERR, TLAST_TO_TX_LAST and _MAX
// (cycles from a token's tlast beat to its answer's first beat, counted as
// the verdict's latency), SEND_NS_TOTAL (wall time from a token handed to
// Receive to its answer handed to the socket, summed over the frames
// sent: the simulation's cost per hop).
func (t *Token) TokenCounters() (map[string]uint64, error) {
	c, err := t.eng.TxCounters()
	t.mu.Lock()
	o := t.c
	t.mu.Unlock()
	m := map[string]uint64{"TX": uint64(c.Sent), "TX_EMPTY": uint64(c.Empty), "TX_UNDERRUN": uint64(c.Underrun),
		"HANDOFF": uint64(c.Handoff), "HALTS": uint64(c.Halts), "SPEC_MISS": uint64(c.SpecMiss), "BUSY_DROP": uint64(c.BusyDrop),
		"PUSH_FULL": uint64(c.PushFull), "TURNAROUND_LAST": uint64(c.TurnaroundLast), "TURNAROUND_MAX": uint64(c.TurnaroundMax),
		"FRAMES": o.frames, "RECORDS": o.records, "RING_FULL": o.ringFull, "TX_ERR": o.txErrs, "RULE_CHECKED": o.checked,
		"RULE_DIFFERS": o.differs, "STATE_DIFFERS": o.stateDiffers, "SIM_ERR": o.simErrs,
		"TLAST_TO_TX_LAST": o.txLatLast, "TLAST_TO_TX_MAX": o.txLatMax, "SEND_NS_TOTAL": o.sendNs}
	return m, err
}
