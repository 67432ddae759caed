package fpga

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/hw/gen/regs"
)

// Regs is a register-level back end: 32-bit accesses to the engine's CSR
// block at byte offsets relative to the block (hw/gen/regs), little-endian
// in the BAR. MMIO maps a PCIe BAR; Sim drives the Verilated RTL.
type Regs interface {
	Read32(off uint32) (uint32, error)
	Write32(off, v uint32) error
	Close() error
}

// FrameEngine is a back end that can be handed a received frame, which a
// real NIC takes from the wire, not from the host: Sim has it, MMIO does
// not. frame is a whole Ethernet frame as received (the engine parses
// from byte 0: destination and source MAC, EtherType, then the Exo frame;
// no FCS).
type FrameEngine interface {
	Process(frame []byte) (Verdict, error)
}

// Verdict is the engine's decision on one frame.
type Verdict struct {
	Reason   exo.Reason
	SlowPath bool // Reason is a slow-path verdict (GAP, DIVERGENCE, FUTURE_EPOCH, HALTED)

	// From the verdict sideband (verdict_sender, verdict_seq): set by
	// FrameEngine.Process, zero from Engine.LastVerdict (the register
	// holds the reason only).
	Sender uint8
	Seq    uint64

	// Simulation only: Cycle is the clock cycle at which the verdict was
	// valid, Latency the cycles from the tlast beat to it (5 for the RTL
	// of docs/hardware.md).
	Cycle   uint64
	Latency int

	// Token is the token-mode sideband (register map 1.3, verdict_record
	// ... verdict_qhead), set by FrameEngine.Process.
	Token TokenVerdict
	// TX is the frame the engine sent on its TX port for this frame
	// (Token.Sent): a whole Ethernet frame, header included, no padding;
	// nil when it sent none. TxLatency is the cycles from the received
	// frame's tlast beat to the TX frame's first beat, counted as Latency
	// is. Simulation only.
	TX        []byte
	TxLatency int
}

// TokenVerdict is what the engine did with a frame in token mode
// (exo.Turn, and the record the control plane reads: token.Record).
type TokenVerdict struct {
	// Record: the frame goes to the control plane (verdict_record): it
	// moved tx_kseq.
	Record bool
	// Armed: the engine was not halted when it classified the frame.
	Armed bool
	// Sent: it answered the frame with this host's next frame; Popped:
	// that frame carried the head batch of the queue.
	Sent, Popped bool
	// Handoff: it handed the token to the control plane (an idle rack, or
	// a batch too long for a fast frame); Halt: it halted itself after
	// the frame (a hand-off, a slow-path verdict other than HALTED, a
	// token that came while the TX port was busy).
	Handoff, Halt bool
	// Kseq is tx_kseq before the record (the record's number); QHead is
	// tx_qhead after it.
	Kseq, QHead uint64
}

func (v Verdict) String() string {
	s := v.Reason.String()
	if v.SlowPath {
		s += " (slow path)"
	}
	return s
}

// Errors of Open: the register block is not an Exo engine this driver
// knows.
var (
	ErrNotExo       = errors.New("fpga: register block is not an Exo engine")
	ErrVersion      = errors.New("fpga: unsupported Exo engine register map version")
	ErrNoFrameInput = errors.New("fpga: this back end takes no frames from the host (only the simulated engine does)")
)

// DriverMajor is the register map major version this driver implements
// (rb_version bits 15:8): Open refuses any other; a newer minor version is
// accepted (minor versions only add registers).
const DriverMajor = regs.RbVersionExo >> 8 & 0xFF

// Info is the register block header and the build parameters.
type Info struct {
	Type       uint32 // rb_type: regs.RbTypeExo
	Version    uint32 // rb_version
	Major      int    // rb_version bits 15:8
	Minor      int    // rb_version bits 7:0
	NextPtr    uint32 // rb_next_ptr: the next register block, 0 = last
	MaxHosts   int    // caps.max_hosts: the largest roster n
	MaxHistory int    // caps.max_history: history slots held, floor(MaxHosts/2)
	// Tx is the transmit side's tx_caps (register map 1.3; zero before).
	Tx TxInfo
}

func (i Info) String() string {
	s := fmt.Sprintf("Exo engine v%d.%d, max_hosts %d, max_history %d", i.Major, i.Minor, i.MaxHosts, i.MaxHistory)
	if i.Tx.QueueSlots > 0 {
		s += fmt.Sprintf(", transmit queue %d slots of %d bytes", i.Tx.QueueSlots, i.Tx.SlotBytes())
	}
	return s
}

