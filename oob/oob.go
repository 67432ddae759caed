// Package oob carries the Exo core's out-of-band messages (gap repair,
// catch-up, view changes) between the hosts of a rack over TCP, on a network
// separate from the broadcast segment.
//
// Each message travels as one frame: a 4-byte big-endian length, then the
// message encoded with encoding/gob. A connection starts with a hello frame
// that names the sender's id and group. Outbound messages go through a
// bounded queue per peer, so a slow or dead peer never blocks the protocol
// loop (a full queue drops the message and counts it: the core retries what
// matters). Every connection starts with a mutual proof of the group key
// (HMAC-SHA256 over both sides' nonces): a host without the key, or outside
// the roster, gets nothing and is counted in Stats.Refused.
package oob

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/yield"
)

// Config configures a Transport.
type Config struct {
	ID     uint8
	Group  uint16
	Listen string           // address to listen on, e.g. 10.77.0.1:7700
	Peers  map[uint8]string // id -> address of every other host
	// MaxMessage bounds one encoded message (default 64 MiB).
	MaxMessage int
	// QueueLen bounds the messages waiting for one peer (default 1024).
	QueueLen int
	// Key is the group key: both ends of every connection prove they hold
	// it (HMAC-SHA256 challenge-response) before any message flows. At
	// least 16 bytes.
	Key []byte
	// DialTimeout bounds a dial (default 200 ms: the kernel answers a SYN
	// in microseconds on a rack; a SYN lost in a partition is sent again
	// only after a second, so a longer timeout kept a lane from dialing
	// anew that long after the heal).
	DialTimeout  time.Duration
	WriteTimeout time.Duration // default 2s, for each MiB of a message
	// BodyTimeout bounds the read of each MiB of a message once its
	// length has arrived (default 5s): a peer that stalls in the middle
	// of a message is cut off.
	BodyTimeout time.Duration
	// RTOMin and RTOMax bound TCP's retransmission timer on the OOB
	// connections (default 5 ms and 1 s; negative: the kernel's, 200 ms
	// and 120 s). A lost segment stalls every message behind it on its
	// connection until the timer fires, and the timer doubles after each
	// loss: with the kernel's bounds a connection that carried a message
	// into a partition delivered it, and everything queued after it,
	// seconds after the heal (the back-off had reached 3.2 s, 6.4 s, ...),
	// and a lossy link cost 200 ms a lost segment. A rack's round trip is
	// tens of microseconds: 5 ms is still far above it (the kernel rounds
	// it up to whole jiffies), and 1 s is the least ceiling it accepts.
	// The options exist from Linux 6.15 on; an older kernel keeps its
	// bounds (logged once).
	RTOMin, RTOMax time.Duration
	Logger         *slog.Logger
	// Fill fills a fetch answer whose entries the core left to the
	// application's archive (exo.Message.ArchiveHi set), in the peer's
	// sender goroutine, just before it is encoded: reading the retained
	// log never holds the caller's core. It returns false when the
	// entries are no longer there; the answer is then dropped (counted in
	// Stats.Dropped; the requester asks again). Without Fill such answers
	// are dropped. scratch is the sender's buffer for the entries read,
	// valid until the answer is encoded (wal.Reader.ReadInto): the sender
	// reuses it for its next.
	Fill func(m *exo.Message, scratch *[]byte) bool
	// YieldIf, if set, says whether a sender building or writing a large
	// message gives its P away after each slice of work (yield.Slicer's
	// Waiting: whether the protocol loop's frame waits); nil: it always
	// does.
	YieldIf func() bool
}

// Stats counts what a Transport did. Resets counts the connections
// Reachable closed; Gone the peers it reported gone (exo.MsgGone).
type Stats struct {
	Sent, Received, Dropped, Refused, Dials, BytesOut, BytesIn, Resets, Gone uint64
}

// Transport sends and receives OOB messages.
type Transport struct {
	cfg   Config
	ln    net.Listener
	in    chan exo.Message
	peers map[uint8]*peer
	log   *slog.Logger

	sent, received, dropped, refused, dials, bytesOut, bytesIn, resets, gone atomic.Uint64
	rtoNoted                                                                 atomic.Bool // the kernel's RTO bounds kept, logged

	// keys are the group keys: keys[0] is the one this host proves, every
	// one is accepted in a peer's proof (two during a key rotation).
	keys atomic.Pointer[[][]byte]

	// spare holds the buffers senders read and encode fetch answers
	// into, reused once written: an answer is megabytes, and new buffers
	// for each cost the serving host their zeroing, page faults (on this
	// machine's virtual CPUs, 40 ms for one 4 MiB buffer) and collections
	// (docs/recovery.md). A channel rather than a sync.Pool: a collection
	// empties a pool, and the serving host collects every few answers.
	spare chan *[]byte
}

