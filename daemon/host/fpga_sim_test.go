//go:build fpgasim && cgo

package host

import (
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
