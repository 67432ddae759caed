package top

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/internal/apitest"
)

// fixture is a fixed rack: A, B (the token holder, with an XDP fast
// path), C (behind, halted) and D (down), sampled twice half a second
// apart.
func fixture() ([]target, map[string]sample, []sample, time.Time) {
	t0 := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	t1 := t0.Add(500 * time.Millisecond)
	targets := []target{{"A", "/r/A.sock"}, {"B", "/r/B.sock"}, {"C", "/r/C.sock"}, {"D", "/r/D.sock"}}
	st := func(id int, app, agr uint64, holder int, in, out, deliv uint64, rejects map[string]uint64) *daemon.Status {
		s := &daemon.Status{ID: id, Hosts: 4, Epoch: 3, Append: app, Agreed: agr, Holder: holder, Delivered: deliv,
			Skipped: []int{}, Counters: map[string]uint64{"frames_in": in, "frames_out": out}}
		if id != 2 { // C's status has no detector (an older daemon): "-"
			s.Detector = daemon.DetectorStatus{TimeoutTicks: 4 + 2*id, TimeoutMs: float64(4+2*id) / 4}
		}
		for r, v := range rejects {
			s.Counters["rejects."+r] = v
		}
		return s
	}
	prev := map[string]sample{
		"/r/A.sock": {At: t0, St: st(0, 1000, 990, 1, 5000, 1000, 8000, map[string]uint64{"DUPLICATE": 10})},
		"/r/B.sock": {At: t0, St: st(1, 1001, 990, 1, 5100, 1010, 8000, nil)},
		"/r/C.sock": {At: t0, St: st(2, 900, 880, 0, 4000, 900, 7000, map[string]uint64{"GAP": 100, "DUPLICATE": 5})},
	}
	a := st(0, 1500, 1490, 1, 6000, 1250, 10000, map[string]uint64{"DUPLICATE": 12})
	b := st(1, 1502, 1490, 1, 6100, 1262, 10000, nil)
	b.Pending = 17
	floor := uint64(420)
	a.RackFloor, b.RackFloor = &floor, &floor
	a.Keys = &daemon.KeyStatus{SendPhase: 0}
	b.Keys = &daemon.KeyStatus{SendPhase: 0, Staged: true, Waiting: []int{2}}
	b.Offload = &daemon.OffloadStatus{Mode: "xdp", Pushes: 640, Counters: map[string]uint64{
		"ACCEPT": 5000, "GAP": 30, "DUPLICATE": 7, "BAD_GROUP": 40, "BAD_TAG": 2}} // GAP goes on to the core
	c := st(2, 1100, 1080, 0, 4400, 950, 7500, map[string]uint64{"GAP": 160, "DUPLICATE": 6})
	c.Halted, c.Epoch = true, 2
	prev["/r/C.sock"].St.Counters["fetched_entries"] = 3000
	c.Counters["fetched_entries"] = 5048 // catching up: 4096 entries/s
	cur := []sample{
		{At: t1, St: a},
		{At: t1, St: b},
		{At: t1, St: c},
		{At: t1, Err: &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}},
	}
	return targets, prev, cur, t1
}

// TestRender renders the fixed rack and compares the whole frame.
func TestRender(t *testing.T) {
	targets, prev, cur, now := fixture()
	snap := build(targets, prev, cur, now, 500*time.Millisecond)
	got := Render(snap)
	want := `exo top  2026-03-14 15:09:26  hosts 3/4 up  token at B  epoch 3  every 500ms
rack: agreed 4000 msgs/s  slowest lag 402 (C)  append 1502  floor 420  rejects 126/s
HOST  ID  ROLE     EPOCH HALT  KEY      APPEND      AGREED     LAG  QUEUE TIMEOUT     IN/s    OUT/s  AGREED/s  FETCH/s   REJ/s  TOP REJECT        OFFLOAD
A      0   member      3   no    0        1500        1490       2      0   1.0ms     2000      500      4000        0     4.0  DUPLICATE         -
B      1  *holder      3   no  0>1        1502        1490       0     17   1.5ms     2000      504      4000        0       0  -                 xdp dropped 49 (BAD_GROUP) writes 640
C      2   member      2  YES    -        1100        1080     402      0       -      800      100      1000     4096     122  GAP               -
D      -  down     connection refused (daemon not running)
`
	if got != want {
		t.Errorf("frame:\n%s\nwant:\n%s", got, want)
	}
	// The figures behind it.
	if h := snap.Hosts[1]; !h.TokenHolder || h.Role != "holder" || h.Offload == nil || h.Offload.Dropped != 49 || h.Offload.TopDrop != "BAD_GROUP" {
		t.Errorf("host B: %+v %+v", h, h.Offload)
	}
	if h := snap.Hosts[3]; h.Up || h.Role != "down" || h.Error == "" {
		t.Errorf("host D: %+v", h)
	}
	if tot := snap.Totals; tot.Up != 3 || tot.SlowestLag != 402 || tot.SlowestHost != "C" || tot.AgreedRate != 4000 {
		t.Errorf("totals: %+v", tot)
	}
}