// ReadInfo reads the register block header and caps at offset 0 of r and
// checks them: the type must be regs.RbTypeExo (ErrNotExo), the major
// version DriverMajor (ErrVersion), and caps must be consistent.
func ReadInfo(r Regs) (Info, error) {
	var i Info
	var err error
	if i.Type, err = r.Read32(regs.RbType); err != nil {
		return i, fmt.Errorf("fpga: read rb_type: %w", err)
	}
	if i.Type != regs.RbTypeExo {
		return i, fmt.Errorf("%w: rb_type is 0x%08x (%s), want 0x%08x (\"EXO\\0\")", ErrNotExo, i.Type, fourCC(i.Type), uint32(regs.RbTypeExo))
	}
	if i.Version, err = r.Read32(regs.RbVersion); err != nil {
		return i, fmt.Errorf("fpga: read rb_version: %w", err)
	}
	i.Major, i.Minor = int(i.Version>>8&0xFF), int(i.Version&0xFF)
	if i.Major != DriverMajor || i.Version>>16 != 0 {
		return i, fmt.Errorf("%w: rb_version 0x%08x is %d.%d, this driver implements %d.x (hw/registers.json v%d)",
			ErrVersion, i.Version, i.Major, i.Minor, DriverMajor, regs.MapVersion)
	}
	if i.NextPtr, err = r.Read32(regs.RbNextPtr); err != nil {
		return i, fmt.Errorf("fpga: read rb_next_ptr: %w", err)
	}
	caps, err := r.Read32(regs.Caps)
	if err != nil {
		return i, fmt.Errorf("fpga: read caps: %w", err)
	}
	i.MaxHosts = int(caps & regs.CapsMaxHostsMask >> regs.CapsMaxHostsShift)
	i.MaxHistory = int(caps & regs.CapsMaxHistoryMask >> regs.CapsMaxHistoryShift)
	if i.MaxHosts < 1 || i.MaxHosts > regs.RosterEntries || i.MaxHistory < i.MaxHosts/2 || i.MaxHistory > 4*regs.HistoryCount {
		return i, fmt.Errorf("fpga: caps 0x%08x: max_hosts %d, max_history %d are inconsistent", caps, i.MaxHosts, i.MaxHistory)
	}
	i.Tx, err = readTxInfo(r, i)
	return i, err
}

func fourCC(v uint32) string {
	b := []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '.'
		}
	}
	return fmt.Sprintf("%q", b)
}

// Engine is the typed driver of one Exo engine register block. Its
// methods serialize on a mutex: one multi-register sequence (SetState,
// State, ...) at a time.
type Engine struct {
	mu     sync.Mutex
	r      Regs
	info   Info
	roster []net.HardwareAddr // the driver's copy (the table is write-only)
	// the driver's copy of the key slots (the key words are write-only);
	// keyKnown[i]: slot i's words hold keys.Key[i] (written by this Engine)
	keys     exo.KeyRing
	keyKnown [2]bool
}

// Open checks the register block of r (ReadInfo) and returns its driver.
// The Engine owns r: Close closes it.
func Open(r Regs) (*Engine, error) {
	info, err := ReadInfo(r)
	if err != nil {
		return nil, err
	}
	return &Engine{r: r, info: info}, nil
}

// Info returns what Open read.
func (e *Engine) Info() Info { return e.info }

// Regs returns the back end.
func (e *Engine) Regs() Regs { return e.r }

// Close closes the back end.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.r.Close()
}

func (e *Engine) write(name string, off, v uint32) error {
	if err := e.r.Write32(off, v); err != nil {
		return fmt.Errorf("fpga: write %s: %w", name, err)
	}
	return nil
}

func (e *Engine) read(name string, off uint32) (uint32, error) {
	v, err := e.r.Read32(off)
	if err != nil {
		return 0, fmt.Errorf("fpga: read %s: %w", name, err)
	}
	return v, nil
}

// write64 writes lo, then hi (the documented order).
func (e *Engine) write64(name string, lo uint32, v uint64) error {
	if err := e.write(name+"_lo", lo, uint32(v)); err != nil {
		return err
	}
	return e.write(name+"_hi", lo+4, uint32(v>>32))
}

