package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

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
}

// SetToken puts a fast path that sends in front of the core (after
// SetOffload, whose Offload checks tags and roster MACs with the same
// program): the protocol loop reads its records, and the control plane
// arms it whenever the log is in the plain case. Call it before Run.
func (d *Daemon) SetToken(tp TokenPath) error {
	d.core.Lock()
	defer d.core.Unlock()
	if d.off == nil {
		return fmt.Errorf("daemon: token mode needs the XDP fast path set first (SetOffload)")
	}
	d.tp = tp
	d.tok = token.New(d.node, tp, token.Config{
		MaxBatch: min(d.node.Config().MaxBatchBytes, TokenMaxBatch),
		Persist:  d.persistMeta,
		Admit:    d.admitRecord,
		Ready:    d.ready,
	})
	if _, err := d.tok.Sync(); err != nil {
		return fmt.Errorf("daemon: token mode: %w", err)
	}
	d.log.Info("token mode: the fast path sends this host's frames", "offload", d.off.off.Name())
	return nil
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
		d.core.Unlock()
		err := d.tp.Wait(wake)
		now := time.Now()
		timeout := errors.Is(err, os.ErrDeadlineExceeded)
		if err != nil && !timeout {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			d.metrics.readErrors.Inc()
			time.Sleep(time.Millisecond)
			continue
		}
		d.core.Lock()
		d.catchUpClock(now, false)
		n, err := d.tp.Records(d.tok.Step)
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

// quiesce halts the fast path and steps its records before the core acts
// on its own (core lock held): a deadline, an OOB message, a request. A
// failure stops the daemon.
func (d *Daemon) quiesce() {
	if d.tok == nil {
		return
	}
	if err := d.tok.Quiesce(); err != nil {
		d.fail(fmt.Errorf("daemon: token mode: %w", err))
	}
}

// tokenSync arms or halts the fast path after the core moved (core lock
// held, its Ready carried out).
func (d *Daemon) tokenSync() {
	if d.tok == nil {
		return
	}
	if _, err := d.tok.Sync(); err != nil {
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
	Armed    bool              `json:"armed"`
	Records  uint64            `json:"records"`
	Fast     uint64            `json:"records_stepped_armed"`
	Sent     uint64            `json:"frames_sent_by_fast_path"`
	Popped   uint64            `json:"batches_taken"`
	Handoffs uint64            `json:"handoffs"`
	Halts    uint64            `json:"self_halts"`
	Quiesces uint64            `json:"quiesces"`
	Arms     uint64            `json:"arms"`
	Misses   uint64            `json:"arm_misses"`
	Desyncs  uint64            `json:"desyncs"`
	Fenced   uint64            `json:"unlogged_sends"`
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
		Desyncs: st.Desyncs, Fenced: st.Fenced, IsFenced: d.node.Fenced()}
	k, err := d.tp.TokenCounters()
	if err != nil {
		s.Err = err.Error()
	}
	s.Kernel = k
	return s
}
