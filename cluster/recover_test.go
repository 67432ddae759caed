package cluster

import (
	"context"
	"strings"
	"testing"
	"time"
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
	// On a healthy rack, exo recover says there is nothing to recover and
	// --accept-loss refuses.
	out, err := r.CommandContext(ctx, 0, exoBin, "recover", "--socket", c.Socket(0), "--accept-loss", "--yes").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not stalled on lost state") {
		t.Fatalf("exo recover --accept-loss on a healthy rack: %v\n%s", err, out)
	}
	for _, i := range []int{1, 2} {
		wipe(t, c, i)
	}
	for _, i := range []int{1, 2} {
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
	// The report, then the acceptance, at a host that lost its state
	// first (its rejoin is what waits: it takes no install but its own, or
	// one it promised): as an operator, again wherever the status shows
	// the stall until the rack moves (a view change may be retried, or led
	// by another host meanwhile).
	var shown, done []byte
	accept := func() (int, bool) {
		order := []int{}
		for _, i := range all {
			if st, err := c.Status(ctx, i); err == nil && st.Epoch == 0 {
				order = append(order, i) // no epoch yet: it lost its state
			}
		}
		for _, i := range all {
			if st, err := c.Status(ctx, i); err == nil && st.Epoch != 0 {
				order = append(order, i)
			}
		}
		for _, i := range order {
			st, err := c.Status(ctx, i)
			if err != nil || st.Recovery.ViewChange == nil || !st.Recovery.ViewChange.Ambiguous {
				continue
			}
			shown, _ = r.CommandContext(ctx, i, exoBin, "recover", "--socket", c.Socket(i)).CombinedOutput()
			var err2 error
			done, err2 = r.CommandContext(ctx, i, exoBin, "recover", "--socket", c.Socket(i), "--accept-loss", "--yes").CombinedOutput()
			if err2 == nil {
				return i, true
			}
		}
		return -1, false
	}
	moving := func(within time.Duration) bool {
		deadline := time.Now().Add(within)
		for _, i := range all {
			for {
				st, err := c.Status(ctx, i)
				if err == nil && !st.Halted {
					break
				}
				if time.Now().After(deadline) {
					return false
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		return true
	}
	acceptances := 0
	for tries := 0; ; tries++ {
		if tries == 200 || acceptances == 10 {
			t.Fatalf("the rack did not move after %d acceptances; last report:\n%s\nlast answer:\n%s", acceptances, shown, done)
		}
		i, ok := accept()
		if !ok {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		acceptances++
		// The acceptance reports what it resolved (the positions in
		// doubt) before it says so. The report asked for first may
		// find the view change between two attempts (it is started
		// again every few hundred ms): then it says there is nothing
		// to recover, and says no more.
		if !strings.Contains(string(done), "in doubt: positions from") || !strings.Contains(string(done), "accepted: view change") ||
			!strings.Contains(string(shown), "in doubt: positions from") && !strings.Contains(string(shown), "not stalled on lost state") {
			t.Fatalf("report:\n%s\nanswer:\n%s", shown, done)
		}
		t.Logf("acceptance %d, at %s:\n%s%s", acceptances, r.Hosts[i].Name, shown, done)
		if moving(5 * time.Second) {
			break
		}
	}
	// The rack moves on: everyone publishes, and the three streams agree
	// from the first acknowledged position on.
	checkRoundAgrees(ctx, t, c, all, 2)
}
