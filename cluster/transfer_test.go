package cluster

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

// TestRackJoinCompacted: a host whose disk is wiped rejoins a rack whose
// members compacted their logs (keep_entries) far past where it stopped,
// by state transfer (exo/transfer.go): it fetches the agreed log from a
// member's log base, rejoins through its view change, and then delivers
// the same stream as everyone. Before state transfer it never rejoined: its
// view change from seq 0 found no witness holding the log's start.
//
// EXO_JOIN_KEEP (keep_entries, default 1024: the smallest allowed),
// EXO_JOIN_PER_HOST (messages each host publishes before E comes back,
// default 3000) and EXO_JOIN_FETCH_BYTES (fetch_bytes) make it the
// documented larger run (docs/recovery.md); EXO_JOIN_RATE=1 adds a load
// during E's transfer and reports the rack's agreed rate during it against
// the rate before.
func TestRackJoinCompacted(t *testing.T) {
	keep, perHost := envInt(t, "EXO_JOIN_KEEP", 1024), envInt(t, "EXO_JOIN_PER_HOST", 3000)
	fetchBytes := envInt(t, "EXO_JOIN_FETCH_BYTES", daemon.DefaultFetchBytes)
	rate := os.Getenv("EXO_JOIN_RATE") == "1"
	r := rack(t, 5)
	dir := t.TempDir()
	c := startWith(t, r, func(cfg *daemon.Config) {
		Durable(dir, false)(cfg)
		cfg.KeepEntries = keep
		cfg.FetchBytes = fetchBytes
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	all := []int{0, 1, 2, 3, 4}
	// The rack moves on without E, compacting past everything E held.
	wipeAndMoveOn(ctx, t, c, 2000, perHost, nil)
	st0, err := c.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st0.LogBase == 0 {
		t.Fatalf("A never compacted (log base 0, agreed %d): the test needs a compacted rack", st0.Agreed)
	}
	var stopLoad func()
	var d0 uint64
	var t0 time.Time
	if rate {
		// A steady load at A-D; the agreed rate at A over 3 s before E
		// starts, then from E's start to its rejoin.
		stopLoad = backgroundLoad(ctx, c, Load{Hosts: all[:4], PerHost: 500, Size: 64, Window: 8, Round: 5000})
		time.Sleep(time.Second)
		a, _ := c.Status(ctx, 0)
		time.Sleep(3 * time.Second)
		b, _ := c.Status(ctx, 0)
		t.Logf("before E: A delivered %.0f msgs/s", float64(b.Delivered-a.Delivered)/3)
		d0, t0 = b.Delivered, time.Now()
		defer func() {
			if stopLoad != nil {
				stopLoad()
			}
		}()
	}
	start := time.Now()
	if err := c.StartHost(ctx, 4, true); err != nil {
		t.Fatal(err)
	}
	limit := 10 * time.Minute
	if keep == 1024 {
		limit = 90 * time.Second
	}
	st := waitRejoin(ctx, t, c, 4, start, limit, func(st daemon.Status) bool { return st.LogBase > 0 })
	rejoined := time.Since(start)
	if rate {
		a, _ := c.Status(ctx, 0)
		t.Logf("from the status before E's start to its rejoin (%v): A delivered %.0f msgs/s", time.Since(t0).Round(time.Millisecond), float64(a.Delivered-d0)/time.Since(t0).Seconds())
		stopLoad()
		stopLoad = nil
	}
	if f := st.Counters["fetched_entries"]; rejoined > 0 {
		t.Logf("state transfer: %d entries, %.1f MB in %v: %.0f entries/s, %.1f MB/s", f, float64(st.Counters["fetched_bytes"])/1e6,
			rejoined.Round(time.Millisecond), float64(f)/rejoined.Seconds(), float64(st.Counters["fetched_bytes"])/1e6/rejoined.Seconds())
	}
	if st.Counters["floor_jumps"] == 0 {
		t.Errorf("E rejoined without a floor jump (counters %v): the members' logs were not compacted past its empty log?", st.Counters)
	}
	// Everyone, E included, publishes; the acknowledged messages are at
	// their positions in all five streams, read from the first of them.
	n := checkRoundAgrees(ctx, t, c, all, 3)
	t.Logf("%s", fmt.Sprintf("A's log base %d (agreed %d) when E came back with an empty disk; E rejoined in %v (its log from seq %d, epoch %d, fetched %d entries / %d bytes); then %d acknowledged messages at their positions in all 5 streams",
		st0.LogBase, st0.Agreed, rejoined.Round(time.Millisecond), st.LogBase, st.Epoch, st.Counters["fetched_entries"], st.Counters["fetched_bytes"], n))
}

// envInt reads a positive integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// checkRoundAgrees publishes 200 messages at each of hosts (payloads of
// round), then reads every host's stream from the first acknowledged
// position to the last: the streams must be identical and every
// acknowledged message at its position. It returns how many were
// acknowledged.
func checkRoundAgrees(ctx context.Context, t *testing.T, c *Cluster, hosts []int, round int) int {
	t.Helper()
	var mu sync.Mutex
	acked := map[string]client.Position{}
	onAck := func(p []byte, pos client.Position) { mu.Lock(); acked[string(p)] = pos; mu.Unlock() }
	if _, err := c.Publish(ctx, Load{Hosts: hosts, PerHost: 200, Size: 64, Window: 8, Round: round, OnAck: onAck}); err != nil {
		t.Fatal(err)
	}
	first, last := client.Position{Seq: ^uint64(0)}, client.Position{}
	for _, p := range acked {
		if p.Seq < first.Seq {
			first = client.Position{Seq: p.Seq}
		}
		if p.Seq > last.Seq || p.Seq == last.Seq && p.Index > last.Index {
			last = p
		}
	}
	streams := make([][]client.Message, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for j, i := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[j] = client.Subscribe(ctx, c.Socket(i), first.Seq, func(m client.Message) error {
				streams[j] = append(streams[j], m)
				if m.Position == last {
					return errEnough
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for j, err := range errs {
		if err != errEnough {
			t.Fatalf("host %s: stream from seq %d ended after %d messages: %v", c.Rack.Hosts[hosts[j]].Name, first.Seq, len(streams[j]), err)
		}
	}
	if err := Compare(streams); err != nil {
		t.Fatal(err)
	}
	have := map[string]client.Position{}
	for _, m := range streams[len(streams)-1] {
		have[string(m.Payload)] = m.Position
	}
	for p, pos := range acked {
		if got, ok := have[p]; !ok || got != pos {
			t.Fatalf("acknowledged message at %v: at host %s %v (present %v)", pos, c.Rack.Hosts[hosts[len(hosts)-1]].Name, got, ok)
		}
	}
	return len(acked)
}

// wipe kills host i's daemon and removes its durable log: a lost disk.
func wipe(t *testing.T, c *Cluster, i int) {
	t.Helper()
	if err := c.Kill(i); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.Config(i)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		t.Fatal(err)
	}
}

// waitRejoin waits until host i runs again in the rack (not halted, out of
// its state transfer, in an epoch) and done holds for its status, and
// fails the test once limit has passed since start.
func waitRejoin(ctx context.Context, t *testing.T, c *Cluster, i int, start time.Time, limit time.Duration, done func(daemon.Status) bool) daemon.Status {
	t.Helper()
	for {
		st, err := c.Status(ctx, i)
		if err == nil && !st.Halted && !st.Recovery.StateTransfer && st.Epoch > 0 && done(st) {
			return st
		}
		if time.Since(start) > limit {
			t.Fatalf("%s did not rejoin within %v: %+v (err %v)", c.Rack.Hosts[i].Name, time.Since(start).Round(time.Second), st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wipeAndMoveOn publishes first messages at each of the five hosts (round
// 1), kills E and wipes its disk, then publishes then at each of A..D
// (round 2): the rack moves on without E.
func wipeAndMoveOn(ctx context.Context, t *testing.T, c *Cluster, first, then int, onAck func([]byte, client.Position)) {
	t.Helper()
	all := []int{0, 1, 2, 3, 4}
	if _, err := c.Publish(ctx, Load{Hosts: all, PerHost: first, Size: 64, Window: 8, Round: 1, OnAck: onAck}); err != nil {
		t.Fatal(err)
	}
	wipe(t, c, 4)
	if _, err := c.Publish(ctx, Load{Hosts: all[:4], PerHost: then, Size: 64, Window: 8, Round: 2, OnAck: onAck}); err != nil {
		t.Fatal(err)
	}
}

// backgroundLoad publishes l again and again (Round l.Round, l.Round+1,
// ...) until the returned stop is called, tolerating failures (a host cut
// off or dead).
func backgroundLoad(ctx context.Context, c *Cluster, l Load) (stop func()) {
	l.Tolerant = true
	first := l.Round
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; ; k++ {
			select {
			case <-done:
				return
			default:
			}
			l.Round = first + k
			c.Publish(ctx, l)
		}
	}()
	return func() { close(done); wg.Wait() }
}
