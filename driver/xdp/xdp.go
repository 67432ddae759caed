//go:build linux

package xdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
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
	numCounters
)

// MaxFrame is the longest Exo frame (bytes after the Ethernet header) the
// program classifies; a linear XDP buffer (one page) never holds a longer one.
const MaxFrame = 4096

// MetaMagic ("EXOM") starts the 8-byte struct exo_meta the program writes
// into the XDP metadata area in front of every Exo frame it handles:
// magic u32, reason u8, action u8, reserved u16, in host byte order.
const (
	MetaMagic = 0x45584f4d
	MetaLen   = 8
)

// Verdict is what the program decided for one frame.
type Verdict struct {
	Action Action
	// Reason is the exo.Reason of an Exo frame; HasReason is false for a
	// frame the program did not classify (not Exo, too long, or no
	// metadata room).
	Reason    exo.Reason
	HasReason bool
}

func (v Verdict) String() string {
	if !v.HasReason {
		return v.Action.String()
	}
	return fmt.Sprintf("%s %s", v.Action, v.Reason)
}

// ParseMeta reads the struct exo_meta at the start of b (the bytes from
// data_meta, as AF_XDP or BPF_PROG_TEST_RUN hand them out).
func ParseMeta(b []byte) (Verdict, bool) {
	if len(b) < MetaLen || binary.NativeEndian.Uint32(b) != MetaMagic {
		return Verdict{}, false
	}
	return Verdict{Action: Action(b[5]), Reason: exo.Reason(b[4]), HasReason: true}, true
}

// Program is the loaded XDP program and its maps.
type Program struct {
	objs exoObjects
}

// Load loads the program and its maps into the kernel. The state map holds
// a zero state (group 0, no hosts) until SetState. A verifier rejection is
// returned with the verifier log (errors.As(err, new(*ebpf.VerifierError))).
func Load() (*Program, error) { return load(false) }

// load with benchUndo set loads a benchmark variant that undoes every
// ACCEPT, so that one in-order frame can be run repeatedly.
func load(benchUndo bool) (*Program, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("xdp: remove memlock limit: %w", err)
	}
	spec, err := loadExo()
	if err != nil {
		return nil, fmt.Errorf("xdp: load spec: %w", err)
	}
	if benchUndo {
		if err := spec.Variables["exo_bench_undo_accept"].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("xdp: bench variant: %w", err)
		}
	}
	p := &Program{}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("xdp: verifier rejected the program: %+v", ve)
		}
		return nil, fmt.Errorf("xdp: load: %w", err)
	}
	return p, nil
}

// Close unloads the program and its maps (an attached link keeps the
// program alive until the link is closed too).
func (p *Program) Close() error { return p.objs.Close() }

// EBPF returns the underlying program, e.g. to put it in a program array.
func (p *Program) EBPF() *ebpf.Program { return p.objs.ExoXdp }

// SetState writes the pointer state (under the map value's spin lock).
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

// State reads the pointer state (under the map value's spin lock).
func (p *Program) State() (exo.Pointers, error) {
	var v exoExoState
	if err := p.objs.ExoStateMap.LookupWithFlags(uint32(0), &v, ebpf.LookupLock); err != nil {
		return exo.Pointers{}, fmt.Errorf("xdp: read state: %w", err)
	}
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
	}, nil
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
	// data_out is data_meta..data_end: the metadata, if any, then the frame.
	if len(opts.DataOut) == len(frame)+MetaLen {
		if m, ok := ParseMeta(opts.DataOut); ok {
			if m.Action != v.Action {
				return v, fmt.Errorf("xdp: metadata says %s, program returned %s", m.Action, v.Action)
			}
			v = m
		}
	}
	return v, nil
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
