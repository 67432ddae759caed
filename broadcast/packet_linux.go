//go:build linux

package broadcast

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/exo-rack/exo/exo"
	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

// PacketConn is a Conn on a Linux AF_PACKET socket (SOCK_RAW) bound to
// one interface and to EtherType 0x88B5, with the BPF filter of
// FilterProgram attached before bind(2).
//
// Sockets are opened by github.com/mdlayher/packet; the data path uses
// the socket's file descriptor directly through the runtime network
// poller (syscall.RawConn; or, with Options.RxPoll, reads that wait in
// ppoll(2) or spin on the reader's own thread): one sendmsg(2) per WriteFrame, one
// recvmmsg(2) per ReadFrame or ReadFrames (up to MaxBatch frames), with
// the Ethernet header scattered into, or gathered from, a separate
// iovec, so the frame bytes are never copied in user space and the data
// path does not allocate (ReadFrame allocates its returned MAC only).
type PacketConn struct {
	ifname string
	name   addr
	pc     *packet.Conn
	rc     syscall.RawConn
	mac    net.HardwareAddr
	dst    net.HardwareAddr
	mtu    int
	group  int // -1: no group filter
	hdr    [exo.EthHeaderLen]byte
	closed atomic.Bool
	stats  counters
	recvs  sync.Pool // *recvState
	sends  sync.Pool // *sendState
	kmu    sync.Mutex
	kDrops uint64 // PACKET_STATISTICS drops so far (reading resets them)

	// RxPollBlock and RxPollBusy (Options.RxPoll): the reads bypass the
	// runtime poller. The deadline is kept here (Unix ns, 0: none); efd
	// is an eventfd that Close signals to end a ppoll; rmu is held by a
	// reader for its whole read, so Close closes efd only once no reader
	// can be in ppoll on it.
	poll     RxPoll
	deadline atomic.Int64
	sleeping atomic.Int64 // the deadline a reader in ppoll sleeps until (-1: none, 0: no deadline)
	efd      int
	rmu      sync.Mutex
}

var _ Conn = (*PacketConn)(nil)

// Listen opens a PacketConn on interface ifname (in the caller's network
// namespace). It needs CAP_NET_RAW. Errors match ErrInterfaceNotFound,
// ErrPermission or ErrMTUTooSmall (errors.Is) and name the interface.
func Listen(ifname string, opts Options) (*PacketConn, error) {
	dst, err := opts.dstOf()
	if err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, &listenError{
			msg:      fmt.Sprintf("broadcast: interface %s not found (%v)", ifname, err),
			sentinel: ErrInterfaceNotFound,
			cause:    err,
		}
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("broadcast: interface %s is not an Ethernet interface (hardware address %q)", ifname, ifi.HardwareAddr)
	}
	if ifi.MTU < opts.minMTU() {
		return nil, &listenError{
			msg: fmt.Sprintf("broadcast: interface %s MTU %d too small: Exo needs at least %d bytes after the Ethernet header (ip link set %s mtu 1500)",
				ifname, ifi.MTU, opts.minMTU(), ifname),
			sentinel: ErrMTUTooSmall,
		}
	}
	filter, err := assembleFilter(opts)
	if err != nil {
		return nil, fmt.Errorf("broadcast: assembling the BPF filter: %w", err)
	}
	// The filter is attached before bind(2) (Config.Filter is SetBPF
	// before bind), so no unfiltered frame is ever queued.
	pc, err := packet.Listen(ifi, packet.Raw, exo.EtherType, &packet.Config{Filter: filter})
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, &listenError{
				msg:      fmt.Sprintf("broadcast: listen on %s: %v (or give the binary the capability: setcap cap_net_raw+ep <binary>)", ifname, ErrPermission),
				sentinel: ErrPermission,
				cause:    err,
			}
		}
		return nil, fmt.Errorf("broadcast: listen on %s: %w", ifname, err)
	}
	c := &PacketConn{
		ifname: ifname,
		name:   addr(ifname),
		pc:     pc,
		mac:    append(net.HardwareAddr(nil), ifi.HardwareAddr...),
		dst:    dst,
		mtu:    ifi.MTU,
		group:  -1,
		poll:   RxPollRuntime,
		efd:    -1,
	}
	c.sleeping.Store(-1)
	if opts.RxPoll != "" {
		c.poll = opts.RxPoll
	}
	if opts.FilterGroup {
		c.group = int(opts.Group)
	}
	copy(c.hdr[0:6], dst)
	copy(c.hdr[6:12], c.mac)
	binary.BigEndian.PutUint16(c.hdr[12:], exo.EtherType)
	c.recvs.New = func() any { return newRecvState() }
	c.sends.New = func() any { return newSendState() }
	if err := c.setup(opts); err != nil {
		_ = pc.Close()
		if c.efd >= 0 {
			unix.Close(c.efd)
		}
		return nil, err
	}
	return c, nil
}

