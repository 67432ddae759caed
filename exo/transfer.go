package exo

import (
	"maps"
	"math"
	"slices"
)

// State transfer: a host that lost its state (amnesiac: a wiped disk, a
// new host started with --join) first fetches the rack's agreed log, batch
// by batch over OOB, from one member after another, and only then runs the
// view change through which it rejoins (section 6). Agreed entries never
// change, so it may hold and deliver them before it knows anything else;
// the view change then starts from its agreement pointer, and the promises
// and the install carry only what lies beyond it. (From seq 0, every
// promise would carry a whole log, over the transport's cap for a rack of
// any age, and a member whose log was compacted could not take part.)
//
// The transfer is resumable: its entries are persisted as they come (the
// durable state stays amnesiac), and a restart goes on from the last one
// (RestartNode). A responder answers an amnesiac fetch with agreed entries
// only; one whose log starts past the requester's end (compacted) answers
// from its log's base with the roster there (Message.StartRoster), which a
// requester with an empty log starts from.

// transferState is the state of an amnesiac host's transfer.
type transferState struct {
	on    bool    // fetching the agreed log; the view change waits
	tries int     // fetches sent since the last progress
	next  int     // index in the peers of the next member to ask
	peers []uint8 // the members to ask: the roster the rack reported (nil: this host's)
	seen  uint64  // the highest agreement pointer a responder reported
	// wait is the ticks until the next fetch, when the last batch came
	// sooner than Config.TransferBytesPerTick allows; from is the host
	// that sent it.
	wait int
	from uint8
	// gap is the least the rack's agreement pointer was ahead after a
	// batch: a paced transfer asks for the next batch at once until it
	// is below that again (the rack's log grew faster than the pace), so
	// that the least gap shrinks and the transfer ends.
	gap uint64
	// slow: the members that did not answer in time since they were last
	// asked; the turn passes them by while others answer. turn: the bytes
	// the member asked last served in its turn (Config.TransferTurnBytes).
	slow []uint8
	turn int
	// pacer is the adaptive pace (Config.TransferYield, pacer.go).
	pacer pacer
}

// transferPeers returns the members a transfer asks: the roster a member
// reported (an amnesiac host starts with the rack's first roster, which
// the rack may have left long ago), or this host's.
func (nd *Node) transferPeers() []uint8 {
	if nd.transfer.peers != nil {
		return nd.transfer.peers
	}
	return nd.ms.roster
}

// knowsRoster reports whether roster is this host's, or the one a change
// at the end of its log switches to.
func (nd *Node) knowsRoster(roster []uint8) bool {
	return slices.Equal(roster, nd.ms.roster) || (nd.ms.hasNext && slices.Equal(roster, nd.ms.next))
}

// restartTransfer goes back to the transfer, from member from first, with
// the roster the rack reported (when known).
func (nd *Node) restartTransfer(from uint8, roster []uint8) {
	nd.vc = nil
	nd.haltedTicks = 0
	nd.transfer = transferState{on: true}
	if roster != nil {
		nd.transfer.peers = slices.Clone(roster)
	}
	if i := slices.Index(nd.transferPeers(), from); i >= 0 {
		nd.transfer.next = i + 1
	}
	nd.transferFetchFrom(from) // the witness that holds more, member or not
}

// transferTries is how many fetches without progress (each after a fetch
// timeout) end the transfer: then the view change starts from what the
// host holds, as it did before state transfer (a rack of amnesiac hosts,
// or one that nobody answers).
func (nd *Node) transferTries() int { return 2 * nd.n }

