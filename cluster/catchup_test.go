package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

// TestRackIsolatedHostCatchesUp is issue 12's four-step reproduction on a
// 7-host lab rack under a steady publish load: at 2 s G is cut off alone,
// at 4 s the rest splits as well (A,B / C,D,E,F / G), at 7 s A..F join
// again (G still alone), at 10 s the rack heals. G comes back far behind,
// in an older epoch, and catches up over OOB in batches of 1,024 entries.
// Before the fix it adopted the later epoch's first batch as if it were
// that epoch's whole log and never caught up (3 runs out of 3); now it
// must reach the others after the heal (well under a second as a rule;
// 30 s at most on a starved machine), with no SAFETY event (Stop
// checks the logs) and every acknowledged message at every host.
// EXO_CLUSTER_BIN=<an exo built at 58f3119> shows the old failure.
func TestRackIsolatedHostCatchesUp(t *testing.T) {
	r := rack(t, 7)
	// CheckAcked reads every stream from seq 0: the whole run stays in
	// memory (a run of ~700,000 messages outgrew the default history).
	c := startWith(t, r, func(cfg *daemon.Config) { cfg.KeepEntries = 1 << 22 })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	acked := map[string]client.Position{}
	onAck := func(p []byte, pos client.Position) { mu.Lock(); acked[string(p)] = pos; mu.Unlock() }
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, h := range []int{0, 2, 4, 6} {
		// One load per host: a round waits for all its hosts, and G's
		// publishes wait while it is cut off.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 1; lctx.Err() == nil; round++ {
				c.Publish(lctx, Load{Hosts: []int{h}, PerHost: 500, Size: 64, Window: 32, Round: round, OnAck: onAck, Tolerant: true})
			}
		}()
	}
	const G = 6
	t0 := time.Now()
	step := func(at time.Duration, what string, groups [][]int) {
		time.Sleep(time.Until(t0.Add(at)))
		if err := r.Partition(ctx, groups); err != nil {
			t.Fatal(err)
		}
		t.Logf("t=%.1fs %s", time.Since(t0).Seconds(), what)
	}
	step(2*time.Second, "G cut off alone", [][]int{{G}})
	step(4*time.Second, "A,B / C,D,E,F / G", [][]int{{0, 1}, {2, 3, 4, 5}, {G}})
	step(7*time.Second, "A,B,C,D,E,F / G", [][]int{{0, 1, 2, 3, 4, 5}, {G}})
	time.Sleep(time.Until(t0.Add(10 * time.Second)))
	if err := r.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	stopLoad()
	wg.Wait()
	// The target: the furthest agreement pointer any host had at the heal.
	var target uint64
	for i := 0; i < 6; i++ {
		if st, err := c.Status(ctx, i); err == nil {
			target = max(target, st.Agreed)
		}
	}
	g0, _ := c.Status(ctx, G)
	t.Logf("t=%.1fs heal: the rack at agreement pointer %d, G at %d (epoch %d)", time.Since(t0).Seconds(), target, g0.Agreed, g0.Epoch)
	for {
		st, err := c.Status(ctx, G)
		if err == nil && st.Agreed >= target {
			t.Logf("G caught up %v after the heal: agreement pointer %d, epoch %d", time.Since(healed).Round(time.Millisecond), st.Agreed, st.Epoch)
			break
		}
		// Usually well under a second (the log line above says); a
		// starved CI machine once took longer than 5 s (G leading view
		// changes of its own while it fetched: issue 16). What this test
		// tells apart is a host that catches up from one that never does.
		if time.Since(healed) > 30*time.Second {
			t.Fatalf("30s after the heal G stands at %d (epoch %d, halted %v, recovery %+v); the rack was at %d",
				st.Agreed, st.Epoch, st.Halted, st.Recovery, target)
		}
		time.Sleep(5 * time.Millisecond)
	}
	delivered, violations := c.CheckAcked(ctx, acked)
	if len(violations) > 0 {
		t.Fatalf("violations: %v", violations)
	}
	t.Logf("%d acknowledged, %d delivered, identical at all 7 hosts", len(acked), delivered)
}
