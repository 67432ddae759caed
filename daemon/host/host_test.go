package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/driver/xdp"
	"github.com/exo-rack/exo/lab"
)

// The tests that open a host run it in a network namespace of their own,
// exohost-<pid>-<n>, on one end of a veth pair (exo0, its peer exo1), with
// lo up for the OOB listener; the namespace is deleted on cleanup. No
// frame leaves it. They need root and skip, saying why, without it or
// when the kernel refuses a namespace or the XDP program.

const testMAC = "02:e0:00:00:00:01"

var nsSeq atomic.Int32

// testNetns creates the namespace and its veth pair, both ends up.
func testNetns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("host test skipped: needs root (a network namespace, a raw AF_PACKET socket); run as root, CI does")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the host tests need iproute2's ip: %v", err)
	}
	ns := fmt.Sprintf("exohost-%d-%d", os.Getpid(), nsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("host test skipped: the kernel refused a network namespace: ip netns add %s: %v: %s", ns, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("cleanup: ip netns del %s: %v: %s", ns, err, out)
		}
	})
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "exo0", "mtu", "1500", "type", "veth", "peer", "name", "exo1", "mtu", "1500"},
		{"link", "set", "exo0", "address", testMAC, "up"},
		{"link", "set", "exo1", "up"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip -n %s %s: %v: %s", ns, strings.Join(args, " "), err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, dev := range []string{"exo0", "exo1"} {
		if err := lab.WaitOperUp(ctx, ns, dev); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// requireXDP skips, saying why, when this kernel cannot load the XDP
// program.
func requireXDP(t *testing.T) {
	t.Helper()
	p, err := xdp.Load()
	if err != nil {
		t.Skipf("XDP test skipped: the kernel refused the XDP program: %v", err)
	}
	p.Close()
}

// testConfig is a one-host rack on exo0 with its key and API socket in a
// temporary directory, its OOB listener on oobAddr; edit may change the
// JSON before it is parsed (defaults, validation).
func testConfig(t *testing.T, oobAddr string, edit func(map[string]any)) (*daemon.Config, []byte) {
	t.Helper()
	// A short path: Unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "exohost")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	key := []byte("host test group key, 32 bytes..")
	keyFile := filepath.Join(dir, "group.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{
		"group": 7, "id": 0, "interface": "exo0", "key_file": keyFile,
		"api_socket": filepath.Join(dir, "api.sock"),
		"roster":     []map[string]any{{"id": 0, "mac": testMAC, "oob": oobAddr}},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := daemon.ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, key
}

// logBuf collects a host's log lines for the checks and the test log.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLog(t *testing.T) (*slog.Logger, *logBuf) {
	lb := &logBuf{}
	t.Cleanup(func() { t.Logf("host log:\n%s", lb) })
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// openIn opens the host of cfg in namespace ns.
func openIn(ns string, cfg *daemon.Config, log *slog.Logger) (*Host, error) {
	var h *Host
	err := lab.InNetns(ns, func() (err error) {
		h, err = Open(cfg, log)
		return err
	})
	return h, err
}

// status is the daemon's status reply, the parts these tests read.
type status struct {
	Offload *daemon.OffloadStatus `json:"offload"`
}

func statusOf(t *testing.T, h *Host) status {
	t.Helper()
	var st status
	if err := json.Unmarshal(h.Daemon().StatusJSON(), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// xdpOn returns what `ip link` says of an XDP program on ns's exo0 ("" for
// none).
func xdpOn(t *testing.T, ns string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-d", "link", "show", "dev", "exo0").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s link show exo0: %v: %s", ns, err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "xdp") {
			return f
		}
	}
	return ""
}

// runHost runs h, publishes one message through the daemon and waits for
// its agreement, then stops h and checks that Run returned nil.
func runHost(t *testing.T, h *Host) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	acked := make(chan client.Ack, 1)
	h.Daemon().Publish([]byte("hello from the host test"), func(a client.Ack) { acked <- a })
	select {
	case a := <-acked:
		if a.Err != nil {
			t.Errorf("publish: %v", a.Err)
		}
	case err := <-done:
		cancel()
		t.Fatalf("Run returned before the publish was agreed: %v", err)
	case <-time.After(10 * time.Second):
		t.Errorf("publish: no answer in 10s")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return 10s after its context ended")
	}
	if err := h.Run(context.Background()); !errors.Is(err, errSpent) {
		t.Errorf("a second Run: %v, want %v", err, errSpent)
	}
}

// oobFree fails the test unless addr (in ns) can be listened on: the
// host released its OOB listener.
func oobFree(t *testing.T, ns, addr string) {
	t.Helper()
	err := lab.InNetns(ns, func() error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		return ln.Close()
	})
	if err != nil {
		t.Fatalf("the OOB listener was not released: %v", err)
	}
}

// TestOwnOOB: the OOB listen address is this host's roster entry, found
// by member id, not by position (a roster need not list ids in order).
func TestOwnOOB(t *testing.T) {
	cfg := &daemon.Config{ID: 4, Roster: []daemon.Member{
		{ID: 1, OOB: "10.0.0.2:7700"}, {ID: 0, OOB: "10.0.0.1:7700"}, {ID: 4, OOB: "10.0.0.5:7700"}}}
	if got := ownOOB(cfg); got != "10.0.0.5:7700" {
		t.Errorf("ownOOB = %q, want 10.0.0.5:7700", got)
	}
}

