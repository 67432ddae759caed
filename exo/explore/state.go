package explore

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/exo-rack/exo/exo"
)

// item is one thing in flight: a frame on its way from one host to one other
// (a broadcast makes one item per receiver), or an OOB message. Items are
// immutable and shared between states.
type item struct {
	fp    fp // content hash, receiver and sender included
	from  uint8
	to    uint8
	frame *exo.Frame
	msg   *exo.Message
}

func newFrameItem(from, to uint8, f *exo.Frame) item {
	h := newHasher()
	h.u64(1<<16 | uint64(from)<<8 | uint64(to))
	h.frame(f)
	return item{fp: h.sum(), from: from, to: to, frame: f}
}

func newMsgItem(from uint8, m *exo.Message) item {
	h := newHasher()
	h.u64(2<<16 | uint64(from)<<8 | uint64(m.To))
	h.message(m)
	return item{fp: h.sum(), from: from, to: m.To, msg: m}
}

// state is one global state: the hosts, the network, and what the checker
// remembers of the path that led here. States are immutable once built: a
// successor shares every node but the one that acted.
type state struct {
	nodes  []*exo.Node
	nfp    []fp
	flight []item // sorted by fp: a canonical multiset

	proposed int           // payloads proposed so far (ids 1..proposed)
	ticks    []uint16      // ticks used, per host
	used     [numOps]uint8 // budgeted actions taken on this path, by op

	next    []uint64    // per host: the seq its delivery stream must deliver next
	global  []exo.Entry // global[s]: the entry delivered at s (by any host, ever)
	gfp     fp          // chained hash of global
	agreedP uint64      // payload ids (bit id-1) agreed somewhere
	dropped uint64      // payload ids reported dropped (Ready.Dropped)
}

// fingerprint is the canonical identity of a state.
func (s *state) fingerprint() fp {
	h := newHasher()
	for i := range s.nfp {
		h.fp(s.nfp[i])
		h.u64(uint64(s.ticks[i])<<32 | s.next[i])
	}
	h.u64(uint64(len(s.flight)))
	for i := range s.flight {
		h.fp(s.flight[i].fp)
	}
	h.u64(uint64(s.proposed))
	h.bytes(s.used[:])
	h.fp(s.gfp)
	h.u64(s.dropped)
	return h.sum()
}

// clone returns a shallow copy whose per-host slices may be changed.
func (s *state) clone() *state {
	c := *s
	c.nodes = slices.Clone(s.nodes)
	c.nfp = slices.Clone(s.nfp)
	c.ticks = slices.Clone(s.ticks)
	c.next = slices.Clone(s.next)
	c.global = slices.Clip(s.global) // append copies: siblings never share
	return &c
}

// Op is the kind of one action (one step of a trace).
type Op uint8

// Actions. Deliver, Drop and Dup name an in-flight item; the others a host.
const (
	OpDeliver   Op = iota + 1 // deliver an item and remove it from the network
	OpDrop                    // remove an item undelivered
	OpDup                     // deliver an item and leave a copy in the network
	OpTick                    // Tick() at a host
	OpPropose                 // Propose("p<k>") at a host, k = 1, 2, ... in order
	OpRestart                 // crash a host and restart it from its HardState
	OpAmnesia                 // crash a host and restart it without any state
	OpBroadcast               // Broadcast() at a host: it sends now, as a takeover
	OpCompact                 // Compact(d) at a host, d = least Delivered() of all hosts
	// OpGone reports a host's process gone to every other host: a
	// MsgGone from it to each goes in flight (to be delivered, dropped or
	// reordered like any message). The host itself runs on: a wrong
	// notice, the worst case; after a restart, a late one.
	OpGone
	numOps
)

var opNames = [...]string{"?", "deliver", "drop", "dup", "tick", "propose", "restart", "amnesia", "broadcast", "compact", "gone"}

func (k Op) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return "op(" + strconv.Itoa(int(k)) + ")"
}

// action is one transition out of a state: an item index for deliver, drop
// and dup, a host for the others.
type action struct {
	kind Op
	host int
	item int
}

// Violation is a property that failed.
type Violation struct {
	Kind string // agreement, safety-event, delivery, validity, dropped, pointers, core
	Host int    // the host whose step showed it
	Step int    // index of the step (in the trace) that showed it
	Msg  string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("%s at step %d, host %d: %s", v.Kind, v.Step+1, v.Host, v.Msg)
}

func violation(kind string, host int, format string, args ...any) *Violation {
	return &Violation{Kind: kind, Host: host, Msg: fmt.Sprintf(format, args...)}
}

