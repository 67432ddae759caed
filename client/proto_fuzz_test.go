package client

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"unicode/utf8"
)

// apiFrame encodes one frame with WriteFrame (the seeds are real
// encodings, not hand-made bytes).
func apiFrame(tb testing.TB, typ byte, parts ...[]byte) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := WriteFrame(&b, typ, parts...); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// apiSeed is one seed input of FuzzAPIFrame: its arguments.
type apiSeed struct {
	stream []byte
	typ    byte
	cut    uint16
}

// apiFrameSeeds are FuzzAPIFrame's seeds, which TestCDecoderReplay replays
// too (with the corpus in testdata/fuzz/FuzzAPIFrame) through the C
// client's decoder.
func apiFrameSeeds(tb testing.TB) []apiSeed {
	var seeds []apiSeed
	add := func(stream []byte, typ byte, cut uint16) { seeds = append(seeds, apiSeed{stream, typ, cut}) }
	pub := apiFrame(tb, TypePublish, U64(7), []byte("hello"))
	sub := apiFrame(tb, TypeSubscribe, U64(42))
	st := apiFrame(tb, TypeStatus)
	published := apiFrame(tb, TypePublished, U64(7), U64(1000), U16(3))
	msg := apiFrame(tb, TypeMessage, U64(1000), U16(3), []byte{2}, []byte("payload"))
	reply := apiFrame(tb, TypeStatusReply, []byte(`{"id":0,"agreed":12}`))
	errf := apiFrame(tb, TypeError, U64(7), U16(CodeQueueFull), []byte("queue full"))
	add(pub, byte(TypePublish), uint16(8))
	add(cat(pub, pub, st, sub), byte(TypeSubscribe), uint16(0))
	add(cat(published, msg, reply, errf), byte(TypeError), uint16(10))
	add(st, byte(TypeStatus), uint16(0))
	add([]byte{}, byte(0), uint16(0))
	add([]byte{0, 0, 0, 0, 1}, byte(0), uint16(0))                          // length 0
	add([]byte{0xff, 0xff, 0xff, 0xff, 1}, byte(1), uint16(1))              // length far above MaxFrame
	add(binary.BigEndian.AppendUint32(nil, MaxFrame+1), byte(0), uint16(0)) // one above the bound
	add(binary.BigEndian.AppendUint32(nil, MaxFrame), byte(0), uint16(0))   // at the bound, truncated
	add(pub[:len(pub)-1], byte(TypePublish), uint16(3))                     // truncated body
	add(pub[:3], byte(TypePublish), uint16(3))                              // truncated header
	// Batches: well-formed, then malformed.
	m := func(p string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...) }
	batch := apiFrame(tb, TypePublishBatch, U64(9), U16(3), m("one"), m(""), m("three"))
	add(cat(batch, pub, batch), byte(TypePublishBatch), uint16(5))
	add(apiFrame(tb, TypePublishBatch, U64(9), U16(0)), byte(TypePublishBatch), uint16(0))                   // count 0
	add(apiFrame(tb, TypePublishBatch, U64(9), U16(65535), m("a")), byte(TypePublishBatch), uint16(1))       // count above the body
	add(apiFrame(tb, TypePublishBatch, U64(9), U16(2), m("a"), m("b"), []byte{0}), byte(0), uint16(2))       // bytes after
	add(apiFrame(tb, TypePublishBatch, U64(9), U16(1), U32(1<<20), []byte("not 1 MiB")), byte(0), uint16(2)) // a message past the end
	add(apiFrame(tb, TypePublishBatch, U64(9), U16(1), U32(0xffffffff)), byte(0), uint16(2))                 // oversize length
	add(apiFrame(tb, TypePublishBatch, U64(9)), byte(0), uint16(2))                                          // no count
	okRes := cat(U16(0), U64(77), U16(4))
	errRes := cat(U16(CodeTooLarge), U16(9), []byte("too large"))
	add(apiFrame(tb, TypePublishedBatch, U64(9), U16(3), okRes, errRes, okRes), byte(TypePublishedBatch), uint16(7))
	add(apiFrame(tb, TypePublishedBatch, U64(9), U16(0)), byte(0), uint16(0))
	add(apiFrame(tb, TypePublishedBatch, U64(9), U16(40000), okRes), byte(0), uint16(0))
	add(apiFrame(tb, TypePublishedBatch, U64(9), U16(1), U16(CodeDropped), U16(500), []byte("cut")), byte(0), uint16(0))
	add(apiFrame(tb, TypePublishedBatch, U64(9), U16(1), U16(CodeDropped), U16(2), []byte{0xff, 0xfe}), byte(0), uint16(0)) // text not UTF-8
	long := bytes.Repeat([]byte("x"), MaxResultText+44)
	add(apiFrame(tb, TypePublishedBatch, U64(9), U16(2), U16(CodeDropped), U16(5), []byte("a\x00bcd"),
		U16(CodeTooLarge), U16(uint16(len(long))), long), byte(0), uint16(0)) // texts with a NUL, longer than MaxResultText
	// The other replies, then each one byte short, then an Error of code 0.
	add(cat(AppendHelloReply(nil), apiFrame(tb, TypeRosterQueued, U64(5)), apiFrame(tb, TypeKeyDone, U64(6)),
		apiFrame(tb, TypeLossAccepted, U64(7)), apiFrame(tb, TypeMessage, U64(1), U16(0), []byte{4}),
		apiFrame(tb, TypeError, U64(0), U16(CodeBadRequest), []byte("bad request")),
		apiFrame(tb, TypePublished, U64(7), U64(1000), U16(3), []byte("after"))), byte(TypeHelloReply), uint16(0))
	add(cat(apiFrame(tb, TypePublished, make([]byte, 17)), apiFrame(tb, TypeMessage, make([]byte, 10)),
		apiFrame(tb, TypeError, make([]byte, 9)), apiFrame(tb, TypeHelloReply, []byte{1}),
		apiFrame(tb, TypeRosterQueued, make([]byte, 7))), byte(TypeMessage), uint16(0))
	add(apiFrame(tb, TypeError, U64(7), U16(0), []byte("code 0")), byte(TypeError), uint16(0))
	return seeds
}

