package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/broadcast/frames"
	"github.com/exo-rack/exo/exo"
)

// frameSendOptions are the flags of exo frame send.
type frameSendOptions struct {
	frames.SendOptions
	Out  io.Writer
	Note io.Writer // the note that the frames are unsigned; nil: none
}

func newFrameSendCmd() *cobra.Command {
	o := &frameSendOptions{}
	cmd := &cobra.Command{
		Use:   "send --interface IF (FRAME FLAGS | --json FILE | --pcap FILE)",
		Short: "Send crafted frames (or a pcap's Exo frames) on an interface",
		Long: `send broadcasts Exo frames on an interface through an AF_PACKET socket (root
or CAP_NET_RAW): frames built from the same flags (or --json) as exo frame
craft, --count of them with seq, seq+1, ..., or the Exo frames of a pcap or
pcapng file (their bytes after the Ethernet header; the source MAC is the
interface's). With --key-file (the rack's group key file) every crafted
frame carries its tag; without it the frames are unsigned and a rack drops
them as BAD_TAG. --flags 0x4000 sets the key phase bit: the tag is then
computed (and checked) with the key of slot 1, so --key-file must hold that
slot's key. Pacing: --rate frames per second or --interval between frames;
neither sends as fast as possible. Every frame is built and checked, the
interface opened and every frame's size checked against its MTU before the
first frame is sent: an error sends nothing.`,
		Example: `  sudo exo lab exec E -- exo frame send --interface exo0 --hosts 5 --sender E --history D,C --seq 3 --payload hello --key-file /tmp/exo-lab/group.key
  sudo exo frame send --interface eth1 --seq 1 --count 1000 --rate 100 --record x
  sudo exo frame send --interface eth1 --pcap run.pcap --interval 10ms`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return frameBadInput("send takes no arguments (got %q): the payload is --payload TEXT", args[0])
			}
			o.In, o.Out, o.Note = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			if o.Pcap != "" && cmd.Flags().Changed("count") {
				o.Repeat = o.Count
				o.Count = 1
			}
			if cmd.Flags().Changed("rate") && cmd.Flags().Changed("interval") {
				return frameBadInput("--rate and --interval: give one of them")
			}
			return runFrameSend(cmd.Context(), o)
		},
	}
	addFrameSourceFlags(cmd, &o.Source)
	f := cmd.Flags()
	f.StringVar(&o.Interface, "interface", "", "the interface to send on (required)")
	f.StringVar(&o.Pcap, "pcap", "", "send the Exo frames of this pcap or pcapng file (with --count N: N frames, cycling through the file)")
	f.Float64Var(&o.Rate, "rate", 0, "frames per second (0 = as fast as possible)")
	f.DurationVar(&o.Interval, "interval", 0, "time between frames (instead of --rate)")
	f.StringVar(&o.Dst, "dst", exo.DefaultDstMAC, "destination MAC: broadcast or a multicast group MAC")
	return cmd
}

func runFrameSend(ctx context.Context, o *frameSendOptions) error {
	res, err := frames.Send(ctx, o.SendOptions)
	if res.Skipped > 0 {
		fmt.Fprintf(o.Out, "%s: %d non-Exo frames skipped (only EtherType 0x88B5 is sent)\n", o.Pcap, res.Skipped)
	}
	if err != nil {
		return frameExit(err)
	}
	fmt.Fprintf(o.Out, "sent %d frames on %s\n", res.Sent, o.Interface)
	if res.Unsigned && o.Note != nil {
		frameNoteUnsigned(o.Note)
	}
	return nil
}

// frameReplayOptions are the flags of exo frame replay.
type frameReplayOptions struct {
	frames.ReplayOptions
	Out io.Writer
}

func newFrameReplayCmd() *cobra.Command {
	o := &frameReplayOptions{}
	cmd := &cobra.Command{
		Use:   "replay --pcap FILE --interface IF",
		Short: "Send a pcap's Exo frames again on an interface, keeping their gaps",
		Long: `replay sends the Exo frames (EtherType 0x88B5) of a pcap or pcapng file on an
interface, each with its Ethernet payload as captured (padding included; the
source MAC is the interface's), keeping the gaps between their timestamps
divided by --speed (2 = twice as fast), or back to back with --flood. The
whole file is read and every frame checked against the MTU before the first
is sent. Other frames are skipped and counted.`,
		Example: `  sudo exo lab exec A -- exo frame replay --pcap run.pcap --interface exo0
  sudo exo frame replay --pcap run.pcapng --interface eth1 --speed 10`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Out = cmd.OutOrStdout()
			if cmd.Flags().Changed("speed") && o.Flood {
				return frameBadInput("--speed and --flood: give one of them")
			}
			return runFrameReplay(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Pcap, "pcap", "", "the pcap or pcapng file (required)")
	f.StringVar(&o.Interface, "interface", "", "the interface to send on (required)")
	f.Float64Var(&o.Speed, "speed", 1.0, "replay speed: gaps are divided by it")
	f.BoolVar(&o.Flood, "flood", false, "send back to back, ignoring the timestamps")
	f.StringVar(&o.Dst, "dst", exo.DefaultDstMAC, "destination MAC: broadcast or a multicast group MAC")
	return cmd
}

func runFrameReplay(ctx context.Context, o *frameReplayOptions) error {
	res, err := frames.Replay(ctx, o.ReplayOptions)
	if err != nil {
		return frameExit(err)
	}
	fmt.Fprintf(o.Out, "replayed %d frames on %s in %v", res.Sent, o.Interface, res.Took.Round(time.Millisecond))
	if res.Skipped > 0 {
		fmt.Fprintf(o.Out, " (%d non-Exo frames skipped)", res.Skipped)
	}
	fmt.Fprintln(o.Out)
	return nil
}
