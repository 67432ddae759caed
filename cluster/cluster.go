// Package cluster runs exo daemons on a lab rack (package lab): one daemon
// per host, each inside its host's network namespace, on real raw frames
// across the rack's bridge. The demo, the integration tests and the
// benchmarks drive a rack through it: start, publish load, follow every
// host's agreed stream, kill and restart daemons.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/daemon/host"
	"github.com/exo-rack/exo/driver/xdp"
	"github.com/exo-rack/exo/lab"
)

// Options configure the daemons of a Cluster.
type Options struct {
	// Bin is the exo binary to run (built from ./cmd/exo).
	Bin string
	// Dir holds the configs, sockets and logs (created if missing).
	Dir string
	// Group is the rack's group id (default 7).
	Group uint16
	// Tick is the protocol tick (default 250us).
	Tick time.Duration
	// LogLevel of the daemons (default info).
	LogLevel string
	// Config, if set, edits each host's config before it is written.
	Config func(*daemon.Config)
	// CPUProfile, if set, makes every daemon write a CPU profile of its
	// run to Dir/<host>.cpu.pprof (exo daemon --cpuprofile; finished when
	// Stop stops it: a host killed meanwhile leaves none).
	CPUProfile bool
	// MemProfile, if set, makes every daemon write a heap profile to
	// Dir/<host>.mem.pprof when Stop stops it (exo daemon --memprofile;
	// a host killed meanwhile leaves none, its restart's run writes it).
	MemProfile bool
	// RestartProfileFor, if positive, makes every daemon started again
	// (a restart after a kill, a wipe) write a CPU profile of its first
	// RestartProfileFor to Dir/<host>.restart<k>.cpu.pprof, k counting
	// that host's restarts from 1 (exo daemon --cpuprofile-for): its log
	// read and catch-up, without the steady state after them.
	RestartProfileFor time.Duration
	// AllowDuplicateID keeps Stop from failing on a duplicate member id
	// alarm (DuplicateIDAlarms): for the runs that put a second sender
	// with a member's id on the segment on purpose.
	AllowDuplicateID bool
}

// Cluster is a set of daemons on a lab rack.
type Cluster struct {
	Rack *lab.Rack
	opt  Options

	mu    sync.Mutex
	procs []*exec.Cmd
	exits []chan error
	// starts counts each host's daemon starts (RestartProfileFor).
	starts []int
	// stopped: Stop has run (WithLab stops what its caller did not).
	stopped bool
}