// spareBuffers is how many buffers a Transport keeps (each at most
// maxPooled bytes): two senders' answers at once.
const spareBuffers = 4

// SetKeys replaces the group keys: primary is the one this host proves
// (the key it sends frames under), others are accepted from peers as well
// (a key rotation's other key). Connections already open stay open.
func (t *Transport) SetKeys(primary []byte, others ...[]byte) error {
	ks := [][]byte{primary}
	for _, k := range others {
		if len(k) > 0 {
			ks = append(ks, k)
		}
	}
	for _, k := range ks {
		if len(k) < 16 {
			return fmt.Errorf("oob: a group key must have at least 16 bytes (got %d)", len(k))
		}
	}
	t.keys.Store(&ks)
	return nil
}

// matchKey returns the first of this host's keys under which mac is the
// proof fn computes, or nil.
func (t *Transport) matchKey(mac []byte, fn func(key []byte) []byte) []byte {
	for _, k := range t.keyList() {
		if hmac.Equal(mac, fn(k)) {
			return k
		}
	}
	return nil
}

func (t *Transport) primary() []byte { return t.keyList()[0] }

// keyList returns the keys: Config.Key until SetKeys.
func (t *Transport) keyList() [][]byte {
	if ks := t.keys.Load(); ks != nil {
		return *ks
	}
	return [][]byte{t.cfg.Key}
}

type peer struct {
	id   uint8
	addr string
	q    chan exo.Message
	// conn is the lane's open connection (nil: none), for Reachable.
	conn atomic.Pointer[net.TCPConn]
	// redial cuts the lane's wait between failed dials short (Reachable).
	redial chan struct{}
	// waiting: the lane waits to dial again after a failed dial.
	waiting atomic.Bool
	// redialed is when Reachable last cut that wait short (unix ns).
	redialed atomic.Int64
	// heard is when Reachable last looked at the peer's lanes (unix ns).
	heard atomic.Int64
	// bulk is the peer's second lane: fetch answers (up to fetch_bytes,
	// megabytes) go on a connection of their own, so that a view
	// change's Prepare, Promise or Install never waits behind them.
	bulk *peer
}

// newPeer returns peer id at addr with its two lanes, each queueing qlen
// messages.
func newPeer(id uint8, addr string, qlen int) *peer {
	return &peer{id: id, addr: addr, q: make(chan exo.Message, qlen), redial: make(chan struct{}, 1),
		bulk: &peer{id: id, addr: addr, q: make(chan exo.Message, qlen), redial: make(chan struct{}, 1)}}
}

// hello opens a connection (dialer -> listener) and answers it (listener
// -> dialer): each side proves it holds the group key by a MAC over both
// nonces, so neither side talks to a host outside the group.
type hello struct {
	ID    uint8
	Group uint16
	Nonce []byte
	MAC   []byte // listener's answer: proof over the dialer's nonce
}

// auth completes the handshake (dialer -> listener).
type auth struct {
	MAC []byte
}

// proof is HMAC-SHA256(key, role | group | from | to | nonces).
func proof(key []byte, role string, group uint16, from, to uint8, n1, n2 []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("exo-oob-v1 " + role))
	m.Write([]byte{byte(group >> 8), byte(group), from, to})
	m.Write(n1)
	m.Write(n2)
	return m.Sum(nil)
}

func nonce() []byte {
	b := make([]byte, 16)
	rand.Read(b)
	return b
}

// New listens on cfg.Listen and returns a Transport; Run starts it.
func New(cfg Config) (*Transport, error) {
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = 64 << 20
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = 1024
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 200 * time.Millisecond
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 2 * time.Second
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = 5 * time.Second
	}
	if cfg.RTOMin == 0 {
		cfg.RTOMin = 5 * time.Millisecond
	}
	if cfg.RTOMax == 0 {
		cfg.RTOMax = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Key) < 16 {
		return nil, fmt.Errorf("oob: the group key must have at least 16 bytes (got %d): OOB connections are never anonymous", len(cfg.Key))
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("oob: listen on %s: %w", cfg.Listen, err)
	}
	t := &Transport{cfg: cfg, ln: ln, in: make(chan exo.Message, 4096), peers: map[uint8]*peer{}, log: cfg.Logger, spare: make(chan *[]byte, spareBuffers)}
	for id, addr := range cfg.Peers {
		if id == cfg.ID {
			continue
		}
		t.peers[id] = newPeer(id, addr, cfg.QueueLen)
	}
	return t, nil
}

