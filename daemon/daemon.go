package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/exo/token"
	"github.com/exo-rack/exo/wal"
)

// FrameConn is what the daemon needs of a broadcast interface: package
// broadcast implements it on AF_PACKET and in memory (broadcast.Conn), and
// driver/xdp on AF_XDP. ReadFrames reads a batch with one system call;
// the read deadline is the core's next deadline (the daemon's one loop
// sleeps in the read until a frame comes or something is due).
type FrameConn interface {
	WriteFrame(b []byte) error
	ReadFrames(ms []broadcast.Message) (int, error)
	SetReadDeadline(t time.Time) error
	HardwareAddr() net.HardwareAddr
	MTU() int
	Close() error
}

// OOB is what the daemon needs of the out-of-band transport.
type OOB interface {
	Send(m exo.Message)
	Recv() <-chan exo.Message
}

// ReachableOOB is an OOB transport that takes a frame from a host as news
// that the network to it carries traffic again (oob.Transport.Reachable:
// a connection to it stuck in retransmission back-off after a partition
// is dialed anew instead of waiting for its next retransmission).
type ReachableOOB interface {
	Reachable(id uint8)
}

// Daemon runs one host of the rack.
type Daemon struct {
	cfg  *Config
	log  *slog.Logger
	conn FrameConn
	oob  OOB
	// reach is oob when it takes frames as news of reachability, or nil.
	reach ReachableOOB
	node  *exo.Node
	disk  *wal.Log // the durable log, or nil
	// syncedAt is when the durable log was last committed (mustCommit).
	syncedAt time.Time
	// segPrepared and segGrown are the durable log's segments begun (on a
	// prepared file, on an empty one) already counted in the metrics.
	segPrepared, segGrown uint64
	// restarted: the core came back from the durable log (RestartNode).
	restarted bool
	started   time.Time                  // when newDaemon began: before the durable log was read (Status.Started)
	lock      *dirLock                   // data_dir's lock (lock.go), or nil
	closed    bool                       // Run returned or Close was called: disk and lock released
	macs      map[uint8]net.HardwareAddr // MAC of every known member, by member id
	memory    memoryNote                 // the process's last huge-page pass (NoteMemory)
	rawMACs   []net.HardwareAddr         // MAC by position in the core's current roster
	roster    []uint8                    // the core's current roster (member ids by position)
	pos       uint8                      // this host's position in it (exo.HistoryNone: no member)
	dec       *decoder                   // the delivered stream's rosters and fragments
	// The delivered messages' memory, taken in chunks (deliverEntry):
	// payload bytes and message lists, referenced by the history and the
	// subscribers' queues until they let go of them.
	payArena  []byte
	msgArena  []client.Message
	vct       vcTrace // view changes, for the log and the metrics
	replaying bool    // the restart's first delivery (deliverAgreed)
	chunk     int     // bytes of one payload record
	metrics   *metrics

	// core guards the state machine and the fields below it: the reader,
	// the ticker, the OOB receiver and API calls each take it, step the
	// core and carry out its Ready, so a received frame is answered on the
	// goroutine that read it (no hand-off between goroutines).
	core    sync.Mutex
	fatal   chan error
	f       exo.Frame
	nextID  uint64
	waiters map[uint64]func(client.Ack)
	txbuf   []byte
	holdAt  time.Time
	// lateSeen is the core's late-frame count already added to the
	// metric (exo_late_frames_total).
	lateSeen uint64
	// The clock (catchUpClock): the time of the last tick counted, and
	// when the next deadline of the core falls (the frame loop's read
	// deadline).
	tickAt, wakeAt time.Time
	// Broadcast write failures (an interface whose egress is cut fails
	// every write): logged once, then once per writeLogEvery with the count.
	writeErrAt   time.Time
	writeErrMute int
	// The behind watchdog (watchBehind).
	stuckSince  time.Time
	stuckAppend uint64
	stuckLogAt  time.Time
	off         *offloadState // the fast path, or nil (software)
	// Token mode (token.go): the fast path that sends and its control
	// plane, or nil.
	tp         TokenPath
	tok        *token.Driver
	minFrame   int               // every frame sent padded to it (TokenMinFrame)
	quiesceWhy map[string]uint64 // quiesces of a running fast path, by cause
	// Key slots (keys.go): the core's ring, and each slot's group key
	// (for the OOB proofs) and file.
	ring      exo.KeyRing
	groupKeys [2][]byte
	keyFiles  [2]string
	keyFPs    [2]uint64 // fingerprints as of the last keysChanged (for the log of a retire)
	// dup: another host sends as this member id (dupid.go).
	dup dupAlarm
	// archive reads the retained durable log for fetch answers below the
	// core's log (FillArchive, from the OOB senders); retainAt is the last
	// retention check.
	archive  *wal.Reader
	retainAt time.Time
	logBytes int64     // the durable log's size at the last retention check
	heldAt   time.Time // the last exo.Node.AnnounceHeld

	// Shared with API goroutines (subscribers).
	mu         sync.Mutex
	history    [][]client.Message // recent delivered messages, one slice an entry, for subscribers starting behind
	histMsgs   int                // messages in history
	histBase   int                // messages dropped from the front of history
	streamFrom uint64             // the first seq of this host's delivered stream: its log base at the start, or where a state transfer jumped to (under mu)
	retained   uint64             // the first seq this host serves to fetches (exo.Node.ArchiveBase), for the subscribers' errors (under mu)
	rackFloor  uint64             // the rack's floor (exo.Node.RackFloor), 0 while unknown, for the same (under mu)
	subs       map[*subscriber]struct{}
	delivCnt   uint64
}

// rxBatch is a batch of received frames.
type rxBatch struct {
	msgs []broadcast.Message
	n    int
}

// FramesWaiting returns conn's check for a frame waiting to be read
// (broadcast.PacketConn.Pending), nil if conn has none: bulk work on the
// daemon's P yields only when it says so (yield.Slicer.Waiting; a yield
// with nothing waiting sleeps a millisecond of the runtime's poller for
// nothing). With nil it yields every time, as before.
func FramesWaiting(conn FrameConn) func() bool {
	if pc, ok := conn.(interface{ Pending() bool }); ok {
		return pc.Pending
	}
	return nil
}

// gcPause counts the daemons of this process reading their logs
// (pauseGC): the collector's setting is the process's, and daemons built
// side by side (tests, an embedding process) must not restore each
// other's "off".
var gcPause struct {
	sync.Mutex
	n    int
	prev int
}

// pauseGC turns the collector off until the returned func is called, for
// the first of the callers under way; the last one puts it back.
func pauseGC() func() {
	gcPause.Lock()
	if gcPause.n == 0 {
		gcPause.prev = debug.SetGCPercent(-1)
	}
	gcPause.n++
	gcPause.Unlock()
	return func() {
		gcPause.Lock()
		if gcPause.n--; gcPause.n == 0 {
			debug.SetGCPercent(gcPause.prev)
		}
		gcPause.Unlock()
	}
}