// transferFetch asks the next member in turn for the agreed log from
// this host's end: of the members that answered in time since they were
// last asked, and that, by what they last announced (MsgHeld), serve this
// host's end (a member whose retained log starts past it would answer
// from its base: a floor jump another member would have spared). When
// there is none, a member passed by for what it announced, else one that
// was late (and every late member has its time again).
func (nd *Node) transferFetch() {
	t := &nd.transfer
	peers := nd.transferPeers()
	announced, late := -1, -1 // the first member passed by for what it announced, for being late
	for k := range peers {
		i := (t.next + k) % len(peers)
		u := peers[i]
		switch {
		case u == nd.uid:
			continue
		case slices.Contains(t.slow, u):
			if late < 0 {
				late = i
			}
			continue
		case !nd.serves(u, nd.p.Append):
			// (What it announced may be a second old: near the rack's
			// end every member may seem not to serve it.)
			if announced < 0 {
				announced = i
			}
			continue
		}
		t.next = i + 1
		nd.transferFetchFrom(u)
		return
	}
	if announced >= 0 {
		t.next = announced + 1
		nd.transferFetchFrom(peers[announced])
		return
	}
	if late >= 0 {
		t.slow = t.slow[:0] // every member was late: each has its time again
		t.next = late + 1
		nd.transferFetchFrom(peers[late])
		return
	}
	// No other member to ask (a roster of one, this host's): the hosts
	// that followed the log hold it, if any said so.
	if u, ok := nd.spareToAsk(); ok {
		nd.transferFetchFrom(u)
		return
	}
	t.on = false
	nd.fetching = false
}

// spareToAsk returns a host out of the roster that holds more of the
// agreed log than this one, as far as this host knows: the one that
// answered last, and those that said what they hold (MsgHeld), in turn
// after each fetch without progress. A roster of one whose member lost its
// disk has no other member to fetch from, and the transfer ended there
// with the few entries that named the rack's later rosters: the host,
// out of the roster its log reached, followed as a spare and never led
// the view change only it could lead (the simulator: seed 5070 of --hosts
// 3 --amnesia 0.2 --roster-changes 0.02).
func (nd *Node) spareToAsk() (uint8, bool) {
	var hosts []uint8
	if nd.fetchPeer != nd.uid && nd.transfer.seen > nd.p.Append {
		hosts = append(hosts, nd.fetchPeer)
	}
	for _, u := range slices.Sorted(maps.Keys(nd.memberHeld)) {
		if u != nd.uid && nd.memberHeld[u].Agreed > nd.p.Append && !slices.Contains(hosts, u) {
			hosts = append(hosts, u)
		}
	}
	if len(hosts) == 0 {
		return 0, false
	}
	return hosts[nd.transfer.tries%len(hosts)], true
}

// serves reports whether member u, by what it last announced, holds
// agreed entries from seq on (true when it announced nothing).
func (nd *Node) serves(u uint8, seq uint64) bool {
	h, ok := nd.memberHeld[u]
	return !ok || (h.Lo <= seq && h.Agreed > seq)
}

// transferFetchOn asks for the next batch after u sent the last one: of
// a member, u again until it served Config.TransferTurnBytes in its turn,
// then the member after it, so that the members share the transfer's
// reads and sends (the whole transfer went to one member before, the
// others asked only when it was late); of a witness out of the roster that
// was asked because it held more (a spare that followed the log), u again.
func (nd *Node) transferFetchOn(u uint8) {
	t := &nd.transfer
	if i := slices.Index(nd.transferPeers(), u); i >= 0 {
		t.next = i
		if t.turn >= nd.cfg.TransferTurnBytes {
			t.next, t.turn = i+1, 0
		}
		nd.transferFetch()
		return
	}
	nd.transferFetchFrom(u)
}

// transferFetchFrom asks member u for the agreed log from this host's end.
func (nd *Node) transferFetchFrom(u uint8) {
	if u != nd.fetchPeer {
		nd.transfer.turn = 0 // another member's turn
	}
	nd.transfer.tries++
	nd.fetching = true
	nd.fetchTicks = 0
	nd.fetchPeer, nd.fetchLo = u, nd.p.Append
	nd.rd.Messages = append(nd.rd.Messages, Message{Type: MsgFetch, From: nd.uid, To: u, Lo: nd.p.Append, Amnesiac: true})
}

