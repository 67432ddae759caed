package exo

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// docFrameBytes is the frame of docs/wire.md: n = 5 hosts A..E (ids
// 0..4), so h = 2; E (4) sends seq 3 after D (3) and C (2), one record
// "hello". 41 bytes, so the Ethernet frame (14 + 41 = 55) is padded to 60.
var docFrameBytes = []byte{
	0x01,       // version 1
	0x01,       // type DATA
	0x00, 0x01, // group 1
	0x04,       // sender 4 (E)
	0x02,       // hist_len 2 (floor(5/2))
	0x00, 0x07, // payload_len 7
	0x00, 0x00, 0x00, 0x01, // epoch 1
	0x00, 0x01, // count 1 record
	0x00, 0x00, // flags 0
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, // seq 3
	0xe9, 0xe9, 0x73, 0x22, 0xa7, 0x7f, 0x7b, 0x05, // tag: SipHash-2-4 under the key 00 01 .. 0f
	0x03, 0x02, // history: D, C (most recent first)
	0x00, 0x05, // record 0: len 5
	'h', 'e', 'l', 'l', 'o', // record 0: "hello"
}

func docFrame() *Frame {
	return &Frame{
		Type:    FrameData,
		Group:   1,
		Sender:  4,
		Epoch:   1,
		Seq:     3,
		Count:   1,
		Tag:     0xe9e97322a77f7b05,
		History: []uint8{3, 2},
		Payload: []byte{0x00, 0x05, 'h', 'e', 'l', 'l', 'o'},
	}
}