// FuzzAPIFrame: ReadFrame on a stream of arbitrary bytes never panics and
// agrees with a reference parse of the framing in docs/api.md: each frame
// it returns is exactly [length][type][body] of the input at the current
// offset, with 1 <= length <= MaxFrame (so a body never exceeds
// MaxFrame-1 bytes), and consumes exactly its bytes; a length out of range
// is ErrFrame, a stream that ends at a frame boundary is io.EOF, one that
// ends inside a frame is io.ErrUnexpectedEOF. Every frame read re-encodes
// byte for byte with WriteFrame (whatever the split of the body into
// parts), and WriteFrame(typ, body cut at cut) reads back as (typ, body).
//
// The batch frames' bodies are decoded too: ParsePublishBatch and
// ParsePublishedBatch agree with a reference parse of docs/api.md (a
// malformed body, count 0 or above what the body carries, a length past
// its end, bytes after the last message, is ErrFrame), never hold more
// entries than the body has room for (one per 4 bytes: a hostile count
// allocates nothing), and a well-formed body re-encodes byte for byte
// (WritePublishBatch, AppendPublishedBatch). The stream cut into
// 1 + cut%9 payloads round-trips through a PublishBatch frame.
func FuzzAPIFrame(f *testing.F) {
	for _, s := range apiFrameSeeds(f) {
		f.Add(s.stream, s.typ, s.cut)
	}
	f.Fuzz(func(t *testing.T, stream []byte, typ byte, cut uint16) {
		in := bytes.Clone(stream)
		br := bytes.NewReader(stream)
		r := bufio.NewReaderSize(br, 16) // small, so frames straddle refills
		var buf []byte
		off := 0
		for frames := 0; ; frames++ {
			gotTyp, body, b, err := ReadFrame(r, buf)
			buf = b
			consumed := len(stream) - br.Len() - r.Buffered()
			rest := stream[off:]
			if err != nil {
				switch {
				case len(rest) == 0:
					if err != io.EOF {
						t.Fatalf("frame %d: at the end of the stream: %v, want io.EOF", frames, err)
					}
				case len(rest) < 5:
					if err != io.ErrUnexpectedEOF {
						t.Fatalf("frame %d: %d header bytes: %v, want io.ErrUnexpectedEOF", frames, len(rest), err)
					}
				default:
					n := binary.BigEndian.Uint32(rest)
					if n < 1 || n > MaxFrame {
						if !errors.Is(err, ErrFrame) {
							t.Fatalf("frame %d: length %d: %v, want ErrFrame", frames, n, err)
						}
					} else if uint64(len(rest)-4) >= uint64(n) || err != io.ErrUnexpectedEOF {
						t.Fatalf("frame %d: length %d with %d bytes left: %v", frames, n, len(rest)-4, err)
					}
				}
				break
			}
			if len(rest) < 5 {
				t.Fatalf("frame %d: read a frame from %d bytes", frames, len(rest))
			}
			n := int(binary.BigEndian.Uint32(rest))
			if n < 1 || n > MaxFrame || len(body) != n-1 || len(body) > MaxFrame-1 {
				t.Fatalf("frame %d: length field %d, body of %d bytes (bound %d)", frames, n, len(body), MaxFrame-1)
			}
			if gotTyp != rest[4] || !bytes.Equal(body, rest[5:4+n]) {
				t.Fatalf("frame %d: got type %#x body %x, want %#x %x", frames, gotTyp, body, rest[4], rest[5:4+n])
			}
			if consumed != off+4+n {
				t.Fatalf("frame %d: consumed %d bytes, want %d", frames, consumed, off+4+n)
			}
			if cap(buf) < len(body) {
				t.Fatalf("frame %d: returned buffer of cap %d for a body of %d", frames, cap(buf), len(body))
			}
			// Re-encode, with the body in two parts.
			k := int(cut) % (len(body) + 1)
			var w bytes.Buffer
			if err := WriteFrame(&w, gotTyp, body[:k], body[k:]); err != nil {
				t.Fatalf("frame %d: re-encode: %v", frames, err)
			}
			if !bytes.Equal(w.Bytes(), rest[:4+n]) {
				t.Fatalf("frame %d: re-encoded %x, read %x", frames, w.Bytes(), rest[:4+n])
			}
			checkBatchBody(t, gotTyp, body, rest[:4+n])
			off += 4 + n
		}
		if !bytes.Equal(stream, in) {
			t.Fatal("ReadFrame modified its input")
		}

		// WriteFrame -> ReadFrame round trip of (typ, stream cut in two).
		k := int(cut) % (len(stream) + 1)
		var w bytes.Buffer
		if err := WriteFrame(&w, typ, stream[:k], nil, stream[k:]); err != nil {
			t.Fatalf("WriteFrame of %d bytes: %v", len(stream), err)
		}
		enc := w.Bytes()
		if len(enc) != 5+len(stream) || binary.BigEndian.Uint32(enc) != uint32(1+len(stream)) {
			t.Fatalf("WriteFrame: %d bytes, length field %d, body %d", len(enc), binary.BigEndian.Uint32(enc), len(stream))
		}
		r = bufio.NewReader(bytes.NewReader(enc))
		gotTyp, body, _, err := ReadFrame(r, make([]byte, 0, int(cut)%64))
		if err != nil || gotTyp != typ || !bytes.Equal(body, stream) {
			t.Fatalf("round trip: type %#x body %x err %v, want %#x %x", gotTyp, body, err, typ, stream)
		}
		if _, _, _, err := ReadFrame(r, nil); err != io.EOF {
			t.Fatalf("after the only frame: %v, want io.EOF", err)
		}

		// The stream as a batch of 1+cut%9 payloads.
		parts := 1 + int(cut)%9
		var payloads [][]byte
		for i := 0; i < parts; i++ {
			payloads = append(payloads, stream[i*len(stream)/parts:(i+1)*len(stream)/parts])
		}
		w.Reset()
		if err := WritePublishBatch(&w, uint64(cut), payloads); err != nil {
			t.Fatalf("WritePublishBatch of %d payloads: %v", parts, err)
		}
		if w.Len() != 4+PublishBatchLen(payloads) {
			t.Fatalf("batch frame of %d bytes, PublishBatchLen %d", w.Len(), PublishBatchLen(payloads))
		}
		gotTyp, body, _, err = ReadFrame(bufio.NewReader(&w), nil)
		if err != nil || gotTyp != TypePublishBatch {
			t.Fatalf("batch frame: type %#x, %v", gotTyp, err)
		}
		req, got, err := ParsePublishBatch(body)
		if err != nil || req != uint64(cut) || len(got) != parts {
			t.Fatalf("batch: req %d, %d payloads, %v; want %d, %d", req, len(got), err, cut, parts)
		}
		for i := range got {
			if !bytes.Equal(got[i], payloads[i]) {
				t.Fatalf("batch payload %d: %x, want %x", i, got[i], payloads[i])
			}
		}
	})
}

