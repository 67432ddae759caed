//go:build exo_broken_distinct || exo_broken_history

package sim

import "testing"

// TestCheckerCatchesBrokenCore runs only in a build whose core has one rule
// switched off on purpose (go test -tags exo_broken_distinct, or
// exo_broken_history): the simulator must find property violations, which
// shows that the checker bites.
func TestCheckerCatchesBrokenCore(t *testing.T) {
	for _, c := range []struct {
		n      int
		roster float64
	}{{3, 0}, {5, 0}, {3, 0.02}, {5, 0.02}} {
		n := c.n
		found := 0
		var first string
		for seed := uint64(1); seed <= 300 && found < 3; seed++ {
			o := DefaultOptions(n, seed)
			o.RosterChanges = c.roster
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Run(); err != nil {
				if found == 0 {
					first = err.Error()
				}
				found++
			}
		}
		if found == 0 {
			t.Fatalf("n=%d roster-changes=%g: the broken core passed 300 seeds: the checker does not bite", n, c.roster)
		}
		if len(first) > 300 {
			first = first[:300] + "..."
		}
		t.Logf("n=%d roster-changes=%g: caught; first: %s", n, c.roster, first)
	}
}
