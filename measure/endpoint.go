package measure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/exo"
)

// EndpointResult is what a client endpoint measured (exo probe-endpoint
// prints it as one JSON object); a server's has only Mode and Messages.
type EndpointResult struct {
	Mode     string  `json:"mode"`
	Messages int64   `json:"messages"` // round trips completed (servers: messages echoed)
	Lost     int64   `json:"lost,omitempty"`
	Seconds  float64 `json:"seconds"`
	CPUTicks int64   `json:"cpu_ticks"` // utime+stime delta from /proc/self/stat (USER_HZ)
	RTTns    []int64 `json:"rtt_ns,omitempty"`
}

// probeMsgSize is the payload of every probe message (as the seed's 64-byte
// messages); the first 8 bytes carry the sequence number.
const probeMsgSize = 64

// procCPUTicks returns utime+stime of this process, in USER_HZ ticks.
func procCPUTicks() (int64, error) {
	t, err := procCPU("self")
	return int64(t / (time.Second / userHZ)), err
}

// EndpointOptions configure Endpoint (exo probe-endpoint: its flags).
type EndpointOptions struct {
	Mode   string // one of EndpointModes
	Addr   string // client: where to send; server: where to listen
	Reply  string // bcast-*: the broadcast address:port of the answers
	Iface  string // raw-client: the interface
	Count  int    // clients: measured round trips
	Warmup int    // clients: round trips before measuring (waits for the server)
	// Duration bounds the run.
	Duration time.Duration
}

// EndpointModes are the modes of Endpoint.
var EndpointModes = []string{"tcp-server", "tcp-client", "udp-server", "udp-client", "bcast-server", "bcast-client", "raw-client"}

// Endpoint runs one end of a latency probe: a server that echoes until
// ctx ends (or its client hangs up), or a client that measures
// EndpointOptions.Count round trips. Probe runs it as exo probe-endpoint
// inside a lab host's namespace.
func Endpoint(ctx context.Context, o EndpointOptions) (EndpointResult, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	res := EndpointResult{Mode: o.Mode}
	switch o.Mode {
	case "tcp-server":
		return res, tcpEchoServer(ctx, o.Addr, &res)
	case "udp-server", "bcast-server":
		return res, udpEchoServer(ctx, &o, &res)
	}
	var rt roundTripper
	var err error
	switch o.Mode {
	case "tcp-client":
		rt, err = dialTCPProbe(ctx, o.Addr)
	case "udp-client":
		rt, err = dialUDPProbe(o.Addr, "")
	case "bcast-client":
		rt, err = dialUDPProbe(o.Addr, o.Reply)
	case "raw-client":
		rt, err = dialRawProbe(o.Iface)
	default:
		err = fmt.Errorf("--mode %q: want one of %s", o.Mode, strings.Join(EndpointModes, ", "))
	}
	if err != nil {
		return res, err
	}
	defer rt.Close()
	return res, pingPong(ctx, rt, &o, &res)
}

// roundTripper sends message seq and waits for its answer; lost reports a
// timeout (the caller counts it and moves on).
type roundTripper interface {
	RoundTrip(seq uint64) (lost bool, err error)
	Close() error
}

func pingPong(ctx context.Context, rt roundTripper, o *EndpointOptions, res *EndpointResult) error {
	// Warm up: wait (up to 10 s) for the server, then a few unmeasured trips.
	seq := uint64(1 << 40)
	deadline := time.Now().Add(10 * time.Second)
	for good := 0; good < max(o.Warmup, 1); seq++ {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("%s: no answer from %s in 10 s", o.Mode, o.Addr)
		}
		lost, err := rt.RoundTrip(seq)
		if err != nil {
			return err
		}
		if !lost {
			good++
		}
	}
	c0, err := procCPUTicks()
	if err != nil {
		return err
	}
	res.RTTns = make([]int64, 0, o.Count)
	start := time.Now()
	for i := 0; i < o.Count && ctx.Err() == nil; i++ {
		t0 := time.Now()
		lost, err := rt.RoundTrip(uint64(i))
		if err != nil {
			return err
		}
		if lost {
			res.Lost++
			continue
		}
		res.RTTns = append(res.RTTns, max(time.Since(t0).Nanoseconds(), 1))
		res.Messages++
	}
	res.Seconds = time.Since(start).Seconds()
	c1, err := procCPUTicks()
	if err != nil {
		return err
	}
	res.CPUTicks = c1 - c0
	return ctx.Err()
}

const probeTimeout = 100 * time.Millisecond

// TCP: a length-free ping-pong of fixed 64-byte messages.

type tcpProbe struct {
	c        net.Conn
	out, buf []byte
}

