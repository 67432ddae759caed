package measure

// exo bench --peer raft: etcd raft (go.etcd.io/raft/v3) as 5 (or --hosts)
// real processes, one per lab host namespace, measured in the same run as
// the daemons with the same 64-byte messages and load shapes.
//
// The peer is tools/raftpeer, its own Go module, so that exo does not depend
// on raft: this file only builds or finds its binary, starts it inside the
// namespaces and speaks its client protocol (a Unix socket per node; see
// tools/raftpeer/client.go, whose frame format is repeated here).

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/lab"
)

// peerModule is the module path of the raft peer (tools/raftpeer/go.mod).
const peerModule = "github.com/exo-rack/exo/tools/raftpeer"

// peerPort is the raft peers' TCP port on every host's OOB address.
const peerPort = 7400

// exoCMeasures says what exo's figure in shape (c) is.
func exoCMeasures(exo AgreementFigures) string {
	if exo.ClientBatchedRate > 0 {
		return fmt.Sprintf("agreed_msgs_per_sec_client_batched: %d messages per publish call (one PublishBatch request), 512 messages in flight per host", exo.ClientBatch)
	}
	return "agreed_msgs_per_sec_batched: one message per publish call, 512 publishes in flight per host, the daemons pack messages into frames (no client-batched run in this report)"
}

// RaftFigures are the raft peer's measurements (medians over the rounds).
type RaftFigures struct {
	Impl      string `json:"implementation"`
	Transport string `json:"transport"`
	Rounds    int    `json:"rounds"`
	// (a): one proposal of one 64-byte message in flight, proposed at the
	// leader (raft's best case) and, separately, at a follower (forwarded
	// to the leader; answered when the follower has applied it).
	LeaderHost    string  `json:"leader_host"`
	P50us         float64 `json:"commit_p50_us"`
	P99us         float64 `json:"commit_p99_us"`
	P999us        float64 `json:"commit_p999_us"`
	FollowerHost  string  `json:"follower_host"`
	FollowerP50us float64 `json:"follower_commit_p50_us"`
	FollowerP99us float64 `json:"follower_commit_p99_us"`
	// (b): one message per proposal from every host, 64 proposals in
	// flight per host (exo's unbatched load shape).
	Rate64         float64 `json:"committed_msgs_per_sec_1_per_proposal_64_in_flight"`
	CPUusPerMsg64  float64 `json:"raft_cpu_us_per_msg_1_per_proposal_64_in_flight"`
	MachineCPU64   float64 `json:"machine_cpu_us_per_msg_1_per_proposal_64_in_flight"`
	Rate512        float64 `json:"committed_msgs_per_sec_1_per_proposal_512_in_flight"`
	CPUusPerMsg512 float64 `json:"raft_cpu_us_per_msg_1_per_proposal_512_in_flight"`
	MachineCPU512  float64 `json:"machine_cpu_us_per_msg_1_per_proposal_512_in_flight"`
	// (c): BatchMessages messages per proposal, 512 messages in flight per
	// host (512/BatchMessages proposals).
	BatchMessages    int     `json:"messages_per_proposal_batched"`
	BatchedRate      float64 `json:"committed_msgs_per_sec_batched"`
	CPUusPerMsgBatch float64 `json:"raft_cpu_us_per_msg_batched"`
	MachineCPUBatch  float64 `json:"machine_cpu_us_per_msg_batched"`
}

// RaftRatios compare exo (the first offload mode) with raft in the same
// run: for latency exo over raft (< 1: exo is faster), for rates exo over
// raft (> 1: exo is faster).
type RaftRatios struct {
	P50 float64 `json:"agreement_p50_exo_over_raft"`
	P99 float64 `json:"agreement_p99_exo_over_raft"`
	// (b): exo's unbatched run (one message per publish and per frame, 64
	// in flight per host) against raft with one message per proposal and
	// 64 in flight per host.
	Rate64 float64 `json:"msgs_per_sec_b_exo_over_raft"`
	// (b) with 512 in flight per host: exo's batched run (one message per
	// publish, the daemons pack frames) against raft with one message per
	// proposal and 512 in flight per host.
	Rate512 float64 `json:"msgs_per_sec_b512_exo_over_raft"`
	// (c): exo's figure named by ExoC against raft's batched proposals.
	Batched float64 `json:"msgs_per_sec_c_exo_over_raft"`
	ExoC    string  `json:"exo_c_measures"`
}

