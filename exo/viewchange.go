package exo

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

// A view change moves the rack to a new epoch after a divergence (a healed
// partition, two hosts that took the token at once), a lost install, a
// restart without state, or a skipped host that asks to be re-admitted. It is
// Paxos phase 1 and 2 over whole logs:
//
//  1. The initiator picks an epoch above every epoch it has seen, unique to it
//     (epoch mod n == its id), promises it itself and sends Prepare.
//  2. Every host that has not promised a newer epoch promises this one: from
//     now on it accepts no frame of an older epoch and sends none. It answers
//     with its log above min(initiator's agreed, own agreed).
//  3. With the promises of a majority of hosts that kept their state, the
//     initiator computes the new log with Resolve and sends Install; every
//     host that has not promised a newer epoch adopts it.
//
// Resolve keeps every entry that may have been agreed anywhere; see its doc
// and docs/protocol.md for the argument, and exo/sim and exo/explore for the
// checking.
type viewChange struct {
	epoch    uint32
	lo       uint64
	ticks    int
	promises map[uint8]Message
	asked    []uint8 // the hosts sent its Prepare
	// ambiguous: a majority answered, but a fork could only be decided with
	// the knowledge of hosts that did not (or that lost their state).
	ambiguous bool
	// formers: the hosts out of the roster this amnesiac initiator knows
	// of were asked too (askFormers), as no member could witness.
	formers bool
	cause   Cause // why it started (Recovery shows it)
}

// nextEpoch returns the smallest epoch above floor that belongs to this host.
func (nd *Node) nextEpoch(floor uint32) uint32 {
	n := uint32(nd.n)
	e := floor + 1
	if r := e % n; r != uint32(nd.id) {
		e += (uint32(nd.id) + n - r) % n
	}
	return e
}

func (nd *Node) startViewChange(cause Cause) {
	if nd.notMember {
		return // out of the roster: it follows (and answers), it does not lead
	}
	floor := max(nd.promised, nd.p.Epoch, nd.maxEpochSeen)
	if nd.vc != nil {
		floor = max(floor, nd.vc.epoch)
	}
	e := nd.nextEpoch(floor)
	if !nd.ownPromise() {
		nd.before = promise{nd.promised, nd.promisedBy, nd.promisedByOK}
	}
	nd.promised = e
	nd.promisedBy, nd.promisedByOK = nd.uid, true
	nd.maxEpochSeen = max(nd.maxEpochSeen, e)
	nd.p.Halted = true
	nd.haltedTicks = 0
	lo := nd.p.Agreed // an amnesiac host: the end of its state transfer (transfer.go)
	nd.vc = &viewChange{epoch: e, lo: lo, promises: make(map[uint8]Message), cause: cause}
	nd.vc.promises[nd.uid] = nd.promise(e, lo)
	nd.rd.Events = append(nd.rd.Events, Event{Kind: EventViewChange, Epoch: e, Seq: nd.p.Append, Peer: nd.id, Cause: cause})
	for _, u := range nd.peers() {
		nd.askPromise(u)
	}
	nd.tryResolve()
}

// askPromise sends this host's view change's Prepare to member u.
func (nd *Node) askPromise(u uint8) {
	vc := nd.vc
	vc.asked = append(vc.asked, u)
	nd.rd.Messages = append(nd.rd.Messages, Message{Type: MsgPrepare, From: nd.uid, To: u, Epoch: vc.epoch, Lo: vc.lo, LogEpoch: nd.p.Epoch, Amnesiac: nd.amnesiac})
}

// diverged starts a view change after a divergence at seq, unless this
// host was refused as far behind a moment ago (deferVC): at once at the
// host whose position is seq's (mod n), each next one in token order half
// a takeover stagger later unless it promised a view change meanwhile. A
// takeover race shows every host the same divergence at once; each led a
// view change, they preempted each other, and a promise to one that gave
// up held its host until the promise timed out (lab: four view changes
// within 5 ms of one divergence, the rack still 500 ms later).
func (nd *Node) diverged(seq uint64) {
	if nd.deferVC > 0 {
		return
	}
	delay := 0
	if mine, ok := nd.posOf(nd.uid); ok && nd.n > 1 {
		delay = (int(mine) - int(seq%uint64(nd.n)) + nd.n) % nd.n * max(1, nd.cfg.TakeoverStagger/2)
	}
	if delay == 0 {
		nd.divergeIn = 0
		nd.startViewChange(CauseDivergence)
	} else if nd.divergeIn == 0 || delay < nd.divergeIn {
		nd.divergeIn = delay
	}
}

// promise is an epoch promised and to whom (ok: known; after a restart the
// owner of the durable promise is unknown).
type promise struct {
	epoch uint32
	by    uint8
	ok    bool
}

// ownPromise reports whether this host's promise is to a view change it
// leads itself.
func (nd *Node) ownPromise() bool { return nd.promisedByOK && nd.promisedBy == nd.uid }

// giveUp abandons the view change this host leads, to take a log of epoch
// e (from member from) that a view change of another host installed: an
// install, or a catch-up to the rack's later epoch. Only the initiator of
// an epoch can install it (epoch mod n is its position), so a promise a
// host made to its own view change binds nobody once it gives that view
// change up: it falls back to the promise it held before it began leading,
// which e must honour. A host that leads view changes while it is far
// behind would otherwise refuse the rack's later epoch for ever, each of
// its own attempts halting the rack anew (issue 12's long holds).
func (nd *Node) giveUp(e uint32, from uint8) bool {
	b := nd.before
	if !nd.ownPromise() || e < b.epoch || (e == b.epoch && b.ok && b.by != from) {
		return false
	}
	nd.vc = nil
	nd.promised, nd.promisedBy, nd.promisedByOK = b.epoch, b.by, b.ok
	nd.p.Halted = nd.promised > nd.p.Epoch || nd.switchPending() // a log ending at an effective change waits for the next epoch
	nd.haltedTicks = 0
	return true
}

// behind reports whether a host whose log is of epoch logEpoch and agreed
// below lo is far behind this one: in this epoch or an older one, and more
// than one fetch batch below this host's agreement pointer. Such a host
// does not lead a view change: every promise it would gather would carry
// what it lacks. In an older epoch it catches up by fetching, batch by
// batch; in this one (its log diverged, or it waits for an install that
// never came) a host that is not behind leads the view change instead.
func (nd *Node) behind(logEpoch uint32, lo uint64) bool {
	return !nd.amnesiac && nd.p.Epoch >= logEpoch && nd.p.Agreed > lo+uint64(nd.cfg.MaxFetchEntries)
}

// promise builds this host's answer to a Prepare of epoch e.
func (nd *Node) promise(e uint32, lo uint64) Message {
	start := max(min(lo, nd.p.Agreed, nd.p.Append), nd.base)
	m := Message{Type: MsgPromise, From: nd.uid, Epoch: e, LogEpoch: nd.p.Epoch,
		Agreed: nd.p.Agreed, Start: start, Amnesiac: nd.amnesiac, Fenced: nd.fenced, Skipped: nd.skippedList(), Roster: nd.ms.roster}
	if nd.amnesiac {
		m.Agreed, m.LogEpoch = 0, 0 // no witness: only agreed entries (a transfer), no epoch
	} else {
		m.Entries = slices.Clone(nd.log[start-nd.base:])
		if want := min(lo, nd.p.Agreed); want < start && nd.archOK && nd.archBase <= want && start-want <= uint64(nd.cfg.MaxFetchEntries) {
			// Compacted past the initiator's lo, but the archive holds
			// it: the embedder puts [want, start) before Entries (all of
			// it, or the promise is not sent), so that the initiator can
			// resolve from its lo.
			m.Start, m.ArchiveHi = want, start
			m.ArchiveLimit = FetchLimit{Entries: int(start - want)}
		}
	}
	return m
}

