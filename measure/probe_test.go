package measure

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/exo-rack/exo/lab"
)

// TestEndpointLoopback runs the TCP and UDP ends of a probe against each
// other on loopback (no namespaces, no root) and checks the counts.
func TestEndpointLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, proto := range []string{"tcp", "udp"} {
		// A free port: listen, note it, close.
		var addr string
		if proto == "tcp" {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr = l.Addr().String()
			l.Close()
		} else {
			c, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr = c.LocalAddr().String()
			c.Close()
		}
		srvDone := make(chan error, 1)
		srvCtx, stop := context.WithCancel(ctx)
		go func() {
			_, err := Endpoint(srvCtx, EndpointOptions{Mode: proto + "-server", Addr: addr, Duration: 20 * time.Second})
			srvDone <- err
		}()
		res, err := Endpoint(ctx, EndpointOptions{Mode: proto + "-client", Addr: addr, Count: 100, Warmup: 5, Duration: 20 * time.Second})
		stop()
		if err != nil {
			t.Fatalf("%s client: %v", proto, err)
		}
		if err := <-srvDone; err != nil {
			t.Errorf("%s server: %v", proto, err)
		}
		if res.Messages+res.Lost != 100 || int64(len(res.RTTns)) != res.Messages || res.Messages == 0 || res.Seconds <= 0 {
			t.Errorf("%s: %d round trips, %d lost, %d samples, %.3fs: want 100 in all", proto, res.Messages, res.Lost, len(res.RTTns), res.Seconds)
		}
	}
	if _, err := Endpoint(ctx, EndpointOptions{Mode: "carrier-pigeon", Duration: time.Second}); err == nil {
		t.Error("an unknown mode: no error")
	}
}

func TestLastAddr(t *testing.T) {
	r := &lab.Rack{Subnet: netip.MustParsePrefix("10.77.0.0/16")}
	if got := lastAddr(r); got != "10.77.255.255" {
		t.Errorf("broadcast of 10.77.0.0/16: %s", got)
	}
}

func TestProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := procCPU("self"); err != nil {
		t.Error(err)
	}
	if _, err := machineBusy(); err != nil {
		t.Error(err)
	}
}

// TestProbeLab runs exo probe on a small lab rack and checks the JSON and
// the plot.
func TestProbeLab(t *testing.T) {
	if testing.Short() {
		t.Skip("short: skipping the lab probe")
	}
	if err := lab.CheckRoot(); err != nil {
		t.Skip("exo probe needs root (network namespaces, raw sockets): skipping")
	}
	const prefix = "exoprobet"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := lab.Up(ctx, lab.Options{Prefix: prefix, Hosts: 3, Force: true}); err != nil {
		t.Skipf("cannot build a lab rack here: %v", err)
	}
	lab.Down(ctx, prefix)

	dir := t.TempDir()
	bin := filepath.Join(dir, "exo")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/exo").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "probe", "--hosts", "3", "--count", "200", "--json", "--out", dir, "--prefix", prefix)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exo probe: %v\n%s", err, stderr.String())
	}
	var rep ProbeReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, stdout.String())
	}
	want := []string{"TCP", "UDP", "UDP broadcast", "raw frames", "Exo agreement"}
	got := map[string]ProbePath{}
	for _, p := range rep.Paths {
		got[p.Name] = p
	}
	for _, name := range want {
		p, ok := got[name]
		if !ok {
			t.Errorf("path %q missing from the report", name)
			continue
		}
		if p.OneWayP50 <= 0 || p.Samples <= 0 || p.MsgsPerSec <= 0 {
			t.Errorf("%s: p50 %.1fus, %d samples, %.0f msgs/s: want all > 0", name, p.OneWayP50, p.Samples, p.MsgsPerSec)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "probe.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("probe.png is not a PNG (starts %q)", b[:min(len(b), 8)])
	}
	if rep.Plot != filepath.Join(dir, "probe.png") {
		t.Errorf("report plot %q", rep.Plot)
	}
}