// errRTOUnsupported: the kernel does not let a socket bound its
// retransmission timer.
var errRTOUnsupported = errors.New("the kernel does not support TCP_RTO_MIN_US/TCP_RTO_MAX_MS (Linux 6.15 or later)")

// control bounds the retransmission timer of a connection's socket: every
// one the Transport dials, before it connects, and every one it accepts
// (boundAccepted; a listening socket refuses the options with ENOPROTOOPT,
// and an accepted one would not inherit them). A kernel without the
// options keeps its own, logged once: the connections work, they recover
// from a loss more slowly.
func (t *Transport) control(network, address string, c syscall.RawConn) error {
	var err error
	if cerr := c.Control(func(fd uintptr) { err = setRTO(fd, t.cfg.RTOMin, t.cfg.RTOMax) }); cerr != nil {
		return cerr
	}
	switch {
	case errors.Is(err, errRTOUnsupported):
		if !t.rtoNoted.Swap(true) {
			t.log.Warn("oob: TCP's retransmission timer keeps the kernel's bounds", "err", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("oob: bound the retransmission timer (%v, %v): %w", t.cfg.RTOMin, t.cfg.RTOMax, err)
	}
	return nil
}

// boundAccepted bounds the retransmission timer of an accepted connection,
// as control does the sockets the Transport opens.
func (t *Transport) boundAccepted(c net.Conn) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return fmt.Errorf("oob: %w", err)
	}
	return t.control("tcp", c.LocalAddr().String(), raw)
}

// Addr returns the address the Transport listens on.
func (t *Transport) Addr() net.Addr { return t.ln.Addr() }

// Recv returns the channel of received messages.
func (t *Transport) Recv() <-chan exo.Message { return t.in }

// Send queues m for m.To; it never blocks.
func (t *Transport) Send(m exo.Message) {
	p, ok := t.peers[m.To]
	if !ok {
		t.dropped.Add(1)
		return
	}
	if m.Type == exo.MsgFetchResp {
		p = p.bulk
	}
	select {
	case p.q <- m:
	default:
		t.dropped.Add(1)
	}
}

// Stats returns the counters.
func (t *Transport) Stats() Stats {
	return Stats{Sent: t.sent.Load(), Received: t.received.Load(), Dropped: t.dropped.Load(),
		Refused: t.refused.Load(), Dials: t.dials.Load(), BytesOut: t.bytesOut.Load(), BytesIn: t.bytesIn.Load(),
		Resets: t.resets.Load(), Gone: t.gone.Load()}
}

// reachableEvery bounds how often Reachable looks at one peer's
// connections (a TCP_INFO read each).
const reachableEvery = 10 * time.Millisecond

// Reachable tells the Transport that host id was heard from just now: a
// frame of its came on the broadcast segment. A connection to it whose
// retransmissions back off (a segment unacknowledged through two timeouts
// or more, Linux's TCP_INFO) is closed, a lane to it that waits to dial
// again after a failed dial dials at once (at most once a second), and
// then the stuck connections to the other hosts are closed too: each
// sender dials anew at its next message, now that the network carries
// frames again, instead of waiting for the next retransmission, up to
// RTOMax away, behind which every later message on that connection
// queues. What
// the closed connection had not delivered is lost, as any OOB message may
// be (the core sends again what matters: its fetches, its view changes);
// after a partition it is mostly stale (Prepares of view changes that
// have since been retried). Cheap enough for every frame: it looks at a
// peer at most once every reachableEvery.
func (t *Transport) Reachable(id uint8) {
	p := t.peers[id]
	if p == nil {
		return
	}
	now := time.Now().UnixNano()
	last := p.heard.Load()
	if now-last < int64(reachableEvery) || !p.heard.CompareAndSwap(last, now) {
		return
	}
	if !t.reset(p, now) {
		return
	}
	// A partition healed, most likely: the connections to the other
	// hosts stuck behind it are reset too, before their frames come (a
	// lab host's first view change after a heal reached one host of
	// three, whose frame had come first, and failed). Their lanes that
	// wait between failed dials keep waiting: only a host heard is
	// dialed at once.
	for _, q := range t.peers {
		if q != p {
			t.reset(q, 0)
		}
	}
}

