package measure

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/daemon"
)

// BenchOptions configure Bench (exo bench: its flags).
type BenchOptions struct {
	// Hosts are the rack sizes: the whole bench runs once per size, on a
	// rack built afresh.
	Hosts []int
	// Messages per throughput run, Pings samples of the latency runs,
	// Flood frames of the raw rate run.
	Messages, Pings, Flood int
	// Prefix names the lab rack.
	Prefix string
	// Offloads are the offload modes measured side by side
	// (cluster.OffloadModes), the first the baseline.
	Offloads []string
	// FloodKind, when set, adds a batched run under a flood of bad frames
	// of this kind (Raw's inject kinds) from the last host's namespace.
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

	// Peer, when "raft", measures etcd raft (tools/raftpeer) in the same
	// run: PeerBin is its binary, or it is built from PeerSrc.
	Peer, PeerBin, PeerSrc string
	// Batch is the number of messages per publish call (exo: one
	// PublishBatch request) and per raft proposal in shape (c), measured
	// with Peer.
	Batch int
	// Plot is the file of the rack-size plot: written when several sizes
	// are measured, or when PlotSet (the flag was given).
	Plot    string
	PlotSet bool

	// Log receives the figures as they are measured, one line each, and
	// the rack-size table (nil: nothing).
	Log io.Writer
	// Stderr receives what the helpers started in the hosts (exo raw)
	// write to their stderr (nil: os.Stderr).
	Stderr io.Writer
}

// AgreementFigures are the daemon measurements of one offload mode.
type AgreementFigures struct {
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
	// used over BenchOptions.Idle (0 when not measured); IdleCPUMax the
	// busiest's.
	IdleCPU    float64 `json:"idle_cpu_per_daemon"`
	IdleCPUMax float64 `json:"idle_cpu_per_daemon_max"`

	// Client batching, measured with a peer: BenchOptions.Batch messages
	// per publish call (a PublishBatch request), 512 messages in flight
	// per host.
	ClientBatch              int     `json:"client_batch_messages,omitempty"`
	ClientBatchedRate        float64 `json:"agreed_msgs_per_sec_client_batched,omitempty"`
	ClientBatchedCPUusPerMsg float64 `json:"daemon_cpu_us_per_agreed_msg_client_batched,omitempty"`
	ClientBatchedMachineCPU  float64 `json:"machine_cpu_us_per_agreed_msg_client_batched,omitempty"`

	// The batched run again while the last host's namespace floods bad
	// frames of BenchOptions.FloodKind (0 when not measured).
	FloodKind        string  `json:"flood_kind,omitempty"`
	FloodBatchedRate float64 `json:"agreed_msgs_per_sec_batched_under_flood,omitempty"`
	FloodSent        int64   `json:"flood_frames_sent,omitempty"`
	FloodSentRate    float64 `json:"flood_frames_per_sec,omitempty"`
	// FloodCounted is how many flood frames host A counted (in its fast
	// path's counters, or its core's rejects for software).
	FloodCounted      uint64  `json:"flood_frames_counted_at_host_a,omitempty"`
	FloodToLegitRatio float64 `json:"flood_to_legit_frame_ratio,omitempty"`
}

// BenchReport is the bench of one rack size; every figure comes from one
// run on one rack, so that the ratios compare like with like.
type BenchReport struct {
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
	// in the order of BenchOptions.Offloads; the fields above are the
	// first one's.
	Offloads []AgreementFigures `json:"offloads"`
	// Versus compares each further mode with the first (ratios > 1 mean
	// the mode is faster or uses less CPU).
	Versus []OffloadRatios `json:"versus,omitempty"`

	// Raft holds etcd raft's figures with a raft peer, and ExoOverRaft
	// the first offload mode's figures over raft's, same run.
	Raft        *RaftFigures `json:"raft,omitempty"`
	ExoOverRaft *RaftRatios  `json:"exo_over_raft,omitempty"`
}

// OffloadRatios compares one offload mode with the baseline mode.
type OffloadRatios struct {
	Offload, Baseline   string
	UnbatchedRate       float64 `json:"unbatched_rate_ratio"`
	BatchedRate         float64 `json:"batched_rate_ratio"`
	P50                 float64 `json:"agreement_p50_ratio_baseline_over_mode"`
	MachineCPUUnbatched float64 `json:"machine_cpu_per_msg_unbatched_ratio_baseline_over_mode"`
}

