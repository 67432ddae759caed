package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
//
// EXO_JOIN_NICE=N gives every thread of F's daemon the nice value N in
// every second cycle (the others as they are): on this machine the
// joiner's daemon shares the rack's CPUs, where a real joiner has its own,
// and the pairs of cycles say how much of the cost is the joiner's own
// CPU rather than the members' serving. EXO_JOIN_DROP_CACHES=1 drops
// the machine's page cache (sync; /proc/sys/vm/drop_caches) before the
// 10 s before every second join, so that the members read the retained
// log from the disk the rack fsyncs to, as members of a rack whose log
// outgrew the page cache do. (Set both, and both fall on the same
// cycles.) EXO_JOIN_ARCHIVE_IO sets the members' archive_io (joinRackConfig).
//
// Each cycle also reports the members' churn in both windows: view
// changes, takeovers and false takeovers a second, and with
// EXO_JOIN_METRICS=1 (every daemon serves its metrics in its namespace)
// their token holds over 4.1 ms and durable-log commits over 6.4 ms a
// second. Knobs for finding where the churn comes from (joinRackConfig):
// EXO_JOIN_PROCS=N sets every daemon's procs (GOMAXPROCS; -1 every CPU),
// EXO_JOIN_SPARE_DIR=dir puts F's durable log there (a tmpfs: F's writes
// off the rack's disk), EXO_JOIN_KEEP=N every daemon's keep_entries (N
// above the log's entries: the members answer from memory, no disk
// read); EXO_JOIN_LOGS=dir keeps the daemons' logs;
// EXO_JOIN_BULK=1 makes every second cycle no join but its bytes over TCP
// from the members to F's namespace (bulkLike), against the same 10 s
// (EXO_JOIN_BULK_FRESH=1: each chunk in new memory at both ends;
// EXO_JOIN_FETCHER=1: fetches as F's daemon makes them, from a process
// that is not a daemon, TestFetcherProcess). EXO_JOIN_TRACE=dir writes
// each daemon's execution trace and CPU profile (enable_pprof) of the 4 s
// from 1 s into every cycle's transfer and into the 10 s before it to
// dir/cycle<k>[-before]-<host>.trace and .cpu.pprof (go tool trace,
// go tool pprof).
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
	_, niced := os.LookupEnv("EXO_JOIN_NICE")
	nice := 0
	if niced {
		nice = envInt(t, "EXO_JOIN_NICE", 0)
	}
	r := rack(t, 6)
	dir := t.TempDir()
	c := startWith(t, r, Hooks(joinRackConfig(t, dir, pace), func(cfg *daemon.Config) { cfg.FetchBytes = fetchKB << 10 }))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	const spare = 5
	members := []int{0, 1, 2, 3, 4}
	keepLogs(t, c, 6)
	wipe(t, c, spare)
	loadLog(ctx, t, c, members, 16384, target)
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
	drop := os.Getenv("EXO_JOIN_DROP_CACHES") == "1"
	// EXO_JOIN_BULK=1: every second cycle sends a join's bytes over TCP
	// instead of joining (bulkLike), for as long as the join before took.
	bulk := os.Getenv("EXO_JOIN_BULK") == "1"
	// EXO_JOIN_FETCHER=1: those cycles fetch as a joiner instead, without
	// the joiner's daemon (TestFetcherProcess).
	fetcher := os.Getenv("EXO_JOIN_FETCHER") == "1"
	bulk = bulk || fetcher
	byBulk := map[bool][]float64{}
	lastTook := 15 * time.Second
	// EXO_JOIN_YIELD="off,80%": F's transfer_yield in turn, one value a
	// cycle (unset: the config's default in every cycle).
	var yields []string
	if y := os.Getenv("EXO_JOIN_YIELD"); y != "" {
		yields = strings.Split(y, ",")
	}
	byYield := map[string][]float64{}
	var ratios []float64
	byNice := map[bool][]float64{}
	byDrop := map[bool][]float64{}
	for k := 1; k <= cycles; k++ {
		dropped := drop && k%2 == 0
		if dropped {
			if err := dropCaches(); err != nil {
				t.Fatal(err)
			}
		}
		d0, c0 := delivered(), churnOf(ctx, t, c, members...)
		tracedBefore := traceRack(ctx, t, c, fmt.Sprintf("cycle%d-before", k), 5)
		time.Sleep(10 * time.Second)
		tracedBefore()
		d1, c1 := delivered(), churnOf(ctx, t, c, members...)
		before := float64(d1-d0) / 10
		a, _ := c.Status(ctx, 0)
		read0 := diskReads(t, c, 0, 1, 2, 3, 4)
		yield := ""
		if yields != nil {
			yield = yields[(k-1)%len(yields)]
			setConfig(t, c, spare, func(cfg *daemon.Config) { cfg.TransferYieldText = yield })
		}
		traced := traceRack(ctx, t, c, fmt.Sprintf("cycle%d", k), 6)
		if bulk && k%2 == 0 {
			// Not a join: the bytes of one, from the members in turns,
			// for as long as the last join took.
			start := time.Now()
			var sent int64
			var err error
			if fetcher {
				sent, err = fetchAsJoiner(ctx, c, spare, 25e6, lastTook)
			} else {
				sent, err = bulkLike(ctx, c.Rack, members, spare, 25e6, fetchKB<<10, 64<<20, lastTook, os.Getenv("EXO_JOIN_BULK_FRESH") == "1")
			}
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			during := float64(delivered()-d1) / took.Seconds()
			c2 := churnOf(ctx, t, c, members...)
			byBulk[true] = append(byBulk[true], during/before)
			traced()
			t.Logf("cycle %d: no join, %.0f MB over TCP from the members to F's namespace (as fetches: %v) in %v; the members' churn in the 10 s before: %s; during: %s; A delivered %.0f msgs/s during it, %.2f of the %.0f in the 10 s before",
				k, float64(sent)/1e6, fetcher, took.Round(time.Millisecond), c0.rates(c1, 10*time.Second), c1.rates(c2, took), during, during/before, before)
			continue
		}
		start := time.Now()
		if err := c.StartHost(ctx, spare, true); err != nil {
			t.Fatal(err)
		}
		lowered := niced && k%2 == 0
		if lowered {
			if err := reniceThreads(c.Proc(spare), nice); err != nil {
				t.Fatal(err)
			}
		}
		var st daemon.Status
		var paces paceTrail
		for {
			var err error
			if st, err = c.Status(ctx, spare); err == nil && st.Agreed >= a.Agreed {
				break
			}
			if err == nil {
				paces.note(st)
			}
			if ctx.Err() != nil {
				t.Fatalf("F did not follow the log: %+v (err %v)", st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(start)
		lastTook = took
		during := float64(delivered()-d1) / took.Seconds()
		byBulk[false] = append(byBulk[false], during/before)
		c2 := churnOf(ctx, t, c, members...)
		traced()
		t.Logf("cycle %d: the members' churn in the 10 s before: %s; during: %s", k, c0.rates(c1, 10*time.Second), c1.rates(c2, took))
		read := diskReads(t, c, 0, 1, 2, 3, 4) - read0
		ratios = append(ratios, during/before)
		byNice[lowered] = append(byNice[lowered], during/before)
		byDrop[dropped] = append(byDrop[dropped], during/before)
		byYield[yield] = append(byYield[yield], during/before)
		if yields != nil {
			t.Logf("cycle %d: F's transfer_yield %q; its pace in MB/s / the rack's growth while it fetched, in %% of its growth in the pauses: %s", k, yield, paces)
		}
		if lowered {
			t.Logf("cycle %d: F's daemon at nice %d", k, nice)
		}
		if dropped {
			t.Logf("cycle %d: the page cache dropped before it", k)
		}
		t.Logf("cycle %d: F followed A's %d entries after %v (%d entries, %.0f MB fetched; the members read %.0f MB from the disk); A delivered %.0f msgs/s during it, %.2f of the %.0f in the 10 s before",
			k, a.Agreed, took.Round(time.Millisecond), st.Counters["fetched_entries"], float64(st.Counters["fetched_bytes"])/1e6, float64(read)/1e6, during, during/before, before)
		wipe(t, c, spare)
	}
	mean := 0.0
	for _, x := range ratios {
		mean += x
	}
	t.Logf("transfer_rate %s, fetch_bytes %d KiB, archive_io %q", pace, fetchKB, os.Getenv("EXO_JOIN_ARCHIVE_IO"))
	t.Logf("%d cycles: ratio mean %.2f, least %.2f, most %.2f", len(ratios), mean/float64(len(ratios)), slices.Min(ratios), slices.Max(ratios))
	if niced {
		t.Logf("F at nice 0: ratios %.2f; at nice %d: %.2f", byNice[false], nice, byNice[true])
	}
	if drop {
		t.Logf("page cache kept: ratios %.2f; dropped: %.2f", byDrop[false], byDrop[true])
	}
	if bulk {
		alone := "a join's bytes over TCP alone"
		if fetcher {
			alone = "a joiner's fetches without its daemon"
		}
		t.Logf("joins: ratios %.2f; %s: %.2f", byBulk[false], alone, byBulk[true])
	}
	for _, y := range yields {
		if rs, ok := byYield[y]; ok {
			sum := 0.0
			for _, x := range rs {
				sum += x
			}
			t.Logf("transfer_yield %q: ratios %.2f (mean %.2f)", y, rs, sum/float64(len(rs)))
			delete(byYield, y)
		}
	}
}

// setConfig rewrites host i's daemon config (the next start reads it).
func setConfig(t *testing.T, c *Cluster, i int, edit func(*daemon.Config)) {
	t.Helper()
	cfg, err := c.Config(i)
	if err != nil {
		t.Fatal(err)
	}
	edit(&cfg)
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.configPath(i), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// diskReads is the bytes the daemons of hosts have had read from the disk
// for them (/proc/<pid>/io's read_bytes, summed; page-cache hits do not
// count).
func diskReads(t *testing.T, c *Cluster, hosts ...int) int64 {
	t.Helper()
	var sum int64
	for _, h := range hosts {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", c.Proc(h)))
		if err != nil {
			t.Fatalf("the disk reads of host %d: %v", h, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "read_bytes: "); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("the disk reads of host %d: %q", h, line)
				}
				sum += n
			}
		}
	}
	return sum
}

// dropCaches writes the dirty pages back and drops the machine's clean
// page cache.
func dropCaches() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1\n"), 0); err != nil {
		return fmt.Errorf("drop the page cache: %w", err)
	}
	return nil
}