// redialEvery bounds how often Reachable cuts one lane's wait between
// failed dials short: a host heard through a one-way cut (its frames come,
// a SYN to it is lost) would otherwise be dialed every DialTimeout.
const redialEvery = time.Second

// reset closes p's connections whose retransmissions back off and, with
// now (unix ns) set, cuts short the waits of its lanes between failed
// dials (at most once every redialEvery a lane), and says whether it did
// either.
func (t *Transport) reset(p *peer, now int64) bool {
	did := false
	for _, l := range [2]*peer{p, p.bulk} {
		if last := l.redialed.Load(); now != 0 && l.waiting.Load() && now-last >= int64(redialEvery) && l.redialed.CompareAndSwap(last, now) {
			select {
			case l.redial <- struct{}{}:
				did = true
			default:
			}
		}
		c := l.conn.Load()
		if c == nil || !retransmitting(c) {
			continue
		}
		if l.conn.CompareAndSwap(c, nil) {
			c.Close() // the sender's next write fails and it dials anew
			t.resets.Add(1)
			did = true
			t.log.Info("oob connection reset: its retransmissions backed off (the network carries frames again) or its peer closed it (the peer's daemon restarted)", "peer", p.id)
		}
	}
	return did
}

// waitRedial waits backoff before lane p dials again after a failed dial,
// or less when Reachable says its peer is heard again; false when ctx
// ends. During a partition a lane's waits grow to a second: after the heal
// the next dial came up to that much later.
func (t *Transport) waitRedial(ctx context.Context, p *peer, backoff time.Duration) bool {
	select {
	case <-p.redial: // a signal from before this wait is stale
	default:
	}
	p.waiting.Store(true)
	defer p.waiting.Store(false)
	tm := time.NewTimer(backoff)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
	case <-p.redial:
		t.log.Info("oob dial again at once: the peer is heard again", "peer", p.id)
	}
	return true
}

// retransmitting reports whether c has a segment unacknowledged through
// two retransmission timeouts or more, or its peer closed it: either way
// nothing written to it arrives.
func retransmitting(c *net.TCPConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var stuck bool
	raw.Control(func(fd uintptr) { stuck = backedOff(fd) })
	return stuck
}

// Run serves until ctx is done.
func (t *Transport) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, p := range t.peers {
		wg.Add(2)
		go func() { defer wg.Done(); t.sender(ctx, p) }()
		go func() { defer wg.Done(); t.sender(ctx, p.bulk) }()
	}
	go func() { <-ctx.Done(); t.ln.Close() }()
	var conns sync.Map
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			t.log.Warn("oob accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err := t.boundAccepted(c); err != nil {
			t.log.Warn("oob accept", "remote", c.RemoteAddr(), "err", err)
			c.Close()
			continue
		}
		conns.Store(c, true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conns.Delete(c)
			if err := t.serve(ctx, c); err != nil && ctx.Err() == nil {
				t.log.Info("oob connection closed", "remote", c.RemoteAddr(), "reason", err)
			}
		}()
	}
	conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	wg.Wait()
	return nil
}

