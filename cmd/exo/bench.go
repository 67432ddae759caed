package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/lab"
)

type benchOptions struct {
	Hosts    int
	Messages int
	Pings    int
	Flood    int
	Prefix   string
	JSON     bool
	Out      io.Writer
}

// benchReport is exo bench's result; every figure comes from one run on one
// rack, so that the ratios compare like with like.
type benchReport struct {
	Hosts int `json:"hosts"`

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

	RatioAgreeToRawP50      float64 `json:"ratio_agreement_p50_to_raw_one_way_p50"`
	RatioUnbatchedToRawRate float64 `json:"ratio_unbatched_rate_to_raw_frame_rate"`
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
Needs root.`,
		Example: `  sudo exo bench
  sudo exo bench --messages 200000 --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Out = cmd.OutOrStdout()
			if err := lab.CheckRoot(); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("exo bench needs root (network namespaces, raw sockets): run with sudo")}
			}
			if o.Hosts < 2 {
				return &exitError{code: 2, err: fmt.Errorf("--hosts: %d, need at least 2", o.Hosts)}
			}
			return runBench(cmd.Context(), o)
		},
	}
	cmd.Flags().IntVar(&o.Hosts, "hosts", 5, "hosts in the rack")
	cmd.Flags().IntVar(&o.Messages, "messages", 50000, "messages per throughput run")
	cmd.Flags().IntVar(&o.Pings, "pings", 5000, "samples of the latency runs")
	cmd.Flags().IntVar(&o.Flood, "flood", 200000, "frames of the raw rate run")
	cmd.Flags().StringVar(&o.Prefix, "prefix", "exobench", "name prefix of the lab rack")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the report as JSON")
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

func runBench(ctx context.Context, o *benchOptions) (err error) {
	say := func(format string, args ...any) {
		if !o.JSON {
			fmt.Fprintf(o.Out, format+"\n", args...)
		}
	}
	rep := benchReport{Hosts: o.Hosts}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	rack, err := lab.Up(ctx, lab.Options{Prefix: o.Prefix, Hosts: o.Hosts, Force: true})
	if err != nil {
		return err
	}
	defer func() {
		if e := lab.Down(context.Background(), o.Prefix); e != nil && err == nil {
			err = e
		}
	}()

	say("== raw frames, A -> B (no protocol)")
	echo, eout, err := rawOn(ctx, rack, bin, 1, "--mode", "echo", "--duration", "60s")
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	ping, pout, err := rawOn(ctx, rack, bin, 0, "--mode", "ping", "--count", strconv.Itoa(o.Pings))
	if err != nil {
		return err
	}
	pr, err := rawWait(ping, pout)
	if err != nil {
		return err
	}
	echo.Process.Kill()
	echo.Wait()
	_ = eout
	rep.RawOneWayP50us, rep.RawOneWayP99us, rep.RawOneWayP999us = pr.OneWayP50, pr.OneWayP99, pr.OneWayP999
	say("one-way (RTT/2): p50 %.1fus  p99 %.1fus  p999 %.1fus  (%d samples, %d lost)", pr.OneWayP50, pr.OneWayP99, pr.OneWayP999, pr.Frames, pr.Lost)

	sink, sout, err := rawOn(ctx, rack, bin, 1, "--mode", "sink", "--duration", "8s")
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	flood, fout, err := rawOn(ctx, rack, bin, 0, "--mode", "flood", "--count", strconv.Itoa(o.Flood))
	if err != nil {
		return err
	}
	fr, err := rawWait(flood, fout)
	if err != nil {
		return err
	}
	sr, err := rawWait(sink, sout)
	if err != nil {
		return err
	}
	rep.RawSendRate, rep.RawRecvRate = fr.Rate, sr.Rate
	say("max frame rate of one sender: sent %.0f frames/s, received %.0f frames/s (%d of %d)", fr.Rate, sr.Rate, sr.Frames, fr.Frames)

	dir, err := os.MkdirTemp("", "exo-bench-")
	if err != nil {
		return err
	}
	var all []int
	for i := range rack.Hosts {
		all = append(all, i)
	}
	run := func(name string, edit func(*daemon.Config), fn func(c *cluster.Cluster) error) error {
		c, err := cluster.Start(ctx, rack, cluster.Options{Bin: bin, Dir: dir + "/" + name, Config: edit})
		if err != nil {
			return err
		}
		err = fn(c)
		if e := c.Stop(); e != nil && err == nil {
			err = e
		}
		return err
	}

	say("== agreement, %d hosts, 64-byte messages", o.Hosts)
	err = run("latency", nil, func(c *cluster.Cluster) error {
		res, err := c.Publish(ctx, cluster.Load{Hosts: []int{0}, PerHost: o.Pings, Size: 64, Window: 1})
		if err != nil {
			return err
		}
		h := res.Latency
		rep.AgreeP50us, rep.AgreeP99us, rep.AgreeP999us = float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(99)), float64(h.ValueAtQuantile(99.9))
		say("agreement latency (publish to agreed at the publisher, 1 in flight): p50 %.0fus  p99 %.0fus  p999 %.0fus",
			rep.AgreeP50us, rep.AgreeP99us, rep.AgreeP999us)
		return nil
	})
	if err != nil {
		return err
	}
	err = run("unbatched", func(cfg *daemon.Config) { cfg.BatchBytes = 2 + 9 + 64; cfg.MaxMessage = 64 << 10 }, func(c *cluster.Cluster) error {
		res, err := c.Publish(ctx, cluster.Load{Hosts: all, PerHost: o.Messages / o.Hosts, Size: 64, Window: 64})
		if err != nil {
			return err
		}
		rep.UnbatchedRate = res.Rate()
		say("agreed msgs/s without batching (one message per frame): %.0f", res.Rate())
		return nil
	})
	if err != nil {
		return err
	}
	err = run("batched", nil, func(c *cluster.Cluster) error {
		var cpu0 time.Duration
		for i := range all {
			u, _ := c.Usage(i)
			cpu0 += u.CPU
		}
		res, err := c.Publish(ctx, cluster.Load{Hosts: all, PerHost: o.Messages / o.Hosts, Size: 64, Window: 512})
		if err != nil {
			return err
		}
		var cpu1 time.Duration
		var rss uint64
		for i := range all {
			u, _ := c.Usage(i)
			cpu1 += u.CPU
			rss = max(rss, u.RSSBytes)
		}
		rep.BatchedRate = res.Rate()
		rep.CPUusPerMsg = float64((cpu1 - cpu0).Microseconds()) / float64(res.Published)
		rep.MaxRSSMiB = float64(rss) / (1 << 20)
		say("agreed msgs/s with batching: %.0f  (daemon CPU %.1fus per agreed message, all hosts; max RSS %.1f MiB)",
			res.Rate(), rep.CPUusPerMsg, rep.MaxRSSMiB)
		return nil
	})
	if err != nil {
		return err
	}
	if rep.RawOneWayP50us > 0 {
		rep.RatioAgreeToRawP50 = rep.AgreeP50us / rep.RawOneWayP50us
	}
	if rep.RawRecvRate > 0 {
		rep.RatioUnbatchedToRawRate = rep.UnbatchedRate / rep.RawRecvRate
	}
	say("== ratios (same run): agreement p50 / raw one-way p50 = %.1f (target <= 4); unbatched agreed rate / raw frame rate = %.2f (target >= 0.5); batched = %.0f msgs/s (target > 1M)",
		rep.RatioAgreeToRawP50, rep.RatioUnbatchedToRawRate, rep.BatchedRate)
	if o.JSON {
		enc := json.NewEncoder(o.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return nil
}
