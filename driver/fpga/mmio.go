//go:build linux

package fpga

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/exo-rack/exo/hw/gen/regs"
)

// SysfsPCIDevices is where Linux lists PCI devices: the BAR files are
// <SysfsPCIDevices>/<BDF>/resource<N>.
const SysfsPCIDevices = "/sys/bus/pci/devices"

// MMIOOptions say which BAR to map and where the engine's register block
// is in it.
type MMIOOptions struct {
	// BDF is the PCI address, domain:bus:device.function
	// ("0000:01:00.0"; "01:00.0" means domain 0000).
	BDF string
	// BAR is the BAR number (0..5): the file resource<BAR>.
	BAR int
	// Offset is the byte offset of the Exo register block in the BAR
	// (4-byte aligned). With Discover set it is ignored.
	Offset uint32
	// Discover walks the Corundum-style register block chain from offset
	// 0 (rb_type, rb_version, rb_next_ptr at +0, +4, +8 of each block) and
	// uses the first block of type regs.RbTypeExo.
	Discover bool
	// SysfsRoot replaces SysfsPCIDevices (tests).
	SysfsRoot string
	// Path, if set, is mapped instead of the sysfs resource file: any file
	// of the BAR's size (a regular file in tests; /dev/mem or a UIO/VFIO
	// region file elsewhere). BDF and BAR are then ignored.
	Path string
}

var bdfRE = regexp.MustCompile(`^(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$`)

// NormalizeBDF lower-cases a PCI address and adds the default domain 0000.
func NormalizeBDF(bdf string) (string, error) {
	b := strings.ToLower(strings.TrimSpace(bdf))
	if !bdfRE.MatchString(b) {
		return "", fmt.Errorf("fpga: %q is not a PCI address (domain:bus:device.function, e.g. 0000:01:00.0)", bdf)
	}
	if len(b) == len("01:00.0") {
		b = "0000:" + b
	}
	return b, nil
}

// ResourcePath returns the sysfs file of BAR bar of device bdf under root
// (SysfsPCIDevices if empty).
func ResourcePath(root, bdf string, bar int) (string, error) {
	if root == "" {
		root = SysfsPCIDevices
	}
	b, err := NormalizeBDF(bdf)
	if err != nil {
		return "", err
	}
	if bar < 0 || bar > 5 {
		return "", fmt.Errorf("fpga: BAR %d: a PCI function has BARs 0..5", bar)
	}
	return filepath.Join(root, b, fmt.Sprintf("resource%d", bar)), nil
}

// MMIO is a mapped BAR. It implements Regs for one register block (at
// Base), with 32-bit atomic loads and stores on the mapping: one aligned
// access per register, never split or merged by the compiler, as a
// volatile access in C. The values are little-endian in the BAR.
type MMIO struct {
	path string
	mem  []byte
	base uint32
	size uint32 // of the register block
	// closed is set by Close; accesses after it fail rather than fault.
	closed atomic.Bool
}

// OpenMMIO maps the BAR of opts read-write and shared (the sysfs resource
// file needs root and an enabled device: echo 1 > .../enable) and
// returns its Exo register block. Open(mmio) then checks the block.
func OpenMMIO(opts MMIOOptions) (*MMIO, error) {
	path := opts.Path
	if path == "" {
		var err error
		if path, err = ResourcePath(opts.SysfsRoot, opts.BDF, opts.BAR); err != nil {
			return nil, err
		}
		dev := filepath.Dir(path)
		if _, err := os.Stat(dev); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("fpga: no PCI device %s (%s does not exist; lspci -D lists the devices)", filepath.Base(dev), dev)
			}
			return nil, fmt.Errorf("fpga: PCI device %s: %w", filepath.Base(dev), err)
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("fpga: PCI device %s has no memory BAR %d (%s does not exist)", filepath.Base(dev), opts.BAR, path)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_SYNC, 0)
	if err != nil {
		return nil, fmt.Errorf("fpga: open BAR: %w", err)
	}
	defer f.Close() // the mapping outlives the descriptor
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fpga: stat BAR: %w", err)
	}
	size := st.Size()
	if size < regs.Size {
		return nil, fmt.Errorf("fpga: BAR %s is %d bytes, smaller than one register block (%d)", path, size, regs.Size)
	}
	if size > 1<<32 {
		return nil, fmt.Errorf("fpga: BAR %s is %d bytes: larger than 4 GiB is not supported", path, size)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("fpga: mmap %s (%d bytes): %w", path, size, err)
	}
	m := &MMIO{path: path, mem: mem, size: regs.Size}
	base := opts.Offset
	if opts.Discover {
		blocks, err := Discover(m.bar())
		if err == nil {
			err = fmt.Errorf("fpga: %s: no Exo register block among %d blocks (rb_type 0x%08x)", path, len(blocks), uint32(regs.RbTypeExo))
			for _, b := range blocks {
				if b.Type == regs.RbTypeExo {
					base, err = b.Offset, nil
					break
				}
			}
		}
		if err != nil {
			m.Close()
			return nil, err
		}
	}
	if base%4 != 0 || uint64(base)+regs.Size > uint64(size) {
		m.Close()
		return nil, fmt.Errorf("fpga: register block at 0x%x does not fit the %d-byte BAR %s", base, size, path)
	}
	m.base = base
	return m, nil
}

// Path is the mapped file.
func (m *MMIO) Path() string { return m.path }

// Base is the offset of the register block in the BAR.
func (m *MMIO) Base() uint32 { return m.base }

// bar returns a view of the whole BAR (Discover).
func (m *MMIO) bar() *MMIO {
	return &MMIO{path: m.path, mem: m.mem, size: uint32(len(m.mem))}
}

var bigEndianHost = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 0
}()

func (m *MMIO) word(off uint32) (*uint32, error) {
	if m.closed.Load() {
		return nil, errors.New("fpga: mmio: closed")
	}
	if off%4 != 0 || off >= m.size || off > m.size-4 {
		return nil, fmt.Errorf("fpga: mmio: offset 0x%x outside the 0x%x-byte block or not 4-byte aligned", off, m.size)
	}
	return (*uint32)(unsafe.Pointer(&m.mem[m.base+off])), nil
}

// Read32 loads the 32-bit register at off (one aligned load).
func (m *MMIO) Read32(off uint32) (uint32, error) {
	p, err := m.word(off)
	if err != nil {
		return 0, err
	}
	v := atomic.LoadUint32(p)
	if bigEndianHost {
		v = bits.ReverseBytes32(v)
	}
	return v, nil
}

// Write32 stores v into the 32-bit register at off (one aligned store).
func (m *MMIO) Write32(off, v uint32) error {
	p, err := m.word(off)
	if err != nil {
		return err
	}
	if bigEndianHost {
		v = bits.ReverseBytes32(v)
	}
	atomic.StoreUint32(p, v)
	return nil
}

// Close unmaps the BAR.
func (m *MMIO) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	if err := unix.Munmap(m.mem); err != nil {
		return fmt.Errorf("fpga: munmap %s: %w", m.path, err)
	}
	return nil
}
