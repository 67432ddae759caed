//go:build !linux

package fpga

import "errors"

// MMIOOptions say which BAR to map (Linux only).
type MMIOOptions struct {
	BDF       string
	BAR       int
	Offset    uint32
	Discover  bool
	SysfsRoot string
	Path      string
}

// MMIO is a mapped BAR (Linux only).
type MMIO struct{}

var errMMIOLinux = errors.New("fpga: the MMIO back end needs Linux (sysfs PCI resource files)")

// OpenMMIO fails: the MMIO back end needs Linux.
func OpenMMIO(MMIOOptions) (*MMIO, error) { return nil, errMMIOLinux }

// Read32 fails: the MMIO back end needs Linux.
func (*MMIO) Read32(uint32) (uint32, error) { return 0, errMMIOLinux }

// Write32 fails: the MMIO back end needs Linux.
func (*MMIO) Write32(uint32, uint32) error { return errMMIOLinux }

// Close does nothing.
func (*MMIO) Close() error { return nil }
