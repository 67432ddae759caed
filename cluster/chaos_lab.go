package cluster

import (
	"context"
	"fmt"
	"os"

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
		c, err := l.Start(ctx, Options{Dir: dir, CPUProfile: r.CPUProfile, Config: Hooks(Durable(dir, true), setOffload)})
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
		if serr := c.Stop(); serr != nil && err == nil {
			say("stopping the daemons: %v", serr)
		}
		return err
	})
	return rep, dir, err
}
