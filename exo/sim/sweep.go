package sim

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exo-rack/exo/exo"
)

// Sweep is a batch of simulator runs of one rack size: Seeds seeds from
// FirstSeed on, Workers at a time, every run checked. It is what exo sim
// runs for each of its --hosts; its Report sums what the runs did and
// names the seeds that broke a property, with the command line that
// replays the first.
type Sweep struct {
	FirstSeed uint64
	Seeds     int
	Workers   int
	// Base holds the settings of every run. A run's options are
	// DefaultOptions(hosts, seed) with these fields of Base set over them
	// (exo sim has a flag for each): Ticks, Quiet, Drop, Dup, MaxDelay,
	// Partitions, Crashes, Amnesia, KeepEntries, Retain, AcceptLoss, Forge,
	// RosterChanges, KeyRotations, ProposeP, OOBEntriesPerStep, Token,
	// TokenLag, FaultTicks, LabTiming, DiskTicks, and Config's TransferBytesPerTick, TransferYield (with pauses of SimTransferProbeTicks), MaxFetchEntries,
	// IdleBackoffMax, IdleRotations, TokenTimeoutMin, FetchWindow and GoneTicks. Its other fields
	// are not used: DefaultOptions sizes the rest by seed.
	Base Options
	// NoFaults says the faults were switched off as a whole (Base has no
	// drops, duplicates, delays, partitions, crashes or amnesia): the
	// replay says --faults=false instead of naming each.
	NoFaults bool
	// Trace, if set, gets every event of every run (one run at a time
	// calls it), as Sim.Trace does.
	Trace func(line string)
	// Progress, if set, is called with the number of seeds done after
	// each tenth of them.
	Progress func(done int)
}

// SimTransferProbeTicks is the length of a transfer's pauses with
// --transfer-yield (exo.Config.TransferProbeTicks): 10 of the simulator's
// ticks, so that its short transfers pause (one after every 80 ticks of
// transfer). Their measured half (5 ticks) mostly sees the rack grow by
// fewer entries than the pacer compares (it takes such a rack as idle and
// keeps the pace up): the simulator checks that pauses never keep a
// transfer from ending; the walkthrough and the unit tests check the
// pace's decisions.
const SimTransferProbeTicks = 10

// Options returns the options of the run of one seed on hosts hosts.
func (s *Sweep) Options(hosts int, seed uint64) Options {
	o, b := DefaultOptions(hosts, seed), s.Base
	o.Ticks, o.Quiet = b.Ticks, b.Quiet
	o.Drop, o.Dup, o.MaxDelay = b.Drop, b.Dup, b.MaxDelay
	o.Partitions, o.Crashes, o.Amnesia, o.ProposeP = b.Partitions, b.Crashes, b.Amnesia, b.ProposeP
	o.Forge = b.Forge
	o.KeepEntries = b.KeepEntries
	o.Retain = b.Retain
	o.Config.TransferBytesPerTick = b.Config.TransferBytesPerTick
	o.Config.TransferYield = b.Config.TransferYield
	if o.Config.TransferYield > 0 {
		o.Config.TransferProbeTicks = SimTransferProbeTicks
	}
	o.AcceptLoss = b.AcceptLoss
	o.RosterChanges = b.RosterChanges
	o.KeyRotations = b.KeyRotations
	o.Config.MaxFetchEntries = b.Config.MaxFetchEntries
	o.Config.IdleBackoffMax = b.Config.IdleBackoffMax
	o.OOBEntriesPerStep = b.OOBEntriesPerStep
	o.Token, o.TokenLag = b.Token, b.TokenLag
	o.Config.IdleRotations = b.Config.IdleRotations
	o.Config.TokenTimeoutMin = b.Config.TokenTimeoutMin
	o.Config.FetchWindow = b.Config.FetchWindow
	o.Config.GoneTicks = b.Config.GoneTicks
	o.FaultTicks, o.LabTiming, o.DiskTicks = b.FaultTicks, b.LabTiming, b.DiskTicks
	o.Pauses, o.PauseTicks = b.Pauses, b.PauseTicks
	return o
}

