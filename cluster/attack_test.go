package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/lab"
)

// TestRackAttack: while hosts A, B and C publish, the namespaces of D and
// E inject forged frames (a made-up tag), frames of another group, frames
// claiming a roster id from a foreign MAC (sealed with the real key: an
// insider on the wrong port) and replays of captured frames, together far
// above the legitimate frame rate. Every host must still agree on the
// complete log, and every injected frame must be counted at hosts A-C
// (which inject nothing) under its reason. Software path.
//
// Not in CI by default (EXO_ATTACK_SOFTWARE=1 runs it): on a 2-vCPU VM the
// software path passes it when the machine is otherwise idle (0.49 of the
// unattacked rate), but with anything else running the five daemons,
// which each wake for every injected frame, starve: view changes time out
// for minutes (one CI run: 99 agreed msgs/s under attack, epochs past
// 700). The XDP variant, which drops the flood in the kernel, is the CI
// test. docs/security.md has both figures.
func TestRackAttack(t *testing.T) {
	if os.Getenv("EXO_ATTACK_SOFTWARE") != "1" {
		t.Skip("software-path flood test is opt-in (EXO_ATTACK_SOFTWARE=1): on 2 shared vCPUs the flood starves the daemons' view changes; TestRackAttackXDP runs in CI")
	}
	rackAttack(t, "software")
}

// TestRackAttackXDP is TestRackAttack with offload "xdp": the injected
// frames must also be dropped in the kernel, never reaching the daemon's
// core (its reject counters for them stay 0).
func TestRackAttackXDP(t *testing.T) {
	requireXDP(t)
	rackAttack(t, "xdp")
}

// TestRackAttackToken is TestRackAttack in token mode: the flood is
// dropped by the program that also passes the token, and the logs of the
// attacked rack must be identical (the checks of rackAttack).
func TestRackAttackToken(t *testing.T) {
	requireXDP(t)
	rackAttack(t, "xdp-token")
}

// captureAtSwitch records up to 256 of the rack's frames (its idle token
// passes) on the lab switch's bridge for 3 s (exo frame dump --write) and
// returns the pcap's path.
func captureAtSwitch(t *testing.T, ctx context.Context, r *lab.Rack) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replay.pcap")
	dump := exec.CommandContext(ctx, "ip", "netns", "exec", r.SwitchNetns, exoBin, "frame", "dump",
		"--interface", r.Bridge, "--count", "256", "--duration", "3s", "--write", path)
	var out bytes.Buffer
	dump.Stdout, dump.Stderr = io.Discard, &out
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	if err := dump.Wait(); err != nil {
		t.Fatalf("capture at the switch: %v: %s", err, out.String())
	}
	return path
}

// injector is one `exo raw --mode inject` process in a host's namespace.
type injector struct {
	kind string
	from int
	cmd  *exec.Cmd
	out  bytes.Buffer
	err  bytes.Buffer
	res  InjectResult
}

