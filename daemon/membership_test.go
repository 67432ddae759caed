package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
)

// rosterStatus is the membership part of a host's status.
type rosterStatus struct {
	Roster   string
	Removed  bool
	InFlight bool
}

func statusOf(t *testing.T, ctx context.Context, sock string) rosterStatus {
	t.Helper()
	c, err := client.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rosterStatus{Roster: fmt.Sprint(st["roster"]), Removed: st["removed"] == true, InFlight: st["change_in_flight"] == true}
}

// waitRoster waits until every host of hosts reports roster want with no
// change in flight.
func (r *testRack) waitRoster(t *testing.T, ctx context.Context, hosts []int, want string) {
	t.Helper()
	for {
		ok := true
		var last rosterStatus
		for _, i := range hosts {
			last = statusOf(t, ctx, r.sockets[i])
			if last.Roster != want || last.InFlight {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("roster %s never reached at %v (last %+v)", want, hosts, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// propose proposes a roster change at host i, retrying while another is in
// flight.
func (r *testRack) propose(t *testing.T, ctx context.Context, i int, op, member uint8) {
	t.Helper()
	c, err := client.Dial(ctx, r.sockets[i])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for {
		err := c.ProposeRoster(ctx, op, member)
		if err == nil {
			return
		}
		if !errors.Is(err, client.ErrChangeInFlight) {
			t.Fatalf("propose %d %d at host %d: %v", op, member, i, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDaemonRosterRemoveAdd: a 5-host rack under load removes member 4 and
// adds it back; every host delivers the same stream, every acknowledged
// message exactly once.
func TestDaemonRosterRemoveAdd(t *testing.T) { rosterScenario(t, 5, 4, 4, []int{0, 1, 2, 3, 4}) }

// TestDaemonRosterReplace: member 4 is replaced by member 5, a spare listed
// in the config that starts as no member and catches up once added; the
// members at the end deliver the same stream.
func TestDaemonRosterReplace(t *testing.T) { rosterScenario(t, 6, 4, 5, []int{0, 1, 2, 3, 5}) }

// rosterScenario runs a rack of known members 0..n-1 (first roster 0..4)
// under load from members 0..3, removes member out, adds member in, and
// checks the streams of the hosts check.
func rosterScenario(t *testing.T, n int, out, in uint8, check []int) {
	r := startRackHosts(t, n, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var mu sync.Mutex
	acked := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ { // the publishers stay members
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(ctx, r.sockets[i])
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("h%d-m%d", i, k)
				for {
					_, err := c.Publish(ctx, []byte(p))
					if err == nil {
						break
					}
					if errors.Is(err, client.ErrDropped) || errors.Is(err, client.ErrQueueFull) {
						time.Sleep(time.Millisecond)
						continue
					}
					t.Errorf("host %d publish %s: %v", i, p, err)
					return
				}
				mu.Lock()
				acked[p]++
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	r.propose(t, ctx, 0, client.RosterRemove, out)
	r.waitRoster(t, ctx, []int{0, 1, 2, 3}, "[0 1 2 3]")
	if st := statusOf(t, ctx, r.sockets[out]); !st.Removed {
		t.Fatalf("host %d after its removal: %+v", out, st)
	}
	time.Sleep(300 * time.Millisecond)
	r.propose(t, ctx, 1, client.RosterAdd, in)
	want := fmt.Sprint(check)
	r.waitRoster(t, ctx, check, want)
	if st := statusOf(t, ctx, r.sockets[in]); st.Removed {
		t.Fatalf("host %d after it was added: %+v", in, st)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	mu.Lock()
	total := len(acked)
	mu.Unlock()
	if total < 100 {
		t.Fatalf("only %d messages acknowledged: no load", total)
	}
	sub := *r
	sub.sockets = nil
	for _, i := range check {
		sub.sockets = append(sub.sockets, r.sockets[i])
	}
	got := sub.collect(t, ctx, total)
	if t.Failed() {
		return
	}
	sameStreams(t, got)
	seen := map[string]bool{}
	for _, m := range got[0] {
		if seen[string(m.Payload)] {
			t.Fatalf("%q delivered twice", m.Payload)
		}
		seen[string(m.Payload)] = true
		if acked[string(m.Payload)] != 1 {
			t.Fatalf("%q delivered but acknowledged %d times", m.Payload, acked[string(m.Payload)])
		}
	}
	// Nothing beyond them either: every host delivered exactly total.
	for i, sock := range sub.sockets {
		c, err := client.Dial(ctx, sock)
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Status(ctx)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := st["messages_delivered"].(float64); int(d) != total {
			t.Fatalf("host %d delivered %v messages, want %d", i, st["messages_delivered"], total)
		}
	}
	t.Logf("%d messages, the same stream at hosts %v", total, check)
}
