package exo

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestWalkthrough runs the interaction scripts in testdata/walkthrough: each
// drives a small rack (the tests' rack harness, rack_test.go) step by step
// and prints what the hosts did and what a scenario checks, in the style of
// etcd raft's interaction tests. The expected output lives in the script;
// regenerate it with
//
//	go test ./exo -run TestWalkthrough -rewrite
//
// and read the diff: an expected output is a check only once someone has
// confirmed it by the protocol. Hosts are named A, B, C, ... by member id;
// senders and histories are printed as member ids too (a log entry carries
// positions in the roster of its time). Every command fails the test on a
// SAFETY event. Commands:
//
//	rack hosts=N [timers=manual|exo] [trace=all|events|none] [key=K] [<timer>=T ...]
//	                                a new rack. timers=manual (the default): the token passes
//	                                only when the script says so (broadcast) or after 1,000
//	                                ticks, and it is taken over after 2,000; timers=exo: exo's
//	                                defaults. <timer> sets one Config field: token-timeout,
//	                                token-timeout-min, takeover-stagger, retransmit, pass-delay,
//	                                backoff (IdleBackoffMax), view-change-timeout, rejoin,
//	                                fetch (FetchTicks), fetch-entries (MaxFetchEntries),
//	                                fetch-window (FetchWindow), key-grace (KeyGraceTicks),
//	                                gone-ticks (GoneTicks). key=K: the frame key is
//	                                key K (16 bytes: K, then zeros). trace: what commands print
//	                                of what the hosts do (all: every frame and delivery;
//	                                events: protocol events only; none)
//	join X [amnesiac [transfer-pace=B] [transfer-yield=P probe=T]]
//	                                host X (the next id) starts outside the roster: following
//	                                the rack's log, or amnesiac (a spare that transfers state;
//	                                at most B bytes a tick: TransferBytesPerTick; adaptive, keeping
//	                                the rack at P percent, pauses of T ticks: TransferYield)
//	broadcast X                     host X sends a frame now (as the token holder)
//	propose X text                  queue a payload at X
//	load rounds=N                   N payloads proposed at the first roster's hosts in turn,
//	                                each delivered before the next
//	deliver [n=K]                   deliver everything in flight (or the K oldest items;
//	                                partitions and cuts apply)
//	partition A,B/C,D,E             cut the segment and the OOB network in groups
//	cut from=A,B to=C [frames|oob]  one way: what A and B send to C is lost (frames, OOB
//	                                messages, or both)
//	heal [cuts]                     undo partitions and cuts (cuts: the one-way cuts only)
//	crash X|holder [notify]         host X (holder: the token holder) stops; what is in flight
//	                                to it is lost; notify: its daemon alone died, and every
//	                                other host up is told its process is gone (MsgGone)
//	gone X|holder                   every other host up is told X's process is gone, wrongly
//	restart X [amnesiac]            X starts again from its durable state, or without it
//	config X add=Y|remove=Y         X proposes a roster change
//	stage-key X ... key=K           the hosts stage key K (a key rotation)
//	retire-key X ...                the hosts empty the key slot they do not send under
//	tick [X ...] [n=N] [load] [costly=X:B] [until=COND [max=N]] [trace=L]
//	                                tick hosts (all by default) N times, delivering after each
//	                                round; load: every member up proposes a payload before
//	                                each round. costly: a fetch answer of N bytes to host X
//	                                costs its sender N/B of its next ticks (a transfer's cost to
//	                                members that share their machine with it).
//	                                until: tick until COND holds after a round (at most
//	                                max rounds, 1,000 by default) and say after how many:
//	                                an event name (takeover, installed, view-change, gap,
//	                                key-switch, key-retired, ...: reported by any host),
//	                                sends=X (X sent a frame), synced (nothing in flight and
//	                                every member up holds the same epoch, append and agreement
//	                                pointers, none halted), caught-up=X (see lag). Unless the
//	                                trace is all, a summary of the agreement pointers follows
//	inject to=X from=Y seq=S hist=Y,Z [epoch=E] [key=K phase=P]
//	                                hand X a crafted frame (sealed under X's key, or key K in
//	                                slot P)
//	state [X ...] [log=K] [from=S] [to=S]
//	                                the hosts' pointers and logs (the last K entries; seq S..S)
//	rosters [X ...]                 each host's roster, position, switch point, pointers' roster size
//	keys [X ...]                    each host's key slots and rotation
//	detector [X ...]                each host's token-loss detector
//	recovery [X ...]                each host's gap repair, catch-up and state transfer
//	lag [X ...]                     whether each host holds what the rack (its first member up)
//	                                had agreed two token timeouts of ticks ago
//	delivered [X ...] [records]     each host's delivery stream (and its payloads)
//	counters [reset]                frames (by key phase and sender), messages (by sender and
//	                                type; the bytes of fetched entries), rejects, events and
//	                                payloads since the last reset
//	check                           every delivery stream (of every host and incarnation) is
//	                                gapless and agrees with every other at every seq; no payload
//	                                at two seqs; every core record a key or roster record; then
//	                                what became of every payload proposed
//	same-log                        fail unless every host holds the same log
func TestWalkthrough(t *testing.T) {
	datadriven.Walk(t, "../testdata/walkthrough", func(t *testing.T, path string) {
		s := &scenario{costly: -1}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			s.t = t
			return s.handle(d)
		})
	})
}

