package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/exo-rack/exo/client"
)

// ChaosOptions configure a nemesis run.
type ChaosOptions struct {
	Duration time.Duration
	Seed     uint64
	// Every is the mean time between nemesis actions (default 700ms).
	Every time.Duration
	// Log receives one line per action (may be nil).
	Log func(string)
}

// ChaosReport is what a nemesis run found and measured.
type ChaosReport struct {
	Seed         uint64         `json:"seed"`
	Seconds      float64        `json:"seconds"`
	Actions      map[string]int `json:"actions"`
	Acked        int            `json:"acknowledged_messages"`
	Delivered    int            `json:"delivered_messages"`
	Violations   []string       `json:"violations"`
	HealToMoveMs []float64      `json:"heal_to_agreement_moving_ms"` // per heal: until every host's agreement pointer moved
	CatchUp      []float64      `json:"catch_up_entries_per_sec"`    // per restart
	HaltedMs     []float64      `json:"halted_ms"`                   // per observed view change hold
	Epoch        uint32         `json:"final_epoch"`
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
	return fmt.Sprintf("chaos seed %d, %.0fs, actions %v\n%d acknowledged, %d delivered at every host: %s\n"+
		"heal -> agreement moving at every host (ms): %s\ncatch-up of a restarted host (entries/s): %s\n"+
		"view-change hold of the agreement pointer (ms): %s\nfinal epoch %d",
		r.Seed, r.Seconds, r.Actions, r.Acked, r.Delivered, verdict, q(r.HealToMoveMs), q(r.CatchUp), q(r.HaltedMs), r.Epoch)
}

// Chaos runs a seeded nemesis on the rack while clients publish from every
// host: partitions (random two-way splits, the seed's {A,B}/{C,D,E}, one-way
// cuts), heals, kill -9 and restart of daemons (from their durable logs when
// the cluster has data_dir), and frame loss on a host. At the end it heals
// everything, restarts the dead, and checks every host's agreed stream and
// every client's acknowledgements: divergent streams, lost acknowledged
// messages, duplicates.
func (c *Cluster) Chaos(ctx context.Context, o ChaosOptions) (ChaosReport, error) {
	if o.Every == 0 {
		o.Every = 700 * time.Millisecond
	}
	say := func(format string, args ...any) {
		if o.Log != nil {
			o.Log(fmt.Sprintf(format, args...))
		}
	}
	rep := ChaosReport{Seed: o.Seed, Actions: map[string]int{}}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0xc4a05))
	n := len(c.Rack.Hosts)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	var mu sync.Mutex
	acked := map[string]client.Position{}
	onAck := func(p []byte, pos client.Position) { mu.Lock(); acked[string(p)] = pos; mu.Unlock() }
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 1; lctx.Err() == nil; round++ {
			c.Publish(lctx, Load{Hosts: all, PerHost: 200, Size: 64, Window: 16, Round: round, OnAck: onAck, Tolerant: true})
		}
	}()
	// A watcher samples every host's status: view-change holds.
	haltedSince := make([]time.Time, n)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for wctx.Err() == nil {
			for i := 0; i < n; i++ {
				st, err := c.Status(wctx, i)
				if err != nil {
					continue
				}
				mu.Lock()
				switch {
				case st.Halted && haltedSince[i].IsZero():
					haltedSince[i] = time.Now()
				case !st.Halted && !haltedSince[i].IsZero():
					rep.HaltedMs = append(rep.HaltedMs, float64(time.Since(haltedSince[i]).Microseconds())/1000)
					haltedSince[i] = time.Time{}
				}
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	start := time.Now()
	dead := map[int]bool{}
	faulty := false
	for time.Since(start) < o.Duration && ctx.Err() == nil {
		time.Sleep(time.Duration(float64(o.Every) * (0.5 + rng.Float64())))
		action := []string{"partition", "seed-split", "one-way", "heal", "kill", "loss"}[rng.IntN(6)]
		var err error
		switch action {
		case "partition":
			side := [][]int{{}, {}}
			for i := 0; i < n; i++ {
				k := rng.IntN(2)
				side[k] = append(side[k], i)
			}
			if len(side[0]) == 0 || len(side[1]) == 0 {
				continue
			}
			err = c.Rack.Partition(ctx, side)
			say("partition %v / %v", side[0], side[1])
			faulty = true
		case "seed-split":
			perm := rng.Perm(n)
			k := n / 2
			err = c.Rack.Partition(ctx, [][]int{perm[:k], perm[k:]})
			say("minority split %v / %v", perm[:k], perm[k:])
			faulty = true
		case "one-way":
			perm := rng.Perm(n)
			k := 1 + rng.IntN(n-1)
			err = c.Rack.PartitionOneWay(ctx, perm[:k], perm[k:])
			say("one-way cut %v -> %v", perm[:k], perm[k:])
			faulty = true
		case "loss":
			h := rng.IntN(n)
			f := 0.05 + 0.15*rng.Float64()
			err = c.Rack.DropRate(ctx, h, f)
			say("loss %.0f%% at %s", 100*f, c.Rack.Hosts[h].Name)
			faulty = true
		case "heal":
			if !faulty {
				continue
			}
			err = c.Rack.Heal(ctx)
			faulty = false
			say("heal")
			if err == nil {
				if ms, ok := c.untilAllMove(ctx, dead, 10*time.Second); ok {
					rep.HealToMoveMs = append(rep.HealToMoveMs, ms)
				} else {
					rep.Violations = append(rep.Violations, fmt.Sprintf("agreement did not move at every live host within 10s of a heal (t=%.1fs)", time.Since(start).Seconds()))
				}
			}
		case "kill":
			h := rng.IntN(n)
			if dead[h] {
				continue
			}
			if len(dead) > 0 && rng.IntN(2) == 0 {
				continue
			}
			err = c.Kill(h)
			dead[h] = true
			say("kill -9 %s", c.Rack.Hosts[h].Name)
			time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
			if err == nil {
				rate, rerr := c.restartAndCatchUp(ctx, h)
				err = rerr
				delete(dead, h)
				if rate > 0 {
					rep.CatchUp = append(rep.CatchUp, rate)
				}
				say("restart %s from its log (catch-up %.0f entries/s)", c.Rack.Hosts[h].Name, rate)
			}
		}
		rep.Actions[action]++
		if err != nil {
			stopLoad()
			stopWatch()
			wg.Wait()
			return rep, fmt.Errorf("chaos: %s: %w", action, err)
		}
	}
	if err := c.Rack.Heal(ctx); err != nil {
		stopLoad()
		stopWatch()
		wg.Wait()
		return rep, err
	}
	for h := range dead {
		if err := c.StartHost(ctx, h, false); err != nil {
			stopLoad()
			stopWatch()
			wg.Wait()
			return rep, err
		}
	}
	stopLoad()
	stopWatch()
	wg.Wait()
	// A last round with everything healed: it must be agreed within a
	// bounded time (liveness with a connected majority).
	fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
	if _, err := c.Publish(fctx, Load{Hosts: all, PerHost: 50, Size: 64, Round: 1 << 20, OnAck: onAck}); err != nil {
		rep.Violations = append(rep.Violations, fmt.Sprintf("liveness: the last round after the final heal was not agreed within 60s: %v", err))
	}
	fcancel()
	rep.Seconds = time.Since(start).Seconds()
	rep.Acked = len(acked)
	delivered, violations := c.CheckAcked(ctx, acked)
	rep.Delivered = delivered
	rep.Violations = append(rep.Violations, violations...)
	if st, err := c.Status(ctx, 0); err == nil {
		rep.Epoch = st.Epoch
	}
	return rep, nil
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
