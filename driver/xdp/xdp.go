//go:build linux

package xdp

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/exo-rack/exo/exo"
)

// XDP actions (enum xdp_action).
const (
	ActionAborted Action = 0
	ActionDrop    Action = 1
	ActionPass    Action = 2
	ActionTX      Action = 3
	ActionRedir   Action = 4
)

// Action is the value an XDP program returns.
type Action uint32

func (a Action) String() string {
	switch a {
	case ActionAborted:
		return "XDP_ABORTED"
	case ActionDrop:
		return "XDP_DROP"
	case ActionPass:
		return "XDP_PASS"
	case ActionTX:
		return "XDP_TX"
	case ActionRedir:
		return "XDP_REDIRECT"
	}
	return fmt.Sprintf("Action(%d)", uint32(a))
}

// Counter slots after the exo.NumReasons reason counters (bpf/exo.c).
const (
	CounterNotExo       = exo.NumReasons + iota // other EtherType or runt: passed untouched
	CounterUnclassified                         // longer than MaxFrame: passed unclassified
	CounterNoMeta                               // bpf_xdp_adjust_meta failed: verdict not attached
	CounterForeignMAC                           // source MAC is not roster[sender] (SetRoster), epoch not later than the state's: dropped
	// Token mode (token.go, docs/token.md):
	CounterRingFull // less than RingRoom free in the record ring: dropped untouched
	CounterLost     // a record could not be written after the state moved: lost and halted
	CounterTX       // frames sent (XDP_TX)
	CounterTXEmpty  // empty passes among them
	CounterHandoff  // hand-offs: halted on an ACCEPT from pred (idle rack and empty queue, or no room)
	CounterTXNoRoom // hand-offs because the frame to send did not fit the buffer
	CounterMode     // tx_on changed between the program's hint and its lock: dropped untouched
	CounterTXErr    // a sent frame could not be written into the buffer (unreachable): dropped
	numCounters
)

// MaxFrame is the longest Exo frame (bytes after the Ethernet header) the
// program classifies; a linear XDP buffer (one page) never holds a longer one.
const MaxFrame = 4096

// MetaMagic ("EXOM") starts the 8-byte struct exo_meta the program writes
// into the XDP metadata area in front of every Exo frame it handles:
// magic u32, reason u8, action u8, flags u16, in host byte order.
const (
	MetaMagic = 0x45584f4d
	MetaLen   = 8
	// MetaForeignMAC is the exo_meta flag of a frame dropped because its
	// Ethernet source MAC is not its sender's roster MAC and its epoch is
	// not later than the state's (reason BAD_SENDER).
	MetaForeignMAC = 0x0001
)

// Verdict is what the program decided for one frame.
type Verdict struct {
	Action Action
	// Reason is the exo.Reason of an Exo frame; HasReason is false for a
	// frame the program did not classify (not Exo, too long, or no
	// metadata room).
	Reason    exo.Reason
	HasReason bool
	// ForeignMAC: dropped because the frame's source MAC is not the
	// roster MAC of its sender and its epoch is not later than the
	// state's (Reason is then BAD_SENDER; the frame is counted in
	// CounterForeignMAC, not in the reason counters).
	ForeignMAC bool
	// Redirected: a passed frame (Action is ActionPass) that the program
	// returned as XDP_REDIRECT, to the AF_XDP socket registered for its
	// RX queue (RegisterXSK); a passed frame with no socket registered
	// for its queue leaves as XDP_PASS, to the stack. Run sets it when
	// a socket is registered for queue 0, the queue BPF_PROG_TEST_RUN
	// runs the program on; XSKConn sets it on every frame read from an
	// AF_XDP socket.
	Redirected bool
}

func (v Verdict) String() string {
	s := v.Action.String()
	if v.HasReason {
		s += " " + v.Reason.String()
	}
	if v.ForeignMAC {
		s += " (foreign MAC)"
	}
	if v.Redirected {
		s += " (to AF_XDP)"
	}
	return s
}

