// Package broadcast is the raw-frame data plane of Exo: it sends and
// receives Exo frames (EtherType 0x88B5, docs/wire.md) on one broadcast
// segment.
//
// Two implementations share the Conn interface:
//
//   - PacketConn (Linux): an AF_PACKET socket bound to one interface and to
//     EtherType 0x88B5, with a classic BPF filter so that foreign traffic
//     never reaches Go, and batched receive with recvmmsg(2) (ReadFrames).
//   - MemNetwork / Attach: an in-memory segment for tests and simulation,
//     with seeded loss, partitions and bounded per-Conn receive queues.
//
// A Conn moves bytes only: it never decodes a frame (package exo does).
// It adds and strips the 14-byte Ethernet header and pads short frames to
// the 60-byte Ethernet minimum; a received frame is returned with its
// padding, which the exo codec ignores. See docs/dataplane.md.
//
// The gopacket layer for Exo frames is in the subpackage exolayer, so that
// the daemon does not link gopacket.
package broadcast

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/exo-rack/exo/exo"
)

// Conn sends and receives Exo frames on one broadcast segment.
//
// Frames are the bytes after the Ethernet header. A Conn never receives
// the frames it sent itself. Conns are safe for concurrent use, but the
// intended use is one receive loop and one sender.
//
// Errors: after Close, every method returns an error matching net.ErrClosed
// (errors.Is); a read past its deadline returns one matching
// os.ErrDeadlineExceeded.
type Conn interface {
	// WriteFrame broadcasts one Exo frame: b is the bytes after the
	// Ethernet header. The Conn adds the destination (broadcast, or the
	// configured group MAC), its own source MAC and EtherType 0x88B5, and
	// pads the frame to the 60-byte Ethernet minimum. It fails with
	// ErrFrameTooLarge if len(b) > MTU(). b is not retained.
	WriteFrame(b []byte) error

	// ReadFrame blocks for the next Exo frame, copies the bytes after the
	// Ethernet header into b and returns their count (padding included:
	// the exo codec ignores it) and the source MAC. If the frame is longer
	// than b, the first len(b) bytes are returned with an error matching
	// ErrTruncated; a buffer of MTU() bytes never truncates.
	ReadFrame(b []byte) (n int, src net.HardwareAddr, err error)

	// ReadFrames is the batched ReadFrame: it blocks until at least one
	// frame is available, then fills ms[0], ms[1], ... with the frames
	// already queued, without blocking again, and returns how many it
	// filled (1..len(ms)). Truncated frames are marked
	// (Message.Truncated), not returned as an error. On PacketConn one
	// call is one recvmmsg(2) system call for up to MaxBatch frames.
	ReadFrames(ms []Message) (int, error)

	// SetReadDeadline sets the deadline for ReadFrame and ReadFrames; the
	// zero time means none.
	SetReadDeadline(t time.Time) error

	// HardwareAddr returns the Conn's own MAC, the source of its frames.
	HardwareAddr() net.HardwareAddr

	// MTU returns the largest frame, in bytes after the Ethernet header,
	// that WriteFrame accepts (the interface MTU: 1500, or 9000 with
	// jumbo frames).
	MTU() int

	// Stats returns the Conn's counters since it was opened.
	Stats() Stats

	// Close closes the Conn and unblocks its readers.
	Close() error
}

// QueuedReader is a Conn that takes the frames already queued without
// waiting, whatever its read deadline (PacketConn, the in-memory
// network's Conns). A read whose deadline passed returns without looking
// at the socket: a protocol loop about to act on a silence (a token
// timeout) looks first.
type QueuedReader interface {
	// ReadQueued fills ms[0], ms[1], ... with frames already queued, as
	// ReadFrames does, and returns how many (0: none), without blocking.
	ReadQueued(ms []Message) (int, error)
}

// Message is one frame of a batched read (Conn.ReadFrames).
type Message struct {
	// Buf is the caller's buffer the frame is copied into (bytes after
	// the Ethernet header). Use MTU() bytes.
	Buf []byte
	// N is the number of bytes of the frame in Buf, padding included.
	N int
	// Src is the source MAC. ReadFrames reuses its storage when
	// cap(Src) >= 6, so a reused Message does not allocate.
	Src net.HardwareAddr
	// Truncated reports that the frame was longer than Buf and was cut
	// to len(Buf) bytes.
	Truncated bool
}

