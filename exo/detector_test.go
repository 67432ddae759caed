package exo

import (
	"fmt"
	"testing"
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

// detRack is a rack on a perfect network where hosts can be down: every
// frame and message reaches every live host before the next tick.
type detRack struct {
	nodes  []*Node
	down   map[int]bool
	events map[EventKind]int
	agreed []uint64
}

func newDetRack(t *testing.T, n int, mod func(*Config)) *detRack {
	r := &detRack{down: map[int]bool{}, events: map[EventKind]int{}, agreed: make([]uint64, n)}
	for i := 0; i < n; i++ {
		c := Config{ID: uint8(i), Hosts: n, Group: 1, TokenTimeout: 40, TakeoverStagger: 20, RetransmitTicks: 12,
			ViewChangeTimeout: 800, RejoinTicks: 400, FetchTicks: 20}
		mod(&c)
		nd, err := NewNode(c)
		if err != nil {
			t.Fatal(err)
		}
		r.nodes = append(r.nodes, nd)
	}
	return r
}

// settle delivers everything in flight among the live hosts.
func (r *detRack) settle() {
	for k := 0; k < 1000; k++ {
		busy := false
		for i, nd := range r.nodes {
			if r.down[i] || !nd.HasReady() {
				continue
			}
			busy = true
			rd := nd.Ready()
			for _, e := range rd.Events {
				r.events[e.Kind]++
			}
			r.agreed[i] += uint64(len(rd.Agreed))
			frames := append([]Frame(nil), rd.Frames...)
			msgs := append([]Message(nil), rd.Messages...)
			nd.Advance()
			for _, f := range frames {
				for b, x := range r.nodes {
					if b != i && !r.down[b] {
						fc := f
						x.StepFrame(&fc)
					}
				}
			}
			for _, m := range msgs {
				if !r.down[int(m.To)] {
					r.nodes[m.To].Step(m)
				}
			}
		}
		if !busy {
			return
		}
	}
}

// tick ticks every live host once, each with one proposal when load.
func (r *detRack) tick(load bool) {
	for i, nd := range r.nodes {
		if r.down[i] {
			continue
		}
		if load {
			_ = nd.Propose([]byte(fmt.Sprintf("m%d", i)))
		}
		nd.Tick()
		r.settle()
	}
}

// TestAdaptiveTakeover: under a steady load the gaps between appends are
// short, so after the holder's crash the token is taken over after the
// floor of the adaptive timeout, not after TokenTimeout; with the
// detector off (TokenTimeoutMin 0), after TokenTimeout. No false takeover
// before the crash, and agreement moves on after it.
func TestAdaptiveTakeover(t *testing.T) {
	for _, tc := range []struct {
		min, wantMax int
	}{{4, 4 + 2}, {0, 40 + 2}} {
		t.Run(fmt.Sprint("min=", tc.min), func(t *testing.T) {
			r := newDetRack(t, 5, func(c *Config) { c.TokenTimeoutMin = tc.min })
			for i := 0; i < 50; i++ { // the rack starts: the first frames are takeovers
				r.tick(true)
			}
			r.events = map[EventKind]int{}
			for i := 0; i < 60; i++ {
				r.tick(true)
			}
			if r.events[EventTakeover] != 0 || r.events[EventSkippedAlive] != 0 {
				t.Fatalf("before the crash: %d takeovers, %d false takeovers", r.events[EventTakeover], r.events[EventSkippedAlive])
			}
			if d := r.nodes[0].Detector(); tc.min > 0 && (d.Samples == 0 || d.Timeout != tc.min) {
				t.Fatalf("detector %+v: want samples and the floor %d in force", d, tc.min)
			}
			holder := int(r.nodes[0].Holder())
			r.down[holder] = true
			before := r.agreed[(holder+1)%5]
			ticks := 0
			for ; r.events[EventTakeover] == 0 && ticks < 200; ticks++ {
				r.tick(false)
			}
			if ticks > tc.wantMax {
				t.Errorf("holder %d down: the token was taken over after %d ticks, want <= %d", holder, ticks, tc.wantMax)
			}
			for i := 0; i < 10; i++ {
				r.tick(true)
			}
			if after := r.agreed[(holder+1)%5]; after <= before {
				t.Errorf("agreement did not move after the takeover (%d entries delivered before, %d after)", before, after)
			}
			t.Logf("min %d: takeover %d ticks after the holder's crash", tc.min, ticks)
		})
	}
}