// U32 encodes v big-endian (tests).
func U32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// refParseBatch is the reference parse of a batch body (docs/api.md):
// [req u64][count u16], count >= 1, then count entries that exactly fill
// the body; entry cuts one entry off the front of b and reports how long
// it is, or false.
func refParseBatch(body []byte, entry func(b []byte) (int, bool)) (req uint64, entries [][]byte, ok bool) {
	if len(body) < 10 {
		return 0, nil, false
	}
	req, count := binary.BigEndian.Uint64(body), int(binary.BigEndian.Uint16(body[8:]))
	b := body[10:]
	for i := 0; i < count; i++ {
		n, ok := entry(b)
		if !ok {
			return req, nil, false
		}
		entries = append(entries, b[:n])
		b = b[n:]
	}
	return req, entries, count > 0 && len(b) == 0
}

func publishEntry(b []byte) (int, bool) {
	if len(b) < 4 || uint64(binary.BigEndian.Uint32(b)) > uint64(len(b)-4) {
		return 0, false
	}
	return 4 + int(binary.BigEndian.Uint32(b)), true
}

func resultEntry(b []byte) (int, bool) {
	switch {
	case len(b) < 2:
		return 0, false
	case b[0] == 0 && b[1] == 0:
		return 12, len(b) >= 12
	case len(b) < 4:
		return 0, false
	}
	n := 4 + int(binary.BigEndian.Uint16(b[2:]))
	return n, len(b) >= n
}