// read64 reads hi, lo, hi and retries when hi moved (the engine updates
// append and agreed in place while it runs), so a running engine never
// yields a torn value.
func (e *Engine) read64(name string, lo uint32) (uint64, error) {
	for range 4 {
		hi1, err := e.read(name+"_hi", lo+4)
		if err != nil {
			return 0, err
		}
		l, err := e.read(name+"_lo", lo)
		if err != nil {
			return 0, err
		}
		hi2, err := e.read(name+"_hi", lo+4)
		if err != nil {
			return 0, err
		}
		if hi1 == hi2 {
			return uint64(hi2)<<32 | uint64(l), nil
		}
	}
	return 0, fmt.Errorf("fpga: read %s: the high word keeps changing", name)
}

// historyWords is the number of history words the engine holds.
func (e *Engine) historyWords() int { return (e.info.MaxHistory + 3) / 4 }

// SetState loads the fast-path state, as at an install (docs/registers.md):
// halted = 1 first (every frame is HALTED meanwhile: the 64-bit pointers
// take effect word by word), then group, hosts, epoch, window, append,
// agreed, epoch_start (lo, then hi) and the history words the engine
// holds, and last halted = s.Halted, which releases the engine unless the
// state itself is halted. It refuses a roster the engine cannot hold (s.Hosts
// above caps.max_hosts, or a history slot from caps.max_history on that is
// not exo.HistoryNone).
func (e *Engine) SetState(s exo.Pointers) error {
	if err := e.checkState(s); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.writeState(s)
}

// checkState refuses a state the engine cannot hold.
func (e *Engine) checkState(s exo.Pointers) error {
	if int(s.Hosts) > e.info.MaxHosts {
		return fmt.Errorf("fpga: set state: %d hosts, the engine holds at most %d (caps.max_hosts)", s.Hosts, e.info.MaxHosts)
	}
	for i := e.info.MaxHistory; i < len(s.History); i++ {
		if s.History[i] != exo.HistoryNone {
			return fmt.Errorf("fpga: set state: history slot %d is %d, the engine holds %d slots (caps.max_history)", i, s.History[i], e.info.MaxHistory)
		}
	}
	return nil
}

// writeState is SetState's register sequence (mu held).
func (e *Engine) writeState(s exo.Pointers) error {
	if err := e.write("halted", regs.Halted, 1); err != nil {
		return err
	}
	for _, w := range []struct {
		name string
		off  uint32
		v    uint32
	}{
		{"group", regs.Group, uint32(s.Group)},
		{"hosts", regs.Hosts, uint32(s.Hosts)},
		{"epoch", regs.Epoch, s.Epoch},
	} {
		if err := e.write(w.name, w.off, w.v); err != nil {
			return err
		}
	}
	for _, w := range []struct {
		name string
		lo   uint32
		v    uint64
	}{
		{"window", regs.WindowLo, s.Window},
		{"append", regs.AppendLo, s.Append},
		{"agreed", regs.AgreedLo, s.Agreed},
		{"epoch_start", regs.EpochStartLo, s.EpochStart},
	} {
		if err := e.write64(w.name, w.lo, w.v); err != nil {
			return err
		}
	}
	for k := range e.historyWords() {
		var v uint32
		for j := range 4 {
			slot := 4*k + j
			id := uint32(exo.HistoryNone)
			if slot < len(s.History) {
				id = uint32(s.History[slot])
			}
			v |= id << (8 * j)
		}
		if err := e.write(fmt.Sprintf("history[%d]", k), regs.HistoryBase+uint32(k)*regs.HistoryStride, v); err != nil {
			return err
		}
	}
	var h uint32
	if s.Halted {
		h = 1
	}
	return e.write("halted", regs.Halted, h)
}

// State reads the fast-path state. Each 64-bit pointer is read without
// tearing (read64), but a running engine may accept frames between two
// registers: for a snapshot of the whole state, halt it first (Halt).
// Slots the engine does not hold read exo.HistoryNone.
func (e *Engine) State() (exo.Pointers, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var s exo.Pointers
	s.ClearHistory()
	g, err := e.read("group", regs.Group)
	if err != nil {
		return s, err
	}
	n, err := e.read("hosts", regs.Hosts)
	if err != nil {
		return s, err
	}
	if s.Epoch, err = e.read("epoch", regs.Epoch); err != nil {
		return s, err
	}
	h, err := e.read("halted", regs.Halted)
	if err != nil {
		return s, err
	}
	s.Group, s.Hosts, s.Halted = uint16(g), uint16(n), h&1 != 0
	for _, w := range []struct {
		name string
		lo   uint32
		v    *uint64
	}{
		{"window", regs.WindowLo, &s.Window},
		{"append", regs.AppendLo, &s.Append},
		{"agreed", regs.AgreedLo, &s.Agreed},
		{"epoch_start", regs.EpochStartLo, &s.EpochStart},
	} {
		if *w.v, err = e.read64(w.name, w.lo); err != nil {
			return s, err
		}
	}
	for k := range e.historyWords() {
		v, err := e.read(fmt.Sprintf("history[%d]", k), regs.HistoryBase+uint32(k)*regs.HistoryStride)
		if err != nil {
			return s, err
		}
		for j := range 4 {
			if slot := 4*k + j; slot < len(s.History) {
				s.History[slot] = uint8(v >> (8 * j))
			}
		}
	}
	return s, nil
}

