package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/lab"
)

type benchOptions struct {
	// Hosts are the rack sizes: the whole bench runs once per size, on a
	// rack built afresh.
	Hosts    []int
	Messages int
	Pings    int
	Flood    int
	Prefix   string
	Offloads []string
	// FloodKind, when set, adds a batched run under a flood of bad frames
	// of this kind (exo raw --kind) from the last host's namespace.
	FloodKind string
	// Rounds repeats every mode, interleaved; figures are medians.
	Rounds int
	// RunTimeout bounds each daemon run (a stuck rack fails the bench
	// instead of hanging it).
	RunTimeout time.Duration
	// MTU of the lab rack's links (the daemons' batch_bytes follows it).
	MTU int
	// Idle is how long the idle rack's CPU is measured, before the
	// latency run (0: not measured).
	Idle time.Duration
	// CPUProfile, when set, is a directory where every daemon of every
	// run writes a CPU profile: <dir>/<run>/<host>.cpu.pprof.
	CPUProfile string
	JSON       bool
	Out        io.Writer

	// Peer, when "raft", measures etcd raft (tools/raftpeer) in the same
	// run: PeerBin is its binary, or it is built from PeerSrc.
	Peer, PeerBin, PeerSrc string
	// Batch is the number of messages per publish call (exo: one
	// PublishBatch request) and per raft proposal in shape (c), measured
	// with --peer.
	Batch int
	// Plot is the file of the rack-size plot: written when several sizes
	// are measured, or when PlotSet (the flag was given).
	Plot    string
	PlotSet bool
}

// benchModes are the modes --offload accepts.
var benchModes = cluster.OffloadModes

// agreementFigures are the daemon measurements of one offload mode.
type agreementFigures struct {
	Offload     string  `json:"offload"`
	Rounds      int     `json:"rounds"`
	AgreeP50us  float64 `json:"agreement_p50_us"`
	AgreeP99us  float64 `json:"agreement_p99_us"`
	AgreeP999us float64 `json:"agreement_p999_us"`

	UnbatchedRate float64 `json:"agreed_msgs_per_sec_unbatched"`
	BatchedRate   float64 `json:"agreed_msgs_per_sec_batched"`
	CPUusPerMsg   float64 `json:"daemon_cpu_us_per_agreed_msg_batched"`
	// MachineCPUusPerMsg is the whole machine's busy CPU time (every
	// core, softirq included: an XDP program runs there) per agreed
	// message of the batched run.
	MachineCPUusPerMsg float64 `json:"machine_cpu_us_per_agreed_msg_batched"`
	// Unbatched figures: one message per frame, so per frame costs show.
	UnbatchedCPUusPerMsg        float64 `json:"daemon_cpu_us_per_agreed_msg_unbatched"`
	UnbatchedMachineCPUusPerMsg float64 `json:"machine_cpu_us_per_agreed_msg_unbatched"`
	MaxRSSMiB                   float64 `json:"max_daemon_rss_mib_after_load"`
	// IdleCPU is the mean share of one CPU each daemon of an idle rack
	// used over --idle (0 when not measured); IdleCPUMax the busiest's.
	IdleCPU    float64 `json:"idle_cpu_per_daemon"`
	IdleCPUMax float64 `json:"idle_cpu_per_daemon_max"`

	// Client batching, measured with --peer: --batch messages per publish
	// call (a PublishBatch request), 512 messages in flight per host.
	ClientBatch              int     `json:"client_batch_messages,omitempty"`
	ClientBatchedRate        float64 `json:"agreed_msgs_per_sec_client_batched,omitempty"`
	ClientBatchedCPUusPerMsg float64 `json:"daemon_cpu_us_per_agreed_msg_client_batched,omitempty"`
	ClientBatchedMachineCPU  float64 `json:"machine_cpu_us_per_agreed_msg_client_batched,omitempty"`

	// The batched run again while the last host's namespace floods bad
	// frames of --flood-kind (0 when not measured).
	FloodKind        string  `json:"flood_kind,omitempty"`
	FloodBatchedRate float64 `json:"agreed_msgs_per_sec_batched_under_flood,omitempty"`
	FloodSent        int64   `json:"flood_frames_sent,omitempty"`
	FloodSentRate    float64 `json:"flood_frames_per_sec,omitempty"`
	// FloodCounted is how many flood frames host A counted (in its fast
	// path's counters, or its core's rejects for software).
	FloodCounted      uint64  `json:"flood_frames_counted_at_host_a,omitempty"`
	FloodToLegitRatio float64 `json:"flood_to_legit_frame_ratio,omitempty"`
}

