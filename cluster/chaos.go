package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
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
	// Log receives one line per action (may be nil).
	Log func(string)
}

// ChaosReport is what a nemesis run found and measured.
type ChaosReport struct {
	Seed         uint64         `json:"seed"`
	Hosts        int            `json:"hosts"`
	Seconds      float64        `json:"seconds"`
	Actions      map[string]int `json:"actions"`
	Acked        int            `json:"acknowledged_messages"`
	Delivered    int            `json:"delivered_messages"`
	Violations   []string       `json:"violations"`
	SafetyEvents int            `json:"safety_events"`
	HealToMoveMs []float64      `json:"heal_to_agreement_moving_ms"` // per heal: until every host's agreement pointer moved
	CatchUp      []float64      `json:"catch_up_entries_per_sec"`    // per restart
	HaltedMs     []float64      `json:"halted_ms"`                   // per observed view change hold
	// FinalCatchUpMs: per host, from the final heal until it reached the
	// furthest agreement pointer any host had then.
	FinalCatchUpMs map[string]float64 `json:"final_catch_up_ms"`
	// Holds are the stalls of the rack's agreement pointer longer than
	// ChaosOptions.HoldMin, each with its cause.
	Holds []Hold `json:"holds"`
	Epoch uint32 `json:"final_epoch"`
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
	var b strings.Builder
	fmt.Fprintf(&b, "chaos seed %d, %d hosts, %.0fs, actions %v\n%d acknowledged, %d delivered at every host: %s; %d SAFETY events\n"+
		"heal -> agreement moving at every host (ms): %s\ncatch-up of a restarted host (entries/s): %s\n"+
		"view-change hold of the agreement pointer (ms): %s\nfinal heal -> every host caught up (ms): %s\nfinal epoch %d",
		r.Seed, r.Hosts, r.Seconds, r.Actions, r.Acked, r.Delivered, verdict, r.SafetyEvents,
		q(r.HealToMoveMs), q(r.CatchUp), q(r.HaltedMs), q(fin), r.Epoch)
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
	return b.String()
}

// nemesis is the state of one chaos run: the faults in force, the hosts
// down, and what happened, with times.
type nemesis struct {
	c     *Cluster
	rng   *rand.Rand
	start time.Time
	say   func(string, ...any)

	mu      sync.Mutex
	dead    map[int]bool
	restart map[int]time.Time // dead hosts and when they come back
	join    map[int]bool      // ... with --join (their disk was wiped)
	spans   []faultSpan
	samples []sample
	safety  map[int]uint64 // SAFETY events counted by each host's daemons that were stopped
	rep     *ChaosReport
}

