package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
)

var updateGolden = flag.Bool("update-pcap", false, "rewrite testdata/pcap/golden.pcap")

const (
	goldenPcap = "../../testdata/pcap/golden.pcap"
	luaScript  = "../../tools/wireshark/exo.lua"
)

// goldenSpecs are the valid frames of the golden capture, as craft --json
// reads them: together they use every field and every value class.
const goldenSpecs = `[
 {"group": 1, "sender": 4, "epoch": 1, "seq": 3, "history": ["D", "C"], "payload": "hello", "tag": "0x0123456789abcdef"},
 {"group": 1, "sender": 0, "epoch": 0, "seq": 4, "history": "X,X"},
 {"group": 65535, "sender": 2, "epoch": 4294967295, "seq": 18446744073709551615, "history": [1, 255],
  "records": ["", {"hex": "00ff10"}, {"base64": "4pyTIMOpeG8="}, {"text": "tab\tnew\nline"}], "flags": "readmit:B", "tag": 18446744073709551615},
 {"group": 0, "sender": 16, "epoch": 7, "seq": 1000, "frames": 2, "history": [15, 14, 13, 12, 11, 10, 9, 8],
  "records": ["first record", "second", "third one is a little longer than the others"], "flags": 32783, "tag": 0},
 {"group": 7, "sender": 0, "epoch": 2, "seq": 9, "history": [], "payload": "no history"}
]`

// malformedFrame is a frame the codec rejects, with its reason.
type malformedFrame struct {
	name   string
	reason exo.Reason
	bytes  []byte // after the Ethernet header, unpadded in the capture
}

func malformedFrames(t *testing.T) []malformedFrame {
	t.Helper()
	good := func(hist []uint8, recs ...string) []byte {
		var p []byte
		for _, r := range recs {
			p, _ = exo.AppendRecord(p, []byte(r))
		}
		f := exo.Frame{Type: exo.FrameData, Group: 3, Sender: 1, Epoch: 5, Seq: 77, Count: uint16(len(recs)), Tag: 0xfeed, History: hist, Payload: p}
		b, err := f.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	set := func(b []byte, f func(b []byte)) []byte { f(b); return b }
	return []malformedFrame{
		{"truncated header", exo.ReasonMalformed, good([]uint8{0, 2}, "x")[:20]},
		{"bad version", exo.ReasonBadVersion, set(good([]uint8{0, 2}, "x"), func(b []byte) { b[exo.OffVersion] = 9 })},
		{"bad type", exo.ReasonBadType, set(good([]uint8{0, 2}, "x"), func(b []byte) { b[exo.OffType] = 2 })},
		{"bad flags", exo.ReasonBadFlags, set(good([]uint8{0, 2}, "x"), func(b []byte) { binary.BigEndian.PutUint16(b[exo.OffFlags:], 0x4001) })},
		{"hist_len above 128", exo.ReasonBadHistlen, set(good([]uint8{0, 2}, "x"), func(b []byte) { b[exo.OffHistLen] = 200 })},
		{"truncated history", exo.ReasonMalformed, set(good([]uint8{0, 2, 3, 4}), func(b []byte) { b[exo.OffHistLen] = 40 })},
		{"payload past the frame", exo.ReasonBadPayload, set(good([]uint8{0, 2}, "hello"), func(b []byte) { binary.BigEndian.PutUint16(b[exo.OffPayloadLen:], 300) })},
		{"repeated history id", exo.ReasonBadHistoryID, set(good([]uint8{2, 0}), func(b []byte) { b[exo.OffHistory+1] = 2 })},
		{"count above the records", exo.ReasonBadPayload, set(good([]uint8{0, 2}, "one"), func(b []byte) { binary.BigEndian.PutUint16(b[exo.OffCount:], 2) })},
		{"bytes after the records", exo.ReasonBadPayload, set(good([]uint8{0, 2}, "one", "two"), func(b []byte) { binary.BigEndian.PutUint16(b[exo.OffCount:], 1) })},
		{"record past payload_len", exo.ReasonBadPayload, set(good([]uint8{0, 2}, "abcdef"), func(b []byte) { binary.BigEndian.PutUint16(b[exo.HeaderLen+2:], 60) })},
	}
}

// goldenCapture builds the golden capture: the crafted frames (padded by
// craft), one valid frame with non-zero padding, the malformed frames
// (unpadded, as a sender's own capture shows them) and one IPv4 frame.
func goldenCapture(t *testing.T) (data []byte, malformed []malformedFrame) {
	t.Helper()
	dir := t.TempDir()
	tmp := filepath.Join(dir, "crafted.pcap")
	o := &frameCraftOptions{
		frameFields:     frameFields{JSON: "-"},
		frameEthOptions: frameEthOptions{Dst: exo.DefaultDstMAC},
		Pcap:            tmp, Time: "2025-01-01T00:00:00Z", Gap: time.Millisecond,
		In: strings.NewReader(goldenSpecs), Print: &bytes.Buffer{},
	}
	if err := runFrameCraft(o); err != nil {
		t.Fatalf("craft: %v", err)
	}
	pkts, err := frameReadCapture(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkts) != 6 {
		t.Fatalf("crafted %d frames, want 6", len(pkts))
	}
	next := pkts[len(pkts)-1].Time
	add := func(b []byte) {
		next = next.Add(time.Millisecond)
		pkts = append(pkts, frameCapPacket{Time: next, Data: b})
	}
	src := net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x02}
	// A short frame whose padding is not zero: padding is never payload.
	padded := frameEth(broadcast.BroadcastMAC, src, mustMarshal(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 1, Seq: 5, History: []uint8{0, 4}}))
	for i := exo.EthHeaderLen + exo.HeaderLen + 2; i < len(padded); i++ {
		padded[i] = 0xAA
	}
	add(padded)
	malformed = malformedFrames(t)
	for i := range malformed {
		m := &malformed[i]
		eth := append(append(append([]byte{}, broadcast.BroadcastMAC...), src...), 0x88, 0xb5)
		add(append(eth, m.bytes...))
	}
	ipv4 := frameEth(broadcast.BroadcastMAC, src, []byte{0x45, 0, 0, 20})
	binary.BigEndian.PutUint16(ipv4[12:], 0x0800)
	add(ipv4)
	data, err = frameWriteCapture(pkts, false)
	if err != nil {
		t.Fatal(err)
	}
	return data, malformed
}

