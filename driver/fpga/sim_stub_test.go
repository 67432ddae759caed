//go:build !fpgasim || !cgo

package fpga

import (
	"errors"
	"strings"
	"testing"
)

// TestSimNotBuilt: without the build tag the simulated back end says how
// to get it.
func TestSimNotBuilt(t *testing.T) {
	s, err := OpenSim(SimOptions{})
	if s != nil || !errors.Is(err, ErrSimNotBuilt) {
		t.Fatalf("OpenSim = %v, %v; want ErrSimNotBuilt", s, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "fpga-sim back end not built in: run tools/build-fpga-sim.sh and build with -tags fpgasim") {
		t.Errorf("message %q", msg)
	}
	if _, _, err := OpenSimEngine(SimOptions{}); !errors.Is(err, ErrSimNotBuilt) {
		t.Errorf("OpenSimEngine: %v", err)
	}
	if SimBuilt {
		t.Error("SimBuilt is true")
	}
}
