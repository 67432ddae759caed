package exo

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// rack is the tests' one harness around Node: a rack of hosts on a network
// that delivers every frame and message once, in the order they were sent
// (FIFO), and loses only what a test tells it to lose (a partition, a
// one-way cut, a host down, dropMsg). Every Ready is carried out as soon as
// it is made: the log it persists is the node's own (HardState at a
// crash), its frames and messages join the network, its agreed entries
// join the host's delivery stream.
//
// The Go tests drive it directly (newRack, collect, run, runTicking,
// tickAll); the walk-through scripts drive it by command
// (walkthrough_test.go) and read what it did from its trace. Hosts are
// indexed by member id; a host's name in traces is its id as a letter
// (A = 0, B = 1, ...).
type rack struct {
	nodes    []*Node
	cfgs     []Config  // each host's configuration as given (restarts use it)
	agreed   [][]Entry // each host's delivery stream since it last (re)started
	past     [][]Entry // delivery streams of earlier incarnations (a crash ends one)
	inflight []flight  // the network, oldest first
	frames   int       // frames sent in all
	onFrame  func(from int, f Frame)
	dropMsg  func(m Message) bool // OOB messages it returns true for are lost
	rejects  []Reject             // every frame any node rejected
	events   map[EventKind]int    // events reported, by kind

	down  []bool          // hosts crashed (not yet restarted): they hear nothing, tick never
	saved []HardState     // the durable state of a crashed host
	side  []int           // partition side of each host: what crosses sides is lost
	cut   map[[2]int]loss // one-way cuts (from, to): what is lost on that way
	// paused: a host the machine does not schedule (pause): what reaches
	// it waits in parked, in order, until it runs again; -1: none.
	paused int
	parked []flight

	out   *strings.Builder // trace; nil: none
	level traceLevel
}

// flight is one frame or message on the network.
type flight struct {
	from, to int
	frame    *Frame
	msg      *Message
}

// loss says what a one-way cut loses.
type loss uint8

const (
	lossFrames loss = 1 << iota // broadcast frames
	lossOOB                     // out-of-band messages
	lossAll    = lossFrames | lossOOB
)

// traceLevel is how much of what the rack does its trace tells.
type traceLevel uint8

const (
	traceNone   traceLevel = iota
	traceEvents            // protocol events (takeovers, view changes, gaps, key switches, ...) and dropped entries
	traceAll               // and every frame sent, every delivery, every agreement
)

// newRack returns a rack of n hosts started by NewNode, each with a
// configuration (ID, Hosts, Group 1) that mod (if not nil) may change.
func newRack(t testing.TB, n int, mod func(*Config)) *rack {
	t.Helper()
	r := &rack{events: map[EventKind]int{}, cut: map[[2]int]loss{}, paused: -1}
	for i := 0; i < n; i++ {
		c := Config{ID: uint8(i), Hosts: n, Group: 1}
		if mod != nil {
			mod(&c)
		}
		nd, err := NewNode(c)
		if err != nil {
			t.Fatal(err)
		}
		r.add(nd, c)
	}
	return r
}

// add puts nd, started with cfg, on the rack as the next host (its member
// id must be its index) and returns that index.
func (r *rack) add(nd *Node, cfg Config) int {
	r.nodes = append(r.nodes, nd)
	r.cfgs = append(r.cfgs, cfg)
	r.agreed = append(r.agreed, nil)
	r.down = append(r.down, false)
	r.saved = append(r.saved, HardState{})
	r.side = append(r.side, 0)
	return len(r.nodes) - 1
}

func (r *rack) printf(l traceLevel, format string, args ...any) {
	if r.out != nil && r.level >= l {
		fmt.Fprintf(r.out, format, args...)
	}
}

// hostName is host i's name in traces and scripts: its member id as a
// letter.
func hostName(i int) string {
	if i < 0 || i >= 26 {
		return "#" + strconv.Itoa(i)
	}
	return string(rune('A' + i))
}

// member returns the member id at position pos of roster (the ids frames
// and entries carry are positions).
func member(roster []uint8, pos uint8) int {
	if int(pos) < len(roster) {
		return int(roster[pos])
	}
	return int(pos)
}

