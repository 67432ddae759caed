package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/exo-rack/exo/exo"
)

// Checker checks the properties of PROTOCOL.md section 8 on everything the
// hosts deliver:
//
//   - agreement: no two hosts (nor two incarnations of one) ever deliver
//     different entries at the same sequence number, across every view
//     change, so agreed entries survive reconciliation;
//   - order: every host delivers sequence numbers 0, 1, 2, ... with no gap
//     and nothing twice;
//   - validity: every delivered payload was published, and is agreed at one
//     sequence number only; a payload reported dropped is never agreed;
//   - liveness: after the faults stop, the rack converges (one epoch, nobody
//     halted) and every payload published at a host that did not crash is
//     delivered everywhere, within the quiet phase.
type Checker struct {
	n          int
	agreed     map[uint64]string // seq -> identity of the agreed entry
	streams    map[[2]int]uint64 // (host, incarnation) -> next seq expected
	origin     map[uint64][2]int // payload id -> (host, incarnation) that published it
	agreedAt   map[uint64]uint64 // payload id -> seq
	dropped    map[uint64]bool
	entries    []exo.Entry     // the agreed entries, by seq (first agreement of each)
	open       map[uint64]bool // published, not yet agreed, dropped or lost
	byInc      map[[2]int][]uint64
	maxSeq     uint64 // highest seq holding a payload
	violations []string
	// QuietTicks is how long the rack took to converge after the faults
	// stopped (set by Final).
	QuietTicks int
	// Switches is how many configuration switches the agreed log holds.
	Switches int

	// Membership: the switches hosts report (seq -> roster), checked
	// against the rosters the checker computes from the agreed entries.
	switches map[uint64]string
	switchBy map[uint64]int

	// The operator's override (Options.AcceptLoss): who delivered each
	// seq, which incarnations lost their state since, what the overrides
	// reported in doubt, and how many agreed entries they replaced.
	deliverers map[uint64][][2]int
	lostUpTo   map[int]int // host -> its newest incarnation whose state is lost
	doubts     []exo.Doubt
	Lost       int
}

// NewChecker returns a checker for n hosts.
func NewChecker(n int) *Checker {
	return &Checker{n: n, agreed: map[uint64]string{}, streams: map[[2]int]uint64{},
		origin: map[uint64][2]int{}, agreedAt: map[uint64]uint64{}, dropped: map[uint64]bool{},
		open: map[uint64]bool{}, byInc: map[[2]int][]uint64{}, switches: map[uint64]string{}, switchBy: map[uint64]int{},
		deliverers: map[uint64][][2]int{}, lostUpTo: map[int]int{}}
}

func (c *Checker) violation(format string, args ...any) {
	if len(c.violations) < 20 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

// Violations returns what was violated (at most 20 lines).
func (c *Checker) Violations() []string { return c.violations }

// ErrViolation is wrapped by Err when a property was violated.
var ErrViolation = errors.New("property violated")

// Err returns nil or an error listing the violations.
func (c *Checker) Err() error {
	if len(c.violations) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrViolation, strings.Join(c.violations, "; "))
}

func identity(e exo.Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/%d/", e.Epoch, e.Sender, e.Count)
	b.Write(e.Payload)
	return b.String()
}

func payloadIDs(e exo.Entry) ([]uint64, error) {
	var ids []uint64
	err := e.Records(func(rec []byte) error {
		if exo.IsControlRecord(rec) {
			return nil // a key announcement (configuration entries are handled by the callers)
		}
		if len(rec) < 8 {
			return fmt.Errorf("record of %d bytes", len(rec))
		}
		ids = append(ids, binary.BigEndian.Uint64(rec))
		return nil
	})
	return ids, err
}

// Proposed records a payload published at a host incarnation.
func (c *Checker) Proposed(host, inc int, id uint64) {
	k := [2]int{host, inc}
	c.origin[id] = k
	c.open[id] = true
	c.byInc[k] = append(c.byInc[k], id)
}

// Agreed records an entry delivered by a host incarnation.
// Begin sets where the delivered stream of a host's incarnation starts (a
// restart delivers its log from its base; 0 unless compacted).
func (c *Checker) Begin(host, inc int, from uint64) { c.streams[[2]int{host, inc}] = from }

