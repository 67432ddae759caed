package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/lab"
	"github.com/exo-rack/exo/measure"
)

func newProbeCmd() *cobra.Command {
	o := &measure.ProbeOptions{}
	var jsonOut bool
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
			if isTerminal(cmd.ErrOrStderr()) {
				o.Progress = cmd.ErrOrStderr()
			}
			if !jsonOut {
				o.Log = cmd.OutOrStdout()
			}
			o.Stderr = cmd.ErrOrStderr()
			rep, err := measure.Probe(cmd.Context(), *o)
			if err != nil || !jsonOut {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().IntVar(&o.Hosts, "hosts", 5, "hosts in the rack (the probes run between A and B)")
	cmd.Flags().IntVar(&o.Count, "count", 2000, "measured round trips (and Exo messages) per path")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&o.OutDir, "out", ".", "directory of the plot (probe.png)")
	cmd.Flags().StringVar(&o.Prefix, "prefix", "exoprobe", "name prefix of the lab rack")
	return cmd
}
