package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Sent is the outcome of one message of Send or SendLines: where it was
// agreed, or why not.
type Sent struct {
	// N is the message's index in Send's messages (from 0), or its line
	// number in SendLines's input (from 1).
	N     int
	Bytes int      // the message's length
	Pos   Position // where it was agreed (Err nil)
	// Err says why the message was not agreed: ErrTooLarge, ErrDropped
	// (removed by a reconciliation: publish it again), ErrShuttingDown.
	Err error
}

// Send dials the daemon at socket, takes the messages from read (once
// connected: a daemon that is not there is said before any input is
// read), publishes them with every one in flight at once, and calls each
// with the outcome of every message, in order, as it arrives. timeout
// bounds all of it, the dial and read included; the error then names the
// first message not agreed in time.
func Send(ctx context.Context, socket string, read func() ([][]byte, error), timeout time.Duration, each func(Sent)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := Dial(ctx, socket)
	if err != nil {
		return err
	}
	defer c.Close()
	msgs, err := read()
	if err != nil {
		return err
	}
	acks := make([]<-chan Ack, len(msgs))
	for i, m := range msgs {
		if acks[i], err = c.PublishAsync(m); err != nil {
			return err
		}
	}
	for i, ch := range acks {
		var a Ack
		select {
		case a = <-ch:
		case <-ctx.Done():
			return fmt.Errorf("message %d: not agreed within %v: %w", i, timeout, ctx.Err())
		}
		each(Sent{N: i, Bytes: len(msgs[i]), Pos: a.Pos, Err: a.Err})
	}
	return nil
}

// lineScanner reads lines of up to 64 MiB.
func lineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	return sc
}

// ReadLines reads every line of r (up to 64 MiB each), without its
// newline: one message per line, as exo send --lines sends them.
func ReadLines(r io.Reader) ([][]byte, error) {
	var msgs [][]byte
	sc := lineScanner(r)
	for sc.Scan() {
		msgs = append(msgs, append([]byte(nil), sc.Bytes()...))
	}
	return msgs, sc.Err()
}

// LinesOptions are the settings of SendLines.
type LinesOptions struct {
	// Batch is the number of messages of one batch request, 1 to MaxBatch.
	Batch int
	// Timeout bounds the dial, and each batch from its first try.
	Timeout time.Duration
	// Source names the input in its read errors ("standard input").
	Source string
}

// LinesError is the failure of a whole batch of SendLines, none of it
// agreed: the daemon refused it (ErrTooLarge: it needs more than the
// daemon's queue or a frame; an *APIError of CodeBadRequest: a daemon
// without batches) or the connection failed. First and Last are its
// lines.
type LinesError struct {
	First, Last int
	Err         error
}

func (e *LinesError) Error() string { return fmt.Sprintf("lines %d-%d: %v", e.First, e.Last, e.Err) }
func (e *LinesError) Unwrap() error { return e.Err }

// sendWindow is how many batches SendLines keeps in flight.
const sendWindow = 4

// linesBatch is a batch of lines of SendLines on its way.
type linesBatch struct {
	line int // the line number of its first message (from 1)
	msgs [][]byte
	ch   <-chan BatchAck
	sent time.Time
}

// failed is the error of the batch failing as a whole.
func (b *linesBatch) failed(err error) error {
	return &LinesError{First: b.line, Last: b.line + len(b.msgs) - 1, Err: err}
}

// SendLines dials the daemon at socket and publishes every line of r as
// one message, in batches of o.Batch messages with a few batches in
// flight, and calls each with the outcome of every line in input order.
// A batch the daemon's queue refused (ErrQueueFull: none of it was
// queued) goes again after a pause, until o.Timeout after its first try,
// so its lines may be agreed after lines that follow them. A batch that
// fails as a whole is a *LinesError.
func SendLines(ctx context.Context, socket string, r io.Reader, o LinesOptions, each func(Sent)) error {
	dctx, cancel := context.WithTimeout(ctx, o.Timeout)
	c, err := Dial(dctx, socket)
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	send := func(b *linesBatch) error {
		ch, err := c.PublishBatchAsync(b.msgs)
		if err != nil {
			return b.failed(err)
		}
		b.ch, b.sent = ch, time.Now()
		return nil
	}
	// finish waits for the oldest batch and reports its lines; a batch
	// refused by a full queue goes again (none of it was queued).
	finish := func(b *linesBatch) error {
		for attempt := 0; ; attempt++ {
			var r BatchAck
			select {
			case r = <-b.ch:
			case <-time.After(time.Until(b.sent.Add(o.Timeout))):
				return fmt.Errorf("lines %d-%d: not agreed within %v", b.line, b.line+len(b.msgs)-1, o.Timeout)
			case <-ctx.Done():
				return fmt.Errorf("lines %d-%d: %w", b.line, b.line+len(b.msgs)-1, ctx.Err())
			}
			if errors.Is(r.Err, ErrQueueFull) && time.Since(b.sent) < o.Timeout {
				select {
				case <-time.After(time.Duration(1+attempt%16) * time.Millisecond):
				case <-ctx.Done():
				}
				sent := b.sent
				if err := send(b); err != nil {
					return err
				}
				b.sent = sent // the timeout counts from the first try
				continue
			}
			if r.Err != nil {
				return b.failed(r.Err)
			}
			for i, a := range r.Acks {
				each(Sent{N: b.line + i, Bytes: len(b.msgs[i]), Pos: a.Pos, Err: a.Err})
			}
			return nil
		}
	}
	var window []*linesBatch
	sc := lineScanner(r)
	cur := &linesBatch{line: 1}
	flush := func() error {
		if len(cur.msgs) == 0 {
			return nil
		}
		if len(window) == sendWindow {
			if err := finish(window[0]); err != nil {
				return err
			}
			window = window[1:]
		}
		if err := send(cur); err != nil {
			return err
		}
		window = append(window, cur)
		cur = &linesBatch{line: cur.line + len(cur.msgs)}
		return nil
	}
	for sc.Scan() {
		cur.msgs = append(cur.msgs, append([]byte(nil), sc.Bytes()...))
		if len(cur.msgs) == o.Batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s (line %d): %w", o.Source, cur.line+len(cur.msgs), err)
	}
	if err := flush(); err != nil {
		return err
	}
	for _, b := range window {
		if err := finish(b); err != nil {
			return err
		}
	}
	return nil
}
