package broadcast

import (
	"bytes"
	"errors"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
)

// testTagKey is the frame-tag key the test frames are sealed under.
var testTagKey = [exo.TagKeyLen]byte{0: 0xb5, 15: 0x88}

// exoFrame encodes a valid DATA frame with the given seq and group, and
// records of the given sizes, sealed under testTagKey as a host would send
// it.
func exoFrame(t testing.TB, seq uint64, group uint16, recs ...int) []byte {
	t.Helper()
	f := exo.Frame{Type: exo.FrameData, Group: group, Sender: 1, Epoch: 1, Seq: seq,
		History: []uint8{0, exo.HistoryNone}}
	for i, n := range recs {
		rec := bytes.Repeat([]byte{byte('a' + i%26)}, n)
		var err error
		if f.Payload, err = exo.AppendRecord(f.Payload, rec); err != nil {
			t.Fatal(err)
		}
		f.Count++
	}
	b, err := f.AppendSealed(nil, testTagKey)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// frameOfLen encodes a valid frame of exactly n bytes (n >= 36: header,
// two history ids and one record length).
func frameOfLen(t testing.TB, seq uint64, group uint16, n int) []byte {
	t.Helper()
	b := exoFrame(t, seq, group, n-exo.HeaderLen-2-exo.RecordLenSize)
	if len(b) != n {
		t.Fatalf("frameOfLen(%d) = %d bytes", n, len(b))
	}
	return b
}

// seqOf decodes b and returns its seq.
func seqOf(t testing.TB, b []byte) uint64 {
	t.Helper()
	var f exo.Frame
	if err := f.UnmarshalBinary(b); err != nil {
		t.Fatalf("received frame does not decode: %v", err)
	}
	return f.Seq
}

// expectNothing checks that c receives no frame within d.
func expectNothing(t *testing.T, c Conn, d time.Duration) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, c.MTU())
	n, src, err := c.ReadFrame(buf)
	if err == nil {
		t.Fatalf("%v received an unexpected %d-byte frame from %v: % x", c.HardwareAddr(), n, src, buf[:min(n, 48)])
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadFrame: %v, want a deadline error", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("ReadFrame error %v is not a net.Error with Timeout()", err)
	}
}

// readOne reads one frame from c within a second.
func readOne(t *testing.T, c Conn) ([]byte, net.HardwareAddr) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, c.MTU())
	n, src, err := c.ReadFrame(buf)
	if err != nil {
		t.Fatalf("ReadFrame on %v: %v", c.HardwareAddr(), err)
	}
	return buf[:n], src
}

