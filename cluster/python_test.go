package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

// The measurement of TestPythonClient, the same for both clients: latN
// publishes one at a time (the p50 of publish to agreed), then rateM with
// window in flight on one connection (msgs/s), size-byte messages, at A.
const (
	pyLatN   = 2000
	pyRateM  = 20000
	pyWindow = 128
	pySize   = 64
)

// The batched measurement of TestCClient, the same for the C and Go
// clients: batchLatN batches of batchSize messages one at a time (the p50
// of a batch's publish to agreed), then batchM messages in batches of
// batchSize with batchWindow batches in flight (msgs/s), pySize-byte
// messages, at A.
const (
	batchSize   = 64
	batchWindow = 8
	batchM      = 100000
	batchLatN   = 200
)

// TestPythonClient: the Python client (client/python) against a 3-host
// lab rack: client/python/tests/lab_check.py publishes (blocking and
// pipelined, from two hosts, asyncio too), follows the stream from its
// middle at two hosts and checks every message at the position its
// publish returned, reads the status, meets the errors (a message above
// max_message_bytes, alone and in a batch; a bad socket path; a
// subscription from a compacted seq; a daemon killed under an open
// connection and subscription) and measures its publish latency and
// pipelined rate, which this test measures with the Go client beside it.
// The version mismatch is covered by the Python unit tests (a fake daemon).
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed (not in PATH): the Python client's lab check cannot run")
	}
	if out, err := exec.Command(py, "-c", "import sys; sys.exit(sys.version_info < (3, 9))").CombinedOutput(); err != nil {
		v, _ := exec.Command(py, "--version").CombinedOutput()
		t.Skipf("%s is %s, the Python client needs Python 3.9 or later (%v %s)", py, bytes.TrimSpace(v), err, out)
	}
	script, err := filepath.Abs("../client/python/tests/lab_check.py")
	if err != nil {
		t.Fatal(err)
	}
	r := rack(t, 3)
	const maxMessage = 64 << 10
	c := startWith(t, r, func(cfg *daemon.Config) {
		cfg.MaxMessage = maxMessage
		// A small history, so that a subscription from seq 0 after the
		// measurement's load is refused (compacted).
		cfg.KeepEntries = 8192
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var socks []string
	for i := range r.Hosts {
		socks = append(socks, c.Socket(i))
	}
	figures := runClientCheck(ctx, t, c, "lab_check.py", exec.CommandContext(ctx, py, "-u", script), socks, maxMessage)
	g, p, a := figures["go"], figures["python"], figures["python-asyncio"]
	t.Logf("publish to agreed at A, %d-byte messages, 3-host lab rack (one 2-CPU machine: daemons and clients share it):", pySize)
	t.Logf("  p50 latency, one in flight (%d publishes): Go %.0fus, Python %.0fus, Python asyncio %.0fus", pyLatN, g.p50us, p.p50us, a.p50us)
	t.Logf("  pipelined, %d in flight (%d messages): Go %.0f msgs/s, Python %.0f msgs/s, Python asyncio %.0f msgs/s",
		pyWindow, pyRateM, g.rate, p.rate, a.rate)
}

// pyFigure is one client's measurement in TestPythonClient.
type pyFigure struct {
	p50us float64 // publish latency p50, one in flight
	rate  float64 // msgs/s, pyWindow in flight
}

// goFigure measures the Go client as lab_check.py measures the Python
// one: a warm-up of 500, pyLatN publishes one at a time, pyRateM with
// pyWindow in flight.
func goFigure(ctx context.Context, socket string) (pyFigure, error) {
	cl, err := client.Dial(ctx, socket)
	if err != nil {
		return pyFigure{}, err
	}
	defer cl.Close()
	payload := bytes.Repeat([]byte{'x'}, pySize)
	send := func() (<-chan client.Ack, error) { return cl.PublishAsync(payload) }
	return goMeasure(ctx, send, func(a client.Ack) error { return a.Err }, 500, pyLatN, pyRateM, pyWindow, 1)
}

// goBatchFigure measures the Go client's batches as exo_test measures the
// C client's: a warm-up of 20 batches, batchLatN batches one at a time,
// batchM messages with batchWindow batches in flight.
func goBatchFigure(ctx context.Context, socket string) (pyFigure, error) {
	cl, err := client.Dial(ctx, socket)
	if err != nil {
		return pyFigure{}, err
	}
	defer cl.Close()
	batch := make([][]byte, batchSize)
	for i := range batch {
		batch[i] = bytes.Repeat([]byte{'x'}, pySize)
	}
	send := func() (<-chan client.BatchAck, error) { return cl.PublishBatchAsync(batch) }
	failed := func(b client.BatchAck) error {
		for _, a := range b.Acks {
			if a.Err != nil {
				return a.Err
			}
		}
		return b.Err
	}
	return goMeasure(ctx, send, failed, 20, batchLatN, batchM/batchSize, batchWindow, batchSize)
}

// goMeasure sends warm requests (send, window in flight), then latN one
// at a time (their p50, from send to outcome), then rateN with window in
// flight (the rate of messages, per messages a request); failed says
// whether an outcome is an error. A request a reconciliation dropped
// (client.ErrDropped: a takeover of a live host cut it before it was
// agreed, which this loaded machine does a few times a minute) is sent
// again, as the error asks: its time counts, its second sending's
// messages do not (the rate errs low). One reconciliation drops every
// request in the entries it cuts, so the bound counts reconciliations
// (the error names the entry): 10 a run, and maxDropped requests.
func goMeasure[T any](ctx context.Context, send func() (<-chan T, error), failed func(T) error, warm, latN, rateN, window, per int) (pyFigure, error) {
	const maxDrops, maxDropped = 10, 10000
	seen, dropped := map[string]bool{}, 0
	again := func(err error) bool {
		if !errors.Is(err, client.ErrDropped) {
			return false
		}
		seen[err.Error()] = true
		dropped++
		return len(seen) <= maxDrops && dropped <= maxDropped
	}
	pipelined := func(n, window int) error {
		var q []<-chan T
		for i := 0; i < n || len(q) > 0; {
			if i < n && len(q) < window {
				ch, err := send()
				if err != nil {
					return err
				}
				q = append(q, ch)
				i++
				continue
			}
			select {
			case a := <-q[0]:
				if err := failed(a); again(err) {
					ch, err := send()
					if err != nil {
						return err
					}
					q = append(q, ch)
				} else if err != nil {
					return err
				}
			case <-ctx.Done():
				return ctx.Err()
			}
			q = q[1:]
		}
		return nil
	}
	if err := pipelined(warm, window); err != nil {
		return pyFigure{}, err
	}
	lat := make([]time.Duration, 0, latN)
	for range latN {
		t0 := time.Now()
		if err := pipelined(1, 1); err != nil {
			return pyFigure{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	t0 := time.Now()
	if err := pipelined(rateN, window); err != nil {
		return pyFigure{}, err
	}
	rate := float64(rateN*per) / time.Since(t0).Seconds()
	return pyFigure{p50us: float64(lat[len(lat)/2].Microseconds()), rate: rate}, nil
}

// runClientCheck runs a client's lab check program (cmd: the Python or C
// one) against the rack's sockets: it passes the sockets and the
// measurement's sizes in the environment, logs its lines, answers its WAIT
// lines (the Go client's measurement at A, of single publishes or of
// batches; the kill of C), counts its "ok:" checks and fails unless it
// ends with PASS. It returns the figures of its "measure" lines and the Go
// client's ("go", "go-batch"), by name.
func runClientCheck(ctx context.Context, t *testing.T, c *Cluster, name string, cmd *exec.Cmd, socks []string, maxMessage int) map[string]pyFigure {
	t.Helper()
	cmd.Env = append(os.Environ(),
		"EXO_SOCKETS="+strings.Join(socks, string(os.PathListSeparator)),
		fmt.Sprint("EXO_MAX_MESSAGE=", maxMessage),
		fmt.Sprint("EXO_LAT_N=", pyLatN), fmt.Sprint("EXO_RATE_M=", pyRateM),
		fmt.Sprint("EXO_WINDOW=", pyWindow), fmt.Sprint("EXO_SIZE=", pySize),
		fmt.Sprint("EXO_BATCH=", batchSize), fmt.Sprint("EXO_BATCH_WINDOW=", batchWindow),
		fmt.Sprint("EXO_BATCH_M=", batchM), fmt.Sprint("EXO_BATCH_LAT_N=", batchLatN))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	figures := map[string]pyFigure{}
	passed, checks := false, 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		t.Log(name + ": " + line)
		switch {
		case line == "PASS":
			passed = true
		case strings.HasPrefix(line, "ok: "):
			checks++
		case strings.HasPrefix(line, "measure "):
			var f pyFigure
			var what string
			if _, err := fmt.Sscanf(line, "measure %s p50_us=%f msgs_per_s=%f", &what, &f.p50us, &f.rate); err != nil {
				t.Errorf("measure line %q: %v", line, err)
			}
			figures[what] = f
		case line == "WAIT go-measure" || line == "WAIT go-measure-batch":
			what, measure := "go", goFigure
			if line == "WAIT go-measure-batch" {
				what, measure = "go-batch", goBatchFigure
			}
			f, err := measure(ctx, c.Socket(0))
			if err != nil {
				t.Errorf("the Go client's measurement (%s): %v", what, err)
			}
			figures[what] = f
			io.WriteString(stdin, "done\n")
		case line == "WAIT kill 2":
			if err := c.Kill(2); err != nil {
				t.Errorf("kill C: %v", err)
			}
			io.WriteString(stdin, "done\n")
		case strings.HasPrefix(line, "WAIT "):
			t.Errorf("%s waits for %q, which this test does not know", name, line)
			io.WriteString(stdin, "unknown\n")
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil || !passed {
		t.Fatalf("%s: %v (passed: %v)\n%s", name, err, passed, stderr.String())
	}
	t.Logf("%s: %d checks passed", name, checks)
	return figures
}

// TestGoMeasureSendsDroppedAgain: the Go client's measurement sends again
// a request a reconciliation dropped (and only such a request), up to its
// bound; any other failure ends it.
func TestGoMeasureSendsDroppedAgain(t *testing.T) {
	run := func(outcomes map[int]error) (int, error) {
		sent := 0
		send := func() (<-chan error, error) {
			ch := make(chan error, 1)
			ch <- outcomes[sent]
			sent++
			return ch, nil
		}
		_, err := goMeasure(context.Background(), send, func(e error) error { return e }, 5, 3, 10, 4, 1)
		return sent, err
	}
	if sent, err := run(map[int]error{2: client.ErrDropped, 9: client.ErrDropped}); err != nil || sent != 5+3+10+2 {
		t.Fatalf("two dropped: %d sent, %v; want %d, nil", sent, err, 5+3+10+2)
	}
	if _, err := run(map[int]error{4: client.ErrQueueFull}); !errors.Is(err, client.ErrQueueFull) {
		t.Fatalf("a queue full: %v, want it", err)
	}
	// One reconciliation drops many requests at once (an entry carries
	// several): counted once.
	one := map[int]error{}
	for i := range 30 {
		one[i] = fmt.Errorf("%w (entry 683)", client.ErrDropped)
	}
	if sent, err := run(one); err != nil || sent != 5+3+10+30 {
		t.Fatalf("30 dropped by one reconciliation: %d sent, %v; want %d, nil", sent, err, 5+3+10+30)
	}
	all := map[int]error{}
	for i := range 40 {
		all[i] = fmt.Errorf("%w (entry %d)", client.ErrDropped, 100+i)
	}
	if _, err := run(all); !errors.Is(err, client.ErrDropped) {
		t.Fatalf("every request dropped by a reconciliation of its own: %v, want ErrDropped once the bound is spent", err)
	}
}
