package exo

import "slices"

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
}

func (c *catchUp) end() uint64 { return c.start + uint64(len(c.entries)) }

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
	if c != nil && m.LogEpoch < c.epoch {
		return // it gathers a later epoch's log already (answers of two epochs would undo each other)
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
			c = &catchUp{epoch: m.LogEpoch, start: c.start, entries: c.entries[:keep-c.start], agreed: keep}
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
		if end <= c.end() {
			return // nothing new: a duplicate
		}
		c.entries = append(c.entries, m.Entries[c.end()-m.Start:]...)
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
	c.agreed = max(c.agreed, m.Agreed)
	nd.catchup = c
	complete := c.end() >= m.Hi
	if !complete && (len(c.entries) == 0 || c.entries[len(c.entries)-1].Epoch != c.epoch) {
		nd.fetch(m.From, c.end(), 0)
		nd.fetchEpoch = c.epoch
		return
	}
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
		nd.fetch(m.From, nd.p.Append, 0) // the frames of the epoch after the prefix
	}
}
