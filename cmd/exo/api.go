package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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
	Err     io.Writer // the per-message errors (os.Stderr if nil)
}

// sendWindow is how many batches exo send --lines keeps in flight.
const sendWindow = 4

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

func runSend(ctx context.Context, o *sendOptions) error {
	if o.Err == nil {
		o.Err = os.Stderr
	}
	if o.Lines && o.Batch > 1 {
		return runSendLines(ctx, o)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c, err := client.Dial(ctx, o.Socket)
	if err != nil {
		return err
	}
	defer c.Close()
	var msgs [][]byte
	switch {
	case o.Stdin:
		b, err := io.ReadAll(o.In)
		if err != nil {
			return fmt.Errorf("reading standard input: %w", err)
		}
		msgs = append(msgs, b)
	case o.Lines:
		sc := bufio.NewScanner(o.In)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			msgs = append(msgs, append([]byte(nil), sc.Bytes()...))
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("reading standard input: %w", err)
		}
	default:
		for _, a := range o.Args {
			msgs = append(msgs, []byte(a))
		}
	}
	acks := make([]<-chan client.Ack, len(msgs))
	for i, m := range msgs {
		if acks[i], err = c.PublishAsync(m); err != nil {
			return err
		}
	}
	failed := 0
	for i, ch := range acks {
		var a client.Ack
		select {
		case a = <-ch:
		case <-ctx.Done():
			return fmt.Errorf("message %d: not agreed within %v: %w", i, o.Timeout, ctx.Err())
		}
		if a.Err != nil {
			failed++
			fmt.Fprintf(o.Err, "exo send: message %d: %v\n", i, a.Err)
			continue
		}
		if o.JSON {
			json.NewEncoder(o.Out).Encode(map[string]any{"seq": a.Pos.Seq, "index": a.Pos.Index, "bytes": len(msgs[i])})
		} else {
			fmt.Fprintf(o.Out, "agreed at seq %d index %d (%d bytes)\n", a.Pos.Seq, a.Pos.Index, len(msgs[i]))
		}
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d messages failed", failed, len(msgs))}
	}
	return nil
}

// sendBatch is a batch of lines of exo send --lines on its way.
type sendBatch struct {
	line int // the line number of its first message (from 1)
	msgs [][]byte
	ch   <-chan client.BatchAck
	sent time.Time
}

// runSendLines publishes the lines of o.In in batches of o.Batch, with
// sendWindow batches in flight, and prints the outcome of every line in
// input order.
func runSendLines(ctx context.Context, o *sendOptions) error {
	dctx, cancel := context.WithTimeout(ctx, o.Timeout)
	c, err := client.Dial(dctx, o.Socket)
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	send := func(b *sendBatch) error {
		ch, err := c.PublishBatchAsync(b.msgs)
		if err != nil {
			return batchFailed(b, err)
		}
		b.ch, b.sent = ch, time.Now()
		return nil
	}
	enc := json.NewEncoder(o.Out)
	failed, total := 0, 0
	// finish waits for the oldest batch and prints its lines; a batch
	// refused by a full queue goes again (none of it was queued).
	finish := func(b *sendBatch) error {
		for attempt := 0; ; attempt++ {
			var r client.BatchAck
			select {
			case r = <-b.ch:
			case <-time.After(time.Until(b.sent.Add(o.Timeout))):
				return fmt.Errorf("lines %d-%d: not agreed within %v", b.line, b.line+len(b.msgs)-1, o.Timeout)
			case <-ctx.Done():
				return fmt.Errorf("lines %d-%d: %w", b.line, b.line+len(b.msgs)-1, ctx.Err())
			}
			if errors.Is(r.Err, client.ErrQueueFull) && time.Since(b.sent) < o.Timeout {
				select {
				case <-time.After(time.Duration(1+attempt%16) * time.Millisecond):
				case <-ctx.Done():
				}
				sent := b.sent
				if err := send(b); err != nil {
					return err
				}
				b.sent = sent // the timeout counts from the first try
				continue
			}
			if r.Err != nil {
				return batchFailed(b, r.Err)
			}
			for i, a := range r.Acks {
				line := b.line + i
				if a.Err != nil {
					failed++
					fmt.Fprintf(o.Err, "exo send: line %d: %v\n", line, a.Err)
					continue
				}
				if o.JSON {
					enc.Encode(map[string]any{"line": line, "seq": a.Pos.Seq, "index": a.Pos.Index, "bytes": len(b.msgs[i])})
				} else {
					fmt.Fprintf(o.Out, "agreed at seq %d index %d (%d bytes)\n", a.Pos.Seq, a.Pos.Index, len(b.msgs[i]))
				}
			}
			return nil
		}
	}
	var window []*sendBatch
	sc := bufio.NewScanner(o.In)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	cur := &sendBatch{line: 1}
	flush := func() error {
		if len(cur.msgs) == 0 {
			return nil
		}
		total += len(cur.msgs)
		if len(window) == sendWindow {
			if err := finish(window[0]); err != nil {
				return err
			}
			window = window[1:]
		}
		if err := send(cur); err != nil {
			return err
		}
		window = append(window, cur)
		cur = &sendBatch{line: cur.line + len(cur.msgs)}
		return nil
	}
	for sc.Scan() {
		cur.msgs = append(cur.msgs, append([]byte(nil), sc.Bytes()...))
		if len(cur.msgs) == o.Batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading standard input (line %d): %w", cur.line+len(cur.msgs), err)
	}
	if err := flush(); err != nil {
		return err
	}
	for _, b := range window {
		if err := finish(b); err != nil {
			return err
		}
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d messages failed", failed, total)}
	}
	return nil
}

