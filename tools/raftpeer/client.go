package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
)

// The client interface, on a Unix socket (or TCP): every frame, either way,
// is
//
//	u32 length of the rest (big endian) | u8 op | u64 request id | body
//
// Requests:
//
//	'P' propose: body = the proposal's payload (any bytes: the bench sends
//	    one or many 64-byte messages). Answered when the entry is committed
//	    and applied at this node: 'C' with the entry's index (u64), or 'D'
//	    (dropped: no leader known, or not applied within the proposal
//	    timeout; the body says why; the client may retry).
//	'S' status: answered by 'S' with a JSON Status.
//
// A proposal sent to a follower is forwarded by raft to the leader; the
// follower answers when it has applied the entry itself.
const (
	opPropose   = 'P'
	opStatus    = 'S'
	opCommitted = 'C'
	opDropped   = 'D'
	opError     = 'E'
)

func appendFrame(b []byte, op byte, id uint64, body []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(1+8+len(body)))
	b = append(b, op)
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, body...)
}

func readFrame(r *bufio.Reader) (op byte, id uint64, body []byte, err error) {
	var hdr [13]byte
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 9 || n > 64<<20 {
		return 0, 0, nil, fmt.Errorf("frame of %d bytes", n)
	}
	op, id = hdr[4], binary.BigEndian.Uint64(hdr[5:])
	body = make([]byte, n-9)
	_, err = io.ReadFull(r, body)
	return
}

// ErrDropped is a proposal that raft dropped; retry it.
var ErrDropped = errors.New("proposal dropped")

// Client is a connection to one node's client interface.
type Client struct {
	conn net.Conn
	mu   sync.Mutex // writes and next
	w    *bufio.Writer
	next uint64

	pmu     sync.Mutex
	waiting map[uint64]chan Reply
	err     error
}

// Reply answers one request.
type Reply struct {
	Index uint64 // of a committed proposal
	Body  []byte // of a status
	Err   error  // ErrDropped (wrapped) or a connection error
}

// Dial connects to "unix:PATH", "tcp:HOST:PORT" or "HOST:PORT".
func Dial(addr string) (*Client, error) {
	network, a := splitAddr(addr)
	conn, err := net.Dial(network, a)
	if err != nil {
		return nil, err
	}
	c := &Client{conn: conn, w: bufio.NewWriter(conn), waiting: map[uint64]chan Reply{}}
	go c.read()
	return c, nil
}

func splitAddr(addr string) (network, a string) {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		return "unix", p
	}
	if p, ok := strings.CutPrefix(addr, "tcp:"); ok {
		return "tcp", p
	}
	return "tcp", addr
}

// Close closes the connection; waiting requests get an error.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) read() {
	r := bufio.NewReaderSize(c.conn, 64<<10)
	for {
		op, id, body, err := readFrame(r)
		if err != nil {
			c.pmu.Lock()
			c.err = fmt.Errorf("raftpeer connection: %w", err)
			for _, ch := range c.waiting {
				ch <- Reply{Err: c.err}
			}
			c.waiting = nil
			c.pmu.Unlock()
			return
		}
		c.pmu.Lock()
		ch := c.waiting[id]
		delete(c.waiting, id)
		c.pmu.Unlock()
		if ch == nil {
			continue
		}
		switch op {
		case opCommitted:
			if len(body) == 8 {
				ch <- Reply{Index: binary.BigEndian.Uint64(body)}
			} else {
				ch <- Reply{Err: fmt.Errorf("committed reply of %d bytes", len(body))}
			}
		case opDropped:
			ch <- Reply{Err: fmt.Errorf("%w: %s", ErrDropped, body)}
		case opStatus:
			ch <- Reply{Body: body}
		default:
			ch <- Reply{Err: fmt.Errorf("raftpeer: %s", body)}
		}
	}
}

func (c *Client) do(op byte, body []byte) <-chan Reply {
	ch := make(chan Reply, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	id := c.next
	c.pmu.Lock()
	if c.waiting == nil {
		c.pmu.Unlock()
		ch <- Reply{Err: c.err}
		return ch
	}
	c.waiting[id] = ch
	c.pmu.Unlock()
	b := appendFrame(nil, op, id, body)
	_, err := c.w.Write(b)
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.pmu.Lock()
		if c.waiting != nil {
			delete(c.waiting, id)
			ch <- Reply{Err: err}
		}
		c.pmu.Unlock()
	}
	return ch
}

// Propose sends a proposal; the channel gets its answer.
func (c *Client) Propose(payload []byte) <-chan Reply { return c.do(opPropose, payload) }

// Status asks for the node's status.
func (c *Client) Status() (Status, error) {
	r := <-c.do(opStatus, nil)
	if r.Err != nil {
		return Status{}, r.Err
	}
	var st Status
	err := json.Unmarshal(r.Body, &st)
	return st, err
}