// reniceThreads gives every thread of process pid the nice value n
// (setpriority(2) with PRIO_PROCESS applies to one thread on Linux), twice
// over, so that a thread started while the first pass ran is not missed.
func reniceThreads(pid, n int) error {
	for range 2 {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return fmt.Errorf("renice %d: %w", pid, err)
		}
		for _, e := range tasks {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, syscall.ESRCH) { // (a thread that ended meanwhile)
				return fmt.Errorf("renice thread %d of %d: %w", tid, pid, err)
			}
		}
	}
	return nil
}

// fetchAsJoiner runs TestFetcherProcess in host i's namespace with its
// config, at rate bytes a second for d, and returns the bytes it fetched.
func fetchAsJoiner(ctx context.Context, c *Cluster, i int, rate float64, d time.Duration) (int64, error) {
	cmd := c.Rack.CommandContext(ctx, i, os.Args[0], "-test.run=^TestFetcherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "EXO_FETCHER_CONFIG="+c.configPath(i), fmt.Sprintf("EXO_FETCHER_RATE=%d", int64(rate)), "EXO_FETCHER_FOR="+d.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("the fetcher: %w: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		var answers, got int64
		if _, err := fmt.Sscanf(line, "fetcher: %d answers, %d bytes", &answers, &got); err == nil {
			return got, nil
		}
	}
	return 0, fmt.Errorf("the fetcher said nothing of what it fetched: %s", out)
}