// newDaemon is New without the data_dir lock.
func newDaemon(cfg *Config, conn FrameConn, o OOB, log *slog.Logger) (*Daemon, error) {
	started := time.Now()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mtu := conn.MTU()
	groupKey, err := cfg.Key, error(nil)
	if groupKey == nil {
		groupKey, err = ReadKey(cfg.KeyFile)
	}
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	cc := cfg.coreConfig(mtu)
	cc.TagKey = FrameKey(groupKey) // every frame sent is sealed under it, every frame received checked
	var nextKey []byte
	if cfg.NextKeyFile != "" {
		if nextKey, err = readKey(cfg.NextKeyFile, "next_key_file"); err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
	}
	var nd *exo.Node
	var disk *wal.Log
	var hs exo.HardState
	if cfg.DataDir != "" {
		// No collection while the log is read and the core rebuilt from
		// it: everything they allocate lives on (the core's arena) or is
		// dropped at once (the segment's buffer), and a fresh heap grown
		// from nothing to the log's size was collected again and again on
		// the way. A lab restart spent a third of its log read's CPU in
		// the collector's assists.
		defer pauseGC()()
		pol, _ := wal.ParseSync(cfg.Fsync)
		if disk, hs, err = wal.OpenWith(cfg.DataDir, pol, wal.Options{SegmentBytes: cfg.SegmentBytes, Preallocate: cfg.Preallocate == "on"}); err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
		if disk.Repair != "" {
			log.Warn("durable log: damaged tail cut", "detail", disk.Repair)
		}
	}
	restarted := disk != nil && !disk.Empty()
	switch {
	case restarted:
		nd, err = exo.RestartNode(cc, hs)
		log.Info("restarting from the durable log", "dir", cfg.DataDir, "entries", len(hs.Log), "epoch", hs.Epoch, "amnesiac", hs.Amnesiac,
			"read_in", time.Since(started)) // (the log read and the core rebuilt from it)
	case cfg.Join:
		nd, err = exo.NewAmnesiacNode(cc)
	default:
		nd, err = exo.NewNode(cc)
	}
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	var archive *wal.Reader
	if disk != nil {
		archive = wal.NewReader(cfg.DataDir)
		archive.Class = cfg.ArchiveIO
		archive.YieldEvery = bulkYieldEvery
		archive.YieldIf = FramesWaiting(conn)
		nd.SetArchive(disk.Archive()) // the retained log below the core's (retain)
	}
	d := &Daemon{cfg: cfg, log: log, conn: conn, oob: o, node: nd, disk: disk, archive: archive, restarted: restarted, started: started,
		chunk: cc.MaxBatchBytes, fatal: make(chan error, 1), tickAt: time.Now(),
		nextID: rand.Uint64() >> 16, waiters: map[uint64]func(client.Ack){},
		subs:    map[*subscriber]struct{}{},
		metrics: newMetrics(), macs: map[uint8]net.HardwareAddr{}}
	d.reach, _ = o.(ReachableOOB)
	for _, m := range cfg.Roster {
		hw, _ := net.ParseMAC(m.MAC)
		d.macs[uint8(m.ID)] = hw
	}
	d.groupKeys[cc.KeyPhase], d.keyFiles[cc.KeyPhase] = groupKey, cfg.KeyFile
	if nextKey != nil {
		// A rotation in progress (or starting): stage the next key now; a
		// log that already holds every member's announcement switches at
		// once.
		ph, err := nd.StageKey(FrameKey(nextKey))
		if err != nil {
			return nil, fmt.Errorf("daemon: next_key_file %s: %w", cfg.NextKeyFile, err)
		}
		d.groupKeys[ph], d.keyFiles[ph] = nextKey, cfg.NextKeyFile
		log.Info("next key staged", "file", cfg.NextKeyFile, "phase", ph)
	}
	if hs.KeySent != 0 && hs.KeySent != nd.KeyStatus().Fingerprints[nd.KeyStatus().SendPhase] {
		// The durable log says this host sent under a key its config does
		// not hold: the rack has probably rotated on without it.
		log.Warn("this host sent under another key before the restart; it holds neither it nor, maybe, the rack's current key: add it as key_file (key_phase its slot) or next_key_file",
			"sent_under", fmt.Sprintf("%016x", hs.KeySent), "key_file", cfg.KeyFile)
	}
	if err := d.keysChanged(); err != nil {
		return nil, err
	}
	// The delivered stream starts at the core's log base (a restart
	// delivers its log again), whose roster the durable state names.
	d.dec = newDecoder(hs.Roster, cfg.Hosts, cfg.MaxMessage)
	d.streamFrom = nd.LogBase()
	d.retained = nd.ArchiveBase()
	d.refreshRoster()
	if own := conn.HardwareAddr().String(); own != d.macs[uint8(cfg.ID)].String() {
		return nil, fmt.Errorf("daemon: %w: the mac of member %d is %s but interface %s has %s",
			ErrConfig, cfg.ID, d.macs[uint8(cfg.ID)], cfg.Interface, own)
	}
	if cfg.MaxMessage > cc.MaxPending*(d.chunk-2-fragHeader-4) {
		return nil, fmt.Errorf("daemon: %w: max_message_bytes %d needs more than queue_len %d fragments",
			ErrConfig, cfg.MaxMessage, cc.MaxPending)
	}
	d.metrics.setInfo(cfg)
	return d, nil
}

// MAC returns the MAC of the broadcast interface (this host's roster MAC).
func (d *Daemon) MAC() net.HardwareAddr { return d.conn.HardwareAddr() }

// Restarted reports whether the core came back from a durable log that
// held a log or a state (rather than starting empty, or amnesiac with
// --join).
func (d *Daemon) Restarted() bool { return d.restarted }

// Run runs the daemon until ctx ends: the frame reader, the protocol loop,
// the local API and the metrics endpoint.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d.restarted {
		// The durable log's agreed entries first: a subscriber that comes
		// once the API answers finds the history rebuilt.
		d.core.Lock()
		d.replaying = true
		d.readyLocked()
		d.replaying = false
		d.core.Unlock()
	}
	api, err := d.listenAPI()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	wg.Add(4)
	go func() {
		defer wg.Done()
		if d.tp != nil {
			d.tokenLoop(ctx)
		} else {
			d.frameLoop(ctx)
		}
	}()
	go func() { defer wg.Done(); d.oobLoop(ctx) }()
	go func() { defer wg.Done(); errc <- d.serveAPI(ctx, api) }()
	go func() { defer wg.Done(); errc <- d.serveMetrics(ctx) }()
	d.log.Info("exo daemon running", "id", d.cfg.ID, "members", len(d.roster), "known_hosts", len(d.cfg.Roster), "interface", d.cfg.Interface,
		"mtu", d.conn.MTU(), "offload", d.cfg.Offload, "api", d.cfg.APISocket, "join", d.cfg.Join,
		"up_in", time.Since(d.started)) // (from before the durable log was read: a restart's replay included)
	select {
	case <-ctx.Done():
	case err = <-d.fatal:
	}
	cancel()
	d.conn.Close()
	d.core.Lock()
	if e := d.closeToken(); e != nil && err == nil {
		err = e
	}
	d.failWaiters(client.ErrShuttingDown)
	if d.disk != nil {
		if e := d.disk.Close(); e != nil && err == nil {
			err = e
		}
	}
	d.lock.release()
	d.closed = true
	d.core.Unlock()
	wg.Wait()
	close(errc)
	for e := range errc {
		if err == nil && e != nil {
			err = e
		}
	}
	d.log.Info("exo daemon stopped")
	return err
}