// setup sets the socket options of opts and joins the group MAC.
func (c *PacketConn) setup(opts Options) error {
	rc, err := c.pc.SyscallConn()
	if err != nil {
		return fmt.Errorf("broadcast: %s: %w", c.ifname, err)
	}
	c.rc = rc
	var serr error
	err = rc.Control(func(fd uintptr) {
		// A socket bound to one EtherType does not see outgoing frames
		// (only ETH_P_ALL sockets do); say so explicitly anyway (Linux
		// >= 4.20; older kernels answer ENOPROTOOPT, which is fine).
		e := unix.SetsockoptInt(int(fd), unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
		if e != nil && !errors.Is(e, unix.ENOPROTOOPT) {
			serr = fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", e)
			return
		}
		if opts.ReadBuffer > 0 {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, opts.ReadBuffer) != nil {
				if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, opts.ReadBuffer); e != nil {
					serr = fmt.Errorf("SO_RCVBUF %d: %w", opts.ReadBuffer, e)
				}
			}
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("broadcast: %s: %w", c.ifname, err)
	}
	switch c.poll {
	case RxPollRuntime:
	case RxPollBlock, RxPollBusy:
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return fmt.Errorf("broadcast: %s: eventfd for rx_poll %s: %w", c.ifname, c.poll, err)
		}
		c.efd = efd
	default:
		return fmt.Errorf("broadcast: %s: rx_poll %q: want runtime, block or busy", c.ifname, c.poll)
	}
	if !isBroadcast(c.dst) {
		if err := c.pc.JoinGroup(c.dst); err != nil {
			return fmt.Errorf("broadcast: %s: joining group %v: %w", c.ifname, c.dst, err)
		}
	}
	return nil
}

// HardwareAddr returns the interface's MAC.
func (c *PacketConn) HardwareAddr() net.HardwareAddr { return c.mac }

// MTU returns the interface MTU read by Listen (it is not re-read if the
// interface changes later).
func (c *PacketConn) MTU() int { return c.mtu }

// RxPoll returns how reads wait for frames (Options.RxPoll). With
// RxPollBlock and RxPollBusy the reader blocks or spins on its OS thread:
// it should hold it (runtime.LockOSThread).
func (c *PacketConn) RxPoll() RxPoll { return c.poll }

// Pending reports whether a frame waits to be read on the socket (a
// poll(2) with no timeout: about a microsecond). Bulk work on the reader's
// P asks it before it yields (package yield): yielding when nothing waits
// costs a whole sleep of the runtime's poller, 1 ms at least.
func (c *PacketConn) Pending() bool {
	pending := false
	c.rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		pending = err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
	})
	return pending
}

// SetReadDeadline sets the read deadline.
func (c *PacketConn) SetReadDeadline(t time.Time) error {
	if c.poll != RxPollRuntime {
		dl := int64(0)
		if !t.IsZero() {
			dl = max(t.UnixNano(), 1)
		}
		c.deadline.Store(dl)
		// A reader asleep in ppoll until later (or forever) must wake
		// to sleep until the new deadline.
		if z := c.sleeping.Load(); z >= 0 && dl != 0 && (z == 0 || dl < z) {
			c.signal()
		}
		return nil
	}
	if err := c.pc.SetReadDeadline(t); err != nil {
		return c.opErr("set", err)
	}
	return nil
}

