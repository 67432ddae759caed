package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/lab"
)

// TestRackTokenFaults runs token mode (xdp_token) through the faults that
// take the token away from the fast paths, under load, on a rack of five
// members and a spare with durable logs: the host that holds the token on
// an idle rack dies (its daemon killed with SIGKILL, its link down: the
// kernel that passed the token goes with it); a live member is cut off
// from the others; the dead host comes back and restarts from its log
// (fenced: its fast path was armed in the epoch, and its pinned maps hand
// the records it had not logged to the new daemon); a member is replaced
// by the spare while the fast paths run. At the end every member holds the
// same stream, every acknowledged message at its acknowledged position,
// and no fast path sent a frame its log could not take.
func TestRackTokenFaults(t *testing.T) {
	requireXDP(t)
	if err := lab.CheckRoot(); err != nil {
		t.Skipf("needs root for network namespaces: %v", err)
	}
	prefix := fmt.Sprintf("tf%d", os.Getpid()%100000)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := lab.Up(ctx, lab.Options{Prefix: prefix, Hosts: 6, Force: true, BPFDir: daemon.DefaultBPFDir})
	if err != nil {
		t.Skipf("the kernel refused the lab rack: %v", err)
	}
	t.Cleanup(func() {
		if err := lab.Down(context.Background(), prefix); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	dir := t.TempDir()
	c, err := Start(ctx, r, Options{Bin: exoBin, Dir: dir, Config: func(cfg *daemon.Config) {
		cfg.Hosts = 5 // F is a spare
		withOffload("xdp-token")(cfg)
		Durable(dir, true)(cfg)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	logsOnFailure(t, c)

	var mu sync.Mutex
	acked := map[string]client.Position{}
	onAck := func(p []byte, pos client.Position) { mu.Lock(); acked[string(p)] = pos; mu.Unlock() }
	round := 0
	publish := func(hosts []int, per int) {
		t.Helper()
		round++
		if _, err := c.Publish(ctx, Load{Hosts: hosts, PerHost: per, Size: 64, Window: 32, Round: round, OnAck: onAck}); err != nil {
			t.Fatalf("round %d from %v: %v", round, hosts, err)
		}
	}
	// load publishes from hosts in rounds until stop is closed, tolerating
	// failures (a host cut off or dead).
	load := func(hosts []int) (stop func()) {
		return backgroundLoad(ctx, c, Load{Hosts: hosts, PerHost: 200, Size: 64, Window: 32, Round: 1000 + 100*round, OnAck: onAck})
	}
	armed := func(i int) bool {
		st, err := c.Status(ctx, i)
		return err == nil && st.Token != nil && st.Token.Armed
	}
	members := []int{0, 1, 2, 3, 4}
	publish(members, 300)

	// 1. The holder of an idle rack dies. The rack backs off (up to 64 ms
	// a hop): the token sits with the core of the host whose fast path
	// handed it up (its fast path armed again behind it), and that host's
	// status names itself the holder.
	time.Sleep(2 * time.Second)
	holder := -1
	for tries := 0; holder < 0; tries++ {
		if tries == 500 {
			t.Fatal("no host named itself the holder of the idle rack")
		}
		for _, i := range members {
			if st, err := c.Status(ctx, i); err == nil && st.Holder == i {
				holder = i
				break
			}
		}
	}
	if err := c.Kill(holder); err != nil {
		t.Fatal(err)
	}
	if err := r.SetLink(ctx, holder, false); err != nil {
		t.Fatal(err)
	}
	alive := slices.DeleteFunc(slices.Clone(members), func(i int) bool { return i == holder })
	st0, _ := c.Status(ctx, alive[0])
	publish(alive, 200) // a takeover brings the token back
	st1, _ := c.Status(ctx, alive[0])
	t.Logf("holder %s killed on an idle rack; the others agreed 800 messages after it (agreement pointer %d -> %d, epoch %d -> %d)",
		r.Hosts[holder].Name, st0.Agreed, st1.Agreed, st0.Epoch, st1.Epoch)

	// 2. A live member is cut off from the others while the fast paths
	// carry a load; the rest (a majority of the roster) go on.
	stop := load(alive)
	time.Sleep(300 * time.Millisecond)
	cut := alive[len(alive)-1]
	if !armed(alive[0]) {
		t.Logf("note: %s's fast path was halted when the cut came", r.Hosts[alive[0]].Name)
	}
	if err := r.Partition(ctx, [][]int{{cut}, slices.DeleteFunc(slices.Clone(alive), func(i int) bool { return i == cut })}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := r.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.SetLink(ctx, holder, false); err != nil { // Heal brought its link up: it is still dead
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	stop()

	// 3. The dead host comes back and restarts from its durable log.
	if err := r.SetLink(ctx, holder, true); err != nil {
		t.Fatal(err)
	}
	if err := c.StartHost(ctx, holder, false); err != nil {
		t.Fatalf("restart of %s: %v", r.Hosts[holder].Name, err)
	}
	if b, err := os.ReadFile(c.LogPath(holder)); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(string(b), "took_over=true") {
		t.Errorf("%s's restart did not take over its pinned maps (the bpffs under bpf_dir):\n%s", r.Hosts[holder].Name, tail(b, 2000))
	}
	publish(members, 200)

	// 4. A member is replaced by the spare while the fast paths run.
	stop = load([]int{0, 1, 2})
	time.Sleep(300 * time.Millisecond)
	armedAtChange := armed(0)
	out, err := r.CommandContext(ctx, 0, exoBin, "roster", "replace", "--socket", c.Socket(0), "--timeout", "60s", "4", "5").CombinedOutput()
	if err != nil {
		stop()
		t.Fatalf("exo roster replace 4 5: %v\n%s", err, out)
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	final := []int{0, 1, 2, 3, 5}
	publish(final, 200)

	// The checks: the members' streams, the acknowledgements, the fast
	// paths' books.
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	delivered, violations := c.CheckAckedAt(ctx, final, acked)
	if len(violations) > 0 {
		t.Fatalf("violations: %v", violations)
	}
	if st, err := c.Status(ctx, 4); err != nil || !st.Removed {
		t.Fatalf("E after its replacement: %+v %v", st, err)
	}
	for _, i := range final {
		st, err := c.Status(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if st.Token == nil {
			t.Fatalf("host %s: no token status", r.Hosts[i].Name)
		}
		if st.Token.Desyncs != 0 || st.Token.Fenced != 0 || st.Token.IsFenced {
			t.Errorf("host %s: desyncs %d, unlogged sends %d, fenced %v", r.Hosts[i].Name, st.Token.Desyncs, st.Token.Fenced, st.Token.IsFenced)
		}
		if !slices.Equal(st.Roster, final) {
			t.Errorf("host %s: roster %v, want %v", r.Hosts[i].Name, st.Roster, final)
		}
	}
	t.Logf("%d acknowledged messages, all at their positions at the members %v (%d delivered); fast path armed when the roster change came: %v",
		n, final, delivered, armedAtChange)
}
