package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteStatusText writes a daemon's status (its JSON, raw) as exo status
// prints it: the duplicate member id alarm first, then one line a field,
// the log, keys, recovery and token timeout in words, and the counters. It
// reads the JSON field by field rather than as a Status, so that the
// status of an older or newer daemon prints too.
func WriteStatusText(out io.Writer, raw []byte) error {
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if dup, ok := st["duplicate_id"].(map[string]any); ok {
		// First: the host stopped sending (dupid.go).
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
		fmt.Fprintf(out, "%-20s %v ms (%v ticks, between %v and %v; smoothed gap %.2f ticks, deviation %.2f, longest of the last 33-66 s %v, %v samples); false takeovers %v, late frames of holders passed over %v\n",
			"token_timeout", ds["timeout_ms"], ds["timeout_ticks"], ds["min_ticks"], ds["max_ticks"], ds["srtt_ticks"], ds["rttvar_ticks"], ds["peak_ticks"], ds["samples"], ds["false_takeovers"], ds["late_frames"])
		if g, ok := ds["gone"].([]any); ok && len(g) > 0 {
			fmt.Fprintf(out, "%-20s members %v (their daemon's sockets closed: the token is taken over from them after %v ticks)\n", "gone", g, ds["gone_ticks"])
		}
	}
	if ms, ok := st["memory"].(map[string]any); ok {
		anon, _ := ms["anon_bytes"].(float64)
		huge, _ := ms["huge_bytes"].(float64)
		line := fmt.Sprintf("%.0f MiB anonymous, %.0f MiB of it in huge pages (huge_pages %v)", anon/(1<<20), huge/(1<<20), ms["huge_pages"])
		if e, ok := ms["error"].(string); ok && e != "" {
			line += "; the kernel refused some: " + e
		}
		fmt.Fprintf(out, "%-20s %s\n", "memory", line)
	}
	if cs, ok := st["counters"].(map[string]any); ok {
		var parts []string
		for k, v := range cs {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
		fmt.Fprintf(out, "%-20s %s\n", "counters", strings.Join(slices.Sorted(slices.Values(parts)), " "))
	}
	return nil
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
		if pace, ok := rs["transfer_pace_bytes_per_second"].(float64); ok && pace > 0 {
			p := fmt.Sprintf("paced at %.1f MB/s", pace/1e6)
			if pct, ok := rs["transfer_rack_percent"].(float64); ok && pct > 0 {
				p += fmt.Sprintf(", the rack at %v%% of its rate in the transfer's pauses (transfer_yield)", pct)
			}
			parts = append(parts, p)
		}
	}
	if rs["fetching"] == true {
		parts = append(parts, fmt.Sprintf("fetching from member %v (%v ticks)", rs["fetch_peer"], rs["fetch_ticks"]))
	}
	if g, ok := rs["gathered_entries"].(float64); ok && g > 0 {
		parts = append(parts, fmt.Sprintf("gathered %v entries of epoch %v", g, rs["gather_epoch"]))
	}
	if vc, ok := rs["view_change"].(map[string]any); ok {
		line := fmt.Sprintf("leading view change %v (promises %v of %v needed", vc["epoch"], vc["promised"], vc["need"])
		if c, ok := vc["cause"].(string); ok && c != "" {
			line += ", started on " + c
		}
		if vc["ambiguous"] == true {
			line += ", waits on hosts that lost their state: exo recover shows what accepting the loss gives up"
		}
		parts = append(parts, line+")")
	}
	return strings.Join(parts, "; ")
}
