package oob

import (
	"bytes"
	"encoding/gob"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/yield"
)

// batch is a fetch response as a catch-up moves them: n entries of 11
// 64-byte records each (the load of the lab's chaos runs).
func batch(n int) exo.Message {
	m := exo.Message{Type: exo.MsgFetchResp, From: 1, To: 2, LogEpoch: 9, Start: 100, Agreed: 90, Hi: 100 + uint64(n),
		Skipped: []uint8{3}, Roster: []uint8{0, 1, 2, 3, 4}}
	for i := 0; i < n; i++ {
		m.Entries = append(m.Entries, exo.Entry{Seq: uint64(100 + i), Epoch: 9, Sender: uint8(i % 5), History: []uint8{byte(i+3) % 5, byte(i+4) % 5},
			Count: 11, Flags: uint16(i % 3), Payload: bytes.Repeat([]byte{byte(i)}, 11*68)})
	}
	m.Entries = append(m.Entries, exo.Entry{Seq: 100 + uint64(n), Epoch: 9}) // a pass: no history, no payload
	return m
}

func TestMessageCodec(t *testing.T) {
	for _, m := range []exo.Message{
		batch(7),
		{Type: exo.MsgFetch, From: 3, To: 1, Epoch: 4, Lo: 10, Hi: 20},
		{Type: exo.MsgPrepare, From: 3, To: 1, Epoch: 4, Amnesiac: true},
	} {
		b, err := encodeFrame(&m)
		if err != nil {
			t.Fatal(err)
		}
		var got exo.Message
		if err := decodeBody(b[4:], &got); err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
		// Every cut of the body fails to decode (none is read as a shorter
		// message).
		for k := 0; k < len(b)-4; k++ {
			var cut exo.Message
			if decodeBody(b[4:4+k], &cut) == nil {
				t.Fatalf("%v: a body cut to %d of %d bytes decoded", m.Type, k, len(b)-4)
			}
		}
	}
}

// TestEncodeMessageFrameReuse: a sender's pooled buffer, reused from a
// large message to a small one and back, makes the same frames as a new
// buffer each time; a large message's buffer is grown once, to its size
// (give or take the allocator's rounding).
func TestEncodeMessageFrameReuse(t *testing.T) {
	var buf []byte
	s := &yield.Slicer{Every: time.Nanosecond}
	for _, m := range []exo.Message{batch(4096), {Type: exo.MsgFetch, From: 3, To: 1, Epoch: 4, Lo: 10, Hi: 20}, batch(7), batch(2000)} {
		want, err := encodeFrame(&m)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := encodeMessageFrame(&buf, &m, s)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v with %d entries: the pooled frame differs from a new one (%d and %d bytes)", m.Type, len(m.Entries), len(got), len(want))
		}
		// Grown once to the frame's size (and a few KiB of the header's
		// encoding), or not at all: never grown as it filled.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(want))+64<<10 {
			t.Errorf("%v with %d entries: %d bytes allocated for a %d-byte frame", m.Type, len(m.Entries), alloc, len(want))
		}
	}
}

// BenchmarkAnswerEncode encodes a 4 MiB fetch answer (fetch_bytes'
// default) as a sender does: into a new buffer each time (encodeFrame),
// or into its pooled one, yielding every millisecond.
func BenchmarkAnswerEncode(b *testing.B) {
	m := batch(5500)
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			raw, err := encodeFrame(&m)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(raw)))
		}
	})
	b.Run("pooled", func(b *testing.B) {
		var buf []byte
		s := &yield.Slicer{Every: sliceEvery}
		for b.Loop() {
			raw, err := encodeMessageFrame(&buf, &m, s)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(raw)))
		}
	})
}

// BenchmarkMessageCodec compares the message encoding (gob fields, binary
// entries) with gob for the whole message, on a 1,024-entry batch.
func BenchmarkMessageCodec(b *testing.B) {
	m := batch(1024)
	b.Run("encode", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := encodeFrame(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		raw, _ := encodeFrame(&m)
		b.SetBytes(int64(len(raw)))
		for i := 0; i < b.N; i++ {
			var out exo.Message
			if err := decodeBody(raw[4:], &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode-gob", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var buf bytes.Buffer
			if err := gob.NewEncoder(&buf).Encode(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-gob", func(b *testing.B) {
		var buf bytes.Buffer
		gob.NewEncoder(&buf).Encode(&m)
		raw := buf.Bytes()
		b.SetBytes(int64(len(raw)))
		for i := 0; i < b.N; i++ {
			var out exo.Message
			if err := gob.NewDecoder(bytes.NewReader(raw)).Decode(&out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFetchAnswersOnTheirOwnLane: fetch answers (megabytes) queue on the
// peer's bulk lane, everything else on its control lane, so that a view
// change's messages never wait behind a catch-up's.
func TestFetchAnswersOnTheirOwnLane(t *testing.T) {
	tr, err := New(Config{ID: 0, Listen: "127.0.0.1:0", Peers: map[uint8]string{1: "127.0.0.1:9"}, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.ln.Close()
	resp := batch(3)
	resp.To = 1
	for _, m := range []exo.Message{resp, {Type: exo.MsgPrepare, To: 1, Epoch: 7}, {Type: exo.MsgInstall, To: 1, Epoch: 7}, {Type: exo.MsgFetch, To: 1}} {
		tr.Send(m)
	}
	p := tr.peers[1]
	if len(p.bulk.q) != 1 || len(p.q) != 3 {
		t.Fatalf("bulk lane %d messages (want the fetch answer), control lane %d (want 3)", len(p.bulk.q), len(p.q))
	}
	if m := <-p.bulk.q; m.Type != exo.MsgFetchResp {
		t.Fatalf("bulk lane holds a %v", m.Type)
	}
}