// Close closes the socket and unblocks the readers.
func (c *PacketConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.pollKernelStats()
	if c.efd >= 0 {
		c.signal() // a reader in ppoll wakes, sees closed and leaves
	}
	err := c.pc.Close()
	if c.efd >= 0 {
		c.rmu.Lock()
		unix.Close(c.efd)
		c.rmu.Unlock()
	}
	if err != nil {
		return opError("close", c.name, err)
	}
	return nil
}

// Stats returns the counters; Dropped is the kernel's count of frames
// dropped because the socket's receive buffer was full.
func (c *PacketConn) Stats() Stats {
	c.pollKernelStats()
	s := c.stats.snapshot()
	c.kmu.Lock()
	s.Dropped = c.kDrops
	c.kmu.Unlock()
	return s
}

// pollKernelStats adds PACKET_STATISTICS to the totals (getsockopt resets
// the kernel's counters).
func (c *PacketConn) pollKernelStats() {
	c.kmu.Lock()
	defer c.kmu.Unlock()
	if ks, err := c.pc.Stats(); err == nil { // fails once closed: keep the totals
		c.kDrops += uint64(ks.Drops)
	}
}

// opErr wraps a data-path error; any error after Close is net.ErrClosed.
func (c *PacketConn) opErr(op string, err error) error {
	if c.closed.Load() {
		err = net.ErrClosed
	}
	return opError(op, c.name, err)
}

// WriteFrame sends b (bytes after the Ethernet header) with one sendmsg(2).
func (c *PacketConn) WriteFrame(b []byte) error {
	if c.closed.Load() {
		return opError("write", c.name, net.ErrClosed)
	}
	if len(b) > c.mtu {
		c.stats.writeErrors.Add(1)
		return opError("write", c.name, fmt.Errorf("%w: %d bytes, MTU %d", ErrFrameTooLarge, len(b), c.mtu))
	}
	s := c.sends.Get().(*sendState)
	s.set(c, b)
	err := c.rc.Write(s.fn)
	if err == nil {
		err = s.err
	}
	s.clear()
	c.sends.Put(s)
	if err != nil {
		if !c.closed.Load() {
			c.stats.writeErrors.Add(1)
		}
		return c.opErr("write", err)
	}
	c.stats.framesOut.Add(1)
	c.stats.bytesOut.Add(uint64(paddedLen(len(b))))
	return nil
}

// ReadFrame reads one frame with recvmmsg(2) (a batch of one).
func (c *PacketConn) ReadFrame(b []byte) (int, net.HardwareAddr, error) {
	s := c.recvs.Get().(*recvState)
	s.one[0] = Message{Buf: b}
	_, err := c.readFrames(s, s.one[:])
	m := s.one[0]
	s.one[0] = Message{}
	c.recvs.Put(s)
	if err != nil {
		return 0, nil, err
	}
	if m.Truncated {
		return m.N, m.Src, opError("read", c.name, fmt.Errorf("%w: %d-byte buffer", ErrTruncated, len(b)))
	}
	return m.N, m.Src, nil
}

// ReadFrames reads up to min(len(ms), MaxBatch) frames with one
// recvmmsg(2), blocking (in the runtime poller) until one is available.
func (c *PacketConn) ReadFrames(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	s := c.recvs.Get().(*recvState)
	n, err := c.readFrames(s, ms)
	c.recvs.Put(s)
	return n, err
}

func (c *PacketConn) readFrames(s *recvState, ms []Message) (int, error) {
	if len(ms) > MaxBatch {
		ms = ms[:MaxBatch]
	}
	if c.poll != RxPollRuntime {
		return c.readFramesOwn(s, ms)
	}
	for {
		if c.closed.Load() {
			return 0, opError("read", c.name, net.ErrClosed)
		}
		s.set(ms)
		err := c.rc.Read(s.fn)
		if err == nil {
			err = s.err
		}
		s.clear()
		if err != nil {
			if !c.closed.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
				c.stats.readErrors.Add(1)
			}
			return 0, c.opErr("read", err)
		}
		if k := c.collect(s, ms); k > 0 {
			return k, nil
		}
		// Everything received was filtered: wait for more.
	}
}

