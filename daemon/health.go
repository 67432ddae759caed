package daemon

import "fmt"

// Health is what a host's status says at a glance (exo status --brief),
// and the exit code of that command, in the manner of corosync-cfgtool
// -b: scripts and monitoring read the code, people the line.
type Health int

const (
	// Healthy: a member in step with the rack, every member in the token
	// order, nothing wrong seen.
	Healthy Health = 0
	// Degraded: the host works but something needs watching: members
	// skipped in the token order (down, or cut off), the host behind the
	// rack or catching up, or out of the roster (removed, or a spare).
	Degraded Health = 1
	// Halted: the host does not send: a view change runs or waits (on
	// hosts that lost their state: exo recover), a state transfer runs,
	// or another daemon sends as its member id. A view change lasts
	// milliseconds: a check that sees halted twice, a second apart, has
	// found a problem.
	Halted Health = 2
)

func (h Health) String() string {
	switch h {
	case Healthy:
		return "healthy"
	case Degraded:
		return "degraded"
	case Halted:
		return "halted"
	}
	return fmt.Sprintf("health(%d)", int(h))
}

// Health classifies the status: the level, and the reasons for it, the
// most serious first (for Healthy, one line that says where the host is).
func (s Status) Health() (Health, []string) {
	var halted, degraded []string
	if d := s.DuplicateID; d != nil {
		halted = append(halted, fmt.Sprintf("another host sends as member id %d (from %s): this host stopped sending", d.MemberID, d.MAC))
	}
	rec := s.Recovery
	switch vc := rec.ViewChange; {
	case vc != nil && vc.Ambiguous:
		halted = append(halted, fmt.Sprintf("view change %d waits on hosts that lost their state (exo recover shows what accepting the loss gives up)", vc.Epoch))
	case vc != nil:
		halted = append(halted, fmt.Sprintf("leading view change %d (%d of %d promises)", vc.Epoch, len(vc.Promised), vc.Need))
	case rec.StateTransfer:
		line := fmt.Sprintf("state transfer: fetching the rack's agreed log (at seq %d of %d)", s.Append, rec.TransferTo)
		if rec.TransferPace > 0 {
			line += fmt.Sprintf(", paced at %.1f MB/s", float64(rec.TransferPace)/1e6)
			if rec.TransferRackPercent > 0 {
				line += fmt.Sprintf(" (the rack at %d%% of its rate in the pauses)", rec.TransferRackPercent)
			}
		}
		halted = append(halted, line)
	case s.Halted && !s.Removed:
		halted = append(halted, fmt.Sprintf("not sending in epoch %d (promised epoch %d to a view change)", s.Epoch, s.Promised))
	}
	if s.Removed {
		degraded = append(degraded, "not a member of the roster (removed, or a spare that follows the log)")
	}
	if len(s.Skipped) > 0 {
		degraded = append(degraded, fmt.Sprintf("members at positions %v skipped in the token order (down or cut off)", s.Skipped))
	}
	switch {
	case rec.BehindEpoch:
		degraded = append(degraded, fmt.Sprintf("behind: the rack is in epoch %d", rec.RackEpoch))
	case rec.BehindEntries > 0:
		degraded = append(degraded, fmt.Sprintf("behind the rack by %d entries", rec.BehindEntries))
	}
	switch {
	case len(halted) > 0:
		return Halted, append(halted, degraded...)
	case len(degraded) > 0:
		return Degraded, degraded
	}
	return Healthy, []string{fmt.Sprintf("member %d in step: epoch %d, agreed to seq %d, %d members", s.ID, s.Epoch, s.Agreed, len(s.Roster))}
}