// MaxBatch is the largest number of frames one ReadFrames call returns;
// longer slices are filled up to MaxBatch.
const MaxBatch = 64

// Stats are a Conn's counters. All frames are counted in bytes after the
// Ethernet header, padding included.
type Stats struct {
	FramesIn  uint64 // frames returned by ReadFrame and ReadFrames
	BytesIn   uint64
	FramesOut uint64 // frames sent by WriteFrame
	BytesOut  uint64

	// Filtered counts frames that reached the Conn but were not for it
	// and were discarded before ReadFrame: another EtherType or group id
	// (Options.FilterGroup). On PacketConn the kernel's BPF filter drops
	// foreign frames before they are queued, uncounted (the kernel keeps
	// no count of them), so this is normally 0 there.
	Filtered uint64
	// Dropped counts frames lost because the receive queue was full: the
	// kernel's count for the socket (PACKET_STATISTICS tp_drops) on
	// PacketConn, the bounded queue on a MemNetwork Conn.
	Dropped uint64
	// Truncated counts frames longer than the read buffer.
	Truncated uint64
	// ReadErrors and WriteErrors count failed calls, not counting
	// deadlines and Close.
	ReadErrors  uint64
	WriteErrors uint64
}

// Options configure a Conn (Listen, MemNetwork.AttachOptions). The zero
// value is the default.
type Options struct {
	// Dst is the destination MAC of sent frames: nil means
	// ff:ff:ff:ff:ff:ff (exo.DefaultDstMAC). It must be a broadcast or
	// multicast (group) address; PacketConn joins a multicast group on the
	// interface so that frames sent to it are received.
	Dst net.HardwareAddr

	// FilterGroup makes the Conn receive only frames whose group field
	// (offset 2 of the Exo frame) is Group; on PacketConn the check is in
	// the kernel's BPF filter. Off by default, so that frames of another
	// group reach the state machine and are counted as BAD_GROUP.
	FilterGroup bool
	Group       uint16

	// MinMTU is the smallest acceptable MTU (bytes after the Ethernet
	// header); Listen fails with ErrMTUTooSmall below it. Values below
	// MinFrameMTU are raised to MinFrameMTU.
	MinMTU int

	// ReadBuffer, if > 0, sets the socket receive buffer (SO_RCVBUFFORCE,
	// falling back to SO_RCVBUF, which net.core.rmem_max caps) of a
	// PacketConn, in bytes.
	ReadBuffer int

	// QueueLen is the receive queue of a MemNetwork Conn, in frames; 0
	// means DefaultQueueLen.
	QueueLen int

	// RxPoll is how a PacketConn waits for frames in ReadFrames and
	// ReadFrame (RxPollRuntime when empty).
	RxPoll RxPoll
}

// RxPoll is how a PacketConn's reads wait for frames.
type RxPoll string

const (
	// RxPollRuntime parks the reading goroutine in Go's network poller
	// (epoll): any goroutine may read, and a wake-up is a hand-off from
	// the poller's thread to the reader's.
	RxPollRuntime RxPoll = "runtime"
	// RxPollBlock blocks the reading thread in ppoll(2) on the socket
	// (and an eventfd that Close signals), then reads with recvmmsg(2):
	// no poller and no hand-off between threads. The reader should hold
	// its OS thread (runtime.LockOSThread); deadlines are ppoll's
	// timeout, with the kernel's hrtimer resolution.
	RxPollBlock RxPoll = "block"
	// RxPollBusy spins on recvmmsg(2) without sleeping until a frame
	// comes or the deadline passes: the lowest latency, a whole core per
	// reader, busy even when idle.
	RxPollBusy RxPoll = "busy"
)

// ParseRxPoll checks an RxPoll name ("" is RxPollRuntime).
func ParseRxPoll(s string) (RxPoll, error) {
	switch RxPoll(s) {
	case "", RxPollRuntime:
		return RxPollRuntime, nil
	case RxPollBlock, RxPollBusy:
		return RxPoll(s), nil
	}
	return "", fmt.Errorf("rx_poll %q: want runtime, block or busy", s)
}

// MinFrameMTU is the smallest MTU any Conn accepts: the largest token pass
// (a frame with the largest history, MaxHistory ids, and no payload) must
// fit.
const MinFrameMTU = exo.HeaderLen + exo.MaxHistory

