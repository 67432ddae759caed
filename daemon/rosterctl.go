package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/exo-rack/exo/client"
)

// Membership changes run against a daemon through its local API (exo
// roster): propose one, again while another is in flight, and wait until
// the status shows it in effect.

// ReadRoster reads the status of the daemon behind c for its membership
// part; an error when the daemon predates membership changes.
func ReadRoster(ctx context.Context, c *client.Client) (Status, error) {
	var st Status
	raw, err := c.StatusRaw(ctx)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("status: %w", err)
	}
	if st.Roster == nil {
		return st, errors.New("the daemon's status has no roster: it predates membership changes")
	}
	return st, nil
}

// RosterChange is a membership change made: Op (client.RosterAdd or
// client.RosterRemove) of member ID, and the status once it took effect
// at the daemon (InEffect), or only queued.
type RosterChange struct {
	Op, ID   uint8
	InEffect bool
	Status   Status
}

// verb names a membership operation.
func verb(op uint8) string {
	return map[uint8]string{client.RosterAdd: "add", client.RosterRemove: "remove"}[op]
}

// String is the change as exo roster prints it: "add 5: queued", or
// "remove 4: in effect from seq 812, roster [0 1 2 3]".
func (r RosterChange) String() string {
	if !r.InEffect {
		return fmt.Sprintf("%s %d: queued", verb(r.Op), r.ID)
	}
	return fmt.Sprintf("%s %d: in effect from seq %d, roster %v", verb(r.Op), r.ID, r.Status.RosterFrom, r.Status.Roster)
}

// ChangeRoster proposes op of member id at the daemon behind c, again
// while another change is in flight, and with wait waits until it took
// effect at that daemon.
func ChangeRoster(ctx context.Context, c *client.Client, op, id uint8, wait bool) (RosterChange, error) {
	ch := RosterChange{Op: op, ID: id}
	if err := proposeRoster(ctx, c, op, id); err != nil {
		return ch, err
	}
	if !wait {
		return ch, nil
	}
	st, err := waitRoster(ctx, c, op, id)
	if err != nil {
		return ch, fmt.Errorf("%s %d: %w", verb(op), id, err)
	}
	ch.InEffect, ch.Status = true, st
	return ch, nil
}

// ReplaceMember removes member old at the daemon behind c, waits until
// that took effect, then adds member new (with wait, until that took
// effect too); done gets each change made. First it checks that new is in
// the daemon's config and not in the roster, and that old is not the
// daemon's own member (removed, it could not propose the add): nothing
// changes otherwise.
func ReplaceMember(ctx context.Context, c *client.Client, old, new uint8, wait bool, done func(RosterChange)) error {
	if old == new {
		return fmt.Errorf("replace %d by itself: nothing to do", old)
	}
	st, err := ReadRoster(ctx, c)
	if err != nil {
		return err
	}
	if !slices.Contains(st.Known, int(new)) {
		return fmt.Errorf("member %d is not in the local daemon's config (roster: its mac and oob address): add it to every host's config first; nothing changed", new)
	}
	if int(old) == st.ID {
		return fmt.Errorf("replace %d at its own daemon: it could not propose the add once removed; run it at another member's daemon", old)
	}
	if slices.Contains(st.Roster, int(new)) {
		return fmt.Errorf("member %d is already in the roster %v; nothing changed", new, st.Roster)
	}
	ch, err := ChangeRoster(ctx, c, client.RosterRemove, old, true) // the add must wait for the remove
	if err != nil {
		return err
	}
	done(ch)
	if ch, err = ChangeRoster(ctx, c, client.RosterAdd, new, wait); err != nil {
		return fmt.Errorf("%w (member %d was removed already)", err, old)
	}
	done(ch)
	return nil
}

// proposeRoster proposes a change, retrying while the previous one is in
// flight.
func proposeRoster(ctx context.Context, c *client.Client, op, id uint8) error {
	for {
		err := c.ProposeRoster(ctx, op, id)
		if !errors.Is(err, client.ErrChangeInFlight) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("another membership change stayed in flight: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitRoster polls the status until the change took effect at the daemon.
func waitRoster(ctx context.Context, c *client.Client, op, id uint8) (Status, error) {
	for {
		st, err := ReadRoster(ctx, c)
		if err != nil {
			return st, err
		}
		in := slices.Contains(st.Roster, int(id))
		switch {
		case op == client.RosterRemove && int(id) == st.ID && st.Removed:
			return st, nil // this daemon removed itself
		case st.Removed:
			return st, fmt.Errorf("this daemon (member %d) was removed from the roster by another change before this one took effect (roster %v from seq %d); it was dropped: propose it again at a member's daemon", st.ID, st.Roster, st.RosterFrom)
		case !st.ChangeInFlight && (op == client.RosterAdd) == in:
			return st, nil
		case !st.ChangeInFlight:
			// The daemon proposes a change again when a view change
			// drops it; it gives up only when another change came first
			// and made it moot, or no longer applies.
			return st, fmt.Errorf("dropped: another change took effect first (roster %v from seq %d); check the roster and propose again if still wanted", st.Roster, st.RosterFrom)
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("not in effect yet (roster %v, change in flight %v, epoch %d): %w", st.Roster, st.ChangeInFlight, st.Epoch, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
