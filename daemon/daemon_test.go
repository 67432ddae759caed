package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/wal"
)

// attach connects a daemon's port to the in-memory segment of the tests
// (the production path's own broadcast.MemNetwork), with a receive queue
// deep enough that bursts are not dropped.
func attach(t testing.TB, seg *broadcast.MemNetwork, mac net.HardwareAddr) broadcast.Conn {
	t.Helper()
	c, err := seg.AttachOptions(mac, broadcast.Options{QueueLen: 1 << 15})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// memOOB connects the daemons' OOB transports in process.
type memOOB struct {
	id  uint8
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

type testRack struct {
	daemons []*Daemon
	sockets []string
	cancel  context.CancelFunc
	done    chan error
	seg     *broadcast.MemNetwork
	key     []byte // the group key in the key file of every host
	roster  []Member
}

// testGroupKey is the group key file's contents of the test racks.
var testGroupKey = []byte("exo daemon test group key, 32 B.")

// writeKey writes a group key file (mode 0600) in dir.
func writeKey(t *testing.T, dir string, key []byte) string {
	t.Helper()
	path := filepath.Join(dir, "group.key")
	if err := os.WriteFile(path, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func startRack(t *testing.T, n int) *testRack { t.Helper(); return startRackHosts(t, n, n) }

// startRackHosts starts n known members of which 0..hosts-1 form the first
// roster (the others start as no members).
func startRackHosts(t *testing.T, n, hosts int) *testRack {
	t.Helper()
	dir := t.TempDir()
	seg := broadcast.NewMemNetwork()
	var roster []Member
	for i := 0; i < n; i++ {
		roster = append(roster, Member{ID: i, MAC: fmt.Sprintf("02:e0:00:00:00:%02x", i+1), OOB: fmt.Sprintf("127.0.0.1:%d", 17700+i)})
	}
	r := &testRack{done: make(chan error, n), seg: seg, key: testGroupKey, roster: roster}
	keyFile := writeKey(t, dir, testGroupKey)
	oobs := make([]*memOOB, n)
	for i := range oobs {
		oobs[i] = &memOOB{id: uint8(i), all: oobs, in: make(chan exo.Message, 4096)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for i := 0; i < n; i++ {
		sock := filepath.Join(dir, fmt.Sprintf("h%d.sock", i))
		cfg := &Config{Group: 7, ID: i, Hosts: hosts, Interface: "mem0", Roster: roster, APISocket: sock, KeyFile: keyFile}
		cfg.defaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		mac, _ := net.ParseMAC(roster[i].MAC)
		d, err := New(cfg, attach(t, seg, mac), oobs[i], testLogger(i))
		if err != nil {
			t.Fatal(err)
		}
		r.daemons = append(r.daemons, d)
		r.sockets = append(r.sockets, sock)
		go func() { r.done <- d.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range r.daemons {
			if err := <-r.done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		}
	})
	for _, s := range r.sockets { // wait for the API sockets
		for k := 0; ; k++ {
			c, err := client.Dial(ctx, s)
			if err == nil {
				c.Close()
				break
			}
			if k > 200 {
				t.Fatalf("daemon socket %s never came up: %v", s, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return r
}

// collect subscribes at every host until want messages arrived at each.
func (r *testRack) collect(t *testing.T, ctx context.Context, want int) [][]client.Message {
	return subscribeAll(t, ctx, r.sockets, want)
}

var errDone = errors.New("done")

func sameStreams(t *testing.T, got [][]client.Message) {
	t.Helper()
	for i := 1; i < len(got); i++ {
		if len(got[i]) != len(got[0]) {
			t.Fatalf("host %d delivered %d messages, host 0 %d", i, len(got[i]), len(got[0]))
		}
		for k := range got[0] {
			a, b := got[0][k], got[i][k]
			if a.Position != b.Position || a.Sender != b.Sender || !bytes.Equal(a.Payload, b.Payload) {
				t.Fatalf("host %d differs from host 0 at message %d: %v vs %v", i, k, b.Position, a.Position)
			}
		}
	}
}

// TestDaemonPublishSubscribe: 5 in-process daemons, every host publishes
// concurrently; every host delivers the same sequence, each message once.
func TestDaemonPublishSubscribe(t *testing.T) {
	const n, per = 5, 400
	r := startRack(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := make(chan [][]client.Message, 1)
	go func() { res <- r.collect(t, ctx, n*per) }()
	var wg sync.WaitGroup
	for i, s := range r.sockets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(ctx, s)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			var acks []<-chan client.Ack
			for k := 0; k < per; k++ {
				ch, err := c.PublishAsync([]byte(fmt.Sprintf("h%d-m%d", i, k)))
				if err != nil {
					t.Error(err)
					return
				}
				acks = append(acks, ch)
			}
			for k, ch := range acks {
				a := <-ch
				if errors.Is(a.Err, client.ErrDropped) {
					// Dropped by a view change before agreement (a
					// starved CI machine times the token out): not
					// delivered, so published again, as clients must.
					a.Err = publishRetrying(ctx, c, []byte(fmt.Sprintf("h%d-m%d", i, k)))
				}
				if a.Err != nil {
					t.Errorf("host %d message %d: %v", i, k, a.Err)
				}
			}
		}()
	}
	wg.Wait()
	got := <-res
	sameStreams(t, got)
	seen := map[string]bool{}
	for _, m := range got[0] {
		if seen[string(m.Payload)] {
			t.Fatalf("%q delivered twice", m.Payload)
		}
		seen[string(m.Payload)] = true
	}
	if len(seen) != n*per {
		t.Fatalf("%d distinct messages, want %d", len(seen), n*per)
	}
}

// TestDaemonLargeMessage: a 1 MiB message published under concurrent load
// arrives whole and in order at every host.
func TestDaemonLargeMessage(t *testing.T) {
	const n = 3
	r := startRack(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	sum := sha256.Sum256(big)
	const small = 200
	res := make(chan [][]client.Message, 1)
	go func() { res <- r.collect(t, ctx, 1+2*small) }()
	var wg sync.WaitGroup
	for i := 1; i < n; i++ { // concurrent small traffic from hosts 1, 2
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(ctx, r.sockets[i])
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for k := 0; k < small; k++ {
				if err := publishRetrying(ctx, c, []byte(fmt.Sprintf("s%d-%d", i, k))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	c, err := client.Dial(ctx, r.sockets[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := publishRetrying(ctx, c, big); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, make([]byte, 1<<20+1)); !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("a message over max_message_bytes: %v, want ErrTooLarge", err)
	}
	wg.Wait()
	got := <-res
	sameStreams(t, got)
	found := 0
	for _, m := range got[0] {
		if len(m.Payload) == len(big) {
			if sha256.Sum256(m.Payload) != sum {
				t.Fatal("the 1 MiB message arrived corrupted")
			}
			found++
		}
	}
	if found != 1 {
		t.Fatalf("the 1 MiB message arrived %d times", found)
	}
}

// TestConfigErrors: a bad config names the field.
func TestConfigErrors(t *testing.T) {
	good := `{"group":1,"id":0,"interface":"exo0","api_socket":"/tmp/x.sock","key_file":"/k","roster":[
		{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:7700"},{"id":1,"mac":"02:00:00:00:00:02","oob":"10.0.0.2:7700"}]}`
	if _, err := ParseConfig([]byte(good)); err != nil {
		t.Fatalf("good config: %v", err)
	}
	// Token mode on the FPGA engine: fpga_token with offload fpga-sim,
	// frames capped at the engine's 4096 bytes as with xdp_token.
	fpgaTok := strings.Replace(good, `"group":1,`, `"group":1,"offload":"fpga-sim","fpga_token":"on","batch_bytes":9000,`, 1)
	if c, err := ParseConfig([]byte(fpgaTok)); err != nil || !c.Token() {
		t.Fatalf("fpga_token config: %v (token mode %v)", err, err == nil && c.Token())
	} else if cc := c.coreConfig(9000); cc.MaxBatchBytes > TokenMaxBatch || cc.IdleRotations != 32 {
		t.Errorf("fpga_token: batch %d (want at most %d), idle rotations %d (want 32)", cc.MaxBatchBytes, TokenMaxBatch, cc.IdleRotations)
	}
	// Retention: sizes and ages parsed, the bytes bound at least two
	// segments.
	ret := strings.Replace(good, `"group":1,`, `"group":1,"data_dir":"/d","segment_bytes":1048576,"retain":{"entries":1000000,"bytes":"2.5MiB","age":"36h"},`, 1)
	if c, err := ParseConfig([]byte(ret)); err != nil || c.Retain.Bytes != 5<<19 || c.Retain.Age != 36*time.Hour || c.Retain.Entries != 1e6 {
		t.Fatalf("retain config: %v %+v", err, c)
	}
	withRet := func(extra string) string { return strings.Replace(good, `"group":1,`, `"group":1,`+extra, 1) }
	// transfer_rate: a default pace, "off", or a rate.
	for _, c := range []struct {
		extra string
		rate  int64
	}{{``, DefaultTransferRate}, {`"transfer_rate":"off",`, 0}, {`"transfer_rate":"200MiB",`, 200 << 20}} {
		cfg, err := ParseConfig([]byte(withRet(c.extra)))
		if err != nil {
			t.Fatalf("config with %s: %v", c.extra, err)
		}
		if cfg.TransferRate != c.rate {
			t.Errorf("config with %s: transfer rate %d, want %d", c.extra, cfg.TransferRate, c.rate)
		}
	}
	// transfer_yield: a default share, "off", or a percentage; the core
	// gets none when transfers are not paced.
	for _, c := range []struct {
		extra       string
		yield, core int
	}{{``, DefaultTransferYield, DefaultTransferYield}, {`"transfer_yield":"off",`, 0, 0},
		{`"transfer_yield":"65%",`, 65, 65}, {`"transfer_yield":"65%","transfer_rate":"off",`, 65, 0}} {
		cfg, err := ParseConfig([]byte(withRet(c.extra)))
		if err != nil {
			t.Fatalf("config with %s: %v", c.extra, err)
		}
		if ec := cfg.coreConfig(1500); cfg.TransferYield != c.yield || ec.TransferYield != c.core || (c.core > 0 && ec.TransferProbeTicks < 4) {
			t.Errorf("config with %s: transfer yield %d (the core's %d, pauses of %d ticks), want %d (%d)", c.extra, cfg.TransferYield, ec.TransferYield, ec.TransferProbeTicks, c.yield, c.core)
		}
	}
	// archive_io: idle unless set to normal.
	for _, c := range []struct {
		extra string
		class wal.IOClass
	}{{``, wal.IOIdle}, {`"archive_io":"normal",`, wal.IONormal}, {`"archive_io":"idle",`, wal.IOIdle}} {
		cfg, err := ParseConfig([]byte(withRet(c.extra)))
		if err != nil {
			t.Fatalf("config with %s: %v", c.extra, err)
		}
		if cfg.ArchiveIO != c.class {
			t.Errorf("config with %s: archive I/O %v, want %v", c.extra, cfg.ArchiveIO, c.class)
		}
		if cfg.HugePages != "off" {
			t.Errorf("config with %s: huge_pages %q, want the default off", c.extra, cfg.HugePages)
		}
	}
	for _, c := range []struct{ json, field string }{
		{withRet(`"archive_io":"realtime",`), `archive_io: "realtime" is not "idle" nor "normal"`},
		{withRet(`"huge_pages":"yes",`), `huge_pages: "yes" is neither on nor off`},
		{withRet(`"retain":{"entries":5},`), "retain: needs data_dir"},
		{withRet(`"data_dir":"/d","retain":{"bytes":"lots"},`), "retain.bytes"},
		{withRet(`"data_dir":"/d","retain":{"bytes":"100MiB"},`), "retain.bytes: 104857600 bytes is under two segments"},
		{withRet(`"data_dir":"/d","retain":{"age":"yesterday"},`), "retain.age"},
		{withRet(`"data_dir":"/d","segment_bytes":4096,`), "segment_bytes"},
		{withRet(`"transfer_rate":"fast",`), "transfer_rate"},
		{withRet(`"transfer_rate":"1KB",`), "transfer_rate"},
		{withRet(`"transfer_yield":"80",`), `transfer_yield: "80" is not a share`},
		{withRet(`"transfer_yield":"100%",`), "transfer_yield"},
		{withRet(`"transfer_yield":"0%",`), "transfer_yield"},
		{withRet(`"enable_pprof":true,`), "enable_pprof: the profiles are served on metrics_addr, which is not set"},
		{`{"group":1,"id":5,"interface":"exo0","api_socket":"/x","key_file":"/k","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "id"},
		{`{"group":1,"id":0,"interface":"","api_socket":"/x","key_file":"/k","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "interface"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","roster":[{"id":0,"mac":"zz","oob":"10.0.0.1:1"}]}`, "roster[0].mac"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"nope"}]}`, "roster[0].oob"},
		{`{"group":1,"id":1,"interface":"e","api_socket":"/x","key_file":"/k","roster":[{"id":1,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "member id 0 of the first roster"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"},{"id":0,"mac":"02:00:00:00:00:02","oob":"10.0.0.1:2"}]}`, "roster[1].id"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"},{"id":255,"mac":"02:00:00:00:00:02","oob":"10.0.0.1:2"}]}`, "roster[1].id"},
		{`{"group":1,"id":0,"hosts":3,"interface":"e","api_socket":"/x","key_file":"/k","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "hosts"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","offload":"magic","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "offload"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","tick":"forever","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "tick"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","key_phase":2,"roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "key_phase"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","next_key_file":"/k","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "next_key_file"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","key_grace":"-1s","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "key_grace"},
		{`{"group":1,"colour":"red"}`, "colour"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","fpga_token":"on","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, `fpga_token: on needs offload "fpga-sim"`},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","offload":"xdp","fpga_token":"on","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, `fpga_token: on needs offload "fpga-sim" (offload is "xdp")`},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","offload":"fpga-sim","fpga_token":"yes","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "fpga_token"},
		{`{"group":1,"id":0,"interface":"e","api_socket":"/x","key_file":"/k","offload":"fpga-sim","xdp_token":"on","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"10.0.0.1:1"}]}`, "xdp_token"},
	} {
		_, err := ParseConfig([]byte(c.json))
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.field)) {
			t.Errorf("config %s: error %v does not name %q", c.json, err, c.field)
		}
	}
}

// TestFrameKey pins the derivation down: the first 16 bytes of
// HMAC-SHA256(group key, "exo frame tag v1") (known answers computed
// apart, with Python's hmac).
func TestFrameKey(t *testing.T) {
	for _, c := range []struct {
		key  []byte
		want string
	}{
		{[]byte("0123456789abcdef0123456789abcdef"), "74d0a2805b1e6a55bf8433dd79790b16"},
		{func() []byte {
			b := make([]byte, 32)
			for i := range b {
				b[i] = byte(i)
			}
			return b
		}(), "a40936947f3268a9dc8bde4af6714c06"},
	} {
		if k := FrameKey(c.key); fmt.Sprintf("%x", k) != c.want {
			t.Errorf("FrameKey(%q) = %x, want %s", c.key, k, c.want)
		}
	}
}

// TestNewNeedsKeyFile: New reads the key file (the frame key comes from
// it) and refuses a missing, short or world-readable one.
func TestNewNeedsKeyFile(t *testing.T) {
	dir := t.TempDir()
	roster := []Member{{ID: 0, MAC: "02:e0:00:00:00:01", OOB: "127.0.0.1:17799"}}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open.key")
	if err := os.WriteFile(open, testGroupKey, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kf := range []string{filepath.Join(dir, "missing.key"), short, open} {
		cfg := &Config{Group: 7, ID: 0, Interface: "mem0", Roster: roster, APISocket: filepath.Join(dir, "x.sock"), KeyFile: kf}
		cfg.defaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		mac, _ := net.ParseMAC(roster[0].MAC)
		seg := broadcast.NewMemNetwork()
		if _, err := New(cfg, attach(t, seg, mac), &memOOB{all: []*memOOB{{}}}, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("key file %s: New = %v, want a config error", filepath.Base(kf), err)
		}
	}
}

// TestDaemonFramesSealed: the frames a daemon sends carry their tag under
// FrameKey(the key file's contents); a forged copy sent from the sender's
// own MAC reaches the core and is counted as BAD_TAG.
func TestDaemonFramesSealed(t *testing.T) {
	r := startRack(t, 3)
	mac0, _ := net.ParseMAC(r.roster[0].MAC)
	sniff := attach(t, r.seg, mac0) // on the segment with host 0's MAC
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, r.sockets[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A reconciliation may drop an entry before it is agreed (a takeover
	// on a loaded machine): the client is told to publish again.
	for {
		_, err := c.Publish(ctx, []byte("sealed"))
		if err == nil {
			break
		}
		if !errors.Is(err, client.ErrDropped) {
			t.Fatal(err)
		}
	}
	key := FrameKey(r.key)
	var genuine []byte
	buf := make([]byte, 2048)
	for genuine == nil {
		n, src, err := sniff.ReadFrame(buf)
		if err != nil {
			t.Fatal(err)
		}
		var f exo.Frame
		if err := f.UnmarshalBinary(buf[:n]); err != nil {
			t.Fatalf("a daemon sent an undecodable frame: %v", err)
		}
		if !exo.VerifyTag(buf[:n], key) {
			t.Fatalf("frame seq %d from %s is not sealed under the frame key", f.Seq, src)
		}
		if exo.VerifyTag(buf[:n], [exo.TagKeyLen]byte{}) || exo.VerifyTag(buf[:n], [exo.TagKeyLen]byte(r.key[:16])) {
			t.Fatal("the frame verifies under a key it was not sealed under")
		}
		if f.Sender == 0 && f.Count > 0 {
			genuine = append([]byte(nil), buf[:n]...)
		}
	}
	forged := append([]byte(nil), genuine...)
	forged[exo.OffTag+7] ^= 1
	before := r.daemons[1].metrics.counters()["rejects.BAD_TAG"]
	for k := 0; ; k++ {
		if err := sniff.WriteFrame(forged); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if r.daemons[1].metrics.counters()["rejects.BAD_TAG"] > before {
			break
		}
		if k > 100 {
			t.Fatal("the forged frame was never counted as BAD_TAG")
		}
	}
}

// TestNextKeyFile: a next_key_file readable by others is refused with the
// field named; a good one is staged at start, and a one-host rack (no other
// member to wait for) switches to it at once; the API's stage and retire
// answer with clear errors.
func TestNextKeyFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "next.bad")
	if err := os.WriteFile(bad, []byte("0123456789abcdef0123456789abcdef"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "next.key")
	if err := os.WriteFile(good, []byte("the next key, 32 bytes long....."), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "group.key")
	if err := os.WriteFile(keyFile, []byte("fuzz group key, 32 bytes long..."), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Group: 7, ID: 0, Interface: "mem0", APISocket: filepath.Join(dir, "s"), KeyFile: keyFile, NextKeyFile: bad,
		Roster: []Member{{ID: 0, MAC: "02:e0:00:00:00:01", OOB: "127.0.0.1:17700"}}}
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC(cfg.Roster[0].MAC)
	oob := &memOOB{id: 0, in: make(chan exo.Message, 16)}
	oob.all = []*memOOB{oob}
	if _, err := New(cfg, attach(t, broadcast.NewMemNetwork(), mac), oob, nil); err == nil || !strings.Contains(err.Error(), "next_key_file") {
		t.Fatalf("next_key_file of mode 0644: %v, want an error naming next_key_file", err)
	}

	d, sock := startOne(t, func(c *Config) { c.NextKeyFile = good })
	var ks *KeyStatus
	for k := 0; ; k++ {
		var st Status
		if err := json.Unmarshal(d.StatusJSON(), &st); err != nil {
			t.Fatal(err)
		}
		ks = st.Keys
		if ks.SendPhase == 1 && !ks.Staged {
			break
		}
		if k > 200 {
			t.Fatalf("a one-host rack did not switch to its next key: %+v", ks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ks.Slots[1] == nil || ks.Slots[1].File != good || ks.Slots[1].Fingerprint != fmt.Sprintf("%016x", exo.KeyFingerprint(FrameKey([]byte("the next key, 32 bytes long.....")))) {
		t.Fatalf("slot 1: %+v", ks.Slots[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.StageKey(ctx, bad); err == nil || !strings.Contains(err.Error(), "readable by group or others") {
		t.Fatalf("stage of a 0644 file: %v", err)
	}
	if err := c.StageKey(ctx, good); err == nil || !strings.Contains(err.Error(), "key in use") {
		t.Fatalf("stage of the key in use: %v", err)
	}
	if err := c.RetireKey(ctx); err != nil {
		t.Fatalf("retire the old key: %v", err)
	}
	if err := c.RetireKey(ctx); err == nil || !strings.Contains(err.Error(), "no key to retire") {
		t.Fatalf("retire with the other slot empty: %v", err)
	}
}

func testLogger(i int) *slog.Logger {
	if os.Getenv("EXO_DAEMON_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil)).With("host", i)
}

// publishRetrying publishes p, again while the daemon answers that its
// queue is full or that a reconciliation dropped it before agreement (the
// client's documented contract: such a message was not delivered; a
// starved CI machine makes token timeouts, and so view changes, happen on
// the in-memory network too).
func publishRetrying(ctx context.Context, c *client.Client, p []byte) error {
	for {
		_, err := c.Publish(ctx, p)
		if !retriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("publish retried until the deadline: %w", err)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestNewTakesConfigKey: a daemon given the key file's bytes (Config.Key,
// as daemon/host passes them after its one read of the file) does not
// read the file again; without them it reads the file, and says which.
func TestNewTakesConfigKey(t *testing.T) {
	dir := t.TempDir()
	seg := broadcast.NewMemNetwork()
	roster := []Member{{ID: 0, MAC: "02:e0:00:00:00:01", OOB: "127.0.0.1:17790"}}
	absent := filepath.Join(dir, "absent.key")
	cfg := &Config{Group: 7, ID: 0, Hosts: 1, Interface: "mem0", Roster: roster, APISocket: filepath.Join(dir, "s"), KeyFile: absent}
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC(roster[0].MAC)
	oobs := []*memOOB{{id: 0, in: make(chan exo.Message, 16)}}
	oobs[0].all = oobs
	if _, err := New(cfg, attach(t, seg, mac), oobs[0], nil); err == nil || !strings.Contains(err.Error(), "absent.key") {
		t.Fatalf("New with a missing key file and no Key: %v, want an error naming the file", err)
	}
	cfg.Key = testGroupKey
	if _, err := New(cfg, attach(t, seg, mac), oobs[0], nil); err != nil {
		t.Fatalf("New with Key and a missing key file: %v", err)
	}
}
