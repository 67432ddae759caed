package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/exo"
)

const subQueue = 1 << 16 // messages queued for one subscriber before it is cut off

// subBurst bounds the Message frames written to a subscriber before a
// flush (the buffer flushes by itself when full): the writer looks at the
// context and the connection between bursts.
const subBurst = 4096

type subscriber struct {
	ch     chan client.Message
	closed bool // too slow: cut off
}

func (d *Daemon) listenAPI() (net.Listener, error) {
	path := d.cfg.APISocket
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("api socket: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		// A stale socket from a crashed daemon: remove it only if nobody
		// answers on it.
		if err := checkSocket(path); err != nil {
			return nil, err
		}
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("api socket: %w", err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("api socket: %w", err)
	}
	return ln, nil
}

func (d *Daemon) serveAPI(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { mu.Lock(); delete(conns, c); mu.Unlock(); c.Close() }()
			if err := d.serveConn(ctx, c); err != nil && ctx.Err() == nil {
				d.log.Debug("api connection", "err", err)
			}
		}()
	}
	mu.Lock()
	for c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	os.Remove(d.cfg.APISocket)
	return nil
}

// A connection's buffers start small and grow to the publish and subscribe
// sizes when it first publishes or subscribes: a status read (exo status,
// exo top, a lab watcher every 20 ms) allocated 2.2 MB for them, the
// replies' queue alone 1.5 MB of pointers the collector scans
// (BenchmarkStatusRead).
const (
	connSmallBuf = 16 << 10  // reader and writer of a connection that neither publishes nor subscribes
	connBigBuf   = 256 << 10 // reader and writer of one that does
	maxReplies   = 1 << 16   // replies to publishes waiting for the writer, at most (replyQueue)
)

