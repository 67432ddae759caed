package exo

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// The core's side of a fast path that sends (token mode, docs/token.md):
// the state it arms the fast path with (FastPath), the step of a frame the
// armed fast path already handled (StepFast), and the fence of a host that
// restarted after its fast path may have sent frames its log does not hold.

// ErrNotNext is returned by StepSent when the frame the fast path says it
// sent is not the entry this host sends next in its log: the fast path and
// the core are out of step.
var ErrNotNext = errors.New("exo: the fast path's frame is not this host's next entry")

// FastPath returns the state a fast path that sends is armed with for this
// host's log (docs/token.md): the pointers, this host's position, its
// predecessor in token order, the key phase it sends under, the run of
// empty passes at the end of the log and where the idle back-off starts.
// Kseq and QHead are the control plane's to fill.
//
// ok reports whether the log is in the plain case, where the fast path may
// run on its own: not halted, not amnesiac, a member, not behind the rack
// nor deaf after a restart, no view change, no fetch, no held frame, no
// catch-up, no proposal or roster change queued here, no roster change
// pending in the log, no key announcement to send nor a staged key, no
// re-admission to announce, this host not skipped, PassDelay 0, and not
// fenced. Everything else is the control plane's, with the fast path
// halted.
func (nd *Node) FastPath() (e Engine, ok bool) {
	e.Pointers = nd.p
	e.On = true
	e.Me = nd.id
	e.Pred = nd.pred()
	e.Phase = nd.keys.send
	e.EmptyRun = uint32(min(nd.emptyRun, math.MaxUint32))
	if nd.hurry > 0 {
		// A wake (MsgWake) asked for passes at once: the fast path
		// passes at full speed again, for IdleRun passes, rather than
		// hand each one to the control plane (the wake would then cross
		// the rack at the control plane's pace).
		e.EmptyRun = 0
	}
	e.IdleRun = NoIdleRun
	if nd.cfg.IdleBackoffMax > 0 {
		e.IdleRun = uint32(min(nd.cfg.IdleRotations*nd.n, math.MaxUint32-1))
	}
	return e, nd.plain()
}

// plain reports whether a fast path may run on this host's log on its own
// (FastPath).
func (nd *Node) plain() bool { return nd.Pending() == 0 && nd.plainButQueue() }

// plainButQueue is plain without the condition on the proposals queued
// here (TakePending).
func (nd *Node) plainButQueue() bool {
	ks := &nd.keys
	return !nd.p.Halted && !nd.amnesiac && !nd.Removed() && !nd.heardAhead() && nd.vc == nil &&
		!nd.fetching && len(nd.held) == 0 && nd.catchup == nil && nd.pendingCfg == nil &&
		!nd.ms.pend && !nd.ms.hasNext && !nd.freshRoster() && nd.cfg.PassDelay == 0 &&
		!ks.staged && !ks.announce && !ks.reannounce && !nd.skipped[nd.id] && !nd.readmitPending() && !nd.fenced
}

// TakePending hands the proposals queued here (Propose; not a roster
// change) over to a fast path, in order, when they are all that keeps the
// log from the plain case (FastPath): a core that queued proposals while
// the fast path was halted would otherwise keep sending them itself, and
// under a steady load never let the fast path run again. Otherwise it
// returns nil and keeps them.
func (nd *Node) TakePending() [][]byte {
	if nd.Pending() == 0 || !nd.plainButQueue() {
		return nil
	}
	out := slices.Clone(nd.pending[nd.pendHead:])
	clear(nd.pending)
	nd.pending, nd.pendHead = nd.pending[:0], 0
	return out
}

// readmitPending reports whether the next frame this host sends carries a
// re-admission (send).
func (nd *Node) readmitPending() bool {
	for x := 0; x < nd.n; x++ {
		if nd.readmit[x] && nd.skipped[x] {
			return true
		}
	}
	return false
}

// pred returns the position whose frame hands this host the token: the
// last position before it, in token order, that the log does not skip
// (this host itself in a rack of one).
func (nd *Node) pred() uint8 {
	for i := 1; i < nd.n; i++ {
		y := uint8((int(nd.id) - i + nd.n) % nd.n)
		if !nd.skipped[y] {
			return y
		}
	}
	return nd.id
}

// StepFast steps a frame that an armed fast path already handled: it
// classified f and, on ACCEPT, appended it to its own copy of the log. The
// core steps f as StepFrame does, except that the tag is not checked again
// (the fast path checked it before anything else) and this host sends
// nothing from it: the fast path decides, and when it answered f with this
// host's next frame, StepSent follows.
func (nd *Node) StepFast(f *Frame) Reason {
	if f.Type != FrameData {
		nd.reject(f, ReasonBadType)
		return ReasonBadType
	}
	if f.Group != nd.p.Group {
		nd.reject(f, ReasonBadGroup)
		return ReasonBadGroup
	}
	nd.sawPhase(f.Sender, KeyPhaseOf(f.Flags))
	nd.heard(f)
	nd.quiet = true
	r := nd.step(f)
	nd.quiet = false
	return r
}