// tickTransfer runs a halted amnesiac host's transfer: it asks again when
// an answer is late, and ends the transfer once every member was asked
// twice without progress. A host out of the roster (the log it fetched
// removed it) goes on fetching, as a spare follows the log, until a change
// adds it back; it may not lead a view change. It reports whether the
// transfer is still on.
func (nd *Node) tickTransfer() bool {
	t := &nd.transfer
	if !t.on {
		return false
	}
	if nd.fetching && nd.fetchTicks < nd.fetchRTO() {
		return true
	}
	if !nd.fetching && t.wait > 0 {
		t.wait--
		nd.pacerTick(t.wait)
		if t.wait == 0 {
			nd.transferFetchOn(t.from)
		}
		return true // paced (Config.TransferBytesPerTick, TransferYield)
	}
	if t.tries >= nd.transferTries() && !nd.notMember {
		t.on = false
		nd.fetching = false
		nd.haltedTicks = 0
		return false
	}
	if nd.fetching {
		// A late answer: the next fetch waits longer (fetchRTO doubles per
		// retry; a 4 MiB batch of a busy member may take longer than the
		// estimate, and asking again only doubles the work), and the late
		// member is left out of the turn until it answers.
		nd.fetchTries++
		if !slices.Contains(t.slow, nd.fetchPeer) {
			t.slow = append(t.slow, nd.fetchPeer)
		}
	}
	nd.transferFetch()
	return true
}

// stepTransfer takes a fetch answer at an amnesiac host: the entries below
// the responder's agreement pointer that extend this host's log are
// appended, agreed and delivered. When the responder has no more agreed
// entries than one more batch, the transfer ends and the view change
// starts from here.
func (nd *Node) stepTransfer(m *Message) {
	t := &nd.transfer
	if !t.on {
		return
	}
	// A late answer is used too (its entries are agreed); only the
	// answer to the fetch under way moves the transfer on (the fetch in
	// flight otherwise goes on): of the member asked last, from where it
	// was asked (or past it: a member compacted past that). A late answer
	// of the member asked last, taken for the current one, sent another
	// fetch of the same batch, whose answer did too: in turns that came
	// back to one member (the others late), a host asked it for each
	// batch eight times and was still in its transfer when the simulator's
	// quiet phase ended (seed 358 of --hosts 5 --amnesia 0.2).
	current := nd.fetching && m.From == nd.fetchPeer && m.Start >= nd.fetchLo
	t.seen = max(t.seen, m.Agreed)
	size := 0 // the batch's bytes: its member's turn, the pace
	for i := range m.Entries {
		size += m.Entries[i].BinarySize()
	}
	if current {
		t.turn += size
	}
	t.slow = slices.DeleteFunc(t.slow, func(u uint8) bool { return u == m.From })
	took := nd.fetchTicks
	if current {
		nd.answered(m)
		nd.fetching = false
	}
	if current && m.Start > nd.p.Append && len(m.Entries) > 0 && m.Entries[0].Seq == m.Start &&
		m.StartRoster != nil && m.Start < m.Agreed {
		// The responder's log starts past this host's end (compacted):
		// start from its base, in the roster there. What this host held
		// is dropped, on disk too; its delivered stream resumes there
		// (EventFloorJump: the entries between are lost to it).
		old := nd.base
		nd.event(EventFloorJump, 0, m.Start, m.From)
		nd.startLogAt(m.Start, m.Entries[0].History, m.StartRoster)
		nd.p.Agreed, nd.delivered = m.Start, m.Start
		nd.orphans, nd.orphanCfgs, nd.voided = nil, 0, nil
		if !nd.rd.HasTruncate || old < nd.rd.Truncate {
			// (A second jump in one Ready keeps the first's cut: the
			// log on disk still starts below it. Cut at the first
			// jump's base, the second kept the entries before it:
			// --amnesia 0.2 --keep-entries 16 --retain 64, seed 848 of
			// 7 hosts.)
			nd.rd.Truncate = old
		}
		nd.rd.HasTruncate = true
		nd.rd.Appended = nd.rd.Appended[:0]
		// Entries of this Ready delivered before the jump are not: the
		// stream starts at the jump (one Ready may take two answers).
		nd.rd.Agreed = nd.rd.Agreed[:0]
	}
	from := nd.p.Append
	nd.p.EpochStart = math.MaxUint64 // agreement comes from the responder's pointer
	for i := range m.Entries {
		e := m.Entries[i]
		if e.Seq < nd.p.Append {
			continue
		}
		if e.Seq != nd.p.Append || e.Seq >= m.Agreed {
			break
		}
		nd.pushEntry(e)
		nd.rd.Appended = append(nd.rd.Appended, nd.log[len(nd.log)-1])
	}
	if nd.p.Append > from {
		t.tries = 0
		nd.p.Agreed = nd.p.Append
		nd.deliver()
	}
	if nd.switchPending() {
		// The agreed log ends at a change's switch point: what follows
		// runs under the next roster, as a view change's install would
		// have it (adopt). Left pending, a host the change adds followed
		// as a spare of the old roster and never rejoined, while the
		// rack's one other member waited for its frames (the simulator:
		// a roster of one added a host that restarted without its state,
		// seeds 1884 and 2558 of --hosts 3 --amnesia 0.2 --roster-changes
		// 0.02).
		nd.ms.switchNow()
		nd.applyRoster(true)
	}
	if !current {
		return
	}
	if m.Roster != nil && !slices.Equal(m.Roster, t.peers) && !nd.knowsRoster(m.Roster) {
		// The rack's roster as the responder knows it: ask its members.
		t.peers = slices.Clone(m.Roster)
	}
	if m.Agreed > nd.p.Append+uint64(nd.cfg.MaxFetchEntries) && nd.p.Append > from {
		// More to come: the next batch from the next member in turn
		// (transferFetchOn), paced (Config.TransferBytesPerTick) while the
		// transfer gains on the rack: a pace below the rack's log growth
		// would never end it, so batches follow at once until the gap is
		// below the least one seen.
		gap := m.Agreed - nd.p.Append
		gaining := t.gap == 0 || gap < t.gap
		if gaining {
			t.gap = gap
		}
		if r := nd.transferPace(); r > 0 && gaining {
			if t.wait = nd.pacerWait((size+r-1)/r - took); t.wait > 0 {
				t.from = m.From
				return // tickTransfer asks when the wait is over
			}
		}
		nd.transferFetchOn(m.From)
		return
	}
	if nd.p.Append+uint64(nd.cfg.MaxFetchEntries) < t.seen && t.tries < nd.transferTries() {
		// This responder lags behind what another one reported: the next
		// (as long as asking them all twice has not shown that nobody
		// answering has more).
		nd.transferFetch()
		return
	}
	if nd.notMember {
		// A spare within a batch of the rack follows the log: the next
		// fetch after a token timeout, not at the next tick (a fetch a
		// tick is thousands a second against the members).
		t.wait, t.from = nd.cfg.TokenTimeout, m.From
		return
	}
	if nd.p.Append > from || m.Agreed <= nd.p.Append {
		// Within a batch of the rack's agreement pointer (as the
		// responders report it): rejoin.
		t.on = false
		nd.startViewChange(CauseAmnesiac)
	}
}

