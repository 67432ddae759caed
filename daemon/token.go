package daemon

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/exo/token"
)

// TokenPath is a fast path that sends this host's frames itself (token
// mode, xdp_token: docs/token.md): the control plane (package exo/token)
// drives it, and the daemon's protocol loop waits on it instead of on its
// socket: every frame the fast path accepts or leaves to the slow path
// comes up as a record.
type TokenPath interface {
	token.FastPath
	// Wait blocks until records can be read or deadline passes
	// (os.ErrDeadlineExceeded), or the fast path is closed
	// (net.ErrClosed).
	Wait(deadline time.Time) error
	// TokenCounters returns the fast path's own counters (frames sent,
	// empty passes, hand-offs, a full ring...), by name.
	TokenCounters() (map[string]uint64, error)
	// Since returns how long ago a record's Written was, on the fast
	// path's clock (0 when Written is 0).
	Since(written time.Duration) time.Duration
	// SetUrgentOnly sets what wakes Wait: with on, only records the
	// control plane must act on (the slow path, a halt, a ring filling
	// up), not the agreements of records. It takes effect on a Wait
	// already asleep when turned off.
	SetUrgentOnly(on bool)
}

// SetToken puts a fast path that sends in front of the core (after
// SetOffload, whose Offload checks tags and roster MACs with the same
// program): the protocol loop reads its records, and the control plane
// arms it whenever the log is in the plain case. With takeOver, the fast
// path outlived the previous daemon (its maps were pinned): its records
// not released are stepped into the core first (token.Driver.Recover).
// The fast path must be halted. Call it before Run.
func (d *Daemon) SetToken(tp TokenPath, takeOver bool) error {
	d.core.Lock()
	defer d.core.Unlock()
	if d.off == nil {
		return fmt.Errorf("daemon: token mode needs its fast path set first (SetOffload: the XDP program or the FPGA engine)")
	}
	d.tp = tp
	d.tok = token.New(d.node, tp, token.Config{
		MaxBatch: min(d.node.Config().MaxBatchBytes, TokenMaxBatch),
		Persist:  d.persistMeta,
		Admit:    d.admitRecord,
		Ready:    d.ready,
	})
	d.minFrame = d.TokenMinFrame()
	d.quiesceWhy = map[string]uint64{}
	if takeOver {
		fenced := d.node.Fenced()
		ok, err := d.tok.Recover()
		if err != nil {
			return fmt.Errorf("daemon: token mode: taking the fast path over: %w", err)
		}
		if err := d.ready(); err != nil {
			return err
		}
		d.log.Info("token mode: the fast path outlived the last daemon: its records stepped again",
			"records", d.tok.Stats().Records, "all_logged", ok, "was_fenced", fenced, "fenced", d.node.Fenced())
	}
	if _, err := d.tok.Sync(); err != nil {
		return fmt.Errorf("daemon: token mode: %w", err)
	}
	if err := d.tok.Release(); err != nil {
		return fmt.Errorf("daemon: token mode: %w", err)
	}
	d.metrics.reg.MustRegister(&tokenCollector{d: d})
	d.log.Info("token mode: the fast path sends this host's frames", "offload", d.off.off.Name(), "min_frame", d.minFrame,
		"fenced", d.node.Fenced())
	return nil
}

// TokenMinFrame is the length every frame of a token-mode rack is padded
// to on the wire (Ethernet header included). With xdp_token, the longest
// frame a host sends (a full batch, the longest history of the config's
// roster): the XDP program answers a frame in its buffer, which generic
// XDP grows by a few hundred bytes at most. With fpga_token, the Ethernet
// minimum: the engine builds its frame from its own queue, whatever the
// size of the frame it answers (a rack that mixes the two would have the
// FPGA hosts pad as the XDP ones do; it is not supported).
func (d *Daemon) TokenMinFrame() int {
	if d.cfg.FPGAToken == "on" {
		return exo.MinEthFrame
	}
	return max(exo.MinEthFrame, exo.EthHeaderLen+exo.HeaderLen+exo.HistoryLen(len(d.cfg.Roster))+d.node.Config().MaxBatchBytes)
}

// persistMeta makes the core's durable state other than the log durable
// now: before the fast path is first armed in an epoch (the fence,
// docs/token.md section 5).
func (d *Daemon) persistMeta() error {
	if d.disk == nil {
		return nil
	}
	d.setMeta(d.node)
	return d.disk.Commit()
}

// admitRecord is the roster MAC check of a record the core steps as a
// frame of its own (stepBatch's, for a frame of a later epoch, which the
// XDP program passes whatever its MAC: it must come from a known member).
func (d *Daemon) admitRecord(r *token.Record) bool {
	b := r.Frame
	if len(b) < exo.HeaderLen || len(r.Src) != 6 {
		return true
	}
	if d.checkRecord(b, r.Src) {
		return false // another host sends as this member id (dupid.go)
	}
	sender := b[exo.OffSender]
	epoch := binary.BigEndian.Uint32(b[exo.OffEpoch:])
	if binary.BigEndian.Uint16(b[exo.OffGroup:]) == d.cfg.Group && int(sender) < len(d.rawMACs) &&
		!bytesEqual(r.Src, d.rawMACs[sender]) && (epoch <= d.node.Pointers().Epoch || !d.knownMAC(r.Src)) {
		d.metrics.foreignMAC.Inc()
		return false
	}
	return true
}

