package cluster

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
)

// TestCClient: the C client (client/c) against a 3-host lab rack. It
// builds the library, the examples and client/c/tests/exo_test with make;
// exo_test publishes (blocking at A, pipelined at B with the replies
// matched by request id; a batch at A, batches pipelined with single
// publishes at C), follows the stream from its middle at C (exo_next) and
// A (exo_follow) and checks every message at the position its publish
// returned, reads the status, meets the errors (a message above
// max_message_bytes, alone and in a batch; a batch refused whole, and
// batches refused before sending: empty, too many messages, too many
// bytes; a bad socket path, the version mismatches, malformed
// PublishedBatch replies and an Error of code 0 against a fake daemon, a
// subscription from a compacted seq, a daemon killed under an open
// connection and subscription) and measures its publish latency and
// pipelined rate, of single publishes and of batches, measured here for
// the Go client beside it (as TestPythonClient does).
func TestCClient(t *testing.T) {
	for _, tool := range []string{"cc", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (not in PATH): the C client cannot be built, its lab check cannot run", tool)
		}
	}
	dir, err := filepath.Abs("../client/c")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("make", "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("make -C client/c: %v\n%s", err, out)
	}
	r := rack(t, 3)
	const maxMessage = 64 << 10
	c := startWith(t, r, func(cfg *daemon.Config) {
		cfg.MaxMessage = maxMessage
		cfg.KeepEntries = 8192 // so that a subscription from seq 0 after the load is refused
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var socks []string
	for i := range r.Hosts {
		socks = append(socks, c.Socket(i))
	}
	figures := runClientCheck(ctx, t, c, "exo_test", exec.CommandContext(ctx, filepath.Join(dir, "tests", "exo_test")), socks, maxMessage)
	g, cc, gb, cb := figures["go"], figures["c"], figures["go-batch"], figures["c-batch"]
	t.Logf("publish to agreed at A, %d-byte messages, 3-host lab rack (one 2-CPU machine: daemons and clients share it):", pySize)
	t.Logf("  p50 latency, one in flight (%d publishes): Go %.0fus, C %.0fus", pyLatN, g.p50us, cc.p50us)
	t.Logf("  pipelined, %d in flight (%d messages): Go %.0f msgs/s, C %.0f msgs/s", pyWindow, pyRateM, g.rate, cc.rate)
	t.Logf("  batches of %d, p50 latency of a batch, one in flight (%d batches): Go %.0fus, C %.0fus", batchSize, batchLatN, gb.p50us, cb.p50us)
	t.Logf("  batches of %d, %d in flight (%d messages): Go %.0f msgs/s, C %.0f msgs/s", batchSize, batchWindow, batchM, gb.rate, cb.rate)
}