func (c *Checker) Agreed(host, inc int, e exo.Entry) {
	k := [2]int{host, inc}
	if next := c.streams[k]; e.Seq != next {
		c.violation("host %d (incarnation %d) delivered seq %d, expected %d", host, inc, e.Seq, next)
	}
	c.streams[k] = e.Seq + 1
	id := identity(e)
	if prev, ok := c.agreed[e.Seq]; ok {
		if prev == id {
			c.deliverers[e.Seq] = append(c.deliverers[e.Seq], k)
			return
		}
		if !c.replaceable(e.Seq) {
			c.violation("agreement: seq %d delivered as %q and as %q (host %d)", e.Seq, short(prev), short(id), host)
			return
		}
		// An override gave up this position, and every host that had
		// delivered the old entry lost its state since: the loss the
		// operator accepted. The new entry is the agreed one from now on.
		c.Lost++
		if e.Seq < uint64(len(c.entries)) {
			old := &c.entries[e.Seq]
			if ids, err := payloadIDs(*old); err == nil {
				for _, p := range ids {
					delete(c.agreedAt, p)
				}
			}
			c.entries[e.Seq] = e.Clone()
		}
		c.agreed[e.Seq] = id
		c.deliverers[e.Seq] = [][2]int{k}
		c.checkPayloads(e)
		return
	}
	c.deliverers[e.Seq] = append(c.deliverers[e.Seq], k)
	c.agreed[e.Seq] = id
	if e.Seq == uint64(len(c.entries)) {
		c.entries = append(c.entries, e.Clone()) // filled densely: seqs are delivered in order
	}
	c.checkPayloads(e)
}

// replaceable reports whether the agreed entry at seq may be replaced: an
// override reported seq in doubt, and every host incarnation that
// delivered the entry lost its state since.
func (c *Checker) replaceable(seq uint64) bool {
	in := false
	for _, d := range c.doubts {
		in = in || (d.From <= seq && seq < d.To)
	}
	if !in {
		return false
	}
	for _, k := range c.deliverers[seq] {
		if up, ok := c.lostUpTo[k[0]]; !ok || k[1] > up {
			return false
		}
	}
	return true
}

// LostState records that host's incarnations up to inc lost their state
// (a restart without the disk; a host that fell behind every member's log).
func (c *Checker) LostState(host, inc int) {
	if up, ok := c.lostUpTo[host]; !ok || inc > up {
		c.lostUpTo[host] = inc
	}
}

// Doubted records what an override reported in doubt.
func (c *Checker) Doubted(d exo.Doubt) { c.doubts = append(c.doubts, d) }

// checkPayloads checks the validity of the payloads of agreed entry e.
func (c *Checker) checkPayloads(e exo.Entry) {
	if _, ok := exo.ParseConfigEntry(&e); ok {
		return
	}
	ids, err := payloadIDs(e)
	if err != nil {
		c.violation("seq %d: bad payload: %v", e.Seq, err)
	}
	for _, p := range ids {
		if _, ok := c.origin[p]; !ok {
			c.violation("validity: seq %d carries payload %d that was never published", e.Seq, p)
		}
		if s, ok := c.agreedAt[p]; ok {
			c.violation("validity: payload %d agreed twice, at seq %d and %d", p, s, e.Seq)
		}
		if c.dropped[p] {
			c.violation("payload %d was reported dropped but is agreed at seq %d", p, e.Seq)
		}
		c.agreedAt[p] = e.Seq
		c.maxSeq = max(c.maxSeq, e.Seq)
		delete(c.open, p)
	}
}

func short(s string) string {
	if len(s) > 24 {
		return s[:24] + "..."
	}
	return s
}

// Dropped records an entry a host reported as dropped by a view change.
func (c *Checker) Dropped(host int, e exo.Entry) {
	if _, ok := exo.ParseConfigEntry(&e); ok {
		return
	}
	ids, _ := payloadIDs(e)
	for _, p := range ids {
		if s, ok := c.agreedAt[p]; ok {
			c.violation("host %d reported payload %d dropped, but it is agreed at seq %d", host, p, s)
		}
		c.dropped[p] = true
		delete(c.open, p)
	}
}

// Crashed records that a host incarnation ended: what it published and did
// not see agreed is lost with it (its publishers saw no acknowledgement).
func (c *Checker) Crashed(host int, nd *exo.Node) {
	for k, ids := range c.byInc {
		if k[0] != host {
			continue
		}
		for _, p := range ids {
			delete(c.open, p)
		}
		delete(c.byInc, k)
	}
}

