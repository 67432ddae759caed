package exo

import "testing"

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