// benchReport is exo bench's result; every figure comes from one run on one
// rack, so that the ratios compare like with like.
type benchReport struct {
	Hosts int `json:"hosts"`
	MTU   int `json:"mtu"`

	RawOneWayP50us  float64 `json:"raw_one_way_p50_us"`
	RawOneWayP99us  float64 `json:"raw_one_way_p99_us"`
	RawOneWayP999us float64 `json:"raw_one_way_p999_us"`
	RawSendRate     float64 `json:"raw_send_frames_per_sec"`
	RawRecvRate     float64 `json:"raw_recv_frames_per_sec"`

	AgreeP50us  float64 `json:"agreement_p50_us"`
	AgreeP99us  float64 `json:"agreement_p99_us"`
	AgreeP999us float64 `json:"agreement_p999_us"`

	UnbatchedRate float64 `json:"agreed_msgs_per_sec_unbatched"`
	BatchedRate   float64 `json:"agreed_msgs_per_sec_batched"`
	CPUusPerMsg   float64 `json:"daemon_cpu_us_per_agreed_msg_batched"`
	MaxRSSMiB     float64 `json:"max_daemon_rss_mib_after_load"`
	IdleCPU       float64 `json:"idle_cpu_per_daemon"`

	RatioAgreeToRawP50      float64 `json:"ratio_agreement_p50_to_raw_one_way_p50"`
	RatioUnbatchedToRawRate float64 `json:"ratio_unbatched_rate_to_raw_frame_rate"`

	// Offloads holds the agreement figures of every offload mode measured,
	// in the order of --offload; the fields above are the first one's.
	Offloads []agreementFigures `json:"offloads"`
	// Versus compares each further mode with the first (ratios > 1 mean
	// the mode is faster or uses less CPU).
	Versus []offloadRatios `json:"versus,omitempty"`

	// Raft holds etcd raft's figures with --peer raft, and ExoOverRaft
	// the first offload mode's figures over raft's, same run.
	Raft        *raftFigures `json:"raft,omitempty"`
	ExoOverRaft *raftRatios  `json:"exo_over_raft,omitempty"`
}

// offloadRatios compares one offload mode with the baseline mode.
type offloadRatios struct {
	Offload, Baseline   string
	UnbatchedRate       float64 `json:"unbatched_rate_ratio"`
	BatchedRate         float64 `json:"batched_rate_ratio"`
	P50                 float64 `json:"agreement_p50_ratio_baseline_over_mode"`
	MachineCPUUnbatched float64 `json:"machine_cpu_per_msg_unbatched_ratio_baseline_over_mode"`
}