// machine holds what every state of one exploration shares.
type machine struct {
	n      int
	cfgs   []exo.Config
	mode   Fingerprint
	events [exo.EventRetransmit + 1]int
	// onEvent, when set, is called for every event of every transition.
	onEvent func(host int, e exo.Event)
	verbose func(string)
	// gc removes dead items (see dead) after every step; amnesia is the
	// amnesiac-restart budget, which switches gc off while unspent.
	gc      bool
	amnesia int
}

func newMachine(n int, cfg exo.Config, mode Fingerprint) *machine {
	m := &machine{n: n, mode: mode}
	for i := 0; i < n; i++ {
		c := cfg
		c.ID = uint8(i)
		c.Hosts = n
		m.cfgs = append(m.cfgs, c)
	}
	return m
}

// initial returns the start state: n fresh hosts, nothing in flight.
func (m *machine) initial() (*state, error) {
	s := &state{ticks: make([]uint16, m.n), next: make([]uint64, m.n)}
	for i := 0; i < m.n; i++ {
		nd, err := exo.NewNode(m.cfgs[i])
		if err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, nd)
		s.nfp = append(s.nfp, nodeFP(nd, m.mode))
	}
	h := newHasher()
	s.gfp = h.sum()
	return s, nil
}

// payload returns the payload of proposal id: "p<id>".
func payload(id int) []byte { return []byte("p" + strconv.Itoa(id)) }

// apply carries out a on s and returns the successor, or the violation it
// shows. The acting host's Ready is drained into the network and checked.
// It returns (nil, nil) when the action does not apply (a Broadcast the
// rules forbid, a Compact with nothing to compact).
func (m *machine) apply(s *state, a action) (*state, *Violation) {
	c := s.clone()
	switch a.kind {
	case OpDeliver, OpTick, OpPropose: // no budget, or one of their own
	default:
		c.used[a.kind]++
	}
	i := a.host
	var it item
	if a.kind == OpDeliver || a.kind == OpDrop || a.kind == OpDup {
		it = s.flight[a.item]
		i = int(it.to)
		if a.kind != OpDup {
			c.flight = slices.Delete(slices.Clone(s.flight), a.item, a.item+1)
		}
		if a.kind == OpDrop {
			return c, nil
		}
	}
	if i < 0 || i >= m.n {
		return nil, violation("core", i, "item addressed to host %d outside the roster", i)
	}
	old := s.nodes[i]
	var nd *exo.Node
	switch a.kind {
	case OpRestart, OpAmnesia:
		var err error
		if a.kind == OpRestart {
			nd, err = exo.RestartNode(m.cfgs[i], old.HardState())
		} else {
			nd, err = exo.NewAmnesiacNode(m.cfgs[i])
		}
		if err != nil {
			return nil, violation("core", i, "restart: %v", err)
		}
		// A new incarnation delivers again from its log's first entry
		// (entries below were compacted: delivered everywhere already).
		c.next[i] = nd.LogBase()
	case OpGone:
		fl := slices.Clone(s.flight)
		for b := 0; b < m.n; b++ {
			if b != i {
				fl = append(fl, newMsgItem(uint8(i), &exo.Message{Type: exo.MsgGone, From: uint8(i), To: uint8(b)}))
			}
		}
		sortItems(fl)
		c.flight = fl
		return c, nil
	default:
		nd = old.Clone()
		switch a.kind {
		case OpDeliver, OpDup:
			if it.frame != nil {
				nd.StepFrame(it.frame)
			} else {
				nd.Step(*it.msg)
			}
		case OpTick:
			nd.Tick()
			c.ticks[i]++
		case OpPropose:
			c.proposed++
			if err := nd.Propose(payload(c.proposed)); err != nil {
				return nil, violation("core", i, "propose: %v", err)
			}
		case OpBroadcast:
			if !nd.Broadcast() {
				return nil, nil
			}
		case OpCompact:
			upTo := nd.Delivered()
			for _, o := range s.nodes {
				upTo = min(upTo, o.Delivered())
			}
			if upTo <= nd.LogBase() {
				return nil, nil
			}
			nd.Compact(upTo)
		default:
			return nil, violation("core", i, "unknown action %v", a.kind)
		}
	}
	c.nodes[i] = nd
	if v := m.drain(c, i); v != nil {
		return c, v
	}
	if v := m.check(c, i, old, a.kind == OpRestart || a.kind == OpAmnesia); v != nil {
		return c, v
	}
	c.nfp[i] = nodeFP(nd, m.mode)
	if m.gc && int(c.used[OpAmnesia]) >= m.amnesia {
		m.collect(c)
	}
	return c, nil
}

