package measure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/mdlayher/packet"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/broadcast/frames"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
)

// rawGroup is the group id of the raw-frame baseline: no daemon uses it,
// so the baseline's frames never reach a daemon's core.
const rawGroup = 0xBE01

// RawResult is what Raw measured; exo raw prints it as one JSON object,
// which exo bench and the tests read.
type RawResult struct {
	Mode       string  `json:"mode"`
	Frames     int64   `json:"frames"`
	Seconds    float64 `json:"seconds"`
	Rate       float64 `json:"frames_per_sec"`
	RTTp50us   float64 `json:"rtt_p50_us,omitempty"`
	RTTp99us   float64 `json:"rtt_p99_us,omitempty"`
	RTTp999us  float64 `json:"rtt_p999_us,omitempty"`
	OneWayP50  float64 `json:"one_way_p50_us,omitempty"`
	OneWayP99  float64 `json:"one_way_p99_us,omitempty"`
	OneWayP999 float64 `json:"one_way_p999_us,omitempty"`
	Lost       int64   `json:"lost,omitempty"`
}

// RawOptions configure Raw (exo raw: its flags).
type RawOptions struct {
	// Interface is the interface to send and receive on.
	Interface string
	// Mode is echo (answer every baseline frame), ping (Count frames
	// one at a time, each waiting for its echo: the round trip), sink
	// (count the baseline frames received: the receive rate), flood (Count
	// frames as fast as one thread can) or inject (bad frames of Kind).
	Mode string
	// Kind is the kind of bad frame of inject: garbage, foreign-group,
	// truncated, bad-version, forged-sender (a roster id from a foreign
	// MAC), forged-tag (our group, a made-up tag) or replay (frames of the
	// rack captured for 2 s, or those of ReplayPcap, sent again).
	Kind string
	// KeyFile, for inject, is the group key file: forged-sender frames then
	// carry a valid tag (an insider with the key on a foreign MAC).
	KeyFile string
	// ReplayPcap, for inject --kind replay, is a pcap/pcapng file whose
	// Exo frames (with their source MACs) are sent instead of captured
	// ones.
	ReplayPcap string
	// Count is the number of frames to send (flood and inject: 0 sends
	// for Duration instead).
	Count int
	// Size is the payload of the baseline frames, in bytes.
	Size int
	// Duration is how long echo and sink run (and flood and inject with
	// Count 0).
	Duration time.Duration
	// Rate paces flood and inject, in frames per second (0: as fast as
	// one thread can).
	Rate float64
}

// Raw sends and receives raw Ethernet frames on one interface with no
// protocol on top: the baseline that exo bench and exo probe measure the
// protocol against (echo, ping, sink, flood), and the injector of bad
// frames (inject) for the bench's flood and the bad-input tests. It runs
// inside a lab host's namespace, as exo raw.
func Raw(ctx context.Context, o RawOptions) (RawResult, error) {
	conn, err := broadcast.Listen(o.Interface, broadcast.Options{ReadBuffer: 8 << 20})
	if err != nil {
		return RawResult{}, err // it names the interface
	}
	defer conn.Close()
	var key *[exo.TagKeyLen]byte
	if o.KeyFile != "" {
		group, err := daemon.ReadKey(o.KeyFile)
		if err != nil {
			return RawResult{}, err
		}
		k := daemon.FrameKey(group)
		key = &k
	}
	var replay [][]byte
	if o.ReplayPcap != "" {
		if replay, err = loadReplay(o.ReplayPcap); err != nil {
			return RawResult{}, err
		}
	}
	return runRaw(ctx, conn, o, key, replay)
}

// rawFrame is a baseline frame: a well-formed data frame of the baseline's
// group, sequence number seq, carrying one message of size bytes.
func rawFrame(seq uint64, size int) []byte {
	payload, _ := exo.AppendRecord(nil, make([]byte, size))
	f := exo.Frame{Type: exo.FrameData, Group: rawGroup, Sender: 0, Seq: seq, Count: 1, Payload: payload}
	b, _ := f.MarshalBinary()
	return b
}