// findPeerBin returns the raft peer's binary: --peer-bin, or one built with
// go build from the module's source (--peer-src, or tools/raftpeer in the
// working directory or next to the exo binary's checkout). cleanup removes
// what it built.
func findPeerBin(ctx context.Context, peerBin, peerSrc string) (bin string, cleanup func(), err error) {
	cleanup = func() {}
	if peerBin != "" {
		st, err := os.Stat(peerBin)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", cleanup, fmt.Errorf("--peer-bin %s: not an executable file", peerBin)
		}
		bin, err := filepath.Abs(peerBin)
		return bin, cleanup, err
	}
	var cands []string
	if peerSrc != "" {
		cands = []string{peerSrc}
	} else {
		cands = append(cands, filepath.Join("tools", "raftpeer"))
		if exe, err := os.Executable(); err == nil {
			d := filepath.Dir(exe)
			// bin/exo in a checkout (tools/test.sh builds it there), or
			// exo at the checkout's root.
			cands = append(cands, filepath.Join(d, "..", "tools", "raftpeer"), filepath.Join(d, "tools", "raftpeer"))
		}
	}
	src := ""
	for _, c := range cands {
		b, err := os.ReadFile(filepath.Join(c, "go.mod"))
		if err == nil && strings.Contains(string(b), "module "+peerModule+"\n") {
			src = c
			break
		}
	}
	const howto = "pass --peer-bin PATH to a built raftpeer (cd tools/raftpeer && go build -o /tmp/raftpeer .), or run exo bench from an exo checkout (or give --peer-src DIR) with go installed"
	if src == "" {
		return "", cleanup, fmt.Errorf("--peer raft: no raftpeer source found (looked for the module %s in %s): %s", peerModule, strings.Join(cands, ", "), howto)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		if _, e := os.Stat("/usr/local/go/bin/go"); e == nil {
			gobin, err = "/usr/local/go/bin/go", nil
		}
	}
	if err != nil {
		return "", cleanup, fmt.Errorf("--peer raft: raftpeer source in %s but no go command to build it: %s", src, howto)
	}
	dir, err := os.MkdirTemp("", "exo-raftpeer-")
	if err != nil {
		return "", cleanup, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "raftpeer")
	cmd := exec.CommandContext(ctx, gobin, "build", "-buildvcs=false", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", func() {}, fmt.Errorf("--peer raft: go build in %s: %v: %s\n(offline, the module cache needs the peer's modules: cd %s && go mod download; or %s)",
			src, err, strings.TrimSpace(string(out)), src, howto)
	}
	return bin, cleanup, nil
}

// peerVersion asks the binary which raft it was built with.
func peerVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "go.etcd.io/raft/v3 (version unknown)"
	}
	return strings.TrimSpace(string(out))
}

// raftCluster is one raftpeer process per host of the rack.
type raftCluster struct {
	rack  *lab.Rack
	dir   string
	procs []*exec.Cmd
	socks []string
	cls   []*peerClient
}