// collect removes the items that can no longer change their receiver.
func (m *machine) collect(c *state) {
	k := 0
	for _, it := range c.flight {
		if !m.dead(&it, c.nodes[it.to]) {
			k++
		}
	}
	if k == len(c.flight) {
		return
	}
	fl := make([]item, 0, k)
	for _, it := range c.flight {
		if !m.dead(&it, c.nodes[it.to]) {
			fl = append(fl, it)
		}
	}
	c.flight = fl
}

// dead reports whether delivering it to r would change nothing (but the
// Ready's Rejects), now and in every future of r, provided r never restarts
// without its state. It relies on these facts of the core: the log epoch and
// the promised epoch never decrease (a durable restart restores both); a
// host halted in epoch E stays halted until it adopts a newer epoch; the log
// of one epoch only grows; a view change in progress is always for the
// promised epoch, and maxEpochSeen >= promised.
func (m *machine) dead(it *item, r *exo.Node) bool {
	if r.Amnesiac() {
		return false
	}
	ep := r.Epoch()
	if f := it.frame; f != nil {
		if f.Type != exo.FrameData || int(f.Sender) >= m.n || len(f.History) != m.n/2 || f.Group != m.cfgs[0].Group {
			return true // rejected before any state is read: BAD_*
		}
		switch {
		case f.Epoch < ep: // STALE_EPOCH forever
			return true
		case f.Epoch > ep:
			return false
		case r.Halted(): // HALTED until the epoch moves, then STALE_EPOCH
			return true
		}
		if e, ok := r.Entry(f.Seq); ok { // DUPLICATE forever when equal
			return e.Seq == f.Seq && e.Epoch == f.Epoch && e.Sender == f.Sender && e.Count == f.Count &&
				e.Flags == f.Flags && string(e.History) == string(f.History) && string(e.Payload) == string(f.Payload)
		}
		return false
	}
	msg := it.msg
	switch msg.Type {
	case exo.MsgPromise, exo.MsgInstall:
		return msg.Epoch < r.Promised() || msg.Epoch <= ep
	case exo.MsgNack:
		return msg.Epoch <= r.Promised()
	case exo.MsgFetchResp:
		return msg.LogEpoch < ep || (msg.LogEpoch == ep && r.Halted()) || msg.LogEpoch < r.Promised()
	}
	return false
}

// drain carries out host i's Ready: events, deliveries, drops, and frames
// and messages into the network; then Advance.
func (m *machine) drain(c *state, i int) *Violation {
	nd := c.nodes[i]
	if !nd.HasReady() {
		return nil
	}
	rd := nd.Ready()
	defer nd.Advance()
	for _, e := range rd.Events {
		if int(e.Kind) < len(m.events) {
			m.events[e.Kind]++
		}
		if m.onEvent != nil {
			m.onEvent(i, e)
		}
		if m.verbose != nil {
			m.verbose(fmt.Sprintf("    host %d event %s epoch=%d seq=%d peer=%d", i, e.Kind, e.Epoch, e.Seq, e.Peer))
		}
		if e.Kind == exo.EventSafety {
			return violation("safety-event", i, "EventSafety epoch=%d seq=%d", e.Epoch, e.Seq)
		}
	}
	for k := range rd.Agreed {
		e := rd.Agreed[k]
		if m.verbose != nil {
			m.verbose(fmt.Sprintf("    host %d delivers %s", i, entryString(&e)))
		}
		if e.Seq != c.next[i] {
			return violation("delivery", i, "delivered seq %d, expected %d", e.Seq, c.next[i])
		}
		c.next[i]++
		if e.Seq < uint64(len(c.global)) {
			if !c.global[e.Seq].Equal(&e) {
				return violation("agreement", i, "delivered %s at seq %d, but %s was delivered there before",
					entryString(&e), e.Seq, entryString(&c.global[e.Seq]))
			}
			continue
		}
		if e.Seq != uint64(len(c.global)) {
			return violation("delivery", i, "delivered seq %d beyond the agreed prefix %d", e.Seq, len(c.global))
		}
		ids, err := payloadIDs(&e)
		if err != nil {
			return violation("validity", i, "seq %d: %v", e.Seq, err)
		}
		for _, id := range ids {
			bit := uint64(1) << (id - 1)
			switch {
			case id < 1 || id > c.proposed:
				return violation("validity", i, "seq %d carries payload p%d, never proposed", e.Seq, id)
			case c.agreedP&bit != 0:
				return violation("validity", i, "payload p%d agreed twice (again at seq %d)", id, e.Seq)
			case c.dropped&bit != 0:
				return violation("dropped", i, "payload p%d was reported dropped but is agreed at seq %d", id, e.Seq)
			}
			c.agreedP |= bit
		}
		c.global = append(c.global, e)
		h := hasher(c.gfp)
		h.entry(&e)
		c.gfp = h.sum()
	}
	for k := range rd.Dropped {
		ids, err := payloadIDs(&rd.Dropped[k])
		if err != nil {
			return violation("validity", i, "dropped entry: %v", err)
		}
		for _, id := range ids {
			if id < 1 || id > 64 {
				return violation("validity", i, "dropped payload p%d, never proposed", id)
			}
			bit := uint64(1) << (id - 1)
			if c.agreedP&bit != 0 {
				return violation("dropped", i, "payload p%d reported dropped, but it is agreed", id)
			}
			c.dropped |= bit
		}
	}
	if len(rd.Frames) > 0 || len(rd.Messages) > 0 {
		fl := slices.Clone(c.flight)
		for k := range rd.Frames {
			f := rd.Frames[k]
			for b := 0; b < m.n; b++ {
				if b != i {
					fl = append(fl, newFrameItem(uint8(i), uint8(b), &f))
				}
			}
		}
		for k := range rd.Messages {
			msg := rd.Messages[k]
			fl = append(fl, newMsgItem(uint8(i), &msg))
		}
		sortItems(fl)
		c.flight = fl
	}
	return nil
}

