//go:build linux

package xdp

import (
	"fmt"

	"github.com/exo-rack/exo/internal/bpffs"
)

// MountBPF makes sure dir is a bpffs, the file system maps are pinned in
// (LoadOptions.PinDir): it creates dir and mounts one there unless one is
// mounted already, and reports whether it mounted (internal/bpffs.Mount:
// a bpffs mounted under `ip netns exec` goes with its process).
func MountBPF(dir string) (bool, error) {
	mounted, err := bpffs.Mount(dir)
	if err != nil {
		return false, fmt.Errorf("xdp: %w", err)
	}
	return mounted, nil
}
