package cluster

import (
	"context"
	"fmt"
	"os"

	"github.com/exo-rack/exo/lab"
)

// LabOptions say which lab rack WithLab builds and which exo binary runs
// inside its hosts.
type LabOptions struct {
	// Prefix names the rack (lab.Options.Prefix; "": lab.DefaultPrefix);
	// a rack left over under the same prefix is replaced, one that another
	// live run uses is not (lab.ErrInUse).
	Prefix string
	// Hosts is the number of hosts.
	Hosts int
	// MTU of the rack's links (0: lab's default, 1500).
	MTU int
	// BPFDir is where a bpffs is mounted in every host (lab.Options.BPFDir;
	// "": none), for daemons that pin maps across restarts.
	BPFDir string
	// Bin is the exo binary run inside the hosts: the daemons and the
	// helpers of the measurements (exo raw, exo probe-endpoint). Default:
	// this process's executable, since the commands that bring up a rack
	// are exo themselves.
	Bin string
	// Keep leaves the rack, and the daemons started on it, running when
	// WithLab returns (exo demo --keep).
	Keep bool
}

// Lab is a lab rack brought up by WithLab, with the exo binary that runs
// inside its hosts.
type Lab struct {
	Rack *lab.Rack
	Bin  string

	keep bool
	// started are the daemons started on the rack, stopped at the end
	// when their caller has not stopped them (an error path).
	started []*Cluster
}

// WithLab builds a lab rack, calls fn with it and tears the rack down
// again, whatever fn returned: it stops the daemons started on it that
// are still running, then removes the rack (unless o.Keep). The error is
// fn's, else the first of the teardown's. It is the one way the demo, the
// bench, the probe and the chaos run bring up a rack, so that none of them
// can leave daemons or namespaces behind on an error path.
func WithLab(ctx context.Context, o LabOptions, fn func(*Lab) error) (err error) {
	bin := o.Bin
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("cluster: the exo binary to run in the rack: %w", err)
		}
	}
	// The prefix is this run's until it returns: a rack a finished run
	// left behind is removed (Force), one another live run uses is not.
	if o.Prefix == "" {
		o.Prefix = lab.DefaultPrefix
	}
	claim, err := lab.ClaimPrefix(o.Prefix)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer claim.Release()
	rack, err := lab.Up(ctx, lab.Options{Prefix: o.Prefix, Hosts: o.Hosts, Force: true, Claim: claim, MTU: o.MTU, BPFDir: o.BPFDir})
	if err != nil {
		return err
	}
	l := &Lab{Rack: rack, Bin: bin, keep: o.Keep}
	if !o.Keep {
		defer func() {
			for _, c := range l.started {
				c.mu.Lock()
				stopped := c.stopped
				c.mu.Unlock()
				if stopped {
					continue
				}
				if e := c.Stop(); e != nil && err == nil {
					err = e
				}
			}
			if e := lab.Down(context.Background(), o.Prefix); e != nil && err == nil {
				err = e
			}
		}()
	}
	return fn(l)
}

// Start starts a daemon on every host of the rack (Start; opt.Bin
// defaults to the Lab's). The caller may stop them; WithLab stops them
// otherwise.
func (l *Lab) Start(ctx context.Context, opt Options) (*Cluster, error) {
	if opt.Bin == "" {
		opt.Bin = l.Bin
	}
	c, err := Start(ctx, l.Rack, opt)
	if err != nil {
		return nil, err
	}
	l.started = append(l.started, c)
	return c, nil
}

// Run starts a daemon on every host of the rack, calls fn with them and
// stops them (unless the rack is kept: LabOptions.Keep). The error is
// fn's, else Stop's.
func (l *Lab) Run(ctx context.Context, opt Options, fn func(*Cluster) error) error {
	c, err := l.Start(ctx, opt)
	if err != nil {
		return err
	}
	err = fn(c)
	if l.keep {
		return err
	}
	if e := c.Stop(); e != nil && err == nil {
		err = e
	}
	return err
}