// ViewChangeAmbiguous reports whether this host runs a view change that
// waits on what only hosts that did not answer, or lost their state, could
// decide: a fork (ErrAmbiguous), or every member answered but too few kept
// their state (ErrLostQuorum). It waits rather than guess; the operator
// may accept the loss (AcceptLoss).
func (nd *Node) ViewChangeAmbiguous() bool { return nd.vc != nil && nd.vc.ambiguous }

// vcTimeout is the view-change timeout, doubled after each view change of
// this host that timed out (up to 4x): when promises are large (an initiator
// far behind) or several hosts compete, later attempts get the time to
// finish instead of preempting each other forever.
func (nd *Node) vcTimeout() int {
	return nd.cfg.ViewChangeTimeout << min(nd.vcFailures, 2)
}

// promiseWait is how long a halted host without a view change of its own
// (a promise whose install never came, or an amnesiac host) waits before
// it starts one: half a view-change timeout, staggered by id so that hosts
// rarely duel. A host that knows the rack to be far ahead of it
// (behindRack) waits a view-change timeout more: the install it waits for
// carries what it lacks (on the lab rack, a host 5,900 entries behind
// timed out on it and preempted the view changes of hosts up to date,
// nine in 1.6 s with a connected majority), and a host up to date leads
// for less.
func (nd *Node) promiseWait() int {
	wait := nd.vcTimeout()/2 + int(nd.id)*nd.cfg.TakeoverStagger/2 + 1
	if nd.behindRack() && !nd.amnesiac { // (an amnesiac host's own view change is its way back)
		wait += nd.vcTimeout()
	}
	if nd.lostQuorum && nd.promisedAmnesiac && !nd.ownPromise() && !nd.amnesiac {
		// Its own view change could not resolve for want of members that
		// kept their state, and it promised one of those that lost it:
		// leading again would only end that host's view change, which
		// the operator resolves (AcceptLoss) and which is the only way
		// that host rejoins. It waits out the initiator's retries (at most
		// four view-change timeouts apart). The two led in turn before,
		// each view change ambiguous for half the time, and the
		// simulator's operator found none to resolve (seed 3779 of
		// --hosts 3 --amnesia 0.2 --roster-changes 0.02 --accept-loss: a
		// roster of two, one member without its disk).
		wait += 4 * nd.cfg.ViewChangeTimeout
	}
	return wait
}

// behindRack reports whether frames this host heard show the rack
// further ahead of its log than it can hold (SeqWindow), or in a later
// epoch.
func (nd *Node) behindRack() bool {
	return nd.rackEpoch > nd.p.Epoch || nd.rackEpoch == nd.p.Epoch && nd.rackSeq > nd.p.Append+nd.cfg.SeqWindow
}

// leftOutAfter is how long a host must have been halted before a frame of
// the rack appending in its epoch without it makes it start a view change
// at once (noteLeftOut): longer than a view change takes, so that frames
// sent before the hosts heard a Prepare do not set off a second one; and
// doubled for each such view change since this host last installed an
// epoch, up to 16 times: a host that hears the rack but cannot reach it
// (a one-way cut) started 25-50 view changes a second on the lab rack.
// Two token timeouts at the floor of the adaptive timeout (floorTimeout):
// at its ceiling, the daemon's 200 ticks, a halted host heard the rack go
// on without it for up to 6,400 ticks (1.6 s) before it asked back in
// (TestLeftOutAtTheFloor).
func (nd *Node) leftOutAfter() int { return 2 * nd.floorTimeout() << min(nd.leftOuts, 4) }

// noteLeftOut takes note of a frame f that this halted host refused
// (ReasonHalted): of its epoch, at or past its append pointer, from a
// member. The rack goes on without it: after a partition heals, the
// minority's hosts are halted under promises of view changes of their own
// that could not gather a majority, and they waited for their retry timer
// (half the view-change timeout for a promise, the whole of it doubled
// after each that timed out, up to 4x, for their own: 100-800 ms in the
// daemon) while the rack sent frames they refused. The view change that
// brings them back starts now, after a stagger by position (a quarter of
// TakeoverStagger each) so that the minority's hosts rarely duel; a
// promise made meanwhile (haltedTicks back to 0) cancels it.
func (nd *Node) noteLeftOut(f *Frame) {
	if nd.leftOut > 0 || nd.haltedTicks < nd.leftOutAfter() || f.Seq < nd.p.Append || nd.notMember || nd.amnesiac {
		return
	}
	if vc := nd.vc; vc != nil {
		// Its own view change is left to its timer when it is young (it
		// may still resolve), when it waits on a fork with a majority of
		// promises (a new one would gather the same), or when the frame's
		// sender promised it (the frame left before the Prepare came):
		// preempting those made a lab host start 50 view changes a second.
		if _, promised := vc.promises[nd.uidOf(f.Sender)]; vc.ticks < nd.leftOutAfter() || vc.ambiguous || promised {
			return
		}
	}
	nd.leftOut = 1 + int(nd.id)*max(1, nd.cfg.TakeoverStagger/4)
}

func (nd *Node) tickHalted() {
	nd.haltedTicks++
	nd.leadFor = 0   // it promised a view change: no need to lead one for a host behind
	nd.divergeIn = 0 // nor one for a divergence
	nd.probes = 0    // tokenStuck's probes count while not halted
	if nd.leftOut > 0 && nd.haltedTicks < nd.leftOutAfter() {
		nd.leftOut = 0 // a promise or a view change began since
	}
	if nd.leftOut > 0 {
		if nd.leftOut--; nd.leftOut == 0 {
			nd.startViewChange(CauseLeftOut)
			nd.leftOuts++
			return
		}
	}
	if nd.switchPending() && len(nd.log) > 0 && nd.log[len(nd.log)-1].Sender == nd.id && nd.haltedTicks%nd.cfg.RetransmitTicks == 0 {
		// The entry that made a change take effect: the others need it to
		// switch too (the epoch ends with it).
		last := &nd.log[len(nd.log)-1]
		nd.rd.Frames = append(nd.rd.Frames, nd.frameOf(last))
		nd.event(EventRetransmit, last.Epoch, last.Seq, nd.id)
	}
	if nd.amnesiac && nd.vc == nil && nd.tickTransfer() {
		return // the agreed log first (transfer.go)
	}
	if nd.notMember && nd.vc == nil {
		return // out of the roster: it answers, it does not lead
	}
	if nd.vc != nil {
		nd.vc.ticks++
		if nd.vc.ticks >= nd.vcTimeout() {
			nd.vcFailures++
			nd.startViewChange(CauseRetry)
		}
		return
	}
	// A promise whose install never came, or an amnesiac host: start a view
	// change (promiseWait).
	if nd.haltedTicks >= nd.promiseWait() {
		cause := CausePromiseTimeout
		if nd.amnesiac {
			cause = CauseAmnesiac
		}
		nd.startViewChange(cause)
	}
}