// scenario is a script's state around its rack.
type scenario struct {
	t        *testing.T
	r        *rack
	out      strings.Builder
	first    int               // the size of the first roster
	base     Config            // the configuration every host starts from
	keyNames map[uint64]string // key fingerprint -> k<K>
	proposed []string          // payloads Propose took, in order
	seq      map[int]int       // payloads generated at each host
	safety   int               // SAFETY events already reported
	// rackAgreed is the agreement pointer of the first running member
	// after each tick.
	rackAgreed []uint64

	// counters since the last reset
	phases   [2]int
	frames   map[int]int    // by sender
	msgs     map[[2]int]int // (sender, type)
	msgBytes map[[2]int]int // (sender, type): the entries' binary size
	// costly is the host whose fetches' answers cost their senders a
	// tick per costBytes bytes (tick costly=X:B; -1: none); busy counts
	// the ticks each sender still owes.
	costly    int
	costBytes int
	busy      map[int]int
	mark      struct {
		rejects, proposed int
		events            map[EventKind]int
	}
}

func (s *scenario) printf(format string, args ...any) { fmt.Fprintf(&s.out, format, args...) }

// id returns the host named x.
func (s *scenario) id(x string) int {
	x = strings.TrimSpace(x)
	if len(x) == 1 && x[0] >= 'A' && int(x[0]-'A') < len(s.r.nodes) {
		return int(x[0] - 'A')
	}
	s.t.Fatalf("unknown host %q", x)
	return -1
}

func isHostName(x string) bool { return len(x) == 1 && x[0] >= 'A' && x[0] <= 'Z' }

// hosts returns the hosts named as bare arguments, or every host.
func (s *scenario) hosts(d *datadriven.TestData) []int {
	var hs []int
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 && isHostName(a.Key) {
			hs = append(hs, s.id(a.Key))
		}
	}
	if hs == nil {
		for i := range s.r.nodes {
			hs = append(hs, i)
		}
	}
	return hs
}

func (s *scenario) intArg(d *datadriven.TestData, key string, def int) int {
	if a, ok := d.Arg(key); ok {
		v, err := strconv.Atoi(a.Vals[0])
		if err != nil {
			d.Fatalf(s.t, "%s=%s: %v", key, a.Vals[0], err)
		}
		return v
	}
	return def
}

func (s *scenario) strArg(d *datadriven.TestData, key, def string) string {
	if a, ok := d.Arg(key); ok {
		return a.Vals[0]
	}
	return def
}

// traceArg returns the trace level the command's trace= names, or def.
func (s *scenario) traceArg(d *datadriven.TestData, def traceLevel) traceLevel {
	switch l := s.strArg(d, "trace", ""); l {
	case "":
		return def
	case "all":
		return traceAll
	case "events":
		return traceEvents
	case "none":
		return traceNone
	default:
		d.Fatalf(s.t, "trace=%s: all, events or none", l)
		return def
	}
}

// key returns key K (K, then zeros) and names it kK in what scripts print.
func (s *scenario) key(k int) [TagKeyLen]byte {
	key := [TagKeyLen]byte{byte(k)}
	s.keyNames[KeyFingerprint(key)] = "k" + strconv.Itoa(k)
	return key
}

func (s *scenario) keyName(fp uint64) string {
	if n, ok := s.keyNames[fp]; ok {
		return n
	}
	return fmt.Sprintf("%016x", fp)
}

func roster(ids []uint8) string {
	var s []string
	for _, x := range ids {
		s = append(s, hostName(int(x)))
	}
	return strings.Join(s, ",")
}