// QuietStart is called when the faults stop.
func (c *Checker) QuietStart(nodes []*exo.Node) {}

// converged reports whether every host is in one epoch, none halted, and
// everything that must be delivered is delivered everywhere.
func (c *Checker) converged(nodes []*exo.Node) bool {
	if len(c.open) > 0 {
		return false
	}
	e := nodes[0].Epoch()
	for _, nd := range nodes {
		if nd.Halted() || nd.Epoch() != e || nd.Pointers().Agreed <= c.maxSeq {
			return false
		}
	}
	return true
}

// Final checks liveness at the end of the quiet phase.
func (c *Checker) Final(nodes []*exo.Node, used, limit int) {
	c.QuietTicks = used
	if c.converged(nodes) {
		return
	}
	var st []string
	for i, nd := range nodes {
		p := nd.Pointers()
		st = append(st, fmt.Sprintf("h%d{epoch=%d promised=%d halted=%v append=%d agreed=%d pending=%d}",
			i, p.Epoch, nd.Promised(), p.Halted, p.Append, p.Agreed, nd.Pending()))
	}
	c.violation("liveness: not converged %d ticks after the faults stopped (%d payloads outstanding, need agreed > %d): %s",
		limit, len(c.open), c.maxSeq, strings.Join(st, " "))
}

// Switched records that a host switched to roster at seq and agreed past it.
func (c *Checker) Switched(host int, seq uint64, roster []uint8) {
	r := fmt.Sprint(roster)
	if prev, ok := c.switches[seq]; ok && prev != r {
		c.violation("membership: host %d switched to %s at seq %d, host %d to %s", host, r, seq, c.switchBy[seq], prev)
		return
	}
	c.switches[seq] = r
	c.switchBy[seq] = host
}

// FinalRoster checks the membership properties on the agreed log, with its
// own reading of the rule (docs/protocol.md section 7): the configuration
// entry at c, of epoch E, under a roster of history length h, takes effect at
// c+h+1 iff c+h is of epoch E; every agreed entry is recorded with the roster
// in effect at its seq. Checked: consecutive rosters differ by exactly one
// host (so any two majorities of consecutive rosters intersect), and every
// switch a host agreed past is one of these points, with this roster.
func (c *Checker) FinalRoster() {
	roster := exo.IdentityRoster(c.n)
	points := map[uint64]string{}
	var pend *exo.Entry
	var pendC exo.ConfigChange
	var h int
	var nextAt uint64
	var next []uint8
	for k := range c.entries {
		e := &c.entries[k]
		if e.Seq != uint64(k) {
			break // only the dense prefix
		}
		if next != nil && e.Seq == nextAt {
			if d := diff(roster, next); d != 1 {
				c.violation("membership: rosters %v and %v (seq %d) differ by %d hosts", roster, next, e.Seq, d)
			}
			roster, next = next, nil
			points[e.Seq] = fmt.Sprint(roster)
		}
		if next != nil {
			continue
		}
		if pend != nil {
			if e.Epoch != pend.Epoch {
				pend = nil
			} else if e.Seq == pend.Seq+uint64(h) {
				next, _ = pendC.Apply(roster)
				nextAt = e.Seq + 1
				pend = nil
			}
			continue
		}
		if cc, ok := exo.ParseConfigEntry(e); ok {
			if _, ok := cc.Apply(roster); ok {
				pend, pendC, h = e, cc, len(roster)/2
				if h == 0 {
					next, _ = pendC.Apply(roster)
					nextAt = e.Seq + 1
					pend = nil
				}
			}
		}
	}
	agreedEnd := uint64(len(c.entries))
	for seq, r := range c.switches {
		if seq == 0 || seq >= agreedEnd {
			continue // not agreed that far: nothing to compare with
		}
		if want, ok := points[seq]; !ok || want != r {
			c.violation("membership: host %d switched to %s at seq %d; the agreed log switches there to %q", c.switchBy[seq], r, seq, want)
		}
	}
	// A switch point no host reported is not a violation: a host that
	// adopts a log across two switches in one step reports the later one.
	c.Switches = len(points)
}

func diff(a, b []uint8) int {
	d := 0
	for _, x := range a {
		if !slices.Contains(b, x) {
			d++
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			d++
		}
	}
	return d
}