// testConnPair is the conformance test every Conn implementation passes:
// a and b are two Conns on one segment, with nothing else sending.
func testConnPair(t *testing.T, a, b Conn) {
	t.Run("DeliveryPaddingSource", func(t *testing.T) {
		for _, size := range []int{36, 45, 46, 47, 100, a.MTU()} {
			sent := frameOfLen(t, uint64(size), 1, size)
			if err := a.WriteFrame(sent); err != nil {
				t.Fatal(err)
			}
			got, src := readOne(t, b)
			if want := max(size, MinFrameLen); len(got) != want {
				t.Errorf("size %d: received %d bytes, want %d (padded to the 60-byte Ethernet minimum)", size, len(got), want)
			}
			if !bytes.Equal(got[:min(len(got), size)], sent) {
				t.Errorf("size %d: received bytes differ", size)
			}
			if !bytes.Equal(got[min(len(got), size):], make([]byte, len(got)-min(len(got), size))) {
				t.Errorf("size %d: padding is not zero: % x", size, got[size:])
			}
			if !bytes.Equal(src, a.HardwareAddr()) {
				t.Errorf("source %v, want %v", src, a.HardwareAddr())
			}
			if seqOf(t, got) != uint64(size) {
				t.Errorf("seq mismatch")
			}
		}
		// The other direction, and no echo to the sender.
		if err := b.WriteFrame(exoFrame(t, 7, 1)); err != nil {
			t.Fatal(err)
		}
		if got, _ := readOne(t, a); seqOf(t, got) != 7 {
			t.Errorf("b->a: wrong frame")
		}
		expectNothing(t, b, 30*time.Millisecond)
	})

	t.Run("Batch", func(t *testing.T) {
		const n = 10
		for i := range n {
			if err := a.WriteFrame(exoFrame(t, uint64(100+i), 1, i)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond) // let the frames queue up
		ms := make([]Message, 32)
		for i := range ms {
			ms[i].Buf = make([]byte, b.MTU())
		}
		var got []uint64
		var calls []int
		b.SetReadDeadline(time.Now().Add(time.Second))
		for len(got) < n {
			k, err := b.ReadFrames(ms)
			if err != nil {
				t.Fatalf("ReadFrames after %v: %v", got, err)
			}
			calls = append(calls, k)
			for _, m := range ms[:k] {
				got = append(got, seqOf(t, m.Buf[:m.N]))
				if !bytes.Equal(m.Src, a.HardwareAddr()) || m.Truncated {
					t.Errorf("message %+v", m)
				}
			}
		}
		b.SetReadDeadline(time.Time{})
		for i, s := range got {
			if s != uint64(100+i) {
				t.Fatalf("received seqs %v, want 100..%d in order", got, 100+n-1)
			}
		}
		t.Logf("ReadFrames batch sizes: %v", calls)
		if calls[0] < 2 {
			t.Errorf("first ReadFrames returned %d frames although %d were queued", calls[0], n)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		err := a.WriteFrame(make([]byte, a.MTU()+1))
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Errorf("WriteFrame(MTU+1): %v, want ErrFrameTooLarge", err)
		}
		if err := a.WriteFrame(exoFrame(t, 9, 1, 100)); err != nil {
			t.Fatal(err)
		}
		b.SetReadDeadline(time.Now().Add(time.Second))
		short := make([]byte, 40)
		n, _, err := b.ReadFrame(short)
		if !errors.Is(err, ErrTruncated) || n != len(short) {
			t.Errorf("ReadFrame(40-byte buffer) of a 136-byte frame = %d, %v; want 40, ErrTruncated", n, err)
		}
		expectNothing(t, b, 10*time.Millisecond) // the deadline case
		// A deadline in the past fails at once.
		b.SetReadDeadline(time.Now().Add(-time.Second))
		if _, _, err := b.ReadFrame(make([]byte, 100)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("past deadline: %v", err)
		}
		b.SetReadDeadline(time.Time{})
	})

	t.Run("Stats", func(t *testing.T) {
		sa, sb := a.Stats(), b.Stats()
		t.Logf("a: %+v", sa)
		t.Logf("b: %+v", sb)
		if sa.FramesOut != 6+10+1 || sb.FramesIn != 6+10+1 || sb.FramesOut != 1 || sa.FramesIn != 1 {
			t.Errorf("frame counts: a %+v, b %+v", sa, sb)
		}
		if sb.Truncated != 1 || sa.WriteErrors != 1 {
			t.Errorf("Truncated %d, WriteErrors %d; want 1, 1", sb.Truncated, sa.WriteErrors)
		}
		if sb.Dropped != 0 || sb.Filtered != 0 || sb.ReadErrors != 0 {
			t.Errorf("b: unexpected drops or errors: %+v", sb)
		}
	})

	t.Run("ReadQueuedPastDeadline", func(t *testing.T) {
		q, ok := b.(QueuedReader)
		if !ok {
			t.Fatalf("%T does not take queued frames (QueuedReader)", b)
		}
		ms := make([]Message, 8)
		for i := range ms {
			ms[i].Buf = make([]byte, b.MTU()+64)
		}
		b.SetReadDeadline(time.Now().Add(-time.Second))
		defer b.SetReadDeadline(time.Time{})
		if n, err := q.ReadQueued(ms); n != 0 || err != nil {
			t.Fatalf("nothing queued: ReadQueued = %d, %v; want 0, nil", n, err)
		}
		for seq := uint64(1); seq <= 3; seq++ {
			if err := a.WriteFrame(exoFrame(t, 100+seq, 1)); err != nil {
				t.Fatal(err)
			}
		}
		// The deadline has passed: a read in Go's poller returns at once,
		// without the frames (RxPollBlock and RxPollBusy take those
		// queued); ReadQueued takes them.
		if p, ok := b.(interface{ RxPoll() RxPoll }); !ok || p.RxPoll() == RxPollRuntime {
			if _, err := b.ReadFrames(ms); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("ReadFrames past its deadline: %v, want a deadline error", err)
			}
		}
		var got []uint64
		for end := time.Now().Add(2 * time.Second); len(got) < 3 && time.Now().Before(end); {
			n, err := q.ReadQueued(ms)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				got = append(got, seqOf(t, ms[i].Buf[:ms[i].N]))
			}
			if n == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if !slices.Equal(got, []uint64{101, 102, 103}) {
			t.Fatalf("ReadQueued past the deadline took %v, want [101 102 103]", got)
		}
	})

	t.Run("CloseUnblocksReader", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, _, err := b.ReadFrame(make([]byte, 100))
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("blocked ReadFrame after Close: %v, want net.ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Close did not unblock ReadFrame")
		}
		if err := b.WriteFrame(exoFrame(t, 1, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("WriteFrame after Close: %v", err)
		}
		if _, err := b.ReadFrames(make([]Message, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("ReadFrames after Close: %v", err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		// The other side still works: sending to a closed peer is fine.
		if err := a.WriteFrame(exoFrame(t, 1, 1)); err != nil {
			t.Errorf("WriteFrame to a closed peer: %v", err)
		}
	})
}
