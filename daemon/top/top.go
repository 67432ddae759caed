package top

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/exo-rack/exo/client"
)

// ErrNoSockets is the error of a watch with nothing to watch: no socket
// given and no *.sock in the cluster directory (exo top exits 1 on it).
var ErrNoSockets = errors.New("no *.sock")

// Options say which daemons to watch and how often.
type Options struct {
	// Sockets are daemons' API sockets, shown in this order; a row is
	// named by its socket's file name without .sock (the whole path when
	// two share a name).
	Sockets []string
	// ClusterDir is a directory of <Host>.sock API sockets (a
	// cluster.Start directory), scanned again at every refresh; its
	// daemons follow the Sockets, by host name.
	ClusterDir string
	// Interval is the refresh interval, and the window of the rates.
	Interval time.Duration
	// Timeout is how long a host's status may take before it shows down;
	// 0: the interval, at most 1s.
	Timeout time.Duration
}

// View is where Run draws the frames.
type View struct {
	// In carries the keys: q (or Ctrl-C, Ctrl-D) quits. On a terminal it
	// is read key by key, otherwise by lines.
	In io.Reader
	// Out gets the frames: one after the other, or one JSON object per
	// line with JSON.
	Out io.Writer
	// JSON prints every frame as one line of JSON.
	JSON bool
	// Terminal: Out is a terminal; without JSON, each frame is drawn over
	// the previous one, cut to the terminal's width, the cursor hidden.
	Terminal bool
}

// watch is a view under way: the targets so far, the previous samples
// and the connections.
type watch struct {
	o       Options
	targets []target
	prev    map[string]sample
	p       *poller
}

// start lists the targets; the error wraps ErrNoSockets when there is
// none.
func start(o Options) (*watch, error) {
	t, err := targets(o, nil)
	if err != nil {
		return nil, err
	}
	if len(t) == 0 {
		return nil, fmt.Errorf("%w in %s: is it a cluster directory with daemons running?", ErrNoSockets, o.ClusterDir)
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = min(o.Interval, time.Second)
	}
	return &watch{o: o, targets: t, prev: map[string]sample{}, p: &poller{timeout: timeout, conns: map[string]*client.Client{}}}, nil
}

// sample reads every target (and the cluster directory's new sockets)
// and returns the snapshot against the previous samples.
func (w *watch) sample(ctx context.Context) Snapshot {
	if t, err := targets(w.o, w.targets); err == nil {
		w.targets = t
	}
	cur := w.p.poll(ctx, w.targets)
	snap := build(w.targets, w.prev, cur, time.Now(), w.o.Interval)
	for i, t := range w.targets {
		w.prev[t.Socket] = cur[i]
	}
	return snap
}

// Once reads the status of every daemon twice, one interval apart, and
// returns the second frame (a host that answered neither time is down in
// it). The error wraps ErrNoSockets when there is nothing to watch.
func Once(ctx context.Context, o Options) (Snapshot, error) {
	w, err := start(o)
	if err != nil {
		return Snapshot{}, err
	}
	defer w.p.close()
	w.sample(ctx)
	select {
	case <-ctx.Done():
		return Snapshot{}, ctx.Err()
	case <-time.After(o.Interval):
	}
	return w.sample(ctx), nil
}

// Run shows the daemons every interval on v until ctx ends or the user
// quits; it returns nil then. The error wraps ErrNoSockets when there is
// nothing to watch.
func Run(ctx context.Context, o Options, v View) error {
	w, err := start(o)
	if err != nil {
		return err
	}
	defer w.p.close()
	quit := make(chan struct{})
	restore := keys(v.In, quit)
	defer restore()
	tty := !v.JSON && v.Terminal
	if tty {
		fmt.Fprint(v.Out, "\x1b[?25l\x1b[H\x1b[2J") // hide the cursor, clear
		defer fmt.Fprint(v.Out, "\x1b[?25h")
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		snap := w.sample(ctx)
		switch {
		case v.JSON:
			b, err := json.Marshal(snap)
			if err != nil {
				return fmt.Errorf("top: %w", err)
			}
			fmt.Fprintf(v.Out, "%s\n", b)
		case tty:
			fmt.Fprint(v.Out, screen(Render(snap)+"q or Ctrl-C quits\n", width(v.Out)))
		default:
			fmt.Fprintln(v.Out, Render(snap))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-quit:
			return nil
		case <-tick.C:
		}
	}
}
