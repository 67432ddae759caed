//go:build linux

package xdp

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

	"golang.org/x/sys/unix"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/exo"
)

// AF_XDP delivery (docs/xdp.md section 4). The program redirects the
// frames it passes (ACCEPT and the slow path, with their verdict in the
// metadata area) to the AF_XDP socket of their RX queue when one is in its
// XSKMAP. An XSK is one such socket in copy mode (XDP_COPY: veth and
// generic XDP have no zero-copy) with its own UMEM; XSKConn is the
// broadcast.Conn the daemon reads from: one XSK per RX queue for the
// receive side, an AF_PACKET socket (broadcast.PacketConn) for sending.

// XSK defaults.
const (
	// DefaultXSKFrames is the number of UMEM frames of one socket.
	DefaultXSKFrames = 4096
	// DefaultXSKFrameSize is the UMEM frame size when the interface MTU
	// fits it: 2048 bytes, of which the kernel keeps XDP_PACKET_HEADROOM
	// (256) in front of the frame (the metadata goes there), leaving 1792
	// bytes for the Ethernet frame. NewXSKConn takes 4096 (3840 bytes of
	// frame) when the MTU needs it.
	DefaultXSKFrameSize = 2048
)

// ErrXSKMTU is returned by NewXSKConn when a frame of the interface MTU
// does not fit a UMEM frame: the socket would drop it (copy mode without
// multi-buffer), so such an interface must use AF_PACKET delivery.
var ErrXSKMTU = errors.New("xdp: interface MTU too large for an AF_XDP UMEM frame")

// XSKOptions configure NewXSKConn. The zero value is the default.
type XSKOptions struct {
	// Conn configures the AF_PACKET socket (broadcast.Listen) that sends
	// the frames and receives what reaches the stack (see XSKConn).
	Conn broadcast.Options
	// Queues is the number of RX queues, 0..Queues-1, to bind a socket
	// to; 0 means every RX queue of the interface (ETHTOOL_GCHANNELS; 1
	// if the driver does not say).
	Queues int
	// Frames is the number of UMEM frames per socket (a power of 2;
	// DefaultXSKFrames if 0). The fill and RX rings have as many entries.
	Frames int
	// FrameSize is the UMEM frame size, 2048 or 4096 (0: 2048, or 4096 if
	// the MTU needs it).
	FrameSize int
	// BusyPoll is how long a read spins on empty rings before it blocks;
	// 0 blocks at once.
	BusyPoll time.Duration
	// Ppoll makes a read block in ppoll(2) on the sockets, holding its OS
	// thread, instead of in the Go runtime's network poller (an epoll set
	// of the sockets, itself in the poller). Measured slower on veth
	// (docs/xdp.md); kept for the comparison.
	Ppoll bool
}

// XSK is one AF_XDP socket bound to one RX queue in copy mode, with its
// own UMEM, fill ring, completion ring (required by bind, unused: the
// socket never sends) and RX ring. It is not safe for concurrent use:
// XSKConn serializes its readers.
type XSK struct {
	fd        int
	queue     int
	frameSize uint64
	umem      []byte
	fill      ring // u64 UMEM addresses, produced by us
	rx        ring // struct xdp_desc, produced by the kernel
	fillMem   []byte
	rxMem     []byte
	frames    atomic.Uint64
}

// ring is one mmapped AF_XDP ring: the producer and consumer indexes
// shared with the kernel and the cached copies of libxdp's xsk.h.
type ring struct {
	producer   *uint32
	consumer   *uint32
	addrs      []uint64       // fill ring
	descs      []unix.XDPDesc // RX ring
	mask       uint32
	size       uint32
	cachedProd uint32
	cachedCons uint32
}