// Ethernet framing constants.
const (
	// MinFrameLen is the smallest frame after the Ethernet header:
	// exo.MinEthFrame - exo.EthHeaderLen (46). WriteFrame pads to it.
	MinFrameLen = exo.MinEthFrame - exo.EthHeaderLen
)

// BroadcastMAC is ff:ff:ff:ff:ff:ff, the default destination.
var BroadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Errors. Listen and the Conn methods wrap them with the details (the
// interface, the sizes), so test them with errors.Is.
var (
	// ErrInterfaceNotFound: Listen's interface does not exist (in this
	// network namespace).
	ErrInterfaceNotFound = errors.New("interface not found")
	// ErrPermission: opening an AF_PACKET socket needs CAP_NET_RAW.
	ErrPermission = errors.New("AF_PACKET needs CAP_NET_RAW: run as root")
	// ErrMTUTooSmall: the interface MTU is below Options.MinMTU (at least
	// MinFrameMTU).
	ErrMTUTooSmall = errors.New("MTU too small")
	// ErrFrameTooLarge: WriteFrame of more than MTU() bytes.
	ErrFrameTooLarge = errors.New("frame larger than the MTU")
	// ErrTruncated: ReadFrame's buffer was shorter than the frame.
	ErrTruncated = errors.New("frame truncated: read buffer shorter than the frame")
	// ErrNotSupported: AF_PACKET is Linux only.
	ErrNotSupported = errors.New("AF_PACKET is only available on Linux")
)

// dstOf checks and returns the destination MAC of o.
func (o *Options) dstOf() (net.HardwareAddr, error) {
	if o.Dst == nil {
		return BroadcastMAC, nil
	}
	if len(o.Dst) != 6 || o.Dst[0]&1 == 0 {
		return nil, fmt.Errorf("broadcast: destination %v is not a broadcast or multicast (group) MAC", o.Dst)
	}
	return append(net.HardwareAddr(nil), o.Dst...), nil
}

func isBroadcast(mac net.HardwareAddr) bool {
	return string(mac) == string(BroadcastMAC)
}

// minMTU returns the smallest MTU o accepts.
func (o *Options) minMTU() int {
	return max(o.MinMTU, MinFrameMTU)
}

// paddedLen is the length of b on the wire after the Ethernet header.
func paddedLen(n int) int {
	return max(n, MinFrameLen)
}

// zeros pads short frames.
var zeros [MinFrameLen]byte

// setSrc stores mac in *dst, reusing its storage when it can.
func setSrc(dst *net.HardwareAddr, mac []byte) {
	if cap(*dst) >= len(mac) {
		*dst = append((*dst)[:0], mac...)
		return
	}
	*dst = append(net.HardwareAddr(nil), mac...)
}

// counters are the atomic counters behind Stats.
type counters struct {
	framesIn, bytesIn, framesOut, bytesOut atomic.Uint64
	filtered, dropped, truncated           atomic.Uint64
	readErrors, writeErrors                atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		FramesIn:    c.framesIn.Load(),
		BytesIn:     c.bytesIn.Load(),
		FramesOut:   c.framesOut.Load(),
		BytesOut:    c.bytesOut.Load(),
		Filtered:    c.filtered.Load(),
		Dropped:     c.dropped.Load(),
		Truncated:   c.truncated.Load(),
		ReadErrors:  c.readErrors.Load(),
		WriteErrors: c.writeErrors.Load(),
	}
}

// addr names a Conn in errors: net.OpError{Net: "exo", Addr: addr(name)}
// reads "read exo exo0: i/o timeout".
type addr string

func (a addr) Network() string { return "exo" }
func (a addr) String() string  { return string(a) }

// opError wraps err like the net package does, so that errors.Is(err,
// net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded) and
// err.(net.Error).Timeout() work.
func opError(op string, a addr, err error) error {
	return &net.OpError{Op: op, Net: "exo", Addr: a, Err: err}
}

// listenError is an error of Listen: a readable message that wraps both a
// sentinel (ErrPermission, ...) and the underlying cause.
type listenError struct {
	msg      string
	sentinel error
	cause    error
}

func (e *listenError) Error() string   { return e.msg }
func (e *listenError) Unwrap() []error { return []error{e.sentinel, e.cause} }