// Halt sets halted = 1: every frame is HALTED (slow path) until SetState
// or Release.
func (e *Engine) Halt() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.write("halted", regs.Halted, 1)
}

// Release sets halted = 0.
func (e *Engine) Release() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.write("halted", regs.Halted, 0)
}

// Status is the status register.
type Status struct {
	CfgErr bool // hosts > caps.max_hosts: every frame is HALTED
	Busy   bool // a frame is being received
}

// Status reads the status register.
func (e *Engine) Status() (Status, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.read("status", regs.Status)
	return Status{CfgErr: v&regs.StatusCfgErrMask != 0, Busy: v&regs.StatusBusyMask != 0}, err
}

// macWords returns the roster_mac_lo and roster_mac_hi words of a MAC:
// lo = bytes 2..5 (byte 2 in bits 31:24), hi = bytes 0..1 (byte 0 in
// bits 15:8).
func macWords(m net.HardwareAddr) (lo, hi uint32) {
	lo = uint32(m[2])<<24 | uint32(m[3])<<16 | uint32(m[4])<<8 | uint32(m[5])
	hi = uint32(m[0])<<8 | uint32(m[1])
	return lo, hi
}

// SetRoster writes the roster MAC table (host i's source MAC is macs[i];
// lo, then hi per entry, the order the table needs) and enables
// ctrl.mac_check: a frame whose source MAC is not roster[sender] is then
// BAD_SENDER if its epoch is not later than the engine's; a frame of a
// later epoch goes on to the other rules (FUTURE_EPOCH, the slow path, so
// that a host that missed a membership change still catches up; the
// daemon takes it only from a known member's MAC). Give it every host of
// the roster (len(macs) = n): entries beyond the list are not cleared,
// and the engine checks every sender < n. An empty roster disables the
// check. The table is write-only; Roster returns the driver's copy.
func (e *Engine) SetRoster(macs []net.HardwareAddr) error {
	if len(macs) > e.info.MaxHosts {
		return fmt.Errorf("fpga: set roster: %d hosts, the engine holds at most %d (caps.max_hosts)", len(macs), e.info.MaxHosts)
	}
	for i, m := range macs {
		if len(m) != 6 {
			return fmt.Errorf("fpga: set roster: host %d: %q is not a 6-byte MAC", i, m)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(macs) == 0 {
		if err := e.setCtrl(false, false); err != nil {
			return err
		}
		e.roster = nil
		return nil
	}
	// the check off while the table changes: no frame is judged against
	// a half-written roster
	if err := e.setCtrl(false, false); err != nil {
		return err
	}
	e.roster = nil
	for i, m := range macs {
		lo, hi := macWords(m)
		if err := e.write(fmt.Sprintf("roster_mac_lo[%d]", i), regs.RosterMACLoBase+uint32(i)*regs.RosterMACLoStride, lo); err != nil {
			return err
		}
		if err := e.write(fmt.Sprintf("roster_mac_hi[%d]", i), regs.RosterMACHiBase+uint32(i)*regs.RosterMACHiStride, hi); err != nil {
			return err
		}
	}
	if err := e.setCtrl(true, false); err != nil {
		return err
	}
	e.roster = make([]net.HardwareAddr, len(macs))
	for i, m := range macs {
		e.roster[i] = append(net.HardwareAddr(nil), m...)
	}
	return nil
}

// Roster returns the roster SetRoster wrote (nil: none, the MAC check is
// off).
func (e *Engine) Roster() []net.HardwareAddr {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]net.HardwareAddr, len(e.roster))
	for i, m := range e.roster {
		out[i] = append(net.HardwareAddr(nil), m...)
	}
	return out
}