// openXSK opens a socket bound to (ifindex, queue) with a UMEM of frames
// frames of frameSize bytes, all of them in the fill ring.
func openXSK(ifindex, queue, frames, frameSize int) (_ *XSK, err error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket(AF_XDP): %w", err)
	}
	s := &XSK{fd: fd, queue: queue, frameSize: uint64(frameSize)}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	s.umem, err = unix.Mmap(-1, 0, frames*frameSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap UMEM (%d bytes): %w", frames*frameSize, err)
	}
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))),
		Len:  uint64(len(s.umem)),
		Size: uint32(frameSize),
	}
	if err := setsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return nil, fmt.Errorf("XDP_UMEM_REG: %w", err)
	}
	for _, o := range []struct {
		opt, n int
		name   string
	}{
		{unix.XDP_UMEM_FILL_RING, frames, "XDP_UMEM_FILL_RING"},
		{unix.XDP_UMEM_COMPLETION_RING, 64, "XDP_UMEM_COMPLETION_RING"},
		{unix.XDP_RX_RING, frames, "XDP_RX_RING"},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o.opt, o.n); err != nil {
			return nil, fmt.Errorf("%s %d: %w", o.name, o.n, err)
		}
	}
	var off unix.XDPMmapOffsets
	optlen := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&optlen)), 0); e != 0 {
		return nil, fmt.Errorf("XDP_MMAP_OFFSETS: %w", e)
	}
	if optlen != uint32(unsafe.Sizeof(off)) {
		return nil, fmt.Errorf("XDP_MMAP_OFFSETS: %d bytes, want %d (kernel older than 5.4)", optlen, unsafe.Sizeof(off))
	}
	mapRing := func(pgoff int64, o unix.XDPRingOffset, n, entry int) ([]byte, ring, error) {
		mem, err := unix.Mmap(fd, pgoff, int(o.Desc)+n*entry, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return nil, ring{}, err
		}
		r := ring{
			producer: (*uint32)(unsafe.Pointer(&mem[o.Producer])),
			consumer: (*uint32)(unsafe.Pointer(&mem[o.Consumer])),
			mask:     uint32(n - 1),
			size:     uint32(n),
		}
		return mem, r, nil
	}
	if s.fillMem, s.fill, err = mapRing(unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, frames, 8); err != nil {
		return nil, fmt.Errorf("mmap fill ring: %w", err)
	}
	s.fill.addrs = unsafe.Slice((*uint64)(unsafe.Pointer(&s.fillMem[off.Fr.Desc])), frames)
	if s.rxMem, s.rx, err = mapRing(unix.XDP_PGOFF_RX_RING, off.Rx, frames, int(unsafe.Sizeof(unix.XDPDesc{}))); err != nil {
		return nil, fmt.Errorf("mmap RX ring: %w", err)
	}
	s.rx.descs = unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&s.rxMem[off.Rx.Desc])), frames)
	// Every frame goes to the fill ring: the socket never sends, so each
	// frame is in the fill ring, in the RX ring or being read.
	s.fill.cachedCons = atomic.LoadUint32(s.fill.consumer) + s.fill.size
	for i := range frames {
		s.fill.addrs[(s.fill.cachedProd+uint32(i))&s.fill.mask] = uint64(i * frameSize)
	}
	s.fill.cachedProd += uint32(frames)
	atomic.StoreUint32(s.fill.producer, s.fill.cachedProd)
	// A socket closed on this queue a moment ago leaves it busy until the
	// kernel's deferred release has run: retry EBUSY for a while.
	sa := &unix.SockaddrXDP{Flags: unix.XDP_COPY, Ifindex: uint32(ifindex), QueueID: uint32(queue)}
	for give := time.Now().Add(bindBusyWait); ; time.Sleep(5 * time.Millisecond) {
		err = unix.Bind(fd, sa)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(give) {
			return nil, fmt.Errorf("bind to ifindex %d queue %d (copy mode): %w", ifindex, queue, err)
		}
	}
}

// bindBusyWait is how long openXSK retries a bind that finds the queue
// busy (another socket on it, or one being released).
const bindBusyWait = 2 * time.Second

func setsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	if _, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0); e != 0 {
		return e
	}
	return nil
}

// FD returns the socket's file descriptor (for Program.RegisterXSK).
func (s *XSK) FD() int { return s.fd }

// Queue returns the RX queue the socket is bound to.
func (s *XSK) Queue() int { return s.queue }

// close unmaps the rings and the UMEM and closes the socket.
func (s *XSK) close() error {
	var err error
	for _, m := range [][]byte{s.rxMem, s.fillMem} {
		if m != nil {
			if e := unix.Munmap(m); e != nil && err == nil {
				err = e
			}
		}
	}
	s.rxMem, s.fillMem = nil, nil
	if s.fd >= 0 {
		if e := unix.Close(s.fd); e != nil && err == nil {
			err = e
		}
		s.fd = -1
	}
	// The UMEM is unpinned when the socket is released; unmap it last.
	if s.umem != nil {
		if e := unix.Munmap(s.umem); e != nil && err == nil {
			err = e
		}
		s.umem = nil
	}
	return err
}

