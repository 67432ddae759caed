//go:build linux

package xdp

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
)

// xskRoster is authRoster with ids 0..3 on namespace a's MAC (so that a
// can send for them) and id 4 elsewhere (a frame from a claiming id 4 is
// a foreign MAC).
func xskRoster() []net.HardwareAddr {
	r := append([]net.HardwareAddr(nil), authRoster...)
	for i := range 4 {
		r[i] = vethMACA
	}
	return r
}

// sealed returns f sealed under key (the bytes after the Ethernet header).
func sealed(tb testing.TB, f exo.Frame, key [exo.TagKeyLen]byte) []byte {
	tb.Helper()
	b, err := f.AppendSealed(nil, key)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// readOne reads one frame and its verdict from c within d.
func readOne(tb testing.TB, c *XSKConn, d time.Duration) (broadcast.Message, Verdict) {
	tb.Helper()
	ms := []broadcast.Message{{Buf: make([]byte, 2048), Src: make(net.HardwareAddr, 6)}}
	vs := make([]Verdict, 1)
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		tb.Fatal(err)
	}
	n, err := c.ReadFramesVerdicts(ms, vs)
	if err != nil {
		tb.Fatalf("read: %v", err)
	}
	if n != 1 {
		tb.Fatalf("read %d frames, want 1", n)
	}
	return ms[0], vs[0]
}

// checkFrame requires m to hold frame b (padded to the Ethernet minimum)
// from vethMACA.
func checkFrame(tb testing.TB, what string, m broadcast.Message, b []byte) {
	tb.Helper()
	if want := max(len(b), broadcast.MinFrameLen); m.N != want || m.Truncated {
		tb.Errorf("%s: %d bytes (truncated %v), want %d", what, m.N, m.Truncated, want)
	}
	if m.N < len(b) || !bytes.Equal(m.Buf[:len(b)], b) {
		tb.Errorf("%s: the bytes differ from the frame sent", what)
	}
	if !bytes.Equal(m.Src, vethMACA) {
		tb.Errorf("%s: source %v, want %v", what, m.Src, vethMACA)
	}
}

// TestXSKReceive sends frames from namespace a to the program attached in
// namespace b (generic, then native mode) and reads them from an XSKConn:
// the passed frames arrive through AF_XDP with their bytes, source MAC and
// verdict (ACCEPT, GAP), in order; the dropped ones (forged tag, another
// group, a foreign MAC, a replay) never arrive. Before the program is
// attached, a frame arrives through the AF_PACKET socket without a
// verdict; WriteFrame sends; after Close the program passes to the stack
// again.
func TestXSKReceive(t *testing.T) {
	for _, c := range []struct {
		mode  Mode
		ppoll bool
	}{{ModeGeneric, false}, {ModeNative, false}, {ModeGeneric, true}} {
		name := c.mode.String()
		if c.ppoll {
			name += "_ppoll"
		}
		t.Run(name, func(t *testing.T) { testXSKReceive(t, c.mode, XSKOptions{Ppoll: c.ppoll}) })
	}
}

