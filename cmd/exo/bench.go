package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/lab"
	"github.com/exo-rack/exo/measure"
)

func newBenchCmd() *cobra.Command {
	o := &measure.BenchOptions{}
	var jsonOut bool
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

--attack floods the rack with bad frames of one kind, sent as fast as one
thread can from the last host's namespace, while the batched rate is
measured again.
`,
		Example: `  sudo exo bench
  sudo exo bench --messages 200000 --json
  sudo exo bench --peer raft --hosts 5 --rounds 3   # etcd raft side by side
  sudo exo bench --peer raft --hosts 3,5,7,9,16 --plot bench-hosts.png`,
		RunE: func(cmd *cobra.Command, args []string) error {
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
				if !slices.Contains(cluster.OffloadModes, m) {
					return &exitError{code: 2, err: fmt.Errorf("--offload: %q is none of %s", m, strings.Join(cluster.OffloadModes, ", "))}
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
			o.Stderr = cmd.ErrOrStderr()
			if !jsonOut {
				o.Log = cmd.OutOrStdout()
			}
			res, err := measure.Bench(cmd.Context(), *o)
			var ue *measure.UsageError
			if errors.As(err, &ue) {
				return &exitError{code: 2, err: err}
			}
			if err != nil || !jsonOut {
				return err
			}
			if len(res.Sizes) == 1 {
				return writeJSON(cmd.OutOrStdout(), res.Sizes[0])
			}
			return writeJSON(cmd.OutOrStdout(), res)
		},
	}
	cmd.Flags().IntSliceVar(&o.Hosts, "hosts", []int{5}, "hosts in the rack; a list (3,5,7,9,16) measures every size on a rack built afresh and prints a table and a plot (--plot)")
	cmd.Flags().IntVar(&o.Messages, "messages", 50000, "messages per throughput run")
	cmd.Flags().IntVar(&o.Pings, "pings", 5000, "samples of the latency runs")
	cmd.Flags().IntVar(&o.Flood, "flood", 200000, "frames of the raw rate run")
	cmd.Flags().StringVar(&o.Prefix, "prefix", "exobench", "name prefix of the lab rack")
	cmd.Flags().StringVar(&o.FloodKind, "attack", "", "also measure the batched rate under a flood of bad frames: foreign-group, garbage, bad-version or forged-sender")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 1, "measure every offload mode this many times, interleaved, and report the medians")
	cmd.Flags().DurationVar(&o.RunTimeout, "run-timeout", 3*time.Minute, "limit of each daemon run")
	cmd.Flags().IntVar(&o.MTU, "mtu", 1500, "MTU of the lab rack's links: 9000 for jumbo frames (a frame then carries six times the batched messages)")
	cmd.Flags().DurationVar(&o.Idle, "idle", 10*time.Second, "measure each daemon's CPU on the idle rack this long, before the latency run (0: skip)")
	cmd.Flags().StringVar(&o.CPUProfile, "cpuprofile", "", "a directory: every daemon of every run writes a CPU profile there (<run>/<host>.cpu.pprof; read with go tool pprof)")
	cmd.Flags().StringSliceVar(&o.Offloads, "offload", []string{"software"}, "offload modes to measure side by side, the first the baseline (the modes: see above)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&o.Peer, "peer", "", "also measure this peer in the same run: raft (etcd raft, tools/raftpeer)")
	cmd.Flags().StringVar(&o.PeerBin, "peer-bin", "", "the raftpeer binary (default: go build it from --peer-src)")
	cmd.Flags().StringVar(&o.PeerSrc, "peer-src", "", "the raftpeer module's directory (default: tools/raftpeer in the working directory, else next to this binary's checkout)")
	cmd.Flags().IntVar(&o.Batch, "batch", 64, "with --peer: messages per publish call (exo) and per proposal (raft) in the client-batching shape (c), 512 messages in flight per host")
	cmd.Flags().StringVar(&o.Plot, "plot", "bench-hosts.png", "plot of latency and throughput against rack size (written when --hosts lists several sizes, or when this flag is given)")
	return cmd
}
