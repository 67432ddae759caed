package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
)

// TestRackAcceptLoss: two of three hosts lose their disks. They fetch the
// agreed log from the third (state transfer), but a view change needs two
// hosts that kept their state: the rack stalls rather than guess (a real
// stall: safety over liveness). exo recover shows what resolving it
// without them gives up, refuses where nothing is stalled, and with
// --accept-loss --yes the rack moves on with one stream at all three.
func TestRackAcceptLoss(t *testing.T) {
	r := rack(t, 3)
	dir := t.TempDir()
	c := startWith(t, r, Durable(dir, false))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := []int{0, 1, 2}
	if _, err := c.Publish(ctx, Load{Hosts: all, PerHost: 300, Size: 64, Window: 8, Round: 1}); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		if err := c.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{1, 2} {
		cfg, err := c.Config(i)
		if err != nil {
			t.Fatal(err)
		}
		if err := removeAll(cfg.DataDir); err != nil {
			t.Fatal(err)
		}
		if err := c.StartHost(ctx, i, true); err != nil {
			t.Fatal(err)
		}
	}
	// The stall: some host leads a view change that waits on lost state.
	stalled := -1
	deadline := time.Now().Add(60 * time.Second)
	for stalled < 0 {
		if time.Now().After(deadline) {
			t.Fatal("no host shows a view change waiting on lost state within 60 s")
		}
		for _, i := range all {
			if st, err := c.Status(ctx, i); err == nil && st.Recovery.ViewChange != nil && st.Recovery.ViewChange.Ambiguous {
				stalled = i
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	// At a daemon that leads nothing stalled, exo recover says so and
	// --accept-loss refuses.
	other := (stalled + 1) % 3
	if st, err := c.Status(ctx, other); err == nil && (st.Recovery.ViewChange == nil || !st.Recovery.ViewChange.Ambiguous) {
		out, err := r.CommandContext(ctx, other, exoBin, "recover", "--socket", c.Socket(other), "--accept-loss", "--yes").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "not stalled on lost state") {
			t.Fatalf("exo recover --accept-loss at %s (not stalled): %v\n%s", r.Hosts[other].Name, err, out)
		}
	}
	// The report, then the acceptance (the view change may be retried, or
	// led by another host meanwhile: try again on a refusal).
	var shown, done []byte
	for tries := 0; ; tries++ {
		if tries == 50 {
			t.Fatalf("exo recover --accept-loss never went through; last report:\n%s\nlast answer:\n%s", shown, done)
		}
		for _, i := range all {
			st, err := c.Status(ctx, i)
			if err != nil || st.Recovery.ViewChange == nil || !st.Recovery.ViewChange.Ambiguous {
				continue
			}
			shown, _ = r.CommandContext(ctx, i, exoBin, "recover", "--socket", c.Socket(i)).CombinedOutput()
			var err2 error
			done, err2 = r.CommandContext(ctx, i, exoBin, "recover", "--socket", c.Socket(i), "--accept-loss", "--yes").CombinedOutput()
			if err2 == nil {
				stalled = i
				goto accepted
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
accepted:
	if !strings.Contains(string(shown), "in doubt: positions from") || !strings.Contains(string(done), "accepted: view change") {
		t.Fatalf("report:\n%s\nanswer:\n%s", shown, done)
	}
	t.Logf("at %s:\n%s%s", r.Hosts[stalled].Name, shown, done)
	// The rack moves on: everyone publishes, and the three streams agree
	// from the first acknowledged position on.
	var st daemon.Status
	for _, i := range all {
		var err error
		deadline := time.Now().Add(30 * time.Second)
		for st, err = c.Status(ctx, i); err != nil || st.Halted; st, err = c.Status(ctx, i) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still halted 30 s after the acceptance: %+v %v", r.Hosts[i].Name, st.Recovery, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	checkRoundAgrees(ctx, t, c, all, 2)
}