// serve reads the frames of one inbound connection.
func (t *Transport) serve(ctx context.Context, c net.Conn) error {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	var h hello
	if err := t.readFrame(r, nil, &h); err != nil {
		t.refused.Add(1)
		return fmt.Errorf("hello: %w", err)
	}
	if h.Group != t.cfg.Group {
		t.refused.Add(1)
		return fmt.Errorf("peer says group %d, ours is %d", h.Group, t.cfg.Group)
	}
	if _, ok := t.peers[h.ID]; !ok {
		t.refused.Add(1)
		return fmt.Errorf("peer id %d is not in the roster", h.ID)
	}
	ours := nonce()
	reply, _ := encodeFrame(hello{ID: t.cfg.ID, Group: t.cfg.Group, Nonce: ours,
		MAC: proof(t.primary(), "listener", t.cfg.Group, t.cfg.ID, h.ID, h.Nonce, ours)})
	c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
	if _, err := c.Write(reply); err != nil {
		return fmt.Errorf("hello reply: %w", err)
	}
	var a auth
	if err := t.readFrame(r, nil, &a); err != nil {
		t.refused.Add(1)
		return fmt.Errorf("auth: %w", err)
	}
	if t.matchKey(a.MAC, func(k []byte) []byte { return proof(k, "dialer", t.cfg.Group, h.ID, t.cfg.ID, ours, h.Nonce) }) == nil {
		t.refused.Add(1)
		return fmt.Errorf("peer %d failed the group-key proof: refused", h.ID)
	}
	c.SetReadDeadline(time.Time{})
	// The peer dialed this host and proved the key: it runs, and TCP
	// between the two works both ways. This host's lanes to it that wait
	// between failed dials (it was down: a restart) dial at once, and its
	// connections to the peer's previous process (closed at the peer's
	// end) are closed before anything is built for them: a lab host
	// restarted after 60 s down got the answers to its first fetches only
	// 230 ms later, its members' lanes to it waiting up to a second, and
	// a member built a 4 MiB answer (100 ms) for such a connection, then
	// again for a new one.
	t.reset(t.peers[h.ID], time.Now().UnixNano())
	for {
		var m exo.Message
		if err := t.readFrame(r, c, &m); err != nil {
			if ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
				t.probeGone(ctx, h.ID)
			}
			return err
		}
		if m.Type == exo.MsgGone {
			t.refused.Add(1)
			return fmt.Errorf("peer %d sent a Gone notice, which only this host's transport makes", h.ID)
		}
		if m.From != h.ID || m.To != t.cfg.ID {
			t.refused.Add(1)
			return fmt.Errorf("message from %d to %d on the connection of %d", m.From, m.To, h.ID)
		}
		t.received.Add(1)
		select {
		case t.in <- m:
		case <-ctx.Done():
			return nil
		}
	}
}

// probeGone tells whether peer id's process is gone, once a connection
// from it ended (its end closed or reset): it dials the peer's OOB
// address, and a dial refused (nothing listens there: the peer's kernel
// closed its sockets, a kill -9 or a stop) is reported to the core as
// exo.MsgGone from the peer, for the token to be taken over from it at
// once (exo.Config.GoneTicks). A dial that connects (the peer runs: it
// closed a connection it found stuck) or times out (a partition, a
// machine down: the token timeout's case) reports nothing; the peer
// counts such a probe, which says nothing, as a refused connection.
func (t *Transport) probeGone(ctx context.Context, id uint8) {
	p, ok := t.peers[id]
	if !ok {
		return
	}
	d := net.Dialer{Timeout: t.cfg.DialTimeout}
	var err error
	for try := 0; ; try++ {
		var c net.Conn
		if c, err = d.DialContext(ctx, "tcp", p.addr); err != nil {
			break
		}
		c.Close()
		if try == 1 {
			return // it listens: it runs
		}
		// A process that stops may close its connections before its
		// listener: look again a moment later.
		select {
		case <-time.After(goneRecheck):
		case <-ctx.Done():
			return
		}
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return
	}
	t.gone.Add(1)
	t.log.Info("oob: a peer's process is gone (its connection ended, a dial to it refused)", "peer", id, "addr", p.addr)
	select {
	case t.in <- exo.Message{Type: exo.MsgGone, From: id, To: t.cfg.ID}:
	case <-ctx.Done():
	}
}

// goneRecheck is how long probeGone waits before it dials a peer that
// answered its first dial again.
const goneRecheck = 5 * time.Millisecond

// ErrTooLarge is returned for a frame above Config.MaxMessage.
var ErrTooLarge = errors.New("oob: message too large")

