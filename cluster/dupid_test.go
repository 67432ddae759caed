//go:build linux

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
)

// TestRackSecondDaemonRefused: on a 3-host rack with durable logs, a
// second `exo daemon` started in A's namespace with A's own config (the
// same data_dir) is refused at once: the error names the data_dir's LOCK
// file and the pid of the daemon that holds it, and says what to do. One
// with its own data_dir but A's API socket is refused as another daemon
// answering on that socket. A's daemon keeps running through both (same
// pid, publishes agreed at every host). Then A's daemon is killed with
// kill -9 and restarted: the kernel released its lock, the restart runs.
func TestRackSecondDaemonRefused(t *testing.T) {
	r := rack(t, 3)
	c := startWith(t, r, Durable(t.TempDir(), false))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := c.Config(0)
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Proc(0)
	second := func(path string) string {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
		defer scancel()
		out, err := r.CommandContext(sctx, 0, exoBin, "daemon", "--config", path).CombinedOutput()
		if sctx.Err() != nil {
			t.Fatalf("the second daemon (%s) was not refused: it ran for 20s:\n%s", path, out)
		}
		if err == nil {
			t.Fatalf("the second daemon (%s) exited 0:\n%s", path, out)
		}
		return string(out)
	}

	// 1. The same config: the same data_dir (and socket).
	out := second(c.configPath(0))
	lock := filepath.Join(cfg.DataDir, daemon.LockFile)
	for _, want := range []string{"data_dir " + cfg.DataDir, "is in use by another exo daemon", fmt.Sprintf("pid %d holds its lock %s", pid, lock), "stop the other daemon first"} {
		if !strings.Contains(out, want) {
			t.Errorf("the second daemon's error lacks %q:\n%s", want, out)
		}
	}
	t.Logf("a second daemon on A's data_dir: %s", strings.TrimSpace(out))

	// 2. Its own data_dir, A's API socket.
	cfg2 := cfg
	cfg2.DataDir = filepath.Join(t.TempDir(), "other-data")
	path2 := filepath.Join(t.TempDir(), "second.json")
	writeJSON(t, path2, cfg2)
	out = second(path2)
	if want := "another exo daemon answers on " + cfg.APISocket; !strings.Contains(out, want) {
		t.Errorf("the second daemon's error lacks %q:\n%s", want, out)
	}
	if _, err := os.Stat(cfg2.DataDir); err == nil {
		t.Errorf("the refused daemon created its data_dir %s", cfg2.DataDir)
	}
	t.Logf("a second daemon on A's API socket: %s", strings.TrimSpace(out))

	// A's daemon runs on, untouched.
	if c.Proc(0) != pid {
		t.Fatalf("A's daemon changed: pid %d, was %d", c.Proc(0), pid)
	}
	all := []int{0, 1, 2}
	if _, err := c.Publish(ctx, Load{Hosts: all, PerHost: 200, Size: 64}); err != nil {
		t.Fatal(err)
	}
	// kill -9 releases the lock: the restart takes it.
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	if err := c.StartHost(ctx, 0, false); err != nil {
		t.Fatalf("restart after kill -9: %v", err)
	}
	if _, err := c.Publish(ctx, Load{Hosts: all, PerHost: 200, Size: 64, Round: 1}); err != nil {
		t.Fatal(err)
	}
	s, err := c.Collect(ctx, all, 3*400)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare(s); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRackDuplicateID: a lab rack of 6 hosts, A..E members and F a spare
// whose daemon is stopped, under load from A, D and E (software path).
//
//  1. A second daemon for member 2 (C) starts in F's namespace on a copy
//     of C's durable log (a cloned machine's disk) and of C's config,
//     whose roster entry for C was edited to F's MAC and OOB address (and
//     F's own entry dropped: what an operator who copied C's config and
//     "fixed" the errors at start would run; the daemon refuses a MAC
//     that is not its interface's). It hears C's frames under its own
//     member id: it raises the alarm (status, log line) and sends nothing
//     from then on; if C heard it first, C has stopped sending too.
//  2. With that daemon stopped, frames under member 1 (B) sealed with the
//     group key are sent from F's port (a second sender with B's id): B
//     raises the alarm (status JSON and text, metrics) and stops sending.
//
// Throughout, the rest of the rack keeps agreeing: the load completes, A,
// D and E (and C) deliver identical streams, no SAFETY event.
func TestRackDuplicateID(t *testing.T) {
	r := rack(t, 6)
	const metricsAddr = "127.0.0.1:9477" // each host has its own loopback
	durable := Durable(t.TempDir(), false)
	c := startWith(t, r, func(cfg *daemon.Config) { cfg.Hosts = 5; cfg.MetricsAddr = metricsAddr; durable(cfg) })
	c.opt.AllowDuplicateID = true // B's alarm (and maybe C's) is the point
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const spare = 5
	if err := c.Kill(spare); err != nil {
		t.Fatal(err)
	}
	publishers := []int{0, 3, 4}
	const perHost = 3000
	type loadOut struct {
		res LoadResult
		err error
	}
	startLoad := func(round int) chan loadOut {
		ch := make(chan loadOut, 1)
		go func() {
			res, err := c.Publish(ctx, Load{Hosts: publishers, PerHost: perHost, Size: 64, Window: 16, Round: round})
			ch <- loadOut{res, err}
		}()
		return ch
	}
	framesOut := func(i int) uint64 {
		t.Helper()
		st, err := c.Status(ctx, i)
		if err != nil {
			t.Fatalf("status of %s: %v", r.Hosts[i].Name, err)
		}
		return st.Counters["frames_out"]
	}
	// silent fails unless host i sends no frame for a second.
	silent := func(i int, sock string) {
		t.Helper()
		st0 := statusAt(t, ctx, sock)
		time.Sleep(time.Second)
		st1 := statusAt(t, ctx, sock)
		if st1.Counters["frames_out"] != st0.Counters["frames_out"] {
			t.Errorf("%s sent %d frames in the second after its alarm", r.Hosts[i].Name, st1.Counters["frames_out"]-st0.Counters["frames_out"])
		}
	}

	// 1. A second daemon as C on F.
	load := startLoad(0)
	time.Sleep(300 * time.Millisecond)
	const victim = 2
	cfg, err := c.Config(victim)
	if err != nil {
		t.Fatal(err)
	}
	f := r.Hosts[spare]
	cfg.Interface = f.Ifname
	cfg.Roster[victim].MAC = f.MAC.String()
	cfg.Roster[victim].OOB = net.JoinHostPort(f.OOBAddr.String(), "7700")
	cfg.Roster = cfg.Roster[:spare] // F's own entry would hold F's MAC twice
	cfg.APISocket = filepath.Join(c.opt.Dir, "intruder.sock")
	cfg.DataDir = filepath.Join(c.opt.Dir, "intruder-data")
	cfgPath := filepath.Join(c.opt.Dir, "intruder.json")
	writeJSON(t, cfgPath, cfg)
	logPath := filepath.Join(c.opt.Dir, "intruder.log")
	var intruder *exec.Cmd
	var exited chan error
	stopIntruder := func(sig syscall.Signal) error {
		if intruder == nil {
			return nil
		}
		intruder.Process.Signal(sig)
		err := <-exited
		intruder = nil
		return err
	}
	defer stopIntruder(syscall.SIGKILL)
	// The copy's log is of C's epoch when it is taken: its daemon hears
	// C's frames of that epoch. One copied just before the rack moved on
	// to a later epoch (view changes are frequent on a loaded machine) is
	// behind an epoch it cannot fetch (the answers go to C's OOB
	// address): it hears no frame of its own epoch, so it raises nothing
	// (operator.md, "What it does not catch"); then a fresh copy goes, as
	// soon as the copy hears a later epoch's frame (it can no longer hear
	// one of its own: in a loaded CI run the rack went through some 20
	// epochs in each of 5 tries that waited 10 s).
	var ist daemon.Status
	const tries = 12
	for try := 0; ist.DuplicateID == nil; try++ {
		if try == tries {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the second daemon as C raised no alarm in %d tries:\n%s", tries, tail(b, 2000))
		}
		os.RemoveAll(cfg.DataDir)
		os.Remove(cfg.APISocket)
		cst, err := c.Config(victim)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", cst.DataDir, cfg.DataDir).CombinedOutput(); err != nil {
			t.Fatalf("copying C's data_dir: %v: %s", err, out)
		}
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		intruder = r.CommandContext(ctx, spare, exoBin, "daemon", "--config", cfgPath)
		intruder.Stdout, intruder.Stderr = logf, logf
		if err := intruder.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close() // the child has it
		exited = make(chan error, 1)
		go func(cmd *exec.Cmd, ch chan error) { ch <- cmd.Wait() }(intruder, exited)
		for deadline := time.Now().Add(10 * time.Second); ; {
			select {
			case err := <-exited:
				intruder = nil
				b, _ := os.ReadFile(logPath)
				t.Fatalf("the second daemon as C exited (%v):\n%s", err, b)
			default:
			}
			st, err := statusBySocket(ctx, cfg.APISocket)
			if err == nil && st.DuplicateID != nil {
				ist = st
				break
			}
			if err == nil && st.Recovery.BehindEpoch {
				t.Logf("try %d: the copy of C's log is of epoch %d, the rack moved on to %d: again", try, st.Epoch, st.Recovery.RackEpoch)
				stopIntruder(syscall.SIGKILL)
				break
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(logPath)
				t.Fatalf("the second daemon as C raised no alarm in 10s, not behind the rack (status: %v, %+v):\n%s", err, st.Recovery, tail(b, 2000))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	a := ist.DuplicateID
	if a.MemberID != victim || a.MAC != r.Hosts[victim].MAC.String() || !a.StoppedSending {
		t.Fatalf("the second daemon's duplicate_id: %+v", a)
	}
	t.Logf("the second daemon as C: %s (epoch %d, seq %d)", a.Message, a.Epoch, a.Seq)
	silent(spare, cfg.APISocket)
	t.Logf("the second daemon as C sent %d frames before its alarm (a restart from a log may retransmit its newest entry, or send the next one before it hears C)",
		statusAt(t, ctx, cfg.APISocket).Counters["frames_out"])
	cst, err := c.Status(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	if cst.DuplicateID != nil {
		// C heard the copy first: it must be silent too.
		t.Logf("C raised the alarm as well: %s", cst.DuplicateID.Message)
		silent(victim, c.Socket(victim))
	}
	if err := stopIntruder(syscall.SIGTERM); err != nil {
		t.Errorf("the second daemon as C on SIGTERM: %v", err)
	}
	b, _ := os.ReadFile(logPath)
	if n := strings.Count(string(b), "DUPLICATE MEMBER ID"); n != 1 {
		t.Errorf("the second daemon logged %d DUPLICATE MEMBER ID lines, want 1:\n%s", n, tail(b, 2000))
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "DUPLICATE MEMBER ID") {
			t.Logf("its log: %s", line)
		}
	}
	lo := <-load
	if lo.err != nil || lo.res.Failed > 0 {
		t.Fatalf("load during the second daemon as C: %v, %d failed: %v", lo.err, lo.res.Failed, lo.res.Errors)
	}

	// 2. Frames under B's member id from F's port.
	load = startLoad(1)
	time.Sleep(300 * time.Millisecond)
	const bHost = 1
	key, err := daemon.ReadKey(c.keyPath())
	if err != nil {
		t.Fatal(err)
	}
	fk := daemon.FrameKey(key)
	var bst daemon.Status
	// Frames of B's epoch, ahead of its log: sent again with the epoch
	// read anew should a view change come in between.
	for try := 0; bst.DuplicateID == nil; try++ {
		if try == 10 {
			t.Fatalf("B raised no alarm after 10 rounds of frames under its member id from %s (its epoch %d)", f.MAC, bst.Epoch)
		}
		if bst, err = c.Status(ctx, bHost); err != nil {
			t.Fatal(err)
		}
		var frames [][]byte
		for k := 0; k < 8; k++ {
			rec, _ := exo.AppendRecord(nil, []byte(fmt.Sprintf("a second sender as B, %d", k)))
			fr := exo.Frame{Type: exo.FrameData, Group: cfg.Group, Epoch: bst.Epoch, Sender: uint8(bst.Position), Seq: bst.Append + 100 + uint64(k),
				History: []uint8{0, 4}, Count: 1, Payload: rec}
			fr.Seal(fk)
			b, err := fr.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			frames = append(frames, ethFrame(f.MAC, exo.EtherType, b))
		}
		if _, err := sendEthernet(r, spare, frames, 1); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Second); bst.DuplicateID == nil && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			if bst, err = c.Status(ctx, bHost); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a := bst.DuplicateID; a.MemberID != bHost || a.MAC != f.MAC.String() || a.OwnMAC || !a.StoppedSending {
		t.Fatalf("B's duplicate_id: %+v", a)
	}
	silent(bHost, c.Socket(bHost))
	txt, err := exec.CommandContext(ctx, exoBin, "status", "--socket", c.Socket(bHost)).CombinedOutput()
	if err != nil || !strings.Contains(string(txt), "ALARM: another host sends as member id 1 from MAC "+f.MAC.String()) {
		t.Errorf("exo status at B: %v\n%s", err, txt)
	}
	t.Logf("exo status at B: %s", strings.SplitN(string(txt), "\n", 2)[0])
	m, err := scrapeMetrics(r, bHost, metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	if m["exo_duplicate_id_alarm"] != 1 || m["exo_duplicate_id_frames_total"] < 1 {
		t.Errorf("B's metrics: exo_duplicate_id_alarm %v, exo_duplicate_id_frames_total %v", m["exo_duplicate_id_alarm"], m["exo_duplicate_id_frames_total"])
	}
	for _, i := range []int{0, 2, 3, 4} {
		if st, err := c.Status(ctx, i); err != nil || (st.DuplicateID != nil && i != victim) {
			t.Errorf("%s: %v, duplicate_id %+v", r.Hosts[i].Name, err, st.DuplicateID)
		}
	}
	lo = <-load
	if lo.err != nil || lo.res.Failed > 0 {
		t.Fatalf("load after B's alarm: %v, %d failed: %v", lo.err, lo.res.Failed, lo.res.Errors)
	}
	fb := framesOut(bHost)
	t.Logf("B: %s; %d frames, %d OOB messages withheld, frames_out %d", bst.DuplicateID.Message, bst.DuplicateID.HeldFrames, bst.DuplicateID.HeldMessages, fb)

	// The rest of the rack agreed on one stream.
	check := []int{0, 3, 4}
	if cst.DuplicateID == nil {
		check = append(check, victim)
	}
	want := 2 * len(publishers) * perHost
	s, err := c.Collect(ctx, check, want)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare(s); err != nil {
		t.Fatal(err)
	}
	if ev, err := c.SafetyEvents(); err != nil || len(ev) > 0 {
		t.Fatalf("SAFETY events: %v %v", err, ev)
	}
	t.Logf("hosts %v delivered the same %d messages", check, want)
}

// statusAt is the status of the daemon on sock.
func statusAt(t *testing.T, ctx context.Context, sock string) daemon.Status {
	t.Helper()
	st, err := statusBySocket(ctx, sock)
	if err != nil {
		t.Fatalf("status on %s: %v", sock, err)
	}
	return st
}

func statusBySocket(ctx context.Context, sock string) (daemon.Status, error) {
	var st daemon.Status
	cl, err := client.Dial(ctx, sock)
	if err != nil {
		return st, err
	}
	defer cl.Close()
	raw, err := cl.StatusRaw(ctx)
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(raw, &st)
	return st, err
}