func startRaft(ctx context.Context, rack *lab.Rack, bin, dir string) (*raftCluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rc := &raftCluster{rack: rack, dir: dir}
	var peers []string
	for _, h := range rack.Hosts {
		peers = append(peers, fmt.Sprintf("%d=%s", h.ID+1, net.JoinHostPort(h.OOBAddr.String(), strconv.Itoa(peerPort))))
	}
	for _, h := range rack.Hosts {
		sock := filepath.Join(dir, fmt.Sprintf("raft-%s.sock", h.Name))
		args := []string{"node", "--id", strconv.Itoa(h.ID + 1), "--peers", strings.Join(peers, ","), "--client", "unix:" + sock}
		if h.ID == 0 {
			args = append(args, "--campaign") // host A leads
		}
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("raft-%s.log", h.Name)))
		if err != nil {
			rc.stop()
			return nil, err
		}
		cmd := rack.Command(h.ID, bin, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		err = cmd.Start()
		logf.Close()
		if err != nil {
			rc.stop()
			return nil, err
		}
		rc.procs, rc.socks = append(rc.procs, cmd), append(rc.socks, sock)
	}
	if err := rc.waitReady(ctx, 20*time.Second); err != nil {
		rc.stop()
		return nil, fmt.Errorf("raft peers (logs in %s): %w", dir, err)
	}
	return rc, nil
}