// checkBatchBody checks the batch decoders on one frame read (frame: its
// bytes, header included) against the reference parse.
func checkBatchBody(t *testing.T, typ byte, body, frame []byte) {
	t.Helper()
	switch typ {
	case TypePublishBatch:
		req, payloads, err := ParsePublishBatch(body)
		rreq, entries, ok := refParseBatch(body, publishEntry)
		if !ok {
			if !errors.Is(err, ErrFrame) || payloads != nil {
				t.Fatalf("malformed publish batch %x: %v, %d payloads; want ErrFrame", body, err, len(payloads))
			}
			return
		}
		if err != nil || req != rreq || len(payloads) != len(entries) {
			t.Fatalf("publish batch %x: req %d, %d payloads, %v; want %d, %d", body, req, len(payloads), err, rreq, len(entries))
		}
		if len(payloads) > (len(body)-10)/4 {
			t.Fatalf("publish batch of %d bytes: %d payloads", len(body), len(payloads))
		}
		for i, e := range entries {
			if !bytes.Equal(payloads[i], e[4:]) {
				t.Fatalf("publish batch: payload %d %x, want %x", i, payloads[i], e[4:])
			}
		}
		var w bytes.Buffer
		if err := WritePublishBatch(&w, req, payloads); err != nil || !bytes.Equal(w.Bytes(), frame) {
			t.Fatalf("publish batch re-encoded: %x (%v), read %x", w.Bytes(), err, frame)
		}
	case TypePublishedBatch:
		req, acks, err := ParsePublishedBatch(body)
		rreq, entries, ok := refParseBatch(body, resultEntry)
		if !ok {
			if !errors.Is(err, ErrFrame) || acks != nil {
				t.Fatalf("malformed published batch %x: %v, %d acks; want ErrFrame", body, err, len(acks))
			}
			return
		}
		if err != nil || req != rreq || len(acks) != len(entries) {
			t.Fatalf("published batch %x: req %d, %d acks, %v; want %d, %d", body, req, len(acks), err, rreq, len(entries))
		}
		if len(acks) > (len(body)-10)/4 {
			t.Fatalf("published batch of %d bytes: %d acks", len(body), len(acks))
		}
		exact := true
		for i, e := range entries {
			code := binary.BigEndian.Uint16(e)
			a := acks[i]
			if code == 0 {
				want := Position{Seq: binary.BigEndian.Uint64(e[2:]), Index: binary.BigEndian.Uint16(e[10:])}
				if a.Err != nil || a.Pos != want {
					t.Fatalf("published batch: result %d %+v, want agreed at %v", i, a, want)
				}
				continue
			}
			var ae *APIError
			if !errors.As(a.Err, &ae) || ae.Code != code || ae.Text != string(e[4:]) {
				t.Fatalf("published batch: result %d %v, want code %d %q", i, a.Err, code, e[4:])
			}
			exact = exact && len(e)-4 <= MaxResultText && utf8.Valid(e[4:])
		}
		if enc := AppendPublishedBatch(nil, req, acks); exact != bytes.Equal(enc, frame) {
			t.Fatalf("published batch re-encoded: %x, read %x (texts short and UTF-8: %v)", enc, frame, exact)
		}
	}
}

