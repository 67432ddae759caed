//go:build fpgasim && cgo

package host

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/exo-rack/exo/daemon"
)

// TestHostFPGASim: offload fpga-sim puts the simulated engine in front of
// the core with the key file's frame key in the slot key_phase names (the
// daemon's key ring, the one write of the key) and the roster's MAC, and
// the one-host rack agrees a message through it.
func TestHostFPGASim(t *testing.T) {
	for _, phase := range []int{0, 1} {
		t.Run(map[int]string{0: "key_phase0", 1: "key_phase1"}[phase], func(t *testing.T) {
			ns := testNetns(t)
			cfg, key := testConfig(t, "127.0.0.1:17934", func(m map[string]any) { m["offload"], m["key_phase"] = "fpga-sim", phase })
			log, lb := newLog(t)
			h, err := openIn(ns, cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			x, ok := h.fast.(*fpgaOffload)
			if !ok {
				t.Fatalf("the fast path is a %T, want the simulated engine", h.fast)
			}
			ring, err := x.eng.Keys()
			if err != nil {
				t.Fatal(err)
			}
			if !ring.Valid[phase] || ring.Valid[1-phase] || ring.Key[phase] != daemon.FrameKey(key) {
				t.Errorf("engine keys %+v, want the key file's frame key in slot %d only", ring, phase)
			}
			if got := x.eng.Roster(); len(got) != 1 || got[0].String() != testMAC {
				t.Errorf("engine roster %v, want [%s]", got, testMAC)
			}
			if st := statusOf(t, h); st.Offload == nil || st.Offload.Mode != "fpga-sim" {
				t.Fatalf("status offload %+v, want mode fpga-sim", st.Offload)
			}
			if !strings.Contains(lb.String(), "simulated FPGA engine (Verilated RTL) in front of the core") {
				t.Error("no log line for the simulated engine")
			}
			runHost(t, h)
		})
	}
}

// TestHostFPGASimToken: fpga_token puts the simulated engine in front of
// the core in token mode: the key file's frame key in both the engine and
// the Go rule beside it (the Token), the roster's MAC, the MACs of the
// frames it sends (this host's, broadcast), the token part of the status
// with the engine's counters; the one-host rack agrees a message (its
// core sends: no frame comes in), and the engine's wire stops with the
// daemon.
func TestHostFPGASimToken(t *testing.T) {
	ns := testNetns(t)
	cfg, key := testConfig(t, "127.0.0.1:17935", func(m map[string]any) { m["offload"], m["fpga_token"] = "fpga-sim", "on" })
	log, lb := newLog(t)
	h, err := openIn(ns, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	x, ok := h.fast.(*fpgaTokenOffload)
	if !ok {
		t.Fatalf("the fast path is a %T, want the simulated engine in token mode", h.fast)
	}
	ring, err := x.eng.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if !ring.Valid[0] || ring.Key[0] != daemon.FrameKey(key) {
		t.Errorf("engine keys %+v, want the key file's frame key in slot 0", ring)
	}
	src, dst, err := x.eng.TxMACs()
	if err != nil || src.String() != testMAC || dst.String() != "ff:ff:ff:ff:ff:ff" {
		t.Errorf("tx macs %s %s %v, want %s, broadcast", src, dst, err, testMAC)
	}
	var st struct {
		Offload *daemon.OffloadStatus `json:"offload"`
		Token   *daemon.TokenStatus   `json:"token"`
	}
	if err := json.Unmarshal(h.Daemon().StatusJSON(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Offload == nil || st.Offload.Mode != "fpga-sim-token" || st.Token == nil {
		t.Fatalf("status offload %+v token %+v, want mode fpga-sim-token and a token part", st.Offload, st.Token)
	}
	if _, ok := st.Token.Kernel["RULE_DIFFERS"]; !ok {
		t.Errorf("the token status shows no engine counters: %v", st.Token.Kernel)
	}
	if !strings.Contains(lb.String(), "token mode: the simulated FPGA engine sends this host's frames") {
		t.Error("no log line for the engine in token mode")
	}
	runHost(t, h)
}
