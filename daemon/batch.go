package daemon

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/exo-rack/exo/client"
)

// PublishBatch queues the messages of a batch for broadcast as Publish
// queues each, under one acquisition of the core lock and with one Ready
// for the whole batch. The batch's records go into the queue in its
// order, one after the other, so its agreed messages have increasing
// positions.
//
// reply(i, a) is called once for every message i, with the core lock held
// (it must not block): at once for a message above max_message_bytes (that
// message only: the others are queued), else once it is agreed or has
// failed (dropped by a reconciliation, shutting down).
//
// A batch is queued whole or not at all: when its records do not all fit
// the queue, none is queued, reply is never called, and the error (an
// *client.APIError) says why: queue full (retry later), or too large (the
// batch alone needs more records than queue_len: split it).
// PublishBatch does not keep payloads: the queued records are copies.
func (d *Daemon) PublishBatch(payloads [][]byte, reply func(i int, a client.Ack)) error {
	d.core.Lock()
	defer d.core.Unlock()
	d.catchUpClock(time.Now(), false)
	if err := d.dupRefusal(); err != nil {
		return err
	}
	need := 0
	for _, p := range payloads {
		if len(p) <= d.cfg.MaxMessage {
			need += numRecords(len(p), d.chunk)
		}
	}
	if need > d.cfg.QueueLen {
		return &client.APIError{Code: client.CodeTooLarge,
			Text: fmt.Sprintf("batch of %d messages needs %d payload records, more than queue_len %d: none queued, send smaller batches", len(payloads), need, d.cfg.QueueLen)}
	}
	if pending := d.pending(); pending+need > d.cfg.QueueLen {
		d.metrics.queueFull.Add(float64(len(payloads)))
		return &client.APIError{Code: client.CodeQueueFull,
			Text: fmt.Sprintf("queue full (%d payload records waiting, the batch needs %d, queue_len %d): none of the batch was queued", pending, need, d.cfg.QueueLen)}
	}
	queued := 0
	var rec []byte // a whole message's record; Propose copies it
	for i, p := range payloads {
		if len(p) > d.cfg.MaxMessage {
			reply(i, client.Ack{Err: &client.APIError{Code: client.CodeTooLarge,
				Text: fmt.Sprintf("message of %d bytes, max_message_bytes is %d", len(p), d.cfg.MaxMessage)}})
			continue
		}
		d.nextID++
		var err error
		if numRecords(len(p), d.chunk) == 1 {
			rec = binary.BigEndian.AppendUint64(append(rec[:0], fragWhole), d.nextID)
			rec = append(rec, p...)
			err = d.propose(rec)
		} else {
			for _, r := range split(d.nextID, p, d.chunk) {
				if err = d.propose(r); err != nil {
					break
				}
			}
		}
		if err != nil {
			// Cannot happen after the checks above; never drop silently.
			reply(i, client.Ack{Err: &client.APIError{Code: client.CodeQueueFull, Text: err.Error()}})
			continue
		}
		d.waiters[d.nextID] = func(a client.Ack) { reply(i, a) }
		queued++
	}
	if queued > 0 {
		d.metrics.published.Add(float64(queued))
		d.readyLocked()
	}
	return nil
}

// numRecords is how many records split makes of a message of n bytes.
func numRecords(n, maxRecord int) int {
	room := maxRecord - 2 - fragHeader - 4
	if n <= room+4 {
		return 1
	}
	return (n + room - 1) / room
}
