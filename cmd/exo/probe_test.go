package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/lab"
)

// TestProbeBadInput: bad flag values give one clear line and exit code 2,
// before anything needs root.
func TestProbeBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"probe", "--hosts", "1"},
		{"probe", "--count", "0"},
		{"probe", "--prefix", "Bad-Prefix"},
		{"probe", "--out", "/nonexistent/dir"},
		{"probe-endpoint", "--mode", "carrier-pigeon"},
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
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || msg == "" {
			t.Errorf("%v: want one line, got %q", args, msg)
		}
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
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "probe", "--hosts", "3", "--count", "200", "--json", "--out", dir, "--prefix", prefix)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exo probe: %v\n%s", err, stderr.String())
	}
	var rep probeReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, stdout.String())
	}
	want := []string{"TCP", "UDP", "UDP broadcast", "raw frames", "Exo agreement"}
	got := map[string]probePath{}
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
