package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/daemon/top"
)

func newTopCmd() *cobra.Command {
	var o top.Options
	var once, jsonOut bool
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Live view of the rack: pointers, lag, token, rates, rejects and offload of every host",
		Long: `top asks every given daemon for its status over its local API socket, every
--interval, and shows one row per host:

  HOST, ID      the socket's name (A, B, ... in a cluster directory) and the daemon's id
  ROLE          *holder: the token holder (as the host with the newest log sees it);
                skipped: the token order skips it; down: the socket did not answer
  EPOCH, HALT   the host's epoch (view) and whether a view change holds it
                (XFER: it fetches the rack's agreed log before it rejoins, a
                state transfer; FETCH/s is its rate)
  APPEND        the append pointer: the next sequence number the host expects
  AGREED        the agreement pointer: every entry below it is agreed
  LAG           how far the append pointer is behind the highest of the rack
  QUEUE         payload records waiting for the token
  IN/s, OUT/s   Exo frames received and broadcast per second
  AGREED/s      agreed messages delivered per second
  FETCH/s       entries its fetches brought per second: gap repair, a catch-up
  REJ/s         frames not appended per second, and the most frequent reason
  OFFLOAD       the fast path (xdp, fpga-sim): frames it dropped itself (and the
                most frequent reason), inline drops, pointer writes

The header has the time, the hosts that answered, the token holder and the rack
totals: agreed messages per second (every host delivers the same stream, so the
fastest host's rate) and the slowest host's lag. Rates are the difference of two
samples one interval apart. A host that does not answer shows as down and the
view keeps going.

Sockets: --socket (repeatable) names daemons' API sockets; --cluster-dir a
directory of <Host>.sock files (a cluster.Start directory, as exo demo and the
tests make), scanned again at every refresh. Unix sockets live in the file
system, so root in the root namespace reaches the daemons of every lab host.

Keys: q (or Ctrl-C) quits. --once prints one frame (two samples, one interval
apart) and exits, 1 when no host answered; --json prints the same data as JSON
(with --once one object, else one object per line per interval).`,
		Example: `  exo top                                   # the local daemon (/run/exo/exo.sock)
  sudo exo top --cluster-dir /tmp/exo-demo-909080201
  exo top --socket /run/exo/a.sock --socket /run/exo/b.sock --interval 1s
  exo top --cluster-dir DIR --once --json | jq '.totals'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitError{code: 2, err: fmt.Errorf("top takes no arguments (got %q): name daemons with --socket or --cluster-dir", args)}
			}
			if o.Interval < 10*time.Millisecond {
				return &exitError{code: 2, err: fmt.Errorf("--interval %v: want at least 10ms", o.Interval)}
			}
			if o.Timeout < 0 {
				return &exitError{code: 2, err: fmt.Errorf("--timeout %v: want a positive duration", o.Timeout)}
			}
			if len(o.Sockets) == 0 && o.ClusterDir == "" {
				o.Sockets = []string{defaultSocket}
			}
			if o.ClusterDir != "" {
				if fi, err := os.Stat(o.ClusterDir); err != nil || !fi.IsDir() {
					return &exitError{code: 2, err: fmt.Errorf("--cluster-dir %s: not a directory", o.ClusterDir)}
				}
			}
			out := cmd.OutOrStdout()
			if !once {
				err := top.Run(cmd.Context(), o, top.View{In: cmd.InOrStdin(), Out: out, JSON: jsonOut, Terminal: isTerminal(out)})
				return topExit(err)
			}
			snap, err := top.Once(cmd.Context(), o)
			if err != nil {
				return topExit(err)
			}
			if jsonOut {
				if err := writeJSON(out, snap); err != nil {
					return err
				}
			} else {
				fmt.Fprint(out, top.Render(snap))
			}
			if snap.Totals.Up == 0 {
				return &exitError{code: 1, err: fmt.Errorf("no host answered (of %d)", len(snap.Hosts))}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&o.Sockets, "socket", nil, "a daemon's API socket (repeat for several hosts; default "+defaultSocket+" when no --cluster-dir)")
	cmd.Flags().StringVar(&o.ClusterDir, "cluster-dir", "", "a directory of <Host>.sock API sockets (cluster.Start's layout)")
	cmd.Flags().DurationVar(&o.Interval, "interval", 500*time.Millisecond, "refresh interval (and the window of the rates)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "how long to wait for a host's status before showing it down (default: the interval, at most 1s)")
	cmd.Flags().BoolVar(&once, "once", false, "print one frame and exit (for scripts)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON instead of the table")
	return cmd
}

// topExit gives exit code 1 to a view with nothing to watch.
func topExit(err error) error {
	if errors.Is(err, top.ErrNoSockets) {
		return &exitError{code: 1, err: err}
	}
	return err
}
