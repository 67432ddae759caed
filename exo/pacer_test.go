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
