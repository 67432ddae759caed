// Package host puts one rack host's exo daemon together from its config
// and runs it: the broadcast connection (an AF_PACKET socket, or the AF_XDP
// sockets of offload "xdp" with xdp_delivery "afxdp"), the out-of-band TCP
// transport (package oob), the daemon itself (package daemon) and the fast
// path the config asks for in front of it (the XDP program of driver/xdp,
// or the simulated FPGA engine of driver/fpga). `exo daemon` is flags, a
// config and one call to Run; any other process that runs a rack host
// makes the same call.
//
// It is a package of its own, beside package daemon, because package
// daemon takes its connection, transport and fast path as interfaces
// (daemon.FrameConn, daemon.OOB, daemon.Offload) and is tested on
// in-memory ones: the choice of socket and the drivers (cilium/ebpf, the
// Verilated engine through cgo) belong to the assembly, and package daemon
// builds and tests without them.
//
// # Running a host
//
// A process that only runs the daemon loads a config and calls Run until
// it is told to stop:
//
//	cfg, err := daemon.LoadConfig("/etc/exo/exo.json")
//	if err != nil {
//		return err // a bad config: exo daemon exits with code 2
//	}
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	return host.Run(ctx, cfg, slog.Default())
//
// Run returns when ctx ends (nil after a clean stop: pending publishes
// were answered "shutting down") or when the daemon fails. It needs root
// (CAP_NET_RAW for the socket; CAP_BPF and CAP_NET_ADMIN for offload xdp)
// and runs in the network namespace of the calling thread, where it finds
// the config's interface.
//
// # Holding the daemon in-process
//
// A process that also talks to the daemon directly (publishes without the
// Unix socket, reads its status) opens the host first, then runs it:
//
//	h, err := host.Open(cfg, log)
//	if err != nil {
//		return err
//	}
//	d := h.Daemon() // d.Publish, d.StatusJSON, d.ProposeChange ...
//	go func() { errc <- h.Run(ctx) }()
//
// A host that is opened but will not run is released with Close. Open
// does most of what can fail at start: first the check that no other exo
// daemon holds the data_dir or answers on the API socket
// (daemon.CheckAlone), then the socket, the key file, the OOB listener,
// the durable log (and its lock, held until the daemon stops), loading
// and attaching the fast path; Run opens the local API socket and the
// metrics listener.
//
// # Keys
//
// Open reads key_file once and gives its bytes to the OOB transport and,
// through daemon.Config.Key, to daemon.New, which derives the core's
// frame key from them and writes its keys to the transport (daemon.KeyedOOB);
// Daemon.SetOffload writes the core's two key slots and its roster's MACs
// to the fast path, which never reads the file. So the transport, the
// core and the fast path all hold the daemon's keys, from the start and
// after every key rotation.
//
// # Cleanup order
//
// When Run returns the daemon has closed its connection (the AF_XDP
// sockets with it), and only then is the fast path detached and closed:
// the XDP program, and with AF_XDP delivery the XSKMAP the sockets were
// registered in, outlive the sockets (driver/xdp asks for that order).
package host
