package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/internal/apitest"
)

// fakeRosterDaemon answers Status and Roster requests on a Unix socket: a
// change takes effect at once, as far as the status shows.
type fakeRosterDaemon struct {
	mu      sync.Mutex
	id      int
	roster  []int
	known   []int
	changes []string
}

func (f *fakeRosterDaemon) serve(t *testing.T) string {
	sock := filepath.Join(apitest.Dir(t), "exo.sock")
	apitest.Listen(t, sock, apitest.Requests(f.answer))
	return sock
}

// answer answers one request.
func (f *fakeRosterDaemon) answer(typ byte, body []byte) (byte, [][]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch typ {
	case client.TypeStatus:
		st, _ := json.Marshal(map[string]any{"id": f.id, "position": slices.Index(f.roster, f.id),
			"roster": f.roster, "known_members": f.known, "removed": !slices.Contains(f.roster, f.id),
			"roster_from_seq": 100 * len(f.changes), "change_in_flight": false, "epoch": 3})
		return client.TypeStatusReply, [][]byte{st}, true
	case client.TypeRoster:
		req, op, m := binary.BigEndian.Uint64(body), body[8], int(body[9])
		switch {
		case op == client.RosterAdd && !slices.Contains(f.roster, m) && slices.Contains(f.known, m):
			f.roster = append(f.roster, m)
			slices.Sort(f.roster)
		case op == client.RosterRemove && slices.Contains(f.roster, m):
			f.roster = slices.DeleteFunc(f.roster, func(x int) bool { return x == m })
		default:
			return client.TypeError, [][]byte{client.U64(req), client.U16(client.CodeBadChange), []byte("does not apply")}, true
		}
		f.changes = append(f.changes, map[byte]string{1: "add", 2: "remove"}[op]+" "+string(rune('0'+m)))
		return client.TypeRosterQueued, [][]byte{client.U64(req)}, true
	}
	return 0, nil, true
}

func runExo(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestRosterCommands(t *testing.T) {
	f := &fakeRosterDaemon{id: 0, roster: []int{0, 1, 2, 3, 4}, known: []int{0, 1, 2, 3, 4, 5}}
	sock := f.serve(t)
	out, err := runExo(t, "roster", "show", "--socket", sock)
	if err != nil || !strings.Contains(out, "[0 1 2 3 4]") || !strings.Contains(out, "spares             [5]") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	if out, err = runExo(t, "roster", "replace", "--socket", sock, "4", "5"); err != nil {
		t.Fatalf("replace: %v\n%s", err, out)
	}
	if got := strings.Join(f.changes, ","); got != "remove 4,add 5" {
		t.Fatalf("changes %s", got)
	}
	if !strings.Contains(out, "roster [0 1 2 3 5]") {
		t.Fatalf("replace output:\n%s", out)
	}
	out, err = runExo(t, "roster", "show", "--json", "--socket", sock)
	var js struct {
		Roster []int `json:"roster"`
		Spares []int `json:"spares"`
	}
	if err != nil || json.Unmarshal([]byte(out), &js) != nil || !slices.Equal(js.Roster, []int{0, 1, 2, 3, 5}) || !slices.Equal(js.Spares, []int{4}) {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	// Clear errors, nothing changed.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "9"}, "does not apply"},
		{[]string{"add", "x"}, "want a number 0..254"},
		{[]string{"add", "255"}, "want a number 0..254"},
		{[]string{"replace", "1", "9"}, "not in the local daemon's config"},
		{[]string{"replace", "0", "4"}, "at its own daemon"},
		{[]string{"replace", "1", "2"}, "already in the roster"},
		{[]string{"remove"}, "accepts 1 arg"},
	} {
		_, err := runExo(t, append(append([]string{"roster"}, c.args...), "--socket", sock)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("roster %v: error %v, want %q", c.args, err, c.want)
		}
	}
	if len(f.changes) != 2 {
		t.Fatalf("changes after the errors: %v", f.changes)
	}
}