// tokenLoop is frameLoop in token mode: it sleeps until the fast path has
// records or the core's next deadline, steps the records in order, fires
// the deadline (the fast path halted first: the core acts on its own),
// carries out the Ready and arms the fast path again.
func (d *Daemon) tokenLoop(ctx context.Context) {
	d.core.Lock()
	d.tickAt = time.Now()
	d.wakeAt = d.nextWake()
	d.core.Unlock()
	for ctx.Err() == nil {
		d.core.Lock()
		wake := d.wakeAt
		if d.tok.Pending() > 0 {
			// Records of this host wait for the token: look again
			// within a tick whether the rack went idle meanwhile
			// (token.Driver.Sync wakes it).
			wake = minTime(wake, time.Now().Add(d.cfg.Tick))
		}
		d.tp.SetUrgentOnly(d.nobodyWaits())
		d.core.Unlock()
		err := d.tp.Wait(wake)
		now := time.Now()
		timeout, stop, retry := d.waitOutcome(ctx, err)
		if stop {
			return
		}
		if retry {
			continue
		}
		d.core.Lock()
		d.catchUpClock(now, false)
		var last time.Duration
		n, err := d.tp.Records(func(r *token.Record) {
			last = r.Written
			if r.Armed && !r.Halt {
				// Stepped by the core as the fast path decided (no
				// admitRecord): another host under this member id
				// raises the alarm here (dupid.go), and tokenSync
				// halts the fast path for good.
				d.checkRecord(r.Frame, r.Src)
			}
			d.tok.Step(r)
		})
		if n > 0 && last > 0 {
			// The newest record of the batch: the one that woke the
			// loop, as a rule (docs/token.md section 2).
			d.metrics.tokenWait.Observe(d.tp.Since(last).Seconds())
		}
		if err != nil {
			d.fail(fmt.Errorf("daemon: token mode: reading records: %w", err))
		}
		d.metrics.framesIn.Add(float64(n))
		if timeout || !now.Before(d.wakeAt) {
			d.catchUpClock(now, true)
			d.watchBehind(now)
		}
		d.readyLocked()
		d.wakeAt = d.nextWake()
		if !d.wakeAt.After(time.Now()) {
			d.wakeAt = time.Now().Add(drainWindow)
		}
		d.metrics.wakeups.Inc()
		d.core.Unlock()
	}
}

// nobodyWaits reports whether nobody on this host waits for what the rack
// agrees: no publisher for its message, no subscriber (core lock held).
// The protocol loop then sleeps through agreements (TokenPath.
// SetUrgentOnly): the fast path keeps the token moving without it, and it
// reads the records at the core's next deadline or when one needs it
// (docs/token.md section 2). A publish or a subscription wakes it for
// every agreement again.
func (d *Daemon) nobodyWaits() bool {
	if os.Getenv("EXO_EAGER") != "" {
		return false
	}
	if len(d.waiters) > 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.subs) == 0
}

// quiesce halts the fast path and steps its records before the core acts
// on its own (core lock held): a deadline, an OOB message, a request. A
// failure stops the daemon.
func (d *Daemon) quiesce(why string) {
	if d.tok == nil {
		return
	}
	if d.tok.Armed() {
		d.quiesceWhy[why]++
	}
	if err := d.tok.Quiesce(); err != nil {
		d.fail(fmt.Errorf("daemon: token mode: %w", err))
	}
}

// tokenSync arms or halts the fast path after the core moved (core lock
// held, its Ready carried out), then releases the records stepped: what
// they did is logged.
func (d *Daemon) tokenSync() {
	if d.tok == nil {
		return
	}
	if d.dupStopped() {
		// Another host sends as this member id (dupid.go): the fast
		// path, which sends this host's frames, stays halted.
		d.quiesce("duplicate_id")
	} else if _, err := d.tok.Sync(); err != nil {
		d.fail(fmt.Errorf("daemon: token mode: %w", err))
		return
	}
	// Sync may have stepped records (an arm that missed): their Ready.
	if err := d.ready(); err != nil {
		d.fail(err)
		return
	}
	if err := d.tok.Release(); err != nil {
		d.fail(fmt.Errorf("daemon: token mode: %w", err))
	}
}

// fail stops the daemon with err.
func (d *Daemon) fail(err error) {
	d.log.Error("stopping", "err", err)
	select {
	case d.fatal <- err:
	default:
	}
}

// closeToken stops the fast path cleanly at shutdown (core lock held):
// halted, every record logged, the fence cleared in the durable state.
func (d *Daemon) closeToken() error {
	if d.tok == nil {
		return nil
	}
	if err := d.tok.Close(); err != nil {
		return fmt.Errorf("daemon: token mode: %w", err)
	}
	if err := d.ready(); err != nil {
		return err
	}
	return d.persistMeta()
}

