package exo

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// Membership changes (docs/protocol.md section 7). A configuration is a
// roster of stable member ids, sorted; a host's position (the id frames
// carry) is its index in the roster. A configuration entry is an entry whose
// payload is exactly one record: ConfigMagic, an operation byte and a member
// id. The entry at seq c, of epoch E, sent under a roster with history
// length h, takes effect iff the log holds c+h and that entry is of epoch E
// too ("appending c+h agreed c", as a function of the log's content); the new
// roster applies from seq c+h+1 on, in a new epoch (the host halts after
// c+h and a view change installs the next epoch). Otherwise it is void.

// ConfigMagic starts the only record of a configuration entry. User payloads
// that start with it are refused (ErrReserved).
var ConfigMagic = []byte("\xE0EXOCFG1")

// ChangeOp is the operation of a configuration entry.
type ChangeOp uint8

// Configuration operations: one host added or removed.
const (
	ChangeAdd    ChangeOp = 1
	ChangeRemove ChangeOp = 2
)

// ConfigChange adds or removes one member (by stable member id).
type ConfigChange struct {
	Op     ChangeOp
	Member uint8
}

func (c ConfigChange) String() string {
	switch c.Op {
	case ChangeAdd:
		return fmt.Sprintf("add %d", c.Member)
	case ChangeRemove:
		return fmt.Sprintf("remove %d", c.Member)
	}
	return fmt.Sprintf("op%d %d", c.Op, c.Member)
}

// Errors of Propose and ProposeConfig.
var (
	ErrReserved       = errors.New("exo: payload starts with the reserved configuration magic")
	ErrChangeInFlight = errors.New("exo: a membership change is already in flight")
	ErrBadChange      = errors.New("exo: invalid membership change")
)

// Record returns the payload record of the configuration entry for c.
func (c ConfigChange) Record() []byte {
	return append(append(slices.Clone(ConfigMagic), byte(c.Op)), c.Member)
}

// ParseConfigEntry reports whether e is a configuration entry, and its change.
func ParseConfigEntry(e *Entry) (ConfigChange, bool) {
	if e.Count != 1 || len(e.Payload) != 2+len(ConfigMagic)+2 {
		return ConfigChange{}, false
	}
	rec := e.Payload[2:]
	if int(e.Payload[0])<<8|int(e.Payload[1]) != len(rec) || !bytes.HasPrefix(rec, ConfigMagic) {
		return ConfigChange{}, false
	}
	c := ConfigChange{Op: ChangeOp(rec[len(ConfigMagic)]), Member: rec[len(ConfigMagic)+1]}
	return c, c.Op == ChangeAdd || c.Op == ChangeRemove
}

// Apply returns the roster after c, or false when c does not apply to it
// (adding a member, removing a non-member, removing the last one, id 0xFF).
func (c ConfigChange) Apply(roster []uint8) ([]uint8, bool) {
	_, in := slices.BinarySearch(roster, c.Member)
	switch {
	case c.Member == HistoryNone:
		return nil, false
	case c.Op == ChangeAdd && !in && len(roster) < MaxRoster:
		r := append(slices.Clone(roster), c.Member)
		slices.Sort(r)
		return r, true
	case c.Op == ChangeRemove && in && len(roster) > 1:
		return slices.DeleteFunc(slices.Clone(roster), func(x uint8) bool { return x == c.Member }), true
	}
	return nil, false
}

// IdentityRoster returns the roster 0..n-1 of a rack that never changed.
func IdentityRoster(n int) []uint8 {
	r := make([]uint8, n)
	for i := range r {
		r[i] = uint8(i)
	}
	return r
}

// memberState follows the configuration along the log. It is a function of
// the log's content only. Slices are never written in place (clones share
// them).
type memberState struct {
	roster []uint8 // roster of the current position
	from   uint64  // seq from which roster applies

	pend       bool // a configuration entry of this roster, not yet effective nor void
	pendSeq    uint64
	pendEpoch  uint32
	pendH      int
	pendChange ConfigChange

	hasNext bool    // the pending entry took effect: next applies from nextAt
	next    []uint8 // (in the next epoch)
	nextAt  uint64
}

