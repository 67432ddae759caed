//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/lab"
)

// TestRackMemoryBounded: a 3-host rack with keep_entries 1024 under
// sustained load, in rounds; each daemon's resident memory after the last
// round is at most 1.5 times what it was after the second: the log is
// compacted and the delivered-message history is bounded, so memory stops
// growing. Logs the series of RSS, Go heap and log figures per round.
func TestRackMemoryBounded(t *testing.T) {
	r := rack(t, 3)
	const keep = 1024
	const metricsAddr = "127.0.0.1:9477" // each host has its own loopback
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startWith(t, r, func(cfg *daemon.Config) {
		cfg.KeepEntries = keep
		cfg.MetricsAddr = metricsAddr
	})
	all := []int{0, 1, 2}
	const rounds, perHost, size = 5, 20000, 64

	type sample struct {
		rss, heapInuse, liveGoal  uint64 // liveGoal: next GC target / 2, ~ the live heap at the last GC
		agreed, logLen, delivered uint64
	}
	series := make([][]sample, len(all)) // by host, by round
	take := func() {
		t.Helper()
		for _, h := range all {
			u, err := c.Usage(h)
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.Status(ctx, h)
			if err != nil {
				t.Fatal(err)
			}
			m, err := scrapeMetrics(r, h, metricsAddr)
			if err != nil {
				t.Fatalf("metrics of %s: %v", r.Hosts[h].Name, err)
			}
			series[h] = append(series[h], sample{rss: u.RSSBytes, heapInuse: uint64(m["go_memstats_heap_inuse_bytes"]),
				liveGoal: uint64(m["go_memstats_next_gc_bytes"]) / 2,
				agreed:   st.Agreed, logLen: st.Agreed - st.LogBase, delivered: st.Delivered})
		}
	}
	take() // idle, before any load
	var rates []string
	for rd := 0; rd < rounds; rd++ {
		res, err := c.Publish(ctx, Load{Hosts: all, PerHost: perHost, Size: size, Round: rd})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed > 0 {
			t.Fatalf("round %d: %d publishes failed: %v", rd, res.Failed, res.Errors)
		}
		rates = append(rates, fmt.Sprintf("%.0f", res.Rate()))
		take()
	}
	mb := func(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
	for _, h := range all {
		var rss, heap, live, logs []string
		for _, s := range series[h] {
			rss = append(rss, mb(s.rss))
			heap = append(heap, mb(s.heapInuse))
			live = append(live, mb(s.liveGoal))
			logs = append(logs, fmt.Sprint(s.logLen))
		}
		last := series[h][len(series[h])-1]
		t.Logf("%s: RSS MiB %s | Go heap in use MiB %s | live heap at last GC ~MiB %s | log entries in memory %s | delivered %d, agreed %d",
			r.Hosts[h].Name, strings.Join(rss, " "), strings.Join(heap, " "), strings.Join(live, " "),
			strings.Join(logs, " "), last.delivered, last.agreed)
	}
	t.Logf("%d rounds of %d x %d messages of %d bytes; agreed msgs/s per round: %s", rounds, len(all), perHost, size, strings.Join(rates, " "))

	for _, h := range all {
		s := series[h]
		second, last := s[2], s[len(s)-1] // s[0] is the idle sample
		if last.logLen > 2*keep+4096 {
			t.Errorf("%s keeps %d log entries in memory with keep_entries %d: the log is not compacted", r.Hosts[h].Name, last.logLen, keep)
		}
		if float64(last.rss) > 1.5*float64(second.rss) {
			perMsg := (float64(last.liveGoal) - float64(second.liveGoal)) / float64(last.delivered-second.delivered)
			t.Errorf("%s: RSS grew from %s MiB after round 2 to %s MiB after round %d (> 1.5x); live heap ~%s -> ~%s MiB, "+
				"~%.0f bytes per message delivered meanwhile: something in the daemon keeps every delivered message",
				r.Hosts[h].Name, mb(second.rss), mb(last.rss), rounds, mb(second.liveGoal), mb(last.liveGoal), perMsg)
		}
	}
}

// startWith is start with a config hook (Options.Config).
func startWith(t *testing.T, r *lab.Rack, config func(*daemon.Config)) *Cluster {
	t.Helper()
	return startOpts(t, r, Options{Config: config})
}

// startOpts starts a cluster with opt (Dir defaults to a test directory,
// Bin to the binary the config's offload needs) and stops it at the
// test's end.
func startOpts(t *testing.T, r *lab.Rack, opt Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var probe daemon.Config
	if opt.Config != nil {
		opt.Config(&probe)
	}
	if opt.Bin == "" {
		opt.Bin = exoBin
		if probe.Offload == "fpga-sim" {
			opt.Bin = exoFPGABin
		}
	}
	if opt.Dir == "" {
		opt.Dir = t.TempDir()
	}
	c, err := Start(ctx, r, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if t.Failed() {
			for i := range r.Hosts {
				b, _ := os.ReadFile(c.LogPath(i))
				t.Logf("log of %s:\n%s", r.Hosts[i].Name, tail(b, 2000))
			}
		}
	})
	return c
}