// records builds a payload from records (test helper).
func records(t testing.TB, recs ...string) []byte {
	t.Helper()
	var p []byte
	for _, r := range recs {
		var err error
		if p, err = AppendRecord(p, []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func frameString(f *Frame) string {
	if f == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{Type:%v Group:%d Sender:%d Epoch:%d Seq:%d Count:%d Tag:%#x History:%x Payload:%x}",
		f.Type, f.Group, f.Sender, f.Epoch, f.Seq, f.Count, f.Tag, f.History, f.Payload)
}

func TestFrameKnownBytes(t *testing.T) {
	hist128 := make([]uint8, MaxHistory)
	for i := range hist128 {
		hist128[i] = uint8(MaxHistory - 1 - i)
	}
	tests := []struct {
		name  string
		b     []byte
		frame *Frame
	}{
		{name: "doc frame (n=5, seq 3, hello)", b: docFrameBytes, frame: docFrame()},
		{
			name: "token pass, n=3, empty history",
			b: []byte{
				0x01,       // version 1
				0x01,       // type DATA
				0xbe, 0xef, // group 0xbeef
				0x00,       // sender 0 (A)
				0x01,       // hist_len 1 (floor(3/2))
				0x00, 0x00, // payload_len 0
				0xde, 0xad, 0xbe, 0xef, // epoch
				0x00, 0x00, // count 0: token pass
				0x00, 0x00, // flags
				0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, // seq (big-endian)
				0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // tag
				0xff, // history: X (none yet)
			},
			frame: &Frame{Type: FrameData, Group: 0xbeef, Epoch: 0xdeadbeef, Seq: 0xffeeddccbbaa9988,
				History: []uint8{HistoryNone}, Payload: []byte{}},
		},
		{
			name: "n=1, no history, two records one empty",
			b: []byte{
				0x01, 0x01, 0x00, 0x00, // version, type, group 0
				0x00, 0x00, 0x00, 0x05, // sender 0, hist_len 0, payload_len 5
				0x00, 0x00, 0x00, 0x00, // epoch 0
				0x00, 0x02, 0x00, 0x00, // count 2, flags
				0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // seq 0
				0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // tag 0
				0x00, 0x00, // record 0: len 0
				0x00, 0x01, 'x', // record 1: "x"
			},
			frame: &Frame{Type: FrameData, Count: 2, Payload: []byte{0, 0, 0, 1, 'x'}},
		},
		{
			name: "n=256, full history of 128 ids",
			b: append([]byte{
				0x01, 0x01, 0x00, 0x02, // version, type, group 2
				0xfe, 0x80, 0x00, 0x00, // sender 254, hist_len 128, payload_len 0
				0x00, 0x00, 0x00, 0x09, // epoch 9
				0x00, 0x00, 0x00, 0x00, // count 0, flags
				0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, // seq 256
				0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // tag 0
			}, hist128...), // history 127, 126, ..., 0
			frame: &Frame{Type: FrameData, Group: 2, Sender: 254, Epoch: 9, Seq: 256, History: hist128},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Frame
			if err := got.UnmarshalBinary(tt.b); err != nil {
				t.Fatalf("UnmarshalBinary: %v", err)
			}
			if !got.Equal(tt.frame) {
				t.Fatalf("UnmarshalBinary:\n got %s\nwant %s", frameString(&got), frameString(tt.frame))
			}
			b, err := tt.frame.MarshalBinary()
			if err != nil {
				t.Fatalf("MarshalBinary: %v", err)
			}
			if !bytes.Equal(b, tt.b) {
				t.Fatalf("MarshalBinary:\n got %x\nwant %x", b, tt.b)
			}
			if n := tt.frame.EncodedLen(); n != len(tt.b) {
				t.Fatalf("EncodedLen = %d, want %d", n, len(tt.b))
			}
		})
	}
}

func TestFrameRoundTrip(t *testing.T) {
	big := make([]byte, 1400)
	for i := range big {
		big[i] = byte(i)
	}
	frames := []*Frame{
		docFrame(),
		{Type: FrameData},
		{Type: FrameData, History: []uint8{HistoryNone, HistoryNone, HistoryNone}},
		{Type: FrameData, Group: 0xffff, Sender: 0xff, Epoch: 0xffffffff, Seq: ^uint64(0), Tag: ^uint64(0),
			History: []uint8{0, 1, 2, 255}, Count: 3, Payload: records(t, "a", "", string(big))},
	}
	for i, f := range frames {
		b, err := f.MarshalBinary()
		if err != nil {
			t.Fatalf("frame %d: MarshalBinary: %v", i, err)
		}
		// Append after a prefix: the prefix is kept, the frame follows.
		prefix := []byte("eth-header-14b")
		b2, err := f.AppendBinary(append([]byte(nil), prefix...))
		if err != nil || !bytes.Equal(b2[:len(prefix)], prefix) || !bytes.Equal(b2[len(prefix):], b) {
			t.Fatalf("frame %d: AppendBinary after prefix = %x, %v", i, b2, err)
		}
		var g Frame
		if err := g.UnmarshalBinary(b); err != nil {
			t.Fatalf("frame %d: UnmarshalBinary: %v", i, err)
		}
		if !g.Equal(f) {
			t.Fatalf("frame %d round trip:\n got %s\nwant %s", i, frameString(&g), frameString(f))
		}
	}
}

// TestFramePaddingIgnored: a frame shorter than the Ethernet minimum is
// padded by the sender or the NIC; the padding, zero or not, is not payload.
func TestFramePaddingIgnored(t *testing.T) {
	pad := MinEthFrame - EthHeaderLen - len(docFrameBytes) // 5
	if pad <= 0 {
		t.Fatalf("doc frame needs no padding (pad %d)", pad)
	}
	for _, fill := range []byte{0x00, 0xa5} {
		b := append(append([]byte(nil), docFrameBytes...), bytes.Repeat([]byte{fill}, pad)...)
		if len(b)+EthHeaderLen != MinEthFrame {
			t.Fatalf("padded len %d", len(b)+EthHeaderLen)
		}
		var f Frame
		if err := f.UnmarshalBinary(b); err != nil {
			t.Fatalf("fill %#x: %v", fill, err)
		}
		if !f.Equal(docFrame()) {
			t.Fatalf("fill %#x: got %s", fill, frameString(&f))
		}
		n := 0
		if err := ForEachRecord(f.Payload, f.Count, func(rec []byte) error {
			if string(rec) != "hello" {
				t.Errorf("record %q", rec)
			}
			n++
			return nil
		}); err != nil || n != 1 {
			t.Fatalf("ForEachRecord: n=%d err=%v", n, err)
		}
	}
}

// mutate returns a copy of docFrameBytes changed by fn.
func mutate(fn func(b []byte) []byte) []byte {
	return fn(append([]byte(nil), docFrameBytes...))
}

func TestFrameUnmarshalErrors(t *testing.T) {
	tests := []struct {
		name   string
		b      []byte
		reason Reason
		err    error
		off    int
	}{
		{"empty", nil, ReasonMalformed, ErrTruncated, 0},
		{"version only", []byte{Version}, ReasonMalformed, ErrTruncated, 1},
		{"header cut", docFrameBytes[:HeaderLen-1], ReasonMalformed, ErrTruncated, HeaderLen - 1},
		{"history cut", docFrameBytes[:HeaderLen+1], ReasonMalformed, ErrTruncated, HeaderLen + 1},
		{"version 0", mutate(func(b []byte) []byte { b[OffVersion] = 0; return b }), ReasonBadVersion, ErrVersion, OffVersion},
		{"version 2", mutate(func(b []byte) []byte { b[OffVersion] = 2; return b }), ReasonBadVersion, ErrVersion, OffVersion},
		{"version 2, short", []byte{2, 1, 0}, ReasonBadVersion, ErrVersion, OffVersion},
		{"type 0", mutate(func(b []byte) []byte { b[OffType] = 0; return b }), ReasonBadType, ErrType, OffType},
		{"type 2", mutate(func(b []byte) []byte { b[OffType] = 2; return b }), ReasonBadType, ErrType, OffType},
		{"flags 1", mutate(func(b []byte) []byte { b[OffFlags+1] = 1; return b }), ReasonBadFlags, ErrFlags, OffFlags},
		{"flags 0x2000", mutate(func(b []byte) []byte { b[OffFlags] = 0x20; return b }), ReasonBadFlags, ErrFlags, OffFlags},
		{"flags readmit|key phase|0x2000", mutate(func(b []byte) []byte { b[OffFlags] = 0xE0; return b }), ReasonBadFlags, ErrFlags, OffFlags},
		{"hist_len 129", mutate(func(b []byte) []byte {
			b[OffHistLen] = MaxHistory + 1
			return append(b, make([]byte, 200)...)
		}), ReasonBadHistlen, ErrHistLen, OffHistLen},
		{"hist_len 255", mutate(func(b []byte) []byte { b[OffHistLen] = 255; return b }), ReasonBadHistlen, ErrHistLen, OffHistLen},
		{"payload_len beyond frame", mutate(func(b []byte) []byte { b[OffPayloadLen+1] = 8; return b }), ReasonBadPayload, ErrPayload, OffPayloadLen},
		{"payload cut", docFrameBytes[:len(docFrameBytes)-1], ReasonBadPayload, ErrPayload, OffPayloadLen},
		{"payload_len 0xffff", mutate(func(b []byte) []byte { b[OffPayloadLen], b[OffPayloadLen+1] = 0xff, 0xff; return b }), ReasonBadPayload, ErrPayload, OffPayloadLen},
		{"count 2, one record", mutate(func(b []byte) []byte { b[OffCount+1] = 2; return b }), ReasonBadPayload, ErrPayload, HeaderLen + 2 + 7},
		{"count 0, one record", mutate(func(b []byte) []byte { b[OffCount+1] = 0; return b }), ReasonBadPayload, ErrPayload, HeaderLen + 2},
		{"record len beyond payload", mutate(func(b []byte) []byte { b[HeaderLen+2+1] = 6; return b }), ReasonBadPayload, ErrPayload, HeaderLen + 2},
		{"record shorter than payload", mutate(func(b []byte) []byte { b[HeaderLen+2+1] = 4; return b }), ReasonBadPayload, ErrPayload, HeaderLen + 2 + 6},
		{"padding not payload", mutate(func(b []byte) []byte {
			// payload_len 8 claims a pad byte: 1 trailing byte after the record.
			b[OffPayloadLen+1] = 8
			return append(b, 0)
		}), ReasonBadPayload, ErrPayload, HeaderLen + 2 + 7},
		{"history id repeated", mutate(func(b []byte) []byte { b[HeaderLen+1] = b[HeaderLen]; return b }), ReasonBadHistoryID, ErrHistoryID, HeaderLen + 1},
	}
	seen := map[Reason]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := docFrame()
			f.Seq = 99 // sentinel value: must survive the failed decode
			before := *f
			err := f.UnmarshalBinary(tt.b)
			if err == nil {
				t.Fatalf("UnmarshalBinary(%x) = nil, want %v", tt.b, tt.err)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.err)
			}
			if r := ReasonOf(err); r != tt.reason {
				t.Errorf("ReasonOf = %v, want %v", r, tt.reason)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err %T is not a *DecodeError", err)
			}
			if de.Offset != tt.off {
				t.Errorf("Offset = %d, want %d (%v)", de.Offset, tt.off, err)
			}
			if !f.Equal(&before) {
				t.Errorf("frame changed on error: %s", frameString(f))
			}
			seen[tt.reason] = true
		})
	}
	for _, r := range []Reason{ReasonMalformed, ReasonBadVersion, ReasonBadType, ReasonBadHistlen,
		ReasonBadPayload, ReasonBadFlags, ReasonBadHistoryID} {
		if !seen[r] {
			t.Errorf("no test for codec reason %v", r)
		}
	}
}

