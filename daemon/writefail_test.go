package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriteFailedRateLimited: a host whose egress is cut fails every
// broadcast write; the log says so once, then once per writeLogEvery with
// how many failed in between (a lab run logged 774 lines otherwise).
func TestWriteFailedRateLimited(t *testing.T) {
	var buf bytes.Buffer
	d := &Daemon{log: slog.New(slog.NewTextHandler(&buf, nil))}
	err := error(syscall.ENOBUFS)
	for i := 0; i < 1000; i++ {
		d.writeFailed(err)
	}
	if n := strings.Count(buf.String(), "broadcast write failed"); n != 1 {
		t.Fatalf("1000 failures in a row logged %d lines, want 1:\n%s", n, buf.String())
	}
	d.writeErrAt = d.writeErrAt.Add(-writeLogEvery - time.Millisecond)
	d.writeFailed(err)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "failed_since_last_line=999") || !strings.Contains(lines[1], "no buffer space") {
		t.Fatalf("after %v: %q", writeLogEvery, lines)
	}
}
