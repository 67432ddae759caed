package fpga

import "errors"

// SimOptions configure a simulated engine.
type SimOptions struct {
	// ResetCycles is how long rst is held at OpenSim and Reset (default 4).
	ResetCycles int
	// Timeout is how many cycles Process waits for a verdict after the
	// last beat (default 10000; the RTL of docs/hardware.md answers in 2).
	Timeout int
}

// MaxSimFrame is the longest frame Process takes: the parser's byte
// counter has 18 bits (exo_rx_parser PTR_WIDTH).
const MaxSimFrame = 1<<18 - 1

// SimBuildScript builds the simulated back end (docs/fpga.md).
const SimBuildScript = "tools/build-fpga-sim.sh"

// ErrSimNotBuilt is what the simulated back end returns in a build
// without it (no build tag fpgasim, or cgo disabled).
var ErrSimNotBuilt = errors.New("fpga-sim back end not built in: run " + SimBuildScript + " and build with -tags fpgasim (cgo enabled)")

// OpenSimEngine opens a simulated engine and its driver (Open): the
// Engine owns the Sim (Engine.Close frees it; Engine.Regs returns it).
func OpenSimEngine(opts SimOptions) (*Engine, *Sim, error) {
	s, err := OpenSim(opts)
	if err != nil {
		return nil, nil, err
	}
	e, err := Open(s)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return e, s, nil
}
