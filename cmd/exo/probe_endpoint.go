package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/measure"
)

// newProbeEndpointCmd is one end of a latency probe, run by exo probe inside
// a lab host's namespace.
func newProbeEndpointCmd() *cobra.Command {
	o := &measure.EndpointOptions{}
	cmd := &cobra.Command{
		Use:    "probe-endpoint",
		Short:  "One end of a latency probe (used by exo probe inside a lab host)",
		Hidden: true,
		Long: `probe-endpoint is one end of the exo probe ping-pongs; it prints one JSON object:
  --mode tcp-server    accept one connection on --addr and echo 64-byte messages
  --mode tcp-client    connect to --addr, --count round trips, one at a time
  --mode udp-server    echo every datagram on --addr to its sender
  --mode udp-client    --count round trips of a datagram to --addr
  --mode bcast-server  answer every broadcast datagram on --addr with a broadcast to --reply
  --mode bcast-client  broadcast to --addr (the subnet broadcast), wait for the
                       broadcast answer on the port of --reply
  --mode raw-client    like exo raw --mode ping (against exo raw --mode echo),
                       printing every sample
Clients read utime+stime from /proc/self/stat before and after.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(measure.EndpointModes, o.Mode) {
				return &exitError{code: 2, err: fmt.Errorf("--mode %q: want one of %s", o.Mode, strings.Join(measure.EndpointModes, ", "))}
			}
			if o.Count < 1 {
				return &exitError{code: 2, err: fmt.Errorf("--count %d: want at least 1", o.Count)}
			}
			res, err := measure.Endpoint(cmd.Context(), *o)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	cmd.Flags().StringVar(&o.Mode, "mode", "", strings.Join(measure.EndpointModes, ", "))
	cmd.Flags().StringVar(&o.Addr, "addr", "", "address:port to listen on (servers) or send to (clients)")
	cmd.Flags().StringVar(&o.Reply, "reply", "", "bcast-*: broadcast address:port of the answers")
	cmd.Flags().StringVar(&o.Iface, "interface", "exo0", "raw-client: interface")
	cmd.Flags().IntVar(&o.Count, "count", 2000, "clients: measured round trips")
	cmd.Flags().IntVar(&o.Warmup, "warmup", 50, "clients: round trips before measuring (waits for the server)")
	cmd.Flags().DurationVar(&o.Duration, "duration", 60*time.Second, "longest run")
	return cmd
}
