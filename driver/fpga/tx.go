package fpga

import (
	"errors"
	"fmt"
	"net"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/hw/gen/regs"
)

// The transmit side of the engine (register map 1.3, token mode:
// docs/token.md, docs/hardware.md section 10): the exo.Tx registers, the
// transmit queue written through the CSR window, the MACs of the frames
// it sends, its counters, and the control plane's operations (Arm, a
// compare-and-set on Kseq; Reclaim). Every method is one register
// sequence under the Engine's mutex, so none runs in the middle of a frame
// handed to Process.

// ErrNoTx: the engine has no transmit side (register map before 1.3, or
// tx_caps reads no queue).
var ErrNoTx = errors.New("fpga: this engine has no transmit side (register map 1.3, tx_*)")

// TxInfo is the transmit side's build parameters (tx_caps).
type TxInfo struct {
	QueueSlots int // QUEUE_SLOTS: batches the queue holds
	SlotWords  int // SLOT_WORDS: 64-bit words of a slot
}

// SlotBytes is the longest batch a slot holds.
func (t TxInfo) SlotBytes() int { return 8 * t.SlotWords }

// readTxInfo reads tx_caps on an engine of map 1.3 or later (zero before).
func readTxInfo(r Regs, i Info) (TxInfo, error) {
	if i.Minor < 3 {
		return TxInfo{}, nil
	}
	v, err := r.Read32(regs.TxCaps)
	if err != nil {
		return TxInfo{}, fmt.Errorf("fpga: read tx_caps: %w", err)
	}
	return TxInfo{QueueSlots: int(v & regs.TxCapsQueueSlotsMask >> regs.TxCapsQueueSlotsShift),
		SlotWords: int(v & regs.TxCapsSlotWordsMask >> regs.TxCapsSlotWordsShift)}, nil
}

func (e *Engine) checkTx() error {
	if e.info.Minor < 3 || e.info.Tx.QueueSlots < 2 || e.info.Tx.SlotWords < 1 {
		return fmt.Errorf("%w (rb_version %d.%d, tx_caps %d slots of %d words)", ErrNoTx, e.info.Major, e.info.Minor,
			e.info.Tx.QueueSlots, e.info.Tx.SlotWords)
	}
	return nil
}

