package exo

import (
	"maps"
	"slices"
)

// A catch-up brings a host whose epoch is behind the rack's to the later
// epoch: it fetches that epoch's log from its agreement pointer and adopts
// it (docs/protocol.md section 4).
//
// A fetch response holds at most MaxFetchEntries entries, and a later
// epoch's log begins with the entries its install carried, all of older
// epochs. A host that adopted a batch ending among them would hold, in the
// new epoch, a log that no host of that epoch ever held: its fetches in
// that epoch could never go on (every entry it lacks is of an older epoch,
// so Classify says STALE_EPOCH), and it would take the token over and send
// frames on a branch of its own. The lab rack did exactly that: a host
// stood 52,000 entries behind for good, its log ending 1,024 entries after
// its agreement pointer.
//
// So the batches are gathered first, and the log is adopted once it reaches
// the responder's log end, or a frame of the later epoch itself: everything
// after such a frame is a frame of that epoch, which the host then fetches
// as in any gap. A prefix that ends with a frame of the epoch is the log
// the responder held when it appended that frame.
//
// A response that does not reach this host's agreement pointer (the answer
// to a fetch sent before an install moved the pointer) is no log to adopt:
// its entries are checked against the agreed ones, and it is dropped.
type catchUp struct {
	epoch   uint32 // the later epoch whose log is gathered
	start   uint64 // seq of entries[0], at most the agreement pointer when the first batch came
	entries []Entry
	agreed  uint64 // the furthest agreement pointer the responders of epoch reported

	// The pipeline (Config.FetchWindow > 1): the batches asked past the
	// one at end(), in order of position; the answers to them that came
	// before the batches below them; the entries a batch asks for (the
	// most a batch cut at the answer limit held); the members asked in
	// turn; where the batches asked end; the furthest log end of epoch
	// the answers reported.
	sent  []batchAsk
	ahead map[uint64]Message
	span  uint64
	peers []uint8
	turn  int
	asked uint64
	hi    uint64
	// roster is the epoch's roster, as its responders reported it: the
	// senders of its frames are positions in it, not in this host's
	// (older) roster. (Read in this host's roster, a frame's sender named
	// this host itself, which then sent its pipelined fetches to itself
	// and answered them from its own old log: the simulator, seed 8212 of
	// --hosts 3 --amnesia 0.2 --roster-changes 0.02, a host left behind
	// for the whole quiet phase.)
	roster []uint8
}

// batchAsk is one batch of a pipelined catch-up in flight: [lo, hi) asked
// of peer at clock at.
type batchAsk struct {
	lo, hi uint64
	peer   uint8
	at     uint64
}

func (c *catchUp) end() uint64 { return c.start + uint64(len(c.entries)) }

// done reports whether the gathered log is one to adopt: it reaches hi,
// the log end of the responder of its last batch, or a frame of the epoch
// itself.
func (c *catchUp) done(hi uint64) bool {
	return c.end() >= hi || (len(c.entries) > 0 && c.entries[len(c.entries)-1].Epoch == c.epoch)
}

// awaits reports whether a batch from lo is in flight (an answer that
// starts there is kept until the batches below it come).
func (c *catchUp) awaits(lo uint64) bool {
	for _, b := range c.sent {
		if b.lo == lo {
			return true
		}
	}
	return false
}

// addPeer takes member u, which answered in the epoch gathered, into the
// turn of the members asked.
func (c *catchUp) addPeer(u uint8) {
	if u != HistoryNone && !slices.Contains(c.peers, u) {
		c.peers = append(c.peers, u)
	}
}

// dropPeer takes member u out of the turn, with the batches asked of it:
// it answered from an older epoch (it is behind too).
func (c *catchUp) dropPeer(u uint8) {
	c.peers = slices.DeleteFunc(c.peers, func(p uint8) bool { return p == u })
	c.sent = slices.DeleteFunc(c.sent, func(b batchAsk) bool { return b.peer == u })
}

