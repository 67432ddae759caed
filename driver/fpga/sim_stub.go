//go:build !fpgasim || !cgo

package fpga

// SimBuilt reports whether this binary has the simulated back end (build
// tag fpgasim, after tools/build-fpga-sim.sh).
const SimBuilt = false

// Sim is the simulated engine; in this build a placeholder whose methods
// return ErrSimNotBuilt.
type Sim struct{}

// OpenSim returns ErrSimNotBuilt: the binary was built without the tag
// fpgasim (or without cgo).
func OpenSim(SimOptions) (*Sim, error) { return nil, ErrSimNotBuilt }

// Read32 returns ErrSimNotBuilt.
func (*Sim) Read32(uint32) (uint32, error) { return 0, ErrSimNotBuilt }

// Write32 returns ErrSimNotBuilt.
func (*Sim) Write32(uint32, uint32) error { return ErrSimNotBuilt }

// Close does nothing.
func (*Sim) Close() error { return nil }

// Reset returns ErrSimNotBuilt.
func (*Sim) Reset() error { return ErrSimNotBuilt }

// Cycles returns 0.
func (*Sim) Cycles() uint64 { return 0 }

// Stalls returns 0.
func (*Sim) Stalls() uint64 { return 0 }

// Process returns ErrSimNotBuilt.
func (*Sim) Process([]byte) (Verdict, error) { return Verdict{}, ErrSimNotBuilt }

// ProcessBatch returns ErrSimNotBuilt.
func (*Sim) ProcessBatch([][]byte, int) ([]Verdict, error) { return nil, ErrSimNotBuilt }

// Settle returns ErrSimNotBuilt.
func (*Sim) Settle(int) (int, error) { return 0, ErrSimNotBuilt }
