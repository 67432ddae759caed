package frames

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/exo"
)

// TestSendAndReplay (in-memory network): Send's count and rate, Replay's
// frames and gaps.
func TestSendAndReplay(t *testing.T) {
	mem := broadcast.NewMemNetwork()
	rx := mem.Attach(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x20})
	res, err := Send(context.Background(), SendOptions{
		Source: Source{Fields: Fields{Group: 1, Sender: "A", Seq: "10", Count: 5, History: "X,X", Payload: "p", Flags: "0", Tag: "0",
			Given: func(n string) bool { return n == "payload" }}},
		Interface: "mem0", Rate: 2000, Dst: exo.DefaultDstMAC, Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res != (SendResult{Sent: 5, Unsigned: true}) {
		t.Errorf("send: %+v", res)
	}
	got := broadcast.Drain(rx, 20*time.Millisecond)
	if len(got) != 5 {
		t.Fatalf("received %d frames, want 5", len(got))
	}
	for i, b := range got {
		var f exo.Frame
		if err := f.UnmarshalBinary(b); err != nil || f.Seq != uint64(10+i) || string(f.Payload[2:]) != "p" {
			t.Fatalf("frame %d: %v %+v", i, err, f)
		}
	}

	// Replay: every Exo frame of the golden capture, as captured, gaps kept.
	start := time.Now()
	rr, err := Replay(context.Background(), ReplayOptions{Pcap: goldenPcap, Interface: "mem0", Speed: 1, Dst: exo.DefaultDstMAC, Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10})})
	if err != nil {
		t.Fatal(err)
	}
	pkts, _ := ReadPcap(goldenPcap)
	var want [][]byte
	for _, p := range pkts {
		if e, ok := ParseEthernet(p.Data); ok {
			want = append(want, e.Payload)
		}
	}
	if el, min := time.Since(start), pkts[len(pkts)-2].Time.Sub(pkts[0].Time); el < min || rr.Took < min {
		t.Errorf("replay took %v (%v), the capture spans %v: gaps not kept", el, rr.Took, min)
	}
	got = broadcast.Drain(rx, 20*time.Millisecond)
	if len(got) != len(want) {
		t.Fatalf("replay: received %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		// The receiver sees the padding of short frames.
		if !bytes.HasPrefix(got[i], want[i]) {
			t.Errorf("replayed frame %d:\n%x\nwant\n%x", i+1, got[i], want[i])
		}
	}
	if rr.Sent != 18 || rr.Skipped != 1 {
		t.Errorf("replay: %+v, want 18 frames sent and 1 non-Exo frame skipped", rr)
	}

	// Send of a capture, cycling through it: its frames as captured.
	res, err = Send(context.Background(), SendOptions{Pcap: goldenPcap, Repeat: 20, Interface: "mem0", Dst: exo.DefaultDstMAC, Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10})})
	if err != nil || res != (SendResult{Sent: 20, Skipped: 1}) {
		t.Fatalf("send --pcap: %+v, %v", res, err)
	}
	if got := broadcast.Drain(rx, 20*time.Millisecond); len(got) != 20 || !bytes.HasPrefix(got[18], want[0]) {
		t.Errorf("send --pcap: %d frames", len(got))
	}
}

