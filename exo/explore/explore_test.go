//go:build !exo_broken_distinct && !exo_broken_history

package explore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exo-rack/exo/exo"
)

func explore(t *testing.T, o Options) Result {
	t.Helper()
	r, err := Explore(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hosts=%d depth=%d: %v", o.Hosts, o.MaxDepth, r.String())
	if r.Violation != nil {
		if m, err := Minimize(r.Violation); err == nil {
			r.Violation = m
		}
		t.Fatalf("violation found; replay with Replay(ParseTrace(...)):\n%s", r.Violation)
	}
	return r
}

func wantEvents(t *testing.T, r Result, kinds ...exo.EventKind) {
	t.Helper()
	for _, k := range kinds {
		if r.Events[k] == 0 {
			t.Errorf("no %s event was reached", k)
		}
	}
}

// TestExplore3 explores every interleaving of a 3-host rack, two
// proposals and one forced broadcast, to depth 11.
func TestExplore3(t *testing.T) {
	o := Defaults(3)
	r := explore(t, o)
	if !r.Complete {
		t.Errorf("search incomplete (MaxStates %d)", o.MaxStates)
	}
	if r.States < 100_000 {
		t.Errorf("only %d states explored", r.States)
	}
	wantEvents(t, r, exo.EventTakeover, exo.EventViewChange, exo.EventInstalled, exo.EventDivergence,
		exo.EventGap, exo.EventRetransmit)
	if r.MaxAgreed < 2 || r.MaxEpoch == 0 {
		t.Errorf("maxAgreed=%d maxEpoch=%d: the search stayed shallow", r.MaxAgreed, r.MaxEpoch)
	}
}

// TestExplore4 does the same for 4 hosts (h = 2, a majority of 3).
func TestExplore4(t *testing.T) {
	o := Defaults(4)
	r := explore(t, o)
	if !r.Complete {
		t.Errorf("search incomplete (MaxStates %d)", o.MaxStates)
	}
	if r.States < 100_000 {
		t.Errorf("only %d states explored", r.States)
	}
	wantEvents(t, r, exo.EventTakeover, exo.EventViewChange, exo.EventInstalled, exo.EventDivergence)
}

// TestExploreFaults adds crashes (with and without state), drops,
// duplicates and compaction, at a smaller depth.
func TestExploreFaults(t *testing.T) {
	o := Defaults(3)
	o.MaxDepth = 7
	o.Restarts, o.Amnesia, o.Drops, o.Dups, o.Compacts = 1, 1, 1, 1, 1
	r := explore(t, o)
	if !r.Complete {
		t.Errorf("search incomplete (MaxStates %d)", o.MaxStates)
	}
	wantEvents(t, r, exo.EventViewChange, exo.EventInstalled)
}

// TestExploreGone delivers gone notices (MsgGone) about a host, rightly
// (after its crash) or wrongly (it runs): a takeover they set off early
// must never break agreement.
func TestExploreGone(t *testing.T) {
	o := Defaults(3)
	o.MaxDepth = 8
	o.Gones, o.Restarts = 1, 1
	r := explore(t, o)
	if !r.Complete {
		t.Errorf("search incomplete (MaxStates %d)", o.MaxStates)
	}
	wantEvents(t, r, exo.EventTakeover, exo.EventViewChange, exo.EventInstalled)
}

// TestExploreExported runs with the exported-API fingerprint: it merges
// states that differ in hidden fields, so it explores fewer of them.
func TestExploreExported(t *testing.T) {
	o := Defaults(3)
	o.MaxDepth = 9
	o.Fingerprint = FingerprintExported
	deep := o
	deep.Fingerprint = FingerprintDeep
	re, rd := explore(t, o), explore(t, deep)
	if re.States > rd.States {
		t.Errorf("exported fingerprint kept %d states, deep %d: it should merge more", re.States, rd.States)
	}
}

// TestDeterministic: a run is a function of its options.
func TestDeterministic(t *testing.T) {
	o := Defaults(3)
	o.MaxDepth, o.Seed = 8, 7
	a, b := explore(t, o), explore(t, o)
	if a.States != b.States || a.Transitions != b.Transitions || a.Pruned != b.Pruned {
		t.Errorf("two runs differ: %v / %v", a.String(), b.String())
	}
}

// TestReplayExamples replays, from text, the first path that reached each
// event kind, and checks that a step that does not fit is refused.
func TestReplayExamples(t *testing.T) {
	o := Defaults(3)
	o.MaxDepth = 7
	o.Restarts, o.Amnesia, o.Compacts = 1, 1, 1
	r := explore(t, o)
	if len(r.Examples) < 4 {
		t.Fatalf("only %d event kinds reached", len(r.Examples))
	}
	for k, tr := range r.Examples {
		text := tr.String()
		back, err := ParseTrace(text)
		if err != nil {
			t.Fatalf("%s: %v\n%s", k, err, text)
		}
		if back.String() != text {
			t.Fatalf("%s: the trace does not survive a round trip:\n%s\n---\n%s", k, text, back)
		}
		var out strings.Builder
		v, err := Replay(back, &out)
		if err != nil || v != nil {
			t.Fatalf("%s: replay: violation=%v err=%v\n%s", k, v, err, text)
		}
		if !strings.Contains(out.String(), "event "+k.String()) {
			t.Errorf("%s: the replay does not show the event:\n%s", k, out.String())
		}
	}
	tr := r.Examples[exo.EventInstalled]
	bad := *tr
	bad.Steps = append([]Step{{Op: OpDeliver, Item: "frame 0->1 #7 e0 by0 h[X] -"}}, tr.Steps...)
	if _, err := Replay(&bad, nil); !errors.Is(err, ErrBadTrace) {
		t.Errorf("replay of a trace with an item never sent: %v, want ErrBadTrace", err)
	}
}

func TestOptionsChecked(t *testing.T) {
	for _, o := range []Options{{Hosts: 0, MaxDepth: 5, MaxStates: 10}, {Hosts: 3, MaxDepth: 0, MaxStates: 10},
		{Hosts: 3, MaxDepth: 5}, {Hosts: 3, MaxDepth: 5, MaxStates: 10, Proposals: 65}} {
		if _, err := Explore(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestReplayFile replays a trace file with a step-by-step account:
//
//	EXO_EXPLORE_TRACE=/tmp/cex.trace go test ./exo/explore -run ReplayFile -v
func TestReplayFile(t *testing.T) {
	path := os.Getenv("EXO_EXPLORE_TRACE")
	if path == "" {
		t.Skip("set EXO_EXPLORE_TRACE to a trace file")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ParseTrace(string(b))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	v, err := Replay(tr, &out)
	t.Logf("replay of %s:\n%s", path, out.String())
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		m, err := Minimize(tr)
		if err == nil && len(m.Steps) < len(tr.Steps) {
			t.Logf("minimised to %d steps:\n%s", len(m.Steps), m)
		}
		t.Fatalf("violation: %v", v)
	}
}

// knownOpen lists the counterexamples in testdata/ that the core does not
// pass yet (see docs/explore.md, "Findings"). They are replayed and logged,
// not failed, unless EXO_EXPLORE_STRICT=1; once one replays clean it should
// leave this list and become a plain regression trace.
var knownOpen = map[string]bool{}

// TestRegressionTraces replays every trace in testdata/: none may show a
// violation.
func TestRegressionTraces(t *testing.T) {
	files, err := filepath.Glob("testdata/*.trace")
	if err != nil {
		t.Fatal(err)
	}
	strict := os.Getenv("EXO_EXPLORE_STRICT") == "1"
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := ParseTrace(string(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		v, err := Replay(tr, nil)
		name := filepath.Base(f)
		switch {
		case knownOpen[name] && !strict:
			if err != nil || v == nil {
				t.Logf("%s: known-open counterexample no longer shows a violation (err=%v): take it off knownOpen", name, err)
			} else {
				t.Logf("%s: KNOWN OPEN core bug, still reproduces: %v", name, v)
			}
		case err != nil:
			t.Errorf("%s: %v (regenerate the trace if the wire format changed)", name, err)
		case v != nil:
			t.Errorf("%s: %v", name, v)
		}
	}
}

// BenchmarkExplore3 measures one complete depth-7 search of 3 hosts.
func BenchmarkExplore3(b *testing.B) {
	o := Defaults(3)
	o.MaxDepth = 7
	var states int
	for b.Loop() {
		r, err := Explore(o)
		if err != nil || r.Violation != nil {
			b.Fatal(err, r.Violation)
		}
		states = r.States
	}
	b.ReportMetric(float64(states), "states/op")
}

// TestExploreDetector explores a 3-host rack whose token timeout adapts
// (exo/detector.go) between 1 and 3 ticks: every interleaving of appends
// moves the estimate, and takeovers come at every timeout it can give.
func TestExploreDetector(t *testing.T) {
	o := Defaults(3)
	o.Config.TokenTimeout, o.Config.TokenTimeoutMin = 3, 1
	o.MaxDepth = 9
	r := explore(t, o)
	if !r.Complete {
		t.Errorf("search incomplete (MaxStates %d)", o.MaxStates)
	}
	wantEvents(t, r, exo.EventTakeover, exo.EventViewChange, exo.EventInstalled)
}