// Chaos runs a seeded nemesis on the rack while clients publish from every
// host: two-way partitions, the seed's minority/majority split, one-way
// cuts on the bridge and on a host's own interface (ingress or egress),
// heals, kill -9 of daemons (also 100-350 ms after a heal, during the
// reconciliation it starts) restarted from their durable logs after 1-4 s,
// optionally wiped disks (Wipes), and frame loss at one host. At the end it
// heals everything, restarts the dead, and checks: every host reaches the
// furthest agreement pointer within CatchUp, a last round is agreed, every
// host's agreed stream is the same and holds every acknowledged message
// once at its position, and no daemon reported a SAFETY event. It explains
// every stall of the rack's agreement pointer longer than HoldMin.
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
	m := &nemesis{c: c, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0xc4a05)), start: time.Now(), rep: &rep,
		dead: map[int]bool{}, restart: map[int]time.Time{}, join: map[int]bool{}, safety: map[int]uint64{}}
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
				c.Publish(lctx, Load{Hosts: []int{h}, PerHost: 200, Size: 64, Window: 16, Round: round, OnAck: onAck, Tolerant: true})
				if lctx.Err() == nil && m.isDead(h) {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var watchWG sync.WaitGroup
	watchWG.Add(1)
	go func() { defer watchWG.Done(); m.watch(wctx) }()
	stop := func() { stopLoad(); stopWatch(); loadWG.Wait(); watchWG.Wait() }

	faulty := false
	wipes := o.Wipes
	for time.Since(m.start) < o.Duration && ctx.Err() == nil {
		if err := m.sleep(ctx, time.Duration(float64(o.Every)*(0.5+m.rng.Float64()))); err != nil {
			stop()
			return rep, err
		}
		actions := []string{"partition", "seed-split", "one-way", "host-cut", "heal", "kill", "heal-kill", "loss"}
		if wipes > 0 {
			actions = append(actions, "wipe")
		}
		action := actions[m.rng.IntN(len(actions))]
		var err error
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
			m.act("partition %s / %s", m.names(side[0]), m.names(side[1]))
			faulty = true
		case "seed-split":
			perm := m.rng.Perm(n)
			k := n / 2
			err = c.Rack.Partition(ctx, [][]int{perm[:k], perm[k:]})
			m.act("minority split %s / %s", m.names(perm[:k]), m.names(perm[k:]))
			faulty = true
		case "one-way":
			perm := m.rng.Perm(n)
			k := 1 + m.rng.IntN(n-1)
			err = c.Rack.PartitionOneWay(ctx, perm[:k], perm[k:])
			m.act("one-way cut on the bridge %s -> %s", m.names(perm[:k]), m.names(perm[k:]))
			faulty = true
		case "host-cut":
			h := m.rng.IntN(n)
			dir := []string{lab.CutIngress, lab.CutEgress}[m.rng.IntN(2)]
			err = c.Rack.CutHost(ctx, h, dir)
			m.act("one-way cut on %s's own interface: %s dropped", c.Rack.Hosts[h].Name, dir)
			faulty = true
		case "loss":
			h := m.rng.IntN(n)
			f := 0.05 + 0.15*m.rng.Float64()
			err = c.Rack.DropRate(ctx, h, f)
			m.act("loss %.0f%% at %s", 100*f, c.Rack.Hosts[h].Name)
			faulty = true
		case "heal", "heal-kill":
			if !faulty {
				continue
			}
			err = c.Rack.Heal(ctx)
			faulty = false
			if err != nil {
				break
			}
			if action == "heal-kill" {
				// A kill during the reconciliation the heal starts.
				m.act("heal")
				if err = m.sleep(ctx, time.Duration(100+m.rng.IntN(250))*time.Millisecond); err == nil {
					err = m.kill(ctx, -1, false)
				}
				break
			}
			m.act("heal")
			if ms, ok := c.untilAllMove(ctx, m.deadSet(), 10*time.Second); ok {
				rep.HealToMoveMs = append(rep.HealToMoveMs, ms)
			} else {
				rep.Violations = append(rep.Violations, fmt.Sprintf("agreement did not move at every live host within 10s of a heal (t=%.1fs)", time.Since(m.start).Seconds()))
			}
		case "kill":
			err = m.kill(ctx, -1, false)
		case "wipe":
			if err = m.kill(ctx, -1, true); err == nil {
				wipes--
			}
		}
		rep.Actions[action]++
		if err != nil {
			stop()
			return rep, fmt.Errorf("chaos: %s: %w", action, err)
		}
	}
	// The final heal: no fault, every host up.
	if err := c.Rack.Heal(ctx); err != nil {
		stop()
		return rep, err
	}
	for _, h := range m.deadList() {
		if err := m.bringBack(ctx, h); err != nil {
			stop()
			return rep, err
		}
	}
	m.act("final heal")
	healed := time.Now()
	stopLoad()
	loadWG.Wait()
	m.finalCatchUp(ctx, healed, o.CatchUp)
	stopWatch()
	watchWG.Wait()
	watched := time.Since(m.start)
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
	m.mu.Unlock()
	return rep, nil
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

func (m *nemesis) deadSet() map[int]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := make(map[int]bool, len(m.dead))
	for h := range m.dead {
		d[h] = true
	}
	return d
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
// log if wipe, and schedules its restart 1-4 s later.
func (m *nemesis) kill(ctx context.Context, h int, wipe bool) error {
	n := len(m.c.Rack.Hosts)
	if h < 0 {
		h = m.rng.IntN(n)
	}
	if m.isDead(h) || len(m.deadList()) >= max(n/2-1, 1) {
		return nil
	}
	st, err := m.c.Status(ctx, h)
	if err == nil {
		m.mu.Lock()
		m.safety[h] += st.Counters["safety_events"]
		m.mu.Unlock()
	}
	if err := m.c.Kill(h); err != nil {
		return err
	}
	back := time.Duration(1000+m.rng.IntN(3000)) * time.Millisecond
	m.mu.Lock()
	m.dead[h], m.restart[h], m.join[h] = true, time.Now().Add(back), wipe
	m.mu.Unlock()
	what := "kill -9 %s, restart from its log after %v"
	if wipe {
		cfg, err := m.c.Config(h)
		if err != nil {
			return err
		}
		if cfg.DataDir == "" {
			return fmt.Errorf("wipe %s: it has no data_dir", m.c.Rack.Hosts[h].Name)
		}
		if err := os.RemoveAll(cfg.DataDir); err != nil {
			return err
		}
		what = "kill -9 %s, wipe its durable log, restart with --join after %v"
	}
	m.act(what, m.c.Rack.Hosts[h].Name, back.Round(time.Millisecond))
	return nil
}