// Frames returns the number of frames read from the socket.
func (s *XSK) Frames() uint64 { return s.frames.Load() }

// Stats returns the kernel's XDP_STATISTICS of the socket.
func (s *XSK) Stats() (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	n := uint32(unsafe.Sizeof(st))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
		return st, e
	}
	return st, nil
}

// recv moves up to len(ms) frames from the RX ring into ms (and their
// verdicts into vs, if not nil), gives their UMEM frames back to the fill
// ring, and returns how many it filled. A frame that is not Exo (the
// program never redirects one) is discarded and counted as filtered.
func (s *XSK) recv(ms []broadcast.Message, vs []Verdict, st *xskCounters) int {
	avail := s.rx.cachedProd - s.rx.cachedCons
	if avail == 0 {
		s.rx.cachedProd = atomic.LoadUint32(s.rx.producer)
		avail = s.rx.cachedProd - s.rx.cachedCons
	}
	avail = min(avail, uint32(len(ms)))
	if avail == 0 {
		return 0
	}
	// Free room in the fill ring: never less than avail, as each frame is
	// in exactly one place; checked all the same.
	if free := s.fill.cachedCons - s.fill.cachedProd; free < avail {
		s.fill.cachedCons = atomic.LoadUint32(s.fill.consumer) + s.fill.size
		avail = min(avail, s.fill.cachedCons-s.fill.cachedProd)
	}
	k := 0
	var bytes uint64
	for i := range avail {
		d := s.rx.descs[(s.rx.cachedCons+i)&s.rx.mask]
		addr, l := d.Addr, uint64(d.Len)
		base := addr &^ (s.frameSize - 1)
		s.fill.addrs[(s.fill.cachedProd+i)&s.fill.mask] = base
		if addr < base+MetaLen || addr+l > base+s.frameSize || base+s.frameSize > uint64(len(s.umem)) {
			st.filtered.Add(1) // cannot happen: the kernel writes within the frame
			continue
		}
		frame := s.umem[addr : addr+l]
		meta := s.umem[addr-MetaLen : addr]
		v, ok := ParseMeta(meta)
		// Clear the metadata area: a later frame in this UMEM frame
		// without metadata must not show this one's verdict.
		clear(meta)
		if !ok {
			v = Verdict{Action: ActionPass}
		}
		v.Redirected = true
		if l < exo.EthHeaderLen || binary.BigEndian.Uint16(frame[12:]) != exo.EtherType {
			st.filtered.Add(1)
			continue
		}
		m := &ms[k]
		n := copy(m.Buf, frame[exo.EthHeaderLen:])
		m.N = n
		m.Truncated = n < int(l)-exo.EthHeaderLen
		if m.Truncated {
			st.truncated.Add(1)
		}
		setSrc(&m.Src, frame[6:12])
		if vs != nil {
			vs[k] = v
		}
		bytes += uint64(n)
		k++
	}
	s.rx.cachedCons += avail
	atomic.StoreUint32(s.rx.consumer, s.rx.cachedCons)
	s.fill.cachedProd += avail
	atomic.StoreUint32(s.fill.producer, s.fill.cachedProd)
	st.framesIn.Add(uint64(k))
	st.bytesIn.Add(bytes)
	s.frames.Add(uint64(k))
	return k
}

// setSrc stores mac in *dst, reusing its storage when it can.
func setSrc(dst *net.HardwareAddr, mac []byte) {
	if cap(*dst) >= len(mac) {
		*dst = append((*dst)[:0], mac...)
		return
	}
	*dst = append(net.HardwareAddr(nil), mac...)
}

