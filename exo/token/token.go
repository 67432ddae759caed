// Package token is the control plane of a fast path that sends (token
// mode, docs/token.md): it steps the records the fast path hands up into
// the core (exo.Node) in order, keeps the two in step, halts the fast path
// before the core decides anything on its own, arms it again when the log
// is back in the plain case, and fills its transmit queue.
//
// It does no I/O of its own: the fast path is a FastPath (the XDP program
// in the daemon, Mem in the simulator and the tests), so the code the
// daemon runs is the code the simulator checks. A Driver is not safe for
// concurrent use: the daemon calls it under its core lock.
//
// The embedding loop, as the daemon runs it:
//
//	d := token.New(node, fp, cfg)
//	for {
//		wait for records, or the core's next deadline
//		fp.Records(d.Step)          // the fast path's records, in order
//		if a deadline is due {
//			d.Quiesce()             // halted, and every record stepped
//			node.Tick()
//		}
//		carry out node.Ready()      // persist, send, deliver
//		d.Sync()                    // quiesce if the log left the plain case; else arm
//	}
//
// and before an OOB message, a roster or key request: Quiesce, step the
// core, carry out its Ready, Sync. A publish goes through Propose.
package token

import (
	"errors"
	"fmt"
	"time"

	"github.com/exo-rack/exo/exo"
)

// Record is one frame the fast path handed to the control plane, with what
// it did about it (struct exo_rec, docs/token.md section 2).
type Record struct {
	// Kseq numbers the records: the fast path's Tx.Kseq before this one.
	Kseq uint64
	// QHead is the fast path's Tx.QHead after this record.
	QHead uint64
	// TxTag is the tag of the frame sent (Sent).
	TxTag  uint64
	Reason exo.Reason
	// Armed: the fast path was not halted when it classified the frame.
	Armed bool
	// Sent: it answered the frame with this host's next frame; Popped: that
	// frame carried the head batch of the queue.
	Sent, Popped bool
	// Handoff: it handed this host the token to the control plane (an idle
	// rack); Halt: it halted itself after this frame (a hand-off or a
	// slow-path verdict).
	Handoff, Halt bool
	// Src is the frame's Ethernet source MAC (may be nil).
	Src []byte
	// Frame is the received frame after the Ethernet header (padding
	// included). It is only valid during the call it is passed to.
	Frame []byte
	// Written is when the fast path wrote the record, on its own clock
	// (CLOCK_MONOTONIC for the XDP program; 0: not known). The reader
	// turns it into a wait once per batch: reading a clock per record
	// costs more than stepping it.
	Written time.Duration
}

// FastPath is a fast path that sends, as the control plane drives it
// (docs/token.md section 3).
type FastPath interface {
	// Halt stops the fast path (it accepts and sends nothing until Arm)
	// and returns its state: Kseq is the number of records it produced.
	// An error wrapping ErrLost says a record was lost after the state
	// moved.
	Halt() (exo.Engine, error)
	// Set writes e, all but Kseq (Halted included: false arms it, true
	// keeps it halted with the core's receive checks), if the fast path
	// has produced exactly e.Kseq records; otherwise it changes nothing
	// and reports false.
	Set(e exo.Engine) (bool, error)
	// Push publishes a batch at the tail of the transmit queue; false if
	// the queue is full (batches the fast path has not taken yet).
	Push(b exo.Batch) (bool, error)
	// Reclaim takes back the batches the fast path has not taken (it is
	// halted): the queue is empty afterwards. It returns how many.
	Reclaim() (int, error)
	// Records calls fn for every record available now, in the order the
	// fast path wrote them (which may differ from Kseq's: two CPUs), and
	// returns how many.
	Records(fn func(*Record)) (int, error)
	// Release tells the fast path that the records read so far are
	// logged (their effects durable): it may forget them. A fast path that
	// outlives its control plane (pinned) hands the records not released
	// to the next one (Driver.Recover).
	Release() error
	// Taken returns the batch the fast path took as number i (QHead i+1
	// after it) while it is still in its slot: at a restart, the batch a
	// record not released says it sent.
	Taken(i uint64) (exo.Batch, bool)
}