func newBenchCmd() *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure agreement against a raw-frame baseline on a lab rack, in one run",
		Long: `bench builds a lab rack and measures, in the same run on the same hosts:
  - the raw-frame baseline between hosts A and B: one-way latency (half the
    round trip of a frame echoed by B) and the max frame rate of one sender;
  - the daemons: agreement latency (publish to agreed at the publisher, one
    message in flight), agreed 64-byte msgs/s without batching (one message
    per frame) and with batching, daemon CPU per agreed message and memory.
It prints the figures and their ratios (docs/BENCHMARKS.md explains them).
With --peer raft it also runs etcd raft (tools/raftpeer: go.etcd.io/raft/v3,
one process per host namespace, TCP between the OOB addresses, MemoryStorage,
no fsync) with the same messages and load shapes, interleaved with exo's
rounds, and prints exo/raft ratios. --hosts takes a list of rack sizes: each
is measured on a rack built afresh, then a table and a plot (--plot) of
latency and throughput against the size. Needs root.

The --offload modes: software (the daemon's defaults); software-block and
software-busy (rx_poll block or busy); software-allprocs (procs -1,
GOMAXPROCS every CPU); xdp (the daemon's default attach mode), xdp-native,
xdp-generic; xdp-afxdp (AF_XDP delivery); xdp-token (xdp_token on: the
program sends each host's frames, docs/token.md); fpga-sim and
fpga-sim-token (fpga_token on: the simulated engine sends each host's
frames), in a binary built with -tags fpgasim.
`,
		Example: `  sudo exo bench
  sudo exo bench --messages 200000 --json
  sudo exo bench --peer raft --hosts 5 --rounds 3   # etcd raft side by side
  sudo exo bench --peer raft --hosts 3,5,7,9,16 --plot bench-hosts.png`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Out = cmd.OutOrStdout()
			if err := lab.CheckRoot(); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("exo bench needs root (network namespaces, raw sockets): run with sudo")}
			}
			if o.Rounds < 1 {
				return &exitError{code: 2, err: fmt.Errorf("--rounds: %d, need at least 1", o.Rounds)}
			}
			if o.MTU < broadcast.MinFrameMTU || o.MTU > 65535 {
				return &exitError{code: 2, err: fmt.Errorf("--mtu: %d is outside %d..65535", o.MTU, broadcast.MinFrameMTU)}
			}
			for _, m := range o.Offloads {
				if !slices.Contains(benchModes, m) {
					return &exitError{code: 2, err: fmt.Errorf("--offload: %q is none of %s", m, strings.Join(benchModes, ", "))}
				}
			}
			if len(o.Hosts) == 0 {
				return &exitError{code: 2, err: fmt.Errorf("--hosts: need at least one rack size")}
			}
			for _, n := range o.Hosts {
				if n < 2 || n > 255 {
					return &exitError{code: 2, err: fmt.Errorf("--hosts: %d, need 2 to 255", n)}
				}
			}
			if o.Peer != "" && o.Peer != "raft" {
				return &exitError{code: 2, err: fmt.Errorf("--peer: %q, the only peer is raft", o.Peer)}
			}
			if o.Peer == "" && (o.PeerBin != "" || o.PeerSrc != "") {
				return &exitError{code: 2, err: fmt.Errorf("--peer-bin and --peer-src need --peer raft")}
			}
			if o.Batch < 1 || o.Batch > 512 {
				return &exitError{code: 2, err: fmt.Errorf("--batch: %d, need 1 to 512", o.Batch)}
			}
			o.PlotSet = cmd.Flags().Changed("plot")
			return runBench(cmd.Context(), o)
		},
	}
	cmd.Flags().IntSliceVar(&o.Hosts, "hosts", []int{5}, "hosts in the rack; a list (3,5,7,9,16) measures every size on a rack built afresh and prints a table and a plot (--plot)")
	cmd.Flags().IntVar(&o.Messages, "messages", 50000, "messages per throughput run")
	cmd.Flags().IntVar(&o.Pings, "pings", 5000, "samples of the latency runs")
	cmd.Flags().IntVar(&o.Flood, "flood", 200000, "frames of the raw rate run")
	cmd.Flags().StringVar(&o.Prefix, "prefix", "exobench", "name prefix of the lab rack")
	cmd.Flags().StringVar(&o.FloodKind, "attack", "", "also measure the batched rate under a flood of bad frames of this kind (foreign-group, garbage, bad-version, forged-sender) sent as fast as one thread can from the last host's namespace")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 1, "measure every offload mode this many times, interleaved, and report the medians")
	cmd.Flags().DurationVar(&o.RunTimeout, "run-timeout", 3*time.Minute, "limit of each daemon run")
	cmd.Flags().IntVar(&o.MTU, "mtu", 1500, "MTU of the lab rack's links: 9000 for jumbo frames (a frame then carries six times the batched messages)")
	cmd.Flags().DurationVar(&o.Idle, "idle", 10*time.Second, "measure each daemon's CPU on the idle rack this long, before the latency run (0: skip)")
	cmd.Flags().StringVar(&o.CPUProfile, "cpuprofile", "", "a directory: every daemon of every run writes a CPU profile there (<run>/<host>.cpu.pprof; read with go tool pprof)")
	cmd.Flags().StringSliceVar(&o.Offloads, "offload", []string{"software"}, "offload modes to measure side by side, the first the baseline (the modes: see above)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&o.Peer, "peer", "", "also measure this peer in the same run: raft (etcd raft, tools/raftpeer)")
	cmd.Flags().StringVar(&o.PeerBin, "peer-bin", "", "the raftpeer binary (default: go build it from --peer-src)")
	cmd.Flags().StringVar(&o.PeerSrc, "peer-src", "", "the raftpeer module's directory (default: tools/raftpeer in the working directory, else next to this binary's checkout)")
	cmd.Flags().IntVar(&o.Batch, "batch", 64, "with --peer: messages per publish call (exo) and per proposal (raft) in the client-batching shape (c), 512 messages in flight per host")
	cmd.Flags().StringVar(&o.Plot, "plot", "bench-hosts.png", "plot of latency and throughput against rack size (written when --hosts lists several sizes, or when this flag is given)")
	return cmd
}

