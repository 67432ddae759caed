//go:build linux

// Package bpffs mounts the BPF file system that pinned maps live in, for
// the packages that pin (driver/xdp) and those that prepare a host for
// them (lab, cluster) without loading any program.
package bpffs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// magic is BPF_FS_MAGIC (statfs f_type of a bpffs).
const magic = 0xcafe4a11

// Mount makes sure dir is a bpffs, the file system maps are pinned in: it
// creates dir and mounts one there unless one is mounted already, and
// reports whether it mounted. A bpffs mounted by a process started with
// `ip netns exec` (a mount namespace of its own) goes away with that
// process: pins that must outlive a daemon need one mounted in the mount
// namespace its restarts share (the lab mounts /run/exo/bpf before it
// starts daemons; systemd mounts /sys/fs/bpf).
func Mount(dir string) (bool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("bpffs directory: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	if uint32(st.Type) == magic {
		return false, nil
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return false, fmt.Errorf("mount a bpffs on %s: %w", dir, err)
	}
	return true, nil
}