func mustMarshal(t *testing.T, f exo.Frame) []byte {
	t.Helper()
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFrameGolden crafts the golden capture, checks it is byte for byte
// testdata/pcap/golden.pcap (go test ./cmd/exo -run TestFrameGolden
// -update-pcap rewrites it), reads it back with exo frame dump --json and with
// tshark and the Lua dissector, and compares every field.
func TestFrameGolden(t *testing.T) {
	data, malformed := goldenCapture(t)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(goldenPcap), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPcap, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.ReadFile(goldenPcap)
	if err != nil {
		t.Fatalf("%v (generate it: go test ./cmd/exo -run TestFrameGolden -update-pcap)", err)
	}
	if !bytes.Equal(old, data) {
		t.Fatalf("%s differs from the capture the test crafts (%d vs %d bytes): the generator changed; rewrite it with -update-pcap and review", goldenPcap, len(old), len(data))
	}

	// exo frame dump --pcap --json
	var out, errOut bytes.Buffer
	if err := runFrameDump(context.Background(), &frameDumpOptions{Pcap: goldenPcap, JSON: true, Group: -1, SeqMax: ^uint64(0), Out: &out, Err: &errOut}); err != nil {
		t.Fatalf("dump: %v", err)
	}
	var dumped []frameDumpFrame
	dec := json.NewDecoder(&out)
	for dec.More() {
		var d frameDumpFrame
		if err := dec.Decode(&d); err != nil {
			t.Fatal(err)
		}
		dumped = append(dumped, d)
	}
	pkts, err := frameReadCapture(goldenPcap)
	if err != nil {
		t.Fatal(err)
	}
	if len(dumped) != len(pkts)-1 {
		t.Fatalf("dump printed %d frames, want %d (every Exo frame, malformed included; not the IPv4 one)", len(dumped), len(pkts)-1)
	}
	// Every field of dump against the codec and the bytes.
	nValid := len(dumped) - len(malformed)
	for i, d := range dumped {
		payload, _, src, _, _ := frameExoPayload(pkts[i].Data)
		checkDumpAgainstBytes(t, i, d, payload)
		if d.Src != src.String() {
			t.Errorf("frame %d: src %s, want %s", i+1, d.Src, src)
		}
		if i < nValid {
			if !d.Valid || d.Reason != "" {
				t.Errorf("frame %d: valid %v reason %q, want a valid frame", i+1, d.Valid, d.Reason)
			}
		} else if m := malformed[i-nValid]; d.Valid || d.Reason != m.reason.String() {
			t.Errorf("frame %d (%s): valid %v reason %q, want %s", i+1, m.name, d.Valid, d.Reason, m.reason)
		}
	}
	// Spot checks of the crafted values.
	if d := dumped[2]; *d.Group != 65535 || *d.Epoch != 4294967295 || *d.Seq != ^uint64(0) || d.Tag != "0xffffffffffffffff" ||
		*d.Flags != exo.FlagReadmit|1 || *d.ReadmitHost != 1 || len(d.Records) != 4 || d.Records[1].Text != "" || d.Records[2].Text != "✓ éxo" {
		t.Errorf("frame 3: %+v", d)
	}
	if d := dumped[6]; d.Padding != 12 || len(d.Records) != 0 {
		t.Errorf("non-zero padding frame: padding %d records %v, want 12 bytes of padding and no record", d.Padding, d.Records)
	}

	// Human output: one line per frame, the reason of every malformed one.
	out.Reset()
	if err := runFrameDump(context.Background(), &frameDumpOptions{Pcap: goldenPcap, Group: -1, SeqMax: ^uint64(0), Out: &out, Err: &errOut}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(dumped) {
		t.Fatalf("human dump: %d lines, want %d", len(lines), len(dumped))
	}
	if want := "seq 3 sender E(4) epoch 1 group 1 history [D C] records 1 [\"hello\"] tag 0x0123456789abcdef len 41 (+5 padding)"; !strings.Contains(lines[0], want) {
		t.Errorf("line 1:\n%s\nwant it to contain\n%s", lines[0], want)
	}
	for i, m := range malformed {
		if l := lines[nValid+i]; !strings.Contains(l, " "+m.reason.String()+" (") {
			t.Errorf("%s: line %q does not give the reason %s", m.name, l, m.reason)
		}
	}

	compareTshark(t, dumped, len(malformed))
}

// checkDumpAgainstBytes checks every field dump printed against the raw
// frame bytes b and the codec.
func checkDumpAgainstBytes(t *testing.T, i int, d frameDumpFrame, b []byte) {
	t.Helper()
	var f exo.Frame
	err := f.UnmarshalBinary(b)
	if d.Valid != (err == nil) {
		t.Errorf("frame %d: valid %v, codec says %v", i+1, d.Valid, err)
	}
	if err == nil {
		hist := make([]int, len(f.History))
		for k, id := range f.History {
			hist[k] = int(id)
		}
		var recs [][]byte
		_ = exo.ForEachRecord(f.Payload, f.Count, func(r []byte) error { recs = append(recs, r); return nil })
		got := fmt.Sprint(*d.Version, *d.Type, *d.Group, *d.Sender, *d.HistLen, *d.PayloadLen, *d.Epoch, *d.Count, *d.Flags, *d.Seq, d.Tag, d.History, d.Padding)
		want := fmt.Sprint(exo.Version, uint8(f.Type), f.Group, f.Sender, len(f.History), len(f.Payload), f.Epoch, f.Count, f.Flags, f.Seq,
			fmt.Sprintf("0x%016x", f.Tag), hist, len(b)-f.EncodedLen())
		if got != want {
			t.Errorf("frame %d: dump\n%s\nwant\n%s", i+1, got, want)
		}
		if len(d.Records) != len(recs) {
			t.Fatalf("frame %d: %d records, want %d", i+1, len(d.Records), len(recs))
		}
		for k, r := range recs {
			raw, _ := base64.StdEncoding.DecodeString(d.Records[k].Base64)
			if d.Records[k].Len != len(r) || !bytes.Equal(raw, r) {
				t.Errorf("frame %d record %d: %+v, want %q", i+1, k, d.Records[k], r)
			}
		}
		return
	}
	if d.Reason != exo.ReasonOf(err).String() {
		t.Errorf("frame %d: reason %s, codec %s", i+1, d.Reason, exo.ReasonOf(err))
	}
	if len(b) >= exo.HeaderLen && (d.Seq == nil || *d.Seq != binary.BigEndian.Uint64(b[exo.OffSeq:])) {
		t.Errorf("frame %d: seq %v missing or wrong in a malformed frame", i+1, d.Seq)
	}
}

// tsharkFields are the dissector's fields the test reads, in order.
var tsharkFields = []string{
	"eth.src", "exo.version", "exo.type", "exo.group", "exo.sender", "exo.hist_len", "exo.payload_len", "exo.epoch",
	"exo.count", "exo.flags", "exo.flags.readmit", "exo.flags.host", "exo.seq", "exo.tag", "exo.history.id",
	"exo.record.len", "exo.record.data", "exo.reason", "_ws.expert.message",
}

// compareTshark reads the golden capture with tshark and exo.lua and
// compares every field with dump's.
func compareTshark(t *testing.T, dumped []frameDumpFrame, nMalformed int) {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed: the Wireshark dissector comparison is skipped (apt-get install -y tshark; tools/setup.sh installs it)")
	}
	args := []string{"-n", "-X", "lua_script:" + luaScript, "-r", goldenPcap, "-Y", "eth.type == 0x88b5", "-T", "fields",
		"-E", "occurrence=a", "-E", "aggregator=;", "-E", "separator=/t"}
	for _, f := range tsharkFields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "Lua") || strings.Contains(s, "lua") {
		t.Fatalf("tshark: the dissector failed to load: %s", s)
	}
	rows := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(rows) != len(dumped) {
		t.Fatalf("tshark decoded %d Exo frames, dump %d:\n%s", len(rows), len(dumped), out)
	}
	opt := func(p any) string {
		switch v := p.(type) {
		case *uint8:
			if v != nil {
				return strconv.Itoa(int(*v))
			}
		case *uint16:
			if v != nil {
				return strconv.Itoa(int(*v))
			}
		case *uint32:
			if v != nil {
				return strconv.FormatUint(uint64(*v), 10)
			}
		case *uint64:
			if v != nil {
				return strconv.FormatUint(*v, 10)
			}
		}
		return ""
	}
	join := func(xs []string) string { return strings.Join(xs, ";") }
	for i, d := range dumped {
		got := strings.Split(rows[i], "\t")
		if len(got) != len(tsharkFields) {
			t.Fatalf("tshark row %d: %d fields, want %d: %q", i+1, len(got), len(tsharkFields), rows[i])
		}
		want := make([]string, len(tsharkFields))
		want[0] = d.Src
		want[1], want[2], want[3], want[4], want[5], want[6], want[7], want[8] =
			opt(d.Version), opt(d.Type), opt(d.Group), opt(d.Sender), opt(d.HistLen), opt(d.PayloadLen), opt(d.Epoch), opt(d.Count)
		if d.Flags != nil {
			want[9] = fmt.Sprintf("0x%04x", *d.Flags)
			want[10] = "0"
			if *d.Flags&exo.FlagReadmit != 0 {
				want[10] = "1"
				want[11] = strconv.Itoa(int(*d.ReadmitHost))
			}
		}
		want[12], want[13] = opt(d.Seq), d.Tag
		var ids, lens, datas []string
		for _, id := range d.History {
			ids = append(ids, strconv.Itoa(id))
		}
		for _, r := range d.Records {
			lens = append(lens, strconv.Itoa(r.Len))
			raw, _ := base64.StdEncoding.DecodeString(r.Base64)
			if len(raw) > 0 {
				datas = append(datas, hex.EncodeToString(raw))
			}
		}
		want[14], want[15], want[16] = join(ids), join(lens), join(datas)
		reason := exo.ReasonAccept
		if !d.Valid {
			reason = reasonByName(t, d.Reason)
		}
		want[17] = strconv.Itoa(int(reason))
		for k := range 18 {
			if got[k] != want[k] {
				t.Errorf("frame %d (reason %s): %s: tshark %q, dump %q", i+1, reason, tsharkFields[k], got[k], want[k])
			}
		}
		// Malformed frames carry an expert info naming their reason;
		// valid ones none.
		expert := got[18]
		if d.Valid && expert != "" {
			t.Errorf("frame %d: valid, but the dissector flags it: %s", i+1, expert)
		}
		if !d.Valid && !strings.Contains(expert, "("+d.Reason+")") {
			t.Errorf("frame %d (%s): expert info %q does not name %s", i+1, d.Reason, expert, d.Reason)
		}
	}
	if !t.Failed() {
		t.Logf("tshark and exo frame dump agree on all %d fields of %d frames (%d malformed)", len(tsharkFields), len(dumped), nMalformed)
	}
}

