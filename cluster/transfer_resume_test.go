package cluster

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
)

// TestRackTransferResume: a state transfer survives the death of both
// sides. E, wiped, rejoins a compacted rack by state transfer; it is
// killed in the middle and restarted (without --join: its disk holds the
// part it fetched), goes on from there; then the member it fetches from is
// killed, and it goes on from another. It ends with the same stream as the
// others. A long run (a log of some 130,000 entries): EXO_TRANSFER_SOAK=1
// runs it (docs/recovery.md).
func TestRackTransferResume(t *testing.T) {
	if os.Getenv("EXO_TRANSFER_SOAK") != "1" {
		t.Skip("a long run (about 3 minutes of load): EXO_TRANSFER_SOAK=1 runs it")
	}
	r := rack(t, 5)
	dir := t.TempDir()
	c := startWith(t, r, func(cfg *daemon.Config) {
		Durable(dir, false)(cfg)
		cfg.KeepEntries = 65536
		cfg.FetchBytes = 64 << 10 // small batches: a transfer of many round trips
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	all := []int{0, 1, 2, 3, 4}
	if _, err := c.Publish(ctx, Load{Hosts: all, PerHost: 500, Size: 64, Window: 8, Round: 1}); err != nil {
		t.Fatal(err)
	}
	wipe(t, c, 4)
	var st0 daemon.Status
	var err error
	for round := 2; st0.LogBase == 0; round++ {
		if _, err := c.Publish(ctx, Load{Hosts: all[:4], PerHost: 20000, Size: 64, Window: 8, Round: round}); err != nil {
			t.Fatal(err)
		}
		if st0, err = c.Status(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	want := st0.Agreed - st0.LogBase
	t.Logf("A: log base %d, agreed %d: a transfer of about %d entries", st0.LogBase, st0.Agreed, want)
	// E starts; once it fetched a fifth, it is killed and restarted.
	if err := c.StartHost(ctx, 4, true); err != nil {
		t.Fatal(err)
	}
	progress := func(frac float64) daemon.Status {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			st, err := c.Status(ctx, 4)
			if err == nil && st.Recovery.StateTransfer && float64(st.Append-st.LogBase) >= frac*float64(want) {
				return st
			}
			if err == nil && !st.Recovery.StateTransfer && st.Epoch > 0 {
				t.Fatalf("E finished its transfer before %.0f%% of it (append %d): nothing to interrupt; raise the log size", frac*100, st.Append)
			}
			if time.Now().After(deadline) {
				t.Fatalf("E did not reach %.0f%% of its transfer: %+v %v", frac*100, st.Recovery, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	st := progress(0.2)
	if err := c.Kill(4); err != nil {
		t.Fatal(err)
	}
	t.Logf("E killed during its transfer at seq %d (log from %d)", st.Append, st.LogBase)
	if err := c.StartHost(ctx, 4, false); err != nil {
		t.Fatal(err)
	}
	st1, err := c.Status(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	// (What the kill caught between the append and the disk is fetched
	// again: a batch or two of 64 KiB, some 170 entries each.)
	if st1.LogBase != st.LogBase || st1.Append+1024 < st.Append || !st1.Recovery.StateTransfer {
		t.Fatalf("E after its restart: log %d..%d, transfer %v; want it going on from %d..%d", st1.LogBase, st1.Append, st1.Recovery.StateTransfer, st.LogBase, st.Append)
	}
	t.Logf("E restarted from its disk: log %d..%d, transfer going on", st1.LogBase, st1.Append)
	b, err := os.ReadFile(c.LogPath(4))
	if err != nil || !strings.Contains(string(b), "amnesiac=true") {
		t.Errorf("E's restart does not say it came back amnesiac from its disk (err %v)", err)
	}
	// The member E fetches from dies; E goes on from another.
	st = progress(0.6)
	sender := st.Recovery.FetchPeer
	if sender == 4 || sender < 0 || sender > 3 {
		t.Fatalf("E fetches from member %d", sender)
	}
	if err := c.Kill(sender); err != nil {
		t.Fatal(err)
	}
	t.Logf("member %s, which E fetched from, killed at E's seq %d", r.Hosts[sender].Name, st.Append)
	start := time.Now()
	for {
		st, err = c.Status(ctx, 4)
		if err == nil && !st.Halted && !st.Recovery.StateTransfer && st.Epoch > 0 {
			break
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("E did not rejoin within 3 minutes of the sender's death: %+v %v", st.Recovery, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("E rejoined %v after the sender's death (epoch %d, log from %d, fetched %d entries / %d bytes in all)",
		time.Since(start).Round(time.Millisecond), st.Epoch, st.LogBase, st.Counters["fetched_entries"], st.Counters["fetched_bytes"])
	if err := c.StartHost(ctx, sender, false); err != nil {
		t.Fatal(err)
	}
	n := checkRoundAgrees(ctx, t, c, all, 99)
	t.Logf("%d acknowledged messages at their positions in all five streams", n)
}
