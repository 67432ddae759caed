package token_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/exo/token"
)

// TestScenarios runs the scripts in testdata: each drives a small rack in
// token mode step by step (every host an exo.Node behind a token.Mem and
// its control plane token.Driver, wired as exo/sim wires them) and prints
// what the fast paths and the cores did. The expected output lives in the
// script; regenerate it with
//
//	go test ./exo/token -run TestScenarios -rewrite
//
// and read the diff. Hosts are named A, B, C, ... (member ids 0, 1, 2, ...;
// a log entry's sender is a position, the same letter while the roster is
// the first one). The network is perfect and FIFO: a frame reaches the
// receiver's fast path when it is delivered, and the frame the fast path
// answers it with goes to the tail of the network at once; the control
// planes read their records only when the script says so. Commands:
//
//	rack hosts=N                    a new rack (fast paths armed where they may run)
//	propose X [n=K]                 K payloads "X1", "X2", ... through X's Driver.Propose, then sync X
//	deliver [n=K]                   deliver K items in flight (default: until none is left), one line each
//	read X [nosync]                 X's control plane steps its records (then syncs, unless nosync)
//	sync [X ...]                    Ready, Driver.Sync, Ready, Release (all hosts by default)
//	quiesce X                       Driver.Quiesce, then the core's Ready
//	tick [X ...] [n=K] [only] [v]   tick (quiescing a host whose deadline is due first), then run after each tick
//	                                (unless only); a line per tick in which a core sent a frame
//	run [hops=K] [rounds=R] [v]     deliver K waves (default: everything), every host reads and syncs; until
//	                                quiet, or R rounds of that
//	lose to=X seq=S [from=Y]        the next frame of seq S delivered to X is lost
//	partition A,B/C,D,E | heal      frames and messages between groups are lost
//	hold X                          X's control plane stops releasing its records (until it restarts)
//	crash X [keep]                  X's daemon dies; keep: its fast path outlives it (Mem.Crash), else it is lost too
//	restart X                       X restarts from its durable state (Driver.Recover over a kept fast path)
//	config X add=Y | remove=Y       X proposes a roster change (quiesce, Node.ProposeConfig, sync)
//	state [X ...] [log=K]           every host's core, fast path and control plane
//	check [all]                     every delivery stream (of every host and incarnation) is a prefix of the
//	                                longest, no payload twice, a running fast path in step with its core;
//	                                all: and every payload delivered by every member that is up, but those a
//	                                view change dropped (Ready.Dropped) and those published at a daemon that
//	                                died since (counted as lost)
//
// The harness checks on every step what must always hold: after a sync, a
// fast path runs only if the core is in the plain case; a quiesce leaves
// the fast path halted (so no core promises or acts with its fast path
// running); a tick that was not quiesced does nothing; and no control
// plane counts a desync.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		r := &rack{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			r.t = t
			return r.handle(d)
		})
	})
}

type host struct {
	nd      *exo.Node
	fp      *token.Mem
	drv     *token.Driver
	durable exo.HardState
	up      bool
	inc     int  // incarnation: a restart starts a new delivery stream
	hold    bool // releases withheld
	seq     int  // payloads proposed so far
}

type item struct {
	from, to int
	f        *exo.Frame
	m        *exo.Message
}

type loss struct {
	to, from int // from -1: any
	seq      uint64
}

// activity counts what a command did, for its summary line.
type activity struct {
	delivered, frames, msgs int
	fastSent, coreSent      int
	records                 int
	retransmits             int
}

type rack struct {
	t       *testing.T
	cfg     exo.Config
	hosts   []*host
	side    []int
	net     []item
	losses  []loss
	streams map[[2]int][]exo.Entry
	keys    [][2]int        // stream keys in order of creation
	offered map[string]bool // payloads proposed
	dropped map[string]bool // payloads of entries a view change dropped (Ready.Dropped)
	atRisk  map[string]bool // payloads published at a daemon that died since (crash)
	verbose bool
	act     activity
	coreLog []string // frames the cores sent, for tick's lines
	out     strings.Builder
}

