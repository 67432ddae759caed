package daemon

import "sync"

// replyQueue holds the encoded replies to a connection's publishes until
// its writer takes them: the core puts them (it must not block), one
// writer drains all that came meanwhile at once, coalescing writes. It
// grows with what waits, up to max (a client that does not read its
// replies), instead of a channel of max slots that every publishing
// connection allocated whole: 1.5 MB of pointers the collector scanned,
// for the lab's load that opens a connection every 200 messages.
type replyQueue struct {
	mu     sync.Mutex
	q      [][]byte
	max    int
	closed bool          // no more puts; the writer ends once it drained q
	wake   chan struct{} // one slot: something to write, or closed
}

func newReplyQueue(max int) *replyQueue {
	return &replyQueue{max: max, wake: make(chan struct{}, 1)}
}

// put queues b; false if max replies already wait (the caller gives up on
// the connection). Puts after close are dropped.
func (rq *replyQueue) put(b []byte) bool {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if rq.closed {
		return true
	}
	if len(rq.q) >= rq.max {
		return false
	}
	rq.q = append(rq.q, b)
	rq.signal()
	return true
}

// close ends the queue: the writer returns once it wrote what waits.
func (rq *replyQueue) close() {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	rq.closed = true
	rq.signal()
}

func (rq *replyQueue) signal() { // mu held
	select {
	case rq.wake <- struct{}{}:
	default:
	}
}

// drain hands write every batch of replies in order, until the queue is
// closed and empty, or write fails (the rest are dropped, and puts after
// it too). It runs on the connection's one writer goroutine.
func (rq *replyQueue) drain(write func([][]byte) error) error {
	var spare [][]byte
	for {
		rq.mu.Lock()
		var batch [][]byte
		if len(rq.q) > 0 { // swapped for the array written before, which the writer no longer reads
			batch, rq.q = rq.q, spare[:0]
		}
		done := rq.closed
		rq.mu.Unlock()
		if len(batch) > 0 {
			if err := write(batch); err != nil {
				rq.mu.Lock()
				rq.closed, rq.q = true, nil
				rq.mu.Unlock()
				return err
			}
			clear(batch)
			spare = batch
			continue
		}
		if done {
			return nil
		}
		<-rq.wake
	}
}
