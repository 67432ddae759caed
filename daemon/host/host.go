package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/daemon/hugepage"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/oob"
)

// Host is one rack host's daemon with everything it runs on: the
// broadcast connection, the OOB transport and the fast path. Open builds
// it, Run runs it once; Close releases a Host that is not run.
type Host struct {
	conn   daemon.FrameConn
	tr     *oob.Transport
	d      *daemon.Daemon
	fast   daemon.Offload // the fast path in front of the core, nil for none
	detach func()         // detaches and closes fast; a no-op without one
	huge   bool           // huge_pages on: Run advises the process's heap
	log    *slog.Logger

	mu    sync.Mutex
	spent bool // Run or Close was called
}

// Run opens the host of cfg (Open) and runs it until ctx ends or the
// daemon fails (Host.Run): the whole life of `exo daemon`.
func Run(ctx context.Context, cfg *daemon.Config, log *slog.Logger) error {
	h, err := Open(cfg, log)
	if err != nil {
		return err
	}
	return h.Run(ctx)
}

// Open builds the host of cfg, a validated config (daemon.LoadConfig):
// it opens the broadcast connection on cfg.Interface in the calling
// thread's network namespace, reads the key file, listens for OOB
// connections, makes the daemon (which opens the durable log) and puts
// the fast path cfg.Offload names in front of it, attached. With offload
// "auto" a fast path that cannot load falls back to the software path
// with one warning line; when it is the AF_XDP delivery that cannot open,
// Open also sets cfg.Offload to "software", as the daemon then runs on an
// AF_PACKET socket. A nil log discards the logs. cfg.Procs > 0 sets the
// process's GOMAXPROCS (an embedding process that wants its own sets -1).
//
// Before anything else Open makes sure no other exo daemon holds
// cfg.DataDir or answers on cfg.APISocket (daemon.CheckAlone: the error
// wraps daemon.ErrInUse): a second daemon started by mistake must not take
// the interface's fast path or anything else from the first. The daemon
// holds data_dir's lock from then on until it stops.
//
// On error everything Open made is released again.
func Open(cfg *daemon.Config, log *slog.Logger) (*Host, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := daemon.CheckAlone(cfg); err != nil {
		return nil, err
	}
	if cfg.Procs > 0 {
		runtime.GOMAXPROCS(cfg.Procs) // the process's: Config.Procs says why
	}
	// With AF_XDP delivery the program is loaded first: the daemon's conn
	// is made of its sockets.
	var pre *xdpOffload
	var conn daemon.FrameConn
	var err error
	if (cfg.Offload == "xdp" || cfg.Offload == "auto") && cfg.XDPDelivery == "afxdp" {
		pre, conn, err = openXSK(cfg)
		if err != nil {
			if cfg.Offload == "xdp" {
				return nil, fmt.Errorf("offload xdp, delivery afxdp: %w", err)
			}
			log.Warn("offload auto: XDP with AF_XDP delivery unavailable, using the software path", "err", err)
			cfg.Offload, pre, conn = "software", nil, nil
		}
	}
	if conn == nil {
		if conn, err = listenPacket(cfg); err != nil {
			return nil, err
		}
	}
	fail := func(err error) (*Host, error) {
		conn.Close()
		if pre != nil {
			pre.Close()
		}
		return nil, err
	}
	// The one read of the key file: the OOB transport and the daemon take
	// these bytes (see Keys in the package doc); the fast path takes its
	// keys from the daemon.
	key, err := daemon.ReadKey(cfg.KeyFile)
	if err != nil {
		return fail(err)
	}
	peers := map[uint8]string{}
	for _, m := range cfg.Roster {
		peers[uint8(m.ID)] = m.OOB
	}
	// Fetch answers left to the retained log are read by the daemon, in
	// the transport's senders (which start with Run, after New).
	var d *daemon.Daemon
	fill := func(m *exo.Message, scratch *[]byte) bool { return d.FillArchive(m, scratch) }
	tr, err := oob.New(oob.Config{ID: uint8(cfg.ID), Group: cfg.Group, Listen: ownOOB(cfg), Peers: peers, Key: key, Logger: log, Fill: fill,
		YieldIf: daemon.FramesWaiting(conn)})
	if err != nil {
		return fail(err)
	}
	cfg.Key = key // the daemon takes these bytes too: the file is read once
	d, err = daemon.New(cfg, conn, tr, log)
	if err != nil {
		stopOOB(tr)
		return fail(err)
	}
	fast, detach, err := setupOffload(cfg, d, conn, pre, log)
	if err != nil {
		// setupOffload closed pre (or never had it).
		stopOOB(tr)
		conn.Close()
		d.Close()
		return nil, err
	}
	return &Host{conn: conn, tr: tr, d: d, fast: fast, detach: detach, huge: cfg.HugePages == "on", log: log}, nil
}

