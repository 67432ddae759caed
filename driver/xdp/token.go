//go:build linux

package xdp

// Token mode (docs/token.md): the program answers the frame of this
// host's predecessor with this host's next frame (XDP_TX), takes the
// batches it sends from a transmit queue user space fills, and hands what
// it did to the control plane in a ring buffer. Token is the control
// plane's handle on it: the control operations (exo_ctl, run with
// BPF_PROG_TEST_RUN), the queue (exo_txq and exo_txq_tail, mmapped) and
// the consumer of the ring (exo_ring, mmapped, read here without
// cilium/ebpf's reader so that a blocked Wait parks a goroutine in the
// runtime's poller instead of an OS thread).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"structs"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/exo-rack/exo/exo"
)

// Token mode's sizes (bpf/exo.c).
const (
	// QueueSlots is the number of batches the transmit queue holds.
	QueueSlots = 64
	// SlotData is the largest batch payload (bytes) a queue slot holds.
	SlotData = 4064
	// slotSize is sizeof(struct exo_slot): len u16, count u16, 4 bytes
	// reserved, SlotData bytes.
	slotSize = 8 + SlotData
	// DefaultRingSize is the default size of the record ring.
	DefaultRingSize = 16 << 20
	// RingRoom is the room the program wants free in the ring for a frame
	// it records; with less, such a frame is dropped untouched
	// (CounterRingFull), and one it would not record keeps its verdict.
	RingRoom = 256 << 10
	// RecordHeaderLen is sizeof(struct exo_rec): the header of a record,
	// before the received frame.
	RecordHeaderLen = 48
)

// struct exo_rec flags.
const (
	recArmed   = 1
	recSent    = 2
	recPopped  = 4
	recHandoff = 8
	recHalt    = 16
)

// exo_ctl operations and results.
const (
	ctlHalt = 1
	ctlArm  = 2
	ctlRead = 3

	ctlArmed               = 0
	ctlKseqMismatch        = 1
	ctlLost                = 2
	ctlBadOp        uint32 = 0xffffffff
)

// BPF ring buffer record header bits (include/uapi/linux/bpf.h).
const (
	ringBusy    = 1 << 31
	ringDiscard = 1 << 30
	ringHdrLen  = 8
)

var (
	// ErrLost is returned when the program's state says lost: a record
	// could not be written after the state moved (docs/token.md section
	// 2). The program stays halted and no Arm succeeds: the control
	// plane must stop.
	ErrLost = errors.New("xdp: token mode: a record was lost; the program stays halted")
	// ErrNotHalted is returned by Reclaim when the program may still take
	// batches from the queue.
	ErrNotHalted = errors.New("xdp: token mode: the program is not halted")
	// ErrClosed is returned by a Token's methods after Close.
	ErrClosed = errors.New("xdp: token mode: handle closed")
)

// Record is one record of the program's ring: a frame the program
// accepted or passed to the slow path in token mode, and what it did
// (struct exo_rec).
type Record struct {
	Kseq   uint64 // the state's Kseq before this record (records are numbered 0, 1, ...)
	QHead  uint64 // the state's QHead after it
	TxTag  uint64 // the tag of the frame sent (Sent), else 0
	Reason exo.Reason
	// Armed: the program was not halted when it classified the frame.
	Armed bool
	// Sent: it sent this host's next frame (exo.Turn.Sent).
	Sent bool
	// Popped: that frame carried the queue's head batch (QHead moved).
	Popped bool
	// Handoff: the frame handed this host the token and the program
	// halted instead of sending (an idle rack and an empty queue, or the
	// frame to send did not fit the buffer).
	Handoff bool
	// Halt: the program halted itself after this frame (Handoff, or a
	// slow-path verdict other than HALTED).
	Halt bool
	// Src is the received frame's Ethernet source MAC and Frame its bytes
	// after the Ethernet header, padding included. Both point into the
	// ring: valid only during the Records callback.
	Src   net.HardwareAddr
	Frame []byte
	// Written is when the program wrote the record, on CLOCK_MONOTONIC
	// (bpf_ktime_get_ns): Since gives how long it waited to be read.
	Written time.Duration
}

// Since returns how long ago, on CLOCK_MONOTONIC, the record was written.
func (r *Record) Since() time.Duration { return MonoSince(r.Written) }

