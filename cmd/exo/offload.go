package main

import (
	"fmt"
	"log/slog"
	"net"

	"golang.org/x/sys/unix"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/driver/fpga"
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
	xsk  *xdp.XSKConn // the AF_XDP sockets (xdp_delivery "afxdp"), or nil
}

func (x *xdpOffload) Name() string { return "xdp" }

func (x *xdpOffload) SetState(p exo.Pointers) error { return x.prog.SetState(p) }

// SetRoster rewrites the MAC table (by sender position) after a
// membership switch (daemon.RosterOffload).
func (x *xdpOffload) SetRoster(macs []net.HardwareAddr) error { return x.prog.SetRoster(macs) }

// SetKeys writes both frame-key slots whenever they change: a key
// rotation (daemon.KeyOffload).
func (x *xdpOffload) SetKeys(ring exo.KeyRing) error { return x.prog.SetKeys(ring) }

func (x *xdpOffload) Counters() ([exo.NumReasons]uint64, error) { return x.prog.Counters() }

// ExtraCounters adds the program's foreign-MAC drops (a roster id from
// another MAC) to the status.
func (x *xdpOffload) ExtraCounters() (map[string]uint64, error) {
	n, err := x.prog.ForeignMACs()
	m := map[string]uint64{"FOREIGN_MAC": n}
	if x.xsk != nil { // frames that came through the AF_XDP sockets
		for _, s := range x.xsk.Sockets() {
			m["AFXDP_FRAMES"] += s.Frames()
		}
	}
	return m, err
}

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
	key, macs, err := offloadSecrets(cfg)
	if err != nil {
		return nil, err
	}
	prog, err := xdp.Load()
	if err != nil {
		return nil, err
	}
	if err := prog.SetKey(key); err != nil {
		prog.Close()
		return nil, err
	}
	if err := prog.SetRoster(macs); err != nil {
		prog.Close()
		return nil, err
	}
	return &xdpOffload{prog: prog}, nil
}

// offloadSecrets returns what a fast path checks besides the pointers:
// the frame-tag key (derived from the group key file, as the core's) and
// the roster's MACs by id.
func offloadSecrets(cfg *daemon.Config) ([exo.TagKeyLen]byte, []net.HardwareAddr, error) {
	var key [exo.TagKeyLen]byte
	group, err := daemon.ReadKey(cfg.KeyFile)
	if err != nil {
		return key, nil, err
	}
	// The rack's first roster, member ids 0..hosts-1 by position; the
	// daemon rewrites it after every membership switch (SetRoster).
	macs := make([]net.HardwareAddr, cfg.Hosts)
	for i, m := range cfg.Roster {
		if m.ID >= cfg.Hosts {
			continue
		}
		if macs[m.ID], err = net.ParseMAC(m.MAC); err != nil {
			return key, nil, fmt.Errorf("roster[%d].mac: %w", i, err)
		}
	}
	return daemon.FrameKey(group), macs, nil
}