// TokenStatus is the token mode part of the status: the control plane's
// counters and the fast path's.
type TokenStatus struct {
	Armed    bool   `json:"armed"`
	Records  uint64 `json:"records"`
	Fast     uint64 `json:"records_stepped_armed"`
	Sent     uint64 `json:"frames_sent_by_fast_path"`
	Popped   uint64 `json:"batches_taken"`
	Handoffs uint64 `json:"handoffs"`
	Halts    uint64 `json:"self_halts"`
	Quiesces uint64 `json:"quiesces"`
	Arms     uint64 `json:"arms"`
	Misses   uint64 `json:"arm_misses"`
	Desyncs  uint64 `json:"desyncs"`
	// Why the control plane halted a running fast path: a deadline of
	// the core, an OOB message, a roster or key request, a proposal on an
	// idle rack, the log leaving the plain case.
	QuiesceWhy map[string]uint64 `json:"quiesces_of_a_running_fast_path"`
	// Unlogged: frames the fast path sent for this host that the log
	// could not take, past an effective roster change as a rule (no core
	// appends them: harmless). Fenced: those among them with the core not
	// halted, a fault that fenced the host (never expected).
	Unlogged uint64            `json:"unlogged_sends"`
	Fenced   uint64            `json:"unlogged_sends_fenced"`
	IsFenced bool              `json:"fenced"`
	Kernel   map[string]uint64 `json:"fast_path_counters,omitempty"`
	Err      string            `json:"counters_error,omitempty"`
}

func (d *Daemon) tokenStatusLocked() *TokenStatus {
	if d.tok == nil {
		return nil
	}
	st := d.tok.Stats()
	s := &TokenStatus{Armed: d.tok.Armed(), Records: st.Records, Fast: st.Fast, Sent: st.Sent, Popped: st.Popped,
		Handoffs: st.Handoffs, Halts: st.Halts, Quiesces: st.Quiesces, Arms: st.Arms, Misses: st.ArmMisses,
		Desyncs: st.Desyncs, Unlogged: st.Unlogged, Fenced: st.Fenced, IsFenced: d.node.Fenced(), QuiesceWhy: map[string]uint64{}}
	for k, v := range d.quiesceWhy {
		s.QuiesceWhy[k] = v
	}
	s.QuiesceWhy["idle_proposal"] = st.IdleProposals
	s.QuiesceWhy["left_plain"] = st.LeftPlain
	k, err := d.tp.TokenCounters()
	if err != nil {
		s.Err = err.Error()
	}
	s.Kernel = k
	return s
}

// tokenCollector exports token mode's counters: the control plane's and
// the fast path's own (read at scrape time).
type tokenCollector struct{ d *Daemon }

var (
	tokenEventsDesc = prometheus.NewDesc("exo_token_events_total",
		"Token mode's control plane: records stepped, frames the fast path sent for this host, batches it took, hand-offs, self-halts, quiesces, arms, arm misses, desyncs, unlogged sends.",
		[]string{"event"}, nil)
	tokenFastDesc = prometheus.NewDesc("exo_token_fast_path_total",
		"Token mode's fast path counters (the XDP program: frames sent, empty passes, hand-offs, frames dropped for a full ring, records lost; the FPGA engine: its tx_* counters, and the frames on which it and the Go rule differed).",
		[]string{"counter"}, nil)
	tokenArmedDesc = prometheus.NewDesc("exo_token_armed", "1 while the fast path runs on its own (token mode).", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *tokenCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tokenEventsDesc
	ch <- tokenFastDesc
	ch <- tokenArmedDesc
}

// Collect implements prometheus.Collector.
func (c *tokenCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	d.core.Lock()
	st, armed := d.tok.Stats(), d.tok.Armed()
	d.core.Unlock()
	for _, e := range []struct {
		name string
		v    uint64
	}{{"records", st.Records}, {"stepped_armed", st.Fast}, {"sent", st.Sent}, {"batches_taken", st.Popped},
		{"handoffs", st.Handoffs}, {"self_halts", st.Halts}, {"quiesces", st.Quiesces}, {"arms", st.Arms},
		{"arm_misses", st.ArmMisses}, {"desyncs", st.Desyncs}, {"unlogged_sends", st.Unlogged}, {"fenced", st.Fenced}} {
		ch <- prometheus.MustNewConstMetric(tokenEventsDesc, prometheus.CounterValue, float64(e.v), e.name)
	}
	a := 0.0
	if armed {
		a = 1
	}
	ch <- prometheus.MustNewConstMetric(tokenArmedDesc, prometheus.GaugeValue, a)
	k, err := d.tp.TokenCounters()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(tokenFastDesc, err)
		return
	}
	for name, v := range k {
		ch <- prometheus.MustNewConstMetric(tokenFastDesc, prometheus.CounterValue, float64(v), name)
	}
}

// zeros pads token mode's frames (TokenMinFrame is at most 14 + 4096).
var zeros [exo.EthHeaderLen + TokenMaxFrame]byte

// minTime returns the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