func rackAttack(t *testing.T, offload string) {
	r := rack(t, 5)
	c := startWith(t, r, withOffload(offload))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	publishers := []int{0, 1, 2}
	const perHost = 6000

	// Unattacked figure, same rack, same load.
	before, err := c.Publish(ctx, Load{Hosts: publishers, PerHost: perHost, Size: 64, Window: 256})
	if err != nil {
		t.Fatal(err)
	}
	counted0, err := c.Counters(ctx, publishers)
	if err != nil {
		t.Fatal(err)
	}
	off0 := offloadCounters(t, c, publishers)
	st0, err := c.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}

	// Ten times the unattacked run's frame rate in all, a quarter each.
	legit0 := float64(st0.Append) / before.Elapsed.Seconds()
	perInjector := 10 * legit0 / 4 * 1.05
	injs := []*injector{{kind: "replay", from: 3}, {kind: "forged-tag", from: 3}, {kind: "foreign-group", from: 4}, {kind: "forged-sender", from: 4}}
	replayPcap := ""
	if offload == "xdp-token" {
		// A token-mode host's interface shows no Exo frame to its
		// sockets (the program consumes them): the attacker replays
		// frames captured at the switch (a mirror port).
		replayPcap = captureAtSwitch(t, ctx, r)
	}
	for k, in := range injs {
		args := []string{"raw", "--interface", r.Hosts[in.from].Ifname, "--mode", "inject", "--kind", in.kind,
			"--count", "0", "--duration", "3m", "--rate", fmt.Sprintf("%.0f", perInjector)}
		if in.kind == "forged-sender" {
			args = append(args, "--key-file", c.keyPath())
		}
		if in.kind == "replay" && replayPcap != "" {
			args = append(args, "--replay-pcap", replayPcap)
		}
		in.cmd = r.CommandContext(ctx, in.from, exoBin, args...)
		in.cmd.Stdout, in.cmd.Stderr = &in.out, &in.err
		if err := in.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if k == 0 && replayPcap == "" {
			// The replayer captures the rack's own frames for 2 s
			// (idle token passes) before the others start.
			time.Sleep(2500 * time.Millisecond)
		}
	}
	time.Sleep(100 * time.Millisecond)
	during, err := c.Publish(ctx, Load{Hosts: publishers, PerHost: perHost, Size: 64, Window: 256, Round: 1})
	st1, serr := c.Status(ctx, 0)
	var sent int64
	var rate float64
	for _, in := range injs {
		in.cmd.Process.Signal(os.Interrupt)
		werr := in.cmd.Wait()
		if jerr := json.Unmarshal(in.out.Bytes(), &in.res); jerr != nil {
			t.Fatalf("injector %s: %v, %v: %s", in.kind, werr, jerr, strings.TrimSpace(in.err.String()))
		}
		sent += in.res.Frames
		rate += in.res.Rate
	}
	if err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	if before.Failed > 0 || during.Failed > 0 {
		t.Fatalf("publishes failed: %d before, %d during the attack: %v %v", before.Failed, during.Failed, before.Errors, during.Errors)
	}

	// The logs: identical and complete at all five hosts.
	all := []int{0, 1, 2, 3, 4}
	want := 2 * len(publishers) * perHost
	streams, err := c.Collect(ctx, all, want)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare(streams); err != nil {
		t.Fatal(err)
	}
	seen := map[[2]uint64]int{}
	for _, m := range streams[0] {
		seen[[2]uint64{binary.BigEndian.Uint64(m.Payload), binary.BigEndian.Uint64(m.Payload[8:])}]++
	}
	for round := 0; round < 2; round++ {
		for _, h := range publishers {
			for k := 0; k < perHost; k++ {
				key := [2]uint64{uint64(round)<<32 | uint64(h), uint64(k)}
				if seen[key] != 1 {
					t.Fatalf("message %d of host %d, round %d, delivered %d times", k, h, round, seen[key])
				}
			}
		}
	}

	// Every injected frame counted at every host that did not inject it.
	time.Sleep(300 * time.Millisecond)
	counted1, err := c.Counters(ctx, publishers)
	if err != nil {
		t.Fatal(err)
	}
	off1 := offloadCounters(t, c, publishers)
	byKind := map[string]int64{}
	for _, in := range injs {
		byKind[in.kind] = in.res.Frames
	}
	legit := float64(st1.Append-st0.Append) / during.Elapsed.Seconds()
	t.Logf("offload %s: injected %d frames at %.0f/s (%.1fx the unattacked run's %.0f frames/s; %.0f legitimate frames/s under attack): %v",
		offload, sent, rate, rate/legit0, legit0, legit, byKind)
	for i, h := range publishers {
		core := CounterDelta(counted0[i], counted1[i])
		kern := CounterDelta(off0[i], off1[i])
		// reason -> (counted in the fast path, counted by the daemon)
		got := func(fast, daemon string) uint64 { return kern[fast] + core[daemon] }
		check := func(kind string, n uint64) {
			if n != uint64(byKind[kind]) {
				t.Errorf("host %s: %d %s frames injected, %d counted (fast path %v; daemon %v)", r.Hosts[h].Name, byKind[kind], kind, n, kern, core)
			}
		}
		check("forged-tag", got("BAD_TAG", "rejects.BAD_TAG"))
		check("foreign-group", got("BAD_GROUP", "rejects.BAD_GROUP"))
		check("forged-sender", got("FOREIGN_MAC", "foreign_mac"))
		// A replay is a duplicate, or from an old epoch; while a view
		// change runs the host rejects every frame as HALTED, and a host
		// that fell behind or forked meanwhile calls an old frame a GAP or
		// a DIVERGENCE. Legitimate frames get these verdicts too, so at
		// least this many; a replay is never accepted twice. In token
		// mode a frame that the program would record (a HALTED one)
		// while its ring is full is dropped as RING_FULL instead.
		n := kern["TOKEN_RING_FULL"]
		for _, r := range []string{"DUPLICATE", "STALE_EPOCH", "HALTED", "GAP", "DIVERGENCE"} {
			n += got(r, "rejects."+r)
		}
		if n < uint64(byKind["replay"]) {
			t.Errorf("host %s: %d replayed frames injected, only %d duplicates counted (fast path %v; daemon %v)", r.Hosts[h].Name, byKind["replay"], n, kern, core)
		}
		if offload == "xdp" {
			// Dropped in the kernel: none of them reached the daemon.
			for _, name := range []string{"rejects.BAD_TAG", "rejects.BAD_GROUP", "foreign_mac"} {
				if core[name] != 0 {
					t.Errorf("host %s: %d frames reached the daemon and were counted there as %s; the XDP program should have dropped them", r.Hosts[h].Name, core[name], name)
				}
			}
		}
		t.Logf("host %s: fast path %s; daemon %s", r.Hosts[h].Name, formatMap(kern), FormatCounters(core, []string{"rejects.BAD_TAG", "rejects.BAD_GROUP", "foreign_mac", "rejects.DUPLICATE", "rejects.STALE_EPOCH"}))
	}
	t.Logf("offload %s: agreed msgs/s %.0f unattacked, %.0f under attack (%.2f of unattacked; issue 8 asks > 0.5)",
		offload, before.Rate(), during.Rate(), during.Rate()/before.Rate())
}

// offloadCounters returns each host's fast-path counters (empty maps for
// the software path).
func offloadCounters(t *testing.T, c *Cluster, hosts []int) []map[string]uint64 {
	t.Helper()
	out := make([]map[string]uint64, len(hosts))
	for i, h := range hosts {
		st, err := c.Status(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = map[string]uint64{}
		if st.Offload != nil {
			for k, v := range st.Offload.Counters {
				out[i][k] = v
			}
		}
		if st.Token != nil {
			for k, v := range st.Token.Kernel {
				out[i]["TOKEN_"+k] = v
			}
		}
	}
	return out
}

func formatMap(m map[string]uint64) string {
	if len(m) == 0 {
		return "none"
	}
	var b strings.Builder
	for _, k := range []string{"ACCEPT", "BAD_TAG", "BAD_GROUP", "FOREIGN_MAC", "DUPLICATE", "STALE_EPOCH", "GAP"} {
		if v, ok := m[k]; ok {
			fmt.Fprintf(&b, "%s=%d ", k, v)
		}
	}
	return strings.TrimSpace(b.String())
}