// frameLoop is the daemon's protocol loop: it reads frames in batches and
// steps them, and it keeps the core's time. It does not wake every tick:
// its read deadline is the core's next deadline (exo.Node.NextTick), and
// when the read times out it calls Tick once for every tick that elapsed
// (catchUpClock). Frames that arrived are always stepped before the
// deadline they may have made moot fires: a daemon that did not run for a
// while (CPU starvation) steps the frames that queued meanwhile before it
// takes their silence for a dead holder. OOB messages and API calls step
// the core on their own goroutines, under the core lock, and bring the
// read deadline closer when they bring the next deadline closer (armTick).
func (d *Daemon) frameLoop(ctx context.Context) {
	if p, ok := d.conn.(interface{ RxPoll() broadcast.RxPoll }); ok && p.RxPoll() != broadcast.RxPollRuntime {
		// The read blocks (or spins) on this OS thread: keep it, so that
		// a wake-up is this thread's return from ppoll and nothing else.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	size := d.conn.MTU() + 64
	b := &rxBatch{msgs: make([]broadcast.Message, broadcast.MaxBatch)}
	for i := range b.msgs {
		b.msgs[i].Buf = make([]byte, size)
		b.msgs[i].Src = make(net.HardwareAddr, 6)
	}
	d.core.Lock()
	d.tickAt = time.Now()
	d.wakeAt = d.nextWake()
	d.conn.SetReadDeadline(d.wakeAt)
	d.core.Unlock()
	for ctx.Err() == nil {
		n, err := d.conn.ReadFrames(b.msgs)
		now := time.Now()
		timeout, stop, retry := d.waitOutcome(ctx, err)
		if stop {
			return
		}
		if retry {
			continue
		}
		d.core.Lock()
		if n > 0 {
			d.catchUpClock(now, false)
			b.n = n
			d.stepBatch(&d.f, b)
		}
		if timeout || !now.Before(d.wakeAt) {
			// The deadline passed: it fires now, after the frames that
			// came before it (a steady stream of frames must not keep it
			// from firing), those queued since the read returned too.
			if d.stepQueued(b) {
				now = time.Now()
			}
			d.catchUpClock(now, true)
			d.watchBehind(now)
		}
		if now.Sub(d.heldAt) >= heldEvery {
			// What this host serves, to the other members (the rack's
			// floor in their status).
			d.node.AnnounceHeld()
			d.heldAt = now
		}
		d.readyLocked()
		d.wakeAt = d.nextWake()
		if now := time.Now(); d.wakeAt.After(now) {
			d.conn.SetReadDeadline(d.wakeAt)
		} else {
			// Due already (this loop was busy): a read whose deadline has
			// passed returns at once without looking at the socket, so
			// look for frames that queued meanwhile first; the deadline
			// fires if none came.
			d.conn.SetReadDeadline(now.Add(drainWindow))
		}
		d.metrics.wakeups.Inc()
		d.core.Unlock()
	}
}

// drainWindow is how long the frame loop looks for queued frames before a
// deadline that passed while it was busy fires.
const drainWindow = 20 * time.Microsecond

// stepQueued steps the frames queued on the socket now, before a deadline
// fires (core lock held), and reports whether there were any. A read
// returns at its deadline without looking at the socket, and the loop may
// then wait for a CPU or for the core lock (an OOB message, a publish, a
// status read) before the deadline fires: a holder's frame that came in
// that time would count as its silence, and the takeover it set off was a
// fork and a view change.
func (d *Daemon) stepQueued(b *rxBatch) bool {
	read := func() (int, error) {
		if q, ok := d.conn.(broadcast.QueuedReader); ok {
			return q.ReadQueued(b.msgs)
		}
		// A Conn that cannot: a read that looks for drainWindow.
		d.conn.SetReadDeadline(time.Now().Add(drainWindow))
		return d.conn.ReadFrames(b.msgs)
	}
	got := false
	for range 4 {
		n, err := read()
		if err != nil || n == 0 {
			break
		}
		got = true
		d.catchUpClock(time.Now(), false)
		b.n = n
		d.stepBatch(&d.f, b)
		if n < len(b.msgs) {
			break
		}
	}
	return got
}

// maxSleep bounds the frame loop's sleep when the core has no deadline:
// the behind watchdog still looks, and the ticks of a long sleep are
// counted in batches of at most maxSleep/tick.
const maxSleep = 250 * time.Millisecond

// catchUpClock moves the core's clock towards now (core lock held): it
// calls Tick once for every tick that elapsed since the last one counted,
// before any input is stepped, so that the core sees time and input in the
// order they happened (ticks counted after a frame would count as silence
// after it).
//
// Only the frame loop, once the read deadline passed, lets the deadline
// fire (NextTick ticks); an input counts the ticks up to just before it
// and leaves the rest for the loop. A loop that wakes more than a tick
// late did not run (CPU starvation on a shared machine): it counts one
// tick and drops the rest, as a ticker drops ticks to a slow receiver, so
// that timeouts stretch while the daemon cannot run instead of taking its
// own stall for the silence of a dead holder (the fixed 4 kHz ticker this
// replaces behaved so by accident); inputs then count none.
func (d *Daemon) catchUpClock(now time.Time, loop bool) {
	tick := d.cfg.Tick
	n := int(now.Sub(d.tickAt) / tick)
	if n <= 0 {
		return
	}
	late := now.Sub(d.wakeAt) > lateAfter(tick)
	k := d.node.NextTick()
	if loop && d.tok != nil && (late || n >= k) {
		// The deadline fires: the core acts on its own, with the fast
		// path halted and every record it wrote stepped (which may move
		// the deadline).
		d.quiesce("deadline")
		k = d.node.NextTick()
	}
	apply, used := 0, 0
	switch {
	case loop && late:
		apply, used = 1, n // the rest is dropped
	case loop:
		apply = min(n, k)
		used = apply
	case late:
	default:
		apply = min(n, k-1)
		used = apply
	}
	for i := 0; i < apply; i++ {
		d.node.Tick()
	}
	d.tickAt = d.tickAt.Add(time.Duration(used) * tick)
	d.metrics.ticks.Add(float64(apply))
}

// waitOutcome sorts the error of the protocol loop's wait for frames (or
// records): its deadline (timeout), the end of the loop (stop: cancelled,
// or the conn closed), or a read error, counted and retried after a
// millisecond (retry).
func (d *Daemon) waitOutcome(ctx context.Context, err error) (timeout, stop, retry bool) {
	timeout = errors.Is(err, os.ErrDeadlineExceeded)
	if err == nil || timeout {
		return timeout, false, false
	}
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return false, true, false
	}
	d.metrics.readErrors.Inc()
	time.Sleep(time.Millisecond)
	return false, false, true
}

// lateAfter is how far past its deadline the frame loop may wake before
// catchUpClock takes it for a loop that did not run: timers on a virtual
// machine fire a few hundred microseconds late as a rule; CPU starvation
// worth telling apart lasts milliseconds (a token timeout is 10 ms).
func lateAfter(tick time.Duration) time.Duration { return max(4*tick, 2*time.Millisecond) }

// nextWake is when the core's next deadline falls (core lock held).
func (d *Daemon) nextWake() time.Time {
	k := d.node.NextTick()
	if k == exo.NoTick || time.Duration(k)*d.cfg.Tick > maxSleep {
		return d.tickAt.Add(maxSleep)
	}
	return d.tickAt.Add(time.Duration(k) * d.cfg.Tick)
}

// armTick brings the frame loop's read deadline closer when a Ready
// brought the core's next deadline closer (core lock held).
func (d *Daemon) armTick() {
	if w := d.nextWake(); w.Before(d.wakeAt) {
		d.wakeAt = w
		if d.tp == nil {
			// (In token mode the loop waits on the fast path, and the
			// socket may be read by the fast path's own reader:
			// fpga_token.)
			d.conn.SetReadDeadline(w)
		}
	}
}

// oobLoop steps received OOB messages.
func (d *Daemon) oobLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-d.oob.Recv():
			if m.Type == exo.MsgHeld {
				// It only informs (the rack's floor): no quiesce, no Ready.
				d.core.Lock()
				d.node.Step(m)
				d.core.Unlock()
				continue
			}
			d.countFetched(&m)
			if m.Type == exo.MsgGone {
				d.metrics.goneNotices.Inc()
			}
			d.core.Lock()
			d.catchUpClock(time.Now(), false)
			d.quiesce("oob")
			d.node.Step(m)
			for k := 0; k < 64 && len(d.oob.Recv()) > 0; k++ {
				m := <-d.oob.Recv()
				d.countFetched(&m)
				d.node.Step(m)
			}
			d.readyLocked()
			d.core.Unlock()
		}
	}
}

// lazySync bounds how long entries received may stay written but not
// fsynced while this host sends nothing (mustCommit).
const lazySync = 100 * time.Millisecond

// mustCommit reports whether the durable log must be made durable (fsync)
// before rd is carried out: rd sends a frame or an OOB message other than
// a fetch (each vouches for this host's log: a frame's history, a
// promise's witness, an answer's entries), the meta changed (an epoch, a
// promise, a roster), a fast path sends on the log's behalf, entries wait
// unsynced for lazySync already, or the policy is fsync "entry". Otherwise
// the entries received stay written, and the fsync of the next Ready that
// sends covers them: a host of a 5-host rack fsynced for each frame it
// received, most of them followed by nothing it sent, and fsync was 29 %
// of a lab daemon's CPU (docs/recovery.md). A crash of the machine then
// loses at most entries this host never vouched for, as if it had crashed
// before they came; a crash of the daemon alone loses nothing (the page
// cache holds them).
func (d *Daemon) mustCommit(rd *exo.Ready, now time.Time) bool {
	if !d.disk.Pending() {
		return false
	}
	if d.cfg.Fsync == "entry" || len(rd.Frames) > 0 || d.disk.MetaPending() || d.off != nil || d.tok != nil || now.Sub(d.syncedAt) >= lazySync {
		return true
	}
	for _, m := range rd.Messages {
		if m.Type != exo.MsgFetch {
			return true
		}
	}
	return false
}

