package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/exo"
)

// Limits of the daemon under fuzzing: small, so that "too large" and
// fragmentation are within a fuzzer's reach.
const (
	fuzzMaxMessage = 3000
	fuzzQueueLen   = 16
)

// startOne runs a one-host rack (a daemon on the in-memory segment) with
// its API socket in a temporary directory; edit may change the config.
func startOne(tb testing.TB, edit func(*Config)) (*Daemon, string) {
	tb.Helper()
	// A short path: Unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "exofz")
	if err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	keyFile := filepath.Join(dir, "group.key")
	if err := os.WriteFile(keyFile, []byte("fuzz group key, 32 bytes long..."), 0o600); err != nil {
		tb.Fatal(err)
	}
	cfg := &Config{Group: 7, ID: 0, Interface: "mem0", APISocket: sock, KeyFile: keyFile,
		Roster: []Member{{ID: 0, MAC: "02:e0:00:00:00:01", OOB: "127.0.0.1:17700"}}}
	if edit != nil {
		edit(cfg)
	}
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	mac, _ := net.ParseMAC(cfg.Roster[0].MAC)
	oobs := []*memOOB{{id: 0, in: make(chan exo.Message, 16)}}
	oobs[0].all = oobs
	d, err := New(cfg, attach(tb, broadcast.NewMemNetwork(), mac), oobs[0], nil)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("daemon: %v", err)
		}
		os.RemoveAll(dir)
	})
	for k := 0; ; k++ {
		c, err := client.Dial(ctx, sock)
		if err == nil {
			c.Close()
			break
		}
		if k > 200 {
			tb.Fatalf("daemon socket never came up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return d, sock
}

// apiReq is one request of a fuzzed input, as the daemon must see it.
type apiReq struct {
	typ  byte
	body []byte
}

// How a fuzzed input ends, for the daemon.
const (
	endEOF       = iota // at a frame boundary: the connection just closes
	endTruncated        // inside a frame: closed without an answer
	endBadLength        // a length of 0 or above client.MaxFrame: closed without an answer
	endBadReq           // short publish/subscribe, unknown type: one Error "bad request"
	endSubscribe        // a subscription: Message frames (or compacted), then close
	endVersion          // a Hello of a version the daemon does not serve: one Error 12, then close
)

// parseAPIInput is the reference parse of a request stream (docs/api.md):
// the requests the daemon serves and how the stream ends for it.
func parseAPIInput(in []byte) (reqs []apiReq, end int) {
	for len(in) > 0 {
		if len(in) < 5 {
			return reqs, endTruncated
		}
		n := binary.BigEndian.Uint32(in)
		if n < 1 || n > client.MaxFrame {
			return reqs, endBadLength
		}
		if uint64(len(in)-4) < uint64(n) {
			return reqs, endTruncated
		}
		r := apiReq{typ: in[4], body: in[5 : 4+n]}
		in = in[4+n:]
		switch {
		case r.typ == client.TypeStatus:
		case r.typ == client.TypePublish && len(r.body) >= 8:
		case r.typ == client.TypeSubscribe && len(r.body) >= 8:
			return append(reqs, r), endSubscribe
		case r.typ == client.TypeRoster && len(r.body) == 10:
		case r.typ == client.TypeKey && len(r.body) >= 9:
		case r.typ == client.TypeAcceptLoss && len(r.body) == 24:
		case r.typ == client.TypePublishBatch && refBatch(r.body) != nil:
		case r.typ == client.TypeHello && len(r.body) >= 2:
			if v := binary.BigEndian.Uint16(r.body); v < client.MinAPIVersion || v > client.APIVersion {
				return reqs, endVersion
			}
		default:
			return reqs, endBadReq
		}
		reqs = append(reqs, r)
	}
	return reqs, endEOF
}

// refBatch is the reference parse of a PublishBatch body (docs/api.md):
// [req u64][count u16], count >= 1 messages [len u32][payload] that fill
// the body exactly; nil if malformed.
func refBatch(body []byte) [][]byte {
	if len(body) < 10 || binary.BigEndian.Uint16(body[8:]) == 0 {
		return nil
	}
	var out [][]byte
	b := body[10:]
	for range binary.BigEndian.Uint16(body[8:]) {
		if len(b) < 4 || uint64(binary.BigEndian.Uint32(b)) > uint64(len(b)-4) {
			return nil
		}
		n := 4 + int(binary.BigEndian.Uint32(b))
		out = append(out, b[4:n])
		b = b[n:]
	}
	if len(b) > 0 {
		return nil
	}
	return out
}

// exchange writes in to a new API connection, closes its write side and
// returns every frame the daemon sent until it closed the connection.
func exchange(t *testing.T, sock string, in []byte) []apiReq {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() {
		c.Write(in) // fails (EPIPE) once the daemon has closed: fine
		c.(*net.UnixConn).CloseWrite()
	}()
	var out []apiReq
	r := bufio.NewReader(c)
	for {
		typ, body, _, err := client.ReadFrame(r, nil)
		if err != nil {
			// The daemon closes with our input unread: ECONNRESET once the
			// replies are read.
			if err == io.EOF || errors.Is(err, syscall.ECONNRESET) {
				if r.Buffered() > 0 {
					t.Fatalf("the daemon's last frame is cut: %x", must(r.Peek(r.Buffered())))
				}
				return out
			}
			t.Fatalf("reading the daemon's answers (after %d frames): %v", len(out), err)
		}
		out = append(out, apiReq{typ, body})
	}
}

func must[T any](v T, _ error) T { return v }

// FuzzAPIRequest writes arbitrary bytes to the daemon's API socket (a real
// daemon on the in-memory segment) and closes the write side. The daemon
// never panics and answers as docs/api.md says, checked against a
// reference parse of the input: every Publish before the end gets exactly
// one answer with its request id (Published, or an Error: "too large"
// exactly for a payload above max_message_bytes, else queue full /
// dropped); every PublishBatch exactly one: a PublishedBatch with one
// result per message, in order, at increasing positions ("too large"
// exactly for the messages above max_message_bytes, "dropped" else), or
// one Error for the whole batch ("too large" exactly when its messages
// need more records than queue_len, else queue full); each Status a StatusReply of valid JSON; a malformed request
// (short publish or subscribe, unknown type) one Error "bad request" with
// request id 0; a bad length or a truncated frame closes the connection
// without one; a Subscribe a stream of Message frames in agreed order from
// its from_seq (or "compacted"); every answer is a well-formed frame and
// the daemon closes the connection. A Published position holds exactly
// that payload in the agreed stream (a batch's result: that message's).
// Afterwards a fresh, well-formed client still gets its status, its
// publish and its batch agreed.
func FuzzAPIRequest(f *testing.F) {
	d, sock := startOne(f, func(c *Config) {
		c.MaxMessage, c.QueueLen, c.KeepEntries = fuzzMaxMessage, fuzzQueueLen, 1024
	})
	fr := func(typ byte, parts ...[]byte) []byte {
		var b bytes.Buffer
		if err := client.WriteFrame(&b, typ, parts...); err != nil {
			f.Fatal(err)
		}
		return b.Bytes()
	}
	pub := fr(client.TypePublish, client.U64(1), []byte("hello"))
	big := fr(client.TypePublish, client.U64(2), bytes.Repeat([]byte{'L'}, 2500)) // 2 fragments
	huge := fr(client.TypePublish, client.U64(3), make([]byte, fuzzMaxMessage+1))
	st := fr(client.TypeStatus)
	sub := fr(client.TypeSubscribe, client.U64(0))
	f.Add(pub)
	f.Add(cat(pub, fr(client.TypePublish, client.U64(1), []byte("same id")), st, big, huge))
	f.Add(cat(st, st))
	f.Add(cat(pub, sub))
	f.Add(fr(client.TypeSubscribe, client.U64(1<<62)))
	f.Add(cat(pub, fr(client.TypePublish, client.U64(9), []byte("short"))[:9]))
	f.Add(cat(pub, fr(client.TypePublish, []byte{1, 2, 3})))
	f.Add(cat(st, fr(client.TypeSubscribe, []byte{0})))
	f.Add(cat(pub, fr(client.TypePublished, client.U64(1), client.U64(2), client.U16(3))))
	f.Add(cat(pub, []byte{0, 0, 0, 0, client.TypeStatus}))
	f.Add(cat(pub, []byte{0xff, 0xff, 0xff, 0xff, client.TypePublish}))
	f.Add(cat(pub, binary.BigEndian.AppendUint32(nil, client.MaxFrame), []byte{client.TypePublish}))
	f.Add(bytes.Repeat(fr(client.TypePublish, client.U64(0), []byte("x")), 40))
	f.Add([]byte{})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(cat(pub, fr(client.TypeKey, client.U64(5), []byte{client.KeyRetire}), st))
	f.Add(cat(fr(client.TypeKey, client.U64(6), append([]byte{client.KeyStage}, "/nonexistent/key"...)), pub))
	f.Add(cat(fr(client.TypeKey, client.U64(7), []byte{104}), fr(client.TypeKey, []byte{1, 2})))
	f.Add(cat(fr(client.TypeRoster, client.U64(8), []byte{client.RosterRemove, 0}), pub))
	f.Add(cat(fr(client.TypeAcceptLoss, client.U64(9), client.U64(3), client.U64(0)), pub, fr(client.TypeAcceptLoss, client.U64(9))))
	// Batches (docs/api.md "Batches").
	m := func(p []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...) }
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	batch := fr(client.TypePublishBatch, client.U64(10), client.U16(3), m([]byte("a")), m(nil), m([]byte("ccc")))
	f.Add(batch)
	f.Add(cat(batch, pub, batch, st)) // ids shared by batches and a publish
	f.Add(fr(client.TypePublishBatch, client.U64(1), client.U16(3), m([]byte("small")), m(make([]byte, fuzzMaxMessage+1)), m([]byte("after"))))
	f.Add(fr(client.TypePublishBatch, client.U64(11), client.U16(4), m([]byte("s")), m(bytes.Repeat([]byte{'F'}, 2500)), m([]byte("t")),
		m(bytes.Repeat([]byte{'G'}, fuzzMaxMessage)))) // fragments
	var many []byte
	for range fuzzQueueLen + 1 {
		many = append(many, m([]byte("q"))...)
	}
	f.Add(cat(fr(client.TypePublishBatch, client.U64(12), client.U16(fuzzQueueLen+1), many), pub))  // more records than queue_len
	f.Add(cat(pub, fr(client.TypePublishBatch, client.U64(13), client.U16(0))))                     // count 0
	f.Add(cat(pub, fr(client.TypePublishBatch, client.U64(14), client.U16(65535), m([]byte("x"))))) // count above the body
	f.Add(cat(pub, fr(client.TypePublishBatch, client.U64(15), client.U16(1), u32(1<<30), []byte("x"))))
	f.Add(cat(pub, fr(client.TypePublishBatch, client.U64(16), client.U16(1), m([]byte("x")), []byte{0}))) // bytes after
	f.Add(cat(pub, fr(client.TypePublishBatch, client.U64(17), []byte{1})))                                // no count
	f.Add(cat(batch, sub))
	f.Add(cat(fr(client.TypeHello, client.U16(client.APIVersion), []byte("fuzz")), st, pub))
	f.Add(cat(fr(client.TypeHello, client.U16(client.APIVersion+1), []byte("future")), st)) // refused: Error 12, then close
	f.Add(cat(fr(client.TypeHello, []byte{1}), st))                                         // short: bad request
	var fresh uint64
	f.Fuzz(func(t *testing.T, in []byte) {
		reqs, end := parseAPIInput(in)
		out := exchange(t, sock, in)

		want := map[uint64][]int{}         // request id -> payload sizes
		batches := map[uint64][][][]byte{} // request id -> its batches' payloads
		statuses, hellos := 0, 0
		var from uint64
		ctl := map[uint64]int{} // request id -> Roster and Key requests (one answer each)
		for _, r := range reqs {
			switch r.typ {
			case client.TypeRoster, client.TypeKey, client.TypeAcceptLoss:
				ctl[binary.BigEndian.Uint64(r.body)]++
			case client.TypePublish:
				id := binary.BigEndian.Uint64(r.body)
				want[id] = append(want[id], len(r.body)-8)
			case client.TypePublishBatch:
				id := binary.BigEndian.Uint64(r.body)
				batches[id] = append(batches[id], refBatch(r.body))
			case client.TypeStatus:
				statuses++
			case client.TypeHello:
				hellos++
			case client.TypeSubscribe:
				from = binary.BigEndian.Uint64(r.body)
			}
		}
		type pos struct {
			client.Position
			id uint64
		}
		var acked []pos
		type exact struct {
			client.Position
			id      uint64
			payload []byte
		}
		var ackedExact []exact           // batch results: exactly that payload
		pubErrs := map[uint64][]uint16{} // errors of publishes and batches, matched at the end
		badReqs, replies, msgs, helloReplies, versionErrs := 0, 0, 0, 0, 0
		var last client.Position
		for i, a := range out {
			switch a.typ {
			case client.TypePublished:
				if len(a.body) != 18 {
					t.Fatalf("answer %d: Published of %d bytes", i, len(a.body))
				}
				id := binary.BigEndian.Uint64(a.body)
				sizes := want[id]
				k := 0
				for k < len(sizes) && sizes[k] > fuzzMaxMessage {
					k++
				}
				if k == len(sizes) {
					t.Fatalf("answer %d: Published for request %d: not asked, answered twice, or above max_message_bytes %d (sizes %v)", i, id, fuzzMaxMessage, sizes)
				}
				want[id] = append(sizes[:k:k], sizes[k+1:]...)
				acked = append(acked, pos{client.Position{Seq: binary.BigEndian.Uint64(a.body[8:]), Index: binary.BigEndian.Uint16(a.body[16:])}, id})
			case client.TypeError:
				if len(a.body) < 10 || !utf8.Valid(a.body[10:]) {
					t.Fatalf("answer %d: Error %q", i, a.body)
				}
				id, code := binary.BigEndian.Uint64(a.body), binary.BigEndian.Uint16(a.body[8:])
				if (code == client.CodeBadRequest || code == client.CodeBadChange || code == client.CodeChangeInFlight || code == client.CodeNotStalled) && ctl[id] > 0 {
					ctl[id]-- // a Roster, Key or AcceptLoss request's error (request id 0 too)
					continue
				}
				if code == client.CodeBadRequest && id == 0 {
					badReqs++
					continue
				}
				if code == client.CodeVersion && id == 0 {
					versionErrs++
					continue
				}
				if code == client.CodeCompacted && id == 0 && end == endSubscribe && msgs == 0 {
					continue
				}
				if code == client.CodeBadRequest || code == client.CodeBadChange || code == client.CodeChangeInFlight || code == client.CodeNotStalled {
					// The errors of Roster, Key and AcceptLoss requests.
					if ctl[id] == 0 {
						t.Fatalf("answer %d: Error %d %q for request %d: no Roster or Key request, or answered twice", i, code, a.body[10:], id)
					}
					ctl[id]--
					continue
				}
				// A publish's or a batch's: which one, if the id is shared,
				// is told at the end.
				pubErrs[id] = append(pubErrs[id], code)
			case client.TypePublishedBatch:
				id, res, err := client.ParsePublishedBatch(a.body)
				if err != nil {
					t.Fatalf("answer %d: PublishedBatch %x: %v", i, a.body, err)
				}
				// The first of the batches with that id whose messages the
				// results fit.
				fits := func(b [][]byte) bool {
					if len(b) != len(res) {
						return false
					}
					for j, r := range res {
						big := len(b[j]) > fuzzMaxMessage
						var ae *client.APIError
						switch {
						case r.Err == nil && big, r.Err != nil && !errors.As(r.Err, &ae):
							return false
						case r.Err != nil && (ae.Code == client.CodeTooLarge) != big:
							return false
						case r.Err != nil && ae.Code != client.CodeTooLarge && ae.Code != client.CodeDropped:
							return false
						}
					}
					return true
				}
				k := 0
				for k < len(batches[id]) && !fits(batches[id][k]) {
					k++
				}
				if k == len(batches[id]) {
					t.Fatalf("answer %d: PublishedBatch for request %d (%d results %v): no such batch asked, answered twice, or results that do not fit its messages", i, id, len(res), res)
				}
				b := batches[id][k]
				batches[id] = append(batches[id][:k:k], batches[id][k+1:]...)
				var lastOK client.Position
				okSeen := false
				for j, r := range res {
					if r.Err != nil {
						if !utf8.ValidString(r.Err.(*client.APIError).Text) {
							t.Fatalf("answer %d: result %d: text %q", i, j, r.Err.(*client.APIError).Text)
						}
						continue
					}
					if okSeen && (r.Pos.Seq < lastOK.Seq || r.Pos.Seq == lastOK.Seq && r.Pos.Index <= lastOK.Index) {
						t.Fatalf("answer %d: batch %d: message %d at %v after %v", i, id, j, r.Pos, lastOK)
					}
					lastOK, okSeen = r.Pos, true
					ackedExact = append(ackedExact, exact{r.Pos, id, b[j]})
				}
			case client.TypeRosterQueued, client.TypeKeyDone, client.TypeLossAccepted:
				if len(a.body) != 8 {
					t.Fatalf("answer %d: type %#x of %d bytes", i, a.typ, len(a.body))
				}
				id := binary.BigEndian.Uint64(a.body)
				if ctl[id] == 0 {
					t.Fatalf("answer %d: type %#x for request %d: not asked, or answered twice", i, a.typ, id)
				}
				ctl[id]--
			case client.TypeHelloReply:
				if len(a.body) < 2 || binary.BigEndian.Uint16(a.body) != client.APIVersion || !utf8.Valid(a.body[2:]) {
					t.Fatalf("answer %d: HelloReply %q", i, a.body)
				}
				helloReplies++
			case client.TypeStatusReply:
				replies++
				if !json.Valid(a.body) {
					t.Fatalf("answer %d: status is not JSON: %q", i, a.body)
				}
			case client.TypeMessage:
				if end != endSubscribe || len(a.body) < 11 {
					t.Fatalf("answer %d: Message %x without a subscription", i, a.body)
				}
				p := client.Position{Seq: binary.BigEndian.Uint64(a.body), Index: binary.BigEndian.Uint16(a.body[8:])}
				if p.Seq < from || (msgs > 0 && (p.Seq < last.Seq || p.Seq == last.Seq && p.Index <= last.Index)) {
					t.Fatalf("answer %d: Message at %v after %v, subscribed from seq %d", i, p, last, from)
				}
				if a.body[10] != 0 || len(a.body)-11 > fuzzMaxMessage {
					t.Fatalf("answer %d: Message from host %d of %d bytes", i, a.body[10], len(a.body)-11)
				}
				last = p
				msgs++
			default:
				t.Fatalf("answer %d: type %#x", i, a.typ)
			}
		}
		// The errors left to each id answer its publishes and batches left:
		// "too large" exactly those above max_message_bytes and the
		// batches that need more records than queue_len; queue full the
		// others ("dropped": publishes only).
		for id := range requestIDs(want, batches, pubErrs) {
			var big, small, bigBatches, okBatches int
			for _, n := range want[id] {
				if n > fuzzMaxMessage {
					big++
				} else {
					small++
				}
			}
			for _, b := range batches[id] {
				need := 0
				for _, p := range b {
					if len(p) <= fuzzMaxMessage {
						need += numRecords(len(p), d.chunk)
					}
				}
				if need > fuzzQueueLen {
					bigBatches++
				} else {
					okBatches++
				}
			}
			var e2, e1, e3 int
			for _, code := range pubErrs[id] {
				switch code {
				case client.CodeTooLarge:
					e2++
				case client.CodeQueueFull:
					e1++
				case client.CodeDropped:
					e3++
				default:
					t.Fatalf("request %d: Error %d", id, code)
				}
			}
			if e2 != big+bigBatches || e1+e3 != small+okBatches || e3 > small {
				t.Fatalf("request %d: left unanswered by Published/PublishedBatch: %d publishes above the max, %d not, %d batches needing more than queue_len, %d not; errors: %d too large, %d queue full, %d dropped",
					id, big, small, bigBatches, okBatches, e2, e1, e3)
			}
		}
		for id, n := range ctl {
			if n > 0 {
				t.Fatalf("request %d: %d Roster or Key requests never answered", id, n)
			}
		}
		if replies != statuses {
			t.Fatalf("%d status requests, %d replies", statuses, replies)
		}
		if helloReplies != hellos {
			t.Fatalf("%d hellos of this version, %d replies", hellos, helloReplies)
		}
		if wantVersion := map[bool]int{true: 1}[end == endVersion]; versionErrs != wantVersion {
			t.Fatalf("input ends %d: %d version errors, want %d", end, versionErrs, wantVersion)
		}
		if wantBad := map[bool]int{true: 1}[end == endBadReq]; badReqs != wantBad {
			t.Fatalf("input ends %d: %d bad-request errors, want %d", end, badReqs, wantBad)
		}

		// Every acknowledged position holds that payload, from this host.
		payloads := map[uint64][][]byte{}
		for _, r := range reqs {
			if r.typ == client.TypePublish {
				id := binary.BigEndian.Uint64(r.body)
				payloads[id] = append(payloads[id], r.body[8:])
			}
		}
		d.core.Lock() // deliveries finish under the core lock
		d.mu.Lock()
		history := d.flatHistory()
		for _, p := range ackedExact {
			k := 0
			for k < len(history) && history[k].Position != p.Position {
				k++
			}
			if k == len(history) {
				if len(history) > 0 && history[0].Seq <= p.Seq {
					d.mu.Unlock()
					d.core.Unlock()
					t.Fatalf("batch %d: a message acknowledged at %v: nothing delivered there", p.id, p.Position)
				}
				continue // compacted since
			}
			if m := history[k]; m.Sender != 0 || !bytes.Equal(m.Payload, p.payload) {
				d.mu.Unlock()
				d.core.Unlock()
				t.Fatalf("batch %d: %d bytes acknowledged at %v, where host %d's %d bytes are", p.id, len(p.payload), p.Position, m.Sender, len(m.Payload))
			}
		}
		for _, p := range acked {
			k := 0
			for k < len(history) && history[k].Position != p.Position {
				k++
			}
			if k == len(history) {
				if len(history) > 0 && history[0].Seq <= p.Seq {
					d.mu.Unlock()
					d.core.Unlock()
					t.Fatalf("request %d acknowledged at %v: nothing delivered there", p.id, p.Position)
				}
				continue // compacted since
			}
			m := history[k]
			okPayload := false
			for _, pl := range payloads[p.id] {
				okPayload = okPayload || bytes.Equal(pl, m.Payload)
			}
			if m.Sender != 0 || !okPayload {
				d.mu.Unlock()
				d.core.Unlock()
				t.Fatalf("request %d acknowledged at %v, where host %d's %d bytes are", p.id, p.Position, m.Sender, len(m.Payload))
			}
		}
		d.mu.Unlock()
		d.core.Unlock()

		// A well-formed client is still served.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cl, err := client.Dial(ctx, sock)
		if err != nil {
			t.Fatalf("a fresh client: %v", err)
		}
		defer cl.Close()
		if _, err := cl.Status(ctx); err != nil {
			t.Fatalf("a fresh client's status: %v", err)
		}
		fresh++
		payload := fmt.Appendf(nil, "fresh %d", fresh)
		p, err := cl.Publish(ctx, payload)
		if err != nil {
			t.Fatalf("a fresh client's publish: %v", err)
		}
		d.core.Lock()
		d.mu.Lock()
		found := false
		for _, m := range d.flatHistory() {
			found = found || m.Position == p && bytes.Equal(m.Payload, payload)
		}
		d.mu.Unlock()
		d.core.Unlock()
		if !found {
			t.Fatalf("a fresh client's publish acknowledged at %v, not delivered there", p)
		}
		bp := [][]byte{fmt.Appendf(nil, "fresh batch %d", fresh), bytes.Repeat([]byte{'b'}, 2000)}
		var acks []client.Ack
		for attempt := 0; ; attempt++ {
			acks, err = cl.PublishBatch(ctx, bp)
			if !errors.Is(err, client.ErrQueueFull) || attempt > 100 {
				break
			}
			time.Sleep(time.Millisecond) // the input's publishes may still fill the queue
		}
		if err != nil {
			t.Fatalf("a fresh client's batch: %v", err)
		}
		d.core.Lock()
		d.mu.Lock()
		delivered := 0
		for _, m := range d.flatHistory() {
			for j, a := range acks {
				if m.Position == a.Pos && bytes.Equal(m.Payload, bp[j]) {
					delivered++
				}
			}
		}
		d.mu.Unlock()
		d.core.Unlock()
		if delivered != len(bp) {
			t.Fatalf("a fresh client's batch acknowledged at %v: %d of its messages delivered there", acks, delivered)
		}
	})
}

// requestIDs is the set of the keys of three maps by request id.
func requestIDs[A, B, C any](a map[uint64]A, b map[uint64]B, c map[uint64]C) map[uint64]bool {
	out := map[uint64]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	for k := range c {
		out[k] = true
	}
	return out
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
