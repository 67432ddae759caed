package measure

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchScalingOutput draws the rack-size table and plot from made-up
// reports (the figures are not measurements).
func TestBenchScalingOutput(t *testing.T) {
	var reps []BenchReport
	for i, n := range []int{3, 5, 7} {
		e := AgreementFigures{Offload: "software", AgreeP50us: float64(300 + 50*i), AgreeP99us: 1000, UnbatchedRate: float64(12000 - 1000*i), BatchedRate: 70000}
		r := BenchReport{Hosts: n, RawOneWayP50us: 11, Offloads: []AgreementFigures{e}}
		if n != 7 {
			rf := RaftFigures{P50us: 200, P99us: 500, FollowerP50us: 300, Rate64: 20000, Rate512: 40000, BatchedRate: 300000, BatchMessages: 64}
			v := raftVsExo(e, rf)
			r.Raft, r.ExoOverRaft = &rf, &v
		}
		reps = append(reps, r)
	}
	var b strings.Builder
	say := func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) }
	sayScalingTable(say, reps)
	sayRaftTable(say, 5, reps[1].Offloads[0], *reps[1].Raft, *reps[1].ExoOverRaft)
	out := b.String()
	if !strings.Contains(out, "| 5 | 11.0 | 350 | 1000 | 200 | 500 | 1.75 | 11000 | 20000 | 0.55 | 70000 | 40000 | 1.75 | - | 300000 | 0.23 |") {
		t.Errorf("table:\n%s", out)
	}
	path := filepath.Join(t.TempDir(), "hosts.png")
	if err := benchPlot(reps, path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() < 1000 {
		t.Fatalf("plot: %v", err)
	}
	if err := benchPlot(reps, filepath.Join(t.TempDir(), "hosts.svg")); err == nil {
		t.Error("an .svg plot: no error")
	}
	med := medianFigures([]RaftFigures{{P50us: 3, Impl: "x"}, {P50us: 1}, {P50us: 2}})
	if med.P50us != 2 || med.Impl != "x" {
		t.Errorf("median: %+v", med)
	}
	t.Log(out)
}