// ParseMeta reads the struct exo_meta at the start of b (the bytes from
// data_meta, as AF_XDP or BPF_PROG_TEST_RUN hand them out).
func ParseMeta(b []byte) (Verdict, bool) {
	if len(b) < MetaLen || binary.NativeEndian.Uint32(b) != MetaMagic {
		return Verdict{}, false
	}
	return Verdict{Action: Action(b[5]), Reason: exo.Reason(b[4]), HasReason: true,
		ForeignMAC: binary.NativeEndian.Uint16(b[6:])&MetaForeignMAC != 0}, true
}

// Program is the loaded XDP program and its maps.
type Program struct {
	objs exoObjects
	// authMu serializes the read-modify-write updates of exo_auth_map
	// (SetKeys, SetRoster) so that neither loses the other's fields.
	authMu sync.Mutex
	// tokMu guards tok, the open token-mode handle (at most one).
	tokMu sync.Mutex
	tok   *Token
	// pinDir is LoadOptions.PinDir; pinnedFound counts the maps found
	// pinned there at Load.
	pinDir      string
	pinnedFound int
}

// LoadOptions are the options of LoadWith.
type LoadOptions struct {
	// RingSize is the size in bytes of token mode's record ring
	// (exo_ring): a power of 2, a multiple of the page size and at least
	// 2 * RingRoom. 0 means DefaultRingSize (16 MiB).
	RingSize int
	// PinDir, if set, pins token mode's maps (the state, the ring, the
	// queue and its tail) by name in this directory, which must be on a
	// bpffs (see MountBPF); maps pinned there already (by a daemon that
	// was killed) are taken over instead of created, so that the records
	// it had not released reach the next one (docs/token.md section 5).
	// Program.Pinned reports which happened.
	PinDir string
}

// pinned are the maps LoadOptions.PinDir pins: what token mode must keep
// across a killed daemon.
var pinned = []string{"exo_state_map", "exo_ring", "exo_txq", "exo_txq_tail"}

// Load loads the program and its maps into the kernel. The state map holds
// a zero state (group 0, no hosts) until SetState, both key slots are empty
// until SetKeys or SetKey (every frame that passes the group check is
// BAD_TAG), and no roster is loaded until SetRoster (no MAC check). A
// verifier rejection is returned with the verifier log
// (errors.As(err, new(*ebpf.VerifierError))).
//
// The order of the checks: the codec, the group (BAD_GROUP), the tag under
// the key slot the frame's key phase names (BAD_TAG), the roster MAC for
// a frame whose epoch is not later than the state's (CounterForeignMAC),
// then the state checks of exo.Pointers.Classify; see
// bpf/exo.c and docs/xdp.md.
//
// The same object holds token mode (Program.Token, docs/token.md): the
// program tail-calls exo_tok when the state's tx_on is set (never by
// SetState, which writes tx_on 0), and exo_ctl is the control program
// Token runs with BPF_PROG_TEST_RUN.
func Load() (*Program, error) { return load(false, LoadOptions{}) }

// LoadWith is Load with options.
func LoadWith(o LoadOptions) (*Program, error) { return load(false, o) }

