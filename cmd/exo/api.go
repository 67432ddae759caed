package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

const defaultSocket = "/run/exo/exo.sock"

// sendOptions are the flags of exo send.
type sendOptions struct {
	Socket  string
	Stdin   bool
	Lines   bool
	Batch   int
	JSON    bool
	Timeout time.Duration
	Args    []string
	In      io.Reader
	Out     io.Writer
	Err     io.Writer // the per-message errors
}

func newSendCmd() *cobra.Command {
	o := &sendOptions{}
	cmd := &cobra.Command{
		Use:   "send [message ...]",
		Short: "Publish messages through the local daemon; prints where each was agreed",
		Long: `send publishes each argument (or standard input) as one message through the
local exo daemon and waits until it is agreed by the rack, then prints its
position: the sequence number of the entry and the message's index in it.
Errors say what to do: "queue full" (back off and retry), "dropped by a
reconciliation" (publish again), "message too large".

With --lines each line of standard input is one message; the lines go in
batches of --batch messages (one request and one reply per batch, a few
batches in flight), and a line that fails is named by its line number. A
batch the daemon's queue refused (none of it was queued) is sent again
after a pause, so its lines may be agreed after lines that follow them;
--batch 1 publishes line by line, as daemons without batches need.`,
		Example: `  exo send hello world            # two messages
  echo -n payload | exo send --stdin
  seq 1000 | exo send --lines --json  # one message per line
  seq 100000 | exo send --lines --batch 512`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Args, o.In, o.Out, o.Err = args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			if o.Batch < 1 || o.Batch > client.MaxBatch {
				return &exitError{code: 2, err: fmt.Errorf("--batch %d: want 1 to %d messages", o.Batch, client.MaxBatch)}
			}
			if len(args) == 0 && !o.Stdin && !o.Lines {
				return &exitError{code: 2, err: errors.New("nothing to send: give messages as arguments, or --stdin / --lines")}
			}
			return runSend(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Socket, "socket", defaultSocket, "the daemon's API socket")
	cmd.Flags().BoolVar(&o.Stdin, "stdin", false, "send all of standard input as one message")
	cmd.Flags().BoolVar(&o.Lines, "lines", false, "send each line of standard input as one message (in batches: --batch)")
	cmd.Flags().IntVar(&o.Batch, "batch", 256, "with --lines: messages per batch request (1: one publish per line)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON object per message")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 30*time.Second, "give up waiting for agreement after this long (with --lines: for each batch)")
	return cmd
}

// runSend publishes the messages o names and prints where each was
// agreed, in order, and why a message was not.
func runSend(ctx context.Context, o *sendOptions) error {
	failed, total := 0, 0
	each := func(m client.Sent) {
		total++
		what := fmt.Sprintf("message %d", m.N)
		if o.Lines && o.Batch > 1 {
			what = fmt.Sprintf("line %d", m.N)
		}
		switch {
		case m.Err != nil:
			failed++
			fmt.Fprintf(o.Err, "exo send: %s: %v\n", what, m.Err)
		case o.JSON && o.Lines && o.Batch > 1:
			json.NewEncoder(o.Out).Encode(map[string]any{"line": m.N, "seq": m.Pos.Seq, "index": m.Pos.Index, "bytes": m.Bytes})
		case o.JSON:
			json.NewEncoder(o.Out).Encode(map[string]any{"seq": m.Pos.Seq, "index": m.Pos.Index, "bytes": m.Bytes})
		default:
			fmt.Fprintf(o.Out, "agreed at seq %d index %d (%d bytes)\n", m.Pos.Seq, m.Pos.Index, m.Bytes)
		}
	}
	var err error
	if o.Lines && o.Batch > 1 {
		err = client.SendLines(ctx, o.Socket, o.In, client.LinesOptions{Batch: o.Batch, Timeout: o.Timeout, Source: "standard input"}, each)
	} else {
		err = client.Send(ctx, o.Socket, func() ([][]byte, error) { return sendMessages(o) }, o.Timeout, each)
	}
	var le *client.LinesError
	switch {
	case errors.As(err, &le):
		return &exitError{code: 1, err: fmt.Errorf("%w%s", err, linesHint(le.Err))}
	case err != nil:
		return err
	case failed > 0:
		return &exitError{code: 1, err: fmt.Errorf("%d of %d messages failed", failed, total)}
	}
	return nil
}

