package client

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
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

// FuzzAPIFrame: ReadFrame on a stream of arbitrary bytes never panics and
// agrees with a reference parse of the framing in docs/api.md: each frame
// it returns is exactly [length][type][body] of the input at the current
// offset, with 1 <= length <= MaxFrame (so a body never exceeds
// MaxFrame-1 bytes), and consumes exactly its bytes; a length out of range
// is ErrFrame, a stream that ends at a frame boundary is io.EOF, one that
// ends inside a frame is io.ErrUnexpectedEOF. Every frame read re-encodes
// byte for byte with WriteFrame (whatever the split of the body into
// parts), and WriteFrame(typ, body cut at cut) reads back as (typ, body).
func FuzzAPIFrame(f *testing.F) {
	pub := apiFrame(f, TypePublish, U64(7), []byte("hello"))
	sub := apiFrame(f, TypeSubscribe, U64(42))
	st := apiFrame(f, TypeStatus)
	published := apiFrame(f, TypePublished, U64(7), U64(1000), U16(3))
	msg := apiFrame(f, TypeMessage, U64(1000), U16(3), []byte{2}, []byte("payload"))
	reply := apiFrame(f, TypeStatusReply, []byte(`{"id":0,"agreed":12}`))
	errf := apiFrame(f, TypeError, U64(7), U16(CodeQueueFull), []byte("queue full"))
	f.Add(pub, byte(TypePublish), uint16(8))
	f.Add(cat(pub, pub, st, sub), byte(TypeSubscribe), uint16(0))
	f.Add(cat(published, msg, reply, errf), byte(TypeError), uint16(10))
	f.Add(st, byte(TypeStatus), uint16(0))
	f.Add([]byte{}, byte(0), uint16(0))
	f.Add([]byte{0, 0, 0, 0, 1}, byte(0), uint16(0))                          // length 0
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, byte(1), uint16(1))              // length far above MaxFrame
	f.Add(binary.BigEndian.AppendUint32(nil, MaxFrame+1), byte(0), uint16(0)) // one above the bound
	f.Add(binary.BigEndian.AppendUint32(nil, MaxFrame), byte(0), uint16(0))   // at the bound, truncated
	f.Add(pub[:len(pub)-1], byte(TypePublish), uint16(3))                     // truncated body
	f.Add(pub[:3], byte(TypePublish), uint16(3))                              // truncated header
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
	})
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