// answeredFetch is a fetch this host answered: what it asked, and when
// (the clock).
type answeredFetch struct {
	epoch    uint32 // the requester's
	lo, hi   uint64
	transfer bool
	logEpoch uint32 // this host's log epoch when it answered
	at       uint64
	ok       bool
}

// answerOnce reports whether fetch m is to be answered, and notes it: not
// when its requester asked the same (epoch, range, kind) less than
// FetchTicks/2 ago and this host is in the epoch it answered that from,
// an answer to which is on its way. A requester asks the same again that
// soon only when an answer showed it the responder's epoch changed (the
// answer then differs); otherwise after its fetch's timeout, FetchTicks
// at least. So such a fetch is one that waited in the network with
// others: a lab host cut off for 1.5 s probed each member ten times into
// its stuck OOB connection, the probes came at once when the partition
// healed, and each member encoded and sent ten answers of 840 KB to each
// such host at the moment the heal needed its CPU. An answer lost after
// all is asked for again at the requester's next timeout.
func (nd *Node) answerOnce(m *Message) bool {
	if int(m.From) >= MaxHosts {
		return true
	}
	a := &nd.fetchesAnswered[m.From]
	if a.ok && a.epoch == m.Epoch && a.lo == m.Lo && a.hi == m.Hi && a.transfer == m.Amnesiac && a.logEpoch == nd.p.Epoch &&
		nd.clock-a.at < uint64(max(1, nd.cfg.FetchTicks/2)) {
		nd.fetchRepeats++
		return false
	}
	*a = answeredFetch{epoch: m.Epoch, lo: m.Lo, hi: m.Hi, transfer: m.Amnesiac, logEpoch: nd.p.Epoch, at: nd.clock, ok: true}
	return true
}