// ErrLost is wrapped by a FastPath's Halt when a record could not be
// written after the fast path's state had moved: the log misses a frame,
// maybe one this host sent. The daemon stops (a restart is fenced).
var ErrLost = errors.New("token: the fast path lost a record")

// QueueSlots is the depth of a fast path's transmit queue (64 batches in
// the XDP program).
const QueueSlots = 64

// Config sets a Driver up.
type Config struct {
	// MaxBatch bounds the payload bytes of one batch (the core's
	// MaxBatchBytes, at most the fast path's slot).
	MaxBatch int
	// Ahead is how many partly filled batches may wait in the queue: while
	// that many do, records are packed into the next one (0: 2).
	Ahead int
	// Persist makes the core's durable state (Node.HardStateMeta) durable:
	// called before the fast path is first armed in an epoch (the fence,
	// docs/token.md section 5). Nil: nothing to persist.
	Persist func() error
	// Admit, if set, is asked about every record that the core steps as a
	// frame of its own (halted fast path, hand-off, slow path): false skips
	// the frame (the daemon's roster MAC check of a later epoch's frames).
	Admit func(*Record) bool
	// DrainTimeout bounds the wait for the records below the Kseq a Halt
	// returned (0: 1 s).
	DrainTimeout time.Duration
	// Ready carries out the core's Ready (persist, send, deliver): Sync
	// calls it after a quiesce it decided on, before it arms again. Nil:
	// the caller does it after Sync, and Sync arms on its next call.
	Ready func() error
}

// Stats counts what a Driver did.
type Stats struct {
	Records    uint64 // records stepped
	Fast       uint64 // stepped with the fast path armed (StepFast)
	Sent       uint64 // frames the fast path sent for this host
	Popped     uint64 // batches it took from the queue
	Handoffs   uint64 // tokens it handed to the control plane
	Halts      uint64 // times it halted itself (hand-offs and slow paths)
	Quiesces   uint64 // halts by the control plane
	Arms       uint64 // successful arms
	ArmMisses  uint64 // arms refused: records came in between
	Desyncs    uint64 // verdicts of the fast path the core did not share (the core not halted)
	Unlogged   uint64 // frames the fast path sent that the log could not take
	Fenced     uint64 // ... with the core not halted (a fault): this host fenced
	Reproposed uint64 // records of batches the log could not take, proposed again
	// IdleProposals: quiesces for a proposal on an idle rack (it goes to
	// the core, which wakes the rack); LeftPlain: quiesces by Sync, the
	// log having left the plain case (or the transmit side changed).
	IdleProposals, LeftPlain uint64
}

// Driver is the control plane of one host's fast path that sends.
type Driver struct {
	nd  *exo.Node
	fp  FastPath
	cfg Config

	next    uint64             // Kseq of the next record to step
	early   map[uint64]*Record // records that came before their turn (copies)
	armed   bool               // armed by us, and no record since said it halted
	written exo.Pointers       // the pointers last written to it halted
	tx      exo.Tx             // what it was armed with (the static fields)
	epoch   uint32             // and its epoch and roster size
	hosts   uint16

	qhead  uint64      // batches it has taken
	relq   uint64      // qhead as of the last Release: slots up to it may be reused
	queued []exo.Batch // pushed and not taken yet, from qhead on
	full   []exo.Batch // packed, not pushed yet (the queue was full)
	open   exo.Batch   // the batch being packed

	stats Stats
	err   error // a failure in a record's step, returned by the next Quiesce or Sync
}

// New returns the control plane of fast path fp in front of node nd. The
// fast path must be halted, its queue empty and no record read; Sync
// writes it the core's state (halted or armed).
func New(nd *exo.Node, fp FastPath, cfg Config) *Driver {
	if cfg.Ahead <= 0 {
		cfg.Ahead = 2
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = time.Second
	}
	return &Driver{nd: nd, fp: fp, cfg: cfg, early: map[uint64]*Record{}}
}

// SetNode replaces the core (a restart of the core under the same fast
// path: a simulated crash). The fast path must have been halted and its
// records stepped (Quiesce).
func (d *Driver) SetNode(nd *exo.Node) { d.nd = nd }

