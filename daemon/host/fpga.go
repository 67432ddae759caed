package host

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/driver/fpga"
	"github.com/exo-rack/exo/exo"
)

// fpgaOffload is the simulated FPGA engine (the Verilated RTL, driver/fpga)
// as an inline fast path: the daemon runs every received frame through it
// and drops what it drops.
type fpgaOffload struct {
	eng *fpga.Engine
	sim *fpga.Sim
}

// Name is the offload mode the status and the metrics show.
func (x *fpgaOffload) Name() string { return "fpga-sim" }

// SetState writes the core's pointers to the engine's registers.
func (x *fpgaOffload) SetState(p exo.Pointers) error { return x.eng.SetState(p) }

// SetRoster rewrites the engine's MAC table at SetOffload and after a
// membership switch (daemon.RosterOffload).
func (x *fpgaOffload) SetRoster(macs []net.HardwareAddr) error { return x.eng.SetRoster(macs) }

// SetKeys writes both key slots of the engine at SetOffload and whenever
// they change: a key rotation (daemon.KeyOffload).
func (x *fpgaOffload) SetKeys(ring exo.KeyRing) error { return x.eng.SetKeys(ring) }

// Counters returns the engine's verdicts, per reason.
func (x *fpgaOffload) Counters() ([exo.NumReasons]uint64, error) {
	var out [exo.NumReasons]uint64
	c, err := x.eng.Counters()
	for r, v := range c.PerReason {
		out[r] = uint64(v)
	}
	return out, err
}

// Process runs one received frame through the engine (daemon.InlineOffload).
func (x *fpgaOffload) Process(frame []byte) (exo.Reason, error) {
	v, err := x.sim.Process(frame)
	return v.Reason, err
}

// Close frees the engine and its simulation.
func (x *fpgaOffload) Close() error { return x.eng.Close() }

// setupFPGASim opens the simulated engine (in a binary built with -tags
// fpgasim after tools/build-fpga-sim.sh) and puts it in front of the
// core, which writes it its pointers, roster MACs and key slots
// (Daemon.SetOffload). It returns the engine and a function that closes
// it.
func setupFPGASim(cfg *daemon.Config, d *daemon.Daemon, log *slog.Logger) (daemon.Offload, func(), error) {
	eng, sim, err := fpga.OpenSimEngine(fpga.SimOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("offload fpga-sim: %w", err)
	}
	x := &fpgaOffload{eng: eng, sim: sim}
	fail := func(err error) (daemon.Offload, func(), error) {
		x.Close()
		return nil, nil, fmt.Errorf("offload fpga-sim: %w", err)
	}
	if info := eng.Info(); len(cfg.Roster) > info.MaxHosts {
		return fail(fmt.Errorf("the roster has %d hosts, this engine build holds %d (MAX_HOSTS)", len(cfg.Roster), info.MaxHosts))
	}
	if err := d.SetOffload(x); err != nil {
		return fail(err)
	}
	log.Info("simulated FPGA engine (Verilated RTL) in front of the core", "max_hosts", eng.Info().MaxHosts)
	return x, func() {
		if err := x.Close(); err != nil {
			log.Warn("closing the simulated engine", "err", err)
		}
	}, nil
}