// TestWriteFrameBound: WriteFrame refuses a frame above MaxFrame (before
// writing anything) and accepts one at it; ReadFrame accepts the latter.
func TestWriteFrameBound(t *testing.T) {
	big := make([]byte, MaxFrame-1)
	var w bytes.Buffer
	if err := WriteFrame(&w, TypePublish, big, []byte{0}); !errors.Is(err, ErrTooLarge) || w.Len() != 0 {
		t.Fatalf("frame of MaxFrame+1: err %v, wrote %d bytes", err, w.Len())
	}
	if err := WriteFrame(&w, TypePublish, big); err != nil {
		t.Fatal(err)
	}
	typ, body, _, err := ReadFrame(bufio.NewReader(&w), nil)
	if err != nil || typ != TypePublish || len(body) != MaxFrame-1 {
		t.Fatalf("type %#x body %d err %v", typ, len(body), err)
	}
}

// TestReadFrameEOFAfterHeader: a stream that ends after a frame's header,
// before its body, is a truncated frame (io.ErrUnexpectedEOF), not the
// clean end of the stream (io.EOF) that a caller may take for an orderly
// close (client.Subscribe's callers: errors.Is(err, io.EOF)).
func TestReadFrameEOFAfterHeader(t *testing.T) {
	in := apiFrame(t, TypePublish, U64(7), []byte("hello"))[:5]
	if _, _, _, err := ReadFrame(bufio.NewReader(bytes.NewReader(in)), nil); err != io.ErrUnexpectedEOF {
		t.Fatalf("header of a 13-byte frame, then the end: %v, want io.ErrUnexpectedEOF", err)
	}
}