// TestRackHugePages: with huge_pages on, each daemon of a 3-host rack
// reports its memory (exo status's memory) and, once a load has grown its
// heap, has most of its anonymous memory in huge pages: the passes advise
// and collapse the heap of a real daemon process, not only a test's own
// mapping (hugepage.TestAdviseCollapses). Skips where the kernel has no
// transparent huge pages.
func TestRackHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("no transparent huge pages on this kernel (%q, %v)", mode, err)
	}
	r := rack(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startWith(t, r, func(cfg *daemon.Config) { cfg.HugePages = "on" })
	all := []int{0, 1, 2}
	if res, err := c.Publish(ctx, Load{Hosts: all, PerHost: 20000, Size: 1024}); err != nil || res.Failed > 0 {
		t.Fatalf("load: %v (%+v)", err, res)
	}
	for _, h := range all {
		var st daemon.Status
		for {
			st, err = c.Status(ctx, h)
			if m := st.Memory; err == nil && m != nil && m.AnonBytes > 0 && m.HugeBytes >= m.AnonBytes/2 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: memory %+v: not half in huge pages (last status error %v)", r.Hosts[h].Name, st.Memory, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("%s: %.0f MiB anonymous, %.0f MiB in huge pages (%s)", r.Hosts[h].Name, float64(st.Memory.AnonBytes)/(1<<20), float64(st.Memory.HugeBytes)/(1<<20), st.Memory.Error)
	}
}

// TestRackMemProfile: daemons run with --memprofile write, when stopped
// with SIGTERM, a heap profile whose in-use figures are the running
// daemon's: after a load of 60 MB, the core's log (its arena's copies of
// the entries, sampled about every 512 KB allocated) is among them. A
// profile written after the daemon let go of its state held only what
// package initialisation allocated (1.5 MB, no arena), which this test
// tells apart.
func TestRackMemProfile(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool pprof reads the profiles: no go command on PATH")
	}
	r := rack(t, 3)
	dir := t.TempDir()
	c := startOpts(t, r, Options{Dir: dir, MemProfile: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Publish(ctx, Load{Hosts: []int{0, 1, 2}, PerHost: 20000, Size: 1024, Window: 64}); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range r.Hosts {
		path := c.MemProfilePath(i)
		out, err := exec.Command("go", "tool", "pprof", "-sample_index=inuse_space", "-top", "-nodecount=40", exoBin, path).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: go tool pprof: %v\n%s", path, err, out)
		}
		if !strings.Contains(string(out), "exo.(*arena).copy") {
			t.Errorf("%s: the in-use heap at the stop holds no entry of the core's log (exo.(*arena).copy):\n%s", path, out)
		}
	}
}
