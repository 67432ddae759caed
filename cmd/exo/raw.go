package main

import (
	"encoding/json"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/measure"
)

// newRawCmd is the raw-frame baseline and injector used by exo bench and
// the tests: it runs inside a lab host's namespace.
func newRawCmd() *cobra.Command {
	var o measure.RawOptions
	cmd := &cobra.Command{
		Use:    "raw",
		Short:  "Raw-frame baseline and injector on one interface (used by exo bench and tests)",
		Hidden: true,
		Long: `raw sends and receives raw Ethernet frames with no protocol on top:
  --mode echo    answer every baseline frame (run on one host)
  --mode ping    send --count frames one at a time, wait for each echo: RTT and one-way (RTT/2)
  --mode sink    count baseline frames for --duration: the receive rate
  --mode flood   send --count frames as fast as one thread can
  --mode inject  send --count bad frames of --kind: garbage, foreign-group, truncated,
                 bad-version, forged-sender (a roster id from a foreign MAC),
                 forged-tag (our group, a made-up tag), replay (capture up to
                 256 frames of the rack for 2 s, then send them again; or
                 send those of --replay-pcap: in token mode the host's own
                 interface shows none, they are consumed in XDP, so capture
                 them at the switch: exo frame dump --write)
  flood and inject with --count 0 send for --duration instead`,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := measure.Raw(cmd.Context(), o)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	cmd.Flags().StringVar(&o.Interface, "interface", "exo0", "interface")
	cmd.Flags().StringVar(&o.Mode, "mode", "", "echo, ping, sink, flood or inject")
	cmd.Flags().StringVar(&o.Kind, "kind", "garbage", "inject: kind of bad frame")
	cmd.Flags().Float64Var(&o.Rate, "rate", 0, "flood/inject: frames per second (0: as fast as one thread can)")
	cmd.Flags().StringVar(&o.ReplayPcap, "replay-pcap", "", "inject --kind replay: send the Exo frames of this pcap/pcapng file (with their source MACs) instead of capturing")
	cmd.Flags().StringVar(&o.KeyFile, "key-file", "", "inject: the group key file; forged-sender frames then carry a valid tag (an insider with the key on a foreign MAC)")
	cmd.Flags().IntVar(&o.Count, "count", 10000, "frames to send")
	cmd.Flags().IntVar(&o.Size, "size", 64, "payload bytes")
	cmd.Flags().DurationVar(&o.Duration, "duration", 5*time.Second, "echo/sink (and flood/inject with --count 0): how long to run")
	return cmd
}