// TestFirstSample: without an earlier sample there are no rates ("-"),
// a restarted daemon (counters went down) gives no negative rates, and
// skipped hosts are marked.
func TestFirstSample(t *testing.T) {
	targets, prev, cur, now := fixture()
	snap := build(targets, nil, cur, now, time.Second)
	for _, h := range snap.Hosts[:3] {
		if h.Rates || h.FramesIn != 0 {
			t.Errorf("host %s has rates without an earlier sample: %+v", h.Name, h)
		}
	}
	if out := Render(snap); !strings.Contains(out, "rack: agreed 0 msgs/s") || !strings.Contains(out, "\nA      0   member      3   no    0        1500        1490       2      0   1.0ms        -        -         -        -       -") {
		t.Errorf("first frame:\n%s", out)
	}
	prev["/r/A.sock"].St.Counters["frames_in"] = 1 << 40 // as if A restarted
	cur[1].St.Skipped = []int{2}
	snap = build(targets, prev, cur, now, time.Second)
	if h := snap.Hosts[0]; h.FramesIn != 0 || !h.Rates {
		t.Errorf("restarted host: %+v", h)
	}
	if h := snap.Hosts[2]; h.Role != "skipped" {
		t.Errorf("host C: role %q, want skipped", h.Role)
	}
}