// TestInputErrors: mistakes in the input are *InputError (exo frame exits
// 2), failures while running are not (exit 1); either sends nothing.
func TestInputErrors(t *testing.T) {
	mem := broadcast.NewMemNetwork()
	rx := mem.Attach(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x20})
	mem.SetMTU(1500)
	ctx := context.Background()
	fields := func(payload int) Source {
		return Source{Fields: Fields{Group: 1, Sender: "0", Seq: "1", Count: 3, Payload: strings.Repeat("x", payload), Flags: "0", Tag: "0",
			Given: func(n string) bool { return n == "payload" }}}
	}
	send := func(src Source) error {
		_, err := Send(ctx, SendOptions{Source: src, Interface: "mem0", Dst: exo.DefaultDstMAC, Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10})})
		return err
	}
	bad := fields(1)
	bad.Group = 70000
	for _, c := range []struct {
		name  string
		err   error
		want  string
		input bool
	}{
		{"group", send(bad), "group 70000: want 0..65535", true},
		{"payload too large for any frame", send(fields(exo.MaxPayload)), "at most 65535", true},
		{"payload too large for the MTU", send(fields(1500)), "larger than the MTU 1500", false},
		{"no interface", func() error { _, err := Send(ctx, SendOptions{Source: fields(1)}); return err }(), "--interface IF is required", true},
		{"bad dst", func() error {
			_, err := Send(ctx, SendOptions{Source: fields(1), Interface: "mem0", Dst: "02:00:00:00:00:01", Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10})})
			return err
		}(), "broadcast or multicast", true},
		{"replay speed", func() error {
			_, err := Replay(ctx, ReplayOptions{Pcap: goldenPcap, Interface: "mem0", Dst: exo.DefaultDstMAC, Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10})})
			return err
		}(), "--speed 0", true},
		{"replay of a missing file", func() error {
			_, err := Replay(ctx, ReplayOptions{Pcap: "missing.pcap", Interface: "mem0", Speed: 1, Dst: exo.DefaultDstMAC, Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10})})
			return err
		}(), "missing.pcap", false},
		{"dump without a source", func() error { _, err := Dump(ctx, DumpOptions{Group: -1}); return err }(), "give one of --interface IF or --pcap FILE", true},
		{"dump seq range", func() error {
			_, err := Dump(ctx, DumpOptions{Pcap: goldenPcap, Group: -1, SeqMin: 5, SeqMax: 4})
			return err
		}(), "nothing can match", true},
		{"craft src", func() error {
			_, err := Craft(CraftOptions{Source: fields(1), Capture: true, Src: "ff:ff:ff:ff:ff:ff", Dst: exo.DefaultDstMAC})
			return err
		}(), "unicast", true},
		{"craft json and fields", func() error {
			src := fields(1)
			src.JSON = "-"
			_, err := Craft(CraftOptions{Source: src})
			return err
		}(), "not also as flags", true},
		{"craft json, one bad frame of two", func() error {
			_, err := Build(Source{JSON: "-", In: strings.NewReader(`{"seq": 1} {"seq": 2, "group": 99999}`)})
			return err
		}(), "frame 2 of -: group 99999", true},
	} {
		var ie *InputError
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) || errors.As(c.err, &ie) != c.input {
			t.Errorf("%s: error %v (input error: %v), want %q (input error: %v)", c.name, c.err, errors.As(c.err, &ie), c.want, c.input)
		}
	}
	if got := broadcast.Drain(rx, 20*time.Millisecond); len(got) != 0 {
		t.Fatalf("%d frames were sent by failing calls", len(got))
	}
}

// TestDumpLive (in-memory network): a live dump decodes what arrives,
// malformed frames too, stops at Count, and writes the frames shown as
// broadcast Ethernet frames from their sources.
func TestDumpLive(t *testing.T) {
	mem := broadcast.NewMemNetwork()
	srcMAC := net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x03}
	tx := mem.Attach(srcMAC)
	attached := make(chan struct{})
	listen := func(_ string, opts broadcast.Options) (broadcast.Conn, error) {
		defer close(attached)
		return mem.AttachOptions(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10}, opts)
	}
	good := mustMarshal(t, exo.Frame{Type: exo.FrameData, Group: 2, Sender: 2, Seq: 41, History: []uint8{1}})
	bad := bytes.Clone(good)
	bad[exo.OffType] = 9
	go func() {
		<-attached
		for _, b := range [][]byte{good, bad, good} {
			if err := tx.WriteFrame(b); err != nil {
				t.Error(err)
			}
		}
	}()
	var out bytes.Buffer
	wrote := filepath.Join(t.TempDir(), "live.pcap")
	st, err := Dump(context.Background(), DumpOptions{Interface: "mem0", Group: -1, SeqMax: ^uint64(0), JSON: true, Count: 2,
		Duration: 5 * time.Second, Write: wrote, Out: &out, Listen: listen})
	if err != nil {
		t.Fatal(err)
	}
	if st != (DumpStats{Exo: 2, Shown: 2, Malformed: 1}) {
		t.Errorf("stats %+v", st)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("dump printed %d lines, want 2:\n%s", len(lines), out.String())
	}
	for i, want := range []string{"", "BAD_TYPE"} {
		var d Decoded
		if err := json.Unmarshal([]byte(lines[i]), &d); err != nil {
			t.Fatal(err)
		}
		if d.Index != i+1 || d.Reason != want || d.Src != srcMAC.String() || *d.Seq != 41 || d.Time == "" {
			t.Errorf("frame %d: %s", i+1, lines[i])
		}
	}
	pkts, err := ReadPcap(wrote)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkts) != 2 {
		t.Fatalf("wrote %d frames, want 2", len(pkts))
	}
	for i, want := range [][]byte{good, bad} {
		e, ok := ParseEthernet(pkts[i].Data)
		if !ok || !bytes.Equal(e.Dst, broadcast.BroadcastMAC) || !bytes.Equal(e.Src, srcMAC) || !bytes.HasPrefix(e.Payload, want) || len(pkts[i].Data) < exo.MinEthFrame {
			t.Errorf("written frame %d: % x", i+1, pkts[i].Data)
		}
	}
}
