package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/broadcast/frames"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
)

// The logic of exo frame (building, decoding, captures, sending) is
// tested in package broadcast/frames, the golden capture included
// (TestGolden); these tests are the commands': flags, output, exit codes.

const goldenPcap = "../../testdata/pcap/golden.pcap"

// TestFrameSendAndReplay: send and replay on an in-memory network, what
// they print (the frames themselves: TestSendAndReplay in broadcast/frames).
func TestFrameSendAndReplay(t *testing.T) {
	mem := broadcast.NewMemNetwork()
	rx := mem.Attach(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x20})
	var out, note bytes.Buffer
	o := &frameSendOptions{
		SendOptions: frames.SendOptions{
			Source: frames.Source{Fields: frames.Fields{Group: 1, Sender: "A", Seq: "10", Count: 5, History: "X,X", Payload: "p", Flags: "0", Tag: "0",
				Given: func(n string) bool { return n == "payload" }}},
			Interface: "mem0", Rate: 2000, Dst: exo.DefaultDstMAC, Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10}),
		},
		Out: &out, Note: &note,
	}
	if err := runFrameSend(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if out.String() != "sent 5 frames on mem0\n" || !strings.Contains(note.String(), "unsigned") {
		t.Errorf("send said %q, note %q", out.String(), note.String())
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

	// replay: every Exo frame of the golden capture.
	out.Reset()
	rp := &frameReplayOptions{ReplayOptions: frames.ReplayOptions{Pcap: goldenPcap, Interface: "mem0", Speed: 1, Dst: exo.DefaultDstMAC, Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10})}, Out: &out}
	if err := runFrameReplay(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
	if got := broadcast.Drain(rx, 20*time.Millisecond); len(got) != 18 {
		t.Fatalf("replay: received %d frames, want 18", len(got))
	}
	if !strings.HasPrefix(out.String(), "replayed 18 frames on mem0 in ") || !strings.HasSuffix(out.String(), " (1 non-Exo frames skipped)\n") {
		t.Errorf("replay said %q", out.String())
	}

	// send --pcap: the skipped frames are said first.
	out.Reset()
	o = &frameSendOptions{SendOptions: frames.SendOptions{Pcap: goldenPcap, Interface: "mem0", Dst: exo.DefaultDstMAC, Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10})}, Out: &out}
	if err := runFrameSend(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if want := goldenPcap + ": 1 non-Exo frames skipped (only EtherType 0x88B5 is sent)\nsent 18 frames on mem0\n"; out.String() != want {
		t.Errorf("send --pcap said\n%s\nwant\n%s", out.String(), want)
	}
	broadcast.Drain(rx, 20*time.Millisecond)
}

// TestFrameDumpSummary: exo frame dump prints one line per Exo frame of a
// capture and the summary on standard error (not with --json).
func TestFrameDumpSummary(t *testing.T) {
	for _, jsonOut := range []bool{false, true} {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		args := []string{"frame", "dump", "--pcap", goldenPcap}
		if jsonOut {
			args = append(args, "--json")
		}
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 18 {
			t.Fatalf("--json %v: %d lines, want 18", jsonOut, len(lines))
		}
		if jsonOut {
			var d frames.Decoded
			if err := json.Unmarshal([]byte(lines[0]), &d); err != nil || *d.Seq != 3 || d.Index != 1 {
				t.Errorf("--json: first line %s: %v", lines[0], err)
			}
			if errOut.Len() != 0 {
				t.Errorf("--json: summary %q, want none", errOut.String())
			}
			continue
		}
		if want := `#1 2025-01-01T00:00:00Z 02:e0:00:00:00:05 > ff:ff:ff:ff:ff:ff seq 3 sender E(4) epoch 1 group 1 history [D C] records 1 ["hello"] tag 0x0123456789abcdef len 41 (+5 padding)`; lines[0] != want {
			t.Errorf("line 1:\n%s\nwant\n%s", lines[0], want)
		}
		if want := goldenPcap + ": 18 Exo frames (11 malformed), 18 shown, 1 other frames skipped\n"; errOut.String() != want {
			t.Errorf("summary %q, want %q", errOut.String(), want)
		}
	}
}

// oneLine checks err is a one-line error with a non-zero exit code.
func oneLine(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	var ee *exitError
	if !errors.As(err, &ee) || ee.code == 0 {
		t.Errorf("error %q has no non-zero exit code", err)
	}
	if s := err.Error(); strings.Contains(s, "\n") || !strings.Contains(s, want) {
		t.Errorf("error %q: want one line containing %q", s, want)
	}
}