// load with benchUndo set loads a benchmark variant that undoes every
// ACCEPT (receive-only path) and every recorded frame (token mode: the
// state and the packet), so that one in-order frame can be run
// repeatedly.
func load(benchUndo bool, o LoadOptions) (*Program, error) {
	if o.RingSize != 0 {
		pg := os.Getpagesize()
		if o.RingSize < 2*RingRoom || o.RingSize&(o.RingSize-1) != 0 || o.RingSize%pg != 0 {
			return nil, fmt.Errorf("xdp: ring size %d: want a power of 2, a multiple of %d and at least %d", o.RingSize, pg, 2*RingRoom)
		}
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("xdp: remove memlock limit: %w", err)
	}
	spec, err := loadExo()
	if err != nil {
		return nil, fmt.Errorf("xdp: load spec: %w", err)
	}
	if o.RingSize != 0 {
		spec.Maps["exo_ring"].MaxEntries = uint32(o.RingSize)
	}
	if benchUndo {
		if err := spec.Variables["exo_bench_undo_accept"].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("xdp: bench variant: %w", err)
		}
	}
	p := &Program{pinDir: o.PinDir}
	var copts *ebpf.CollectionOptions
	if o.PinDir != "" {
		if err := os.MkdirAll(o.PinDir, 0o700); err != nil {
			return nil, fmt.Errorf("xdp: pin directory: %w", err)
		}
		for _, name := range pinned {
			if _, err := os.Stat(filepath.Join(o.PinDir, name)); err == nil {
				p.pinnedFound++
			}
			spec.Maps[name].Pinning = ebpf.PinByName
		}
		copts = &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: o.PinDir}}
	}
	if err := spec.LoadAndAssign(&p.objs, copts); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("xdp: verifier rejected the program: %+v", ve)
		}
		return nil, fmt.Errorf("xdp: load: %w", err)
	}
	// Token mode: exo_xdp tail-calls exo_tok through slot 0 of exo_progs.
	if err := p.objs.ExoProgs.Put(uint32(0), p.objs.ExoTok); err != nil {
		p.Close()
		return nil, fmt.Errorf("xdp: program array: %w", err)
	}
	// Both slots empty, their words random (see SetKeys), not zero.
	if err := p.SetKeys(exo.KeyRing{}); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Pinned reports whether Load took over every pinned map of
// LoadOptions.PinDir (a killed daemon's), rather than creating them.
func (p *Program) Pinned() bool { return p.pinDir != "" && p.pinnedFound == len(pinned) }

// Unpin removes the pins of LoadOptions.PinDir and the directory: the
// maps go with the program (a clean stop: nothing is left to take over).
func (p *Program) Unpin() error {
	if p.pinDir == "" {
		return nil
	}
	var err error
	for _, m := range []*ebpf.Map{p.objs.ExoStateMap, p.objs.ExoRing, p.objs.ExoTxq, p.objs.ExoTxqTail} {
		if e := m.Unpin(); e != nil && err == nil {
			err = e
		}
	}
	if e := os.Remove(p.pinDir); e != nil && !errors.Is(e, os.ErrNotExist) && err == nil {
		err = e
	}
	return err
}