func name(i int) string { return string(rune('A' + i)) }

func (r *rack) id(s string) int {
	s = strings.TrimSpace(s)
	if len(s) == 1 && s[0] >= 'A' && int(s[0]-'A') < len(r.hosts) {
		return int(s[0] - 'A')
	}
	r.t.Fatalf("unknown host %q", s)
	return -1
}

func (r *rack) printf(format string, args ...any) { fmt.Fprintf(&r.out, format, args...) }

// vprintf prints in verbose mode only.
func (r *rack) vprintf(format string, args ...any) {
	if r.verbose {
		r.printf(format, args...)
	}
}

func intArg(d *datadriven.TestData, key string, def int) int {
	for _, a := range d.CmdArgs {
		if a.Key == key && len(a.Vals) > 0 {
			v, err := strconv.Atoi(a.Vals[0])
			if err != nil {
				panic(fmt.Sprintf("%s=%s: %v", key, a.Vals[0], err))
			}
			return v
		}
	}
	return def
}

func hasArg(d *datadriven.TestData, key string) bool {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return true
		}
	}
	return false
}

// hostArgs returns the hosts named as bare arguments, or every host.
func (r *rack) hostArgs(d *datadriven.TestData, all bool) []int {
	var hs []int
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 && len(a.Key) == 1 && a.Key[0] >= 'A' && a.Key[0] <= 'Z' {
			hs = append(hs, r.id(a.Key))
		}
	}
	if hs == nil && all {
		for i := range r.hosts {
			hs = append(hs, i)
		}
	}
	return hs
}

func (r *rack) one(d *datadriven.TestData) int {
	hs := r.hostArgs(d, false)
	if len(hs) != 1 {
		r.t.Fatalf("%s: name one host", d.Cmd)
	}
	return hs[0]
}

func (r *rack) handle(d *datadriven.TestData) string {
	r.out.Reset()
	r.act = activity{}
	r.verbose = true
	switch d.Cmd {
	case "rack":
		r.newRack(intArg(d, "hosts", 3))
	case "propose":
		r.propose(r.one(d), intArg(d, "n", 1))
	case "deliver":
		n := intArg(d, "n", -1)
		for k := 0; (n < 0 || k < n) && len(r.net) > 0; k++ {
			if k > 10000 {
				r.t.Fatalf("deliver: the network does not drain")
			}
			r.deliverOne()
		}
		if len(r.net) > 0 {
			r.printf("(%d in flight)\n", len(r.net))
		}
	case "read":
		i := r.one(d)
		r.read(i, !hasArg(d, "nosync"))
	case "sync":
		for _, i := range r.hostArgs(d, true) {
			if r.hosts[i].up {
				r.sync(i)
			}
		}
	case "quiesce":
		i := r.one(d)
		r.quiesce(i)
		r.ready(i)
	case "tick":
		r.verbose = hasArg(d, "v")
		hs := r.hostArgs(d, true)
		for k := 1; k <= intArg(d, "n", 1); k++ {
			r.coreLog = nil
			for _, i := range hs {
				r.tick(i)
			}
			if !hasArg(d, "only") {
				r.run(0, 0)
			}
			if !r.verbose && len(r.coreLog) > 0 {
				r.printf("tick %d: %s\n", k, strings.Join(r.coreLog, ", "))
			}
		}
		r.summary()
	case "run":
		r.verbose = hasArg(d, "v")
		r.run(intArg(d, "hops", 0), intArg(d, "rounds", 0))
		r.summary()
	case "lose":
		var to, from string
		var seq uint64
		d.ScanArgs(r.t, "to", &to)
		d.ScanArgs(r.t, "seq", &seq)
		l := loss{to: r.id(to), from: -1, seq: seq}
		if d.HasArg("from") {
			d.ScanArgs(r.t, "from", &from)
			l.from = r.id(from)
		}
		r.losses = append(r.losses, l)
	case "partition":
		for gi, g := range strings.Split(d.CmdArgs[0].Key, "/") {
			for _, h := range strings.Split(g, ",") {
				r.side[r.id(h)] = gi
			}
		}
		r.printf("partition %s\n", d.CmdArgs[0].Key)
	case "heal":
		clear(r.side)
		r.printf("healed\n")
	case "hold":
		i := r.one(d)
		r.hosts[i].hold = true
		r.printf("%s: releases no record from now on\n", name(i))
	case "crash":
		r.crash(r.one(d), hasArg(d, "keep"))
	case "restart":
		r.restart(r.one(d))
	case "config":
		i := r.one(d)
		var c exo.ConfigChange
		var who string
		switch {
		case d.HasArg("add"):
			d.ScanArgs(r.t, "add", &who)
			c = exo.ConfigChange{Op: exo.ChangeAdd, Member: uint8(r.id(who))}
		case d.HasArg("remove"):
			d.ScanArgs(r.t, "remove", &who)
			c = exo.ConfigChange{Op: exo.ChangeRemove, Member: uint8(r.id(who))}
		default:
			r.t.Fatalf("config: add= or remove=")
		}
		r.quiesce(i)
		if err := r.hosts[i].nd.ProposeConfig(c); err != nil {
			r.printf("%s: %v\n", name(i), err)
		} else {
			r.printf("%s: proposes %s %s\n", name(i), map[exo.ChangeOp]string{exo.ChangeAdd: "add", exo.ChangeRemove: "remove"}[c.Op], who)
		}
		r.sync(i)
	case "state":
		for _, i := range r.hostArgs(d, true) {
			r.state(i, intArg(d, "log", 4))
		}
	case "check":
		r.check(hasArg(d, "all"))
	default:
		r.t.Fatalf("unknown command %q", d.Cmd)
	}
	return r.out.String()
}

