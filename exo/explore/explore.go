// Package explore is a bounded model checker for the Exo state machine
// (package exo). It explores every interleaving of a small rack (3 or 4
// hosts) up to a depth bound: every order in which frames and OOB messages
// are delivered, dropped or duplicated, every order of ticks, proposals and
// (optionally) crashes with or without the durable state, and checks after
// every step:
//
//   - agreement: two hosts' logs are equal below both agreement pointers,
//     and every host's agreed prefix equals what was ever delivered;
//   - no host ever reports exo.EventSafety;
//   - delivery: every host (incarnation) delivers seq 0, 1, 2, ... once
//     each, and every entry delivered at seq s anywhere is the same entry;
//   - validity: every delivered payload was proposed, and is agreed at one
//     seq only; a payload reported dropped (Ready.Dropped) is never agreed;
//   - pointers: agreed <= log length, and agreed never moves back.
//
// A violation comes back as a Trace: one action a line, replayable with
// Replay and shrinkable with Minimize. See docs/explore.md.
package explore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/exo-rack/exo/exo"
)

// MaxExploreHosts is the largest rack Explore accepts.
const MaxExploreHosts = 8

// Options bounds one exploration. Zero budgets switch the action off
// (Proposals, Drops, Dups, Restarts, Amnesia) or leave it unbounded within
// MaxDepth (TicksPerHost, MaxInFlight).
type Options struct {
	Hosts     int
	MaxDepth  int // actions on one path (at most 250)
	MaxStates int // distinct states stored; the search stops (incomplete) beyond
	Proposals int // proposals on one path, payloads "p1", "p2", ... (at most 64)

	TicksPerHost int // ticks one host may take on one path
	Drops        int // items dropped on one path
	Dups         int // items duplicated (delivered, a copy left) on one path
	Restarts     int // crashes with a restart from HardState on one path
	Amnesia      int // crashes with a restart without state on one path
	// Broadcasts is how many times on one path a host may be made to send
	// at once (Node.Broadcast, as a takeover with a clock running fast):
	// concurrent senders without waiting for timeouts.
	Broadcasts int
	// Compacts is how many times on one path a host may compact its log up
	// to what every host has delivered (Node.Compact).
	Compacts int
	// Gones is how many times on one path a host may be reported gone to
	// the others (MsgGone, OpGone), rightly or not; it needs
	// Config.GoneTicks.
	Gones int
	// MaxInFlight prunes states with more items in flight (after their
	// invariants are checked): the bound that keeps broadcasts finite.
	MaxInFlight int

	// Config is the protocol configuration (ID and Hosts are set per host);
	// the zero Config means SmallConfig().
	Config      exo.Config
	Fingerprint Fingerprint
	// Timeout stops the search (incomplete) after this long; 0: none.
	Timeout time.Duration
	// Minimize shrinks a counterexample with Minimize before returning it.
	Minimize bool
	// KeepDead keeps in flight the items that can no longer change their
	// receiver (stale epochs, duplicates, frames to a host halted in their
	// epoch, promises, installs, nacks and fetch answers of past epochs).
	// By default they are removed after every step, which merges states
	// that differ only by such garbage; see machine.dead for the argument.
	// Removal is switched off on a path while an amnesiac restart may
	// still happen (it resets the epochs).
	KeepDead bool
	// Seed, when non-zero, shuffles the order in which each state's actions
	// are tried: runs stopped by MaxStates or Timeout then cover different
	// parts of the space (a soak runs many seeds).
	Seed uint64
}

// SmallConfig is the protocol configuration the explorer uses by default:
// every timer is one to three ticks, so that token takeovers,
// retransmissions, view changes, view-change timeouts, re-admissions and
// gap fetches all happen within a few steps.
func SmallConfig() exo.Config {
	return exo.Config{
		TokenTimeout:      2,
		GoneTicks:         1, // used only with Options.Gones
		TakeoverStagger:   1,
		RetransmitTicks:   2,
		IdleBackoffMax:    -1, // no idle back-off: an idle token still moves
		ViewChangeTimeout: 3,
		RejoinTicks:       2,
		FetchTicks:        1,
		MaxBatchBytes:     64,
		MaxPending:        64,
		SeqWindow:         4,
		MaxHeld:           4,
		MaxFetchEntries:   1, // every catch-up of more than one entry takes batches
	}
}

// Defaults returns the options the CI tests use for a rack of n hosts:
// two proposals, four ticks per host, at most 8 items in flight, and the
// depth that a complete search reaches in a few seconds (10 actions for 3
// hosts, 8 for 4).
func Defaults(n int) Options {
	o := Options{Hosts: n, MaxDepth: 10, MaxStates: 3_000_000, Proposals: 2,
		TicksPerHost: 4, MaxInFlight: 8, Config: SmallConfig()}
	if n >= 4 {
		o.MaxDepth = 8
	}
	return o
}