// MonoSince returns how long ago t was on CLOCK_MONOTONIC, the clock of
// bpf_ktime_get_ns (0 if the clock cannot be read).
func MonoSince(t time.Duration) time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano()) - t
}

// TokenCounters are token mode's counters (summed over CPUs).
type TokenCounters struct {
	RingFull uint64 // CounterRingFull: dropped untouched, the ring lacked RingRoom
	Lost     uint64 // CounterLost: records lost after the state moved
	TX       uint64 // CounterTX: frames sent
	TXEmpty  uint64 // CounterTXEmpty: empty passes among them
	Handoff  uint64 // CounterHandoff: hand-offs
	TXNoRoom uint64 // CounterTXNoRoom: hand-offs for lack of room in the buffer
	Mode     uint64 // CounterMode: the mode changed between hint and lock
	TXErr    uint64 // CounterTXErr: a frame sent could not be written (unreachable)
}

// TokenCounters reads token mode's counters.
func (p *Program) TokenCounters() (TokenCounters, error) {
	all, err := p.counters()
	return TokenCounters{
		RingFull: all[CounterRingFull],
		Lost:     all[CounterLost],
		TX:       all[CounterTX],
		TXEmpty:  all[CounterTXEmpty],
		Handoff:  all[CounterHandoff],
		TXNoRoom: all[CounterTXNoRoom],
		Mode:     all[CounterMode],
		TXErr:    all[CounterTXErr],
	}, err
}

// ctlCmd is struct exo_cmd of bpf/exo.c.
type ctlCmd struct {
	_          structs.HostLayout
	Op         uint32
	Result     uint32
	ExpectKseq uint64
	State      exoExoState
}

const ctlCmdLen = int(unsafe.Sizeof(ctlCmd{}))

// ctl runs exo_ctl once: op under the state's lock, and the state after.
func (p *Program) ctl(op uint32, expect uint64, st *exoExoState) (ctlCmd, error) {
	c := ctlCmd{Op: op, ExpectKseq: expect}
	if st != nil {
		c.State = *st
	}
	in := make([]byte, exo.EthHeaderLen+ctlCmdLen)
	copy(in[exo.EthHeaderLen:], unsafe.Slice((*byte)(unsafe.Pointer(&c)), ctlCmdLen))
	out := make([]byte, len(in))
	opts := ebpf.RunOptions{Data: in, DataOut: out}
	ret, err := p.objs.ExoCtl.Run(&opts)
	if err != nil {
		return c, fmt.Errorf("xdp: control operation %d: %w", op, err)
	}
	if Action(ret) != ActionPass || len(opts.DataOut) != len(in) {
		return c, fmt.Errorf("xdp: control operation %d: %s, %d bytes out", op, Action(ret), len(opts.DataOut))
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&c)), ctlCmdLen), opts.DataOut[exo.EthHeaderLen:])
	if c.Result == ctlBadOp {
		return c, fmt.Errorf("xdp: control operation %d refused", op)
	}
	return c, nil
}

// engineOf converts the program's state to an exo.Engine (without lost
// and the MAC).
func engineOf(v *exoExoState) exo.Engine {
	return exo.Engine{
		Pointers: pointersOf(v),
		Tx: exo.Tx{
			On:       v.TxOn != 0,
			Me:       v.Me,
			Pred:     v.Pred,
			Phase:    v.Phase,
			EmptyRun: v.EmptyRun,
			IdleRun:  v.IdleRun,
			Kseq:     v.Kseq,
			QHead:    v.Qhead,
		},
	}
}

// stateOf converts e to the program's state, with the source MAC mac and
// the padding minFrame.
func stateOf(e *exo.Engine, mac [6]byte, minFrame uint16) exoExoState {
	v := exoExoState{
		Group:      e.Group,
		Hosts:      e.Hosts,
		Epoch:      e.Epoch,
		Me:         e.Me,
		Pred:       e.Pred,
		Window:     e.Window,
		Append:     e.Append,
		Agreed:     e.Agreed,
		EpochStart: e.EpochStart,
		History:    e.History,
		Phase:      e.Phase,
		Mac:        mac,
		EmptyRun:   e.EmptyRun,
		IdleRun:    e.IdleRun,
		Kseq:       e.Kseq,
		Qhead:      e.QHead,
		TxMin:      minFrame,
	}
	if e.Halted {
		v.Halted = 1
	}
	if e.On {
		v.TxOn = 1
	}
	return v
}

