package exo

import (
	"slices"
	"testing"
	"time"
)

// TestDetectorEstimator: the RFC 6298 arithmetic in ticks, fixed point.
func TestDetectorEstimator(t *testing.T) {
	var d detector
	d.sample(2)
	if d.srtt != 2*detFrac || d.rttvar != detFrac || d.rto() != 2+4 {
		t.Fatalf("first sample 2: srtt %d rttvar %d rto %d, want 128 64 6", d.srtt, d.rttvar, d.rto())
	}
	for i := 0; i < 40; i++ {
		d.sample(2)
	}
	if d.srtt != 2*detFrac || d.rto() != 3 {
		t.Fatalf("steady gaps of 2: srtt %d rttvar %d rto %d, want 128, _, 3", d.srtt, d.rttvar, d.rto())
	}
	v := d.rttvar
	d.sample(10) // one late hop: the mean moves by 1/8 of it, the deviation by 1/4
	if d.srtt != 3*detFrac || d.rttvar != v+(8*detFrac-v)/4 || d.rto() != (3*detFrac+4*d.rttvar+detFrac-1)/detFrac {
		t.Fatalf("after a gap of 10: srtt %d rttvar %d rto %d", d.srtt, d.rttvar, d.rto())
	}
	if d.rto() < 10 {
		t.Fatalf("after a gap of 10 the timeout is %d ticks: a late hop must raise it above the gap", d.rto())
	}
	var z detector // gaps of 0 (several appends a tick): the floor of 1 tick
	for i := 0; i < 20; i++ {
		z.sample(0)
	}
	if z.rto() != 1 {
		t.Fatalf("gaps of 0: rto %d, want 1", z.rto())
	}
}

// TestTakeoverWaitGone: a host does not wait for the silence of a holder
// whose process is gone, nor for the turn of a host ranked before it whose
// process is gone; any message of a member clears its mark; GoneTicks 0
// ignores the notices.
func TestTakeoverWaitGone(t *testing.T) {
	for _, goneTicks := range []int{1, 0} {
		r := newRack(t, 5, func(c *Config) { c.TokenTimeout, c.TakeoverStagger, c.GoneTicks = 40, 20, goneTicks })
		d := r.nodes[3] // D: rank 3 after A (B 1, C 2)
		gone := func(u uint8) { d.Step(Message{Type: MsgGone, From: u, To: 3}) }
		want := func(what string, on, off int) {
			t.Helper()
			w := on
			if goneTicks == 0 {
				w = off
			}
			if got := d.takeoverWait(0); got != w {
				t.Errorf("gone_ticks %d, %s: D waits %d ticks on A, want %d", goneTicks, what, got, w)
			}
		}
		want("nobody gone", 80, 80)
		gone(3) // itself: ignored
		gone(9) // not a member: ignored
		want("notices about itself and a non-member", 80, 80)
		gone(1)
		want("B gone", 60, 80)
		gone(0)
		want("A and B gone", 1+20, 80)
		gone(2)
		want("A, B and C gone", 1, 80)
		d.Step(Message{Type: MsgHeld, From: 2, To: 3})
		want("C heard from again", 1+20, 80)
		if g := d.Detector().Gone; goneTicks > 0 && (len(g) != 2 || g[0] != 0 || g[1] != 1) {
			t.Errorf("Detector().Gone = %v, want [0 1]", g)
		}
	}
}

// TestDetectorPeak: the timeout covers half again the longest gap of the
// last one or two windows, and comes back to the mean and deviation's
// once two windows have passed without it.
func TestDetectorPeak(t *testing.T) {
	var d detector
	at := func(clock uint64, gap int) {
		d.sample(gap)
		d.notePeak(gap, clock)
	}
	for c := uint64(0); c < 100; c++ {
		at(c, 1)
	}
	if got := d.timeout(100); got != d.rto() || got > 3 {
		t.Fatalf("steady gaps of 1: timeout %d, want the rto (%d), at most 3", got, d.rto())
	}
	at(200, 20) // one stall
	if got, want := d.timeout(201), 20+10+1; got != want {
		t.Fatalf("after a gap of 20: timeout %d, want %d", got, want)
	}
	for c := uint64(300); c < 400; c++ {
		at(c, 1) // the mean settles back; the peak stays
	}
	if got := d.timeout(400); got != 31 {
		t.Fatalf("100 gaps of 1 after the stall: timeout %d, want 31 (the stall's)", got)
	}
	// The next window still remembers it (the window before)...
	at(peakWindow+5, 1)
	if got := d.timeout(peakWindow + 5); got != 31 {
		t.Fatalf("in the next window: timeout %d, want 31", got)
	}
	// ...the one after that does not.
	at(2*peakWindow+5, 1)
	if got := d.timeout(2*peakWindow + 5); got != d.rto() {
		t.Fatalf("two windows on: timeout %d, want the rto (%d)", got, d.rto())
	}
	// Windows with no sample at all forget it too.
	at(2*peakWindow+6, 30)
	if got := d.timeout(5 * peakWindow); got != d.rto() {
		t.Fatalf("three idle windows after a gap of 30: timeout %d, want the rto (%d)", got, d.rto())
	}
	if p := d.peakAt(2*peakWindow + 7); p != 30 {
		t.Fatalf("peakAt right after the gap of 30: %d", p)
	}
}