func (s *scenario) handle(d *datadriven.TestData) string {
	s.out.Reset()
	if s.r == nil && d.Cmd != "rack" {
		d.Fatalf(s.t, "no rack yet")
	}
	switch d.Cmd {
	case "rack":
		s.newRack(d)
	case "join":
		s.join(d)
	case "broadcast":
		i := s.id(d.CmdArgs[0].Key)
		nd := s.r.nodes[i]
		if !nd.Broadcast() {
			p := nd.Pointers()
			s.printf("%s: refuses to send: it is in its own history %s, every receiver would reject the frame (SENDER_IN_HISTORY)\n",
				hostName(i), histString(nd.Roster(), p.Hist()))
		}
		s.r.collect(i)
	case "propose":
		i := s.id(d.CmdArgs[0].Key)
		s.propose(i, d.CmdArgs[1].Key)
		s.r.collect(i)
	case "load":
		for k := 0; k < s.intArg(d, "rounds", 1); k++ {
			i := k % s.first
			s.propose(i, s.payload(i))
			s.r.collect(i)
			s.r.run(1 << 20)
		}
		s.summary()
	case "deliver":
		s.r.run(s.intArg(d, "n", 1<<20))
		if n := len(s.r.inflight); n > 0 {
			s.printf("(%d in flight)\n", n)
		}
	case "partition":
		for gi, g := range strings.Split(d.CmdArgs[0].Key, "/") {
			for _, h := range strings.Split(g, ",") {
				s.r.side[s.id(h)] = gi
			}
		}
		s.printf("partition %s\n", d.CmdArgs[0].Key)
	case "cut":
		s.cut(d)
	case "heal":
		clear(s.r.cut)
		if d.HasArg("cuts") {
			s.printf("one-way cuts healed\n")
			break
		}
		clear(s.r.side)
		s.printf("healed\n")
	case "crash":
		i := s.hostOrHolder(d)
		s.r.crash(i)
		s.printf("%s crashes\n", hostName(i))
		if d.HasArg("notify") {
			// The daemon alone died: its kernel closed its sockets, and
			// every other host's OOB transport reports it gone (MsgGone).
			s.gone(i)
		}
	case "gone":
		s.gone(s.hostOrHolder(d)) // a notice about a host that runs (a wrong one)
	case "pause":
		s.pause(d)
	case "restart":
		i := s.id(d.CmdArgs[0].Key)
		amnesiac := d.HasArg("amnesiac")
		if amnesiac {
			s.printf("%s restarts without its state\n", hostName(i))
		} else {
			hs := s.r.saved[i]
			if !s.r.down[i] {
				hs = s.r.nodes[i].HardState()
			}
			s.printf("%s restarts from its durable state: epoch %d, agreed %d, log %d entries\n", hostName(i), hs.Epoch, hs.Agreed, len(hs.Log))
		}
		if err := s.r.restart(i, amnesiac); err != nil {
			s.t.Fatal(err)
		}
	case "config":
		s.config(d)
	case "stage-key":
		var k int
		d.ScanArgs(s.t, "key", &k)
		key := s.key(k)
		for _, i := range s.hosts(d) {
			ph, err := s.r.nodes[i].StageKey(key)
			if err != nil {
				s.printf("%s: %v\n", hostName(i), err)
			} else {
				s.printf("%s: stages k%d in phase %d\n", hostName(i), k, ph)
			}
			s.r.collect(i)
		}
	case "retire-key":
		for _, i := range s.hosts(d) {
			s.printf("%s: retires its other key: held one %v\n", hostName(i), s.r.nodes[i].RetireKey())
			s.r.collect(i)
		}
	case "tick":
		s.tick(d)
	case "inject":
		s.inject(d)
	case "state":
		from, to := s.intArg(d, "from", 0), s.intArg(d, "to", -1)
		for _, i := range s.hosts(d) {
			s.state(i, s.intArg(d, "log", -1), uint64(from), uint64(to))
		}
	case "rosters":
		for _, i := range s.hosts(d) {
			s.rosters(i)
		}
	case "keys":
		for _, i := range s.hosts(d) {
			s.keys(i)
		}
	case "detector":
		for _, i := range s.hosts(d) {
			dt := s.r.nodes[i].Detector()
			s.printf("%s: takeover timeout %d ticks (floor %d, ceiling %d, longest gap %d), stagger %d, %d samples, %d late frames\n",
				hostName(i), dt.Timeout, dt.Min, dt.Max, dt.Peak, dt.Stagger, dt.Samples, dt.Late)
		}
	case "lag":
		for _, i := range s.hosts(d) {
			_, line := s.caughtUp(i)
			s.printf("%s\n", line)
		}
	case "recovery":
		for _, i := range s.hosts(d) {
			s.recovery(i)
		}
	case "delivered":
		for _, i := range s.hosts(d) {
			s.delivered(i, d.HasArg("records"))
		}
	case "counters":
		s.counters()
		if d.HasArg("reset") {
			s.resetCounters()
		}
	case "check":
		s.check()
	case "same-log":
		s.sameLog()
	default:
		d.Fatalf(s.t, "unknown command %q", d.Cmd)
	}
	if n := s.r.events[EventSafety]; n > s.safety {
		s.t.Errorf("%s: %d SAFETY events", d.Pos, n-s.safety)
		s.safety = n
	}
	return s.out.String()
}

func (s *scenario) newRack(d *datadriven.TestData) {
	var n int
	d.ScanArgs(s.t, "hosts", &n)
	s.keyNames = map[uint64]string{}
	s.proposed, s.seq, s.safety, s.rackAgreed = nil, map[int]int{}, 0, nil
	c := Config{Hosts: n, Group: 7, TagKey: s.key(s.intArg(d, "key", 0))}
	switch t := s.strArg(d, "timers", "manual"); t {
	case "manual":
		// Hosts pass the token only when the script says so (broadcast)
		// or after PassDelay ticks; timeouts are long so that the script
		// decides when they fire.
		c.PassDelay, c.TokenTimeout, c.RetransmitTicks = 1000, 2000, 1000
	case "exo":
	default:
		d.Fatalf(s.t, "timers=%s: manual or exo", t)
	}
	for k, f := range map[string]*int{
		"token-timeout": &c.TokenTimeout, "token-timeout-min": &c.TokenTimeoutMin, "takeover-stagger": &c.TakeoverStagger,
		"retransmit": &c.RetransmitTicks, "pass-delay": &c.PassDelay, "backoff": &c.IdleBackoffMax,
		"view-change-timeout": &c.ViewChangeTimeout, "rejoin": &c.RejoinTicks, "fetch": &c.FetchTicks,
		"fetch-entries": &c.MaxFetchEntries, "fetch-window": &c.FetchWindow, "key-grace": &c.KeyGraceTicks, "gone-ticks": &c.GoneTicks,
	} {
		*f = s.intArg(d, k, *f)
	}
	s.first, s.base = n, c
	s.r = newRack(s.t, n, func(cfg *Config) { id := cfg.ID; *cfg = c; cfg.ID = id })
	s.r.out = &s.out
	s.r.level = s.traceArg(d, traceAll)
	s.r.dropMsg = func(m Message) bool {
		k := [2]int{int(m.From), int(m.Type)}
		s.msgs[k]++
		size := 0
		for i := range m.Entries {
			size += m.Entries[i].BinarySize()
		}
		s.msgBytes[k] += size
		if s.costly >= 0 && m.Type == MsgFetchResp && int(m.To) == s.costly {
			s.busy[int(m.From)] += size / s.costBytes
		}
		return false
	}
	s.resetCounters()
	s.printf("%d hosts, h=%d, majority %d\n", n, HistoryLen(n), Majority(n))
}