// XSKConn is a broadcast.Conn that receives through AF_XDP: the frames the
// XDP program passes, redirected to one AF_XDP socket per RX queue, each
// with the program's verdict (ReadFramesVerdicts). It sends through an
// AF_PACKET socket (broadcast.PacketConn, WriteFrame).
//
// The AF_PACKET socket also receives what reaches the stack instead of a
// socket: every Exo frame while the program is not attached (before
// Attach, after the attachment is closed, or when attaching failed), and
// the frames passed on an RX queue that has no socket. XSKConn reads those
// too, without a verdict (Verdict.HasReason false, Redirected false), so
// that no frame is lost whichever path it took.
//
// A frame of more than the UMEM frame size less XDP_PACKET_HEADROOM (1792
// bytes with the default 2048-byte frames, Ethernet header included)
// would be dropped by the socket: NewXSKConn refuses an interface whose
// MTU allows one (ErrXSKMTU). MTU 1500, as in the lab, fits.
type XSKConn struct {
	ifname string
	name   xskAddr
	prog   *Program
	socks  []*XSK
	send   *broadcast.PacketConn
	busy   time.Duration
	evfd   int      // eventfd: stack frames queued (and, with Ppoll, wake up)
	epf    *os.File // epoll set of the sockets and evfd, in the runtime poller
	rc     syscall.RawConn
	ppoll  bool
	pfds   []unix.PollFd // with Ppoll: the sockets, then evfd
	stack  chan stackFrame
	wg     sync.WaitGroup

	rmu      sync.Mutex   // one reader at a time; Close waits for it
	smu      sync.RWMutex // the sockets: Stats reads them, Close frees them
	next     int          // first socket of the next read (round robin)
	one      [1]broadcast.Message
	deadline atomic.Int64 // UnixNano; 0: none
	closed   atomic.Bool
	stats    xskCounters
}

// stackFrame is a frame the AF_PACKET socket received.
type stackFrame struct {
	b   []byte
	src [6]byte
}

// stackQueue bounds the frames read from the AF_PACKET socket and not yet
// returned; more are dropped (counted in Stats().Dropped).
const stackQueue = 1024

type xskCounters struct {
	framesIn, bytesIn, filtered, truncated, stackDropped, readErrors atomic.Uint64
}

var _ broadcast.Conn = (*XSKConn)(nil)

// NewXSKConn opens an XSKConn on interface ifname (in the caller's network
// namespace) and registers its sockets in p's XSKMAP, one per RX queue.
// p need not be attached yet: until it is, frames arrive through the
// AF_PACKET socket, without a verdict. It needs CAP_NET_RAW, CAP_NET_ADMIN
// and CAP_BPF (root). Close unregisters the sockets and frees everything;
// close the XSKConn before p.
func NewXSKConn(p *Program, ifname string, opts XSKOptions) (_ *XSKConn, err error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("xdp: AF_XDP on %s: %w", ifname, err)
	}
	frames := opts.Frames
	if frames == 0 {
		frames = DefaultXSKFrames
	}
	if frames < 64 || frames&(frames-1) != 0 {
		return nil, fmt.Errorf("xdp: AF_XDP: %d UMEM frames, want a power of 2 >= 64", frames)
	}
	fsize := opts.FrameSize
	if fsize == 0 {
		fsize = DefaultXSKFrameSize
		if ifi.MTU+exo.EthHeaderLen > fsize-unix.XDP_PACKET_HEADROOM {
			fsize = 4096
		}
	}
	if fsize != 2048 && fsize != 4096 {
		return nil, fmt.Errorf("xdp: AF_XDP: UMEM frame size %d, want 2048 or 4096", fsize)
	}
	if room := fsize - unix.XDP_PACKET_HEADROOM; ifi.MTU+exo.EthHeaderLen > room {
		return nil, fmt.Errorf("%w: %s has MTU %d (%d-byte frames), a %d-byte UMEM frame holds %d: use AF_PACKET delivery",
			ErrXSKMTU, ifname, ifi.MTU, ifi.MTU+exo.EthHeaderLen, fsize, room)
	}
	queues := opts.Queues
	if queues == 0 {
		queues = rxQueues(ifname)
	}
	if queues < 1 || queues > MaxXSKs {
		return nil, fmt.Errorf("xdp: AF_XDP on %s: %d RX queues, the program holds %d", ifname, queues, MaxXSKs)
	}
	send, err := broadcast.Listen(ifname, opts.Conn)
	if err != nil {
		return nil, err
	}
	c := &XSKConn{
		ifname: ifname,
		name:   xskAddr(ifname),
		prog:   p,
		send:   send,
		busy:   opts.BusyPoll,
		ppoll:  opts.Ppoll,
		evfd:   -1,
		stack:  make(chan stackFrame, stackQueue),
	}
	defer func() {
		if err != nil {
			c.free()
		}
	}()
	for q := range queues {
		s, err := openXSK(ifi.Index, q, frames, fsize)
		if err != nil {
			return nil, fmt.Errorf("xdp: AF_XDP on %s: %w", ifname, err)
		}
		c.socks = append(c.socks, s)
		c.pfds = append(c.pfds, unix.PollFd{Fd: int32(s.fd), Events: unix.POLLIN})
	}
	if c.evfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("xdp: eventfd: %w", err)
	}
	c.pfds = append(c.pfds, unix.PollFd{Fd: int32(c.evfd), Events: unix.POLLIN})
	if err := c.pollSet(); err != nil {
		return nil, fmt.Errorf("xdp: AF_XDP on %s: %w", ifname, err)
	}
	for _, s := range c.socks {
		if err := p.RegisterXSK(s.queue, s.fd); err != nil {
			return nil, err
		}
	}
	c.wg.Add(1)
	go c.stackLoop()
	return c, nil
}

