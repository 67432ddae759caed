//go:build linux

package xdp

import (
	"testing"

	"golang.org/x/sys/unix"
)

func unmount(t *testing.T, dir string) {
	if err := unix.Unmount(dir, 0); err != nil {
		t.Errorf("unmount %s: %v", dir, err)
	}
}