func (r *rack) config(i int) exo.Config {
	c := r.cfg
	c.ID = uint8(i)
	return c
}

func (r *rack) newRack(n int) {
	var key [exo.TagKeyLen]byte
	for k := range key {
		key[k] = byte(0x10 + k)
	}
	r.cfg = exo.Config{Hosts: n, Group: 7, TagKey: key, TokenTimeout: 16}
	r.hosts, r.side, r.net, r.losses = nil, make([]int, n), nil, nil
	r.streams, r.keys = map[[2]int][]exo.Entry{}, nil
	r.offered, r.dropped, r.atRisk = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i := 0; i < n; i++ {
		nd, err := exo.NewNode(r.config(i))
		if err != nil {
			r.t.Fatal(err)
		}
		r.hosts = append(r.hosts, &host{nd: nd, up: true})
	}
	for i := range r.hosts {
		r.attach(i, false)
	}
	r.printf("%d hosts, h=%d, majority %d, idle run %d passes\n", n, exo.HistoryLen(n), exo.Majority(n), 4*n)
}

// attach puts a control plane in front of host i's core, over a fresh
// fast path or (kept) the one that outlived the last daemon, and syncs.
func (r *rack) attach(i int, kept bool) {
	h := r.hosts[i]
	if !kept {
		h.fp = token.NewMem(h.nd.Keys())
	}
	h.drv = token.New(h.nd, h.fp, token.Config{
		MaxBatch: h.nd.Config().MaxBatchBytes,
		Persist: func() error {
			log := h.durable.Log
			h.durable = h.nd.HardStateMeta()
			h.durable.Log = log
			return nil
		},
		Ready: func() error { r.ready(i); return nil },
	})
	if kept {
		waiting := h.fp.Waiting()
		ok, err := h.drv.Recover()
		if err != nil {
			r.t.Fatalf("%s: Recover: %v", name(i), err)
		}
		r.printf("%s: takes its fast path over: %d records not released stepped again, all logged %v, fenced %v\n",
			name(i), waiting, ok, h.nd.Fenced())
	}
	r.sync(i)
}

func (r *rack) stream(i int) [2]int {
	k := [2]int{i, r.hosts[i].inc}
	if _, ok := r.streams[k]; !ok {
		r.streams[k] = nil
		r.keys = append(r.keys, k)
	}
	return k
}

