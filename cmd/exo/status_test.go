package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/internal/apitest"
)

// statusServer answers the local API's Status request with st.
func statusServer(t *testing.T, path string, st daemon.Status) {
	t.Helper()
	apitest.Listen(t, path, apitest.Status(func() any { return st }))
}

// TestStatusDuplicateID: exo status prints the duplicate member id alarm
// first, with the MAC and what to check; --json carries the object;
// without the alarm neither has it.
func TestStatusDuplicateID(t *testing.T) {
	dir := apitest.Dir(t)
	run := func(sock string, args ...string) string {
		t.Helper()
		root := newRootCmd()
		root.SetArgs(append([]string{"status", "--socket", sock}, args...))
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		if err := root.Execute(); err != nil {
			t.Fatalf("exo status: %v\n%s", err, out.String())
		}
		return out.String()
	}
	base := daemon.Status{ID: 2, Hosts: 5, Skipped: []int{}, Counters: map[string]uint64{}}
	statusServer(t, filepath.Join(dir, "ok.sock"), base)
	if out := run(filepath.Join(dir, "ok.sock")); strings.Contains(out, "duplicate_id") {
		t.Fatalf("duplicate_id without the alarm:\n%s", out)
	}
	if out := run(filepath.Join(dir, "ok.sock"), "--json"); strings.Contains(out, "duplicate_id") {
		t.Fatalf("duplicate_id without the alarm:\n%s", out)
	}
	alarmed := base
	alarmed.DuplicateID = &daemon.DuplicateIDStatus{MemberID: 2, Position: 2, MAC: "02:e0:00:00:00:07", MACs: []string{"02:e0:00:00:00:07"},
		FirstSeen: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Seq: 1234, Frames: 3, StoppedSending: true,
		Message: "another host sends as member id 2 from MAC 02:e0:00:00:00:07; this host stopped sending",
		Check:   "a copied config", Fix: "stop one of the two daemons"}
	statusServer(t, filepath.Join(dir, "dup.sock"), alarmed)
	out := run(filepath.Join(dir, "dup.sock"))
	first := strings.SplitN(out, "\n", 2)[0]
	for _, want := range []string{"duplicate_id", "ALARM", "member id 2 from MAC 02:e0:00:00:00:07", "seq 1234", "Check: a copied config", "Fix: stop one"} {
		if !strings.Contains(first, want) {
			t.Errorf("first line %q lacks %q", first, want)
		}
	}
	var js map[string]any
	if err := json.Unmarshal([]byte(run(filepath.Join(dir, "dup.sock"), "--json")), &js); err != nil {
		t.Fatal(err)
	}
	if d, ok := js["duplicate_id"].(map[string]any); !ok || d["mac"] != "02:e0:00:00:00:07" || d["stopped_sending"] != true || d["member_id"] != float64(2) {
		t.Errorf("--json: %v", js["duplicate_id"])
	}
}

// TestStatusBrief: exo status --brief prints one line and exits 0, 1, 2 or
// 3 (healthy, degraded, halted, no answer), quietly for the levels.
func TestStatusBrief(t *testing.T) {
	dir := apitest.Dir(t)
	ok := daemon.Status{ID: 0, Epoch: 3, Agreed: 77, Roster: []int{0, 1, 2}, Skipped: []int{}, Counters: map[string]uint64{}}
	degraded := ok
	degraded.Skipped = []int{2}
	halted := ok
	halted.Halted, halted.Recovery.ViewChange = true, &daemon.ViewChangeStatus{Epoch: 5, Ambiguous: true}
	for _, c := range []struct {
		name string
		st   *daemon.Status
		code int
		line string
	}{
		{"healthy", &ok, 0, "healthy: member 0 in step: epoch 3, agreed to seq 77"},
		{"degraded", &degraded, 1, "degraded: members at positions [2] skipped"},
		{"halted", &halted, 2, "halted: view change 5 waits on hosts that lost their state"},
		{"gone", nil, 3, ""},
	} {
		sock := filepath.Join(dir, c.name+".sock")
		if c.st != nil {
			statusServer(t, sock, *c.st)
		}
		root := newRootCmd()
		root.SetArgs([]string{"status", "--brief", "--socket", sock})
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		code := 0
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		} else if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if code != c.code || !strings.HasPrefix(out.String(), c.line) || strings.Count(out.String(), "\n") > 1 {
			t.Errorf("%s: exit %d, output %q; want %d and a line starting %q", c.name, code, out.String(), c.code, c.line)
		}
		if c.code == 1 || c.code == 2 {
			if !ee.quiet {
				t.Errorf("%s: the exit is not quiet: exo would print the level again on stderr", c.name)
			}
		}
	}
}

// TestVersion: exo --version names the commit when the build recorded one
// (a test binary records none: then "unknown"), and Go's version.
func TestVersion(t *testing.T) {
	root := newRootCmd()
	root.SetArgs([]string{"--version"})
	var out bytes.Buffer
	root.SetOut(&out)
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "exo ") || !strings.Contains(s, "(commit ") || !strings.Contains(s, "go1.") {
		t.Fatalf("exo --version: %q", s)
	}
}

// TestManPagesCurrent: the manual pages in docs/man are what exo man
// writes from the commands today (regenerate: go run ./cmd/exo man --out
// docs/man).
func TestManPagesCurrent(t *testing.T) {
	dir := t.TempDir()
	root := newRootCmd()
	root.SetArgs([]string{"man", "--out", dir})
	root.SetOut(&bytes.Buffer{})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	have, _ := filepath.Glob(filepath.Join("..", "..", "docs", "man", "*.1"))
	if len(want) == 0 || len(want) != len(have) {
		t.Fatalf("%d pages written, %d in docs/man: regenerate them (go run ./cmd/exo man --out docs/man)", len(want), len(have))
	}
	for _, p := range want {
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", "man", filepath.Base(p)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("docs/man/%s is not current (%v): regenerate the pages (go run ./cmd/exo man --out docs/man)", filepath.Base(p), err)
		}
	}
}