func reasonByName(t *testing.T, name string) exo.Reason {
	for r := exo.Reason(0); r < exo.NumReasons; r++ {
		if r.String() == name {
			return r
		}
	}
	t.Fatalf("unknown reason %q", name)
	return 0
}

// TestFramePcapng: craft writes pcapng for a .pcapng name and dump reads it.
func TestFramePcapng(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pcapng")
	o := &frameCraftOptions{
		frameFields:     frameFields{Group: 9, Sender: "B", Seq: "5-7", Frames: 1, History: "A,X", Records: []string{"r"}, Flags: "0", Tag: "0"},
		frameEthOptions: frameEthOptions{Dst: exo.DefaultDstMAC},
		Pcap:            path, Time: "2025-01-01T00:00:00Z", Gap: time.Second, Print: &bytes.Buffer{},
	}
	if err := runFrameCraft(o); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	do := &frameDumpOptions{Pcap: path, Group: 9, Sender: "1", SeqMin: 6, SeqMax: 7, JSON: true, Out: &out, Err: &bytes.Buffer{}}
	if err := runFrameDump(context.Background(), do); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 2 || !strings.Contains(out.String(), `"seq":6`) || !strings.Contains(out.String(), `"time":"2025-01-01T00:00:02Z"`) {
		t.Fatalf("pcapng dump with filters: %s", out.String())
	}

	// --write: the frames shown, byte for byte, in a pcap a dump reads
	// back (and a replay sends: exo raw --replay-pcap).
	all, err := frameReadCapture(path)
	if err != nil {
		t.Fatal(err)
	}
	wrote := filepath.Join(t.TempDir(), "shown.pcap")
	do = &frameDumpOptions{Pcap: path, Group: 9, SeqMin: 6, SeqMax: ^uint64(0), Write: wrote, Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
	if err := runFrameDump(context.Background(), do); err != nil {
		t.Fatal(err)
	}
	back, err := frameReadCapture(wrote)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || len(back) != 2 || !bytes.Equal(back[0].Data, all[1].Data) || !bytes.Equal(back[1].Data, all[2].Data) {
		t.Fatalf("--write: %d frames written of %d, want seq 6 and 7 byte for byte", len(back), len(all))
	}
	replay, err := loadReplay(wrote)
	if err != nil || len(replay) != 2 || !bytes.Equal(replay[0], all[1].Data) {
		t.Fatalf("loadReplay: %d frames, %v", len(replay), err)
	}
	if _, err := loadReplay(filepath.Join(t.TempDir(), "none.pcap")); err == nil {
		t.Error("loadReplay of a missing file: no error")
	}
	do.Write = filepath.Join(t.TempDir(), "no", "such", "dir.pcap")
	if err := runFrameDump(context.Background(), do); err == nil {
		t.Error("--write into a missing directory: no error")
	}
}

// memListen returns a listen hook attaching to a memory network.
func memListen(n *broadcast.MemNetwork) func(string, broadcast.Options) (broadcast.Conn, error) {
	return func(_ string, opts broadcast.Options) (broadcast.Conn, error) {
		return n.AttachOptions(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x10}, opts)
	}
}