func TestFrameHistoryNoneRepeats(t *testing.T) {
	b := mutate(func(b []byte) []byte { b[HeaderLen], b[HeaderLen+1] = HistoryNone, HistoryNone; return b })
	var f Frame
	if err := f.UnmarshalBinary(b); err != nil {
		t.Fatalf("history [X X]: %v", err)
	}
}

func TestFrameMarshalErrors(t *testing.T) {
	tests := []struct {
		name   string
		change func(f *Frame)
		reason Reason
		err    error
	}{
		{"type 0", func(f *Frame) { f.Type = 0 }, ReasonBadType, ErrType},
		{"type 7", func(f *Frame) { f.Type = 7 }, ReasonBadType, ErrType},
		{"history 129", func(f *Frame) { f.History = make([]uint8, MaxHistory+1) }, ReasonBadHistlen, ErrHistLen},
		{"history repeat", func(f *Frame) { f.History = []uint8{1, 2, 1} }, ReasonBadHistoryID, ErrHistoryID},
		{"payload 65536", func(f *Frame) { f.Payload = make([]byte, MaxPayload+1) }, ReasonBadPayload, ErrPayload},
		{"count too high", func(f *Frame) { f.Count = 2 }, ReasonBadPayload, ErrPayload},
		{"count 0 with payload", func(f *Frame) { f.Count = 0 }, ReasonBadPayload, ErrPayload},
		{"raw payload", func(f *Frame) { f.Payload = []byte("hello") }, ReasonBadPayload, ErrPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := docFrame()
			tt.change(f)
			if b, err := f.MarshalBinary(); !errors.Is(err, tt.err) || ReasonOf(err) != tt.reason {
				t.Fatalf("MarshalBinary = %x, %v; want %v (%v)", b, err, tt.err, tt.reason)
			}
			buf := []byte("keep")
			b, err := f.AppendBinary(buf)
			if !errors.Is(err, tt.err) || string(b) != "keep" {
				t.Fatalf("AppendBinary = %q, %v; want \"keep\", %v", b, err, tt.err)
			}
		})
	}
}

