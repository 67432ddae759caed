package host

import (
	"log/slog"
	"net"

	"golang.org/x/sys/unix"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/driver/xdp"
	"github.com/exo-rack/exo/exo"
)

// xdpOffload is the XDP program as the daemon's fast path: loaded, given
// the pointers, the roster and the keys by the daemon (Daemon.SetOffload),
// then attached to the broadcast interface. It drops what no state makes
// valid and passes the rest to the daemon's AF_PACKET socket, or with
// xdp_delivery "afxdp" redirects it to the daemon's AF_XDP sockets
// (docs/xdp.md).
type xdpOffload struct {
	prog *xdp.Program
	att  *xdp.Attachment
	xsk  *xdp.XSKConn // the AF_XDP sockets (xdp_delivery "afxdp"), or nil
}

// Name is the offload mode the status and the metrics show.
func (x *xdpOffload) Name() string { return "xdp" }

// SetState writes the core's pointers to the program's state map.
func (x *xdpOffload) SetState(p exo.Pointers) error { return x.prog.SetState(p) }

// SetRoster rewrites the MAC table (by sender position) at SetOffload and
// after a membership switch (daemon.RosterOffload).
func (x *xdpOffload) SetRoster(macs []net.HardwareAddr) error { return x.prog.SetRoster(macs) }

// SetKeys writes both frame-key slots at SetOffload and whenever they
// change: a key rotation (daemon.KeyOffload).
func (x *xdpOffload) SetKeys(ring exo.KeyRing) error { return x.prog.SetKeys(ring) }

// Counters returns the program's verdicts, per reason.
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

// Close detaches the program, then closes it (and its maps). With AF_XDP
// delivery the daemon closed the sockets first.
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

// loadXDP loads the program with empty maps; attach attaches it once the
// daemon has written its pointers, roster and keys (SetOffload): an
// attached program with an empty state map would drop every frame as
// BAD_GROUP.
func loadXDP() (*xdpOffload, error) {
	prog, err := xdp.Load()
	if err != nil {
		return nil, err
	}
	return &xdpOffload{prog: prog}, nil
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
	x, err := loadXDP()
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
