package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
)

// ChaosOptions configure a nemesis run.
type ChaosOptions struct {
	Duration time.Duration
	Seed     uint64
	// Every is the mean time between nemesis actions (default 700ms).
	Every time.Duration
	// Wipes is how many times the nemesis kills a host, wipes its durable
	// log and restarts it with --join (a lost disk). 0 by default: a
	// host without state rejoins through an install of the whole log,
	// which is refused beyond the OOB message cap (64 MiB) once the run's
	// log outgrew it (state transfer is issue 17).
	Wipes int
	// CatchUp bounds the time, from the final heal, within which every
	// host must reach the furthest agreement pointer any host had then
	// (default 5s).
	CatchUp time.Duration
	// HoldMin is the shortest stall of the rack's agreement pointer that
	// the report explains (default 1s).
	HoldMin time.Duration
	// Only restricts the nemesis to these of ChaosActions (nil: all but
	// none). "wipe" needs Wipes; "none" is an action without a fault (a
	// probe of the measurement itself: its figures are the floor of the
	// others').
	Only []string
	// Count ends the run after this many actions (0: no bound). With Count
	// set, a zero Duration is no bound either.
	Count int
	// Spacing, if set, paces the nemesis: an action every Spacing, each
	// measured until agreement moves again at every host that must (at
	// most 10 s), then after Spacing undone (a heal; the killed host
	// restarted) and measured again, and Spacing more before the next
	// action. heal and heal-kill are not actions of their own then. 0: the
	// random schedule (a mean of Every between actions, faults that stack
	// up until a heal, killed hosts back after 1-4 s).
	Spacing time.Duration
	// LoadWindow is the publishes each host's client keeps in flight
	// (default 16: the CPUs of a 2-vCPU machine saturated; 1: a light
	// load).
	LoadWindow int
	// Log receives one line per action (may be nil).
	Log func(string)
}

// ChaosActions are the nemesis' actions, for ChaosOptions.Only.
var ChaosActions = []string{"partition", "seed-split", "one-way", "host-cut", "heal", "kill", "heal-kill", "loss", "wipe", "none"}

// moveLimit bounds the measurement of one action.
const moveLimit = 10 * time.Second

// CheckChaosOptions reports options Chaos would refuse (before a rack is
// built for them).
func CheckChaosOptions(o ChaosOptions) error {
	if o.Duration <= 0 && o.Count <= 0 {
		return fmt.Errorf("chaos: neither a duration nor a count of actions")
	}
	if o.LoadWindow < 0 {
		return fmt.Errorf("chaos: load window %d is negative (0: the default, 16)", o.LoadWindow)
	}
	_, err := chaosActions(o)
	return err
}

