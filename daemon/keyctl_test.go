package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/internal/apitest"
)

// keyDaemon is a fake daemon whose staged key waits for member 2 until
// its status was read switchAfter times after the stage (never when
// negative); it sends under slot 0 before.
func keyDaemon(t *testing.T, switchAfter int32) *client.Client {
	t.Helper()
	sock := filepath.Join(apitest.Dir(t), "api.sock")
	var staged atomic.Bool
	var reads atomic.Int32
	apitest.Listen(t, sock, apitest.Requests(func(typ byte, body []byte) (byte, [][]byte, bool) {
		switch typ {
		case client.TypeKey:
			staged.Store(true)
			return client.TypeKeyDone, [][]byte{body[:8]}, true
		case client.TypeStatus:
			ks := KeyStatus{}
			if staged.Load() {
				ks = KeyStatus{Staged: true, Waiting: []int{2}}
				if n := reads.Add(1); switchAfter >= 0 && n > switchAfter {
					ks = KeyStatus{SendPhase: 1, OldValid: true}
				}
			}
			raw, _ := json.Marshal(map[string]any{"keys": ks})
			return client.TypeStatusReply, [][]byte{raw}, true
		}
		return 0, nil, false
	}))
	c, err := client.Dial(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestStageKey: a staged key goes to the other slot and waits for the
// members' announcements; WaitKeySwitch returns once the host sends under
// it, or with the members still waited for when time runs out.
func TestStageKey(t *testing.T) {
	ctx := context.Background()
	c := keyDaemon(t, 3)
	ks, err := StageKey(ctx, c, "/etc/exo/next.key")
	if err != nil || !ks.Staged || ks.NewSlot() != 1 || len(ks.Waiting) != 1 {
		t.Fatalf("staged: %+v, %v", ks, err)
	}
	if ks, err = WaitKeySwitch(ctx, c, ks); err != nil || ks.Staged || ks.SendPhase != 1 || ks.NewSlot() != 1 {
		t.Fatalf("switched: %+v, %v", ks, err)
	}

	c = keyDaemon(t, -1)
	if ks, err = StageKey(ctx, c, "/etc/exo/next.key"); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	defer cancel()
	ks, err = WaitKeySwitch(tctx, c, ks)
	if !errors.Is(err, context.DeadlineExceeded) || !ks.Staged || len(ks.Waiting) != 1 || ks.Waiting[0] != 2 {
		t.Fatalf("never switched: %+v, %v", ks, err)
	}
}

// TestRosterChangeString: what exo roster prints of a change.
func TestRosterChangeString(t *testing.T) {
	for _, c := range []struct {
		ch   RosterChange
		want string
	}{
		{RosterChange{Op: client.RosterAdd, ID: 5}, "add 5: queued"},
		{RosterChange{Op: client.RosterRemove, ID: 4, InEffect: true, Status: Status{RosterFrom: 812, Roster: []int{0, 1, 2, 3}}}, "remove 4: in effect from seq 812, roster [0 1 2 3]"},
	} {
		if got := c.ch.String(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
	if s := strings.TrimSpace(RosterChange{}.String()); s != "0: queued" {
		t.Errorf("no operation: %q", s)
	}
}
