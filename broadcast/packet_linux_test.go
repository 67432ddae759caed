//go:build linux

package broadcast

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

func TestPacketConn(t *testing.T) {
	p := newVethPair(t, 1500)
	a := listenIn(t, p.A, Options{})
	b := listenIn(t, p.B, Options{})
	if !bytes.Equal(a.HardwareAddr(), macA) || a.MTU() != 1500 {
		t.Fatalf("a: MAC %v MTU %d", a.HardwareAddr(), a.MTU())
	}
	testConnPair(t, a, b)
}

func TestPacketConnJumbo(t *testing.T) {
	p := newVethPair(t, 9000)
	a := listenIn(t, p.A, Options{})
	b := listenIn(t, p.B, Options{})
	if a.MTU() != 9000 {
		t.Fatalf("MTU %d, want 9000", a.MTU())
	}
	if err := a.WriteFrame(frameOfLen(t, 1, 1, 9000)); err != nil {
		t.Fatal(err)
	}
	if got, _ := readOne(t, b); len(got) != 9000 || seqOf(t, got) != 1 {
		t.Errorf("jumbo frame: %d bytes", len(got))
	}
}

// rawSocket opens an unfiltered SOCK_RAW socket on exo0 in ns, bound to
// protocol (unix.ETH_P_ALL: every frame): a raw injector, or a control
// receiver that sees what the link really carried.
func rawSocket(t *testing.T, ns string, protocol int) *packet.Conn {
	t.Helper()
	var c *packet.Conn
	err := lab.InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(testIf)
		if err != nil {
			return err
		}
		c, err = packet.Listen(ifi, packet.Raw, protocol, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// seenFrames reads c until d passes and returns the whole frames it read
// (VLAN tags already stripped by the kernel).
func seenFrames(t *testing.T, c *packet.Conn, d time.Duration) [][]byte {
	t.Helper()
	var frames [][]byte
	c.SetReadDeadline(time.Now().Add(d))
	for {
		buf := make([]byte, 2000)
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			return frames
		}
		frames = append(frames, buf[:n])
	}
}

// containsFrame reports whether frames holds one whose bytes after the
// Ethernet header start with body.
func containsFrame(frames [][]byte, body []byte) bool {
	for _, f := range frames {
		if len(f) >= exo.EthHeaderLen && bytes.HasPrefix(f[exo.EthHeaderLen:], body) {
			return true
		}
	}
	return false
}

// TestPacketConnFilter sends foreign frames on the link with a raw socket
// and checks that ReadFrame never returns them: the first frame it
// returns is the marker sent after them. Control sockets on the same
// interface show that the foreign frames did arrive.
func TestPacketConnFilter(t *testing.T) {
	p := newVethPair(t, 1500)
	inject := rawSocket(t, p.A, unix.ETH_P_ALL)
	b := listenIn(t, p.B, Options{})
	bGroup := listenIn(t, p.B, Options{FilterGroup: true, Group: 1})
	controlAll := rawSocket(t, p.B, unix.ETH_P_ALL)     // sees everything
	controlExo := rawSocket(t, p.B, int(exo.EtherType)) // bound like b, without the BPF filter

	eth := func(dst net.HardwareAddr, etherType uint16, body []byte) []byte {
		f := append(append(append([]byte(nil), dst...), macA...), byte(etherType>>8), byte(etherType))
		f = append(f, body...)
		for len(f) < exo.MinEthFrame {
			f = append(f, 0)
		}
		return f
	}
	other := net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x99}
	ipv4 := exoFrame(t, 0xf0, 1, 3)
	exp := exoFrame(t, 0xf1, 1, 3)
	vlan := exoFrame(t, 0xf2, 1, 3)
	otherHost := exoFrame(t, 0xf3, 1, 3)
	group2 := exoFrame(t, 0xf4, 2, 3)
	marker := exoFrame(t, 0xff, 1, 3)
	foreign := []struct {
		name  string
		frame []byte
		body  []byte // what the control sockets see after the Ethernet header
	}{
		{"EtherType 0x0800", eth(BroadcastMAC, 0x0800, ipv4), ipv4},
		{"EtherType 0x88B6", eth(BroadcastMAC, 0x88b6, exp), exp},
		// 802.1Q tag (VLAN 5) before an Exo frame: the kernel strips the
		// tag before packet sockets see the frame, so only the filter's
		// vlan_avail check tells it from an untagged one.
		{"Exo in VLAN 5", eth(BroadcastMAC, 0x8100, append([]byte{0x00, 0x05, 0x88, 0xb5}, vlan...)), vlan},
		// An Exo frame to another host's MAC (PACKET_OTHERHOST).
		{"Exo to another host", eth(other, exo.EtherType, otherHost), otherHost},
	}
	for _, f := range foreign {
		if _, err := inject.WriteTo(f.frame, &packet.Addr{HardwareAddr: BroadcastMAC}); err != nil {
			t.Fatalf("inject %s: %v", f.name, err)
		}
	}
	a := listenIn(t, p.A, Options{})
	if err := a.WriteFrame(group2); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFrame(marker); err != nil {
		t.Fatal(err)
	}

	// b receives the group 2 frame (no group filter), then the marker.
	if got, _ := readOne(t, b); seqOf(t, got) != 0xf4 {
		t.Errorf("b: first frame is seq %#x, want the group 2 frame 0xf4", seqOf(t, got))
	}
	if got, _ := readOne(t, b); seqOf(t, got) != 0xff {
		t.Errorf("b: second frame is seq %#x, want the marker", seqOf(t, got))
	}
	expectNothing(t, b, 20*time.Millisecond)
	// bGroup filters group 2 in the kernel.
	if got, _ := readOne(t, bGroup); seqOf(t, got) != 0xff {
		t.Errorf("bGroup: first frame is seq %#x, want the marker", seqOf(t, got))
	}
	expectNothing(t, bGroup, 20*time.Millisecond)
	for _, c := range []*PacketConn{b, bGroup} {
		if s := c.Stats(); s.Filtered != 0 || s.Dropped != 0 {
			t.Errorf("%+v: the kernel filter let foreign frames through to user space", s)
		}
	}

	all := seenFrames(t, controlAll, 50*time.Millisecond)
	exoOnly := seenFrames(t, controlExo, 10*time.Millisecond)
	for _, f := range foreign {
		if !containsFrame(all, f.body) {
			t.Errorf("%s: not seen on the link by the ETH_P_ALL control socket", f.name)
		}
	}
	// Without the BPF filter, a socket bound to 0x88B5 gets the VLAN and
	// other-host frames: the bind protocol alone does not exclude them.
	for _, f := range foreign[2:] {
		if !containsFrame(exoOnly, f.body) {
			t.Errorf("%s: not received by the unfiltered 0x88B5 socket (the test proves nothing)", f.name)
		}
	}
	t.Logf("control sockets: %d frames on the link (ETH_P_ALL), %d with EtherType 0x88B5", len(all), len(exoOnly))
}