// readFrame reads one frame; with c set, each MiB of the body must arrive
// within Config.BodyTimeout (an idle connection between messages is fine).
func (t *Transport) readFrame(r *bufio.Reader, c net.Conn, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	limit := int64(t.cfg.MaxMessage)
	switch v.(type) {
	case *hello, *auth:
		// A peer that has proved nothing gets a few dozen bytes.
		limit = maxHandshakeFrame
	}
	if int64(n) > limit {
		return fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	buf := make([]byte, n)
	if c != nil {
		defer c.SetReadDeadline(time.Time{})
	}
	// In chunks, each within BodyTimeout: a large message (a log for a
	// host far behind) may take longer than that as a whole on a busy
	// machine, but it must keep coming.
	for off := 0; off < len(buf); {
		end := min(off+progressChunk, len(buf))
		if c != nil {
			c.SetReadDeadline(time.Now().Add(t.cfg.BodyTimeout))
		}
		if _, err := io.ReadFull(r, buf[off:end]); err != nil {
			return fmt.Errorf("reading a %d-byte message (%d bytes in): %w", n, off, err)
		}
		off = end
	}
	t.bytesIn.Add(uint64(n) + 4)
	if err := decodeBody(buf, v); err != nil {
		return fmt.Errorf("oob: decode: %w", err)
	}
	return nil
}

// progressChunk is the part of a message that must go through within one
// timeout: the deadlines of a large message's read and write move on with
// each chunk.
const progressChunk = 1 << 20

// progressWriter writes to c with a deadline for each progressChunk bytes
// (a peer that stops reading is cut off; one that reads a large message
// slowly is not), in pieces of sliceBytes, giving its slicer (nil: none) a
// chance to yield between them.
type progressWriter struct {
	c       net.Conn
	timeout time.Duration
	slicer  *yield.Slicer
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if n > 0 && p.slicer != nil {
			p.slicer.Maybe()
		}
		end := min(n+sliceBytes, len(b))
		if n%progressChunk == 0 { // (a Write writes all of a piece, or fails)
			p.c.SetWriteDeadline(time.Now().Add(p.timeout))
		}
		k, err := p.c.Write(b[n:end])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// maxHandshakeFrame bounds a hello or an auth frame's body (the largest
// the transport sends, a hello with its 16-byte nonce and 32-byte MAC, is
// 54 bytes).
const maxHandshakeFrame = 256

// The handshake's frames have a fixed binary layout, never gob: nothing
// an unauthenticated peer sends goes through a general decoder.
//
//	hello: 'H' id u8, group u16 BE, nonce_len u8, nonce, mac_len u8, mac
//	auth:  'A' mac_len u8, mac
func (h *hello) marshal() []byte {
	b := []byte{'H', h.ID, byte(h.Group >> 8), byte(h.Group), byte(len(h.Nonce))}
	b = append(b, h.Nonce...)
	b = append(b, byte(len(h.MAC)))
	return append(b, h.MAC...)
}

func (h *hello) unmarshal(b []byte) error {
	if len(b) < 5 || b[0] != 'H' {
		return errors.New("not a hello")
	}
	h.ID, h.Group = b[1], uint16(b[2])<<8|uint16(b[3])
	nl := int(b[4])
	if len(b) < 5+nl+1 {
		return errors.New("hello: short nonce")
	}
	h.Nonce = append([]byte(nil), b[5:5+nl]...)
	ml := int(b[5+nl])
	if len(b) != 5+nl+1+ml {
		return errors.New("hello: bad length")
	}
	h.MAC = append([]byte(nil), b[6+nl:]...)
	return nil
}

func (a *auth) marshal() []byte { return append([]byte{'A', byte(len(a.MAC))}, a.MAC...) }

func (a *auth) unmarshal(b []byte) error {
	if len(b) < 2 || b[0] != 'A' || len(b) != 2+int(b[1]) {
		return errors.New("not an auth")
	}
	a.MAC = append([]byte(nil), b[2:]...)
	return nil
}

// decodeBody decodes one frame's body into v: the handshake's fixed
// layouts, gob for messages.
func decodeBody(buf []byte, v any) error {
	switch v := v.(type) {
	case *hello:
		return v.unmarshal(buf)
	case *auth:
		return v.unmarshal(buf)
	}
	if m, ok := v.(*exo.Message); ok {
		return decodeMessage(buf, m)
	}
	return gob.NewDecoder(bytes.NewReader(buf)).Decode(v)
}

// A message's body is its fields but the entries in gob, then the entries
// in their binary form (exo.Entry.AppendBinary), which costs a tenth of
// gob's reflection for a log batch (a catch-up moves many):
//
//	gob_len u32 BE, gob(Message without Entries), count u32 BE, entries
//
// It appends to b, grown once to the whole message's size; s (nil: never)
// is given a chance to yield every sliceBytes of entries.
func encodeMessage(b []byte, m *exo.Message, s *yield.Slicer) ([]byte, error) {
	var g bytes.Buffer
	head := *m
	head.Entries = nil
	if err := gob.NewEncoder(&g).Encode(&head); err != nil {
		return nil, err
	}
	if need := 8 + g.Len() + messageSize(m); cap(b)-len(b) < need {
		// Not slices.Grow: it zeroes the whole new buffer at once, and on
		// memory new to the heap that is every page's fault in one go
		// (tens of milliseconds for 4 MiB on the lab's virtual CPUs, the
		// P held); make does not zero memory new to the heap (the
		// kernel's pages are zero), whose pages then fault as the
		// encoding below touches them, slice by slice.
		nb := make([]byte, len(b), len(b)+need)
		copy(nb, b)
		b = nb
	}
	b = binary.BigEndian.AppendUint32(b, uint32(g.Len()))
	b = append(b, g.Bytes()...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Entries)))
	mark := len(b)
	for i := range m.Entries {
		var err error
		if b, err = m.Entries[i].AppendBinary(b); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if s != nil && len(b)-mark >= sliceBytes {
			s.Maybe()
			mark = len(b)
		}
	}
	return b, nil
}