// BenchResult is what Bench measured: a report per rack size, and the
// plot of the figures against the size when one was drawn.
type BenchResult struct {
	Sizes []BenchReport `json:"sizes"`
	Plot  string        `json:"plot,omitempty"`
}

// Bench measures, for every rack size of o.Hosts on a lab rack built for
// it, the raw-frame baseline between hosts A and B and the daemons of
// every offload mode (and a raft peer's), in one run on the same hosts.
// It logs each figure as it is measured; with several sizes it also logs
// a table by size and draws a plot.
func Bench(ctx context.Context, o BenchOptions) (BenchResult, error) {
	var res BenchResult
	say := sayTo(o.Log)
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	peerBin, peerImpl := "", ""
	if o.Peer == "raft" {
		bin, cleanup, err := findPeerBin(ctx, o.PeerBin, o.PeerSrc)
		if err != nil {
			return res, &UsageError{Err: err}
		}
		defer cleanup()
		peerBin, peerImpl = bin, peerVersion(ctx, bin)
		say("== peer: %s (%s)", peerImpl, peerBin)
	}
	for _, n := range o.Hosts {
		if len(o.Hosts) > 1 {
			say("\n=== %d hosts", n)
		}
		rep, err := benchSize(ctx, &o, n, peerBin, peerImpl, say)
		if err != nil {
			if len(o.Hosts) > 1 {
				err = fmt.Errorf("%d hosts: %w", n, err)
			}
			return res, err
		}
		res.Sizes = append(res.Sizes, rep)
	}
	if o.Plot != "" && (len(o.Hosts) > 1 || o.PlotSet) {
		res.Plot = o.Plot
		if err := benchPlot(res.Sizes, res.Plot); err != nil {
			return res, err
		}
	}
	if len(o.Hosts) > 1 {
		sayScalingTable(say, res.Sizes)
	}
	if res.Plot != "" {
		say("plot: %s", res.Plot)
	}
	return res, nil
}

// sizeRun is the bench of one rack size on its lab rack.
type sizeRun struct {
	o   *BenchOptions
	l   *cluster.Lab
	dir string // the daemons' directories, one per run
	all []int  // every host
	say func(string, ...any)
}

// benchSize runs the whole bench on a rack of n hosts built for it.
func benchSize(ctx context.Context, o *BenchOptions, n int, peerBin, peerImpl string, say func(string, ...any)) (BenchReport, error) {
	rep := BenchReport{Hosts: n, MTU: o.MTU}
	err := cluster.WithLab(ctx, cluster.LabOptions{Prefix: o.Prefix, Hosts: n, MTU: o.MTU}, func(l *cluster.Lab) error {
		r := &sizeRun{o: o, l: l, say: say}
		if err := r.raw(ctx, &rep); err != nil {
			return err
		}
		return r.agreement(ctx, &rep, peerBin, peerImpl)
	})
	return rep, err
}

// raw measures the raw-frame baseline between hosts A and B: one-way
// latency (half the round trip of a frame echoed by B) and the frame rate
// of one sender.
func (r *sizeRun) raw(ctx context.Context, rep *BenchReport) error {
	r.say("== raw frames, A -> B (no protocol)")
	echo, err := startExo(ctx, r.l, 1, r.o.Stderr, "raw", "--mode", "echo", "--duration", "60s")
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	var pr RawResult
	err = runExo(ctx, r.l, 0, r.o.Stderr, &pr, "raw", "--mode", "ping", "--count", strconv.Itoa(r.o.Pings))
	echo.kill()
	if err != nil {
		return err
	}
	rep.RawOneWayP50us, rep.RawOneWayP99us, rep.RawOneWayP999us = pr.OneWayP50, pr.OneWayP99, pr.OneWayP999
	r.say("one-way (RTT/2): p50 %.1fus  p99 %.1fus  p999 %.1fus  (%d samples, %d lost)", pr.OneWayP50, pr.OneWayP99, pr.OneWayP999, pr.Frames, pr.Lost)

	sink, err := startExo(ctx, r.l, 1, r.o.Stderr, "raw", "--mode", "sink", "--duration", "8s")
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	var fr, sr RawResult
	if err := runExo(ctx, r.l, 0, r.o.Stderr, &fr, "raw", "--mode", "flood", "--count", strconv.Itoa(r.o.Flood)); err != nil {
		sink.kill()
		return err
	}
	if err := sink.wait(&sr); err != nil {
		return err
	}
	rep.RawSendRate, rep.RawRecvRate = fr.Rate, sr.Rate
	r.say("max frame rate of one sender: sent %.0f frames/s, received %.0f frames/s (%d of %d)", fr.Rate, sr.Rate, sr.Frames, fr.Frames)
	return nil
}

