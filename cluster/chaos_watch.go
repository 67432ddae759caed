package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/exo-rack/exo/daemon"
)

// sample is one host's status as the chaos watcher read it.
type sample struct {
	at     time.Duration // since the run started
	host   int
	agreed uint64
	epoch  uint32
	halted bool
	rec    daemon.RecoveryStatus
}

// faultSpan is a stretch of the run with one set of faults in force.
type faultSpan struct {
	from     time.Duration
	majority bool   // a majority of the hosts ran and reached each other both ways
	what     string // the action that began it
}

// Hold is a stretch of a chaos run in which the rack's agreement pointer
// (the furthest of any host) did not move, and what the hosts were doing.
type Hold struct {
	StartS   float64 `json:"start_s"` // since the run started
	Seconds  float64 `json:"seconds"`
	Agreed   uint64  `json:"agreement_pointer"`
	Majority float64 `json:"seconds_with_connected_majority"` // of Seconds, with a connected majority of live hosts
	Faults   string  `json:"faults"`                          // the nemesis actions in force during it
	Cause    string  `json:"cause"`
	// ViewChanges lists every view change seen during it, in order of
	// start (Cause shows the first few): epoch, initiator, what started
	// it, how long it was seen, its promises.
	ViewChanges []string `json:"view_changes,omitempty"`
}

// holds finds every stretch longer than min in which the rack's agreement
// pointer did not move, and explains each from the samples taken in it:
// the view changes led (by whom, epoch, promises against the majority
// needed, ambiguous forks, time-outs), the hosts halted, the hosts behind
// or catching up to a later epoch, and whether a connected majority of
// live hosts existed meanwhile (spans).
func holds(samples []sample, spans []faultSpan, end time.Duration, names []string, min time.Duration) []Hold {
	slices.SortFunc(samples, func(a, b sample) int { return int(a.at - b.at) })
	var out []Hold
	var rack uint64
	since := time.Duration(0)
	flush := func(to time.Duration) {
		if to-since < min {
			return
		}
		h := Hold{StartS: since.Seconds(), Seconds: (to - since).Seconds(), Agreed: rack}
		h.Majority, h.Faults = majorityTime(spans, since, to)
		h.Cause, h.ViewChanges = explain(samples, since, to, names)
		out = append(out, h)
	}
	for _, s := range samples {
		if s.agreed > rack {
			flush(s.at)
			rack, since = s.agreed, s.at
		}
	}
	flush(end)
	return out
}

// majorityTime returns how long, of [from, to), a connected majority of
// live hosts existed, and the actions in force.
func majorityTime(spans []faultSpan, from, to time.Duration) (float64, string) {
	var d time.Duration
	var acts []string
	for i, sp := range spans {
		end := to
		if i+1 < len(spans) {
			end = min(end, spans[i+1].from)
		}
		start := max(sp.from, from)
		if end <= start {
			continue
		}
		if sp.majority {
			d += end - start
		}
		acts = append(acts, fmt.Sprintf("%s (from %.1fs, majority %v)", sp.what, sp.from.Seconds(), sp.majority))
	}
	return d.Seconds(), strings.Join(acts, "; ")
}

