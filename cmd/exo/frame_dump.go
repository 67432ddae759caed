package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/broadcast/frames"
)

// frameDumpOptions are the flags of exo frame dump.
type frameDumpOptions struct {
	frames.DumpOptions
	Err io.Writer // the summary line of a capture
}

func newFrameDumpCmd() *cobra.Command {
	o := &frameDumpOptions{}
	cmd := &cobra.Command{
		Use:   "dump (--interface IF | --pcap FILE)",
		Short: "Decode Exo frames live on an interface or from a pcap/pcapng file",
		Long: `dump decodes every Exo frame (EtherType 0x88B5) live on an interface (an
AF_PACKET socket: needs root or CAP_NET_RAW; it sees the frames of other
hosts, not its own host's) or from a pcap or pcapng file, one line per frame:
seq, sender, epoch, group, history, flags, records. --json prints one object
per frame with every field (records as base64, and as text when printable).
A malformed frame is shown with its reason code (MALFORMED, BAD_PAYLOAD, ...)
and every field it holds, never skipped. With a filter, a frame too short to
hold the filtered field is still shown. --write also writes the frames
shown to a pcap file (live, a frame's destination is written as broadcast:
the socket does not give it), e.g. to replay them later (exo frame
replay). In token mode (xdp_token) a host's own interface shows no Exo
frame: the XDP program consumes them before any socket; capture at the
switch (a mirror port; on the lab rack, the bridge in its switch
namespace).`,
		Example: `  exo frame dump --pcap run.pcap
  exo frame dump --pcap run.pcapng --json --sender E --seq-min 100 --seq-max 200
  sudo exo lab exec A -- exo frame dump --interface exo0 --count 10
  sudo ip netns exec exo-sw exo frame dump --interface br0 --duration 5s --write rack.pcap`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Out, o.Err = cmd.OutOrStdout(), cmd.ErrOrStderr()
			if !cmd.Flags().Changed("group") {
				o.Group = -1
			}
			if !cmd.Flags().Changed("seq-max") {
				o.SeqMax = ^uint64(0)
			}
			return runFrameDump(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Interface, "interface", "", "decode live on this interface")
	f.StringVar(&o.Pcap, "pcap", "", "decode this pcap or pcapng file")
	f.IntVar(&o.Group, "group", -1, "show only this group")
	f.StringVar(&o.Sender, "sender", "", "show only this sender (id or host name)")
	f.Uint64Var(&o.SeqMin, "seq-min", 0, "show only seq >= this")
	f.Uint64Var(&o.SeqMax, "seq-max", ^uint64(0), "show only seq <= this")
	f.BoolVar(&o.JSON, "json", false, "one JSON object per frame")
	f.IntVar(&o.Count, "count", 0, "stop after this many frames shown (0 = all, or until interrupted)")
	f.DurationVar(&o.Duration, "duration", 0, "live: stop after this long (0 = until interrupted or --count)")
	f.StringVar(&o.Write, "write", "", "also write the frames shown to this pcap file")
	return cmd
}

func runFrameDump(ctx context.Context, o *frameDumpOptions) error {
	st, err := frames.Dump(ctx, o.DumpOptions)
	if err != nil {
		return frameExit(err)
	}
	if o.Pcap != "" && !o.JSON {
		fmt.Fprintf(o.Err, "%s: %d Exo frames (%d malformed), %d shown, %d other frames skipped\n", o.Pcap, st.Exo, st.Malformed, st.Shown, st.Other)
	}
	return nil
}