// traceRack takes, with EXO_JOIN_TRACE=dir, the execution trace and a
// CPU profile of the daemons of hosts 0..n-1 (those serving: enable_pprof)
// over the 4 s from 1 s on, into dir/<name>-<host>.trace (the CPU
// samples in it too: go tool trace) and .cpu.pprof; it returns a wait for
// them (a no-op without EXO_JOIN_TRACE). A host whose daemon does not
// answer (F's, not yet started in a cycle without a join) is logged and
// skipped.
func traceRack(ctx context.Context, t *testing.T, c *Cluster, name string, n int) func() {
	dir := os.Getenv("EXO_JOIN_TRACE")
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for h := range n {
		for _, what := range []struct{ path, ext string }{{"trace", "trace"}, {"profile", "cpu.pprof"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
					return
				}
				host := c.Rack.Hosts[h].Name
				out := filepath.Join(dir, fmt.Sprintf("%s-%s.%s", name, host, what.ext))
				if b, err := c.Rack.Exec(ctx, h, "curl", "-sSf", "-o", out, "http://127.0.0.1:9477/debug/pprof/"+what.path+"?seconds=4"); err != nil {
					t.Logf("%s: no %s of %s: %v: %s", name, what.path, host, err, b)
				}
			}()
		}
	}
	return wg.Wait
}
