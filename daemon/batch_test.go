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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/exo"
)

// batchRack starts n in-process daemons on an in-memory segment, as
// startRack does, for tests and benchmarks alike (testing.TB), with edit
// applied to every host's config; it returns the daemons and their API
// sockets.
func batchRack(tb testing.TB, n int, edit func(*Config)) ([]*Daemon, []string) {
	tb.Helper()
	dir, err := os.MkdirTemp("", "exob") // short: Unix socket paths are limited to 108 bytes
	if err != nil {
		tb.Fatal(err)
	}
	keyFile := filepath.Join(dir, "group.key")
	if err := os.WriteFile(keyFile, testGroupKey, 0o600); err != nil {
		tb.Fatal(err)
	}
	seg := broadcast.NewMemNetwork()
	var roster []Member
	for i := 0; i < n; i++ {
		roster = append(roster, Member{ID: i, MAC: fmt.Sprintf("02:e0:00:00:00:%02x", i+1), OOB: fmt.Sprintf("127.0.0.1:%d", 17700+i)})
	}
	oobs := make([]*memOOB, n)
	for i := range oobs {
		oobs[i] = &memOOB{id: uint8(i), all: oobs, in: make(chan exo.Message, 4096)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, n)
	var ds []*Daemon
	var socks []string
	for i := 0; i < n; i++ {
		cfg := &Config{Group: 7, ID: i, Hosts: n, Interface: "mem0", Roster: roster,
			APISocket: filepath.Join(dir, fmt.Sprintf("h%d.sock", i)), KeyFile: keyFile}
		if edit != nil {
			edit(cfg)
		}
		cfg.defaults()
		if err := cfg.Validate(); err != nil {
			tb.Fatal(err)
		}
		mac, _ := net.ParseMAC(roster[i].MAC)
		conn, err := seg.AttachOptions(mac, broadcast.Options{QueueLen: 1 << 15})
		if err != nil {
			tb.Fatal(err)
		}
		d, err := New(cfg, conn, oobs[i], testLogger(i))
		if err != nil {
			tb.Fatal(err)
		}
		ds = append(ds, d)
		socks = append(socks, cfg.APISocket)
		go func() { done <- d.Run(ctx) }()
	}
	tb.Cleanup(func() {
		cancel()
		for range ds {
			if err := <-done; err != nil {
				tb.Errorf("daemon: %v", err)
			}
		}
		os.RemoveAll(dir)
	})
	for _, s := range socks {
		for k := 0; ; k++ {
			c, err := client.Dial(ctx, s)
			if err == nil {
				c.Close()
				break
			}
			if k > 200 {
				tb.Fatalf("daemon socket %s never came up: %v", s, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return ds, socks
}

// subscribeAll follows every socket's stream from seq 0 until want
// messages arrived at each.
func subscribeAll(t *testing.T, ctx context.Context, socks []string, want int) [][]client.Message {
	out := make([][]client.Message, len(socks))
	var wg sync.WaitGroup
	for i, s := range socks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := client.Subscribe(ctx, s, 0, func(m client.Message) error {
				out[i] = append(out[i], m)
				if len(out[i]) == want {
					return errDone
				}
				return nil
			})
			if !errors.Is(err, errDone) {
				t.Errorf("host %d: subscription ended after %d messages: %v", i, len(out[i]), err)
			}
		}()
	}
	wg.Wait()
	return out
}

// checkBatchDelivered: the agreed messages of a batch (acks) sit at their
// positions in the stream, with their payloads, in the batch's order.
func checkBatchDelivered(t *testing.T, stream []client.Message, payloads [][]byte, acks []client.Ack) {
	t.Helper()
	at := map[client.Position]client.Message{}
	for _, m := range stream {
		at[m.Position] = m
	}
	var last client.Position
	for i, a := range acks {
		if a.Err != nil {
			continue
		}
		if a.Pos.Seq < last.Seq || a.Pos.Seq == last.Seq && a.Pos.Index <= last.Index && i > 0 {
			t.Fatalf("message %d agreed at %v, after %v: out of the batch's order", i, a.Pos, last)
		}
		last = a.Pos
		m, ok := at[a.Pos]
		if !ok || !bytes.Equal(m.Payload, payloads[i]) {
			t.Fatalf("message %d (%d bytes) agreed at %v: the stream holds %d bytes there (found %v)", i, len(payloads[i]), a.Pos, len(m.Payload), ok)
		}
	}
}

// agreedCount checks the results of a batch (err: PublishBatch's error):
// every message agreed but those in tooLarge (ErrTooLarge) and any that a
// reconciliation dropped (a starved machine's rack may change views; a
// dropped message is never delivered). It returns how many were agreed.
func agreedCount(t *testing.T, acks []client.Ack, err error, tooLarge ...int) int {
	t.Helper()
	var be *client.BatchError
	if err != nil && !errors.As(err, &be) {
		t.Fatalf("batch: %v", err)
	}
	n := 0
	for i, a := range acks {
		big := slices.Contains(tooLarge, i)
		switch {
		case a.Err == nil && !big:
			n++
		case big && errors.Is(a.Err, client.ErrTooLarge), !big && errors.Is(a.Err, client.ErrDropped):
		default:
			t.Fatalf("message %d: %v (too large expected: %v)", i, a.Err, big)
		}
	}
	if n < len(acks)-len(tooLarge) {
		t.Logf("%d messages of %d dropped by a reconciliation", len(acks)-len(tooLarge)-n, len(acks))
	}
	return n
}

// TestPublishBatch: a batch of 500 small messages on a 3-host rack is
// answered once, every message agreed at increasing positions, and every
// host delivers each of them at that position.
func TestPublishBatch(t *testing.T) {
	_, socks := batchRack(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var payloads [][]byte
	for k := 0; k < 500; k++ {
		payloads = append(payloads, fmt.Appendf(nil, "batch message %d", k))
	}
	c, err := client.Dial(ctx, socks[1])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acks, err := c.PublishBatch(ctx, payloads)
	if len(acks) != len(payloads) {
		t.Fatalf("%d acks for %d messages: %v", len(acks), len(payloads), err)
	}
	got := subscribeAll(t, ctx, socks, agreedCount(t, acks, err))
	sameStreams(t, got)
	checkBatchDelivered(t, got[0], payloads, acks)
	for _, m := range got[0] {
		if m.Sender != 1 {
			t.Fatalf("message at %v from member %d, want 1", m.Position, m.Sender)
		}
	}
	// An empty batch is answered without a request.
	if acks, err := c.PublishBatch(ctx, nil); err != nil || len(acks) != 0 {
		t.Fatalf("empty batch: %v, %v", acks, err)
	}
}

// TestPublishBatchTooLargeMessage: a message above max_message_bytes fails
// alone (ErrTooLarge in its result); the batch's others are agreed.
func TestPublishBatchTooLargeMessage(t *testing.T) {
	_, socks := batchRack(t, 3, func(c *Config) { c.MaxMessage = 4000 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	payloads := [][]byte{[]byte("first"), make([]byte, 4001), bytes.Repeat([]byte("x"), 4000), []byte("last")}
	c, err := client.Dial(ctx, socks[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acks, err := c.PublishBatch(ctx, payloads)
	var be *client.BatchError
	if !errors.As(err, &be) || be.Index > 1 || be.Of != 4 || len(acks) != 4 {
		t.Fatalf("batch with one message too large: %v, want a BatchError for message 1, too large", err)
	}
	got := subscribeAll(t, ctx, socks, agreedCount(t, acks, err, 1))
	sameStreams(t, got)
	checkBatchDelivered(t, got[0], payloads, acks)
}

// TestPublishBatchMixed: a batch mixing small messages and messages split
// into fragments (up to 200 kB) arrives whole, in the batch's order, at
// every host; a second batch on the same connection follows it.
func TestPublishBatchMixed(t *testing.T) {
	_, socks := batchRack(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sizes := []int{10, 5000, 0, 1400, 1500, 3000, 200_000, 1, 64}
	var payloads [][]byte
	for i, n := range sizes {
		p := make([]byte, n)
		for k := range p {
			p[k] = byte(i*31 + k*7)
		}
		payloads = append(payloads, p)
	}
	c, err := client.Dial(ctx, socks[2])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch1, err := c.PublishBatchAsync(payloads)
	if err != nil {
		t.Fatal(err)
	}
	ch2, err := c.PublishBatchAsync(payloads[:3])
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := <-ch1, <-ch2
	if r1.Err != nil || r2.Err != nil {
		t.Fatalf("batches: %v, %v", r1.Err, r2.Err)
	}
	agreed := agreedCount(t, append(r1.Acks, r2.Acks...), nil)
	if l, f := r1.Acks[len(r1.Acks)-1], r2.Acks[0]; l.Err == nil && f.Err == nil &&
		(f.Pos.Seq < l.Pos.Seq || f.Pos.Seq == l.Pos.Seq && f.Pos.Index <= l.Pos.Index) {
		t.Fatalf("the second batch's first message at %v, the first's last at %v", f.Pos, l.Pos)
	}
	got := subscribeAll(t, ctx, socks, agreed)
	sameStreams(t, got)
	checkBatchDelivered(t, got[0], payloads, r1.Acks)
	checkBatchDelivered(t, got[0], payloads[:3], r2.Acks)
}

// TestPublishBatchWhole: a batch that needs more records than queue_len is
// refused whole as too large over the API; on a host whose queue holds
// records (it never gets the token: its daemon does not run), a batch that
// does not fit the rest is refused whole as queue full, with nothing of it
// queued and no reply; one that fits exactly is queued.
func TestPublishBatchWhole(t *testing.T) {
	const queueLen = 20
	small := func(c *Config) { c.QueueLen, c.MaxMessage = queueLen, 8000 }
	_, socks := batchRack(t, 1, small)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socks[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	many := make([][]byte, queueLen+1)
	for i := range many {
		many[i] = []byte{byte(i)}
	}
	if acks, err := c.PublishBatch(ctx, many); !errors.Is(err, client.ErrTooLarge) || acks != nil {
		t.Fatalf("a batch of %d records, queue_len %d: %v (%d acks), want ErrTooLarge for the batch", len(many), queueLen, err, len(acks))
	}
	if acks, err := c.PublishBatch(ctx, many[:queueLen]); err != nil || len(acks) != queueLen {
		t.Fatalf("a batch of queue_len records: %v", err)
	}
	// Oversize messages take no room: a batch of queue_len small ones and
	// one too large fits.
	if _, err := c.PublishBatch(ctx, append(many[:queueLen:queueLen], make([]byte, 2<<20))); !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("queue_len records and one too large: %v, want a BatchError", err)
	} else if be := (*client.BatchError)(nil); !errors.As(err, &be) || be.Index != queueLen {
		t.Fatalf("queue_len records and one too large: %v, want a BatchError for message %d", err, queueLen)
	}

	// Host 1 of 3, not running: what it queues stays queued.
	d := idleHost(t, small)
	replies := 0
	count := func(int, client.Ack) { replies++ }
	if err := d.PublishBatch([][]byte{[]byte("a"), make([]byte, 3000)}, count); err != nil { // 1 + 3 records
		t.Fatal(err)
	}
	d.core.Lock()
	pending := d.node.Pending()
	d.core.Unlock()
	if pending != 4 {
		t.Fatalf("%d records pending after a batch of 4, want 4", pending)
	}
	room := queueLen - pending
	tooMany := make([][]byte, room+1)
	for i := range tooMany {
		tooMany[i] = []byte{1}
	}
	err = d.PublishBatch(tooMany, count)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Code != client.CodeQueueFull {
		t.Fatalf("a batch of %d with room for %d: %v, want queue full", len(tooMany), room, err)
	}
	d.core.Lock()
	after := d.node.Pending()
	d.core.Unlock()
	if after != pending || replies != 0 {
		t.Fatalf("refused batch: %d records pending (before %d), %d replies: half queued", after, pending, replies)
	}
	if err := d.PublishBatch(tooMany[:room], count); err != nil {
		t.Fatalf("a batch that fits exactly: %v", err)
	}
	d.core.Lock()
	after = d.node.Pending()
	d.core.Unlock()
	if after != queueLen {
		t.Fatalf("%d records pending, want %d", after, queueLen)
	}
}

// idleHost is host 1 of a 3-host rack whose daemon is made but not run:
// it never gets the token, so its queue only fills.
func idleHost(t *testing.T, edit func(*Config)) *Daemon {
	dir := t.TempDir()
	var roster []Member
	for i := 0; i < 3; i++ {
		roster = append(roster, Member{ID: i, MAC: fmt.Sprintf("02:e0:00:00:00:%02x", i+1), OOB: fmt.Sprintf("127.0.0.1:%d", 17700+i)})
	}
	keyFile := filepath.Join(dir, "group.key")
	if err := os.WriteFile(keyFile, testGroupKey, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Group: 7, ID: 1, Hosts: 3, Interface: "mem0", Roster: roster, APISocket: filepath.Join(dir, "s"), KeyFile: keyFile}
	edit(cfg)
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC(roster[1].MAC)
	oob := &memOOB{id: 1, in: make(chan exo.Message, 16)}
	oob.all = []*memOOB{{}, oob, {}}
	d, err := New(cfg, broadcast.NewMemNetwork().Attach(mac), oob, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestNumRecords: numRecords counts what split makes.
func TestNumRecords(t *testing.T) {
	for _, chunk := range []int{64, 100, 1400, 9000} {
		for n := 0; n < 5*chunk; n += 1 + n/50 {
			if got, want := numRecords(n, chunk), len(split(1, make([]byte, n), chunk)); got != want {
				t.Fatalf("numRecords(%d, %d) = %d, split makes %d", n, chunk, got, want)
			}
		}
	}
}

// TestBatchedDelivery: every host publishes batches concurrently (and
// single publishes between them) while every host follows the stream; every
// subscriber receives every message once, in the same order; a subscriber
// that starts afterwards gets the same stream from the history; a raw
// subscription's first read holds many Message frames (the writer
// coalesces them).
func TestBatchedDelivery(t *testing.T) {
	const n, batches, per = 3, 12, 256
	_, socks := batchRack(t, n, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	total := n * (batches*per + batches)
	res := make(chan [][]client.Message, 1)
	go func() { res <- subscribeAll(t, ctx, socks, total) }()
	var wg sync.WaitGroup
	for h, s := range socks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(ctx, s)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			var chs []<-chan client.BatchAck
			var singles []<-chan client.Ack
			for b := 0; b < batches; b++ {
				var payloads [][]byte
				for k := 0; k < per; k++ {
					payloads = append(payloads, fmt.Appendf(nil, "h%d b%d m%d", h, b, k))
				}
				ch, err := c.PublishBatchAsync(payloads) // 12 x 257 records in flight: the queue (8,192) holds them
				if err != nil {
					t.Error(err)
					return
				}
				chs = append(chs, ch)
				single, err := c.PublishAsync(fmt.Appendf(nil, "h%d single %d", h, b))
				if err != nil {
					t.Error(err)
					return
				}
				singles = append(singles, single)
			}
			// What a reconciliation dropped (a starved machine's rack may
			// change views) goes again, in a batch of its own.
			var again [][]byte
			for b, ch := range chs {
				r := <-ch
				if r.Err != nil {
					t.Errorf("host %d: batch: %v", h, r.Err)
					return
				}
				for k, a := range r.Acks {
					if errors.Is(a.Err, client.ErrDropped) {
						again = append(again, fmt.Appendf(nil, "h%d b%d m%d", h, b, k))
					} else if a.Err != nil {
						t.Errorf("host %d: batch %d message %d: %v", h, b, k, a.Err)
					}
				}
			}
			for b, ch := range singles {
				if a := <-ch; errors.Is(a.Err, client.ErrDropped) {
					again = append(again, fmt.Appendf(nil, "h%d single %d", h, b))
				} else if a.Err != nil {
					t.Errorf("host %d: single: %v", h, a.Err)
				}
			}
			if err := publishAll(ctx, c, again, 256, 1024); err != nil {
				t.Errorf("host %d: again: %v", h, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got := <-res
	sameStreams(t, got)
	seen := map[string]bool{}
	var last client.Position
	for k, m := range got[0] {
		if seen[string(m.Payload)] {
			t.Fatalf("%q delivered twice", m.Payload)
		}
		seen[string(m.Payload)] = true
		if k > 0 && (m.Seq < last.Seq || m.Seq == last.Seq && m.Index <= last.Index) {
			t.Fatalf("message %d at %v after %v", k, m.Position, last)
		}
		last = m.Position
	}
	late := subscribeAll(t, ctx, socks[:1], total)
	sameStreams(t, [][]client.Message{got[0], late[0]})

	// A raw subscription from 0: the backlog comes in writes of many frames.
	conn, err := net.Dial("unix", socks[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := client.WriteFrame(conn, client.TypeSubscribe, client.U64(0)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 1<<20)
	k, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	frames := 0
	rest := buf[:k]
	for len(rest) >= 4 && len(rest) >= 4+int(binary.BigEndian.Uint32(rest)) {
		rest = rest[4+binary.BigEndian.Uint32(rest):]
		frames++
	}
	if frames < 2 {
		t.Fatalf("the first read of a subscription to %d messages held %d whole frames (%d bytes)", total, frames, k)
	}
	// The rest of the stream, from the frame the read cut, reads frame by
	// frame (up to 10 more; the first read may have held all of it).
	r := bufio.NewReader(io.MultiReader(bytes.NewReader(rest), conn))
	for range min(10, total-frames) {
		if _, _, _, err := client.ReadFrame(r, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkPublishBatch publishes 20,000 messages of 64 bytes from one host
// of a 3-host in-memory rack, with single publishes (1,024 in flight) and
// with batches of 256 (4 in flight: the same 1,024 messages), and reports
// msgs/s. Run both side by side:
//
//	go test ./daemon -run '^$' -bench PublishBatch -benchtime 3x
func BenchmarkPublishBatch(b *testing.B) {
	const msgs, size, window = 20_000, 64, 1024
	for _, batch := range []int{1, 256} {
		name := "single"
		if batch > 1 {
			name = fmt.Sprintf("batch%d", batch)
		}
		b.Run(name, func(b *testing.B) {
			_, socks := batchRack(b, 3, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			c, err := client.Dial(ctx, socks[0])
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			payloads := make([][]byte, msgs)
			for i := range payloads {
				payloads[i] = make([]byte, size)
				binary.BigEndian.PutUint64(payloads[i], uint64(i))
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if err := publishAll(ctx, c, payloads, batch, window); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*msgs)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// publishAll publishes payloads with at most window messages in flight,
// singly (batch 1) or in batches, retrying what the queue refused and what
// a reconciliation dropped (a slow machine's rack changes views).
func publishAll(ctx context.Context, c *client.Client, payloads [][]byte, batch, window int) error {
	sem := make(chan struct{}, window/batch)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for off := 0; off < len(payloads); off += batch {
		part := payloads[off:min(off+batch, len(payloads))]
		select {
		case sem <- struct{}{}:
		case err := <-errc:
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for attempt := 0; len(part) > 0; attempt++ {
				var err error
				var retry [][]byte
				if batch == 1 {
					var ch <-chan client.Ack
					if ch, err = c.PublishAsync(part[0]); err == nil {
						err = (<-ch).Err
					}
					if retriable(err) {
						retry, err = part, nil
					}
				} else {
					var ch <-chan client.BatchAck
					if ch, err = c.PublishBatchAsync(part); err == nil {
						r := <-ch
						if err = r.Err; retriable(err) {
							retry, err = part, nil
						}
						for i, a := range r.Acks {
							if retriable(a.Err) {
								retry = append(retry, part[i])
							} else if a.Err != nil && err == nil {
								err = a.Err
							}
						}
					}
				}
				if err != nil {
					select {
					case errc <- err:
					default:
					}
					return
				}
				if part = retry; len(part) > 0 {
					time.Sleep(time.Duration(1+attempt%8) * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func retriable(err error) bool {
	return errors.Is(err, client.ErrQueueFull) || errors.Is(err, client.ErrDropped)
}

// TestHelloVersion: the daemon answers a Hello of its API version with
// the version and its features, and refuses a newer client's with one line
// that names both versions (CodeVersion).
func TestHelloVersion(t *testing.T) {
	_, socks := batchRack(t, 3, nil)
	hello := func(v uint16) (byte, []byte) {
		c, err := net.Dial("unix", socks[0])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := client.WriteFrame(c, client.TypeHello, client.U16(v), []byte("test-client")); err != nil {
			t.Fatal(err)
		}
		typ, body, _, err := client.ReadFrame(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		return typ, body
	}
	typ, body := hello(client.APIVersion)
	if typ != client.TypeHelloReply || binary.BigEndian.Uint16(body) != client.APIVersion || !strings.Contains(string(body[2:]), "subscribe") {
		t.Fatalf("hello of version %d: type %#x body %q", client.APIVersion, typ, body)
	}
	typ, body = hello(client.APIVersion + 1)
	text := string(body[min(len(body), 10):])
	if typ != client.TypeError || binary.BigEndian.Uint16(body[8:]) != client.CodeVersion ||
		!strings.Contains(text, fmt.Sprintf("speaks API version %d, this daemon speaks API version %d", client.APIVersion+1, client.APIVersion)) || strings.Contains(text, "\n") {
		t.Fatalf("hello of version %d: type %#x, %q", client.APIVersion+1, typ, text)
	}
}
