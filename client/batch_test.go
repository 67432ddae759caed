package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestPublishBatchEncoding: WritePublishBatch's frame is the documented
// layout, and ParsePublishBatch gives back the payloads (capped: an append
// to one does not run into the next).
func TestPublishBatchEncoding(t *testing.T) {
	payloads := [][]byte{[]byte("one"), {}, bytes.Repeat([]byte{7}, 300)}
	var b bytes.Buffer
	if err := WritePublishBatch(&b, 42, payloads); err != nil {
		t.Fatal(err)
	}
	want := cat(binary.BigEndian.AppendUint32(nil, uint32(1+8+2+4+3+4+4+300)), []byte{TypePublishBatch}, U64(42), U16(3),
		binary.BigEndian.AppendUint32(nil, 3), []byte("one"), binary.BigEndian.AppendUint32(nil, 0),
		binary.BigEndian.AppendUint32(nil, 300), payloads[2])
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("frame %x\nwant  %x", b.Bytes(), want)
	}
	if PublishBatchLen(payloads) != len(want)-4 {
		t.Fatalf("PublishBatchLen %d, frame length %d", PublishBatchLen(payloads), len(want)-4)
	}
	typ, body, _, err := ReadFrame(bufio.NewReader(&b), nil)
	if err != nil || typ != TypePublishBatch {
		t.Fatal(typ, err)
	}
	req, got, err := ParsePublishBatch(body)
	if err != nil || req != 42 || len(got) != 3 {
		t.Fatalf("parse: req %d, %d payloads, %v", req, len(got), err)
	}
	for i := range got {
		if !bytes.Equal(got[i], payloads[i]) || cap(got[i]) != len(got[i]) {
			t.Fatalf("payload %d: %q (cap %d), want %q", i, got[i], cap(got[i]), payloads[i])
		}
	}
	for _, bad := range [][][]byte{nil, make([][]byte, MaxBatch+1)} {
		b.Reset()
		if err := WritePublishBatch(&b, 1, bad); !errors.Is(err, ErrTooLarge) || b.Len() != 0 {
			t.Fatalf("batch of %d: %v, wrote %d bytes", len(bad), err, b.Len())
		}
	}
	if err := WritePublishBatch(&b, 1, [][]byte{make([]byte, MaxFrame/2), make([]byte, MaxFrame/2)}); !errors.Is(err, ErrTooLarge) || b.Len() != 0 {
		t.Fatalf("batch above a frame: %v, wrote %d bytes", err, b.Len())
	}
}

// TestParsePublishBatchMalformed: every malformed body is ErrFrame.
func TestParsePublishBatchMalformed(t *testing.T) {
	msg := func(p string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...) }
	for name, body := range map[string][]byte{
		"empty":                {},
		"short header":         cat(U64(1), []byte{0}),
		"count 0":              cat(U64(1), U16(0)),
		"count 0 with data":    cat(U64(1), U16(0), msg("x")),
		"count above the body": cat(U64(1), U16(3), msg("a"), msg("b")),
		"hostile count":        cat(U64(1), U16(65535), msg("a")),
		"length past the end":  cat(U64(1), U16(1), binary.BigEndian.AppendUint32(nil, 10), []byte("short")),
		"huge length":          cat(U64(1), U16(1), binary.BigEndian.AppendUint32(nil, 0xffffffff), []byte("x")),
		"cut length":           cat(U64(1), U16(2), msg("a"), []byte{0, 0}),
		"bytes after":          cat(U64(1), U16(1), msg("a"), []byte{0}),
	} {
		if _, p, err := ParsePublishBatch(body); !errors.Is(err, ErrFrame) || p != nil {
			t.Errorf("%s: %v (%d payloads), want ErrFrame", name, err, len(p))
		}
	}
}

// TestParseBatchAllocation: a hostile count costs nothing: the parse of a
// body claiming 65,535 messages but carrying one allocates no slice for
// them (an error's few bytes only), and a valid batch allocates one slice
// of its messages.
func TestParseBatchAllocation(t *testing.T) {
	hostile := cat(U64(1), U16(65535), binary.BigEndian.AppendUint32(nil, 1), []byte("a"))
	hostileReply := cat(U64(1), U16(65535), U16(0), U64(5), U16(1))
	perRun := func(f func()) uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		for range 100 {
			f()
		}
		runtime.ReadMemStats(&b)
		return (b.TotalAlloc - a.TotalAlloc) / 100
	}
	if n := perRun(func() { ParsePublishBatch(hostile) }); n > 512 {
		t.Fatalf("a publish batch claiming 65,535 messages in %d bytes: %d bytes allocated per parse", len(hostile), n)
	}
	if n := perRun(func() { ParsePublishedBatch(hostileReply) }); n > 512 {
		t.Fatalf("a published batch claiming 65,535 results in %d bytes: %d bytes allocated per parse", len(hostileReply), n)
	}
	var b bytes.Buffer
	WritePublishBatch(&b, 1, [][]byte{[]byte("a"), []byte("b")})
	body := b.Bytes()[5:]
	if n := testing.AllocsPerRun(100, func() { ParsePublishBatch(body) }); n != 1 {
		t.Fatalf("a valid batch's parse: %v allocations, want 1", n)
	}
}

