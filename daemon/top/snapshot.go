package top

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
)

// target is one daemon to watch: Name is its row's name (the socket's
// file name without .sock, A, B, ... in a cluster directory).
type target struct {
	Name   string
	Socket string
}

// sample is one status read of one host: St is nil when it did not
// answer (Err says why).
type sample struct {
	At  time.Time
	St  *daemon.Status
	Err error
}

// Snapshot is one frame of exo top: every host's row and the rack's
// totals; exo top --json prints it as it is.
type Snapshot struct {
	Time     time.Time `json:"time"`
	Interval float64   `json:"interval_seconds"`
	Hosts    []Host    `json:"hosts"`
	Totals   Totals    `json:"totals"`
}

// Host is one host's row. The rates are the difference of two samples one
// interval apart; without an earlier sample (Rates false) they are 0.
type Host struct {
	Name        string `json:"name"`
	Socket      string `json:"socket"`
	Up          bool   `json:"up"`
	Error       string `json:"error,omitempty"`
	ID          int    `json:"id"`
	Role        string `json:"role"` // holder, member, skipped, down
	TokenHolder bool   `json:"token_holder"`
	Epoch       uint32 `json:"epoch"`
	Halted      bool   `json:"halted"`
	// Transfer: the host fetches the rack's agreed log before it rejoins
	// (a state transfer: --join, a wiped disk, or fallen behind).
	Transfer bool `json:"state_transfer,omitempty"`
	// TransferETA is the seconds the transfer still takes at its fetch rate
	// (0: not known yet); shown in the TOP REJECT column while it runs.
	TransferETA float64 `json:"transfer_eta_seconds,omitempty"`
	transferTo  uint64
	// TransferPace is the transfer's pace in force, in bytes per second
	// (transfer_rate, lowered by transfer_yield while the rack slows; 0:
	// unpaced), shown beside the ETA.
	TransferPace int64 `json:"transfer_pace_bytes_per_second,omitempty"`
	// Key is the key slot this host sends under, with the rotation in
	// flight: "1", "0>1" (slot 1 staged, waiting for announcements), "1+0"
	// (switched, the old key still valid); "" when the status has none.
	Key        string `json:"key,omitempty"`
	Append     uint64 `json:"append_pointer"`
	Agreed     uint64 `json:"agreement_pointer"`
	Lag        uint64 `json:"lag"`
	QueueDepth int    `json:"queue_depth"`
	// TimeoutMs is the token timeout in force (the failure detector's).
	TimeoutMs  float64  `json:"token_timeout_ms"`
	Rates      bool     `json:"rates"` // false: no earlier sample yet (rates are 0)
	FramesIn   float64  `json:"frames_in_per_second"`
	FramesOut  float64  `json:"frames_out_per_second"`
	AgreedRate float64  `json:"agreed_msgs_per_second"`
	Fetched    float64  `json:"fetched_entries_per_second"` // entries its fetches brought: a catch-up's speed
	Rejects    float64  `json:"rejects_per_second"`
	TopReject  string   `json:"top_reject,omitempty"`
	Offload    *Offload `json:"offload,omitempty"`
}

// Offload is a host's fast path (XDP, the FPGA engine) as its daemon
// reports it.
type Offload struct {
	Mode          string `json:"mode"`
	Dropped       uint64 `json:"dropped"` // frames the fast path dropped itself (not ACCEPT, not slow path)
	TopDrop       string `json:"top_drop,omitempty"`
	InlineDrops   uint64 `json:"inline_drops"`
	Disagreements uint64 `json:"inline_disagreements"`
	StateWrites   uint64 `json:"state_writes"`
	Error         string `json:"error,omitempty"`
}

// Totals are the rack's figures of the header.
type Totals struct {
	Hosts       int     `json:"hosts"`
	Up          int     `json:"up"`
	Holder      string  `json:"token_holder,omitempty"`
	Epoch       uint32  `json:"epoch"`
	MaxAppend   uint64  `json:"max_append_pointer"`
	AgreedRate  float64 `json:"agreed_msgs_per_second"`
	SlowestLag  uint64  `json:"slowest_lag"`
	SlowestHost string  `json:"slowest_host,omitempty"`
	Rejects     float64 `json:"rejects_per_second"`
	// RackFloor is the lowest seq a majority of the members serve to a
	// fetch, as the freshest status says (nil until it knows).
	RackFloor *uint64 `json:"rack_floor,omitempty"`
}

// reasons maps a reject reason's name (as the counters and the fast path
// name it) to the reason.
func reasons() map[string]exo.Reason {
	m := map[string]exo.Reason{}
	for r := exo.Reason(0); r < exo.NumReasons; r++ {
		m[r.String()] = r
	}
	return m
}

// rejects are a status's reject counters by reason.
func rejects(st *daemon.Status) map[string]uint64 {
	m := map[string]uint64{}
	for k, v := range st.Counters {
		if r, ok := strings.CutPrefix(k, "rejects."); ok {
			m[r] = v
		}
	}
	return m
}