// agreement measures the daemons of every offload mode and the raft peer,
// in rounds, and fills in rep's figures and ratios.
func (r *sizeRun) agreement(ctx context.Context, rep *BenchReport, peerBin, peerImpl string) error {
	o := r.o
	r.dir = o.CPUProfile
	var err error
	if r.dir != "" {
		err = os.MkdirAll(r.dir, 0o755)
		r.say("CPU profiles of every daemon in %s/<run>/<host>.cpu.pprof", r.dir)
	} else {
		r.dir, err = os.MkdirTemp("", "exo-bench-")
	}
	if err != nil {
		return fmt.Errorf("bench: daemon directory: %w", err)
	}
	for i := range r.l.Rack.Hosts {
		r.all = append(r.all, i)
	}
	// Rounds interleave the modes (a b c a b c ...) so that a noisy
	// stretch of the shared machine hits every mode alike; each mode's
	// figures are the medians over its rounds.
	// With a raft peer, each round measures raft after the modes (a b c
	// raft a b c raft ...).
	runs := map[string][]AgreementFigures{}
	var raftRuns []RaftFigures
	for round := 1; round <= o.Rounds; round++ {
		for _, mode := range o.Offloads {
			if o.Rounds > 1 {
				r.say("== round %d of %d", round, o.Rounds)
			}
			fig, err := r.mode(ctx, mode, fmt.Sprintf("r%d-", round))
			if err != nil {
				return fmt.Errorf("offload %s: %w", mode, err)
			}
			runs[mode] = append(runs[mode], fig)
		}
		if peerBin != "" {
			if o.Rounds > 1 {
				r.say("== round %d of %d", round, o.Rounds)
			}
			fig, err := r.raft(ctx, peerBin, fmt.Sprintf("%s/r%d-raft", r.dir, round))
			if err != nil {
				return fmt.Errorf("raft: %w", err)
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
		v := OffloadRatios{Offload: f.Offload, Baseline: base.Offload,
			UnbatchedRate: f.UnbatchedRate / base.UnbatchedRate, BatchedRate: f.BatchedRate / base.BatchedRate,
			P50: base.AgreeP50us / f.AgreeP50us, MachineCPUUnbatched: base.UnbatchedMachineCPUusPerMsg / f.UnbatchedMachineCPUusPerMsg}
		rep.Versus = append(rep.Versus, v)
		r.say("== %s against %s (same run): unbatched agreed rate x%.2f, batched x%.2f (target >= 2), agreement p50 %.0fus vs %.0fus, machine CPU per unbatched message %.1fus vs %.1fus",
			f.Offload, base.Offload, v.UnbatchedRate, v.BatchedRate, f.AgreeP50us, base.AgreeP50us, f.UnbatchedMachineCPUusPerMsg, base.UnbatchedMachineCPUusPerMsg)
	}
	if rep.RawOneWayP50us > 0 {
		rep.RatioAgreeToRawP50 = rep.AgreeP50us / rep.RawOneWayP50us
	}
	if rep.RawRecvRate > 0 {
		rep.RatioUnbatchedToRawRate = rep.UnbatchedRate / rep.RawRecvRate
	}
	r.say("== ratios (same run): agreement p50 / raw one-way p50 = %.1f (target <= 4); unbatched agreed rate / raw frame rate = %.2f (target >= 0.5); batched = %.0f msgs/s (target > 1M)",
		rep.RatioAgreeToRawP50, rep.RatioUnbatchedToRawRate, rep.BatchedRate)
	if len(raftRuns) > 0 {
		rf := medianFigures(raftRuns)
		rf.Rounds, rf.Impl = len(raftRuns), peerImpl
		v := raftVsExo(base, rf)
		rep.Raft, rep.ExoOverRaft = &rf, &v
		sayRaftTable(r.say, len(r.all), base, rf, v)
	}
	return nil
}

// daemons runs fn on daemons started afresh on every host (config edited
// by edit), in a directory of the run's name, within
// BenchOptions.RunTimeout.
func (r *sizeRun) daemons(ctx context.Context, name string, edit func(*daemon.Config), fn func(c *cluster.Cluster) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.RunTimeout)
	defer cancel()
	dir := filepath.Join(r.dir, name)
	return r.l.Run(ctx, cluster.Options{Dir: dir, Config: edit, CPUProfile: r.o.CPUProfile != ""}, func(c *cluster.Cluster) error {
		err := fn(c)
		if ctx.Err() != nil {
			err = fmt.Errorf("run %s: not done after --run-timeout %v (daemon logs in %s): %w", name, r.o.RunTimeout, dir, err)
		}
		return err
	})
}

// mode measures the daemons of one offload mode: agreement latency,
// unbatched and batched agreed rates, CPU per message.
func (r *sizeRun) mode(ctx context.Context, mode, prefix string) (AgreementFigures, error) {
	o, all, say := r.o, r.all, r.say
	fig := AgreementFigures{Offload: mode}
	setMode, err := cluster.WithOffload(mode)
	if err != nil {
		return fig, err
	}
	withMode := func(edit func(*daemon.Config)) func(*daemon.Config) { return cluster.Hooks(setMode, edit) }
	say("== agreement, %d hosts, 64-byte messages, offload %s, MTU %d", len(all), mode, o.MTU)
	err = r.daemons(ctx, prefix+mode+"-latency", withMode(nil), func(c *cluster.Cluster) error {
		if o.Idle > 0 {
			if err := r.idle(ctx, c, &fig); err != nil {
				return err
			}
		}
		res, err := c.Publish(ctx, cluster.Load{Hosts: []int{0}, PerHost: o.Pings, Size: 64, Window: 1})
		if err != nil {
			return err
		}
		fig.AgreeP50us, fig.AgreeP99us, fig.AgreeP999us = quantilesUs(res.Latency, 1)
		say("agreement latency (publish to agreed at the publisher, 1 in flight): p50 %.0fus  p99 %.0fus  p999 %.0fus",
			fig.AgreeP50us, fig.AgreeP99us, fig.AgreeP999us)
		return nil
	})
	if err != nil {
		return fig, err
	}
	// load publishes from every host with window publishes in flight
	// (batch messages per call) and measures it against the daemons' CPU.
	load := func(c *cluster.Cluster, window, batch int) (cluster.LoadResult, cpuCost, error) {
		return r.cpu(c, func() (cluster.LoadResult, error) {
			return c.Publish(ctx, cluster.Load{Hosts: all, PerHost: o.Messages / len(all), Size: 64, Window: window, Batch: batch})
		})
	}
	err = r.daemons(ctx, prefix+mode+"-unbatched", withMode(func(cfg *daemon.Config) { cfg.BatchBytes = 2 + 9 + 64; cfg.MaxMessage = 64 << 10 }), func(c *cluster.Cluster) error {
		res, cost, err := load(c, 64, 0)
		if err != nil {
			return err
		}
		fig.UnbatchedRate, fig.UnbatchedCPUusPerMsg, fig.UnbatchedMachineCPUusPerMsg = res.Rate(), cost.daemonUs, cost.machineUs
		say("agreed msgs/s without batching (one message per frame): %.0f  (daemon CPU %.1fus, machine CPU %.1fus per agreed message)", res.Rate(), cost.daemonUs, cost.machineUs)
		return nil
	})
	if err != nil {
		return fig, err
	}
	err = r.daemons(ctx, prefix+mode+"-batched", withMode(nil), func(c *cluster.Cluster) error {
		res, cost, err := load(c, 512, 0)
		if err != nil {
			return err
		}
		fig.BatchedRate, fig.CPUusPerMsg, fig.MachineCPUusPerMsg = res.Rate(), cost.daemonUs, cost.machineUs
		fig.MaxRSSMiB = float64(cost.rss) / (1 << 20)
		say("agreed msgs/s with batching: %.0f  (daemon CPU %.1fus, machine CPU %.1fus per agreed message, all hosts; max RSS %.1f MiB)",
			res.Rate(), cost.daemonUs, cost.machineUs, fig.MaxRSSMiB)
		return nil
	})
	if err != nil {
		return fig, err
	}
	if o.Peer != "" {
		err = r.daemons(ctx, prefix+mode+"-client-batched", withMode(nil), func(c *cluster.Cluster) error {
			res, cost, err := load(c, 512, o.Batch)
			if err != nil {
				return err
			}
			fig.ClientBatch, fig.ClientBatchedRate, fig.ClientBatchedCPUusPerMsg, fig.ClientBatchedMachineCPU = o.Batch, res.Rate(), cost.daemonUs, cost.machineUs
			say("agreed msgs/s with client batching (%d messages per publish call, 512 in flight per host): %.0f  (daemon CPU %.1fus, machine CPU %.1fus per agreed message)",
				o.Batch, res.Rate(), cost.daemonUs, cost.machineUs)
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
	err = r.daemons(ctx, prefix+mode+"-flood", withMode(nil), func(c *cluster.Cluster) error {
		return r.flood(ctx, c, &fig)
	})
	return fig, err
}

// idle measures every daemon's CPU on the idle rack over
// BenchOptions.Idle, once it has settled into its back-off.
func (r *sizeRun) idle(ctx context.Context, c *cluster.Cluster, fig *AgreementFigures) error {
	time.Sleep(time.Second)
	u0 := make([]time.Duration, len(r.all))
	for i := range r.all {
		u, _ := c.Usage(i)
		u0[i] = u.CPU
	}
	t0 := time.Now()
	select {
	case <-time.After(r.o.Idle):
	case <-ctx.Done():
		return ctx.Err()
	}
	el := time.Since(t0)
	var sum float64
	for i := range r.all {
		u, _ := c.Usage(i)
		f := float64(u.CPU-u0[i]) / float64(el)
		sum += f
		fig.IdleCPUMax = max(fig.IdleCPUMax, f)
	}
	fig.IdleCPU = sum / float64(len(r.all))
	r.say("idle rack: %.2f%% of a CPU per daemon over %v (busiest %.2f%%; /proc CPU times, 10 ms resolution)", 100*fig.IdleCPU, r.o.Idle, 100*fig.IdleCPUMax)
	return nil
}

// cpuCost is the CPU a load cost per agreed message: the daemons' and the
// whole machine's busy time, in microseconds; and the largest daemon's
// resident memory after it.
type cpuCost struct {
	daemonUs, machineUs float64
	rss                 uint64
}

// cpu measures fn's published messages against the daemons' CPU and the
// whole machine's busy time.
func (r *sizeRun) cpu(c *cluster.Cluster, fn func() (cluster.LoadResult, error)) (cluster.LoadResult, cpuCost, error) {
	var cost cpuCost
	var d0 time.Duration
	for i := range r.all {
		u, _ := c.Usage(i)
		d0 += u.CPU
	}
	m0, _ := machineBusy()
	res, err := fn()
	if err != nil {
		return res, cost, err
	}
	m1, _ := machineBusy()
	var d1 time.Duration
	for i := range r.all {
		u, _ := c.Usage(i)
		d1 += u.CPU
		cost.rss = max(cost.rss, u.RSSBytes)
	}
	cost.daemonUs = float64((d1 - d0).Microseconds()) / float64(res.Published)
	cost.machineUs = float64((m1 - m0).Microseconds()) / float64(res.Published)
	return res, cost, nil
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

// flood runs the batched load while the last host's namespace sends bad
// frames as fast as it can.
func (r *sizeRun) flood(ctx context.Context, c *cluster.Cluster, fig *AgreementFigures) error {
	o, all := r.o, r.all
	last := len(all) - 1
	before, err := floodCounted(ctx, c, 0, o.FloodKind)
	if err != nil {
		return err
	}
	st0, err := c.Status(ctx, 0)
	if err != nil {
		return err
	}
	inj, err := startExo(ctx, r.l, last, nil, "raw", "--interface", c.Rack.Hosts[last].Ifname,
		"--mode", "inject", "--kind", o.FloodKind, "--count", "0", "--duration", o.RunTimeout.String())
	if err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond)
	res, err := c.Publish(ctx, cluster.Load{Hosts: all, PerHost: o.Messages / len(all), Size: 64, Window: 512})
	inj.cmd.Process.Signal(os.Interrupt)
	var ir RawResult
	ierr := inj.wait(&ir)
	if err != nil {
		return err
	}
	if ierr != nil {
		return fmt.Errorf("flood injector: %w", ierr)
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
	r.say("under a %s flood (%d frames at %.0f/s from %s, %.1fx the legitimate frame rate; host A counted %d of them): agreed msgs/s with batching %.0f (%.2f of the unattacked run)",
		o.FloodKind, ir.Frames, ir.Rate, c.Rack.Hosts[last].Name, fig.FloodToLegitRatio, fig.FloodCounted, res.Rate(), res.Rate()/fig.BatchedRate)
	return nil
}