// sliceBytes is the piece of a large message a sender encodes or writes
// between chances to yield its P to the protocol loop (package yield):
// a fraction of a millisecond of work.
const sliceBytes = 256 << 10

// sliceEvery is how long a sender works on large messages before it
// yields (yield.Slicer).
const sliceEvery = time.Millisecond

// maxPooled bounds a buffer put back in Transport.spare (larger ones, a
// view change's install of a long suffix, go to the collector).
const maxPooled = 8 << 20

// buffer returns a spare buffer, or a new one.
func (t *Transport) buffer() *[]byte {
	select {
	case b := <-t.spare:
		return b
	default:
		return new([]byte)
	}
}

// release keeps a sender's buffer for the next, unless it is too big or
// enough are kept.
func (t *Transport) release(b *[]byte) {
	if cap(*b) > maxPooled {
		return
	}
	select {
	case t.spare <- b:
	default:
	}
}

// encodeMessageFrame encodes m as one frame (length, body) into the
// pooled buffer *buf, yielding through s; the frame is valid until *buf
// is reused.
func encodeMessageFrame(buf *[]byte, m *exo.Message, s *yield.Slicer) ([]byte, error) {
	out, err := encodeMessage(append((*buf)[:0], 0, 0, 0, 0), m, s)
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	*buf = out
	return out, nil
}

// decodeMessage decodes a message body; its entries alias buf (a buffer
// of its own per message).
func decodeMessage(buf []byte, m *exo.Message) error {
	if len(buf) < 4 {
		return errors.New("message shorter than its header")
	}
	gl := binary.BigEndian.Uint32(buf)
	if uint64(gl) > uint64(len(buf)-4) {
		return fmt.Errorf("message fields of %d bytes in a %d-byte body", gl, len(buf))
	}
	if err := gob.NewDecoder(bytes.NewReader(buf[4 : 4+gl])).Decode(m); err != nil {
		return err
	}
	rest := buf[4+gl:]
	if len(rest) < 4 {
		return errors.New("message without its entry count")
	}
	count := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(count) > uint64(len(rest)) {
		return fmt.Errorf("%d entries in %d bytes", count, len(rest))
	}
	m.Entries = nil
	if count > 0 {
		m.Entries = make([]exo.Entry, 0, count)
	}
	for i := uint32(0); i < count; i++ {
		e, r, err := exo.DecodeEntry(rest)
		if err != nil {
			return fmt.Errorf("entry %d of %d: %w", i, count, err)
		}
		m.Entries, rest = append(m.Entries, e), r
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d bytes after the entries", len(rest))
	}
	return nil
}

func encodeFrame(v any) ([]byte, error) {
	var body []byte
	switch v := v.(type) {
	case hello:
		body = v.marshal()
	case auth:
		body = v.marshal()
	}
	if body != nil {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...), nil
	}
	var out []byte
	if m, ok := v.(*exo.Message); ok {
		var err error
		if out, err = encodeMessage(make([]byte, 4), m, nil); err != nil {
			return nil, err
		}
	} else {
		var b bytes.Buffer
		b.Write([]byte{0, 0, 0, 0})
		if err := gob.NewEncoder(&b).Encode(v); err != nil {
			return nil, err
		}
		out = b.Bytes()
	}
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

// messageSize is the size of m's entries in their binary form.
func messageSize(m *exo.Message) int {
	n := 4
	for i := range m.Entries {
		n += m.Entries[i].BinarySize()
	}
	return n
}

const handshakeTimeout = 2 * time.Second

