package broadcast

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// benchOneWay measures the one-way frame rate from a to r: b.N frames of
// size bytes, read with ReadFrame (batch 1) or ReadFrames (batch > 1).
// At most window frames are sent but not yet read, so that a receive
// queue that holds window frames never overflows; the sender blocks on a
// channel (it does not spin: on a 2-vCPU VM a spinning sender takes the
// CPU time the receiver and the kernel need) until the receiver catches
// up. ns/op is the time per frame through the whole pipeline; frames/s
// is reported too, and lost frames if any.
func benchOneWay(b *testing.B, a, r Conn, size, batch, window int) {
	frame := frameOfLen(b, 1, 1, size)
	var received, reads atomic.Int64
	credit := make(chan struct{}, 1) // "received moved"
	done := make(chan error, 1)
	go func() {
		ms := make([]Message, batch)
		for i := range ms {
			ms[i].Buf = make([]byte, r.MTU())
			ms[i].Src = make([]byte, 0, 6)
		}
		for received.Load() < int64(b.N) {
			r.SetReadDeadline(time.Now().Add(time.Second))
			var k int
			var err error
			if batch == 1 {
				_, _, err = r.ReadFrame(ms[0].Buf)
				k = 1
			} else {
				k, err = r.ReadFrames(ms)
			}
			if err != nil {
				done <- err
				return
			}
			received.Add(int64(k))
			reads.Add(1)
			select {
			case credit <- struct{}{}:
			default:
			}
		}
		done <- nil
	}()
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	var err error
	for i := range b.N {
		for int64(i)-received.Load() >= int64(window) {
			select {
			case <-credit:
			case err = <-done:
				b.Fatalf("receiver stopped after %d of %d frames: %v", received.Load(), b.N, err)
			}
		}
		if err := a.WriteFrame(frame); err != nil {
			b.Fatal(err)
		}
	}
	err = <-done
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		b.Fatal(err)
	}
	lost := int64(b.N) - received.Load()
	b.ReportMetric(float64(received.Load())/elapsed.Seconds(), "frames/s")
	b.ReportMetric(float64(received.Load())/float64(max(reads.Load(), 1)), "frames/read")
	if lost > 0 {
		b.ReportMetric(float64(lost), "lost")
	}
	r.SetReadDeadline(time.Time{})
}

func BenchmarkMemOneWay(b *testing.B) {
	for _, bc := range []struct {
		name  string
		size  int
		batch int
	}{{"64B/read1", 64, 1}, {"64B/read64", 64, 64}, {"1500B/read64", 1500, 64}} {
		b.Run(bc.name, func(b *testing.B) {
			n := NewMemNetwork()
			defer n.Close()
			r := attach(b, n, mac(2), Options{QueueLen: 4096})
			benchOneWay(b, n.Attach(mac(1)), r, bc.size, bc.batch, 4096)
		})
	}
}