// Stats returns the counters.
func (d *Driver) Stats() Stats { return d.stats }

// Armed reports whether the fast path runs on its own (as far as the
// records stepped so far tell).
func (d *Driver) Armed() bool { return d.armed }

// Next returns the Kseq of the next record the driver expects.
func (d *Driver) Next() uint64 { return d.next }

// Pending returns the records this host holds that are not on the wire
// yet: in the fast path's queue, packed here, and queued in the core.
func (d *Driver) Pending() int {
	n := d.nd.Pending() + int(d.open.Count)
	for _, b := range d.queued {
		n += int(b.Count)
	}
	for _, b := range d.full {
		n += int(b.Count)
	}
	return n
}

// Step steps one record, or keeps it until the records before it came
// (the records of two CPUs may reach the ring out of Kseq order). It is
// FastPath.Records' callback: the record is copied if it is kept.
func (d *Driver) Step(r *Record) {
	switch {
	case r.Kseq < d.next:
		return // stepped already (a duplicate read cannot happen; be safe)
	case r.Kseq > d.next:
		c := *r
		c.Frame = append([]byte(nil), r.Frame...)
		c.Src = append([]byte(nil), r.Src...)
		d.early[r.Kseq] = &c
		return
	}
	d.stepOne(r)
	for len(d.early) > 0 {
		e, ok := d.early[d.next]
		if !ok {
			break
		}
		delete(d.early, e.Kseq)
		d.stepOne(e)
	}
}

func (d *Driver) stepOne(r *Record) {
	d.next++
	d.stats.Records++
	var popped *exo.Batch
	if r.Popped {
		d.stats.Popped++
		if len(d.queued) > 0 {
			b := d.queued[0]
			popped = &b
			d.queued = d.queued[1:]
		}
		d.qhead++
	}
	if r.QHead != d.qhead || (r.Popped && popped == nil) {
		// The queue's accounting broke: nothing to do but say so; the
		// frame the fast path sent cannot be logged (below).
		d.qhead = r.QHead
		popped = nil
	}
	if r.Halt || !r.Armed {
		d.armed = false
	}
	if r.Halt {
		d.stats.Halts++
	}
	if r.Handoff {
		d.stats.Handoffs++
	}
	var f exo.Frame
	if err := f.UnmarshalBinary(r.Frame); err != nil {
		// The fast path decoded it; a frame it hands up always decodes.
		d.stats.Desyncs++
		if r.Sent {
			d.unlogged(popped)
		}
		return
	}
	if !r.Armed || r.Halt {
		// The fast path is stopped: the core steps the frame as its own,
		// and may act on it at once.
		if d.cfg.Admit == nil || d.cfg.Admit(r) {
			d.nd.StepFrame(&f)
		}
		if r.Halt {
			// It stopped itself here (a hand-off, a slow path): what its
			// queue holds goes to the core, which sends it when it holds
			// the token (a hand-off: now) or wakes the rack for it.
			d.reclaim()
		}
		return
	}
	d.stats.Fast++
	if got := d.nd.StepFast(&f); got != r.Reason && !d.nd.Halted() {
		d.stats.Desyncs++
	}
	if !r.Sent {
		return
	}
	d.stats.Sent++
	var b exo.Batch
	if r.Popped {
		if popped == nil {
			d.unlogged(nil)
			return
		}
		b = *popped
	}
	if err := d.nd.StepSent(b.Count, b.Payload, r.TxTag); err != nil {
		d.unlogged(popped)
	}
}

// unlogged handles a frame the fast path sent for this host that the log
// cannot take. The batch it carried is proposed again, and the fast path
// is halted at the next Sync. If the core is halted, the frame went past
// the end of the epoch (a roster change took effect there, which the fast
// path cannot see): no core appends anything there, so it is never agreed
// and this host's next frames are of a later epoch anyway. Otherwise the
// two are out of step (a fault): the host is fenced in this epoch, durably
// (Node.Fence; Persist), since it may not send again where its frame went.
func (d *Driver) unlogged(b *exo.Batch) {
	d.stats.Unlogged++
	if !d.nd.Halted() {
		d.stats.Fenced++
		d.nd.Fence()
		if d.cfg.Persist != nil {
			if err := d.cfg.Persist(); err != nil {
				d.err = fmt.Errorf("token: persisting the fence: %w", err)
			}
		}
	}
	if b == nil {
		return
	}
	recs := records(b)
	if d.nd.ProposeAll(recs) == nil {
		d.stats.Reproposed += uint64(len(recs))
	}
}

