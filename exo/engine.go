package exo

import "math"

// This file is the transmit side of the fast path: the rule by which a
// fast path that holds the token (the XDP program with xdp_token on, the
// FPGA engine's TX port) answers the frame of this host's predecessor with
// this host's next frame, without the host's CPU on the hop. It is defined
// once, here; the golden vectors (format 5, docs/vectors.md) are generated
// from Engine.Step, and the C and Verilog twins must reproduce them byte
// for byte. docs/token.md describes the whole path: the rule, the records
// the fast path hands to the control plane, and the hand-off.

// Tx is the transmit side of a fast path's state.
type Tx struct {
	// On: the fast path sends this host's frames (token mode). Off, the
	// fast path classifies and accepts only, and Step is Classify and
	// Accept: the receive-only fast path of Pointers.
	On bool
	// Me is this host's position in the roster: the sender of the frames
	// the fast path sends.
	Me uint8
	// Pred is the position whose accepted frame hands this host the token:
	// the last position before Me, in token order, that the log does not
	// skip (Node.FastPath).
	Pred uint8
	// Phase is the key phase (key slot 0 or 1) of the frames it sends.
	Phase uint8
	// EmptyRun counts the token passes (frames without records) at the end
	// of the log: the idle back-off of the core (Node) starts once it
	// reaches IdleRun.
	EmptyRun uint32
	// IdleRun is where the fast path stops passing an empty token: at
	// EmptyRun >= IdleRun with an empty queue, the predecessor's frame
	// hands the token to the control plane, which sends the empty pass
	// after the idle back-off. An idle rack does not spin at line rate.
	IdleRun uint32
	// Kseq counts the records the fast path has handed to the control
	// plane (one per frame it accepted or passed to the slow path).
	Kseq uint64
	// QHead counts the batches it has taken from its queue.
	QHead uint64
}

// Engine is the whole state of a fast path that can send: the pointers of
// the receive side and the transmit side. Halted (in Pointers) is how the
// control plane disarms it: a halted fast path accepts nothing and sends
// nothing; every frame of the current or a later epoch goes to the control
// plane (HALTED, FUTURE_EPOCH).
type Engine struct {
	Pointers
	Tx
}

// Batch is one payload waiting in a fast path's transmit queue: Count
// records, framed as on the wire ([len u16][len bytes] each).
type Batch struct {
	Count   uint16
	Payload []byte
}

// Turn is what Engine.Step did besides classifying the frame.
type Turn struct {
	// Record: the frame goes to the control plane, in a record numbered
	// Kseq-1 (ACCEPT, or a slow-path verdict, with token mode on). Every
	// other verdict is dropped by the fast path and counted.
	Record bool
	// Sent: Frame is this host's next entry, sealed, sent right after the
	// received frame (the fast path accepted it as its own: the state's
	// append pointer is past it).
	Sent  bool
	Frame Frame
	// Popped: Frame carries the queue's head batch (QHead moved).
	Popped bool
	// Handoff: the frame handed this host the token, the rack was idle
	// (EmptyRun >= IdleRun) and the queue empty: the fast path halted
	// itself, and the control plane sends the pass after its back-off.
	Handoff bool
	// Halt: the fast path halted itself after this frame: Handoff, or a
	// slow-path verdict other than HALTED (a gap, a divergence, a later
	// epoch, a frame too far ahead): the control plane handles it with
	// the fast path stopped, and arms it again when the log is back to
	// the plain case.
	Halt bool
}

// MaxFastFrame is the longest frame (bytes after the Ethernet header) a
// fast path handles: one page of a linear XDP buffer. A fast path that
// sends builds no longer one.
const MaxFastFrame = 4096

// NoIdleRun is Tx.IdleRun when the idle back-off is off (IdleBackoffMax
// 0): the fast path passes an empty token at once, always.
const NoIdleRun = math.MaxUint32

