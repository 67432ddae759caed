package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrInUse reports that another exo daemon holds this daemon's data_dir or
// answers on its API socket: two daemons for one member id (issue 16).
var ErrInUse = errors.New("in use by another exo daemon")

// inUse is an ErrInUse with its own text.
type inUse struct{ text string }

func (e *inUse) Error() string        { return e.text }
func (e *inUse) Is(target error) bool { return target == ErrInUse }

// LockFile is the lock a daemon holds on its data_dir for its whole life.
const LockFile = "LOCK"

// dirLock is an exclusive flock(2) on data_dir/LOCK: the kernel releases
// it when the daemon's process ends however it ends (kill -9 included), so
// a restart never finds a stale lock. The file holds the holder's pid.
type dirLock struct {
	f    *os.File
	path string
}

// lockDataDir takes the lock of dir ("": no durable log, nil and no
// lock). A lock held by another process (or another daemon of this
// process) is ErrInUse, with the holder's pid when the file names it.
func lockDataDir(dir string) (*dirLock, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("data_dir: lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, inUseError(dir, path)
		}
		return nil, fmt.Errorf("data_dir: lock %s: %w", path, err)
	}
	// The holder's pid, for the error of the next daemon.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f, path: path}, nil
}

// inUseError is the error of a second daemon on dir: who holds it and
// what to do.
func inUseError(dir, path string) error {
	holder := "it holds"
	if b, err := os.ReadFile(path); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			holder = fmt.Sprintf("pid %d holds", pid)
			if pid == os.Getpid() {
				holder = "a daemon of this process holds"
			}
		}
	}
	return &inUse{fmt.Sprintf("data_dir %s is in use by another exo daemon (%s its lock %s). Two daemons on one durable log send as one member id and can split the agreed log: stop the other daemon first, or give this one its own data_dir and member id",
		dir, holder, path)}
}

// release drops the lock (a nil lock: nothing). The file stays: removing
// it would let a third daemon lock a new file while a second one still
// holds the old one's inode.
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Close() // closing the only descriptor drops the flock
	l.f = nil
}

// CheckAlone reports, before anything of the daemon of cfg is opened,
// whether another exo daemon holds cfg's data_dir (its lock) or answers
// on its API socket: then the error (ErrInUse) names the path, the holder
// and what to do. host.Open calls it first, so that a second daemon
// started by mistake fails on it rather than on something it would take
// from the first (its fast path on the interface, its OOB port). New
// takes the data_dir lock for the daemon's life; this only looks.
func CheckAlone(cfg *Config) error {
	if cfg.DataDir != "" {
		if _, err := os.Stat(cfg.DataDir); err == nil {
			l, err := lockDataDir(cfg.DataDir)
			if err != nil {
				return err
			}
			l.release()
		}
	}
	return checkSocket(cfg.APISocket)
}

// checkSocket refuses an API socket that another daemon answers on. A
// socket file nobody answers on (left by a killed daemon) is no obstacle:
// listenAPI removes it.
func checkSocket(path string) error {
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil // stale
	}
	c.Close()
	return &inUse{fmt.Sprintf("api socket %s: another exo daemon answers on %s (exo status --socket %s shows its member id): stop it first, or give this daemon its own api_socket (and its own member id and data_dir)",
		path, path, path)}
}

// Close releases a daemon that was not run (Run releases everything when
// it returns): its durable log and its data_dir lock. After Run it does
// nothing.
func (d *Daemon) Close() error {
	d.core.Lock()
	defer d.core.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var err error
	if d.disk != nil {
		err = d.disk.Close()
	}
	d.lock.release()
	return err
}

// New prepares a daemon on a broadcast conn and an OOB transport. With a
// data_dir it takes the directory's lock first (ErrInUse: another daemon
// holds it), held until Run returns (or Close).
func New(cfg *Config, conn FrameConn, o OOB, log *slog.Logger) (*Daemon, error) {
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	d, err := newDaemon(cfg, conn, o, log)
	if err != nil {
		lock.release()
		return nil, err
	}
	d.lock = lock
	d.dup.init(d.metrics.reg)
	return d, nil
}
