//go:build exo_broken_distinct || exo_broken_history

package sim

import "testing"

// TestCheckerCatchesBrokenCore runs only in a build whose core has one rule
// switched off on purpose (go test -tags exo_broken_distinct, or
// exo_broken_history): the simulator must find property violations, which
// shows that the checker bites.
func TestCheckerCatchesBrokenCore(t *testing.T) {
	for _, n := range []int{3, 5} {
		found := 0
		var first string
		for seed := uint64(1); seed <= 300 && found < 3; seed++ {
			s, err := New(DefaultOptions(n, seed))
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
			t.Fatalf("n=%d: the broken core passed 300 seeds: the checker does not bite", n)
		}
		if len(first) > 300 {
			first = first[:300] + "..."
		}
		t.Logf("n=%d: caught; first: %s", n, first)
	}
}