// StepSent appends the frame an armed fast path sent for this host right
// after the frame StepFast stepped: this host's next entry
// (Pointers.Next) with count records of payload, under its key phase. tag
// is the tag the fast path sent it with: it must be the one this host's key
// gives, or the two are out of step. ErrNotNext (wrapped) when this host
// may not send here (halted, or in its own history) or the tags differ:
// the frame is on the wire and the log does not hold it; the caller fences
// this host (Fence).
func (nd *Node) StepSent(count uint16, payload []byte, tag uint64) error {
	if !nd.canSend() {
		return fmt.Errorf("%w: this host may not send at seq %d (epoch %d, halted %v)", ErrNotNext, nd.p.Append, nd.p.Epoch, nd.p.Halted)
	}
	var flags uint16
	if nd.keys.send == 1 {
		flags = FlagKeyPhase
	}
	f := nd.p.Next(nd.id, count, flags, payload)
	nd.keys.seal(&f)
	if f.Tag != tag {
		return fmt.Errorf("%w: seq %d: the fast path's tag %016x, this host's %016x", ErrNotNext, f.Seq, tag, f.Tag)
	}
	nd.appendEntry(entryOf(&f))
	return nil
}

// ArmFast records that a fast path is about to be armed on this host's log
// in its current epoch: HardState.FastEpoch names it until ClearFast. The
// embedder persists the durable state (HardStateMeta) before it arms the
// fast path, so that a restart knows its log may lack frames of that epoch
// (the fence, docs/token.md section 5). It reports whether the durable
// state changed (the first arming in an epoch).
func (nd *Node) ArmFast() bool {
	if nd.fastArmed && nd.fastEpoch == nd.p.Epoch {
		return false
	}
	nd.fastArmed, nd.fastEpoch = true, nd.p.Epoch
	return true
}

// ClearFast records that the fast path is stopped and every frame it sent
// is in the log (a clean stop): the durable state no longer fences a
// restart.
func (nd *Node) ClearFast() { nd.fastArmed = false }

// Fence fences this host in its log's epoch (docs/token.md section 5):
// its fast path sent a frame that the log does not hold (StepSent returned
// ErrNotNext), so it sends nothing more in this epoch, and its promises
// count as known only up to its log's end, until it installs a later
// epoch.
func (nd *Node) Fence() {
	if !nd.fenced {
		nd.fenceTicks = 0
	}
	nd.fenced, nd.hardFence = true, true
}

// Fenced reports whether this host restarted after its fast path may have
// sent frames of its log's epoch that the log does not hold: it sends
// nothing in that epoch, and its promises count as known only up to its
// log's end, until it installs a later epoch (docs/token.md section 5).
func (nd *Node) Fenced() bool { return nd.fenced }

// Idle reports whether the rack backs off (docs/protocol.md section 3): a
// run of idle rotations at the end of the log, so empty passes wait and a
// fast path that sends hands the token to the control plane. A proposal
// then goes to the core, which wakes the rack (MsgWake).
func (nd *Node) Idle() bool { return nd.backoff() > nd.cfg.PassDelay }

// WakeRack asks a rack that backs off to pass the token at once (MsgWake)
// for proposals that a fast path holds for this host, as Propose does for
// the core's own: the rack may have gone idle after they were queued (a
// host with an empty queue hands the token to its control plane, which
// backs off). Nothing unless this log shows the back-off and another host
// holds the token; once until this host sends.
func (nd *Node) WakeRack() { nd.wake() }

// RecoverSent appends, at a restart, a frame the fast path sent for this
// host before its control plane stopped: the fast path outlived the
// daemon (its maps pinned) and its ring still held the record of the frame
// f that it answered, which the restarted core has just stepped
// (docs/token.md section 5). The frame sent was this host's next entry
// after f, with count records of payload and the tag tag. It reports
// nil when the log now holds it: appended, or held already (the daemon
// had logged it before it stopped). Unlike StepSent it does not need this
// host to be allowed to send: the frame is on the wire already, and
// logging it is what lifts the fence (Unfence).
func (nd *Node) RecoverSent(f *Frame, count uint16, payload []byte, tag uint64) error {
	s := f.Seq + 1
	if f.Epoch != nd.p.Epoch {
		return fmt.Errorf("%w: the frame it answered is of epoch %d, the log's is %d", ErrNotNext, f.Epoch, nd.p.Epoch)
	}
	if s < nd.p.Append {
		e, ok := nd.Entry(s)
		if !ok || e.Sender != nd.id || e.Epoch != f.Epoch || e.Count != count || string(e.Payload) != string(payload) {
			return fmt.Errorf("%w: seq %d of the log is not the frame it sent", ErrNotNext, s)
		}
		return nil
	}
	if s != nd.p.Append || nd.p.Halted || nd.p.InHistory(nd.id) {
		return fmt.Errorf("%w: seq %d is not this host's next entry (append %d, halted %v)", ErrNotNext, s, nd.p.Append, nd.p.Halted)
	}
	for ph := uint8(0); ph < 2; ph++ {
		if !nd.keys.ring.Valid[ph] {
			continue
		}
		var flags uint16
		if ph == 1 {
			flags = FlagKeyPhase
		}
		g := nd.p.Next(nd.id, count, flags, payload)
		g.Seal(nd.keys.ring.Key[ph])
		if g.Tag == tag {
			nd.appendEntry(entryOf(&g))
			return nil
		}
	}
	return fmt.Errorf("%w: seq %d: no key of this host gives the fast path's tag %016x", ErrNotNext, s, tag)
}

// Unfence lifts the fence of a restart: the log holds every frame the
// fast path sent (its records were all stepped again, RecoverSent). A
// fence of Fence stays (HardState.Fenced): only a later epoch ends it.
func (nd *Node) Unfence() { nd.fenced = nd.hardFence }
