package oob

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func pair(t *testing.T, group2 uint16) (*Transport, *Transport) {
	return pairKeys(t, group2, testKey)
}

func pairKeys(t *testing.T, group2 uint16, key2 []byte) (*Transport, *Transport) {
	t.Helper()
	a, b := newPair(t, group2, key2)
	run(t, a)
	run(t, b)
	return a, b
}

// newPair returns transports 0 and 1, each with the other's address, not
// running.
func newPair(t *testing.T, group2 uint16, key2 []byte) (*Transport, *Transport) {
	t.Helper()
	a, err := New(Config{ID: 0, Group: 1, Listen: "127.0.0.1:0", Peers: map[uint8]string{}, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{ID: 1, Group: group2, Listen: "127.0.0.1:0", Peers: map[uint8]string{0: a.Addr().String()}, Key: key2})
	if err != nil {
		t.Fatal(err)
	}
	a.peers[1] = newPeer(1, b.Addr().String(), 16)
	return a, b
}

// run runs tr until the returned stop is called (or the test ends) and
// stop returns once Run did.
func run(t *testing.T, tr *Transport) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// TestRoundTrip: messages with entries cross in both directions, in order.
func TestRoundTrip(t *testing.T) {
	a, b := pair(t, 1)
	for i := 0; i < 50; i++ {
		b.Send(exo.Message{Type: exo.MsgFetchResp, From: 1, To: 0, Start: uint64(i),
			Entries: []exo.Entry{{Seq: uint64(i), Sender: 1, History: []uint8{0}, Count: 1, Payload: []byte(fmt.Sprint(i))}}})
	}
	for i := 0; i < 50; i++ {
		select {
		case m := <-a.Recv():
			if m.Start != uint64(i) || string(m.Entries[0].Payload) != fmt.Sprint(i) {
				t.Fatalf("message %d: got %v", i, m)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("message %d never arrived", i)
		}
	}
	a.Send(exo.Message{Type: exo.MsgFetch, From: 0, To: 1, Lo: 7})
	select {
	case m := <-b.Recv():
		if m.Lo != 7 {
			t.Fatalf("got %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reply never arrived")
	}
}

// TestForeignGroupRefused: a peer of another group gets nothing through.
func TestForeignGroupRefused(t *testing.T) {
	a, b := pair(t, 2)
	wantRefused(t, a, b, exo.Message{Type: exo.MsgFetch, From: 1, To: 0}, "from another group")
}

// wantRefused sends m from b to a: a must take nothing and count the
// refusal.
func wantRefused(t *testing.T, a, b *Transport, m exo.Message, what string) {
	t.Helper()
	b.Send(m)
	select {
	case got := <-a.Recv():
		t.Fatalf("accepted %v %s", got, what)
	case <-time.After(300 * time.Millisecond):
	}
	if a.Stats().Refused == 0 {
		t.Fatal("refusal not counted")
	}
}

// TestWrongKeyRefused: a host without the group key gets nothing through,
// in either direction, and the refusal is counted.
func TestWrongKeyRefused(t *testing.T) {
	a, b := pairKeys(t, 1, []byte("another key, 32 bytes long......"))
	b.Send(exo.Message{Type: exo.MsgFetch, From: 1, To: 0})
	a.Send(exo.Message{Type: exo.MsgFetch, From: 0, To: 1})
	select {
	case m := <-a.Recv():
		t.Fatalf("accepted %v from a host without the key", m)
	case m := <-b.Recv():
		t.Fatalf("accepted %v from a host without the key", m)
	case <-time.After(500 * time.Millisecond):
	}
	if a.Stats().Refused == 0 && b.Stats().Refused == 0 {
		t.Fatal("refusal not counted")
	}
}

// TestGarbagePeerCutOff: a connection that sends garbage or an oversized
// length is cut off; the transport keeps serving others.
func TestGarbagePeerCutOff(t *testing.T) {
	a, b := pair(t, 1)
	for _, junk := range [][]byte{[]byte("GET / HTTP/1.0\r\n\r\n"), {0xff, 0xff, 0xff, 0xff, 1, 2, 3}} {
		c, err := net.Dial("tcp", a.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(junk)
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		var buf [1]byte
		if _, err := c.Read(buf[:]); err == nil {
			t.Fatal("garbage peer got an answer")
		}
		c.Close()
	}
	b.Send(exo.Message{Type: exo.MsgFetch, From: 1, To: 0, Lo: 9})
	select {
	case m := <-a.Recv():
		if m.Lo != 9 {
			t.Fatalf("got %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a real peer was stalled by the garbage")
	}
}

// TestNoKeyNoTransport: without a key there is no transport.
func TestNoKeyNoTransport(t *testing.T) {
	if _, err := New(Config{ID: 0, Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("a transport without a group key")
	}
}

// TestSlowPeerCutOff: an authenticated peer that stalls in the middle of a
// message body is cut off after the body deadline.
func TestSlowPeerCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 5 s body deadline")
	}
	a, _ := pair(t, 1)
	// Authenticate as host 1 by hand, then send a length and stall.
	c, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fake := &Transport{cfg: Config{ID: 1, Group: 1, Key: testKey, MaxMessage: 1 << 20, WriteTimeout: time.Second}}
	if err := fake.handshake(c, 0); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{0, 0, 0, 100, 1, 2}) // 100 bytes announced, 2 sent
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); err == nil {
		t.Fatal("a stalled peer got an answer")
	}
	if d := time.Since(start); d > 12*time.Second {
		t.Fatalf("cut off after %v, want about %v", d, a.cfg.BodyTimeout)
	}
}

// TestLargeMessageKeepsComing: a message longer than one body deadline
// can carry (a log for a host far behind, on a busy machine) is read as
// long as each MiB comes within it; one that stops coming is cut off.
func TestLargeMessageKeepsComing(t *testing.T) {
	tr := &Transport{cfg: Config{MaxMessage: 64 << 20, BodyTimeout: 300 * time.Millisecond}}
	want := exo.Message{Type: exo.MsgFetchResp, From: 3, To: 1, Epoch: 9}
	for i := range 50000 {
		want.Entries = append(want.Entries, exo.Entry{Seq: uint64(i), Sender: uint8(i % 5), History: []uint8{1, 2}, Count: 1, Payload: make([]byte, 64)})
	}
	frame, err := encodeFrame(&want)
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) < 3*progressChunk {
		t.Fatalf("the message is %d bytes: want at least 3 chunks", len(frame))
	}
	send := func(stallAt int) (exo.Message, error) {
		r, w := net.Pipe()
		defer r.Close()
		go func() {
			defer w.Close()
			for off := 0; off < len(frame); {
				end := min(off+progressChunk/2, len(frame))
				if off >= stallAt {
					time.Sleep(time.Second) // stalls past the body deadline
					return
				}
				if _, err := w.Write(frame[off:end]); err != nil {
					return
				}
				off = end
				time.Sleep(100 * time.Millisecond) // the whole is slower than one deadline
			}
		}()
		var got exo.Message
		err := tr.readFrame(bufio.NewReader(r), r, &got)
		return got, err
	}
	start := time.Now()
	got, err := send(len(frame))
	if err != nil {
		t.Fatalf("a %d-byte message read slowly: %v", len(frame), err)
	}
	if took := time.Since(start); took < 2*tr.cfg.BodyTimeout {
		t.Fatalf("took %v: the test wants a read longer than the body deadline", took)
	}
	if len(got.Entries) != len(want.Entries) || got.Entries[49999].Seq != 49999 {
		t.Fatalf("got %d entries", len(got.Entries))
	}
	if _, err := send(progressChunk + progressChunk/2); err == nil {
		t.Fatal("a message that stopped coming was read")
	}
}

// TestKeyRotation: during a key rotation a host proves its primary key and
// accepts either: a host that switched to the new key and one still on the
// old key (holding both) talk; a host with the new key alone and one with
// the old key alone do not.
func TestKeyRotation(t *testing.T) {
	newKey := []byte("the next group key, 32 bytes.....")
	recv := func(tr *Transport) bool {
		select {
		case <-tr.Recv():
			return true
		case <-time.After(700 * time.Millisecond):
			return false
		}
	}
	// b proves the new key, accepts the old; a proves the old, accepts the new.
	a, b := pairKeys(t, 1, newKey)
	if err := b.SetKeys(newKey, testKey); err != nil {
		t.Fatal(err)
	}
	if err := a.SetKeys(testKey, newKey); err != nil {
		t.Fatal(err)
	}
	b.Send(exo.Message{Type: exo.MsgFetch, From: 1, To: 0, Lo: 1})
	a.Send(exo.Message{Type: exo.MsgFetch, From: 0, To: 1, Lo: 2})
	if !recv(a) || !recv(b) {
		t.Fatal("two hosts holding both keys (different primaries) did not talk")
	}
	// After the old key is retired at c, a host that only holds the old key
	// is refused.
	c, d := pairKeys(t, 1, testKey)
	if err := c.SetKeys(newKey); err != nil {
		t.Fatal(err)
	}
	d.Send(exo.Message{Type: exo.MsgFetch, From: 1, To: 0, Lo: 3})
	if recv(c) {
		t.Fatal("a host with the retired key alone was accepted")
	}
	if err := c.SetKeys([]byte("short")); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

// TestRTOBounds: the sockets the Transport opens carry its retransmission
// timer bounds, the dialed one and the accepted one (Run bounds it as
// boundAccepted does): the kernel's 200 ms floor and 120 s ceiling delayed every
// message behind a lost segment by as much, and after a partition by the
// back-off it had reached.
func TestRTOBounds(t *testing.T) {
	tr, _ := pair(t, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: tr.control}
	dialed, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dialed.Close()
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.boundAccepted(accepted); err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	for name, c := range map[string]net.Conn{"dialed": dialed, "accepted": accepted} {
		raw, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var lo, hi time.Duration
		var rerr error
		raw.Control(func(fd uintptr) { lo, hi, rerr = rtoOf(fd) })
		if rerr != nil {
			t.Skipf("the kernel does not report the RTO bounds (%v): Linux 6.15 or later has TCP_RTO_MIN_US", rerr)
		}
		// The kernel rounds the floor up to whole jiffies (4 ms at HZ=250).
		if lo < tr.cfg.RTOMin || lo > tr.cfg.RTOMin+10*time.Millisecond || hi != tr.cfg.RTOMax {
			t.Errorf("%s connection: RTO bounds %v..%v, want %v (rounded up to jiffies)..%v", name, lo, hi, tr.cfg.RTOMin, tr.cfg.RTOMax)
		}
	}
}

// TestGoneNotice: when a peer's process goes away (its connections end,
// its listener with them), the transport reports it gone (exo.MsgGone
// from it); when a live peer only closes a connection, it does not.
func TestGoneNotice(t *testing.T) {
	a, b := newPair(t, 1, testKey)
	run(t, a)
	stopB := run(t, b)
	recv := func(what string) exo.Message {
		t.Helper()
		select {
		case m := <-a.Recv():
			return m
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: nothing arrived", what)
		}
		return exo.Message{}
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case m := <-a.Recv():
			t.Fatalf("%s: got %v", what, m)
		case <-time.After(300 * time.Millisecond):
		}
	}

	// B runs and closes its connection to A (as Reachable does with a
	// stuck one): A's probe finds B listening, and says nothing.
	b.Send(exo.Message{Type: exo.MsgFetch, From: 1, To: 0, Lo: 1})
	if m := recv("B's first message"); m.Type != exo.MsgFetch {
		t.Fatalf("got %v", m)
	}
	b.peers[0].conn.Load().Close()
	quiet("a live peer's connection closed")
	if st := a.Stats(); st.Gone != 0 {
		t.Fatalf("a live peer reported gone: %+v", st)
	}
	if st := b.Stats(); st.Refused != 2 {
		t.Fatalf("B counted %d refused connections, want A's 2 probes: %+v", st.Refused, st)
	}

	// B sends again (a new connection), then stops: A is told B is gone.
	b.Send(exo.Message{Type: exo.MsgFetch, From: 1, To: 0, Lo: 2})
	if m := recv("B's second message"); m.Type != exo.MsgFetch || m.Lo != 2 {
		t.Fatalf("got %v", m)
	}
	stopB()
	if m := recv("B stopped"); m.Type != exo.MsgGone || m.From != 1 || m.To != 0 {
		t.Fatalf("B stopped: got %v, want Gone from 1 to 0", m)
	}
	if st := a.Stats(); st.Gone != 1 {
		t.Fatalf("Stats().Gone = %d, want 1", st.Gone)
	}
}

// TestGoneFromTheWireRefused: a Gone notice is made by the receiving
// transport only; a peer that sends one is cut off.
func TestGoneFromTheWireRefused(t *testing.T) {
	a, b := pair(t, 1)
	wantRefused(t, a, b, exo.Message{Type: exo.MsgGone, From: 1, To: 0}, "from the wire")
}

// TestRedialOnInbound: a lane that waits between failed dials to a peer
// that was down dials again as soon as the peer, back, connects to this
// transport and proves the key, not after the wait (up to a second).
func TestRedialOnInbound(t *testing.T) {
	var logs syncBuffer
	a, err := New(Config{ID: 0, Group: 1, Listen: "127.0.0.1:0", Peers: map[uint8]string{}, Key: testKey,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// B's address, with nothing listening there: A's dials are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addrB := ln.Addr().String()
	ln.Close()
	a.peers[1] = newPeer(1, addrB, 16)
	run(t, a)
	// Messages to B, each a failed dial after a wait of 20, 40, ... 640
	// ms: the lane then waits a second before the next.
	deadline := time.Now().Add(10 * time.Second)
	for a.Stats().Dials < 7 {
		if time.Now().After(deadline) {
			t.Fatalf("A dialed %d times in 10 s", a.Stats().Dials)
		}
		a.Send(exo.Message{Type: exo.MsgFetch, From: 0, To: 1, Lo: 1})
		time.Sleep(5 * time.Millisecond)
	}
	b, err := New(Config{ID: 1, Group: 1, Listen: addrB, Peers: map[uint8]string{0: a.Addr().String()}, Key: testKey})
	if err != nil {
		t.Skipf("cannot listen on B's address again: %v", err)
	}
	run(t, b)
	b.Send(exo.Message{Type: exo.MsgFetch, From: 1, To: 0, Lo: 3}) // B dials A
	select {
	case m := <-a.Recv():
		if m.Lo != 3 {
			t.Fatalf("A got %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("B's message never reached A")
	}
	select {
	case <-b.Recv(): // one of A's messages queued since
	case <-time.After(5 * time.Second):
		t.Fatal("A's messages never reached B")
	}
	if !strings.Contains(logs.String(), "dial again at once") {
		t.Fatalf("A's lane dialed B after its wait, not when B connected; A's log:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStaleConnectionClosedOnInbound: when a peer whose daemon restarted
// connects again, this transport closes its own connection to the peer's
// old process (closed at the peer's end) before it sends anything on it:
// a lab member built a 4 MiB answer for a restarted host, 100 ms of work,
// and wrote it to such a connection (broken pipe), then built it again.
func TestStaleConnectionClosedOnInbound(t *testing.T) {
	a, b := newPair(t, 1, testKey)
	run(t, a)
	stopB := run(t, b)
	addrB := b.Addr().String()
	a.Send(exo.Message{Type: exo.MsgFetch, From: 0, To: 1, Lo: 1})
	select {
	case <-b.Recv():
	case <-time.After(5 * time.Second):
		t.Fatal("A's message never reached B")
	}
	stopB() // B's daemon ends: its end of A's connection closes
	b2, err := New(Config{ID: 1, Group: 1, Listen: addrB, Peers: map[uint8]string{0: a.Addr().String()}, Key: testKey})
	if err != nil {
		t.Skipf("cannot listen on B's address again: %v", err)
	}
	run(t, b2)
	b2.Send(exo.Message{Type: exo.MsgFetch, From: 1, To: 0, Lo: 2}) // B, back, dials A
	for {
		select {
		case m := <-a.Recv():
			if m.Type == exo.MsgGone {
				continue // B's end closed: A's probe found nothing listening
			}
			if m.Lo != 2 {
				t.Fatalf("A got %v", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("B's message never reached A")
		}
		break
	}
	if st := a.Stats(); st.Resets != 1 {
		t.Fatalf("A reset %d connections when B connected again, want its one to B's old process: %+v", st.Resets, st)
	}
	a.Send(exo.Message{Type: exo.MsgFetch, From: 0, To: 1, Lo: 3})
	select {
	case m := <-b2.Recv():
		if m.Lo != 3 {
			t.Fatalf("B got %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("A's message never reached B back")
	}
}

// TestFilledAnswersKeepTheirEntries: answers filled into the sender's
// reused scratch buffer (Config.Fill), many queued at once (the sender
// coalesces them), each arrive with their own entries: no answer is sent
// with a later one's bytes.
func TestFilledAnswersKeepTheirEntries(t *testing.T) {
	a, err := New(Config{ID: 0, Group: 1, Listen: "127.0.0.1:0", Peers: map[uint8]string{}, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	fill := func(m *exo.Message, scratch *[]byte) bool {
		n := 64<<10 + int(m.Start%7)<<10
		var p []byte
		if scratch != nil {
			if cap(*scratch) < n {
				*scratch = make([]byte, 0, n)
			}
			p = (*scratch)[:n]
		} else {
			p = make([]byte, n)
		}
		for i := range p {
			p[i] = byte(m.Start)
		}
		m.Entries = []exo.Entry{{Seq: m.Start, Sender: 1, Count: 1, Payload: p}}
		return true
	}
	b, err := New(Config{ID: 1, Group: 1, Listen: "127.0.0.1:0", Peers: map[uint8]string{0: a.Addr().String()}, Key: testKey, Fill: fill})
	if err != nil {
		t.Fatal(err)
	}
	a.peers[1] = newPeer(1, b.Addr().String(), 16)
	run(t, a)
	run(t, b)
	const n = 300
	for i := range n {
		b.Send(exo.Message{Type: exo.MsgFetchResp, From: 1, To: 0, Start: uint64(i), ArchiveHi: uint64(i) + 1})
	}
	for i := range n {
		select {
		case m := <-a.Recv():
			if m.Start != uint64(i) || len(m.Entries) != 1 {
				t.Fatalf("answer %d: got %v", i, m)
			}
			p := m.Entries[0].Payload
			if want := 64<<10 + i%7<<10; len(p) != want || bytes.Count(p, []byte{byte(i)}) != want {
				t.Fatalf("answer %d: %d payload bytes, %d of them its own (want %d)", i, len(p), bytes.Count(p, []byte{byte(i)}), want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("answer %d never arrived", i)
		}
	}
}