// rawOn runs exo raw inside host id's namespace and decodes its result.
func rawOn(ctx context.Context, rack *lab.Rack, bin string, id int, args ...string) (*exec.Cmd, *bytes.Buffer, error) {
	var out bytes.Buffer
	cmd := rack.CommandContext(ctx, id, bin, append([]string{"raw"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	return cmd, &out, cmd.Start()
}

func rawWait(cmd *exec.Cmd, out *bytes.Buffer) (rawResult, error) {
	var r rawResult
	if err := cmd.Wait(); err != nil {
		return r, fmt.Errorf("exo raw: %w: %s", err, out.String())
	}
	err := json.Unmarshal(out.Bytes(), &r)
	return r, err
}

func runBench(ctx context.Context, o *benchOptions) error {
	say := func(format string, args ...any) {
		if !o.JSON {
			fmt.Fprintf(o.Out, format+"\n", args...)
		}
	}
	peerBin, peerImpl := "", ""
	if o.Peer == "raft" {
		bin, cleanup, err := findPeerBin(ctx, o)
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		defer cleanup()
		peerBin, peerImpl = bin, peerVersion(ctx, bin)
		say("== peer: %s (%s)", peerImpl, peerBin)
	}
	var reps []benchReport
	for _, n := range o.Hosts {
		if len(o.Hosts) > 1 {
			say("\n=== %d hosts", n)
		}
		rep, err := benchSize(ctx, o, n, peerBin, peerImpl, say)
		if err != nil {
			if len(o.Hosts) > 1 {
				err = fmt.Errorf("%d hosts: %w", n, err)
			}
			return err
		}
		reps = append(reps, rep)
	}
	plotPath := ""
	if o.Plot != "" && (len(o.Hosts) > 1 || o.PlotSet) {
		plotPath = o.Plot
		if err := benchPlot(reps, plotPath); err != nil {
			return err
		}
	}
	if len(o.Hosts) > 1 {
		sayScalingTable(say, reps)
	}
	if plotPath != "" {
		say("plot: %s", plotPath)
	}
	if !o.JSON {
		return nil
	}
	enc := json.NewEncoder(o.Out)
	enc.SetIndent("", "  ")
	if len(o.Hosts) == 1 {
		return enc.Encode(reps[0])
	}
	return enc.Encode(struct {
		Sizes []benchReport `json:"sizes"`
		Plot  string        `json:"plot,omitempty"`
	}{reps, plotPath})
}

// benchSize runs the whole bench on a rack of n hosts built for it.
func benchSize(ctx context.Context, o *benchOptions, n int, peerBin, peerImpl string, say func(string, ...any)) (rep benchReport, err error) {
	rep = benchReport{Hosts: n, MTU: o.MTU}
	bin, err := os.Executable()
	if err != nil {
		return rep, err
	}
	rack, err := lab.Up(ctx, lab.Options{Prefix: o.Prefix, Hosts: n, Force: true, MTU: o.MTU})
	if err != nil {
		return rep, err
	}
	defer func() {
		if e := lab.Down(context.Background(), o.Prefix); e != nil && err == nil {
			err = e
		}
	}()

	say("== raw frames, A -> B (no protocol)")
	echo, eout, err := rawOn(ctx, rack, bin, 1, "--mode", "echo", "--duration", "60s")
	if err != nil {
		return rep, err
	}
	time.Sleep(200 * time.Millisecond)
	ping, pout, err := rawOn(ctx, rack, bin, 0, "--mode", "ping", "--count", strconv.Itoa(o.Pings))
	if err != nil {
		return rep, err
	}
	pr, err := rawWait(ping, pout)
	if err != nil {
		return rep, err
	}
	echo.Process.Kill()
	echo.Wait()
	_ = eout
	rep.RawOneWayP50us, rep.RawOneWayP99us, rep.RawOneWayP999us = pr.OneWayP50, pr.OneWayP99, pr.OneWayP999
	say("one-way (RTT/2): p50 %.1fus  p99 %.1fus  p999 %.1fus  (%d samples, %d lost)", pr.OneWayP50, pr.OneWayP99, pr.OneWayP999, pr.Frames, pr.Lost)

	sink, sout, err := rawOn(ctx, rack, bin, 1, "--mode", "sink", "--duration", "8s")
	if err != nil {
		return rep, err
	}
	time.Sleep(200 * time.Millisecond)
	flood, fout, err := rawOn(ctx, rack, bin, 0, "--mode", "flood", "--count", strconv.Itoa(o.Flood))
	if err != nil {
		return rep, err
	}
	fr, err := rawWait(flood, fout)
	if err != nil {
		return rep, err
	}
	sr, err := rawWait(sink, sout)
	if err != nil {
		return rep, err
	}
	rep.RawSendRate, rep.RawRecvRate = fr.Rate, sr.Rate
	say("max frame rate of one sender: sent %.0f frames/s, received %.0f frames/s (%d of %d)", fr.Rate, sr.Rate, sr.Frames, fr.Frames)

	dir := o.CPUProfile
	if dir != "" {
		err = os.MkdirAll(dir, 0o755)
		say("CPU profiles of every daemon in %s/<run>/<host>.cpu.pprof", dir)
	} else {
		dir, err = os.MkdirTemp("", "exo-bench-")
	}
	if err != nil {
		return rep, err
	}
	var all []int
	for i := range rack.Hosts {
		all = append(all, i)
	}
	run := func(name string, edit func(*daemon.Config), fn func(c *cluster.Cluster) error) error {
		ctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
		defer cancel()
		c, err := cluster.Start(ctx, rack, cluster.Options{Bin: bin, Dir: dir + "/" + name, Config: edit, CPUProfile: o.CPUProfile != ""})
		if err != nil {
			return err
		}
		err = fn(c)
		if ctx.Err() != nil {
			err = fmt.Errorf("run %s: not done after --run-timeout %v (daemon logs in %s): %w", name, o.RunTimeout, dir+"/"+name, err)
		}
		if e := c.Stop(); e != nil && err == nil {
			err = e
		}
		return err
	}

	// Rounds interleave the modes (a b c a b c ...) so that a noisy
	// stretch of the shared machine hits every mode alike; each mode's
	// figures are the medians over its rounds.
	// With --peer raft, each round measures raft after the modes (a b c
	// raft a b c raft ...).
	runs := map[string][]agreementFigures{}
	var raftRuns []raftFigures
	for round := 1; round <= o.Rounds; round++ {
		for _, mode := range o.Offloads {
			if o.Rounds > 1 {
				say("== round %d of %d", round, o.Rounds)
			}
			fig, err := benchAgreement(ctx, o, mode, fmt.Sprintf("r%d-", round), run, all, say)
			if err != nil {
				return rep, fmt.Errorf("offload %s: %w", mode, err)
			}
			runs[mode] = append(runs[mode], fig)
		}
		if peerBin != "" {
			if o.Rounds > 1 {
				say("== round %d of %d", round, o.Rounds)
			}
			fig, err := benchRaft(ctx, o, rack, peerBin, fmt.Sprintf("%s/r%d-raft", dir, round), all, say)
			if err != nil {
				return rep, fmt.Errorf("raft: %w", err)
			}
			raftRuns = append(raftRuns, fig)
		}
	}
	for _, mode := range o.Offloads {
		fig := medianFigures(runs[mode])
		fig.Rounds = len(runs[mode])
		rep.Offloads = append(rep.Offloads, fig)
	}
	base := rep.Offloads[0]
	rep.AgreeP50us, rep.AgreeP99us, rep.AgreeP999us = base.AgreeP50us, base.AgreeP99us, base.AgreeP999us
	rep.UnbatchedRate, rep.BatchedRate, rep.CPUusPerMsg, rep.MaxRSSMiB = base.UnbatchedRate, base.BatchedRate, base.CPUusPerMsg, base.MaxRSSMiB
	rep.IdleCPU = base.IdleCPU
	for _, f := range rep.Offloads[1:] {
		v := offloadRatios{Offload: f.Offload, Baseline: base.Offload,
			UnbatchedRate: f.UnbatchedRate / base.UnbatchedRate, BatchedRate: f.BatchedRate / base.BatchedRate,
			P50: base.AgreeP50us / f.AgreeP50us, MachineCPUUnbatched: base.UnbatchedMachineCPUusPerMsg / f.UnbatchedMachineCPUusPerMsg}
		rep.Versus = append(rep.Versus, v)
		say("== %s against %s (same run): unbatched agreed rate x%.2f, batched x%.2f (target >= 2), agreement p50 %.0fus vs %.0fus, machine CPU per unbatched message %.1fus vs %.1fus",
			f.Offload, base.Offload, v.UnbatchedRate, v.BatchedRate, f.AgreeP50us, base.AgreeP50us, f.UnbatchedMachineCPUusPerMsg, base.UnbatchedMachineCPUusPerMsg)
	}
	if rep.RawOneWayP50us > 0 {
		rep.RatioAgreeToRawP50 = rep.AgreeP50us / rep.RawOneWayP50us
	}
	if rep.RawRecvRate > 0 {
		rep.RatioUnbatchedToRawRate = rep.UnbatchedRate / rep.RawRecvRate
	}
	say("== ratios (same run): agreement p50 / raw one-way p50 = %.1f (target <= 4); unbatched agreed rate / raw frame rate = %.2f (target >= 0.5); batched = %.0f msgs/s (target > 1M)",
		rep.RatioAgreeToRawP50, rep.RatioUnbatchedToRawRate, rep.BatchedRate)
	if len(raftRuns) > 0 {
		rf := medianFigures(raftRuns)
		rf.Rounds, rf.Impl = len(raftRuns), peerImpl
		v := raftVsExo(base, rf)
		rep.Raft, rep.ExoOverRaft = &rf, &v
		sayRaftTable(say, n, base, rf, v)
	}
	return rep, nil
}

// benchAgreement measures the daemons of one offload mode: agreement
// latency, unbatched and batched agreed rates, CPU per message.
func benchAgreement(ctx context.Context, o *benchOptions, mode, prefix string,
	run func(string, func(*daemon.Config), func(*cluster.Cluster) error) error,
	all []int, say func(string, ...any)) (agreementFigures, error) {
	fig := agreementFigures{Offload: mode}
	setMode, err := cluster.WithOffload(mode)
	if err != nil {
		return fig, err
	}
	withMode := func(edit func(*daemon.Config)) func(*daemon.Config) { return cluster.Hooks(setMode, edit) }
	say("== agreement, %d hosts, 64-byte messages, offload %s, MTU %d", len(all), mode, o.MTU)
	err = run(prefix+mode+"-latency", withMode(nil), func(c *cluster.Cluster) error {
		if o.Idle > 0 {
			// The rack idle: it settles into its back-off, then every
			// daemon's CPU time over o.Idle.
			time.Sleep(time.Second)
			u0 := make([]time.Duration, len(all))
			for i := range all {
				u, _ := c.Usage(i)
				u0[i] = u.CPU
			}
			t0 := time.Now()
			select {
			case <-time.After(o.Idle):
			case <-ctx.Done():
				return ctx.Err()
			}
			el := time.Since(t0)
			var sum float64
			for i := range all {
				u, _ := c.Usage(i)
				f := float64(u.CPU-u0[i]) / float64(el)
				sum += f
				fig.IdleCPUMax = max(fig.IdleCPUMax, f)
			}
			fig.IdleCPU = sum / float64(len(all))
			say("idle rack: %.2f%% of a CPU per daemon over %v (busiest %.2f%%; /proc CPU times, 10 ms resolution)", 100*fig.IdleCPU, o.Idle, 100*fig.IdleCPUMax)
		}
		res, err := c.Publish(ctx, cluster.Load{Hosts: []int{0}, PerHost: o.Pings, Size: 64, Window: 1})
		if err != nil {
			return err
		}
		h := res.Latency
		fig.AgreeP50us, fig.AgreeP99us, fig.AgreeP999us = float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(99)), float64(h.ValueAtQuantile(99.9))
		say("agreement latency (publish to agreed at the publisher, 1 in flight): p50 %.0fus  p99 %.0fus  p999 %.0fus",
			fig.AgreeP50us, fig.AgreeP99us, fig.AgreeP999us)
		return nil
	})
	if err != nil {
		return fig, err
	}
	// cpu measures fn's published messages against the daemons' CPU and
	// the whole machine's busy time.
	cpu := func(c *cluster.Cluster, fn func() (cluster.LoadResult, error)) (res cluster.LoadResult, daemonUS, machineUS float64, rss uint64, err error) {
		var d0 time.Duration
		for i := range all {
			u, _ := c.Usage(i)
			d0 += u.CPU
		}
		m0, _ := machineBusy()
		res, err = fn()
		if err != nil {
			return
		}
		m1, _ := machineBusy()
		var d1 time.Duration
		for i := range all {
			u, _ := c.Usage(i)
			d1 += u.CPU
			rss = max(rss, u.RSSBytes)
		}
		daemonUS = float64((d1 - d0).Microseconds()) / float64(res.Published)
		machineUS = float64((m1 - m0).Microseconds()) / float64(res.Published)
		return
	}
	err = run(prefix+mode+"-unbatched", withMode(func(cfg *daemon.Config) { cfg.BatchBytes = 2 + 9 + 64; cfg.MaxMessage = 64 << 10 }), func(c *cluster.Cluster) error {
		res, dus, mus, _, err := cpu(c, func() (cluster.LoadResult, error) {
			return c.Publish(ctx, cluster.Load{Hosts: all, PerHost: o.Messages / len(all), Size: 64, Window: 64})
		})
		if err != nil {
			return err
		}
		fig.UnbatchedRate, fig.UnbatchedCPUusPerMsg, fig.UnbatchedMachineCPUusPerMsg = res.Rate(), dus, mus
		say("agreed msgs/s without batching (one message per frame): %.0f  (daemon CPU %.1fus, machine CPU %.1fus per agreed message)", res.Rate(), dus, mus)
		return nil
	})
	if err != nil {
		return fig, err
	}
	err = run(prefix+mode+"-batched", withMode(nil), func(c *cluster.Cluster) error {
		res, dus, mus, rss, err := cpu(c, func() (cluster.LoadResult, error) {
			return c.Publish(ctx, cluster.Load{Hosts: all, PerHost: o.Messages / len(all), Size: 64, Window: 512})
		})
		if err != nil {
			return err
		}
		fig.BatchedRate, fig.CPUusPerMsg, fig.MachineCPUusPerMsg = res.Rate(), dus, mus
		fig.MaxRSSMiB = float64(rss) / (1 << 20)
		say("agreed msgs/s with batching: %.0f  (daemon CPU %.1fus, machine CPU %.1fus per agreed message, all hosts; max RSS %.1f MiB)",
			res.Rate(), dus, mus, fig.MaxRSSMiB)
		return nil
	})
	if err != nil {
		return fig, err
	}
	if o.Peer != "" {
		err = run(prefix+mode+"-client-batched", withMode(nil), func(c *cluster.Cluster) error {
			res, dus, mus, _, err := cpu(c, func() (cluster.LoadResult, error) {
				return c.Publish(ctx, cluster.Load{Hosts: all, PerHost: o.Messages / len(all), Size: 64, Window: 512, Batch: o.Batch})
			})
			if err != nil {
				return err
			}
			fig.ClientBatch, fig.ClientBatchedRate, fig.ClientBatchedCPUusPerMsg, fig.ClientBatchedMachineCPU = o.Batch, res.Rate(), dus, mus
			say("agreed msgs/s with client batching (%d messages per publish call, 512 in flight per host): %.0f  (daemon CPU %.1fus, machine CPU %.1fus per agreed message)",
				o.Batch, res.Rate(), dus, mus)
			return nil
		})
		if err != nil {
			return fig, err
		}
	}
	if o.FloodKind == "" {
		return fig, nil
	}
	fig.FloodKind = o.FloodKind
	err = run(prefix+mode+"-flood", withMode(nil), func(c *cluster.Cluster) error {
		return benchFlood(ctx, o, c, all, &fig, say)
	})
	return fig, err
}

// floodCounted is how many frames of a flood kind host i counted: in its
// fast path (dropped there) plus in its core's rejects.
func floodCounted(ctx context.Context, c *cluster.Cluster, i int, kind string) (uint64, error) {
	st, err := c.Status(ctx, i)
	if err != nil {
		return 0, err
	}
	reason := map[string]string{"foreign-group": "BAD_GROUP", "bad-version": "BAD_VERSION", "garbage": "", "forged-sender": "BAD_SENDER"}[kind]
	var n uint64
	if reason != "" {
		n += st.Counters["rejects."+reason]
		if st.Offload != nil {
			n += st.Offload.Counters[reason]
		}
	}
	if kind == "forged-sender" {
		n += st.Counters["foreign_mac"]
	}
	return n, nil
}

// benchFlood runs the batched load while the last host's namespace sends
// bad frames as fast as it can.
func benchFlood(ctx context.Context, o *benchOptions, c *cluster.Cluster, all []int, fig *agreementFigures, say func(string, ...any)) error {
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	last := len(all) - 1
	before, err := floodCounted(ctx, c, 0, o.FloodKind)
	if err != nil {
		return err
	}
	st0, err := c.Status(ctx, 0)
	if err != nil {
		return err
	}
	inj := c.Rack.CommandContext(ctx, last, bin, "raw", "--interface", c.Rack.Hosts[last].Ifname,
		"--mode", "inject", "--kind", o.FloodKind, "--count", "0", "--duration", o.RunTimeout.String())
	var out, errb bytes.Buffer
	inj.Stdout, inj.Stderr = &out, &errb
	if err := inj.Start(); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond)
	res, err := c.Publish(ctx, cluster.Load{Hosts: all, PerHost: o.Messages / len(all), Size: 64, Window: 512})
	inj.Process.Signal(os.Interrupt)
	werr := inj.Wait()
	if err != nil {
		return err
	}
	var ir rawResult
	if jerr := json.Unmarshal(out.Bytes(), &ir); jerr != nil {
		return fmt.Errorf("flood injector: %v, %v: %s", werr, jerr, errb.String())
	}
	time.Sleep(200 * time.Millisecond)
	after, err := floodCounted(ctx, c, 0, o.FloodKind)
	if err != nil {
		return err
	}
	fig.FloodBatchedRate, fig.FloodSent, fig.FloodSentRate, fig.FloodCounted = res.Rate(), ir.Frames, ir.Rate, after-before
	st1, err := c.Status(ctx, 0)
	if err != nil {
		return err
	}
	// Every log entry is one legitimate frame.
	if legit := float64(st1.Append-st0.Append) / res.Elapsed.Seconds(); legit > 0 {
		fig.FloodToLegitRatio = ir.Rate / legit
	}
	say("under a %s flood (%d frames at %.0f/s from %s, %.1fx the legitimate frame rate; host A counted %d of them): agreed msgs/s with batching %.0f (%.2f of the unattacked run)",
		o.FloodKind, ir.Frames, ir.Rate, c.Rack.Hosts[last].Name, fig.FloodToLegitRatio, fig.FloodCounted, res.Rate(), res.Rate()/fig.BatchedRate)
	return nil
}

// machineBusy returns the busy CPU time of the whole machine (every core:
// user, system, irq, softirq) from /proc/stat.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy uint64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 7 { // steal, guest (counted in user), guest_nice
			break
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * time.Second / 100, nil // USER_HZ = 100
}

// medianFigures returns, field by field, the median of the numeric fields
// of figs (the upper median for an even count) and the first's strings.
func medianFigures[T any](figs []T) T {
	out := figs[0]
	v := reflect.ValueOf(&out).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Float64:
			xs := make([]float64, len(figs))
			for k := range figs {
				xs[k] = reflect.ValueOf(figs[k]).Field(i).Float()
			}
			slices.Sort(xs)
			f.SetFloat(xs[len(xs)/2])
		case reflect.Int64, reflect.Int:
			xs := make([]int64, len(figs))
			for k := range figs {
				xs[k] = reflect.ValueOf(figs[k]).Field(i).Int()
			}
			slices.Sort(xs)
			f.SetInt(xs[len(xs)/2])
		case reflect.Uint64:
			xs := make([]uint64, len(figs))
			for k := range figs {
				xs[k] = reflect.ValueOf(figs[k]).Field(i).Uint()
			}
			slices.Sort(xs)
			f.SetUint(xs[len(xs)/2])
		}
	}
	return out
}
