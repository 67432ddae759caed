package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/exo-rack/exo/client"
)

// Load describes a publish load.
type Load struct {
	Hosts   []int // publishing hosts
	PerHost int   // messages per host
	Size    int   // payload bytes (at least 16: host, counter)
	Window  int   // publishes in flight per host (default 256)
	// Batch, when above 1, makes every host publish with PublishBatch
	// requests of Batch messages (at most Window); Window still bounds the
	// messages in flight: Batch 256 with Window 1024 keeps 4 batches in
	// flight per host. A batch refused whole (queue full) goes again; its
	// messages dropped by a reconciliation go again in a later batch.
	Batch int
	Round int // distinguishes the payloads of several loads
	// Progress, if set, is called with the number of messages agreed so far.
	Progress func(done int64)
	// OnAck, if set, is called for every acknowledged (agreed) message.
	OnAck func(payload []byte, pos client.Position)
	// Tolerant makes a failed connection end that host's share quietly
	// (counted in Failed) instead of failing the load: for loads that run
	// while daemons are killed.
	Tolerant bool
}

// LoadResult is what a load measured.
type LoadResult struct {
	Published int64
	Failed    int64
	Elapsed   time.Duration
	// Latency is publish-to-agreed at the publisher, in microseconds.
	Latency *hdrhistogram.Histogram
	Errors  []string
}

// Rate returns agreed messages per second.
func (r LoadResult) Rate() float64 { return float64(r.Published) / r.Elapsed.Seconds() }

// Payload returns the payload of message k of host h in a load round:
// unique, and carrying its origin (round<<32 | host, then k).
func Payload(round, h, k, size int) []byte {
	p := make([]byte, max(size, 16))
	binary.BigEndian.PutUint64(p, uint64(round)<<32|uint64(h))
	binary.BigEndian.PutUint64(p[8:], uint64(k))
	return p
}