// Token is the control plane's handle on token mode (Program.Token):
// the control operations, the transmit queue and the record ring.
//
// Halt, Arm, Read, Push, Reclaim and Records may be called from several
// goroutines; Records runs its callback with the consumer held, so the
// callback may call every method but Records. One Wait at a time may run
// concurrently with all of them; Close unblocks it.
type Token struct {
	p        *Program
	mac      [6]byte
	minFrame uint16 // SetMinFrame: Arm writes it

	// The ring's fd (a dup) in the runtime's poller, for Wait.
	file *os.File
	raw  syscall.RawConn

	// Mappings: the ring's consumer page (RW), its producer page and data
	// pages mapped twice (RO), the queue's slots and its tail, the ring's
	// waiter flag (exo_waiter: 1 while Wait may sleep).
	cons, prod, txq, tailMem, waitMem []byte
	consPos, prodPos, tailPos, waiter *uint64
	data                              []byte // the data pages, twice: 2 * size bytes
	mask                              uint64

	// The mappings' lifetime: every method but Close counts itself in
	// users while it uses them; Close marks the handle closed, and the
	// mappings go when it is closed and no method is in (the last one
	// out unmaps), so a method called from a Records callback never
	// waits for Close, nor Close for it.
	lmu       sync.Mutex
	users     int
	closed    bool
	closing   atomic.Bool // set by Close before it closes the file
	closeOnce sync.Once

	urgentOnly atomic.Bool // SetUrgentOnly

	rmu     sync.Mutex // the consumer (Records)
	readPos uint64     // the next record to read; the consumer position (consPos) follows at Release

	mu    sync.Mutex // the bookkeeping below
	tail  uint64     // the queue's tail, as last stored
	qhead uint64     // batches known taken and copied: Push may reuse their slots
	// kseq: every record below it has been read (the records of two CPUs
	// may reach the ring out of order); early holds the qhead of the
	// records read ahead of it.
	kseq  uint64
	early map[uint64]uint64
}

// maxEarly bounds Token.early (records read ahead of a missing one; a
// missing one that never comes is a lost record, and the program is then
// halted for good).
const maxEarly = 1 << 12

// Token opens token mode's handle: it maps the transmit queue, its tail
// and the record ring, and reads the state (its Kseq and QHead start the
// bookkeeping). mac is the Ethernet source MAC of the frames the program
// sends (Arm writes it). One handle at a time per Program.
func (p *Program) Token(mac net.HardwareAddr) (*Token, error) {
	if len(mac) != 6 {
		return nil, fmt.Errorf("xdp: token mode: %v is not a 6-byte MAC", mac)
	}
	p.tokMu.Lock()
	defer p.tokMu.Unlock()
	if p.tok != nil {
		return nil, errors.New("xdp: token mode: a handle is already open")
	}
	t := &Token{p: p, early: map[uint64]uint64{}}
	copy(t.mac[:], mac)
	if err := t.open(); err != nil {
		t.unmap()
		if t.file != nil {
			t.file.Close()
		}
		return nil, err
	}
	p.tok = t
	return t, nil
}

