package frames

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
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

func malformedFrames(t testing.TB) []malformedFrame {
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
	c, err := Craft(CraftOptions{
		Source:  Source{JSON: "-", In: strings.NewReader(goldenSpecs)},
		Capture: true, Dst: exo.DefaultDstMAC, Time: "2025-01-01T00:00:00Z", Gap: time.Millisecond,
	})
	if err != nil {
		t.Fatalf("craft: %v", err)
	}
	tmp := filepath.Join(t.TempDir(), "crafted.pcap")
	if err := os.WriteFile(tmp, c.Pcap, 0o644); err != nil {
		t.Fatal(err)
	}
	pkts, err := ReadPcap(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkts) != 6 {
		t.Fatalf("crafted %d frames, want 6", len(pkts))
	}
	next := pkts[len(pkts)-1].Time
	add := func(b []byte) {
		next = next.Add(time.Millisecond)
		pkts = append(pkts, Packet{Time: next, Data: b})
	}
	src := net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x02}
	// A short frame whose padding is not zero: padding is never payload.
	padded := mustEthernet(t, broadcast.BroadcastMAC, src, mustMarshal(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 1, Seq: 5, History: []uint8{0, 4}}))
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
	ipv4 := mustEthernet(t, broadcast.BroadcastMAC, src, []byte{0x45, 0, 0, 20})
	binary.BigEndian.PutUint16(ipv4[12:], 0x0800)
	add(ipv4)
	var buf bytes.Buffer
	if err := WritePcap(&buf, pkts, false); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), malformed
}

func mustMarshal(t testing.TB, f exo.Frame) []byte {
	t.Helper()
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustEthernet(t *testing.T, dst, src net.HardwareAddr, b []byte) []byte {
	t.Helper()
	eth, err := EthernetFrame(dst, src, b)
	if err != nil {
		t.Fatal(err)
	}
	return eth
}

// dumpAll dumps a capture and returns what it printed.
func dumpAll(t *testing.T, o DumpOptions) string {
	t.Helper()
	var out bytes.Buffer
	o.Out = &out
	if _, err := Dump(context.Background(), o); err != nil {
		t.Fatalf("dump: %v", err)
	}
	return out.String()
}

// TestGolden crafts the golden capture, checks it is byte for byte
// testdata/pcap/golden.pcap (go test ./broadcast/frames -run TestGolden
// -update-pcap rewrites it), reads it back with Dump (JSON) and with tshark
// and the Lua dissector, and compares every field.
func TestGolden(t *testing.T) {
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
		t.Fatalf("%v (generate it: go test ./broadcast/frames -run TestGolden -update-pcap)", err)
	}
	if !bytes.Equal(old, data) {
		t.Fatalf("%s differs from the capture the test crafts (%d vs %d bytes): the generator changed; rewrite it with -update-pcap and review", goldenPcap, len(old), len(data))
	}

	out := dumpAll(t, DumpOptions{Pcap: goldenPcap, JSON: true, Group: -1, SeqMax: ^uint64(0)})
	var dumped []Decoded
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var d Decoded
		if err := dec.Decode(&d); err != nil {
			t.Fatal(err)
		}
		dumped = append(dumped, d)
	}
	pkts, err := ReadPcap(goldenPcap)
	if err != nil {
		t.Fatal(err)
	}
	if len(dumped) != len(pkts)-1 {
		t.Fatalf("dump printed %d frames, want %d (every Exo frame, malformed included; not the IPv4 one)", len(dumped), len(pkts)-1)
	}
	// Every field of the dump against the codec and the bytes.
	nValid := len(dumped) - len(malformed)
	for i, d := range dumped {
		e, _ := ParseEthernet(pkts[i].Data)
		checkDumpAgainstBytes(t, i, d, e.Payload)
		if d.Src != e.Src.String() {
			t.Errorf("frame %d: src %s, want %s", i+1, d.Src, e.Src)
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
	out = dumpAll(t, DumpOptions{Pcap: goldenPcap, Group: -1, SeqMax: ^uint64(0)})
	lines := strings.Split(strings.TrimSpace(out), "\n")
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

// checkDumpAgainstBytes checks every field the dump printed against the
// raw frame bytes b and the codec.
func checkDumpAgainstBytes(t *testing.T, i int, d Decoded, b []byte) {
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
// compares every field with the dump's.
func compareTshark(t *testing.T, dumped []Decoded, nMalformed int) {
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