// Publish runs the load: every host publishes PerHost messages with at most
// Window in flight, retrying on "queue full" and "dropped". It returns when
// every message is agreed or ctx ends.
func (c *Cluster) Publish(ctx context.Context, l Load) (LoadResult, error) {
	if l.Window == 0 {
		l.Window = 256
	}
	res := LoadResult{Latency: hdrhistogram.New(1, 60_000_000, 3)}
	var mu sync.Mutex
	var done, failed atomic.Int64
	// fail counts n messages failed with err (the first 10 errors kept).
	fail := func(n int, err error) {
		failed.Add(int64(n))
		mu.Lock()
		if len(res.Errors) < 10 {
			res.Errors = append(res.Errors, err.Error())
		}
		mu.Unlock()
	}
	// agreed records a message agreed t0 after it was sent.
	agreed := func(p []byte, pos client.Position, t0 time.Time) {
		us := time.Since(t0).Microseconds()
		mu.Lock()
		res.Latency.RecordValue(max(us, 1))
		if l.OnAck != nil {
			l.OnAck(p, pos)
		}
		mu.Unlock()
		if d := done.Add(1); l.Progress != nil && d%1000 == 0 {
			l.Progress(d)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, len(l.Hosts))
	for _, h := range l.Hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := client.Dial(ctx, c.Socket(h))
			if err != nil {
				if l.Tolerant {
					failed.Add(int64(l.PerHost))
					return
				}
				errc <- err
				return
			}
			defer cl.Close()
			if l.Batch > 1 {
				publishBatches(ctx, cl, l, h, fail, agreed)
				return
			}
			// Window publishers, each with one message in flight: at
			// most Window in flight, as many goroutines (not one per
			// message: the load's own cost counts in the machine's CPU
			// per message).
			var next atomic.Int64
			var inner sync.WaitGroup
			for range min(l.Window, l.PerHost) {
				inner.Add(1)
				go func() {
					defer inner.Done()
					for ctx.Err() == nil {
						k := int(next.Add(1) - 1)
						if k >= l.PerHost {
							return
						}
						publishOne(ctx, cl, l, h, k, fail, agreed)
					}
				}()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	close(errc)
	res.Elapsed = time.Since(start)
	res.Published, res.Failed = done.Load(), failed.Load()
	for err := range errc {
		return res, err
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("load interrupted after %d messages: %w", res.Published, ctx.Err())
	}
	return res, nil
}

// publishBatches publishes host h's share of l in batches of l.Batch
// messages, with at most l.Window messages in flight; a batch refused by a
// full queue goes again whole, and the messages of a batch dropped by a
// reconciliation or refused go again in a batch of their own.
func publishBatches(ctx context.Context, cl *client.Client, l Load, h int,
	fail func(int, error), agreed func([]byte, client.Position, time.Time)) {
	size := min(l.Batch, l.Window, client.MaxBatch)
	sem := make(chan struct{}, l.Window/size) // batches in flight
	var wg sync.WaitGroup
	for k := 0; k < l.PerHost && ctx.Err() == nil; k += size {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var batch [][]byte
			for j := k; j < min(k+size, l.PerHost); j++ {
				batch = append(batch, Payload(l.Round, h, j, l.Size))
			}
			for attempt := 0; len(batch) > 0 && ctx.Err() == nil; attempt++ {
				if attempt > 0 {
					time.Sleep(time.Duration(1+attempt%8) * time.Millisecond)
				}
				t0 := time.Now()
				ch, err := cl.PublishBatchAsync(batch)
				if err != nil {
					fail(len(batch), err)
					return
				}
				var r client.BatchAck
				select {
				case r = <-ch:
				case <-ctx.Done():
					return
				}
				if errors.Is(r.Err, client.ErrQueueFull) {
					continue
				}
				if r.Err != nil {
					fail(len(batch), r.Err)
					return
				}
				var again [][]byte
				for i, a := range r.Acks {
					switch {
					case a.Err == nil:
						agreed(batch[i], a.Pos, t0)
					case errors.Is(a.Err, client.ErrQueueFull) || errors.Is(a.Err, client.ErrDropped):
						again = append(again, batch[i])
					default:
						fail(1, a.Err)
					}
				}
				batch = again
			}
		}()
	}
	wg.Wait()
}

// Collect follows every host's agreed stream from seq 0 until want
// messages arrived at each (or ctx ends) and returns the streams.
func (c *Cluster) Collect(ctx context.Context, hosts []int, want int) ([][]client.Message, error) {
	out := make([][]client.Message, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for j, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := client.Subscribe(ctx, c.Socket(h), 0, func(m client.Message) error {
				out[j] = append(out[j], m)
				if len(out[j]) >= want {
					return errEnough
				}
				return nil
			})
			if !errors.Is(err, errEnough) {
				errs[j] = fmt.Errorf("host %s: stream ended after %d of %d messages: %w", c.Rack.Hosts[h].Name, len(out[j]), want, err)
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

var errEnough = errors.New("enough")

// publishOne publishes message k of host h and waits for its outcome,
// publishing it again after "queue full" and "dropped".
func publishOne(ctx context.Context, cl *client.Client, l Load, h, k int, fail func(int, error), agreed func([]byte, client.Position, time.Time)) {
	p := Payload(l.Round, h, k, l.Size)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		t0 := time.Now()
		ch, err := cl.PublishAsync(p)
		if err != nil {
			fail(1, err)
			return
		}
		var a client.Ack
		select {
		case a = <-ch:
		case <-ctx.Done():
			return
		}
		if errors.Is(a.Err, client.ErrQueueFull) || errors.Is(a.Err, client.ErrDropped) {
			time.Sleep(time.Duration(1+attempt%8) * time.Millisecond)
			continue
		}
		if a.Err != nil {
			fail(1, a.Err)
			return
		}
		agreed(p, a.Pos, t0)
		return
	}
}