// handshake proves the group key to the listener and checks its proof.
func (t *Transport) handshake(c net.Conn, peer uint8) error {
	ours := nonce()
	b, _ := encodeFrame(hello{ID: t.cfg.ID, Group: t.cfg.Group, Nonce: ours})
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(b); err != nil {
		return err
	}
	var h hello
	if err := t.readFrame(bufio.NewReaderSize(c, 512), nil, &h); err != nil {
		return fmt.Errorf("no hello reply: %w", err)
	}
	var key []byte
	if h.ID == peer && h.Group == t.cfg.Group {
		key = t.matchKey(h.MAC, func(k []byte) []byte { return proof(k, "listener", t.cfg.Group, peer, t.cfg.ID, ours, h.Nonce) })
	}
	if key == nil {
		return fmt.Errorf("host at this address failed the group-key proof (says id %d group %d)", h.ID, h.Group)
	}
	// Prove the key the listener proved (of a rotation's two keys, the
	// one both hold).
	b, _ = encodeFrame(auth{MAC: proof(key, "dialer", t.cfg.Group, t.cfg.ID, peer, h.Nonce, ours)})
	_, err := c.Write(b)
	return err
}

// sender keeps a connection to one peer and writes its queue to it,
// reconnecting with back-off.
// fill readies m for encoding: an answer left to the archive is filled
// (Config.Fill, its entries read into scratch), once; false drops it.
func (t *Transport) fill(m *exo.Message, scratch *[]byte) bool {
	if m.ArchiveHi == 0 {
		return true
	}
	if t.cfg.Fill == nil || !t.cfg.Fill(m, scratch) {
		t.dropped.Add(1)
		return false
	}
	m.ArchiveHi = 0
	return true
}

func (t *Transport) sender(ctx context.Context, p *peer) {
	var c net.Conn
	var w *bufio.Writer
	// The sender's bulk work (a fetch answer's encoding and writing)
	// yields its P now and then to the protocol loop (package yield).
	slicer := &yield.Slicer{Every: sliceEvery, Waiting: t.cfg.YieldIf}
	backoff := 20 * time.Millisecond
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for {
		var m exo.Message
		select {
		case <-ctx.Done():
			return
		case m = <-p.q:
		}
		// An answer's entries are read into scratch and encoded into buf
		// (both kept for the next message, spare), for every attempt:
		// m's entries alias scratch once it is filled.
		scratch, buf := t.buffer(), t.buffer()
		for attempt := 0; attempt < 2; attempt++ {
			if c == nil {
				d := net.Dialer{Timeout: t.cfg.DialTimeout, Control: t.control}
				conn, err := d.DialContext(ctx, "tcp", p.addr)
				t.dials.Add(1)
				if err != nil {
					t.dropped.Add(1)
					if !t.waitRedial(ctx, p, backoff) {
						return
					}
					backoff = min(2*backoff, time.Second)
					break
				}
				if err := t.handshake(conn, p.id); err != nil {
					t.log.Warn("oob handshake refused", "peer", p.id, "addr", p.addr, "err", err)
					conn.Close()
					t.dropped.Add(1)
					if !t.waitRedial(ctx, p, backoff) {
						return
					}
					backoff = min(2*backoff, time.Second)
					break
				}
				backoff = 20 * time.Millisecond
				c, w = conn, bufio.NewWriter(&progressWriter{c: conn, timeout: t.cfg.WriteTimeout, slicer: slicer})
				if tc, ok := conn.(*net.TCPConn); ok {
					p.conn.Store(tc)
				}
			}
			began := time.Now()
			if !t.fill(&m, scratch) {
				break
			}
			b, err := encodeMessageFrame(buf, &m, slicer)
			if err != nil {
				t.log.Error("oob encode", "err", err)
				break
			}
			size := len(b)
			if size-4 > t.cfg.MaxMessage {
				t.log.Warn("oob message too large, dropped", "type", m.Type, "bytes", size)
				t.dropped.Add(1)
				break
			}
			_, err = w.Write(b) // (b is written or copied into w when Write returns)
			// Coalesce whatever else is queued into one flush.
			for err == nil && len(p.q) > 0 {
				m2 := <-p.q
				if !t.fill(&m2, nil) { // (not scratch: m's entries, kept for a retry)
					continue
				}
				var b2 []byte
				if b2, err = encodeMessageFrame(buf, &m2, slicer); err == nil {
					_, err = w.Write(b2)
					t.sent.Add(1)
					t.bytesOut.Add(uint64(len(b2)))
				}
			}
			if err == nil {
				err = w.Flush()
			}
			if err == nil {
				t.sent.Add(1)
				t.bytesOut.Add(uint64(size))
				if m.Type == exo.MsgFetchResp {
					t.log.Debug("fetch answer written", "to", p.id, "start", m.Start, "entries", len(m.Entries), "bytes", size, "took", time.Since(began))
				}
				break
			}
			c.Close()
			p.conn.Store(nil)
			c, w = nil, nil
		}
		t.release(scratch)
		t.release(buf)
	}
}
