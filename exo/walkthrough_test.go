package exo_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/exo-rack/exo/exo"
)

// TestWalkthrough runs the interaction scripts in testdata/walkthrough: each
// drives a small rack step by step and prints what every host did, in the
// style of etcd raft's interaction tests. The expected output lives in the
// script; regenerate it with
//
//	go test ./exo -run TestWalkthrough -rewrite
//
// and read the diff. Commands:
//
//	rack hosts=5                    a new rack, hosts named A, B, C, ...
//	broadcast X                     host X sends a frame now (as the token holder)
//	propose X text                  queue a payload at X
//	deliver                         deliver everything in flight (partition rules apply)
//	partition A,B/C,D,E             cut the segment and the OOB network in groups
//	heal                            undo the partition
//	tick [X ...] [n=N]              tick hosts (all by default) N times, delivering after each
//	inject to=X from=Y seq=S hist=Y,Z [epoch=E]   hand X a crafted frame
//	state [X ...]                   print the hosts' pointers and logs
//	same-log                        fail unless every host holds the same log
func TestWalkthrough(t *testing.T) {
	datadriven.Walk(t, "../testdata/walkthrough", func(t *testing.T, path string) {
		env := &rackEnv{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return env.handle(t, d)
		})
	})
}

type flight struct {
	from, to int
	frame    *exo.Frame
	msg      *exo.Message
}

type rackEnv struct {
	nodes    []*exo.Node
	side     []int // partition side of each host
	inflight []flight
	out      strings.Builder
}

func name(i int) string { return string(rune('A' + i)) }

func (e *rackEnv) id(t *testing.T, s string) int {
	s = strings.TrimSpace(s)
	if len(s) == 1 && s[0] >= 'A' && int(s[0]-'A') < len(e.nodes) {
		return int(s[0] - 'A')
	}
	t.Fatalf("unknown host %q", s)
	return -1
}