// Result is what one exploration found.
type Result struct {
	States          int // distinct states stored
	Transitions     int // actions applied (each checked)
	Revisits        int // states explored again because reached by a shorter path
	Pruned          int // successors cut by MaxInFlight
	MaxDepthReached int
	// Complete is set when every state within the bounds was explored: no
	// violation, and neither MaxStates nor Timeout stopped the search.
	Complete bool
	// Violation is the counterexample, nil if none was found.
	Violation *Trace
	// Events counts the events reported over all transitions, by kind.
	Events map[exo.EventKind]int
	// Examples holds, for each event kind seen, the first path that
	// produced it (a trace with no violation), to show what was reached.
	Examples  map[exo.EventKind]*Trace
	MaxEpoch  uint32 // highest log epoch any host reached
	MaxAgreed int    // longest prefix delivered anywhere
	Elapsed   time.Duration
}

func (r *Result) String() string {
	return fmt.Sprintf("states=%d transitions=%d revisits=%d pruned=%d depth=%d complete=%v maxEpoch=%d maxAgreed=%d "+
		"takeovers=%d viewChanges=%d installs=%d gaps=%d divergences=%d retransmits=%d elapsed=%v (%.0f states/s)",
		r.States, r.Transitions, r.Revisits, r.Pruned, r.MaxDepthReached, r.Complete, r.MaxEpoch, r.MaxAgreed,
		r.Events[exo.EventTakeover], r.Events[exo.EventViewChange], r.Events[exo.EventInstalled],
		r.Events[exo.EventGap], r.Events[exo.EventDivergence], r.Events[exo.EventRetransmit],
		r.Elapsed.Round(time.Millisecond), float64(r.States)/max(r.Elapsed.Seconds(), 1e-9))
}

type pathElem struct {
	s *state
	a action
}

type explorer struct {
	opt      Options
	m        *machine
	seen     map[fp]uint8
	path     []pathElem
	res      Result
	deadline time.Time
	stop     bool
	fresh    []exo.EventKind // event kinds first seen in the current transition
	rng      *rand.Rand
}

// Explore searches every interleaving within opt's bounds, depth first, and
// returns at the first violation.
func Explore(opt Options) (Result, error) {
	switch {
	case opt.Hosts < 1 || opt.Hosts > MaxExploreHosts:
		return Result{}, fmt.Errorf("explore: Hosts %d outside 1..%d", opt.Hosts, MaxExploreHosts)
	case opt.MaxDepth < 1 || opt.MaxDepth > 250:
		return Result{}, fmt.Errorf("explore: MaxDepth %d outside 1..250", opt.MaxDepth)
	case opt.MaxStates < 1:
		return Result{}, errors.New("explore: MaxStates must be at least 1")
	case opt.Proposals < 0 || opt.Proposals > 64:
		return Result{}, fmt.Errorf("explore: Proposals %d outside 0..64", opt.Proposals)
	}
	for _, b := range []int{opt.Drops, opt.Dups, opt.Restarts, opt.Amnesia, opt.Broadcasts, opt.Compacts, opt.Gones} {
		if b < 0 || b > 250 {
			return Result{}, fmt.Errorf("explore: budget %d outside 0..250", b)
		}
	}
	if opt.Config == (exo.Config{}) {
		opt.Config = SmallConfig()
	}
	x := &explorer{opt: opt, m: newMachine(opt.Hosts, opt.Config, opt.Fingerprint),
		seen: make(map[fp]uint8)}
	x.m.gc = !opt.KeepDead
	x.m.amnesia = opt.Amnesia
	if opt.Seed != 0 {
		x.rng = rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15))
	}
	x.res.Events = make(map[exo.EventKind]int)
	x.res.Examples = make(map[exo.EventKind]*Trace)
	x.m.onEvent = func(_ int, e exo.Event) {
		x.res.Events[e.Kind]++
		if _, ok := x.res.Examples[e.Kind]; !ok {
			x.res.Examples[e.Kind] = nil
			x.fresh = append(x.fresh, e.Kind)
		}
	}
	start := time.Now()
	if opt.Timeout > 0 {
		x.deadline = start.Add(opt.Timeout)
	}
	s, err := x.m.initial()
	if err != nil {
		return Result{}, err
	}
	x.seen[s.fingerprint()] = 0
	x.res.States = 1
	x.dfs(s, 0)
	x.res.Elapsed = time.Since(start)
	x.res.Complete = !x.stop
	if x.res.Violation != nil && opt.Minimize {
		if t, err := Minimize(x.res.Violation); err == nil {
			x.res.Violation = t
		}
	}
	return x.res, nil
}