// ReadQueued reads up to min(len(ms), MaxBatch) frames already queued,
// with one recvmmsg(2) that does not wait, whatever the read deadline
// (QueuedReader); 0 when none is queued.
func (c *PacketConn) ReadQueued(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	if len(ms) > MaxBatch {
		ms = ms[:MaxBatch]
	}
	if c.closed.Load() {
		return 0, opError("read", c.name, net.ErrClosed)
	}
	s := c.recvs.Get().(*recvState)
	defer c.recvs.Put(s)
	n := 0
	var err error
	cerr := c.rc.Control(func(fd uintptr) {
		for {
			s.set(ms)
			got := s.recv(fd)
			if !got || s.err != nil {
				err = s.err
				s.clear()
				return
			}
			n = c.collect(s, ms)
			s.clear()
			if n > 0 {
				return
			}
			// Everything received was filtered: look again.
		}
	})
	if cerr != nil {
		err = cerr
	}
	if err != nil {
		if !c.closed.Load() {
			c.stats.readErrors.Add(1)
		}
		return 0, c.opErr("read", err)
	}
	return n, nil
}

// signal wakes a reader in ppoll (the eventfd becomes readable).
func (c *PacketConn) signal() {
	one := [8]byte{1} // the eventfd adds a small number in either byte order
	_, _ = unix.Write(c.efd, one[:])
}

// readFramesOwn is readFrames for RxPollBlock and RxPollBusy: it tries
// recvmmsg(2) without waiting and, when nothing is queued, sleeps in
// ppoll(2) on the socket and the close eventfd until the deadline (block)
// or tries again at once (busy). A deadline that passed still lets it
// take the frames already queued.
func (c *PacketConn) readFramesOwn(s *recvState, ms []Message) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	n := 0
	var err error
	cerr := c.rc.Control(func(fd uintptr) {
		pfd := [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(c.efd), Events: unix.POLLIN}}
		for {
			if c.closed.Load() {
				err = net.ErrClosed
				return
			}
			s.set(ms)
			got := s.recv(fd)
			if got && s.err != nil {
				err = s.err
				s.clear()
				return
			}
			if got {
				n = c.collect(s, ms)
				s.clear()
				if n > 0 {
					return
				}
				continue // everything received was filtered
			}
			s.clear()
			var ts *unix.Timespec
			dl := c.deadline.Load()
			if dl != 0 {
				wait := dl - time.Now().UnixNano()
				if wait <= 0 {
					err = os.ErrDeadlineExceeded
					return
				}
				t := unix.NsecToTimespec(wait)
				ts = &t
			}
			if c.poll == RxPollBusy {
				continue
			}
			c.sleeping.Store(dl)
			if c.deadline.Load() != dl { // moved while we looked: look again
				c.sleeping.Store(-1)
				continue
			}
			_, e := unix.Ppoll(pfd[:], ts, nil)
			c.sleeping.Store(-1)
			if e != nil && e != unix.EINTR {
				err = os.NewSyscallError("ppoll", e)
				return
			}
			if pfd[1].Revents != 0 {
				var b [8]byte
				_, _ = unix.Read(c.efd, b[:]) // reset the eventfd
			}
		}
	})
	if cerr != nil {
		err = cerr
	}
	if err != nil {
		if !c.closed.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
			c.stats.readErrors.Add(1)
		}
		return 0, c.opErr("read", err)
	}
	return n, nil
}

