package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/exo"
)

// probeEndpointResult is what a client endpoint of exo probe-endpoint prints
// (one JSON object); servers print one too, with only Mode and Messages.
type probeEndpointResult struct {
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

// userHZ is the unit of utime and stime in /proc/<pid>/stat (fixed at 100 by
// the kernel ABI on every architecture Go supports on Linux).
const userHZ = 100

// procCPUTicks returns utime+stime of this process from /proc/self/stat.
func procCPUTicks() (int64, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/self/stat: unexpected format")
	}
	// Fields after ")": state(3) ppid(4) ... utime(14) stime(15).
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/self/stat: too few fields")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/self/stat: bad utime/stime")
	}
	return u + st, nil
}

type probeEndpointOptions struct {
	Mode     string
	Addr     string // client: where to send; server: where to listen
	Reply    string // bcast-server: where to send replies
	Iface    string
	Count    int
	Warmup   int
	Duration time.Duration
}

var probeEndpointModes = []string{"tcp-server", "tcp-client", "udp-server", "udp-client", "bcast-server", "bcast-client", "raw-client"}

// newProbeEndpointCmd is one end of a latency probe, run by exo probe inside
// a lab host's namespace.
func newProbeEndpointCmd() *cobra.Command {
	o := &probeEndpointOptions{}
	cmd := &cobra.Command{
		Use:    "probe-endpoint",
		Short:  "One end of a latency probe (used by exo probe inside a lab host)",
		Hidden: true,
		Long: `probe-endpoint is one end of the exo probe ping-pongs; it prints one JSON object:
  --mode tcp-server    accept one connection on --addr and echo 64-byte messages
  --mode tcp-client    connect to --addr, --count round trips, one at a time
  --mode udp-server    echo every datagram on --addr to its sender
  --mode udp-client    --count round trips of a datagram to --addr
  --mode bcast-server  answer every broadcast datagram on --addr with a broadcast to --reply
  --mode bcast-client  broadcast to --addr (the subnet broadcast), wait for the
                       broadcast answer on the port of --reply
  --mode raw-client    like exo raw --mode ping (against exo raw --mode echo),
                       printing every sample
Clients read utime+stime from /proc/self/stat before and after.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ok := false
			for _, m := range probeEndpointModes {
				ok = ok || m == o.Mode
			}
			if !ok {
				return &exitError{code: 2, err: fmt.Errorf("--mode %q: want one of %s", o.Mode, strings.Join(probeEndpointModes, ", "))}
			}
			if o.Count < 1 {
				return &exitError{code: 2, err: fmt.Errorf("--count %d: want at least 1", o.Count)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.Duration)
			defer cancel()
			res, err := runProbeEndpoint(ctx, o)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	cmd.Flags().StringVar(&o.Mode, "mode", "", strings.Join(probeEndpointModes, ", "))
	cmd.Flags().StringVar(&o.Addr, "addr", "", "address:port to listen on (servers) or send to (clients)")
	cmd.Flags().StringVar(&o.Reply, "reply", "", "bcast-*: broadcast address:port of the answers")
	cmd.Flags().StringVar(&o.Iface, "interface", "exo0", "raw-client: interface")
	cmd.Flags().IntVar(&o.Count, "count", 2000, "clients: measured round trips")
	cmd.Flags().IntVar(&o.Warmup, "warmup", 50, "clients: round trips before measuring (waits for the server)")
	cmd.Flags().DurationVar(&o.Duration, "duration", 60*time.Second, "longest run")
	return cmd
}

func runProbeEndpoint(ctx context.Context, o *probeEndpointOptions) (probeEndpointResult, error) {
	res := probeEndpointResult{Mode: o.Mode}
	switch o.Mode {
	case "tcp-server":
		return res, tcpEchoServer(ctx, o.Addr, &res)
	case "udp-server", "bcast-server":
		return res, udpEchoServer(ctx, o, &res)
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
	}
	if err != nil {
		return res, err
	}
	defer rt.Close()
	return res, pingPong(ctx, rt, o, &res)
}

// roundTripper sends message seq and waits for its answer; lost reports a
// timeout (the caller counts it and moves on).
type roundTripper interface {
	RoundTrip(seq uint64) (lost bool, err error)
	Close() error
}

func pingPong(ctx context.Context, rt roundTripper, o *probeEndpointOptions, res *probeEndpointResult) error {
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

func tcpEchoServer(ctx context.Context, addr string, res *probeEndpointResult) error {
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

func udpEchoServer(ctx context.Context, o *probeEndpointOptions, res *probeEndpointResult) error {
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
