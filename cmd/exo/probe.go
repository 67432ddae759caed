package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/lab"
)

type probeOptions struct {
	Hosts  int
	Count  int
	JSON   bool
	OutDir string
	Prefix string
	Bin    string // the exo binary run inside the namespaces (default: this one)

	Out, Err io.Writer
	Progress bool
}

// probePath is one measured path of exo probe.
type probePath struct {
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

	oneWay *hdrhistogram.Histogram // in nanoseconds
}

// probeReport is exo probe's result: every path measured on the same rack,
// between the same two hosts, in one run.
type probeReport struct {
	Hosts   int         `json:"hosts"`
	Count   int         `json:"count"`
	From    string      `json:"from"`
	To      string      `json:"to"`
	Paths   []probePath `json:"paths"`
	Plot    string      `json:"plot"`
	Seconds float64     `json:"seconds"`
}

func newProbeCmd() *cobra.Command {
	o := &probeOptions{}
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Latency probes between two hosts of a lab rack: TCP, UDP, UDP broadcast, raw frames, Exo",
		Long: `probe builds a lab rack and measures, between hosts A and B, in one run on the
same hosts, the paths of the seed's table (slides 50-51):
  - TCP:            a 64-byte ping-pong over one TCP connection (OOB addresses)
  - UDP:            a 64-byte datagram ping-pong, unicast
  - UDP broadcast:  A broadcasts to the subnet broadcast address, B answers
                    with a broadcast
  - raw frames:     exo raw's baseline frames, echoed by exo raw --mode echo on B
  - Exo agreement:  daemons on every host, A publishes 64-byte messages one at
                    a time (window 1); latency is publish -> agreed at A
For each: one-way p50/p99/p999 (RTT/2 for the ping-pongs; agreement latency
for Exo), round trip, msgs/s (one in flight) and sender CPU per message. It
writes a latency CDF plot, probe.png, to --out. The rack is torn down at the
end. Needs root.`,
		Example: `  sudo exo probe --hosts 5
  sudo exo probe --hosts 5 --count 5000 --json --out /tmp`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Out, o.Err = cmd.OutOrStdout(), cmd.ErrOrStderr()
			if o.Hosts < 2 || o.Hosts > 64 {
				return &exitError{code: 2, err: fmt.Errorf("--hosts %d: want 2 to 64", o.Hosts)}
			}
			if o.Count < 1 || o.Count > 1_000_000 {
				return &exitError{code: 2, err: fmt.Errorf("--count %d: want 1 to 1000000", o.Count)}
			}
			if err := lab.ValidPrefix(o.Prefix); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--prefix: %w", err)}
			}
			if st, err := os.Stat(o.OutDir); err != nil || !st.IsDir() {
				return &exitError{code: 2, err: fmt.Errorf("--out %q: not a directory", o.OutDir)}
			}
			if err := lab.CheckRoot(); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("exo probe needs root (network namespaces, raw sockets): run with sudo")}
			}
			o.Progress = isTerminal(o.Err)
			return runProbe(cmd.Context(), o)
		},
	}
	cmd.Flags().IntVar(&o.Hosts, "hosts", 5, "hosts in the rack (the probes run between A and B)")
	cmd.Flags().IntVar(&o.Count, "count", 2000, "measured round trips (and Exo messages) per path")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&o.OutDir, "out", ".", "directory of the plot (probe.png)")
	cmd.Flags().StringVar(&o.Prefix, "prefix", "exoprobe", "name prefix of the lab rack")
	return cmd
}

// probeStages are the steps of a run, for the progress bar.
var probeStages = []string{"lab rack", "TCP", "UDP", "UDP broadcast", "raw frames", "Exo agreement", "plot"}

