package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Counters returns the status counters (daemon.Status.Counters: "frames_in",
// "foreign_mac", "rejects.BAD_GROUP", ...) of the given hosts, in order.
func (c *Cluster) Counters(ctx context.Context, hosts []int) ([]map[string]uint64, error) {
	out := make([]map[string]uint64, len(hosts))
	for j, h := range hosts {
		st, err := c.Status(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("status of %s: %w", c.Rack.Hosts[h].Name, err)
		}
		out[j] = st.Counters
	}
	return out, nil
}

// CounterDelta returns after-before for every counter in after (a counter
// missing from before counts from 0).
func CounterDelta(before, after map[string]uint64) map[string]uint64 {
	d := make(map[string]uint64, len(after))
	for k, v := range after {
		d[k] = v - min(v, before[k])
	}
	return d
}

// BadInputCounters are the counters only bad input moves: the codec's
// rejects, frames of another group or with a sender outside the roster, and
// frames whose source MAC is not their sender's. The protocol's own verdicts
// (DUPLICATE, GAP, STALE_EPOCH, ...) are not among them: healthy traffic
// produces those.
var BadInputCounters = []string{
	"foreign_mac",
	"rejects.MALFORMED", "rejects.BAD_VERSION", "rejects.BAD_TYPE", "rejects.BAD_FLAGS",
	"rejects.BAD_HISTLEN", "rejects.BAD_PAYLOAD", "rejects.BAD_HISTORY_ID",
	"rejects.BAD_GROUP", "rejects.BAD_SENDER",
}

// SumCounters adds the named counters of m.
func SumCounters(m map[string]uint64, names []string) uint64 {
	var s uint64
	for _, n := range names {
		s += m[n]
	}
	return s
}

// FormatCounters renders the non-zero named counters of m, e.g.
// "BAD_VERSION=4981 BAD_PAYLOAD=12" (the "rejects." prefix dropped).
func FormatCounters(m map[string]uint64, names []string) string {
	var b strings.Builder
	for _, n := range names {
		if v := m[n]; v > 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strings.TrimPrefix(n, "rejects."))
			b.WriteByte('=')
			b.WriteString(strconv.FormatUint(v, 10))
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// InjectResult is what `exo raw --mode inject` reports.
type InjectResult struct {
	Frames  int64   `json:"frames"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"frames_per_sec"`
}

// Inject sends count bad frames of a kind (garbage, foreign-group,
// truncated, bad-version, forged-sender: see `exo raw --help`) from inside
// host from's namespace, with the cluster's exo binary.
func (c *Cluster) Inject(ctx context.Context, from int, kind string, count int) (InjectResult, error) {
	var res InjectResult
	args := []string{"raw", "--interface", c.Rack.Hosts[from].Ifname,
		"--mode", "inject", "--kind", kind, "--count", strconv.Itoa(count)}
	if kind == "forged-sender" {
		// Sealed with the rack's key: a frame with a valid tag from the
		// wrong MAC, which only the roster MAC check refuses (without the
		// key it would be a BAD_TAG).
		args = append(args, "--key-file", c.keyPath())
	}
	cmd := c.Rack.CommandContext(ctx, from, c.opt.Bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return res, fmt.Errorf("inject %s from %s: %w: %s", kind, c.Rack.Hosts[from].Name, err, strings.TrimSpace(errb.String()))
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return res, fmt.Errorf("inject %s from %s: %w: %q", kind, c.Rack.Hosts[from].Name, err, out.String())
	}
	return res, nil
}
