package host

import (
	"fmt"
	"log/slog"

	"github.com/exo-rack/exo/daemon"
)

// setupOffload builds the fast path the config asks for (or takes pre,
// loaded already for AF_XDP delivery) and puts it in front of d: the
// daemon writes it its pointers, roster MACs and key slots
// (Daemon.SetOffload) before the XDP program is attached. With
// fpga_token the simulated engine plays the NIC on conn, the daemon's
// socket, which the daemon does not read in token mode. It returns the
// fast path (nil for the software path) and a function that detaches and
// closes it, or an error that stops the host (offload "xdp" or
// "fpga-sim" that cannot load); on error pre is closed. "auto" falls back
// to the software path with one log line.
func setupOffload(cfg *daemon.Config, d *daemon.Daemon, conn daemon.FrameConn, pre *xdpOffload, log *slog.Logger) (daemon.Offload, func(), error) {
	switch cfg.Offload {
	case "software":
		return nil, func() {}, nil
	case "xdp", "auto":
		if cfg.XDPToken == "on" {
			return setupToken(cfg, d, log)
		}
		x, err := pre, error(nil)
		if x == nil {
			x, err = loadXDP()
		}
		if err == nil {
			if err = d.SetOffload(x); err == nil {
				err = x.attach(cfg.Interface, cfg.XDPMode, log)
			}
			if err != nil {
				x.Close()
			}
		}
		if err != nil {
			if cfg.Offload == "xdp" {
				return nil, nil, fmt.Errorf("offload xdp: %w (offload \"auto\" would fall back to the software path)", err)
			}
			log.Warn("offload auto: XDP unavailable, using the software path", "err", err)
			d.ClearOffload()
			return nil, func() {}, nil
		}
		return x, func() {
			if err := x.Close(); err != nil {
				log.Warn("detaching XDP", "err", err)
			}
		}, nil
	case "fpga-sim":
		if cfg.FPGAToken == "on" {
			return setupFPGAToken(cfg, d, conn, log)
		}
		return setupFPGASim(cfg, d, log)
	}
	if pre != nil {
		pre.Close()
	}
	return nil, nil, fmt.Errorf("offload %q: unknown (software, xdp, auto, fpga-sim)", cfg.Offload)
}
