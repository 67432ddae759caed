package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/exo-rack/exo/daemon"
)

// ChaosRun is a chaos run on a lab rack of its own: what exo lab chaos
// does.
type ChaosRun struct {
	// Lab is the rack to build; BPFDir defaults to daemon.DefaultBPFDir,
	// where daemons in token mode with a durable log pin the maps that a
	// killed daemon leaves to its restart.
	Lab LabOptions
	// Offload is the daemons' fast path, one of OffloadModes.
	Offload string
	// CPUProfile makes every daemon write a CPU profile
	// (Options.CPUProfile).
	CPUProfile bool
	// MemProfile makes every daemon write a heap profile when the run
	// stops it (Options.MemProfile).
	MemProfile bool
	// RestartProfileFor profiles every restarted daemon's first this
	// long (Options.RestartProfileFor).
	RestartProfileFor time.Duration
	// KeepData keeps the daemons' durable logs of a run without
	// violations; they are removed otherwise (1-2 GB a 5-minute run: a
	// machine that kept every run's filled its disk, and an ext4 nearly
	// full slowed the fsyncs that the daemons wait on before they send).
	// A run with violations or an error keeps them for a post-mortem.
	KeepData bool
	// TokenTimeout, when positive, sets every daemon's
	// token_timeout_ticks: the adaptive token timeout's ceiling, or,
	// without TokenTimeoutMin, a fixed timeout (0: the daemon's default).
	TokenTimeout int
	// TokenTimeoutMin, when positive, sets every daemon's
	// token_timeout_min_ticks: the floor of the adaptive token timeout
	// (0: the daemon's default).
	TokenTimeoutMin int
	// FetchWindow, when positive, sets every daemon's fetch_window: the
	// batches a catch-up keeps in flight (0: the daemon's default).
	FetchWindow int
	// GoneTicks, when not 0, sets every daemon's gone_ticks (-1: gone
	// notices ignored).
	GoneTicks int
	// Fsync, when set, is every daemon's fsync policy ("batch", the
	// default, "entry": also after every batch received, or "none").
	Fsync string
	// HugePages, when set, is every daemon's huge_pages ("on": the heap
	// in transparent huge pages, which a killed daemon frees sooner before
	// its peers see its connections close; "off", the default).
	HugePages string
	// Preallocate, when set, is every daemon's preallocate ("on", the
	// default: the durable log's next segment written ahead, appends
	// synced with fdatasync; "off": segments grow as they are written).
	Preallocate string
	// LogLevel is the daemons' log level ("debug": every fetch a host
	// sends, answers and receives, with its range and size; default
	// "info").
	LogLevel string
	// Chaos configures the nemesis; its Log receives the actions.
	Chaos ChaosOptions
	// Say, if set, receives the run's own lines: what runs where, once the
	// daemons are up, and an error stopping them at the end.
	Say func(string)
}

// RunChaos brings up a lab rack (WithLab), starts a daemon with a durable
// log (fsync per batch) on every host, runs Chaos on them and stops them.
// It returns the report and the directory of the daemons' configs, logs
// and durable logs, kept for a post-mortem. An error stopping the daemons
// after a finished run goes to Say and not into the error: the report
// holds the run's verdict.
func RunChaos(ctx context.Context, r ChaosRun) (rep ChaosReport, dir string, err error) {
	if err := CheckChaosOptions(r.Chaos); err != nil {
		return rep, "", err
	}
	setOffload, err := WithOffload(r.Offload)
	if err != nil {
		return rep, "", err
	}
	say := func(format string, args ...any) {
		if r.Say != nil {
			r.Say(fmt.Sprintf(format, args...))
		}
	}
	if r.Lab.BPFDir == "" {
		r.Lab.BPFDir = daemon.DefaultBPFDir
	}
	err = WithLab(ctx, r.Lab, func(l *Lab) error {
		var err error
		if dir, err = os.MkdirTemp("", "exo-chaos-"); err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		timeout := func(c *daemon.Config) {
			if r.TokenTimeout > 0 {
				c.TokenTimeout = r.TokenTimeout
			}
			if r.TokenTimeoutMin > 0 {
				c.TokenTimeoutMin = r.TokenTimeoutMin
			}
			if r.FetchWindow > 0 {
				c.FetchWindow = r.FetchWindow
			}
			if r.Fsync != "" {
				c.Fsync = r.Fsync
			}
			if r.GoneTicks != 0 {
				c.GoneTicks = r.GoneTicks
			}
			if r.HugePages != "" {
				c.HugePages = r.HugePages
			}
			if r.Preallocate != "" {
				c.Preallocate = r.Preallocate
			}
		}
		c, err := l.Start(ctx, Options{Dir: dir, LogLevel: r.LogLevel, CPUProfile: r.CPUProfile, MemProfile: r.MemProfile, RestartProfileFor: r.RestartProfileFor, Config: Hooks(Durable(dir, true), setOffload, timeout)})
		if err != nil {
			return err
		}
		length := r.Chaos.Duration.String()
		if r.Chaos.Count > 0 {
			length = fmt.Sprintf("%d actions", r.Chaos.Count)
			if r.Chaos.Duration > 0 {
				length += " or " + r.Chaos.Duration.String()
			}
		}
		say("chaos on %d hosts for %s, seed %d, offload %s (daemon logs in %s)", len(l.Rack.Hosts), length, r.Chaos.Seed, r.Offload, dir)
		rep, err = c.Chaos(ctx, r.Chaos)
		serr := c.Stop()
		if serr != nil && err == nil {
			say("stopping the daemons: %v", serr)
		}
		if err == nil && serr == nil && len(rep.Violations) == 0 && !r.KeepData {
			if derr := removeDurableLogs(dir); derr != nil {
				say("removing the durable logs: %v", derr)
			}
		}
		return err
	})
	return rep, dir, err
}

// removeDurableLogs removes the daemons' durable logs (data-*) under dir,
// leaving their configs and logs.
func removeDurableLogs(dir string) error {
	ds, err := filepath.Glob(filepath.Join(dir, "data-*"))
	if err != nil {
		return err
	}
	for _, d := range ds {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	return nil
}