// SweepDefaults returns the settings exo sim runs with when no flag says
// otherwise: DefaultOptions's, with the daemon's idle back-off and idle
// rotations (exo.DefaultIdleBackoffMax, exo.DefaultIdleRotations) and a
// control plane that may take 4 steps to read its fast path's records.
func SweepDefaults() Options {
	o := DefaultOptions(5, 1)
	o.Config.IdleBackoffMax = exo.DefaultIdleBackoffMax
	o.Config.IdleRotations = exo.DefaultIdleRotations
	o.Config.FetchWindow = exo.DefaultFetchWindow
	o.TokenLag = 4
	return o
}

// Replay returns the exo sim command line that reruns one seed with a
// trace: the flags of the settings that differ from SweepDefaults.
func (s *Sweep) Replay(hosts int, seed uint64) string {
	def, b := SweepDefaults(), s.Base
	faults := !s.NoFaults
	args := []string{"exo sim", fmt.Sprintf("--hosts %d --seed %d --seeds 1", hosts, seed)}
	add := func(cond bool, s string) {
		if cond {
			args = append(args, s)
		}
	}
	add(!faults, "--faults=false")
	add(faults && b.Drop != def.Drop, fmt.Sprintf("--drop %g", b.Drop))
	add(faults && b.Dup != def.Dup, fmt.Sprintf("--dup %g", b.Dup))
	add(faults && b.MaxDelay != def.MaxDelay, fmt.Sprintf("--delay %d", b.MaxDelay))
	add(faults && !b.Partitions, "--partitions=false")
	add(faults && !b.Crashes, "--crashes=false")
	add(b.Amnesia != 0, fmt.Sprintf("--amnesia %g", b.Amnesia))
	add(b.KeepEntries != 0, fmt.Sprintf("--keep-entries %d", b.KeepEntries))
	add(b.Retain != 0, fmt.Sprintf("--retain %d", b.Retain))
	add(b.Config.TransferBytesPerTick != 0, fmt.Sprintf("--transfer-pace %d", b.Config.TransferBytesPerTick))
	add(b.Config.TransferYield != 0, fmt.Sprintf("--transfer-yield %d", b.Config.TransferYield))
	add(b.AcceptLoss, "--accept-loss")
	add(b.Forge != 0, fmt.Sprintf("--forge %g", b.Forge))
	add(b.RosterChanges != 0, fmt.Sprintf("--roster-changes %g", b.RosterChanges))
	add(b.KeyRotations != 0, fmt.Sprintf("--key-rotations %g", b.KeyRotations))
	add(b.ProposeP != def.ProposeP, fmt.Sprintf("--propose %g", b.ProposeP))
	add(b.Config.MaxFetchEntries != def.Config.MaxFetchEntries, fmt.Sprintf("--fetch-batch %d", b.Config.MaxFetchEntries))
	add(b.Config.FetchWindow != def.Config.FetchWindow, fmt.Sprintf("--fetch-window %d", b.Config.FetchWindow))
	add(b.Config.IdleBackoffMax != def.Config.IdleBackoffMax, fmt.Sprintf("--idle-backoff %d", b.Config.IdleBackoffMax))
	add(b.OOBEntriesPerStep != def.OOBEntriesPerStep, fmt.Sprintf("--oob-bandwidth %d", b.OOBEntriesPerStep))
	add(b.Token, "--token")
	add(b.Config.IdleRotations != def.Config.IdleRotations, fmt.Sprintf("--idle-rotations %d", b.Config.IdleRotations))
	add(b.Config.TokenTimeoutMin != def.Config.TokenTimeoutMin, fmt.Sprintf("--token-timeout-min %d", b.Config.TokenTimeoutMin))
	add(b.Config.GoneTicks != def.Config.GoneTicks, fmt.Sprintf("--gone-ticks %d", b.Config.GoneTicks))
	add(b.Token && b.TokenLag != def.TokenLag, fmt.Sprintf("--token-lag %d", b.TokenLag))
	add(b.FaultTicks != 0, fmt.Sprintf("--fault-ticks %d", b.FaultTicks))
	add(b.LabTiming, "--lab-timing")
	add(b.DiskTicks != 0, fmt.Sprintf("--disk-ticks %d", b.DiskTicks))
	add(b.Pauses != 0, fmt.Sprintf("--pauses %g", b.Pauses))
	add(b.PauseTicks != 0, fmt.Sprintf("--pause-ticks %d", b.PauseTicks))
	add(b.Ticks != def.Ticks, fmt.Sprintf("--ticks %d", b.Ticks))
	add(b.Quiet != def.Quiet, fmt.Sprintf("--quiet %d", b.Quiet))
	return strings.Join(args, " ") + " -v"
}