func frameName(f *exo.Frame) string {
	s := "M=" + strconv.FormatUint(f.Seq, 10)
	if f.Epoch > 0 {
		s += "@" + strconv.FormatUint(uint64(f.Epoch), 10)
	}
	if f.Count > 0 {
		s += fmt.Sprintf(" [%d]", f.Count)
	}
	return s
}

// ready carries out host i's Ready: persist (the log applied from
// Truncate and Appended), broadcast, send, deliver.
func (r *rack) ready(i int) {
	h := r.hosts[i]
	nd := h.nd
	if !nd.HasReady() {
		return
	}
	rd := nd.Ready()
	for _, e := range rd.Events {
		switch e.Kind {
		case exo.EventRetransmit:
			r.act.retransmits++
			r.vprintf("%s: retransmits M=%d\n", name(i), e.Seq)
		case exo.EventViewChange:
			r.printf("%s: starts a view change to epoch %d\n", name(i), e.Epoch)
		case exo.EventInstalled:
			r.printf("%s: installed epoch %d (append %d, roster %s)\n", name(i), e.Epoch, e.Seq, roster(nd.Roster()))
		case exo.EventTakeover:
			r.printf("%s: takes the token over from %s at seq %d\n", name(i), name(int(e.Peer)), e.Seq)
		case exo.EventGap:
			r.printf("%s: gap at seq %d, fetches from %s\n", name(i), e.Seq, name(int(e.Peer)))
		case exo.EventDivergence:
			r.printf("%s: divergence at seq %d (from %s)\n", name(i), e.Seq, name(int(e.Peer)))
		case exo.EventSafety:
			r.t.Errorf("%s: SAFETY event at seq %d", name(i), e.Seq)
			r.printf("%s: SAFETY VIOLATION at seq %d\n", name(i), e.Seq)
		default:
			r.printf("%s: %s epoch %d seq %d\n", name(i), e.Kind, e.Epoch, e.Seq)
		}
	}
	log := h.durable.Log
	if rd.HasTruncate {
		log = log[:min(uint64(len(log)), rd.Truncate)]
	}
	for _, e := range rd.Appended {
		log = append(log, e.Clone())
	}
	h.durable = nd.HardStateMeta()
	h.durable.Log = log
	for fi := range rd.Frames {
		f := rd.Frames[fi]
		f.History = slices.Clone(f.History)
		f.Payload = slices.Clone(f.Payload)
		r.act.coreSent++
		r.coreLog = append(r.coreLog, fmt.Sprintf("%s sends %s", name(i), frameName(&f)))
		r.vprintf("%s: core sends %s\n", name(i), frameName(&f))
		r.broadcast(i, &f)
	}
	for mi := range rd.Messages {
		m := rd.Messages[mi]
		r.vprintf("%s -> %s %s\n", name(i), name(int(m.To)), msgName(&m))
		r.net = append(r.net, item{from: i, to: int(m.To), m: &m})
	}
	if len(rd.Agreed) > 0 {
		k := r.stream(i)
		for _, e := range rd.Agreed {
			r.streams[k] = append(r.streams[k], e.Clone())
		}
		r.vprintf("%s: agreed %d..%d\n", name(i), rd.Agreed[0].Seq, rd.Agreed[len(rd.Agreed)-1].Seq)
	}
	for _, e := range rd.Dropped {
		recs := records(&e)
		for _, p := range recs {
			r.dropped[p] = true
		}
		r.printf("%s: its entry M=%d@%d %v was dropped by a view change: its publishers are told\n", name(i), e.Seq, e.Epoch, recs)
	}
	nd.Advance()
}

// records returns the payloads of e that are not the core's.
func records(e *exo.Entry) []string {
	var out []string
	_ = e.Records(func(rec []byte) error {
		if !exo.IsControlRecord(rec) {
			out = append(out, string(rec))
		}
		return nil
	})
	return out
}