// waitReady connects to every node and waits until all know the same
// leader, have every peer connection up and have applied the leader's
// first entry.
func (rc *raftCluster) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	n := len(rc.socks)
	for i, s := range rc.socks {
		for {
			c, err := dialPeer(s)
			if err == nil {
				rc.cls = append(rc.cls, c)
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("node %s: %w", rc.rack.Hosts[i].Name, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var last []peerStatus
	for {
		last = last[:0]
		ok := true
		for _, c := range rc.cls {
			st, err := c.status()
			if err != nil {
				return err
			}
			last = append(last, st)
			if st.Leader == 0 || st.Leader != last[0].Leader || st.PeersConnected != n-1 || st.Applied < uint64(n)+1 {
				ok = false
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not ready after %v: %+v", d, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leader returns the host id of the leader.
func (rc *raftCluster) leader() (int, error) {
	st, err := rc.cls[0].status()
	if err != nil {
		return 0, err
	}
	if st.Leader == 0 || int(st.Leader) > len(rc.cls) {
		return 0, fmt.Errorf("no leader known")
	}
	return int(st.Leader) - 1, nil
}

func (rc *raftCluster) stop() {
	for _, c := range rc.cls {
		c.close()
	}
	for _, p := range rc.procs {
		p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range rc.procs {
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
}

// cpu is the CPU time all raftpeer processes used so far. `ip netns exec`
// execs the program, so each command's pid is the raftpeer's.
func (rc *raftCluster) cpu() time.Duration {
	var total time.Duration
	for _, p := range rc.procs {
		if t, err := procCPU(strconv.Itoa(p.Process.Pid)); err == nil {
			total += t
		}
	}
	return total
}

// peerLoad is a load on the raft peers, shaped as cluster.Load.
type peerLoad struct {
	Hosts   []int
	PerHost int // messages per host
	Size    int // bytes per message
	Window  int // proposals in flight per host
	Batch   int // messages per proposal (default 1)
	Round   int
}

// publish runs the load like cluster.Publish: one goroutine per proposal,
// at most Window in flight per host, a dropped proposal retried. The
// result counts messages; the latency histogram has one sample per
// proposal (propose -> committed and applied at the proposing node).
func (rc *raftCluster) publish(ctx context.Context, l peerLoad) (cluster.LoadResult, error) {
	l.Batch = max(l.Batch, 1)
	res := cluster.LoadResult{Latency: hdrhistogram.New(1, 60_000_000, 3)}
	var mu sync.Mutex
	var done, failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, len(l.Hosts))
	for _, h := range l.Hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := rc.cls[h]
			sem := make(chan struct{}, l.Window)
			var inner sync.WaitGroup
			for k := 0; k < l.PerHost && ctx.Err() == nil; k += l.Batch {
				count := min(l.Batch, l.PerHost-k)
				payload := make([]byte, 0, count*l.Size)
				for j := range count {
					payload = append(payload, cluster.Payload(l.Round, h, k+j, l.Size)...)
				}
				sem <- struct{}{}
				inner.Add(1)
				go func() {
					defer inner.Done()
					defer func() { <-sem }()
					for attempt := 0; ctx.Err() == nil; attempt++ {
						t0 := time.Now()
						var r peerReply
						select {
						case r = <-cl.propose(payload):
						case <-ctx.Done():
							return
						}
						if errors.Is(r.err, errPeerDropped) {
							time.Sleep(time.Duration(1+attempt%8) * time.Millisecond)
							continue
						}
						if r.err != nil {
							failed.Add(int64(count))
							mu.Lock()
							if len(res.Errors) < 10 {
								res.Errors = append(res.Errors, r.err.Error())
							}
							mu.Unlock()
							select {
							case errc <- r.err:
							default:
							}
							return
						}
						us := time.Since(t0).Microseconds()
						mu.Lock()
						res.Latency.RecordValue(max(us, 1))
						mu.Unlock()
						done.Add(int64(count))
						return
					}
				}()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	close(errc)
	res.Elapsed = time.Since(start)
	res.Published, res.Failed = done.Load(), failed.Load()
	for err := range errc {
		return res, err
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("raft load interrupted after %d messages: %w", res.Published, ctx.Err())
	}
	return res, nil
}

// raft measures the raft peers once (one round): the same shapes as
// the daemons' (sizeRun.mode), each on a fresh group, as the daemons are
// started afresh for each of theirs.
func (r *sizeRun) raft(ctx context.Context, bin, dir string) (RaftFigures, error) {
	o, rack, all, say := r.o, r.l.Rack, r.all, r.say
	fig := RaftFigures{Transport: fmt.Sprintf("TCP between the hosts' OOB addresses (port %d), one persistent connection per pair; raft.MemoryStorage, no fsync; tick 5 ms, heartbeat 2 ticks, election 40 ticks; proposals at a follower forwarded by raft to the leader", peerPort),
		BatchMessages: o.Batch}
	run := func(name string, fn func(rc *raftCluster) error) error {
		ctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
		defer cancel()
		rc, err := startRaft(ctx, rack, bin, filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = fn(rc)
		if ctx.Err() != nil {
			err = fmt.Errorf("raft run %s: not done after --run-timeout %v (logs in %s): %w", name, o.RunTimeout, filepath.Join(dir, name), err)
		}
		rc.stop()
		return err
	}
	n := len(all)
	say("== etcd raft peer, %d nodes, 64-byte messages", n)
	err := run("latency", func(rc *raftCluster) error {
		lead, err := rc.leader()
		if err != nil {
			return err
		}
		fol := (lead + 1) % n
		fig.LeaderHost, fig.FollowerHost = rack.Hosts[lead].Name, rack.Hosts[fol].Name
		res, err := rc.publish(ctx, peerLoad{Hosts: []int{lead}, PerHost: o.Pings, Size: 64, Window: 1})
		if err != nil {
			return err
		}
		fig.P50us, fig.P99us, fig.P999us = quantilesUs(res.Latency, 1)
		res, err = rc.publish(ctx, peerLoad{Hosts: []int{fol}, PerHost: o.Pings, Size: 64, Window: 1, Round: 1})
		if err != nil {
			return err
		}
		fig.FollowerP50us, fig.FollowerP99us, _ = quantilesUs(res.Latency, 1)
		say("raft commit latency (propose to committed and applied at the proposer, 1 in flight): at the leader (%s) p50 %.0fus  p99 %.0fus  p999 %.0fus; at a follower (%s) p50 %.0fus  p99 %.0fus",
			fig.LeaderHost, fig.P50us, fig.P99us, fig.P999us, fig.FollowerHost, fig.FollowerP50us, fig.FollowerP99us)
		return nil
	})
	if err != nil {
		return fig, err
	}
	// rate runs a throughput load and measures the raft processes' CPU
	// and the machine's around it.
	rate := func(name string, l peerLoad, out *[3]float64) error {
		return run(name, func(rc *raftCluster) error {
			c0 := rc.cpu()
			m0, _ := machineBusy()
			res, err := rc.publish(ctx, l)
			if err != nil {
				return err
			}
			m1, _ := machineBusy()
			c1 := rc.cpu()
			msgs := float64(res.Published)
			*out = [3]float64{res.Rate(), float64((c1 - c0).Microseconds()) / msgs, float64((m1 - m0).Microseconds()) / msgs}
			return nil
		})
	}
	var f [3]float64
	if err := rate("w64", peerLoad{Hosts: all, PerHost: o.Messages / n, Size: 64, Window: 64}, &f); err != nil {
		return fig, err
	}
	fig.Rate64, fig.CPUusPerMsg64, fig.MachineCPU64 = f[0], f[1], f[2]
	say("raft committed msgs/s, 1 message per proposal, 64 in flight per host: %.0f  (raft CPU %.1fus, machine CPU %.1fus per message)", f[0], f[1], f[2])
	if err := rate("w512", peerLoad{Hosts: all, PerHost: o.Messages / n, Size: 64, Window: 512}, &f); err != nil {
		return fig, err
	}
	fig.Rate512, fig.CPUusPerMsg512, fig.MachineCPU512 = f[0], f[1], f[2]
	say("raft committed msgs/s, 1 message per proposal, 512 in flight per host: %.0f  (raft CPU %.1fus, machine CPU %.1fus per message)", f[0], f[1], f[2])
	b := o.Batch
	if err := rate("batched", peerLoad{Hosts: all, PerHost: o.Messages / n, Size: 64, Window: max(512/b, 1), Batch: b}, &f); err != nil {
		return fig, err
	}
	fig.BatchedRate, fig.CPUusPerMsgBatch, fig.MachineCPUBatch = f[0], f[1], f[2]
	say("raft committed msgs/s, %d messages per proposal, %d proposals in flight per host: %.0f  (raft CPU %.1fus, machine CPU %.1fus per message)", b, max(512/b, 1), f[0], f[1], f[2])
	return fig, nil
}

// raftVsExo computes the ratios of exo's baseline mode over raft.
func raftVsExo(exo AgreementFigures, r RaftFigures) RaftRatios {
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	c := exo.ClientBatchedRate
	if c == 0 {
		c = exo.BatchedRate
	}
	return RaftRatios{P50: div(exo.AgreeP50us, r.P50us), P99: div(exo.AgreeP99us, r.P99us),
		Rate64: div(exo.UnbatchedRate, r.Rate64), Rate512: div(exo.BatchedRate, r.Rate512),
		Batched: div(c, r.BatchedRate), ExoC: exoCMeasures(exo)}
}

// sayRaftTable prints exo against raft, one row per figure.
func sayRaftTable(say func(string, ...any), hosts int, exo AgreementFigures, r RaftFigures, v RaftRatios) {
	say("== exo (%s) against etcd raft (%s), %d hosts, same run, 64-byte messages", exo.Offload, r.Impl, hosts)
	say("%-68s %10s %10s %9s", "figure", "exo", "raft", "exo/raft")
	row := func(name string, e, rf, ratio float64) {
		say("%-68s %10.0f %10.0f %9.2f", name, e, rf, ratio)
	}
	row("(a) p50 us, publish -> committed at the publisher, 1 in flight", exo.AgreeP50us, r.P50us, v.P50)
	row("(a) p99 us", exo.AgreeP99us, r.P99us, v.P99)
	row("(b) msgs/s, 1 msg per publish, 64 in flight/host (exo: 1 msg/frame)", exo.UnbatchedRate, r.Rate64, v.Rate64)
	row("(b) msgs/s, 1 msg per publish, 512 in flight/host", exo.BatchedRate, r.Rate512, v.Rate512)
	c := exo.ClientBatchedRate
	if c == 0 {
		c = exo.BatchedRate
	}
	row(fmt.Sprintf("(c) msgs/s, %d msgs per publish/proposal, 512 in flight/host", r.BatchMessages), c, r.BatchedRate, v.Batched)
	say("raft's (a) is at the leader, host %s (exo's at host A); at a follower (%s, forwarded to the leader): p50 %.0fus, p99 %.0fus",
		r.LeaderHost, r.FollowerHost, r.FollowerP50us, r.FollowerP99us)
	say("exo's (c) is %s", v.ExoC)
}

// The raftpeer client protocol (tools/raftpeer/client.go): frames of
// u32 length | u8 op | u64 id | body, either way.

var errPeerDropped = errors.New("raft proposal dropped")

type peerReply struct {
	index uint64
	body  []byte
	err   error
}

type peerStatus struct {
	ID             uint64 `json:"id"`
	Leader         uint64 `json:"leader"`
	Term           uint64 `json:"term"`
	Applied        uint64 `json:"applied"`
	PeersConnected int    `json:"peers_connected"`
}

type peerClient struct {
	conn net.Conn
	mu   sync.Mutex
	w    *bufio.Writer
	next uint64

	pmu     sync.Mutex
	waiting map[uint64]chan peerReply
	err     error
}

func dialPeer(sock string) (*peerClient, error) {
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	c := &peerClient{conn: conn, w: bufio.NewWriter(conn), waiting: map[uint64]chan peerReply{}}
	go c.read()
	return c, nil
}

func (c *peerClient) close() { c.conn.Close() }

func (c *peerClient) read() {
	r := bufio.NewReaderSize(c.conn, 64<<10)
	var hdr [13]byte
	for {
		var body []byte
		_, err := io.ReadFull(r, hdr[:])
		if err == nil {
			n := binary.BigEndian.Uint32(hdr[:])
			if n < 9 || n > 64<<20 {
				err = fmt.Errorf("frame of %d bytes", n)
			} else {
				body = make([]byte, n-9)
				_, err = io.ReadFull(r, body)
			}
		}
		if err != nil {
			c.pmu.Lock()
			c.err = fmt.Errorf("raftpeer connection: %w", err)
			for _, ch := range c.waiting {
				ch <- peerReply{err: c.err}
			}
			c.waiting = nil
			c.pmu.Unlock()
			return
		}
		op, id := hdr[4], binary.BigEndian.Uint64(hdr[5:])
		c.pmu.Lock()
		ch := c.waiting[id]
		delete(c.waiting, id)
		c.pmu.Unlock()
		if ch == nil {
			continue
		}
		switch {
		case op == 'C' && len(body) == 8:
			ch <- peerReply{index: binary.BigEndian.Uint64(body)}
		case op == 'D':
			ch <- peerReply{err: fmt.Errorf("%w: %s", errPeerDropped, body)}
		case op == 'S':
			ch <- peerReply{body: body}
		default:
			ch <- peerReply{err: fmt.Errorf("raftpeer answered %q: %s", op, body)}
		}
	}
}

func (c *peerClient) do(op byte, body []byte) <-chan peerReply {
	ch := make(chan peerReply, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	id := c.next
	c.pmu.Lock()
	if c.waiting == nil {
		c.pmu.Unlock()
		ch <- peerReply{err: c.err}
		return ch
	}
	c.waiting[id] = ch
	c.pmu.Unlock()
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 13+len(body)), uint32(9+len(body)))
	b = append(b, op)
	b = binary.BigEndian.AppendUint64(b, id)
	b = append(b, body...)
	_, err := c.w.Write(b)
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.pmu.Lock()
		if c.waiting != nil {
			delete(c.waiting, id)
			ch <- peerReply{err: err}
		}
		c.pmu.Unlock()
	}
	return ch
}

func (c *peerClient) propose(payload []byte) <-chan peerReply { return c.do('P', payload) }

func (c *peerClient) status() (peerStatus, error) {
	r := <-c.do('S', nil)
	if r.err != nil {
		return peerStatus{}, r.err
	}
	var st peerStatus
	err := json.Unmarshal(r.body, &st)
	return st, err
}
