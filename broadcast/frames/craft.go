package frames

import (
	"bytes"
	"fmt"
	"net"
	"time"

	"github.com/exo-rack/exo/lab"
)

// CraftOptions describe the frames of exo frame craft and, optionally,
// the capture to put them in.
type CraftOptions struct {
	Source
	// Capture asks for the frames as a capture of Ethernet frames too
	// (Crafted.Pcap): pcap, or pcapng with NG.
	Capture bool
	NG      bool
	// Src and Dst are the capture's MACs; Src "" is the lab rack's MAC of
	// each frame's sender (02:e0:00:00:00:<sender+1>).
	Src, Dst string
	// Time is the first frame's timestamp in the capture (RFC 3339, or
	// "now"); Gap the time between frames.
	Time string
	Gap  time.Duration
}

// Crafted are the frames of Craft.
type Crafted struct {
	Frames []Built
	// Pcap is the capture (CraftOptions.Capture): each frame behind an
	// Ethernet header, padded to 60 bytes.
	Pcap []byte
	// Unsigned: the frames were not sealed (no key file); their tags are
	// the given ones, so a rack drops them as BAD_TAG.
	Unsigned bool
}

// Craft builds and checks every frame of o and, with o.Capture, encodes
// the capture; it writes nothing, so that an error leaves no half
// output.
func Craft(o CraftOptions) (*Crafted, error) {
	frames, err := Build(o.Source)
	if err != nil {
		return nil, err
	}
	c := &Crafted{Frames: frames, Unsigned: o.KeyFile == ""}
	if !o.Capture {
		if o.given("src") || o.given("dst") || o.given("time") || o.given("gap") {
			return nil, inputErr("--src, --dst, --time and --gap are for --pcap output")
		}
		return c, nil
	}
	start, err := parseTime(o.Time)
	if err != nil {
		return nil, err
	}
	if o.Gap < 0 {
		return nil, inputErr("--gap %v: want >= 0", o.Gap)
	}
	pkts := make([]Packet, len(frames))
	for i, f := range frames {
		src, dst, err := macs(o.Src, o.Dst, f.Frame.Sender)
		if err != nil {
			return nil, err
		}
		eth, err := EthernetFrame(dst, src, f.Bytes)
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", i+1, err)
		}
		pkts[i] = Packet{Time: start.Add(time.Duration(i) * o.Gap), Data: eth}
	}
	var buf bytes.Buffer
	if err := WritePcap(&buf, pkts, o.NG); err != nil {
		return nil, err
	}
	c.Pcap = buf.Bytes()
	return c, nil
}

// macs parses the source and destination MACs of a capture; the default
// source is the lab rack's MAC of the sender.
func macs(srcMAC, dstMAC string, sender uint8) (src, dst net.HardwareAddr, err error) {
	dst, err = net.ParseMAC(dstMAC)
	if err != nil || len(dst) != 6 {
		return nil, nil, inputErr("--dst %q: want a MAC such as ff:ff:ff:ff:ff:ff", dstMAC)
	}
	if srcMAC == "" {
		return lab.HostMAC(int(sender)), dst, nil
	}
	src, err = net.ParseMAC(srcMAC)
	if err != nil || len(src) != 6 {
		return nil, nil, inputErr("--src %q: want a MAC such as 02:e0:00:00:00:01", srcMAC)
	}
	if src[0]&1 != 0 {
		return nil, nil, inputErr("--src %s: a source MAC must be unicast (first byte even)", srcMAC)
	}
	return src, dst, nil
}

func parseTime(s string) (time.Time, error) {
	if s == "now" || s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, inputErr("--time %q: want RFC 3339 (2025-01-01T00:00:00Z) or now", s)
	}
	return t, nil
}

// destination parses a MAC frames are sent to: broadcast or multicast.
func destination(s string) (net.HardwareAddr, error) {
	dst, err := net.ParseMAC(s)
	if err != nil || len(dst) != 6 || dst[0]&1 == 0 {
		return nil, inputErr("--dst %q: want a broadcast or multicast MAC such as ff:ff:ff:ff:ff:ff", s)
	}
	return dst, nil
}
