package fpga

// The Engine on a register file in memory (no simulator, no hardware):
// the checks of Open, the order of the writes of SetState (halt first,
// lo before hi, release last), the register encodings of the roster and
// the key, the writes of SetKeys, ClearCounters keeping mac_check.

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/hw/gen/regs"
	"github.com/exo-rack/exo/internal/goldvec"
)

type access struct {
	write bool
	off   uint32
	v     uint32
}

// memRegs is a register file: reads return the last value written (or
// the preset), every access is logged.
type memRegs struct {
	m      map[uint32]uint32
	log    []access
	closed bool
}

func newMemRegs(maxHosts int) *memRegs {
	return &memRegs{m: map[uint32]uint32{
		regs.RbType:    regs.RbTypeExo,
		regs.RbVersion: regs.RbVersionExo,
		regs.RbNextPtr: 0,
		regs.Caps:      uint32(maxHosts) | uint32(maxHosts/2)<<regs.CapsMaxHistoryShift,
		regs.Halted:    1,
	}}
}

func (r *memRegs) Read32(off uint32) (uint32, error) {
	if off%4 != 0 || off >= regs.Size {
		return 0, fmt.Errorf("bad offset %#x", off)
	}
	r.log = append(r.log, access{false, off, r.m[off]})
	return r.m[off], nil
}

func (r *memRegs) Write32(off, v uint32) error {
	if off%4 != 0 || off >= regs.Size {
		return fmt.Errorf("bad offset %#x", off)
	}
	r.log = append(r.log, access{true, off, v})
	r.m[off] = v
	return nil
}

func (r *memRegs) Close() error { r.closed = true; return nil }

func (r *memRegs) writes() []access {
	var w []access
	for _, a := range r.log {
		if a.write {
			w = append(w, a)
		}
	}
	return w
}

func TestOpenChecksTheBlock(t *testing.T) {
	for _, c := range []struct {
		name    string
		off, v  uint32
		wantErr error
		wantMsg string
	}{
		{"not exo", regs.RbType, 0x0000C000, ErrNotExo, `rb_type is 0x0000c000`},
		{"all ones (no device)", regs.RbType, 0xFFFFFFFF, ErrNotExo, `"...."`},
		{"major 2", regs.RbVersion, 0x00000200, ErrVersion, "is 2.0, this driver implements 1.x"},
		{"major 0", regs.RbVersion, 0x00000001, ErrVersion, "is 0.1"},
		{"bad caps", regs.Caps, 0, nil, "inconsistent"},
	} {
		r := newMemRegs(64)
		r.m[c.off] = c.v
		_, err := Open(r)
		if err == nil || (c.wantErr != nil && !errors.Is(err, c.wantErr)) || !strings.Contains(err.Error(), c.wantMsg) {
			t.Errorf("%s: Open: %v, want %v containing %q", c.name, err, c.wantErr, c.wantMsg)
		}
	}
	r := newMemRegs(64)
	r.m[regs.RbVersion] = 0x00000107 // a newer minor version is fine
	e, err := Open(r)
	if err != nil {
		t.Fatal(err)
	}
	if i := e.Info(); i.Major != 1 || i.Minor != 7 || i.MaxHosts != 64 || i.MaxHistory != 32 {
		t.Errorf("info %+v", i)
	}
	if _, err := e.Process(make([]byte, 60)); !errors.Is(err, ErrNoFrameInput) {
		t.Errorf("Process on a register-only back end: %v", err)
	}
	e.Close()
	if !r.closed {
		t.Error("Close did not close the back end")
	}
}

func testState() exo.Pointers {
	p := exo.NewPointers(0x1234, 5, 0x1_0000_0400)
	p.Epoch, p.Append, p.Agreed, p.EpochStart = 7, 0xAABB_CCDD_0000_1000, 0x0000_0002_0000_0FFE, 0x8000_0000_0000_0001
	p.History[0], p.History[1] = 4, 3
	return p
}

