package wal

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// ioprio_set(2)'s constants (linux/ioprio.h).
const (
	ioprioWhoProcess = 1  // which: a thread (0: the calling one)
	ioprioClassShift = 13 // the class above the data
	ioprioClassIdle  = 3
)

// inClass runs f on one OS thread whose I/O class is c for f's time. The
// class belongs to the thread (Go's threads do not share an I/O
// context), so the goroutine stays on it while f runs, and the thread
// gets its class back before other goroutines may run on it. Where the
// kernel refuses the class, f runs in the thread's own: the reads are
// only slower to yield the disk, never wrong. Should the class not come
// back, the goroutine keeps the thread (the runtime ends a thread whose
// goroutine exits locked to it), so that no fsync of another goroutine
// ever runs in the idle class.
func inClass(c IOClass, f func()) {
	if c != IOIdle {
		f()
		return
	}
	runtime.LockOSThread()
	old, _, errno := unix.RawSyscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, 0, 0)
	if errno != 0 {
		runtime.UnlockOSThread()
		f()
		return
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, 0, ioprioClassIdle<<ioprioClassShift); errno != 0 {
		runtime.UnlockOSThread()
		f()
		return
	}
	defer func() {
		if _, _, errno := unix.RawSyscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, 0, old); errno == 0 {
			runtime.UnlockOSThread()
		}
	}()
	f()
}

// threadIOClass is the calling thread's I/O class (ioprio_get(2)'s class
// bits), for tests.
func threadIOClass() (int, error) {
	p, _, errno := unix.RawSyscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(p >> ioprioClassShift), nil
}
