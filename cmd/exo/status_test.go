package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

// statusServer answers the local API's Status request with st.
func statusServer(t *testing.T, path string, st daemon.Status) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				var buf []byte
				for {
					typ, _, b, err := client.ReadFrame(r, buf)
					buf = b
					if err != nil || typ != client.TypeStatus || client.WriteFrame(conn, client.TypeStatusReply, raw) != nil {
						return
					}
				}
			}()
		}
	}()
}

// TestStatusDuplicateID: exo status prints the duplicate member id alarm
// first, with the MAC and what to check; --json carries the object;
// without the alarm neither has it.
func TestStatusDuplicateID(t *testing.T) {
	dir, err := os.MkdirTemp("", "exo-st") // short: a socket path has at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
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

// TestRecoveryLineStateTransfer: the status says when a host fetches the
// rack's agreed log before it rejoins, and where the rack is.
func TestRecoveryLineStateTransfer(t *testing.T) {
	st := daemon.Status{Halted: true, Recovery: daemon.RecoveryStatus{StateTransfer: true, RackEpoch: 7, RackSeq: 123456, BehindEpoch: true}}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	line := recoveryLine(m["recovery"].(map[string]any))
	if !strings.Contains(line, "state transfer: fetching the rack's agreed log") || !strings.Contains(line, "seq 123456") {
		t.Fatalf("recovery line %q: want the state transfer and the rack's seq", line)
	}
	st.Recovery.StateTransfer = false
	b, _ = json.Marshal(st)
	m = nil
	_ = json.Unmarshal(b, &m)
	if line := recoveryLine(m["recovery"].(map[string]any)); strings.Contains(line, "state transfer") {
		t.Fatalf("recovery line %q without a transfer", line)
	}
}
