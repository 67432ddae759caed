package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
)

// memOOB connects in-process daemons' OOB transports.
type memOOB struct {
	all []*memOOB
	in  chan exo.Message
}

func (o *memOOB) Send(m exo.Message) {
	if int(m.To) < len(o.all) {
		select {
		case o.all[m.To].in <- m:
		default:
		}
	}
}
func (o *memOOB) Recv() <-chan exo.Message { return o.in }

// TestHeapProfileInProcess is the diagnostic of TestRackMemoryBounded: the
// same load on three daemons run in this process (broadcast.MemNetwork,
// in-memory OOB, the real daemon package), with the live heap measured
// after a forced GC each round and a heap profile written after the last.
// It runs only with EXO_HEAP_PROFILE=<dir> (EXO_HEAP_ROUNDS=<n> rounds of
// 3 x 20000 messages, default 5); read the profile with
//
//	go tool pprof -sample_index=inuse_space -top <dir>/heap.pprof
func TestHeapProfileInProcess(t *testing.T) {
	dir := os.Getenv("EXO_HEAP_PROFILE")
	if dir == "" {
		t.Skip("diagnostic: set EXO_HEAP_PROFILE=<dir> to run it")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const n, keep = 3, 1024
	net := broadcast.NewMemNetwork()
	defer net.Close()
	sockDir := t.TempDir()
	c := &Cluster{Rack: &lab.Rack{}, opt: Options{Dir: sockDir}}
	var roster []daemon.Member
	for i := 0; i < n; i++ {
		c.Rack.Hosts = append(c.Rack.Hosts, lab.Host{ID: i, Name: lab.HostName(i), MAC: lab.HostMAC(i)})
		roster = append(roster, daemon.Member{ID: i, MAC: lab.HostMAC(i).String(), OOB: fmt.Sprintf("127.0.0.1:%d", 17700+i)})
	}
	oobs := make([]*memOOB, n)
	for i := range oobs {
		oobs[i] = &memOOB{all: oobs, in: make(chan exo.Message, 4096)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, n)
	for i := 0; i < n; i++ {
		b, _ := json.Marshal(daemon.Config{Group: 7, ID: i, Interface: "mem0", Roster: roster,
			APISocket: c.Socket(i), KeepEntries: keep})
		cfg, err := daemon.ParseConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		d, err := daemon.New(cfg, net.Attach(lab.HostMAC(i)), oobs[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- d.Run(ctx) }()
	}
	defer func() {
		cancel()
		for range n {
			<-done
		}
	}()
	for i := 0; i < n; i++ { // the API sockets answer
		for _, err := os.Stat(c.Socket(i)); err != nil; _, err = os.Stat(c.Socket(i)) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	live := func() string {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return fmt.Sprintf("%.1f", float64(ms.HeapAlloc)/(1<<20))
	}
	series := []string{live()}
	all := []int{0, 1, 2}
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("EXO_HEAP_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	for rd := 0; rd < rounds; rd++ {
		res, err := c.Publish(ctx, Load{Hosts: all, PerHost: 20000, Size: 64, Round: rd, Window: 64})
		if err != nil || res.Failed > 0 {
			t.Fatalf("round %d: %v %v", rd, err, res.Errors)
		}
		time.Sleep(100 * time.Millisecond) // the replies are written, the client's buffers released
		series = append(series, live())
	}
	t.Logf("live heap after GC of the test process (3 daemons + the load client), MiB, idle then per round of 60000 messages: %s",
		strings.Join(series, " "))
	path := filepath.Join(dir, "heap.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("heap profile: %s", path)
}