// Report is what a sweep found (exo sim --json prints it).
type Report struct {
	Hosts          int      `json:"hosts"`
	FirstSeed      uint64   `json:"first_seed"`
	Seeds          int      `json:"seeds"`
	Violations     int      `json:"violations"`
	FailingSeeds   []uint64 `json:"failing_seeds,omitempty"`
	FirstViolation string   `json:"first_violation,omitempty"`
	Replay         string   `json:"replay,omitempty"`
	Stalled        int      `json:"stalled_after_amnesia"`
	StalledAmbig   int      `json:"stalled_on_ambiguous_fork"`
	StalledFenced  int      `json:"stalled_with_fenced_hosts,omitempty"`
	StalledSeeds   []uint64 `json:"stalled_seeds,omitempty"`
	// Token (Options.Token): the control planes' counters, summed over seeds.
	Token          *TokenReport `json:"token,omitempty"`
	Frames         uint64       `json:"frames"`
	Messages       uint64       `json:"oob_messages"`
	Proposed       uint64       `json:"proposed"`
	AgreedEntries  uint64       `json:"agreed_entries_delivered"`
	Dropped        uint64       `json:"dropped_reported"`
	Compactions    uint64       `json:"compactions,omitempty"`
	UnsyncedLost   uint64       `json:"unsynced_lost_entries"`
	GoneNotices    uint64       `json:"gone_notices"`
	ArchiveAnswers uint64       `json:"archive_answers,omitempty"`
	ArchiveMisses  uint64       `json:"archive_misses,omitempty"`
	PastFloor      uint64       `json:"past_floor,omitempty"`
	AcceptedLosses uint64       `json:"accepted_losses,omitempty"`
	LostEntries    uint64       `json:"lost_entries,omitempty"`
	FloorJumps     uint64       `json:"floor_jumps,omitempty"`
	Forged         uint64       `json:"forged_copies"`
	RosterSwitches uint64       `json:"roster_switches"`
	KeyRotations   uint64       `json:"key_rotations"`
	KeySwitches    uint64       `json:"key_switches"`
	GenuineBadTag  uint64       `json:"genuine_bad_tag"`
	ViewChanges    uint64       `json:"view_changes"`
	// ViewChangeCauses splits ViewChanges by cause (exo.Cause's names).
	ViewChangeCauses map[string]uint64 `json:"view_change_causes,omitempty"`
	Takeovers        uint64            `json:"takeovers"`
	// Pauses and FalseTakeovers (Stats): hosts paused (Options.Pauses)
	// and takeovers that passed a running host over.
	Pauses         uint64 `json:"pauses,omitempty"`
	FalseTakeovers uint64 `json:"false_takeovers"`
	Crashes        uint64 `json:"crashes"`
	Partitions     uint64 `json:"partitions"`
	ConvergeP50    int    `json:"converge_ticks_p50"`
	ConvergeMax    int    `json:"converge_ticks_max"`
	// MajorityStall: the seeds' longest majority stalls (Stats), p50, p99
	// and max, and the seed of the longest.
	MajorityStallP50  int     `json:"majority_stall_ticks_p50"`
	MajorityStallP99  int     `json:"majority_stall_ticks_p99"`
	MajorityStallMax  int     `json:"majority_stall_ticks_max"`
	MajorityStallSeed uint64  `json:"majority_stall_max_seed,omitempty"`
	Seconds           float64 `json:"seconds"`
	FramesPerSec      float64 `json:"sim_frames_per_second"`

	base Options // the sweep's settings: which figures Summary shows
}

