package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
)

// TestRackKeyRotation: the group key of a running 5-host lab rack is
// rotated under load, without stopping it (docs/security.md section 5).
// `exo key stage` runs on A..D; nobody switches while E lacks the new key;
// E is killed (-9) and comes back from its durable log with next_key_file
// in its config, holding both keys; then every host switches, the old key is
// retired everywhere, no genuine frame is ever BAD_TAG, and every
// acknowledged message is delivered once, in the same order, at every host.
// Last, C restarts with the new key alone as key_file (key_phase 1).
func TestRackKeyRotation(t *testing.T) { keyRotation(t, "software") }

// TestRackKeyRotationXDP: the same with the XDP program in front of every
// daemon: it gets both key slots whenever they change.
func TestRackKeyRotationXDP(t *testing.T) {
	requireXDP(t)
	keyRotation(t, "xdp")
}

func keyRotation(t *testing.T, offload string) {
	r := rack(t, 5)
	// Durable logs: the restarts below come back from disk and catch up
	// in batches (an amnesiac --join would need the whole log in one
	// install, which a long run under load outgrows: no snapshot transfer).
	data := t.TempDir()
	c := startWith(t, r, func(cfg *daemon.Config) {
		withOffload(offload)(cfg)
		Durable(data, false)(cfg)
		cfg.Fsync = "batch"
		cfg.KeyGraceText = "1s"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := []int{0, 1, 2, 3, 4}

	newKey := filepath.Join(c.opt.Dir, "group.key.next")
	kb := make([]byte, 32)
	rand.Read(kb)
	if err := os.WriteFile(newKey, kb, 0o600); err != nil {
		t.Fatal(err)
	}
	oldKey, err := daemon.ReadKey(c.keyPath())
	if err != nil {
		t.Fatal(err)
	}
	fpOld := fmt.Sprintf("%016x", exo.KeyFingerprint(daemon.FrameKey(oldKey)))
	fpNew := fmt.Sprintf("%016x", exo.KeyFingerprint(daemon.FrameKey(kb)))

	// A..D publish in rounds of 4x2000 until the rotation is over (at
	// most maxRounds: the rotation must be over by then).
	const perHost, maxRounds = 2000, 25
	acked, rounds := 0, 0
	stop := make(chan struct{})
	loadDone := make(chan error, 1)
	go func() {
		for {
			rounds++
			res, err := c.Publish(ctx, Load{Hosts: []int{0, 1, 2, 3}, PerHost: perHost, Size: 64, Window: 16, Round: 100 + rounds})
			acked += int(res.Published)
			if err != nil {
				loadDone <- err
				return
			}
			select {
			case <-stop:
				loadDone <- nil
				return
			default:
			}
			if rounds == maxRounds {
				loadDone <- nil
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)

	status := func(i int) daemon.Status {
		st, err := c.Status(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if st.Keys == nil {
			t.Fatalf("host %s: no keys in the status", r.Hosts[i].Name)
		}
		return st
	}
	t0 := time.Now()
	for i := range 4 {
		out, err := r.CommandContext(ctx, i, exoBin, "key", "stage", "--no-wait", "--socket", c.Socket(i), newKey).CombinedOutput()
		if err != nil {
			t.Fatalf("exo key stage on %s: %v\n%s", r.Hosts[i].Name, err, out)
		}
	}
	// E has not staged: nobody switches, however long we wait.
	time.Sleep(500 * time.Millisecond)
	for i := range 4 {
		ks := status(i).Keys
		if ks.SendPhase != 0 || !ks.Staged || !slices.Equal(ks.Waiting, []int{4}) || ks.Slots[1] == nil || ks.Slots[1].Fingerprint != fpNew {
			t.Fatalf("host %s with E not staged: %+v", r.Hosts[i].Name, ks)
		}
	}
	// E dies (kill -9) and comes back from its disk, with both keys in
	// its config: it stages the new key at start.
	if err := c.Kill(4); err != nil {
		t.Fatal(err)
	}
	prev := c.opt.Config
	c.opt.Config = func(cfg *daemon.Config) {
		if prev != nil {
			prev(cfg)
		}
		if cfg.ID == 4 {
			cfg.NextKeyFile = newKey
		}
	}
	if err := c.writeConfig(4); err != nil {
		t.Fatal(err)
	}
	if err := c.StartHost(ctx, 4, false); err != nil {
		t.Fatal(err)
	}
	// Every host switches, then retires the old key.
	var switched, retired time.Duration
	for _, i := range all {
		for {
			ks := status(i).Keys
			if ks.SendPhase == 1 && switched == 0 {
				switched = time.Since(t0)
			}
			if ks.SendPhase == 1 && !ks.Staged && !ks.OldValid && ks.Slots[0] == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("host %s never finished the rotation: %+v", r.Hosts[i].Name, ks)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	retired = time.Since(t0)
	select {
	case err := <-loadDone:
		t.Fatalf("the load ended (%v) before the rotation did (%d rounds of %d messages)", err, rounds, 4*perHost)
	default:
	}
	close(stop)
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}
	if acked != 4*perHost*rounds {
		t.Fatalf("%d of %d messages acknowledged", acked, 4*perHost*rounds)
	}
	// Under the new key alone: E publishes too.
	var acceptBefore []map[string]uint64
	if offload != "software" {
		acceptBefore = offloadCounters(t, c, all)
	}
	if _, err := c.Publish(ctx, Load{Hosts: all, PerHost: 300, Size: 64, Window: 16, Round: 2}); err != nil {
		t.Fatal(err)
	}
	total := acked + 5*300
	s, err := c.Collect(ctx, all, total)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare(s); err != nil {
		t.Fatal(err)
	}
	for j, i := range all {
		if len(s[j]) != total {
			t.Fatalf("host %s delivered %d messages, want %d", r.Hosts[i].Name, len(s[j]), total)
		}
		st := status(i)
		if st.Keys.Slots[1] == nil || st.Keys.Slots[1].Fingerprint != fpNew {
			t.Fatalf("host %s ends with keys %+v, want only %s in slot 1 (old %s)", r.Hosts[i].Name, st.Keys, fpNew, fpOld)
		}
		if n := st.Counters["rejects.BAD_TAG"]; n != 0 {
			t.Errorf("host %s rejected %d genuine frames as BAD_TAG during the rotation", r.Hosts[i].Name, n)
		}
		if st.Counters["key_events.switched"] != 1 || st.Counters["key_events.retired"] != 1 {
			t.Errorf("host %s key events %v", r.Hosts[i].Name, st.Counters)
		}
	}
	if offload != "software" {
		for j, m := range offloadCounters(t, c, all) {
			if m["BAD_TAG"] != 0 {
				t.Errorf("host %s: the fast path dropped %d genuine frames as BAD_TAG", r.Hosts[all[j]].Name, m["BAD_TAG"])
			}
			// The frames after the rotation are all in key phase 1: the
			// program accepted some of them itself (slot 1).
			if m["ACCEPT"] <= acceptBefore[j]["ACCEPT"] {
				t.Errorf("host %s: the fast path accepted no frame under the new key (ACCEPT %d before, %d after)",
					r.Hosts[all[j]].Name, acceptBefore[j]["ACCEPT"], m["ACCEPT"])
			}
		}
	}
	if t.Failed() {
		return
	}
	// The operator's view of it: exo key status, as text and as JSON.
	out, err := r.CommandContext(ctx, 0, exoBin, "key", "status", "--socket", c.Socket(0)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "* slot 1: key "+fpNew) || !strings.Contains(string(out), "slot 0: empty") ||
		!strings.Contains(string(out), "rotation: none in flight") {
		t.Fatalf("exo key status: %v\n%s", err, out)
	}
	out, err = r.CommandContext(ctx, 0, exoBin, "key", "status", "--json", "--socket", c.Socket(0)).Output()
	var ks daemon.KeyStatus
	if err != nil || json.Unmarshal(out, &ks) != nil || ks.SendPhase != 1 || ks.Slots[1] == nil || ks.Slots[1].Fingerprint != fpNew {
		t.Fatalf("exo key status --json: %v\n%s", err, out)
	}
	// The config after the rotation: the new key is key_file, in slot 1.
	// C restarts (kill -9, from its disk) under it alone and catches up.
	if err := c.Kill(2); err != nil {
		t.Fatal(err)
	}
	c.opt.Config = func(cfg *daemon.Config) {
		if prev != nil {
			prev(cfg)
		}
		cfg.KeyFile, cfg.KeyPhase, cfg.NextKeyFile = newKey, 1, ""
	}
	if err := c.writeConfig(2); err != nil {
		t.Fatal(err)
	}
	if err := c.StartHost(ctx, 2, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, Load{Hosts: all, PerHost: 200, Size: 64, Window: 16, Round: 3}); err != nil {
		t.Fatal(err)
	}
	total += 5 * 200
	if s, err = c.Collect(ctx, all, total); err != nil {
		t.Fatal(err)
	}
	if err := Compare(s); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: rotation under load: first switch %v and the old key retired everywhere %v after the first stage; "+
		"E killed -9 and restarted mid-rotation; %d messages acknowledged, all 5 streams identical (%d messages, 0 BAD_TAG); C restarted under the new key alone",
		offload, switched, retired, acked, total)
}
