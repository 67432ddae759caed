package measure

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/lab"
)

// ProbeOptions configure Probe (exo probe: its flags).
type ProbeOptions struct {
	Hosts int
	// Count is the number of measured round trips (and Exo messages) per
	// path.
	Count int
	// OutDir is the directory of the plot, probe.png.
	OutDir string
	// Prefix names the lab rack.
	Prefix string
	// Bin is the exo binary run inside the namespaces (default: this
	// process's executable).
	Bin string

	// Log receives the figures of each path as it is measured (nil:
	// nothing).
	Log io.Writer
	// Progress, if set, receives a progress bar (a terminal: the bar is
	// redrawn in place with \r).
	Progress io.Writer
	// Stderr receives what the endpoints in the hosts write to their
	// stderr (nil: os.Stderr).
	Stderr io.Writer
}

// ProbePath is one measured path of Probe.
type ProbePath struct {
	Name string `json:"name"`
	// Metric says what OneWay is: "rtt/2" (half a ping-pong round trip) or
	// "publish->agreed" (Exo: agreement latency at the publisher).
	Metric      string  `json:"metric"`
	OneWayP50   float64 `json:"one_way_p50_us"`
	OneWayP99   float64 `json:"one_way_p99_us"`
	OneWayP999  float64 `json:"one_way_p999_us"`
	RTTp50      float64 `json:"rtt_p50_us,omitempty"`
	RTTp99      float64 `json:"rtt_p99_us,omitempty"`
	RTTp999     float64 `json:"rtt_p999_us,omitempty"`
	MsgsPerSec  float64 `json:"msgs_per_sec"`
	CPUusPerMsg float64 `json:"sender_cpu_us_per_msg"`
	CPUNote     string  `json:"sender_cpu_note"`
	Samples     int64   `json:"samples"`
	Lost        int64   `json:"lost"`

	oneWay *hdrhistogram.Histogram // in nanoseconds, for the plot
}

// ProbeReport is Probe's result: every path measured on the same rack,
// between the same two hosts, in one run.
type ProbeReport struct {
	Hosts   int         `json:"hosts"`
	Count   int         `json:"count"`
	From    string      `json:"from"`
	To      string      `json:"to"`
	Paths   []ProbePath `json:"paths"`
	Plot    string      `json:"plot"`
	Seconds float64     `json:"seconds"`
}

// probeStages are the steps of a run, for the progress bar.
var probeStages = [...]string{"lab rack", "TCP", "UDP", "UDP broadcast", "raw frames", "Exo agreement", "plot"}

// prober is one run of Probe.
type prober struct {
	o   ProbeOptions
	l   *cluster.Lab
	say func(string, ...any)
}

func (p *prober) progress(stage int, frac float64) {
	if p.o.Progress == nil {
		return
	}
	const width = 28
	done := (float64(stage) + frac) / float64(len(probeStages))
	n := int(done * width)
	name := "done"
	if stage < len(probeStages) {
		name = probeStages[stage]
	}
	fmt.Fprintf(p.o.Progress, "\rprobe [%s%s] %3.0f%% %-16s", strings.Repeat("#", n), strings.Repeat(".", width-n), done*100, name)
	if stage >= len(probeStages) {
		fmt.Fprintln(p.o.Progress)
	}
}