// TestPublishedBatchEncoding: results round-trip; an error that is no
// APIError goes as shutting down; texts are cut to MaxResultText and kept
// valid UTF-8.
func TestPublishedBatchEncoding(t *testing.T) {
	long := strings.Repeat("é", MaxResultText) // 2 bytes each: cut inside a rune
	acks := []Ack{
		{Pos: Position{Seq: 10, Index: 2}},
		{Err: &APIError{Code: CodeTooLarge, Text: "message of 5 bytes"}},
		{Err: errors.New("gone")},
		{Err: &APIError{Code: CodeDropped, Text: long}},
		{Pos: Position{Seq: 1 << 40, Index: 65535}},
	}
	frame := AppendPublishedBatch([]byte("prefix"), 99, acks)
	if !bytes.HasPrefix(frame, []byte("prefix")) {
		t.Fatal("the prefix is gone")
	}
	typ, body, _, err := ReadFrame(bufio.NewReader(bytes.NewReader(frame[6:])), nil)
	if err != nil || typ != TypePublishedBatch {
		t.Fatal(typ, err)
	}
	req, got, err := ParsePublishedBatch(body)
	if err != nil || req != 99 || len(got) != len(acks) {
		t.Fatalf("req %d, %d results, %v", req, len(got), err)
	}
	if got[0].Err != nil || got[0].Pos != acks[0].Pos || got[4].Err != nil || got[4].Pos != acks[4].Pos {
		t.Fatalf("positions: %+v %+v", got[0], got[4])
	}
	if !errors.Is(got[1].Err, ErrTooLarge) || got[1].Err.(*APIError).Text != "message of 5 bytes" {
		t.Fatalf("result 1: %v", got[1].Err)
	}
	if !errors.Is(got[2].Err, ErrShuttingDown) || got[2].Err.(*APIError).Text != "gone" {
		t.Fatalf("result 2: %v", got[2].Err)
	}
	if txt := got[3].Err.(*APIError).Text; !errors.Is(got[3].Err, ErrDropped) || len(txt) != MaxResultText || !strings.HasPrefix(long, txt) {
		t.Fatalf("result 3: %d bytes of text", len(txt))
	}
	for name, body := range map[string][]byte{
		"count 0":      cat(U64(1), U16(0)),
		"cut position": cat(U64(1), U16(1), U16(0), U64(5)),
		"cut text":     cat(U64(1), U16(1), U16(CodeDropped), U16(10), []byte("short")),
		"bytes after":  cat(U64(1), U16(1), U16(0), U64(5), U16(1), []byte{0}),
		"count above":  cat(U64(1), U16(2), U16(0), U64(5), U16(1)),
	} {
		if _, a, err := ParsePublishedBatch(body); !errors.Is(err, ErrFrame) || a != nil {
			t.Errorf("%s: %v, want ErrFrame", name, err)
		}
	}
}

// fakeDaemon serves the API on a Unix socket with handle (one goroutine per
// connection), after answering the connection's Hello as a daemon of this
// version; it returns the socket's path.
func fakeDaemon(t *testing.T, handle func(c net.Conn, r *bufio.Reader)) string {
	return rawDaemon(t, func(c net.Conn, r *bufio.Reader) {
		if AnswerHello(r, c) == nil {
			handle(c, r)
		}
	})
}

// rawDaemon serves the API on a Unix socket with handle, from the
// connection's first byte.
func rawDaemon(t *testing.T, handle func(c net.Conn, r *bufio.Reader)) string {
	sock := shortSock(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c, bufio.NewReader(c))
			}()
		}
	}()
	return sock
}

