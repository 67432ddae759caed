package exo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzFrameUnmarshal: UnmarshalBinary never panics; a frame it accepts
// re-encodes to exactly the bytes it read (the encoding is canonical:
// version, flags, hist_len and payload_len are implied) and decodes again
// to an equal frame; a frame it rejects has a non-ACCEPT reason, a
// *DecodeError with an offset inside the input, and leaves the frame as
// it was. Seeds: testdata/fuzz/FuzzFrameUnmarshal plus the f.Add below.
func FuzzFrameUnmarshal(f *testing.F) {
	f.Add(docFrameBytes)
	f.Add(append(append([]byte(nil), docFrameBytes...), 0, 0, 0, 0, 0))
	f.Add(docFrameBytes[:HeaderLen])
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		fr := Frame{Seq: 7, History: []uint8{9}} // must survive a failed decode
		err := fr.UnmarshalBinary(b)
		if !bytes.Equal(b, in) {
			t.Fatal("UnmarshalBinary modified its input")
		}
		if err != nil {
			if r := ReasonOf(err); r == ReasonAccept || r >= NumReasons {
				t.Fatalf("ReasonOf(%v) = %v", err, r)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > len(b) {
				t.Fatalf("error %#v: not a *DecodeError with an offset in [0, %d]", err, len(b))
			}
			if !fr.Equal(&Frame{Seq: 7, History: []uint8{9}}) {
				t.Fatalf("frame changed on error: %s", frameString(&fr))
			}
			return
		}
		enc, err := fr.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded frame does not encode: %v\n%s", err, frameString(&fr))
		}
		if len(enc) != fr.EncodedLen() || len(enc) > len(b) || !bytes.Equal(enc, b[:len(enc)]) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", enc, b[:min(len(b), len(enc))])
		}
		var again Frame
		if err := again.UnmarshalBinary(enc); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !again.Equal(&fr) {
			t.Fatalf("round trip:\n got %s\nwant %s", frameString(&again), frameString(&fr))
		}
		n := 0
		if err := ForEachRecord(fr.Payload, fr.Count, func([]byte) error { n++; return nil }); err != nil || n != int(fr.Count) {
			t.Fatalf("accepted frame: ForEachRecord n=%d err=%v", n, err)
		}
	})
}

// FuzzRecords: ForEachRecord never panics; a payload it accepts is
// exactly count records, and AppendRecord rebuilds it byte for byte; a
// payload it rejects is BAD_PAYLOAD and fn was not called.
func FuzzRecords(f *testing.F) {
	f.Add([]byte{0, 5, 'h', 'e', 'l', 'l', 'o'}, uint16(1))
	f.Add([]byte{}, uint16(0))
	f.Add([]byte{0, 0, 0, 1, 'x'}, uint16(2))
	f.Add([]byte{0, 6, 'h', 'e', 'l', 'l', 'o'}, uint16(1))
	f.Add([]byte{0}, uint16(1))
	f.Add([]byte{0, 0}, uint16(0xffff))
	f.Fuzz(func(t *testing.T, payload []byte, count uint16) {
		var rebuilt []byte
		n := 0
		err := ForEachRecord(payload, count, func(rec []byte) error {
			n++
			var err error
			rebuilt, err = AppendRecord(rebuilt, rec)
			return err
		})
		if err != nil {
			if !errors.Is(err, ErrPayload) || ReasonOf(err) != ReasonBadPayload {
				t.Fatalf("ForEachRecord: %v, want BAD_PAYLOAD", err)
			}
			if n != 0 && len(payload) <= MaxPayload {
				t.Fatalf("fn called %d times on a bad payload", n)
			}
			return
		}
		if n != int(count) || !bytes.Equal(rebuilt, payload) {
			t.Fatalf("n=%d count=%d rebuilt %x, payload %x", n, count, rebuilt, payload)
		}
		if len(payload) > MaxPayload {
			return // framed, but too long for one frame
		}
		fr := Frame{Type: FrameData, Count: count, Payload: payload}
		b, err := fr.MarshalBinary()
		if err != nil {
			t.Fatalf("framed payload does not encode: %v", err)
		}
		var g Frame
		if err := g.UnmarshalBinary(b); err != nil || !g.Equal(&fr) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestFrameSeedCorpus pins the verdict of each named seed in
// testdata/fuzz/FuzzFrameUnmarshal (files found by the fuzzer, named by
// hash, are regression inputs of FuzzFrameUnmarshal itself).
func TestFrameSeedCorpus(t *testing.T) {
	want := map[string]Reason{
		"valid_doc_frame":     ReasonAccept,
		"valid_padded_to_60":  ReasonAccept,
		"valid_token_pass":    ReasonAccept,
		"empty":               ReasonMalformed,
		"truncated_header":    ReasonMalformed,
		"truncated_history":   ReasonMalformed,
		"bad_version":         ReasonBadVersion,
		"bad_type":            ReasonBadType,
		"bad_flags":           ReasonBadFlags,
		"bad_histlen":         ReasonBadHistlen,
		"bad_payload_len":     ReasonBadPayload,
		"bad_record_framing":  ReasonBadPayload,
		"repeated_history_id": ReasonBadHistoryID,
	}
	for name, reason := range want {
		data, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzFrameUnmarshal", name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
			!strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
			t.Fatalf("%s: not a one-[]byte fuzz corpus file", name)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var f Frame
		if got := ReasonOf(f.UnmarshalBinary([]byte(s))); got != reason {
			t.Errorf("%s: %v, want %v", name, got, reason)
		}
	}
}