// RemovePins removes the maps pinned in dir (LoadOptions.PinDir), if any:
// their records belong to a log that is gone (a wiped data directory).
func RemovePins(dir string) error {
	for _, name := range pinned {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("xdp: remove pin: %w", err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("xdp: remove pin directory: %w", err)
	}
	return nil
}

// Close unloads the program and its maps (an attached link keeps the
// program alive until the link is closed too; pinned maps stay until
// Unpin). It closes the token-mode handle first, if one is open.
func (p *Program) Close() error {
	p.tokMu.Lock()
	t := p.tok
	p.tokMu.Unlock()
	if t != nil {
		t.Close()
	}
	return p.objs.Close()
}

// EBPF returns the underlying program, e.g. to put it in a program array.
func (p *Program) EBPF() *ebpf.Program { return p.objs.ExoXdp }

// SetState writes the pointer state (under the map value's spin lock),
// for the receive-only path: the transmit side is written as zeros (tx_on
// 0, kseq 0, qhead 0, lost 0). It must not be used in token mode, where
// the program moves the state between a read and a write: Token's Halt,
// Arm and Read replace it.
func (p *Program) SetState(s exo.Pointers) error {
	v := exoExoState{
		Group:      s.Group,
		Hosts:      s.Hosts,
		Epoch:      s.Epoch,
		Window:     s.Window,
		Append:     s.Append,
		Agreed:     s.Agreed,
		EpochStart: s.EpochStart,
		History:    s.History,
	}
	if s.Halted {
		v.Halted = 1
	}
	if err := p.objs.ExoStateMap.Update(uint32(0), &v, ebpf.UpdateLock); err != nil {
		return fmt.Errorf("xdp: write state: %w", err)
	}
	return nil
}

// SetKeys writes the two frame-tag key slots (exo.KeyRing, as
// exo.Node.Keys returns them): the program verifies every frame's
// SipHash-2-4 tag, right after the group check, under the key of the slot
// the frame's key phase bit (exo.FlagKeyPhase) names, and drops as BAD_TAG
// the frames whose tag does not verify or whose slot is not valid. The
// roster is kept.
//
// Both slots and their valid bits are written in one map update. The
// program reads them without a lock, so a frame classified during the
// update may see part of the old value and part of the new one; the words
// of an invalid slot are therefore written as fresh random words, never
// zeros or the key the slot held: a torn read checks a frame under the
// old key, the new key, or a key no one knows, never a retired or a
// guessable one.
func (p *Program) SetKeys(ring exo.KeyRing) error {
	p.authMu.Lock()
	defer p.authMu.Unlock()
	var a exoExoAuth
	if err := p.objs.ExoAuthMap.Lookup(uint32(0), &a); err != nil {
		return fmt.Errorf("xdp: read keys: %w", err)
	}
	a.KeyValid = 0
	for ph := range a.Key {
		k := ring.Key[ph]
		if ring.Valid[ph] {
			a.KeyValid |= 1 << ph
		} else {
			rand.Read(k[:]) // never fails (crypto/rand)
		}
		a.Key[ph].K0 = binary.LittleEndian.Uint64(k[0:8])
		a.Key[ph].K1 = binary.LittleEndian.Uint64(k[8:16])
	}
	if err := p.objs.ExoAuthMap.Update(uint32(0), &a, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("xdp: write keys: %w", err)
	}
	return nil
}

// SetKey writes key (exo.Config.TagKey) into key slot 0 and empties slot 1:
// SetKeys(exo.NewKeyRing(0, key)). Frames of key phase 0 are then checked
// under key, frames of phase 1 are BAD_TAG.
func (p *Program) SetKey(key [exo.TagKeyLen]byte) error {
	return p.SetKeys(exo.NewKeyRing(0, key))
}

// SetRoster loads the roster's MACs, by sender id (at most exo.MaxRoster).
// With a roster loaded, a frame that passed the group and tag checks,
// whose sender is a roster id and whose epoch is not later than the
// state's must come from that id's MAC: otherwise it is dropped and
// counted in CounterForeignMAC (see ForeignMACs). A frame of a later epoch
// goes on to the state checks whatever its MAC (FUTURE_EPOCH, passed):
// after a membership change the positions shift, and a host that missed
// it must still hear the later epoch to catch up; the daemon then takes
// such a frame only from the MAC of a known member. A sender beyond the
// roster is left to the state check (BAD_SENDER). An empty roster turns
// the MAC check off.
func (p *Program) SetRoster(macs []net.HardwareAddr) error {
	if len(macs) > exo.MaxRoster {
		return fmt.Errorf("xdp: roster of %d hosts, at most %d", len(macs), exo.MaxRoster)
	}
	p.authMu.Lock()
	defer p.authMu.Unlock()
	var a exoExoAuth
	if err := p.objs.ExoAuthMap.Lookup(uint32(0), &a); err != nil {
		return fmt.Errorf("xdp: read roster length: %w", err)
	}
	// Turn the check off while the entries change, then on with the new
	// length: a frame never meets a half-written roster. The keys are
	// written back as read (the same bytes).
	setLen := func(n int) error {
		a.RosterLen = uint32(n)
		if err := p.objs.ExoAuthMap.Update(uint32(0), &a, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("xdp: write roster length: %w", err)
		}
		return nil
	}
	if err := setLen(0); err != nil {
		return err
	}
	for i, hw := range macs {
		if len(hw) != 6 {
			return fmt.Errorf("xdp: roster[%d]: %v is not a 6-byte MAC", i, hw)
		}
		var m exoExoMac
		copy(m.Addr[:], hw)
		if err := p.objs.ExoRoster.Update(uint32(i), &m, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("xdp: write roster[%d]: %w", i, err)
		}
	}
	return setLen(len(macs))
}

// ForeignMACs returns the number of frames dropped because their source
// MAC is not their sender's roster MAC (CounterForeignMAC), summed over
// CPUs.
func (p *Program) ForeignMACs() (uint64, error) {
	all, err := p.counters()
	return all[CounterForeignMAC], err
}

// State reads the pointer state (under the map value's spin lock).
func (p *Program) State() (exo.Pointers, error) {
	var v exoExoState
	if err := p.objs.ExoStateMap.LookupWithFlags(uint32(0), &v, ebpf.LookupLock); err != nil {
		return exo.Pointers{}, fmt.Errorf("xdp: read state: %w", err)
	}
	return pointersOf(&v), nil
}

// pointersOf is the receive side of the program's state.
func pointersOf(v *exoExoState) exo.Pointers {
	return exo.Pointers{
		Group:      v.Group,
		Hosts:      v.Hosts,
		Epoch:      v.Epoch,
		Halted:     v.Halted != 0,
		Window:     v.Window,
		Append:     v.Append,
		Agreed:     v.Agreed,
		EpochStart: v.EpochStart,
		History:    v.History,
	}
}

// Counters returns the number of Exo frames per verdict, summed over CPUs.
func (p *Program) Counters() ([exo.NumReasons]uint64, error) {
	var out [exo.NumReasons]uint64
	all, err := p.counters()
	copy(out[:], all[:])
	return out, err
}

// OtherCounters returns the counters of frames that got no reason:
// CounterNotExo, CounterUnclassified and CounterNoMeta, in that order.
func (p *Program) OtherCounters() ([3]uint64, error) {
	var out [3]uint64
	all, err := p.counters()
	copy(out[:], all[exo.NumReasons:])
	return out, err
}

func (p *Program) counters() ([numCounters]uint64, error) {
	var out [numCounters]uint64
	for k := range uint32(numCounters) {
		var perCPU []uint64
		if err := p.objs.ExoCounters.Lookup(k, &perCPU); err != nil {
			return out, fmt.Errorf("xdp: read counter %d: %w", k, err)
		}
		for _, c := range perCPU {
			out[k] += c
		}
	}
	return out, nil
}

// ResetCounters sets every counter to 0.
func (p *Program) ResetCounters() error {
	zero := make([]uint64, ebpf.MustPossibleCPU())
	for k := range uint32(numCounters) {
		if err := p.objs.ExoCounters.Put(k, zero); err != nil {
			return fmt.Errorf("xdp: reset counter %d: %w", k, err)
		}
	}
	return nil
}

// Run runs the program once on frame (a whole Ethernet frame, header
// included; see EthernetFrame) with BPF_PROG_TEST_RUN and returns its
// verdict. The state map is updated as for a received frame.
func (p *Program) Run(frame []byte) (Verdict, error) {
	out := make([]byte, len(frame)+MetaLen+256)
	opts := ebpf.RunOptions{Data: frame, DataOut: out}
	ret, err := p.objs.ExoXdp.Run(&opts)
	if err != nil {
		return Verdict{}, fmt.Errorf("xdp: run: %w", err)
	}
	v := Verdict{Action: Action(ret)}
	// A passed frame is returned as XDP_REDIRECT when an AF_XDP socket is
	// registered for queue 0 (the test run's queue): the test run reports
	// the action and does not deliver the frame.
	if v.Action == ActionRedir {
		v = Verdict{Action: ActionPass, Redirected: true}
	}
	// data_out is data_meta..data_end: the metadata, if any, then the frame.
	if len(opts.DataOut) == len(frame)+MetaLen {
		if m, ok := ParseMeta(opts.DataOut); ok {
			if m.Action != v.Action {
				return v, fmt.Errorf("xdp: metadata says %s, program returned %s", m.Action, v)
			}
			m.Redirected = v.Redirected
			v = m
		}
	}
	return v, nil
}

// MaxXSKs is the number of RX queues the program can redirect to AF_XDP
// sockets (the entries of its XSKMAP, exo_xsks): queues 0..MaxXSKs-1.
const MaxXSKs = 64

// RegisterXSK puts the AF_XDP socket fd (bound to RX queue queue of the
// interface the program is attached to, with an RX ring) in the program's
// XSKMAP: from then on the frames the program passes on that queue are
// redirected to the socket instead of going to the stack. XSKConn does
// it for its sockets; a socket that is closed leaves the map by itself.
func (p *Program) RegisterXSK(queue, fd int) error {
	if queue < 0 || queue >= MaxXSKs {
		return fmt.Errorf("xdp: register AF_XDP socket: queue %d, the map holds queues 0..%d", queue, MaxXSKs-1)
	}
	if err := p.objs.ExoXsks.Update(uint32(queue), uint32(fd), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("xdp: register AF_XDP socket %d for queue %d: %w", fd, queue, err)
	}
	return nil
}

// UnregisterXSK removes the AF_XDP socket of RX queue queue from the
// XSKMAP: the frames the program passes on that queue go to the stack
// again. Removing a queue that has no socket is not an error.
func (p *Program) UnregisterXSK(queue int) error {
	if queue < 0 || queue >= MaxXSKs {
		return nil
	}
	if err := p.objs.ExoXsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("xdp: unregister the AF_XDP socket of queue %d: %w", queue, err)
	}
	return nil
}