func (d *Daemon) serveConn(ctx context.Context, c net.Conn) error {
	r := bufio.NewReaderSize(c, connSmallBuf)
	w := bufio.NewWriterSize(c, connSmallBuf)
	var wmu sync.Mutex
	send := func(typ byte, parts ...[]byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		if err := client.WriteFrame(w, typ, parts...); err != nil {
			return err
		}
		return w.Flush()
	}
	sendErr := func(req uint64, code uint16, text string) error {
		return send(client.TypeError, client.U64(req), client.U16(code), []byte(text))
	}
	// grow gives the connection its big buffers, once: what the small
	// reader holds is read first; the small writer is empty (every write
	// before is flushed under wmu, and no other writer runs yet).
	grown := false
	grow := func() {
		if grown {
			return
		}
		grown = true
		if n := r.Buffered(); n > 0 {
			held, _ := r.Peek(n)
			r = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(held)), c), connBigBuf)
		} else {
			r = bufio.NewReaderSize(c, connBigBuf)
		}
		wmu.Lock()
		w = bufio.NewWriterSize(c, connBigBuf)
		wmu.Unlock()
	}
	// Replies to publishes are encoded by the core (which must not block)
	// into a queue that one writer drains, coalescing writes; both start
	// with the connection's first publish.
	var replies *replyQueue
	writerDone := make(chan struct{})
	startReplies := func() {
		if replies != nil {
			return
		}
		grow()
		replies = newReplyQueue(maxReplies)
		go func() {
			defer close(writerDone)
			err := replies.drain(func(bs [][]byte) error {
				wmu.Lock()
				defer wmu.Unlock()
				for _, b := range bs {
					if _, err := w.Write(b); err != nil {
						return err
					}
				}
				return w.Flush()
			})
			if err != nil {
				c.Close()
			}
		}()
	}
	var inflight sync.WaitGroup
	defer func() {
		if replies != nil {
			go func() { inflight.Wait(); replies.close() }()
			<-writerDone
		}
	}()
	var once sync.Once
	queueReply := func(b []byte) {
		if !replies.put(b) {
			once.Do(func() { c.Close() }) // the client does not read its replies
		}
	}
	errorFrame := func(id uint64, err error) []byte {
		var ae *client.APIError
		if !errors.As(err, &ae) {
			ae = &client.APIError{Code: client.CodeShuttingDown, Text: err.Error()}
		}
		return encodeFrame(client.TypeError, client.U64(id), client.U16(ae.Code), []byte(ae.Text))
	}
	reply := func(id uint64) func(client.Ack) {
		inflight.Add(1)
		return func(a client.Ack) {
			defer inflight.Done()
			if a.Err != nil {
				queueReply(errorFrame(id, a.Err))
			} else {
				queueReply(encodeFrame(client.TypePublished, client.U64(id), client.U64(a.Pos.Seq), client.U16(a.Pos.Index)))
			}
		}
	}
	// publishBatch queues a batch; its one reply, PublishedBatch, goes out
	// when the last of its messages is agreed or failed (the replies come
	// under the core lock, so left needs no lock of its own); a batch
	// refused whole gets one Error.
	publishBatch := func(id uint64, payloads [][]byte) {
		inflight.Add(1)
		acks := make([]client.Ack, len(payloads))
		left := len(payloads)
		err := d.PublishBatch(payloads, func(i int, a client.Ack) {
			acks[i] = a
			if left--; left == 0 {
				queueReply(client.AppendPublishedBatch(nil, id, acks))
				inflight.Done()
			}
		})
		if err != nil {
			queueReply(errorFrame(id, err))
			inflight.Done()
		}
	}
	var buf []byte
	for {
		typ, body, b, err := client.ReadFrame(r, buf)
		buf = b
		if err != nil {
			return err
		}
		switch typ {
		case client.TypePublish:
			if len(body) < 8 {
				return sendErr(0, client.CodeBadRequest, "publish: short request")
			}
			id := binary.BigEndian.Uint64(body)
			if ctx.Err() != nil {
				return sendErr(id, client.CodeShuttingDown, "daemon shutting down")
			}
			startReplies()
			d.Publish(append([]byte(nil), body[8:]...), reply(id))
		case client.TypePublishBatch:
			id, payloads, err := client.ParsePublishBatch(body)
			if err != nil {
				return sendErr(0, client.CodeBadRequest, err.Error())
			}
			if ctx.Err() != nil {
				return sendErr(id, client.CodeShuttingDown, "daemon shutting down")
			}
			startReplies()
			publishBatch(id, payloads) // the payloads alias buf: PublishBatch copies them before it returns
		case client.TypeRoster:
			if len(body) != 10 {
				return sendErr(0, client.CodeBadRequest, "roster: want [req u64][op u8][member u8]")
			}
			id := binary.BigEndian.Uint64(body)
			err := d.ProposeChange(exo.ChangeOp(body[8]), body[9])
			var ae *client.APIError
			if errors.As(err, &ae) {
				err = sendErr(id, ae.Code, ae.Text)
			} else {
				err = send(client.TypeRosterQueued, client.U64(id))
			}
			if err != nil {
				return err
			}
		case client.TypeAcceptLoss:
			if len(body) != 24 {
				return sendErr(0, client.CodeBadRequest, "accept-loss: want [req u64][from u64][to u64]")
			}
			id := binary.BigEndian.Uint64(body)
			err := d.AcceptLoss(binary.BigEndian.Uint64(body[8:]), binary.BigEndian.Uint64(body[16:]))
			var ae *client.APIError
			if errors.As(err, &ae) {
				err = sendErr(id, ae.Code, ae.Text)
			} else {
				err = send(client.TypeLossAccepted, client.U64(id))
			}
			if err != nil {
				return err
			}
		case client.TypeKey:
			if len(body) < 9 {
				return sendErr(0, client.CodeBadRequest, "key: want [req u64][op u8][path]")
			}
			id := binary.BigEndian.Uint64(body)
			var err error
			switch body[8] {
			case client.KeyStage:
				err = d.StageKeyFile(string(body[9:]))
			case client.KeyRetire:
				err = d.RetireKey()
			default:
				err = &client.APIError{Code: client.CodeBadRequest, Text: fmt.Sprintf("key: operation %d is neither stage (1) nor retire (2)", body[8])}
			}
			var ae *client.APIError
			if errors.As(err, &ae) {
				err = sendErr(id, ae.Code, ae.Text)
			} else {
				err = send(client.TypeKeyDone, client.U64(id))
			}
			if err != nil {
				return err
			}
		case client.TypeHello:
			if len(body) < 2 {
				return sendErr(0, client.CodeBadRequest, "hello: want [version u16][client name]")
			}
			if v := binary.BigEndian.Uint16(body); v > client.APIVersion || v < client.MinAPIVersion {
				return sendErr(0, client.CodeVersion, fmt.Sprintf("the client (%q) speaks API version %d, this daemon speaks API version %d (and serves clients of versions %d..%d): use a client of version %d",
					body[2:], v, client.APIVersion, client.MinAPIVersion, client.APIVersion, client.APIVersion))
			}
			wmu.Lock()
			_, err := w.Write(client.AppendHelloReply(nil))
			if err == nil {
				err = w.Flush()
			}
			wmu.Unlock()
			if err != nil {
				return err
			}
		case client.TypeStatus:
			if err := send(client.TypeStatusReply, d.StatusJSON()); err != nil {
				return err
			}
		case client.TypeSubscribe:
			if len(body) < 8 {
				return sendErr(0, client.CodeBadRequest, "subscribe: short request")
			}
			grow()
			return d.subscribe(ctx, c, w, &wmu, send, binary.BigEndian.Uint64(body))
		default:
			return sendErr(0, client.CodeBadRequest, fmt.Sprintf("unknown request type %#x", typ))
		}
	}
}

