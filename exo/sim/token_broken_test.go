//go:build exo_broken_token

package sim

import "testing"

// TestCheckerCatchesBrokenToken runs only in a build whose token-mode
// control plane skips the quiesce before an OOB message (go test -tags
// exo_broken_token): the fast path then goes on accepting and sending
// while the core promises a view change. The simulator must find property
// violations, which shows that it checks the hand-off.
func TestCheckerCatchesBrokenToken(t *testing.T) {
	for _, n := range []int{3, 5} {
		found := 0
		var first string
		for seed := uint64(1); seed <= 300 && found < 3; seed++ {
			o := DefaultOptions(n, seed)
			o.Token = true
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
			t.Fatalf("n=%d: the broken hand-off passed 300 seeds: the checker does not bite", n)
		}
		if len(first) > 300 {
			first = first[:300] + "..."
		}
		t.Logf("n=%d: caught; first: %s", n, first)
	}
}