func TestFrameBadInput(t *testing.T) {
	dir := t.TempDir()
	mem := broadcast.NewMemNetwork()
	rx := mem.Attach(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x20})
	ctx := context.Background()

	// Corrupt captures: dump, replay and send --pcap say so in one line
	// and send nothing.
	golden, err := os.ReadFile(goldenPcap)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := map[string][]byte{
		"garbage.pcap":   []byte("this is not a capture at all, just text\n"),
		"cut.pcap":       golden[:len(golden)-30],
		"empty.pcap":     nil,
		"badlen.pcapng":  append([]byte{0x0a, 0x0d, 0x0d, 0x0a, 0xff, 0xff, 0xff, 0x7f}, make([]byte, 20)...),
		"badrecord.pcap": append(append([]byte{}, golden[:24]...), 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f),
	}
	for name, b := range corrupt {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := runFrameDump(ctx, &frameDumpOptions{DumpOptions: frames.DumpOptions{Pcap: p, Group: -1, SeqMax: ^uint64(0), Out: &out}, Err: &out})
		oneLine(t, err, name)
		if out.Len() != 0 {
			t.Errorf("%s: dump printed %q before failing", name, out.String())
		}
		err = runFrameReplay(ctx, &frameReplayOptions{ReplayOptions: frames.ReplayOptions{Pcap: p, Interface: "mem0", Speed: 1, Dst: exo.DefaultDstMAC, Listen: mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10})}, Out: &out})
		oneLine(t, err, name)
		t.Logf("%s: %v", name, err)
	}
	// An unknown interface, on the real AF_PACKET path.
	send := func(hook func(string, broadcast.Options) (broadcast.Conn, error), iface string, payload int) error {
		o := &frameSendOptions{
			SendOptions: frames.SendOptions{
				Source: frames.Source{Fields: frames.Fields{Group: 1, Sender: "0", Seq: "1", Count: 3, Payload: strings.Repeat("x", payload), Flags: "0", Tag: "0",
					Given: func(n string) bool { return n == "payload" }}},
				Interface: iface, Dst: exo.DefaultDstMAC, Listen: hook,
			},
			Out: &bytes.Buffer{},
		}
		return runFrameSend(ctx, o)
	}
	err = send(nil, "exo-nosuch0", 10)
	oneLine(t, err, "exo-nosuch0 not found")
	t.Logf("unknown interface: %v", err)
	err = runFrameDump(ctx, &frameDumpOptions{DumpOptions: frames.DumpOptions{Interface: "exo-nosuch0", Group: -1, SeqMax: ^uint64(0), Out: &bytes.Buffer{}}, Err: &bytes.Buffer{}})
	oneLine(t, err, "exo-nosuch0 not found")
	// A payload too large for the MTU (1500): nothing sent.
	mem.SetMTU(1500)
	err = send(mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10}), "mem0", 1500)
	oneLine(t, err, "larger than the MTU 1500")
	t.Logf("too large: %v", err)
	// A payload too large for any frame.
	err = send(mem.Opener(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10}), "mem0", exo.MaxPayload)
	oneLine(t, err, "at most 65535")
	if got := broadcast.Drain(rx, 20*time.Millisecond); len(got) != 0 {
		t.Fatalf("%d frames were sent by failing commands", len(got))
	}

	// Invalid fields: craft writes nothing.
	out := filepath.Join(dir, "out.pcap")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--group", "70000"}, "group 70000"},
		{[]string{"--sender", "255"}, "sender 255"},
		{[]string{"--hosts", "5", "--sender", "5"}, "not in a rack of --hosts 5"},
		{[]string{"--hosts", "5", "--history", "A"}, "needs floor(5/2) = 2"},
		{[]string{"--hosts", "5", "--history", "A,F"}, "not in a rack"},
		{[]string{"--history", "A,A"}, "repeated"},
		{[]string{"--history", "A,?"}, `history id "?"`},
		{[]string{"--flags", "0x2000"}, "BAD_FLAGS"},
		{[]string{"--flags", "readmit:ZZZZ"}, "readmit:HOST"},
		{[]string{"--epoch", "4294967296"}, "epoch"},
		{[]string{"--seq", "9-3"}, "A <= B"},
		{[]string{"--seq", "1-5", "--count", "2"}, "is a range"},
		{[]string{"--tag", "zz"}, "tag"},
		{[]string{"--payload-hex", "0g"}, "not hex"},
		{[]string{"--payload", strings.Repeat("y", 65534)}, "at most 65535"},
		{[]string{"--src", "ff:ff:ff:ff:ff:ff"}, "unicast"},
		{[]string{"--json", "-", "--seq", "3"}, "not also as flags"},
	} {
		root := newRootCmd()
		root.SetArgs(append([]string{"frame", "craft", "--pcap", out}, c.args...))
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetIn(strings.NewReader(`{"seq": 1}`))
		err := root.Execute()
		oneLine(t, err, c.want)
		var ee *exitError
		if errors.As(err, &ee) && ee.code != 2 {
			t.Errorf("%v: exit code %d, want 2 (bad input)", c.args, ee.code)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Fatalf("%v: %s was written despite the error", c.args, out)
		}
	}
	// JSON input with a bad frame among good ones: nothing written.
	root := newRootCmd()
	root.SetArgs([]string{"frame", "craft", "--json", "-", "--pcap", out})
	root.SetIn(strings.NewReader(`{"seq": 1} {"seq": 2, "group": 99999}`))
	root.SetOut(&bytes.Buffer{})
	oneLine(t, root.Execute(), "frame 2")
	if _, serr := os.Stat(out); serr == nil {
		t.Fatalf("%s was written despite the error", out)
	}
}