func TestFrameAliasing(t *testing.T) {
	b := append(append([]byte(nil), docFrameBytes...), 0, 0, 0, 0, 0)
	var f Frame
	if err := f.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if &f.History[0] != &b[HeaderLen] || &f.Payload[0] != &b[HeaderLen+2] {
		t.Fatal("History/Payload do not alias the input")
	}
	if cap(f.History) != len(f.History) || cap(f.Payload) != len(f.Payload) {
		t.Fatalf("capacity not clipped: history %d/%d payload %d/%d",
			len(f.History), cap(f.History), len(f.Payload), cap(f.Payload))
	}
	_ = append(f.Payload, 'X') // must not write into the padding of b
	if b[len(docFrameBytes)] != 0 {
		t.Fatal("append to Payload wrote into the input buffer")
	}
}

func TestFrameEqual(t *testing.T) {
	a, b := docFrame(), docFrame()
	if !a.Equal(b) {
		t.Fatal("equal frames differ")
	}
	changes := []func(f *Frame){
		func(f *Frame) { f.Type = 2 },
		func(f *Frame) { f.Group++ },
		func(f *Frame) { f.Sender++ },
		func(f *Frame) { f.Epoch++ },
		func(f *Frame) { f.Seq++ },
		func(f *Frame) { f.Count++ },
		func(f *Frame) { f.Tag++ },
		func(f *Frame) { f.History[1] = 1 },
		func(f *Frame) { f.History = f.History[:1] },
		func(f *Frame) { f.Payload[2] = 'H' },
	}
	for i, c := range changes {
		g := docFrame()
		c(g)
		if a.Equal(g) || g.Equal(a) {
			t.Errorf("change %d: frames still equal", i)
		}
	}
	var nilFrame *Frame
	if !nilFrame.Equal(nil) || a.Equal(nil) || nilFrame.Equal(a) {
		t.Error("nil handling")
	}
	if !(&Frame{History: nil}).Equal(&Frame{History: []uint8{}}) {
		t.Error("nil and empty history differ")
	}
}