// observe moves the state past entry e, appended at the log's end. It
// returns true when e makes a configuration entry take effect. The caller
// applies a switch (hasNext, e.Seq >= nextAt) before it appends e.
func (m *memberState) observe(e *Entry) bool {
	if m.hasNext {
		return false // nothing counts between c+h and the switch
	}
	if m.pend {
		switch {
		case e.Epoch != m.pendEpoch:
			m.pend = false // carried into a later epoch before c+h: void
		case e.Seq == m.pendSeq+uint64(m.pendH):
			m.pend = false
			m.hasNext = true
			m.next, _ = m.pendChange.Apply(m.roster)
			m.nextAt = e.Seq + 1
			return true
		}
		return false
	}
	if c, ok := ParseConfigEntry(e); ok {
		if _, ok := c.Apply(m.roster); ok {
			m.pend, m.pendSeq, m.pendEpoch, m.pendH, m.pendChange = true, e.Seq, e.Epoch, len(m.roster)/2, c
			if m.pendH == 0 {
				return m.observeSelf(e)
			}
		}
	}
	return false
}

// observeSelf handles h = 0: the entry agrees itself.
func (m *memberState) observeSelf(e *Entry) bool {
	m.pend = false
	m.hasNext = true
	m.next, _ = m.pendChange.Apply(m.roster)
	m.nextAt = e.Seq + 1
	return true
}

// switchNow applies the effective change.
func (m *memberState) switchNow() {
	m.roster, m.from = m.next, m.nextAt
	m.hasNext, m.next = false, nil
}

// RosterAfter returns the roster in effect after entries (the log from the
// position where roster applies, with no change pending there), counting
// a change that took effect at the log's end as applied: the roster the next
// epoch installed on that log runs under.
func RosterAfter(roster []uint8, entries []Entry) []uint8 {
	return rosterAfter(memberState{roster: roster}, entries)
}

// rosterAfter is RosterAfter from a member state m, which may have a
// change pending (a view change's install resolves from the state at its
// start).
func rosterAfter(m memberState, entries []Entry) []uint8 {
	for i := range entries {
		if m.hasNext && entries[i].Seq >= m.nextAt {
			m.switchNow()
		}
		m.observe(&entries[i])
	}
	if m.hasNext {
		m.switchNow()
	}
	return m.roster
}

// --- Node side ---

// Roster returns the member ids of the configuration of this host's current
// log position (sorted; index = position).
func (nd *Node) Roster() []uint8 { return slices.Clone(nd.ms.roster) }

// MemberID returns this host's stable member id.
func (nd *Node) MemberID() uint8 { return nd.uid }

// Removed reports whether this host's log removed it from the roster: it
// sends no frame and starts no view change any more (it still answers).
func (nd *Node) Removed() bool { return nd.leaving || nd.notMember }

// ConfigSwitch reports the seq from which the current roster applies (0 for
// the rack's first roster).
func (nd *Node) ConfigSwitch() uint64 { return nd.ms.from }

// RosterAtBase reports whether the roster in force is the one this host's
// log begins with (from RestartNode, a state transfer, or a compaction
// that kept no switch after it): ConfigSwitch then tells where that
// roster is known to apply from, not a switch that this host's log made.
func (nd *Node) RosterAtBase() bool {
	return nd.ms.from == nd.baseMS.from && slices.Equal(nd.ms.roster, nd.baseMS.roster)
}

// ChangeInFlight reports whether a membership change is queued here, sits
// in the log without having taken effect (or been voided), or is this
// host's and waits for its fate: voided or cut by a view change, it is
// proposed again once that is agreed (reproposeConfig). Once it is false,
// a change this host proposed is in effect in its roster, or was dropped
// (another change came first or made it moot; this host was removed).
func (nd *Node) ChangeInFlight() bool {
	return nd.pendingCfg != nil || nd.ms.pend || nd.ms.hasNext || nd.voided != nil || nd.orphanCfgs > 0
}

// ProposeConfig queues a configuration entry that adds or removes one
// member. A second change is refused while one is in flight.
func (nd *Node) ProposeConfig(c ConfigChange) error {
	if nd.ChangeInFlight() {
		return ErrChangeInFlight
	}
	if _, ok := c.Apply(nd.ms.roster); !ok {
		return fmt.Errorf("%w: %s on roster %v", ErrBadChange, c, nd.ms.roster)
	}
	nd.pendingCfg = &c
	nd.maybeSend(false)
	if nd.hasProposal() {
		nd.wake()
	}
	return nil
}