func (s *scenario) join(d *datadriven.TestData) {
	u := len(s.r.nodes)
	if x := d.CmdArgs[0].Key; x != hostName(u) {
		d.Fatalf(s.t, "join %s: the next host is %s", x, hostName(u))
	}
	cfg := s.base
	cfg.ID = uint8(u)
	var nd *Node
	var err error
	if d.HasArg("amnesiac") {
		cfg.TransferBytesPerTick = s.intArg(d, "transfer-pace", 0)
		cfg.TransferTurnBytes = s.intArg(d, "transfer-turn", 0)
		cfg.TransferYield = s.intArg(d, "transfer-yield", 0)
		cfg.TransferProbeTicks = s.intArg(d, "probe", 0)
		nd, err = NewAmnesiacNode(cfg)
		s.printf("%s joins without state, outside the roster\n", hostName(u))
	} else {
		// A joiner with a log: it follows the rack's log from its
		// first roster on.
		cfg.Hosts = u + 1
		nd, err = RestartNode(cfg, HardState{Roster: IdentityRoster(s.first)})
		s.printf("%s joins outside the roster, following the log\n", hostName(u))
	}
	if err != nil {
		s.t.Fatal(err)
	}
	s.r.add(nd, cfg)
	s.r.collect(u)
}

// payload returns the next payload of host i: its name and a count.
func (s *scenario) payload(i int) string {
	s.seq[i]++
	return hostName(i) + strconv.Itoa(s.seq[i])
}

// loadAt proposes host i's next payload as load does: a refusal (a full
// queue) is not reported.
func (s *scenario) loadAt(i int) {
	p := s.payload(i)
	if s.r.nodes[i].Propose([]byte(p)) == nil {
		s.proposed = append(s.proposed, p)
	}
	s.r.collect(i)
}

func (s *scenario) propose(i int, p string) bool {
	if err := s.r.nodes[i].Propose([]byte(p)); err != nil {
		s.printf("%s: %v\n", hostName(i), err)
		return false
	}
	s.proposed = append(s.proposed, p)
	return true
}

// firstMember returns the first running member.
func (s *scenario) firstMember() int {
	for i, nd := range s.r.nodes {
		if !s.r.down[i] && !nd.Removed() {
			return i
		}
	}
	s.t.Fatal("no member is running")
	return -1
}

// holder is the token holder by the first running member's log.
func (s *scenario) holder() int {
	nd := s.r.nodes[s.firstMember()]
	return member(nd.Roster(), nd.Holder())
}

// caughtUp reports whether host i holds what the rack (its first running
// member) had agreed two token timeouts ago (an idle rack still agrees
// empty frames: a host that follows it by fetching is always a little
// behind), and says so.
func (s *scenario) caughtUp(i int) (bool, string) {
	tt := s.r.nodes[i].Config().TokenTimeout
	a := s.r.nodes[i].Pointers().Agreed
	k := len(s.rackAgreed) - 1 - 2*tt
	if k < 0 {
		return false, fmt.Sprintf("%s: agreed %d; the rack ran fewer than two token timeouts (%d ticks)", hostName(i), a, 2*tt)
	}
	then := s.rackAgreed[k]
	ok := a >= then
	verdict := map[bool]string{true: "caught up", false: "behind"}[ok]
	return ok, fmt.Sprintf("%s: agreed %d; the rack agreed %d now, %d two token timeouts (%d ticks) ago: %s",
		hostName(i), a, s.rackAgreed[len(s.rackAgreed)-1], then, 2*tt, verdict)
}

func (s *scenario) cut(d *datadriven.TestData) {
	var from, to string
	d.ScanArgs(s.t, "from", &from)
	d.ScanArgs(s.t, "to", &to)
	what, l := "frames and OOB messages", lossAll
	switch {
	case d.HasArg("frames"):
		what, l = "frames", lossFrames
	case d.HasArg("oob"):
		what, l = "OOB messages", lossOOB
	}
	for _, f := range strings.Split(from, ",") {
		for _, t := range strings.Split(to, ",") {
			s.r.cut[[2]int{s.id(f), s.id(t)}] |= l
		}
	}
	s.printf("cut %s -> %s: %s lost\n", from, to, what)
}