// TestOpenInterfaceNotFound: a config whose interface is not in this
// namespace fails with the hint that says where to look.
func TestOpenInterfaceNotFound(t *testing.T) {
	cfg, _ := testConfig(t, "127.0.0.1:0", func(m map[string]any) { m["interface"] = "exo-nosuch0" })
	_, err := Open(cfg, nil)
	if !errors.Is(err, broadcast.ErrInterfaceNotFound) {
		t.Fatalf("Open: %v, want broadcast.ErrInterfaceNotFound", err)
	}
	if want := `check "interface" in the config, or run the daemon in the host's network namespace (ip netns exec ...)`; !strings.Contains(err.Error(), want) {
		t.Errorf("Open: %v: the hint %q is missing", err, want)
	}
}

// TestOpenPermission: without CAP_NET_RAW the error says which socket
// needed it.
func TestOpenPermission(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as a user without CAP_NET_RAW (root has it)")
	}
	cfg, _ := testConfig(t, "127.0.0.1:0", func(m map[string]any) { m["interface"] = "lo" })
	_, err := Open(cfg, nil)
	if !errors.Is(err, broadcast.ErrPermission) || !strings.Contains(err.Error(), "(the daemon opens a raw AF_PACKET socket)") {
		t.Fatalf("Open: %v, want broadcast.ErrPermission with the AF_PACKET hint", err)
	}
}

// TestHostSoftware: a one-host rack without a fast path agrees a message,
// stops cleanly, and the status shows no offload.
func TestHostSoftware(t *testing.T) {
	ns := testNetns(t)
	cfg, _ := testConfig(t, "127.0.0.1:0", nil)
	log, _ := newLog(t)
	h, err := openIn(ns, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, h); st.Offload != nil {
		t.Errorf("offload software, the status shows a fast path: %+v", st.Offload)
	}
	runHost(t, h)
}

// TestHostXDP: offload xdp loads the program, the daemon writes it its
// state, it is attached (generic mode on a veth, with the log line that
// says why) while the daemon runs, and it is detached when Run returns.
func TestHostXDP(t *testing.T) {
	ns := testNetns(t)
	requireXDP(t)
	cfg, _ := testConfig(t, "127.0.0.1:0", func(m map[string]any) { m["offload"] = "xdp" })
	log, lb := newLog(t)
	h, err := openIn(ns, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	st := statusOf(t, h)
	if st.Offload == nil || st.Offload.Mode != "xdp" || st.Offload.Pushes == 0 {
		t.Fatalf("status offload %+v, want mode xdp with its state written", st.Offload)
	}
	if got := xdpOn(t, ns); got != "xdpgeneric" {
		t.Errorf("exo0 shows %q after Open, want xdpgeneric (generic mode on a veth)", got)
	}
	for _, line := range []string{"XDP on a veth: generic (skb) mode", "XDP attached"} {
		if !strings.Contains(lb.String(), line) {
			t.Errorf("no log line %q", line)
		}
	}
	runHost(t, h)
	if got := xdpOn(t, ns); got != "" {
		t.Errorf("exo0 still shows %q after Run returned: the program was not detached", got)
	}
}

// TestHostAFXDP: offload xdp with xdp_delivery afxdp runs the daemon on
// the AF_XDP sockets of the program, attached, and detaches it after the
// sockets closed.
func TestHostAFXDP(t *testing.T) {
	ns := testNetns(t)
	requireXDP(t)
	cfg, _ := testConfig(t, "127.0.0.1:0", func(m map[string]any) { m["offload"], m["xdp_delivery"] = "xdp", "afxdp" })
	log, _ := newLog(t)
	h, err := openIn(ns, cfg, log)
	if err != nil {
		if strings.Contains(err.Error(), "AF_XDP") {
			t.Skipf("AF_XDP test skipped: the kernel refused AF_XDP sockets: %v", err)
		}
		t.Fatal(err)
	}
	if _, ok := h.conn.(*xdp.XSKConn); !ok {
		t.Fatalf("the daemon's conn is a %T, want the AF_XDP sockets (*xdp.XSKConn)", h.conn)
	}
	if st := statusOf(t, h); st.Offload == nil || st.Offload.Mode != "xdp" {
		t.Fatalf("status offload %+v, want mode xdp", st.Offload)
	}
	if got := xdpOn(t, ns); got == "" {
		t.Error("exo0 shows no XDP program after Open")
	}
	runHost(t, h)
	if got := xdpOn(t, ns); got != "" {
		t.Errorf("exo0 still shows %q after Run returned: the program was not detached", got)
	}
}

// TestOpenFailReleases: an Open that fails after the daemon was made (an
// offload no build knows) closes the socket and the OOB listener: a second
// Open on the same interface and address succeeds.
func TestOpenFailReleases(t *testing.T) {
	ns := testNetns(t)
	cfg, _ := testConfig(t, "127.0.0.1:17931", nil)
	cfg.Offload = "bogus" // past Validate: setupOffload's own check
	_, err := openIn(ns, cfg, nil)
	if err == nil || err.Error() != `offload "bogus": unknown (software, xdp, auto, fpga-sim)` {
		t.Fatalf("Open: %v, want the unknown-offload error", err)
	}
	oobFree(t, ns, "127.0.0.1:17931")
	cfg.Offload = "software"
	h, err := openIn(ns, cfg, nil)
	if err != nil {
		t.Fatalf("Open after a failed Open: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHostClose: a Host that is opened and closed without running
// releases the socket, the fast path and the OOB listener, and does not
// run after.
func TestHostClose(t *testing.T) {
	ns := testNetns(t)
	requireXDP(t)
	cfg, _ := testConfig(t, "127.0.0.1:17932", func(m map[string]any) { m["offload"] = "xdp" })
	h, err := openIn(ns, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := xdpOn(t, ns); got != "" {
		t.Errorf("exo0 still shows %q after Close", got)
	}
	oobFree(t, ns, "127.0.0.1:17932")
	if err := h.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if err := h.Run(context.Background()); !errors.Is(err, errSpent) {
		t.Errorf("Run after Close: %v, want %v", err, errSpent)
	}
}