// collect turns the s.n received messages into ms[0..k), dropping (and
// counting) frames that are not for this Conn; the kernel's filter makes
// that a no-op in practice.
func (c *PacketConn) collect(s *recvState, ms []Message) int {
	k := 0
	var bytes uint64
	for i := range s.n {
		l := int(s.msgs[i].len)
		h := &s.hdrs[i]
		if l < exo.EthHeaderLen || binary.BigEndian.Uint16(h[12:]) != exo.EtherType {
			c.stats.filtered.Add(1)
			continue
		}
		n := l - exo.EthHeaderLen
		trunc := s.msgs[i].hdr.Flags&unix.MSG_TRUNC != 0
		if c.group >= 0 && (n < exo.OffGroup+exo.SizeGroup ||
			int(binary.BigEndian.Uint16(ms[i].Buf[exo.OffGroup:])) != c.group) {
			c.stats.filtered.Add(1)
			continue
		}
		if k != i {
			if m := copy(ms[k].Buf, ms[i].Buf[:n]); m < n {
				n, trunc = m, true
			}
		}
		ms[k].N = n
		ms[k].Truncated = trunc
		setSrc(&ms[k].Src, h[6:12])
		if trunc {
			c.stats.truncated.Add(1)
		}
		bytes += uint64(n)
		k++
	}
	if k > 0 {
		c.stats.framesIn.Add(uint64(k))
		c.stats.bytesIn.Add(bytes)
	}
	return k
}

// mmsghdr is struct mmsghdr of recvmmsg(2). Go pads it like C: to the
// alignment of Msghdr.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// recvState is the pooled state of one recvmmsg call: per message, an
// iovec for the Ethernet header (into hdrs) and one for the caller's
// buffer. fn is allocated once, so a read does not allocate.
type recvState struct {
	vlen int
	n    int
	err  error
	msgs [MaxBatch]mmsghdr
	iovs [2 * MaxBatch]unix.Iovec
	hdrs [MaxBatch][exo.EthHeaderLen]byte
	one  [1]Message
	fn   func(fd uintptr) bool
}

func newRecvState() *recvState {
	s := &recvState{}
	for i := range s.msgs {
		s.iovs[2*i].Base = &s.hdrs[i][0]
		s.iovs[2*i].SetLen(exo.EthHeaderLen)
		s.msgs[i].hdr.Iov = &s.iovs[2*i]
		s.msgs[i].hdr.SetIovlen(2)
	}
	s.fn = s.recv
	return s
}

func (s *recvState) set(ms []Message) {
	s.vlen, s.n, s.err = len(ms), 0, nil
	for i := range ms {
		iov := &s.iovs[2*i+1]
		iov.Base = nil
		if len(ms[i].Buf) > 0 {
			iov.Base = &ms[i].Buf[0]
		}
		iov.SetLen(len(ms[i].Buf))
		s.msgs[i].hdr.Flags = 0
		s.msgs[i].len = 0
	}
}

// clear drops the references to the caller's buffers.
func (s *recvState) clear() {
	for i := range s.vlen {
		s.iovs[2*i+1].Base = nil
	}
}

// recv is the syscall.RawConn.Read callback: false means "not ready, wait
// in the poller".
func (s *recvState) recv(fd uintptr) bool {
	for {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&s.msgs[0])), uintptr(s.vlen), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			s.n = int(r)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			s.err = os.NewSyscallError("recvmmsg", e)
			return true
		}
	}
}

// sendState is the pooled state of one sendmsg call: the Ethernet header,
// the frame and the padding as three iovecs.
type sendState struct {
	iovs [3]unix.Iovec
	msg  unix.Msghdr
	err  error
	fn   func(fd uintptr) bool
}

func newSendState() *sendState {
	s := &sendState{}
	s.msg.Iov = &s.iovs[0]
	s.fn = s.send
	return s
}

func (s *sendState) set(c *PacketConn, b []byte) {
	s.err = nil
	s.iovs[0].Base = &c.hdr[0]
	s.iovs[0].SetLen(exo.EthHeaderLen)
	n := 1
	if len(b) > 0 {
		s.iovs[n].Base = &b[0]
		s.iovs[n].SetLen(len(b))
		n++
	}
	if pad := MinFrameLen - len(b); pad > 0 {
		s.iovs[n].Base = &zeros[0]
		s.iovs[n].SetLen(pad)
		n++
	}
	s.msg.SetIovlen(n)
}

func (s *sendState) clear() {
	s.iovs = [3]unix.Iovec{}
}

// send is the syscall.RawConn.Write callback.
func (s *sendState) send(fd uintptr) bool {
	for {
		_, _, e := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&s.msg)), 0)
		switch e {
		case 0:
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			s.err = os.NewSyscallError("sendmsg", e)
			return true
		}
	}
}
