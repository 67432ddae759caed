package cluster

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/wal"
)

// TestRackJoinLarge is issue 17's run (opt-in: EXO_JOIN_LARGE=1; the log's
// size EXO_JOIN_LARGE_MB, default 2048; message size EXO_JOIN_MSG, default
// 16384; transfer_rate EXO_JOIN_PACE, default none): six lab hosts, A..E
// the first roster and F a spare that has never run, durable logs kept
// whole on disk (retain) and 4,096 entries in memory. The rack is loaded until A's durable log holds the size;
// then under a steady load at A..D (a) E's disk is wiped and E restarts
// with --join, (b) F starts with --join, follows the log as a spare, and
// `exo roster add 5` makes it a member. Reported: each transfer's time and rate, the rack's agreed
// msgs/s at A over the 30 s before it and during it (and over 30 s after both), every daemon's peak RSS (and with
// EXO_JOIN_PROFILE=<dir>, every daemon's CPU profile there); checked: E's
// and F's durable logs hold the same entries as A's from seq 0 (a hash of
// every entry), and a new round is at its positions in all six streams.
func TestRackJoinLarge(t *testing.T) {
	if os.Getenv("EXO_JOIN_LARGE") != "1" {
		t.Skip("a long run (minutes of load, gigabytes of disk): EXO_JOIN_LARGE=1 runs it (docs/recovery.md)")
	}
	target := int64(envInt(t, "EXO_JOIN_LARGE_MB", 2048)) << 20
	msg := envInt(t, "EXO_JOIN_MSG", 16384)
	r := rack(t, 6)
	dir := t.TempDir()
	pace := os.Getenv("EXO_JOIN_PACE") // transfer_rate, e.g. 50MB
	// EXO_JOIN_PROFILE=<dir>: every daemon writes a CPU profile there
	// (<host>.cpu.pprof, with the daemons' configs and logs).
	profile := os.Getenv("EXO_JOIN_PROFILE")
	c := startOpts(t, r, Options{Dir: profile, CPUProfile: profile != "", Config: joinRackConfig(t, dir, pace)})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	const spare = 5
	wipe(t, c, spare) // a brand-new host: it never held the log
	members := []int{0, 1, 2, 3, 4}
	st0 := loadLog(ctx, t, c, members, msg, target)
	t.Logf("transfer_rate %q, archive_io %q, transfer_yield %q", pace, os.Getenv("EXO_JOIN_ARCHIVE_IO"), os.Getenv("EXO_JOIN_YIELD"))
	// The rack's rate: A..D publish 64-byte messages; A's delivered
	// msgs/s over 30 s before a join, then from its start to its end.
	stop := backgroundLoad(ctx, c, Load{Hosts: members[:4], PerHost: 500, Size: 64, Window: 8, Round: 100000})
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	rate := func(d time.Duration) float64 {
		a, _ := c.Status(ctx, 0)
		time.Sleep(d)
		b, _ := c.Status(ctx, 0)
		return float64(b.Delivered-a.Delivered) / d.Seconds()
	}
	// Where the machine's CPUs went over a window: /proc/stat, and the
	// members' (A..D) and a joiner's daemons, in CPUs.
	type cpuSnap struct {
		at      time.Time
		machine cpuTimes
		ok      bool
		daemons [6]time.Duration
	}
	snap := func() cpuSnap {
		s := cpuSnap{at: time.Now()}
		var err error
		s.machine, err = readCPUTimes("/proc/stat")
		s.ok = err == nil
		for i := range r.Hosts {
			if u, err := c.Usage(i); err == nil {
				s.daemons[i] = u.CPU
			}
		}
		return s
	}
	cpus := func(a, b cpuSnap, joiner int) string {
		secs := b.at.Sub(a.at).Seconds()
		var members time.Duration
		for i := range 4 {
			members += b.daemons[i] - a.daemons[i]
		}
		out := fmt.Sprintf("members' daemons %.2f CPUs", members.Seconds()/secs)
		if joiner >= 0 {
			out += fmt.Sprintf(", the joiner's %.2f", (b.daemons[joiner]-min(a.daemons[joiner], b.daemons[joiner])).Seconds()/secs)
		}
		if sh, ok := a.machine.share(b.machine); ok && a.ok && b.ok {
			out += "; the machine: " + sh.String()
		}
		return out
	}
	// Each join's "before" is the 30 s just before it (3 s windows swung
	// by half on this shared machine, 10 s windows by a factor of two
	// from one cycle of TestRackJoinCycles to the next), and the 30 s
	// after the last join are reported beside them: a ratio is as good
	// as its baseline.
	time.Sleep(time.Second)
	join := func(name string, i int, add bool) {
		t.Helper()
		c0 := snap()
		before := rate(30 * time.Second)
		c1 := snap()
		a0, _ := c.Status(ctx, 0)
		serving := slices.DeleteFunc([]int{0, 1, 2, 3, 4}, func(h int) bool { return h == i })
		read0 := diskReads(t, c, serving...)
		start := time.Now()
		if err := c.StartHost(ctx, i, true); err != nil {
			t.Fatal(err)
		}
		var st daemon.Status
		var paces paceTrail
		if add {
			// As docs/operator.md says: the spare follows the log first
			// (a transfer while it is no member: the rack does not wait
			// for it), then the add makes it a member.
			for {
				var err error
				if st, err = c.Status(ctx, i); err == nil && st.Agreed >= a0.Agreed {
					break
				}
				if err == nil {
					paces.note(st)
				}
				if ctx.Err() != nil {
					t.Fatalf("%s did not follow the log: %+v (err %v)", name, st, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("%s: following as a spare after %v", name, time.Since(start).Round(time.Millisecond))
			out, err := r.CommandContext(ctx, 0, exoBin, "roster", "add", "--socket", c.Socket(0), "--timeout", "30m", fmt.Sprint(i)).CombinedOutput()
			if err != nil {
				t.Fatalf("exo roster add %d: %v\n%s", i, err, out)
			}
		}
		for {
			var err error
			st, err = c.Status(ctx, i)
			if err == nil && !st.Halted && !st.Recovery.StateTransfer && !st.Removed && st.Agreed >= a0.Agreed {
				break
			}
			if err == nil {
				paces.note(st)
			}
			if ctx.Err() != nil {
				t.Fatalf("%s did not catch up: %+v (err %v)", name, st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(start)
		c2 := snap()
		a1, _ := c.Status(ctx, 0)
		during := float64(a1.Delivered-a0.Delivered) / took.Seconds()
		mb := float64(st.Counters["fetched_bytes"]) / 1e6
		t.Logf("%s: caught up with A's %d entries in %v: fetched %d entries, %.0f MB (%.1f MB/s); A delivered %.0f msgs/s during it, %.2f of the %.0f before; floor jumps %d",
			name, a0.Agreed, took.Round(time.Millisecond), st.Counters["fetched_entries"], mb, mb/took.Seconds(), during, during/before, before, st.Counters["floor_jumps"])
		t.Logf("%s: before it: %s; during it: %s; the members read %.0f MB from the disk", name, cpus(c0, c1, -1), cpus(c1, c2, i), float64(diskReads(t, c, serving...)-read0)/1e6)
		t.Logf("%s: its pace in MB/s / the rack's growth while it fetched, in %% of its growth in the pauses: %s", name, paces)
		if st.Counters["floor_jumps"] != 0 || st.Counters["past_floor"] != 0 {
			t.Errorf("%s started at a member's base: the retained logs should have served it from seq 0", name)
		}
	}
	wipe(t, c, 4)
	join("E (wiped, --join)", 4, false)
	join("F (new, roster add)", spare, true)
	time.Sleep(time.Second)
	t.Logf("after the joins: A delivered %.0f msgs/s over 30 s", rate(30*time.Second))
	stop()
	stop = nil
	for i := range r.Hosts {
		u, err := c.Usage(i)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("host %s: peak RSS %d MB, RSS now %d MB, CPU %v", r.Hosts[i].Name, u.MaxRSSBytes>>20, u.RSSBytes>>20, u.CPU.Round(time.Millisecond))
	}
	all := []int{0, 1, 2, 3, spare}
	n := checkRoundAgrees(ctx, t, c, all, 200000)
	// The logs on disk, from seq 0 to A's agreement pointer then: E's and
	// F's must be A's, entry for entry.
	upTo := st0.Agreed
	want := logHash(t, c, 0, upTo)
	for _, i := range []int{4, spare} {
		if got := logHash(t, c, i, upTo); got != want {
			t.Errorf("host %s: its durable log [0, %d) differs from A's", r.Hosts[i].Name, upTo)
		}
	}
	t.Logf("E's and F's durable logs [0, %d) are A's; then %d acknowledged messages at their positions at A-D and F", upTo, n)
}

// logHash hashes host i's durable log from seq 0 below upTo (every entry's
// seq, epoch, sender, history and payload).
func logHash(t *testing.T, c *Cluster, i int, upTo uint64) [32]byte {
	t.Helper()
	cfg, err := c.Config(i)
	if err != nil {
		t.Fatal(err)
	}
	r := wal.NewReader(cfg.DataDir)
	h := sha256.New()
	var buf []byte
	for lo := uint64(0); lo < upTo; {
		es, err := r.Read(lo, upTo, exo.FetchLimit{Entries: 4096})
		if err != nil || len(es) == 0 {
			t.Fatalf("host %s: read its log at %d: %v", c.Rack.Hosts[i].Name, lo, errors.Join(err, errors.New("no entries")))
		}
		for k := range es {
			buf, _ = es[k].AppendBinary(buf[:0])
			h.Write(buf)
		}
		lo += uint64(len(es))
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// loadLog publishes rounds of msg-byte messages at members until A's
// durable log holds target bytes, and returns A's status then.
func loadLog(ctx context.Context, t *testing.T, c *Cluster, members []int, msg int, target int64) daemon.Status {
	t.Helper()
	t0 := time.Now()
	for round := 1; ; round++ {
		if _, err := c.Publish(ctx, Load{Hosts: members, PerHost: 500, Size: msg, Window: 16, Round: round}); err != nil {
			t.Fatal(err)
		}
		st, err := c.Status(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if round%20 == 0 {
			t.Logf("loaded %d MB of log in %v (agreed %d)", st.LogBytes>>20, time.Since(t0).Round(time.Second), st.Agreed)
		}
		if st.LogBytes >= target {
			t.Logf("A's durable log: %d bytes, %d entries (in memory from %d), after %v of load", st.LogBytes, st.Agreed, st.LogBase, time.Since(t0).Round(time.Second))
			return st
		}
	}
}

// joinRackConfig is the config of the join runs' hosts: A..E the first
// roster (F a spare), durable logs kept whole on disk (retain), 4,096
// messages in the history (64 MiB of 16 KiB ones), transfers paced at
// pace (transfer_rate), the retained log read in the I/O class
// EXO_JOIN_ARCHIVE_IO names (archive_io: idle, the default, or normal),
// transfer_yield as EXO_JOIN_YIELD says (one value; TestRackJoinCycles
// takes a list, one a cycle).
func joinRackConfig(t *testing.T, dir, pace string) func(*daemon.Config) {
	class := os.Getenv("EXO_JOIN_ARCHIVE_IO")
	keep, keepSet := envSigned(t, "EXO_JOIN_KEEP")
	procs, procsSet := envSigned(t, "EXO_JOIN_PROCS")
	yield := os.Getenv("EXO_JOIN_YIELD")
	if strings.Contains(yield, ",") {
		yield = ""
	}
	return func(cfg *daemon.Config) {
		cfg.TransferYieldText = yield
		Durable(dir, false)(cfg)
		cfg.Hosts = 5
		cfg.KeepEntries = 4096
		cfg.Retain = daemon.Retain{Entries: 1 << 40}
		cfg.TransferRateText = pace
		cfg.ArchiveIOText = class
		if joinMetrics() || os.Getenv("EXO_JOIN_TRACE") != "" {
			cfg.MetricsAddr = "127.0.0.1:9477"
			cfg.EnablePprof = os.Getenv("EXO_JOIN_TRACE") != ""
		}
		if keepSet {
			cfg.KeepEntries = keep
		}
		if d := os.Getenv("EXO_JOIN_SPARE_DIR"); d != "" && cfg.ID == 5 {
			cfg.DataDir = filepath.Join(d, "data-5")
		}
		if procsSet {
			cfg.Procs = procs
		}
	}
}

// paceTrail is a joiner's transfer pace (MB/s) and the rack's share it
// measured at its pauses (%), one "pace/share" at each change seen.
type paceTrail []string

// note takes a status of the joiner.
func (p *paceTrail) note(st daemon.Status) {
	rs := st.Recovery
	if !rs.StateTransfer {
		return
	}
	if v := fmt.Sprintf("%.1f/%d", float64(rs.TransferPace)/1e6, rs.TransferRackPercent); len(*p) == 0 || (*p)[len(*p)-1] != v {
		*p = append(*p, v)
	}
}

func (p paceTrail) String() string { return strings.Join(p, " ") }

// churn is the rack's view changes, takeovers and the takeovers' victims
// (false takeovers) summed over some members: what a transfer sets off
// beside the agreed rate it costs.
type churn struct {
	viewChanges, takeovers, falseTakeovers uint64
	// From the members' metrics (EXO_JOIN_METRICS=1), else 0: token holds
	// (token to frame) over 4.1 ms, durable-log commits over 6.4 ms.
	slowHolds, slowCommits uint64
}

// joinMetrics reports whether the join tests' daemons serve their metrics
// (EXO_JOIN_METRICS=1: each on 127.0.0.1:9477 in its namespace).
func joinMetrics() bool { return os.Getenv("EXO_JOIN_METRICS") == "1" }

// histOver is how many observations of the histogram name in a metrics
// text exceeded its bucket le (the count less that bucket's).
func histOver(text, name, le string) (uint64, error) {
	var count, in uint64
	var haveCount, haveBucket bool
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, name+"_count "):
			_, err := fmt.Sscan(strings.TrimPrefix(line, name+"_count "), &count)
			haveCount = err == nil
		case strings.HasPrefix(line, name+`_bucket{le="`+le+`"} `):
			_, err := fmt.Sscan(strings.TrimPrefix(line, name+`_bucket{le="`+le+`"} `), &in)
			haveBucket = err == nil
		}
	}
	if !haveCount || !haveBucket {
		return 0, fmt.Errorf("no %s count or bucket le=%s in the metrics", name, le)
	}
	return count - in, nil
}

// churnOf reads the members' counters (their status).
func churnOf(ctx context.Context, t *testing.T, c *Cluster, hosts ...int) churn {
	t.Helper()
	var s churn
	for _, h := range hosts {
		st, err := c.Status(ctx, h)
		if err != nil {
			t.Fatalf("host %d's status: %v", h, err)
		}
		s.viewChanges += st.Counters["view_changes"]
		s.takeovers += st.Counters["takeovers"]
		s.falseTakeovers += st.Detector.FalseTakeovers
		if !joinMetrics() {
			continue
		}
		out, err := c.Rack.Exec(ctx, h, "curl", "-sf", "http://127.0.0.1:9477/metrics")
		if err != nil {
			t.Fatalf("host %d's metrics: %v", h, err)
		}
		holds, err := histOver(string(out), "exo_token_hold_seconds", "0.004096")
		if err != nil {
			t.Fatalf("host %d: %v", h, err)
		}
		commits, err := histOver(string(out), "exo_wal_commit_seconds", "0.0064")
		if err != nil {
			t.Fatalf("host %d: %v", h, err)
		}
		s.slowHolds += holds
		s.slowCommits += commits
	}
	return s
}

// rates is the churn from s to later, a second over d.
func (s churn) rates(later churn, d time.Duration) string {
	sec := d.Seconds()
	r := fmt.Sprintf("%.1f view changes, %.1f takeovers, %.1f false takeovers a second",
		float64(later.viewChanges-s.viewChanges)/sec, float64(later.takeovers-s.takeovers)/sec, float64(later.falseTakeovers-s.falseTakeovers)/sec)
	if joinMetrics() {
		r += fmt.Sprintf(", %.1f token holds over 4.1 ms, %.1f log commits over 6.4 ms a second", float64(later.slowHolds-s.slowHolds)/sec, float64(later.slowCommits-s.slowCommits)/sec)
	}
	return r
}

// keepLogs copies the daemons' logs of hosts 0..n-1 to the directory
// EXO_JOIN_LOGS names, if set, when the test ends (the test's own
// directory goes with it): a long run's view changes and takeovers, for
// reading afterwards.
func keepLogs(t *testing.T, c *Cluster, n int) {
	dir := os.Getenv("EXO_JOIN_LOGS")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Errorf("EXO_JOIN_LOGS: %v", err)
			return
		}
		for i := range n {
			b, err := os.ReadFile(c.LogPath(i))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, filepath.Base(c.LogPath(i))), b, 0o644)
			}
			if err != nil {
				t.Errorf("EXO_JOIN_LOGS: host %d's log: %v", i, err)
			}
		}
	})
}

// envSigned is the integer in the environment variable name, if set (a
// value that is not one fails the test).
func envSigned(t *testing.T, name string) (int, bool) {
	t.Helper()
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: want an integer", name, v)
	}
	return n, true
}
