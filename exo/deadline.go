package exo

import "math"

// NoTick is NextTick's answer when no number of ticks alone can make this
// host do anything: only a frame, a message or a proposal can.
const NoTick = math.MaxInt32

// NextTick returns how many calls of Tick, with no other input between
// them, can pass before one of them may have something to do (send a
// frame, time out, retry a fetch, start a view change, retire a key): the
// first NextTick()-1 of them would change counters only. An embedder that
// keeps time in wall-clock ticks sleeps that long instead of ticking at a
// fixed rate, and then calls Tick once for every tick that elapsed (the
// counters must still count them): an idle rack costs a wake-up per
// deadline, not one per tick. Any input may move the deadline either way,
// so it asks again after each Ready. The simulator checks the promise on
// every tick of every run (the silent ticks produce nothing).
func (nd *Node) NextTick() int {
	d := NoTick
	at := func(k int) { d = min(d, max(k, 1)) }
	ks := &nd.keys
	if ks.oldValid {
		switch {
		case ks.grace > 0:
			at(ks.grace)
		case len(nd.notMoved()) == 0 && !nd.ms.pend && !nd.ms.hasNext && !nd.Removed():
			at(1)
		}
	}
	if nd.p.Halted {
		if nd.switchPending() && len(nd.log) > 0 && nd.log[len(nd.log)-1].Sender == nd.id {
			at(nd.cfg.RetransmitTicks - nd.haltedTicks%nd.cfg.RetransmitTicks)
		}
		switch {
		case nd.vc == nil && nd.amnesiac && nd.transfer.on:
			if nd.fetching {
				at(nd.fetchRTO() - nd.fetchTicks)
			} else {
				at(nd.transfer.wait) // paced, or at once
				if pr := nd.transfer.pacer.probe; pr > 0 && nd.transfer.wait > pr/2 {
					at(nd.transfer.wait - pr/2) // a pause's measured half begins (pacer.go)
				}
			}
		case nd.notMember && nd.vc == nil:
		case nd.vc != nil:
			at(nd.vcTimeout() - nd.vc.ticks)
		default:
			at(nd.promiseWait() - nd.haltedTicks)
		}
		if nd.catchup != nil && nd.fetching {
			at(nd.fetchRTO() - nd.fetchTicks)
		}
		if nd.leftOut > 0 {
			at(nd.leftOut) // noteLeftOut's view change
		}
		return d
	}
	if k := nd.untilPeakForgotten(); k > 0 {
		at(k)
	}
	if nd.fetching {
		at(nd.fetchRTO() - nd.fetchTicks)
	}
	if nd.leadFor > 0 {
		at(nd.leadFor)
	}
	if nd.divergeIn > 0 {
		at(nd.divergeIn)
	}
	if nd.skipped[nd.id] {
		at(nd.cfg.RejoinTicks - nd.skippedTicks)
	}
	if len(nd.log) > 0 && !nd.freshRoster() && nd.log[len(nd.log)-1].Sender == nd.id {
		r := nd.retransmitEvery()
		at(r - nd.idle%r)
	}
	if nd.fenced && nd.vc == nil && !nd.notMember {
		at(nd.cfg.TokenTimeout - nd.fenceTicks)
	}
	if nd.stuckUnlessLater() {
		// stuck, once no later epoch was heard for laterSilence: the
		// probes (probeDue) and tokenStuck's view change (its evidence
		// ages: checked at every probe, and the probes' answers are what
		// renew it).
		from := 1
		if nd.hearsLater() {
			from = nd.laterSilence() + 1 - nd.laterIdle
		}
		if holder := nd.Holder(); !nd.fetching && holder != nd.id {
			at(max(from, nd.nextProbe(holder)-nd.idle))
		}
		k := max(from, nd.stuckAfter()-nd.idle)
		if nd.vcHeardAt > 0 {
			k = max(k, int(int64(nd.vcHeardAt)+int64(nd.cfg.ViewChangeTimeout)+1-int64(nd.clock)))
		}
		at(k)
	}
	if nd.woke && nd.hasProposal() { // the wake sent again (Tick)
		at(nd.cfg.TokenTimeout - nd.idle%nd.cfg.TokenTimeout)
	}
	// canSend at the tick k from now: its static part, and the catch-up
	// rule that lets a host behind send after 2 TokenTimeouts of silence.
	static := !nd.amnesiac && !nd.Removed() && !nd.fenced && (brokenDistinct || !nd.p.InHistory(nd.id))
	sendFrom := 1 // the first tick (from now) at which canSend holds
	if nd.heardAhead() {
		sendFrom = max(1, 2*nd.cfg.TokenTimeout+1-nd.idle)
	}
	if nd.hearsLater() {
		sendFrom = max(sendFrom, nd.laterSilence()+1-nd.laterIdle)
	}
	holder := nd.Holder()
	switch {
	case holder == nd.id:
		if static {
			if nd.hasProposal() {
				at(sendFrom)
			} else {
				at(max(sendFrom, nd.idleDelay()-nd.idle))
			}
		}
	case nd.p.Epoch > 0 && nd.p.Append == nd.p.EpochStart && nd.p.InHistory(nd.id) && nd.vc == nil && !nd.notMember:
		at(nd.neverBeganAfter() - nd.idle)
	default:
		if static {
			at(max(sendFrom, nd.takeoverWait(holder)-nd.idle))
		}
	}
	return d
}