func (s *scenario) config(d *datadriven.TestData) {
	i := s.id(d.CmdArgs[0].Key)
	var c ConfigChange
	var who, op string
	switch {
	case d.HasArg("add"):
		d.ScanArgs(s.t, "add", &who)
		c, op = ConfigChange{Op: ChangeAdd, Member: uint8(s.id(who))}, "add"
	case d.HasArg("remove"):
		d.ScanArgs(s.t, "remove", &who)
		c, op = ConfigChange{Op: ChangeRemove, Member: uint8(s.id(who))}, "remove"
	default:
		d.Fatalf(s.t, "config: add= or remove=")
	}
	if err := s.r.nodes[i].ProposeConfig(c); err != nil {
		s.printf("%s: %s %s: %v\n", hostName(i), op, who, err)
	} else {
		s.printf("%s: proposes %s %s\n", hostName(i), op, who)
	}
	s.r.collect(i)
}

// hostOrHolder is the host the command's first argument names: a host's
// name, or holder (the token holder).
func (s *scenario) hostOrHolder(d *datadriven.TestData) int {
	if x := d.CmdArgs[0].Key; x != "holder" {
		return s.id(x)
	}
	return s.holder()
}

// pause stops the host its first argument names (holder: the token
// holder) for n ticks, a process the machine did not schedule: the others
// tick (with load, proposing), it neither ticks nor proposes, and what
// reaches it waits in order. It reports whether a takeover passed it over
// meanwhile; then the host reads what waited for it, or with acts-first
// ticks once before it does.
func (s *scenario) pause(d *datadriven.TestData) {
	i, n := s.hostOrHolder(d), s.intArg(d, "n", 1)
	taken := s.r.events[EventTakeover]
	s.r.paused = i
	for k := 0; k < n; k++ {
		for j, nd := range s.r.nodes {
			if j == i || s.r.down[j] {
				continue
			}
			if d.HasArg("load") && !nd.Removed() {
				s.loadAt(j)
			}
			nd.Tick()
			s.r.collect(j)
		}
		s.r.run(1 << 20)
		s.rackAgreed = append(s.rackAgreed, s.r.nodes[s.firstMember()].Pointers().Agreed)
	}
	what := "not taken over"
	if s.r.events[EventTakeover] > taken {
		what = "taken over"
	}
	s.printf("%s paused %d ticks: %s\n", hostName(i), n, what)
	if d.HasArg("acts-first") {
		// It runs once before it reads what reached it meanwhile (its
		// socket was late too): its frame, if it still holds the token
		// as it sees it, follows a takeover's.
		s.r.nodes[i].Tick()
		s.r.collect(i)
		s.r.run(1 << 20)
	}
	s.r.resume() // then it reads what waited for it
	s.r.run(1 << 20)
}

// gone steps a MsgGone about host i at every other live host, as their
// OOB transports do when i's process dies.
func (s *scenario) gone(i int) {
	u := s.r.nodes[i].MemberID()
	for j, nd := range s.r.nodes {
		if j != i && !s.r.down[j] {
			nd.Step(Message{Type: MsgGone, From: u, To: nd.MemberID()})
			s.r.collect(j)
		}
	}
	s.printf("the others are told %s's process is gone\n", hostName(i))
}

func (s *scenario) tick(d *datadriven.TestData) {
	level := s.r.level
	s.r.level = s.traceArg(d, level)
	defer func() { s.r.level = level }()
	var only []int
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 && isHostName(a.Key) {
			only = append(only, s.id(a.Key))
		}
	}
	until := s.strArg(d, "until", "")
	n := s.intArg(d, "n", 1)
	if until != "" {
		n = s.intArg(d, "max", 1000)
	}
	s.costly, s.costBytes = -1, 0
	defer func() { s.costly, s.busy = -1, nil }()
	if c := s.strArg(d, "costly", ""); c != "" {
		host, k, ok := strings.Cut(c, ":")
		b, err := strconv.Atoi(k)
		if !ok || err != nil || b < 1 {
			d.Fatalf(s.t, "costly=%s: want X:B (a host, bytes of its fetches' answers per tick of their sender's)", c)
		}
		s.costly, s.costBytes, s.busy = s.id(host), b, map[int]int{}
	}
	frames := s.r.frames
	for k := 1; k <= n; k++ {
		events := maps.Clone(s.r.events)
		sent := s.framesBy()
		if d.HasArg("load") {
			for i := range s.r.nodes {
				if !s.r.down[i] && !s.r.nodes[i].Removed() {
					s.loadAt(i)
				}
			}
		}
		for i, nd := range s.r.nodes {
			if s.busy[i] > 0 {
				s.busy[i]-- // serving a transfer (costly): this tick is the answer's
				continue
			}
			if !s.r.down[i] && (only == nil || slices.Contains(only, i)) {
				nd.Tick()
				s.r.collect(i)
			}
		}
		s.r.run(1 << 20)
		s.rackAgreed = append(s.rackAgreed, s.r.nodes[s.firstMember()].Pointers().Agreed)
		if until != "" && s.holds(d, until, events, sent) {
			s.printf("%s after %d ticks\n", until, k)
			break
		} else if until != "" && k == n {
			s.printf("no %s in %d ticks\n", until, n)
		}
	}
	if s.r.level < traceAll {
		s.printf("%d frames sent; ", s.r.frames-frames)
		s.summary()
	}
}