// Step applies one OOB message addressed to this host.
func (nd *Node) Step(m Message) {
	if m.Type == MsgGone {
		nd.stepGone(m.From)
		return
	}
	nd.alive(m.From)
	switch m.Type {
	case MsgPrepare, MsgPromise, MsgNack, MsgInstall:
		nd.vcHeardAt = nd.clock
	case MsgFetchResp:
		if int(m.From) < MaxHosts {
			nd.answeredAt[m.From] = nd.clock // a round trip (tokenStuck)
		}
	}
	switch m.Type {
	case MsgFetch:
		if nd.amnesiac {
			return
		}
		if m.Epoch > nd.p.Epoch && !m.Amnesiac && !nd.p.Halted && (!nd.fetching || nd.fetchTicks >= nd.fetchRTO()) {
			// The asker is in a later epoch: catch up to it, as from a
			// frame of it (a stuck rack's probe is all a host in an older
			// epoch may hear of it).
			nd.fetch(m.From, nd.catchUpLo(m.Epoch), 0)
			nd.fetchEpoch = m.Epoch
		}
		if !nd.answerOnce(&m) {
			return
		}
		if m.Lo < nd.base && nd.archOK && nd.archBase < nd.base {
			nd.rd.Messages = append(nd.rd.Messages, nd.archiveAnswer(&m))
			return
		}
		start := max(min(m.Lo, nd.p.Append), nd.base)
		end := nd.p.Append
		if m.Hi > start && m.Hi < end {
			end = m.Hi // a bound asked for (a gap up to a frame held, a pipelined catch-up's batch)
		}
		if m.Amnesiac {
			end = max(start, min(end, nd.p.Agreed)) // a state transfer takes agreed entries only
		}
		end = nd.fetchEnd(start, end)
		resp := Message{Type: MsgFetchResp, From: nd.uid, To: m.From,
			LogEpoch: nd.p.Epoch, Agreed: nd.p.Agreed, Start: start, Hi: nd.p.Append, Skipped: nd.skippedList(), Roster: nd.ms.roster,
			Entries: slices.Clone(nd.log[start-nd.base : end-nd.base])}
		if start == nd.base && start > m.Lo {
			// Compacted past what was asked: the requester cannot go on
			// entry by entry; with the roster here it can start here
			// (state transfer, transfer.go).
			resp.StartRoster = nd.baseMS.roster
		}
		nd.rd.Messages = append(nd.rd.Messages, resp)
	case MsgFetchResp:
		nd.stepFetchResp(m)
	case MsgPrepare:
		if m.Epoch > nd.maxEpochSeen {
			nd.maxEpochSeen = m.Epoch
		}
		// A promise of epoch e goes to one initiator only: with roster
		// changes, epoch ownership (epoch mod n == position) is unique only
		// within one configuration.
		sameOwner := nd.promisedByOK && nd.promisedBy == m.From
		// A host that lost its state rejoins only through a view change of
		// its own (section 6): it may lead one however far behind it is.
		// A witness that is itself halted (promised another view change)
		// promises as before: refusing would leave a fork it may be the
		// one to decide undecided (a lab rack waited 12 s on such forks).
		far := !m.Amnesiac && nd.behind(m.LogEpoch, m.Lo)
		behind := far && !nd.p.Halted
		if m.Epoch < nd.promised || m.Epoch <= nd.p.Epoch || (m.Epoch == nd.promised && !sameOwner) || behind {
			// The Nack says where this host stands: an initiator far
			// behind it catches up instead (MsgNack below).
			nd.rd.Messages = append(nd.rd.Messages, Message{Type: MsgNack, From: nd.uid, To: m.From, Epoch: nd.promised,
				LogEpoch: nd.p.Epoch, Agreed: nd.p.Agreed})
			if behind && m.LogEpoch == nd.p.Epoch && !nd.p.Halted && nd.vc == nil && m.Epoch > nd.promised {
				// It needs a view change it cannot lead: lead it, the
				// host after it in token order at once, each next one
				// half a takeover stagger later unless it promised one
				// meanwhile. Every host that refused it led one at once
				// before, and they duelled: a lab heal waited 100 ms on
				// four of them until a promise timeout.
				delay := 0
				if from, ok := nd.posOf(m.From); ok {
					mine, _ := nd.posOf(nd.uid)
					delay = ((int(mine)-int(from)+nd.n)%nd.n - 1) * nd.cfg.TakeoverStagger / 2
				}
				if delay <= 0 {
					nd.startViewChange(CauseLeadForBehind)
				} else if nd.leadFor == 0 || delay < nd.leadFor {
					nd.leadFor = delay
				}
			}
			return
		}
		if nd.vc != nil && nd.vc.epoch < m.Epoch {
			nd.vc = nil
		}
		if !nd.p.Halted || !far || !nd.promisedFar || !nd.promisedByOK || nd.promisedBy == m.From {
			// A halted witness that promised one host far behind it and
			// now promises another does not restart its own promise
			// timeout: two such hosts that led view changes in turn,
			// each preempting the last before its promises (carrying the
			// gap) came, kept every host that could lead from doing so
			// (the simulator: lab timing seed 158, and --amnesia 0.2
			// --keep-entries 16 --retain 100000 seed 365 of 5 hosts: every
			// host halted for the whole quiet phase). Only then: keeping
			// the timeout at any promise to a host far behind broke, in
			// the lab, into such hosts' view changes about to install
			// (promise timeouts 207 -> 284 in a run).
			nd.haltedTicks = 0
		}
		nd.promisedFar = far
		nd.promisedAmnesiac = m.Amnesiac
		nd.promised = m.Epoch
		nd.promisedBy, nd.promisedByOK = m.From, true
		nd.leadFor = 0
		nd.p.Halted = true
		p := nd.promise(m.Epoch, m.Lo)
		p.To = m.From
		nd.rd.Messages = append(nd.rd.Messages, p)
	case MsgPromise:
		if nd.amnesiac && !nd.transfer.on && !m.Amnesiac && (nd.vc == nil || m.Epoch <= nd.vc.epoch) &&
			(m.Start > nd.p.Agreed || (m.Roster != nil && !nd.knowsRoster(m.Roster) && m.Agreed > nd.p.Append)) {
			// The witness's log was compacted past this amnesiac host's
			// agreement pointer (where its view changes start), or the
			// rack agreed more, under another roster than the log this
			// host transferred says (it asked members that had left, and
			// lag): its view change cannot resolve from here. Back to the
			// state transfer, from that witness first and the rack's
			// roster. A promise to an earlier view change of this host
			// shows it as well: a promise that carries a whole log may
			// come after the view change it answered timed out (the
			// simulator: an amnesiac host whose transfer had ended
			// unanswered behind a cut led view changes from seq 0 whose
			// promises, 520 entries each, came one view change late,
			// three times, and its transfer began too late to end in the
			// quiet phase: seed 4819 of --hosts 3 --amnesia 0.2
			// --roster-changes 0.02).
			nd.restartTransfer(m.From, m.Roster)
			return
		}
		if nd.vc != nil && m.Epoch == nd.vc.epoch {
			nd.vc.promises[m.From] = m
			if m.Roster != nil && !m.Amnesiac && !nd.knowsRoster(m.Roster) {
				// The witness is in a roster this host's log does not
				// reach (a change beyond what it holds, as an amnesiac
				// host's transfer ends below it): its members decide, so
				// they are asked too.
				for _, u := range m.Roster {
					if u != nd.uid && !slices.Contains(nd.vc.asked, u) {
						nd.askPromise(u)
					}
				}
			}
			nd.tryResolve()
		}
	case MsgNack:
		if m.Epoch > nd.maxEpochSeen {
			nd.maxEpochSeen = m.Epoch
		}
		if nd.vc != nil && m.LogEpoch == nd.p.Epoch && m.Agreed > nd.vc.lo+uint64(nd.cfg.MaxFetchEntries) && !nd.amnesiac &&
			nd.giveUp(nd.p.Epoch, m.From) {
			// Far behind in its own epoch: it fetches what it lacks in
			// the epoch, and leaves a view change, if one is needed (its
			// log diverged), to the host that refused it (which leads
			// one), instead of starting its own again and halting itself.
			nd.deferVC = nd.vcTimeout()
			nd.fetch(m.From, nd.p.Append, 0)
			return
		}
		if nd.vc != nil && m.LogEpoch > nd.p.Epoch && m.Agreed > nd.vc.lo+uint64(nd.cfg.MaxFetchEntries) && !nd.amnesiac {
			// The rack moved on to a later epoch and agreed more than a
			// fetch batch beyond this host: it catches up from the
			// responder instead of leading (the responder refused to
			// promise for that reason, or for another). If it cannot give
			// its view change up (it promised a newer epoch to another
			// host before, or its promise outlived a restart), it adopts
			// the later log halted, and its next view change starts from
			// it.
			up := nd.giveUp(m.LogEpoch, m.From)
			if nd.fetchFor(m.LogEpoch) {
				nd.fetch(m.From, nd.catchUpLo(m.LogEpoch), 0)
				nd.fetchEpoch = m.LogEpoch
			}
			if up {
				// Given up to catch up: not started again before the
				// catch-up had a view-change timeout (a fenced host, whose
				// fence only the later epoch ends, led one every tick and
				// gave each up at the first refusal: seed 94 of --hosts 7
				// --token).
				nd.deferVC = nd.vcTimeout()
				return
			}
		}
		if nd.vc != nil && m.Epoch > nd.vc.epoch {
			// Someone promised a newer view change: let it finish; start
			// again (above it) only if it does not.
			nd.vc = nil
			nd.haltedTicks = 0
		}
	case MsgWake:
		if m.Epoch == nd.p.Epoch && !nd.amnesiac {
			nd.hurry = nd.n
			nd.maybeSend(false)
		}
	case MsgHeld:
		nd.heldBy(m)
	case MsgRejoin:
		if pos, ok := nd.posOf(m.From); ok && nd.skipped[pos] {
			nd.readmit[pos] = true
		}
	case MsgInstall:
		if m.Epoch < nd.promised && m.Epoch > nd.p.Epoch && !nd.amnesiac {
			// A view change of another host resolved while this host's
			// own, newer one waits: take it (giveUp says when).
			nd.giveUp(m.Epoch, m.From)
		}
		if m.Epoch >= nd.promised && m.Epoch > nd.p.Epoch {
			if m.Epoch == nd.promised && nd.promisedByOK && nd.promisedBy != m.From {
				return // promised to another initiator of the same epoch
			}
			if nd.amnesiac && !(m.Forced && m.Epoch == nd.promised && nd.promisedByOK && nd.promisedBy == m.From) {
				// A host that lost its state rejoins only through a view
				// change of its own: its epoch is above every promise of a
				// majority, so above any epoch it sent frames in before.
				// Except one the operator forced (AcceptLoss) that it
				// promised: its own could not resolve either (too few
				// hosts kept their state), and the operator gave up the
				// guarantee for the positions in doubt.
				if !nd.transfer.on && m.Agreed > nd.p.Append+uint64(nd.cfg.MaxFetchEntries) {
					// The rack agreed more than a batch past this host's
					// log: a view change of its own from here would
					// gather all of it in promises; the transfer first.
					// (It led one from seq 9 while the rack agreed 276,
					// and the promises, 269 entries each, came late: seed
					// 3312 of --hosts 5 --amnesia 0.2 --roster-changes
					// 0.02, still transferring at the quiet phase's end.)
					nd.restartTransfer(m.From, m.Roster)
				}
				return
			}
			nd.adopt(m.Epoch, m.Start, m.Entries, m.Agreed, m.Skipped, m.Roster, 0)
			if m.Start > nd.p.Agreed && m.Epoch > nd.p.Epoch {
				// The install carries the unagreed suffix only and this
				// host lacks what precedes it: catch up to the later epoch
				// from its initiator now, not when one of the rack's
				// frames comes (an idle rack sends one per back-off).
				if nd.fetchFor(m.Epoch) {
					nd.fetch(m.From, nd.catchUpLo(m.Epoch), 0)
					nd.fetchEpoch = m.Epoch
				}
			}
		}
	}
}

// fetchFor reports whether a message of the later epoch e (an answer to
// this host's view change, an install) should send a catch-up fetch: no
// fetch is under way, or it had its time (fetchRTO), or it is a gap
// repair in this host's own epoch. A catch-up under way towards an older
// epoch than e is left to come: its answer comes in the epoch its
// responder is in by then (stepCatchUp goes on from it), as for a frame
// (catchUpTo). Sending one for every newer epoch made a lab host
// restarted 40,523 entries behind, whose view changes the rack refused
// while its epochs climbed, fetch seven more 4 MiB batches from its
// agreement pointer, every one of them dropped.
func (nd *Node) fetchFor(e uint32) bool {
	return !nd.fetching || nd.fetchTicks >= nd.fetchRTO() || (e > nd.fetchEpoch && nd.fetchEpoch <= nd.p.Epoch)
}