// TestClientPublishBatch: against a fake daemon that answers batches out of
// order and after a single publish, PublishBatch matches every answer to
// its batch: all agreed (nil error), a message failed alone (BatchError
// naming it, every Ack there), the batch refused whole (the Error, no
// Acks); a malformed reply fails the connection.
func TestClientPublishBatch(t *testing.T) {
	sock := fakeDaemon(t, func(c net.Conn, r *bufio.Reader) {
		w := bufio.NewWriter(c)
		var held []byte // the first batch's answer, sent after the next request's
		seq := uint64(100)
		for {
			typ, body, _, err := ReadFrame(r, nil)
			if err != nil {
				return
			}
			var out []byte
			switch typ {
			case TypePublish:
				seq++
				out = frameBytes(TypePublished, U64(binary.BigEndian.Uint64(body)), U64(seq), U16(0))
			case TypePublishBatch:
				req, payloads, err := ParsePublishBatch(body)
				if err != nil {
					return
				}
				if string(payloads[0]) == "full" {
					out = frameBytes(TypeError, U64(req), U16(CodeQueueFull), []byte("queue full"))
					break
				}
				if string(payloads[0]) == "garbage" {
					out = frameBytes(TypePublishedBatch, U64(req), U16(3))
					break
				}
				acks := make([]Ack, len(payloads))
				seq++
				for i, p := range payloads {
					if string(p) == "big" {
						acks[i].Err = &APIError{Code: CodeTooLarge, Text: "too large"}
					} else {
						acks[i].Pos = Position{Seq: seq, Index: uint16(i)}
					}
				}
				out = AppendPublishedBatch(nil, req, acks)
			}
			if held == nil && typ == TypePublishBatch {
				held = out
				continue
			}
			w.Write(out)
			if held != nil {
				w.Write(held)
				held = []byte{}
			}
			w.Flush()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := c.PublishBatchAsync([][]byte{[]byte("a"), []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := c.Publish(ctx, []byte("single")); err != nil || p.Seq != 102 {
		t.Fatalf("single publish between batches: %v %v", p, err)
	}
	if r := <-first; r.Err != nil || len(r.Acks) != 2 || r.Acks[1].Pos != (Position{Seq: 101, Index: 1}) {
		t.Fatalf("first batch, answered after the single: %+v", r)
	}
	acks, err := c.PublishBatch(ctx, [][]byte{[]byte("x"), []byte("big"), []byte("y"), []byte("big")})
	var be *BatchError
	if !errors.As(err, &be) || be.Failed != 2 || be.Index != 1 || be.Of != 4 || !errors.Is(err, ErrTooLarge) || len(acks) != 4 {
		t.Fatalf("batch with two too large: %v (%d acks)", err, len(acks))
	}
	if acks[0].Err != nil || acks[2].Err != nil || acks[2].Pos.Index != 2 || !errors.Is(acks[3].Err, ErrTooLarge) {
		t.Fatalf("acks %+v", acks)
	}
	if acks, err := c.PublishBatch(ctx, [][]byte{[]byte("full"), []byte("z")}); !errors.Is(err, ErrQueueFull) || acks != nil {
		t.Fatalf("batch refused whole: %v, %d acks", err, len(acks))
	}
	if _, err := c.PublishBatch(ctx, [][]byte{[]byte("garbage")}); !errors.Is(err, ErrFrame) {
		t.Fatalf("malformed reply: %v, want ErrFrame", err)
	}
	if _, err := c.Publish(ctx, []byte("after")); err == nil {
		t.Fatal("the connection still works after a malformed reply")
	}
}

// TestSubscribeCoalesced: a subscriber reads every Message frame of one
// write of many, in order (the daemon's writer coalesces them), and frames
// cut across writes.
func TestSubscribeCoalesced(t *testing.T) {
	const n = 3000
	sock := fakeDaemon(t, func(c net.Conn, r *bufio.Reader) {
		if typ, _, _, err := ReadFrame(r, nil); err != nil || typ != TypeSubscribe {
			return
		}
		var all []byte
		for k := 0; k < n; k++ {
			all = append(all, frameBytes(TypeMessage, U64(uint64(k/10)), U16(uint16(k%10)), []byte{1}, fmt.Appendf(nil, "m%d", k))...)
		}
		c.Write(all[:len(all)/2]) // cuts a frame
		time.Sleep(10 * time.Millisecond)
		c.Write(all[len(all)/2:])
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := 0
	err := Subscribe(ctx, sock, 0, func(m Message) error {
		if m.Seq != uint64(k/10) || m.Index != uint16(k%10) || string(m.Payload) != fmt.Sprintf("m%d", k) {
			return fmt.Errorf("message %d: %v %q", k, m.Position, m.Payload)
		}
		if k++; k == n {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("after %d messages: %v", k, err)
	}
}

var errStop = errors.New("stop")

// frameBytes is WriteFrame into a byte slice (tests).
func frameBytes(typ byte, parts ...[]byte) []byte {
	var b bytes.Buffer
	WriteFrame(&b, typ, parts...)
	return b.Bytes()
}

// TestClientOldDaemon: a daemon that does not know batches answers one
// with a bad request (request id 0) and closes; PublishBatch's error says
// what the daemon said.
func TestClientOldDaemon(t *testing.T) {
	sock := fakeDaemon(t, func(c net.Conn, r *bufio.Reader) {
		typ, _, _, err := ReadFrame(r, nil)
		if err != nil {
			return
		}
		WriteFrame(c, TypeError, U64(0), U16(CodeBadRequest), fmt.Appendf(nil, "unknown request type %#x", typ))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.PublishBatch(ctx, [][]byte{[]byte("a")})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != CodeBadRequest || !strings.Contains(err.Error(), "the daemon said") || !strings.Contains(err.Error(), "0x6") {
		t.Fatalf("batch to a daemon without batches: %v", err)
	}
}
