package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// batchDaemon is a fake daemon for SendLines and Send: it agrees every
// message (one entry per request) except "big" (too large) and refuses a
// batch whole: the first two times one starting with "full" comes (queue
// full), and any starting with "refuse" (a bad request, as a daemon
// without batches answers).
func batchDaemon(t *testing.T) (sock string, refused *atomic.Int32) {
	refused = new(atomic.Int32)
	sock = fakeDaemon(t, func(c net.Conn, r *bufio.Reader) {
		seq := uint64(100)
		for {
			typ, body, _, err := ReadFrame(r, nil)
			if err != nil {
				return
			}
			seq++
			switch typ {
			case TypePublish:
				req := U64(binary.BigEndian.Uint64(body))
				if string(body[8:]) == "big" {
					c.Write(frameBytes(TypeError, req, U16(CodeTooLarge), []byte("too large")))
					continue
				}
				c.Write(frameBytes(TypePublished, req, U64(seq), U16(0)))
			case TypePublishBatch:
				req, payloads, err := ParsePublishBatch(body)
				if err != nil {
					return
				}
				switch first := string(payloads[0]); {
				case strings.HasPrefix(first, "full") && refused.Load() < 2:
					refused.Add(1)
					c.Write(frameBytes(TypeError, U64(req), U16(CodeQueueFull), []byte("queue full")))
					continue
				case strings.HasPrefix(first, "refuse"):
					c.Write(frameBytes(TypeError, U64(req), U16(CodeBadRequest), []byte("bad request")))
					continue
				}
				acks := make([]Ack, len(payloads))
				for i, p := range payloads {
					if string(p) == "big" {
						acks[i].Err = &APIError{Code: CodeTooLarge, Text: "too large"}
					} else {
						acks[i].Pos = Position{Seq: seq, Index: uint16(i)}
					}
				}
				c.Write(AppendPublishedBatch(nil, req, acks))
			}
		}
	})
	return sock, refused
}

