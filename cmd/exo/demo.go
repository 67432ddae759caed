package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/lab"
)

type demoOptions struct {
	Hosts    int
	Messages int
	Size     int
	Prefix   string
	Keep     bool
	JSON     bool
	Out      io.Writer
}

// demoReport is exo demo's machine-readable result.
type demoReport struct {
	Hosts            int     `json:"hosts"`
	Messages         int     `json:"messages"`
	Identical        bool    `json:"identical_at_every_host"`
	AgreedPerSec     float64 `json:"agreed_msgs_per_sec"`
	LoadP50us        int64   `json:"loaded_publish_to_agreed_p50_us"`
	LoadP99us        int64   `json:"loaded_publish_to_agreed_p99_us"`
	LatencyP50us     int64   `json:"unloaded_publish_to_agreed_p50_us"`
	LatencyP99us     int64   `json:"unloaded_publish_to_agreed_p99_us"`
	LatencyP999us    int64   `json:"unloaded_publish_to_agreed_p999_us"`
	LatencySamples   int64   `json:"unloaded_samples"`
	ElapsedSeconds   float64 `json:"elapsed_seconds"`
	UpSeconds        float64 `json:"lab_up_seconds"`
	DaemonsStartSecs float64 `json:"daemons_start_seconds"`
}

func newDemoCmd() *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Build a lab rack, run a daemon per host, publish from every host, compare the streams",
		Long: `demo runs the appliance end to end on this machine: it builds a lab rack (one
network namespace per host, veth pairs, a bridge; see exo lab), starts an exo
daemon in every namespace on raw Ethernet frames, publishes messages from
every host at once, follows every host's agreed stream and checks that they
are identical, then measures agreement latency at low load, prints the
figures and tears everything down. Needs root.`,
		Example: `  sudo exo demo
  sudo exo demo --hosts 7 --messages 50000 --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Out = cmd.OutOrStdout()
			if o.Hosts < 1 || o.Hosts > 255 {
				return &exitError{code: 2, err: fmt.Errorf("--hosts: %d is outside 1..255", o.Hosts)}
			}
			if o.Messages < o.Hosts {
				return &exitError{code: 2, err: fmt.Errorf("--messages: %d is fewer than one per host", o.Messages)}
			}
			if err := lab.CheckRoot(); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("exo demo needs root (network namespaces, veth, raw sockets): run with sudo")}
			}
			return runDemo(cmd.Context(), o)
		},
	}
	cmd.Flags().IntVar(&o.Hosts, "hosts", 5, "hosts in the rack")
	cmd.Flags().IntVar(&o.Messages, "messages", 20000, "messages to publish, spread over all hosts")
	cmd.Flags().IntVar(&o.Size, "size", 64, "payload bytes")
	cmd.Flags().StringVar(&o.Prefix, "prefix", "exodemo", "name prefix of the lab rack")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "leave the rack and daemons running at the end")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the report as JSON")
	return cmd
}

func runDemo(ctx context.Context, o *demoOptions) (err error) {
	say := func(format string, args ...any) {
		if !o.JSON {
			fmt.Fprintf(o.Out, format+"\n", args...)
		}
	}
	rep := demoReport{Hosts: o.Hosts, Messages: o.Messages / o.Hosts * o.Hosts}
	t0 := time.Now()
	say("== building a %d-host lab rack (namespaces %s-A.., veth, bridge)", o.Hosts, o.Prefix)
	rack, err := lab.Up(ctx, lab.Options{Prefix: o.Prefix, Hosts: o.Hosts, Force: true})
	if err != nil {
		return err
	}
	rep.UpSeconds = time.Since(t0).Seconds()
	if !o.Keep {
		defer func() {
			if e := lab.Down(context.Background(), o.Prefix); e != nil && err == nil {
				err = e
			}
			say("== rack torn down")
		}()
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "exo-demo-")
	if err != nil {
		return err
	}
	t1 := time.Now()
	c, err := cluster.Start(ctx, rack, cluster.Options{Bin: bin, Dir: dir})
	if err != nil {
		return err
	}
	rep.DaemonsStartSecs = time.Since(t1).Seconds()
	if !o.Keep {
		defer func() {
			if e := c.Stop(); e != nil && err == nil {
				err = e
			}
		}()
	} else {
		say("daemons keep running; configs, sockets and logs in %s", dir)
	}
	say("== %d daemons running (logs in %s)", o.Hosts, dir)
	var all []int
	for i := range rack.Hosts {
		all = append(all, i)
	}
	per := o.Messages / o.Hosts
	say("== publishing %d messages of %d bytes from every host at once (%d each)", per*o.Hosts, o.Size, per)
	collected := make(chan error, 1)
	var streams [][]client.Message
	go func() {
		s, err := c.Collect(ctx, all, per*o.Hosts)
		streams = s
		collected <- err
	}()
	progress := func(done int64) {
		if !o.JSON && isTerminal(os.Stderr) {
			fmt.Fprintf(os.Stderr, "\ragreed %d/%d", done, per*o.Hosts)
		}
	}
	res, err := c.Publish(ctx, cluster.Load{Hosts: all, PerHost: per, Size: o.Size, Progress: progress})
	if !o.JSON && isTerminal(os.Stderr) {
		fmt.Fprintln(os.Stderr)
	}
	if err != nil {
		return err
	}
	if res.Failed > 0 {
		return fmt.Errorf("%d publishes failed: %v", res.Failed, res.Errors)
	}
	if err := <-collected; err != nil {
		return err
	}
	if err := cluster.Compare(streams); err != nil {
		return err
	}
	rep.Identical = true
	rep.AgreedPerSec = res.Rate()
	rep.LoadP50us, rep.LoadP99us = res.Latency.ValueAtQuantile(50), res.Latency.ValueAtQuantile(99)
	say("every host delivered the same %d messages in the same order, each once", len(streams[0]))
	say("throughput: %.0f agreed msgs/s (%d publishes in flight per host; publish-to-agreed p50 %v p99 %v)",
		res.Rate(), 256, us(rep.LoadP50us), us(rep.LoadP99us))

	say("== agreement latency at low load: one message in flight from host A")
	lat, err := c.Publish(ctx, cluster.Load{Hosts: []int{0}, PerHost: 2000, Size: o.Size, Window: 1, Round: 1})
	if err != nil {
		return err
	}
	rep.LatencyP50us, rep.LatencyP99us = lat.Latency.ValueAtQuantile(50), lat.Latency.ValueAtQuantile(99)
	rep.LatencyP999us, rep.LatencySamples = lat.Latency.ValueAtQuantile(99.9), lat.Latency.TotalCount()
	say("publish-to-agreed at the publisher: p50 %v  p99 %v  p999 %v  (%d samples)",
		us(rep.LatencyP50us), us(rep.LatencyP99us), us(rep.LatencyP999us), rep.LatencySamples)
	rep.ElapsedSeconds = time.Since(t0).Seconds()
	if o.JSON {
		enc := json.NewEncoder(o.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if !rep.Identical {
		return errors.New("streams differ")
	}
	return nil
}

func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
