//go:build linux

package xdp

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// bpffsMagic is BPF_FS_MAGIC (statfs f_type of a bpffs).
const bpffsMagic = 0xcafe4a11

// MountBPF makes sure dir is a bpffs, the file system maps are pinned in:
// it creates dir and mounts one there unless one is mounted already, and
// reports whether it mounted. A bpffs mounted by a process started with
// `ip netns exec` (a mount namespace of its own) goes away with that
// process: pins that must outlive a daemon need one mounted in the mount
// namespace its restarts share (the lab mounts /run/exo/bpf before it
// starts daemons; systemd mounts /sys/fs/bpf).
func MountBPF(dir string) (bool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("xdp: bpffs directory: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("xdp: statfs %s: %w", dir, err)
	}
	if uint32(st.Type) == bpffsMagic {
		return false, nil
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return false, fmt.Errorf("xdp: mount a bpffs on %s: %w", dir, err)
	}
	return true, nil
}
