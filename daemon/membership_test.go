package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/exo"
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

// TestDaemonRosterDurable: after member 4 is removed and host 2 compacted
// its log past the switch, host 2 restarts from its durable log: it comes
// back with the roster [0 1 2 3] (the wal keeps the roster at the log's
// base: the configuration entry is no longer in the log), publishes, and
// hosts 0..3 deliver the same stream.
func TestDaemonRosterDurable(t *testing.T) {
	const n, per = 5, 200
	dir := t.TempDir()
	seg := broadcast.NewMemNetwork()
	var roster []Member
	for i := 0; i < n; i++ {
		roster = append(roster, Member{ID: i, MAC: fmt.Sprintf("02:e0:00:00:00:%02x", i+1), OOB: fmt.Sprintf("127.0.0.1:%d", 17700+i)})
	}
	keyFile := writeKey(t, dir, testGroupKey)
	oobs := make([]*memOOB, n)
	for i := range oobs {
		oobs[i] = &memOOB{id: uint8(i), all: oobs, in: make(chan exo.Message, 4096)}
	}
	r := &testRack{seg: seg, key: testGroupKey, roster: roster}
	cancels := make([]context.CancelFunc, n)
	dones := make([]chan error, n)
	start := func(i int) {
		sock := filepath.Join(dir, fmt.Sprintf("h%d.sock", i))
		cfg := &Config{Group: 7, ID: i, Interface: "mem0", Roster: roster, APISocket: sock, KeyFile: keyFile,
			DataDir: filepath.Join(dir, fmt.Sprintf("data%d", i)), KeepEntries: 1024}
		cfg.defaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		mac, _ := net.ParseMAC(roster[i].MAC)
		d, err := New(cfg, attach(t, seg, mac), oobs[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i], dones[i] = cancel, make(chan error, 1)
		go func() { dones[i] <- d.Run(ctx) }()
		for k := 0; ; k++ {
			c, err := client.Dial(ctx, sock)
			if err == nil {
				c.Close()
				break
			}
			if k > 200 {
				t.Fatalf("daemon socket %s never came up: %v", sock, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if len(r.sockets) <= i {
			r.sockets = append(r.sockets, sock)
		}
	}
	stop := func(i int) {
		cancels[i]()
		if err := <-dones[i]; err != nil {
			t.Errorf("daemon %d: %v", i, err)
		}
	}
	for i := 0; i < n; i++ {
		start(i)
	}
	t.Cleanup(func() {
		for i := range cancels {
			if cancels[i] != nil {
				stop(i)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	publish := func(host int, tag string) {
		c, err := client.Dial(ctx, r.sockets[host])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for k := 0; k < per; k++ {
			// A view change may drop a message not yet agreed (the API's
			// code 3, "publish again": on a loaded machine a takeover now
			// and then collides); what this test checks is the roster
			// across the restart and the streams.
			for {
				_, err := c.Publish(ctx, []byte(fmt.Sprintf("%s-%d", tag, k)))
				if errors.Is(err, client.ErrDropped) {
					continue
				}
				if err != nil {
					t.Fatalf("publish %s-%d at host %d: %v", tag, k, host, err)
				}
				break
			}
		}
	}
	publish(0, "before")
	r.propose(t, ctx, 0, client.RosterRemove, 4)
	r.waitRoster(t, ctx, []int{0, 1, 2, 3}, "[0 1 2 3]")
	publish(1, "after")
	// Grow the log until host 2 compacts past the switch: idle passes
	// alone (some 15 entries a second at the idle back-off) took over the
	// test's minute once lazy fsyncs left the rack faster and its log
	// shorter; filler messages do it in seconds.
	for fills := 0; ; fills++ {
		c, err := client.Dial(ctx, r.sockets[2])
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Status(ctx)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st["log_base"].(float64) > st["roster_from_seq"].(float64)+10 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("host 2 never compacted past the switch: %v", st)
		}
		publish(1, fmt.Sprintf("fill%d", fills))
	}
	stop(2)
	cancels[2] = nil
	start(2)
	if st := statusOf(t, ctx, r.sockets[2]); st.Roster != "[0 1 2 3]" || st.Removed {
		t.Fatalf("host 2 restarted from its log: %+v", st)
	}
	var from uint64
	{
		c, err := client.Dial(ctx, r.sockets[2])
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Status(ctx)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		from = uint64(st["agreement_pointer"].(float64))
	}
	publish(2, "restarted")
	last := fmt.Sprintf("restarted-%d", per-1)
	got := make([][]client.Message, 4)
	for i := range got {
		err := client.Subscribe(ctx, r.sockets[i], from, func(m client.Message) error {
			got[i] = append(got[i], m)
			if string(m.Payload) == last {
				return errDone
			}
			return nil
		})
		if !errors.Is(err, errDone) {
			t.Fatalf("host %d: %v after %d messages", i, err, len(got[i]))
		}
	}
	if len(got[0]) < per {
		t.Fatalf("%d messages from seq %d", len(got[0]), from)
	}
	sameStreams(t, got)
}