// actions lists the transitions out of s, deliveries first.
func (x *explorer) actions(s *state) []action {
	o := &x.opt
	var acts []action
	distinct := func(k int) bool { return k == 0 || s.flight[k].fp != s.flight[k-1].fp }
	for k := range s.flight {
		if distinct(k) {
			acts = append(acts, action{kind: OpDeliver, item: k})
		}
	}
	for i := 0; i < x.m.n; i++ {
		if o.TicksPerHost == 0 || int(s.ticks[i]) < o.TicksPerHost {
			acts = append(acts, action{kind: OpTick, host: i})
		}
	}
	if s.proposed < o.Proposals {
		for i := 0; i < x.m.n; i++ {
			acts = append(acts, action{kind: OpPropose, host: i})
		}
	}
	if int(s.used[OpDup]) < o.Dups {
		for k := range s.flight {
			if distinct(k) {
				acts = append(acts, action{kind: OpDup, item: k})
			}
		}
	}
	if int(s.used[OpDrop]) < o.Drops {
		for k := range s.flight {
			if distinct(k) {
				acts = append(acts, action{kind: OpDrop, item: k})
			}
		}
	}
	for i := 0; i < x.m.n; i++ {
		if int(s.used[OpBroadcast]) < o.Broadcasts {
			if nd := s.nodes[i]; !nd.Halted() && !nd.Amnesiac() {
				acts = append(acts, action{kind: OpBroadcast, host: i})
			}
		}
		if int(s.used[OpCompact]) < o.Compacts {
			acts = append(acts, action{kind: OpCompact, host: i})
		}
		if int(s.used[OpRestart]) < o.Restarts {
			acts = append(acts, action{kind: OpRestart, host: i})
		}
		if int(s.used[OpAmnesia]) < o.Amnesia {
			acts = append(acts, action{kind: OpAmnesia, host: i})
		}
		if int(s.used[OpGone]) < o.Gones {
			acts = append(acts, action{kind: OpGone, host: i})
		}
	}
	if x.rng != nil {
		x.rng.Shuffle(len(acts), func(i, j int) { acts[i], acts[j] = acts[j], acts[i] })
	}
	return acts
}

func (x *explorer) dfs(s *state, depth int) {
	if depth >= x.opt.MaxDepth {
		return
	}
	for _, a := range x.actions(s) {
		if x.stop {
			return
		}
		x.res.Transitions++
		if !x.deadline.IsZero() && x.res.Transitions&1023 == 0 && time.Now().After(x.deadline) {
			x.stop = true
			return
		}
		x.path = append(x.path, pathElem{s, a})
		x.step(s, a, depth)
		x.path = x.path[:len(x.path)-1]
	}
}

func (x *explorer) step(s *state, a action, depth int) {
	x.fresh = x.fresh[:0]
	c, v := x.m.apply(s, a)
	if c == nil && v == nil {
		return // the action does not apply here
	}
	if v != nil {
		v.Step = len(x.path) - 1
		t := x.trace()
		t.Violation = v
		x.res.Violation = t
		x.stop = true
		return
	}
	for _, k := range x.fresh {
		x.res.Examples[k] = x.trace()
	}
	for _, nd := range c.nodes {
		x.res.MaxEpoch = max(x.res.MaxEpoch, nd.Epoch())
	}
	x.res.MaxAgreed = max(x.res.MaxAgreed, len(c.global))
	if x.opt.MaxInFlight > 0 && len(c.flight) > x.opt.MaxInFlight {
		x.res.Pruned++
		return
	}
	f := c.fingerprint()
	d := depth + 1
	if old, ok := x.seen[f]; ok {
		if int(old) <= d {
			return
		}
		x.res.Revisits++
	} else {
		if x.res.States >= x.opt.MaxStates {
			x.stop = true
			return
		}
		x.res.States++
	}
	x.seen[f] = uint8(d)
	x.res.MaxDepthReached = max(x.res.MaxDepthReached, d)
	x.dfs(c, d)
}

// trace returns the current path as a Trace.
func (x *explorer) trace() *Trace {
	t := &Trace{Hosts: x.opt.Hosts, Config: x.opt.Config}
	for _, pe := range x.path {
		st := Step{Op: pe.a.kind, Host: pe.a.host}
		switch pe.a.kind {
		case OpDeliver, OpDrop, OpDup:
			st.Host = 0
			st.Item = describeItem(&pe.s.flight[pe.a.item], x.opt.Config.TagKey)
		}
		t.Steps = append(t.Steps, st)
	}
	return t
}
