package main

import (
	"bytes"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exo-rack/exo/internal/apitest"
)

// TestTopBadInput: bad flags give one clear line and exit code 2.
func TestTopBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"top", "--interval", "1ms"},
		{"top", "--cluster-dir", "/nonexistent/dir"},
		{"top", "extra"},
	} {
		root := newRootCmd()
		root.SetArgs(args)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("%v: got %v, want an exit-2 error", args, err)
		}
	}
}

// TestTopNoHost: exo top --once exits 1 when no host answered (the frame
// still printed) and when the cluster directory has no socket.
func TestTopNoHost(t *testing.T) {
	dir := apitest.Dir(t)
	run := func() (string, error) {
		root := newRootCmd()
		root.SetArgs([]string{"top", "--cluster-dir", dir, "--once", "--interval", "20ms"})
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		return out.String(), err
	}
	out, err := run()
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.HasPrefix(err.Error(), "no *.sock in "+dir) {
		t.Errorf("empty directory: err %v, output:\n%s", err, out)
	}
	stale, err := net.Listen("unix", filepath.Join(dir, "C.sock"))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // the file stays, nobody listens: connection refused
	out, err = run()
	if !errors.As(err, &ee) || ee.code != 1 || err.Error() != "no host answered (of 1)" || !strings.Contains(out, "down") {
		t.Errorf("no host up: err %v, output:\n%s", err, out)
	}
}
