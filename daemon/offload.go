package daemon

import (
	"fmt"
	"net"

	"github.com/exo-rack/exo/exo"
)

// Offload is a fast path that holds a copy of the append and agreement
// pointers next to the wire (the XDP program in the kernel, the FPGA
// engine) and checks received frames before the core sees them.
//
// The core stays the authority. The fast path moves its pointers by
// itself on every frame it accepts; the daemon writes the core's pointers
// to it (SetState) whenever the core moved them in a way the fast path
// cannot have seen: its own broadcasts (written before the frame leaves),
// entries repaired over OOB, view changes, halts. A fast path that falls
// behind only hands more frames to the slow path (GAP), never loses one:
// the frames it drops are those no state can make valid (bad tag, other
// group, foreign MAC, malformed) and those below its append pointer or
// from an older epoch, which the core would drop too.
type Offload interface {
	// Name is the mode, for logs and metrics ("xdp", "fpga-sim").
	Name() string
	// SetState writes the pointer state.
	SetState(exo.Pointers) error
	// Counters returns the frames the fast path classified, per reason.
	Counters() ([exo.NumReasons]uint64, error)
	// Close detaches the fast path.
	Close() error
}

// RosterOffload is a fast path that checks source MACs by sender position
// (the XDP program, the FPGA engine): the daemon writes the MACs of the
// core's current roster, by position, at SetOffload and after every
// membership switch (docs/protocol.md section 7).
type RosterOffload interface {
	SetRoster(macs []net.HardwareAddr) error
}

// ExtraCounters is implemented by a fast path that counts more than the
// reasons (the XDP program's foreign-MAC drops, for one); the status shows
// them with the reason counters.
type ExtraCounters interface {
	ExtraCounters() (map[string]uint64, error)
}

// InlineOffload is a fast path that sees each received frame in user
// space, before the core (the simulated FPGA engine): the daemon hands it
// every frame and uses its verdict. An Offload that is not inline sits
// in front of the socket (XDP) and the daemon only receives what it
// passed.
type InlineOffload interface {
	Offload
	// Process classifies one whole Ethernet frame (header included) and
	// updates the fast path's pointers as the engine does on the wire.
	Process(frame []byte) (exo.Reason, error)
}

// offloadState is the daemon's side of an Offload: the shadow copy of the
// fast path's pointers, advanced with the fast path's own rule on every
// frame that reaches the core, so that a write is needed only when the
// core and the shadow differ.
type offloadState struct {
	off     Offload
	inline  InlineOffload
	shadow  exo.Pointers
	ethbuf  []byte
	last    exo.Reason // the inline fast path's verdict on the frame being stepped
	coll    *offloadCollector
	dirty   bool // the fast path's pointers may differ from the shadow
	pushes  uint64
	drops   uint64 // frames an inline offload dropped
	differs uint64 // frames where an inline offload and the core disagreed on ACCEPT
}

// SetOffload puts a fast path in front of the core and writes the core's
// pointers to it. Call it after New and before Run.
func (d *Daemon) SetOffload(o Offload) error {
	d.core.Lock()
	defer d.core.Unlock()
	st := &offloadState{off: o}
	st.inline, _ = o.(InlineOffload)
	st.shadow = d.node.Pointers()
	if err := o.SetState(st.shadow); err != nil {
		return fmt.Errorf("daemon: offload %s: %w", o.Name(), err)
	}
	st.pushes++
	if ro, ok := o.(RosterOffload); ok {
		if err := ro.SetRoster(d.rawMACs); err != nil {
			return fmt.Errorf("daemon: offload %s: roster: %w", o.Name(), err)
		}
	}
	if ko, ok := o.(KeyOffload); ok {
		// Both key slots: a rotation may be in flight (next_key_file).
		if err := ko.SetKeys(d.ring); err != nil {
			return fmt.Errorf("daemon: offload %s: keys: %w", o.Name(), err)
		}
	}
	d.off = st
	st.coll = newOffloadCollector(o)
	d.metrics.reg.MustRegister(st.coll)
	d.log.Info("fast path in front of the core", "offload", o.Name(), "inline", st.inline != nil)
	return nil
}