// batchFailed is the error of a batch that failed as a whole, naming its
// lines.
func batchFailed(b *sendBatch, err error) error {
	hint := ""
	var ae *client.APIError
	switch {
	case errors.Is(err, client.ErrTooLarge):
		hint = " (send smaller batches: --batch)"
	case errors.As(err, &ae) && ae.Code == client.CodeBadRequest:
		hint = " (a daemon without batches? --batch 1 publishes line by line)"
	}
	return &exitError{code: 1, err: fmt.Errorf("lines %d-%d: %w%s", b.line, b.line+len(b.msgs)-1, err, hint)}
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
			n := 0
			err := client.Subscribe(cmd.Context(), socket, from, func(m client.Message) error {
				if jsonOut {
					rec := map[string]any{"seq": m.Seq, "index": m.Index, "sender": m.Sender}
					if isText(m.Payload) {
						rec["payload"] = string(m.Payload)
					} else {
						rec["payload_b64"] = m.Payload
					}
					if err := json.NewEncoder(out).Encode(rec); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(out, "%d.%d from %d: %s\n", m.Seq, m.Index, m.Sender, printable(m.Payload))
				}
				n++
				if count > 0 && n >= count {
					return errStop
				}
				return nil
			})
			if errors.Is(err, errStop) || (errors.Is(err, context.Canceled) && cmd.Context().Err() != nil) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&socket, "socket", defaultSocket, "the daemon's API socket")
	cmd.Flags().Uint64Var(&from, "from", 0, "first sequence number")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many messages (0: follow)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "one JSON object per message")
	cmd.Flags().BoolVar(&follow, "follow", true, "keep following (the default)")
	return cmd
}

var errStop = errors.New("stop")

func isText(b []byte) bool {
	for _, c := range string(b) {
		if c == 0xFFFD || (c < 0x20 && c != '\n' && c != '\t') {
			return false
		}
	}
	return true
}

