package measure

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// sayScalingTable prints one row per rack size (exo bench --hosts 3,5,...),
// as a Markdown table.
func sayScalingTable(say func(string, ...any), reps []BenchReport) {
	withRaft := false
	for _, r := range reps {
		withRaft = withRaft || r.Raft != nil
	}
	cols := []string{"hosts", "raw one-way p50 us", "exo p50 us", "exo p99 us"}
	if withRaft {
		cols = append(cols, "raft p50 us", "raft p99 us", "p50 exo/raft")
	}
	cols = append(cols, "exo msgs/s (b) 64/host, 1 per frame")
	if withRaft {
		cols = append(cols, "raft msgs/s (b) 64/host", "(b) exo/raft")
	}
	cols = append(cols, "exo msgs/s (b) 512/host")
	if withRaft {
		cols = append(cols, "raft msgs/s (b) 512/host", "(b) 512 exo/raft", "exo msgs/s (c) batched", "raft msgs/s (c) batched", "(c) exo/raft")
	}
	say("\n== by rack size (medians over --rounds; exo: the first offload mode)")
	say("| %s |", strings.Join(cols, " | "))
	say("|%s", strings.Repeat("---:|", len(cols)))
	for _, r := range reps {
		e := r.Offloads[0]
		row := []string{fmt.Sprint(r.Hosts), fmt.Sprintf("%.1f", r.RawOneWayP50us), fmt.Sprintf("%.0f", e.AgreeP50us), fmt.Sprintf("%.0f", e.AgreeP99us)}
		rf, v := r.Raft, r.ExoOverRaft
		if withRaft {
			if rf != nil {
				row = append(row, fmt.Sprintf("%.0f", rf.P50us), fmt.Sprintf("%.0f", rf.P99us), fmt.Sprintf("%.2f", v.P50))
			} else {
				row = append(row, "", "", "")
			}
		}
		row = append(row, fmt.Sprintf("%.0f", e.UnbatchedRate))
		if withRaft {
			if rf != nil {
				row = append(row, fmt.Sprintf("%.0f", rf.Rate64), fmt.Sprintf("%.2f", v.Rate64))
			} else {
				row = append(row, "", "")
			}
		}
		row = append(row, fmt.Sprintf("%.0f", e.BatchedRate))
		if withRaft {
			ec := "-" // no client-batched run
			if e.ClientBatchedRate > 0 {
				ec = fmt.Sprintf("%.0f", e.ClientBatchedRate)
			}
			if rf != nil {
				row = append(row, fmt.Sprintf("%.0f", rf.Rate512), fmt.Sprintf("%.2f", v.Rate512), ec, fmt.Sprintf("%.0f", rf.BatchedRate), fmt.Sprintf("%.2f", v.Batched))
			} else {
				row = append(row, "", "", ec, "", "")
			}
		}
		say("| %s |", strings.Join(row, " | "))
	}
}

