package oob

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
)

// The rack under fuzzing: host 0 (the transport under test) listens; host 1
// is a real transport that dials it (the legitimate peer); host 2 is in
// the roster but played by the fuzzer, by hand.
const (
	fuzzMax   = 1 << 20 // MaxMessage of host 0: small, so that allocations are measurable
	fuzzGroup = 1
	fakeID    = 2
	legitID   = 1
)

type fuzzRack struct {
	a, b *Transport
	lo   uint64 // the legitimate peer's messages carry Lo = 1, 2, ...
}

func startFuzzRack(tb testing.TB) *fuzzRack {
	tb.Helper()
	a, err := New(Config{ID: 0, Group: fuzzGroup, Listen: "127.0.0.1:0", Key: testKey, MaxMessage: fuzzMax,
		Peers: map[uint8]string{fakeID: "127.0.0.1:9"}}) // never sent to
	if err != nil {
		tb.Fatal(err)
	}
	b, err := New(Config{ID: legitID, Group: fuzzGroup, Listen: "127.0.0.1:0", Key: testKey, Peers: map[uint8]string{0: a.Addr().String()}})
	if err != nil {
		tb.Fatal(err)
	}
	a.peers[legitID] = newPeer(legitID, b.Addr().String(), 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { a.Run(ctx); done <- struct{}{} }()
	go func() { b.Run(ctx); done <- struct{}{} }()
	tb.Cleanup(func() { cancel(); <-done; <-done })
	r := &fuzzRack{a: a, b: b}
	r.checkLegit(tb)
	return r
}

// checkLegit: the legitimate peer's next message arrives, and nothing else.
func (r *fuzzRack) checkLegit(tb testing.TB) {
	tb.Helper()
	r.lo++
	r.b.Send(exo.Message{Type: exo.MsgFetch, From: legitID, To: 0, Lo: r.lo})
	select {
	case m := <-r.a.Recv():
		if m.From != legitID || m.Lo != r.lo {
			tb.Fatalf("waiting for the legitimate peer's message %d, got %v", r.lo, m)
		}
	case <-time.After(10 * time.Second):
		tb.Fatalf("the legitimate peer's message %d never arrived", r.lo)
	}
}

// frame encodes v as the transport does.
func frame(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := encodeFrame(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// gobBombHello is a hello frame whose gob type definition claims 2^28
// fields (TestPreAuthGobAmplification).
var gobBombHello = []byte("\x00\x00\x00E9\x7f\x03\x01\x01\x05hello\x01\xff\x80\x00\x01\xfc\x10\x00\x00\x00\x01\x02ID\x01\x06\x00\x01\x05Group" +
	"\x01\x06\x00\x01\x05Nonce\x01\n\x00\x01\x03MAC\x01\n\x00\x00\x00\n\xff\x80\x01\x02\x01\x01\x01\x01\x01\x00")

// allocated returns the bytes allocated so far by the process.
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// allocSlack bounds what one connection may allocate besides the message
// buffer the length prefix announces (bufio, gob's type machinery, the
// goroutine, the test's own reads).
const allocSlack = 1 << 20

// gobUpFront is what encoding/gob may allocate for one decode however
// short its input: a slice (or a type definition's field list) that claims
// a huge length gets an up-front buffer of up to 10 MiB (saferio's chunk)
// before gob finds the input too short (TestPreAuthGobAmplification).
const gobUpFront = 10<<20 + 1<<16

// readAll reads what the transport sends until it closes the connection
// (EOF, or a reset when it closed with our input unread).
func readAll(c net.Conn) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF || errors.Is(err, syscall.ECONNRESET) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("waiting for the transport to close the connection: %w", err)
		}
	}
}

// readRawFrame reads one [len][body] frame of at most 1 MiB.
func readRawFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("a frame of %d bytes", n)
	}
	b := make([]byte, 4+n)
	copy(b, hdr[:])
	_, err := io.ReadFull(r, b[4:])
	return b, err
}

