package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exo-rack/exo/client"
)

// CheckAcked reads every host's agreed stream from seq 0 up to the last
// acknowledged position and checks it against the acknowledgements the
// clients received: the streams must be identical (positions, senders,
// payloads, nothing twice) and every acknowledged message must be at its
// acknowledged position. It returns how many messages were delivered and
// what was violated.
func (c *Cluster) CheckAcked(ctx context.Context, acked map[string]client.Position) (int, []string) {
	all := make([]int, len(c.Rack.Hosts))
	for i := range all {
		all[i] = i
	}
	return c.CheckAckedAt(ctx, all, acked)
}

// CheckAckedAt is CheckAcked on the hosts named (the members, when the
// roster changed).
func (c *Cluster) CheckAckedAt(ctx context.Context, hosts []int, acked map[string]client.Position) (int, []string) {
	var last client.Position
	for _, p := range acked {
		if p.Seq > last.Seq || p.Seq == last.Seq && p.Index > last.Index {
			last = p
		}
	}
	n := len(hosts)
	streams := make([][]client.Message, n)
	errs := make([]error, n)
	// A stream is given up when it delivers nothing for checkStall, not
	// after a fixed time: a 10-minute chaos run's 5.2 M messages, read
	// again from every host's log at once, took more than the 60 s the
	// check once allowed, and three whole streams were reported as
	// violations.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	read := make([]atomic.Int64, n)
	done := make([]atomic.Bool, n)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		watchStreams(cctx, read, done, checkStall, func(i int) {
			cancel(fmt.Errorf("host %s's stream delivered nothing for %v", c.Rack.Hosts[hosts[i]].Name, checkStall))
		})
	}()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done[i].Store(true)
			errs[i] = client.Subscribe(cctx, c.Socket(hosts[i]), 0, func(m client.Message) error {
				streams[i] = append(streams[i], m)
				read[i].Add(1)
				if m.Position == last {
					return errEnough
				}
				return nil
			})
		}()
	}
	wg.Wait()
	cancel(nil)
	<-watchDone
	var violations []string
	for i, err := range errs {
		if err != errEnough {
			if cause := context.Cause(cctx); cause != nil && !errors.Is(cause, context.Canceled) && errors.Is(err, context.Canceled) {
				// Given up by watchStreams: say which stream stalled.
				err = fmt.Errorf("%w (%v)", err, cause)
			}
			violations = append(violations, fmt.Sprintf("host %s: stream ended after %d messages: %v", c.Rack.Hosts[hosts[i]].Name, len(streams[i]), err))
		}
	}
	if len(violations) > 0 {
		return 0, violations
	}
	if err := Compare(streams); err != nil {
		violations = append(violations, err.Error())
	}
	have := make(map[string]client.Position, len(streams[0]))
	for _, m := range streams[0] {
		have[string(m.Payload)] = m.Position
	}
	lost := 0
	for p, pos := range acked {
		if got, ok := have[p]; !ok || got != pos {
			lost++
		}
	}
	if lost > 0 {
		violations = append(violations, fmt.Sprintf("%d of %d acknowledged messages lost or moved", lost, len(acked)))
	}
	return len(streams[0]), violations
}

// checkStall is how long CheckAcked waits on a stream that delivers
// nothing before it gives the stream up.
const checkStall = 30 * time.Second

// watchStreams calls stalled(i) once, and returns, when stream i has not
// read anything for stall while not done; it returns when ctx ends too.
// read[i] counts what stream i read.
func watchStreams(ctx context.Context, read []atomic.Int64, done []atomic.Bool, stall time.Duration, stalled func(int)) {
	tick := max(stall/10, time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	last := make([]int64, len(read))
	since := make([]time.Time, len(read))
	start := time.Now()
	for i := range since {
		since[i] = start
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for i := range read {
				if v := read[i].Load(); v != last[i] {
					last[i], since[i] = v, now
				} else if !done[i].Load() && now.Sub(since[i]) >= stall {
					stalled(i)
					return
				}
			}
		}
	}
}