// open maps the queue, its tail and the ring, opens the ring's fd in the
// poller and starts the bookkeeping from the state.
func (t *Token) open() (err error) {
	p := t.p
	pg := os.Getpagesize()
	rfd := p.objs.ExoRing.FD()
	size := int(p.objs.ExoRing.MaxEntries())
	if t.cons, err = unix.Mmap(rfd, 0, pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("xdp: token mode: map the ring's consumer page: %w", err)
	}
	if t.prod, err = unix.Mmap(rfd, int64(pg), pg+2*size, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("xdp: token mode: map the ring: %w", err)
	}
	t.consPos = (*uint64)(unsafe.Pointer(&t.cons[0]))
	t.prodPos = (*uint64)(unsafe.Pointer(&t.prod[0]))
	t.data = t.prod[pg:]
	t.mask = uint64(size - 1)
	qlen := (QueueSlots*slotSize + pg - 1) / pg * pg
	if t.txq, err = unix.Mmap(p.objs.ExoTxq.FD(), 0, qlen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("xdp: token mode: map the queue: %w", err)
	}
	if t.tailMem, err = unix.Mmap(p.objs.ExoTxqTail.FD(), 0, pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("xdp: token mode: map the queue's tail: %w", err)
	}
	t.tailPos = (*uint64)(unsafe.Pointer(&t.tailMem[0]))
	if t.waitMem, err = unix.Mmap(p.objs.ExoWaiter.FD(), 0, pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("xdp: token mode: map the ring's waiter: %w", err)
	}
	t.waiter = (*uint64)(unsafe.Pointer(&t.waitMem[0]))

	// The ring's fd in the runtime's poller: a nonblocking dup (the
	// program keeps its own fd), readable when the ring holds data.
	nfd, err := unix.FcntlInt(uintptr(rfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("xdp: token mode: dup the ring's fd: %w", err)
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return fmt.Errorf("xdp: token mode: ring fd: %w", err)
	}
	t.file = os.NewFile(uintptr(nfd), "exo_ring")
	if err := t.file.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("xdp: token mode: the ring's fd is not pollable: %w", err)
	}
	if t.raw, err = t.file.SyscallConn(); err != nil {
		return fmt.Errorf("xdp: token mode: ring fd: %w", err)
	}

	c, err := p.ctl(ctlRead, 0, nil)
	if err != nil {
		return err
	}
	t.readPos = atomic.LoadUint64(t.consPos)
	t.kseq, t.qhead = c.State.Kseq, c.State.Qhead
	t.tail = atomic.LoadUint64(t.tailPos)
	if t.tail-t.qhead > QueueSlots {
		t.tail = t.qhead
		atomic.StoreUint64(t.tailPos, t.tail)
	}
	return nil
}

func (t *Token) unmap() {
	for _, m := range []*[]byte{&t.cons, &t.prod, &t.txq, &t.tailMem, &t.waitMem} {
		if *m != nil {
			unix.Munmap(*m)
			*m = nil
		}
	}
}

// enter counts a method in (ErrClosed after Close); exit counts it out,
// and the last one out of a closed handle unmaps.
func (t *Token) enter() error {
	t.lmu.Lock()
	defer t.lmu.Unlock()
	if t.closed {
		return ErrClosed
	}
	t.users++
	return nil
}

func (t *Token) exit() {
	t.lmu.Lock()
	t.users--
	last := t.closed && t.users == 0
	t.lmu.Unlock()
	if last {
		t.unmap()
	}
}

// Close unblocks a Wait, releases the handle and unmaps the queue and the
// ring (at once, or when the last method still running returns; Close
// does not wait for it, so it may be called from a Records callback).
// The program and its state are left as they are: Halt first to stop
// the program. Later calls return nil.
func (t *Token) Close() error {
	var err error
	t.closeOnce.Do(func() {
		t.closing.Store(true)
		err = t.file.Close() // wakes a Wait parked in the poller
		t.lmu.Lock()
		t.closed = true
		idle := t.users == 0
		t.lmu.Unlock()
		if idle {
			t.unmap()
		}
		t.p.tokMu.Lock()
		if t.p.tok == t {
			t.p.tok = nil
		}
		t.p.tokMu.Unlock()
	})
	return err
}

// SetMinFrame sets the length (Ethernet header included, at least 60, at
// most 14 + MaxFrame) the program pads the frames it sends to, with zeros,
// from the next Arm on. A rack in token mode pads every frame to the
// longest any host sends: the program answers a frame in its own buffer,
// which generic XDP grows by a few hundred bytes at most.
func (t *Token) SetMinFrame(n int) error {
	if n < exo.MinEthFrame || n > exo.EthHeaderLen+MaxFrame {
		return fmt.Errorf("xdp: token mode: minimum frame %d outside %d..%d", n, exo.MinEthFrame, exo.EthHeaderLen+MaxFrame)
	}
	t.mu.Lock()
	t.minFrame = uint16(n)
	t.mu.Unlock()
	return nil
}

// MAC returns the Ethernet source MAC Arm writes.
func (t *Token) MAC() net.HardwareAddr { return append(net.HardwareAddr(nil), t.mac[:]...) }

// Halt halts the program (exo_ctl HALT: it accepts and sends nothing
// more) and returns its state: its Kseq says how many records to read
// before the control plane is in step. With the state lost, it returns
// the state and ErrLost.
func (t *Token) Halt() (exo.Engine, error) { return t.op(ctlHalt) }

// Read returns the program's state, read under its lock (exo_ctl READ);
// with the state lost, the state and ErrLost.
func (t *Token) Read() (exo.Engine, error) { return t.op(ctlRead) }