// ownOOB is the OOB address of this host's roster entry (Validate made
// sure there is one).
func ownOOB(cfg *daemon.Config) string {
	for _, m := range cfg.Roster {
		if m.ID == cfg.ID {
			return m.OOB
		}
	}
	return ""
}

// stopOOB releases a transport that never ran: oob.Transport has no
// Close, and Run on a context that has ended closes its listener and
// returns at once.
func stopOOB(tr *oob.Transport) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tr.Run(ctx)
}

// Daemon returns the daemon, for a process that publishes to it or reads
// its status in-process rather than through the local API.
func (h *Host) Daemon() *daemon.Daemon { return h.d }

// errSpent is Run's answer on a Host that was run or closed already.
var errSpent = errors.New("host: Run after Run or Close: a Host runs once")

// spend marks h as run or closed and reports whether it was neither.
func (h *Host) spend() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.spent {
		return false
	}
	h.spent = true
	return true
}

// Run runs the daemon and its OOB transport until ctx ends (nil after a
// clean stop) or the daemon fails, then releases everything: the daemon
// closes its connection when it stops, and the fast path is detached
// after it (the XDP program, and with AF_XDP delivery its XSKMAP, outlive
// the sockets). A Host runs once.
func (h *Host) Run(ctx context.Context) error {
	if !h.spend() {
		return errSpent
	}
	// The daemon closes conn when it stops; the program (and with AF_XDP
	// its XSKMAP) goes after it.
	defer h.detach()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.tr.Run(ctx) }()
	if h.huge {
		wg.Add(1)
		go func() { defer wg.Done(); h.hugePages(ctx) }()
	}
	err := h.d.Run(ctx)
	cancel()
	wg.Wait()
	if u, ok := h.fast.(interface{ Unpin() error }); ok && err == nil {
		// A clean stop logged every record: nothing to take over.
		if e := u.Unpin(); e != nil {
			err = fmt.Errorf("host: removing token mode's pinned maps: %w", e)
		}
	}
	return err
}

// hugePageEvery is how often the daemon process's new mappings are
// advised (huge_pages): a pass reads /proc/self/smaps, a millisecond or
// two for a daemon's few hundred mappings.
const hugePageEvery = time.Second

// hugePages runs the process's huge-page passes (huge_pages: package
// daemon/hugepage) until ctx ends: the daemon's status and metrics get
// each pass's figures, the log the first pass and the first error.
func (h *Host) hugePages(ctx context.Context) {
	first, failed := true, false
	hugepage.Run(ctx, hugePageEvery, func(st hugepage.Stats, err error) {
		h.d.NoteMemory(st.Anon, st.Huge, err)
		if err != nil && !failed {
			failed = true
			h.log.Warn("huge_pages: the kernel refused huge pages for some of the heap (they stay small: a kill of this daemon is noticed later by its peers)", "err", err)
		}
		if first {
			first = false
			h.log.Info("huge_pages: heap mappings advised", "advised_bytes", st.AdvisedBytes, "collapsed_bytes", st.CollapsedBytes, "anon_bytes", st.Anon)
		}
	})
}

// Close releases a Host that is not run, in Run's order: the connection,
// then the fast path, then the OOB listener, then the daemon's durable log
// and data_dir lock. After Run, or a first Close, it does nothing.
func (h *Host) Close() error {
	if !h.spend() {
		return nil
	}
	err := h.conn.Close()
	h.detach()
	stopOOB(h.tr)
	derr := h.d.Close()
	if err != nil {
		return fmt.Errorf("host: closing the broadcast connection: %w", err)
	}
	if derr != nil {
		return fmt.Errorf("host: closing the durable log: %w", derr)
	}
	return nil
}

// listenPacket opens the daemon's AF_PACKET socket, with errors that say
// what to do.
func listenPacket(cfg *daemon.Config) (daemon.FrameConn, error) {
	conn, err := broadcast.Listen(cfg.Interface, broadcast.Options{ReadBuffer: 8 << 20, RxPoll: broadcast.RxPoll(cfg.RxPoll)})
	if err != nil {
		switch {
		case errors.Is(err, broadcast.ErrPermission):
			return nil, fmt.Errorf("%w (the daemon opens a raw AF_PACKET socket)", err)
		case errors.Is(err, broadcast.ErrInterfaceNotFound):
			return nil, fmt.Errorf("%w: check \"interface\" in the config, or run the daemon in the host's network namespace (ip netns exec ...)", err)
		}
		return nil, err
	}
	return conn, nil
}
