package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchStreams: the final check gives a stream up when it reads
// nothing for the stall time, not while it reads, and not once it is
// done, however long the others take.
func TestWatchStreams(t *testing.T) {
	const stall = 200 * time.Millisecond
	read := make([]atomic.Int64, 3)
	done := make([]atomic.Bool, 3)
	done[2].Store(true) // finished at once: never stalled
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stalled := make(chan int, 3)
	go watchStreams(ctx, read, done, stall, func(i int) { stalled <- i })
	// Stream 0 reads for 3 stall times, then stops; stream 1 reads all
	// along.
	start := time.Now()
	var last time.Time // stream 0's last read
	for time.Since(start) < 3*stall {
		read[0].Add(1)
		last = time.Now()
		read[1].Add(1)
		time.Sleep(stall / 20)
	}
	select {
	case i := <-stalled:
		t.Fatalf("stream %d given up after %v while both read", i, time.Since(start))
	default:
	}
	for time.Since(last) < 3*stall {
		read[1].Add(1)
		time.Sleep(stall / 20)
		select {
		case i := <-stalled:
			if i != 0 {
				t.Fatalf("stream %d given up, want 0 (the one that stopped)", i)
			}
			if d := time.Since(last); d < stall {
				t.Fatalf("stream 0 given up %v after its last read, before the stall time %v", d, stall)
			}
			return
		default:
		}
	}
	t.Fatalf("stream 0 read nothing for %v and was not given up (stall %v)", time.Since(last), stall)
}