// framesBy returns the frames each host sent so far.
func (s *scenario) framesBy() []int {
	out := make([]int, len(s.r.nodes))
	for i, n := range s.frames {
		out[i] = n
	}
	return out
}

// holds reports whether the condition cond of tick's until holds after a
// round that started with events and sent frames counted.
func (s *scenario) holds(d *datadriven.TestData, cond string, events map[EventKind]int, sent []int) bool {
	r := s.r
	switch {
	case strings.HasPrefix(cond, "caught-up="):
		ok, _ := s.caughtUp(s.id(strings.TrimPrefix(cond, "caught-up=")))
		return ok
	case cond == "synced":
		if len(r.inflight) > 0 {
			return false
		}
		var ref *Pointers
		for i, nd := range r.nodes {
			p := nd.Pointers()
			switch {
			case r.down[i] || nd.Removed():
			case nd.Halted() || nd.Transferring():
				return false
			case ref == nil:
				ref = &p
			case p.Epoch != ref.Epoch || p.Append != ref.Append || p.Agreed != ref.Agreed:
				return false
			}
		}
		return true
	case strings.HasPrefix(cond, "sends="):
		i := s.id(strings.TrimPrefix(cond, "sends="))
		return s.framesBy()[i] > sent[i]
	}
	for k := EventKind(1); int(k) < len(eventNames); k++ {
		if k.String() == cond {
			return r.events[k] > events[k]
		}
	}
	d.Fatalf(s.t, "until=%s: unknown condition", cond)
	return false
}

// summary prints every running host's agreement pointer.
func (s *scenario) summary() {
	var ag []string
	for i, nd := range s.r.nodes {
		if s.r.down[i] {
			ag = append(ag, hostName(i)+" down")
		} else {
			ag = append(ag, fmt.Sprintf("%s=%d", hostName(i), nd.Pointers().Agreed))
		}
	}
	s.printf("agreed %s\n", strings.Join(ag, " "))
}

func (s *scenario) inject(d *datadriven.TestData) {
	var to, from, hist string
	var seq uint64
	var epoch uint64
	d.ScanArgs(s.t, "to", &to)
	d.ScanArgs(s.t, "from", &from)
	d.ScanArgs(s.t, "seq", &seq)
	d.ScanArgs(s.t, "hist", &hist)
	d.MaybeScanArgs(s.t, "epoch", &epoch)
	i := s.id(to)
	nd := s.r.nodes[i]
	pos := func(x string) uint8 {
		p := slices.Index(nd.Roster(), uint8(s.id(x)))
		if p < 0 {
			d.Fatalf(s.t, "%s is not in %s's roster", x, to)
		}
		return uint8(p)
	}
	f := Frame{Type: FrameData, Group: nd.Config().Group, Sender: pos(from), Seq: seq, Epoch: uint32(epoch)}
	for _, h := range strings.Split(hist, ",") {
		if h == "X" {
			f.History = append(f.History, HistoryNone)
		} else {
			f.History = append(f.History, pos(h))
		}
	}
	// Injected, but by a host of the rack: sealed under the rack's key,
	// or the key the script names.
	if d.HasArg("key") {
		var k, ph int
		d.ScanArgs(s.t, "key", &k)
		d.ScanArgs(s.t, "phase", &ph)
		f.SealPhase(uint8(ph), s.key(k))
	} else {
		f.Seal(nd.Config().TagKey)
	}
	res := nd.StepFrame(&f)
	s.printf("%s <- %s M=%d,%s: %s\n", hostName(i), from, seq, histString(nd.Roster(), f.History), res)
	s.r.collect(i)
}

// records names the records of e: payloads quoted, core records decoded.
func (s *scenario) records(e *Entry) []string {
	var recs []string
	_ = e.Records(func(r []byte) error {
		if a, ok := ParseKeyRecord(r); ok {
			recs = append(recs, fmt.Sprintf("<holds %s in phase %d>", s.keyName(a.Fingerprint), a.Phase))
		} else if IsControlRecord(r) {
			// A roster record: ConfigMagic, the operation, the member.
			op, who := "?", "?"
			if k := len(ConfigMagic); len(r) == k+2 {
				op = map[ChangeOp]string{ChangeAdd: "add", ChangeRemove: "remove"}[ChangeOp(r[k])]
				who = hostName(int(r[k+1]))
			}
			recs = append(recs, fmt.Sprintf("<roster change: %s %s>", op, who))
		} else {
			recs = append(recs, strconv.Quote(string(r)))
		}
		return nil
	})
	return recs
}