func printable(b []byte) string {
	if isText(b) {
		if len(b) > 200 {
			return fmt.Sprintf("%s... (%d bytes)", b[:200], len(b))
		}
		return string(b)
	}
	return fmt.Sprintf("<%d bytes of binary>", len(b))
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
			raw, err := statusRaw(ctx, socket)
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
			var st map[string]any
			if err := json.Unmarshal(raw, &st); err != nil {
				return err
			}
			if dup, ok := st["duplicate_id"].(map[string]any); ok {
				// First: the host stopped sending (daemon/dupid.go).
				fmt.Fprintf(out, "%-20s ALARM: %v (first seen %v at seq %v, %v frames, from %v). Check: %v. Fix: %v\n",
					"duplicate_id", dup["message"], dup["first_seen"], dup["seq"], dup["frames"], dup["macs"], dup["check"], dup["fix"])
			}
			keys := []string{"id", "hosts", "roster", "epoch", "halted", "append_pointer", "agreement_pointer", "token_holder",
				"queue_depth", "messages_delivered", "publishes_waiting", "subscribers", "skipped_hosts"}
			for _, k := range keys {
				fmt.Fprintf(out, "%-20s %v\n", k, st[k])
			}
			fmt.Fprintf(out, "%-20s %s\n", "log", logLine(st))
			if ks, ok := st["keys"].(map[string]any); ok {
				line := fmt.Sprintf("sending under slot %v", ks["send_phase"])
				switch {
				case ks["staged"] == true:
					line += fmt.Sprintf("; new key staged, waiting for %v", ks["waiting_for"])
				case ks["old_key_valid"] == true:
					line += fmt.Sprintf("; old key still valid (members not yet moved: %v)", ks["not_moved"])
				}
				fmt.Fprintf(out, "%-20s %s (exo key status)\n", "keys", line)
			}
			if rs, ok := st["recovery"].(map[string]any); ok {
				fmt.Fprintf(out, "%-20s %s\n", "recovery", recoveryLine(rs))
			}
			if ds, ok := st["detector"].(map[string]any); ok {
				fmt.Fprintf(out, "%-20s %v ms (%v ticks, between %v and %v; smoothed gap %.2f ticks, deviation %.2f, %v samples); false takeovers %v\n",
					"token_timeout", ds["timeout_ms"], ds["timeout_ticks"], ds["min_ticks"], ds["max_ticks"], ds["srtt_ticks"], ds["rttvar_ticks"], ds["samples"], ds["false_takeovers"])
			}
			if cs, ok := st["counters"].(map[string]any); ok {
				var parts []string
				for k, v := range cs {
					parts = append(parts, fmt.Sprintf("%s=%v", k, v))
				}
				fmt.Fprintf(out, "%-20s %s\n", "counters", strings.Join(slices.Sorted(slices.Values(parts)), " "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&socket, "socket", defaultSocket, "the daemon's API socket")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the status as JSON")
	cmd.Flags().BoolVar(&brief, "brief", false, "one line and an exit code: 0 healthy, 1 degraded, 2 halted, 3 no answer")
	cmd.MarkFlagsMutuallyExclusive("json", "brief")
	return cmd
}

// statusRaw asks the daemon at socket for its status (JSON).
func statusRaw(ctx context.Context, socket string) ([]byte, error) {
	c, err := client.Dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.StatusRaw(ctx)
}

// logLine says where this host's log starts in memory and where what it
// serves to joiners starts (the retained durable log), and its size.
func logLine(st map[string]any) string {
	line := fmt.Sprintf("in memory from seq %v", st["log_base"])
	if st["retained_base"] != nil && st["retained_base"] != st["log_base"] {
		line += fmt.Sprintf("; retained on disk from seq %v (served to hosts that join or fall behind)", st["retained_base"])
	}
	if b, ok := st["log_bytes"].(float64); ok && b > 0 {
		line += fmt.Sprintf("; durable log %.1f MiB", b/(1<<20))
	}
	if f, ok := st["rack_floor"]; ok {
		line += fmt.Sprintf("; the rack's floor (a majority serves from) seq %v", f)
	}
	return line
}

// recoveryLine is the status's recovery object in one line: in step, or
// how far behind and what the host does about it.
func recoveryLine(rs map[string]any) string {
	var parts []string
	switch {
	case rs["behind_epoch"] == true:
		parts = append(parts, fmt.Sprintf("behind: the rack is in epoch %v", rs["rack_epoch"]))
	case rs["behind_entries"] != nil && rs["behind_entries"] != float64(0):
		parts = append(parts, fmt.Sprintf("behind by %v entries", rs["behind_entries"]))
	default:
		parts = append(parts, "in step")
	}
	if rs["state_transfer"] == true {
		to := "?"
		if v, ok := rs["transfer_to"]; ok {
			to = fmt.Sprint(v)
		}
		parts = append(parts, fmt.Sprintf("state transfer: fetching the rack's agreed log up to seq %s before rejoining (the rack's newest frame heard: seq %v; progress: append_pointer, counters fetched_entries, exo top's ETA)", to, rs["rack_seq"]))
	}
	if rs["fetching"] == true {
		parts = append(parts, fmt.Sprintf("fetching from member %v (%v ticks)", rs["fetch_peer"], rs["fetch_ticks"]))
	}
	if g, ok := rs["gathered_entries"].(float64); ok && g > 0 {
		parts = append(parts, fmt.Sprintf("gathered %v entries of epoch %v", g, rs["gather_epoch"]))
	}
	if vc, ok := rs["view_change"].(map[string]any); ok {
		line := fmt.Sprintf("leading view change %v (promises %v of %v needed", vc["epoch"], vc["promised"], vc["need"])
		if vc["ambiguous"] == true {
			line += ", waits on hosts that lost their state: exo recover shows what accepting the loss gives up"
		}
		parts = append(parts, line+")")
	}
	return strings.Join(parts, "; ")
}
