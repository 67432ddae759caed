package cluster

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
)

// TestRackJoinCycles measures what a state transfer costs the rack, in
// pairs of windows close in time (opt-in: EXO_JOIN_CYCLES=N cycles; the
// log's size EXO_JOIN_LARGE_MB, default 256; transfer_rate EXO_JOIN_PACE,
// default 25MB; fetch_bytes, the size of an answer, EXO_JOIN_FETCH_KB): A..E load a log of 16 KiB messages, then, under a steady
// load of 64-byte messages at A..D, F (a spare: the token order does not
// change) is wiped and starts with --join N times. Each cycle reports
// A's agreed msgs/s over the 10 s before F starts and from its start until
// it follows the log; the ratios' spread says how far one join's ratio
// (TestRackJoinLarge) can be trusted on the machine.
func TestRackJoinCycles(t *testing.T) {
	if os.Getenv("EXO_JOIN_CYCLES") == "" {
		t.Skip("a long run (minutes of load): EXO_JOIN_CYCLES=3 runs it (docs/recovery.md)")
	}
	cycles := envInt(t, "EXO_JOIN_CYCLES", 3)
	target := int64(envInt(t, "EXO_JOIN_LARGE_MB", 256)) << 20
	pace := os.Getenv("EXO_JOIN_PACE")
	if pace == "" {
		pace = "25MB"
	}
	fetchKB := envInt(t, "EXO_JOIN_FETCH_KB", daemon.DefaultFetchBytes>>10)
	r := rack(t, 6)
	dir := t.TempDir()
	c := startWith(t, r, Hooks(joinRackConfig(dir, pace), func(cfg *daemon.Config) { cfg.FetchBytes = fetchKB << 10 }))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	const spare = 5
	wipe(t, c, spare)
	loadLog(ctx, t, c, []int{0, 1, 2, 3, 4}, 16384, target)
	stop := backgroundLoad(ctx, c, Load{Hosts: []int{0, 1, 2, 3}, PerHost: 500, Size: 64, Window: 8, Round: 100000})
	defer stop()
	delivered := func() uint64 {
		st, err := c.Status(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return st.Delivered
	}
	time.Sleep(time.Second)
	var ratios []float64
	for k := 1; k <= cycles; k++ {
		d0 := delivered()
		time.Sleep(10 * time.Second)
		d1 := delivered()
		before := float64(d1-d0) / 10
		a, _ := c.Status(ctx, 0)
		start := time.Now()
		if err := c.StartHost(ctx, spare, true); err != nil {
			t.Fatal(err)
		}
		var st daemon.Status
		for {
			var err error
			if st, err = c.Status(ctx, spare); err == nil && st.Agreed >= a.Agreed {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("F did not follow the log: %+v (err %v)", st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(start)
		during := float64(delivered()-d1) / took.Seconds()
		ratios = append(ratios, during/before)
		t.Logf("cycle %d: F followed A's %d entries after %v (%.0f MB fetched); A delivered %.0f msgs/s during it, %.2f of the %.0f in the 10 s before",
			k, a.Agreed, took.Round(time.Millisecond), float64(st.Counters["fetched_bytes"])/1e6, during, during/before, before)
		wipe(t, c, spare)
	}
	mean := 0.0
	for _, x := range ratios {
		mean += x
	}
	t.Logf("transfer_rate %s, fetch_bytes %d KiB", pace, fetchKB)
	t.Logf("%d cycles: ratio mean %.2f, least %.2f, most %.2f", len(ratios), mean/float64(len(ratios)), slices.Min(ratios), slices.Max(ratios))
}
