package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for raftpeer: with
// RAFTPEER_TEST_MAIN=1 it runs main with its arguments.
func TestMain(m *testing.M) {
	if os.Getenv("RAFTPEER_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ls []net.Listener
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return addrs
}

// TestThreeProcesses runs 3 raftpeer processes on loopback, proposes from
// every node (the followers forward to the leader), one message per
// proposal and batches, and checks that every proposal is answered and that
// the nodes applied the same entries.
func TestThreeProcesses(t *testing.T) {
	const n = 3
	dir := t.TempDir()
	addrs := freePorts(t, n)
	var peers []string
	for i, a := range addrs {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	var procs []*exec.Cmd
	var logs []*bytes.Buffer
	socks := make([]string, n)
	for i := range n {
		socks[i] = "unix:" + filepath.Join(dir, fmt.Sprintf("raft-%d.sock", i+1))
		args := []string{"node", "--id", fmt.Sprint(i + 1), "--peers", strings.Join(peers, ","), "--client", socks[i]}
		if i == 0 {
			args = append(args, "--campaign")
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "RAFTPEER_TEST_MAIN=1")
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs, logs = append(procs, cmd), append(logs, &log)
	}
	defer func() {
		for i, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
			p.Wait()
			t.Logf("node %d:\n%s", i+1, logs[i])
		}
	}()

	clients := make([]*Client, n)
	deadline := time.Now().Add(10 * time.Second)
	for i := range n {
		for {
			c, err := Dial(socks[i])
			if err == nil {
				clients[i] = c
				defer c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: %v", i+1, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Every node knows the leader, node 1 (it campaigned at once).
	for {
		ok := true
		for i, c := range clients {
			st, err := c.Status()
			if err != nil {
				t.Fatalf("node %d status: %v", i+1, err)
			}
			if st.Leader != 1 || st.PeersConnected != n-1 {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader 1 known to every node with every connection up within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	const single, batches, perBatch = 100, 10, 64
	var wg sync.WaitGroup
	errs := make(chan error, n*(single+batches))
	for i, c := range clients {
		for k := range single + batches {
			size := 64
			if k >= single {
				size = 64 * perBatch
			}
			payload := bytes.Repeat([]byte{byte(i), byte(k)}, size/2)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for attempt := 0; ; attempt++ {
					r := <-c.Propose(payload)
					if errors.Is(r.Err, ErrDropped) && attempt < 50 {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					if r.Err == nil && r.Index == 0 {
						r.Err = errors.New("committed at index 0")
					}
					if r.Err != nil {
						errs <- fmt.Errorf("node %d proposal %d: %w", i+1, k, r.Err)
					}
					return
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every node applies the same entries (a follower may trail by a
	// commit index it has not heard yet: wait for it).
	for {
		sts := make([]Status, n)
		for i, c := range clients {
			st, err := c.Status()
			if err != nil {
				t.Fatal(err)
			}
			sts[i] = st
		}
		same := true
		for _, st := range sts[1:] {
			if st.Applied != sts[0].Applied || st.Hash != sts[0].Hash {
				same = false
			}
		}
		if same && sts[0].Entries >= n*(single+batches) {
			t.Logf("every node applied %d entries up to index %d, hash %s", sts[0].Entries, sts[0].Applied, sts[0].Hash)
			break
		}
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("the nodes did not converge: %+v", sts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestParsePeers(t *testing.T) {
	p, err := parsePeers("1=a:1, 2=b:2")
	if err != nil || len(p) != 2 || p[1] != "a:1" || p[2] != "b:2" {
		t.Fatalf("%v %v", p, err)
	}
	for _, bad := range []string{"", "0=a:1", "x=a:1", "1=", "1=a:1,1=b:2"} {
		if _, err := parsePeers(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