func TestListenErrors(t *testing.T) {
	t.Run("NoInterface", func(t *testing.T) {
		_, err := Listen("exo-nonexist0", Options{})
		if !errors.Is(err, ErrInterfaceNotFound) || !strings.Contains(err.Error(), "interface exo-nonexist0 not found") {
			t.Errorf("Listen(missing interface): %v", err)
		}
		t.Log(err)
	})
	t.Run("BadDst", func(t *testing.T) {
		_, err := Listen("lo", Options{Dst: macA})
		if err == nil || !strings.Contains(err.Error(), "not a broadcast or multicast") {
			t.Errorf("Listen(unicast Dst): %v", err)
		}
	})
	t.Run("MTUTooSmall", func(t *testing.T) {
		p := newVethPair(t, 100)
		err := lab.InNetns(p.A, func() error {
			_, err := Listen(testIf, Options{})
			return err
		})
		if !errors.Is(err, ErrMTUTooSmall) || !strings.Contains(err.Error(), "MTU 100 too small") {
			t.Errorf("Listen(MTU 100): %v", err)
		}
		t.Log(err)
		err = lab.InNetns(p.A, func() error {
			c, err := Listen(testIf, Options{MinMTU: 101})
			if err == nil {
				c.Close()
			}
			return err
		})
		if !errors.Is(err, ErrMTUTooSmall) {
			t.Errorf("Listen(MTU 100, MinMTU 101): %v", err)
		}
	})
	t.Run("NoCapNetRaw", func(t *testing.T) {
		if os.Geteuid() != 0 {
			// Not root: Listen itself must say what is missing (socket(2)
			// fails, so nothing is sent or received).
			ifname := ""
			ifs, _ := net.Interfaces()
			for _, ifi := range ifs {
				if len(ifi.HardwareAddr) == 6 && ifi.MTU >= MinFrameMTU {
					ifname = ifi.Name
					break
				}
			}
			if ifname == "" {
				t.Skip("not root, and no Ethernet interface to try Listen on")
			}
			_, err := Listen(ifname, Options{})
			if !errors.Is(err, ErrPermission) {
				t.Errorf("Listen as uid %d: %v, want ErrPermission", os.Geteuid(), err)
			}
			t.Log(err)
			return
		}
		p := newVethPair(t, 1500)
		err := lab.InNetns(p.A, func() error {
			// This thread is discarded afterwards (see inNetns): drop
			// CAP_NET_RAW from its effective set and never restore it.
			if err := dropEffectiveCap(unix.CAP_NET_RAW); err != nil {
				return err
			}
			c, err := Listen(testIf, Options{})
			if err == nil {
				c.Close()
				return errors.New("Listen succeeded without CAP_NET_RAW")
			}
			return err
		})
		if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "AF_PACKET needs CAP_NET_RAW: run as root") {
			t.Errorf("Listen without CAP_NET_RAW: %v", err)
		}
		t.Log(err)
	})
}