func roster(ids []uint8) string {
	var s []string
	for _, x := range ids {
		s = append(s, name(int(x)))
	}
	return strings.Join(s, ",")
}

func msgName(m *exo.Message) string {
	switch m.Type {
	case exo.MsgFetch:
		return fmt.Sprintf("Fetch lo=%d", m.Lo)
	case exo.MsgFetchResp:
		return fmt.Sprintf("FetchResp %d..%d", m.Start, m.Start+uint64(len(m.Entries)))
	case exo.MsgPrepare, exo.MsgNack, exo.MsgInstall, exo.MsgWake, exo.MsgRejoin:
		return fmt.Sprintf("%s epoch %d", m.Type, m.Epoch)
	case exo.MsgPromise:
		s := fmt.Sprintf("Promise epoch %d (log epoch %d, %d entries)", m.Epoch, m.LogEpoch, len(m.Entries))
		if m.Fenced {
			s += " fenced"
		}
		return s
	}
	return m.Type.String()
}

func (r *rack) broadcast(from int, f *exo.Frame) {
	for b := range r.hosts {
		if b != from {
			r.net = append(r.net, item{from: from, to: b, f: f})
		}
	}
}

// deliverOne delivers the item at the head of the network.
func (r *rack) deliverOne() {
	it := r.net[0]
	r.net = r.net[1:]
	h := r.hosts[it.to]
	if r.side[it.from] != r.side[it.to] || !h.up {
		return
	}
	r.act.delivered++
	if it.m != nil {
		r.act.msgs++
		r.vprintf("%s <- %s %s\n", name(it.to), name(it.from), msgName(it.m))
		r.quiesce(it.to) // before an OOB message changes the core
		if !h.fp.E.Halted {
			r.t.Errorf("%s: the fast path runs after a quiesce", name(it.to))
		}
		h.nd.Step(*it.m)
		r.sync(it.to)
		return
	}
	f := it.f
	for li, l := range r.losses {
		if l.to == it.to && l.seq == f.Seq && (l.from < 0 || l.from == it.from) {
			r.losses = slices.Delete(r.losses, li, li+1)
			r.printf("%s <- %s %s: lost\n", name(it.to), name(it.from), frameName(f))
			return
		}
	}
	r.act.frames++
	h.fp.Keys = h.nd.Keys()
	kseq, halted := h.fp.E.Kseq, h.fp.E.Halted
	sent, reason := h.fp.Frame(f)
	line := fmt.Sprintf("%s <- %s %s: %s", name(it.to), name(it.from), frameName(f), reason)
	switch {
	case h.fp.E.Kseq == kseq:
		line += " (dropped)"
	case !halted && h.fp.E.Halted && reason == exo.ReasonAccept:
		line += ", hands the token to the control plane"
	case !halted && h.fp.E.Halted:
		line += ", halts"
	}
	if sent != nil {
		r.act.fastSent++
		line += ", sends " + frameName(sent)
		r.broadcast(it.to, sent)
	}
	r.vprintf("%s\n", line)
}

// read has host i's control plane step the records its fast path wrote.
func (r *rack) read(i int, sync bool) {
	h := r.hosts[i]
	if !h.up {
		r.printf("%s is down\n", name(i))
		return
	}
	k0 := h.drv.Next()
	n, err := h.fp.Records(h.drv.Step)
	if err != nil {
		r.t.Fatal(err)
	}
	r.act.records += n
	if n > 0 {
		r.vprintf("%s: steps records %d..%d\n", name(i), k0, h.drv.Next()-1)
	}
	r.checkDesync(i)
	if sync {
		r.sync(i)
	}
}

func (r *rack) checkDesync(i int) {
	if st := r.hosts[i].drv.Stats(); st.Desyncs > 0 {
		r.t.Errorf("%s: %d desyncs", name(i), st.Desyncs)
	}
}