func encodeFrame(typ byte, parts ...[]byte) []byte {
	var b bytes.Buffer
	client.WriteFrame(&b, typ, parts...)
	return b.Bytes()
}

// subscribe streams delivered messages from seq on: first those still in
// the history, then live ones. Message frames are written to w (under wmu)
// and flushed once for all those queued for the subscriber: one write
// carries as many frames as came in meanwhile (up to w's buffer), so a
// busy stream costs a system call per burst, not per message.
func (d *Daemon) subscribe(ctx context.Context, c net.Conn, w *bufio.Writer, wmu *sync.Mutex, send func(byte, ...[]byte) error, from uint64) error {
	s := &subscriber{ch: make(chan client.Message, subQueue)}
	var hdr [11]byte
	emit := func(m client.Message) error { // wmu held
		binary.BigEndian.PutUint64(hdr[:], m.Seq)
		binary.BigEndian.PutUint16(hdr[8:], m.Index)
		hdr[10] = m.Sender
		return client.WriteFrame(w, client.TypeMessage, hdr[:], m.Payload)
	}
	var arch *archiveStream // the retained log below the history, once needed
	next := from            // the first seq not yet sent
	d.mu.Lock()
	for {
		// Every message of an entry has the entry's seq.
		i := sort.Search(len(d.history), func(i int) bool { return d.history[i][0].Seq >= next })
		if i > 0 || (d.histBase == 0 && next >= d.streamFrom) || (len(d.history) > 0 && d.history[0][0].Seq <= next) {
			break
		}
		// Below the history: from the retained log, up to the history's
		// start (it moves on meanwhile: then again). The retained log is
		// this host's stream below the history, also below where the
		// history began after a restart (streamFrom: the restart read
		// back the in-memory part of its log; it delivered the rest
		// before it stopped); a state transfer's floor jump starts the
		// disk anew.
		if len(d.history) > 0 && next >= d.retained && d.disk != nil {
			upTo := d.history[0][0].Seq
			d.mu.Unlock()
			if arch == nil {
				arch = d.newArchiveStream(from)
			}
			if err := arch.send(next, upTo, emit, w, wmu); err == nil {
				next = upTo
				d.mu.Lock()
				continue
			} else if !errors.Is(err, errArchiveGone) {
				return err
			}
			d.mu.Lock()
		}
		oldest := d.streamFrom
		if len(d.history) > 0 {
			oldest = d.history[0][0].Seq
		}
		text := fmt.Sprintf("seq %d is no longer in memory; the oldest a subscription can start from is %d", from, oldest)
		if from < d.streamFrom {
			text = fmt.Sprintf("seq %d is below this host's stream, which starts at seq %d (its log's base after a restart, or where a state transfer started it: the rack had compacted what lay before); the oldest held is %d", from, d.streamFrom, oldest)
		}
		if next < d.retained {
			text = fmt.Sprintf("seq %d is below this host's retained log, which starts at seq %d (retain); the oldest a subscription can start from is %d", from, d.retained, max(d.retained, d.streamFrom))
		}
		if d.rackFloor > 0 {
			text += fmt.Sprintf(" (the rack's floor, the lowest seq a majority of the members serve, is %d)", d.rackFloor)
		}
		d.mu.Unlock()
		return send(client.TypeError, client.U64(0), client.U16(client.CodeCompacted), []byte(text))
	}
	i := sort.Search(len(d.history), func(i int) bool { return d.history[i][0].Seq >= next })
	// The entries' message slices never change once delivered: the copy
	// of the list is enough to read them outside the lock.
	backlog := slices.Clone(d.history[i:])
	d.subs[s] = struct{}{}
	d.mu.Unlock()
	if d.tp != nil {
		d.tp.SetUrgentOnly(false) // it waits for every agreement
	}
	defer func() { d.mu.Lock(); delete(d.subs, s); d.mu.Unlock() }()
	// Detect the client going away while we wait for messages.
	gone := make(chan struct{})
	go func() { var b [1]byte; c.Read(b[:]); close(gone) }()
	wmu.Lock()
	var err error
	for _, ms := range backlog {
		for _, m := range ms {
			if err = emit(m); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		err = w.Flush()
	}
	wmu.Unlock()
	if err != nil {
		return err
	}
	backlog = nil
	for {
		select {
		case m, ok := <-s.ch:
			if !ok {
				return send(client.TypeError, client.U64(0), client.U16(client.CodeTooSlow),
					[]byte("subscriber fell behind by more than its queue; resubscribe from the last seq received"))
			}
			// This goroutine is the queue's only reader: what len counts is
			// there to take (a closed queue's rest too; the close is seen
			// by the select above once it is empty).
			wmu.Lock()
			err := emit(m)
			for k := 1; err == nil && k < subBurst && len(s.ch) > 0; k++ {
				err = emit(<-s.ch)
			}
			if err == nil {
				err = w.Flush()
			}
			wmu.Unlock()
			if err != nil {
				return err
			}
		case <-gone:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// fanOut records delivered messages and passes them to subscribers; a
// subscriber whose queue is full is cut off (told so), never skipped.
func (d *Daemon) fanOut(msgs []client.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.delivCnt += uint64(len(msgs))
	d.metrics.delivered.Add(float64(len(msgs)))
	// The history of delivered messages (for subscribers that start behind)
	// keeps the last keep_entries messages, as the entries' own slices of
	// messages (msgs is the caller's, never changed after): a delivery
	// appends one slice header, not a copy of each message, and the
	// garbage collector sees one object an entry. It is trimmed, whole
	// entries from the front, when it holds twice keep_entries messages.
	// Payloads were copied out of the core's log when delivered, so
	// trimming frees them.
	d.history = append(d.history, msgs)
	d.histMsgs += len(msgs)
	if keep := d.cfg.KeepEntries; d.histMsgs > 2*keep {
		k, drop := 0, 0
		for k < len(d.history) && d.histMsgs-drop > keep {
			drop += len(d.history[k])
			k++
		}
		d.history = append(make([][]client.Message, 0, 2*(len(d.history)-k)), d.history[k:]...)
		d.histMsgs -= drop
		d.histBase += drop
	}
	for s := range d.subs {
		if s.closed {
			continue
		}
		for _, m := range msgs {
			select {
			case s.ch <- m:
			default:
				s.closed = true
				close(s.ch)
			}
			if s.closed {
				break
			}
		}
	}
}