// dropEffectiveCap clears capability c from the calling thread's
// effective set.
func dropEffectiveCap(c int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[c/32].Effective &^= 1 << (c % 32)
	return unix.Capset(&hdr, &data[0])
}

// TestPacketConnKernelDrops fills a tiny receive buffer and checks that
// Stats().Dropped reports what the kernel dropped.
func TestPacketConnKernelDrops(t *testing.T) {
	p := newVethPair(t, 1500)
	a := listenIn(t, p.A, Options{})
	b := listenIn(t, p.B, Options{ReadBuffer: 1}) // the kernel's minimum, 2304 bytes
	const n = 200
	for i := range n {
		if err := a.WriteFrame(exoFrame(t, uint64(i), 1, 100)); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	buf := make([]byte, b.MTU())
	for {
		b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, _, err := b.ReadFrame(buf); err != nil {
			break
		}
		got++
	}
	s := b.Stats()
	t.Logf("sent %d, received %d, stats %+v", n, got, s)
	if s.Dropped == 0 || uint64(got)+s.Dropped != n || s.FramesIn != uint64(got) {
		t.Errorf("received %d + dropped %d != sent %d", got, s.Dropped, n)
	}
}

// TestPacketConnGroupMAC sends to a multicast group MAC (joined by
// Listen).
func TestPacketConnGroupMAC(t *testing.T) {
	p := newVethPair(t, 1500)
	group := net.HardwareAddr{0x03, 0x00, 0x00, 0x00, 0x88, 0xb5}
	a := listenIn(t, p.A, Options{Dst: group})
	b := listenIn(t, p.B, Options{Dst: group})
	control := rawSocket(t, p.B, int(exo.EtherType))
	if err := a.WriteFrame(exoFrame(t, 3, 1)); err != nil {
		t.Fatal(err)
	}
	if got, _ := readOne(t, b); seqOf(t, got) != 3 {
		t.Error("wrong frame")
	}
	frames := seenFrames(t, control, 20*time.Millisecond)
	if len(frames) != 1 || !bytes.Equal(frames[0][:6], group) {
		t.Errorf("on the link: %x, want one frame to %v", frames, group)
	}
}

// TestPacketConnNoAllocs checks that the batched data path does not
// allocate.
func TestPacketConnNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not checked with -race (sync.Pool drops items)")
	}
	p := newVethPair(t, 1500)
	a := listenIn(t, p.A, Options{})
	b := listenIn(t, p.B, Options{})
	frame := exoFrame(t, 1, 1, 64)
	ms := make([]Message, 8)
	for i := range ms {
		ms[i].Buf = make([]byte, 1500)
		ms[i].Src = make(net.HardwareAddr, 0, 6)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if err := a.WriteFrame(frame); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ReadFrames(ms); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("WriteFrame + ReadFrames: %v allocations, want 0", allocs)
	}
}

