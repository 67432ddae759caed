package cluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
)

// chanOOB connects in-process daemons' OOB transports.
type chanOOB struct {
	all []*chanOOB
	in  chan exo.Message
}

func (o *chanOOB) Send(m exo.Message) {
	if int(m.To) < len(o.all) {
		select {
		case o.all[m.To].in <- m:
		default:
		}
	}
}
func (o *chanOOB) Recv() <-chan exo.Message { return o.in }

// memCluster is a Cluster whose n daemons run in this process on an
// in-memory segment (no lab rack, no root): enough for Publish and
// Collect, which only use the API sockets.
func memCluster(t *testing.T, n int) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "exol") // short: Unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "group.key")
	if err := os.WriteFile(key, []byte("exo load test group key, 32 B..."), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Rack: &lab.Rack{}, opt: Options{Dir: dir}}
	roster := ""
	for i := 0; i < n; i++ {
		c.Rack.Hosts = append(c.Rack.Hosts, lab.Host{ID: i, Name: string(rune('A' + i))})
		if i > 0 {
			roster += ","
		}
		roster += fmt.Sprintf(`{"id":%d,"mac":"02:e0:00:00:00:%02x","oob":"127.0.0.1:%d"}`, i, i+1, 17700+i)
	}
	seg := broadcast.NewMemNetwork()
	oobs := make([]*chanOOB, n)
	for i := range oobs {
		oobs[i] = &chanOOB{all: oobs, in: make(chan exo.Message, 4096)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, n)
	for i := 0; i < n; i++ {
		cfg, err := daemon.ParseConfig(fmt.Appendf(nil, `{"group":7,"id":%d,"interface":"mem0","api_socket":%q,"key_file":%q,"roster":[%s]}`,
			i, c.Socket(i), key, roster))
		if err != nil {
			t.Fatal(err)
		}
		mac, _ := net.ParseMAC(fmt.Sprintf("02:e0:00:00:00:%02x", i+1))
		conn, err := seg.AttachOptions(mac, broadcast.Options{QueueLen: 1 << 15})
		if err != nil {
			t.Fatal(err)
		}
		d, err := daemon.New(cfg, conn, oobs[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- d.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range n {
			if err := <-done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		}
		os.RemoveAll(dir)
	})
	for i := 0; i < n; i++ {
		for k := 0; ; k++ {
			cl, err := client.Dial(ctx, c.Socket(i))
			if err == nil {
				cl.Close()
				break
			}
			if k > 200 {
				t.Fatalf("daemon %d never came up: %v", i, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return c
}

// TestLoadBatch: a load with Batch publishes every message of every host
// once (in PublishBatch requests), each acknowledged at the position where
// every host delivers it.
func TestLoadBatch(t *testing.T) {
	const n, per = 3, 3000
	c := memCluster(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	acked := map[client.Position][]byte{}
	res, err := c.Publish(ctx, Load{Hosts: []int{0, 1, 2}, PerHost: per, Size: 64, Window: 1024, Batch: 256, Round: 3,
		OnAck: func(p []byte, pos client.Position) {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := acked[pos]; ok {
				t.Errorf("two messages acknowledged at %v", pos)
			}
			acked[pos] = p
		}})
	if err != nil || res.Published != n*per || res.Failed != 0 {
		t.Fatalf("load: %d published, %d failed, %v %v", res.Published, res.Failed, err, res.Errors)
	}
	streams, err := c.Collect(ctx, []int{0, 1, 2}, n*per)
	if err != nil {
		t.Fatal(err)
	}
	for h, s := range streams {
		seen := map[string]bool{}
		for _, m := range s {
			if p, ok := acked[m.Position]; !ok || !bytes.Equal(p, m.Payload) {
				t.Fatalf("host %d delivers at %v a message not acknowledged there", h, m.Position)
			}
			if seen[string(m.Payload)] {
				t.Fatalf("host %d delivers a message twice", h)
			}
			seen[string(m.Payload)] = true
		}
	}
}