func TestSetStateSequence(t *testing.T) {
	r := newMemRegs(64)
	e, err := Open(r)
	if err != nil {
		t.Fatal(err)
	}
	p := testState()
	r.log = nil
	if err := e.SetState(p); err != nil {
		t.Fatal(err)
	}
	w := r.writes()
	if w[0] != (access{true, regs.Halted, 1}) {
		t.Errorf("first write %+v, want halted = 1", w[0])
	}
	if last := w[len(w)-1]; last != (access{true, regs.Halted, 0}) {
		t.Errorf("last write %+v, want halted = 0", last)
	}
	pos := map[uint32]int{}
	for i, a := range w[1 : len(w)-1] {
		if a.off == regs.Halted {
			t.Errorf("halted written in the middle (write %d)", i+1)
		}
		pos[a.off] = i
	}
	for _, lo := range []uint32{regs.WindowLo, regs.AppendLo, regs.AgreedLo, regs.EpochStartLo} {
		if pos[lo] >= pos[lo+4] {
			t.Errorf("0x%03x: hi written before lo", lo)
		}
	}
	if got := r.m[regs.HistoryBase]; got != 0xFFFF0304 {
		t.Errorf("history[0] = %08x, want ffff0304 (slot 0 in bits 7:0)", got)
	}
	if _, ok := pos[regs.HistoryBase+7*regs.HistoryStride]; !ok {
		t.Error("history word 7 (slots 28..31 of 32) not written")
	}
	if _, ok := pos[regs.HistoryBase+8*regs.HistoryStride]; ok {
		t.Error("history word 8: the engine holds 32 slots, wrote beyond")
	}
	if r.m[regs.AppendLo] != 0x00001000 || r.m[regs.AppendHi] != 0xAABBCCDD || r.m[regs.WindowHi] != 1 {
		t.Errorf("append %08x:%08x window hi %08x", r.m[regs.AppendHi], r.m[regs.AppendLo], r.m[regs.WindowHi])
	}
	got, err := e.State()
	if err != nil {
		t.Fatal(err)
	}
	if got != p {
		t.Errorf("State() = %s, want %s", goldvec.StateString(got), goldvec.StateString(p))
	}
	// a halted state stays halted
	p.Halted = true
	if err := e.SetState(p); err != nil {
		t.Fatal(err)
	}
	if r.m[regs.Halted] != 1 {
		t.Error("a halted state released the engine")
	}
	// rosters the engine cannot hold
	big := exo.NewPointers(1, 65, 10)
	if err := e.SetState(big); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("65 hosts on a 64-host engine: %v", err)
	}
	far := exo.NewPointers(1, 5, 10)
	far.History[40] = 1
	if err := e.SetState(far); err == nil || !strings.Contains(err.Error(), "slot 40") {
		t.Errorf("history slot 40 on a 32-slot engine: %v", err)
	}
}

// tornRegs moves append_hi between the two halves of the first read.
type tornRegs struct {
	*memRegs
	reads int
}

func (r *tornRegs) Read32(off uint32) (uint32, error) {
	v, err := r.memRegs.Read32(off)
	if off == regs.AppendLo && r.reads == 0 {
		r.reads++
		r.m[regs.AppendHi]++ // the engine carries into hi after lo was read
		r.m[regs.AppendLo] = 0
	}
	return v, err
}

func TestRead64NoTear(t *testing.T) {
	m := newMemRegs(64)
	r := &tornRegs{memRegs: m}
	e, err := Open(r)
	if err != nil {
		t.Fatal(err)
	}
	m.m[regs.AppendHi], m.m[regs.AppendLo] = 1, 0xFFFFFFFF
	s, err := e.State()
	if err != nil {
		t.Fatal(err)
	}
	if s.Append != 2<<32 {
		t.Errorf("append %#x, want %#x (not the torn 0x1_00000000 or 0x2_ffffffff)", s.Append, uint64(2)<<32)
	}
}