// histString names the hosts of a history (positions in roster): X for an
// empty slot.
func histString(roster []uint8, h []uint8) string {
	var parts []string
	for _, x := range h {
		if x == HistoryNone {
			parts = append(parts, "X")
		} else {
			parts = append(parts, hostName(member(roster, x)))
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// collect carries out host i's Ready: its frames and messages join the
// network, its agreed entries its delivery stream.
func (r *rack) collect(i int) {
	nd := r.nodes[i]
	rd := nd.Ready()
	for _, ev := range rd.Events {
		r.events[ev.Kind]++
		r.traceEvent(i, ev)
	}
	for _, f := range rd.Frames {
		r.frames++
		if r.onFrame != nil {
			r.onFrame(i, f)
		}
		if r.out != nil && r.level >= traceAll {
			r.printf(traceAll, "%s broadcasts M=%d,%s", hostName(i), f.Seq, histString(nd.Roster(), f.History))
			if f.Count > 0 {
				r.printf(traceAll, " (%d payloads)", f.Count)
			}
			if f.Flags&FlagReadmit != 0 {
				r.printf(traceAll, " readmits %s", hostName(member(nd.Roster(), uint8(f.Flags&FlagHostMask))))
			}
			r.printf(traceAll, "\n")
		}
		for b := range r.nodes {
			if b != i {
				fc := f
				r.inflight = append(r.inflight, flight{from: i, to: b, frame: &fc})
			}
		}
	}
	for _, m := range rd.Messages {
		if r.dropMsg != nil && r.dropMsg(m) {
			continue
		}
		mc := m
		r.inflight = append(r.inflight, flight{from: i, to: int(m.To), msg: &mc})
	}
	if len(rd.Agreed) > 0 {
		if r.out != nil && r.level >= traceAll {
			var s []string
			for _, en := range rd.Agreed {
				s = append(s, strconv.FormatUint(en.Seq, 10))
			}
			r.printf(traceAll, "%s: agreed %s\n", hostName(i), strings.Join(s, ","))
		}
		r.agreed[i] = append(r.agreed[i], rd.Agreed...)
	}
	for _, en := range rd.Dropped {
		r.printf(traceEvents, "%s: dropped its unagreed entry %d: its publisher is told\n", hostName(i), en.Seq)
	}
	r.rejects = append(r.rejects, rd.Rejects...)
	nd.Advance()
}

// traceEvent tells event ev of host i. Retransmissions are not told: the
// frame sent again is.
func (r *rack) traceEvent(i int, ev Event) {
	if r.out == nil || r.level < traceEvents {
		return
	}
	nd, x := r.nodes[i], hostName(i)
	switch ev.Kind {
	case EventViewChange:
		// The cause, unless a divergence (told on the line before).
		why := ""
		if ev.Cause != CauseDivergence {
			why = " (" + ev.Cause.String() + ")"
		}
		r.printf(traceEvents, "%s: starts a view change to epoch %d%s\n", x, ev.Epoch, why)
	case EventInstalled:
		p := nd.Pointers()
		r.printf(traceEvents, "%s: installed epoch %d: seq=%d history=%s agreed=%d\n", x, ev.Epoch, p.Append, histString(nd.Roster(), p.Hist()), p.Agreed)
	case EventTakeover:
		r.printf(traceEvents, "%s: token timeout, takes the token over from %s\n", x, hostName(member(nd.Roster(), ev.Peer)))
	case EventDivergence:
		r.printf(traceEvents, "%s: divergence at seq %d\n", x, ev.Seq)
	case EventSafety:
		r.printf(traceEvents, "%s: SAFETY VIOLATION at seq %d\n", x, ev.Seq)
	case EventGap:
		r.printf(traceEvents, "%s: gap at seq %d (a frame of %s ahead): repairs it\n", x, ev.Seq, hostName(member(nd.Roster(), ev.Peer)))
	case EventKeySwitch:
		r.printf(traceEvents, "%s: sends under key phase %d from seq %d\n", x, ev.Peer, ev.Seq)
	case EventKeyRetired:
		r.printf(traceEvents, "%s: retires the key of phase %d at seq %d\n", x, ev.Peer, ev.Seq)
	case EventSkippedAlive:
		r.printf(traceEvents, "%s: a takeover at seq %d passed it over while it runs\n", x, ev.Seq)
	case EventChangeAgain:
		r.printf(traceEvents, "%s: its roster change of member %s is queued again (fate agreed at seq %d)\n", x, hostName(int(ev.Peer)), ev.Seq)
	case EventPastFloor:
		r.printf(traceEvents, "%s: every member compacted past its agreement pointer %d: it becomes amnesiac\n", x, ev.Seq)
	case EventFloorJump:
		r.printf(traceEvents, "%s: its state transfer starts at %s's log base %d\n", x, hostName(int(ev.Peer)), ev.Seq)
	case EventAcceptedLoss:
		r.printf(traceEvents, "%s: resolved epoch %d with a loss accepted from seq %d\n", x, ev.Epoch, ev.Seq)
	case EventRetransmit:
	default:
		r.printf(traceEvents, "%s: %s epoch %d seq %d\n", x, ev.Kind, ev.Epoch, ev.Seq)
	}
}

// lost reports whether the network loses fl.
func (r *rack) lost(fl flight) bool {
	if r.down[fl.to] || r.side[fl.from] != r.side[fl.to] {
		return true
	}
	c := r.cut[[2]int{fl.from, fl.to}]
	return fl.frame != nil && c&lossFrames != 0 || fl.msg != nil && c&lossOOB != 0
}

// deliverOne delivers the oldest item on the network (or loses it).
func (r *rack) deliverOne() {
	fl := r.inflight[0]
	r.inflight = r.inflight[1:]
	if r.lost(fl) {
		return
	}
	if fl.to == r.paused {
		r.parked = append(r.parked, fl)
		return
	}
	nd := r.nodes[fl.to]
	to, from := hostName(fl.to), hostName(fl.from)
	if fl.frame != nil {
		res := nd.StepFrame(fl.frame)
		switch res {
		case ReasonAccept:
			r.printf(traceAll, "%s <- %s M=%d: append\n", to, from, fl.frame.Seq)
		case ReasonDuplicate:
		default:
			r.printf(traceAll, "%s <- %s M=%d,%s: %s\n", to, from, fl.frame.Seq, histString(r.nodes[fl.from].Roster(), fl.frame.History), res)
		}
	} else {
		m := fl.msg
		if r.out != nil && r.level >= traceAll {
			switch m.Type {
			case MsgPrepare, MsgInstall, MsgNack:
				r.printf(traceAll, "%s <- %s %s epoch %d\n", to, from, m.Type, m.Epoch)
			case MsgPromise:
				r.printf(traceAll, "%s <- %s Promise epoch %d: log epoch %d, agreed %d, entries %d..%d\n",
					to, from, m.Epoch, m.LogEpoch, m.Agreed, m.Start, m.Start+uint64(len(m.Entries)))
			case MsgFetch:
				r.printf(traceAll, "%s <- %s Fetch from %d\n", to, from, m.Lo)
			case MsgFetchResp:
				r.printf(traceAll, "%s <- %s FetchResp: log epoch %d, agreed %d, entries %d..%d of %d\n",
					to, from, m.LogEpoch, m.Agreed, m.Start, m.Start+uint64(len(m.Entries)), m.Hi)
			default:
				r.printf(traceAll, "%s <- %s %s\n", to, from, m.Type)
			}
		}
		nd.Step(*m)
	}
	r.collect(fl.to)
}

// resume ends a pause: what reached the paused host comes first.
func (r *rack) resume() {
	r.inflight = append(r.parked, r.inflight...)
	r.paused, r.parked = -1, nil
}

// run delivers until nothing is in flight or limit deliveries were made.
func (r *rack) run(limit int) {
	for k := 0; len(r.inflight) > 0 && k < limit; k++ {
		r.deliverOne()
	}
}

// tickAll ticks every host that is up once and collects what they send.
func (r *rack) tickAll() {
	for i, nd := range r.nodes {
		if !r.down[i] {
			nd.Tick()
			r.collect(i)
		}
	}
}

// runTicking delivers, ticking every node whenever nothing is in flight,
// until frames frames were sent in all (or 10,000 steps), calling after
// (if not nil) after each delivery.
func (r *rack) runTicking(frames int, after func()) {
	for steps := 0; r.frames < frames && steps < 10000; steps++ {
		if len(r.inflight) == 0 {
			r.tickAll()
			continue
		}
		r.deliverOne()
		if after != nil {
			after()
		}
	}
}

// crash stops host i: it hears nothing and ticks no more; its durable
// state is what its node holds (every Ready was persisted at once), and
// its delivery stream ends.
func (r *rack) crash(i int) {
	r.down[i] = true
	r.saved[i] = r.nodes[i].HardState()
	r.past = append(r.past, r.agreed[i])
	r.agreed[i] = nil
}

// restart starts host i again, from its durable state (RestartNode: it
// delivers its agreed entries again, from its log's first) or, amnesiac,
// from none (NewAmnesiacNode: a wiped disk).
func (r *rack) restart(i int, amnesiac bool) error {
	if !r.down[i] {
		r.crash(i)
	}
	var nd *Node
	var err error
	if amnesiac {
		nd, err = NewAmnesiacNode(r.cfgs[i])
	} else {
		nd, err = RestartNode(r.cfgs[i], r.saved[i])
	}
	if err != nil {
		return err
	}
	r.nodes[i], r.down[i] = nd, false
	r.collect(i)
	return nil
}