func TestRecords(t *testing.T) {
	recs := []string{"", "a", "hello", strings.Repeat("z", 300)}
	p := records(t, recs...)
	var got []string
	if err := ForEachRecord(p, uint16(len(recs)), func(rec []byte) error {
		got = append(got, string(rec))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != strings.Join(recs, "|") {
		t.Fatalf("records %q, want %q", got, recs)
	}

	// fn's error stops the walk and is returned as is.
	stop := errors.New("stop")
	n := 0
	if err := ForEachRecord(p, uint16(len(recs)), func([]byte) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("fn error: n=%d err=%v", n, err)
	}

	// Bad framing: fn is never called.
	for _, tc := range []struct {
		p     []byte
		count uint16
		off   int
	}{
		{p, uint16(len(recs)) + 1, len(p)},
		{p, uint16(len(recs)) - 1, len(p) - 302},
		{p[:len(p)-1], uint16(len(recs)), len(p) - 302},
		{[]byte{0}, 1, 0},
		{[]byte{0}, 0, 0},
		{nil, 1, 0},
	} {
		err := ForEachRecord(tc.p, tc.count, func([]byte) error { t.Fatal("fn called on bad framing"); return nil })
		var de *DecodeError
		if !errors.Is(err, ErrPayload) || ReasonOf(err) != ReasonBadPayload || !errors.As(err, &de) || de.Offset != tc.off {
			t.Errorf("ForEachRecord(%x, %d) = %v, want BAD_PAYLOAD at %d", tc.p, tc.count, err, tc.off)
		}
	}
	if err := ForEachRecord(nil, 0, func([]byte) error { t.Fatal("called"); return nil }); err != nil {
		t.Fatalf("empty payload, count 0: %v", err)
	}
}

func TestAppendRecordLimits(t *testing.T) {
	largest := make([]byte, MaxPayload-RecordLenSize)
	p, err := AppendRecord(nil, largest)
	if err != nil || len(p) != MaxPayload {
		t.Fatalf("largest record: len %d, %v", len(p), err)
	}
	if q, err := AppendRecord(p, nil); !errors.Is(err, ErrPayload) || len(q) != len(p) {
		t.Fatalf("record past MaxPayload: len %d, %v", len(q), err)
	}
	if _, err := AppendRecord(nil, make([]byte, MaxPayload+1)); ReasonOf(err) != ReasonBadPayload {
		t.Fatalf("record of 65536 bytes: %v", err)
	}
	f := &Frame{Type: FrameData, Count: 1, Payload: p}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var g Frame
	if err := g.UnmarshalBinary(b); err != nil || !g.Equal(f) {
		t.Fatalf("max payload round trip: %v", err)
	}
}

func TestReasonOf(t *testing.T) {
	tests := []struct {
		err  error
		want Reason
	}{
		{nil, ReasonAccept},
		{ErrTruncated, ReasonMalformed},
		{ErrVersion, ReasonBadVersion},
		{ErrType, ReasonBadType},
		{ErrHistLen, ReasonBadHistlen},
		{ErrPayload, ReasonBadPayload},
		{ErrFlags, ReasonBadFlags},
		{ErrHistoryID, ReasonBadHistoryID},
		{fmt.Errorf("rx: %w", &DecodeError{Reason: ReasonBadFlags, Err: ErrFlags}), ReasonBadFlags},
		{fmt.Errorf("rx: %w", ErrHistoryID), ReasonBadHistoryID},
		{&DecodeError{Reason: ReasonAccept, Err: ErrType}, ReasonBadType},
		{&DecodeError{}, ReasonMalformed},
		{errors.New("something else"), ReasonMalformed},
	}
	for _, tt := range tests {
		if got := ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestReasonNames(t *testing.T) {
	if NumReasons != 19 {
		t.Fatalf("NumReasons = %d", NumReasons)
	}
	want := map[Reason]string{
		ReasonAccept: "ACCEPT", ReasonSenderInHistory: "SENDER_IN_HISTORY", ReasonBadHistlen: "BAD_HISTLEN",
		ReasonBadHistoryID: "BAD_HISTORY_ID", ReasonBadFlags: "BAD_FLAGS", 200: "Reason(200)",
	}
	for r, s := range want {
		if r.String() != s {
			t.Errorf("Reason(%d).String() = %q, want %q", uint8(r), r.String(), s)
		}
	}
	slow := map[Reason]bool{ReasonGap: true, ReasonDivergence: true, ReasonFutureEpoch: true, ReasonHalted: true,
		ReasonSeqTooFar: true} // SEQ_TOO_FAR: the control plane catches up (hw/wire.json)
	for r := Reason(0); r < 255; r++ {
		if r.SlowPath() != slow[r] {
			t.Errorf("%v.SlowPath() = %v", r, r.SlowPath())
		}
		if (r < NumReasons) != (r.Doc() != "") {
			t.Errorf("%v.Doc() = %q", r, r.Doc())
		}
	}
	if FrameData.String() != "DATA" || FrameType(9).String() != "FrameType(9)" {
		t.Error("FrameType.String")
	}
}

// benchFrame is a frame with a 64-byte payload (one 62-byte record) for
// n = 5 (h = 2).
func benchFrame(tb testing.TB) *Frame {
	return &Frame{Type: FrameData, Group: 1, Sender: 4, Epoch: 1, Seq: 1 << 40, Count: 1,
		Tag: 0x0123456789abcdef, History: []uint8{3, 2}, Payload: records(tb, strings.Repeat("p", 62))}
}

func TestFrameAllocs(t *testing.T) {
	f := benchFrame(t)
	buf := make([]byte, 0, f.EncodedLen())
	enc, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Payload) != 64 || len(enc) != HeaderLen+2+64 {
		t.Fatalf("bench frame: payload %d, frame %d", len(f.Payload), len(enc))
	}
	var g Frame
	var sink int
	count := func(rec []byte) error { sink += len(rec); return nil }
	for name, fn := range map[string]func(){
		"AppendBinary":    func() { _, _ = f.AppendBinary(buf[:0]) },
		"UnmarshalBinary": func() { _ = g.UnmarshalBinary(enc) },
		"ForEachRecord":   func() { _ = ForEachRecord(f.Payload, f.Count, count) },
		"AppendRecord":    func() { _, _ = AppendRecord(buf[:0], f.Payload[2:]) },
	} {
		if a := testing.AllocsPerRun(1000, fn); a != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, a)
		}
	}
	if !g.Equal(f) {
		t.Fatal("decode in alloc test")
	}
}

func BenchmarkFrameAppendBinary(b *testing.B) {
	f := benchFrame(b)
	buf := make([]byte, 0, f.EncodedLen())
	b.SetBytes(int64(f.EncodedLen()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.AppendBinary(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFrameUnmarshal(b *testing.B) {
	enc, err := benchFrame(b).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	var f Frame
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if err := f.UnmarshalBinary(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWireDocHexDump checks that the annotated hex dump in docs/wire.md
// is the doc frame, Ethernet header and padding included: the document
// cannot drift from the codec.
func TestWireDocHexDump(t *testing.T) {
	const begin, end = "<!-- hexdump: TestWireDocHexDump -->", "<!-- end hexdump -->"
	doc, err := os.ReadFile("../docs/wire.md")
	if err != nil {
		t.Skipf("docs/wire.md: %v", err)
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("docs/wire.md: no %q ... %q block", begin, end)
	}
	var got []byte
	sc := bufio.NewScanner(bytes.NewReader(doc[i+len(begin) : j]))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || len(fields[0]) != 4 {
			continue // ``` fences, headings
		}
		off, err := strconv.ParseUint(fields[0], 16, 16)
		if err != nil {
			continue
		}
		if int(off) != len(got) {
			t.Fatalf("docs/wire.md: line %q: offset %#04x, want %#04x", sc.Text(), off, len(got))
		}
		for _, f := range fields[1:] {
			if len(f) != 2 {
				break
			}
			x, err := hex.DecodeString(f)
			if err != nil {
				break
			}
			got = append(got, x...)
		}
	}
	var want []byte
	want = append(want, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff) // dst: broadcast
	want = append(want, 0x02, 0x00, 0x00, 0x00, 0x00, 0x04) // src: E
	want = append(want, EtherType>>8, EtherType&0xff)
	want = append(want, docFrameBytes...)
	want = append(want, make([]byte, MinEthFrame-len(want))...)
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/wire.md hex dump:\n got %x\nwant %x", got, want)
	}
	var f Frame
	if err := f.UnmarshalBinary(got[EthHeaderLen:]); err != nil || !f.Equal(docFrame()) {
		t.Fatalf("docs/wire.md frame decodes to %s, %v", frameString(&f), err)
	}
}