func (t *Token) op(op uint32) (exo.Engine, error) {
	if err := t.enter(); err != nil {
		return exo.Engine{}, err
	}
	defer t.exit()
	c, err := t.p.ctl(op, 0, nil)
	if err != nil {
		return exo.Engine{}, err
	}
	e := engineOf(&c.State)
	t.mu.Lock()
	// Every record below the state's kseq read: every batch below its
	// qhead was copied (a record is written after the copy).
	if c.State.Kseq <= t.kseq && c.State.Qhead > t.qhead && c.State.Qhead-t.qhead <= QueueSlots {
		t.qhead = c.State.Qhead
	}
	t.mu.Unlock()
	if c.State.Lost != 0 {
		return e, ErrLost
	}
	return e, nil
}

// Arm arms the program with e (exo_ctl ARM, a compare-and-set): if the
// program's Kseq is e.Kseq (no record the control plane has not stepped)
// and its state is not lost, it writes every field of e but Kseq (the
// pointers, Halted as given, the transmit side, QHead) and the Token's
// MAC, and returns true. A Kseq mismatch returns false (records came in:
// step them, then try again); a lost state returns false and ErrLost.
// The queue's batches e.QHead .. tail-1 are then the ones waiting: e.QHead
// must be at most QueueSlots below the tail and not above it.
func (t *Token) Arm(e exo.Engine) (bool, error) {
	if err := t.enter(); err != nil {
		return false, err
	}
	defer t.exit()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tail-e.QHead > QueueSlots {
		return false, fmt.Errorf("xdp: token mode: arm with qhead %d, the queue's tail is %d", e.QHead, t.tail)
	}
	st := stateOf(&e, t.mac, t.minFrame)
	c, err := t.p.ctl(ctlArm, e.Kseq, &st)
	if err != nil {
		return false, err
	}
	switch c.Result {
	case ctlArmed:
		// Every record below e.Kseq was stepped, so read: the queue's
		// numbering starts again at e.QHead.
		t.kseq, t.qhead = e.Kseq, e.QHead
		clear(t.early)
		return true, nil
	case ctlKseqMismatch:
		return false, nil
	case ctlLost:
		return false, ErrLost
	}
	return false, fmt.Errorf("xdp: token mode: arm: result %d", c.Result)
}

// Push publishes batch b at the queue's tail if the queue has a free slot
// (tail - qhead < QueueSlots, qhead being the batches known taken: from
// the records read, or from Halt or Read once every record below their
// Kseq has been read) and returns whether it did. A payload longer than
// SlotData is an error.
func (t *Token) Push(b exo.Batch) (bool, error) {
	if len(b.Payload) > SlotData {
		return false, fmt.Errorf("xdp: token mode: batch of %d bytes, a slot holds %d", len(b.Payload), SlotData)
	}
	if err := t.enter(); err != nil {
		return false, err
	}
	defer t.exit()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tail-t.qhead >= QueueSlots {
		return false, nil
	}
	s := t.slot(t.tail)
	binary.NativeEndian.PutUint16(s[0:], uint16(len(b.Payload)))
	binary.NativeEndian.PutUint16(s[2:], b.Count)
	binary.NativeEndian.PutUint32(s[4:], 0)
	copy(s[8:], b.Payload)
	t.tail++
	// After the slot's bytes (x86 does not reorder stores; the atomic
	// store is a full barrier anyway).
	atomic.StoreUint64(t.tailPos, t.tail)
	return true, nil
}

func (t *Token) slot(i uint64) []byte {
	off := int(i%QueueSlots) * slotSize
	return t.txq[off : off+slotSize]
}

// Queue returns the queue's head as the Token knows it (batches taken and
// copied) and its tail (batches pushed).
func (t *Token) Queue() (qhead, tail uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.qhead, t.tail
}

