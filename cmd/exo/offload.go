package main

import (
	"fmt"
	"log/slog"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/driver/xdp"
	"github.com/exo-rack/exo/exo"
)

// xdpOffload is the XDP program as the daemon's fast path: loaded, given
// the key, the roster and the pointers, then attached to the broadcast
// interface. It drops what no state makes valid and passes the rest to
// the daemon's AF_PACKET socket (docs/xdp.md says why not AF_XDP).
type xdpOffload struct {
	prog *xdp.Program
	att  *xdp.Attachment
}

func (x *xdpOffload) Name() string { return "xdp" }

func (x *xdpOffload) SetState(p exo.Pointers) error { return x.prog.SetState(p) }

func (x *xdpOffload) Counters() ([exo.NumReasons]uint64, error) { return x.prog.Counters() }

func (x *xdpOffload) Close() error {
	var err error
	if x.att != nil {
		err = x.att.Close()
	}
	if e := x.prog.Close(); err == nil {
		err = e
	}
	return err
}

// loadXDP loads the program and fills its maps; attachXDP attaches it once
// the daemon has written the pointers (an attached program with an empty
// state map would drop every frame as BAD_GROUP).
func loadXDP(cfg *daemon.Config) (*xdpOffload, error) {
	prog, err := xdp.Load()
	if err != nil {
		return nil, err
	}
	return &xdpOffload{prog: prog}, nil
}

func (x *xdpOffload) attach(ifname string, log *slog.Logger) error {
	att, err := x.prog.Attach(ifname, xdp.ModeAuto)
	if err != nil {
		return err
	}
	x.att = att
	if att.NativeErr != nil {
		log.Warn("XDP attached in generic (skb) mode: native mode refused", "interface", ifname, "err", att.NativeErr)
	} else {
		log.Info("XDP attached", "interface", ifname, "mode", att.Mode.String())
	}
	return nil
}

// setupOffload builds the fast path the config asks for and puts it in
// front of d. It returns a function that detaches it, or an error that
// stops the daemon (offload "xdp" that cannot load). "auto" falls back to
// the software path with one log line.
func setupOffload(cfg *daemon.Config, d *daemon.Daemon, log *slog.Logger) (func(), error) {
	switch cfg.Offload {
	case "software":
		return func() {}, nil
	case "xdp", "auto":
		x, err := loadXDP(cfg)
		if err == nil {
			if err = d.SetOffload(x); err == nil {
				err = x.attach(cfg.Interface, log)
			}
			if err != nil {
				x.Close()
			}
		}
		if err != nil {
			if cfg.Offload == "xdp" {
				return nil, fmt.Errorf("offload xdp: %w (offload \"auto\" would fall back to the software path)", err)
			}
			log.Warn("offload auto: XDP unavailable, using the software path", "err", err)
			d.ClearOffload()
			return func() {}, nil
		}
		return func() {
			if err := x.Close(); err != nil {
				log.Warn("detaching XDP", "err", err)
			}
		}, nil
	case "fpga-sim":
		return setupFPGASim(cfg, d, log)
	}
	return nil, fmt.Errorf("offload %q: unknown (software, xdp, auto, fpga-sim)", cfg.Offload)
}

// setupFPGASim is completed with the simulated engine's driver (driver/fpga).
func setupFPGASim(cfg *daemon.Config, d *daemon.Daemon, log *slog.Logger) (func(), error) {
	return nil, fmt.Errorf("offload fpga-sim: not built in yet")
}