func testXSKReceive(t *testing.T, mode Mode, opts XSKOptions) {
	p := loadOrSkip(t, false)
	pair := newVethPair(t, 1)
	if err := p.SetState(authState()); err != nil {
		t.Fatal(err)
	}
	setKey(t, p, authKey)
	if err := p.SetRoster(xskRoster()); err != nil {
		t.Fatal(err)
	}
	rx := xskIn(t, pair.B, p, opts)
	defer rx.Close()
	if len(rx.Sockets()) != 1 {
		t.Fatalf("%d AF_XDP sockets on a one-queue veth", len(rx.Sockets()))
	}
	tx := listenIn(t, pair.A, broadcast.Options{})
	defer tx.Close()
	send := func(b []byte) {
		t.Helper()
		if err := tx.WriteFrame(b); err != nil {
			t.Fatal(err)
		}
	}

	rec, _ := exo.AppendRecord(nil, []byte("through AF_XDP"))
	big, _ := exo.AppendRecord(nil, bytes.Repeat([]byte{0xab}, 1400))
	f10 := sealed(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Seq: 10, Count: 1, History: []uint8{4, 3}, Payload: rec}, authKey)
	f11 := sealed(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 1, Seq: 11, History: []uint8{0, 4}}, authKey)
	f12 := sealed(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 2, Seq: 12, Count: 1, History: []uint8{1, 0}, Payload: big}, authKey)
	gap := sealed(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 1, Seq: 13, History: []uint8{0, 4}}, authKey)
	forged := append([]byte(nil), f10...)
	forged[exo.OffTag] ^= 1
	otherGroup := sealed(t, exo.Frame{Type: exo.FrameData, Group: 2, Sender: 0, Seq: 10, History: []uint8{4, 3}}, authKey)
	foreign := sealed(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 4, Seq: 11, History: []uint8{0, 3}}, authKey)

	// Not attached yet: the frame reaches the stack and the AF_PACKET
	// socket; the state does not move.
	send(f10)
	m, v := readOne(t, rx, 2*time.Second)
	checkFrame(t, "before attaching", m, f10)
	if v.HasReason || v.Redirected {
		t.Errorf("before attaching: verdict %v, want none (AF_PACKET)", v)
	}

	att := attachIn(t, pair.B, p, mode)
	defer att.Close()
	if err := p.ResetCounters(); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{f10, forged, otherGroup, foreign, f10, gap, f11, f12} {
		send(b)
	}
	for _, w := range []struct {
		what   string
		b      []byte
		reason exo.Reason
	}{
		{"seq 10", f10, exo.ReasonAccept},
		{"seq 13 (gap)", gap, exo.ReasonGap},
		{"seq 11", f11, exo.ReasonAccept},
		{"seq 12 (1400-byte record)", f12, exo.ReasonAccept},
	} {
		m, v := readOne(t, rx, 2*time.Second)
		checkFrame(t, w.what, m, w.b)
		if !v.HasReason || v.Reason != w.reason || v.Action != ActionPass || !v.Redirected {
			t.Errorf("%s: verdict %v, want XDP_PASS %s through AF_XDP", w.what, v, w.reason)
		}
	}
	// Nothing else: the dropped frames were sent before seq 12.
	if err := rx.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rx.ReadFrame(make([]byte, 2048)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after the passed frames: %v, want a deadline error", err)
	}
	got, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	var want [exo.NumReasons]uint64
	want[exo.ReasonAccept], want[exo.ReasonGap] = 3, 1
	want[exo.ReasonBadTag], want[exo.ReasonBadGroup], want[exo.ReasonDuplicate] = 1, 1, 1
	if got != want {
		t.Errorf("counters %v, want %v", got, want)
	}
	if n, _ := p.ForeignMACs(); n != 1 {
		t.Errorf("foreign MAC counter %d, want 1", n)
	}
	st := rx.Stats()
	if st.FramesIn != 5 || st.Dropped != 0 || st.Filtered != 0 {
		t.Errorf("stats %+v, want 5 frames in, none dropped or filtered", st)
	}

	// BPF_PROG_TEST_RUN runs on queue 0, whose socket is registered: the
	// passed frame is reported redirected.
	f13 := sealed(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 3, Seq: 13, History: []uint8{2, 1}}, authKey)
	if v, err := p.Run(EthernetFrame(vethMACA, f13)); err != nil || v.Reason != exo.ReasonAccept || !v.Redirected {
		t.Errorf("test run with a socket on queue 0: %v %v, want XDP_PASS ACCEPT redirected", v, err)
	}

	// WriteFrame goes out through the AF_PACKET socket.
	out := sealed(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 4, Seq: 99}, authKey)
	if err := rx.WriteFrame(out); err != nil {
		t.Fatal(err)
	}
	if err := tx.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	n, src, err := tx.ReadFrame(buf)
	if err != nil || !bytes.Equal(buf[:len(out)], out) || !bytes.Equal(src, vethMACB) || n != max(len(out), broadcast.MinFrameLen) {
		t.Errorf("frame written through the XSKConn: %d bytes from %v, %v", n, src, err)
	}

	// Close unregisters: passed frames go to the stack again.
	if err := rx.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rx.ReadFrames(make([]broadcast.Message, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after Close: %v, want net.ErrClosed", err)
	}
	f14 := sealed(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Seq: 14, History: []uint8{3, 2}}, authKey)
	if v, err := p.Run(EthernetFrame(vethMACA, f14)); err != nil || v.Reason != exo.ReasonAccept || v.Redirected {
		t.Errorf("test run after Close: %v %v, want XDP_PASS ACCEPT, not redirected", v, err)
	}
}