// Start writes a config per host and starts every daemon; it returns once
// every API socket answers.
func Start(ctx context.Context, rack *lab.Rack, opt Options) (*Cluster, error) {
	if opt.Group == 0 {
		opt.Group = 7
	}
	if opt.Tick == 0 {
		opt.Tick = 250 * time.Microsecond
	}
	if opt.LogLevel == "" {
		opt.LogLevel = "info"
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &Cluster{Rack: rack, opt: opt, procs: make([]*exec.Cmd, len(rack.Hosts)), exits: make([]chan error, len(rack.Hosts)), starts: make([]int, len(rack.Hosts))}
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(c.keyPath(), key, 0o600); err != nil {
		return nil, fmt.Errorf("cluster: key: %w", err)
	}
	for i := range rack.Hosts {
		if err := c.writeConfig(i); err != nil {
			return nil, err
		}
	}
	if err := c.mountBPF(); err != nil {
		return nil, err
	}
	for i := range rack.Hosts {
		if err := c.StartHost(ctx, i, false); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// Socket returns host i's API socket.
func (c *Cluster) Socket(i int) string {
	return filepath.Join(c.opt.Dir, fmt.Sprintf("%s.sock", c.Rack.Hosts[i].Name))
}

// LogPath returns host i's daemon log.
func (c *Cluster) LogPath(i int) string {
	return filepath.Join(c.opt.Dir, fmt.Sprintf("%s.log", c.Rack.Hosts[i].Name))
}

// RestartProfilePath is where host i's daemon, started again for the
// k-th time, writes its CPU profile (Options.RestartProfileFor).
func (c *Cluster) RestartProfilePath(i, k int) string {
	return filepath.Join(c.opt.Dir, fmt.Sprintf("%s.restart%d.cpu.pprof", c.Rack.Hosts[i].Name, k))
}

// CPUProfilePath is where host i's daemon writes its CPU profile
// (Options.CPUProfile).
func (c *Cluster) CPUProfilePath(i int) string {
	return filepath.Join(c.opt.Dir, fmt.Sprintf("%s.cpu.pprof", c.Rack.Hosts[i].Name))
}

// MemProfilePath is where host i's daemon writes its heap profile
// (Options.MemProfile).
func (c *Cluster) MemProfilePath(i int) string {
	return filepath.Join(c.opt.Dir, fmt.Sprintf("%s.mem.pprof", c.Rack.Hosts[i].Name))
}

func (c *Cluster) keyPath() string { return filepath.Join(c.opt.Dir, "group.key") }

func (c *Cluster) configPath(i int) string {
	return filepath.Join(c.opt.Dir, fmt.Sprintf("%s.json", c.Rack.Hosts[i].Name))
}

func (c *Cluster) writeConfig(i int) error {
	var roster []daemon.Member
	for _, h := range c.Rack.Hosts {
		roster = append(roster, daemon.Member{ID: h.ID, MAC: h.MAC.String(), OOB: net.JoinHostPort(h.OOBAddr.String(), "7700")})
	}
	cfg := daemon.Config{Group: c.opt.Group, ID: i, Interface: c.Rack.Hosts[i].Ifname, Roster: roster,
		APISocket: c.Socket(i), TickText: c.opt.Tick.String(), KeyFile: c.keyPath()}
	if c.opt.Config != nil {
		c.opt.Config(&cfg)
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.configPath(i), b, 0o644)
}

// StartHost starts host i's daemon (join: as a host that lost its state)
// and waits for its API socket.
func (c *Cluster) StartHost(ctx context.Context, i int, join bool) error {
	logf, err := os.OpenFile(c.LogPath(i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	args := []string{"daemon", "--config", c.configPath(i), "--log-level", c.opt.LogLevel}
	if join {
		args = append(args, "--join")
	}
	c.mu.Lock()
	c.starts[i]++
	restart := c.starts[i] - 1
	c.mu.Unlock()
	switch {
	case restart > 0 && c.opt.RestartProfileFor > 0:
		args = append(args, "--cpuprofile", c.RestartProfilePath(i, restart), "--cpuprofile-for", c.opt.RestartProfileFor.String())
	case c.opt.CPUProfile:
		args = append(args, "--cpuprofile", c.CPUProfilePath(i))
	}
	if c.opt.MemProfile {
		args = append(args, "--memprofile", c.MemProfilePath(i))
	}
	cmd := c.Rack.Command(i, c.opt.Bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cluster: start daemon on %s: %w", c.Rack.Hosts[i].Name, err)
	}
	exit := make(chan error, 1)
	go func() { exit <- cmd.Wait(); logf.Close() }()
	c.mu.Lock()
	c.procs[i], c.exits[i] = cmd, exit
	c.mu.Unlock()
	// A restart replays its durable log first: on a loaded machine that
	// has taken seconds.
	deadline := time.Now().Add(30 * time.Second)
	for {
		cl, err := client.Dial(ctx, c.Socket(i))
		if err == nil {
			cl.Close()
			return nil
		}
		select {
		case e := <-exit:
			c.mu.Lock()
			c.procs[i] = nil
			c.mu.Unlock()
			log, _ := os.ReadFile(c.LogPath(i))
			return fmt.Errorf("cluster: daemon on %s exited (%v): %s", c.Rack.Hosts[i].Name, e, tail(log, 800))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: daemon on %s: API socket never answered: %w", c.Rack.Hosts[i].Name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Kill sends SIGKILL to host i's daemon (kill -9) and waits for it to die.
func (c *Cluster) Kill(i int) error {
	c.mu.Lock()
	p, exit := c.procs[i], c.exits[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("cluster: host %s has no daemon", c.Rack.Hosts[i].Name)
	}
	if err := p.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("cluster: kill %s: %w", c.Rack.Hosts[i].Name, err)
	}
	<-exit
	os.Remove(c.Socket(i)) // a killed daemon leaves its socket behind
	return nil
}

// SafetyEvents returns every SAFETY line the daemons logged (each daemon's
// log keeps its restarts), prefixed with the host's name. The core reports
// one when it refuses to change an agreed entry: a bug, never expected, so
// every lab check fails on one (Stop reports them too).
func (c *Cluster) SafetyEvents() ([]string, error) { return c.logLines("SAFETY:") }

// DuplicateIDAlarms returns every duplicate member id alarm the daemons
// logged (daemon/dupid.go: another host sent frames under the daemon's
// member id, and it stopped sending), prefixed with the host's name. No
// lab run has two daemons for one member id unless it makes one on
// purpose, so Stop fails on any (Options.AllowDuplicateID).
func (c *Cluster) DuplicateIDAlarms() ([]string, error) { return c.logLines("DUPLICATE MEMBER ID") }

// logLines returns the lines of the daemons' logs that hold substr,
// prefixed with the host's name.
func (c *Cluster) logLines(substr string) ([]string, error) {
	var out []string
	for i, h := range c.Rack.Hosts {
		b, err := os.ReadFile(c.LogPath(i))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return out, fmt.Errorf("cluster: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, substr) {
				out = append(out, h.Name+": "+line)
			}
		}
	}
	return out, nil
}

// Stop stops every daemon with SIGTERM (SIGKILL after 5 s) and reports the
// first daemon that did not exit cleanly, or else any SAFETY event a daemon
// logged, or else any duplicate member id alarm (unless
// Options.AllowDuplicateID).
func (c *Cluster) Stop() error {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	var first error
	for i := range c.procs {
		c.mu.Lock()
		p, exit := c.procs[i], c.exits[i]
		c.procs[i] = nil
		c.mu.Unlock()
		if p == nil {
			continue
		}
		p.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exit:
			if err != nil && first == nil {
				first = fmt.Errorf("daemon on %s: %w", c.Rack.Hosts[i].Name, err)
			}
		case <-time.After(5 * time.Second):
			p.Process.Kill()
			<-exit
			if first == nil {
				first = fmt.Errorf("daemon on %s ignored SIGTERM for 5s", c.Rack.Hosts[i].Name)
			}
		}
	}
	if err := c.removePins(); err != nil && first == nil {
		first = err
	}
	if first == nil {
		ev, err := c.SafetyEvents()
		switch {
		case err != nil:
			first = err
		case len(ev) > 0:
			first = fmt.Errorf("%d SAFETY events (an agreed entry would have changed), the first: %s", len(ev), ev[0])
		}
	}
	if first == nil && !c.opt.AllowDuplicateID {
		ev, err := c.DuplicateIDAlarms()
		switch {
		case err != nil:
			first = err
		case len(ev) > 0:
			first = fmt.Errorf("%d duplicate member id alarms (a daemon took frames for another host's under its id and stopped sending), the first: %s", len(ev), ev[0])
		}
	}
	return first
}

// pinningHosts calls fn with the config of every host whose daemon pins
// maps: token mode on the XDP program (xdp_token) with a durable log
// (bpf_dir defaulted). The simulated FPGA engine pins nothing: it goes
// with its daemon's process.
func (c *Cluster) pinningHosts(fn func(i int, cfg *daemon.Config) error) error {
	for i := range c.Rack.Hosts {
		cfg, err := c.Config(i)
		if err != nil {
			return err
		}
		if cfg.XDPToken != "on" || cfg.DataDir == "" {
			continue
		}
		if cfg.BPFDir == "" {
			cfg.BPFDir = daemon.DefaultBPFDir
		}
		if err := fn(i, &cfg); err != nil {
			return fmt.Errorf("cluster: %s: token mode: %w", c.Rack.Hosts[i].Name, err)
		}
	}
	return nil
}

// mountBPF mounts a bpffs on the bpf_dir of the hosts in token mode with a
// durable log, before their daemons start: each daemon runs in a mount
// namespace of its own (ip netns exec), where a bpffs it mounted goes
// with it, and with it the records a killed daemon left to its restart.
func (c *Cluster) mountBPF() error {
	return c.pinningHosts(func(_ int, cfg *daemon.Config) error {
		_, err := xdp.MountBPF(cfg.BPFDir)
		return err
	})
}

// removePins removes the maps the daemons in token mode pinned (Stop): a
// daemon stopped cleanly unpins them itself, one killed for good does not.
func (c *Cluster) removePins() error {
	return c.pinningHosts(func(_ int, cfg *daemon.Config) error {
		dir, err := host.PinDir(cfg)
		if err != nil {
			return err
		}
		return xdp.RemovePins(dir)
	})
}

// Status returns host i's status.
func (c *Cluster) Status(ctx context.Context, i int) (daemon.Status, error) {
	var st daemon.Status
	cl, err := client.Dial(ctx, c.Socket(i))
	if err != nil {
		return st, err
	}
	defer cl.Close()
	raw, err := cl.StatusRaw(ctx)
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(raw, &st)
	return st, err
}

// ErrDiffer reports hosts whose agreed streams differ.
var ErrDiffer = errors.New("agreed streams differ")

// Compare checks that every stream is the same sequence (positions, senders
// and payloads), and that no payload appears twice.
func Compare(streams [][]client.Message) error {
	for i := 1; i < len(streams); i++ {
		a, b := streams[0], streams[i]
		if len(a) != len(b) {
			return fmt.Errorf("%w: host 0 delivered %d messages, host %d %d", ErrDiffer, len(a), i, len(b))
		}
		for k := range a {
			if a[k].Position != b[k].Position || a[k].Sender != b[k].Sender || string(a[k].Payload) != string(b[k].Payload) {
				return fmt.Errorf("%w: message %d: host 0 has %d.%d from %d, host %d has %d.%d from %d",
					ErrDiffer, k, a[k].Seq, a[k].Index, a[k].Sender, i, b[k].Seq, b[k].Index, b[k].Sender)
			}
		}
	}
	if len(streams) > 0 {
		seen := make(map[string]bool, len(streams[0]))
		for _, m := range streams[0] {
			if seen[string(m.Payload)] {
				return fmt.Errorf("%w: payload %q delivered twice", ErrDiffer, m.Payload)
			}
			seen[string(m.Payload)] = true
		}
	}
	return nil
}

// Proc returns host i's daemon process id (0 when it is not running).
func (c *Cluster) Proc(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.procs[i] == nil {
		return 0
	}
	return c.procs[i].Process.Pid
}

// Usage is the resource use of one daemon process.
type Usage struct {
	RSSBytes    uint64        // resident memory
	MaxRSSBytes uint64        // the peak resident memory so far (VmHWM)
	CPU         time.Duration // user + system time so far
}

// Usage reads host i's daemon's resident memory and CPU time from /proc.
func (c *Cluster) Usage(i int) (Usage, error) {
	pid := c.Proc(i)
	if pid == 0 {
		return Usage{}, fmt.Errorf("cluster: host %s has no daemon", c.Rack.Hosts[i].Name)
	}
	var u Usage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb uint64
			fmt.Sscanf(strings.TrimPrefix(line, "VmRSS:"), "%d", &kb)
			u.RSSBytes = kb * 1024
		}
		if strings.HasPrefix(line, "VmHWM:") {
			var kb uint64
			fmt.Sscanf(strings.TrimPrefix(line, "VmHWM:"), "%d", &kb)
			u.MaxRSSBytes = kb * 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name (which may hold spaces) start after ")".
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	if len(fields) > 12 {
		ut, _ := strconv.ParseUint(fields[11], 10, 64)
		st, _ := strconv.ParseUint(fields[12], 10, 64)
		u.CPU = time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
	}
	return u, nil
}

// Durable returns a Config hook that gives every host a durable log under
// dir (fsync per batch, before anything that depends on it is sent).
// keepAll keeps the whole run, for checkers that read every stream from
// seq 0 at the end: on disk (retain), served to subscribers from there
// below the in-memory log, which keeps 16,384 entries.
// (Keeping it all in memory, keep_entries 4 Mi messages, grew a lab
// daemon's live heap to 600 MB in 3 minutes, and its garbage collector's
// 150-200 ms marks every 5 s were when the rack took it over: 22 and 24
// of 31 and 32 false takeovers in two runs, docs/recovery.md.)
func Durable(dir string, keepAll bool) func(*daemon.Config) {
	return func(cfg *daemon.Config) {
		cfg.DataDir = filepath.Join(dir, fmt.Sprintf("data-%d", cfg.ID))
		cfg.Fsync = "batch"
		if keepAll {
			cfg.Retain.Entries = 1 << 40
			cfg.KeepEntries = 1 << 14
		}
	}
}

// Config returns host i's daemon config as written for it.
func (c *Cluster) Config(i int) (daemon.Config, error) {
	var cfg daemon.Config
	b, err := os.ReadFile(c.configPath(i))
	if err != nil {
		return cfg, fmt.Errorf("cluster: %w", err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return cfg, fmt.Errorf("cluster: %s: %w", c.configPath(i), err)
	}
	return cfg, nil
}
