package lab

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Probe reports whether a UDP datagram sent by host from (from its OOB
// address) reaches host to (its OOB address) across the bridge within
// timeout. It is one-way: a cut from -> to makes it false while the
// other direction may still be true.
func (r *Rack) Probe(ctx context.Context, from, to int, timeout time.Duration) (bool, error) {
	got, err := r.Reach(ctx, [][2]int{{from, to}}, timeout)
	if err != nil {
		return false, err
	}
	return got[0], nil
}

// Matrix probes every ordered pair of distinct hosts at once: m[a][b]
// reports whether a datagram from a reached b (the diagonal is true).
func (r *Rack) Matrix(ctx context.Context, timeout time.Duration) ([][]bool, error) {
	n := len(r.Hosts)
	var pairs [][2]int
	for a := range n {
		for b := range n {
			if a != b {
				pairs = append(pairs, [2]int{a, b})
			}
		}
	}
	got, err := r.Reach(ctx, pairs, timeout)
	if err != nil {
		return nil, err
	}
	m := make([][]bool, n)
	for a := range m {
		m[a] = make([]bool, n)
		m[a][a] = true
	}
	for i, p := range pairs {
		m[p[0]][p[1]] = got[i]
	}
	return m, nil
}

// Reach probes pairs (from, to) at once: each source sends a datagram to
// each of its destinations every 20 ms until one is received or timeout
// passes. Sockets are opened inside the hosts' namespaces and bound to
// their OOB addresses, so every datagram crosses the veth pairs and the
// bridge as a real frame. got[i] reports pair i.
func (r *Rack) Reach(ctx context.Context, pairs [][2]int, timeout time.Duration) ([]bool, error) {
	return r.reach(ctx, pairs, timeout, 0)
}

// ProbeSize is [Rack.Probe] with a UDP payload of size bytes (at least
// 20) sent with the don't-fragment bit: it reports whether one IP packet of
// size+28 bytes crosses the bridge whole, which checks the MTU (8972 on a
// 9000-byte MTU rack). A payload too big for the link is not sent at all.
func (r *Rack) ProbeSize(ctx context.Context, from, to, size int, timeout time.Duration) (bool, error) {
	if size < probeHeader || size > 65507 {
		return false, fmt.Errorf("probe: size %d is outside %d..65507", size, probeHeader)
	}
	got, err := r.reach(ctx, [][2]int{{from, to}}, timeout, size)
	if err != nil {
		return false, err
	}
	return got[0], nil
}

const (
	probeMagic  = "exolab\x00\x01"
	probeHeader = len(probeMagic) + 8 + 2 + 2 // magic, nonce, from, to
)

func (r *Rack) reach(ctx context.Context, pairs [][2]int, timeout time.Duration, size int) ([]bool, error) {
	const magic = probeMagic
	size = max(size, probeHeader)
	nonce := rand.Uint64()
	conns := map[int]*net.UDPConn{} // one per host: sends and receives
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	open := func(id int) error {
		if conns[id] != nil {
			return nil
		}
		h, err := r.host(id)
		if err != nil {
			return err
		}
		return InNetns(h.Netns, func() error {
			c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(h.OOBAddr, 0)))
			if err != nil {
				return fmt.Errorf("probe: listening on %s in %s: %w", h.OOBAddr, h.Netns, err)
			}
			if err := setDontFragment(c); err != nil {
				c.Close()
				return fmt.Errorf("probe: %w", err)
			}
			conns[id] = c
			return nil
		})
	}
	for _, p := range pairs {
		if err := open(p[0]); err != nil {
			return nil, err
		}
		if err := open(p[1]); err != nil {
			return nil, err
		}
	}
	index := map[[2]int]int{}
	for i, p := range pairs {
		index[p] = i
	}
	var mu sync.Mutex
	got := make([]bool, len(pairs))
	left := len(pairs)
	done := make(chan struct{})
	deadline := time.Now().Add(timeout)
	var wg sync.WaitGroup
	for to, c := range conns {
		// Set here, not in the goroutine: the early stop below must win.
		c.SetReadDeadline(deadline)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 65536)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return // deadline, or closed once everything arrived
				}
				if n != size || string(buf[:len(magic)]) != magic || binary.BigEndian.Uint64(buf[len(magic):]) != nonce {
					continue
				}
				from := int(binary.BigEndian.Uint16(buf[len(magic)+8:]))
				mu.Lock()
				if i, ok := index[[2]int{from, to}]; ok && !got[i] {
					got[i] = true
					if left--; left == 0 {
						close(done)
					}
				}
				mu.Unlock()
			}
		}()
	}
	if left == 0 {
		close(done)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var err error
send:
	for {
		for i, p := range pairs {
			if i > 0 && i%256 == 0 {
				if time.Now().After(deadline) {
					break
				}
				// Pace big racks: a burst of thousands of frames would
				// overflow the per-CPU backlog (net.core.netdev_max_backlog)
				// that veth delivery goes through, and read as loss.
				time.Sleep(time.Millisecond)
			}
			mu.Lock()
			g := got[i]
			mu.Unlock()
			if g {
				continue
			}
			msg := binary.BigEndian.AppendUint64([]byte(magic), nonce)
			msg = binary.BigEndian.AppendUint16(msg, uint16(p[0]))
			msg = binary.BigEndian.AppendUint16(msg, uint16(p[1]))
			msg = append(msg, make([]byte, size-len(msg))...)
			// A send may fail (a link down): that pair just gets nothing.
			_, _ = conns[p[0]].WriteToUDPAddrPort(msg, conns[p[1]].LocalAddr().(*net.UDPAddr).AddrPort())
		}
		select {
		case <-tick.C:
		case <-done:
			break send
		case <-timer.C:
			break send
		case <-ctx.Done():
			err = ctx.Err()
			break send
		}
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now())
	}
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return got, nil
}