// chaosActions returns the actions the nemesis draws from, in the order
// of the unrestricted schedule (so that a seed keeps its schedule).
func chaosActions(o ChaosOptions) ([]string, error) {
	all := []string{"partition", "seed-split", "one-way", "host-cut", "heal", "kill", "heal-kill", "loss"}
	if o.Wipes > 0 {
		all = append(all, "wipe")
	}
	if o.Spacing > 0 { // paced: every fault is healed after it
		all = slices.DeleteFunc(all, func(a string) bool { return a == "heal" || a == "heal-kill" })
	}
	if len(o.Only) == 0 {
		return all, nil
	}
	var out []string
	for _, a := range o.Only {
		switch {
		case !slices.Contains(ChaosActions, a):
			return nil, fmt.Errorf("chaos: unknown action %q (actions: %s)", a, strings.Join(ChaosActions, ", "))
		case a == "wipe" && o.Wipes == 0:
			return nil, fmt.Errorf("chaos: action wipe needs a number of wipes (Wipes, --wipes)")
		case (a == "heal" || a == "heal-kill") && o.Spacing > 0:
			return nil, fmt.Errorf("chaos: %s is no action of its own when paced (every fault is healed Spacing after it)", a)
		}
	}
	for _, a := range append(all, "none") {
		if slices.Contains(o.Only, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// ChaosReport is what a nemesis run found and measured.
type ChaosReport struct {
	Seed         uint64          `json:"seed"`
	Hosts        int             `json:"hosts"`
	Seconds      float64         `json:"seconds"`
	Actions      map[string]int  `json:"actions"`
	Acked        int             `json:"acknowledged_messages"`
	Delivered    int             `json:"delivered_messages"`
	Violations   []string        `json:"violations"`
	SafetyEvents int             `json:"safety_events"`
	HealToMoveMs []float64       `json:"heal_to_agreement_moving_ms"` // per heal: until every host's agreement pointer moved
	CatchUp      []float64       `json:"catch_up_entries_per_sec"`    // per restart from the log: RestartFigure.Rate
	Restarts     []RestartFigure `json:"restarts"`                    // per restart from the log
	HaltedMs     []float64       `json:"halted_ms"`                   // per observed view change hold
	// FinalCatchUpMs: per host, from the final heal until it reached the
	// furthest agreement pointer any host had then.
	FinalCatchUpMs map[string]float64 `json:"final_catch_up_ms"`
	// Holds are the stalls of the rack's agreement pointer longer than
	// ChaosOptions.HoldMin, each with its cause.
	Holds []Hold `json:"holds"`
	Epoch uint32 `json:"final_epoch"`
	// Mode is the schedule: random (Every) or paced (Spacing), and Only.
	Mode string `json:"mode"`
	// Recovery: per kind of action (kill, heal-kill: a kill 100-350 ms
	// after a heal, restart: a killed host back from its log, wipe,
	// rejoin: a wiped host back with --join, partition, seed-split,
	// one-way, host-cut-ingress, host-cut-egress, loss, heal, none), the
	// time from the action, once it had taken effect, until agreement
	// moved again at every host that must move: the hosts in every largest
	// set of live hosts that reach each other both ways, if that set is a
	// majority. A host moves again when its subscriber delivers an entry
	// Resolution.MarginEntries past the rack's agreement pointer at the
	// action.
	Recovery map[string]KindFigures `json:"recovery"`
	// ViewChangeHolds: the stalls of the rack's agreement pointer (the
	// furthest of any host, from the subscribers) during which an epoch was
	// installed, each once; EpochsInstalled counts the installs the
	// watcher saw, UnheldViewChanges those that overlapped no stall of
	// 1 ms or more.
	ViewChangeHolds Figures `json:"view_change_holds"`
	// ViewChangeHoldsMajority: of each of those holds, the time during
	// which a connected majority of live hosts existed (the rest waits
	// for one: no protocol moves without it), in ms.
	ViewChangeHoldsMajority Figures        `json:"view_change_holds_with_majority"`
	EpochsInstalled         int            `json:"epochs_installed"`
	UnheldViewChanges       int            `json:"view_changes_without_a_stall"`
	Resolution              Resolution     `json:"resolution"`
	Counters                TakeoverCounts `json:"counters"`
	// Machine is how the machine's CPUs spent the time the counters
	// cover (/proc/stat; nil where it cannot be read).
	Machine *MachineShare `json:"machine,omitempty"`
}

// Summary is the human-readable form of a report.
func (r ChaosReport) Summary() string {
	q := func(v []float64) string {
		if len(v) == 0 {
			return "n/a"
		}
		s := slices.Clone(v)
		slices.Sort(s)
		return fmt.Sprintf("p50 %.0f max %.0f (%d)", s[len(s)/2], s[len(s)-1], len(s))
	}
	verdict := "0 violations"
	if len(r.Violations) > 0 {
		verdict = fmt.Sprintf("%d VIOLATIONS: %v", len(r.Violations), r.Violations)
	}
	var fin []float64
	for _, ms := range r.FinalCatchUpMs {
		fin = append(fin, ms)
	}
	var own []float64 // the same from the daemon's start (RestartFigure.DaemonRate)
	for _, f := range r.Restarts {
		if f.DaemonRate > 0 {
			own = append(own, f.DaemonRate)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chaos seed %d, %d hosts, %.0fs, actions %v\n%d acknowledged, %d delivered at every host: %s; %d SAFETY events\n"+
		"heal -> agreement moving at every host (ms): %s\ncatch-up of a restarted host (entries behind / time from its restart, replay included, until it reached the rack's agreement pointer at the restart; entries/s): %s; from the daemon's start: %s\n"+
		"a host halted (promised a view change; 20 ms samples) (ms): %s\nfinal heal -> every host caught up (ms): %s\nfinal epoch %d",
		r.Seed, r.Hosts, r.Seconds, r.Actions, r.Acked, r.Delivered, verdict, r.SafetyEvents,
		q(r.HealToMoveMs), q(r.CatchUp), q(own), q(r.HaltedMs), q(fin), r.Epoch)
	var majority int
	for _, h := range r.Holds {
		if h.Majority > 1 {
			majority++
		}
	}
	fmt.Fprintf(&b, "\n%d stalls of the rack's agreement pointer over 1s, %d of them with over 1s of a connected live majority:", len(r.Holds), majority)
	for _, h := range r.Holds {
		fmt.Fprintf(&b, "\n  t=%.1fs %.1fs at %d (majority %.1fs): %s", h.StartS, h.Seconds, h.Agreed, h.Majority, h.Cause)
	}
	fmt.Fprintf(&b, "\nschedule: %s", r.Mode)
	fmt.Fprintf(&b, "\nrecovery: action (once in effect) -> agreement moving again at every host that must move (ms):\n%s", recoveryTable(r.Recovery))
	fmt.Fprintf(&b, "\nview-change holds of the rack's agreement pointer (ms): %s (%d epochs installed, %d without a stall over 1 ms)",
		r.ViewChangeHolds, r.EpochsInstalled, r.UnheldViewChanges)
	fmt.Fprintf(&b, "\n  of each, the time a connected majority of live hosts existed (ms): %s", r.ViewChangeHoldsMajority)
	ct := r.Counters
	fals := "n/a (the daemons do not report it)"
	if ct.FalseTakeovers != nil {
		fals = fmt.Sprintf("%d (%.2f per minute)", *ct.FalseTakeovers, ct.PerMinute(*ct.FalseTakeovers))
	}
	if ct.LateFrames != nil {
		fals += fmt.Sprintf(", late frames of holders passed over %d (%.2f per minute)", *ct.LateFrames, ct.PerMinute(*ct.LateFrames))
	}
	fmt.Fprintf(&b, "\ndaemons' counters over %.0fs, summed over the hosts: takeovers %d (%.2f per minute), view changes started %d (%.2f per minute), false takeovers %s",
		ct.Seconds, ct.Takeovers, ct.PerMinute(ct.Takeovers), ct.ViewChanges, ct.PerMinute(ct.ViewChanges), fals)
	if ct.Fsyncs > 0 {
		fmt.Fprintf(&b, ", durable-log fsyncs %d (%.0f per second)", ct.Fsyncs, float64(ct.Fsyncs)/max(ct.Seconds, 1))
	}
	if len(ct.ViewChangeCauses) > 0 {
		fmt.Fprintf(&b, "\n  view changes started by cause:")
		for _, c := range exo.Causes() {
			if n := ct.ViewChangeCauses[c.String()]; n > 0 {
				fmt.Fprintf(&b, " %s %d", c, n)
			}
		}
	}
	if r.Machine != nil {
		fmt.Fprintf(&b, "\nthe machine's CPUs over that time: %s", r.Machine)
	}
	if r.Actions["none"] > 0 && len(r.Actions) == 1 {
		fmt.Fprintf(&b, "\n  (no fault in this run: every takeover and view change in it was a false one)")
	}
	rs := r.Resolution
	fmt.Fprintf(&b, "\nresolution: a host's agreement pointer seen advancing every %.2f ms p50, %.2f ms p99 while moving (subscriber per host); moving = %d entries past the rack's pointer at the action; a status read costs %.2f ms (new connection), %.2f ms (open one); %d resubscriptions",
		rs.AdvanceP50Ms, rs.AdvanceP99Ms, rs.MarginEntries, rs.StatusDialMs, rs.StatusConnMs, rs.Resubscribes)
	return b.String()
}

// nemesis is the state of one chaos run: the faults in force, the hosts
// down, and what happened, with times.
type nemesis struct {
	c     *Cluster
	rng   *rand.Rand
	start time.Time
	say   func(string, ...any)
	paced bool
	tr    *tracker

	// pending are the measurements of the random schedule still running
	// (the nemesis' goroutine only).
	pending []*moveWait

	mu       sync.Mutex
	dead     map[int]bool
	restart  map[int]time.Time // dead hosts and when they come back
	join     map[int]bool      // ... with --join (their disk was wiped)
	spans    []faultSpan
	samples  []sample
	installs [][2]time.Duration // epochs installed: the previous sample of the host that showed it first, and that sample
	safety   map[int]uint64     // SAFETY events counted by each host's daemons that were stopped
	killedAt map[int]uint64     // the agreement pointer of each killed host, read before the kill
	lost     counterSet         // the counters of daemons that were killed, read before
	raw      map[string]*kindRaw
	rep      *ChaosReport
}

// Chaos runs a seeded nemesis on the rack while clients publish from every
// host: two-way partitions, the seed's minority/majority split, one-way
// cuts on the bridge and on a host's own interface (ingress or egress),
// heals, kill -9 of daemons (also 100-350 ms after a heal, during the
// reconciliation it starts) restarted from their durable logs after 1-4 s,
// optionally wiped disks (Wipes), and frame loss at one host (Only: some
// of them; Spacing: one at a time, each undone before the next). At the end
// it heals everything, restarts the dead, and checks: every host reaches the
// furthest agreement pointer within CatchUp, a last round is agreed, every
// host's agreed stream is the same and holds every acknowledged message
// once at its position, and no daemon reported a SAFETY event. It explains
// every stall of the rack's agreement pointer longer than HoldMin, and
// measures, per kind of action, the time until agreement moves again at
// every host that must move (ChaosReport.Recovery), from a subscriber on
// every host.
func (c *Cluster) Chaos(ctx context.Context, o ChaosOptions) (ChaosReport, error) {
	if o.Every == 0 {
		o.Every = 700 * time.Millisecond
	}
	if o.CatchUp == 0 {
		o.CatchUp = 5 * time.Second
	}
	if o.HoldMin == 0 {
		o.HoldMin = time.Second
	}
	n := len(c.Rack.Hosts)
	rep := ChaosReport{Seed: o.Seed, Hosts: n, Actions: map[string]int{}, FinalCatchUpMs: map[string]float64{}}
	if err := CheckChaosOptions(o); err != nil {
		return rep, err
	}
	actions, _ := chaosActions(o)
	rep.Mode = fmt.Sprintf("random, an action every %v on average", o.Every)
	if o.Spacing > 0 {
		rep.Mode = fmt.Sprintf("paced, an action every %v, each undone %v after it", o.Spacing, o.Spacing)
	}
	if len(o.Only) > 0 {
		rep.Mode += ", only " + strings.Join(actions, ",")
	}
	if o.Count > 0 {
		rep.Mode += fmt.Sprintf(", %d actions", o.Count)
	}
	m := &nemesis{c: c, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0xc4a05)), start: time.Now(), rep: &rep, paced: o.Spacing > 0,
		dead: map[int]bool{}, restart: map[int]time.Time{}, join: map[int]bool{}, safety: map[int]uint64{}, killedAt: map[int]uint64{}, raw: map[string]*kindRaw{}}
	m.say = func(format string, args ...any) {
		if o.Log != nil {
			o.Log(fmt.Sprintf("t=%6.2fs ", time.Since(m.start).Seconds()) + fmt.Sprintf(format, args...))
		}
	}
	m.span("start")
	var ackMu sync.Mutex
	acked := map[string]client.Position{}
	onAck := func(p []byte, pos client.Position) { ackMu.Lock(); acked[string(p)] = pos; ackMu.Unlock() }
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var loadWG sync.WaitGroup
	for h := 0; h < n; h++ {
		// One load per host: a round waits for every host in it, and a
		// host cut off or down would hold the others' rounds.
		loadWG.Add(1)
		go func() {
			defer loadWG.Done()
			for round := 1; lctx.Err() == nil; round++ {
				c.Publish(lctx, Load{Hosts: []int{h}, PerHost: 200, Size: 64, Window: cmp.Or(o.LoadWindow, 16), Round: round, OnAck: onAck, Tolerant: true})
				if lctx.Err() == nil && m.isDead(h) {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var watchWG sync.WaitGroup
	watchWG.Add(2)
	go func() { defer watchWG.Done(); m.watch(wctx) }()
	m.tr = newTracker(c, m.start, m.isDead)
	go func() { defer watchWG.Done(); m.tr.run(wctx) }()
	stop := func() { stopLoad(); stopWatch(); loadWG.Wait(); watchWG.Wait() }

	// What a status read costs (the clock the tracker replaces), and the
	// counters at the start.
	rep.Resolution.StatusDialMs, rep.Resolution.StatusConnMs = c.statusCost(ctx, 0)
	var counted0 counterSet
	for i := 0; i < n; i++ {
		if _, cs, err := c.statusFull(ctx, i); err == nil {
			counted0.add(cs)
		}
	}
	countFrom := time.Now()
	cpu0, cpuErr := readCPUTimes("/proc/stat")

	faulty := false
	wipes := o.Wipes
	done := 0
	for (o.Duration <= 0 || time.Since(m.start) < o.Duration) && (o.Count <= 0 || done < o.Count) && ctx.Err() == nil {
		gap := o.Spacing
		if !m.paced {
			gap = time.Duration(float64(o.Every) * (0.5 + m.rng.Float64()))
		}
		if err := m.sleep(ctx, gap); err != nil {
			stop()
			return rep, err
		}
		avail := actions
		if wipes == 0 {
			avail = slices.DeleteFunc(slices.Clone(actions), func(a string) bool { return a == "wipe" })
		}
		if len(avail) == 0 {
			break
		}
		action := avail[m.rng.IntN(len(avail))]
		killed := -1
		var err error
		m.settle()
		t1 := time.Now()
		switch action {
		case "partition":
			side := [][]int{{}, {}}
			for i := 0; i < n; i++ {
				k := m.rng.IntN(2)
				side[k] = append(side[k], i)
			}
			if len(side[0]) == 0 || len(side[1]) == 0 {
				continue
			}
			err = c.Rack.Partition(ctx, side)
			w := m.after("partition")
			m.act("partition %s / %s", m.names(side[0]), m.names(side[1]))
			m.measure(ctx, w, t1, w.t0, m.paced)
			faulty = true
		case "seed-split":
			perm := m.rng.Perm(n)
			k := n / 2
			err = c.Rack.Partition(ctx, [][]int{perm[:k], perm[k:]})
			w := m.after("seed-split")
			m.act("minority split %s / %s", m.names(perm[:k]), m.names(perm[k:]))
			m.measure(ctx, w, t1, w.t0, m.paced)
			faulty = true
		case "one-way":
			perm := m.rng.Perm(n)
			k := 1 + m.rng.IntN(n-1)
			err = c.Rack.PartitionOneWay(ctx, perm[:k], perm[k:])
			w := m.after("one-way")
			m.act("one-way cut on the bridge %s -> %s", m.names(perm[:k]), m.names(perm[k:]))
			m.measure(ctx, w, t1, w.t0, m.paced)
			faulty = true
		case "host-cut":
			h := m.rng.IntN(n)
			dir := []string{lab.CutIngress, lab.CutEgress}[m.rng.IntN(2)]
			err = c.Rack.CutHost(ctx, h, dir)
			w := m.after("host-cut-" + dir)
			m.act("one-way cut on %s's own interface: %s dropped", c.Rack.Hosts[h].Name, dir)
			m.measure(ctx, w, t1, w.t0, m.paced)
			faulty = true
		case "loss":
			h := m.rng.IntN(n)
			f := 0.05 + 0.15*m.rng.Float64()
			err = c.Rack.DropRate(ctx, h, f)
			w := m.after("loss")
			m.act("loss %.0f%% at %s", 100*f, c.Rack.Hosts[h].Name)
			m.measure(ctx, w, t1, w.t0, m.paced)
			faulty = true
		case "none":
			w := m.after("none")
			m.act("no fault (a probe of the measurement)")
			m.measure(ctx, w, t1, w.t0, m.paced)
		case "heal", "heal-kill":
			if !faulty {
				continue
			}
			err = c.Rack.Heal(ctx)
			w := m.after("heal")
			faulty = false
			if err != nil {
				break
			}
			m.act("heal")
			if action == "heal-kill" {
				// A kill during the reconciliation the heal starts.
				m.measure(ctx, w, t1, w.t0, false)
				if err = m.sleep(ctx, time.Duration(100+m.rng.IntN(250))*time.Millisecond); err == nil {
					_, err = m.kill(ctx, -1, false, "heal-kill")
				}
				break
			}
			if ok, still := m.measure(ctx, w, t1, w.t0, true); !ok && len(still) > 0 {
				rep.Violations = append(rep.Violations, fmt.Sprintf("agreement did not move at every live host within 10s of a heal (t=%.1fs; not at %s)",
					time.Since(m.start).Seconds(), m.names(still)))
			}
		case "kill":
			killed, err = m.kill(ctx, -1, false, "kill")
		case "wipe":
			if killed, err = m.kill(ctx, -1, true, "wipe"); err == nil {
				wipes--
			}
		}
		rep.Actions[action]++
		done++
		if err != nil {
			stop()
			return rep, fmt.Errorf("chaos: %s: %w", action, err)
		}
		if m.paced {
			if err := m.undo(ctx, action, killed, o.Spacing); err != nil {
				stop()
				return rep, fmt.Errorf("chaos: undoing %s: %w", action, err)
			}
			faulty = false
		}
	}
	m.settle()
	// The final heal: no fault, every host up.
	if err := c.Rack.Heal(ctx); err != nil {
		stop()
		return rep, err
	}
	for _, h := range m.deadList() {
		if err := m.bringBack(ctx, h, false); err != nil {
			stop()
			return rep, err
		}
	}
	m.act("final heal")
	healed := time.Now()
	stopLoad()
	loadWG.Wait()
	m.finalCatchUp(ctx, healed, o.CatchUp)
	var counted counterSet
	for i := 0; i < n; i++ {
		if _, cs, err := c.statusFull(ctx, i); err == nil {
			counted.add(cs)
		}
	}
	m.mu.Lock()
	counted.add(m.lost)
	m.mu.Unlock()
	rep.Counters = TakeoverCounts{Seconds: time.Since(countFrom).Seconds(), Takeovers: counted.takeovers - min(counted.takeovers, counted0.takeovers),
		ViewChanges: counted.viewChanges - min(counted.viewChanges, counted0.viewChanges),
		Fsyncs:      counted.fsyncs - min(counted.fsyncs, counted0.fsyncs)}
	for c, n := range counted.causes {
		if d := n - min(n, counted0.causes[c]); d > 0 {
			if rep.Counters.ViewChangeCauses == nil {
				rep.Counters.ViewChangeCauses = map[string]uint64{}
			}
			rep.Counters.ViewChangeCauses[c] = d
		}
	}
	if cpu1, err := readCPUTimes("/proc/stat"); err == nil && cpuErr == nil {
		if sh, ok := cpu0.share(cpu1); ok {
			rep.Machine = &sh
		}
	}
	if counted.hasFalse {
		f := counted.falseTakeovers - min(counted.falseTakeovers, counted0.falseTakeovers)
		rep.Counters.FalseTakeovers = &f
	}
	if counted.hasLate {
		l := counted.lateFrames - min(counted.lateFrames, counted0.lateFrames)
		rep.Counters.LateFrames = &l
	}
	stopWatch()
	watchWG.Wait()
	watched := time.Since(m.start)
	res := m.tr.resolution()
	res.StatusDialMs, res.StatusConnMs = rep.Resolution.StatusDialMs, rep.Resolution.StatusConnMs
	rep.Resolution = res
	// A last round with everything healed: it must be agreed within a
	// bounded time (liveness with a connected majority).
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
	if _, err := c.Publish(fctx, Load{Hosts: all, PerHost: 50, Size: 64, Round: 1 << 20, OnAck: onAck}); err != nil {
		rep.Violations = append(rep.Violations, fmt.Sprintf("liveness: the last round after the final heal was not agreed within 60s: %v", err))
	}
	fcancel()
	rep.Seconds = time.Since(m.start).Seconds()
	rep.Acked = len(acked)
	delivered, violations := c.CheckAcked(ctx, acked)
	rep.Delivered = delivered
	rep.Violations = append(rep.Violations, violations...)
	m.checkSafety(ctx)
	if st, err := c.Status(ctx, 0); err == nil {
		rep.Epoch = st.Epoch
	}
	m.mu.Lock()
	names := make([]string, n)
	for i, h := range c.Rack.Hosts {
		names[i] = h.Name
	}
	rep.Holds = holds(m.samples, m.spans, watched, names, o.HoldMin)
	rep.Recovery = map[string]KindFigures{}
	for k, r := range m.raw {
		rep.Recovery[k] = r.figures()
	}
	if h, ok := rep.Recovery["heal"]; ok {
		rep.HealToMoveMs = h.Moving.Samples
	}
	var vc []float64
	vc, vcMajority, unheld := viewChangeHolds(m.tr.gaps, m.installs, m.spans)
	rep.UnheldViewChanges = unheld
	rep.ViewChangeHolds, rep.EpochsInstalled = FiguresOf(vc), len(m.installs)
	rep.ViewChangeHoldsMajority = FiguresOf(vcMajority)
	m.mu.Unlock()
	return rep, nil
}

// undo takes back, in the paced schedule, the fault of action (killed:
// the host it killed) spacing after it: a heal, or the restart of the
// killed host; each is measured as an action of its own.
func (m *nemesis) undo(ctx context.Context, action string, killed int, spacing time.Duration) error {
	switch action {
	case "none":
		return nil
	case "kill", "wipe":
		if killed < 0 {
			return nil
		}
		if err := m.sleep(ctx, spacing); err != nil {
			return err
		}
		return m.bringBack(ctx, killed, true)
	}
	if err := m.sleep(ctx, spacing); err != nil {
		return err
	}
	t1 := time.Now()
	if err := m.c.Rack.Heal(ctx); err != nil {
		return err
	}
	w := m.after("heal")
	m.act("heal")
	if ok, still := m.measure(ctx, w, t1, w.t0, true); !ok && len(still) > 0 {
		m.mu.Lock()
		m.rep.Violations = append(m.rep.Violations, fmt.Sprintf("agreement did not move at every live host within 10s of a heal (t=%.1fs; not at %s)",
			time.Since(m.start).Seconds(), m.names(still)))
		m.mu.Unlock()
	}
	return nil
}

// measure goes on with measurement w (begun when its action took effect),
// the action applied from t1 to applied: the faults and the hosts down in
// force now decide which hosts must move. When block it waits, at most
// moveLimit from the action, and returns whether agreement moved again at
// every host that must and, if not, those that did not move at all;
// otherwise the measurement runs until the next action (settle).
func (m *nemesis) measure(ctx context.Context, w *moveWait, t1, applied time.Time, block bool) (bool, []int) {
	n := len(m.c.Rack.Hosts)
	m.mu.Lock()
	k := m.raw[w.kind]
	if k == nil {
		k = &kindRaw{}
		m.raw[w.kind] = k
	}
	k.apply = append(k.apply, ms(applied.Sub(t1)))
	conn := connected(n, m.c.Rack.Faults, m.dead)
	m.mu.Unlock()
	must := mustMove(conn)
	m.tr.commit(w, must)
	if must == nil {
		m.mu.Lock()
		k.noMajority++
		m.mu.Unlock()
		m.say("  no connected majority of live hosts: nothing must move")
		return true, nil
	}
	if !block {
		m.pending = append(m.pending, w)
		return true, nil
	}
	t := time.NewTimer(moveLimit - time.Since(w.t0))
	defer t.Stop()
	// Killed hosts come back on time meanwhile: a fork only a killed
	// host's log can decide holds the rack until it is back, and a run
	// once kept a host down 10 s past its restart this way (and reported
	// the heal as a violation).
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for done := false; !done; {
		select {
		case <-w.done:
			done = true
		case <-t.C:
			done = true
		case <-ctx.Done():
			done = true
		case <-poll.C:
			m.restartDue(ctx)
		}
	}
	return m.finish(w, false)
}

// after begins the measurement of an action of kind that took effect when
// the call applying it returned (now).
func (m *nemesis) after(kind string) *moveWait { return m.tr.begin(kind, time.Now()) }

// finish ends measurement w: cut short by the next action (cut) unless it
// completed or ran out of time.
func (m *nemesis) finish(w *moveWait, cut bool) (bool, []int) {
	d, stall, ok, still := m.tr.end(w)
	elapsed := time.Since(w.t0)
	m.mu.Lock()
	k := m.raw[w.kind]
	switch {
	case ok:
		k.moving = append(k.moving, d)
		k.stall = append(k.stall, stall)
	case cut && elapsed < moveLimit:
		k.cut = append(k.cut, ms(elapsed))
	default:
		k.timedOut++
	}
	m.mu.Unlock()
	switch {
	case ok:
		m.say("  %s: agreement moving again at %s %.1f ms after it (longest stall %.1f ms)", w.kind, m.names(w.must), d, stall)
	case cut && elapsed < moveLimit:
		m.say("  %s: cut short by the next action %.0f ms after it (not moving at all yet: %s)", w.kind, ms(elapsed), m.names(still))
	default:
		m.say("  %s: agreement not moving again at every one of %s within %v (not moving at all: %s)", w.kind, m.names(w.must), moveLimit, m.names(still))
	}
	return ok, still
}

// settle ends the measurements still running before the next action:
// those complete count, the others were cut short.
func (m *nemesis) settle() {
	for _, w := range m.pending {
		m.finish(w, true)
	}
	m.pending = nil
}

// awaitPending waits for the running measurements (each at most
// moveLimit from its action) and ends them.
func (m *nemesis) awaitPending(ctx context.Context) {
	for _, w := range m.pending {
		t := time.NewTimer(max(moveLimit-time.Since(w.t0), 0))
		select {
		case <-w.done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		m.finish(w, false)
	}
	m.pending = nil
}

// reap ends the running measurements that are complete.
func (m *nemesis) reap() {
	keep := m.pending[:0]
	for _, w := range m.pending {
		select {
		case <-w.done:
			m.finish(w, false)
		default:
			keep = append(keep, w)
		}
	}
	m.pending = keep
}

// act records a nemesis action: a new stretch of faults begins.
func (m *nemesis) act(format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	m.say("%s", what)
	m.span(what)
}

// span notes that the faults changed (an action, a host down or up).
func (m *nemesis) span(what string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	conn := connected(len(m.c.Rack.Hosts), m.c.Rack.Faults, m.dead)
	m.spans = append(m.spans, faultSpan{from: time.Since(m.start), majority: majorityConnected(conn), what: what})
}

func (m *nemesis) names(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = m.c.Rack.Hosts[id].Name
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

func (m *nemesis) isDead(h int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dead[h]
}

func (m *nemesis) deadList() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for h := range m.dead {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// kill kills host h (-1: a random live host, at most floor(n/2)-1 down at
// once so that a majority can stay up) with SIGKILL, wiping its durable
// log if wipe, and schedules its restart 1-4 s later (paced: undo restarts
// it). The kill is measured as an action of kind. It returns the host
// killed, -1 if none.
func (m *nemesis) kill(ctx context.Context, h int, wipe bool, kind string) (int, error) {
	n := len(m.c.Rack.Hosts)
	if h < 0 {
		h = m.rng.IntN(n)
	}
	if m.isDead(h) || len(m.deadList()) >= max(n/2-1, 1) {
		return -1, nil
	}
	if st, cs, err := m.c.statusFull(ctx, h); err == nil {
		m.mu.Lock()
		m.safety[h] += st.Counters["safety_events"]
		m.lost.add(cs)
		m.killedAt[h] = st.Agreed
		m.mu.Unlock()
	}
	m.settle()
	// The kill takes effect when Kill sends the signal, first thing: the
	// measurement begins then; the wait for the exit is the apply time.
	w := m.tr.begin(kind, time.Now())
	if err := m.c.Kill(h); err != nil {
		m.tr.commit(w, nil)
		if !errors.Is(err, os.ErrProcessDone) {
			return -1, err
		}
		// The daemon had exited by itself: a finding, and the host is
		// down as if killed (restarted as one).
		m.exitedAlone(h)
		w = nil
	}
	killed := time.Now()
	back := time.Duration(1000+m.rng.IntN(3000)) * time.Millisecond
	m.mu.Lock()
	m.dead[h], m.join[h] = true, wipe
	if !m.paced {
		m.restart[h] = time.Now().Add(back)
	}
	m.mu.Unlock()
	what := "kill -9 %s, restart from its log after %v"
	if wipe {
		cfg, err := m.c.Config(h)
		if err != nil {
			return h, err
		}
		if cfg.DataDir == "" {
			return h, fmt.Errorf("wipe %s: it has no data_dir", m.c.Rack.Hosts[h].Name)
		}
		if err := os.RemoveAll(cfg.DataDir); err != nil {
			return h, err
		}
		what = "kill -9 %s, wipe its durable log, restart with --join after %v"
	}
	if m.paced {
		what = strings.Replace(what, "after %v", "after the spacing", 1)
		m.act(what, m.c.Rack.Hosts[h].Name)
	} else {
		m.act(what, m.c.Rack.Hosts[h].Name, back.Round(time.Millisecond))
	}
	if w != nil {
		m.measure(ctx, w, w.t0, killed, m.paced)
	}
	return h, nil
}

// exitedAlone reports that host h's daemon had exited before the nemesis
// killed it, with its exit status and the end of its log.
func (m *nemesis) exitedAlone(h int) {
	status := "unknown"
	m.c.mu.Lock()
	exit := m.c.exits[h]
	m.c.mu.Unlock()
	select {
	case e := <-exit:
		status = fmt.Sprint(e)
	default:
	}
	log, _ := os.ReadFile(m.c.LogPath(h))
	m.mu.Lock()
	m.rep.Violations = append(m.rep.Violations, fmt.Sprintf("t=%.1fs the daemon of %s had exited by itself before the nemesis killed it (exit status %s); its log ends: %s",
		time.Since(m.start).Seconds(), m.c.Rack.Hosts[h].Name, status, tail(log, 400)))
	m.mu.Unlock()
	m.say("the daemon of %s had exited by itself (exit status %s)", m.c.Rack.Hosts[h].Name, status)
}

// bringBack restarts dead host h and measures how fast it catches up (and,
// if measure, the time until agreement moves again at every host that
// must, this one included, as an action "restart" or "rejoin").
func (m *nemesis) bringBack(ctx context.Context, h int, measure bool) error {
	m.mu.Lock()
	join := m.join[h]
	m.mu.Unlock()
	m.settle()
	target := m.rackAgreed(ctx)
	t1 := time.Now()
	if err := m.c.StartHost(ctx, h, join); err != nil {
		return err
	}
	replay := time.Since(t1)
	kind := "restart"
	if join {
		kind = "rejoin"
	}
	w := m.after(kind)
	m.mu.Lock()
	delete(m.dead, h)
	delete(m.restart, h)
	delete(m.join, h)
	m.mu.Unlock()
	m.tr.wake(h)
	m.act("%s back (%s)", m.c.Rack.Hosts[h].Name, kind)
	if measure {
		m.measure(ctx, w, t1, w.t0, false)
	} else {
		m.tr.commit(w, nil)
	}
	if !join {
		m.mu.Lock()
		from, ok := m.killedAt[h]
		m.mu.Unlock()
		if r, err := m.c.catchUp(ctx, h, t1, from, target); err != nil {
			m.say("%s did not catch up: %v", m.c.Rack.Hosts[h].Name, err)
		} else if ok && r.Behind > 0 {
			r.Host, r.ReplayMs = m.c.Rack.Hosts[h].Name, ms(replay)
			m.mu.Lock()
			m.rep.CatchUp = append(m.rep.CatchUp, r.Rate)
			m.rep.Restarts = append(m.rep.Restarts, r)
			m.mu.Unlock()
			m.say("%s caught up: %d entries behind, replay %.0f ms, caught up %.0f ms after the restart began (%.0f entries/s; %.1f MB fetched), sent a frame again after %.0f ms; the process took %.0f ms to start, the daemon caught up at %.0f entries/s",
				r.Host, r.Behind, r.ReplayMs, r.CaughtUpMs, r.Rate, r.FetchedMB, r.RejoinedMs, r.StartMs, r.DaemonRate)
		}
	}
	if m.paced {
		m.awaitPending(ctx)
	}
	return nil
}

// restartDue restarts the killed hosts whose time has come.
func (m *nemesis) restartDue(ctx context.Context) {
	m.mu.Lock()
	var due []int
	for h, at := range m.restart {
		if !time.Now().Before(at) {
			due = append(due, h)
		}
	}
	m.mu.Unlock()
	slices.Sort(due)
	for _, h := range due {
		if err := m.bringBack(ctx, h, true); err != nil {
			// A daemon that does not come back is a finding, not the
			// end of the run: the final restart tries again.
			m.mu.Lock()
			m.rep.Violations = append(m.rep.Violations, fmt.Sprintf("t=%.1fs restart of %s failed: %v", time.Since(m.start).Seconds(), m.c.Rack.Hosts[h].Name, err))
			m.restart[h] = time.Now().Add(time.Hour)
			m.mu.Unlock()
		}
	}
}

// sleep waits d, restarting the hosts whose time has come meanwhile.
func (m *nemesis) sleep(ctx context.Context, d time.Duration) error {
	until := time.Now().Add(d)
	for {
		m.restartDue(ctx)
		m.reap()
		left := time.Until(until)
		if left <= 0 {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(left, 50*time.Millisecond)):
		}
	}
}

// watch samples every live host's status every 20 ms, for the halted
// figures, the explanation of stalls and the epochs installed (the
// view-change holds), over a connection it keeps to each daemon.
func (m *nemesis) watch(ctx context.Context) {
	n := len(m.c.Rack.Hosts)
	haltedSince := make([]time.Time, n)
	prevAt := make([]time.Duration, n)
	var rackEpoch uint32
	first := true
	sr := newStatusReader(m.c)
	defer sr.close()
	for ctx.Err() == nil {
		for i := 0; i < n; i++ {
			if m.isDead(i) {
				sr.drop(i)
				continue
			}
			st, err := sr.status(ctx, i)
			if err != nil {
				continue
			}
			m.mu.Lock()
			at := time.Since(m.start)
			m.samples = append(m.samples, sample{at: at, host: i, agreed: st.Agreed, epoch: st.Epoch,
				halted: st.Halted, rec: st.Recovery})
			if st.Epoch > rackEpoch {
				if !first {
					from := prevAt[i]
					if from == 0 {
						from = at - 20*time.Millisecond
					}
					m.installs = append(m.installs, [2]time.Duration{from, at})
				}
				rackEpoch = st.Epoch
			}
			prevAt[i] = at
			switch {
			case st.Halted && haltedSince[i].IsZero():
				haltedSince[i] = time.Now()
			case !st.Halted && !haltedSince[i].IsZero():
				m.rep.HaltedMs = append(m.rep.HaltedMs, float64(time.Since(haltedSince[i]).Microseconds())/1000)
				haltedSince[i] = time.Time{}
			}
			m.mu.Unlock()
		}
		first = false
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// finalCatchUp waits until every host has reached the furthest agreement
// pointer any host had at the final heal; a host that has not within limit
// is a violation (with what it was doing).
func (m *nemesis) finalCatchUp(ctx context.Context, healed time.Time, limit time.Duration) {
	n := len(m.c.Rack.Hosts)
	var target uint64
	for i := 0; i < n; i++ {
		if st, err := m.c.Status(ctx, i); err == nil {
			target = max(target, st.Agreed)
		}
	}
	left := map[int]bool{}
	for i := 0; i < n; i++ {
		left[i] = true
	}
	last := make([]daemon.Status, n)
	for len(left) > 0 && time.Since(healed) < limit && ctx.Err() == nil {
		for i := range left {
			st, err := m.c.Status(ctx, i)
			if err != nil {
				continue
			}
			last[i] = st
			if st.Agreed >= target {
				m.rep.FinalCatchUpMs[m.c.Rack.Hosts[i].Name] = float64(time.Since(healed).Microseconds()) / 1000
				delete(left, i)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, i := range slices.Sorted(func(yield func(int) bool) {
		for i := range left {
			if !yield(i) {
				return
			}
		}
	}) {
		st := last[i]
		b, _ := json.Marshal(st.Recovery)
		m.rep.Violations = append(m.rep.Violations, fmt.Sprintf("host %s had not caught up %v after the final heal: agreement pointer %d of %d, epoch %d, halted %v, promised %d, recovery %s",
			m.c.Rack.Hosts[i].Name, limit, st.Agreed, target, st.Epoch, st.Halted, st.Promised, b))
	}
}

// checkSafety counts the SAFETY events of the run, from the daemons'
// counters (those stopped by a kill were read before it) and from their
// logs (which keep every restart), and makes any a violation.
func (m *nemesis) checkSafety(ctx context.Context) {
	var counted uint64
	for i := range m.c.Rack.Hosts {
		if st, err := m.c.Status(ctx, i); err == nil {
			counted += st.Counters["safety_events"]
		}
	}
	m.mu.Lock()
	for _, v := range m.safety {
		counted += v
	}
	m.mu.Unlock()
	lines, err := m.c.SafetyEvents()
	if err != nil {
		m.rep.Violations = append(m.rep.Violations, fmt.Sprintf("reading the daemons' logs for SAFETY events: %v", err))
	}
	m.rep.SafetyEvents = max(int(counted), len(lines))
	if m.rep.SafetyEvents > 0 {
		first := ""
		if len(lines) > 0 {
			first = ", the first: " + lines[0]
		}
		m.rep.Violations = append(m.rep.Violations, fmt.Sprintf("%d SAFETY events (an agreed entry would have changed)%s", m.rep.SafetyEvents, first))
	}
}

// RestartFigure is the catch-up of one restarted host: it was Behind
// entries behind the rack (the furthest agreement pointer of the live
// hosts just before the restart, less its own when it was killed), its
// daemon replayed its durable log for ReplayMs (until its API answered),
// and it reached that pointer CaughtUpMs after the restart began; Rate is
// Behind over CaughtUpMs, in entries a second (the replay included).
//
// RejoinedMs is when it broadcast a frame again (frames_out above 0: as a
// rule its turn in the token order, a retransmission of its own newest
// entry would count too; 0: not within 10 s of the restart).
type RestartFigure struct {
	Host       string  `json:"host"`
	Behind     uint64  `json:"behind_entries"`
	ReplayMs   float64 `json:"replay_ms"`
	CaughtUpMs float64 `json:"caught_up_ms"`
	Rate       float64 `json:"entries_per_sec"`
	RejoinedMs float64 `json:"rejoined_ms"`
	// FetchedMB is what its fetches brought by the time it caught up
	// (exo_fetched_bytes_total, duplicates included), in MB.
	FetchedMB float64 `json:"fetched_mb"`
	// StartMs is how long the process took to start, from the restart
	// to the daemon's beginning (its status's started: before it reads
	// its durable log): the lab's ip netns exec, the program's loading,
	// the Go runtime, on a machine the rack keeps busy. DaemonRate is
	// Behind over CaughtUpMs less StartMs: the daemon's own pace, its log
	// read and replayed included.
	StartMs    float64 `json:"start_ms"`
	DaemonRate float64 `json:"daemon_entries_per_sec"`
}

// catchUp waits (10 s at most) until host h, restarted at t1, reaches the
// agreement pointer target, having been at from when it was killed.
func (c *Cluster) catchUp(ctx context.Context, h int, t1 time.Time, from, target uint64) (RestartFigure, error) {
	var r RestartFigure
	for time.Since(t1) < 10*time.Second && (r.CaughtUpMs == 0 || r.RejoinedMs == 0) {
		st, err := c.Status(ctx, h)
		if err == nil && st.Agreed >= target && r.CaughtUpMs == 0 {
			d := time.Since(t1)
			r.CaughtUpMs = ms(d)
			r.FetchedMB = float64(st.Counters["fetched_bytes"]) / 1e6
			if !st.Started.IsZero() {
				r.StartMs = max(ms(st.Started.Sub(t1)), 0)
			}
			if target > from {
				r.Behind = target - from
				r.Rate = float64(r.Behind) / d.Seconds()
				if own := r.CaughtUpMs - r.StartMs; own > 0 {
					r.DaemonRate = float64(r.Behind) / (own / 1000)
				}
			}
		}
		if err == nil && st.Counters["frames_out"] > 0 && r.RejoinedMs == 0 {
			r.RejoinedMs = ms(time.Since(t1))
		}
		time.Sleep(time.Millisecond)
	}
	if r.CaughtUpMs == 0 {
		return RestartFigure{}, fmt.Errorf("not at agreement pointer %d within 10 s of its restart", target)
	}
	return r, nil
}

// rackAgreed is the furthest agreement pointer of the live hosts.
func (m *nemesis) rackAgreed(ctx context.Context) uint64 {
	var top uint64
	for i := range m.c.Rack.Hosts {
		if m.isDead(i) {
			continue
		}
		if st, err := m.c.Status(ctx, i); err == nil {
			top = max(top, st.Agreed)
		}
	}
	return top
}
