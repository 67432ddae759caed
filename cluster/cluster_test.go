package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/driver/xdp"
	"github.com/exo-rack/exo/lab"
)

var exoBin string

// exoFPGABin is exo built with -tags fpgasim, or "" when the simulated
// engine has not been built.
var exoFPGABin string

func TestMain(m *testing.M) {
	if os.Getenv("EXO_FETCHER_CONFIG") != "" {
		// A helper process (TestFetcherProcess): no exo to build.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "exo-cluster-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exoBin = filepath.Join(dir, "exo")
	if out, err := exec.Command("go", "build", "-o", exoBin, "../cmd/exo").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building exo: %v\n%s", err, out)
		os.Exit(1)
	}
	// The simulated FPGA engine needs a cgo build against the Verilated
	// model (tools/build-fpga-sim.sh); without it the fpga-sim tests skip.
	if _, err := os.Stat("../driver/fpga/obj_vl/libverilated.a"); err == nil {
		bin := filepath.Join(dir, "exo-fpgasim")
		cmd := exec.Command("go", "build", "-tags", "fpgasim", "-o", bin, "../cmd/exo")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building exo -tags fpgasim: %v\n%s", err, out)
			os.Exit(1)
		}
		exoFPGABin = bin
	}
	if b := os.Getenv("EXO_CLUSTER_BIN"); b != "" {
		// Another build of exo (an older commit, to show that a
		// regression test fails there).
		exoBin = b
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// rack brings up a lab rack of n hosts for one test, or skips with the
// reason when this machine cannot (not root, or the kernel refuses
// namespaces).
func rack(t *testing.T, n int) *lab.Rack {
	t.Helper()
	if err := lab.CheckRoot(); err != nil {
		t.Skipf("needs root for network namespaces: %v", err)
	}
	prefix := fmt.Sprintf("ct%d", os.Getpid()%100000)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := lab.Up(ctx, lab.Options{Prefix: prefix, Hosts: n, Force: true})
	if err != nil {
		t.Skipf("the kernel refused the lab rack: %v", err)
	}
	t.Cleanup(func() {
		if err := lab.Down(context.Background(), prefix); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	return r
}

func start(t *testing.T, r *lab.Rack) *Cluster {
	t.Helper()
	return startWith(t, r, nil)
}

// TestRack100k: a 5-host lab rack on real raw frames; 100k messages
// published from all hosts concurrently; every host delivers the identical
// sequence, nothing missing, nothing twice.
func TestRack100k(t *testing.T) { rack100k(t, "software") }

// TestRack100kXDP is TestRack100k with every daemon's XDP program in
// front of its socket (offload "xdp"): the same checks, and the programs
// must have accepted frames in the kernel.
func TestRack100kXDP(t *testing.T) {
	requireXDP(t)
	rack100k(t, "xdp")
}

// TestRack100kToken is TestRack100k in token mode (xdp_token on: the XDP
// programs send the hosts' frames, docs/token.md).
func TestRack100kToken(t *testing.T) {
	requireXDP(t)
	rack100k(t, "xdp-token")
}

// TestRack100kAFXDP is TestRack100k with offload "xdp" delivering the
// passed frames through AF_XDP sockets (xdp_delivery "afxdp").
func TestRack100kAFXDP(t *testing.T) {
	requireXDP(t)
	rack100k(t, "xdp-afxdp")
}

// withOffload is WithOffload for a mode the test names (a bad one fails
// the build of the hook: a panic).
func withOffload(mode string) func(*daemon.Config) {
	h, err := WithOffload(mode)
	if err != nil {
		panic(err)
	}
	return h
}

// requireXDP skips, saying why, when this kernel cannot load the XDP
// program (not root is rack's skip).
func requireXDP(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("XDP offload test skipped: needs root (CAP_BPF, CAP_NET_ADMIN); run as root, CI does")
	}
	p, err := xdp.Load()
	if err != nil {
		t.Skipf("XDP offload test skipped: the kernel refused the XDP program: %v", err)
	}
	p.Close()
}

// checkOffloadWorked fails the test unless every host's fast path
// accepted frames itself, and logs its counters.
func checkOffloadWorked(t *testing.T, c *Cluster, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		st, err := c.Status(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		if st.Offload == nil {
			t.Fatalf("host %d reports no offload", i)
		}
		if c.opt.Config != nil {
			var probe daemon.Config
			c.opt.Config(&probe)
			if probe.XDPDelivery == "afxdp" && st.Offload.Counters["AFXDP_FRAMES"] == 0 {
				t.Fatalf("host %d: no frame came through the AF_XDP sockets: %+v", i, st.Offload)
			}
		}
		if st.Offload.Counters["ACCEPT"] == 0 {
			t.Fatalf("host %d: the %s fast path accepted no frame: %+v", i, st.Offload.Mode, st.Offload)
		}
		// An inline engine sees exactly the frames the core's shadow of it
		// sees, from the same state: a different ACCEPT decision is a
		// difference between the RTL and the Go rule on live traffic.
		if st.Offload.Differs != 0 {
			t.Errorf("host %d: the %s engine and the Go rule disagreed on %d frames", i, st.Offload.Mode, st.Offload.Differs)
		}
		t.Logf("host %d %s: %d state writes, %d dropped inline, counters %v", i, st.Offload.Mode, st.Offload.Pushes, st.Offload.Drops, st.Offload.Counters)
		if tk := st.Token; tk != nil {
			t.Logf("host %d token mode: %+v", i, *tk)
			if tk.Desyncs != 0 || tk.Fenced != 0 {
				t.Errorf("host %d: the fast path and the core disagreed on %d frames; %d frames it sent could not be logged", i, tk.Desyncs, tk.Fenced)
			}
			if tk.Sent == 0 {
				t.Errorf("host %d: token mode, but the fast path sent no frame", i)
			}
			// The FPGA engine's Go twin (fpga.Token): every frame the
			// engine handled, and every halted state, against
			// exo.Engine.Step on the same state.
			if n, ok := tk.Kernel["RULE_CHECKED"]; ok {
				if n == 0 || tk.Kernel["RULE_DIFFERS"] != 0 || tk.Kernel["STATE_DIFFERS"] != 0 {
					t.Errorf("host %d: the engine and the Go rule differed on %d of %d frames, %d states at a halt",
						i, tk.Kernel["RULE_DIFFERS"], n, tk.Kernel["STATE_DIFFERS"])
				}
				if tk.Kernel["TX"] == 0 {
					t.Errorf("host %d: the engine sent no frame: %v", i, tk.Kernel)
				}
			}
		}
	}
}

// TestRack100kFPGASim is TestRack100k with every daemon running its
// received frames through the simulated FPGA engine (offload "fpga-sim").
func TestRack100kFPGASim(t *testing.T) {
	requireFPGASim(t)
	rack100k(t, "fpga-sim")
}

// TestRack100kFPGASimToken is TestRack100k in token mode on the
// simulated FPGA engines (fpga_token on: each daemon's engine answers its
// predecessor's frame with the host's next frame, docs/token.md section
// 7): the same checks, and on every frame the engine and the Go rule
// agreed (checkOffloadWorked).
func TestRack100kFPGASimToken(t *testing.T) {
	requireFPGASim(t)
	rack100k(t, "fpga-sim-token")
}

// requireFPGASim skips, saying why, when the simulated engine is not built.
func requireFPGASim(t *testing.T) {
	t.Helper()
	if exoFPGABin == "" {
		t.Skip("fpga-sim test skipped: the Verilated engine is not built: run tools/build-fpga-sim.sh (tools/test.sh does)")
	}
}

func rack100k(t *testing.T, offload string) {
	r := rack(t, 5)
	c := startWith(t, r, withOffload(offload))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const perHost = 20000
	all := []int{0, 1, 2, 3, 4}
	var streams [][]client.Message
	var streamsErr error
	collected := make(chan struct{})
	go func() {
		streams, streamsErr = c.Collect(ctx, all, 5*perHost)
		close(collected)
	}()
	res, err := c.Publish(ctx, Load{Hosts: all, PerHost: perHost, Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	<-collected
	if streamsErr != nil {
		t.Fatal(streamsErr)
	}
	if res.Failed > 0 {
		t.Fatalf("%d publishes failed: %v", res.Failed, res.Errors)
	}
	if err := Compare(streams); err != nil {
		t.Fatal(err)
	}
	seen := map[[2]uint64]bool{}
	for _, m := range streams[0] {
		seen[[2]uint64{binary.BigEndian.Uint64(m.Payload), binary.BigEndian.Uint64(m.Payload[8:])}] = true
	}
	for h := 0; h < 5; h++ {
		for k := 0; k < perHost; k++ {
			if !seen[[2]uint64{uint64(h), uint64(k)}] {
				t.Fatalf("message %d of host %d missing", k, h)
			}
		}
	}
	if offload != "software" {
		checkOffloadWorked(t, c, 5)
	}
	t.Logf("offload %s: 100k messages: %.0f agreed msgs/s, publish-to-agreed p50=%dus p99=%dus p999=%dus max=%dus",
		offload, res.Rate(), res.Latency.ValueAtQuantile(50), res.Latency.ValueAtQuantile(99), res.Latency.ValueAtQuantile(99.9), res.Latency.Max())
}

// TestRackKill9: kill -9 one daemon mid-run; the other four keep agreeing
// (the dead host is skipped in token order; the majority stays 3) and end
// with identical logs. Reports the time until agreement moved again.
func TestRackKill9(t *testing.T) {
	r := rack(t, 5)
	c := start(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	live := []int{0, 1, 2, 3}
	if _, err := c.Publish(ctx, Load{Hosts: []int{0, 1, 2, 3, 4}, PerHost: 500, Size: 64}); err != nil {
		t.Fatal(err)
	}
	before, err := c.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	loadDone := make(chan error, 1)
	go func() {
		_, err := c.Publish(ctx, Load{Hosts: live, PerHost: 3000, Size: 64, Window: 16, Round: 1})
		loadDone <- err
	}()
	time.Sleep(200 * time.Millisecond)
	st0, _ := c.Status(ctx, 0)
	killed := time.Now()
	if err := c.Kill(4); err != nil {
		t.Fatal(err)
	}
	// Agreement moving again: the agreement pointer of host A passes where
	// it was at the kill by at least a full rotation.
	var moved time.Duration
	for {
		st, err := c.Status(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.Agreed > st0.Agreed+20 {
			moved = time.Since(killed)
			break
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("agreement did not move within 30s of the kill (agreed %d, was %d)", st.Agreed, st0.Agreed)
		}
		time.Sleep(time.Millisecond)
	}
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}
	want := 5*500 + 4*3000
	s, err := c.Collect(ctx, live, want)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare(s); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Status(ctx, 0)
	t.Logf("kill -9 of E at agreed=%d: agreement moved again after %v; agreed %d -> %d; E skipped: %v",
		st0.Agreed, moved, before.Agreed, st.Agreed, st.Skipped)

	// E comes back without its state (--join): it rejoins through a view
	// change of its own, receives the log, is re-admitted, and delivers the
	// same stream as everyone.
	restarted := time.Now()
	if err := c.StartHost(ctx, 4, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, Load{Hosts: []int{0, 1, 2, 3, 4}, PerHost: 200, Size: 64, Round: 2}); err != nil {
		t.Fatal(err)
	}
	want += 5 * 200
	s, err = c.Collect(ctx, []int{0, 1, 2, 3, 4}, want)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare(s); err != nil {
		t.Fatal(err)
	}
	st4, _ := c.Status(ctx, 4)
	t.Logf("E restarted with --join: back in epoch %d and publishing within %v; all 5 streams identical (%d messages)",
		st4.Epoch, time.Since(restarted), want)
}

// logsOnFailure registers a cleanup that, when the test failed, prints
// the tail of every daemon's log and, when EXO_TEST_LOGS names a
// directory, copies the whole logs there (a failure seen once in CI is
// read from them).
func logsOnFailure(t *testing.T, c *Cluster) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		keep := os.Getenv("EXO_TEST_LOGS")
		for i, h := range c.Rack.Hosts {
			b, err := os.ReadFile(c.LogPath(i))
			if err != nil {
				continue
			}
			t.Logf("log of %s (tail):\n%s", h.Name, tail(b, 3000))
			if keep != "" {
				dst := filepath.Join(keep, t.Name()+"-"+h.Name+".log")
				if err := os.WriteFile(dst, b, 0o644); err != nil {
					t.Logf("keeping the log of %s: %v", h.Name, err)
				}
			}
		}
	})
}
