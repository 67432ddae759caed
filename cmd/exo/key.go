package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

// printKeys prints the key slots, the one the host sends under marked *,
// and the rotation in flight.
func printKeys(w io.Writer, ks daemon.KeyStatus, jsonOut bool) error {
	if jsonOut {
		b, _ := json.MarshalIndent(ks, "", "  ")
		_, err := fmt.Fprintf(w, "%s\n", b)
		return err
	}
	for ph, sl := range ks.Slots {
		mark := " "
		if ph == ks.SendPhase {
			mark = "*"
		}
		switch {
		case sl == nil:
			fmt.Fprintf(w, "%s slot %d: empty\n", mark, ph)
		default:
			fmt.Fprintf(w, "%s slot %d: key %s %s\n", mark, ph, sl.Fingerprint, sl.File)
		}
	}
	switch {
	case ks.Staged:
		fmt.Fprintf(w, "rotation: new key staged, waiting for the announcements of members %v\n", ks.Waiting)
	case ks.OldValid:
		fmt.Fprintf(w, "rotation: switched; the old key stays valid %.1fs more and until members %v are seen under the new one\n", ks.GraceSeconds, ks.NotMoved)
	default:
		fmt.Fprintln(w, "rotation: none in flight")
	}
	return nil
}

func newKeyCmd() *cobra.Command {
	var socket string
	var timeout time.Duration
	var noWait, jsonOut bool
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Show the frame-key slots, or rotate the rack's group key without stopping it",
		Long: `exo key shows the two key slots of the local daemon (the slot its frames are
sent under is marked *) and drives a key rotation (docs/security.md section 5):

  1. write the new group key file on every host (mode 0600), then on every host
     run  exo key stage /etc/exo/key.next  (or set next_key_file and restart);
  2. each host switches its frames to the new key by itself once the log holds
     every member's announcement of it; stage waits for that (--no-wait does not);
  3. the old key is retired once the grace window (key_grace, default 5s) has
     passed and every member was seen sending under the new key.

Then make the new file key_file, set key_phase to the new slot and drop
next_key_file in every host's config, so that a restart comes back under it.
exo key retire empties the slot the host does not send under at once (it
cancels a staged key, or ends the old key's window).`,
	}
	cmd.PersistentFlags().StringVar(&socket, "socket", defaultSocket, "the daemon's API socket")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long stage waits for the switch")
	// withClient runs fn with a connection to the daemon, within d.
	withClient := func(cmd *cobra.Command, d time.Duration, fn func(ctx context.Context, c *client.Client) error) error {
		ctx, cancel := context.WithTimeout(cmd.Context(), d)
		defer cancel()
		c, err := client.Dial(ctx, socket)
		if err != nil {
			return err
		}
		defer c.Close()
		return fn(ctx, c)
	}

	status := &cobra.Command{
		Use:   "status",
		Short: "Show the key slots and the rotation in flight",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, 5*time.Second, func(ctx context.Context, c *client.Client) error {
				ks, err := daemon.ReadKeys(ctx, c)
				if err != nil {
					return err
				}
				return printKeys(cmd.OutOrStdout(), ks, jsonOut)
			})
		},
	}
	status.Flags().BoolVar(&jsonOut, "json", false, "print as JSON")

	stage := &cobra.Command{
		Use:   "stage KEYFILE",
		Short: "Stage the next group key (a file on the daemon's host) and wait until this host sends under it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0]) // the daemon reads it (and checks its mode)
			if err != nil {
				return err
			}
			return withClient(cmd, timeout, func(ctx context.Context, c *client.Client) error {
				w := cmd.OutOrStdout()
				ks, err := daemon.StageKey(ctx, c, path)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "staged in slot %d; waiting for members %v\n", ks.NewSlot(), ks.Waiting)
				if noWait {
					return nil
				}
				ks, err = daemon.WaitKeySwitch(ctx, c, ks)
				if ctx.Err() != nil {
					return fmt.Errorf("not switched after %v: members %v have not announced the key (stage it on them)", timeout, ks.Waiting)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "switched: this host sends under slot %d\n", ks.SendPhase)
				return nil
			})
		},
	}
	stage.Flags().BoolVar(&noWait, "no-wait", false, "return once the key is staged")

	retire := &cobra.Command{
		Use:   "retire",
		Short: "Empty the slot this host does not send under (cancel a staged key, or drop the old key now)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, 5*time.Second, func(ctx context.Context, c *client.Client) error {
				if err := c.RetireKey(ctx); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "retired")
				return nil
			})
		},
	}
	cmd.AddCommand(status, stage, retire)
	return cmd
}