// build turns the samples of targets (cur, in order) and the previous
// samples (by socket; may be empty) into a snapshot.
func build(targets []target, prev map[string]sample, cur []sample, now time.Time, interval time.Duration) Snapshot {
	s := Snapshot{Time: now, Interval: interval.Seconds(), Hosts: make([]Host, len(targets))}
	s.Totals.Hosts = len(targets)
	fresh := -1 // the host with the newest log: its holder and skip list
	for i := range targets {
		if st := cur[i].St; st != nil {
			s.Totals.Up++
			if fresh < 0 || st.Append > cur[fresh].St.Append {
				fresh = i
			}
			s.Totals.Epoch = max(s.Totals.Epoch, st.Epoch)
		}
	}
	if fresh >= 0 {
		s.Totals.MaxAppend = cur[fresh].St.Append
		s.Totals.RackFloor = cur[fresh].St.RackFloor
	}
	byName := reasons()
	for i, t := range targets {
		h := &s.Hosts[i]
		h.Name, h.Socket, h.ID = t.Name, t.Socket, -1
		st := cur[i].St
		if st == nil {
			h.Role = "down"
			h.Error = cause(cur[i].Err)
			continue
		}
		h.Up, h.ID, h.Epoch, h.Halted = true, st.ID, st.Epoch, st.Halted
		h.Transfer, h.transferTo, h.TransferPace = st.Recovery.StateTransfer, st.Recovery.TransferTo, st.Recovery.TransferPace
		if k := st.Keys; k != nil {
			switch other := 1 - k.SendPhase; {
			case k.Staged:
				h.Key = fmt.Sprintf("%d>%d", k.SendPhase, other)
			case k.OldValid:
				h.Key = fmt.Sprintf("%d+%d", k.SendPhase, other)
			default:
				h.Key = fmt.Sprint(k.SendPhase)
			}
		}
		h.Append, h.Agreed, h.QueueDepth = st.Append, st.Agreed, st.Pending
		h.TimeoutMs = st.Detector.TimeoutMs
		h.Lag = s.Totals.MaxAppend - st.Append
		h.Role = "member"
		if f := cur[fresh].St; f.Holder == st.ID {
			h.Role, h.TokenHolder = "holder", true
			s.Totals.Holder = t.Name
		} else if slices.Contains(f.Skipped, st.ID) {
			h.Role = "skipped"
		}
		if h.Lag > s.Totals.SlowestLag || s.Totals.SlowestHost == "" {
			s.Totals.SlowestLag, s.Totals.SlowestHost = h.Lag, t.Name
		}
		if o := st.Offload; o != nil {
			ho := &Offload{Mode: o.Mode, InlineDrops: o.Drops, Disagreements: o.Differs, StateWrites: o.Pushes, Error: o.Err}
			var top uint64
			for name, v := range o.Counters {
				r, ok := byName[name]
				if !ok || r == exo.ReasonAccept || r.SlowPath() {
					continue
				}
				ho.Dropped += v
				if v > top || (v == top && name < ho.TopDrop) {
					top, ho.TopDrop = v, name
				}
			}
			h.Offload = ho
		}
		p, ok := prev[t.Socket]
		if !ok || p.St == nil || p.St.ID != st.ID {
			continue
		}
		dt := cur[i].At.Sub(p.At).Seconds()
		if dt <= 0 {
			continue
		}
		rate := func(a, b uint64) float64 {
			if b < a {
				return 0 // restarted: counters began again
			}
			return float64(b-a) / dt
		}
		h.Rates = true
		h.FramesIn = rate(p.St.Counters["frames_in"], st.Counters["frames_in"])
		h.FramesOut = rate(p.St.Counters["frames_out"], st.Counters["frames_out"])
		h.AgreedRate = rate(p.St.Delivered, st.Delivered)
		h.Fetched = rate(p.St.Counters["fetched_entries"], st.Counters["fetched_entries"])
		if h.Transfer && h.Fetched > 0 && h.transferTo > st.Append {
			h.TransferETA = float64(h.transferTo-st.Append) / h.Fetched
		}
		before := rejects(p.St)
		var top float64
		for name, v := range rejects(st) {
			r := rate(before[name], v)
			h.Rejects += r
			if r > top || (r == top && r > 0 && name < h.TopReject) {
				top, h.TopReject = r, name
			}
		}
		s.Totals.AgreedRate = max(s.Totals.AgreedRate, h.AgreedRate)
		s.Totals.Rejects += h.Rejects
	}
	return s
}

// cause shortens why a host did not answer.
func cause(err error) string {
	switch {
	case err == nil:
		return "no answer"
	case errors.Is(err, syscall.ENOENT):
		return "no socket"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (daemon not running)"
	case errors.Is(err, context.DeadlineExceeded):
		return "no status in time"
	}
	msg := err.Error()
	if len(msg) > 80 {
		msg = msg[:77] + "..."
	}
	return msg
}