// Probe builds a lab rack and measures, between hosts A and B, in one run
// on the same hosts, the paths of the seed's table (slides 50-51): TCP,
// UDP and UDP broadcast ping-pongs, raw frames echoed by exo raw, and Exo
// agreement (publish -> agreed at A, one message in flight). It draws the
// CDF of every path's one-way latency into OutDir/probe.png and tears the
// rack down.
func Probe(ctx context.Context, o ProbeOptions) (ProbeReport, error) {
	began := time.Now()
	p := &prober{o: o}
	if p.o.Stderr == nil {
		p.o.Stderr = os.Stderr
	}
	p.say = func(format string, args ...any) {
		if o.Log != nil {
			if o.Progress != nil {
				fmt.Fprint(o.Progress, "\r\033[K")
			}
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	var rep ProbeReport
	p.progress(0, 0)
	err := cluster.WithLab(ctx, cluster.LabOptions{Prefix: o.Prefix, Hosts: o.Hosts, Bin: o.Bin}, func(l *cluster.Lab) error {
		p.l = l
		if err := p.run(ctx, &rep); err != nil {
			return err
		}
		rep.Seconds = time.Since(began).Seconds()
		p.progress(len(probeStages), 0)
		p.say("plot: %s (%.1fs in all)", rep.Plot, rep.Seconds)
		return nil
	})
	return rep, err
}

func (p *prober) run(ctx context.Context, rep *ProbeReport) error {
	o, rack := p.o, p.l.Rack
	a, b := rack.Hosts[0], rack.Hosts[1]
	*rep = ProbeReport{Hosts: o.Hosts, Count: o.Count, From: a.Name, To: b.Name}
	bcast := lastAddr(rack)
	count := strconv.Itoa(o.Count)
	tcpAddr := b.OOBAddr.String() + ":7301"
	udpAddr := b.OOBAddr.String() + ":7302"
	bcastTo, bcastReply := bcast+":7303", bcast+":7304"
	type step struct {
		name           string
		server, client []string
	}
	steps := []step{
		{"TCP", []string{"probe-endpoint", "--mode", "tcp-server", "--addr", tcpAddr},
			[]string{"probe-endpoint", "--mode", "tcp-client", "--addr", tcpAddr, "--count", count}},
		{"UDP", []string{"probe-endpoint", "--mode", "udp-server", "--addr", udpAddr},
			[]string{"probe-endpoint", "--mode", "udp-client", "--addr", udpAddr, "--count", count}},
		{"UDP broadcast", []string{"probe-endpoint", "--mode", "bcast-server", "--addr", ":7303", "--reply", bcastReply},
			[]string{"probe-endpoint", "--mode", "bcast-client", "--addr", bcastTo, "--reply", bcastReply, "--count", count}},
		{"raw frames", []string{"raw", "--mode", "echo", "--duration", "60s"},
			[]string{"probe-endpoint", "--mode", "raw-client", "--count", count}},
	}
	p.say("== exo probe: %s -> %s on a %d-host lab rack, %d round trips per path, 64-byte messages", a.Name, b.Name, o.Hosts, o.Count)
	for i, s := range steps {
		p.progress(i+1, 0)
		path, err := p.pingPong(ctx, s.name, s.server, s.client)
		if err != nil {
			return err
		}
		rep.Paths = append(rep.Paths, path)
		p.say("%-14s one-way p50 %7.1fus  p99 %7.1fus  p999 %7.1fus  (RTT p50 %.1fus)  %8.0f msgs/s  CPU %.1fus/msg  lost %d",
			path.Name, path.OneWayP50, path.OneWayP99, path.OneWayP999, path.RTTp50, path.MsgsPerSec, path.CPUusPerMsg, path.Lost)
	}

	p.progress(5, 0)
	dir, err := os.MkdirTemp("", "exo-probe-")
	if err != nil {
		return fmt.Errorf("probe: daemon directory: %w", err)
	}
	defer os.RemoveAll(dir)
	var ep ProbePath
	err = p.l.Run(ctx, cluster.Options{Dir: dir}, func(c *cluster.Cluster) error {
		var err error
		ep, err = p.exoPath(ctx, c)
		return err
	})
	if err != nil {
		return err
	}
	rep.Paths = append(rep.Paths, ep)
	p.say("%-14s agree  p50 %7.1fus  p99 %7.1fus  p999 %7.1fus  (publish -> agreed)  %8.0f msgs/s  CPU %.1fus/msg (A's daemon)",
		ep.Name, ep.OneWayP50, ep.OneWayP99, ep.OneWayP999, ep.MsgsPerSec, ep.CPUusPerMsg)

	p.progress(6, 0)
	rep.Plot = filepath.Join(o.OutDir, "probe.png")
	return probePlot(*rep, rep.Plot)
}

// pingPong runs a server on B and a client on A and turns the client's
// samples into a path.
func (p *prober) pingPong(ctx context.Context, name string, server, client []string) (ProbePath, error) {
	path := ProbePath{Name: name, Metric: "rtt/2"}
	srv, err := startExo(ctx, p.l, 1, p.o.Stderr, server...)
	if err != nil {
		return path, err
	}
	defer srv.kill()
	var r EndpointResult
	if err := runExo(ctx, p.l, 0, p.o.Stderr, &r, client...); err != nil {
		return path, fmt.Errorf("%s: client: %w", name, err)
	}
	rtt := hdrhistogram.New(1, 10_000_000_000, 3)
	path.oneWay = hdrhistogram.New(1, 10_000_000_000, 3)
	for _, v := range r.RTTns {
		rtt.RecordValue(v)
		path.oneWay.RecordValue(max(v/2, 1))
	}
	path.RTTp50, path.RTTp99, path.RTTp999 = quantilesUs(rtt, 1000)
	path.OneWayP50, path.OneWayP99, path.OneWayP999 = path.RTTp50/2, path.RTTp99/2, path.RTTp999/2
	path.Samples, path.Lost = r.Messages, r.Lost
	if r.Seconds > 0 {
		path.MsgsPerSec = float64(r.Messages) / r.Seconds
	}
	if n := r.Messages + r.Lost; n > 0 {
		path.CPUusPerMsg = float64(r.CPUTicks) * (1e6 / userHZ) / float64(n)
	}
	path.CPUNote = "client process utime+stime (/proc/self/stat, 10 ms ticks) per round trip"
	return path, nil
}

// lastAddr returns the broadcast address of the rack's subnet.
func lastAddr(rack *lab.Rack) string {
	p := rack.Subnet.Masked()
	v := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	n := uint32(v[0])<<24 | uint32(v[1])<<16 | uint32(v[2])<<8 | uint32(v[3]) | host
	return fmt.Sprintf("%d.%d.%d.%d", byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// exoPath publishes ProbeOptions.Count messages from A, one in flight.
func (p *prober) exoPath(ctx context.Context, c *cluster.Cluster) (ProbePath, error) {
	path := ProbePath{Name: "Exo agreement", Metric: "publish->agreed",
		CPUNote: "host A's daemon utime+stime per agreed message (the publishing client not counted)"}
	// Warm up: a few messages, unmeasured.
	if _, err := c.Publish(ctx, cluster.Load{Hosts: []int{0}, PerHost: 50, Size: probeMsgSize, Window: 1, Round: 1}); err != nil {
		return path, err
	}
	u0, err := c.Usage(0)
	if err != nil {
		return path, err
	}
	res, err := c.Publish(ctx, cluster.Load{Hosts: []int{0}, PerHost: p.o.Count, Size: probeMsgSize, Window: 1, Round: 2,
		Progress: func(done int64) { p.progress(5, float64(done)/float64(p.o.Count)) }})
	if err != nil {
		return path, err
	}
	u1, err := c.Usage(0)
	if err != nil {
		return path, err
	}
	h := res.Latency // microseconds
	path.OneWayP50, path.OneWayP99, path.OneWayP999 = quantilesUs(h, 1)
	path.oneWay = hdrhistogram.New(1, 10_000_000_000, 3)
	for _, bar := range h.Distribution() {
		if bar.Count > 0 {
			path.oneWay.RecordValues(max(bar.From, 1)*1000, bar.Count)
		}
	}
	path.Samples, path.Lost = res.Published, res.Failed
	path.MsgsPerSec = res.Rate()
	if res.Published > 0 {
		path.CPUusPerMsg = float64((u1.CPU - u0.CPU).Microseconds()) / float64(res.Published)
	}
	return path, nil
}

// probePlot draws the CDF of every path's one-way latency, log x in us.
func probePlot(rep ProbeReport, path string) error {
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("exo probe: one-way latency %s -> %s (%d-host lab rack, %d samples/path)", rep.From, rep.To, rep.Hosts, rep.Count)
	pl.X.Label.Text = "latency (us, log scale): RTT/2, Exo: publish -> agreed"
	pl.Y.Label.Text = "fraction of messages <= x"
	pl.X.Scale = plot.LogScale{}
	pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	pl.Y.Min, pl.Y.Max = 0, 1
	pl.Add(plotter.NewGrid())
	pl.Legend.Top = false
	pl.Legend.Left = false
	var lines []any
	for _, p := range rep.Paths {
		if p.oneWay == nil || p.oneWay.TotalCount() == 0 {
			continue
		}
		var xys plotter.XYs
		total := float64(p.oneWay.TotalCount())
		var cum int64
		for _, bar := range p.oneWay.Distribution() {
			if bar.Count == 0 {
				continue
			}
			cum += bar.Count
			x := math.Max(float64(bar.To)/1000, 0.01)
			xys = append(xys, plotter.XY{X: x, Y: float64(cum) / total})
		}
		lines = append(lines, fmt.Sprintf("%s (p50 %.1fus)", p.Name, p.OneWayP50), xys)
	}
	if err := plotutil.AddLines(pl, lines...); err != nil {
		return err
	}
	return pl.Save(9*vg.Inch, 5.5*vg.Inch, path)
}