func (nd *Node) stepFetchResp(m Message) {
	for i := range m.Entries {
		if m.Entries[i].Seq != m.Start+uint64(i) {
			return // not a run of the log from Start: a broken responder; ignored
		}
	}
	if nd.amnesiac {
		nd.stepTransfer(&m)
		return
	}
	if m.StartRoster != nil && m.Start > nd.p.Agreed {
		nd.pastFloor(&m)
		return
	}
	nd.answered(&m)
	probed := !nd.fetching && nd.probes > 0 // a probe's answer (probes go out while no fetch is under way)
	switch {
	case m.LogEpoch == nd.p.Epoch && !nd.p.Halted && probed && !nd.answeredMajority(uint64(nd.probeInterval(nd.probes))):
		// Not from a majority of the roster yet: a minority's probes
		// would carry its branch on, entry by entry (its hosts each in
		// the history, one probe's entry lets the next send), and the
		// heal would have more to undo.
	case m.LogEpoch == nd.p.Epoch && !nd.p.Halted:
		progressed := false
		for i := range m.Entries {
			e := m.Entries[i]
			if e.Seq < nd.p.Append {
				continue
			}
			f := e.Frame(nd.p.Group)
			r := nd.p.Classify(&f)
			if r == ReasonAccept {
				nd.appendEntry(e)
				progressed = true
				continue
			}
			if r == ReasonDivergence {
				if probed {
					// A probe's answer (probes go out while no fetch
					// is under way): the branches of a minority, whose
					// view change could not install. Leading one there
					// halted its hosts in view-change duels for the
					// rest of the partition, and the heal waited for
					// another (lab chaos: divergences 331 -> 435, heal
					// p50 41 -> 104 ms). The rack's frames show the
					// divergence once they come; tokenStuck leads the
					// view change if the majority answers and nothing
					// moves.
					break
				}
				nd.event(EventDivergence, e.Epoch, e.Seq, m.From)
				nd.diverged(e.Seq)
				return
			}
			break
		}
		if progressed {
			nd.fetching = false
		}
		nd.drainHeld()
		if progressed && len(m.Entries) >= nd.cfg.MaxFetchEntries && !nd.p.Halted {
			// The responder had more: go on from where this batch ended.
			nd.fetch(m.From, nd.p.Append, 0)
			nd.fetchWide = true
		}
		nd.maybeSend(false)
	case m.LogEpoch > nd.p.Epoch:
		// The rack moved on to a later epoch. A host that promised a
		// newer one to its own view change gives that up (giveUp); one
		// that promised it to another host adopts the log all the same
		// but stays halted under its promise (adopt): it appends nothing,
		// so the promise holds, and its next promise or view change
		// starts from the rack's log instead of its old one.
		if m.LogEpoch < nd.promised {
			nd.giveUp(m.LogEpoch, m.From)
		}
		nd.stepCatchUp(m)
	}
}

// adopt replaces the log from start on with entries, in epoch epoch.
//
// skipRoster is the roster the skip set's positions refer to (nil: this
// host's); the skip set is ignored when this host ends under another one.
// until, when above the adopted log's end, is where the log it came from
// ended: the host sends nothing before its log reaches it (heardAhead).
func (nd *Node) adopt(epoch uint32, start uint64, entries []Entry, agreed uint64, skipped []uint8, skipRoster []uint8, until uint64) {
	oldEnd := nd.p.Append
	if start < nd.base && start+uint64(len(entries)) >= nd.base {
		// Entries below the log's base were compacted here: agreed and
		// delivered everywhere.
		entries, start = entries[nd.base-start:], nd.base
	}
	if start > oldEnd || start > nd.p.Agreed || start < nd.base {
		return
	}
	end := start + uint64(len(entries))
	// Agreed entries never change: check it, and report if not.
	for s := start; s < nd.p.Agreed; s++ {
		if s >= end || !nd.log[s-nd.base].Equal(&entries[s-start]) {
			nd.event(EventSafety, epoch, s, nd.id)
			return
		}
	}
	// This host's own unagreed entries that the new log lacks may be lost:
	// their publishers are told once their position is agreed with another
	// entry (a later view change may still bring them back).
	// Senders are positions in the roster of their seq (section 7).
	var ms memberState
	if from := max(start, nd.p.Agreed); from < oldEnd {
		ms = nd.memberAt(from)
	}
	for s := max(start, nd.p.Agreed); s < oldEnd; s++ {
		e := &nd.log[s-nd.base]
		if ms.hasNext && e.Seq >= ms.nextAt {
			ms.switchNow()
		}
		ms.observe(e)
		if int(e.Sender) >= len(ms.roster) || ms.roster[e.Sender] != nd.uid || e.Count == 0 {
			continue
		}
		if s >= end || !entries[s-start].SameID(e) {
			if nd.orphans == nil {
				nd.orphans = make(map[uint64][]Entry)
			}
			nd.orphans[s] = append(nd.orphans[s], *e)
			if _, ok := ParseConfigEntry(e); ok {
				nd.orphanCfgs++
			}
		}
	}
	// A void seen in the part cut off is seen again, or not, in the new log.
	if nd.voided != nil && nd.voided.at >= start {
		nd.voided = nil
	}
	// Cut the log back to start. The history there is the one the entry at
	// start carries (positions below start are common to both logs).
	if start < oldEnd {
		// The configuration at start (the log below it is kept).
		ms := nd.memberAt(start)
		changed := !slices.Equal(ms.roster, nd.ms.roster)
		nd.ms = ms
		if changed {
			nd.applyRoster(false)
		}
	}
	var hist [MaxHistory]uint8
	copy(hist[:], nd.p.History[:])
	if start < oldEnd {
		for i := range hist {
			hist[i] = HistoryNone
		}
		copy(hist[:nd.h], nd.log[start-nd.base].History)
	}
	nd.log = nd.log[:start-nd.base]
	nd.p.Append = start
	nd.p.History = hist
	// The adopted entries were sent in older epochs: they agree nothing by
	// themselves (only the install's agreement pointer and h+1 frames of the
	// new epoch do).
	nd.p.EpochStart = math.MaxUint64
	for i := range entries {
		nd.pushEntry(entries[i])
	}
	if nd.switchPending() {
		// The log ends with an effective change: the new epoch runs under
		// the new roster from here.
		nd.ms.switchNow()
		nd.applyRoster(true)
	}
	nd.p.EpochStart = nd.p.Append
	nd.emptyRun = 0
	for i := len(nd.log) - 1; i >= 0 && idlePass(&nd.log[i]); i-- {
		nd.emptyRun++
	}
	clear(nd.skipped[:])
	clear(nd.readmit[:])
	if skipRoster == nil || slices.Equal(skipRoster, nd.ms.roster) {
		for _, id := range skipped {
			if int(id) < nd.n {
				nd.skipped[id] = true
			}
		}
	}
	// Entries appended earlier in this Ready below start are not persisted
	// yet: cut there too, so that Appended carries them again.
	cut := start
	if len(nd.rd.Appended) > 0 {
		cut = min(cut, nd.rd.Appended[0].Seq)
	}
	if !nd.rd.HasTruncate || cut < nd.rd.Truncate {
		nd.rd.Truncate = cut
	}
	nd.rd.HasTruncate = true
	// Appended restarts at the Ready's truncation point (several adopts
	// may fall in one Ready; the log below that point did not change).
	nd.rd.Appended = append(nd.rd.Appended[:0], nd.log[nd.rd.Truncate-nd.base:]...)
	if epoch > nd.p.Epoch {
		nd.fenced, nd.hardFence = false, false // the fence is of the old epoch (fastpath.go)
	}
	nd.p.Epoch = epoch
	nd.p.Agreed = max(nd.p.Agreed, min(agreed, nd.p.Append))
	nd.promised = max(nd.promised, epoch)
	nd.maxEpochSeen = max(nd.maxEpochSeen, epoch)
	nd.p.Halted = nd.promised > epoch
	nd.leaving = false
	nd.futureTries = 0
	nd.amnesiac = false
	nd.lostQuorum = false
	nd.transfer = transferState{} // a forced install may end a transfer (AcceptLoss)
	nd.vc = nil
	nd.vcFailures = 0
	nd.leftOuts = 0
	nd.idle, nd.probes, nd.leadFor, nd.divergeIn = 0, 0, 0, 0
	nd.haltedTicks = 0
	nd.skippedTicks = 0
	clear(nd.held)
	nd.fetching = false
	nd.catchup = nil
	nd.heardAt(epoch, until)
	nd.event(EventInstalled, epoch, nd.p.Append, nd.id)
	nd.deliver()
	nd.maybeSend(false)
}

