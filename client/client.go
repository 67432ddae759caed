package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"
)

// Position is where a message sits in the agreed order: the entry's
// sequence number and the message's index inside that entry.
type Position struct {
	Seq   uint64
	Index uint16
}

// Message is one agreed message.
type Message struct {
	Position
	Sender  uint8
	Payload []byte
}

// Client is a connection to a daemon's local API. Publish may be called
// from several goroutines; the replies are matched by request id.
type Client struct {
	conn  net.Conn
	r     *bufio.Reader
	hello Hello // what the daemon said of itself at Dial

	// Requests are encoded into out under wmu; one writer at a time
	// (flushing) writes it out, outside the lock, and goes on while
	// others added more: concurrent publishes share a write.
	wmu      sync.Mutex
	out      *bytes.Buffer
	spare    *bytes.Buffer
	flushing bool
	werr     error // the first write error: the connection is closed

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]waiter
	status  chan []byte
	err     error
	done    chan struct{}
}

// waiter is a request waiting for its answer: a single one (one) or a
// batch of n messages (batch).
type waiter struct {
	one   chan Ack
	batch chan BatchAck
	n     int
}

// BatchAck is the outcome of an asynchronous batch publish: one Ack per
// message, in the order of the batch; or, when the batch failed as a whole
// (refused: ErrQueueFull, none of it was queued; ErrTooLarge, it needs
// more than the daemon's whole queue; ErrShuttingDown; the connection
// failed), Err and no Acks.
type BatchAck struct {
	Acks []Ack
	Err  error
}

// Dial connects to the daemon's Unix socket.
func Dial(ctx context.Context, socket string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("connect to exo daemon at %s: %w (is the daemon running?)", socket, err)
	}
	cl := &Client{conn: c, r: bufio.NewReaderSize(c, 64<<10), out: new(bytes.Buffer), spare: new(bytes.Buffer),
		waiting: map[uint64]waiter{}, status: make(chan []byte, 1), done: make(chan struct{})}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	cl.hello, err = hello(c, cl.r, socket, "exo-go")
	if !stop() || err != nil {
		c.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	}
	go cl.readLoop()
	return cl, nil
}

// Hello returns what the daemon said of itself when the connection began:
// its API version and the features it serves.
func (c *Client) Hello() Hello { return c.hello }

// Close closes the connection; pending calls fail.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) readLoop() {
	defer close(c.done)
	var buf []byte
	var said *APIError // an Error with request id 0: what the daemon said before it closed
	for {
		typ, body, b, err := ReadFrame(c.r, buf)
		buf = b
		if err != nil {
			if said != nil {
				err = fmt.Errorf("%w (the daemon said: %w)", err, said)
			}
			c.fail(fmt.Errorf("exo daemon connection: %w", err))
			return
		}
		r, err := parseReply(typ, body)
		if err != nil {
			c.fail(err)
			return
		}
		switch typ {
		case TypePublished:
			c.finish(r.id, Ack{Pos: r.pos})
		case TypeError:
			if r.id != 0 {
				c.finish(r.id, Ack{Err: r.err})
			} else {
				said = r.err // a request it could not parse: it closes the connection
			}
		case TypePublishedBatch:
			c.finishBatch(r.id, r.acks)
		case TypeRosterQueued, TypeKeyDone, TypeLossAccepted:
			c.finish(r.id, Ack{})
		case TypeStatusReply:
			select {
			case c.status <- append([]byte(nil), r.json...):
			default:
			}
		default: // Message, HelloReply: no reply to a publishing connection's requests
			c.fail(fmt.Errorf("%w: unexpected type %#x", ErrFrame, typ))
			return
		}
	}
}

func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	for id, w := range c.waiting {
		w.answer(Ack{Err: err})
		delete(c.waiting, id)
	}
}

// answer delivers a single answer (a batch takes it as the batch's
// outcome: an error, the batch refused as a whole).
func (w waiter) answer(r Ack) {
	if w.batch == nil {
		w.one <- r
		return
	}
	if r.Err == nil {
		r.Err = fmt.Errorf("%w: a single answer to a publish batch", ErrFrame)
	}
	w.batch <- BatchAck{Err: r.Err}
}

func (c *Client) take(id uint64) (waiter, bool) {
	c.mu.Lock()
	w, ok := c.waiting[id]
	delete(c.waiting, id)
	c.mu.Unlock()
	return w, ok
}

func (c *Client) finish(id uint64, r Ack) {
	if w, ok := c.take(id); ok {
		w.answer(r)
	}
}