// MACCheck reads ctrl.mac_check.
func (e *Engine) MACCheck() (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.read("ctrl", regs.Ctrl)
	return v&regs.CtrlMACCheckMask != 0, err
}

func (e *Engine) setCtrl(macCheck, clear bool) error {
	var v uint32
	if macCheck {
		v |= 1 << regs.CtrlMACCheckShift
	}
	if clear {
		v |= 1 << regs.CtrlClearCountersShift
	}
	return e.write("ctrl", regs.Ctrl, v)
}

// KeySlots is the number of key slots of register map 1.2 (key, key1):
// exo.KeyRing's two phases.
const KeySlots = 2

// ErrKeySlots: the engine (register map 1.1) has one key slot, the ring
// needs the second.
var ErrKeySlots = errors.New("fpga: this engine has one key slot (register map 1.1): key phase 1 needs 1.2")

// keyWords returns the four key words of key: word i is the little-endian
// uint32 of key[4i:4i+4], so word 0 holds key bits 31:0 with key[0] in
// bits 7:0 (the byte order of SipHash's k0 = LE64(key[0:8])).
func keyWords(key [exo.TagKeyLen]byte) [regs.KeyCount]uint32 {
	var w [regs.KeyCount]uint32
	for i := range w {
		w[i] = uint32(key[4*i]) | uint32(key[4*i+1])<<8 | uint32(key[4*i+2])<<16 | uint32(key[4*i+3])<<24
	}
	return w
}

// keySlotBase is the byte offset of key slot i's first word.
func keySlotBase(i int) (uint32, string) {
	if i == 1 {
		return regs.Key1Base, "key1"
	}
	return regs.KeyBase, "key"
}

// SetKeys loads the two key slots of the tag check (register map 1.2): a
// frame whose key phase bit (flags 0x4000) is p is checked against
// ring.Key[p] if ring.Valid[p], and is BAD_TAG if not. Slot 0 is the
// words at regs.KeyBase, slot 1 those at regs.Key1Base (the layout of
// SetKey), the valid bits are key_valid.
//
// The sequence: a slot whose key changes (or that this Engine has not
// written yet) is first marked invalid in key_valid, then the words of
// every slot ring.Valid names are written, then key_valid = ring.Valid.
// No frame is ever checked against a half-written key, and a slot that
// keeps its key stays valid throughout (its words are written again with
// the same values, which also restores them after a reset of the engine),
// so frames under it are checked all along: a rotation changes only the
// slot that no frame in flight names (docs/fpga.md). The engine reads a
// frame's key at its fourth beat. The key words are write-only; Keys
// returns the driver's copy.
//
// On a 1.1 engine (one key slot) a ring with slot 1 valid, or slot 0
// invalid, is ErrKeySlots; any other ring writes slot 0's key.
func (e *Engine) SetKeys(ring exo.KeyRing) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.info.Minor < 2 {
		if ring.Valid[1] || !ring.Valid[0] {
			return fmt.Errorf("%w (rb_version %d.%d, slots valid %v)", ErrKeySlots, e.info.Major, e.info.Minor, ring.Valid)
		}
		if err := e.writeKeySlot(0, ring.Key[0]); err != nil {
			return err
		}
		e.keys, e.keyKnown = ring, [2]bool{true, false}
		return nil
	}
	cur, err := e.read("key_valid", regs.KeyValid)
	if err != nil {
		return err
	}
	masks := [KeySlots]uint32{regs.KeyValidSlot0Mask, regs.KeyValidSlot1Mask}
	var want uint32
	keep := cur & (regs.KeyValidSlot0Mask | regs.KeyValidSlot1Mask)
	for i := range KeySlots {
		if ring.Valid[i] {
			want |= masks[i]
		}
		if !ring.Valid[i] || !e.keyKnown[i] || e.keys.Key[i] != ring.Key[i] {
			keep &^= masks[i]
		}
	}
	if keep != cur {
		if err := e.write("key_valid", regs.KeyValid, keep); err != nil {
			return err
		}
	}
	for i := range KeySlots {
		if !ring.Valid[i] {
			continue
		}
		if e.keys.Key[i] != ring.Key[i] {
			e.keyKnown[i] = false
		}
		if err := e.writeKeySlot(i, ring.Key[i]); err != nil {
			return err
		}
		e.keys.Key[i], e.keyKnown[i] = ring.Key[i], true
	}
	e.keys.Valid = ring.Valid
	if want != keep {
		return e.write("key_valid", regs.KeyValid, want)
	}
	return nil
}

