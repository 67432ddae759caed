package measure

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/cluster"
)

// DemoOptions configure Demo (exo demo: its flags).
type DemoOptions struct {
	Hosts int
	// Messages to publish, spread over all hosts.
	Messages int
	// Size of each message, in bytes.
	Size int
	// Prefix names the lab rack.
	Prefix string
	// Keep leaves the rack and its daemons running at the end.
	Keep bool
	// Log receives what the demo does and the figures (nil: nothing).
	Log io.Writer
	// Progress, if set, receives the count of agreed messages during the
	// load, redrawn in place with \r (a terminal).
	Progress io.Writer
}

// DemoReport is what Demo checked and measured.
type DemoReport struct {
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

// demoWindow is the publishes in flight per host of the demo's load
// (cluster.Load's default).
const demoWindow = 256

// Demo runs the appliance end to end on a lab rack: a daemon per host on
// raw frames, messages published from every host at once, every host's
// agreed stream followed and compared with the others', then agreement
// latency at low load (one message in flight from host A). It tears the
// rack down unless o.Keep; an error is a stream that differs, or a
// publish that failed.
func Demo(ctx context.Context, o DemoOptions) (DemoReport, error) {
	say := sayTo(o.Log)
	rep := DemoReport{Hosts: o.Hosts, Messages: o.Messages / o.Hosts * o.Hosts}
	t0 := time.Now()
	say("== building a %d-host lab rack (namespaces %s-A.., veth, bridge)", o.Hosts, o.Prefix)
	up := false
	err := cluster.WithLab(ctx, cluster.LabOptions{Prefix: o.Prefix, Hosts: o.Hosts, Keep: o.Keep}, func(l *cluster.Lab) error {
		up = true
		rep.UpSeconds = time.Since(t0).Seconds()
		dir, err := os.MkdirTemp("", "exo-demo-")
		if err != nil {
			return fmt.Errorf("demo: daemon directory: %w", err)
		}
		t1 := time.Now()
		return l.Run(ctx, cluster.Options{Dir: dir}, func(c *cluster.Cluster) error {
			rep.DaemonsStartSecs = time.Since(t1).Seconds()
			if o.Keep {
				say("daemons keep running; configs, sockets and logs in %s", dir)
			}
			say("== %d daemons running (logs in %s)", o.Hosts, dir)
			err := demo(ctx, o, c, &rep, say)
			rep.ElapsedSeconds = time.Since(t0).Seconds()
			return err
		})
	})
	if up && !o.Keep {
		say("== rack torn down")
	}
	return rep, err
}

// demo publishes from every host, compares the streams and measures the
// latency at low load.
func demo(ctx context.Context, o DemoOptions, c *cluster.Cluster, rep *DemoReport, say func(string, ...any)) error {
	var all []int
	for i := range c.Rack.Hosts {
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
	var progress func(int64)
	if o.Progress != nil {
		progress = func(done int64) { fmt.Fprintf(o.Progress, "\ragreed %d/%d", done, per*o.Hosts) }
	}
	res, err := c.Publish(ctx, cluster.Load{Hosts: all, PerHost: per, Size: o.Size, Window: demoWindow, Progress: progress})
	if o.Progress != nil {
		fmt.Fprintln(o.Progress)
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
		res.Rate(), demoWindow, us(rep.LoadP50us), us(rep.LoadP99us))

	say("== agreement latency at low load: one message in flight from host A")
	lat, err := c.Publish(ctx, cluster.Load{Hosts: []int{0}, PerHost: 2000, Size: o.Size, Window: 1, Round: 1})
	if err != nil {
		return err
	}
	rep.LatencyP50us, rep.LatencyP99us = lat.Latency.ValueAtQuantile(50), lat.Latency.ValueAtQuantile(99)
	rep.LatencyP999us, rep.LatencySamples = lat.Latency.ValueAtQuantile(99.9), lat.Latency.TotalCount()
	say("publish-to-agreed at the publisher: p50 %v  p99 %v  p999 %v  (%d samples)",
		us(rep.LatencyP50us), us(rep.LatencyP99us), us(rep.LatencyP999us), rep.LatencySamples)
	return nil
}

// us is a count of microseconds as a duration, for printing.
func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