func (o *probeOptions) progress(stage int, frac float64) {
	if !o.Progress {
		return
	}
	const width = 28
	done := (float64(stage) + frac) / float64(len(probeStages))
	n := int(done * width)
	name := "done"
	if stage < len(probeStages) {
		name = probeStages[stage]
	}
	fmt.Fprintf(o.Err, "\rprobe [%s%s] %3.0f%% %-16s", strings.Repeat("#", n), strings.Repeat(".", width-n), done*100, name)
	if stage >= len(probeStages) {
		fmt.Fprintln(o.Err)
	}
}

// endpointOn starts exo probe-endpoint (or any exo subcommand) inside host id.
func endpointOn(ctx context.Context, rack *lab.Rack, bin string, id int, args ...string) (*exec.Cmd, *bytes.Buffer, error) {
	var out bytes.Buffer
	cmd := rack.CommandContext(ctx, id, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	return cmd, &out, cmd.Start()
}

func stopEndpoint(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// pingPongPath runs a server on B and a client on A and turns the client's
// samples into a path.
func pingPongPath(ctx context.Context, rack *lab.Rack, o *probeOptions, name string, server, client []string) (probePath, error) {
	p := probePath{Name: name, Metric: "rtt/2"}
	var srv *exec.Cmd
	if server != nil {
		var err error
		if srv, _, err = endpointOn(ctx, rack, o.Bin, 1, server...); err != nil {
			return p, err
		}
		defer stopEndpoint(srv)
	}
	cli, out, err := endpointOn(ctx, rack, o.Bin, 0, client...)
	if err != nil {
		return p, err
	}
	if err := cli.Wait(); err != nil {
		return p, fmt.Errorf("%s: client: %w: %s", name, err, strings.TrimSpace(out.String()))
	}
	var r probeEndpointResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return p, fmt.Errorf("%s: client output: %w", name, err)
	}
	rtt := hdrhistogram.New(1, 10_000_000_000, 3)
	p.oneWay = hdrhistogram.New(1, 10_000_000_000, 3)
	for _, v := range r.RTTns {
		rtt.RecordValue(v)
		p.oneWay.RecordValue(max(v/2, 1))
	}
	us := func(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	p.RTTp50, p.RTTp99, p.RTTp999 = us(rtt, 50), us(rtt, 99), us(rtt, 99.9)
	p.OneWayP50, p.OneWayP99, p.OneWayP999 = p.RTTp50/2, p.RTTp99/2, p.RTTp999/2
	p.Samples, p.Lost = r.Messages, r.Lost
	if r.Seconds > 0 {
		p.MsgsPerSec = float64(r.Messages) / r.Seconds
	}
	if n := r.Messages + r.Lost; n > 0 {
		p.CPUusPerMsg = float64(r.CPUTicks) * (1e6 / userHZ) / float64(n)
	}
	p.CPUNote = "client process utime+stime (/proc/self/stat, 10 ms ticks) per round trip"
	return p, nil
}

func runProbe(ctx context.Context, o *probeOptions) (err error) {
	began := time.Now()
	if o.Bin == "" {
		if o.Bin, err = os.Executable(); err != nil {
			return err
		}
	}
	say := func(format string, args ...any) {
		if !o.JSON {
			if o.Progress {
				fmt.Fprint(o.Err, "\r\033[K")
			}
			fmt.Fprintf(o.Out, format+"\n", args...)
		}
	}
	o.progress(0, 0)
	rack, err := lab.Up(ctx, lab.Options{Prefix: o.Prefix, Hosts: o.Hosts, Force: true})
	if err != nil {
		return err
	}
	defer func() {
		if e := lab.Down(context.Background(), o.Prefix); e != nil && err == nil {
			err = e
		}
	}()
	a, b := rack.Hosts[0], rack.Hosts[1]
	rep := probeReport{Hosts: o.Hosts, Count: o.Count, From: a.Name, To: b.Name}
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
	say("== exo probe: %s -> %s on a %d-host lab rack, %d round trips per path, 64-byte messages", a.Name, b.Name, o.Hosts, o.Count)
	for i, s := range steps {
		o.progress(i+1, 0)
		p, err := pingPongPath(ctx, rack, o, s.name, s.server, s.client)
		if err != nil {
			return err
		}
		rep.Paths = append(rep.Paths, p)
		say("%-14s one-way p50 %7.1fus  p99 %7.1fus  p999 %7.1fus  (RTT p50 %.1fus)  %8.0f msgs/s  CPU %.1fus/msg  lost %d",
			p.Name, p.OneWayP50, p.OneWayP99, p.OneWayP999, p.RTTp50, p.MsgsPerSec, p.CPUusPerMsg, p.Lost)
	}

	o.progress(5, 0)
	dir, err := os.MkdirTemp("", "exo-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, err := cluster.Start(ctx, rack, cluster.Options{Bin: o.Bin, Dir: dir})
	if err != nil {
		return err
	}
	ep, err := exoPath(ctx, c, o)
	if e := c.Stop(); e != nil && err == nil {
		err = e
	}
	if err != nil {
		return err
	}
	rep.Paths = append(rep.Paths, ep)
	say("%-14s agree  p50 %7.1fus  p99 %7.1fus  p999 %7.1fus  (publish -> agreed)  %8.0f msgs/s  CPU %.1fus/msg (A's daemon)",
		ep.Name, ep.OneWayP50, ep.OneWayP99, ep.OneWayP999, ep.MsgsPerSec, ep.CPUusPerMsg)

	o.progress(6, 0)
	rep.Plot = filepath.Join(o.OutDir, "probe.png")
	if err := probePlot(rep, rep.Plot); err != nil {
		return err
	}
	rep.Seconds = time.Since(began).Seconds()
	o.progress(len(probeStages), 0)
	say("plot: %s (%.1fs in all)", rep.Plot, rep.Seconds)
	if o.JSON {
		enc := json.NewEncoder(o.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return nil
}

// lastAddr returns the broadcast address of the rack's subnet.
func lastAddr(rack *lab.Rack) string {
	p := rack.Subnet.Masked()
	v := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	n := uint32(v[0])<<24 | uint32(v[1])<<16 | uint32(v[2])<<8 | uint32(v[3]) | host
	return fmt.Sprintf("%d.%d.%d.%d", byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// exoPath publishes o.Count messages from A, one in flight.
func exoPath(ctx context.Context, c *cluster.Cluster, o *probeOptions) (probePath, error) {
	p := probePath{Name: "Exo agreement", Metric: "publish->agreed",
		CPUNote: "host A's daemon utime+stime per agreed message (the publishing client not counted)"}
	// Warm up: a few messages, unmeasured.
	if _, err := c.Publish(ctx, cluster.Load{Hosts: []int{0}, PerHost: 50, Size: probeMsgSize, Window: 1, Round: 1}); err != nil {
		return p, err
	}
	u0, err := c.Usage(0)
	if err != nil {
		return p, err
	}
	res, err := c.Publish(ctx, cluster.Load{Hosts: []int{0}, PerHost: o.Count, Size: probeMsgSize, Window: 1, Round: 2,
		Progress: func(done int64) { o.progress(5, float64(done)/float64(o.Count)) }})
	if err != nil {
		return p, err
	}
	u1, err := c.Usage(0)
	if err != nil {
		return p, err
	}
	h := res.Latency // microseconds
	p.OneWayP50, p.OneWayP99, p.OneWayP999 = float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(99)), float64(h.ValueAtQuantile(99.9))
	p.oneWay = hdrhistogram.New(1, 10_000_000_000, 3)
	for _, bar := range h.Distribution() {
		if bar.Count > 0 {
			p.oneWay.RecordValues(max(bar.From, 1)*1000, bar.Count)
		}
	}
	p.Samples, p.Lost = res.Published, res.Failed
	p.MsgsPerSec = res.Rate()
	if res.Published > 0 {
		p.CPUusPerMsg = float64((u1.CPU - u0.CPU).Microseconds()) / float64(res.Published)
	}
	return p, nil
}

// probePlot draws the CDF of every path's one-way latency, log x in us.
func probePlot(rep probeReport, path string) error {
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