// pastFloor takes a fetch answer from a member whose log was compacted
// past this host's agreement pointer: this host cannot catch up entry by
// entry from it. It asks the next member; once h+1 members answered so
// while its agreement pointer stood still (a majority of the roster has
// moved on: what it lacks is held at most by members as far behind), it
// becomes amnesiac and rejoins by state transfer from a member's log base
// (its delivered stream jumps there: the rack's retention removed what lay
// between). Becoming amnesiac is safe at any time: it is a crash that
// loses the disk, which the protocol tolerates (section 6); the host stops
// witnessing until its own view change.
func (nd *Node) pastFloor(m *Message) {
	if nd.floorAt != nd.p.Agreed {
		nd.floorFrom, nd.floorAt = nd.floorFrom[:0], nd.p.Agreed
	}
	if !slices.Contains(nd.floorFrom, m.From) {
		nd.floorFrom = append(nd.floorFrom, m.From)
	}
	if nd.floorReached() {
		return
	}
	if m.From == nd.fetchPeer {
		nd.answered(m)
		nd.fetchAgain()
	}
}

// floorReached becomes amnesiac (pastFloor) once h+1 members answered
// with a log compacted past this host's agreement pointer, or every other
// member did when there are fewer (a roster of two: the one other member
// can never be two; simulator seed 329, TestPastFloorRosterOfTwo). (Counting the
// members that do not answer as well turned more hosts amnesiac in the
// simulator, two at once in a rack of three, and stalled more runs.)
func (nd *Node) floorReached() bool {
	others := 0
	for _, u := range nd.ms.roster {
		if u != nd.uid {
			others++
		}
	}
	if len(nd.floorFrom) < max(min(nd.h+1, others), 1) {
		return false
	}
	from := nd.floorFrom[len(nd.floorFrom)-1]
	nd.floorFrom = nd.floorFrom[:0]
	nd.amnesiac = true
	nd.p.Halted = true
	nd.haltedTicks = 0
	nd.vc = nil
	nd.catchup = nil
	clear(nd.held)
	nd.transfer = transferState{on: true, next: int(nd.id) + 1} // the roster's next member first
	nd.fetching = false
	// As after a crash that lost the disk: what was queued here is gone
	// (the embedder tells its publishers: EventPastFloor).
	nd.pending, nd.pendHead, nd.pendingCfg = nd.pending[:0], 0, nil
	nd.cutUnagreed()
	nd.event(EventPastFloor, nd.p.Epoch, nd.p.Agreed, from)
	nd.transferFetch()
	return true
}

