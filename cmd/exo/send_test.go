package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
)

// noOOB is the OOB transport of a one-host rack: nobody to talk to.
type noOOB struct{ in chan exo.Message }

func (noOOB) Send(exo.Message)           {}
func (o noOOB) Recv() <-chan exo.Message { return o.in }

// oneHostDaemon runs a one-host rack in memory (max_message_bytes 100)
// and returns its API socket.
func oneHostDaemon(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "exos") // short: Unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "group.key")
	if err := os.WriteFile(key, []byte("exo send test group key, 32 B..."), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	cfg, err := daemon.ParseConfig(fmt.Appendf(nil, `{"group":7,"id":0,"interface":"mem0","api_socket":%q,"key_file":%q,
		"max_message_bytes":100,"roster":[{"id":0,"mac":"02:e0:00:00:00:01","oob":"127.0.0.1:17799"}]}`, sock, key))
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("02:e0:00:00:00:01")
	d, err := daemon.New(cfg, broadcast.NewMemNetwork().Attach(mac), noOOB{in: make(chan exo.Message)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
		os.RemoveAll(dir)
	})
	for k := 0; ; k++ {
		c, err := client.Dial(ctx, sock)
		if err == nil {
			c.Close()
			return sock
		}
		if k > 200 {
			t.Fatalf("daemon socket never came up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSendLines: exo send --lines publishes 1,000 lines in batches of 64
// (and line by line with --batch 1): every line is agreed at increasing
// positions, printed in input order with its line number (--json); the one
// line above max_message_bytes is named by its number, and the exit status
// says one failed.
func TestSendLines(t *testing.T) {
	sock := oneHostDaemon(t)
	const n, bad = 1000, 500
	var in strings.Builder
	for i := 1; i <= n; i++ {
		if i == bad {
			in.WriteString(strings.Repeat("x", 101) + "\n")
			continue
		}
		fmt.Fprintf(&in, "line %d\n", i)
	}
	for _, batch := range []int{64, 1} {
		out, errOut, err := runExoIn(in.String(), "send", "--socket", sock, "--lines", "--batch", fmt.Sprint(batch), "--json")
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), fmt.Sprintf("1 of %d messages failed", n)) {
			t.Fatalf("--batch %d: %v, want 1 of %d failed", batch, err, n)
		}
		wantErr := fmt.Sprintf("line %d: ", bad)
		if batch == 1 {
			wantErr = fmt.Sprintf("message %d: ", bad-1) // the line-by-line path counts from 0
		}
		if !strings.Contains(errOut.String(), wantErr) || !strings.Contains(errOut.String(), "max_message_bytes") || strings.Count(errOut.String(), "\n") != 1 {
			t.Fatalf("--batch %d: stderr %q, want one error naming %q", batch, errOut.String(), wantErr)
		}
		dec := json.NewDecoder(&out)
		var last client.Position
		for i := 1; i <= n; i++ {
			if i == bad {
				continue
			}
			var rec struct {
				Line  int
				Seq   uint64
				Index uint16
				Bytes int
			}
			if err := dec.Decode(&rec); err != nil {
				t.Fatalf("--batch %d: output record for line %d: %v", batch, i, err)
			}
			p := client.Position{Seq: rec.Seq, Index: rec.Index}
			if batch > 1 && rec.Line != i || rec.Bytes != len(fmt.Sprintf("line %d", i)) {
				t.Fatalf("--batch %d: record %+v for line %d", batch, rec, i)
			}
			if i > 1 && (p.Seq < last.Seq || p.Seq == last.Seq && p.Index <= last.Index) {
				t.Fatalf("--batch %d: line %d at %v after %v", batch, i, p, last)
			}
			last = p
		}
	}
	// Plain output, one line per message as without batches.
	out, _, err := runExoIn("a\nb\nc\n", "send", "--socket", sock, "--lines", "--batch", "2")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[2], "agreed at seq ") || !strings.HasSuffix(lines[2], "(1 bytes)") {
		t.Fatalf("output %q", out.String())
	}
}

// runExoIn runs exo with args and in as its standard input, and returns
// what it wrote to standard output and standard error.
func runExoIn(in string, args ...string) (out, errOut bytes.Buffer, err error) {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(in))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.Execute()
	return out, errOut, err
}
