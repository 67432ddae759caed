package broadcast

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"

	"github.com/exo-rack/exo/exo"
)

// DefaultQueueLen is the receive queue of a MemNetwork Conn, in frames, when
// Options.QueueLen is 0 (a typical NIC receive ring).
const DefaultQueueLen = 1024

// DefaultMemMTU is the MTU of a new MemNetwork.
const DefaultMemMTU = 1500

// MemNetwork is an in-memory broadcast segment for tests and simulation.
// Every frame a Conn writes is delivered to every other attached Conn
// (never to the sender), like an Ethernet broadcast, unless
//
//   - the two are on different sides of a partition (Partition, Heal),
//   - it is lost (SetLoss: each delivery independently, from a seeded
//     generator, so a single-goroutine run is reproducible),
//   - the receiver filters it (Options.FilterGroup; or a group MAC
//     destination it has not joined), or
//   - the receiver's bounded queue is full (dropped and counted in its
//     Stats().Dropped, like a NIC ring).
//
// Frames are padded to the Ethernet minimum as on a real link, so
// receivers see the padding. Delivery is synchronous: when WriteFrame
// returns, the frame is in the receivers' queues.
type MemNetwork struct {
	mu    sync.Mutex
	ports []*memConn
	mtu   int
	loss  float64
	rng   *rand.Rand
	side  map[[6]byte]int // partition side of each MAC; nil when healed

	lostRandom, lostPartition uint64
}

// NewMemNetwork returns an empty segment: MTU DefaultMemMTU, no loss, no
// partition.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{mtu: DefaultMemMTU, rng: rand.New(rand.NewPCG(1, 2))}
}

// Attach connects a new Conn with MAC mac and default Options.
func (n *MemNetwork) Attach(mac net.HardwareAddr) Conn {
	c, err := n.AttachOptions(mac, Options{})
	if err != nil {
		panic(err) // only a malformed mac can fail with default Options
	}
	return c
}