// pollSet puts the sockets and the eventfd in an epoll set and the set in
// the runtime's network poller (an epoll set is readable when one of its
// fds is): a read that finds the rings empty parks its goroutine there.
func (c *XSKConn) pollSet() error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	for _, pfd := range c.pfds {
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, int(pfd.Fd), &unix.EpollEvent{Events: unix.EPOLLIN, Fd: pfd.Fd}); err != nil {
			unix.Close(epfd)
			return fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return err
	}
	c.epf = os.NewFile(uintptr(epfd), "xsk-epoll")
	c.rc, err = c.epf.SyscallConn()
	return err
}

// rxQueues returns the number of RX queues of ifname (ETHTOOL_GCHANNELS:
// rx + combined channels), 1 if the driver does not say.
func rxQueues(ifname string) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 1
	}
	defer unix.Close(fd)
	var ch struct {
		cmd                                         uint32
		maxRx, maxTx, maxOther, maxCombined         uint32
		rxCount, txCount, otherCount, combinedCount uint32
	}
	ch.cmd = unix.ETHTOOL_GCHANNELS
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte
	}
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	ifr.data = unsafe.Pointer(&ch)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return 1
	}
	if n := int(ch.rxCount + ch.combinedCount); n > 0 {
		return n
	}
	return 1
}

// stackLoop reads the AF_PACKET socket (the frames that reached the
// stack) into c.stack until the socket is closed.
func (c *XSKConn) stackLoop() {
	defer c.wg.Done()
	ms := make([]broadcast.Message, broadcast.MaxBatch)
	for i := range ms {
		ms[i].Buf = make([]byte, c.send.MTU())
		ms[i].Src = make(net.HardwareAddr, 6)
	}
	for {
		n, err := c.send.ReadFrames(ms)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || c.closed.Load() {
				return
			}
			time.Sleep(time.Millisecond)
			continue
		}
		for _, m := range ms[:n] {
			f := stackFrame{b: append([]byte(nil), m.Buf[:m.N]...)}
			copy(f.src[:], m.Src)
			select {
			case c.stack <- f:
			default:
				c.stats.stackDropped.Add(1)
			}
		}
		c.wake()
	}
}

// wake interrupts a reader blocked in ppoll.
func (c *XSKConn) wake() {
	one := [8]byte{1}
	_, _ = unix.Write(c.evfd, one[:])
}

// Sockets returns the AF_XDP sockets, by RX queue.
func (c *XSKConn) Sockets() []*XSK { return c.socks }

// HardwareAddr returns the interface's MAC.
func (c *XSKConn) HardwareAddr() net.HardwareAddr { return c.send.HardwareAddr() }

// MTU returns the interface MTU.
func (c *XSKConn) MTU() int { return c.send.MTU() }

// WriteFrame sends b (the bytes after the Ethernet header) on the
// AF_PACKET socket (broadcast.PacketConn.WriteFrame).
func (c *XSKConn) WriteFrame(b []byte) error { return c.send.WriteFrame(b) }

// SetReadDeadline sets the deadline of ReadFrame, ReadFrames and
// ReadFramesVerdicts; the zero time means none.
func (c *XSKConn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	var d int64
	if !t.IsZero() {
		d = t.UnixNano()
	}
	if err := c.epf.SetReadDeadline(t); err != nil {
		return c.opErr("set", err)
	}
	// A reader blocked in ppoll re-reads the deadline whenever ppoll
	// returns: it needs waking only for an earlier deadline than the one
	// it waits for (extending the deadline, as a read loop does, costs no
	// syscall).
	if old := c.deadline.Swap(d); c.ppoll && d != 0 && (old == 0 || d < old) {
		c.wake()
	}
	return nil
}

