package measure

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/lab"
)

// TestBenchRaftPlumbing builds the raft peer as exo bench --peer raft does
// (from tools/raftpeer), runs 3 nodes on loopback (no namespaces, no root)
// and drives them with the bench's own client and load generator in the
// three load shapes. It checks counts, never figures.
func TestBenchRaftPlumbing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the raft peer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, cleanup, err := findPeerBin(ctx, "", filepath.Join("..", "tools", "raftpeer"))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if v := peerVersion(ctx, bin); !strings.HasPrefix(v, "go.etcd.io/raft/v3 v3.") {
		t.Fatalf("raftpeer version: %q", v)
	}

	const n = 3
	dir := t.TempDir()
	var addrs, peers []string
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, l.Addr().String())
		l.Close()
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, addrs[i]))
	}
	rc := &raftCluster{rack: &lab.Rack{}, dir: dir}
	for i := range n {
		rc.rack.Hosts = append(rc.rack.Hosts, lab.Host{ID: i, Name: lab.HostName(i)})
		sock := filepath.Join(dir, fmt.Sprintf("raft-%d.sock", i))
		args := []string{"node", "--id", fmt.Sprint(i + 1), "--peers", strings.Join(peers, ","), "--client", "unix:" + sock}
		if i == 0 {
			args = append(args, "--campaign")
		}
		cmd := exec.Command(bin, args...)
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("raft-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
		rc.procs, rc.socks = append(rc.procs, cmd), append(rc.socks, sock)
	}
	defer func() {
		rc.stop()
		for i := range n {
			b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("raft-%d.log", i)))
			t.Logf("node %d:\n%s", i+1, b)
		}
	}()
	if err := rc.waitReady(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if lead, err := rc.leader(); err != nil || lead != 0 {
		t.Fatalf("leader %d, %v: want host A (it campaigned)", lead, err)
	}
	all := []int{0, 1, 2}
	for _, l := range []peerLoad{
		{Hosts: []int{1}, PerHost: 50, Size: 64, Window: 1},                  // (a), at a follower
		{Hosts: all, PerHost: 300, Size: 64, Window: 64},                     // (b)
		{Hosts: all, PerHost: 1000, Size: 64, Window: 8, Batch: 64},          // (c), the last proposal short
		{Hosts: all, PerHost: 10, Size: 64, Window: 512, Batch: 1, Round: 1}, // more window than messages
	} {
		res, err := rc.publish(ctx, l)
		if err != nil {
			t.Fatalf("%+v: %v", l, err)
		}
		want := int64(len(l.Hosts) * l.PerHost)
		proposals := int64(len(l.Hosts) * ((l.PerHost + max(l.Batch, 1) - 1) / max(l.Batch, 1)))
		if res.Published != want || res.Failed != 0 || res.Latency.TotalCount() != proposals {
			t.Errorf("%+v: published %d (want %d), failed %d, %d latency samples (want %d)", l, res.Published, want, res.Failed, res.Latency.TotalCount(), proposals)
		}
		t.Logf("%+v: %.0f msgs/s, p50 %dus", l, res.Rate(), res.Latency.ValueAtQuantile(50))
	}
	if cpu := rc.cpu(); cpu <= 0 {
		t.Errorf("raft CPU %v: /proc/<pid>/stat not read", cpu)
	}
}

func TestFindPeerBinErrors(t *testing.T) {
	ctx := context.Background()
	_, _, err := findPeerBin(ctx, "", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--peer-bin") {
		t.Errorf("no source: %v", err)
	}
	_, _, err = findPeerBin(ctx, filepath.Join(t.TempDir(), "nope"), "")
	if err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Errorf("missing binary: %v", err)
	}
}
