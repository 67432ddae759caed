package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/exo"
)

// frameSendOptions are the flags of exo frame send.
type frameSendOptions struct {
	frameFields
	Interface string
	Pcap      string
	Repeat    int // frames to send from --pcap, cycling (0 = each once)
	Rate      float64
	Interval  time.Duration
	Dst       string
	In        io.Reader
	Out       io.Writer

	listen func(string, broadcast.Options) (broadcast.Conn, error) // nil: broadcast.Listen
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
them as BAD_TAG. Pacing: --rate frames per second or --interval between frames;
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
				o.Repeat = o.Frames
				o.Frames = 1
			}
			if cmd.Flags().Changed("rate") && cmd.Flags().Changed("interval") {
				return frameBadInput("--rate and --interval: give one of them")
			}
			return runFrameSend(cmd.Context(), o)
		},
	}
	o.addFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.Interface, "interface", "", "the interface to send on (required)")
	f.StringVar(&o.Pcap, "pcap", "", "send the Exo frames of this pcap or pcapng file (with --count N: N frames, cycling through the file)")
	f.Float64Var(&o.Rate, "rate", 0, "frames per second (0 = as fast as possible)")
	f.DurationVar(&o.Interval, "interval", 0, "time between frames (instead of --rate)")
	f.StringVar(&o.Dst, "dst", exo.DefaultDstMAC, "destination MAC: broadcast or a multicast group MAC")
	return cmd
}

// frameSendPlan is a checked list of frames to send and when.
type frameSendPlan struct {
	Frames [][]byte        // bytes after the Ethernet header
	At     []time.Duration // offset from the start of each frame; nil = back to back
}

func runFrameSend(ctx context.Context, o *frameSendOptions) error {
	if o.Interface == "" {
		return frameBadInput("send: --interface IF is required")
	}
	if o.Rate < 0 || o.Interval < 0 {
		return frameBadInput("--rate and --interval: want >= 0")
	}
	var plan frameSendPlan
	if o.Pcap != "" {
		if o.fieldsGiven() || o.JSON != "" {
			return frameBadInput("--pcap sends the file's frames: do not also give frame fields or --json")
		}
		if o.KeyFile != "" {
			return frameBadInput("--pcap sends the file's frames as captured, tags included: --key-file seals crafted frames")
		}
		if o.Repeat < 0 {
			return frameBadInput("--count %d: want >= 1", o.Repeat)
		}
		frames, _, skipped, err := frameCapFrames(o.Pcap)
		if err != nil {
			return err
		}
		if skipped > 0 {
			fmt.Fprintf(o.Out, "%s: %d non-Exo frames skipped (only EtherType 0x88B5 is sent)\n", o.Pcap, skipped)
		}
		n := len(frames)
		if o.Repeat > 0 {
			n = o.Repeat
		}
		for i := range n {
			plan.Frames = append(plan.Frames, frames[i%len(frames)])
		}
	} else {
		built, err := o.build(o.In)
		if err != nil {
			return err
		}
		for _, f := range built {
			plan.Frames = append(plan.Frames, f.Bytes)
		}
	}
	gap := o.Interval
	if o.Rate > 0 {
		gap = time.Duration(float64(time.Second) / o.Rate)
	}
	if gap > 0 {
		plan.At = make([]time.Duration, len(plan.Frames))
		for i := range plan.At {
			plan.At[i] = time.Duration(i) * gap
		}
	}
	dst, err := net.ParseMAC(o.Dst)
	if err != nil || len(dst) != 6 || dst[0]&1 == 0 {
		return frameBadInput("--dst %q: want a broadcast or multicast MAC such as ff:ff:ff:ff:ff:ff", o.Dst)
	}
	n, err := frameSendFrames(ctx, o.listen, o.Interface, dst, plan)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "sent %d frames on %s\n", n, o.Interface)
	o.noteUnsigned()
	return nil
}