// sendMessages are the messages of exo send without batches: the
// arguments, all of standard input (--stdin), or its lines (--lines).
func sendMessages(o *sendOptions) ([][]byte, error) {
	switch {
	case o.Stdin:
		b, err := io.ReadAll(o.In)
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		return [][]byte{b}, nil
	case o.Lines:
		msgs, err := client.ReadLines(o.In)
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		return msgs, nil
	}
	var msgs [][]byte
	for _, a := range o.Args {
		msgs = append(msgs, []byte(a))
	}
	return msgs, nil
}

// linesHint says which flag helps with a batch that failed whole.
func linesHint(err error) string {
	var ae *client.APIError
	switch {
	case errors.Is(err, client.ErrTooLarge):
		return " (send smaller batches: --batch)"
	case errors.As(err, &ae) && ae.Code == client.CodeBadRequest:
		return " (a daemon without batches? --batch 1 publishes line by line)"
	}
	return ""
}

func newTailCmd() *cobra.Command {
	var socket string
	var from uint64
	var jsonOut, follow bool
	var count int
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow the agreed stream of the local daemon",
		Long: `tail prints agreed messages in order, from --from on: the same sequence at
every host of the rack. With --json one object per line (seq, index, sender,
payload as text when it is valid UTF-8, else base64 in payload_b64).`,
		Example: `  exo tail
  exo tail --from 0 --count 100 --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			return client.Tail(cmd.Context(), socket, from, count, func(m client.Message) error {
				if jsonOut {
					return json.NewEncoder(out).Encode(m.Record())
				}
				fmt.Fprintln(out, m.Line())
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&socket, "socket", defaultSocket, "the daemon's API socket")
	cmd.Flags().Uint64Var(&from, "from", 0, "first sequence number")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many messages (0: follow)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "one JSON object per message")
	cmd.Flags().BoolVar(&follow, "follow", true, "keep following (the default)")
	return cmd
}

func newStatusCmd() *cobra.Command {
	var socket string
	var jsonOut, brief bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the local daemon's pointers, epoch, token and counters",
		Long: `Show the local daemon's pointers, epoch, token and counters.

--brief prints one line, healthy, degraded or halted with the reasons, and
exits with 0 (healthy), 1 (degraded: members skipped in the token order,
this host behind the rack, or out of the roster), 2 (halted: a view change
runs or waits, a state transfer runs, another daemon sends as this member
id) or 3 (the daemon did not answer), for scripts and monitoring, as
corosync-cfgtool -b does. A view change lasts milliseconds: halted twice, a
second apart, is a problem.`,
		Example: `  exo status --socket /run/exo/a.sock
  exo status --brief || echo "exo needs attention: $?"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			raw, err := client.ReadStatus(ctx, socket)
			if err != nil {
				if brief {
					return &exitError{code: 3, err: err}
				}
				return err
			}
			out := cmd.OutOrStdout()
			if brief {
				var st daemon.Status
				if err := json.Unmarshal(raw, &st); err != nil {
					return &exitError{code: 3, err: fmt.Errorf("status: %w", err)}
				}
				h, why := st.Health()
				fmt.Fprintf(out, "%s: %s\n", h, strings.Join(why, "; "))
				if h != daemon.Healthy {
					return &exitError{code: int(h), err: fmt.Errorf("%s", h), quiet: true}
				}
				return nil
			}
			if jsonOut {
				fmt.Fprintln(out, string(raw))
				return nil
			}
			return daemon.WriteStatusText(out, raw)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", defaultSocket, "the daemon's API socket")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the status as JSON")
	cmd.Flags().BoolVar(&brief, "brief", false, "one line and an exit code: 0 healthy, 1 degraded, 2 halted, 3 no answer")
	cmd.MarkFlagsMutuallyExclusive("json", "brief")
	return cmd
}
