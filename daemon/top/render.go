package top

import (
	"fmt"
	"strings"
	"time"
)

// Render renders a snapshot as the text of one frame: the header, the
// rack's totals and one row per host, without escape codes.
func Render(s Snapshot) string {
	var b strings.Builder
	holder := s.Totals.Holder
	if holder == "" {
		holder = "-"
	}
	fmt.Fprintf(&b, "exo top  %s  hosts %d/%d up  token at %s  epoch %d  every %v\n",
		s.Time.Format("2006-01-02 15:04:05"), s.Totals.Up, s.Totals.Hosts, holder, s.Totals.Epoch,
		time.Duration(s.Interval*float64(time.Second)).Round(time.Millisecond))
	slowest := "-"
	if s.Totals.SlowestHost != "" {
		slowest = fmt.Sprintf("%d (%s)", s.Totals.SlowestLag, s.Totals.SlowestHost)
	}
	floor := "-"
	if s.Totals.RackFloor != nil {
		floor = fmt.Sprint(*s.Totals.RackFloor)
	}
	fmt.Fprintf(&b, "rack: agreed %s msgs/s  slowest lag %s  append %d  floor %s  rejects %s/s\n",
		rateCell(s.Totals.AgreedRate, true), slowest, s.Totals.MaxAppend, floor, rateCell(s.Totals.Rejects, true))
	nw := 4
	for _, h := range s.Hosts {
		nw = max(nw, len(h.Name))
	}
	const format = "%-*s %3s  %-8s %5s %4s %4s %11s %11s %7s %6s %7s %8s %8s %9s %8s %7s  %-17s %s"
	line := func(cells ...any) {
		fmt.Fprintf(&b, format, append([]any{nw}, cells...)...)
		b.WriteByte('\n')
	}
	line("HOST", "ID", "ROLE", "EPOCH", "HALT", "KEY", "APPEND", "AGREED", "LAG", "QUEUE", "TIMEOUT", "IN/s", "OUT/s", "AGREED/s", "FETCH/s", "REJ/s", "TOP REJECT", "OFFLOAD")
	for _, h := range s.Hosts {
		if !h.Up {
			fmt.Fprintf(&b, "%-*s %3s  %-8s %s\n", nw, h.Name, "-", "down", h.Error)
			continue
		}
		role := " " + h.Role
		if h.TokenHolder {
			role = "*" + h.Role
		}
		halt := "no"
		switch {
		case h.Transfer:
			halt = "XFER"
		case h.Halted:
			halt = "YES"
		}
		top := h.TopReject
		if top == "" {
			top = "-"
		}
		if h.Transfer && h.TransferETA > 0 {
			top = "xfer ETA " + time.Duration(h.TransferETA*float64(time.Second)).Round(time.Second).String()
			if h.TransferPace > 0 {
				top += fmt.Sprintf(" @%.0fMB/s", float64(h.TransferPace)/1e6)
			}
		}
		key := h.Key
		if key == "" {
			key = "-"
		}
		line(h.Name, fmt.Sprint(h.ID), role, fmt.Sprint(h.Epoch), halt, key, fmt.Sprint(h.Append), fmt.Sprint(h.Agreed),
			fmt.Sprint(h.Lag), fmt.Sprint(h.QueueDepth), timeoutCell(h.TimeoutMs), rateCell(h.FramesIn, h.Rates), rateCell(h.FramesOut, h.Rates),
			rateCell(h.AgreedRate, h.Rates), rateCell(h.Fetched, h.Rates), rateCell(h.Rejects, h.Rates), top, offloadCell(h.Offload))
	}
	return b.String()
}

// timeoutCell is the token timeout cell: "-" when the status has none.
func timeoutCell(ms float64) string {
	if ms <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", ms)
}

// rateCell is a per-second rate: one decimal below 10, "-" when there is
// none yet (ok false).
func rateCell(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	if v > 0 && v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// offloadCell is the OFFLOAD cell: the fast path's mode and counters.
func offloadCell(o *Offload) string {
	if o == nil {
		return "-"
	}
	cell := o.Mode + " dropped " + fmt.Sprint(o.Dropped)
	if o.TopDrop != "" {
		cell += " (" + o.TopDrop + ")"
	}
	if o.InlineDrops > 0 {
		cell += fmt.Sprintf(" inline %d", o.InlineDrops)
	}
	if o.Disagreements > 0 {
		cell += fmt.Sprintf(" DIFFER %d", o.Disagreements)
	}
	cell += fmt.Sprintf(" writes %d", o.StateWrites)
	if o.Error != "" {
		cell += " error: " + o.Error
	}
	return cell
}