// SetSpeculation sets tx_ctrl.spec (on at reset): the tag of the frame the
// next token would send is computed ahead, so that a token sends its first
// beat the cycle after its verdict; off, the engine hashes the frame after
// the verdict (store-and-forward), for measurement. It keeps tx_ctrl.on.
func (e *Engine) SetSpeculation(on bool) error {
	if err := e.checkTx(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.read("tx_ctrl", regs.TxCtrl)
	if err != nil {
		return err
	}
	v &^= regs.TxCtrlSpecMask
	if on {
		v |= regs.TxCtrlSpecMask
	}
	return e.write("tx_ctrl", regs.TxCtrl, v)
}

// SetTx writes the transmit side, exo.Tx, Kseq included: tx_cfg (me,
// pred, phase), tx_empty_run, tx_idle_run, tx_kseq, tx_qhead (lo, then
// hi), and last tx_ctrl.on (tx_ctrl.spec kept). Write it while the engine
// is halted (Halt): a running engine moves these registers itself. The
// control plane arms with Arm, which leaves Kseq to the engine.
func (e *Engine) SetTx(tx exo.Tx) error {
	if err := e.checkTx(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.writeTx(tx, true)
}

// writeTx writes tx (Kseq if kseq) and tx_ctrl.on last (mu held).
func (e *Engine) writeTx(tx exo.Tx, kseq bool) error {
	cfg := uint32(tx.Me)<<regs.TxCfgMeShift | uint32(tx.Pred)<<regs.TxCfgPredShift | uint32(tx.Phase&1)<<regs.TxCfgPhaseShift
	if err := e.write("tx_cfg", regs.TxCfg, cfg); err != nil {
		return err
	}
	if err := e.write("tx_empty_run", regs.TxEmptyRun, tx.EmptyRun); err != nil {
		return err
	}
	if err := e.write("tx_idle_run", regs.TxIdleRun, tx.IdleRun); err != nil {
		return err
	}
	if kseq {
		if err := e.write64("tx_kseq", regs.TxKseqLo, tx.Kseq); err != nil {
			return err
		}
	}
	if err := e.write64("tx_qhead", regs.TxQheadLo, tx.QHead); err != nil {
		return err
	}
	ctrl, err := e.read("tx_ctrl", regs.TxCtrl)
	if err != nil {
		return err
	}
	ctrl &^= regs.TxCtrlOnMask
	if tx.On {
		ctrl |= regs.TxCtrlOnMask
	}
	return e.write("tx_ctrl", regs.TxCtrl, ctrl)
}

// Tx reads the transmit side. A running engine moves EmptyRun, Kseq and
// QHead on every frame: halt it first for a snapshot.
func (e *Engine) Tx() (exo.Tx, error) {
	if err := e.checkTx(); err != nil {
		return exo.Tx{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.readTx()
}

func (e *Engine) readTx() (exo.Tx, error) {
	var tx exo.Tx
	ctrl, err := e.read("tx_ctrl", regs.TxCtrl)
	if err != nil {
		return tx, err
	}
	cfg, err := e.read("tx_cfg", regs.TxCfg)
	if err != nil {
		return tx, err
	}
	tx.On = ctrl&regs.TxCtrlOnMask != 0
	tx.Me = uint8(cfg & regs.TxCfgMeMask >> regs.TxCfgMeShift)
	tx.Pred = uint8(cfg & regs.TxCfgPredMask >> regs.TxCfgPredShift)
	tx.Phase = uint8(cfg & regs.TxCfgPhaseMask >> regs.TxCfgPhaseShift)
	if tx.EmptyRun, err = e.read("tx_empty_run", regs.TxEmptyRun); err != nil {
		return tx, err
	}
	if tx.IdleRun, err = e.read("tx_idle_run", regs.TxIdleRun); err != nil {
		return tx, err
	}
	if tx.Kseq, err = e.read64("tx_kseq", regs.TxKseqLo); err != nil {
		return tx, err
	}
	tx.QHead, err = e.read64("tx_qhead", regs.TxQheadLo)
	return tx, err
}

// TokenState reads the whole state of the engine in token mode: the
// pointers (State, Halted included) and the transmit side (Tx). Halt it
// first for a snapshot.
func (e *Engine) TokenState() (exo.Engine, error) {
	p, err := e.State()
	if err != nil {
		return exo.Engine{}, err
	}
	tx, err := e.Tx()
	return exo.Engine{Pointers: p, Tx: tx}, err
}

// Arm is the control plane's compare-and-set (docs/token.md section 3,
// token.FastPath.Set): if the engine has produced exactly s.Kseq records
// (tx_kseq), it writes s, all but Kseq: the pointers (SetState's order,
// halted throughout), the transmit side, and last halted = s.Halted
// (false arms it). Otherwise it writes nothing and reports false. It sets
// halted = 1 before it reads tx_kseq, so that no record can come between
// the compare and the writes (a frame the halt catches is a HALTED record:
// the compare then fails); the caller arms an engine that is halted
// anyway (it halted itself, or Halt).
func (e *Engine) Arm(s exo.Engine) (bool, error) {
	if err := e.checkTx(); err != nil {
		return false, err
	}
	if err := e.checkState(s.Pointers); err != nil {
		return false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.write("halted", regs.Halted, 1); err != nil {
		return false, err
	}
	kseq, err := e.read64("tx_kseq", regs.TxKseqLo)
	if err != nil {
		return false, err
	}
	if kseq != s.Kseq {
		return false, nil
	}
	p := s.Pointers
	p.Halted = true
	if err := e.writeState(p); err != nil {
		return false, err
	}
	if err := e.writeTx(s.Tx, false); err != nil {
		return false, err
	}
	var h uint32
	if s.Halted {
		h = 1
	}
	return true, e.write("halted", regs.Halted, h)
}

// QueuePointers reads tx_qhead and tx_qtail: the queue holds the batches
// head .. tail-1.
func (e *Engine) QueuePointers() (head, tail uint64, err error) {
	if err := e.checkTx(); err != nil {
		return 0, 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if head, err = e.read64("tx_qhead", regs.TxQheadLo); err != nil {
		return 0, 0, err
	}
	tail, err = e.read64("tx_qtail", regs.TxQtailLo)
	return head, tail, err
}

// Push publishes a batch at the tail of the transmit queue through the
// CSR window: tx_qwaddr = the first word of slot tail mod QUEUE_SLOTS,
// then per 64-bit word tx_qwdata_hi and tx_qwdata_lo (payload bytes
// little-endian: byte 8w+k in bits 8k+7:8k), then tx_push = count | len <<
// 16, which moves the tail. It reports false, writing nothing, when the
// queue is full (tx_status.full: QUEUE_SLOTS batches the engine has not
// taken). A batch longer than a slot (TxInfo.SlotBytes) or than 65535
// bytes is an error.
func (e *Engine) Push(b exo.Batch) (bool, error) {
	if err := e.checkTx(); err != nil {
		return false, err
	}
	if len(b.Payload) > e.info.Tx.SlotBytes() || len(b.Payload) > 0xFFFF {
		return false, fmt.Errorf("fpga: push: a batch of %d bytes, a slot holds %d", len(b.Payload), e.info.Tx.SlotBytes())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.read("tx_status", regs.TxStatus)
	if err != nil {
		return false, err
	}
	if st&regs.TxStatusFullMask != 0 {
		return false, nil
	}
	// The engine only takes batches meanwhile (qhead moves up): the queue
	// does not fill up between the look and the push.
	tail, err := e.read64("tx_qtail", regs.TxQtailLo)
	if err != nil {
		return false, err
	}
	slot := tail % uint64(e.info.Tx.QueueSlots)
	if err := e.write("tx_qwaddr", regs.TxQwaddr, uint32(slot)*uint32(e.info.Tx.SlotWords)); err != nil {
		return false, err
	}
	for w := 0; w < len(b.Payload); w += 8 {
		var word [8]byte
		copy(word[:], b.Payload[w:])
		lo := uint32(word[0]) | uint32(word[1])<<8 | uint32(word[2])<<16 | uint32(word[3])<<24
		hi := uint32(word[4]) | uint32(word[5])<<8 | uint32(word[6])<<16 | uint32(word[7])<<24
		if err := e.write("tx_qwdata_hi", regs.TxQwdataHi, hi); err != nil {
			return false, err
		}
		if err := e.write("tx_qwdata_lo", regs.TxQwdataLo, lo); err != nil {
			return false, err
		}
	}
	push := uint32(b.Count)<<regs.TxPushCountShift | uint32(len(b.Payload))<<regs.TxPushLenShift
	return true, e.write("tx_push", regs.TxPush, push)
}

// Reclaim takes back the batches the engine has not taken: tail = qhead
// (tx_qtail written lo, then hi). Call it with the engine halted: a
// running engine may take the head batch meanwhile. It returns how many
// batches it took back.
func (e *Engine) Reclaim() (int, error) {
	if err := e.checkTx(); err != nil {
		return 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	head, err := e.read64("tx_qhead", regs.TxQheadLo)
	if err != nil {
		return 0, err
	}
	tail, err := e.read64("tx_qtail", regs.TxQtailLo)
	if err != nil {
		return 0, err
	}
	if tail == head {
		return 0, nil
	}
	if err := e.write64("tx_qtail", regs.TxQtailLo, head); err != nil {
		return 0, err
	}
	if tail < head {
		return 0, nil // a tail behind the head (tx_qhead written since): nothing was queued
	}
	return int(tail - head), nil
}

// SetTxMACs writes the Ethernet source and destination MAC of the frames
// the engine sends (tx_src_mac, tx_dst_mac; lo = bytes 2..5, hi = bytes
// 0..1, as the roster table). The destination is broadcast at reset.
func (e *Engine) SetTxMACs(src, dst net.HardwareAddr) error {
	if err := e.checkTx(); err != nil {
		return err
	}
	if len(src) != 6 || len(dst) != 6 {
		return fmt.Errorf("fpga: set tx macs: %q, %q: want two 6-byte MACs", src, dst)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range []struct {
		name   string
		lo, hi uint32
		mac    net.HardwareAddr
	}{{"tx_src_mac", regs.TxSrcMACLo, regs.TxSrcMACHi, src}, {"tx_dst_mac", regs.TxDstMACLo, regs.TxDstMACHi, dst}} {
		lo, hi := macWords(m.mac)
		if err := e.write(m.name+"_lo", m.lo, lo); err != nil {
			return err
		}
		if err := e.write(m.name+"_hi", m.hi, hi); err != nil {
			return err
		}
	}
	return nil
}

// TxMACs reads the source and destination MAC of the frames sent.
func (e *Engine) TxMACs() (src, dst net.HardwareAddr, err error) {
	if err := e.checkTx(); err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var w [4]uint32
	for i, off := range []uint32{regs.TxSrcMACLo, regs.TxSrcMACHi, regs.TxDstMACLo, regs.TxDstMACHi} {
		if w[i], err = e.read(fmt.Sprintf("tx mac word 0x%03x", off), off); err != nil {
			return nil, nil, err
		}
	}
	mac := func(lo, hi uint32) net.HardwareAddr {
		return net.HardwareAddr{byte(hi >> 8), byte(hi), byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)}
	}
	return mac(w[0], w[1]), mac(w[2], w[3]), nil
}

// TxStatus is tx_status.
type TxStatus struct {
	Sending   bool // a frame waits for its tag or is on the TX port
	SpecReady bool // the tag of the frame the next token would send is ready
	Full      bool // the queue holds QUEUE_SLOTS batches
}

// TxStatus reads tx_status.
func (e *Engine) TxStatus() (TxStatus, error) {
	if err := e.checkTx(); err != nil {
		return TxStatus{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.read("tx_status", regs.TxStatus)
	return TxStatus{Sending: v&regs.TxStatusSendingMask != 0, SpecReady: v&regs.TxStatusSpecReadyMask != 0,
		Full: v&regs.TxStatusFullMask != 0}, err
}

// TxCounters are the transmit side's counters (32 bits, wrapping;
// ctrl.clear_counters zeroes them with the others).
type TxCounters struct {
	Sent     uint32 // frames sent: tokens answered
	Empty    uint32 // of them, empty passes
	Underrun uint32 // tokens that found the queue empty (a pass or a hand-off)
	Handoff  uint32 // tokens handed to the control plane
	Halts    uint32 // self-halts: hand-offs and slow-path verdicts
	SpecMiss uint32 // frames sent whose tag was not ready at the verdict
	BusyDrop uint32 // tokens that came while the TX port was busy: not sent, halted
	PushFull uint32 // pushes refused
	// TurnaroundLast: cycles from the verdict of the last token to its
	// frame's first beat (0: the next cycle); TurnaroundMax the largest.
	TurnaroundLast, TurnaroundMax uint32
}

// TxCounters reads the transmit side's counters.
func (e *Engine) TxCounters() (TxCounters, error) {
	var c TxCounters
	if err := e.checkTx(); err != nil {
		return c, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range []struct {
		name string
		off  uint32
		v    *uint32
	}{{"tx_sent", regs.TxSent, &c.Sent}, {"tx_empty", regs.TxEmpty, &c.Empty}, {"tx_underrun", regs.TxUnderrun, &c.Underrun},
		{"tx_handoff", regs.TxHandoff, &c.Handoff}, {"tx_halts", regs.TxHalts, &c.Halts}, {"tx_spec_miss", regs.TxSpecMiss, &c.SpecMiss},
		{"tx_busy_drop", regs.TxBusyDrop, &c.BusyDrop}, {"tx_push_full", regs.TxPushFull, &c.PushFull},
		{"tx_turnaround_last", regs.TxTurnaroundLast, &c.TurnaroundLast}, {"tx_turnaround_max", regs.TxTurnaroundMax, &c.TurnaroundMax}} {
		v, err := e.read(r.name, r.off)
		if err != nil {
			return c, err
		}
		*r.v = v
	}
	return c, nil
}
