//go:build linux

package fpga

// The MMIO back end on a regular file of a BAR's size (no PCIe device
// here): the mapping, the little-endian byte offsets of the writes, reads
// of what the "device" holds, discovery of the block in a chain, the
// Engine on top, and the errors for a missing device or BAR.

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exo-rack/exo/hw/gen/regs"
	"github.com/exo-rack/exo/internal/goldvec"
)

const testBARSize = 64 << 10

// fakeBAR writes a BAR file: an Exo register block header and caps at
// base (max_hosts 64), and whatever else the test puts into it.
func fakeBAR(t *testing.T, base uint32, extra map[uint32]uint32) string {
	t.Helper()
	b := make([]byte, testBARSize)
	put := func(off, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
	put(base+regs.RbType, regs.RbTypeExo)
	put(base+regs.RbVersion, regs.RbVersionExo)
	put(base+regs.Caps, 64|32<<regs.CapsMaxHistoryShift)
	for off, v := range extra {
		put(off, v)
	}
	path := filepath.Join(t.TempDir(), "resource0")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMMIOFile(t *testing.T) {
	const base = 0x2000
	path := fakeBAR(t, base, map[uint32]uint32{base + regs.AgreedLo: 0x11223344})
	m, err := OpenMMIO(MMIOOptions{Path: path, Offset: base})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := m.Read32(regs.AgreedLo); err != nil || v != 0x11223344 {
		t.Fatalf("Read32(agreed_lo) = %#x, %v; want 0x11223344", v, err)
	}
	if err := m.Write32(regs.EpochStartHi, 0xA1B2C3D4); err != nil {
		t.Fatal(err)
	}
	// the store is in the file (MAP_SHARED) at base+0x04c, little-endian
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b[base+regs.EpochStartHi : base+regs.EpochStartHi+4]; string(got) != "\xd4\xc3\xb2\xa1" {
		t.Errorf("bytes at 0x%x: % x, want d4 c3 b2 a1", base+regs.EpochStartHi, got)
	}
	// a store by the "device" (the file) is seen by the next load
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0x78, 0x56, 0x34, 0x12}, base+regs.FramesIn); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if v, _ := m.Read32(regs.FramesIn); v != 0x12345678 {
		t.Errorf("frames_in %#x after the file changed, want 0x12345678", v)
	}
	for _, off := range []uint32{2, regs.Size, regs.Size - 2, 0xFFFFFFFC} {
		if _, err := m.Read32(off); err == nil {
			t.Errorf("Read32(%#x): no error", off)
		}
		if err := m.Write32(off, 0); err == nil {
			t.Errorf("Write32(%#x): no error", off)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Read32(0); err == nil {
		t.Error("Read32 after Close: no error")
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestMMIOEngine runs the Engine on the mapped file: Open checks the
// header, SetState and SetKey land at their offsets, State reads back.
func TestMMIOEngine(t *testing.T) {
	// a chain: a foreign block at 0 pointing to the Exo block at 0x8000
	const base = 0x8000
	path := fakeBAR(t, base, map[uint32]uint32{0: 0x0000C000, 4: 0x100, 8: base})
	m, err := OpenMMIO(MMIOOptions{Path: path, Discover: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Base() != base {
		t.Fatalf("discovered the block at %#x, want %#x", m.Base(), base)
	}
	e, err := Open(m)
	if err != nil {
		t.Fatal(err)
	}
	p := testState()
	if err := e.SetState(p); err != nil {
		t.Fatal(err)
	}
	if err := e.SetKey(goldvec.TestKey()); err != nil {
		t.Fatal(err)
	}
	got, err := e.State()
	if err != nil {
		t.Fatal(err)
	}
	if got != p {
		t.Errorf("State() = %s, want %s", goldvec.StateString(got), goldvec.StateString(p))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	for _, c := range []struct {
		off  uint32
		want uint32
	}{
		{regs.Group, 0x1234}, {regs.Hosts, 5}, {regs.Epoch, 7}, {regs.Halted, 0},
		{regs.AppendLo, 0x00001000}, {regs.AppendHi, 0xAABBCCDD},
		{regs.EpochStartHi, 0x80000000}, {regs.HistoryBase, 0xFFFF0304},
		{regs.KeyBase, 0x03020100}, {regs.KeyBase + 12, 0x0f0e0d0c},
	} {
		if got := le.Uint32(b[base+c.off:]); got != c.want {
			t.Errorf("BAR word 0x%x (block + 0x%03x) = %08x, want %08x", base+c.off, c.off, got, c.want)
		}
	}
	// the bytes of one word, in BAR order
	key := goldvec.TestKey()
	if got := b[base+regs.KeyBase : base+regs.KeyBase+16]; string(got) != string(key[:]) {
		t.Errorf("key bytes in the BAR % x, want 00..0f", got)
	}
}

func TestMMIOErrors(t *testing.T) {
	root := t.TempDir()
	// no such device
	_, err := OpenMMIO(MMIOOptions{SysfsRoot: root, BDF: "0000:3b:00.0", BAR: 0})
	if err == nil || !strings.Contains(err.Error(), "no PCI device 0000:3b:00.0") {
		t.Errorf("missing device: %v", err)
	}
	// short form of the address, same message with the domain
	_, err = OpenMMIO(MMIOOptions{SysfsRoot: root, BDF: "3B:00.0"})
	if err == nil || !strings.Contains(err.Error(), "no PCI device 0000:3b:00.0") {
		t.Errorf("missing device (short BDF): %v", err)
	}
	// the device exists, the BAR does not
	if err := os.MkdirAll(filepath.Join(root, "0000:3b:00.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = OpenMMIO(MMIOOptions{SysfsRoot: root, BDF: "0000:3b:00.0", BAR: 2})
	if err == nil || !strings.Contains(err.Error(), "has no memory BAR 2") {
		t.Errorf("missing BAR: %v", err)
	}
	// the real sysfs: a device that is not there
	_, err = OpenMMIO(MMIOOptions{BDF: "ffff:ff:1f.7"})
	if err == nil || !strings.Contains(err.Error(), "no PCI device ffff:ff:1f.7") {
		t.Errorf("missing device in /sys: %v", err)
	}
	for _, bdf := range []string{"", "0000:01:00", "01:00.8", "0000:01:20.0", "zz:00.0"} {
		if _, err := OpenMMIO(MMIOOptions{SysfsRoot: root, BDF: bdf}); err == nil || !strings.Contains(err.Error(), "not a PCI address") {
			t.Errorf("BDF %q: %v", bdf, err)
		}
	}
	if _, err := OpenMMIO(MMIOOptions{SysfsRoot: root, BDF: "00:00.0", BAR: 6}); err == nil || !strings.Contains(err.Error(), "BARs 0..5") {
		t.Errorf("BAR 6: %v", err)
	}
	// through sysfs with a real file: found, mapped
	good := fakeBAR(t, 0, nil)
	dev := filepath.Join(root, "0000:3b:00.0")
	if err := os.Rename(good, filepath.Join(dev, "resource2")); err != nil {
		t.Fatal(err)
	}
	m, err := OpenMMIO(MMIOOptions{SysfsRoot: root, BDF: "3b:00.0", BAR: 2})
	if err != nil {
		t.Fatalf("sysfs layout: %v", err)
	}
	if _, err := Open(m); err != nil {
		t.Errorf("Open: %v", err)
	}
	m.Close()
	// too small, block beyond the end, nothing Exo in the chain
	small := filepath.Join(t.TempDir(), "small")
	if err := os.WriteFile(small, make([]byte, 256), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMMIO(MMIOOptions{Path: small}); err == nil || !strings.Contains(err.Error(), "smaller than one register block") {
		t.Errorf("small BAR: %v", err)
	}
	if _, err := OpenMMIO(MMIOOptions{Path: fakeBAR(t, 0, nil), Offset: testBARSize - 0x800}); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("block beyond the BAR: %v", err)
	}
	if _, err := OpenMMIO(MMIOOptions{Path: fakeBAR(t, 0, map[uint32]uint32{0: 0xC000}), Discover: true}); err == nil || !strings.Contains(err.Error(), "no Exo register block") {
		t.Errorf("no Exo block: %v", err)
	}
	// an empty BAR (all zeros) is not an Exo engine
	zero := filepath.Join(t.TempDir(), "zero")
	if err := os.WriteFile(zero, make([]byte, testBARSize), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err = OpenMMIO(MMIOOptions{Path: zero})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := Open(m); !errors.Is(err, ErrNotExo) {
		t.Errorf("Open on zeros: %v", err)
	}
}