// frameCapFrames reads the Exo frames of a capture: their Ethernet payloads
// (padding included, as captured), their offsets from the first one, and
// the number of other frames.
func frameCapFrames(path string) (frames [][]byte, at []time.Duration, skipped int, err error) {
	pkts, err := frameReadCapture(path)
	if err != nil {
		return nil, nil, 0, frameFailed(err)
	}
	var t0 time.Time
	for i, p := range pkts {
		payload, _, _, vlan, ok := frameExoPayload(p.Data)
		if !ok || vlan >= 0 {
			skipped++
			continue
		}
		if p.OrigLen > len(p.Data) {
			return nil, nil, 0, frameFailed(fmt.Errorf("%s: packet %d was cut by the capture's snaplen (%d of %d bytes): cannot send it whole", path, i+1, len(p.Data), p.OrigLen))
		}
		if len(frames) == 0 {
			t0 = p.Time
		}
		frames = append(frames, payload)
		at = append(at, max(p.Time.Sub(t0), 0))
	}
	if len(frames) == 0 {
		return nil, nil, 0, frameFailed(fmt.Errorf("%s: no Exo frame (EtherType 0x88B5) in %d packets", path, len(pkts)))
	}
	return frames, at, skipped, nil
}

// frameSendFrames opens ifname, checks every frame against its MTU, then sends
// the plan; it returns how many frames were sent.
func frameSendFrames(ctx context.Context, listen func(string, broadcast.Options) (broadcast.Conn, error), ifname string, dst net.HardwareAddr, plan frameSendPlan) (int, error) {
	var opts broadcast.Options
	if string(dst) != string(broadcast.BroadcastMAC) {
		opts.Dst = dst
	}
	conn, err := frameOpenConn(listen, ifname, opts)
	if err != nil {
		return 0, frameFailed(err)
	}
	defer conn.Close()
	mtu := conn.MTU()
	for i, f := range plan.Frames {
		if len(f) > mtu {
			return 0, frameFailed(fmt.Errorf("frame %d is %d bytes after the Ethernet header, larger than the MTU %d of %s: nothing sent (32-byte header + history + payload must fit)", i+1, len(f), mtu, ifname))
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now()
	for i, f := range plan.Frames {
		if plan.At != nil {
			if d := time.Until(start.Add(plan.At[i])); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return i, frameFailed(fmt.Errorf("interrupted after %d of %d frames: %w", i, len(plan.Frames), ctx.Err()))
				case <-t.C:
				}
			}
		}
		if ctx.Err() != nil {
			return i, frameFailed(fmt.Errorf("interrupted after %d of %d frames: %w", i, len(plan.Frames), ctx.Err()))
		}
		if err := conn.WriteFrame(f); err != nil {
			return i, frameFailed(fmt.Errorf("frame %d of %d: %w", i+1, len(plan.Frames), err))
		}
	}
	return len(plan.Frames), nil
}

// frameReplayOptions are the flags of exo frame replay.
type frameReplayOptions struct {
	Pcap      string
	Interface string
	Speed     float64
	Flood     bool
	Dst       string
	Out       io.Writer

	listen func(string, broadcast.Options) (broadcast.Conn, error) // nil: broadcast.Listen
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
	if o.Pcap == "" || o.Interface == "" {
		return frameBadInput("replay: --pcap FILE and --interface IF are required")
	}
	if !(o.Speed > 0) {
		return frameBadInput("--speed %v: want > 0 (or --flood)", o.Speed)
	}
	dst, err := net.ParseMAC(o.Dst)
	if err != nil || len(dst) != 6 || dst[0]&1 == 0 {
		return frameBadInput("--dst %q: want a broadcast or multicast MAC such as ff:ff:ff:ff:ff:ff", o.Dst)
	}
	frames, at, skipped, err := frameCapFrames(o.Pcap)
	if err != nil {
		return err
	}
	plan := frameSendPlan{Frames: frames}
	if !o.Flood {
		plan.At = make([]time.Duration, len(at))
		for i, d := range at {
			plan.At[i] = time.Duration(float64(d) / o.Speed)
		}
	}
	start := time.Now()
	n, err := frameSendFrames(ctx, o.listen, o.Interface, dst, plan)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "replayed %d frames on %s in %v", n, o.Interface, time.Since(start).Round(time.Millisecond))
	if skipped > 0 {
		fmt.Fprintf(o.Out, " (%d non-Exo frames skipped)", skipped)
	}
	fmt.Fprintln(o.Out)
	return nil
}