// ClearOffload takes the fast path away again (when it was set but could
// not be attached); the core runs alone.
func (d *Daemon) ClearOffload() {
	d.core.Lock()
	defer d.core.Unlock()
	if d.off != nil {
		d.metrics.reg.Unregister(d.off.coll)
		d.off = nil
	}
}

// offloadInline runs a received frame (the bytes after the Ethernet
// header, from src) through an inline fast path and reports whether it
// goes on to the core: dropped frames are counted and go no further.
func (d *Daemon) offloadInline(b []byte, src net.HardwareAddr) bool {
	st := d.off
	st.ethbuf = append(st.ethbuf[:0], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	st.ethbuf = append(st.ethbuf, src...)
	st.ethbuf = append(st.ethbuf, byte(exo.EtherType>>8), byte(exo.EtherType&0xff))
	st.ethbuf = append(st.ethbuf, b...)
	r, err := st.inline.Process(st.ethbuf)
	if err != nil {
		d.log.Error("offload: engine failed; frame left to the core", "offload", st.off.Name(), "err", err)
		st.last = exo.NumReasons
		return true
	}
	st.last = r
	if r != exo.ReasonAccept && !r.SlowPath() {
		st.drops++
		d.metrics.offloadDrops.WithLabelValues(r.String()).Inc()
		return false
	}
	return true
}

// offloadShadow advances the shadow pointers as the fast path did for a
// frame that reached the core (the fast path's rule, exo.Pointers, is the
// same code), and counts the frames where an inline fast path's verdict
// differs from the shadow's.
func (d *Daemon) offloadShadow(f *exo.Frame) {
	st := d.off
	r := st.shadow.Classify(f)
	if st.inline != nil && st.last != exo.NumReasons && (r == exo.ReasonAccept) != (st.last == exo.ReasonAccept) {
		st.differs++
		st.dirty = true // the engine's pointers are not the shadow's: rewrite them
	}
	if r == exo.ReasonAccept {
		st.shadow.Accept(f.Sender, f.Seq)
	}
}

// offloadSync writes the core's pointers to the fast path when they
// differ from what the fast path holds (the shadow).
func (d *Daemon) offloadSync() {
	st := d.off
	p := d.node.Pointers()
	if p == st.shadow && !st.dirty {
		return
	}
	if err := st.off.SetState(p); err != nil {
		d.log.Warn("offload: writing the pointers", "offload", st.off.Name(), "err", err)
		return
	}
	st.shadow = p
	st.dirty = false
	st.pushes++
	d.metrics.offloadPushes.Inc()
}

// OffloadStatus is the offload part of the status reply: the fast path in
// use, how often the control plane wrote its pointers, and its counters.
type OffloadStatus struct {
	Mode     string            `json:"mode"`
	Pushes   uint64            `json:"state_writes"`
	Drops    uint64            `json:"inline_drops,omitempty"`
	Differs  uint64            `json:"inline_disagreements,omitempty"`
	Counters map[string]uint64 `json:"counters,omitempty"`
	Err      string            `json:"counters_error,omitempty"`
}

func (d *Daemon) offloadStatusLocked() *OffloadStatus {
	if d.off == nil {
		return nil
	}
	s := &OffloadStatus{Mode: d.off.off.Name(), Pushes: d.off.pushes, Drops: d.off.drops, Differs: d.off.differs}
	c, err := d.off.off.Counters()
	if err != nil {
		s.Err = err.Error()
		return s
	}
	s.Counters = map[string]uint64{}
	for r, v := range c {
		if v != 0 {
			s.Counters[exo.Reason(r).String()] = v
		}
	}
	if x, ok := d.off.off.(ExtraCounters); ok {
		extra, err := x.ExtraCounters()
		if err != nil {
			s.Err = err.Error()
		}
		for k, v := range extra {
			if v != 0 {
				s.Counters[k] = v
			}
		}
	}
	return s
}