// drain appends the answers kept ahead that the entries gathered now
// reach, in order, while the log is not one to adopt yet; it returns the
// last answer it used (or last).
func (c *catchUp) drain(last *Message) *Message {
	for !c.done(last.Hi) {
		// The kept answers in order of position (not the map's order:
		// which answer is used last decides the next asks, and a seed
		// must replay exactly).
		var next *Message
		for _, s := range slices.Sorted(maps.Keys(c.ahead)) {
			if s > c.end() {
				break
			}
			a := c.ahead[s]
			delete(c.ahead, s)
			if a.Start+uint64(len(a.Entries)) > c.end() {
				next = &a
				break
			}
		}
		if next == nil {
			return last
		}
		c.entries = append(c.entries, next.Entries[c.end()-next.Start:]...)
		c.agreed = max(c.agreed, next.Agreed)
		c.hi = max(c.hi, next.Hi)
		last = next
	}
	return last
}

// catchUpLo is where a fetch towards epoch e starts: where the batches
// gathered for e (or a later epoch) end; for an epoch later than the one
// gathered, where the part of them that is agreed ends (stepCatchUp keeps
// it); else the agreement pointer.
func (nd *Node) catchUpLo(e uint32) uint64 {
	c := nd.catchup
	switch {
	case c == nil:
		return nd.p.Agreed
	case c.epoch >= e:
		return c.end()
	default:
		return max(nd.p.Agreed, min(c.agreed, c.end()))
	}
}