// runRaw runs o.Mode on conn (key: to seal forged-sender frames; replay:
// the frames of a replay, else captured).
func runRaw(ctx context.Context, conn broadcast.Conn, o RawOptions, key *[exo.TagKeyLen]byte, replay [][]byte) (RawResult, error) {
	mode, kind, count, size, dur, rate := o.Mode, o.Kind, o.Count, o.Size, o.Duration, o.Rate
	res := RawResult{Mode: mode}
	buf := make([]byte, conn.MTU()+64)
	start := time.Now()
	var f exo.Frame
	isBaseline := func(b []byte) bool { return f.UnmarshalBinary(b) == nil && f.Group == rawGroup }
	switch mode {
	case "echo", "sink":
		// A sink stops one second after the last frame (or at --duration).
		deadline := time.Now().Add(dur)
		var first, last time.Time
		for time.Now().Before(deadline) && ctx.Err() == nil {
			rd := deadline
			if mode == "sink" && !last.IsZero() && last.Add(time.Second).Before(deadline) {
				rd = last.Add(time.Second)
			}
			if mode == "sink" && !last.IsZero() && time.Since(last) > time.Second {
				break
			}
			conn.SetReadDeadline(rd)
			n, _, err := conn.ReadFrame(buf)
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				return res, err
			}
			if !isBaseline(buf[:n]) {
				continue
			}
			if first.IsZero() {
				first = time.Now()
			}
			last = time.Now()
			res.Frames++
			if mode == "echo" {
				if err := conn.WriteFrame(buf[:n]); err != nil {
					return res, err
				}
			}
		}
		if res.Frames > 1 {
			res.Seconds = last.Sub(first).Seconds()
		}
	case "ping":
		h := hdrhistogram.New(1, 10_000_000, 3)
		frame := rawFrame(0, size)
		for i := 0; i < count && ctx.Err() == nil; i++ {
			binary.BigEndian.PutUint64(frame[exo.OffSeq:], uint64(i))
			t0 := time.Now()
			if err := conn.WriteFrame(frame); err != nil {
				return res, err
			}
			conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			for {
				n, _, err := conn.ReadFrame(buf)
				if err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						res.Lost++
						break
					}
					return res, err
				}
				if isBaseline(buf[:n]) && f.Seq == uint64(i) {
					h.RecordValue(max(time.Since(t0).Nanoseconds(), 1))
					res.Frames++
					break
				}
			}
		}
		q := func(p float64) float64 { return float64(h.ValueAtQuantile(p)) / 1000 }
		res.RTTp50us, res.RTTp99us, res.RTTp999us = q(50), q(99), q(99.9)
		res.OneWayP50, res.OneWayP99, res.OneWayP999 = q(50)/2, q(99)/2, q(99.9)/2
		res.Seconds = time.Since(start).Seconds()
	case "flood", "inject":
		rng := rand.New(rand.NewPCG(1, 2))
		var spoof *packet.Conn
		if mode == "inject" && kind == "replay" {
			var err error
			if len(replay) == 0 {
				if replay, err = captureFrames(ctx, conn, 256, 2*time.Second); err != nil {
					return res, err
				}
			}
			// Replays go out with their original source MAC (a raw
			// socket writes the whole Ethernet header), as an attacker
			// on a shared segment would send them.
			if spoof, err = rawSender(o.Interface); err != nil {
				return res, err
			}
			defer spoof.Close()
			start = time.Now()
		}
		for i := 0; (count == 0 || i < count) && ctx.Err() == nil; i++ {
			if count == 0 && i%64 == 0 && time.Since(start) >= dur {
				break
			}
			if rate > 0 { // pace: frame i leaves at start + i/rate
				if ahead := time.Duration(float64(i)/rate*1e9) - time.Since(start); ahead > 200*time.Microsecond {
					time.Sleep(ahead)
				}
			}
			var b []byte
			switch {
			case mode == "flood":
				b = rawFrame(uint64(i), size)
			case kind == "replay":
				if _, err := spoof.WriteTo(replay[i%len(replay)], &packet.Addr{HardwareAddr: broadcastMAC}); err != nil {
					return res, fmt.Errorf("replay: %w", err)
				}
				res.Frames++
				continue
			default:
				b = badFrame(kind, i, rng, key)
				if b == nil {
					return res, fmt.Errorf("--kind %q: want garbage, foreign-group, truncated, bad-version, forged-sender, forged-tag or replay", kind)
				}
			}
			if err := conn.WriteFrame(b); err != nil {
				return res, err
			}
			res.Frames++
		}
		res.Seconds = time.Since(start).Seconds()
	default:
		return res, fmt.Errorf("--mode %q: want echo, ping, sink, flood or inject", mode)
	}
	if res.Seconds > 0 {
		res.Rate = float64(res.Frames) / res.Seconds
	}
	return res, nil
}

var broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// rawSender opens a SOCK_RAW packet socket on interface ifname: frames
// written to it carry their own Ethernet header.
func rawSender(ifname string) (*packet.Conn, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("replay: raw socket: %w", err)
	}
	c, err := packet.Listen(ifi, packet.Raw, int(exo.EtherType), nil)
	if err != nil {
		return nil, fmt.Errorf("replay: raw socket on %s: %w", ifname, err)
	}
	return c, nil
}

// captureFrames reads up to max legitimate-looking Exo frames (not the
// baseline's group) from conn for at most d and returns them as whole
// Ethernet frames with their original source MAC: what a replay attack
// sends again.
func captureFrames(ctx context.Context, conn broadcast.Conn, max int, d time.Duration) ([][]byte, error) {
	var out [][]byte
	var f exo.Frame
	buf := make([]byte, conn.MTU()+64)
	deadline := time.Now().Add(d)
	for len(out) < max && time.Now().Before(deadline) && ctx.Err() == nil {
		conn.SetReadDeadline(deadline)
		n, src, err := conn.ReadFrame(buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			return nil, err
		}
		if f.UnmarshalBinary(buf[:n]) == nil && f.Group != rawGroup {
			eth := make([]byte, 0, exo.EthHeaderLen+n)
			eth = append(eth, broadcastMAC...)
			eth = append(eth, src...)
			eth = append(eth, byte(exo.EtherType>>8), byte(exo.EtherType&0xff))
			out = append(out, append(eth, buf[:n]...))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("replay: no Exo frame seen on the interface in %v to replay", d)
	}
	return out, nil
}

// loadReplay returns the Exo frames of a capture file (not the baseline's
// group), whole Ethernet frames with their source MACs, for a replay.
func loadReplay(path string) ([][]byte, error) {
	pkts, err := frames.ReadPcap(path)
	if err != nil {
		return nil, fmt.Errorf("--replay-pcap: %w", err)
	}
	var out [][]byte
	for _, p := range pkts {
		e, ok := frames.ParseEthernet(p.Data)
		if !ok || e.VLAN >= 0 {
			continue
		}
		if f, err := frames.Decode(e.Payload); err != nil || f.Group == rawGroup {
			continue
		}
		out = append(out, p.Data)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--replay-pcap %s: no Exo frame to replay (%d packets)", path, len(pkts))
	}
	return out, nil
}

// badFrame builds frame i of a flood of bad frames of a kind (inject: the
// bench's flood, the bad-input tests), or nil for a kind it does not know.
func badFrame(kind string, i int, rng *rand.Rand, key *[exo.TagKeyLen]byte) []byte {
	good := exo.Frame{Type: exo.FrameData, Group: 7, Sender: 1, Seq: uint64(i), History: []uint8{0, 4}}
	switch kind {
	case "garbage":
		b := make([]byte, 46+rng.IntN(200))
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		return b
	case "foreign-group":
		good.Group = 8
		b, _ := good.MarshalBinary()
		return b
	case "truncated":
		b, _ := good.MarshalBinary()
		return b[:20]
	case "bad-version":
		b, _ := good.MarshalBinary()
		b[exo.OffVersion] = 9
		return b
	case "forged-tag":
		// Our group, well formed, with a tag nobody computed: only the
		// tag check can refuse it.
		good.Tag = rng.Uint64()
		b, _ := good.MarshalBinary()
		return b
	case "forged-sender":
		// A roster id sent from this (injecting) host's MAC, sealed when
		// the key is given (else the tag check refuses it first).
		if key != nil {
			good.Seal(*key)
		}
		b, _ := good.MarshalBinary()
		return b
	}
	return nil
}