// writeKeySlot writes the four words of key slot i.
func (e *Engine) writeKeySlot(i int, key [exo.TagKeyLen]byte) error {
	base, name := keySlotBase(i)
	for j, w := range keyWords(key) {
		if err := e.write(fmt.Sprintf("%s[%d]", name, j), base+uint32(j)*regs.KeyStride, w); err != nil {
			return err
		}
	}
	return nil
}

// SetKey writes the 128-bit SipHash-2-4 key of the tag check into slot 0
// and leaves slot 1 invalid: SetKeys(exo.NewKeyRing(0, key)), the one-key
// engine of register map 1.1 (frames of key phase 1 are BAD_TAG). Key
// word i (0x060 + 4i) is the little-endian uint32 of key[4i:4i+4], so
// word 0 holds key bits 31:0 with key[0] in bits 7:0 (the byte order of
// SipHash's k0 = LE64(key[0:8])). The words are write-only.
func (e *Engine) SetKey(key [16]byte) error {
	return e.SetKeys(exo.NewKeyRing(0, key))
}

// Keys returns the key slots as this Engine last wrote them (the key
// words are write-only: a slot it never wrote reads as the zero key) and
// their valid bits as the engine holds them (key_valid; on a 1.1 engine,
// slot 0 valid and slot 1 not).
func (e *Engine) Keys() (exo.KeyRing, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := exo.KeyRing{Key: e.keys.Key}
	if e.info.Minor < 2 {
		r.Valid = [2]bool{true, false}
		return r, nil
	}
	v, err := e.read("key_valid", regs.KeyValid)
	if err != nil {
		return r, err
	}
	r.Valid = [2]bool{v&regs.KeyValidSlot0Mask != 0, v&regs.KeyValidSlot1Mask != 0}
	return r, nil
}

// Counters are the engine's frame counters (32 bits, wrapping).
type Counters struct {
	PerReason [exo.NumReasons]uint32 // counter[r]: frames with verdict r
	FramesIn  uint32                 // every verdict
	Accepted  uint32                 // frames_accepted = PerReason[ACCEPT]
}

// Counters reads the counters per reason, frames_in and frames_accepted.
func (e *Engine) Counters() (Counters, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var c Counters
	var err error
	for r := range exo.NumReasons {
		if c.PerReason[r], err = e.read(fmt.Sprintf("counter[%d]", r), regs.CounterBase+uint32(r)*regs.CounterStride); err != nil {
			return c, err
		}
	}
	if c.FramesIn, err = e.read("frames_in", regs.FramesIn); err != nil {
		return c, err
	}
	c.Accepted, err = e.read("frames_accepted", regs.FramesAccepted)
	return c, err
}

// ClearCounters zeroes every counter (ctrl.clear_counters), keeping
// ctrl.mac_check as it is.
func (e *Engine) ClearCounters() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.read("ctrl", regs.Ctrl)
	if err != nil {
		return err
	}
	return e.setCtrl(v&regs.CtrlMACCheckMask != 0, true)
}

// LastVerdict reads the verdict of the last frame (reason and slow path;
// Sender and Seq are zero: the register does not hold them).
func (e *Engine) LastVerdict() (Verdict, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.read("last_verdict", regs.LastVerdict)
	if err != nil {
		return Verdict{}, err
	}
	return Verdict{
		Reason:   exo.Reason(v & regs.LastVerdictReasonMask >> regs.LastVerdictReasonShift),
		SlowPath: v&regs.LastVerdictSlowPathMask != 0,
	}, nil
}

// Process hands frame (a whole Ethernet frame) to the engine when the back
// end takes frames from the host (FrameEngine: the simulated engine), and
// returns its verdict; ErrNoFrameInput otherwise. It holds the Engine's
// lock: no register sequence runs in between.
func (e *Engine) Process(frame []byte) (Verdict, error) {
	fe, ok := e.r.(FrameEngine)
	if !ok {
		return Verdict{}, ErrNoFrameInput
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return fe.Process(frame)
}

// EthernetFrame returns an Ethernet frame carrying the Exo frame b (the
// bytes after the Ethernet header): broadcast destination, source MAC
// src, EtherType 0x88B5, no padding — what Process takes.
func EthernetFrame(src net.HardwareAddr, b []byte) []byte {
	f := make([]byte, exo.EthHeaderLen, exo.EthHeaderLen+len(b))
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], src)
	f[12], f[13] = exo.EtherType>>8, exo.EtherType&0xff
	return append(f, b...)
}
