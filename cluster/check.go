package cluster

import (
	"context"
	"fmt"
	"sync"
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
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = client.Subscribe(cctx, c.Socket(hosts[i]), 0, func(m client.Message) error {
				streams[i] = append(streams[i], m)
				if m.Position == last {
					return errEnough
				}
				return nil
			})
		}()
	}
	wg.Wait()
	var violations []string
	for i, err := range errs {
		if err != errEnough {
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