// TestFrameCraftHex: the default output is the docs' example frame.
func TestFrameCraftHex(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"frame", "craft", "--hosts", "5", "--sender", "E", "--epoch", "1", "--seq", "3", "--history", "D,C", "--payload", "hello", "--tag", "0x0123456789abcdef"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	// docs/wire.md section 3, after the Ethernet header, unpadded.
	want := "0101000104020007000000010001000000000000000000030123456789abcdef0302000568656c6c6f\n"
	if out.String() != want {
		t.Fatalf("craft printed\n%s\nwant\n%s", out.String(), want)
	}
	// dump --json | craft --json gives the same frames back.
	var dumped bytes.Buffer
	if err := runFrameDump(context.Background(), &frameDumpOptions{DumpOptions: frames.DumpOptions{Pcap: goldenPcap, JSON: true, Group: -1, SeqMax: 100, Out: &dumped}, Err: &bytes.Buffer{}}); err != nil {
		t.Fatal(err)
	}
	valid := ""
	for _, l := range strings.Split(strings.TrimSpace(dumped.String()), "\n") {
		if strings.Contains(l, `"valid":true`) {
			valid += l + "\n"
		}
	}
	root = newRootCmd()
	out.Reset()
	root.SetOut(&out)
	root.SetIn(strings.NewReader(valid))
	root.SetArgs([]string{"frame", "craft", "--json", "-"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), strings.TrimSuffix(want, "\n")) || strings.Count(out.String(), "\n") != strings.Count(valid, "\n") {
		t.Fatalf("dump | craft:\n%s", out.String())
	}
}

// TestFrameLive runs exo frame send, replay and dump on a real veth pair
// between two network namespaces it creates (root only; skipped
// otherwise): a frame too large for the MTU sends nothing, and dump on
// the far side sees every replayed frame, malformed ones with their
// reason.
func TestFrameLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("live test skipped: needs root (network namespaces, AF_PACKET)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("live test skipped: no iproute2 ip")
	}
	bin := filepath.Join(t.TempDir(), "exo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	pfx := fmt.Sprintf("exoft%d", os.Getpid()%100000)
	nsA, nsB := pfx+"a", pfx+"b"
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("live test skipped: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", nsA)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", nsA).Run() })
	ip("netns", "add", nsB)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", nsB).Run() })
	ip("link", "add", pfx+"0", "type", "veth", "peer", "name", pfx+"1")
	ip("link", "set", pfx+"0", "netns", nsA)
	ip("link", "set", pfx+"1", "netns", nsB)
	ip("-n", nsA, "link", "set", pfx+"0", "name", "exo0", "up")
	ip("-n", nsB, "link", "set", pfx+"1", "name", "exo0", "up")

	dump := exec.Command("ip", "netns", "exec", nsB, bin, "frame", "dump", "--interface", "exo0", "--json", "--count", "19", "--duration", "5s")
	var dumpOut, dumpErr bytes.Buffer
	dump.Stdout, dump.Stderr = &dumpOut, &dumpErr
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	run := func(args ...string) (string, error) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", nsA, bin, "frame"}, args...)...).CombinedOutput()
		return string(out), err
	}
	// Too large for the MTU: one line, non-zero exit, nothing sent.
	out, err := run("send", "--interface", "exo0", "--count", "5", "--payload", strings.Repeat("x", 1500))
	if err == nil || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "larger than the MTU 1500") {
		t.Errorf("send too large: %v: %q", err, out)
	}
	out, err = run("send", "--interface", "nosuch0", "--payload", "x")
	if err == nil || !strings.Contains(out, "nosuch0 not found") {
		t.Errorf("send on an unknown interface: %v: %q", err, out)
	}
	if out, err := run("send", "--interface", "exo0", "--seq", "100", "--payload", "live", "--hosts", "3", "--history", "X"); err != nil {
		t.Fatalf("send: %v: %s", err, out)
	}
	if out, err := run("replay", "--interface", "exo0", "--pcap", goldenPcap, "--speed", "4"); err != nil {
		t.Fatalf("replay: %v: %s", err, out)
	}
	if err := dump.Wait(); err != nil {
		t.Fatalf("dump: %v: %s", err, dumpErr.String())
	}
	lines := strings.Split(strings.TrimSpace(dumpOut.String()), "\n")
	if len(lines) != 19 {
		t.Fatalf("dump saw %d frames, want 1 sent + 18 replayed (the too-large ones must not be sent):\n%s", len(lines), dumpOut.String())
	}
	var first frames.Decoded
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || *first.Seq != 100 || first.Records[0].Text != "live" {
		t.Fatalf("first frame: %v %s", err, lines[0])
	}
	// The golden capture's Exo frames, in order after the sent one; the
	// malformed ones (11, their reasons checked by TestGolden in
	// broadcast/frames) must keep a malformed verdict on the wire.
	pkts, err := frames.ReadPcap(goldenPcap)
	if err != nil {
		t.Fatal(err)
	}
	var replayed [][]byte
	for _, p := range pkts {
		if e, ok := frames.ParseEthernet(p.Data); ok {
			replayed = append(replayed, e.Payload)
		}
	}
	nMalformed := 0
	for i, b := range replayed {
		if _, err := frames.Decode(b); err == nil {
			continue
		}
		nMalformed++
		var d frames.Decoded
		if err := json.Unmarshal([]byte(lines[1+i]), &d); err != nil {
			t.Fatal(err)
		}
		// On the wire, frames shorter than 60 bytes are padded: the
		// truncated header becomes 46 bytes of which the padding is zero,
		// so its verdict is that of the padded bytes.
		_, err := frames.Decode(append(b, make([]byte, max(broadcast.MinFrameLen-len(b), 0))...))
		wantReason := exo.ReasonOf(err).String()
		if d.Valid || d.Reason != wantReason {
			t.Errorf("live frame %d: valid %v reason %q, want %s", i+1, d.Valid, d.Reason, wantReason)
		}
	}
	if nMalformed != 11 {
		t.Errorf("%d malformed frames in %s, want 11", nMalformed, goldenPcap)
	}
}

