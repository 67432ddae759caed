package top

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

// poller keeps one API connection per socket and reads the status of
// every target at once.
type poller struct {
	timeout time.Duration
	mu      sync.Mutex
	conns   map[string]*client.Client
}

// poll reads the status of every target at once, each within the
// poller's timeout.
func (p *poller) poll(ctx context.Context, targets []target) []sample {
	out := make([]sample, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { out[i] = p.status(ctx, t.Socket) })
	}
	wg.Wait()
	return out
}

// status reads the status of the daemon at socket over its kept
// connection, or a new one when there is none or it broke.
func (p *poller) status(ctx context.Context, socket string) sample {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	p.mu.Lock()
	c := p.conns[socket]
	delete(p.conns, socket) // put back only after a good answer
	p.mu.Unlock()
	var raw []byte
	err := errors.New("no connection")
	if c != nil {
		if raw, err = c.StatusRaw(ctx); err != nil {
			c.Close() // a late reply must not answer the next request
		}
	}
	if err != nil && ctx.Err() == nil {
		// No connection yet, or it broke (the daemon restarted or died):
		// a new one, whose error says why.
		if c, err = client.Dial(ctx, socket); err != nil {
			return sample{At: time.Now(), Err: err}
		}
		if raw, err = c.StatusRaw(ctx); err != nil {
			c.Close()
		}
	}
	at := time.Now()
	if err != nil {
		return sample{At: at, Err: err}
	}
	var st daemon.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		c.Close()
		return sample{At: at, Err: fmt.Errorf("status: %w", err)}
	}
	p.mu.Lock()
	p.conns[socket] = c
	p.mu.Unlock()
	return sample{At: at, St: &st}
}

// close closes every kept connection.
func (p *poller) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s, c := range p.conns {
		c.Close()
		delete(p.conns, s)
	}
}

// hostLess orders lab host names: A..Z, then AA, AB, ...
func hostLess(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// targets lists the sockets to watch: the --socket ones in their order,
// then those of the cluster directory by host name; known are the targets
// of earlier refreshes, which stay (a daemon that died may have removed
// its socket: it shows down instead of vanishing).
func targets(o Options, known []target) ([]target, error) {
	seen := map[string]bool{}
	var out []target
	add := func(t target) {
		if !seen[t.Socket] {
			seen[t.Socket] = true
			out = append(out, t)
		}
	}
	if known == nil {
		var named []target
		stems := map[string]int{}
		for _, s := range o.Sockets {
			stem := strings.TrimSuffix(filepath.Base(s), ".sock")
			stems[stem]++
			named = append(named, target{Name: stem, Socket: s})
		}
		for _, t := range named {
			if stems[t.Name] > 1 {
				t.Name = t.Socket
			}
			add(t)
		}
	} else {
		for _, t := range known {
			add(t)
		}
	}
	if o.ClusterDir != "" {
		socks, err := filepath.Glob(filepath.Join(o.ClusterDir, "*.sock"))
		if err != nil {
			return nil, fmt.Errorf("cluster directory %s: %w", o.ClusterDir, err)
		}
		var found []target
		for _, s := range socks {
			if !seen[s] {
				found = append(found, target{Name: strings.TrimSuffix(filepath.Base(s), ".sock"), Socket: s})
			}
		}
		slices.SortFunc(found, func(a, b target) int { return hostLess(a.Name, b.Name) })
		for _, t := range found {
			add(t)
		}
	}
	return out, nil
}