// quiesce halts host i's fast path and steps its records.
func (r *rack) quiesce(i int) {
	h := r.hosts[i]
	was := h.drv.Stats()
	k0 := h.drv.Next()
	if err := h.drv.Quiesce(); err != nil {
		r.t.Fatalf("%s: Quiesce: %v", name(i), err)
	}
	if k := h.drv.Next(); k > k0 {
		r.act.records += int(k - k0)
		r.vprintf("%s: quiesced, steps records %d..%d\n", name(i), k0, k-1)
	} else if h.drv.Stats().Quiesces > was.Quiesces {
		r.vprintf("%s: quiesced\n", name(i))
	}
	r.checkDesync(i)
}

// sync runs host i's control plane after its core moved.
func (r *rack) sync(i int) {
	h := r.hosts[i]
	r.ready(i)
	if !h.up {
		return
	}
	was := h.drv.Stats()
	k0 := h.drv.Next()
	if _, err := h.drv.Sync(); err != nil {
		r.t.Fatalf("%s: Sync: %v", name(i), err)
	}
	r.ready(i)
	if !h.hold {
		if err := h.drv.Release(); err != nil {
			r.t.Fatal(err)
		}
	}
	st := h.drv.Stats()
	if st.Quiesces > was.Quiesces {
		if k := h.drv.Next(); k > k0 {
			r.act.records += int(k - k0)
			r.vprintf("%s: quiesced (the core left the plain case), steps records %d..%d\n", name(i), k0, k-1)
		} else {
			r.vprintf("%s: quiesced (the core left the plain case)\n", name(i))
		}
	}
	if st.ArmMisses > was.ArmMisses {
		r.vprintf("%s: arm missed: the core stepped %d records, the fast path wrote %d\n", name(i), h.drv.Next(), h.fp.E.Kseq)
	}
	if st.Arms > was.Arms {
		r.vprintf("%s: armed at kseq %d\n", name(i), h.drv.Next())
	}
	if _, ok := h.nd.FastPath(); !ok && !h.fp.E.Halted {
		r.t.Errorf("%s: the fast path runs while the core is not in the plain case (halted %v, fenced %v)",
			name(i), h.nd.Halted(), h.nd.Fenced())
	}
	r.checkDesync(i)
}

// tick ticks host i as the daemon does: quiesced first when its deadline
// is due.
func (r *rack) tick(i int) {
	h := r.hosts[i]
	if !h.up {
		return
	}
	due := h.nd.NextTick() <= 1
	if due {
		r.quiesce(i)
	}
	h.nd.Tick()
	if rd := h.nd.Ready(); !due && (len(rd.Frames) > 0 || len(rd.Messages) > 0 || len(rd.Appended) > 0) {
		r.t.Errorf("%s: a tick not due (no quiesce) did something: %d frames, %d messages", name(i), len(rd.Frames), len(rd.Messages))
	}
	r.sync(i)
}

// run delivers and reads until the rack is quiet, or for rounds rounds
// (0: no bound): hops waves of deliveries (every item in flight at the
// wave's start; 0: until the network is empty), then every host that has
// records or a Ready reads and syncs.
func (r *rack) run(hops, rounds int) {
	for iter := 0; rounds == 0 || iter < rounds; iter++ {
		if iter > 5000 || r.act.delivered > 100000 {
			r.t.Fatalf("run: the rack does not settle")
		}
		if hops == 0 {
			for k := 0; len(r.net) > 0; k++ {
				if k > 100000 {
					r.t.Fatalf("run: the network does not drain")
				}
				r.deliverOne()
			}
		}
		for w := 0; w < hops && len(r.net) > 0; w++ {
			for k := len(r.net); k > 0; k-- {
				r.deliverOne()
			}
		}
		busy := len(r.net) > 0
		for i, h := range r.hosts {
			if !h.up {
				continue
			}
			if h.fp.Waiting() > 0 {
				busy = true
				r.read(i, true)
			} else if h.nd.HasReady() {
				busy = true
				r.sync(i)
			}
		}
		if !busy {
			return
		}
	}
}