func TestRosterKeyCounters(t *testing.T) {
	r := newMemRegs(8)
	e, err := Open(r)
	if err != nil {
		t.Fatal(err)
	}
	macs := []net.HardwareAddr{{0x02, 0x00, 0x00, 0x00, 0x00, 0xaa}, {0xde, 0xad, 0xbe, 0xef, 0x01, 0x02}}
	r.log = nil
	if err := e.SetRoster(macs); err != nil {
		t.Fatal(err)
	}
	w := r.writes()
	want := []access{
		{true, regs.Ctrl, 0}, // check off while the table changes
		{true, regs.RosterMACLoBase, 0x000000AA}, {true, regs.RosterMACHiBase, 0x0200},
		{true, regs.RosterMACLoBase + regs.RosterMACLoStride, 0xBEEF0102}, {true, regs.RosterMACHiBase + regs.RosterMACHiStride, 0xDEAD},
		{true, regs.Ctrl, regs.CtrlMACCheckMask},
	}
	if fmt.Sprint(w) != fmt.Sprint(want) {
		t.Errorf("SetRoster writes\n%+v\nwant\n%+v", w, want)
	}
	if got := e.Roster(); len(got) != 2 || got[1].String() != "de:ad:be:ef:01:02" {
		t.Errorf("Roster() = %v", got)
	}
	if err := e.SetRoster(make([]net.HardwareAddr, 9)); err == nil {
		t.Error("9 MACs on an 8-host engine: no error")
	}
	if err := e.SetRoster([]net.HardwareAddr{{1, 2, 3}}); err == nil {
		t.Error("a 3-byte MAC: no error")
	}

	// ClearCounters keeps mac_check
	r.log = nil
	if err := e.ClearCounters(); err != nil {
		t.Fatal(err)
	}
	if w := r.writes(); len(w) != 1 || w[0].v != regs.CtrlMACCheckMask|regs.CtrlClearCountersMask {
		t.Errorf("ClearCounters writes %+v", w)
	}

	// the key: word i = little-endian key[4i:4i+4]
	if err := e.SetKey(goldvec.TestKey()); err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint32{0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c} {
		if got := r.m[regs.KeyBase+uint32(i)*regs.KeyStride]; got != want {
			t.Errorf("key[%d] = %08x, want %08x", i, got, want)
		}
	}

	for k := range exo.NumReasons {
		r.m[regs.CounterBase+uint32(k)*regs.CounterStride] = uint32(100 + k)
	}
	r.m[regs.FramesIn], r.m[regs.FramesAccepted] = 5, 100
	c, err := e.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.PerReason[exo.ReasonBadFlags] != 118 || c.FramesIn != 5 || c.Accepted != 100 {
		t.Errorf("counters %+v", c)
	}
	r.m[regs.LastVerdict] = uint32(exo.ReasonGap) | regs.LastVerdictSlowPathMask
	if v, err := e.LastVerdict(); err != nil || v.Reason != exo.ReasonGap || !v.SlowPath {
		t.Errorf("LastVerdict %v %v", v, err)
	}
}