func (e *rackEnv) hist(h []uint8) string {
	var parts []string
	for _, x := range h {
		if x == exo.HistoryNone {
			parts = append(parts, "X")
		} else {
			parts = append(parts, name(int(x)))
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func (e *rackEnv) handle(t *testing.T, d *datadriven.TestData) string {
	e.out.Reset()
	switch d.Cmd {
	case "rack":
		var n int
		d.ScanArgs(t, "hosts", &n)
		e.nodes, e.side, e.inflight = nil, make([]int, n), nil
		for i := 0; i < n; i++ {
			// Hosts pass the token only when the script says so (broadcast)
			// or after PassDelay ticks; timeouts are long so that the
			// script decides when they fire.
			nd, err := exo.NewNode(exo.Config{ID: uint8(i), Hosts: n, Group: 7, PassDelay: 1000, TokenTimeout: 2000, RetransmitTicks: 1000})
			if err != nil {
				t.Fatal(err)
			}
			e.nodes = append(e.nodes, nd)
		}
		fmt.Fprintf(&e.out, "%d hosts, h=%d, majority %d\n", n, exo.HistoryLen(n), exo.Majority(n))
	case "broadcast":
		i := e.id(t, d.CmdArgs[0].Key)
		if !e.nodes[i].Broadcast() {
			p := e.nodes[i].Pointers()
			fmt.Fprintf(&e.out, "%s: refuses to send: it is in its own history %s, every receiver would reject the frame (SENDER_IN_HISTORY)\n",
				name(i), e.hist(p.Hist()))
		}
		e.collect(i)
	case "propose":
		i := e.id(t, d.CmdArgs[0].Key)
		if err := e.nodes[i].Propose([]byte(d.CmdArgs[1].Key)); err != nil {
			fmt.Fprintf(&e.out, "%s: %v\n", name(i), err)
		}
		e.collect(i)
	case "deliver":
		e.deliverAll()
	case "partition":
		for gi, g := range strings.Split(d.CmdArgs[0].Key, "/") {
			for _, h := range strings.Split(g, ",") {
				e.side[e.id(t, h)] = gi
			}
		}
		fmt.Fprintf(&e.out, "partition %s\n", d.CmdArgs[0].Key)
	case "heal":
		clear(e.side)
		fmt.Fprintf(&e.out, "healed\n")
	case "tick":
		n := 1
		var hosts []int
		for _, a := range d.CmdArgs {
			if a.Key == "n" {
				n, _ = strconv.Atoi(a.Vals[0])
			} else {
				hosts = append(hosts, e.id(t, a.Key))
			}
		}
		if hosts == nil {
			for i := range e.nodes {
				hosts = append(hosts, i)
			}
		}
		for k := 0; k < n; k++ {
			for _, i := range hosts {
				e.nodes[i].Tick()
				e.collect(i)
			}
			e.deliverAll()
		}
	case "inject":
		var to, from string
		var seq uint64
		var hist string
		var epoch uint64
		d.ScanArgs(t, "to", &to)
		d.ScanArgs(t, "from", &from)
		d.ScanArgs(t, "seq", &seq)
		d.ScanArgs(t, "hist", &hist)
		if d.HasArg("epoch") {
			d.ScanArgs(t, "epoch", &epoch)
		}
		f := exo.Frame{Type: exo.FrameData, Group: 7, Sender: uint8(e.id(t, from)), Seq: seq, Epoch: uint32(epoch)}
		for _, h := range strings.Split(hist, ",") {
			if h == "X" {
				f.History = append(f.History, exo.HistoryNone)
			} else {
				f.History = append(f.History, uint8(e.id(t, h)))
			}
		}
		i := e.id(t, to)
		f.Seal(e.nodes[i].Config().TagKey) // injected, but by a host of the rack
		r := e.nodes[i].StepFrame(&f)
		fmt.Fprintf(&e.out, "%s <- %s M=%d,%s: %s\n", name(i), from, seq, e.hist(f.History), r)
		e.collect(i)
	case "same-log":
		// Every host must hold the same log and agreement pointer.
		ref := e.nodes[0]
		for i, nd := range e.nodes[1:] {
			a, b := ref.Log(), nd.Log()
			if len(a) != len(b) || ref.Pointers().Agreed != nd.Pointers().Agreed {
				t.Fatalf("%s and %s differ: %d/%d entries, agreed %d/%d", name(0), name(i+1), len(a), len(b), ref.Pointers().Agreed, nd.Pointers().Agreed)
			}
			for k := range a {
				if !a[k].Equal(&b[k]) {
					t.Fatalf("%s and %s differ at seq %d", name(0), name(i+1), k)
				}
			}
		}
		fmt.Fprintf(&e.out, "all %d hosts hold the same %d entries, agreed=%d\n", len(e.nodes), len(ref.Log()), ref.Pointers().Agreed)
	case "state":
		hosts := make([]int, 0, len(e.nodes))
		for _, a := range d.CmdArgs {
			hosts = append(hosts, e.id(t, a.Key))
		}
		if len(hosts) == 0 {
			for i := range e.nodes {
				hosts = append(hosts, i)
			}
		}
		for _, i := range hosts {
			e.state(i)
		}
	default:
		t.Fatalf("unknown command %q", d.Cmd)
	}
	return e.out.String()
}

func (e *rackEnv) state(i int) {
	nd := e.nodes[i]
	p := nd.Pointers()
	fmt.Fprintf(&e.out, "%s: seq=%d history=%s agreed=%d epoch=%d", name(i), p.Append, e.hist(p.Hist()), p.Agreed, p.Epoch)
	if nd.Halted() {
		fmt.Fprintf(&e.out, " HALTED(promised %d)", nd.Promised())
	}
	fmt.Fprintf(&e.out, " token=%s\n", name(int(nd.Holder())))
	for _, en := range nd.Log() {
		mark := " "
		if en.Seq < p.Agreed {
			mark = "*"
		}
		fmt.Fprintf(&e.out, "   %s %d %s %s", mark, en.Seq, name(int(en.Sender)), e.hist(en.History))
		if en.Count > 0 {
			var recs []string
			_ = en.Records(func(r []byte) error { recs = append(recs, strconv.Quote(string(r))); return nil })
			fmt.Fprintf(&e.out, " %s", strings.Join(recs, " "))
		}
		if en.Epoch > 0 {
			fmt.Fprintf(&e.out, " (epoch %d)", en.Epoch)
		}
		fmt.Fprintln(&e.out)
	}
}

// collect moves host i's Ready into the network and prints its effects.
func (e *rackEnv) collect(i int) {
	nd := e.nodes[i]
	if !nd.HasReady() {
		return
	}
	rd := nd.Ready()
	for _, ev := range rd.Events {
		switch ev.Kind {
		case exo.EventViewChange:
			fmt.Fprintf(&e.out, "%s: starts a view change to epoch %d\n", name(i), ev.Epoch)
		case exo.EventInstalled:
			p := nd.Pointers()
			fmt.Fprintf(&e.out, "%s: installed epoch %d: seq=%d history=%s agreed=%d\n", name(i), ev.Epoch, p.Append, e.hist(p.Hist()), p.Agreed)
		case exo.EventTakeover:
			fmt.Fprintf(&e.out, "%s: token timeout, takes the token over from %s\n", name(i), name(int(ev.Peer)))
		case exo.EventDivergence:
			fmt.Fprintf(&e.out, "%s: divergence at seq %d\n", name(i), ev.Seq)
		case exo.EventSafety:
			fmt.Fprintf(&e.out, "%s: SAFETY VIOLATION at seq %d\n", name(i), ev.Seq)
		}
	}
	for _, f := range rd.Frames {
		fmt.Fprintf(&e.out, "%s broadcasts M=%d,%s", name(i), f.Seq, e.hist(f.History))
		if f.Count > 0 {
			fmt.Fprintf(&e.out, " (%d payloads)", f.Count)
		}
		if f.Flags&exo.FlagReadmit != 0 {
			fmt.Fprintf(&e.out, " readmits %s", name(int(f.Flags&exo.FlagHostMask)))
		}
		fmt.Fprintln(&e.out)
		for b := range e.nodes {
			if b != i {
				fc := f
				e.inflight = append(e.inflight, flight{from: i, to: b, frame: &fc})
			}
		}
	}
	for _, m := range rd.Messages {
		mc := m
		e.inflight = append(e.inflight, flight{from: i, to: int(m.To), msg: &mc})
	}
	if len(rd.Agreed) > 0 {
		var s []string
		for _, en := range rd.Agreed {
			s = append(s, strconv.FormatUint(en.Seq, 10))
		}
		fmt.Fprintf(&e.out, "%s: agreed %s\n", name(i), strings.Join(s, ","))
	}
	for _, en := range rd.Dropped {
		fmt.Fprintf(&e.out, "%s: dropped its unagreed entry %d: its publisher is told\n", name(i), en.Seq)
	}
	nd.Advance()
}

// deliverAll delivers in-flight items in order until none is left; items
// that cross the partition are lost.
func (e *rackEnv) deliverAll() {
	for len(e.inflight) > 0 {
		fl := e.inflight[0]
		e.inflight = slices.Delete(e.inflight, 0, 1)
		if e.side[fl.from] != e.side[fl.to] {
			continue
		}
		nd := e.nodes[fl.to]
		if fl.frame != nil {
			r := nd.StepFrame(fl.frame)
			switch r {
			case exo.ReasonAccept:
				fmt.Fprintf(&e.out, "%s <- %s M=%d: append\n", name(fl.to), name(fl.from), fl.frame.Seq)
			case exo.ReasonDuplicate:
			default:
				fmt.Fprintf(&e.out, "%s <- %s M=%d,%s: %s\n", name(fl.to), name(fl.from), fl.frame.Seq, e.hist(fl.frame.History), r)
			}
		} else {
			m := fl.msg
			switch m.Type {
			case exo.MsgPrepare, exo.MsgInstall, exo.MsgNack:
				fmt.Fprintf(&e.out, "%s <- %s %s epoch %d\n", name(fl.to), name(fl.from), m.Type, m.Epoch)
			case exo.MsgPromise:
				fmt.Fprintf(&e.out, "%s <- %s Promise epoch %d: log epoch %d, agreed %d, entries %d..%d\n",
					name(fl.to), name(fl.from), m.Epoch, m.LogEpoch, m.Agreed, m.Start, m.Start+uint64(len(m.Entries)))
			default:
				fmt.Fprintf(&e.out, "%s <- %s %s\n", name(fl.to), name(fl.from), m.Type)
			}
			nd.Step(*m)
		}
		e.collect(fl.to)
	}
}