// decodeFirst decodes the first frame of b into v as readFrame does (a
// fresh decoder per frame, at most max bytes), and returns the rest.
func decodeFirst(b []byte, max int, v any) ([]byte, bool) {
	if len(b) < 4 {
		return nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if int64(n) > int64(max) || uint64(len(b)-4) < uint64(n) {
		return nil, false
	}
	if decodeBody(b[4:4+n], v) != nil {
		return nil, false
	}
	return b[4+n:], true
}

// checkHelloReply: out is exactly one hello frame of host 0 whose proof
// holds for our nonce.
func checkHelloReply(tb testing.TB, out []byte, to uint8, ours []byte) {
	tb.Helper()
	var h hello
	rest, ok := decodeFirst(out, 1<<20, &h)
	if !ok || len(rest) != 0 {
		tb.Fatalf("the transport's answer to a hello is not one hello frame: %x", out)
	}
	if h.ID != 0 || h.Group != fuzzGroup || len(h.Nonce) < 16 ||
		!hmac.Equal(h.MAC, proof(testKey, "listener", fuzzGroup, 0, to, ours, h.Nonce)) {
		tb.Fatalf("hello reply %+v: wrong id, group or proof", h)
	}
}

// noDelivery: nothing reached Recv.
func (r *fuzzRack) noDelivery(tb testing.TB, what string) {
	tb.Helper()
	select {
	case m := <-r.a.Recv():
		tb.Fatalf("%s: delivered %v", what, m)
	default:
	}
}

// FuzzOOBHandshake: bytes from a peer that does not hold the group key.
// Mode 0: the fuzzed bytes are all the peer sends. Mode 1: the peer sends a
// correct hello as host 2 (in the roster), gets the listener's hello, then
// the fuzzed bytes (in place of its auth). Mode 2: the roles reversed: a
// dialer (host 2) runs its handshake against a listener that answers the
// fuzzed bytes. The transport never panics; the listener delivers nothing
// to Recv, answers at most one hello (only to a hello of our group from a
// host in the roster, with a proof that holds for that host's nonce) and
// nothing else, counts the connection as refused once, allocates no more
// than MaxMessage plus gob's up-front buffer per decode (a larger length
// prefix is refused, not allocated; that even MaxMessage and gob's 10 MiB
// are too much before the key is proved is TestPreAuthAllocation and
// TestPreAuthGobAmplification), and keeps serving the legitimate peer; the
// dialer's handshake fails.
func FuzzOOBHandshake(f *testing.F) {
	r := startFuzzRack(f)
	helloOK := frame(f, hello{ID: fakeID, Group: fuzzGroup, Nonce: bytes.Repeat([]byte{7}, 16)})
	msg := frame(f, &exo.Message{Type: exo.MsgFetch, From: fakeID, To: 0, Lo: 3})
	authBad := frame(f, auth{MAC: bytes.Repeat([]byte{1}, 32)})
	f.Add(uint8(0), helloOK)
	f.Add(uint8(0), cat(helloOK, authBad, msg))
	f.Add(uint8(0), cat(helloOK, msg)) // a message in place of the auth
	f.Add(uint8(0), frame(f, hello{ID: fakeID, Group: fuzzGroup + 1, Nonce: []byte{1}}))
	f.Add(uint8(0), frame(f, hello{ID: 9, Group: fuzzGroup}))
	f.Add(uint8(0), frame(f, hello{ID: 0, Group: fuzzGroup})) // itself
	f.Add(uint8(0), msg)                                      // no handshake at all
	f.Add(uint8(0), []byte("GET / HTTP/1.0\r\n\r\n"))
	f.Add(uint8(0), []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Add(uint8(0), binary.BigEndian.AppendUint32(nil, fuzzMax+1))
	f.Add(uint8(0), binary.BigEndian.AppendUint32(nil, fuzzMax))
	f.Add(uint8(0), []byte{})
	f.Add(uint8(0), gobBombHello)
	f.Add(uint8(1), authBad)
	f.Add(uint8(1), cat(authBad, msg))
	f.Add(uint8(1), frame(f, auth{}))
	f.Add(uint8(1), msg)
	f.Add(uint8(1), binary.BigEndian.AppendUint32(nil, fuzzMax))
	f.Add(uint8(2), frame(f, hello{ID: 0, Group: fuzzGroup, Nonce: []byte{1}, MAC: bytes.Repeat([]byte{2}, 32)}))
	f.Add(uint8(2), cat(frame(f, hello{ID: 0, Group: fuzzGroup}), msg))
	f.Add(uint8(2), binary.BigEndian.AppendUint32(nil, 1<<30))
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		if mode%3 == 2 {
			dialerSide(t, data)
			r.checkLegit(t)
			return
		}
		refused := r.a.Stats().Refused
		before := allocated()
		c, err := net.Dial("tcp", r.a.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var out []byte
		if mode%3 == 1 {
			ours := bytes.Repeat([]byte{mode}, 16)
			if _, err := c.Write(frame(t, hello{ID: fakeID, Group: fuzzGroup, Nonce: ours})); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			reply, err := readRawFrame(c)
			if err != nil {
				t.Fatalf("no hello reply to a correct hello: %v", err)
			}
			checkHelloReply(t, reply, fakeID, ours)
			go func() { c.Write(data); c.(*net.TCPConn).CloseWrite() }()
			if out, err = readAll(c); err != nil {
				t.Fatal(err)
			}
			if len(out) > 0 {
				t.Fatalf("after its hello, the transport answered %x to a peer that did not prove the key", out)
			}
		} else {
			go func() { c.Write(data); c.(*net.TCPConn).CloseWrite() }()
			if out, err = readAll(c); err != nil {
				t.Fatal(err)
			}
			var h hello
			_, ok := decodeFirst(data, fuzzMax, &h)
			if ok && h.Group == fuzzGroup && (h.ID == fakeID || h.ID == legitID) {
				checkHelloReply(t, out, h.ID, h.Nonce)
			} else if len(out) > 0 {
				t.Fatalf("answered %x to a peer outside the group or the roster", out)
			}
		}
		// Two decodes at most: the hello and the auth.
		if got := allocated() - before; got > fuzzMax+2*gobUpFront+allocSlack {
			t.Fatalf("one unauthenticated connection allocated %d bytes (MaxMessage %d)", got, fuzzMax)
		}
		if got := r.a.Stats().Refused - refused; got != 1 {
			t.Fatalf("refused counted %d times, want 1", got)
		}
		r.noDelivery(t, "an unauthenticated peer")
		r.checkLegit(t)
	})
}

// dialerSide runs host 2's handshake with a listener that answers data.
func dialerSide(t *testing.T, data []byte) {
	dialer := &Transport{cfg: Config{ID: fakeID, Group: fuzzGroup, Key: testKey, MaxMessage: fuzzMax, WriteTimeout: time.Second}}
	c1, c2 := net.Pipe()
	defer c1.Close()
	go func() {
		defer c2.Close()
		c2.SetDeadline(time.Now().Add(5 * time.Second))
		var hdr [4]byte // the dialer's hello
		if _, err := io.ReadFull(c2, hdr[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, c2, int64(binary.BigEndian.Uint32(hdr[:]))); err != nil {
			return
		}
		c2.Write(data)
	}()
	before := allocated()
	if err := dialer.handshake(c1, 0); err == nil {
		t.Fatalf("handshake with a listener that does not hold the key succeeded (it answered %x)", data)
	}
	if got := allocated() - before; got > fuzzMax+gobUpFront+allocSlack {
		t.Fatalf("a handshake with a fake listener allocated %d bytes (MaxMessage %d)", got, fuzzMax)
	}
}

// FuzzOOBMessage: bytes from an authenticated peer (host 2, after a
// correct handshake). The transport never panics and delivers exactly what
// a reference reading of the stream says: each frame of at most
// MaxMessage bytes whose gob decodes to an exo.Message from host 2 to host
// 0 is delivered, equal to that decoding, in order; the first frame that
// is too long, cut short, not a gob of an exo.Message, or from/to another
// host ends the connection (the last counted as refused) and nothing after
// it is delivered. Every delivered message is well-formed for oob.go
// (From is the authenticated peer, To is us) and survives a gob round
// trip; the connection allocates at most twice what the stream carries
// plus one MaxMessage buffer and gob's up-front buffer per decode; the
// legitimate peer is served afterwards.
func FuzzOOBMessage(f *testing.F) {
	r := startFuzzRack(f)
	fetch := frame(f, &exo.Message{Type: exo.MsgFetch, From: fakeID, To: 0, Epoch: 3, Lo: 10, Hi: 20})
	resp := frame(f, &exo.Message{Type: exo.MsgFetchResp, From: fakeID, To: 0, LogEpoch: 2, Start: 10, Agreed: 12,
		Skipped: []uint8{1}, Entries: []exo.Entry{
			{Seq: 10, Sender: 2, History: []uint8{0, 1}, Count: 1, Payload: []byte{0, 2, 'h', 'i'}},
			{Seq: 11, Sender: 0, History: []uint8{2, 1}},
		}})
	install := frame(f, &exo.Message{Type: exo.MsgInstall, From: fakeID, To: 0, Epoch: 4, Start: 1, Agreed: 1, Amnesiac: true})
	f.Add(fetch)
	f.Add(cat(fetch, resp, install))
	f.Add(cat(fetch, frame(f, &exo.Message{Type: exo.MsgFetch, From: legitID, To: 0}), fetch)) // spoofed sender
	f.Add(cat(fetch, frame(f, &exo.Message{Type: exo.MsgFetch, From: fakeID, To: 1})))         // not for us
	f.Add(cat(fetch, frame(f, hello{ID: fakeID, Group: fuzzGroup})))                           // another type
	f.Add(cat(fetch, resp[:len(resp)-3]))                                                      // cut short
	f.Add(cat(fetch, binary.BigEndian.AppendUint32(nil, fuzzMax+1)))                           // too long
	f.Add(cat(fetch, binary.BigEndian.AppendUint32(nil, 0xffffffff), fetch))
	f.Add(cat(fetch, []byte{0, 0, 0, 0}, fetch)) // empty frame
	f.Add(resp[4:])                              // no length prefix
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		// The reference reading.
		var want []exo.Message
		spoofed := false
		decodes := 0 // frames whose body arrives whole: gob decodes them
		for rest := data; ; {
			if len(rest) >= 4 && uint64(len(rest)-4) >= uint64(binary.BigEndian.Uint32(rest)) {
				decodes++
			}
			var m exo.Message
			next, ok := decodeFirst(rest, fuzzMax, &m)
			if !ok {
				break
			}
			if m.From != fakeID || m.To != 0 {
				spoofed = true
				break
			}
			if m.Type == exo.MsgGone {
				break // a notice from the wire: the peer is cut off
			}
			want = append(want, m)
			rest = next
		}

		st := r.a.Stats()
		c, err := net.Dial("tcp", r.a.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		peer := &Transport{cfg: Config{ID: fakeID, Group: fuzzGroup, Key: testKey, MaxMessage: fuzzMax, WriteTimeout: time.Second}}
		if err := peer.handshake(c, 0); err != nil {
			t.Fatalf("handshake of a peer with the key: %v", err)
		}
		before := allocated()
		go func() { c.Write(data); c.(*net.TCPConn).CloseWrite() }()
		type result struct {
			out []byte
			err error
		}
		closed := make(chan result)
		go func() { out, err := readAll(c); closed <- result{out, err} }()
		var got []exo.Message
		for done := false; !done; {
			select {
			case m := <-r.a.Recv():
				got = append(got, m)
			case res := <-closed:
				if res.err != nil || len(res.out) > 0 {
					t.Fatalf("the transport wrote %x to a peer that dialed it (%v)", res.out, res.err)
				}
				done = true
			}
		}
		for len(r.a.Recv()) > 0 {
			got = append(got, <-r.a.Recv())
		}
		// A stream the peer ended (EOF) with nothing listening at its
		// address (127.0.0.1:9) reports the peer gone: one notice, after
		// its messages, made by the transport (never read off the wire:
		// decodeFirst's messages of that type are cut off).
		if k := len(got) - 1; k >= 0 && got[k].Type == exo.MsgGone {
			if g := got[k]; g.From != fakeID || g.To != 0 || !reflect.DeepEqual(g, exo.Message{Type: exo.MsgGone, From: fakeID, To: 0}) {
				t.Fatalf("gone notice %v, want one from %d to 0 and nothing else", g, fakeID)
			}
			if got = got[:k]; len(got) == 0 {
				got = nil
			}
		}
		if alloc := allocated() - before; alloc > uint64(2*len(data))+fuzzMax+uint64(decodes)*gobUpFront+allocSlack {
			t.Fatalf("a %d-byte stream made the transport allocate %d bytes", len(data), alloc)
		}
		for i, m := range got {
			if m.From != fakeID || m.To != 0 {
				t.Fatalf("message %d delivered from %d to %d on host %d's connection", i, m.From, m.To, fakeID)
			}
			var again exo.Message
			if _, ok := decodeFirst(frame(t, &m), fuzzMax, &again); !ok || !reflect.DeepEqual(again, m) {
				t.Fatalf("message %d does not survive a gob round trip: %v", i, m)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("delivered %d messages, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
		}
		st2 := r.a.Stats()
		if st2.Received-st.Received != uint64(len(want)) {
			t.Fatalf("received counted %d, delivered %d", st2.Received-st.Received, len(want))
		}
		if wantRefused := map[bool]uint64{true: 1}[spoofed]; st2.Refused-st.Refused != wantRefused {
			t.Fatalf("refused counted %d, want %d", st2.Refused-st.Refused, wantRefused)
		}
		r.checkLegit(t)
	})
}

// TestPreAuthAllocation: a peer that has proved nothing (not even a hello)
// sends a 4-byte length prefix; the listener must not allocate the buffer
// it announces. The hello and the auth are a few dozen bytes: their read
// is bounded by MaxMessage (64 MiB by default) instead, so each such
// connection holds 64 MiB for the 2 s handshake deadline: 16 connections
// a second from anyone who can reach the OOB port pin 2 GiB.
func TestPreAuthAllocation(t *testing.T) {
	a, err := New(Config{ID: 0, Group: 1, Listen: "127.0.0.1:0", Key: testKey, Peers: map[uint8]string{1: "127.0.0.1:9"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap := ms.HeapAlloc
	const conns = 4
	for range conns {
		c, err := net.Dial("tcp", a.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(binary.BigEndian.AppendUint32(nil, 64<<20)) // and nothing else
	}
	time.Sleep(300 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grown := int64(ms.HeapAlloc) - int64(heap); grown > 1<<20 {
		t.Fatalf("%d unauthenticated connections of 4 bytes each hold %d MiB of heap", conns, grown>>20)
	}
}

// TestPreAuthGobAmplification: a 73-byte hello from a peer that has proved
// nothing, whose gob type definition claims 2^28 fields, makes gob
// allocate 10 MiB before it finds the input short (saferio's up-front
// chunk); the handshake's frames should not be gob (a fixed binary
// layout: id, group, nonce, MAC), or not decoded before a size check that
// gob cannot do.
func TestPreAuthGobAmplification(t *testing.T) {
	in := gobBombHello
	tr := &Transport{cfg: Config{MaxMessage: 64 << 20}}
	before := allocated()
	var h hello
	err := tr.readFrame(bufio.NewReader(bytes.NewReader(in)), nil, &h)
	if got := allocated() - before; got > 64<<10 {
		t.Fatalf("a %d-byte hello (%v) allocated %d bytes", len(in), err, got)
	}
}
