package frames

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/exo-rack/exo/exo"
)

// FuzzDecodeLenient: the lenient decoder never panics, its verdict is
// the strict one, and every field it gives is the bytes'.
func FuzzDecodeLenient(f *testing.F) {
	for _, m := range malformedFrames(f) {
		f.Add(m.bytes)
	}
	f.Add(mustMarshal(f, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 4, Epoch: 1, Seq: 3, Count: 1, History: []uint8{3, 2}, Payload: []byte{0, 1, 'x'}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := DecodeLenient(b)
		fr, err := Decode(b)
		if d.Valid != (err == nil) {
			t.Fatalf("% x: valid %v, Decode: %v", b, d.Valid, err)
		}
		if err != nil && d.Reason != exo.ReasonOf(err).String() {
			t.Fatalf("% x: reason %s, Decode %s", b, d.Reason, exo.ReasonOf(err))
		}
		if err == nil && (*d.Seq != fr.Seq || int(*d.HistLen) != len(fr.History) || len(d.Records) != int(fr.Count)) {
			t.Fatalf("% x: %+v, Decode %+v", b, d, fr)
		}
		if (d.Seq != nil) != (len(b) >= exo.OffSeq+exo.SizeSeq) || d.Seq != nil && *d.Seq != binary.BigEndian.Uint64(b[exo.OffSeq:]) {
			t.Fatalf("% x: seq %v", b, d.Seq)
		}
		if d.Length != len(b) || d.Padding < 0 || d.Padding > len(b) {
			t.Fatalf("% x: length %d padding %d", b, d.Length, d.Padding)
		}
		_ = d.Line()
	})
}

// TestDecodeLine: the human line of a valid and of a malformed frame.
func TestDecodeLine(t *testing.T) {
	b := mustMarshal(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 4, Epoch: 1, Seq: 3, Count: 1, Tag: 0x0123456789abcdef,
		History: []uint8{3, 2}, Payload: []byte{0, 5, 'h', 'e', 'l', 'l', 'o'}})
	d := DecodeLenient(append(b, 0, 0, 0, 0, 0))
	d.Index = 1
	if got, want := d.Line(), `#1 seq 3 sender E(4) epoch 1 group 1 history [D C] records 1 ["hello"] tag 0x0123456789abcdef len 41 (+5 padding)`; got != want {
		t.Errorf("line\n%s\nwant\n%s", got, want)
	}
	bad := bytes.Clone(b)
	bad[exo.OffVersion] = 9
	d = DecodeLenient(bad)
	d.Index = 9
	if got, want := d.Line(), `#9 BAD_VERSION (exo: unsupported frame version at offset 0): seq 3 sender E(4) epoch 1 group 1 history [D C] version 9 payload_len 7 records 1 ["hello"] tag 0x0123456789abcdef len 41`; got != want {
		t.Errorf("line\n%s\nwant\n%s", got, want)
	}
}