func (nd *Node) tryResolve() {
	vc := nd.vc
	ws := nd.witnesses()
	res, err := Resolve(nd.n, vc.lo, nd.base, nd.log, ws)
	if err != nil {
		vc.ambiguous = errors.Is(err, ErrAmbiguous) || errors.Is(err, ErrLostQuorum)
		if errors.Is(err, ErrLostQuorum) && !nd.amnesiac {
			nd.lostQuorum = true
		}
		if nd.amnesiac && nd.membersLostState() {
			if !vc.formers {
				nd.askFormers()
			}
			// No member witnesses: what the spares hold decides, so the
			// operator may resolve it only with all of them (one that
			// did not answer may hold more that was delivered).
			for _, u := range vc.asked {
				if _, ok := vc.promises[u]; !ok {
					vc.ambiguous = false
				}
			}
		}
		return // wait for more promises (or the timeout)
	}
	nd.install(res, false)
}

// membersLostState reports whether every member answered this host's view
// change as one that lost its state (this host among them): no member can
// witness what the rack agreed (a roster of one whose only member lost its
// disk).
func (nd *Node) membersLostState() bool {
	for _, u := range union(nd.ms.roster, nd.ms.next) {
		if p, ok := nd.vc.promises[u]; !ok || !p.Amnesiac {
			return false
		}
	}
	return true
}

// askFormers asks the hosts out of the roster this amnesiac initiator
// knows of (the first roster's, the members its log's changes name, the
// host it fetched from last, and every host that told it what it holds,
// MsgHeld) for promises: spares that followed the log hold what the rack
// agreed when no member does. Their promises do not resolve the view
// change (only members' count), but they make it one the operator can
// resolve (ErrLostQuorum, AcceptLoss) with what they hold. (A spare of the
// config that no roster ever named, announcing it held 37 agreed entries
// more, was not asked, and the operator's override replaced what it had
// delivered: simulator seed 5230 of --hosts 3 --amnesia 0.2
// --roster-changes 0.02 --accept-loss.)
func (nd *Node) askFormers() {
	nd.vc.formers = true
	known := union(IdentityRoster(nd.n), nd.baseMS.roster, nd.baseMS.next, []uint8{nd.fetchPeer})
	known = union(known, slices.Sorted(maps.Keys(nd.memberHeld)))
	for i := range nd.log {
		if c, ok := ParseConfigEntry(&nd.log[i]); ok && c.Member != HistoryNone {
			known = union(known, []uint8{c.Member})
		}
	}
	for _, u := range known {
		if u != nd.uid && !slices.Contains(nd.vc.asked, u) {
			nd.askPromise(u)
		}
	}
}

// witnesses returns the promises of the view change this host leads.
func (nd *Node) witnesses() []Witness {
	ws := make([]Witness, 0, len(nd.vc.promises))
	for _, m := range nd.vc.promises {
		ws = append(ws, Witness{ID: m.From, LogEpoch: m.LogEpoch, Agreed: m.Agreed, Start: m.Start,
			Entries: m.Entries, Amnesiac: m.Amnesiac, Fenced: m.Fenced, Roster: m.Roster})
	}
	// In member order, not the map's: a resolution must not depend on the
	// order promises are walked in (the simulator replays a seed exactly).
	slices.SortFunc(ws, func(a, b Witness) int { return int(a.ID) - int(b.ID) })
	return ws
}

// ErrNotStalled is AcceptLoss's answer when this host leads no view change
// that waits on an ambiguous fork.
var ErrNotStalled = errors.New("exo: no view change of this host waits on an ambiguous fork")

// AmbiguousDoubt reports what AcceptLoss would accept to lose now, without
// doing it (ErrNotStalled when there is nothing to accept).
func (nd *Node) AmbiguousDoubt() (Doubt, error) {
	if nd.vc == nil || !nd.vc.ambiguous {
		return Doubt{}, ErrNotStalled
	}
	_, d, err := resolve(nd.n, nd.vc.lo, nd.base, nd.log, nd.witnesses(), true)
	if err != nil {
		return Doubt{}, err
	}
	if d == nil {
		return Doubt{}, ErrNotStalled
	}
	return *d, nil
}

// AcceptLoss is the operator's way out of a view change that waits on a
// fork only hosts that lost their state could decide (ViewChangeAmbiguous,
// docs/protocol.md section 6): it decides the fork without them, as if no
// branch could have been agreed (the branch most witnesses hold), installs
// the result, and returns what may have been lost. Safety is given up for
// the positions in Doubt: a host that lost its state may have delivered
// another entry there. Refused (ErrNotStalled) unless this host leads such
// a view change now (an amnesiac host's own rejoin may be the one).
func (nd *Node) AcceptLoss() (Doubt, error) {
	if nd.vc == nil || !nd.vc.ambiguous {
		return Doubt{}, ErrNotStalled
	}
	res, d, err := resolve(nd.n, nd.vc.lo, nd.base, nd.log, nd.witnesses(), true)
	if err != nil {
		return Doubt{}, err
	}
	if d == nil {
		return Doubt{}, ErrNotStalled
	}
	nd.event(EventAcceptedLoss, nd.vc.epoch, d.From, nd.id)
	nd.install(res, true)
	return *d, nil
}