// records returns the records of a batch (aliasing it).
func records(b *exo.Batch) [][]byte {
	var out [][]byte
	_ = exo.ForEachRecord(b.Payload, b.Count, func(rec []byte) error {
		out = append(out, rec)
		return nil
	})
	return out
}

// Quiesce halts the fast path and steps every record it produced, then
// takes back the batches its queue still holds (and those packed here)
// and proposes their records to the core, in order. Afterwards the core
// may do anything: the fast path does nothing until Sync arms it again.
func (d *Driver) Quiesce() error {
	e, err := d.fp.Halt()
	if err != nil {
		return err
	}
	d.stats.Quiesces++
	d.armed = false
	deadline := time.Now().Add(d.cfg.DrainTimeout)
	for d.next < e.Kseq {
		n, err := d.fp.Records(d.Step)
		if err != nil {
			return fmt.Errorf("token: reading records below %d: %w", e.Kseq, err)
		}
		if n == 0 && d.next < e.Kseq {
			if time.Now().After(deadline) {
				return fmt.Errorf("token: records %d..%d did not come within %v", d.next, e.Kseq-1, d.cfg.DrainTimeout)
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
	d.qhead = e.QHead
	d.reclaim()
	err, d.err = d.err, nil
	return err
}

// reclaim takes the batches of the halted fast path's queue back (and
// those packed here) and proposes their records to the core, all at once:
// a core that holds the token packs them into one frame.
func (d *Driver) reclaim() {
	if len(d.queued) > 0 {
		if _, err := d.fp.Reclaim(); err != nil {
			d.err = fmt.Errorf("token: reclaiming the queue: %w", err)
			return
		}
	}
	back := append(d.queued, d.full...)
	if d.open.Count > 0 {
		back = append(back, d.open)
	}
	d.queued, d.full, d.open = nil, nil, exo.Batch{}
	var recs [][]byte
	for i := range back {
		recs = append(recs, records(&back[i])...)
	}
	if len(recs) > 0 {
		// Checked by Propose's caller: they fit the core's queue.
		_ = d.nd.ProposeAll(recs)
	}
}

// Sync keeps the fast path in step with the core after the core moved:
// armed, it quiesces it when the log left the plain case or the transmit
// side it runs with is not the core's any more (another predecessor, a
// key switch, another roster); halted, it arms it when the log is in the
// plain case. It reports whether the fast path runs.
func (d *Driver) Sync() (bool, error) {
	if err := d.err; err != nil {
		d.err = nil
		return false, err
	}
	if d.armed {
		e, ok := d.nd.FastPath()
		if ok && sameTx(e.Tx, d.tx) && e.Epoch == d.epoch && e.Hosts == d.hosts {
			d.push()
			if d.Pending() > 0 && d.nd.Idle() {
				// The rack went idle with records of this host in
				// the fast path's queue: wake it for them.
				d.nd.WakeRack()
			}
			return true, nil
		}
		d.stats.LeftPlain++
		if err := d.Quiesce(); err != nil {
			return false, err
		}
		if err := d.ready(); err != nil {
			return false, err
		}
	}
	// Arm. The compare-and-set misses when a record came in since the last
	// read (a halted fast path hands every frame up): read them, step
	// them, carry the core's Ready out, and try again, a few times.
	for try := 0; ; try++ {
		armed, err := d.arm()
		if armed || err != nil || try == armTries {
			return armed, err
		}
		n, err := d.fp.Records(d.Step)
		if err != nil || n == 0 {
			return false, err
		}
	}
}

// armTries bounds Sync's retries of a compare-and-set that missed.
const armTries = 8

// ready carries out the core's Ready (Config.Ready), if there is one.
func (d *Driver) ready() error {
	if d.cfg.Ready == nil || !d.nd.HasReady() {
		return nil
	}
	return d.cfg.Ready()
}

// arm arms the halted fast path if the log is in the plain case (a miss
// of the compare-and-set is counted and reported as false), else writes
// it the core's receive checks.
func (d *Driver) arm() (bool, error) {
	// Proposals the core queued while the fast path was halted go to the
	// fast path's queue when nothing else keeps it halted.
	for _, rec := range d.nd.TakePending() {
		d.pack(rec)
	}
	e, ok := d.nd.FastPath()
	if !ok {
		// Not the plain case. The halted fast path still checks every
		// frame's group, roster and epoch before it hands it up: keep
		// those the core's.
		e.Halted, e.Kseq, e.QHead = true, d.next, d.qhead
		if e.Pointers != d.written {
			if set, err := d.fp.Set(e); err != nil {
				return false, err
			} else if set {
				d.written = e.Pointers
			}
		}
		return false, nil
	}
	if d.nd.ArmFast() && d.cfg.Persist != nil {
		// The first arming in this epoch: the durable state says so
		// before the fast path may send (the fence, docs/token.md
		// section 5), after the entries the core appended so far. (Any
		// other arming goes ahead of the core's Ready: the fast path
		// sends before the log is durable anyway.)
		if err := d.ready(); err != nil {
			return false, err
		}
		if err := d.cfg.Persist(); err != nil {
			return false, fmt.Errorf("token: persisting the fence before arming: %w", err)
		}
	}
	e.Kseq, e.QHead = d.next, d.qhead
	armed, err := d.fp.Set(e)
	if err != nil {
		return false, err
	}
	if !armed {
		d.stats.ArmMisses++
		return false, nil
	}
	d.stats.Arms++
	d.armed, d.tx, d.epoch, d.hosts = true, e.Tx, e.Epoch, e.Hosts
	d.written = exo.Pointers{} // the fast path moves them now
	d.push()
	return true, nil
}

// sameTx compares the static part of the transmit side (not the counters).
func sameTx(a, b exo.Tx) bool {
	return a.On == b.On && a.Me == b.Me && a.Pred == b.Pred && a.Phase == b.Phase && a.IdleRun == b.IdleRun
}

// Propose queues one record (a payload, as exo.Node.Propose takes it) for
// this host's next frames: into the fast path's queue while it runs,
// unless the rack is idle and no record of this host waits yet: then to
// the core, which wakes the rack (the records that follow it join the
// queue: the wake is on its way, and Sync wakes the rack again if it goes
// idle with records queued). The caller checks the size and the queue
// limit (Pending).
func (d *Driver) Propose(rec []byte) error {
	first := d.Pending() == 0
	if d.armed && first {
		// The first record after a quiet spell: whether the rack went
		// idle meanwhile is in the records written since the last read
		// (the control plane reads those of empty passes only when
		// something else wakes it). Under a steady load records of this
		// host wait already, and Sync wakes a rack that went idle.
		if _, err := d.fp.Records(d.Step); err != nil {
			return err
		}
	}
	if !d.armed || (first && d.nd.Idle()) {
		if d.armed {
			d.stats.IdleProposals++
			if err := d.Quiesce(); err != nil {
				return err
			}
		}
		return d.nd.Propose(rec)
	}
	d.pack(rec)
	d.push()
	return nil
}

// pack adds a record to the open batch (a full one is set aside first).
func (d *Driver) pack(rec []byte) {
	if need := int(exo.RecordLenSize) + len(rec); d.open.Count > 0 && len(d.open.Payload)+need > d.cfg.MaxBatch {
		d.full = append(d.full, d.open)
		d.open = exo.Batch{}
	}
	d.open.Payload, _ = exo.AppendRecord(d.open.Payload, rec)
	d.open.Count++
	if len(d.open.Payload)+int(exo.RecordLenSize)+1 > d.cfg.MaxBatch {
		// No record fits after it: it goes as soon as the queue has room,
		// not when the next record comes.
		d.full = append(d.full, d.open)
		d.open = exo.Batch{}
	}
}

// room reports whether the queue has a slot to reuse: its last batch was
// taken, and the record that says so released (a restart after it must
// still find the batch there: Recover).
func (d *Driver) room() bool {
	return d.qhead+uint64(len(d.queued))-d.relq < QueueSlots
}

// Release releases the records stepped so far (FastPath.Release): call it
// once their effects are durable (the core's Ready carried out).
func (d *Driver) Release() error {
	if err := d.fp.Release(); err != nil {
		return err
	}
	d.relq = d.qhead
	return nil
}

// push publishes what may go: every full batch while the queue has room,
// then the open batch if fewer than Ahead batches wait.
func (d *Driver) push() {
	for len(d.full) > 0 && d.room() {
		if ok, err := d.fp.Push(d.full[0]); err != nil || !ok {
			return
		}
		d.queued = append(d.queued, d.full[0])
		d.full = d.full[1:]
	}
	if d.open.Count > 0 && len(d.full) == 0 && len(d.queued) < d.cfg.Ahead && d.room() {
		if ok, err := d.fp.Push(d.open); err != nil || !ok {
			return
		}
		d.queued = append(d.queued, d.open)
		d.open = exo.Batch{}
	}
}

// Recover takes over a fast path that outlived the previous control plane
// (its maps pinned: the daemon was killed, the host kept running), in
// front of a core restarted from the durable log (fenced if the fast path
// had been armed in its epoch). It halts the fast path, steps the records
// the previous control plane had not released (some of them logged
// already: stepping them again is harmless; the frames the fast path sent
// are logged with Node.RecoverSent from the batches still in their
// slots), drops what the queue still holds (its publishers were the
// previous daemon's clients: they were told it stopped and publish again),
// and lifts the fence if every record went into the log. It reports
// whether it did.
func (d *Driver) Recover() (bool, error) {
	e, err := d.fp.Halt()
	lost := errors.Is(err, ErrLost)
	if err != nil && !lost {
		return false, err
	}
	var recs []*Record
	if _, err := d.fp.Records(func(r *Record) {
		c := *r
		c.Frame = append([]byte(nil), r.Frame...)
		c.Src = append([]byte(nil), r.Src...)
		recs = append(recs, &c)
	}); err != nil {
		return false, err
	}
	// The records are those Kseq k0..e.Kseq-1 (the fast path is detached:
	// none is still being written), in ring order.
	ok := !lost && uint64(len(recs)) <= e.Kseq
	k0 := e.Kseq - min(e.Kseq, uint64(len(recs)))
	byK := make(map[uint64]*Record, len(recs))
	for _, r := range recs {
		byK[r.Kseq] = r
	}
	for k := k0; k < e.Kseq; k++ {
		r, found := byK[k]
		if !found {
			ok = false
			break
		}
		var f exo.Frame
		if f.UnmarshalBinary(r.Frame) != nil {
			ok = false
			continue
		}
		if d.cfg.Admit == nil || d.cfg.Admit(r) {
			d.nd.StepFrame(&f)
		}
		if r.Sent && f.Epoch == d.nd.Epoch() {
			// (A frame of an older epoch was logged before this host
			// promised the view change that ended it: records are
			// stepped before any promise.)
			var b exo.Batch
			if r.Popped {
				var have bool
				if b, have = d.fp.Taken(r.QHead - 1); !have {
					ok = false
					continue
				}
			}
			if err := d.nd.RecoverSent(&f, b.Count, b.Payload, r.TxTag); err != nil {
				ok = false
			}
		}
	}
	d.next, d.qhead, d.relq = e.Kseq, e.QHead, e.QHead
	d.queued, d.full, d.open = nil, nil, exo.Batch{}
	if _, err := d.fp.Reclaim(); err != nil {
		return false, err
	}
	if err := d.fp.Release(); err != nil {
		return false, err
	}
	if ok && d.nd.Fenced() {
		d.nd.Unfence()
	}
	return ok, nil
}

// Close stops the fast path cleanly: halted, every record stepped, the
// queue proposed to the core, and the durable state no longer fenced
// (Node.ClearFast; the caller persists it after carrying out the Ready).
func (d *Driver) Close() error {
	if err := d.Quiesce(); err != nil {
		return err
	}
	d.nd.ClearFast()
	return nil
}