// explain says what the hosts did during [from, to): which view changes
// ran and what they waited for, who was halted, who was behind; and
// lists every view change (the explanation shows the first few).
func explain(samples []sample, from, to time.Duration, names []string) (string, []string) {
	type vc struct {
		by         int
		epoch      uint32
		first      time.Duration
		last       time.Duration
		promised   []int
		need       int
		ambiguous  bool
		timedOut   int
		maxPromise int
		cause      string
	}
	vcs := map[[2]uint32]*vc{}
	halted := map[int]time.Duration{}
	behindEpoch := map[int]bool{}
	behind := map[int]uint64{}
	epochs := map[uint32]bool{}
	var lastAt = map[int]time.Duration{}
	for _, s := range samples {
		if s.at < from || s.at >= to {
			continue
		}
		epochs[s.epoch] = true
		if s.halted {
			halted[s.host] += s.at - max(lastAt[s.host], from)
		}
		lastAt[s.host] = s.at
		if s.rec.BehindEpoch {
			behindEpoch[s.host] = true
		}
		if s.rec.BehindEntries > 1024 {
			behind[s.host] = max(behind[s.host], s.rec.BehindEntries)
		}
		if v := s.rec.ViewChange; v != nil {
			k := [2]uint32{uint32(s.host), v.Epoch}
			x := vcs[k]
			if x == nil {
				x = &vc{by: s.host, epoch: v.Epoch, first: s.at, need: v.Need, cause: v.Cause}
				vcs[k] = x
			}
			x.last, x.promised, x.ambiguous = s.at, v.Promised, x.ambiguous || v.Ambiguous
			x.timedOut = max(x.timedOut, v.Failures)
			x.maxPromise = max(x.maxPromise, len(v.Promised))
		}
	}
	var parts []string
	list := make([]*vc, 0, len(vcs))
	for _, x := range vcs {
		list = append(list, x)
	}
	slices.SortFunc(list, func(a, b *vc) int { return int(a.first - b.first) })
	initiators := map[int]bool{}
	waiting, ambiguous := 0, 0
	for _, x := range list {
		initiators[x.by] = true
		if x.ambiguous {
			ambiguous++
		} else if x.maxPromise < x.need {
			waiting++
		}
	}
	switch {
	case len(list) == 0 && len(halted) == 0:
		parts = append(parts, "no view change and nobody halted: the token did not move (holder cut off or dead, takeovers refused)")
	case ambiguous > 0:
		parts = append(parts, fmt.Sprintf("%d view change(s) waited on an ambiguous fork (only hosts that did not answer could decide it)", ambiguous))
	case len(initiators) > 1 && len(list) > 2:
		parts = append(parts, fmt.Sprintf("duelling view changes: %d view changes by %d initiators, each preempting the last", len(list), len(initiators)))
	case waiting > 0:
		parts = append(parts, fmt.Sprintf("%d view change(s) waited for promises they never got from a majority", waiting))
	case len(list) > 0:
		parts = append(parts, fmt.Sprintf("%d view change(s) ran", len(list)))
	default:
		parts = append(parts, "hosts halted (promised a view change) while no initiator was seen leading it")
	}
	const show = 6
	var all []string
	for i, x := range list {
		by := names[x.by]
		if x.cause != "" {
			by += " (" + x.cause + ")"
		}
		line := fmt.Sprintf("e%d by %s for %.2fs: promises %v of %d needed", x.epoch, by, (x.last - x.first).Seconds(), hostNames(names, x.promised), x.need)
		if x.ambiguous {
			line += ", ambiguous"
		}
		if x.timedOut > 0 {
			line += fmt.Sprintf(", after %d time-outs", x.timedOut)
		}
		all = append(all, fmt.Sprintf("t=%.3fs ", x.first.Seconds())+line)
		switch {
		case i < show:
			parts = append(parts, line)
		case i == show:
			parts = append(parts, fmt.Sprintf("... %d more", len(list)-show))
		}
	}
	if len(halted) > 0 {
		var hs []string
		for _, h := range slices.Sorted(maps.Keys(halted)) {
			hs = append(hs, fmt.Sprintf("%s %.1fs", names[h], halted[h].Seconds()))
		}
		parts = append(parts, "halted: "+strings.Join(hs, ", "))
	}
	if len(behindEpoch) > 0 {
		parts = append(parts, "catching up to a later epoch: "+strings.Join(hostNames(names, slices.Sorted(maps.Keys(behindEpoch))), ","))
	}
	for _, h := range slices.Sorted(maps.Keys(behind)) {
		parts = append(parts, fmt.Sprintf("%s behind by %d entries", names[h], behind[h]))
	}
	parts = append(parts, fmt.Sprintf("epochs seen %v", slices.Sorted(maps.Keys(epochs))))
	return strings.Join(parts, "; "), all
}

func hostNames(names []string, ids []int) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < len(names) {
			out = append(out, names[id])
		} else {
			out = append(out, fmt.Sprint(id))
		}
	}
	return out
}