// TestSendLines: every line is reported once, in input order, by its line
// number: agreed at increasing positions, or with its own error; a batch
// refused by a full queue goes again; a batch refused whole is a
// *LinesError naming its lines.
func TestSendLines(t *testing.T) {
	sock, refused := batchDaemon(t)
	ctx := context.Background()
	var in strings.Builder
	for i := 1; i <= 100; i++ {
		switch i {
		case 31:
			in.WriteString("full\n") // the first line of the fourth batch of 10
		case 55:
			in.WriteString("big\n")
		default:
			fmt.Fprintf(&in, "line %d\n", i)
		}
	}
	var got []Sent
	err := SendLines(ctx, sock, strings.NewReader(in.String()), LinesOptions{Batch: 10, Timeout: 10 * time.Second, Source: "the test"}, func(s Sent) { got = append(got, s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 || refused.Load() != 2 {
		t.Fatalf("%d outcomes, %d refusals", len(got), refused.Load())
	}
	for i, s := range got {
		switch line := i + 1; {
		case s.N != line:
			t.Fatalf("outcome %d is of line %d", i, s.N)
		case line == 55:
			if !errors.Is(s.Err, ErrTooLarge) {
				t.Errorf("line 55: %v, want ErrTooLarge", s.Err)
			}
		case s.Err != nil || s.Bytes != len(fmt.Sprintf("line %d", line)) && line != 31 || s.Pos.Index != uint16(i%10):
			t.Errorf("line %d: %+v", line, s)
		}
	}

	got = nil
	err = SendLines(ctx, sock, strings.NewReader("a\nb\nc\nrefuse\ne\n"), LinesOptions{Batch: 3, Timeout: 10 * time.Second}, func(s Sent) { got = append(got, s) })
	var le *LinesError
	if !errors.As(err, &le) || le.First != 4 || le.Last != 5 || err.Error() != "lines 4-5: exo daemon: bad request (code 5)" {
		t.Fatalf("refused batch: %v", err)
	}
	if len(got) != 3 {
		t.Errorf("%d lines reported before the refused batch, want 3", len(got))
	}

	long := strings.Repeat("x", 64<<20+1)
	err = SendLines(ctx, sock, strings.NewReader("a\n"+long), LinesOptions{Batch: 3, Timeout: 10 * time.Second, Source: "the test"}, func(Sent) {})
	if err == nil || !strings.HasPrefix(err.Error(), "reading the test (line 2): ") {
		t.Errorf("a line too long: %v", err)
	}
}

// TestSend: single publishes, every one in flight, reported in order from
// index 0; the input is read once connected.
func TestSend(t *testing.T) {
	sock, _ := batchDaemon(t)
	var got []Sent
	read := func() ([][]byte, error) { return ReadLines(strings.NewReader("a\nbig\nccc\n")) }
	if err := Send(context.Background(), sock, read, 10*time.Second, func(s Sent) { got = append(got, s) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].N != 0 || got[0].Err != nil || !errors.Is(got[1].Err, ErrTooLarge) || got[2].N != 2 || got[2].Bytes != 3 || got[2].Pos.Seq <= got[0].Pos.Seq {
		t.Fatalf("outcomes %+v", got)
	}
	called := false
	err := Send(context.Background(), shortSock(t), func() ([][]byte, error) { called = true; return nil, nil }, time.Second, func(Sent) {})
	if err == nil || called {
		t.Fatalf("no daemon: %v, input read %v", err, called)
	}
}

// TestTail: Tail stops after its count with no error, and the text and
// JSON forms of messages.
func TestTail(t *testing.T) {
	sock := fakeDaemon(t, func(c net.Conn, r *bufio.Reader) {
		if typ, _, _, err := ReadFrame(r, nil); err != nil || typ != TypeSubscribe {
			return
		}
		for k := range 10 {
			c.Write(frameBytes(TypeMessage, U64(7), U16(uint16(k)), []byte{3}, fmt.Appendf(nil, "m%d", k)))
		}
		time.Sleep(time.Second) // the stream stays open
	})
	var lines []string
	err := Tail(context.Background(), sock, 0, 4, func(m Message) error { lines = append(lines, m.Line()); return nil })
	if err != nil || strings.Join(lines, "|") != "7.0 from 3: m0|7.1 from 3: m1|7.2 from 3: m2|7.3 from 3: m3" {
		t.Fatalf("Tail: %v %q", err, lines)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = Tail(ctx, sock, 0, 0, func(m Message) error {
		if m.Index == 1 {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("cancelled: %v", err)
	}

	var b bytes.Buffer
	for _, p := range [][]byte{[]byte("hello"), {0, 1, 2}, bytes.Repeat([]byte("y"), 300), []byte("tab\tnl\n"), []byte("caf\xc3\xa9"), []byte("\xff")} {
		m := Message{Position: Position{Seq: 7, Index: 2}, Sender: 3, Payload: p}
		fmt.Fprintln(&b, m.Line())
		json.NewEncoder(&b).Encode(m.Record())
	}
	want := "7.2 from 3: hello\n" + `{"index":2,"payload":"hello","sender":3,"seq":7}` + "\n" +
		"7.2 from 3: <3 bytes of binary>\n" + `{"index":2,"payload_b64":"AAEC","sender":3,"seq":7}` + "\n" +
		"7.2 from 3: " + strings.Repeat("y", 200) + "... (300 bytes)\n" + `{"index":2,"payload":"` + strings.Repeat("y", 300) + `","sender":3,"seq":7}` + "\n" +
		"7.2 from 3: tab\tnl\n\n" + `{"index":2,"payload":"tab\tnl\n","sender":3,"seq":7}` + "\n" +
		"7.2 from 3: café\n" + `{"index":2,"payload":"café","sender":3,"seq":7}` + "\n" +
		"7.2 from 3: <1 bytes of binary>\n" + `{"index":2,"payload_b64":"/w==","sender":3,"seq":7}` + "\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
