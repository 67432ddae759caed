package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countConn counts the writes made on a connection.
type countConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestClientConcurrentPublishes: publishes from many goroutines share the
// connection's writes (one writer writes what the others encoded
// meanwhile); every request reaches the daemon whole, once, and every
// answer its publisher. A connection that fails fails every publish
// waiting, and the next one at once.
func TestClientConcurrentPublishes(t *testing.T) {
	var got sync.Map // payload -> request id
	sock := fakeDaemon(t, func(c net.Conn, r *bufio.Reader) {
		w := bufio.NewWriter(c)
		for {
			typ, body, _, err := ReadFrame(r, nil)
			if err != nil || typ != TypePublish {
				return
			}
			id := binary.BigEndian.Uint64(body)
			if _, dup := got.LoadOrStore(string(body[8:]), id); dup {
				t.Errorf("payload %q received twice", body[8:])
			}
			if string(body[8:]) == "close" {
				return
			}
			w.Write(frameBytes(TypePublished, U64(id), U64(id*10), U16(0)))
			if r.Buffered() == 0 {
				w.Flush()
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc := &countConn{Conn: c.conn}
	c.conn = cc

	const workers, each = 32, 200
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				p := fmt.Sprintf("m-%d-%d", g, k)
				ch, err := c.PublishAsync([]byte(p))
				if err != nil {
					t.Errorf("%s: %v", p, err)
					return
				}
				a := <-ch
				id, _ := got.Load(p)
				if a.Err != nil || id == nil || a.Pos.Seq != id.(uint64)*10 {
					t.Errorf("%s: ack %+v, request id %v", p, a, id)
					return
				}
			}
		}()
	}
	wg.Wait()
	n := int64(workers * each)
	t.Logf("%d publishes from %d goroutines in %d writes", n, workers, cc.writes.Load())
	if w := cc.writes.Load(); w > n || w == 0 {
		t.Errorf("%d writes for %d publishes", w, n)
	}

	// The daemon closes the connection on "close": the publishes waiting
	// fail with the connection's error, and the next one fails at once.
	chs := make([]<-chan Ack, 0, 4)
	for k := range 3 {
		ch, err := c.PublishAsync([]byte(fmt.Sprintf("late-%d", k)))
		if err != nil {
			t.Fatal(err)
		}
		chs = append(chs, ch)
	}
	ch, err := c.PublishAsync([]byte("close"))
	if err != nil {
		t.Fatal(err)
	}
	chs = append(chs, ch)
	for _, ch := range chs {
		select {
		case a := <-ch:
			_ = a // answered (before the close) or failed: either way, not lost
		case <-time.After(5 * time.Second):
			t.Fatal("a publish waiting when the connection failed was never answered")
		}
	}
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the read loop did not end after the daemon closed the connection")
	}
	if _, err := c.PublishAsync([]byte("after")); err == nil {
		t.Error("publish on a failed connection: no error")
	}
}