// bringBack restarts dead host h and measures how fast it catches up.
func (m *nemesis) bringBack(ctx context.Context, h int) error {
	m.mu.Lock()
	join := m.join[h]
	m.mu.Unlock()
	var rate float64
	var err error
	if join {
		err = m.c.StartHost(ctx, h, true)
	} else {
		rate, err = m.c.restartAndCatchUp(ctx, h)
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.dead, h)
	delete(m.restart, h)
	delete(m.join, h)
	if rate > 0 {
		m.rep.CatchUp = append(m.rep.CatchUp, rate)
	}
	m.mu.Unlock()
	m.act("%s restarted (join %v, catch-up %.0f entries/s)", m.c.Rack.Hosts[h].Name, join, rate)
	return nil
}

// sleep waits d, restarting the hosts whose time has come meanwhile.
func (m *nemesis) sleep(ctx context.Context, d time.Duration) error {
	until := time.Now().Add(d)
	for {
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
			if err := m.bringBack(ctx, h); err != nil {
				// A daemon that does not come back is a finding, not the
				// end of the run: the final restart tries again.
				m.mu.Lock()
				m.rep.Violations = append(m.rep.Violations, fmt.Sprintf("t=%.1fs restart of %s failed: %v", time.Since(m.start).Seconds(), m.c.Rack.Hosts[h].Name, err))
				m.restart[h] = time.Now().Add(time.Hour)
				m.mu.Unlock()
			}
		}
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
// figures and the explanation of stalls.
func (m *nemesis) watch(ctx context.Context) {
	n := len(m.c.Rack.Hosts)
	haltedSince := make([]time.Time, n)
	for ctx.Err() == nil {
		for i := 0; i < n; i++ {
			if m.isDead(i) {
				continue
			}
			st, err := m.c.Status(ctx, i)
			if err != nil {
				continue
			}
			m.mu.Lock()
			m.samples = append(m.samples, sample{at: time.Since(m.start), host: i, agreed: st.Agreed, epoch: st.Epoch,
				halted: st.Halted, rec: st.Recovery})
			switch {
			case st.Halted && haltedSince[i].IsZero():
				haltedSince[i] = time.Now()
			case !st.Halted && !haltedSince[i].IsZero():
				m.rep.HaltedMs = append(m.rep.HaltedMs, float64(time.Since(haltedSince[i]).Microseconds())/1000)
				haltedSince[i] = time.Time{}
			}
			m.mu.Unlock()
		}
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

// untilAllMove waits until the agreement pointer of every live host has
// moved; it returns the time in ms.
func (c *Cluster) untilAllMove(ctx context.Context, dead map[int]bool, limit time.Duration) (float64, bool) {
	t0 := time.Now()
	base := map[int]uint64{}
	for i := range c.Rack.Hosts {
		if st, err := c.Status(ctx, i); err == nil && !dead[i] {
			base[i] = st.Agreed
		}
	}
	for time.Since(t0) < limit {
		moved := 0
		for i, b := range base {
			if st, err := c.Status(ctx, i); err == nil && st.Agreed > b {
				moved++
			}
		}
		if moved == len(base) {
			return float64(time.Since(t0).Microseconds()) / 1000, true
		}
		time.Sleep(time.Millisecond)
	}
	return 0, false
}

// restartAndCatchUp restarts host h from its log and measures how fast it
// catches up with host (h+1)%n's agreement pointer.
func (c *Cluster) restartAndCatchUp(ctx context.Context, h int) (float64, error) {
	if err := c.StartHost(ctx, h, false); err != nil {
		return 0, err
	}
	t0 := time.Now()
	ref := (h + 1) % len(c.Rack.Hosts)
	st0, err := c.Status(ctx, h)
	if err != nil {
		return 0, err
	}
	target, err := c.Status(ctx, ref)
	if err != nil {
		return 0, nil
	}
	for time.Since(t0) < 10*time.Second {
		st, err := c.Status(ctx, h)
		if err == nil && st.Agreed >= target.Agreed {
			d := time.Since(t0).Seconds()
			if st.Agreed > st0.Agreed && d > 0 {
				return float64(st.Agreed-st0.Agreed) / d, nil
			}
			return 0, nil
		}
		time.Sleep(time.Millisecond)
	}
	return 0, nil
}