func (c *Client) finishBatch(id uint64, acks []Ack) {
	w, ok := c.take(id)
	switch {
	case !ok:
	case w.batch == nil:
		w.one <- Ack{Err: fmt.Errorf("%w: a batch answer to a single request", ErrFrame)}
	case len(acks) != w.n:
		w.batch <- BatchAck{Err: fmt.Errorf("%w: %d results for a batch of %d messages", ErrFrame, len(acks), w.n)}
	default:
		w.batch <- BatchAck{Acks: acks}
	}
}

// Publish broadcasts payload and returns its position once it is agreed.
// Errors: ErrQueueFull (back off, retry), ErrTooLarge, ErrDropped (removed
// by a reconciliation before it was agreed: retry), ErrShuttingDown.
func (c *Client) Publish(ctx context.Context, payload []byte) (Position, error) {
	ch, err := c.PublishAsync(payload)
	if err != nil {
		return Position{}, err
	}
	select {
	case r := <-ch:
		return r.Pos, r.Err
	case <-ctx.Done():
		return Position{}, ctx.Err()
	}
}

// Membership operations of ProposeRoster.
const (
	RosterAdd    uint8 = 1
	RosterRemove uint8 = 2
)

// ProposeRoster asks the daemon to propose a membership change: add
// (RosterAdd) or remove (RosterRemove) the member with that stable id. It
// returns once the change is queued; the roster in the status shows when it
// took effect. Errors: ErrChangeInFlight (one change at a time), ErrBadChange
// (not applicable: adding a member, removing a non-member, a member unknown
// to the daemon's config, asking a host that is no member).
func (c *Client) ProposeRoster(ctx context.Context, op, member uint8) error {
	return c.request(ctx, TypeRoster, []byte{op, member})
}

// AcceptLoss asks the daemon to resolve the view change it leads, which
// waits on what only hosts that lost their state could decide, without
// them: the operator's way out (exo recover --accept-loss). from and to are
// the doubt its status shows (recovery.view_change.doubt); the daemon
// refuses (ErrNotStalled) if it leads no such view change or its doubt is
// another one now. Entries agreed at positions from..to-1 may be lost.
func (c *Client) AcceptLoss(ctx context.Context, from, to uint64) error {
	return c.request(ctx, TypeAcceptLoss, append(U64(from), U64(to)...))
}

// Key operations of TypeKey.
const (
	KeyStage  uint8 = 1
	KeyRetire uint8 = 2
)

// StageKey asks the daemon to stage the group key in the file at path (a
// path on the daemon's host, mode 0600): the first step of a key rotation
// (docs/security.md section 5). It returns once the key is staged; the
// status (keys) shows when the host switches to it.
func (c *Client) StageKey(ctx context.Context, path string) error {
	return c.request(ctx, TypeKey, append([]byte{KeyStage}, path...))
}

// RetireKey asks the daemon to empty the key slot it does not send under:
// it cancels a staged key or ends the old key's grace window at once.
func (c *Client) RetireKey(ctx context.Context) error {
	return c.request(ctx, TypeKey, []byte{KeyRetire})
}