// TokenReport is what the fast paths and their control planes did
// (Options.Token), summed over seeds.
type TokenReport struct {
	Records        uint64 `json:"records"`
	FastSteps      uint64 `json:"steps_with_fast_path_armed"`
	Sent           uint64 `json:"frames_sent_by_fast_paths"`
	Popped         uint64 `json:"batches_taken"`
	Handoffs       uint64 `json:"handoffs"`
	Halts          uint64 `json:"self_halts"`
	Quiesces       uint64 `json:"quiesces"`
	Arms           uint64 `json:"arms"`
	ArmMisses      uint64 `json:"arm_misses"`
	Desyncs        uint64 `json:"desyncs"`
	Unlogged       uint64 `json:"unlogged_sends"`
	Fenced         uint64 `json:"unlogged_sends_fenced"`
	Reproposed     uint64 `json:"records_proposed_again"`
	FencedRestarts uint64 `json:"fenced_restarts"`
	Recovered      uint64 `json:"restarts_that_took_the_fast_path_over"`
	Unfenced       uint64 `json:"fences_lifted_by_recovery"`
}

// seedResult is one seed's run.
type seedResult struct {
	seed     uint64
	err      error
	stats    Stats
	converge int
}

// Run runs every seed of the sweep on racks of hosts hosts and sums up.
// A seed whose run breaks a property is a violation in the report, not an
// error; the error is ctx's when it ends first.
func (s *Sweep) Run(ctx context.Context, hosts int) (*Report, error) {
	start := time.Now()
	seeds := make(chan uint64)
	results := make([]seedResult, s.Seeds)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done, every := 0, max(1, s.Seeds/10)
	for range s.Workers {
		wg.Go(func() {
			for seed := range seeds {
				r := s.run(hosts, seed, &mu)
				mu.Lock()
				results[seed-s.FirstSeed] = r
				done++
				if s.Progress != nil && done%every == 0 {
					s.Progress(done)
				}
				mu.Unlock()
			}
		})
	}
	var err error
feed:
	for i := 0; i < s.Seeds; i++ {
		select {
		case seeds <- s.FirstSeed + uint64(i):
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(seeds)
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("sim: interrupted: %w", err)
	}
	rep := &Report{Hosts: hosts, FirstSeed: s.FirstSeed, Seeds: s.Seeds, base: s.Base}
	var conv, stalls []int
	for _, r := range results {
		rep.add(r)
		stalls = append(stalls, r.stats.MajorityStall)
		if r.stats.MajorityStall > rep.MajorityStallMax {
			rep.MajorityStallMax, rep.MajorityStallSeed = r.stats.MajorityStall, r.seed
		}
		if r.stats.Stalled || r.stats.StalledFenced {
			if r.stats.Stalled {
				rep.Stalled++
			}
		} else if r.err == nil {
			conv = append(conv, r.converge)
		}
		if r.err != nil {
			rep.Violations++
			rep.FailingSeeds = append(rep.FailingSeeds, r.seed)
			if rep.FirstViolation == "" {
				rep.FirstViolation = r.err.Error()
				rep.Replay = s.Replay(hosts, r.seed)
			}
		}
	}
	if len(conv) > 0 {
		slices.Sort(conv)
		rep.ConvergeP50, rep.ConvergeMax = conv[len(conv)/2], conv[len(conv)-1]
	}
	slices.Sort(stalls)
	if len(stalls) > 0 {
		rep.MajorityStallP50, rep.MajorityStallP99 = stalls[len(stalls)/2], stalls[len(stalls)*99/100]
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.FramesPerSec = float64(rep.Frames) / rep.Seconds
	return rep, nil
}

// run runs one seed; mu serializes the trace.
func (s *Sweep) run(hosts int, seed uint64, mu *sync.Mutex) (r seedResult) {
	r.seed = seed
	defer func() {
		// A panic in the core is a seed that fails, with its replay: not
		// the end of the sweep (a worker's panic ended the whole process,
		// and a script that kept the report lines only lost the line).
		if p := recover(); p != nil {
			r.err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	sm, err := New(s.Options(hosts, seed))
	if err != nil {
		r.err = err
		return r
	}
	if s.Trace != nil {
		sm.Trace(func(l string) {
			mu.Lock()
			s.Trace(l)
			mu.Unlock()
		})
	}
	r.err = sm.Run()
	r.stats = sm.Stats
	r.converge = sm.Checker().QuietTicks
	return r
}

// add sums one seed's counters into the report.
func (rep *Report) add(r seedResult) {
	st := r.stats
	rep.Frames += st.Frames
	rep.Messages += st.Messages
	rep.Proposed += st.Proposed
	rep.AgreedEntries += st.Agreed
	rep.Dropped += st.Dropped
	rep.Forged += st.Forged
	rep.RosterSwitches += st.RosterChanges
	rep.KeyRotations += st.KeyRotations
	rep.KeySwitches += st.KeySwitches
	rep.GenuineBadTag += st.GenuineBadTag
	rep.ViewChanges += st.ViewChanges
	for c, k := range st.ViewChangeCauses {
		if k > 0 {
			if rep.ViewChangeCauses == nil {
				rep.ViewChangeCauses = make(map[string]uint64)
			}
			rep.ViewChangeCauses[exo.Cause(c).String()] += k
		}
	}
	rep.Takeovers += st.Takeovers
	rep.Pauses += st.Pauses
	rep.FalseTakeovers += st.FalseTakeovers
	rep.Crashes += st.Crashes
	rep.Partitions += st.Partitions
	rep.Compactions += st.Compactions
	rep.UnsyncedLost += st.UnsyncedLost
	rep.GoneNotices += st.GoneNotices
	rep.ArchiveAnswers += st.ArchiveAnswers
	rep.ArchiveMisses += st.ArchiveMisses
	rep.PastFloor += st.PastFloor
	rep.AcceptedLosses += st.AcceptedLosses
	rep.LostEntries += st.LostEntries
	rep.FloorJumps += st.FloorJumps
	if st.StalledAmbiguous {
		rep.StalledAmbig++
	}
	if rep.base.Token {
		if rep.Token == nil {
			rep.Token = &TokenReport{}
		}
		t, x := rep.Token, st.Token
		t.Records += x.Records
		t.FastSteps += x.Fast
		t.Sent += x.Sent
		t.Popped += x.Popped
		t.Handoffs += x.Handoffs
		t.Halts += x.Halts
		t.Quiesces += x.Quiesces
		t.Arms += x.Arms
		t.ArmMisses += x.ArmMisses
		t.Desyncs += x.Desyncs
		t.Unlogged += x.Unlogged
		t.Fenced += x.Fenced
		t.Reproposed += x.Reproposed
		t.FencedRestarts += st.FencedRestarts
		t.Recovered += st.Recovered
		t.Unfenced += st.Unfenced
	}
	if st.StalledFenced {
		rep.StalledFenced++
	}
	if st.Stalled || st.StalledFenced {
		rep.StalledSeeds = append(rep.StalledSeeds, r.seed)
	}
}

// Summary is the report as exo sim prints it: a few lines, each ending in
// a newline, with the figures of the checks the sweep's settings turned
// on, and the first violation with its replay.
func (rep *Report) Summary() string {
	var w strings.Builder
	b := rep.base
	fmt.Fprintf(&w, "hosts=%d seeds=%d..%d: %d violations, %d stalled after amnesia (%d on an ambiguous fork)\n",
		rep.Hosts, rep.FirstSeed, rep.FirstSeed+uint64(rep.Seeds)-1, rep.Violations, rep.Stalled, rep.StalledAmbig)
	fmt.Fprintf(&w, "  frames=%d oob=%d proposed=%d delivered-entries=%d dropped-reported=%d",
		rep.Frames, rep.Messages, rep.Proposed, rep.AgreedEntries, rep.Dropped)
	if rep.Forged > 0 {
		fmt.Fprintf(&w, " forged=%d (every one BAD_TAG: checked)", rep.Forged)
	}
	if b.KeyRotations > 0 {
		fmt.Fprintf(&w, " key-rotations=%d key-switches=%d genuine-bad-tag=%d (every rotation completed: checked; no genuine frame BAD_TAG between members: checked without --roster-changes)", rep.KeyRotations, rep.KeySwitches, rep.GenuineBadTag)
	}
	if b.RosterChanges > 0 {
		fmt.Fprintf(&w, " roster-switches=%d (switch points and one-host steps: checked)", rep.RosterSwitches)
	}
	if b.AcceptLoss {
		fmt.Fprintf(&w, " accepted-losses=%d lost-entries=%d (each in a reported doubt, delivered only by hosts that lost their state: checked)", rep.AcceptedLosses, rep.LostEntries)
	}
	if b.KeepEntries > 0 {
		fmt.Fprintf(&w, " compactions=%d past-floor=%d floor-jumps=%d (each to a compacted position: checked)", rep.Compactions, rep.PastFloor, rep.FloorJumps)
		if b.Retain > 0 {
			fmt.Fprintf(&w, " archive-answers=%d archive-misses=%d", rep.ArchiveAnswers, rep.ArchiveMisses)
		}
	}
	fmt.Fprintln(&w)
	if t := rep.Token; t != nil {
		fmt.Fprintf(&w, "  token: records=%d fast-steps=%d sent-by-fast-path=%d batches=%d handoffs=%d self-halts=%d quiesces=%d arms=%d arm-misses=%d desyncs=%d unlogged-sends=%d (fenced %d) fenced-restarts=%d (taken over %d, fence lifted %d) stalled-with-fenced=%d\n",
			t.Records, t.FastSteps, t.Sent, t.Popped, t.Handoffs, t.Halts, t.Quiesces, t.Arms, t.ArmMisses, t.Desyncs, t.Unlogged, t.Fenced, t.FencedRestarts, t.Recovered, t.Unfenced, rep.StalledFenced)
	}
	if b.Pauses > 0 {
		fmt.Fprintf(&w, "  pauses=%d false-takeovers=%d\n", rep.Pauses, rep.FalseTakeovers)
	}
	fmt.Fprintf(&w, "  view-changes=%d takeovers=%d crashes=%d (unsynced entries lost %d, gone notices %d) partitions=%d converge-ticks p50=%d max=%d majority-stall-ticks p50=%d p99=%d max=%d (seed %d)\n",
		rep.ViewChanges, rep.Takeovers, rep.Crashes, rep.UnsyncedLost, rep.GoneNotices, rep.Partitions, rep.ConvergeP50, rep.ConvergeMax,
		rep.MajorityStallP50, rep.MajorityStallP99, rep.MajorityStallMax, rep.MajorityStallSeed)
	if len(rep.ViewChangeCauses) > 0 {
		fmt.Fprintf(&w, "  view-change causes:")
		for _, c := range exo.Causes() {
			if k := rep.ViewChangeCauses[c.String()]; k > 0 {
				fmt.Fprintf(&w, " %s=%d", c, k)
			}
		}
		fmt.Fprintln(&w)
	}
	fmt.Fprintf(&w, "  %.1fs, %.0f simulated frames/s\n", rep.Seconds, rep.FramesPerSec)
	if rep.Violations > 0 {
		fmt.Fprintf(&w, "  FIRST VIOLATION (seed %d): %s\n  replay: %s\n", rep.FailingSeeds[0], rep.FirstViolation, rep.Replay)
	}
	return w.String()
}