// received drains rx: the frames it got.
func received(rx broadcast.Conn) [][]byte {
	var got [][]byte
	buf := make([]byte, rx.MTU())
	for {
		rx.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		n, _, err := rx.ReadFrame(buf)
		if err != nil {
			return got
		}
		got = append(got, append([]byte(nil), buf[:n]...))
	}
}

func TestFrameSendAndReplay(t *testing.T) {
	mem := broadcast.NewMemNetwork()
	rx := mem.Attach(net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x20})
	var out bytes.Buffer
	o := &frameSendOptions{
		frameFields: frameFields{Group: 1, Sender: "A", Seq: "10", Frames: 5, History: "X,X", Payload: "p", Flags: "0", Tag: "0",
			set: func(n string) bool { return n == "payload" }},
		Interface: "mem0", Rate: 2000, Dst: exo.DefaultDstMAC, Out: &out, listen: memListen(mem),
	}
	if err := runFrameSend(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	got := received(rx)
	if len(got) != 5 {
		t.Fatalf("received %d frames, want 5", len(got))
	}
	for i, b := range got {
		var f exo.Frame
		if err := f.UnmarshalBinary(b); err != nil || f.Seq != uint64(10+i) || string(f.Payload[2:]) != "p" {
			t.Fatalf("frame %d: %v %+v", i, err, f)
		}
	}

	// replay: every Exo frame of the golden capture, as captured, gaps kept.
	rp := &frameReplayOptions{Pcap: goldenPcap, Interface: "mem0", Speed: 1, Dst: exo.DefaultDstMAC, Out: &out, listen: memListen(mem)}
	start := time.Now()
	if err := runFrameReplay(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
	pkts, _ := frameReadCapture(goldenPcap)
	var want [][]byte
	for _, p := range pkts {
		if b, _, _, _, ok := frameExoPayload(p.Data); ok {
			want = append(want, b)
		}
	}
	if el, min := time.Since(start), pkts[len(pkts)-2].Time.Sub(pkts[0].Time); el < min {
		t.Errorf("replay took %v, the capture spans %v: gaps not kept", el, min)
	}
	got = received(rx)
	if len(got) != len(want) {
		t.Fatalf("replay: received %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		// The receiver sees the padding of short frames.
		if !bytes.HasPrefix(got[i], want[i]) {
			t.Errorf("replayed frame %d:\n%x\nwant\n%x", i+1, got[i], want[i])
		}
	}
	if !strings.Contains(out.String(), "replayed 18 frames") || !strings.Contains(out.String(), "1 non-Exo frames skipped") {
		t.Errorf("replay said %q", out.String())
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
		err := runFrameDump(ctx, &frameDumpOptions{Pcap: p, Group: -1, SeqMax: ^uint64(0), Out: &out, Err: &out})
		oneLine(t, err, name)
		if out.Len() != 0 {
			t.Errorf("%s: dump printed %q before failing", name, out.String())
		}
		err = runFrameReplay(ctx, &frameReplayOptions{Pcap: p, Interface: "mem0", Speed: 1, Dst: exo.DefaultDstMAC, Out: &out, listen: memListen(mem)})
		oneLine(t, err, name)
		t.Logf("%s: %v", name, err)
	}
	// An unknown interface, on the real AF_PACKET path.
	send := func(hook func(string, broadcast.Options) (broadcast.Conn, error), iface string, payload int) error {
		o := &frameSendOptions{
			frameFields: frameFields{Group: 1, Sender: "0", Seq: "1", Frames: 3, Payload: strings.Repeat("x", payload), Flags: "0", Tag: "0",
				set: func(n string) bool { return n == "payload" }},
			Interface: iface, Dst: exo.DefaultDstMAC, Out: &bytes.Buffer{}, listen: hook,
		}
		return runFrameSend(ctx, o)
	}
	err = send(nil, "exo-nosuch0", 10)
	oneLine(t, err, "exo-nosuch0 not found")
	t.Logf("unknown interface: %v", err)
	err = runFrameDump(ctx, &frameDumpOptions{Interface: "exo-nosuch0", Group: -1, SeqMax: ^uint64(0), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	oneLine(t, err, "exo-nosuch0 not found")
	// A payload too large for the MTU (1500): nothing sent.
	mem.SetMTU(1500)
	err = send(memListen(mem), "mem0", 1500)
	oneLine(t, err, "larger than the MTU 1500")
	t.Logf("too large: %v", err)
	// A payload too large for any frame.
	err = send(memListen(mem), "mem0", exo.MaxPayload)
	oneLine(t, err, "at most 65535")
	if got := received(rx); len(got) != 0 {
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
	if err := runFrameDump(context.Background(), &frameDumpOptions{Pcap: goldenPcap, JSON: true, Group: -1, SeqMax: 100, Out: &dumped, Err: &bytes.Buffer{}}); err != nil {
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
	var first frameDumpFrame
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || *first.Seq != 100 || first.Records[0].Text != "live" {
		t.Fatalf("first frame: %v %s", err, lines[0])
	}
	_, malformed := goldenCapture(t)
	for i, m := range malformed {
		var d frameDumpFrame
		if err := json.Unmarshal([]byte(lines[len(lines)-len(malformed)+i]), &d); err != nil {
			t.Fatal(err)
		}
		// On the wire, frames shorter than 60 bytes are padded: the
		// truncated header becomes 46 bytes of which the padding is zero,
		// so its verdict is that of the padded bytes.
		var f exo.Frame
		wantReason := exo.ReasonOf(f.UnmarshalBinary(append(m.bytes, make([]byte, max(broadcast.MinFrameLen-len(m.bytes), 0))...))).String()
		if d.Valid || d.Reason != wantReason {
			t.Errorf("live %s: valid %v reason %q, want %s", m.name, d.Valid, d.Reason, wantReason)
		}
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