// Reclaim takes back the batches the queue still holds: with the program
// halted (or not in token mode), it returns the batches from the state's
// QHead to the tail, oldest first, and sets the tail to QHead. Otherwise
// it returns ErrNotHalted.
func (t *Token) Reclaim() ([]exo.Batch, error) {
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	c, err := t.p.ctl(ctlRead, 0, nil)
	if err != nil {
		return nil, err
	}
	if c.State.Halted == 0 && c.State.TxOn != 0 {
		return nil, ErrNotHalted
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	qh := c.State.Qhead
	if t.tail-qh > QueueSlots {
		return nil, fmt.Errorf("xdp: token mode: reclaim: the state's qhead %d, the queue's tail %d", qh, t.tail)
	}
	var out []exo.Batch
	for i := qh; i != t.tail; i++ {
		s := t.slot(i)
		n := int(binary.NativeEndian.Uint16(s[0:]))
		if n > SlotData {
			n = SlotData
		}
		out = append(out, exo.Batch{Count: binary.NativeEndian.Uint16(s[2:]), Payload: append([]byte(nil), s[8:8+n]...)})
	}
	t.tail = qh
	atomic.StoreUint64(t.tailPos, t.tail)
	if c.State.Kseq <= t.kseq && qh-t.qhead <= QueueSlots {
		t.qhead = qh
	}
	return out, nil
}

// Records calls fn for every record the ring holds now, in ring order
// (two CPUs may write two records out of Kseq order), and returns how
// many. It does not block (Wait does). The Record and the bytes it points
// to are valid only during fn; fn must not call Records.
func (t *Token) Records(fn func(*Record)) (int, error) {
	if err := t.enter(); err != nil {
		return 0, err
	}
	defer t.exit()
	t.rmu.Lock()
	defer t.rmu.Unlock()
	cons := t.readPos
	n := 0
	var r Record
	for {
		prod := atomic.LoadUint64(t.prodPos)
		if cons == prod {
			return n, nil
		}
		off := cons & t.mask
		// The header's length word: an atomic load, after the kernel's
		// xchg that clears the busy bit, so the record's bytes are seen.
		hdr := atomic.LoadUint32((*uint32)(unsafe.Pointer(&t.data[off])))
		if hdr&ringBusy != 0 {
			return n, nil // not committed yet: its commit wakes Wait
		}
		l := uint64(hdr &^ (ringBusy | ringDiscard))
		next := cons + (ringHdrLen+l+7)&^7
		if prod-cons < (ringHdrLen+l+7)&^7 || l > t.mask+1 {
			return n, fmt.Errorf("xdp: token mode: ring record of %d bytes at %d, producer at %d", l, cons, prod)
		}
		if hdr&ringDiscard == 0 {
			b := t.data[off+ringHdrLen : off+ringHdrLen+l]
			if err := parseRecord(&r, b); err != nil {
				return n, err
			}
			t.track(&r)
			fn(&r)
			n++
		}
		cons = next
		t.readPos = cons
	}
}

// Release tells the kernel it may reuse the space of the records read so
// far (the ring's consumer position moves to them): call it once what the
// records did is durable. Records not released are read again by the next
// Token opened on the same (pinned) maps: a daemon killed after it read
// records but before it logged them hands them to the next one
// (docs/token.md section 5). Release before Wait: the kernel wakes a
// consumer that has caught up with the records it wrote.
func (t *Token) Release() error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.exit()
	t.rmu.Lock()
	defer t.rmu.Unlock()
	atomic.StoreUint64(t.consPos, t.readPos)
	return nil
}

// Taken returns batch i, taken by the program (QHead was i+1 after it),
// if its slot still holds it: i is below the tail and less than
// QueueSlots batches behind it. A restarted control plane logs with it
// the frames the program sent whose records it was not released
// (token.Driver.Recover).
func (t *Token) Taken(i uint64) (exo.Batch, bool) {
	if err := t.enter(); err != nil {
		return exo.Batch{}, false
	}
	defer t.exit()
	t.mu.Lock()
	defer t.mu.Unlock()
	if i >= t.tail || t.tail-i > QueueSlots {
		return exo.Batch{}, false
	}
	sl := t.slot(i)
	n := binary.NativeEndian.Uint16(sl[0:])
	if int(n) > SlotData {
		return exo.Batch{}, false
	}
	return exo.Batch{Count: binary.NativeEndian.Uint16(sl[2:]), Payload: append([]byte(nil), sl[8:8+int(n)]...)}, true
}