// install sends the view change's resolved log to the members and adopts it.
func (nd *Node) install(res Resolution, forced bool) {
	vc := nd.vc
	// Hosts that promised are live; the others keep the place the
	// initiator's log gives them (a host that is merely slow to answer is not
	// thrown out of the token order; a dead one is skipped by the next
	// takeover).
	var skipped []uint8
	for i := 0; i < nd.n; i++ {
		if _, ok := vc.promises[nd.uidOf(uint8(i))]; !ok && nd.skipped[i] {
			skipped = append(skipped, uint8(i))
		}
	}
	// The installed log may change the roster (an effective change at its
	// end, or inside it): the install goes to the members of both, and the
	// skip set only applies when the roster stays.
	final := rosterAfter(nd.memberAt(res.Start), res.Entries)
	skipRoster := nd.ms.roster
	end := res.Start + uint64(len(res.Entries))
	for _, u := range union(nd.ms.roster, nd.ms.next, final) {
		if u == nd.uid {
			continue
		}
		// A host that promised holds the resolved log below its agreement
		// pointer (agreed entries never change): it gets the rest only.
		// One that did not answer (yet) gets the log from one fetch batch
		// below the initiator's agreement pointer; if it is further
		// behind, it does not adopt it and catches up by fetching from
		// the first frame of the new epoch it hears (section 4). The install of a host far behind
		// then no longer slows the others' down: each used to carry every
		// witness's gap, and the others timed out waiting for it.
		near := max(res.Start, min(vc.lo-min(vc.lo, uint64(nd.cfg.MaxFetchEntries)), end))
		start := near
		if p, ok := vc.promises[u]; ok {
			start = res.Start
			if !p.Amnesiac {
				// A witness far behind gets what one that did not answer
				// gets: its gap comes by fetching, not in one install (a
				// lab host 117,000 entries behind was sent an 82 MB install,
				// which the transport dropped).
				start = max(start, min(p.Agreed, end), near)
			}
		}
		nd.rd.Messages = append(nd.rd.Messages, Message{Type: MsgInstall, From: nd.uid, To: u,
			Epoch: vc.epoch, Start: start, Agreed: res.Agreed, Skipped: skipped, Roster: skipRoster, Entries: res.Entries[start-res.Start:], Forced: forced})
	}
	// The initiator is a witness itself and promised below its own agreed
	// pointer; it adopts like everyone else.
	nd.adopt(vc.epoch, res.Start, res.Entries, res.Agreed, skipped, skipRoster, 0)
}

// Witness is one host's answer to a view change: its log from Start on.
type Witness struct {
	ID       uint8
	LogEpoch uint32
	Agreed   uint64
	Start    uint64
	Entries  []Entry
	Amnesiac bool
	// Fenced: the witness's log may lack frames its fast path sent in its
	// log's epoch (docs/token.md section 5). In that epoch it is known
	// only up to its log's end: beyond it, it may hold any branch.
	Fenced bool
	// Roster is the witness's configuration (member ids; nil: 0..n-1). The
	// witnesses of the newest epoch share it.
	Roster []uint8
}

// Resolution is the log a view change installs: Entries from Start on, of
// which everything below Agreed is known to be agreed.
type Resolution struct {
	Start   uint64
	Agreed  uint64
	Entries []Entry
}

// Errors returned by Resolve.
var (
	ErrNeedMore  = errors.New("exo: view change needs more promises")
	ErrAmbiguous = fmt.Errorf("%w: a fork only they can decide", ErrNeedMore)
	// ErrLostQuorum: every member answered, but too few of them kept their
	// state to tell what may have been agreed.
	ErrLostQuorum = fmt.Errorf("%w: every member answered, too few kept their state", ErrNeedMore)
	ErrInconsist  = errors.New("exo: witnesses contradict an agreed entry")
	errNoWitness  = errors.New("exo: no witness")
	errBadWitness = errors.New("exo: witness log does not start where it says")
)

// Resolve computes the log a view change installs from the promises of the
// hosts in ws (including the initiator's own, unless it is amnesiac). own is
// the initiator's log from seq ownBase on; every entry of it below lo is
// agreed.
//
// The rule, and why it keeps every entry that may have been agreed anywhere:
//
//   - It needs h+1 witnesses that kept their state (amnesiac hosts count as
//     unknown). Only witnesses whose log is of the newest epoch E among them
//     take part: anything agreed in an older epoch is in E's installed log,
//     and anything agreed in E was held by h+1 hosts of E, one of them a
//     witness.
//   - Walking up from lo, at each position the remaining witnesses are
//     grouped by the entry they hold there. One group: take it. Several (a
//     fork): an entry at or beyond this position can only have been agreed
//     on a branch that h+1 hosts held, so a branch is possible when its
//     witnesses plus the hosts that did not answer reach h+1, and when
//     the h frames after its entry may have come from distinct hosts that
//     held it (chainPossible). Exactly one
//     possible branch: take it. None: nothing here was agreed; take the
//     largest branch. Two or more: the answers cannot tell; wait for more
//     (ErrNeedMore). With every host answering this never happens.
//   - Witnesses whose log ends, or that hold another branch, drop out: they
//     promised, so they will not append more in E.
func Resolve(n int, lo, ownBase uint64, own []Entry, ws []Witness) (Resolution, error) {
	res, _, err := resolve(n, lo, ownBase, own, ws, false)
	return res, err
}

// Doubt is what an operator accepts to lose when a view change stalled on
// a fork only hosts that lost their state (or do not answer) could decide
// is resolved without them (Node.AcceptLoss): positions From..To-1 may
// have been agreed, and delivered, on a branch that is not installed; Lost
// are the entries of those branches the answering hosts hold (a host that
// lost its state may have held others). To is math.MaxUint64 when too few
// members kept their state (ErrLostQuorum): any position from From on.
type Doubt struct {
	From, To uint64
	Lost     []Entry
}