func (r *rack) summary() {
	a := r.act
	r.printf("%d frames delivered (sent: %d by fast paths, %d by cores", a.frames, a.fastSent, a.coreSent)
	if a.retransmits > 0 {
		r.printf(", %d retransmissions", a.retransmits)
	}
	r.printf("), %d messages; %d records stepped", a.msgs, a.records)
	if len(r.net) > 0 {
		r.printf("; %d in flight", len(r.net))
	}
	r.printf("\n")
	var ag []string
	for i, h := range r.hosts {
		if h.up {
			p := h.nd.Pointers()
			ag = append(ag, fmt.Sprintf("%s=%d", name(i), p.Agreed))
		} else {
			ag = append(ag, name(i)+"=down")
		}
	}
	r.printf("agreed: %s\n", strings.Join(ag, " "))
}

func (r *rack) propose(i, n int) {
	h := r.hosts[i]
	if !h.up {
		r.printf("%s is down\n", name(i))
		return
	}
	var where []string
	for k := 0; k < n; k++ {
		h.seq++
		p := fmt.Sprintf("%s%d", name(i), h.seq)
		before := h.nd.Pending()
		if err := h.drv.Propose([]byte(p)); err != nil {
			r.printf("%s: %s: %v\n", name(i), p, err)
			continue
		}
		to := "queue"
		if h.nd.Pending() > before {
			to = "core"
		}
		r.offered[p] = true
		where = append(where, p+"->"+to)
	}
	r.printf("%s: %s\n", name(i), strings.Join(where, " "))
	r.sync(i)
}

func (r *rack) crash(i int, keep bool) {
	h := r.hosts[i]
	r.loseOffered(i)
	unread := h.fp.Waiting()
	h.up = false
	if keep {
		h.fp.Crash()
		r.printf("%s: the daemon dies, the fast path stays (%d records not read, %d read and not released)\n",
			name(i), unread, h.fp.Waiting()-unread)
	} else {
		h.fp = nil
		r.printf("%s: the host dies with its fast path\n", name(i))
	}
}

// loseOffered marks the payloads host i's clients published so far as
// at risk: the daemon dies, and those still in its core's queue or its
// fast path's (which Recover drops) die with it, their publishers told.
// check does not require them.
func (r *rack) loseOffered(i int) {
	for k := 1; k <= r.hosts[i].seq; k++ {
		r.atRisk[fmt.Sprintf("%s%d", name(i), k)] = true
	}
}

func (r *rack) restart(i int) {
	h := r.hosts[i]
	nd, err := exo.RestartNode(r.config(i), h.durable)
	if err != nil {
		r.t.Fatalf("%s: restart: %v", name(i), err)
	}
	h.nd, h.up, h.hold = nd, true, false
	h.inc++
	r.printf("%s: restarts from its durable log (%d entries, epoch %d, agreed %d): fenced %v\n",
		name(i), len(h.durable.Log), h.durable.Epoch, nd.Pointers().Agreed, nd.Fenced())
	r.attach(i, h.fp != nil)
}

func (r *rack) state(i, logN int) {
	h := r.hosts[i]
	if !h.up {
		r.printf("%s: down\n", name(i))
		return
	}
	nd := h.nd
	p := nd.Pointers()
	core := "running"
	switch {
	case nd.Removed():
		core = "removed"
	case nd.Halted():
		core = fmt.Sprintf("halted(promised %d)", nd.Promised())
	}
	if nd.Fenced() {
		core += " fenced"
	}
	fp := "running"
	if h.fp.E.Halted {
		fp = "halted"
	}
	r.printf("%s: epoch=%d append=%d agreed=%d core=%s | fp=%s armed=%v kseq=%d qhead=%d unread=%d pending=%d\n",
		name(i), p.Epoch, p.Append, p.Agreed, core, fp, h.drv.Armed(), h.fp.E.Kseq, h.fp.E.QHead, h.fp.Waiting(), h.drv.Pending())
	st := h.drv.Stats()
	r.printf("   records=%d fast=%d sent=%d popped=%d handoffs=%d halts=%d quiesces=%d arms=%d misses=%d desyncs=%d unlogged=%d fenced=%d reproposed=%d\n",
		st.Records, st.Fast, st.Sent, st.Popped, st.Handoffs, st.Halts, st.Quiesces, st.Arms, st.ArmMisses, st.Desyncs, st.Unlogged, st.Fenced, st.Reproposed)
	lg := nd.Log()
	var es []string
	for _, e := range lg[max(0, len(lg)-logN):] {
		s := fmt.Sprintf("%d:%s/%d", e.Seq, name(int(e.Sender)), e.Count)
		if e.Epoch > 0 {
			s += "@" + strconv.FormatUint(uint64(e.Epoch), 10)
		}
		es = append(es, s)
	}
	r.printf("   log: %s\n", strings.Join(es, " "))
}

