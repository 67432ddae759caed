//go:build exo_broken_distinct || exo_broken_history

package explore

import "testing"

// checkBroken runs the default exploration on a core built with one rule
// broken and requires a violation of the given kind, a trace that replays
// from its text, and a minimised trace no longer than the original.
func checkBroken(t *testing.T, hosts int, kind string) {
	t.Helper()
	o := Defaults(hosts)
	o.MaxDepth++ // a divergence's view change waits a stagger at all hosts but one (diverged): the shortest path to a broken core's violation is a step longer
	r, err := Explore(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v", r.String())
	if r.Violation == nil {
		t.Fatalf("the broken core was not caught")
	}
	v := r.Violation.Violation
	if v.Kind != kind {
		t.Fatalf("violation %v, want kind %q", v, kind)
	}
	back, err := ParseTrace(r.Violation.String())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Replay(back, nil)
	if err != nil || got == nil || got.Kind != kind || got.Step != len(back.Steps)-1 {
		t.Fatalf("replay: %v, %v; want %v at the last step", got, err, v)
	}
	m, err := Minimize(back)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Steps) > len(back.Steps) || m.Violation == nil || m.Violation.Kind != kind {
		t.Fatalf("minimised trace: %d steps (from %d), %v", len(m.Steps), len(back.Steps), m.Violation)
	}
	t.Logf("counterexample, %d steps (minimised from %d):\n%s", len(m.Steps), len(back.Steps), m)
}