// Step is the fast path's rule for one received frame that passed the
// codec, the group, the tag and the roster MAC checks. head is the batch
// at the head of the transmit queue (nil: empty), key the frame key of
// the slot Phase names. The order:
//
//  1. Classify; on ACCEPT, Accept (the receive side, unchanged).
//  2. With token mode off (On false), nothing else.
//  3. Record: ACCEPT, the slow-path verdicts, and a frame of a later
//     epoch that does not fit the roster (BAD_SENDER, BAD_HISTLEN,
//     BAD_HISTORY_ID: the roster changed) go to the control plane
//     (Kseq++); every other verdict is dropped.
//  4. A recorded verdict other than ACCEPT and HALTED halts the fast path.
//  5. An ACCEPT from Pred, with Me not in the history after it: if the
//     queue holds a batch or EmptyRun < IdleRun, this host's next frame
//     is built (Pointers.Next: seq Append, the epoch, the history, the
//     phase bit, the head batch or no records), sealed under key, and
//     accepted as this host's own entry (Accept(Me), EmptyRun, QHead);
//     otherwise (IdleRun is not NoIdleRun) the fast path halts and hands
//     the token to the control plane. It hands off too when the head
//     batch would make a frame longer than MaxFastFrame.
//
// EmptyRun follows every accepted entry, received or sent: +1 for a frame
// without records (saturating), else 0.
func (e *Engine) Step(f *Frame, head *Batch, key [TagKeyLen]byte) (Reason, Turn) {
	var t Turn
	r := e.Classify(f)
	if r == ReasonAccept {
		e.Accept(f.Sender, f.Seq)
		e.pass(f.Count)
	}
	if !e.On {
		return r, t
	}
	if r != ReasonAccept && !r.SlowPath() && !laterRoster(f, &e.Pointers, r) {
		return r, t
	}
	t.Record = true
	e.Kseq++
	if r != ReasonAccept {
		if r != ReasonHalted {
			e.Halted = true
			t.Halt = true
		}
		return r, t
	}
	if f.Sender != e.Pred || e.InHistory(e.Me) {
		return r, t
	}
	if head == nil && e.IdleRun != NoIdleRun && e.EmptyRun >= e.IdleRun {
		e.Halted = true
		t.Halt, t.Handoff = true, true
		return r, t
	}
	if head != nil && HeaderLen+e.H()+len(head.Payload) > MaxFastFrame {
		// The frame would be longer than a fast path handles (nor would
		// its receivers' fast paths): the control plane, which never
		// queues such a batch, takes the token and the batch.
		e.Halted = true
		t.Halt, t.Handoff = true, true
		return r, t
	}
	var flags uint16
	if e.Phase&1 == 1 {
		flags = FlagKeyPhase
	}
	if head != nil {
		t.Frame = e.Next(e.Me, head.Count, flags, head.Payload)
		t.Popped = true
		e.QHead++
	} else {
		t.Frame = e.Next(e.Me, 0, flags, nil)
	}
	t.Frame.History = append([]uint8(nil), t.Frame.History...) // Accept below moves the history
	t.Frame.Seal(key)
	t.Sent = true
	e.Accept(e.Me, t.Frame.Seq)
	e.pass(t.Frame.Count)
	return r, t
}

// laterRoster reports whether f, refused with r, is a frame of a later
// epoch that does not fit this roster (BAD_SENDER, BAD_HISTLEN,
// BAD_HISTORY_ID): a host that missed a membership change hears the rack
// only through such frames (the core catches up from them, Node.step), so
// a fast path that sends hands them up, and halts, instead of dropping
// them.
func laterRoster(f *Frame, p *Pointers, r Reason) bool {
	return f.Epoch > p.Epoch && (r == ReasonBadSender || r == ReasonBadHistlen || r == ReasonBadHistoryID)
}

// pass moves EmptyRun past an accepted entry of count records.
func (e *Engine) pass(count uint16) {
	switch {
	case count != 0:
		e.EmptyRun = 0
	case e.EmptyRun < math.MaxUint32:
		e.EmptyRun++
	}
}

// Next returns the frame host position me sends at the append pointer:
// seq Append, this epoch, the history Hist(), count records of payload,
// flags (the key phase bit, or READMIT | host id), no tag. It is the one
// definition of the frame a host sends: the core's own sends (Node) and
// the fast path's (Engine.Step) both build it here. Its History aliases
// p's: copy it before p moves on.
func (p *Pointers) Next(me uint8, count uint16, flags uint16, payload []byte) Frame {
	return Frame{Type: FrameData, Group: p.Group, Sender: me, Epoch: p.Epoch, Seq: p.Append,
		Count: count, Flags: flags, History: p.Hist(), Payload: payload}
}