// check fails the test unless every delivery stream (of every host and
// incarnation) is a prefix of the longest one; all: unless every payload
// proposed is delivered, once, by every host that is up.
func (r *rack) check(all bool) {
	var longest []exo.Entry
	for _, k := range r.keys {
		if s := r.streams[k]; len(s) > len(longest) {
			longest = s
		}
	}
	seen := map[string]int{}
	for _, e := range longest {
		for _, p := range records(&e) {
			seen[p]++
			if r.dropped[p] {
				r.t.Errorf("payload %s delivered, and its publisher told it was dropped", p)
			}
		}
	}
	for _, k := range r.keys {
		s := r.streams[k]
		for j := range s {
			if s[j].Seq != longest[j].Seq || !s[j].Equal(&longest[j]) {
				r.t.Errorf("%s (incarnation %d) delivered M=%d@%d from %s at position %d, the longest stream M=%d@%d from %s",
					name(k[0]), k[1], s[j].Seq, s[j].Epoch, name(int(s[j].Sender)), j, longest[j].Seq, longest[j].Epoch, name(int(longest[j].Sender)))
				break
			}
		}
	}
	for rec, n := range seen {
		if n > 1 {
			r.t.Errorf("payload %s delivered %d times", rec, n)
		}
	}
	missing, lost := 0, 0
	for p := range r.offered {
		switch {
		case seen[p] > 0 || r.dropped[p]:
		case r.atRisk[p]:
			lost++
		default:
			missing++
		}
	}
	var lens []string
	slices.SortFunc(r.keys, func(a, b [2]int) int { return (a[0]-b[0])*1000 + a[1] - b[1] })
	for _, k := range r.keys {
		s := name(k[0])
		if k[1] > 0 {
			s += "#" + strconv.Itoa(k[1])
		}
		lens = append(lens, fmt.Sprintf("%s=%d", s, len(r.streams[k])))
	}
	if all {
		if missing > 0 {
			r.t.Errorf("%d of %d payloads proposed were neither delivered, dropped nor lost with a daemon", missing, len(r.offered))
		}
		for i, h := range r.hosts {
			if h.up && !h.nd.Removed() && len(r.streams[[2]int{i, h.inc}]) != len(longest) {
				r.t.Errorf("%s delivered %d entries, the longest stream %d", name(i), len(r.streams[[2]int{i, h.inc}]), len(longest))
			}
		}
	}
	// Lockstep: a fast path that runs, with every record stepped, holds
	// the core's pointers.
	for i, h := range r.hosts {
		if !h.up || h.fp.E.Halted || h.fp.Waiting() > 0 {
			continue
		}
		if e, _ := h.nd.FastPath(); e.Pointers != h.fp.E.Pointers {
			r.t.Errorf("%s: the running fast path's pointers %+v, the core's %+v", name(i), h.fp.E.Pointers, e.Pointers)
		}
	}
	r.printf("ok: every stream a prefix of the longest (%d entries, %d payloads", len(longest), len(seen))
	if len(r.dropped) > 0 {
		r.printf(", %d dropped and told", len(r.dropped))
	}
	if lost > 0 {
		r.printf(", %d lost with a daemon", lost)
	}
	if missing > 0 {
		r.printf(", %d not delivered", missing)
	}
	r.printf("); %s\n", strings.Join(lens, " "))
}
