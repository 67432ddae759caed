package cluster

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

// TestRackDurableKill9: with the strict durability policy (fsync per entry),
// daemons are killed with SIGKILL at 20 random points under sustained load
// and restarted from their durable log; at the end every host holds the
// same stream and no acknowledged message is missing.
func TestRackDurableKill9(t *testing.T) {
	r := rack(t, 5)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Segments of 1 MiB: the kills find daemons writing segments begun on
	// prepared files (preallocate, the default), whose zeros a restart
	// cuts.
	small := func(cfg *daemon.Config) { cfg.SegmentBytes = 1 << 20 }
	c, err := Start(ctx, r, Options{Bin: exoBin, Dir: dir, Config: Hooks(Durable(dir, true), small)}) // CheckAcked reads every stream from seq 0
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	var mu sync.Mutex
	acked := map[string]client.Position{}
	onAck := func(p []byte, pos client.Position) { mu.Lock(); acked[string(p)] = pos; mu.Unlock() }
	all := []int{0, 1, 2, 3, 4}
	stop := make(chan struct{})
	var loadWG sync.WaitGroup
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		for round := 1; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			c.Publish(ctx, Load{Hosts: all, PerHost: 300, Size: 64, Window: 32, Round: round, OnAck: onAck, Tolerant: true})
		}
	}()
	rng := rand.New(rand.NewPCG(7, 7))
	prepared := 0 // kills of a daemon that had begun a segment on a prepared file
	for k := 0; k < 20; k++ {
		time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond)
		h := rng.IntN(5)
		if st, err := c.Status(ctx, h); err == nil && st.Counters["wal_segments.prepared"] > 0 {
			prepared++
		}
		if err := c.Kill(h); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(20+rng.IntN(80)) * time.Millisecond)
		if err := c.StartHost(ctx, h, false); err != nil {
			t.Fatalf("kill point %d: restart of %s from its log: %v", k, r.Hosts[h].Name, err)
		}
	}
	close(stop)
	loadWG.Wait()
	// A last round with every daemon up, so that everything gets agreed.
	if _, err := c.Publish(ctx, Load{Hosts: all, PerHost: 50, Size: 64, Round: 1000, OnAck: onAck}); err != nil {
		t.Fatal(err)
	}
	// The whole rack loses power: every daemon is killed at once, then all
	// restart from their logs.
	for _, h := range all {
		if err := c.Kill(h); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range all {
		if err := c.StartHost(ctx, h, false); err != nil {
			t.Fatalf("whole-rack restart of %s: %v", r.Hosts[h].Name, err)
		}
	}
	if _, err := c.Publish(ctx, Load{Hosts: all, PerHost: 50, Size: 64, Round: 1001, OnAck: onAck}); err != nil {
		t.Fatalf("after the whole-rack restart: %v", err)
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	delivered, violations := c.CheckAcked(ctx, acked)
	if len(violations) > 0 {
		t.Fatalf("violations: %v", violations)
	}
	if prepared == 0 {
		t.Fatal("no kill found a daemon writing a prepared segment: the test no longer covers the restart that cuts their zeros")
	}
	st, _ := c.Status(ctx, 0)
	t.Logf("20 kill -9 points under load (%d of a daemon writing a prepared segment) and a whole-rack kill -9, fsync per entry: %d acknowledged messages, all present at their acknowledged position at all 5 hosts (%d delivered); epoch %d",
		prepared, n, delivered, st.Epoch)
}