// Bench runs frame repeat times in the kernel (BPF_PROG_TEST_RUN with
// Repeat) and returns the kernel-measured time per run and the last
// action.
func (p *Program) Bench(frame []byte, repeat int) (time.Duration, Action, error) {
	ret, d, err := p.objs.ExoXdp.Benchmark(frame, repeat, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("xdp: bench: %w", err)
	}
	return d, Action(ret), nil
}

// EthernetFrame returns an Ethernet frame carrying the Exo frame b (the
// bytes after the Ethernet header): broadcast destination, the given
// source MAC, EtherType 0x88B5, no padding.
func EthernetFrame(src net.HardwareAddr, b []byte) []byte {
	f := make([]byte, exo.EthHeaderLen, exo.EthHeaderLen+len(b))
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], exo.EtherType)
	return append(f, b...)
}

// Mode is how Attach attaches the program.
type Mode int

const (
	// ModeAuto tries native (driver) mode and falls back to generic mode.
	ModeAuto Mode = iota
	// ModeNative is driver mode (XDP_FLAGS_DRV_MODE); veth supports it.
	ModeNative
	// ModeGeneric is generic (skb) mode (XDP_FLAGS_SKB_MODE): any interface, slower.
	ModeGeneric
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeNative:
		return "native"
	case ModeGeneric:
		return "generic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Attachment is the program attached to an interface. Close detaches it.
type Attachment struct {
	link.Link
	Ifname string
	Mode   Mode // ModeNative or ModeGeneric: the mode actually used
	// NativeErr is why native mode failed when ModeAuto fell back to
	// generic mode (nil otherwise), for the log line.
	NativeErr error
}

// Attach attaches the program to the interface ifname. With ModeAuto it
// tries native mode first and falls back to generic mode; the returned
// Attachment says which mode is in use.
func (p *Program) Attach(ifname string, mode Mode) (*Attachment, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("xdp: attach: %w", err)
	}
	try := func(flags link.XDPAttachFlags) (link.Link, error) {
		return link.AttachXDP(link.XDPOptions{Program: p.objs.ExoXdp, Interface: ifc.Index, Flags: flags})
	}
	switch mode {
	case ModeNative, ModeGeneric:
		flags := link.XDPDriverMode
		if mode == ModeGeneric {
			flags = link.XDPGenericMode
		}
		l, err := try(flags)
		if err != nil {
			return nil, fmt.Errorf("xdp: attach to %s in %s mode: %w", ifname, mode, err)
		}
		return &Attachment{Link: l, Ifname: ifname, Mode: mode}, nil
	case ModeAuto:
		l, nerr := try(link.XDPDriverMode)
		if nerr == nil {
			return &Attachment{Link: l, Ifname: ifname, Mode: ModeNative}, nil
		}
		l, err := try(link.XDPGenericMode)
		if err != nil {
			return nil, fmt.Errorf("xdp: attach to %s: native mode: %v; generic mode: %w", ifname, nerr, err)
		}
		return &Attachment{Link: l, Ifname: ifname, Mode: ModeGeneric, NativeErr: nerr}, nil
	}
	return nil, fmt.Errorf("xdp: attach: unknown mode %v", mode)
}
