package cluster

import (
	"context"
	"testing"
	"time"
)

// TestRackChaosShort: the nemesis for 10 s on a 5-host rack of durable
// daemons (the documented soak is `exo lab chaos --duration 5m`): no
// violation.
func TestRackChaosShort(t *testing.T) {
	r := rack(t, 5)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, r, Options{Bin: exoBin, Dir: dir, Config: Durable(dir, true)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	rep, err := c.Chaos(ctx, ChaosOptions{Duration: 10 * time.Second, Seed: 3, Every: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Summary())
	if len(rep.Violations) > 0 {
		t.Fatalf("violations: %v", rep.Violations)
	}
	if rep.Acked == 0 || rep.Delivered < rep.Acked {
		t.Fatalf("acknowledged %d, delivered %d", rep.Acked, rep.Delivered)
	}
}