// countFetched counts the entries of a fetch answer (the catch-up's
// progress: exo_fetched_entries_total, exo_fetched_bytes_total).
func (d *Daemon) countFetched(m *exo.Message) {
	if m.Type != exo.MsgFetchResp || len(m.Entries) == 0 {
		return
	}
	n := 0
	for i := range m.Entries {
		n += m.Entries[i].BinarySize()
	}
	d.metrics.fetchedEntries.Add(float64(len(m.Entries)))
	d.metrics.fetchedBytes.Add(float64(n))
	d.log.Debug("fetch answer received", "from", m.From, "start", m.Start, "entries", len(m.Entries), "bytes", n, "hi", m.Hi, "agreed", m.Agreed, "log_epoch", m.LogEpoch)
}

// readyLocked carries out the core's Ready; an error stops the daemon.
func (d *Daemon) readyLocked() {
	if err := d.ready(); err != nil {
		select {
		case d.fatal <- err:
		default:
		}
	}
	d.tokenSync()
	d.armTick()
}

func (d *Daemon) stepBatch(f *exo.Frame, b *rxBatch) {
	for i := 0; i < b.n; i++ {
		m := &b.msgs[i]
		d.metrics.framesIn.Inc()
		if d.off != nil && d.off.inline != nil && !d.offloadInline(m.Buf[:m.N], m.Src) {
			continue
		}
		if err := f.UnmarshalBinary(m.Buf[:m.N]); err != nil {
			d.metrics.rejects.WithLabelValues(exo.ReasonOf(err).String()).Inc()
			continue
		}
		if d.off != nil {
			d.offloadShadow(f)
		}
		if d.claimsOwnID(f, m.Src, m.Buf[:m.N]) {
			continue // another host sends as this member id (dupid.go): never stepped
		}
		// Roster enforcement: a frame of our group that names a position
		// of the current roster must come from that member's MAC (other
		// groups are the core's BAD_GROUP; a bad tag is the core's
		// BAD_TAG, checked first as in the XDP program and the FPGA
		// engine). A frame of a later epoch may be of a roster this host
		// has not seen yet (section 7: it makes this host catch up): it
		// must come from a known member's MAC. Frames of this or an older
		// epoch are held to the current roster (an older epoch's frame is
		// dropped either way: STALE_EPOCH).
		if f.Group == d.cfg.Group && int(f.Sender) < len(d.rawMACs) && !bytesEqual(m.Src, d.rawMACs[f.Sender]) &&
			(f.Epoch <= d.node.Pointers().Epoch || !d.knownMAC(m.Src)) &&
			d.ring.VerifyBytes(m.Buf[:m.N]) {
			d.metrics.foreignMAC.Inc()
			continue
		}
		r := d.node.StepFrame(f) // the core copies what it keeps
		if r != exo.ReasonBadTag && d.reach != nil && f.Group == d.cfg.Group && int(f.Sender) < len(d.roster) {
			d.reach.Reachable(d.roster[f.Sender])
		}
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

func (d *Daemon) knownMAC(src []byte) bool {
	for _, hw := range d.macs {
		if bytesEqual(src, hw) {
			return true
		}
	}
	return false
}

// refreshRoster follows the core's current roster: positions -> member ids
// -> MACs.
func (d *Daemon) refreshRoster() {
	r := d.node.Roster()
	if slices.Equal(r, d.roster) && d.roster != nil {
		return
	}
	if d.roster != nil {
		d.log.Info("roster", "members", fmt.Sprint(r), "from_seq", d.node.ConfigSwitch(), "removed", d.node.Removed())
	}
	d.roster = r
	d.rawMACs = d.rawMACs[:0]
	d.pos = exo.HistoryNone
	for i, id := range r {
		d.rawMACs = append(d.rawMACs, d.macs[id]) // nil for an unknown member: frames from it never match
		if int(id) == d.cfg.ID {
			d.pos = uint8(i)
		}
	}
	if d.off != nil {
		if ro, ok := d.off.off.(RosterOffload); ok {
			if err := ro.SetRoster(d.rawMACs); err != nil {
				d.log.Error("offload: roster MACs not written; its MAC check is stale", "offload", d.off.off.Name(), "err", err)
			}
		}
	}
}

// Publish queues a message for broadcast; reply is called (with the core
// lock held: it must not block) once it is agreed or has failed.
func (d *Daemon) Publish(payload []byte, reply func(client.Ack)) {
	d.core.Lock()
	defer d.core.Unlock()
	d.catchUpClock(time.Now(), false)
	if err := d.dupRefusal(); err != nil {
		reply(client.Ack{Err: err})
		return
	}
	if len(payload) > d.cfg.MaxMessage {
		reply(client.Ack{Err: &client.APIError{Code: client.CodeTooLarge,
			Text: fmt.Sprintf("message of %d bytes, max_message_bytes is %d", len(payload), d.cfg.MaxMessage)}})
		return
	}
	d.nextID++
	recs := split(d.nextID, payload, d.chunk)
	if pending := d.pending(); pending+len(recs) > d.cfg.QueueLen {
		d.metrics.queueFull.Inc()
		reply(client.Ack{Err: &client.APIError{Code: client.CodeQueueFull,
			Text: fmt.Sprintf("queue full (%d payload records waiting)", pending)}})
		return
	}
	for _, rec := range recs {
		if err := d.propose(rec); err != nil {
			// Cannot happen after the checks above; never drop silently.
			reply(client.Ack{Err: &client.APIError{Code: client.CodeQueueFull, Text: err.Error()}})
			return
		}
	}
	d.waiters[d.nextID] = reply
	d.metrics.published.Inc()
	d.readyLocked()
}

// pending returns the payload records waiting for the token: in the core,
// and in token mode in the fast path's queue too (core lock held).
func (d *Daemon) pending() int {
	if d.tok != nil {
		return d.tok.Pending()
	}
	return d.node.Pending()
}

// propose queues one payload record: to the core, or in token mode
// through the control plane (the fast path's queue while it runs).
func (d *Daemon) propose(rec []byte) error {
	if d.tok != nil {
		// Its publisher waits for its agreement: every agreement wakes
		// the loop from now on (before the fast path may send it).
		d.tp.SetUrgentOnly(false)
		return d.tok.Propose(rec)
	}
	return d.node.Propose(rec)
}

// ProposeChange proposes a membership change: add or remove one member
// (by member id). A member to add must be in the config's roster of known
// members (its MAC and OOB address). It returns once the change is queued
// (the roster in the status shows when it took effect).
func (d *Daemon) ProposeChange(op exo.ChangeOp, member uint8) error {
	d.core.Lock()
	defer d.core.Unlock()
	d.catchUpClock(time.Now(), false)
	c := exo.ConfigChange{Op: op, Member: member}
	d.quiesce("roster")
	defer d.readyLocked()
	if op != exo.ChangeAdd && op != exo.ChangeRemove {
		return &client.APIError{Code: client.CodeBadRequest, Text: fmt.Sprintf("roster change: operation %d is neither add (1) nor remove (2)", op)}
	}
	if op == exo.ChangeAdd && d.cfg.member(int(member)) == nil {
		return &client.APIError{Code: client.CodeBadChange,
			Text: fmt.Sprintf("member %d is not in the config's roster of known members (its mac and oob address are needed): add it to every host's config first", member)}
	}
	if err := d.dupRefusal(); err != nil {
		return err
	}
	if d.node.Removed() {
		return &client.APIError{Code: client.CodeBadChange,
			Text: fmt.Sprintf("this host (member %d) is not a member of the roster %v: ask a member", d.cfg.ID, d.roster)}
	}
	if err := d.node.ProposeConfig(c); err != nil {
		code := client.CodeBadChange
		if errors.Is(err, exo.ErrChangeInFlight) {
			code = client.CodeChangeInFlight
		}
		return &client.APIError{Code: code, Text: fmt.Sprintf("%s on roster %v: %v", c, d.roster, err)}
	}
	d.log.Info("roster change proposed", "change", c.String(), "roster", fmt.Sprint(d.roster))
	d.readyLocked()
	return nil
}

// StatusJSON returns the status as JSON.
func (d *Daemon) StatusJSON() []byte {
	d.core.Lock()
	defer d.core.Unlock()
	return d.statusJSON()
}

// ready carries out the core's Ready.
func (d *Daemon) ready() error {
	nd := d.node
	if !nd.HasReady() {
		return nil
	}
	rd := nd.Ready()
	// Fetches go out at once: they ask for entries and promise nothing, so
	// the disk need not hold anything first, and a catch-up's next batch
	// comes while this one is written and delivered (a pipeline of two).
	for _, m := range rd.Messages {
		if m.Type == exo.MsgFetch && !d.dup.raised {
			d.oob.Send(m)
			d.metrics.oobOut.Inc()
			d.log.Debug("fetch sent", "to", m.To, "epoch", m.Epoch, "lo", m.Lo, "hi", m.Hi, "transfer", m.Amnesiac)
		}
	}
	// The durable log first: nothing else is sent that the disk does not
	// hold (under the fsync policy).
	if d.disk != nil {
		for _, e := range rd.Events {
			if e.Kind == exo.EventFloorJump {
				// The log starts anew past this host's: none of what the
				// disk held (archive included) continues it.
				if err := d.disk.Reset(); err != nil {
					return err
				}
			}
		}
		if rd.HasTruncate {
			if err := d.disk.Truncate(rd.Truncate); err != nil {
				return err
			}
		}
		if err := d.disk.Append(rd.Appended); err != nil {
			return err
		}
		d.countSegments()
		d.setMeta(nd)
		if now := time.Now(); d.mustCommit(&rd, now) {
			before := d.disk.Syncs()
			if err := d.disk.Commit(); err != nil {
				return err
			}
			d.metrics.walCommit.Observe(time.Since(now).Seconds())
			d.metrics.walFsyncs.Add(float64(d.disk.Syncs() - before))
			d.syncedAt = now
		}
	}
	d.withholdSends(&rd) // another host sends as this member id: nothing leaves
	if d.off != nil && d.tok == nil && len(rd.Frames) > 0 {
		// The fast path learns of this host's own entries before they
		// leave: the successor's reply must find them there.
		d.offloadSync()
	}
	for i := range rd.Frames {
		var err error
		d.txbuf, err = rd.Frames[i].AppendBinary(d.txbuf[:0])
		if err != nil {
			return fmt.Errorf("daemon: encode frame: %w", err)
		}
		if pad := d.minFrame - exo.EthHeaderLen - len(d.txbuf); pad > 0 {
			d.txbuf = append(d.txbuf, zeros[:pad]...) // token mode: every frame the same length
		}
		if err := d.conn.WriteFrame(d.txbuf); err != nil {
			d.metrics.writeErrors.Inc()
			d.writeFailed(err)
			continue
		}
		d.metrics.framesOut.Inc()
		if rd.Frames[i].Sender == d.pos && !d.holdAt.IsZero() {
			d.metrics.tokenHold.Observe(time.Since(d.holdAt).Seconds())
			d.holdAt = time.Time{}
		}
	}
	for _, m := range rd.Messages {
		if m.Type != exo.MsgFetch {
			d.oob.Send(m)
			d.metrics.oobOut.Inc()
			if m.Type == exo.MsgFetchResp {
				d.log.Debug("fetch answered", "to", m.To, "start", m.Start, "entries", len(m.Entries), "archive_hi", m.ArchiveHi, "hi", m.Hi, "agreed", m.Agreed, "log_epoch", m.LogEpoch)
			}
		}
	}
	for _, r := range rd.Rejects {
		d.metrics.rejects.WithLabelValues(r.Reason.String()).Inc()
	}
	for _, e := range rd.Events {
		switch e.Kind {
		case exo.EventViewChange:
			d.metrics.viewChanges.Inc()
			d.metrics.viewChangeCauses.WithLabelValues(e.Cause.String()).Inc()
			d.vct.start(e.Epoch, e.Cause, time.Now())
			d.log.Info("view change started", "epoch", e.Epoch, "seq", e.Seq, "cause", e.Cause)
		case exo.EventInstalled:
			now := time.Now()
			if s, led := d.vct.install(e.Epoch, now); led {
				took := now.Sub(s.at)
				d.metrics.viewChangeTime.Observe(took.Seconds())
				d.log.Info("epoch installed", "epoch", e.Epoch, "log_end", e.Seq, "led_here", true, "cause", s.cause, "took", took)
			} else {
				d.log.Info("epoch installed", "epoch", e.Epoch, "log_end", e.Seq)
			}
		case exo.EventTakeover:
			d.metrics.takeovers.Inc()
			det := nd.Detector()
			d.log.Info("token taken over", "from", e.Peer, "seq", e.Seq, "timeout_ticks", det.Timeout, "peak_ticks", det.Peak)
		case exo.EventSkippedAlive:
			d.metrics.falseTakeovers.Inc()
			d.log.Warn("a takeover passed this running host over (a false takeover: the token timeout in force was too short for a hop, or this host stalled)",
				"by", e.Peer, "seq", e.Seq, "timeout_ticks", d.node.Detector().Timeout)
		case exo.EventPastFloor:
			d.metrics.pastFloor.Inc()
			d.log.Warn("fell behind every member's retained log (keep_entries): this host becomes amnesiac and rejoins by state transfer; the fate of its unagreed messages is unknown",
				"agreed", e.Seq, "told_by", e.Peer)
			for id, w := range d.waiters {
				delete(d.waiters, id)
				w(client.Ack{Err: &client.APIError{Code: client.CodeUnknownFate,
					Text: "this host fell behind the rack's retained log and lost its unagreed state: the message may or may not be agreed; look for it in the stream before publishing again"}})
			}
		case exo.EventFloorJump:
			d.metrics.floorJumps.Inc()
			d.log.Warn("state transfer starts at a member's log base, past this host's log: the entries between are not delivered here",
				"from_seq", e.Seq, "member", e.Peer)
			// The delivered stream starts again there, in the roster there;
			// fragments of messages that straddle the jump are lost.
			d.dec = newDecoder(nd.BaseRoster(), d.cfg.Hosts, d.cfg.MaxMessage)
			d.mu.Lock()
			d.streamFrom = e.Seq
			d.mu.Unlock()
		case exo.EventChangeAgain:
			d.log.Info("roster change proposed again: a view change dropped it before it took effect", "member", e.Peer, "at_seq", e.Seq)
		case exo.EventSafety:
			d.metrics.safetyEvents.Inc()
			d.log.Error("SAFETY: an agreed entry would change; refused", "seq", e.Seq, "epoch", e.Epoch)
		case exo.EventKeySwitch, exo.EventKeyRetired:
			what := map[exo.EventKind]string{exo.EventKeySwitch: "switched", exo.EventKeyRetired: "retired"}[e.Kind]
			d.metrics.keyEvents.WithLabelValues(what).Inc()
			d.log.Info("key "+what, "phase", e.Peer, "fingerprint", fmt.Sprintf("%016x", d.keyFPs[e.Peer&1]), "file", d.keyFiles[e.Peer&1], "seq", e.Seq)
			if err := d.keysChanged(); err != nil {
				return err
			}
		}
	}
	if f, ok := d.vct.firstFrame(rd.Appended); ok {
		after := time.Since(d.vct.installed)
		d.metrics.epochFirstFrame.Observe(after.Seconds())
		d.log.Info("epoch began", "epoch", f.Epoch, "seq", f.Seq, "sender", f.Sender, "after_install", after)
	}
	d.deliverAgreed(rd.Agreed)
	for i := range rd.Dropped {
		_ = rd.Dropped[i].Records(func(rec []byte) error {
			if id, ok := recordID(rec); ok {
				if w, ok := d.waiters[id]; ok {
					delete(d.waiters, id)
					w(client.Ack{Err: &client.APIError{Code: client.CodeDropped,
						Text: fmt.Sprintf("dropped by a reconciliation before it was agreed (entry %d): publish again", rd.Dropped[i].Seq)}})
				}
			}
			return nil
		})
	}
	nd.Advance()
	d.refreshRoster()
	if d.off != nil && d.tok == nil {
		d.offloadSync()
	}
	p := nd.Pointers()
	if nd.Holder() == d.pos && d.holdAt.IsZero() {
		d.holdAt = time.Now()
	}
	d.metrics.observe(p, nd.Pending(), nd.Recovery(), d.cfg.Tick)
	det := nd.Detector()
	d.metrics.tokenTimeout.Set((time.Duration(det.Timeout) * d.cfg.Tick).Seconds())
	if det.Late > d.lateSeen {
		d.metrics.lateFrames.Add(float64(det.Late - d.lateSeen))
		d.lateSeen = det.Late
	}
	compacted := false
	if keep := uint64(d.cfg.KeepEntries); p.Agreed > nd.LogBase()+2*keep {
		nd.Compact(p.Agreed - keep)
		compacted = true
	}
	if d.disk != nil && (compacted || time.Since(d.retainAt) >= retainEvery) {
		return d.retain(nd, compacted)
	}
	return nil
}

// retainEvery spaces the retention checks between compactions (a bytes or
// age bound moves without them); heldEvery the announcements of what this
// host serves (exo.Node.AnnounceHeld).
const (
	retainEvery = time.Second
	heldEvery   = time.Second
)

// retain applies the retention policy (config retain) to the durable log:
// the in-memory log first compacted to the policy's floor if that is
// past it (the disk holds at least the core's log), the meta with the
// roster at the core's new base committed, then the segments below the
// floor removed; the core learns where its archive now starts.
func (d *Daemon) retain(nd *exo.Node, compacted bool) error {
	d.retainAt = time.Now()
	p := nd.Pointers()
	floor, err := d.disk.Floor(d.cfg.Retain.Policy(), p.Agreed, d.retainAt)
	if err != nil {
		return err
	}
	if floor > nd.LogBase() && !d.cfg.Retain.Policy().Zero() {
		nd.Compact(floor)
		compacted = true
	}
	if compacted {
		// The roster at the new base first: the disk keeps every entry
		// from the base its meta names.
		d.setMeta(nd)
		if err := d.disk.Commit(); err != nil {
			return err
		}
		if d.cfg.Retain.Policy().Zero() {
			floor = nd.LogBase()
		}
	}
	if _, err := d.disk.Retain(floor); err != nil {
		return err
	}
	before := nd.ArchiveBase()
	nd.SetArchive(d.disk.Archive())
	if after := nd.ArchiveBase(); after > before {
		if lag := nd.LaggingBelow(after); len(lag) > 0 {
			// Retention does not wait for them (the disk's bound comes
			// first), but says so: they catch up from other members, or
			// start at a member's base.
			d.metrics.retainLagging.Inc()
			d.log.Warn("retention removed log that lagging members had not agreed yet", "from_seq", before, "to_seq", after, "lagging", fmt.Sprint(lag))
		}
	}
	rf, known := nd.RackFloor()
	d.mu.Lock()
	d.retained, d.rackFloor = nd.ArchiveBase(), rf
	d.mu.Unlock()
	d.metrics.retainedBase.Set(float64(d.retained))
	if known {
		d.metrics.rackFloor.Set(float64(rf))
	}
	d.logBytes = d.disk.Size()
	d.metrics.logBytes.Set(float64(d.logBytes))
	return nil
}

// FillArchive fills a fetch answer or a promise that the core left to
// the retained log (exo.Message.ArchiveHi; oob.Config.Fill) from the
// durable log's segments, outside the core's lock. False when they no
// longer hold what it needs: the message is dropped, as a lost one (a
// fetch is asked again, and answered from the new base; a view change
// times out and starts again). The first read goes into scratch when the
// caller gives one (nil: buffers of its own), the others (a promise's
// range may take several) into buffers of their own: every entry stays
// valid until the message is encoded.
func (d *Daemon) FillArchive(m *exo.Message, scratch *[]byte) bool {
	if d.archive == nil {
		d.metrics.archiveMisses.Inc()
		return false
	}
	var rerr error
	ok := exo.FillFromArchive(m, func(lo, hi uint64, lim exo.FetchLimit) ([]exo.Entry, error) {
		into := scratch
		scratch = nil
		es, err := d.archive.ReadInto(into, lo, hi, lim)
		if err != nil {
			rerr = err
		}
		return es, err
	})
	if !ok {
		d.metrics.archiveMisses.Inc()
		if rerr != nil && !errors.Is(rerr, wal.ErrNotRetained) {
			d.log.Warn("retained log: read failed; the message is dropped", "type", m.Type, "from_seq", m.Start, "err", rerr)
		}
		return false
	}
	d.metrics.archiveAnswers.Inc()
	return true
}

// deliverAgreed delivers newly agreed entries. The first delivery of a
// restarted daemon (its durable log's agreed entries, before the API
// serves: no subscriber yet) builds the subscriber history of the newest
// keep_entries messages only: older entries go through the roster tracker
// and the reassemblers, and count as compacted, without a copy of each
// message that the history's trimming would drop at once.
func (d *Daemon) deliverAgreed(es []exo.Entry) {
	from := 0
	if d.replaying {
		n := 0
		for from = len(es); from > 0 && n < d.cfg.KeepEntries; from-- {
			n += int(es[from-1].Count)
		}
	}
	skipped := 0
	for i := range es {
		if i < from {
			skipped += d.passEntry(&es[i])
		} else {
			d.deliverEntry(&es[i])
		}
	}
	if skipped > 0 {
		d.mu.Lock()
		d.histBase += skipped
		d.delivCnt += uint64(skipped)
		d.metrics.delivered.Add(float64(skipped))
		d.mu.Unlock()
	}
}

// passEntry takes an agreed entry that the subscriber history will not
// hold (deliverAgreed): the roster tracker and the sender's reassembler see
// it as in deliverEntry; it returns the messages it completes.
func (d *Daemon) passEntry(e *exo.Entry) int {
	n := 0
	d.dec.entry(e, func(uint8, uint64, uint16, []byte) { n++ }, nil)
	return n
}

// deliverEntry reassembles the messages of an agreed entry and hands them
// to subscribers and to the publishers waiting for them.
func (d *Daemon) deliverEntry(e *exo.Entry) {
	// The entry's messages are copied out of the core's log (so that
	// compacting the log frees that memory) into chunks shared by many
	// entries (payArena, msgArena): a catch-up delivering 50,000 entries
	// at once allocated two objects an entry, and the allocator and the
	// collector were half of its delivery's time (BenchmarkDeliverEntry).
	if n := int(e.Count); cap(d.msgArena)-len(d.msgArena) < n {
		d.msgArena = make([]client.Message, 0, max(msgChunk, n))
	}
	l := len(d.msgArena)
	msgs := d.msgArena[l : l : l+int(e.Count)] // an append past Count (never) moves it out
	d.dec.entry(e, func(uid uint8, id uint64, idx uint16, msg []byte) {
		if cap(d.payArena)-len(d.payArena) < len(msg) {
			d.payArena = make([]byte, 0, max(payChunk, len(msg)))
		}
		start := len(d.payArena)
		d.payArena = append(d.payArena, msg...)
		m := client.Message{Position: client.Position{Seq: e.Seq, Index: idx}, Sender: uid, Payload: d.payArena[start:len(d.payArena):len(d.payArena)]}
		msgs = append(msgs, m)
		if int(uid) == d.cfg.ID {
			if w, ok := d.waiters[id]; ok {
				delete(d.waiters, id)
				w(client.Ack{Pos: m.Position})
			}
		}
	}, func(err error) {
		d.metrics.badFragments.Inc()
		d.log.Warn("fragment", "seq", e.Seq, "sender", e.Sender, "err", err)
	})
	if len(msgs) > 0 && len(msgs) <= int(e.Count) {
		d.msgArena = d.msgArena[:l+len(msgs)]
	}
	if len(msgs) > 0 {
		d.fanOut(msgs)
	}
}

// payChunk and msgChunk size deliverEntry's chunks: a chunk lives until
// the history and the subscribers let go of its last message, so they are
// small beside keep_entries' history (64 KiB of payloads, 1,024 messages).
const (
	payChunk = 64 << 10
	msgChunk = 1024
)

func (d *Daemon) failWaiters(err error) {
	for id, w := range d.waiters {
		w(client.Ack{Err: err})
		delete(d.waiters, id)
	}
}

// Status is the daemon's status (exo status --json).
type Status struct {
	ID int `json:"id"`
	// Started is when the daemon began, before it read its durable log:
	// what a restart took before it (starting the process) is the host's,
	// not the protocol's.
	Started  time.Time `json:"started"`
	Hosts    int       `json:"hosts"`
	Epoch    uint32    `json:"epoch"`
	Promised uint32    `json:"promised"`
	Halted   bool      `json:"halted"`
	Append   uint64    `json:"append_pointer"`
	Agreed   uint64    `json:"agreement_pointer"`
	LogBase  uint64    `json:"log_base"`
	// RetainedBase is the first seq this host serves to a fetch (a joiner,
	// a host far behind): the retained durable log's start (retain), or
	// log_base without one; LogBytes is the durable log's size.
	RetainedBase uint64 `json:"retained_base"`
	LogBytes     int64  `json:"log_bytes,omitempty"`
	// RackFloor is the lowest seq a majority of the members serve, from
	// what they announced (exo.Node.RackFloor; absent until h+1 known);
	// Held is what each member serves (first seq) and has agreed.
	RackFloor   *uint64    `json:"rack_floor,omitempty"`
	Held        []exo.Held `json:"held,omitempty"`
	Holder      int        `json:"token_holder"`
	Pending     int        `json:"queue_depth"`
	Delivered   uint64     `json:"messages_delivered"`
	Subscribers int        `json:"subscribers"`
	Waiting     int        `json:"publishes_waiting"`
	Skipped     []int      `json:"skipped_hosts"`
	// Membership (docs/protocol.md section 7): the current roster (member
	// ids by position), this host's position in it (-1: no member), the
	// seq it applies from, whether a change is in flight.
	Roster         []int             `json:"roster"`
	Position       int               `json:"position"`
	Removed        bool              `json:"removed"`
	RosterFrom     uint64            `json:"roster_from_seq"`
	ChangeInFlight bool              `json:"change_in_flight"`
	Known          []int             `json:"known_members"`
	Counters       map[string]uint64 `json:"counters"`
	Offload        *OffloadStatus    `json:"offload,omitempty"`
	Token          *TokenStatus      `json:"token,omitempty"`
	Keys           *KeyStatus        `json:"keys"`
	Recovery       RecoveryStatus    `json:"recovery"`
	// Detector is the token's failure detector (exo/detector.go): the
	// takeover timeout in force, following the gaps between appends.
	Detector DetectorStatus `json:"detector"`
	// DuplicateID: another host sends as this member id and this host
	// stopped sending (dupid.go); absent otherwise.
	DuplicateID *DuplicateIDStatus `json:"duplicate_id,omitempty"`
	// Memory: the process's anonymous memory and its part in huge pages
	// (huge_pages); absent with huge_pages off.
	Memory *MemoryStatus `json:"memory,omitempty"`
}

// DetectorStatus is the token's failure detector (exo.Detector), in ticks
// and in milliseconds of this host's tick.
type DetectorStatus struct {
	TimeoutTicks int     `json:"timeout_ticks"`
	TimeoutMs    float64 `json:"timeout_ms"`
	StaggerTicks int     `json:"stagger_ticks"`
	SRTTTicks    float64 `json:"srtt_ticks"`
	RTTVarTicks  float64 `json:"rttvar_ticks"`
	// PeakTicks is the longest gap between appends of the detector's last
	// 33-66 s (exo.Detector.Peak): the timeout is at least half again as
	// long, between MinTicks and MaxTicks.
	PeakTicks int    `json:"peak_ticks"`
	Samples   uint64 `json:"samples"`
	MinTicks  int    `json:"min_ticks"`
	MaxTicks  int    `json:"max_ticks"`
	// FalseTakeovers counts the takeovers that passed this host over while
	// it was running (with no fault, every one was false).
	FalseTakeovers uint64 `json:"false_takeovers"`
	// LateFrames counts the frames of holders passed over by a takeover
	// that this host heard after it (false takeovers seen by any host:
	// their gaps raise the timeout; exo.Detector.Late).
	LateFrames uint64 `json:"late_frames"`
	// GoneTicks is the takeover wait on a holder whose process is known
	// gone (gone_ticks; 0: such notices ignored); Gone lists the members
	// known gone now.
	GoneTicks int   `json:"gone_ticks"`
	Gone      []int `json:"gone,omitempty"`
}

func detectorStatus(x exo.Detector, tick time.Duration) DetectorStatus {
	return DetectorStatus{TimeoutTicks: x.Timeout, TimeoutMs: float64(time.Duration(x.Timeout)*tick) / 1e6,
		StaggerTicks: x.Stagger, SRTTTicks: x.SRTT, RTTVarTicks: x.RTTVar, PeakTicks: x.Peak, Samples: x.Samples,
		MinTicks: x.Min, MaxTicks: x.Max, FalseTakeovers: x.SkippedAlive, LateFrames: x.Late, GoneTicks: x.GoneTicks, Gone: ints(x.Gone)}
}

// RecoveryStatus is what the host does to get back in step with the rack
// (exo.Recovery): how far behind the frames it hears show it, the fetch
// under way, the later epoch's log it gathers, the view change it leads.
type RecoveryStatus struct {
	// BehindEntries: how far ahead of the append pointer, in this host's
	// epoch, the newest frame heard is; BehindEpoch: that frame is of a
	// later epoch (RackEpoch).
	BehindEntries uint64 `json:"behind_entries"`
	BehindEpoch   bool   `json:"behind_epoch"`
	RackEpoch     uint32 `json:"rack_epoch"`
	RackSeq       uint64 `json:"rack_seq"`
	Fetching      bool   `json:"fetching"`
	FetchPeer     int    `json:"fetch_peer,omitempty"`
	FetchTicks    int    `json:"fetch_ticks,omitempty"`
	GatherEpoch   uint32 `json:"gather_epoch,omitempty"`
	Gathered      int    `json:"gathered_entries,omitempty"`
	// StateTransfer: this host, amnesiac (--join, a wiped disk, or fallen
	// behind every member's retained log), fetches the rack's agreed log
	// before it rejoins (docs/recovery.md).
	StateTransfer bool `json:"state_transfer,omitempty"`
	// TransferTo is where the transfer heads: the highest agreement
	// pointer a member reported (the append pointer is where it stands).
	TransferTo uint64 `json:"transfer_to,omitempty"`
	// TransferPace is the transfer's pace in force, in bytes per second
	// (transfer_rate, lowered by transfer_yield while the rack slows), and
	// TransferRackPercent how fast the rack's log grew while it fetched,
	// in percent of its growth in its pauses, at the last pause.
	TransferPace        int64 `json:"transfer_pace_bytes_per_second,omitempty"`
	TransferRackPercent int   `json:"transfer_rack_percent,omitempty"`
	// ViewChange is the view change this host leads, if any.
	ViewChange *ViewChangeStatus `json:"view_change,omitempty"`
}

// ViewChangeStatus is a view change this host leads (exo.ViewChangeStatus).
type ViewChangeStatus struct {
	Epoch     uint32 `json:"epoch"`
	Lo        uint64 `json:"lo"`
	Ticks     int    `json:"ticks"`
	Promised  []int  `json:"promised"`
	Need      int    `json:"need"`
	Ambiguous bool   `json:"ambiguous"`
	Failures  int    `json:"timed_out_before"`
	// Cause is why this host started it (exo.Cause: divergence, retry,
	// left-out, ...).
	Cause string `json:"cause,omitempty"`
	// Doubt: while Ambiguous, what exo recover --accept-loss would accept
	// to lose (exo.Doubt).
	Doubt *DoubtStatus `json:"doubt,omitempty"`
}

// DoubtStatus is an exo.Doubt: positions From..To-1 (To 0: every position
// from From on) may have been agreed on a branch that accept-loss does not
// install; Lost are the entries of such branches the answering hosts hold.
type DoubtStatus struct {
	From uint64      `json:"from"`
	To   uint64      `json:"to"`
	Lost []LostEntry `json:"lost"`
}

// LostEntry names an entry in doubt: its position, epoch and sender (a
// roster position) and how many payload records it holds.
type LostEntry struct {
	Seq     uint64 `json:"seq"`
	Epoch   uint32 `json:"epoch"`
	Sender  uint8  `json:"sender"`
	Records int    `json:"records"`
}

func doubtStatus(d exo.Doubt) *DoubtStatus {
	s := &DoubtStatus{From: d.From, To: d.To, Lost: []LostEntry{}}
	if d.To == math.MaxUint64 {
		s.To = 0
	}
	for _, e := range d.Lost {
		s.Lost = append(s.Lost, LostEntry{Seq: e.Seq, Epoch: e.Epoch, Sender: e.Sender, Records: int(e.Count)})
	}
	return s
}

// AcceptLoss is the operator's way out of a view change this host leads
// that waits on what only hosts that lost their state could decide
// (exo.Node.AcceptLoss). from and to must be the doubt the status shows
// (to 0: open-ended), so that what is accepted is what was read.
func (d *Daemon) AcceptLoss(from, to uint64) error {
	d.core.Lock()
	defer d.core.Unlock()
	d.catchUpClock(time.Now(), false)
	nd := d.node
	doubt, err := nd.AmbiguousDoubt()
	if err != nil {
		return &client.APIError{Code: client.CodeNotStalled, Text: fmt.Sprintf("refused: %v (read exo status: recovery.view_change)", err)}
	}
	shown := doubtStatus(doubt)
	if shown.From != from || shown.To != to {
		return &client.APIError{Code: client.CodeNotStalled,
			Text: fmt.Sprintf("refused: the doubt is now %d..%d, not the %d..%d confirmed; read the status again", shown.From, shown.To, from, to)}
	}
	if _, err := nd.AcceptLoss(); err != nil {
		return &client.APIError{Code: client.CodeNotStalled, Text: fmt.Sprintf("refused: %v", err)}
	}
	d.log.Warn("the operator accepted the loss: the view change was resolved without the hosts that lost their state",
		"from_seq", shown.From, "to_seq", shown.To, "entries_on_other_branches", len(shown.Lost))
	d.readyLocked()
	return nil
}

func recoveryStatus(r exo.Recovery, p exo.Pointers, nd *exo.Node, tick time.Duration) RecoveryStatus {
	s := RecoveryStatus{RackEpoch: r.RackEpoch, RackSeq: r.RackSeq, Fetching: r.Fetching,
		GatherEpoch: r.GatherEpoch, Gathered: r.Gathered, StateTransfer: r.Transferring, TransferTo: r.TransferTo,
		TransferRackPercent: r.TransferRackPercent}
	if tick > 0 {
		s.TransferPace = int64(float64(r.TransferPace) / tick.Seconds())
	}
	s.BehindEntries, s.BehindEpoch = r.Behind(p)
	if r.Fetching {
		s.FetchPeer, s.FetchTicks = int(r.FetchPeer), r.FetchTicks
	}
	if vc := r.ViewChange; vc != nil {
		v := &ViewChangeStatus{Epoch: vc.Epoch, Lo: vc.Lo, Ticks: vc.Ticks, Need: vc.Need, Ambiguous: vc.Ambiguous,
			Failures: vc.Failures, Promised: []int{}}
		if vc.Cause != 0 {
			v.Cause = vc.Cause.String()
		}
		for _, u := range vc.Promised {
			v.Promised = append(v.Promised, int(u))
		}
		if vc.Ambiguous && nd != nil {
			if d, err := nd.AmbiguousDoubt(); err == nil {
				v.Doubt = doubtStatus(d)
			}
		}
		s.ViewChange = v
	}
	return s
}

func (d *Daemon) statusJSON() []byte {
	nd := d.node
	p := nd.Pointers()
	d.mu.Lock()
	st := Status{ID: d.cfg.ID, Started: d.started, Hosts: len(d.roster), Epoch: p.Epoch, Promised: nd.Promised(), Halted: nd.Halted(),
		Append: p.Append, Agreed: p.Agreed, LogBase: nd.LogBase(), RetainedBase: nd.ArchiveBase(), LogBytes: d.logBytes, Holder: int(nd.Holder()), Pending: nd.Pending(),
		Delivered: d.delivCnt, Subscribers: len(d.subs), Waiting: len(d.waiters), Skipped: []int{},
		Counters: d.metrics.counters(), Offload: d.offloadStatusLocked(), Token: d.tokenStatusLocked(), Keys: d.keyStatus(),
		Recovery: recoveryStatus(nd.Recovery(), p, nd, d.cfg.Tick), Detector: detectorStatus(nd.Detector(), d.cfg.Tick), DuplicateID: d.dupStatus(), Memory: d.memoryStatus()}
	d.mu.Unlock()
	if sc, ok := d.conn.(interface{ Stats() broadcast.Stats }); ok {
		// Frames the kernel dropped because the socket's receive queue
		// was full (PACKET_STATISTICS): each may cost a gap repair, or a
		// takeover of the host whose frame it was.
		if n := sc.Stats().Dropped; n > 0 {
			st.Counters["frames_dropped"] = n
		}
	}
	if f, ok := nd.RackFloor(); ok {
		st.RackFloor = &f
	}
	st.Held = nd.HeldByMembers()
	for i := range d.roster {
		if nd.Skipped(uint8(i)) {
			st.Skipped = append(st.Skipped, i)
		}
	}
	st.Position = -1
	if d.pos != exo.HistoryNone {
		st.Position = int(d.pos)
	}
	for _, id := range d.roster {
		st.Roster = append(st.Roster, int(id))
	}
	for _, m := range d.cfg.Roster {
		st.Known = append(st.Known, m.ID)
	}
	slices.Sort(st.Known)
	st.Removed, st.RosterFrom, st.ChangeInFlight = nd.Removed(), nd.ConfigSwitch(), nd.ChangeInFlight()
	b, _ := json.Marshal(st)
	return b
}

// setMeta hands the core's durable state besides the log to the disk.
func (d *Daemon) setMeta(nd *exo.Node) {
	hs := nd.HardStateMeta()
	d.disk.SetMeta(wal.Meta{Amnesiac: hs.Amnesiac, Epoch: hs.Epoch, Promised: hs.Promised, Agreed: hs.Agreed, Skipped: hs.Skipped,
		Roster: hs.Roster, RosterAt: nd.LogBase(), KeySent: hs.KeySent, FastArmed: hs.FastArmed, FastEpoch: hs.FastEpoch, Fenced: hs.Fenced})
}

// writeLogEvery spaces the log lines of failing broadcast writes.
const writeLogEvery = 5 * time.Second

// writeFailed logs a failed broadcast write: the first at once, then one
// line per writeLogEvery with how many failed in between (each is counted
// in exo_write_errors_total).
func (d *Daemon) writeFailed(err error) {
	if now := time.Now(); now.Sub(d.writeErrAt) >= writeLogEvery {
		d.log.Warn("broadcast write failed", "err", err, "failed_since_last_line", d.writeErrMute)
		d.writeErrAt, d.writeErrMute = now, 0
		return
	}
	d.writeErrMute++
}

// stuckAfter is how long a host may stay behind the rack without its append
// pointer moving before the daemon says so (and again every stuckAfter).
const stuckAfter = 5 * time.Second

// watchBehind logs, while the frames this host hears show the rack ahead
// and its append pointer has not moved for stuckAfter, what it is doing
// about it: the fetch under way, the later epoch's log it gathers, the view
// change it leads or waits for. A host that stays behind says why.
func (d *Daemon) watchBehind(now time.Time) {
	nd := d.node
	p := nd.Pointers()
	r := nd.Recovery()
	behind, later := r.Behind(p)
	if (!later && behind <= nd.Config().SeqWindow) || p.Append != d.stuckAppend {
		d.stuckSince, d.stuckAppend = now, p.Append
		return
	}
	if now.Sub(d.stuckSince) < stuckAfter || now.Sub(d.stuckLogAt) < stuckAfter {
		return
	}
	d.stuckLogAt = now
	args := []any{"for", now.Sub(d.stuckSince).Round(time.Millisecond), "epoch", p.Epoch, "append_pointer", p.Append,
		"rack_epoch", r.RackEpoch, "rack_seq", r.RackSeq, "halted", p.Halted, "promised", nd.Promised()}
	if r.Fetching {
		args = append(args, "fetching_from", r.FetchPeer, "fetch_ticks", r.FetchTicks)
	}
	if r.Gathered > 0 {
		args = append(args, "gathering_epoch", r.GatherEpoch, "gathered_entries", r.Gathered)
	}
	if vc := recoveryStatus(r, p, nil, d.cfg.Tick).ViewChange; vc != nil {
		args = append(args, "view_change", vc.Epoch, "cause", vc.Cause, "promises", vc.Promised, "need", vc.Need, "ambiguous", vc.Ambiguous)
	}
	d.log.Warn("behind the rack and not catching up", args...)
}

// countSegments adds the durable log's segments begun since the last call
// to exo_wal_segments_total.
func (d *Daemon) countSegments() {
	p, g := d.disk.Prepared()
	if p == d.segPrepared && g == d.segGrown {
		return // no segment begun: the common case, after every append
	}
	d.metrics.walSegments.WithLabelValues("prepared").Add(float64(p - d.segPrepared))
	d.metrics.walSegments.WithLabelValues("empty").Add(float64(g - d.segGrown))
	d.segPrepared, d.segGrown = p, g
}