// parseRecord reads struct exo_rec and the frame after it.
func parseRecord(r *Record, b []byte) error {
	if len(b) < RecordHeaderLen {
		return fmt.Errorf("xdp: token mode: ring record of %d bytes", len(b))
	}
	ne := binary.NativeEndian
	fl := b[25]
	n := int(ne.Uint16(b[26:]))
	if RecordHeaderLen+n > len(b) {
		return fmt.Errorf("xdp: token mode: ring record of %d bytes holds a %d-byte frame", len(b), n)
	}
	*r = Record{
		Kseq:    ne.Uint64(b[0:]),
		QHead:   ne.Uint64(b[8:]),
		TxTag:   ne.Uint64(b[16:]),
		Reason:  exo.Reason(b[24]),
		Armed:   fl&recArmed != 0,
		Sent:    fl&recSent != 0,
		Popped:  fl&recPopped != 0,
		Handoff: fl&recHandoff != 0,
		Halt:    fl&recHalt != 0,
		Src:     net.HardwareAddr(b[28:34:34]),
		Written: time.Duration(ne.Uint64(b[40:])),
		Frame:   b[RecordHeaderLen : RecordHeaderLen+n : RecordHeaderLen+n],
	}
	return nil
}

// track moves the bookkeeping past record r: once every record below
// r.Kseq has been read, the batches below r.QHead were copied.
func (t *Token) track(r *Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case r.Kseq < t.kseq:
		return // before the handle or the last Arm
	case r.Kseq > t.kseq:
		if len(t.early) < maxEarly {
			t.early[r.Kseq] = r.QHead
		}
		return
	}
	t.advance(r.QHead)
	for {
		q, ok := t.early[t.kseq]
		if !ok {
			return
		}
		delete(t.early, t.kseq)
		t.advance(q)
	}
}

func (t *Token) advance(qhead uint64) {
	t.kseq++
	if qhead > t.qhead && qhead-t.qhead <= QueueSlots {
		t.qhead = qhead
	}
}

// ready reports whether the ring holds a committed record.
func (t *Token) ready() bool {
	prod := atomic.LoadUint64(t.prodPos)
	t.rmu.Lock()
	cons := t.readPos
	t.rmu.Unlock()
	if prod == cons {
		return false
	}
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&t.data[cons&t.mask])))&ringBusy == 0
}

// Wait blocks until the ring holds a record to read, the deadline passes
// (os.ErrDeadlineExceeded; the zero time: no deadline) or the Token is
// closed (ErrClosed). The goroutine parks in the runtime's network poller
// on the ring's fd. Before it looks at the ring for the last time it sets
// the ring's waiter flag; the program takes the flag after it writes a
// record worth a wake-up and wakes the ring only if it was set (either
// the program sees the flag or the look sees the record: both are full
// barriers). Records that are not worth one (empty passes that agree
// empty passes) wait for the next one, or for the deadline.
func (t *Token) Wait(deadline time.Time) error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.exit()
	if t.ready() {
		return nil
	}
	if err := t.file.SetReadDeadline(deadline); err != nil {
		if t.closing.Load() || errors.Is(err, os.ErrClosed) {
			return ErrClosed
		}
		return err
	}
	err := t.raw.Read(func(uintptr) bool {
		// The flag, then the look at the ring (Wait's comment). An
		// urgent-only wait turned off meanwhile waits for every record
		// worth a wake-up (SetUrgentOnly changes a flag it finds set).
		if t.urgentOnly.Load() {
			atomic.StoreUint64(t.waiter, waitUrgent)
			if !t.urgentOnly.Load() {
				atomic.StoreUint64(t.waiter, waitWorth)
			}
		} else {
			atomic.StoreUint64(t.waiter, waitWorth)
		}
		if t.ready() {
			atomic.StoreUint64(t.waiter, 0)
			return true
		}
		return false
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return os.ErrDeadlineExceeded
	case t.closing.Load() || errors.Is(err, os.ErrClosed):
		return ErrClosed // the poller says "use of closed file"
	}
	return err
}

// exo_waiter's values (exo.c).
const (
	waitWorth  = 1 // wake Wait for a record worth it
	waitUrgent = 2 // only for a halt or a ring half full
)

// SetUrgentOnly sets what wakes Wait: with on, only records that need the
// control plane (the program halted itself, the ring is half full), not
// every record worth a wake-up (an agreement of records). A control plane
// with nobody waiting for what the rack agrees reads its records at its
// own deadlines instead.
// Turned off, it also changes the flag of a Wait asleep, so that the next
// record worth it wakes it. Safe to call from any goroutine.
func (t *Token) SetUrgentOnly(on bool) {
	if t.urgentOnly.Swap(on) == on || on {
		return
	}
	if err := t.enter(); err != nil {
		return
	}
	defer t.exit()
	atomic.CompareAndSwapUint64(t.waiter, waitUrgent, waitWorth)
}