// cutUnagreed cuts the log back to the agreement pointer, in memory and
// on disk (an amnesiac host holds agreed entries only).
func (nd *Node) cutUnagreed() {
	if nd.p.Append <= nd.p.Agreed {
		return
	}
	cut := nd.p.Agreed
	var hist [MaxHistory]uint8
	for i := range hist {
		hist[i] = HistoryNone
	}
	copy(hist[:nd.h], nd.log[cut-nd.base].History)
	nd.log = nd.log[:cut-nd.base]
	nd.p.Append, nd.p.History = cut, hist
	if !nd.rd.HasTruncate || cut < nd.rd.Truncate {
		nd.rd.Truncate = cut
	}
	nd.rd.HasTruncate = true
	nd.rd.Appended = append(nd.rd.Appended[:0], nd.log[nd.rd.Truncate-nd.base:]...)
}

// restoreTransfer gives an amnesiac host restarted during its transfer
// the agreed entries it had persisted: it goes on from their end.
func (nd *Node) restoreTransfer(hs HardState) {
	if len(hs.Log) == 0 {
		return
	}
	nd.startLogAt(hs.Log[0].Seq, hs.Log[0].History, hs.Roster)
	// Every entry an amnesiac host holds is agreed: a transfer appends
	// agreed entries only, and a host that became amnesiac cut its
	// unagreed ones in the Ready that made it so, before its durable state
	// said amnesiac. (HardState.Agreed may be older: the daemon writes it
	// with the epoch and the promise only.)
	nd.p.EpochStart = math.MaxUint64
	for i := range hs.Log {
		if hs.Log[i].Seq != nd.p.Append {
			break
		}
		nd.pushEntry(hs.Log[i])
	}
	nd.p.Agreed = nd.p.Append
	nd.voided = nil
	nd.delivered = nd.base
	if end := hs.Log[len(hs.Log)-1].Seq + 1; end > nd.p.Append {
		nd.rd.Truncate, nd.rd.HasTruncate = nd.p.Append, true // a broken sequence: drop what follows
	}
}

// startLogAt empties the log and starts it at seq, whose entry carries
// history hist, under roster (in effect there at least; nil: keep this
// host's).
func (nd *Node) startLogAt(seq uint64, hist []uint8, roster []uint8) {
	if roster != nil {
		nd.ms = memberState{roster: slices.Clone(roster), from: seq}
		nd.baseMS = nd.ms
		nd.applyRoster(true)
	}
	nd.resetAt(seq, hist)
}

// Transferring reports whether this host is fetching the rack's agreed log
// before it rejoins (an amnesiac host: state transfer).
func (nd *Node) Transferring() bool { return nd.transfer.on }

// BaseRoster returns the roster in effect at the log's base (LogBase): the
// roster the delivered stream starts in.
func (nd *Node) BaseRoster() []uint8 { return append([]uint8(nil), nd.baseMS.roster...) }