// request sends a request that is answered by an acknowledgment or an
// error, and waits for it.
func (c *Client) request(ctx context.Context, typ byte, body []byte) error {
	ch, err := c.send(typ, body)
	if err != nil {
		return err
	}
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send writes a request of type typ with a new request id before body,
// and returns the channel that receives its answer.
func (c *Client) send(typ byte, body []byte) (<-chan Ack, error) {
	ch := make(chan Ack, 1)
	err := c.write(waiter{one: ch}, func(w io.Writer, id uint64) error { return WriteFrame(w, typ, U64(id), body) })
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// write registers w under a new request id and sends the request enc
// encodes; a write error is w's answer (and every other request's: the
// connection is closed). The error returned is the connection's, if it
// failed before.
func (c *Client) write(w waiter, enc func(w io.Writer, id uint64) error) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.next++
	id := c.next
	c.waiting[id] = w
	c.mu.Unlock()
	if err := c.send1(func(w io.Writer) error { return enc(w, id) }); err != nil {
		c.finish(id, Ack{Err: err})
	}
	return nil
}

// send1 encodes a request with enc and writes it out: the caller that
// finds no write under way writes, outside the lock, everything encoded
// until none is left; the others return at once (their request goes in
// that write). It returns the connection's write error, if any.
func (c *Client) send1(enc func(w io.Writer) error) error {
	c.wmu.Lock()
	if c.werr != nil {
		err := c.werr
		c.wmu.Unlock()
		return err
	}
	n := c.out.Len()
	if err := enc(c.out); err != nil {
		c.out.Truncate(n)
		c.wmu.Unlock()
		return err
	}
	if c.flushing {
		c.wmu.Unlock()
		return nil
	}
	c.flushing = true
	for c.out.Len() > 0 && c.werr == nil {
		b := c.out
		c.out, c.spare = c.spare, nil
		c.wmu.Unlock()
		_, err := c.conn.Write(b.Bytes())
		b.Reset()
		c.wmu.Lock()
		c.spare = b
		if err != nil {
			c.werr = fmt.Errorf("exo daemon connection: %w", err)
			c.conn.Close() // the read loop fails every request waiting
		}
	}
	c.flushing = false
	err := c.werr
	c.wmu.Unlock()
	return err
}

// Ack is the outcome of an asynchronous publish.
type Ack struct {
	Pos Position
	Err error
}

// PublishAsync sends a publish and returns a channel that receives its
// outcome; it lets one goroutine keep many publishes in flight.
func (c *Client) PublishAsync(payload []byte) (<-chan Ack, error) {
	return c.send(TypePublish, payload)
}

// PublishBatchAsync sends payloads as one batch (one PublishBatch frame,
// 1 to MaxBatch messages, one frame's worth of bytes) and returns a channel
// that receives the outcome of every message once each is agreed or has
// failed. The daemon queues a batch whole or not at all. An empty batch is
// answered at once, without a request.
func (c *Client) PublishBatchAsync(payloads [][]byte) (<-chan BatchAck, error) {
	ch := make(chan BatchAck, 1)
	if len(payloads) == 0 {
		ch <- BatchAck{Acks: []Ack{}}
		return ch, nil
	}
	err := c.write(waiter{batch: ch, n: len(payloads)}, func(w io.Writer, id uint64) error { return WritePublishBatch(w, id, payloads) })
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// PublishBatch broadcasts payloads as one batch and returns, once every
// message is agreed or has failed, one Ack per message in the order given
// (the agreed ones at increasing positions). err is nil when every message
// was agreed; a *BatchError when some failed (the Acks say which and why:
// ErrTooLarge for one above max_message_bytes, the others are queued;
// ErrDropped; ErrShuttingDown); any other error means the batch failed as a
// whole and comes without Acks: ErrQueueFull (none of it was queued: back
// off and retry it), ErrTooLarge (the batch needs more records than the
// daemon's queue_len, or more than a frame: send smaller ones), or the
// connection or ctx ended.
func (c *Client) PublishBatch(ctx context.Context, payloads [][]byte) ([]Ack, error) {
	ch, err := c.PublishBatchAsync(payloads)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Acks, batchError(r.Acks)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Status returns the daemon's status as JSON-decoded fields.
func (c *Client) Status(ctx context.Context) (map[string]any, error) {
	raw, err := c.StatusRaw(ctx)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	return m, nil
}

// StatusRaw returns the daemon's status JSON.
func (c *Client) StatusRaw(ctx context.Context) ([]byte, error) {
	if err := c.send1(func(w io.Writer) error { return WriteFrame(w, TypeStatus) }); err != nil {
		return nil, err
	}
	select {
	case b := <-c.status:
		return b, nil
	case <-c.done:
		return nil, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ReadStatus dials the daemon at socket, reads its status JSON and
// closes the connection.
func ReadStatus(ctx context.Context, socket string) ([]byte, error) {
	c, err := Dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.StatusRaw(ctx)
}

// Subscribe opens a new connection that follows the agreed stream from seq
// on; fn is called for every message in order until it returns an error,
// the context ends, or the daemon ends the stream (ErrCompacted, ErrTooSlow).
func Subscribe(ctx context.Context, socket string, from uint64, fn func(Message) error) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("connect to exo daemon at %s: %w (is the daemon running?)", socket, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	r := bufio.NewReaderSize(conn, 256<<10)
	if _, err := hello(conn, r, socket, "exo-go"); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if err := WriteFrame(conn, TypeSubscribe, U64(from)); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	var buf []byte
	for {
		typ, body, b, err := ReadFrame(r, buf)
		buf = b
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("subscription: %w", err)
		}
		r, err := parseReply(typ, body)
		if err != nil {
			return err
		}
		switch typ {
		case TypeMessage:
			m := r.msg
			m.Payload = append([]byte(nil), m.Payload...)
			if err := fn(m); err != nil {
				return err
			}
		case TypeError:
			return r.err
		default:
			return fmt.Errorf("%w: unexpected type %#x", ErrFrame, typ)
		}
	}
}
