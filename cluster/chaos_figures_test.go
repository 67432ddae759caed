package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/lab"
)

// TestMustMove: the hosts that must move after an action are those in
// every largest set of live hosts that reach each other both ways, when
// it is a majority.
func TestMustMove(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults lab.Faults
		dead   map[int]bool
		want   []int
	}{
		{"no fault", lab.Faults{}, nil, []int{0, 1, 2, 3, 4}},
		{"loss is no cut", lab.Faults{Loss: map[int]float64{2: 0.2}}, nil, []int{0, 1, 2, 3, 4}},
		{"kill", lab.Faults{}, map[int]bool{3: true}, []int{0, 1, 2, 4}},
		{"partition: the majority side", lab.Faults{Groups: [][]int{{0, 1}, {2, 3, 4}}}, nil, []int{2, 3, 4}},
		{"partition and a kill on the majority side", lab.Faults{Groups: [][]int{{0, 1}, {2, 3, 4}}}, map[int]bool{4: true}, nil},
		{"one-way cut: either end may be left out", lab.Faults{OneWay: []lab.OneWayCut{{From: []int{0}, To: []int{1}}}}, nil, []int{2, 3, 4}},
		{"ingress cut on a host", lab.Faults{HostCuts: map[int]string{1: lab.CutIngress}}, nil, []int{0, 2, 3, 4}},
		{"egress cut on a host", lab.Faults{HostCuts: map[int]string{1: lab.CutEgress}}, nil, []int{0, 2, 3, 4}},
		{"one-way cut from two to three hosts", lab.Faults{OneWay: []lab.OneWayCut{{From: []int{0, 1}, To: []int{2, 3, 4}}}}, nil, []int{2, 3, 4}},
	} {
		got := mustMove(connected(5, tc.faults, tc.dead))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: must move %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFiguresOf(t *testing.T) {
	var v []float64
	for i := 100; i >= 1; i-- {
		v = append(v, float64(i))
	}
	f := FiguresOf(v)
	if f.Count != 100 || f.P50 != 50 || f.P90 != 90 || f.P99 != 99 || f.Max != 100 {
		t.Fatalf("figures %+v", f)
	}
	if f := FiguresOf([]float64{7}); f.P50 != 7 || f.P99 != 7 || f.Max != 7 {
		t.Fatalf("one sample: %+v", f)
	}
	if f := FiguresOf(nil); f.Count != 0 || f.String() != "n/a" {
		t.Fatalf("none: %+v", f)
	}
}

// TestViewChangeHolds: an install is matched with the longest stall of the
// rack's agreement pointer around it, a stall held by several view changes
// counts once, an install without a stall is counted apart.
func TestViewChangeHolds(t *testing.T) {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	gaps := [][2]time.Duration{{ms(100), ms(102)}, {ms(110), ms(400)}, {ms(1000), ms(1003)}}
	installs := [][2]time.Duration{
		{ms(380), ms(405)},   // ends the long stall
		{ms(200), ms(220)},   // a duel inside the same stall
		{ms(990), ms(1010)},  // a short one
		{ms(5000), ms(5020)}, // no stall
	}
	// A partition without a majority from 150 ms to 300 ms, a connected
	// majority before and after it.
	spans := []faultSpan{{from: 0, majority: true, what: "start"}, {from: ms(150), what: "partition"}, {from: ms(300), majority: true, what: "heal"}}
	holds, withMajority, unheld := viewChangeHolds(gaps, installs, spans)
	if !slices.Equal(holds, []float64{290, 3}) || unheld != 1 {
		t.Fatalf("holds %v, unheld %d", holds, unheld)
	}
	if !slices.Equal(withMajority, []float64{140, 3}) {
		t.Fatalf("with a majority: %v, want [140 3] (290 less the 150 without one)", withMajority)
	}
}

// TestChaosActions: --only keeps the unrestricted order, refuses unknown
// actions, wipe without wipes and heals when paced.
func TestChaosActions(t *testing.T) {
	got, err := chaosActions(ChaosOptions{Only: []string{"none", "kill"}})
	if err != nil || !slices.Equal(got, []string{"kill", "none"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	got, err = chaosActions(ChaosOptions{Spacing: time.Second})
	if err != nil || slices.Contains(got, "heal") || slices.Contains(got, "heal-kill") || !slices.Contains(got, "kill") {
		t.Fatalf("paced: %v, %v", got, err)
	}
	for _, o := range []ChaosOptions{
		{Duration: time.Second, Only: []string{"nap"}},
		{Duration: time.Second, Only: []string{"wipe"}},
		{Count: 1, Only: []string{"heal"}, Spacing: time.Second},
		{Duration: time.Second, LoadWindow: -1},
		{},
	} {
		if err := CheckChaosOptions(o); err == nil {
			t.Errorf("%+v: accepted", o)
		}
	}
}

// TestTrackerMoving: a host moves again once it delivers an entry h+n past
// the rack's agreement pointer at the action; the stall is its longest
// time without an advance until then.
func TestTrackerMoving(t *testing.T) {
	c := &Cluster{Rack: &lab.Rack{Hosts: make([]lab.Host, 3)}}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr := newTracker(c, t0, func(int) bool { return false })
	for h := 0; h < 3; h++ {
		tr.seen(h, 10, t0)
	}
	w := tr.begin("kill", t0) // target 10 + 1 + 3 = 14
	tr.commit(w, []int{0, 1})
	tr.seen(0, 11, at(1))
	tr.seen(0, 14, at(21)) // a 20 ms stall, then past the target
	tr.seen(1, 12, at(2))
	tr.seen(1, 13, at(3))
	select {
	case <-w.done:
		t.Fatal("done before host 1 moved again")
	default:
	}
	tr.seen(1, 15, at(25))
	<-w.done
	d, stall, ok, _ := tr.end(w)
	if !ok || d != 25 || stall != 22 {
		t.Fatalf("moving %v ms, stall %v ms, ok %v", d, stall, ok)
	}
	w = tr.begin("partition", at(30))
	tr.commit(w, []int{0, 2})
	tr.seen(0, 16, at(31))
	if _, _, ok, still := tr.end(w); ok || !slices.Equal(still, []int{2}) {
		t.Fatalf("unfinished: ok %v, not moving %v", ok, still)
	}
}

// TestViewChangeCauses: the view changes by cause are read from a status's
// counters, summed over hosts, and printed in the causes' order.
func TestViewChangeCauses(t *testing.T) {
	var sum counterSet
	sum.add(counterSet{causes: causesOf(map[string]uint64{"view_changes": 5, "view_change_causes.left-out": 2, "view_change_causes.divergence": 3, "takeovers": 9})})
	sum.add(counterSet{causes: causesOf(map[string]uint64{"view_change_causes.divergence": 1, "view_change_causes.fenced": 0})})
	if len(sum.causes) != 2 || sum.causes["divergence"] != 4 || sum.causes["left-out"] != 2 {
		t.Fatalf("causes summed: %v, want divergence 4, left-out 2", sum.causes)
	}
	r := ChaosReport{Counters: TakeoverCounts{Seconds: 60, ViewChanges: 6, ViewChangeCauses: sum.causes}}
	if s := r.Summary(); !strings.Contains(s, "\n  view changes started by cause: divergence 4 left-out 2\n") {
		t.Errorf("summary lacks the causes in order:\n%s", s)
	}
}

// TestExplainDuel: a stall's explanation names a duel when several
// initiators each led more than one view change, and says what set off
// each view change (the cause the initiator's status gives).
func TestExplainDuel(t *testing.T) {
	vc := func(epoch uint32, cause string, promised ...int) daemon.RecoveryStatus {
		return daemon.RecoveryStatus{ViewChange: &daemon.ViewChangeStatus{Epoch: epoch, Need: 3, Promised: promised, Cause: cause}}
	}
	ms := time.Millisecond
	samples := []sample{
		{at: 10 * ms, host: 0, epoch: 4, halted: true, rec: vc(5, "divergence", 0, 2)},
		{at: 30 * ms, host: 2, epoch: 4, halted: true, rec: vc(7, "promise-timeout", 0, 2)},
		{at: 50 * ms, host: 0, epoch: 4, halted: true, rec: vc(10, "promise-timeout", 0, 2)},
		{at: 70 * ms, host: 2, epoch: 4, halted: true, rec: vc(12, "", 2)},
		{at: 90 * ms, host: 3, epoch: 4, halted: false}, // after the stall: not counted
	}
	got, all := explain(samples, 0, 80*ms, []string{"A", "B", "C", "D", "E"})
	if len(all) != 4 || !strings.HasPrefix(all[0], "t=0.010s e5 by A (divergence)") || !strings.HasPrefix(all[3], "t=0.070s e12 by C for") {
		t.Errorf("the list of view changes: %q", all)
	}
	for _, want := range []string{
		"duelling view changes: 4 view changes by 2 initiators",
		"e5 by A (divergence) for 0.00s: promises [A C] of 3 needed",
		"e7 by C (promise-timeout)",
		"e12 by C for 0.00s: promises [C] of 3 needed", // no cause known: none shown
		"halted: A 0.1s, C 0.1s",
		"epochs seen [4]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explanation lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "D") {
		t.Errorf("explanation counts a sample after the stall:\n%s", got)
	}
}