func dialTCPProbe(ctx context.Context, addr string) (*tcpProbe, error) {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.(*net.TCPConn).SetNoDelay(true)
			return &tcpProbe{c: c, out: make([]byte, probeMsgSize), buf: make([]byte, probeMsgSize)}, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *tcpProbe) RoundTrip(seq uint64) (bool, error) {
	binary.BigEndian.PutUint64(p.out, seq)
	if _, err := p.c.Write(p.out); err != nil {
		return false, err
	}
	if _, err := io.ReadFull(p.c, p.buf); err != nil {
		return false, err
	}
	if binary.BigEndian.Uint64(p.buf) != seq {
		return false, fmt.Errorf("tcp: answer %d to %d", binary.BigEndian.Uint64(p.buf), seq)
	}
	return false, nil
}

func (p *tcpProbe) Close() error { return p.c.Close() }

func tcpEchoServer(ctx context.Context, addr string, res *EndpointResult) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() { <-ctx.Done(); ln.Close() }()
	c, err := ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer c.Close()
	go func() { <-ctx.Done(); c.Close() }()
	c.(*net.TCPConn).SetNoDelay(true)
	buf := make([]byte, probeMsgSize)
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			return nil // the client is done (or ctx ended)
		}
		if _, err := c.Write(buf); err != nil {
			return nil
		}
		res.Messages++
	}
}

// UDP, unicast and broadcast.

func broadcastControl(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1)
		if serr == nil {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

type udpProbe struct {
	c        *net.UDPConn
	to       *net.UDPAddr
	out, buf []byte
}

// dialUDPProbe sends to addr; with reply set (broadcast), it listens on
// reply's port for the answers, else on an ephemeral port.
func dialUDPProbe(addr, reply string) (*udpProbe, error) {
	to, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return nil, err
	}
	laddr := ":0"
	if reply != "" {
		r, err := net.ResolveUDPAddr("udp4", reply)
		if err != nil {
			return nil, err
		}
		laddr = ":" + strconv.Itoa(r.Port)
	}
	lc := net.ListenConfig{Control: broadcastControl}
	pc, err := lc.ListenPacket(context.Background(), "udp4", laddr)
	if err != nil {
		return nil, err
	}
	return &udpProbe{c: pc.(*net.UDPConn), to: to, out: make([]byte, probeMsgSize), buf: make([]byte, 2048)}, nil
}

func (p *udpProbe) RoundTrip(seq uint64) (bool, error) {
	binary.BigEndian.PutUint64(p.out, seq)
	if _, err := p.c.WriteToUDP(p.out, p.to); err != nil {
		return false, err
	}
	p.c.SetReadDeadline(time.Now().Add(probeTimeout))
	for {
		n, _, err := p.c.ReadFromUDP(p.buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return true, nil
			}
			return false, err
		}
		if n >= 8 && binary.BigEndian.Uint64(p.buf) == seq {
			return false, nil
		}
	}
}

func (p *udpProbe) Close() error { return p.c.Close() }

func udpEchoServer(ctx context.Context, o *EndpointOptions, res *EndpointResult) error {
	lc := net.ListenConfig{Control: broadcastControl}
	pc, err := lc.ListenPacket(ctx, "udp4", o.Addr)
	if err != nil {
		return err
	}
	c := pc.(*net.UDPConn)
	defer c.Close()
	go func() { <-ctx.Done(); c.Close() }()
	var reply *net.UDPAddr
	if o.Mode == "bcast-server" {
		if reply, err = net.ResolveUDPAddr("udp4", o.Reply); err != nil {
			return err
		}
	}
	buf := make([]byte, 2048)
	for {
		n, from, err := c.ReadFromUDP(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		to := from
		if reply != nil {
			to = reply
		}
		if _, err := c.WriteToUDP(buf[:n], to); err != nil && ctx.Err() == nil {
			return err
		}
		res.Messages++
	}
}

// Raw frames: the baseline frames of exo raw, echoed by exo raw --mode echo.

type rawProbe struct {
	conn  broadcast.Conn
	frame []byte
	buf   []byte
	f     exo.Frame
}

func dialRawProbe(iface string) (*rawProbe, error) {
	conn, err := broadcast.Listen(iface, broadcast.Options{ReadBuffer: 8 << 20})
	if err != nil {
		return nil, err
	}
	return &rawProbe{conn: conn, frame: rawFrame(0, probeMsgSize), buf: make([]byte, conn.MTU()+64)}, nil
}

func (p *rawProbe) RoundTrip(seq uint64) (bool, error) {
	binary.BigEndian.PutUint64(p.frame[exo.OffSeq:], seq)
	if err := p.conn.WriteFrame(p.frame); err != nil {
		return false, err
	}
	p.conn.SetReadDeadline(time.Now().Add(probeTimeout))
	for {
		n, _, err := p.conn.ReadFrame(p.buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return true, nil
			}
			return false, err
		}
		if p.f.UnmarshalBinary(p.buf[:n]) == nil && p.f.Group == rawGroup && p.f.Seq == seq {
			return false, nil
		}
	}
}

func (p *rawProbe) Close() error { return p.conn.Close() }