// reproposeConfig queues again a configuration change of this host that a
// reconciliation dropped before it was agreed (another entry was agreed at
// its position), as a publisher publishes a dropped payload again: the
// operator who proposed it is told only by the roster in the status, so a
// dropped change would otherwise be lost silently. It is queued only if
// no other change is in flight and it still applies to the roster.
func (nd *Node) reproposeConfig(o *Entry) {
	if c, ok := ParseConfigEntry(o); ok {
		nd.reproposeChange(c, o)
	}
}

// reproposeChange queues c again (reproposeConfig), unless this host
// queued a change already, was removed, or c no longer applies to the
// roster (another change did the same, or undid its reason). A change of
// another host in flight does not stop it: it waits in the queue behind
// it, as a proposal does (send).
func (nd *Node) reproposeChange(c ConfigChange, at *Entry) {
	if nd.pendingCfg != nil || nd.Removed() {
		return
	}
	if _, ok := c.Apply(nd.ms.roster); !ok {
		return
	}
	nd.pendingCfg = &c
	nd.event(EventChangeAgain, at.Epoch, at.Seq, c.Member)
}

// voidedChange is a configuration change of this host that a view change
// voided: the entry at seq at ended its epoch before the change took
// effect (section 7). Once at is agreed the void is final.
type voidedChange struct {
	change ConfigChange
	at     uint64
}

// uidOf returns the member id at position pos of the current roster.
func (nd *Node) uidOf(pos uint8) uint8 {
	if int(pos) < len(nd.ms.roster) {
		return nd.ms.roster[pos]
	}
	return HistoryNone
}

// posOf returns the position of member uid in the current roster.
func (nd *Node) posOf(uid uint8) (uint8, bool) {
	i, ok := slices.BinarySearch(nd.ms.roster, uid)
	return uint8(i), ok
}

// applyRoster makes the node run under ms.roster: n, h, its position, the
// fast-path roster size. The history and the skip set are reset (positions
// changed) when reset is set.
func (nd *Node) applyRoster(reset bool) {
	nd.n = len(nd.ms.roster)
	nd.h = HistoryLen(nd.n)
	nd.p.Hosts = uint16(nd.n)
	pos, ok := nd.posOf(nd.uid)
	nd.notMember = !ok
	if ok {
		nd.id = pos
	} else {
		nd.id = HistoryNone
	}
	if reset {
		nd.p.ClearHistory()
		clear(nd.skipped[:])
		clear(nd.readmit[:])
		nd.emptyRun = 0
		if nd.keys.ann != nil {
			// A new roster may hold a member that waits for everyone's
			// announcement of a key (keys.go): announce ours once more.
			nd.keys.reannounce = true
		}
	}
}

// switchPending reports whether the log ends after an effective change in
// the epoch of its entry: the host must halt until a view change installs
// the next epoch.
func (nd *Node) switchPending() bool {
	return nd.ms.hasNext && nd.p.Append >= nd.ms.nextAt
}

// memberAt returns the member state at seq s (base <= s <= append), by
// replaying the log from the base.
func (nd *Node) memberAt(s uint64) memberState {
	m := nd.baseMS
	for i := uint64(0); i < s-nd.base; i++ {
		e := &nd.log[i]
		if m.hasNext && e.Seq >= m.nextAt {
			m.switchNow()
		}
		m.observe(e)
	}
	return m
}

// union returns the member ids of the given rosters, each once.
func union(rs ...[]uint8) []uint8 {
	var out []uint8
	for _, r := range rs {
		for _, x := range r {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	slices.Sort(out)
	return out
}

// RosterTracker follows the configuration along a log read in order, e.g.
// the agreed stream an embedder delivers: it names the roster of each entry
// (sender positions are positions in it).
type RosterTracker struct{ m memberState }

// NewRosterTracker starts at a position where roster applies with no change
// pending (nil: the rack's first roster of n hosts).
func NewRosterTracker(roster []uint8, n int) *RosterTracker {
	if roster == nil {
		roster = IdentityRoster(n)
	}
	return &RosterTracker{m: memberState{roster: slices.Clone(roster)}}
}

// Observe returns the roster of e (index = position; not to be modified)
// and moves past e, the entry after the previous one observed.
func (t *RosterTracker) Observe(e *Entry) []uint8 {
	if t.m.hasNext && e.Seq >= t.m.nextAt {
		t.m.switchNow()
	}
	r := t.m.roster
	t.m.observe(e)
	return r
}