// ReadFrame reads one frame (a batch of one).
func (c *XSKConn) ReadFrame(b []byte) (int, net.HardwareAddr, error) {
	c.rmu.Lock()
	c.one[0] = broadcast.Message{Buf: b}
	_, err := c.readLocked(c.one[:], nil)
	m := c.one[0]
	c.one[0] = broadcast.Message{}
	c.rmu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	if m.Truncated {
		return m.N, m.Src, c.opErr("read", fmt.Errorf("%w: %d-byte buffer", broadcast.ErrTruncated, len(b)))
	}
	return m.N, m.Src, nil
}

// ReadFrames reads up to min(len(ms), broadcast.MaxBatch) frames, blocking
// until one is available (see ReadFramesVerdicts).
func (c *XSKConn) ReadFrames(ms []broadcast.Message) (int, error) {
	return c.ReadFramesVerdicts(ms, nil)
}

// ReadFramesVerdicts is ReadFrames that also returns, in vs[i] (if vs is
// not nil; len(vs) >= len(ms)), the program's verdict on frame ms[i]:
// ACCEPT or a slow-path reason, Redirected set, for a frame that came
// through AF_XDP, so the caller knows ACCEPT from the slow path without
// classifying again; HasReason false for a frame that came through the
// AF_PACKET socket (or whose metadata the program could not write:
// CounterNoMeta). It takes what the rings hold, up to the batch, without
// blocking again; with empty rings it spins for XSKOptions.BusyPoll, then
// blocks (in the runtime poller, or in ppoll(2) with XSKOptions.Ppoll)
// until a socket has a frame, the deadline passes or the conn is closed.
func (c *XSKConn) ReadFramesVerdicts(ms []broadcast.Message, vs []Verdict) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	if len(ms) > broadcast.MaxBatch {
		ms = ms[:broadcast.MaxBatch]
	}
	if vs != nil && len(vs) < len(ms) {
		return 0, fmt.Errorf("xdp: ReadFramesVerdicts: %d verdicts for %d messages", len(vs), len(ms))
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.readLocked(ms, vs)
}

func (c *XSKConn) readLocked(ms []broadcast.Message, vs []Verdict) (int, error) {
	if c.closed.Load() {
		return 0, c.opErr("read", net.ErrClosed)
	}
	if k := c.collect(ms, vs); k > 0 {
		return k, nil
	}
	if c.busy > 0 {
		for end := time.Now().Add(c.busy); time.Now().Before(end); {
			if k := c.collect(ms, vs); k > 0 {
				return k, nil
			}
			if c.closed.Load() {
				return 0, c.opErr("read", net.ErrClosed)
			}
		}
	}
	if c.ppoll {
		return c.readPpoll(ms, vs)
	}
	k := 0
	err := c.rc.Read(func(uintptr) bool {
		k = c.collect(ms, vs)
		return k > 0
	})
	if err != nil {
		if !c.closed.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
			c.stats.readErrors.Add(1)
		}
		return 0, c.opErr("read", err)
	}
	return k, nil
}

// readPpoll blocks in ppoll(2) until a socket has a frame.
func (c *XSKConn) readPpoll(ms []broadcast.Message, vs []Verdict) (int, error) {
	for {
		if c.closed.Load() {
			return 0, c.opErr("read", net.ErrClosed)
		}
		if k := c.collect(ms, vs); k > 0 {
			return k, nil
		}
		var timeout *unix.Timespec
		if dl := c.deadline.Load(); dl != 0 {
			left := dl - time.Now().UnixNano()
			if left <= 0 {
				return 0, c.opErr("read", os.ErrDeadlineExceeded)
			}
			ts := unix.NsecToTimespec(left)
			timeout = &ts
		}
		for i := range c.pfds {
			c.pfds[i].Revents = 0
		}
		if _, err := unix.Ppoll(c.pfds, timeout, nil); err != nil && !errors.Is(err, unix.EINTR) {
			c.stats.readErrors.Add(1)
			return 0, c.opErr("read", os.NewSyscallError("ppoll", err))
		}
		if c.pfds[len(c.pfds)-1].Revents != 0 {
			var b [8]byte
			_, _ = unix.Read(c.evfd, b[:])
		}
	}
}

