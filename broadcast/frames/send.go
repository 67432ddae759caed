package frames

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/exo-rack/exo/broadcast"
)

// SendOptions say which frames exo frame send puts on an interface:
// crafted from Source, or the Exo frames of a capture (Pcap), and at
// what pace.
type SendOptions struct {
	Source
	Interface string
	// Pcap sends the Exo frames of this pcap or pcapng file, their
	// Ethernet payloads as captured (no field or JSON source then).
	Pcap string
	// Repeat is the number of frames to send from Pcap, cycling through
	// the file; 0: each once.
	Repeat int
	// Rate is frames per second, or Interval the time between frames;
	// neither: as fast as possible.
	Rate     float64
	Interval time.Duration
	Dst      string // destination MAC: broadcast or multicast
	Listen   Listener
}

// SendResult is what Send did.
type SendResult struct {
	Sent     int
	Skipped  int  // non-Exo (or 802.1Q-tagged) frames of Pcap, not sent
	Unsigned bool // crafted frames without a key file (tags not computed)
}

// plan is a checked list of frames to send and when.
type plan struct {
	frames [][]byte        // bytes after the Ethernet header
	at     []time.Duration // offset from the start of each frame; nil = back to back
}

// Send builds and checks every frame, opens the interface and checks
// every frame against its MTU, then sends them: an error before the first
// frame sends nothing. The result's Skipped is set even on an error.
func Send(ctx context.Context, o SendOptions) (SendResult, error) {
	var res SendResult
	if o.Interface == "" {
		return res, inputErr("send: --interface IF is required")
	}
	if o.Rate < 0 || o.Interval < 0 {
		return res, inputErr("--rate and --interval: want >= 0")
	}
	var p plan
	if o.Pcap != "" {
		if o.fieldsGiven() || o.JSON != "" {
			return res, inputErr("--pcap sends the file's frames: do not also give frame fields or --json")
		}
		if o.KeyFile != "" {
			return res, inputErr("--pcap sends the file's frames as captured, tags included: --key-file seals crafted frames")
		}
		if o.Repeat < 0 {
			return res, inputErr("--count %d: want >= 1", o.Repeat)
		}
		frames, _, skipped, err := exoPackets(o.Pcap)
		if err != nil {
			return res, err
		}
		res.Skipped = skipped
		n := len(frames)
		if o.Repeat > 0 {
			n = o.Repeat
		}
		for i := range n {
			p.frames = append(p.frames, frames[i%len(frames)])
		}
	} else {
		built, err := Build(o.Source)
		if err != nil {
			return res, err
		}
		for _, f := range built {
			p.frames = append(p.frames, f.Bytes)
		}
	}
	gap := o.Interval
	if o.Rate > 0 {
		gap = time.Duration(float64(time.Second) / o.Rate)
	}
	if gap > 0 {
		p.at = make([]time.Duration, len(p.frames))
		for i := range p.at {
			p.at[i] = time.Duration(i) * gap
		}
	}
	dst, err := destination(o.Dst)
	if err != nil {
		return res, err
	}
	if res.Sent, err = send(ctx, o.Listen, o.Interface, dst, p); err != nil {
		return res, err
	}
	res.Unsigned = o.Pcap == "" && o.KeyFile == ""
	return res, nil
}

// ReplayOptions say which capture exo frame replay sends again, where and
// how fast.
type ReplayOptions struct {
	Pcap      string
	Interface string
	Speed     float64 // the capture's gaps are divided by it
	Flood     bool    // back to back, ignoring the timestamps
	Dst       string  // destination MAC: broadcast or multicast
	Listen    Listener
}

// ReplayResult is what Replay did.
type ReplayResult struct {
	Sent    int
	Skipped int           // non-Exo (or 802.1Q-tagged) frames of the capture
	Took    time.Duration // from opening the interface to the last frame
}

// Replay sends the Exo frames of a capture again, each with its Ethernet
// payload as captured (padding included, malformed frames too), keeping
// the gaps between their timestamps divided by o.Speed. The whole file is
// read and every frame checked against the MTU before the first is sent.
func Replay(ctx context.Context, o ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	if o.Pcap == "" || o.Interface == "" {
		return res, inputErr("replay: --pcap FILE and --interface IF are required")
	}
	if !(o.Speed > 0) {
		return res, inputErr("--speed %v: want > 0 (or --flood)", o.Speed)
	}
	dst, err := destination(o.Dst)
	if err != nil {
		return res, err
	}
	frames, at, skipped, err := exoPackets(o.Pcap)
	if err != nil {
		return res, err
	}
	res.Skipped = skipped
	p := plan{frames: frames}
	if !o.Flood {
		p.at = make([]time.Duration, len(at))
		for i, d := range at {
			p.at[i] = time.Duration(float64(d) / o.Speed)
		}
	}
	start := time.Now()
	if res.Sent, err = send(ctx, o.Listen, o.Interface, dst, p); err != nil {
		return res, err
	}
	res.Took = time.Since(start)
	return res, nil
}

// send opens ifname, checks every frame against its MTU, then sends the
// plan; it returns how many frames were sent.
func send(ctx context.Context, listen Listener, ifname string, dst net.HardwareAddr, p plan) (int, error) {
	var opts broadcast.Options
	if string(dst) != string(broadcast.BroadcastMAC) {
		opts.Dst = dst
	}
	conn, err := listen.open(ifname, opts)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	mtu := conn.MTU()
	for i, f := range p.frames {
		if len(f) > mtu {
			return 0, fmt.Errorf("frame %d is %d bytes after the Ethernet header, larger than the MTU %d of %s: nothing sent (32-byte header + history + payload must fit)", i+1, len(f), mtu, ifname)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now()
	for i, f := range p.frames {
		if p.at != nil {
			if d := time.Until(start.Add(p.at[i])); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return i, fmt.Errorf("interrupted after %d of %d frames: %w", i, len(p.frames), ctx.Err())
				case <-t.C:
				}
			}
		}
		if ctx.Err() != nil {
			return i, fmt.Errorf("interrupted after %d of %d frames: %w", i, len(p.frames), ctx.Err())
		}
		if err := conn.WriteFrame(f); err != nil {
			return i, fmt.Errorf("frame %d of %d: %w", i+1, len(p.frames), err)
		}
	}
	return len(p.frames), nil
}