// benchPlot draws latency p50 (left) and throughput (right) against rack
// size, exo and (when measured) raft, into a PNG.
func benchPlot(reps []BenchReport, path string) error {
	series := func(f func(BenchReport) (float64, bool)) plotter.XYs {
		var xys plotter.XYs
		for _, r := range reps {
			if v, ok := f(r); ok && v > 0 {
				xys = append(xys, plotter.XY{X: float64(r.Hosts), Y: v})
			}
		}
		return xys
	}
	exo := func(g func(AgreementFigures) float64) func(BenchReport) (float64, bool) {
		return func(r BenchReport) (float64, bool) { return g(r.Offloads[0]), true }
	}
	raft := func(g func(*RaftFigures) float64) func(BenchReport) (float64, bool) {
		return func(r BenchReport) (float64, bool) {
			if r.Raft == nil {
				return 0, false
			}
			return g(r.Raft), true
		}
	}
	var sizes []string
	var xticks []plot.Tick
	for _, r := range reps {
		sizes = append(sizes, fmt.Sprint(r.Hosts))
		xticks = append(xticks, plot.Tick{Value: float64(r.Hosts), Label: fmt.Sprint(r.Hosts)})
	}
	// fit leaves room above the data for the legend (top left) and marks
	// the measured sizes on x.
	fit := func(p *plot.Plot, lines []any) {
		lo, hi := math.Inf(1), 0.0
		for _, l := range lines {
			if xys, ok := l.(plotter.XYs); ok {
				for _, xy := range xys {
					lo, hi = min(lo, xy.Y), max(hi, xy.Y)
				}
			}
		}
		if hi > 0 {
			p.Y.Min, p.Y.Max = lo/1.5, hi*6
		}
		p.X.Tick.Marker = plot.ConstantTicks(xticks)
		p.X.Min, p.X.Max = float64(reps[0].Hosts)-0.5, float64(reps[len(reps)-1].Hosts)+0.5
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs, p.Legend.YOffs = vg.Points(10), -vg.Points(8)
	}

	lat := plot.New()
	lat.Title.Text = "latency p50, 1 in flight, 64-byte messages"
	lat.X.Label.Text = "hosts in the rack"
	lat.Y.Label.Text = "microseconds (log scale)"
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = ticks125{}
	lat.Add(plotter.NewGrid())
	lines := []any{
		"exo: publish -> agreed", series(exo(func(f AgreementFigures) float64 { return f.AgreeP50us })),
	}
	if r := series(raft(func(f *RaftFigures) float64 { return f.P50us })); len(r) > 0 {
		lines = append(lines, "raft: propose -> committed at the leader", r,
			"raft: at a follower", series(raft(func(f *RaftFigures) float64 { return f.FollowerP50us })))
	}
	lines = append(lines, "raw frame one-way (RTT/2)", series(func(r BenchReport) (float64, bool) { return r.RawOneWayP50us, true }))
	if err := plotutil.AddLinePoints(lat, lines...); err != nil {
		return err
	}
	fit(lat, lines)

	thr := plot.New()
	thr.Title.Text = "throughput, 64-byte messages from every host"
	thr.X.Label.Text = "hosts in the rack"
	thr.Y.Label.Text = "messages/s (log scale)"
	thr.Y.Scale = plot.LogScale{}
	thr.Y.Tick.Marker = ticks125{}
	thr.Add(plotter.NewGrid())
	lines = []any{
		"exo (b): 64 in flight/host, 1 msg per frame", series(exo(func(f AgreementFigures) float64 { return f.UnbatchedRate })),
		"exo: 512 in flight/host, frames batched", series(exo(func(f AgreementFigures) float64 { return f.BatchedRate })),
	}
	if c := series(exo(func(f AgreementFigures) float64 { return f.ClientBatchedRate })); len(c) > 0 {
		lines = append(lines, fmt.Sprintf("exo (c): %d msgs per publish call", reps[0].Offloads[0].ClientBatch), c)
	}
	if r := series(raft(func(f *RaftFigures) float64 { return f.Rate64 })); len(r) > 0 {
		batch := 0
		for _, rep := range reps {
			if rep.Raft != nil {
				batch = rep.Raft.BatchMessages
			}
		}
		lines = append(lines, "raft (b): 64 in flight/host, 1 msg per proposal", r,
			"raft: 512 in flight/host, 1 msg per proposal", series(raft(func(f *RaftFigures) float64 { return f.Rate512 })),
			fmt.Sprintf("raft (c): %d msgs per proposal", batch), series(raft(func(f *RaftFigures) float64 { return f.BatchedRate })))
	}
	if err := plotutil.AddLinePoints(thr, lines...); err != nil {
		return err
	}
	fit(thr, lines)

	if ext := strings.ToLower(filepath.Ext(path)); ext != ".png" {
		return fmt.Errorf("--plot %s: want a .png file", path)
	}
	const w, h = 14 * vg.Inch, 5.5 * vg.Inch
	c := vgimg.New(w, h)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadTop: vg.Points(20), PadX: vg.Points(20), PadLeft: vg.Points(5), PadRight: vg.Points(5), PadBottom: vg.Points(5)}
	canv := plot.Align([][]*plot.Plot{{lat, thr}}, tiles, dc)
	lat.Draw(canv[0][0])
	thr.Draw(canv[0][1])
	dc.FillText(draw.TextStyle{Color: color.Black, Font: lat.Title.TextStyle.Font, XAlign: draw.XCenter, YAlign: draw.YTop, Handler: lat.Title.TextStyle.Handler},
		vg.Point{X: w / 2, Y: h - vg.Points(4)}, "exo bench by rack size ("+strings.Join(sizes, ", ")+" hosts), one lab rack per size, same run")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ticks125 marks a log axis at 1, 2 and 5 times the powers of ten.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(max(lo, 1e-9))); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo && v <= hi {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	return ts
}
