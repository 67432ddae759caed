package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

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
			st, err := daemon.ReadRoster(ctx, c)
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
		ch, err := daemon.ChangeRoster(ctx, c, op, id, !noWait)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, ch)
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
			return daemon.ReplaceMember(ctx, c, ids[0], ids[1], !noWait, func(ch daemon.RosterChange) { fmt.Fprintln(w, ch) })
		})
	cmd.AddCommand(show, add, remove, replace)
	return cmd
}

// printRoster prints the membership part of a daemon's status: the
// roster, where it applies from, this host's place and the spares.
func printRoster(w io.Writer, st daemon.Status, jsonOut bool) error {
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
