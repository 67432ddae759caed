package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
)

// Figures is a distribution of times in milliseconds (nearest-rank
// percentiles).
type Figures struct {
	Count   int       `json:"count"`
	P50     float64   `json:"p50_ms"`
	P90     float64   `json:"p90_ms"`
	P99     float64   `json:"p99_ms"`
	Max     float64   `json:"max_ms"`
	Samples []float64 `json:"samples_ms,omitempty"`
}

// FiguresOf sums up the times v (ms).
func FiguresOf(v []float64) Figures {
	if len(v) == 0 {
		return Figures{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	q := func(p float64) float64 { return s[max(int(math.Ceil(p*float64(len(s))))-1, 0)] }
	return Figures{Count: len(s), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: s[len(s)-1], Samples: v}
}

// String is "count p50 / p90 / p99 / max" in ms.
func (f Figures) String() string {
	if f.Count == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%4d  %8.1f %8.1f %8.1f %8.1f", f.Count, f.P50, f.P90, f.P99, f.Max)
}

// KindFigures is what a chaos run measured for one kind of action: the
// time from the action until agreement moved again at every host that
// must move (see [ChaosReport.Recovery]).
type KindFigures struct {
	// Moving: action -> agreement moving again at every host that must.
	Moving Figures `json:"moving"`
	// Stall: of the same measurements, the longest a host that must move
	// went without its agreement pointer advancing, from the action until
	// it moved again (the hold the action caused, without the entries
	// that "moving again" waits for).
	Stall Figures `json:"stall"`
	// Apply: how long applying the action took (nft run, kill and wait,
	// daemon start); the fault took effect within it, and the action's
	// time is taken at its end.
	Apply Figures `json:"apply"`
	// CutShort: the next action came before every host moved (its own
	// figures are how long after the action that was: a lower bound).
	CutShort Figures `json:"cut_short_by_next_action"`
	// NoMajority: no connected majority of live hosts after the action,
	// so nothing had to move.
	NoMajority int `json:"no_connected_majority"`
	// TimedOut: not every host moved within the limit (10 s).
	TimedOut int `json:"timed_out"`
}

// kindRaw collects a kind's times during the run.
type kindRaw struct {
	moving, stall        []float64
	apply, cut           []float64
	noMajority, timedOut int
}

func (k *kindRaw) figures() KindFigures {
	return KindFigures{Moving: FiguresOf(k.moving), Stall: FiguresOf(k.stall), Apply: FiguresOf(k.apply), CutShort: FiguresOf(k.cut),
		NoMajority: k.noMajority, TimedOut: k.timedOut}
}

// Resolution says how finely the run saw agreement move.
type Resolution struct {
	// AdvanceP50Ms, AdvanceP99Ms: the interval between two advances of a
	// host's agreement pointer as its subscriber saw them, while it moved
	// (intervals under 50 ms): "moving again" is seen within about one.
	AdvanceP50Ms float64 `json:"advance_interval_p50_ms"`
	AdvanceP99Ms float64 `json:"advance_interval_p99_ms"`
	// MarginEntries: an action's hosts count as moving again once they
	// deliver an entry this far past the rack's agreement pointer at the
	// action (h + n: every host's turn came once after it).
	MarginEntries int `json:"margin_entries"`
	// StatusDialMs, StatusConnMs: what one status read over the local API
	// costs, with a new connection (as Cluster.Status) and on an open one
	// (p50 of 50 reads at the start, under load).
	StatusDialMs float64 `json:"status_call_dial_ms"`
	StatusConnMs float64 `json:"status_call_open_conn_ms"`
	// Resubscribes: subscriptions ended by an error other than the host's
	// death (ErrTooSlow, ...) and opened again.
	Resubscribes int `json:"resubscribes"`
}

// TakeoverCounts are the daemons' counters summed over the hosts for the
// nemesis phase (a killed daemon's read just before the kill).
type TakeoverCounts struct {
	Seconds     float64 `json:"seconds"`
	Takeovers   uint64  `json:"takeovers"`    // status counters.takeovers (exo_token_takeovers_total)
	ViewChanges uint64  `json:"view_changes"` // status counters.view_changes (exo_view_changes_total): started
	// FalseTakeovers is the daemons' own count of takeovers that passed a
	// running host over (status detector.false_takeovers, or a
	// false_takeovers field or counter); nil when the daemons do not
	// report it.
	FalseTakeovers *uint64 `json:"false_takeovers"`
	// LateFrames is the daemons' count of frames of holders passed over
	// by a takeover, heard after it (status detector.late_frames: false
	// takeovers seen by any host); nil when the daemons do not report it.
	LateFrames *uint64 `json:"late_frames,omitempty"`
	// Fsyncs is the daemons' durable-log fsyncs (status counters.wal_fsyncs,
	// exo_wal_fsyncs_total; 0 when the daemons do not count them).
	Fsyncs uint64 `json:"wal_fsyncs"`
	// ViewChangeCauses splits ViewChanges by cause (status
	// counters.view_change_causes.<cause>, exo_view_change_causes_total):
	// which waits set them off.
	ViewChangeCauses map[string]uint64 `json:"view_change_causes,omitempty"`
}

// PerMinute is n per minute of the counted time.
func (t TakeoverCounts) PerMinute(n uint64) float64 {
	if t.Seconds <= 0 {
		return 0
	}
	return float64(n) * 60 / t.Seconds
}

// counterSet is what is read of one host's counters.
type counterSet struct {
	takeovers, viewChanges, falseTakeovers, fsyncs uint64
	hasFalse                                       bool
	lateFrames                                     uint64
	hasLate                                        bool
	causes                                         map[string]uint64 // view changes by cause
}

// causePrefix is the status counters' prefix of the view changes by cause.
const causePrefix = "view_change_causes."

// causesOf picks the view changes by cause out of a status's counters
// (nil when there are none).
func causesOf(counters map[string]uint64) map[string]uint64 {
	var out map[string]uint64
	for k, v := range counters {
		if c, ok := strings.CutPrefix(k, causePrefix); ok && v > 0 {
			if out == nil {
				out = map[string]uint64{}
			}
			out[c] = v
		}
	}
	return out
}

func (a *counterSet) add(b counterSet) {
	a.takeovers += b.takeovers
	a.viewChanges += b.viewChanges
	for c, n := range b.causes {
		if a.causes == nil {
			a.causes = map[string]uint64{}
		}
		a.causes[c] += n
	}
	a.fsyncs += b.fsyncs
	a.falseTakeovers += b.falseTakeovers
	a.hasFalse = a.hasFalse || b.hasFalse
	a.lateFrames += b.lateFrames
	a.hasLate = a.hasLate || b.hasLate
}

// statusFull reads host i's status, and its counters including the
// false-takeover count wherever the daemon puts it (detector.false_takeovers,
// a top-level false_takeovers field or a counter of that name); a daemon
// without one leaves hasFalse unset.
func (c *Cluster) statusFull(ctx context.Context, i int) (daemon.Status, counterSet, error) {
	var st daemon.Status
	var cs counterSet
	cl, err := client.Dial(ctx, c.Socket(i))
	if err != nil {
		return st, cs, err
	}
	defer cl.Close()
	raw, err := cl.StatusRaw(ctx)
	if err != nil {
		return st, cs, err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, cs, err
	}
	cs.takeovers, cs.viewChanges, cs.fsyncs = st.Counters["takeovers"], st.Counters["view_changes"], st.Counters["wal_fsyncs"]
	cs.causes = causesOf(st.Counters)
	if v, ok := st.Counters["false_takeovers"]; ok {
		cs.falseTakeovers, cs.hasFalse = v, true
	}
	var top struct {
		False    *uint64 `json:"false_takeovers"`
		Detector struct {
			False *uint64 `json:"false_takeovers"`
			Late  *uint64 `json:"late_frames"`
		} `json:"detector"`
	}
	if json.Unmarshal(raw, &top) == nil {
		if v := top.Detector.Late; v != nil {
			cs.lateFrames, cs.hasLate = *v, true
		}
		for _, v := range []*uint64{top.False, top.Detector.False} {
			if v != nil {
				cs.falseTakeovers, cs.hasFalse = *v, true
			}
		}
	}
	return st, cs, nil
}

// statusCost times 50 status reads of host i with a new connection each
// and 50 on one open connection; it returns the p50 of each in ms.
func (c *Cluster) statusCost(ctx context.Context, i int) (dial, conn float64) {
	var a, b []float64
	for k := 0; k < 50; k++ {
		t := time.Now()
		if _, err := c.Status(ctx, i); err == nil {
			a = append(a, ms(time.Since(t)))
		}
	}
	if cl, err := client.Dial(ctx, c.Socket(i)); err == nil {
		for k := 0; k < 50; k++ {
			t := time.Now()
			raw, err := cl.StatusRaw(ctx)
			var st daemon.Status
			if err == nil && json.Unmarshal(raw, &st) == nil {
				b = append(b, ms(time.Since(t)))
			}
		}
		cl.Close()
	}
	return FiguresOf(a).P50, FiguresOf(b).P50
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// mustMove returns the hosts that must move under conn: those in every
// largest set of live hosts that reach each other both ways, when such a
// set is a majority (the protocol's liveness condition); nil when there is
// none. With no fault that is every live host; with a two-way partition,
// the majority side; with a one-way cut A->B, every host but A and B
// (either of them may be left out).
func mustMove(conn [][]bool) []int {
	n := len(conn)
	if n > 20 {
		return nil
	}
	adj := make([]int, n) // hosts a reaches both ways, itself included if live
	for a := 0; a < n; a++ {
		if !conn[a][a] {
			continue
		}
		adj[a] |= 1 << a
		for b := 0; b < n; b++ {
			if a != b && conn[a][b] && conn[b][a] && conn[b][b] {
				adj[a] |= 1 << b
			}
		}
	}
	best, inter := 0, 0
	for set := 1; set < 1<<n; set++ {
		k := popcount(set)
		if k < best {
			continue
		}
		clique := true
		for a := 0; a < n && clique; a++ {
			if set&(1<<a) != 0 && set&^adj[a] != 0 {
				clique = false
			}
		}
		if !clique {
			continue
		}
		if k > best {
			best, inter = k, set
		} else {
			inter &= set
		}
	}
	if best < exo.Majority(n) {
		return nil
	}
	var out []int
	for a := 0; a < n; a++ {
		if inter&(1<<a) != 0 {
			out = append(out, a)
		}
	}
	return out
}

const (
	// gapMin: stalls of the rack's agreement pointer kept for the
	// view-change holds.
	gapMin = time.Millisecond
	// histBucket, histMax: the histogram of a host's advance intervals.
	histBucket = 10 * time.Microsecond
	histMax    = 50 * time.Millisecond
)

// tracker follows every host's agreed stream with a subscriber from its
// current position and sees each advance of a host's agreement pointer
// when the message arrives: the clock of the recovery figures.
type tracker struct {
	c      *Cluster
	start  time.Time
	margin uint64
	dead   func(int) bool
	kick   []chan struct{}

	mu       sync.Mutex
	last     []uint64
	have     []bool
	hostAt   []time.Time
	frontier uint64
	advanced time.Duration
	started  bool
	gaps     [][2]time.Duration // stalls of the rack's agreement pointer >= gapMin
	hist     []int
	waits    map[*moveWait]bool
	resubs   int
}

func newTracker(c *Cluster, start time.Time, dead func(int) bool) *tracker {
	n := len(c.Rack.Hosts)
	t := &tracker{c: c, start: start, dead: dead, margin: uint64(exo.HistoryLen(n) + n),
		last: make([]uint64, n), have: make([]bool, n), hostAt: make([]time.Time, n),
		hist: make([]int, histMax/histBucket), waits: map[*moveWait]bool{}}
	for range n {
		t.kick = append(t.kick, make(chan struct{}, 1))
	}
	return t
}

// run follows every host until ctx ends.
func (t *tracker) run(ctx context.Context) {
	var wg sync.WaitGroup
	for h := range t.kick {
		wg.Add(1)
		go func() { defer wg.Done(); t.follow(ctx, h) }()
	}
	wg.Wait()
}

// wake tells host h's follower that its daemon is up again.
func (t *tracker) wake(h int) {
	select {
	case t.kick[h] <- struct{}{}:
	default:
	}
}

// follow subscribes to host h from its agreement pointer, again after
// every end of the stream (the daemon killed: once it is restarted).
func (t *tracker) follow(ctx context.Context, h int) {
	for ctx.Err() == nil {
		if t.dead(h) {
			select {
			case <-ctx.Done():
				return
			case <-t.kick[h]:
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		st, err := t.c.Status(ctx, h)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Millisecond):
			}
			continue
		}
		from := st.Agreed
		t.mu.Lock()
		if t.have[h] && t.last[h]+1 > from {
			from = t.last[h] + 1
		}
		t.hostAt[h] = time.Time{}
		t.mu.Unlock()
		err = client.Subscribe(ctx, t.c.Socket(h), from, func(m client.Message) error {
			t.seen(h, m.Seq, time.Now())
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if api := (*client.APIError)(nil); errors.As(err, &api) {
			t.mu.Lock()
			t.resubs++
			t.mu.Unlock()
		}
		time.Sleep(time.Millisecond)
	}
}

// seen notes that host h delivered a message of entry seq at now.
func (t *tracker) seen(h int, seq uint64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.have[h] && seq <= t.last[h] {
		return
	}
	if !t.hostAt[h].IsZero() {
		if d := now.Sub(t.hostAt[h]); d < histMax {
			t.hist[d/histBucket]++
		}
	}
	t.last[h], t.have[h], t.hostAt[h] = seq, true, now
	if seq > t.frontier || !t.started {
		at := now.Sub(t.start)
		if t.started && at-t.advanced >= gapMin {
			t.gaps = append(t.gaps, [2]time.Duration{t.advanced, at})
		}
		t.frontier, t.advanced, t.started = max(seq, t.frontier), at, true
	}
	for w := range t.waits {
		w.seen(h, seq, now)
	}
}

// moveWait is one action's measurement: the time until every host of must
// delivered an entry at or past target (agreement moving again), and
// until each moved at all (past what it had delivered at the action).
type moveWait struct {
	kind    string
	t0      time.Time
	target  uint64
	must    []int
	base    map[int]uint64
	reached map[int]time.Time
	moved   map[int]time.Time
	lastAt  map[int]time.Time     // each host's last advance (t0 at first)
	stall   map[int]time.Duration // its longest time without one until it reached the target
	done    chan struct{}
	closed  bool
}

func (w *moveWait) seen(h int, seq uint64, now time.Time) {
	if _, ok := w.reached[h]; !ok {
		if d := now.Sub(w.lastAt[h]); d > w.stall[h] {
			w.stall[h] = d
		}
		w.lastAt[h] = now
	}
	if _, ok := w.moved[h]; !ok && seq > w.base[h] {
		w.moved[h] = now
	}
	if _, ok := w.reached[h]; !ok && seq >= w.target {
		w.reached[h] = now
		w.check()
	}
}

// check closes done once every host that must has reached the target.
func (w *moveWait) check() {
	if w.closed || w.must == nil {
		return
	}
	for _, h := range w.must {
		if _, ok := w.reached[h]; !ok {
			return
		}
	}
	w.closed = true
	close(w.done)
}

// begin starts the measurement of an action of kind that took effect at
// t0 (now, or just before the call that applied it): it notes the rack's
// agreement pointer and every host's, and from then on when each host moves
// and reaches the target. commit names the hosts that must.
func (t *tracker) begin(kind string, t0 time.Time) *moveWait {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := &moveWait{kind: kind, t0: t0, target: t.frontier + t.margin,
		base: map[int]uint64{}, reached: map[int]time.Time{}, moved: map[int]time.Time{}, done: make(chan struct{}),
		lastAt: map[int]time.Time{}, stall: map[int]time.Duration{}}
	for h := range t.last {
		w.base[h], w.lastAt[h] = t.last[h], t0
	}
	t.waits[w] = true
	return w
}

// commit sets the hosts that must move for w (nil: none, the measurement
// is dropped).
func (t *tracker) commit(w *moveWait, must []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if must == nil {
		delete(t.waits, w)
		return
	}
	w.must = must
	w.check()
}

// end stops measurement w and returns the time until every host reached
// its target and the longest stall of one (ok) or, if not all did, the
// hosts that had not moved at all.
func (t *tracker) end(w *moveWait) (float64, float64, bool, []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.waits, w)
	if w.closed {
		last := w.t0
		var stall time.Duration
		for _, h := range w.must {
			if at := w.reached[h]; at.After(last) {
				last = at
			}
			stall = max(stall, w.stall[h])
		}
		return ms(last.Sub(w.t0)), ms(stall), true, nil
	}
	var still []int
	for _, h := range w.must {
		if _, ok := w.moved[h]; !ok {
			still = append(still, h)
		}
	}
	return 0, 0, false, still
}

// resolution sums up the advance intervals.
func (t *tracker) resolution() Resolution {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := 0
	for _, k := range t.hist {
		total += k
	}
	q := func(p float64) float64 {
		if total == 0 {
			return 0
		}
		want := int(math.Ceil(p * float64(total)))
		acc := 0
		for i, k := range t.hist {
			acc += k
			if acc >= want {
				return ms(time.Duration(i+1) * histBucket)
			}
		}
		return ms(histMax)
	}
	return Resolution{AdvanceP50Ms: q(0.5), AdvanceP99Ms: q(0.99), MarginEntries: int(t.margin), Resubscribes: t.resubs}
}

// viewChangeHolds matches every epoch installed during the run (first
// seen by the watcher in a sample at installs[i][1], whose previous sample
// of that host was at installs[i][0]) with the longest stall of the rack's
// agreement pointer (the streams' gaps, at ms resolution) that overlaps
// that window: the hold of that view change. Stalls held by several view
// changes (duels) count once. It returns the holds in ms, the part of
// each during which a connected majority of live hosts existed (spans:
// what a hold without one waits for, no protocol can shorten), in ms, and
// how many installs overlapped no stall of gapMin or more.
func viewChangeHolds(gaps, installs [][2]time.Duration, spans []faultSpan) ([]float64, []float64, int) {
	used := map[int]bool{}
	unheld := 0
	const slack = 5 * time.Millisecond
	for _, in := range installs {
		from, to := in[0]-slack, in[1]+slack
		i := sort.Search(len(gaps), func(i int) bool { return gaps[i][1] >= from })
		best := -1
		for ; i < len(gaps) && gaps[i][0] <= to; i++ {
			if best < 0 || gaps[i][1]-gaps[i][0] > gaps[best][1]-gaps[best][0] {
				best = i
			}
		}
		if best < 0 {
			unheld++
			continue
		}
		used[best] = true
	}
	var out, withMajority []float64
	for _, i := range slices.Sorted(func(yield func(int) bool) {
		for i := range used {
			if !yield(i) {
				return
			}
		}
	}) {
		out = append(out, ms(gaps[i][1]-gaps[i][0]))
		maj, _ := majorityTime(spans, gaps[i][0], gaps[i][1])
		withMajority = append(withMajority, maj*1000)
	}
	return out, withMajority, unheld
}

// recoveryKinds is the order the summary lists the kinds in.
var recoveryKinds = []string{"kill", "heal-kill", "restart", "wipe", "rejoin", "partition", "seed-split", "one-way",
	"host-cut-ingress", "host-cut-egress", "loss", "heal", "none"}

// recoveryTable is the summary's table of the recovery figures.
func recoveryTable(rec map[string]KindFigures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-17s %4s  %8s %8s %8s %8s   %s", "action", "n", "p50", "p90", "p99", "max", "stall p50 / max; not measured (cut short by the next action / no connected majority / over 10 s); applying it p50")
	kinds := slices.Clone(recoveryKinds)
	for k := range rec {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		f, ok := rec[k]
		if !ok {
			continue
		}
		mv := f.Moving.String()
		if f.Moving.Count == 0 {
			mv = fmt.Sprintf("%4d  %8s %8s %8s %8s", 0, "-", "-", "-", "-")
		}
		fmt.Fprintf(&b, "\n%-17s %s   %.1f / %.1f; %d / %d / %d; %.1f ms", k, mv, f.Stall.P50, f.Stall.Max, f.CutShort.Count, f.NoMajority, f.TimedOut, f.Apply.P50)
	}
	return b.String()
}