// TestScreen: the terminal frame goes home, clears each line's end and
// the rest of the screen, and cuts lines to the width.
func TestScreen(t *testing.T) {
	got := screen("abcdef\nxy\n", 4)
	if want := "\x1b[Habcd\x1b[K\r\nxy\x1b[K\r\n\x1b[J"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// fakeDaemon answers the local API's Status request with a status whose
// counters grow at every request.
func fakeDaemon(t *testing.T, path string, id int) {
	t.Helper()
	var calls atomic.Uint64
	apitest.Listen(t, path, apitest.Status(func() any {
		n := calls.Add(1)
		return daemon.Status{ID: id, Hosts: 3, Epoch: 1, Append: 100 * n, Agreed: 100*n - 5, Holder: 1,
			Delivered: 1000 * n, Skipped: []int{}, Counters: map[string]uint64{"frames_in": 500 * n, "frames_out": 100 * n}}
	}))
}

// TestOnce reads one frame (text and JSON) of a cluster directory of two
// fake daemons and one stale socket.
func TestOnce(t *testing.T) {
	dir := apitest.Dir(t)
	fakeDaemon(t, filepath.Join(dir, "A.sock"), 0)
	fakeDaemon(t, filepath.Join(dir, "B.sock"), 1)
	stale, err := net.Listen("unix", filepath.Join(dir, "C.sock"))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // the file stays, nobody listens: connection refused

	o := Options{ClusterDir: dir, Interval: 50 * time.Millisecond}
	snap, err := Once(context.Background(), o)
	if err != nil {
		t.Fatalf("Once: %v", err)
	}
	out := Render(snap)
	lines := strings.Split(out, "\n")
	if len(lines) < 6 || !strings.HasPrefix(lines[3], "A ") || !strings.HasPrefix(lines[4], "B ") || !strings.HasPrefix(lines[5], "C ") {
		t.Fatalf("want rows A, B, C:\n%s", out)
	}
	if !strings.Contains(lines[4], "*holder") || !strings.Contains(lines[5], "down") || !strings.Contains(lines[1], "slowest lag") {
		t.Errorf("frame:\n%s", out)
	}

	// The JSON form reads back.
	snap, err = Once(context.Background(), o)
	if err != nil {
		t.Fatalf("Once: %v", err)
	}
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	snap = Snapshot{}
	if err := json.Unmarshal(b, &snap); err != nil {
		t.Fatalf("JSON: %v\n%s", err, b)
	}
	if len(snap.Hosts) != 3 || snap.Totals.Up != 2 || snap.Hosts[2].Up || !snap.Hosts[1].TokenHolder {
		t.Fatalf("JSON: %s", b)
	}
	for _, h := range snap.Hosts[:2] {
		// Each fake daemon's counters grow by 1000 delivered per request, and
		// the two requests are about 50ms apart.
		if !h.Rates || h.AgreedRate <= 0 || h.FramesIn <= 0 || h.Append == 0 {
			t.Errorf("host %s: %+v", h.Name, h)
		}
	}

	// No host answers: the frame says so.
	os.Remove(filepath.Join(dir, "A.sock"))
	os.Remove(filepath.Join(dir, "B.sock"))
	snap, err = Once(context.Background(), o)
	if err != nil || snap.Totals.Up != 0 || !strings.Contains(Render(snap), "down") {
		t.Errorf("no host up: err %v, frame:\n%s", err, Render(snap))
	}

	// Nothing to watch.
	empty := t.TempDir()
	if _, err := Once(context.Background(), Options{ClusterDir: empty, Interval: 50 * time.Millisecond}); !errors.Is(err, ErrNoSockets) {
		t.Errorf("empty directory: %v, want ErrNoSockets", err)
	}
}

// TestRunLines: without a terminal, Run prints one frame after the other
// (one JSON object per line with JSON) and a line "q" on its input quits.
func TestRunLines(t *testing.T) {
	dir := apitest.Dir(t)
	fakeDaemon(t, filepath.Join(dir, "A.sock"), 0)
	for _, jsonOut := range []bool{false, true} {
		in, keys := io.Pipe()
		out, frames := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- Run(context.Background(), Options{ClusterDir: dir, Interval: 20 * time.Millisecond}, View{In: in, Out: frames, JSON: jsonOut})
			frames.Close()
		}()
		sc := bufio.NewScanner(out)
		var lines []string
		for len(lines) < 10 && sc.Scan() {
			lines = append(lines, sc.Text())
		}
		go io.WriteString(keys, "q\n")
		for sc.Scan() { // until Run returns
		}
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		keys.Close()
		if jsonOut {
			var snap Snapshot
			if err := json.Unmarshal([]byte(lines[0]), &snap); err != nil || len(snap.Hosts) != 1 {
				t.Errorf("JSON line %q: %v", lines[0], err)
			}
			continue
		}
		all := strings.Join(lines, "\n")
		if !strings.HasPrefix(all, "exo top  ") || strings.Count(all, "exo top  ") < 2 || strings.Contains(all, "\x1b") {
			t.Errorf("frames:\n%q", all)
		}
	}
}

// TestTransfer: a host in a state transfer shows XFER in HALT.
func TestTransfer(t *testing.T) {
	targets, prev, cur, now := fixture()
	cur[2].St.Recovery.StateTransfer = true
	got := Render(build(targets, prev, cur, now, 500*time.Millisecond))
	var row string
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "C ") {
			row = l
		}
	}
	if !strings.Contains(row, " XFER ") {
		t.Fatalf("C's row %q: want XFER in HALT", row)
	}
}

// TestTransferETA: a host in a state transfer shows XFER and, from its
// fetch rate and where the transfer heads, the time it still takes, with
// its pace in force.
func TestTransferETA(t *testing.T) {
	targets, prev, cur, now := fixture()
	c := cur[2].St
	c.Recovery.StateTransfer, c.Recovery.TransferTo = true, c.Append+8192 // 4096 entries/s: 2 s
	c.Recovery.TransferPace = 12_500_000
	snap := build(targets, prev, cur, now, 500*time.Millisecond)
	if eta := snap.Hosts[2].TransferETA; eta != 2 || snap.Hosts[2].TransferPace != 12_500_000 {
		t.Fatalf("ETA %v s, pace %d B/s; want 2, 12500000", eta, snap.Hosts[2].TransferPace)
	}
	got := Render(snap)
	for _, want := range []string{"XFER", "xfer ETA 2s @12MB/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
}