// sortItems puts items in their canonical order (by fingerprint).
func sortItems(fl []item) {
	slices.SortFunc(fl, func(x, y item) int {
		switch {
		case x.fp.less(y.fp):
			return -1
		case y.fp.less(x.fp):
			return 1
		}
		return 0
	})
}

// check verifies the invariants that host i's change can break: its log
// agrees with every other host's below both agreement pointers and with
// everything delivered anywhere; its agreement pointer stays within its log
// and does not move back (except across a restart).
func (m *machine) check(c *state, i int, old *exo.Node, restarted bool) *Violation {
	nd := c.nodes[i]
	p := nd.Pointers()
	lg, base := nd.Log(), nd.LogBase()
	if p.Append != base+uint64(len(lg)) {
		return violation("pointers", i, "append %d, but the log holds %d..%d", p.Append, base, base+uint64(len(lg)))
	}
	if p.Agreed > p.Append {
		return violation("pointers", i, "agreed %d beyond the append pointer %d", p.Agreed, p.Append)
	}
	if !restarted && p.Agreed < old.Pointers().Agreed {
		return violation("pointers", i, "agreed moved back from %d to %d", old.Pointers().Agreed, p.Agreed)
	}
	for k := range lg {
		if lg[k].Seq != base+uint64(k) {
			return violation("pointers", i, "log position %d holds seq %d", base+uint64(k), lg[k].Seq)
		}
	}
	for s := base; s < min(p.Agreed, uint64(len(c.global))); s++ {
		if e := &lg[s-base]; !e.Equal(&c.global[s]) {
			return violation("agreement", i, "agreed entry at seq %d is %s, but %s was delivered there",
				s, entryString(e), entryString(&c.global[s]))
		}
	}
	for j, o := range c.nodes {
		if j == i {
			continue
		}
		ol, ob := o.Log(), o.LogBase()
		lim := min(p.Agreed, o.Pointers().Agreed, ob+uint64(len(ol)))
		for s := max(base, ob); s < lim; s++ {
			if a, b := &lg[s-base], &ol[s-ob]; !a.Equal(b) {
				return violation("agreement", i, "seq %d: host %d has %s, host %d has %s (both agreed)",
					s, i, entryString(a), j, entryString(b))
			}
		}
	}
	return nil
}

// payloadIDs returns the proposal ids of an entry's records ("p<id>").
func payloadIDs(e *exo.Entry) ([]int, error) {
	var ids []int
	err := e.Records(func(rec []byte) error {
		if len(rec) < 2 || rec[0] != 'p' {
			return fmt.Errorf("record %q is not a proposal", rec)
		}
		id, err := strconv.Atoi(string(rec[1:]))
		if err != nil {
			return fmt.Errorf("record %q is not a proposal", rec)
		}
		ids = append(ids, id)
		return nil
	})
	return ids, err
}