// stepCatchUp takes a fetch response of a later epoch than this host's.
func (nd *Node) stepCatchUp(m Message) {
	end := m.Start + uint64(len(m.Entries))
	c := nd.catchup
	switched := false // to a newer epoch, keeping the agreed part and the batches asked past it
	if c != nil && m.LogEpoch < c.epoch {
		// It gathers a later epoch's log already (answers of two epochs
		// would undo each other). A member asked in the pipeline that
		// answers so is behind too: it is asked no more.
		if c.awaits(m.Start) {
			c.dropPeer(m.From)
			if nd.fetching && nd.fetchPeer == m.From {
				nd.fetchTicks = nd.fetchRTO() // ask another at the next tick
			}
		}
		return
	}
	if c != nil && m.LogEpoch > c.epoch {
		// The rack moved on to yet another epoch while this host gathered
		// one: what it gathered below that epoch's agreement pointer is
		// agreed, so it is the same in every later log; keep it and gather
		// the rest from the newer epoch. (Starting over from the agreement
		// pointer cost a restarted lab host three whole catch-ups when the
		// rack changed epochs twice during one.)
		keep := min(c.agreed, c.end())
		if keep > c.start && keep > nd.p.Agreed {
			// The batches asked past keep are answered from the epoch
			// their responders are in by then: still awaited, as are
			// the members (the answer limit, span, is the same).
			switched = true
			sent := slices.DeleteFunc(c.sent, func(b batchAsk) bool { return b.lo < keep })
			c = &catchUp{epoch: m.LogEpoch, start: c.start, entries: c.entries[:keep-c.start], agreed: keep,
				sent: sent, span: c.span, peers: c.peers, asked: c.asked}
			nd.catchup = c
		} else {
			c, nd.catchup = nil, nil
		}
	}
	switch {
	case c != nil && c.epoch == m.LogEpoch && m.Start >= c.start && m.Start <= c.end():
		// The next batch (or one that overlaps the batches gathered: every
		// host of an epoch holds the same entries from its install, so the
		// overlap is equal).
		c.answered(m.Start, m.From, nd.clock)
		if end <= c.end() {
			return // nothing new: a duplicate
		}
		c.entries = append(c.entries, m.Entries[c.end()-m.Start:]...)
	case c != nil && c.epoch == m.LogEpoch && m.Start > c.end() && c.awaits(m.Start):
		// A batch of the pipeline that came before the ones below it:
		// kept until they come.
		c.answered(m.Start, m.From, nd.clock)
		if c.ahead == nil {
			c.ahead = make(map[uint64]Message)
		}
		c.ahead[m.Start] = m
		c.agreed, c.hi = max(c.agreed, m.Agreed), max(c.hi, m.Hi)
		c.roster = m.Roster
		if switched {
			nd.gatherNext(c, &m) // what was gathered past the agreed part is asked again
		}
		return
	case m.Start <= nd.p.Agreed && m.Start >= nd.base:
		if end < nd.p.Agreed {
			// Agreed entries never change: check it, and report if not.
			for i := range m.Entries {
				if !m.Entries[i].Equal(&nd.log[m.Start+uint64(i)-nd.base]) {
					nd.event(EventSafety, m.LogEpoch, m.Start+uint64(i), nd.id)
					return
				}
			}
			if !nd.fetching {
				nd.fetch(m.From, nd.p.Agreed, 0)
				nd.fetchEpoch = m.LogEpoch
			}
			return
		}
		c = &catchUp{epoch: m.LogEpoch, start: m.Start, entries: slices.Clone(m.Entries)}
	default:
		// Neither a batch that adjoins the batches gathered nor one that
		// starts within the agreed prefix (a retried fetch asked from the
		// append pointer, or the responder moved to yet another epoch):
		// ask for what is missing.
		lo := nd.p.Agreed
		if c != nil && c.epoch == m.LogEpoch {
			lo = c.end()
		} else {
			nd.catchup = nil
		}
		nd.fetch(m.From, lo, 0)
		nd.fetchEpoch = m.LogEpoch
		return
	}
	c.agreed, c.hi = max(c.agreed, m.Agreed), max(c.hi, m.Hi)
	c.roster = m.Roster
	if end < m.Hi && len(m.Entries) > 0 {
		c.span = max(c.span, uint64(len(m.Entries))) // the most a batch held: the answer limit, once one was cut at it
	}
	nd.catchup = c
	last := c.drain(&m)
	if !c.done(last.Hi) {
		nd.gatherNext(c, last)
		return
	}
	complete := c.end() >= last.Hi
	m = *last
	nd.catchup = nil
	if c.start < nd.base {
		// Compacted meanwhile: agreed and delivered here, equal (checked
		// by adopt for what remains below the agreement pointer).
		k := min(nd.base-c.start, uint64(len(c.entries)))
		c.start, c.entries = c.start+k, c.entries[k:]
	}
	// The responder's skip set is that of its log end: it applies only
	// when the whole log is adopted (a prefix's skips follow from the
	// entries fetched after it).
	var skipped []uint8
	if complete {
		skipped = m.Skipped
	}
	nd.adopt(c.epoch, c.start, c.entries, m.Agreed, skipped, m.Roster, m.Hi)
	if nd.p.Epoch == c.epoch && !nd.p.Halted && nd.p.Append < m.Hi {
		// The frames of the epoch after the prefix: a batch of the
		// pipeline may be on its way with them already.
		if i := slices.IndexFunc(c.sent, func(b batchAsk) bool { return b.lo <= nd.p.Append && nd.p.Append < b.hi }); i >= 0 {
			nd.inFlight(c.sent[i], c.epoch)
		} else {
			nd.fetch(m.From, nd.p.Append, 0)
		}
	}
}

// inFlight makes batch b, asked already, the fetch under way, as old as
// it is.
func (nd *Node) inFlight(b batchAsk, e uint32) {
	nd.fetching, nd.fetchTicks = true, int(nd.clock-b.at)
	nd.fetchPeer, nd.fetchLo, nd.fetchEpoch = b.peer, b.lo, e
}