// TestDetectorRemembersBursts: the lab rack's stalls come in bursts 10-60
// s apart (a 10-minute run without faults, session v); the detector keeps
// a burst's gap for at least 32 s of the daemon's 250 us ticks, so the
// next burst finds the timeout still raised. Windows of 4 s forgot it and
// took the token over 4.4 times a minute where these took it over 0.3
// and 1.3.
func TestDetectorRemembersBursts(t *testing.T) {
	const tick = 250 * time.Microsecond
	var d detector
	for c := uint64(0); c < 100; c++ {
		d.sample(1)
		d.notePeak(1, c)
	}
	d.notePeak(40, 100) // a burst: 10 ms (a late frame's gap: the peak only)
	for c := uint64(101); c < 200; c++ {
		d.sample(1)
		d.notePeak(1, c)
	}
	if d.rto() >= 40 {
		t.Fatalf("the mean and deviation alone give %d ticks: the test needs them below the burst", d.rto())
	}
	for _, after := range []time.Duration{10 * time.Second, 30 * time.Second} {
		c := 100 + uint64(after/tick)
		if got := d.timeout(c); got < 40 {
			t.Fatalf("%v after a gap of 40 ticks: timeout %d ticks, want at least 40 (the burst remembered)", after, got)
		}
	}
}

// TestWaitsCountInTheCeiling: only the takeover (its timeout and
// stagger) and the retransmissions follow the timeout in force; the other
// waits counted in token timeouts count in the ceiling, whatever the
// detector says (following it doubled the lab rack's view changes, session
// w), but a left-out host's view change, which counts in the floor: at
// the daemon's default, a ceiling of 200 ticks, a halted host waited up to
// 6,400 ticks (1.6 s) before it asked the rack that went on without it to
// take it back (the simulator, seed 164 of 7 hosts with --lab-timing: still
// halted when the quiet phase ended). And NextTick wakes a host whose
// timeout a peak raised when the windows move on: its takeover may be due
// sooner from then on, and a daemon sleeping past it would take the token
// over late.
func TestWaitsCountInTheCeiling(t *testing.T) {
	const lo, hi = 40, 200
	cfg := func(min, max int) func(*Config) {
		return func(c *Config) {
			c.TokenTimeout, c.TokenTimeoutMin, c.TakeoverStagger, c.ViewChangeTimeout = max, min, 20, 800
		}
	}
	waits := func(nd *Node) []int {
		return []int{nd.probeInterval(0), nd.probeInterval(5), nd.laterSilence(), nd.neverBeganAfter(), nd.stuckAfter()}
	}
	adaptive := newRack(t, 5, cfg(lo, hi)).nodes[3]
	ceiling := newRack(t, 5, cfg(hi, hi)).nodes[3]
	floor := newRack(t, 5, cfg(lo, lo)).nodes[3]
	for range 50 {
		adaptive.det.sample(2)
	}
	if got, want := waits(adaptive), waits(ceiling); adaptive.tokenTimeout() != lo || !slices.Equal(got, want) {
		t.Fatalf("steady gaps of 2 ticks: timeout %d, waits %v; want %d and the ceiling's %v", adaptive.tokenTimeout(), got, lo, want)
	}
	if w := waits(ceiling); w[0] != hi || w[3] != hi+5*20+800 {
		t.Fatalf("waits %v: not the configured ones", w)
	}
	adaptive.leftOuts, floor.leftOuts, ceiling.leftOuts = 4, 4, 4
	if got, want := adaptive.leftOutAfter(), floor.leftOutAfter(); got != want || got != 2*lo<<4 || ceiling.leftOutAfter() != 2*hi<<4 {
		t.Fatalf("left-out wait after 4 of them: %d (adaptive), %d (fixed %d), %d (fixed %d); want %d, the floor's",
			got, want, lo, ceiling.leftOutAfter(), hi, 2*lo<<4)
	}
	if k := adaptive.untilPeakForgotten(); k != 0 {
		t.Fatalf("no peak: untilPeakForgotten %d, want 0", k)
	}
	adaptive.clock = 3*peakWindow + 100
	adaptive.det.notePeak(100, adaptive.clock) // a stall: the timeout rises to 151
	if got := adaptive.tokenTimeout(); got != 151 {
		t.Fatalf("after a stall of 100 ticks: timeout %d, want 151", got)
	}
	if k := adaptive.untilPeakForgotten(); k != peakWindow-100 {
		t.Fatalf("untilPeakForgotten %d, want %d (the window's end)", k, peakWindow-100)
	}
	adaptive.leaving = true // nothing else due: a leaving host neither sends nor probes
	if d := adaptive.NextTick(); d != peakWindow-100 {
		t.Fatalf("NextTick %d, want %d: the end of the window that holds the peak", d, peakWindow-100)
	}
	adaptive.leaving = false
	adaptive.clock += 2 * peakWindow // two windows on: forgotten
	if got := adaptive.tokenTimeout(); got != lo {
		t.Fatalf("two windows after the stall: timeout %d, want the floor %d", got, lo)
	}
}
