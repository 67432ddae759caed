package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/client"
)

// rosterStatus is the membership part of the daemon's status.
type rosterStatus struct {
	ID             int    `json:"id"`
	Position       int    `json:"position"`
	Roster         []int  `json:"roster"`
	Known          []int  `json:"known_members"`
	Removed        bool   `json:"removed"`
	RosterFrom     uint64 `json:"roster_from_seq"`
	ChangeInFlight bool   `json:"change_in_flight"`
	Epoch          uint32 `json:"epoch"`
}

func readRoster(ctx context.Context, c *client.Client) (rosterStatus, error) {
	var st rosterStatus
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

// parseMember reads a member id (0..254).
func parseMember(s string) (uint8, error) {
	v, err := strconv.ParseUint(s, 10, 8)
	if err != nil || v == 255 {
		return 0, fmt.Errorf("member id %q: want a number 0..254", s)
	}
	return uint8(v), nil
}

func newRosterCmd() *cobra.Command {
	var socket string
	var timeout time.Duration
	var noWait bool
	cmd := &cobra.Command{
		Use:   "roster",
		Short: "Show or change the rack's membership (add, remove, replace members by stable id)",
		Long: `exo roster shows the rack's current roster (member ids in token order) as the
local daemon sees it, and proposes membership changes through it: one member
added or removed per agreed configuration entry (docs/protocol.md section 7).
A member to add must be listed in every host's config (roster: its mac and oob
address). add and remove wait until the change took effect at the local
daemon (--no-wait returns once it is queued); replace removes the first id,
waits for that to take effect, then adds the second.`,
	}
	cmd.PersistentFlags().StringVar(&socket, "socket", defaultSocket, "the daemon's API socket")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 60*time.Second, "how long to wait for a change to take effect")
	cmd.PersistentFlags().BoolVar(&noWait, "no-wait", false, "return once the change is queued")

	var jsonOut bool
	show := &cobra.Command{
		Use:   "show",
		Short: "Show the current roster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, socket)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := readRoster(ctx, c)
			if err != nil {
				return err
			}
			return printRoster(cmd.OutOrStdout(), st, jsonOut)
		},
	}
	show.Flags().BoolVar(&jsonOut, "json", false, "print as JSON")

	change := func(use, short string, nargs int, run func(ctx context.Context, c *client.Client, ids []uint8, w io.Writer) error) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: cobra.ExactArgs(nargs),
			RunE: func(cmd *cobra.Command, args []string) error {
				var ids []uint8
				for _, a := range args {
					id, err := parseMember(a)
					if err != nil {
						return err
					}
					ids = append(ids, id)
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
				defer cancel()
				c, err := client.Dial(ctx, socket)
				if err != nil {
					return err
				}
				defer c.Close()
				return run(ctx, c, ids, cmd.OutOrStdout())
			},
		}
	}
	step := func(ctx context.Context, c *client.Client, op, id uint8, w io.Writer) error {
		if err := proposeRoster(ctx, c, op, id); err != nil {
			return err
		}
		verb := map[uint8]string{client.RosterAdd: "add", client.RosterRemove: "remove"}[op]
		if noWait {
			fmt.Fprintf(w, "%s %d: queued\n", verb, id)
			return nil
		}
		st, err := waitRoster(ctx, c, op, id)
		if err != nil {
			return fmt.Errorf("%s %d: %w", verb, id, err)
		}
		fmt.Fprintf(w, "%s %d: in effect from seq %d, roster %v\n", verb, id, st.RosterFrom, st.Roster)
		return nil
	}
	add := change("add ID", "Add member ID (listed in the config) to the roster", 1,
		func(ctx context.Context, c *client.Client, ids []uint8, w io.Writer) error {
			return step(ctx, c, client.RosterAdd, ids[0], w)
		})
	remove := change("remove ID", "Remove member ID from the roster", 1,
		func(ctx context.Context, c *client.Client, ids []uint8, w io.Writer) error {
			return step(ctx, c, client.RosterRemove, ids[0], w)
		})
	replace := change("replace OLD NEW", "Remove member OLD, wait until that took effect, then add member NEW", 2,
		func(ctx context.Context, c *client.Client, ids []uint8, w io.Writer) error {
			if ids[0] == ids[1] {
				return fmt.Errorf("replace %d by itself: nothing to do", ids[0])
			}
			st, err := readRoster(ctx, c)
			if err != nil {
				return err
			}
			if !slices.Contains(st.Known, int(ids[1])) {
				return fmt.Errorf("member %d is not in the local daemon's config (roster: its mac and oob address): add it to every host's config first; nothing changed", ids[1])
			}
			if int(ids[0]) == st.ID {
				return fmt.Errorf("replace %d at its own daemon: it could not propose the add once removed; run it at another member's daemon", ids[0])
			}
			if slices.Contains(st.Roster, int(ids[1])) {
				return fmt.Errorf("member %d is already in the roster %v; nothing changed", ids[1], st.Roster)
			}
			saved := noWait
			noWait = false // the add must wait for the remove
			err = step(ctx, c, client.RosterRemove, ids[0], w)
			noWait = saved
			if err != nil {
				return err
			}
			if err := step(ctx, c, client.RosterAdd, ids[1], w); err != nil {
				return fmt.Errorf("%w (member %d was removed already)", err, ids[0])
			}
			return nil
		})
	cmd.AddCommand(show, add, remove, replace)
	return cmd
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
func waitRoster(ctx context.Context, c *client.Client, op, id uint8) (rosterStatus, error) {
	var st rosterStatus
	for {
		var err error
		st, err = readRoster(ctx, c)
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

func printRoster(w io.Writer, st rosterStatus, jsonOut bool) error {
	var spares []int
	for _, k := range st.Known {
		if !slices.Contains(st.Roster, k) {
			spares = append(spares, k)
		}
	}
	if jsonOut {
		b, err := json.Marshal(struct {
			Roster         []int  `json:"roster"`
			From           uint64 `json:"from_seq"`
			Epoch          uint32 `json:"epoch"`
			ChangeInFlight bool   `json:"change_in_flight"`
			Self           int    `json:"self"`
			Position       int    `json:"position"`
			Removed        bool   `json:"removed"`
			Spares         []int  `json:"spares"`
		}{st.Roster, st.RosterFrom, st.Epoch, st.ChangeInFlight, st.ID, st.Position, st.Removed, append([]int{}, spares...)})
		if err != nil {
			return err
		}
		fmt.Fprintln(w, string(b))
		return nil
	}
	fmt.Fprintf(w, "%-18s %v (member ids in token order, %d hosts)\n", "roster", st.Roster, len(st.Roster))
	fmt.Fprintf(w, "%-18s %d\n", "from seq", st.RosterFrom)
	fmt.Fprintf(w, "%-18s %d\n", "epoch", st.Epoch)
	self := fmt.Sprintf("member %d, position %d", st.ID, st.Position)
	if st.Position < 0 || st.Removed {
		self = fmt.Sprintf("member %d, not a member", st.ID)
	}
	fmt.Fprintf(w, "%-18s %s\n", "this host", self)
	fmt.Fprintf(w, "%-18s %v\n", "change in flight", st.ChangeInFlight)
	fmt.Fprintf(w, "%-18s %v (listed in the config, not members)\n", "spares", spares)
	return nil
}