func (x *xdpOffload) attach(ifname, mode string, log *slog.Logger) error {
	m := xdp.ModeAuto
	switch mode {
	case "native":
		m = xdp.ModeNative
	case "generic":
		m = xdp.ModeGeneric
	default:
		// On a veth, native mode is slower: the bridge hands each host a
		// shared (cloned) skb of a broadcast frame, which native veth XDP
		// must copy before the program runs; generic mode runs on the skb
		// as it is (docs/xdp.md has the side-by-side figures).
		if drv, err := driverOf(ifname); err == nil && drv == "veth" {
			m = xdp.ModeGeneric
			log.Info("XDP on a veth: generic (skb) mode, measured faster than native there; set xdp_mode to override", "interface", ifname)
		}
	}
	att, err := x.prog.Attach(ifname, m)
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

// openXSK loads the XDP program and opens the AF_XDP sockets the daemon
// reads from (xdp_delivery "afxdp"); setupOffload attaches the program.
func openXSK(cfg *daemon.Config) (*xdpOffload, daemon.FrameConn, error) {
	x, err := loadXDP(cfg)
	if err != nil {
		return nil, nil, err
	}
	conn, err := xdp.NewXSKConn(x.prog, cfg.Interface, xdp.XSKOptions{Conn: broadcast.Options{ReadBuffer: 8 << 20}})
	if err != nil {
		x.Close()
		return nil, nil, err
	}
	x.xsk = conn
	return x, conn, nil
}

// setupOffload builds the fast path the config asks for (or takes pre,
// already loaded for AF_XDP delivery) and puts it in front of d. It returns a function that detaches it, or an error that
// stops the daemon (offload "xdp" that cannot load). "auto" falls back to
// the software path with one log line.
func setupOffload(cfg *daemon.Config, d *daemon.Daemon, pre *xdpOffload, log *slog.Logger) (func(), error) {
	switch cfg.Offload {
	case "software":
		return func() {}, nil
	case "xdp", "auto":
		x, err := pre, error(nil)
		if x == nil {
			x, err = loadXDP(cfg)
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

// fpgaOffload is the simulated FPGA engine (the Verilated RTL, driver/fpga)
// as an inline fast path: the daemon runs every received frame through it
// and drops what it drops.
type fpgaOffload struct {
	eng *fpga.Engine
	sim *fpga.Sim
}

func (x *fpgaOffload) Name() string { return "fpga-sim" }

func (x *fpgaOffload) SetState(p exo.Pointers) error { return x.eng.SetState(p) }

// SetRoster rewrites the engine's MAC table (daemon.RosterOffload).
func (x *fpgaOffload) SetRoster(macs []net.HardwareAddr) error { return x.eng.SetRoster(macs) }

// SetKeys writes both key slots of the engine whenever they change: a key
// rotation (daemon.KeyOffload).
func (x *fpgaOffload) SetKeys(ring exo.KeyRing) error { return x.eng.SetKeys(ring) }

func (x *fpgaOffload) Counters() ([exo.NumReasons]uint64, error) {
	var out [exo.NumReasons]uint64
	c, err := x.eng.Counters()
	for r, v := range c.PerReason {
		out[r] = uint64(v)
	}
	return out, err
}

func (x *fpgaOffload) Process(frame []byte) (exo.Reason, error) {
	v, err := x.sim.Process(frame)
	return v.Reason, err
}

func (x *fpgaOffload) Close() error { return x.eng.Close() }

// setupFPGASim opens the simulated engine (in a binary built with -tags
// fpgasim after tools/build-fpga-sim.sh), loads the roster MACs and puts
// it in front of the core.
func setupFPGASim(cfg *daemon.Config, d *daemon.Daemon, log *slog.Logger) (func(), error) {
	eng, sim, err := fpga.OpenSimEngine(fpga.SimOptions{})
	if err != nil {
		return nil, fmt.Errorf("offload fpga-sim: %w", err)
	}
	x := &fpgaOffload{eng: eng, sim: sim}
	fail := func(err error) (func(), error) {
		x.Close()
		return nil, fmt.Errorf("offload fpga-sim: %w", err)
	}
	if info := eng.Info(); len(cfg.Roster) > info.MaxHosts {
		return fail(fmt.Errorf("the roster has %d hosts, this engine build holds %d (MAX_HOSTS)", len(cfg.Roster), info.MaxHosts))
	}
	key, macs, err := offloadSecrets(cfg)
	if err != nil {
		return fail(err)
	}
	if err := eng.SetKey(key); err != nil {
		return fail(err)
	}
	if err := eng.SetRoster(macs); err != nil {
		return fail(err)
	}
	if err := d.SetOffload(x); err != nil {
		return fail(err)
	}
	log.Info("simulated FPGA engine (Verilated RTL) in front of the core", "max_hosts", eng.Info().MaxHosts)
	return func() {
		if err := x.Close(); err != nil {
			log.Warn("closing the simulated engine", "err", err)
		}
	}, nil
}

// driverOf returns the kernel driver of interface ifname (ethtool -i).
func driverOf(ifname string) (string, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, ifname)
	if err != nil {
		return "", err
	}
	return unix.ByteSliceToString(info.Driver[:]), nil
}