// BenchmarkPacketOneWay measures the one-way frame rate between the two
// namespaces of a veth pair (see benchOneWay).
func BenchmarkPacketOneWay(b *testing.B) {
	for _, bc := range []struct {
		name  string
		size  int
		batch int
	}{{"64B/read1", 64, 1}, {"64B/read64", 64, 64}, {"1500B/read1", 1500, 1}, {"1500B/read64", 1500, 64}, {"64B/mdlayher-ReadFrom", 64, 1}} {
		b.Run(bc.name, func(b *testing.B) {
			p := newVethPair(b, 1500)
			a := listenIn(b, p.A, Options{})
			// 64 MiB holds more than 4096 frames of any size.
			r := listenIn(b, p.B, Options{ReadBuffer: 64 << 20})
			var rc Conn = r
			if strings.Contains(bc.name, "mdlayher") {
				rc = mdlayherReader{r, make([]byte, 1514)}
			}
			benchOneWay(b, a, rc, bc.size, bc.batch, 4096)
			if d := r.Stats().Dropped; d > 0 {
				b.ReportMetric(float64(d), "kernel-drops")
			}
		})
	}
}

// BenchmarkPacketWrite measures WriteFrame alone (nobody reads on the
// other side: the peer's stack drops the frames).
func BenchmarkPacketWrite(b *testing.B) {
	p := newVethPair(b, 1500)
	a := listenIn(b, p.A, Options{})
	frame := frameOfLen(b, 1, 1, 64)
	b.SetBytes(64)
	for b.Loop() {
		if err := a.WriteFrame(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPacketPingPong measures the round trip a -> b -> a: ns/op is
// one round trip (two one-way frames and two wake-ups).
func BenchmarkPacketPingPong(b *testing.B) {
	p := newVethPair(b, 1500)
	a := listenIn(b, p.A, Options{})
	r := listenIn(b, p.B, Options{})
	frame := frameOfLen(b, 1, 1, 64)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, err := r.ReadFrame(buf)
			if err != nil {
				return
			}
			if r.WriteFrame(buf[:n]) != nil {
				return
			}
		}
	}()
	buf := make([]byte, 1500)
	a.SetReadDeadline(time.Now().Add(time.Minute))
	for b.Loop() {
		if err := a.WriteFrame(frame); err != nil {
			b.Fatal(err)
		}
		if _, _, err := a.ReadFrame(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2/1000, "us/one-way")
}

// mdlayherReader reads with mdlayher/packet's ReadFrom (recvfrom(2), a
// copy to strip the Ethernet header, two allocations), the baseline of
// PacketConn's own read path.
type mdlayherReader struct {
	*PacketConn
	buf []byte
}

func (m mdlayherReader) ReadFrame(b []byte) (int, net.HardwareAddr, error) {
	n, _, err := m.pc.ReadFrom(m.buf)
	if err != nil {
		return 0, nil, err
	}
	return copy(b, m.buf[exo.EthHeaderLen:n]), net.HardwareAddr(m.buf[6:12]), nil
}

// BenchmarkPacketDrain measures the receive cost alone: frames are queued
// on the socket first (timer stopped), then drained with ReadFrame
// (batch 1) or ReadFrames; the reads never block, so ns/op is the system
// call and copy cost per frame, without wake-ups.
func BenchmarkPacketDrain(b *testing.B) {
	for _, batch := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("64B/read%d", batch), func(b *testing.B) {
			p := newVethPair(b, 1500)
			a := listenIn(b, p.A, Options{})
			r := listenIn(b, p.B, Options{ReadBuffer: 64 << 20})
			frame := frameOfLen(b, 1, 1, 64)
			ms := make([]Message, batch)
			for i := range ms {
				ms[i].Buf = make([]byte, 1500)
				ms[i].Src = make([]byte, 0, 6)
			}
			const chunk = 4096
			b.ResetTimer()
			for left := b.N; left > 0; {
				k := min(chunk, left)
				b.StopTimer()
				for range k {
					if err := a.WriteFrame(frame); err != nil {
						b.Fatal(err)
					}
				}
				time.Sleep(time.Millisecond) // let the softirqs finish queueing
				b.StartTimer()
				for got := 0; got < k; {
					var n int
					var err error
					if batch == 1 {
						_, _, err = r.ReadFrame(ms[0].Buf)
						n = 1
					} else {
						n, err = r.ReadFrames(ms[:min(batch, k-got)])
					}
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
				left -= k
			}
			b.StopTimer()
			if d := r.Stats().Dropped; d > 0 {
				b.Fatalf("%d frames dropped by the kernel", d)
			}
		})
	}
}

// TestMmsghdrLayout checks that mmsghdr has C's struct mmsghdr layout:
// msg_len right after the msghdr, the whole padded to the msghdr's
// alignment (64 bytes on 64-bit Linux, 32 on 32-bit).
func TestMmsghdrLayout(t *testing.T) {
	var m mmsghdr
	want := map[uintptr]uintptr{8: 64, 4: 32}[unsafe.Sizeof(uintptr(0))]
	if unsafe.Offsetof(m.len) != unix.SizeofMsghdr || unsafe.Sizeof(m) != want {
		t.Errorf("mmsghdr: len at %d, size %d; want %d, %d", unsafe.Offsetof(m.len), unsafe.Sizeof(m), unix.SizeofMsghdr, want)
	}
}

// TestPacketConnRxPoll: the conformance suite with reads that bypass the
// runtime poller (block: ppoll on the reader's thread; busy: spinning),
// and what only they can get wrong: a deadline brought closer while a
// reader sleeps with none (the suite covers Close of a sleeping reader).
func TestPacketConnRxPoll(t *testing.T) {
	for _, mode := range []RxPoll{RxPollBlock, RxPollBusy} {
		t.Run(string(mode), func(t *testing.T) {
			p := newVethPair(t, 1500)
			a := listenIn(t, p.A, Options{RxPoll: mode})
			b := listenIn(t, p.B, Options{RxPoll: mode})
			if b.RxPoll() != mode {
				t.Fatalf("RxPoll %q, want %q", b.RxPoll(), mode)
			}
			testConnPair(t, a, b)

			// A reader asleep with no deadline; a deadline 20 ms ahead
			// must end its read then, not never.
			c := listenIn(t, p.B, Options{RxPoll: mode})
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, _, err := c.ReadFrame(make([]byte, 1500))
				done <- err
			}()
			time.Sleep(30 * time.Millisecond)
			c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			select {
			case err := <-done:
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("read after the deadline was set: %v, want ErrDeadlineExceeded", err)
				}
				if d := time.Since(start); d > time.Second {
					t.Fatalf("the read ended %v after it began", d)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a deadline set while the reader slept did not end its read")
			}
		})
	}
	if _, err := ParseRxPoll("spin"); err == nil {
		t.Fatal("ParseRxPoll accepted spin")
	}
}

// TestPacketConnPending: Pending says whether a frame waits on the socket,
// without reading it: false on a quiet socket, true once a frame came,
// false again once it was read.
func TestPacketConnPending(t *testing.T) {
	p := newVethPair(t, 1500)
	a := listenIn(t, p.A, Options{})
	b := listenIn(t, p.B, Options{})
	if b.Pending() {
		t.Fatalf("a frame pending on a socket nothing was sent to")
	}
	if err := a.WriteFrame(frameOfLen(t, 7, 1, 200)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !b.Pending() {
		if time.Now().After(deadline) {
			t.Fatalf("no frame pending 2 s after one was sent")
		}
		time.Sleep(time.Millisecond)
	}
	if got, _ := readOne(t, b); seqOf(t, got) != 7 {
		t.Fatalf("read seq %d, want 7", seqOf(t, got))
	}
	if b.Pending() {
		t.Fatalf("a frame still pending after the only one was read")
	}
}