func TestDiscover(t *testing.T) {
	// a BAR of three blocks: 0 -> 0x3000 -> 0x1000 (Exo) -> end
	r := &memRegs{m: map[uint32]uint32{
		0x0000: 0x0000C000, 0x0004: 0x100, 0x0008: 0x3000,
		0x3000: 0x0000C001, 0x3004: 0x100, 0x3008: 0x1000,
		0x1000: regs.RbTypeExo, 0x1004: regs.RbVersionExo, 0x1008: 0,
	}}
	big := &bigRegs{r}
	bl, err := Discover(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(bl) != 3 || bl[2].Offset != 0x1000 || bl[2].Type != regs.RbTypeExo {
		t.Errorf("blocks %+v", bl)
	}
	r.m[0x1008] = 0x3000 // a loop
	if _, err := Discover(big); err == nil || !strings.Contains(err.Error(), "loops") {
		t.Errorf("loop: %v", err)
	}
}

// bigRegs lifts memRegs' block bound (a whole BAR).
type bigRegs struct{ *memRegs }

func (b *bigRegs) Read32(off uint32) (uint32, error) { return b.m[off], nil }

// TestSetKeysSequence: the writes of SetKeys (register map 1.2). A slot
// whose key changes is invalid while its words are written; a slot that
// keeps its key stays valid throughout; key_valid takes the ring last.
// SetKey is slot 0 alone. On a 1.1 engine only slot 0 exists.
func TestSetKeysSequence(t *testing.T) {
	r := newMemRegs(8)
	r.m[regs.KeyValid] = regs.KeyValidReset
	e, err := Open(r)
	if err != nil {
		t.Fatal(err)
	}
	var a, b, c [16]byte
	for i := range a {
		a[i], b[i], c[i] = byte(i), 0x10+byte(i), 0xc0+byte(i)
	}
	words := func(base uint32, k [16]byte) []access {
		var w []access
		for i, v := range keyWords(k) {
			w = append(w, access{true, base + uint32(i)*regs.KeyStride, v})
		}
		return w
	}
	kv := func(v uint32) access { return access{true, regs.KeyValid, v} }
	cat := func(parts ...[]access) []access {
		var w []access
		for _, p := range parts {
			w = append(w, p...)
		}
		return w
	}
	steps := []struct {
		what string
		set  func() error
		want []access
		ring exo.KeyRing
	}{
		{"SetKey(A) on a fresh driver: slot 0 unknown, invalid while written",
			func() error { return e.SetKey(a) },
			cat([]access{kv(0)}, words(regs.KeyBase, a), []access{kv(1)}),
			exo.KeyRing{Key: [2][16]byte{a, {}}, Valid: [2]bool{true, false}}},
		{"stage B in slot 1: slot 0 stays valid",
			func() error { return e.SetKeys(exo.KeyRing{Key: [2][16]byte{a, b}, Valid: [2]bool{true, true}}) },
			cat(words(regs.KeyBase, a), words(regs.Key1Base, b), []access{kv(3)}),
			exo.KeyRing{Key: [2][16]byte{a, b}, Valid: [2]bool{true, true}}},
		{"retire slot 0",
			func() error { return e.SetKeys(exo.KeyRing{Key: [2][16]byte{a, b}, Valid: [2]bool{false, true}}) },
			cat([]access{kv(2)}, words(regs.Key1Base, b)),
			exo.KeyRing{Key: [2][16]byte{a, b}, Valid: [2]bool{false, true}}},
		{"stage C in slot 0: slot 1 stays valid",
			func() error { return e.SetKeys(exo.KeyRing{Key: [2][16]byte{c, b}, Valid: [2]bool{true, true}}) },
			cat(words(regs.KeyBase, c), words(regs.Key1Base, b), []access{kv(3)}),
			exo.KeyRing{Key: [2][16]byte{c, b}, Valid: [2]bool{true, true}}},
		{"another key into valid slot 1: invalid first",
			func() error { return e.SetKeys(exo.KeyRing{Key: [2][16]byte{c, a}, Valid: [2]bool{true, true}}) },
			cat([]access{kv(1)}, words(regs.KeyBase, c), words(regs.Key1Base, a), []access{kv(3)}),
			exo.KeyRing{Key: [2][16]byte{c, a}, Valid: [2]bool{true, true}}},
		{"SetKey(B): slot 0 B, slot 1 invalid",
			func() error { return e.SetKey(b) },
			cat([]access{kv(0)}, words(regs.KeyBase, b), []access{kv(1)}),
			exo.KeyRing{Key: [2][16]byte{b, a}, Valid: [2]bool{true, false}}},
	}
	for _, st := range steps {
		r.log = nil
		if err := st.set(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		if w := r.writes(); fmt.Sprint(w) != fmt.Sprint(st.want) {
			t.Errorf("%s: writes\n%+v\nwant\n%+v", st.what, w, st.want)
		}
		if got, err := e.Keys(); err != nil || got != st.ring {
			t.Errorf("%s: Keys() = %+v %v, want %+v", st.what, got, err, st.ring)
		}
	}
	if w := keyWords(b); w != [4]uint32{0x13121110, 0x17161514, 0x1b1a1918, 0x1f1e1d1c} {
		t.Errorf("key words of 10..1f: %08x", w)
	}

	// a 1.1 engine: one slot, no key_valid
	r11 := newMemRegs(8)
	r11.m[regs.RbVersion] = 0x0101
	e11, err := Open(r11)
	if err != nil {
		t.Fatal(err)
	}
	r11.log = nil
	if err := e11.SetKey(a); err != nil {
		t.Fatal(err)
	}
	if w := r11.writes(); fmt.Sprint(w) != fmt.Sprint(words(regs.KeyBase, a)) {
		t.Errorf("SetKey on 1.1: writes %+v", w)
	}
	if err := e11.SetKeys(exo.KeyRing{Key: [2][16]byte{a, b}, Valid: [2]bool{true, true}}); !errors.Is(err, ErrKeySlots) {
		t.Errorf("two slots on 1.1: %v, want ErrKeySlots", err)
	}
	if err := e11.SetKeys(exo.NewKeyRing(1, b)); !errors.Is(err, ErrKeySlots) {
		t.Errorf("slot 1 alone on 1.1: %v, want ErrKeySlots", err)
	}
	if got, err := e11.Keys(); err != nil || got != exo.NewKeyRing(0, a) {
		t.Errorf("Keys() on 1.1: %+v %v", got, err)
	}
}
