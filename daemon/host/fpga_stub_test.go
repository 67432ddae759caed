//go:build !fpgasim || !cgo

package host

import (
	"errors"
	"strings"
	"testing"

	"github.com/exo-rack/exo/driver/fpga"
)

// TestHostFPGASimNotBuilt: in a build without the simulated engine,
// offload fpga-sim refuses to start with the error that says how to build
// it, and releases what Open made.
func TestHostFPGASimNotBuilt(t *testing.T) {
	ns := testNetns(t)
	cfg, _ := testConfig(t, "127.0.0.1:17933", func(m map[string]any) { m["offload"] = "fpga-sim" })
	_, err := openIn(ns, cfg, nil)
	if !errors.Is(err, fpga.ErrSimNotBuilt) || !strings.HasPrefix(err.Error(), "offload fpga-sim: ") {
		t.Fatalf("Open: %v, want offload fpga-sim: %v", err, fpga.ErrSimNotBuilt)
	}
	oobFree(t, ns, "127.0.0.1:17933")
}

// TestHostFPGASimTokenNotBuilt: fpga_token in a build without the
// simulated engine refuses to start the same way.
func TestHostFPGASimTokenNotBuilt(t *testing.T) {
	ns := testNetns(t)
	cfg, _ := testConfig(t, "127.0.0.1:17936", func(m map[string]any) { m["offload"], m["fpga_token"] = "fpga-sim", "on" })
	_, err := openIn(ns, cfg, nil)
	if !errors.Is(err, fpga.ErrSimNotBuilt) || !strings.HasPrefix(err.Error(), "fpga_token: offload fpga-sim: ") {
		t.Fatalf("Open: %v, want fpga_token: offload fpga-sim: %v", err, fpga.ErrSimNotBuilt)
	}
	oobFree(t, ns, "127.0.0.1:17936")
}