// TestXSKBlockedReadClose: Close unblocks a blocked reader, in the runtime
// poller and in ppoll.
func TestXSKBlockedReadClose(t *testing.T) {
	p := loadOrSkip(t, false)
	pair := newVethPair(t, 1)
	for _, ppoll := range []bool{false, true} {
		rx := xskIn(t, pair.B, p, XSKOptions{Ppoll: ppoll})
		testBlockedReadClose(t, rx)
	}
}

func testBlockedReadClose(t *testing.T, rx *XSKConn) {
	errc := make(chan error, 1)
	go func() {
		_, _, err := rx.ReadFrame(make([]byte, 1500))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := rx.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked read: %v, want net.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not unblock the reader")
	}
}

// TestXSKQueues: on a veth with 2 RX queues, NewXSKConn binds a socket to
// each, and every passed frame arrives, whichever queue it came in on.
// The frames are GAP frames (seq far above append, within the window): the
// program passes them all without moving the state, in any order.
func TestXSKQueues(t *testing.T) {
	for _, mode := range []Mode{ModeGeneric, ModeNative} {
		t.Run(mode.String(), func(t *testing.T) { testXSKQueues(t, mode) })
	}
}

func testXSKQueues(t *testing.T, mode Mode) {
	p := loadOrSkip(t, false)
	pair := newVethPair(t, 2)
	st := exo.NewPointers(1, 1, 1<<20)
	st.Append = 1
	if err := p.SetState(st); err != nil {
		t.Fatal(err)
	}
	setKey(t, p, authKey)
	rx := xskIn(t, pair.B, p, XSKOptions{})
	defer rx.Close()
	if len(rx.Sockets()) != 2 {
		t.Fatalf("%d AF_XDP sockets on a veth with 2 RX queues", len(rx.Sockets()))
	}
	att := attachIn(t, pair.B, p, mode)
	defer att.Close()
	const frames = 200
	// Two senders, on CPU 0 and CPU 1, with XPS mapping CPU i to a's TX
	// queue i, which the veth hands to b's RX queue i.
	xps := runtime.NumCPU() >= 2
	if out, err := exec.Command("ip", "netns", "exec", pair.A, "sh", "-c",
		"echo 1 > /sys/class/net/exo0/queues/tx-0/xps_cpus && echo 2 > /sys/class/net/exo0/queues/tx-1/xps_cpus").CombinedOutput(); err != nil {
		t.Logf("XPS not set (%v: %s): the frames may all take one queue", err, out)
		xps = false
	}
	errc := make(chan error, 2)
	for half := range 2 {
		go func() {
			errc <- lab.InNetns(pair.A, func() error {
				var cpus unix.CPUSet
				cpus.Set(half % runtime.NumCPU())
				_ = unix.SchedSetaffinity(0, &cpus)
				tx, err := broadcast.Listen(vethIf, broadcast.Options{})
				if err != nil {
					return err
				}
				defer tx.Close()
				for i := half; i < frames; i += 2 {
					f := exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Seq: uint64(1000 + i)}
					b, err := f.AppendSealed(nil, authKey)
					if err == nil {
						err = tx.WriteFrame(b)
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	ms := make([]broadcast.Message, broadcast.MaxBatch)
	vs := make([]Verdict, broadcast.MaxBatch)
	for i := range ms {
		ms[i].Buf = make([]byte, 1500)
	}
	got := 0
	for got < frames {
		if err := rx.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := rx.ReadFramesVerdicts(ms, vs)
		if err != nil {
			t.Fatalf("after %d of %d frames: %v", got, frames, err)
		}
		for _, v := range vs[:n] {
			if v.Reason != exo.ReasonGap || !v.Redirected {
				t.Fatalf("verdict %v, want GAP through AF_XDP", v)
			}
		}
		got += n
	}
	var per []uint64
	for _, s := range rx.Sockets() {
		per = append(per, s.Frames())
	}
	t.Logf("%d GAP frames sent and received; per RX queue %v", frames, per)
	// Native veth XDP runs on the RX queue the sender's TX queue maps to;
	// generic XDP on a veth always sees queue 0.
	if mode == ModeNative && xps && (per[0] == 0 || per[1] == 0) {
		t.Errorf("native mode with XPS: frames per queue %v, want both queues used", per)
	}
}