// gatherNext asks for what the entries gathered lack, after last, the
// answer gathered last: the batch at their end (the fetch under way,
// timed and sent again as any) and, with Config.FetchWindow > 1 once a
// batch showed the answer limit (span), the batches after it up to the
// window, of the members in turn. Pipelined, a batch asks for span
// entries from where the ones asked end; a batch answered short leaves a
// hole, asked for when the entries gathered reach it.
func (nd *Node) gatherNext(c *catchUp, last *Message) {
	if nd.cfg.FetchWindow <= 1 || c.span == 0 {
		nd.fetch(last.From, c.end(), 0)
		nd.fetchEpoch = c.epoch
		return
	}
	if len(c.peers) == 0 {
		c.peers = append(c.peers, last.From)
	}
	c.sent = slices.DeleteFunc(c.sent, func(b batchAsk) bool { return b.hi <= c.end() })
	if len(c.sent) > 0 && c.sent[0].lo <= c.end() {
		nd.inFlight(c.sent[0], c.epoch) // the batch at the end is on its way
	} else {
		nd.fetch(last.From, c.end(), c.askHead(last.From, nd.clock))
		nd.fetchEpoch = c.epoch
	}
	c.asked = max(c.asked, c.end())
	for len(c.sent) < nd.cfg.FetchWindow && c.asked < c.hi {
		lo, hi := c.asked, min(c.asked+c.span, c.hi)
		u := c.peers[c.turn%len(c.peers)]
		c.turn++
		nd.rd.Messages = append(nd.rd.Messages, Message{Type: MsgFetch, From: nd.uid, To: u, Epoch: nd.p.Epoch, Lo: lo, Hi: hi})
		c.sent = append(c.sent, batchAsk{lo: lo, hi: hi, peer: u, at: nd.clock})
		c.asked = hi
	}
}

// askHead records the batch at the end of the entries gathered as asked
// of peer at clock now, and returns where it ends: span entries on, or
// where the next batch asked or kept ahead starts (a hole).
func (c *catchUp) askHead(peer uint8, now uint64) uint64 {
	hi := c.end() + c.span
	if len(c.sent) > 0 {
		hi = min(hi, c.sent[0].lo)
	}
	for s := range c.ahead {
		if s > c.end() {
			hi = min(hi, s)
		}
	}
	c.sent = slices.Insert(c.sent, 0, batchAsk{lo: c.end(), hi: hi, peer: peer, at: now})
	c.asked = max(c.asked, hi)
	return hi
}

// senderID returns the member id of a frame's sender (a position) in the
// epoch gathered, if its roster is known; HistoryNone otherwise.
func (c *catchUp) senderID(pos uint8) uint8 {
	if int(pos) < len(c.roster) {
		return c.roster[pos]
	}
	return HistoryNone
}

// answered takes the batch asked from lo off the batches in flight; peer,
// which answered it at clock now, serves the next batch asked of it from
// now on: that batch's time (the fetch under way's, once it is the batch
// at the end) counts from now, not from when it was asked. A member
// answers the batches asked of it one after the other; timed from their
// asking, the second of four batches asked of one lab member (each some
// 50 ms to serve) was asked of another after TransferTicks, 20 ms before
// its answer came.
func (c *catchUp) answered(lo uint64, peer uint8, now uint64) {
	c.sent = slices.DeleteFunc(c.sent, func(b batchAsk) bool { return b.lo == lo })
	for i := range c.sent {
		if c.sent[i].peer == peer {
			c.sent[i].at = max(c.sent[i].at, now)
			break
		}
	}
}

// pipelined reports whether the gather asks for batches ahead.
func (c *catchUp) pipelined() bool { return c.span > 0 && c.peers != nil }

// againAt is fetchAgain's batch for a pipelined gather: the batch at the
// end was not answered in time by peer, which is asked no more while
// others answer in the epoch; the batch is asked of next, up to the next
// batch in flight.
func (c *catchUp) againAt(peer, next uint8, now uint64) uint64 {
	if len(c.peers) > 1 {
		c.dropPeer(peer)
	}
	c.sent = slices.DeleteFunc(c.sent, func(b batchAsk) bool { return b.lo <= c.end() })
	return c.askHead(next, now)
}