// state prints host i's pointers and the entries of its log (the last
// ones, seq from..to).
func (s *scenario) state(i, last int, from, to uint64) {
	nd := s.r.nodes[i]
	if s.r.down[i] {
		s.printf("%s: down\n", hostName(i))
		return
	}
	p := nd.Pointers()
	s.printf("%s: seq=%d history=%s agreed=%d epoch=%d", hostName(i), p.Append, histString(nd.Roster(), p.Hist()), p.Agreed, p.Epoch)
	if nd.Amnesiac() {
		s.printf(" AMNESIAC")
	}
	if nd.Halted() {
		s.printf(" HALTED(promised %d)", nd.Promised())
	}
	if nd.Removed() {
		s.printf(" not a member")
	} else {
		s.printf(" token=%s", hostName(member(nd.Roster(), nd.Holder())))
	}
	s.printf("\n")
	log := nd.Log()
	tr := NewRosterTracker(nd.BaseRoster(), s.first)
	for k := range log {
		en := &log[k]
		ros := tr.Observe(en)
		if last >= 0 && k < len(log)-last {
			if k == 0 {
				s.printf("     (%d entries before)\n", len(log)-last)
			}
			continue
		}
		if en.Seq < from || en.Seq > to {
			continue
		}
		mark := " "
		if en.Seq < p.Agreed {
			mark = "*"
		}
		s.printf("   %s %d %s %s", mark, en.Seq, hostName(member(ros, en.Sender)), histString(ros, en.History))
		if en.Count > 0 {
			s.printf(" %s", strings.Join(s.records(en), " "))
		}
		if en.Epoch > 0 {
			s.printf(" (epoch %d)", en.Epoch)
		}
		s.printf("\n")
	}
}

func (s *scenario) rosters(i int) {
	nd := s.r.nodes[i]
	if s.r.down[i] {
		s.printf("%s: down\n", hostName(i))
		return
	}
	p := nd.Pointers()
	s.printf("%s: roster %s", hostName(i), roster(nd.Roster()))
	if sw := nd.ConfigSwitch(); sw > 0 {
		s.printf(" from seq %d", sw)
	}
	if nd.Removed() {
		s.printf(", not a member")
	} else {
		s.printf(", position %d", nd.ID())
	}
	s.printf("; pointers: %d hosts, epoch %d, seq %d, agreed %d", p.Hosts, p.Epoch, p.Append, p.Agreed)
	if nd.ChangeInFlight() {
		s.printf("; a change in flight")
	}
	s.printf("\n")
}

func (s *scenario) keys(i int) {
	ks := s.r.nodes[i].KeyStatus()
	slot := func(ph int) string {
		if !ks.Valid[ph] {
			return "-"
		}
		return s.keyName(ks.Fingerprints[ph])
	}
	s.printf("%s: sends under phase %d; slots %s %s", hostName(i), ks.SendPhase, slot(0), slot(1))
	if ks.Staged {
		s.printf("; staged %s, waiting for %s", slot(1-int(ks.SendPhase)), roster(ks.Waiting))
	}
	if ks.OldValid {
		s.printf("; old key %s held (grace %d ticks", slot(1-int(ks.SendPhase)), ks.GraceTicks)
		if len(ks.NotMoved) > 0 {
			s.printf("; %s not seen sending under the new one", roster(ks.NotMoved))
		}
		s.printf(")")
	}
	s.printf("\n")
}

func (s *scenario) recovery(i int) {
	nd := s.r.nodes[i]
	rc := nd.Recovery()
	s.printf("%s: heard epoch %d up to seq %d", hostName(i), rc.RackEpoch, rc.RackSeq)
	if rc.Fetching {
		s.printf("; fetching from %s (%d ticks)", hostName(int(rc.FetchPeer)), rc.FetchTicks)
	}
	if rc.Gathered > 0 {
		s.printf("; gathered %d entries of epoch %d", rc.Gathered, rc.GatherEpoch)
	}
	if rc.ViewChange != nil {
		s.printf("; leads a view change to epoch %d", rc.ViewChange.Epoch)
	}
	if rc.Transferring {
		s.printf("; state transfer towards %d", rc.TransferTo)
		if y := s.r.nodes[i].cfg.TransferYield; y > 0 {
			s.printf(", pace %d bytes a tick, the rack at %d%% (yield %d%%)", rc.TransferPace, rc.TransferRackPercent, y)
		}
	}
	s.printf("\n")
}

func (s *scenario) delivered(i int, recs bool) {
	st := s.r.agreed[i]
	s.printf("%s: ", hostName(i))
	if len(st) == 0 {
		s.printf("nothing delivered")
	} else {
		payloads := 0
		for k := range st {
			_ = st[k].Records(func(rec []byte) error {
				if !IsControlRecord(rec) {
					payloads++
				}
				return nil
			})
		}
		s.printf("delivered seq %d..%d (%d payloads)", st[0].Seq, st[len(st)-1].Seq, payloads)
	}
	if s.r.down[i] {
		s.printf(", down")
	}
	s.printf("\n")
	if recs {
		for k := range st {
			if st[k].Count > 0 {
				s.printf("   %d %s\n", st[k].Seq, strings.Join(s.records(&st[k]), " "))
			}
		}
	}
}

func (s *scenario) resetCounters() {
	s.phases, s.frames = [2]int{}, map[int]int{}
	s.msgs, s.msgBytes = map[[2]int]int{}, map[[2]int]int{}
	s.r.onFrame = func(from int, f Frame) {
		s.phases[KeyPhaseOf(f.Flags)]++
		s.frames[from]++
	}
	s.mark.rejects, s.mark.proposed = len(s.r.rejects), len(s.proposed)
	s.mark.events = maps.Clone(s.r.events)
}

