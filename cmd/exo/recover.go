package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

func newRecoverCmd() *cobra.Command {
	var socket string
	var accept, yes, jsonOut bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Show, or accept, what a view change stalled on lost state would give up",
		Long: `A view change waits, rather than guess, when what may have been agreed
can only be told by hosts that lost their state (a wiped disk, --join): a
fork only they could decide, or too few members that kept their state. The
rack then stays halted (exo status: recovery.view_change.ambiguous).

exo recover, at the daemon that leads that view change, prints what
resolving it without those hosts gives up: the positions in doubt (an entry
agreed there on another branch, and delivered at a host that lost its
state, is lost) and the entries of other branches the answering hosts hold.
With --accept-loss it asks for confirmation (or --yes) and resolves it: the
rack moves on; the positions in doubt may differ from what a host that lost
its state delivered. It refuses unless the daemon leads such a view change,
and if the doubt changed since it was shown.`,
		Example: `  exo recover --socket /run/exo/a.sock                 # what would be lost, if stalled
  exo recover --socket /run/exo/a.sock --accept-loss   # resolve it, after confirmation`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			c, err := client.Dial(ctx, socket)
			if err != nil {
				return err
			}
			defer c.Close()
			return recoverRack(ctx, c, cmd.InOrStdin(), cmd.OutOrStdout(), accept, yes, jsonOut)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", defaultSocket, "the API socket of the daemon that leads the stalled view change")
	cmd.Flags().BoolVar(&accept, "accept-loss", false, "resolve the stalled view change without the hosts that lost their state")
	cmd.Flags().BoolVar(&yes, "yes", false, "with --accept-loss: do not ask for confirmation")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the view change and its doubt as JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// recoverRack shows the stalled view change's doubt and, with accept,
// accepts it once confirmed.
func recoverRack(ctx context.Context, c *client.Client, in io.Reader, out io.Writer, accept, yes, jsonOut bool) error {
	raw, err := c.StatusRaw(ctx)
	if err != nil {
		return err
	}
	var st daemon.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	vc := st.Recovery.ViewChange
	if vc == nil || !vc.Ambiguous || vc.Doubt == nil {
		if jsonOut {
			return json.NewEncoder(out).Encode(map[string]any{"stalled": false})
		}
		fmt.Fprintf(out, "not stalled on lost state: this daemon (member %d, epoch %d) leads no view change that waits on hosts that lost their state; nothing to recover here\n", st.ID, st.Epoch)
		if accept {
			return fmt.Errorf("accept-loss refused: nothing to accept at this daemon (run it at the daemon whose status shows recovery.view_change.ambiguous)")
		}
		return nil
	}
	d := vc.Doubt
	if jsonOut && !accept {
		return json.NewEncoder(out).Encode(map[string]any{"stalled": true, "view_change": vc})
	}
	to := "on"
	if d.To != 0 {
		to = fmt.Sprintf("up to %d", d.To-1)
	}
	fmt.Fprintf(out, "stalled: view change %d (promises from %v) waits on what only hosts that lost their state could decide\n", vc.Epoch, vc.Promised)
	fmt.Fprintf(out, "in doubt: positions from %d %s: an entry agreed there on another branch, and delivered at a host that lost its state, would be lost\n", d.From, to)
	if len(d.Lost) == 0 {
		fmt.Fprintln(out, "entries of other branches held by the hosts that answered: none")
	} else {
		fmt.Fprintf(out, "entries of other branches held by the hosts that answered (%d), not installed:\n", len(d.Lost))
		for _, e := range d.Lost {
			fmt.Fprintf(out, "  seq %d epoch %d sender %d (%d records)\n", e.Seq, e.Epoch, e.Sender, e.Records)
		}
	}
	if !accept {
		fmt.Fprintln(out, "run exo recover --accept-loss to resolve it without them")
		return nil
	}
	if !yes {
		fmt.Fprint(out, "type yes to accept this loss: ")
		line, _ := bufio.NewReader(in).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return fmt.Errorf("not confirmed: nothing changed")
		}
	}
	if err := c.AcceptLoss(ctx, d.From, d.To); err != nil {
		return fmt.Errorf("accept-loss: %w", err)
	}
	fmt.Fprintf(out, "accepted: view change %d resolved without the hosts that lost their state; the rack moves on (exo status)\n", vc.Epoch)
	return nil
}