// AttachOptions connects a new Conn with MAC mac (6 bytes) and opts
// (Dst, FilterGroup, Group, QueueLen and MinMTU apply). Two Conns may
// share a MAC; they are still distinct ports.
func (n *MemNetwork) AttachOptions(mac net.HardwareAddr, opts Options) (Conn, error) {
	if len(mac) != 6 {
		return nil, fmt.Errorf("broadcast: MAC %q is not 6 bytes", mac)
	}
	dst, err := opts.dstOf()
	if err != nil {
		return nil, err
	}
	q := opts.QueueLen
	if q <= 0 {
		q = DefaultQueueLen
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mtu < opts.minMTU() {
		return nil, &listenError{
			msg:      fmt.Sprintf("broadcast: memory network MTU %d too small: need at least %d", n.mtu, opts.minMTU()),
			sentinel: ErrMTUTooSmall,
		}
	}
	c := &memConn{
		net:   n,
		name:  addr(mac.String()),
		dst:   dst,
		group: -1,
		mtu:   n.mtu,
		q:     make(chan memFrame, q),
		done:  make(chan struct{}),
		dlCh:  make(chan struct{}),
	}
	copy(c.mac[:], mac)
	if opts.FilterGroup {
		c.group = int(opts.Group)
	}
	n.ports = append(n.ports, c)
	return c, nil
}

// Opener returns a function that attaches to the network with mac, in the
// shape of an interface opener (name ignored): for tools that send on an
// interface by name (exo frame send), run on the memory network.
func (n *MemNetwork) Opener(mac net.HardwareAddr) func(string, Options) (Conn, error) {
	return func(_ string, opts Options) (Conn, error) { return n.AttachOptions(mac, opts) }
}

// Drain reads the frames c receives until none comes for idle: copies of
// them, in order.
func Drain(c Conn, idle time.Duration) [][]byte {
	var got [][]byte
	buf := make([]byte, c.MTU())
	for {
		c.SetReadDeadline(time.Now().Add(idle))
		n, _, err := c.ReadFrame(buf)
		if err != nil {
			return got
		}
		got = append(got, append([]byte(nil), buf[:n]...))
	}
}

// SetMTU sets the MTU of Conns attached from now on.
func (n *MemNetwork) SetMTU(mtu int) {
	n.mu.Lock()
	n.mtu = mtu
	n.mu.Unlock()
}

// SetLoss makes every delivery (one frame to one receiver) lost with
// probability rate (0 <= rate <= 1), drawn from a generator seeded with
// seed. SetLoss(0, 0) stops the loss.
func (n *MemNetwork) SetLoss(rate float64, seed uint64) {
	n.mu.Lock()
	n.loss = rate
	n.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n.mu.Unlock()
}

// Partition splits the segment: frames cross only between MACs of the
// same group. MACs in no group form one more group together. It replaces
// any earlier partition.
func (n *MemNetwork) Partition(groups ...[]net.HardwareAddr) {
	side := make(map[[6]byte]int)
	for i, g := range groups {
		for _, mac := range g {
			var k [6]byte
			copy(k[:], mac)
			side[k] = i + 1
		}
	}
	n.mu.Lock()
	n.side = side
	n.mu.Unlock()
}

// Heal removes the partition.
func (n *MemNetwork) Heal() {
	n.mu.Lock()
	n.side = nil
	n.mu.Unlock()
}

// Lost returns the number of deliveries lost to SetLoss and to partitions.
func (n *MemNetwork) Lost() (random, partition uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lostRandom, n.lostPartition
}

// Close closes every attached Conn.
func (n *MemNetwork) Close() error {
	n.mu.Lock()
	ports := append([]*memConn(nil), n.ports...)
	n.mu.Unlock()
	for _, c := range ports {
		_ = c.Close()
	}
	return nil
}

// send delivers f from c to every other port; it is WriteFrame's core.
func (n *MemNetwork) send(from *memConn, f memFrame) {
	group := -1
	if len(f.b) >= exo.OffGroup+exo.SizeGroup {
		group = int(binary.BigEndian.Uint16(f.b[exo.OffGroup:]))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	fromSide := n.side[from.mac]
	for _, to := range n.ports {
		if to == from {
			continue
		}
		if n.side != nil && n.side[to.mac] != fromSide {
			n.lostPartition++
			continue
		}
		if n.loss > 0 && n.rng.Float64() < n.loss {
			n.lostRandom++
			continue
		}
		if !isBroadcast(from.dst) && string(from.dst) != string(to.dst) {
			continue // a group MAC the receiver has not joined: the NIC ignores it
		}
		if to.group >= 0 && group != to.group {
			to.stats.filtered.Add(1)
			continue
		}
		select {
		case to.q <- f:
		default:
			to.stats.dropped.Add(1)
		}
	}
}

// memFrame is one frame in flight: immutable, shared by all receivers.
type memFrame struct {
	src [6]byte
	b   []byte // padded
}

var _ Conn = (*memConn)(nil)

// memConn is a Conn of a MemNetwork.
type memConn struct {
	net   *MemNetwork
	mac   [6]byte
	name  addr
	dst   net.HardwareAddr
	group int
	mtu   int
	q     chan memFrame
	stats counters

	closeOnce sync.Once
	done      chan struct{}

	dlMu sync.Mutex
	dl   time.Time
	dlCh chan struct{} // closed and replaced when dl changes
}

func (c *memConn) HardwareAddr() net.HardwareAddr { return append(net.HardwareAddr(nil), c.mac[:]...) }
func (c *memConn) MTU() int                       { return c.mtu }
func (c *memConn) Stats() Stats                   { return c.stats.snapshot() }

func (c *memConn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *memConn) WriteFrame(b []byte) error {
	if c.isClosed() {
		return opError("write", c.name, net.ErrClosed)
	}
	if len(b) > c.mtu {
		c.stats.writeErrors.Add(1)
		return opError("write", c.name, fmt.Errorf("%w: %d bytes, MTU %d", ErrFrameTooLarge, len(b), c.mtu))
	}
	f := memFrame{src: c.mac, b: make([]byte, paddedLen(len(b)))}
	copy(f.b, b)
	c.net.send(c, f)
	c.stats.framesOut.Add(1)
	c.stats.bytesOut.Add(uint64(len(f.b)))
	return nil
}

func (c *memConn) SetReadDeadline(t time.Time) error {
	if c.isClosed() {
		return opError("set", c.name, net.ErrClosed)
	}
	c.dlMu.Lock()
	c.dl = t
	close(c.dlCh)
	c.dlCh = make(chan struct{})
	c.dlMu.Unlock()
	return nil
}

// next blocks for the next frame (wait) or returns ok=false at once.
func (c *memConn) next(wait bool) (memFrame, bool, error) {
	for {
		if c.isClosed() {
			return memFrame{}, false, opError("read", c.name, net.ErrClosed)
		}
		c.dlMu.Lock()
		dl, changed := c.dl, c.dlCh
		c.dlMu.Unlock()
		if !dl.IsZero() && !time.Now().Before(dl) {
			return memFrame{}, false, opError("read", c.name, os.ErrDeadlineExceeded)
		}
		select {
		case f := <-c.q:
			return f, true, nil
		default:
			if !wait {
				return memFrame{}, false, nil
			}
		}
		var timer *time.Timer
		var timeout <-chan time.Time
		if !dl.IsZero() {
			timer = time.NewTimer(time.Until(dl))
			timeout = timer.C
		}
		var f memFrame
		ok := false
		select {
		case f = <-c.q:
			ok = true
		case <-c.done:
		case <-timeout:
		case <-changed:
		}
		if timer != nil {
			timer.Stop()
		}
		if ok {
			return f, true, nil
		}
	}
}

// deliver copies f into m and counts it.
func (c *memConn) deliver(f memFrame, m *Message) {
	m.N = copy(m.Buf, f.b)
	m.Truncated = m.N < len(f.b)
	setSrc(&m.Src, f.src[:])
	if m.Truncated {
		c.stats.truncated.Add(1)
	}
	c.stats.framesIn.Add(1)
	c.stats.bytesIn.Add(uint64(m.N))
}

func (c *memConn) ReadFrame(b []byte) (int, net.HardwareAddr, error) {
	f, _, err := c.next(true)
	if err != nil {
		return 0, nil, err
	}
	m := Message{Buf: b}
	c.deliver(f, &m)
	if m.Truncated {
		return m.N, m.Src, opError("read", c.name, fmt.Errorf("%w: %d-byte buffer", ErrTruncated, len(b)))
	}
	return m.N, m.Src, nil
}

func (c *memConn) ReadFrames(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	if len(ms) > MaxBatch {
		ms = ms[:MaxBatch]
	}
	f, _, err := c.next(true)
	if err != nil {
		return 0, err
	}
	c.deliver(f, &ms[0])
	k := 1
	for k < len(ms) {
		f, ok, _ := c.next(false)
		if !ok {
			break
		}
		c.deliver(f, &ms[k])
		k++
	}
	return k, nil
}

// ReadQueued takes the frames already queued, without waiting and
// whatever the read deadline (QueuedReader).
func (c *memConn) ReadQueued(ms []Message) (int, error) {
	if c.isClosed() {
		return 0, opError("read", c.name, net.ErrClosed)
	}
	if len(ms) > MaxBatch {
		ms = ms[:MaxBatch]
	}
	k := 0
	for k < len(ms) {
		select {
		case f := <-c.q:
			c.deliver(f, &ms[k])
			k++
		default:
			return k, nil
		}
	}
	return k, nil
}

// Close detaches the Conn and unblocks its readers; frames still queued
// are discarded.
func (c *memConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		n := c.net
		n.mu.Lock()
		for i, p := range n.ports {
			if p == c {
				n.ports = append(n.ports[:i], n.ports[i+1:]...)
				break
			}
		}
		n.mu.Unlock()
	})
	return nil
}