func (s *scenario) counters() {
	sent := s.framesBy()
	var by []string
	total := 0
	for i, n := range sent {
		if n > 0 {
			by = append(by, fmt.Sprintf("%s %d", hostName(i), n))
			total += n
		}
	}
	s.printf("frames: %d (key phase 0: %d, phase 1: %d", total, s.phases[0], s.phases[1])
	if len(by) > 0 {
		s.printf("; by %s", strings.Join(by, ", "))
	}
	s.printf(")\n")
	var ms []string
	for _, k := range slices.SortedFunc(maps.Keys(s.msgs), func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	}) {
		m := fmt.Sprintf("%s %s %d", hostName(k[0]), MsgType(k[1]), s.msgs[k])
		if MsgType(k[1]) == MsgFetchResp {
			m += fmt.Sprintf(" (%d bytes of entries)", s.msgBytes[k])
		}
		ms = append(ms, m)
	}
	s.printf("messages: %s\n", orNone(strings.Join(ms, ", ")))
	rej := map[Reason]int{}
	for _, x := range s.r.rejects[s.mark.rejects:] {
		rej[x.Reason]++
	}
	var rs []string
	for _, k := range slices.Sorted(maps.Keys(rej)) {
		rs = append(rs, fmt.Sprintf("%s %d", k, rej[k]))
	}
	s.printf("rejects: %s\n", orNone(strings.Join(rs, ", ")))
	var es []string
	for _, k := range slices.Sorted(maps.Keys(s.r.events)) {
		if n := s.r.events[k] - s.mark.events[k]; n > 0 {
			es = append(es, fmt.Sprintf("%s %d", k, n))
		}
	}
	s.printf("events: %s\n", orNone(strings.Join(es, ", ")))
	s.printf("payloads proposed: %d\n", len(s.proposed)-s.mark.proposed)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// check checks every delivery stream against the others and prints what
// they hold.
func (s *scenario) check() {
	r := s.r
	streams := append(slices.Clone(r.past), r.agreed...)
	at := map[uint64]*Entry{}
	where := map[string]uint64{} // payload -> seq
	var lo, hi uint64
	keyRecs, cfgRecs := 0, 0
	fail := func(format string, args ...any) {
		s.t.Errorf(format, args...)
		s.printf("FAIL: "+format+"\n", args...)
	}
	for si, st := range streams {
		for k := range st {
			e := &st[k]
			if k > 0 && e.Seq != st[k-1].Seq+1 {
				fail("stream %d: seq %d delivered after %d", si, e.Seq, st[k-1].Seq)
			}
			if o, ok := at[e.Seq]; ok {
				if !o.Equal(e) {
					fail("seq %d delivered as two different entries", e.Seq)
				}
				continue
			}
			at[e.Seq] = e
			if len(at) == 1 || e.Seq < lo {
				lo = e.Seq
			}
			hi = max(hi, e.Seq)
			_ = e.Records(func(rec []byte) error {
				switch _, isKey := ParseKeyRecord(rec); {
				case isKey:
					keyRecs++
				case IsControlRecord(rec):
					if _, ok := ParseConfigEntry(e); !ok {
						fail("seq %d: a core record that is neither a key nor a roster record", e.Seq)
					}
					cfgRecs++
				default:
					if o, ok := where[string(rec)]; ok {
						fail("payload %q delivered at seq %d and %d", rec, o, e.Seq)
					}
					where[string(rec)] = e.Seq
				}
				return nil
			})
		}
	}
	if len(at) == 0 {
		s.printf("nothing delivered\n")
		return
	}
	if uint64(len(at)) != hi-lo+1 {
		fail("the streams hold %d of seq %d..%d", len(at), lo, hi)
	}
	s.printf("%d delivery streams agree on seq %d..%d: %d payloads, each once; %d key and %d roster records\n",
		len(streams), lo, hi, len(where), keyRecs, cfgRecs)
	missing := 0
	for _, p := range s.proposed {
		if _, ok := where[p]; !ok {
			missing++
		}
	}
	s.printf("of %d payloads proposed, %d delivered, %d not (yet)\n", len(s.proposed), len(s.proposed)-missing, missing)
}

func (s *scenario) sameLog() {
	ref := s.r.nodes[0]
	for i, nd := range s.r.nodes[1:] {
		a, b := ref.Log(), nd.Log()
		if len(a) != len(b) || ref.Pointers().Agreed != nd.Pointers().Agreed {
			s.t.Fatalf("%s and %s differ: %d/%d entries, agreed %d/%d", hostName(0), hostName(i+1), len(a), len(b), ref.Pointers().Agreed, nd.Pointers().Agreed)
		}
		for k := range a {
			if !a[k].Equal(&b[k]) {
				s.t.Fatalf("%s and %s differ at seq %d", hostName(0), hostName(i+1), k)
			}
		}
	}
	s.printf("all %d hosts hold the same %d entries, agreed=%d\n", len(s.r.nodes), len(ref.Log()), ref.Pointers().Agreed)
}
