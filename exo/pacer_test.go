package exo

import "testing"

// TestPacerDecide: the pace falls in proportion while the rack grew at
// less than the yield (at most halved), to a sixteenth of the ceiling at
// least, and rises by an eighth of the ceiling otherwise, to the ceiling; a
// rack that did not grow in the pauses decides nothing.
func TestPacerDecide(t *testing.T) {
	const ceil, yield = 1600, 80
	for _, c := range []struct {
		name              string
		pace, quiet, busy int
		want, wantRatio   int
	}{
		{"slowed, from the ceiling", 0, 1000, 500, 1000, 50},
		{"a little slowed", 800, 1000, 700, 700, 70},
		{"much slowed: halved", 800, 1000, 200, 400, 20},
		{"slowed, at the floor", 100, 1000, 500, 100, 50},
		{"slowed, near the floor", 120, 1000, 600, 100, 60},
		{"at the yield", 800, 1000, 800, 1000, 80},
		{"free, near the ceiling", 1500, 1000, 1000, 1600, 100},
		{"the rack idle in the pauses", 800, 0, 1000, 800, 0},
		{"nothing while transferring", 800, 1000, 0, 400, 1},
	} {
		p := pacer{pace: c.pace, quiet: c.quiet, busy: c.busy}
		p.decide(ceil, yield)
		if p.pace != c.want || p.ratio != c.wantRatio {
			t.Errorf("%s: pace %d, ratio %d; want %d, %d", c.name, p.pace, p.ratio, c.want, c.wantRatio)
		}
	}
}

// TestPacerPauses drives a transfer's pacer through its pauses on a node's
// clock: a rack that grows at half its pace while the transfer runs lowers
// the pace at each pause; a rack that hardly grows in a pause (idle, or
// unheard) raises it back to the ceiling.
func TestPacerPauses(t *testing.T) {
	const ceil, probe = 1000, 40
	nd, err := NewAmnesiacNode(Config{Hosts: 3, ID: 2, MaxFetchEntries: 4, TransferBytesPerTick: ceil, TransferYield: 80, TransferProbeTicks: probe})
	if err != nil {
		t.Fatal(err)
	}
	// run advances the clock by n ticks, the rack growing by busy entries
	// a tick while the transfer runs and by quiet in its pauses; a batch
	// every 4 ticks outside a pause.
	run := func(n, busy, quiet int) {
		for range n {
			nd.clock++
			if nd.transfer.pacer.probe > 0 {
				nd.rackSeq += uint64(quiet)
			} else {
				nd.rackSeq += uint64(busy)
			}
			t := &nd.transfer
			if t.wait > 0 {
				t.wait--
				nd.pacerTick(t.wait)
			} else if nd.clock%4 == 0 {
				t.wait = nd.pacerWait(0)
			}
		}
	}
	nd.rackSeq = 1
	stretch := (probeEvery + 1) * probe
	run(3*stretch, 2, 2) // a rack the transfer does not slow
	if got := nd.transferPace(); got != ceil || nd.transfer.pacer.ratio != 100 {
		t.Fatalf("a rack as fast while the transfer runs: pace %d (ratio %d%%), want the ceiling %d (100%%)", got, nd.transfer.pacer.ratio, ceil)
	}
	run(3*stretch, 1, 2) // at half its pace while the transfer runs
	low := nd.transferPace()
	if low >= ceil/2 || nd.transfer.pacer.ratio >= 80 {
		t.Fatalf("a rack at half its pace while the transfer ran: pace %d (ratio %d%%), want below %d", low, nd.transfer.pacer.ratio, ceil/2)
	}
	if run(40*stretch, 1, 2); nd.transferPace() != ceil/16 {
		t.Fatalf("a rack kept at half its pace: pace %d, want the floor %d", nd.transferPace(), ceil/16)
	}
	// An idle rack: nothing grows at all; the pace climbs back.
	run(20*stretch, 0, 0)
	if got := nd.transferPace(); got != ceil {
		t.Fatalf("an idle rack: pace %d (from %d), want the ceiling %d", got, low, ceil)
	}
}