// collect fills ms from the rings, starting with a different socket on
// each call, then from the frames the AF_PACKET socket received.
func (c *XSKConn) collect(ms []broadcast.Message, vs []Verdict) int {
	k := 0
	n := len(c.socks)
	for j := 0; j < n && k < len(ms); j++ {
		var vk []Verdict
		if vs != nil {
			vk = vs[k:]
		}
		k += c.socks[(c.next+j)%n].recv(ms[k:], vk, &c.stats)
	}
	c.next++
	if len(c.stack) == 0 {
		return k
	}
	// Clear the eventfd before taking the frames: a frame queued after
	// this read writes it again, so its wake-up is not lost.
	var b [8]byte
	_, _ = unix.Read(c.evfd, b[:])
	for k < len(ms) && len(c.stack) > 0 {
		f := <-c.stack
		m := &ms[k]
		m.N = copy(m.Buf, f.b)
		m.Truncated = m.N < len(f.b)
		if m.Truncated {
			c.stats.truncated.Add(1)
		}
		setSrc(&m.Src, f.src[:])
		if vs != nil {
			vs[k] = Verdict{Action: ActionPass}
		}
		c.stats.framesIn.Add(1)
		c.stats.bytesIn.Add(uint64(m.N))
		k++
	}
	return k
}

// Stats returns the counters: frames in from both paths, frames out from
// the AF_PACKET socket; Dropped adds the sockets' kernel drops (RX ring
// full, fill ring empty: XDP_STATISTICS rx_dropped + rx_ring_full), the
// AF_PACKET socket's, and the stack frames beyond the queue of 1024.
func (c *XSKConn) Stats() broadcast.Stats {
	st := c.send.Stats()
	// The AF_PACKET socket's frames in are counted when collect returns
	// them, with the AF_XDP ones.
	st.FramesIn = c.stats.framesIn.Load()
	st.BytesIn = c.stats.bytesIn.Load()
	st.Filtered += c.stats.filtered.Load()
	st.Truncated += c.stats.truncated.Load()
	st.Dropped += c.stats.stackDropped.Load()
	st.ReadErrors += c.stats.readErrors.Load()
	c.smu.RLock()
	for _, s := range c.socks {
		if k, err := s.Stats(); err == nil {
			st.Dropped += k.Rx_dropped + k.Rx_ring_full
		}
	}
	c.smu.RUnlock()
	return st
}

// Close unregisters the sockets from the program's XSKMAP (the program's
// passed frames go to the stack again), unblocks and waits for the
// reader, closes the sockets and the AF_PACKET socket, and frees the
// UMEMs.
func (c *XSKConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.epf.Close() // unblocks a reader in the runtime poller
	c.wake()      // and one in ppoll
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.free()
}

// free releases everything NewXSKConn acquired.
func (c *XSKConn) free() error {
	var err error
	for _, s := range c.socks {
		// Closing the socket removes it from the map too; unregister
		// first so that no frame is redirected to a closing socket.
		// EBADF: the program (and its map) is closed already.
		if e := c.prog.UnregisterXSK(s.queue); e != nil && !errors.Is(e, unix.EBADF) && err == nil {
			err = e
		}
	}
	if e := c.send.Close(); e != nil && err == nil {
		err = e
	}
	c.wg.Wait()
	for _, s := range c.socks {
		if e := s.close(); e != nil && err == nil {
			err = fmt.Errorf("xdp: closing the AF_XDP socket of queue %d: %w", s.queue, e)
		}
	}
	c.socks = nil
	if c.epf != nil {
		c.epf.Close()
	}
	if c.evfd >= 0 {
		unix.Close(c.evfd)
		c.evfd = -1
	}
	return err
}

func (c *XSKConn) opErr(op string, err error) error {
	if c.closed.Load() {
		err = net.ErrClosed
	}
	return &net.OpError{Op: op, Net: "exo-xdp", Addr: c.name, Err: err}
}

// xskAddr names an XSKConn in errors.
type xskAddr string

func (a xskAddr) Network() string { return "exo-xdp" }
func (a xskAddr) String() string  { return string(a) }