// resolve is Resolve; with force, a fork that Resolve would wait on is
// decided as one where no branch is possible (the branch most witnesses
// hold), and the branches left are reported as the doubt.
func resolve(n int, lo, ownBase uint64, own []Entry, ws []Witness, force bool) (Resolution, *Doubt, error) {
	var doubt *Doubt
	var wit []*Witness
	start := lo
	for i := range ws {
		w := &ws[i]
		start = min(start, w.Start)
		if !w.Amnesiac {
			wit = append(wit, w)
		}
	}
	if len(wit) == 0 {
		return Resolution{}, nil, errNoWitness
	}
	var top uint32
	var agreed uint64
	for _, w := range wit {
		top = max(top, w.LogEpoch)
		agreed = max(agreed, w.Agreed)
	}
	// Majorities are those of the newest epoch's configuration: every fork
	// the walk decides is among frames of that epoch (section 7).
	roster := IdentityRoster(n)
	for _, w := range wit {
		if w.LogEpoch == top && w.Roster != nil {
			roster = w.Roster
			break
		}
	}
	n = len(roster)
	h := HistoryLen(n)
	// A fenced witness of the newest epoch is known only up to its log's
	// end (knownTo); beyond it, it counts as a host that did not answer.
	// The witnesses known everywhere must be h+1, unless every member
	// answered: then a branch only fenced hosts could hold past their
	// logs was held by no host's log, so no host delivered it.
	isWitness := make([]bool, n)
	fencedTo := make([]uint64, n)
	isFenced := make([]bool, n)
	answered := make([]bool, n) // any promise, amnesiac ones too
	for i := range ws {
		if pos, ok := slices.BinarySearch(roster, ws[i].ID); ok {
			answered[pos] = true
		}
	}
	members, known := 0, 0
	for _, w := range wit {
		if pos, ok := slices.BinarySearch(roster, w.ID); ok && !isWitness[pos] {
			isWitness[pos] = true
			members++
			if w.Fenced && w.LogEpoch == top {
				isFenced[pos], fencedTo[pos] = true, w.Start+uint64(len(w.Entries))
			} else {
				known++
			}
		}
	}
	lostQuorum := false
	if known < h+1 && members < n {
		if slices.Contains(answered, false) {
			return Resolution{}, nil, ErrNeedMore
		}
		// Every member answered; those that lost their state are too
		// many. Forced, the others decide (when no member kept its state:
		// the spares that followed the log), and everything from lo on is
		// in doubt: hosts that lost their state may have agreed anything
		// there.
		if !force {
			return Resolution{}, nil, ErrLostQuorum
		}
		lostQuorum = true
	}
	if lo > ownBase+uint64(len(own)) || lo < ownBase {
		return Resolution{}, nil, errBadWitness
	}
	// Entries below ownBase were compacted: agreed and delivered everywhere.
	// A host that lost its state needs them by state transfer, not here.
	start = max(start, ownBase)
	// Witnesses of the newest epoch that hold the agreed prefix [.., lo).
	var alive []*Witness
	for _, w := range wit {
		if w.LogEpoch != top || w.Start > lo || w.Start+uint64(len(w.Entries)) < lo {
			continue
		}
		ok := true
		for s := w.Start; s < lo; s++ {
			if !w.Entries[s-w.Start].Equal(&own[s-ownBase]) {
				ok = false
				break
			}
		}
		if ok {
			alive = append(alive, w)
		}
	}
	out := make([]Entry, 0, int(lo-start)+8)
	out = append(out, own[start-ownBase:lo-ownBase]...)
	for j := lo; ; j++ {
		type group struct {
			e   *Entry
			ws  []*Witness
			key uint64
		}
		var groups []group
		for _, w := range alive {
			if j >= w.Start+uint64(len(w.Entries)) {
				continue
			}
			e := &w.Entries[j-w.Start]
			k := -1
			for gi := range groups {
				if groups[gi].e.SameID(e) {
					k = gi
					break
				}
			}
			if k < 0 {
				groups = append(groups, group{e: e, key: uint64(e.Epoch)<<8 | uint64(e.Sender)})
				k = len(groups) - 1
			}
			groups[k].ws = append(groups[k].ws, w)
		}
		if len(groups) == 0 {
			break
		}
		pick := 0
		if len(groups) > 1 {
			// Hosts that did not answer (or lost their state) may hold any
			// branch, except one whose entries at or after j they sent on
			// another branch: a sender held the whole branch below its own
			// entry, and a log only grows within an epoch.
			proven := make([][]bool, len(groups))
			for gi, g := range groups {
				proven[gi] = make([]bool, n)
				for _, w := range g.ws {
					for k := j - w.Start; k < uint64(len(w.Entries)); k++ {
						if e := &w.Entries[k]; e.Epoch == top && int(e.Sender) < n {
							proven[gi][e.Sender] = true
						}
					}
				}
			}
			possible, ambiguous := -1, false
			for gi, g := range groups {
				// Only members hold a branch that counts: a spare that
				// follows the log (a host being added) promises too.
				held := 0
				for _, w := range g.ws {
					if _, ok := slices.BinarySearch(roster, w.ID); ok {
						held++
					}
				}
				others := 0
				chain := make([]bool, n) // hosts that may have sent a frame of the branch after j
				for u := 0; u < n; u++ {
					if isWitness[u] && (!isFenced[u] || j < fencedTo[u]) {
						continue
					}
					elsewhere := false
					for gk := range groups {
						if gk != gi && proven[gk][u] {
							elsewhere = true
						}
					}
					if !elsewhere {
						others++
						chain[u] = true
					}
				}
				if held+others >= h+1 && chainPossible(g.e, g.ws, j, top, h, roster, isFenced, chain) {
					if possible >= 0 {
						if !force {
							return Resolution{}, nil, ErrAmbiguous
						}
						ambiguous = true
					}
					possible = gi
				}
			}
			if ambiguous {
				possible = -1 // decided as if no branch were possible: the largest
			}
			if possible >= 0 {
				pick = possible
			} else {
				for gi, g := range groups {
					if len(g.ws) > len(groups[pick].ws) || (len(g.ws) == len(groups[pick].ws) && g.key < groups[pick].key) {
						pick = gi
					}
				}
			}
		}
		if len(groups) > 1 && force {
			// Every branch not taken is in doubt, from here to its end.
			if doubt == nil {
				doubt = &Doubt{From: j, To: j}
			}
			for gi, g := range groups {
				if gi == pick {
					continue
				}
				var longest *Witness
				for _, w := range g.ws {
					if longest == nil || len(w.Entries)-int(j-w.Start) > len(longest.Entries)-int(j-longest.Start) {
						longest = w
					}
				}
				for k := j - longest.Start; k < uint64(len(longest.Entries)); k++ {
					doubt.Lost = append(doubt.Lost, longest.Entries[k])
					doubt.To = max(doubt.To, longest.Entries[k].Seq+1)
				}
			}
		}
		out = append(out, *groups[pick].e)
		alive = groups[pick].ws
	}
	if agreed > start+uint64(len(out)) {
		return Resolution{}, nil, ErrInconsist
	}
	if lostQuorum {
		if doubt == nil {
			doubt = &Doubt{}
		}
		doubt.From, doubt.To = lo, math.MaxUint64
	}
	if doubt != nil {
		doubt.To = max(doubt.To, start+uint64(len(out)))
	}
	return Resolution{Start: start, Agreed: agreed, Entries: out}, doubt, nil
}

// chainPossible reports whether entry x at seq j, held by the witnesses
// ws, may have been agreed: that needs the frames j+1..j+h after it, sent
// by h distinct hosts other than x's sender, each of which held x. A
// witness's own frames are all in its log (it appends what it sends, and
// sends nothing after its promise; a fenced one excepted: its fast path may
// have sent beyond its log), so the possible senders are those of the
// frames after j in the witnesses' logs of this branch, the fenced
// witnesses among them, and the hosts that did not answer and did not send
// on another branch (chain, by roster position, on entry). A frame of an
// older epoch than top is not judged so (its chain may lie in an install).
func chainPossible(x *Entry, ws []*Witness, j uint64, top uint32, h int, roster []uint8, isFenced, chain []bool) bool {
	if x.Epoch != top {
		return true
	}
	for _, w := range ws {
		if pos, ok := slices.BinarySearch(roster, w.ID); ok && isFenced[pos] {
			chain[pos] = true
		}
		for s := j + 1; s <= j+uint64(h) && s < w.Start+uint64(len(w.Entries)); s++ {
			if e := &w.Entries[s-w.Start]; e.Epoch == top && int(e.Sender) < len(chain) {
				chain[e.Sender] = true
			}
		}
	}
	count := 0
	for u, ok := range chain {
		if ok && u != int(x.Sender) {
			count++
		}
	}
	return count >= h
}

// peers returns the member ids a view change asks: the current roster and,
// while a change waits for its epoch, the next one.
func (nd *Node) peers() []uint8 {
	var out []uint8
	for _, u := range union(nd.ms.roster, nd.ms.next) {
		if u != nd.uid {
			out = append(out, u)
		}
	}
	return out
}
