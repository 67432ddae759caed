//go:build linux

package lab

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// InNetns runs f on an OS thread that has entered network namespace ns
// (/run/netns/ns). The thread
// is never unlocked: it exits with its goroutine, so no other goroutine
// ever runs in the lab's namespace (and since Go 1.10 the runtime starts new
// threads from a clean template thread, not from this one). Sockets that f
// opens stay in ns for their whole life, whichever thread uses them later.
func InNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := syscall.Open(netnsPath(ns), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("opening namespace %s: %w", ns, err)
			return
		}
		defer syscall.Close(fd)
		if _, _, e := syscall.RawSyscall(sysSetns, uintptr(fd), syscall.CLONE_NEWNET, 0); e != 0 {
			err := fmt.Errorf("entering namespace %s: %w", ns, os.NewSyscallError("setns", e))
			if e == syscall.EPERM || e == syscall.EINVAL {
				err = fmt.Errorf("%w: %w", ErrRefused, err)
			}
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

// writeSysctls writes net.* sysctls of namespace ns (/proc/sys/net is per
// namespace: the writer's). A sysctl the kernel does not have (no IPv6) is
// skipped.
func writeSysctls(ns string, kv map[string]string) error {
	return InNetns(ns, func() error {
		for k, v := range kv {
			err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("sysctl %s=%s in %s: %w", k, v, ns, err)
			}
		}
		return nil
	})
}

// killNetnsProcs stops every process whose network namespace is one of
// names: SIGTERM, then SIGKILL for those still there after grace.
func killNetnsProcs(names []string, grace time.Duration) error {
	type key struct{ dev, ino uint64 }
	want := map[key]bool{}
	for _, n := range names {
		var st syscall.Stat_t
		if err := syscall.Stat(netnsPath(n), &st); err == nil {
			want[key{uint64(st.Dev), st.Ino}] = true
		}
	}
	find := func() []int {
		var pids []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join("/proc", e.Name(), "ns/net"), &st) == nil && want[key{uint64(st.Dev), st.Ino}] {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	if len(want) == 0 {
		return nil
	}
	pids := find()
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(grace); len(pids) > 0 && time.Now().Before(deadline); pids = find() {
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return nil
}

// rackLock is a held lock on a rack's lock file.
type rackLock struct {
	f    *os.File
	path string
}

// lock takes the rack's lock file, so that processes changing one rack (a
// nemesis, exo lab partition in a shell) take turns. The file may be
// removed by its holder (Down): a waiter then finds its file gone and
// takes the new one.
func lock(prefix string) (*rackLock, error) {
	refused := func(err error) error {
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("%w (root without the privileges of root?): %w", ErrRefused, err)
		}
		return err
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return nil, refused(err)
	}
	path := filepath.Join(StateDir, prefix+".lock")
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, refused(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(path, &now) == nil && held.Dev == now.Dev && held.Ino == now.Ino {
			return &rackLock{f, path}, nil
		}
		f.Close() // removed while we waited: take the new one
	}
}

// release lets the next process in.
func (l *rackLock) release() { l.f.Close() }

// removeAndRelease deletes the lock file (the rack is gone) and lets the
// next process in.
func (l *rackLock) removeAndRelease() {
	os.Remove(l.path)
	l.f.Close()
}

// Claim is a process's claim on a rack prefix for as long as it uses the
// rack (a demo, a bench, a chaos run): Up with Force removes a rack left
// behind by a run that ended, never one that a live run still uses. It is
// a flock(2) on <StateDir>/<prefix>.use, so the kernel ends it with its
// process, however the process ends.
type Claim struct {
	f *os.File
}

// ClaimPrefix claims rack prefix for this process, or returns ErrInUse
// naming the process that holds it.
func ClaimPrefix(prefix string) (*Claim, error) {
	if err := ValidPrefix(prefix); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("claiming rack %s: %w", prefix, err)
	}
	path := filepath.Join(StateDir, prefix+".use")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("claiming rack %s: %w", prefix, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "another process"
			}
			return nil, fmt.Errorf("%w: rack %s is used by %s; wait for it to end, or use another --prefix", ErrInUse, prefix, who)
		}
		return nil, fmt.Errorf("claiming rack %s: locking %s: %w", prefix, path, err)
	}
	// Who holds it, for the next one's error: the lock, not this text, is
	// the claim.
	cmd, _ := os.ReadFile("/proc/self/cmdline")
	who := fmt.Sprintf("pid %d (%s)", os.Getpid(), strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(who+"\n"), 0)
	}
	return &Claim{f: f}, nil
}

// Release ends the claim.
func (c *Claim) Release() {
	if c != nil && c.f != nil {
		_ = c.f.Truncate(0)
		c.f.Close()
		c.f = nil
	}
}

// setDontFragment sets the don't-fragment bit on c's datagrams (and makes
// a send bigger than the link's MTU fail instead of fragmenting).
func setDontFragment(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER, syscall.IP_PMTUDISC_DO)
	}); err != nil {
		return err
	}
	if serr != nil {
		return os.NewSyscallError("setsockopt IP_MTU_DISCOVER", serr)
	}
	return nil
}