// TestFrameCraftKeyFile: with --key-file every crafted frame carries its
// tag under the frame key derived from the group key file; without it the
// tag is --tag's and a one-line note (after the output) says the frames
// are unsigned; --tag with --key-file is refused.
func TestFrameCraftKeyFile(t *testing.T) {
	dir := t.TempDir()
	groupKey := []byte("a group key of 32 bytes for exo!")
	keyFile := filepath.Join(dir, "group.key")
	if err := os.WriteFile(keyFile, groupKey, 0o600); err != nil {
		t.Fatal(err)
	}
	craft := func(args ...string) (string, string, error) {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetIn(strings.NewReader(`{"seq": 7, "sender": 1, "history": ["A", "X"]} {"seq": 8, "tag": 5}`))
		root.SetArgs(append([]string{"frame", "craft"}, args...))
		err := root.Execute()
		return out.String(), errOut.String(), err
	}
	key := daemon.FrameKey(groupKey)
	out, errOut, err := craft("--hosts", "5", "--sender", "E", "--history", "D,C", "--seq", "3-5", "--payload", "hello", "--key-file", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if errOut != "" {
		t.Errorf("note with --key-file: %q", errOut)
	}
	lines := strings.Fields(out)
	if len(lines) != 3 {
		t.Fatalf("craft printed %q", out)
	}
	for _, l := range lines {
		b, _ := hex.DecodeString(l)
		if !exo.VerifyTag(b, key) {
			t.Errorf("frame %s is not sealed under the frame key", l)
		}
	}
	// JSON input: its tags are replaced.
	out, _, err = craft("--json", "-", "--key-file", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Fields(out) {
		b, _ := hex.DecodeString(l)
		if !exo.VerifyTag(b, key) {
			t.Errorf("JSON frame %s is not sealed", l)
		}
	}
	// Without a key: the given tag, and the note on standard error.
	out, errOut, err = craft("--seq", "3", "--tag", "0x1234")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := hex.DecodeString(strings.TrimSpace(out)); binary.BigEndian.Uint64(b[exo.OffTag:]) != 0x1234 {
		t.Errorf("unsigned frame %x", b)
	}
	if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "unsigned") || !strings.Contains(errOut, "--key-file") {
		t.Errorf("note %q: want one line saying the frames are unsigned", errOut)
	}
	_, _, err = craft("--seq", "3", "--tag", "1", "--key-file", keyFile)
	oneLine(t, err, "--tag and --key-file")
	_, _, err = craft("--seq", "3", "--key-file", filepath.Join(dir, "missing"))
	oneLine(t, err, "--key-file")
}
