package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/lab"
)

// TestRackReplaceMember: a lab rack of 6 hosts whose config makes A..E the
// first roster and F a spare member (starts as no member). Under load from
// A..D, `exo roster replace 4 5` (run in A's namespace) removes E and adds
// F; then A..D and F publish too. A, B, C, D and F deliver the same stream,
// every acknowledged message exactly once.
func TestRackReplaceMember(t *testing.T) { replaceMember(t, "software") }

// TestRackReplaceMemberXDP: the same with the XDP program in front of every
// daemon (its MAC table follows the roster).
func TestRackReplaceMemberXDP(t *testing.T) {
	requireXDP(t)
	replaceMember(t, "xdp")
}

func replaceMember(t *testing.T, offload string) {
	if err := lab.CheckRoot(); err != nil {
		t.Skipf("needs root for network namespaces: %v", err)
	}
	prefix := fmt.Sprintf("mb%d", os.Getpid()%100000)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := lab.Up(ctx, lab.Options{Prefix: prefix, Hosts: 6, Force: true})
	if err != nil {
		t.Skipf("the kernel refused the lab rack: %v", err)
	}
	t.Cleanup(func() {
		if err := lab.Down(context.Background(), prefix); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	c := startWith(t, r, func(cfg *daemon.Config) { cfg.Hosts = 5; withOffload(offload)(cfg) })
	roster := func(i int) ([]int, bool) {
		st, err := c.Status(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		return st.Roster, st.ChangeInFlight
	}
	if got, _ := roster(5); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("F's roster at start: %v", got)
	}
	if st, _ := c.Status(ctx, 5); !st.Removed {
		t.Fatalf("F is a member at start: %+v", st)
	}
	const perHost = 10000
	acked := 0
	loadDone := make(chan error, 1)
	go func() {
		res, err := c.Publish(ctx, Load{Hosts: []int{0, 1, 2, 3}, PerHost: perHost, Size: 64, Window: 16, Round: 1})
		acked = int(res.Published)
		loadDone <- err
	}()
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	out, err := r.CommandContext(ctx, 0, exoBin, "roster", "replace", "--socket", c.Socket(0), "--timeout", "60s", "4", "5").CombinedOutput()
	if err != nil {
		t.Fatalf("exo roster replace 4 5: %v\n%s", err, out)
	}
	took := time.Since(t0)
	select {
	case err := <-loadDone:
		t.Fatalf("the load ended (%v) before the replace did: not under load; make it longer", err)
	default:
	}
	want := []int{0, 1, 2, 3, 5}
	for _, i := range want {
		for {
			got, inflight := roster(i)
			if slices.Equal(got, want) && !inflight {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("host %s never reached the roster %v (has %v)", r.Hosts[i].Name, want, got)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}
	if acked != 4*perHost {
		t.Fatalf("%d of %d messages acknowledged", acked, 4*perHost)
	}
	if _, err := c.Publish(ctx, Load{Hosts: want, PerHost: 300, Size: 64, Window: 16, Round: 2}); err != nil {
		t.Fatal(err)
	}
	total := 4*perHost + 5*300
	s, err := c.Collect(ctx, want, total)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare(s); err != nil {
		t.Fatal(err)
	}
	for j, i := range want {
		if len(s[j]) != total {
			t.Fatalf("host %s delivered %d messages, want %d", r.Hosts[i].Name, len(s[j]), total)
		}
		if st, _ := c.Status(ctx, i); st.Delivered != uint64(total) {
			t.Fatalf("host %s delivered %d messages in all, want %d", r.Hosts[i].Name, st.Delivered, total)
		}
	}
	if st, _ := c.Status(ctx, 4); !st.Removed {
		t.Fatalf("E after its removal: %+v", st)
	}
	t.Logf("E replaced by F under load in %v (%s); A-D and F delivered the same %d messages", took, out, total)
}
