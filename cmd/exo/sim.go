package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/exo/sim"
)

// simOptions are the flags of exo sim.
type simOptions struct {
	Hosts      []int
	Seed       uint64
	Seeds      int
	Ticks      int
	Quiet      int
	Drop       float64
	Dup        float64
	Delay      int
	Faults     bool
	Partitions bool
	Crashes    bool
	Amnesia    float64
	Keep       int
	Retain     int
	Pace       int
	AcceptLoss bool
	Forge      float64
	Roster     float64
	Keys       float64
	Propose    float64
	FetchBatch int
	Backoff    int
	OOBRate    int
	Token      bool
	TokenLag   int
	IdleRot    int
	TimeoutMin int
	Workers    int
	JSON       bool
	Verbose    bool
	Progress   bool // print progress to Err (a terminal, long runs)
	Out        io.Writer
	Err        io.Writer
}

// simReport is the machine-readable result of exo sim (--json).
type simReport struct {
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
	// Token (--token): the control planes' counters, summed over seeds.
	Token          *simTokenReport `json:"token,omitempty"`
	Frames         uint64          `json:"frames"`
	Messages       uint64          `json:"oob_messages"`
	Proposed       uint64          `json:"proposed"`
	AgreedEntries  uint64          `json:"agreed_entries_delivered"`
	Dropped        uint64          `json:"dropped_reported"`
	Compactions    uint64          `json:"compactions,omitempty"`
	ArchiveAnswers uint64          `json:"archive_answers,omitempty"`
	ArchiveMisses  uint64          `json:"archive_misses,omitempty"`
	PastFloor      uint64          `json:"past_floor,omitempty"`
	AcceptedLosses uint64          `json:"accepted_losses,omitempty"`
	LostEntries    uint64          `json:"lost_entries,omitempty"`
	FloorJumps     uint64          `json:"floor_jumps,omitempty"`
	Forged         uint64          `json:"forged_copies"`
	RosterSwitches uint64          `json:"roster_switches"`
	KeyRotations   uint64          `json:"key_rotations"`
	KeySwitches    uint64          `json:"key_switches"`
	GenuineBadTag  uint64          `json:"genuine_bad_tag"`
	ViewChanges    uint64          `json:"view_changes"`
	Takeovers      uint64          `json:"takeovers"`
	Crashes        uint64          `json:"crashes"`
	Partitions     uint64          `json:"partitions"`
	ConvergeP50    int             `json:"converge_ticks_p50"`
	ConvergeMax    int             `json:"converge_ticks_max"`
	Seconds        float64         `json:"seconds"`
	FramesPerSec   float64         `json:"sim_frames_per_second"`
}

// simTokenReport is what the fast paths and their control planes did
// (exo sim --token).
type simTokenReport struct {
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

func newSimCmd(runF func(context.Context, *simOptions) error) *cobra.Command {
	o := &simOptions{}
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the deterministic protocol simulator with faults and check every property",
		Long: `sim runs the Exo state machine of n hosts on a simulated segment and OOB
network, seeded and reproducible: frames and messages are dropped, duplicated,
delayed and reordered, the rack is partitioned (two-way, one-way, and the
seed's minority/majority split) and healed, hosts crash and restart from
their durable state. A checker verifies agreement (no two hosts ever deliver
different entries at one sequence number, across every view change), order
(no gap, nothing twice), validity (every delivered payload was published and
is agreed once) and liveness (after the faults stop the rack converges within
--quiet ticks). A failing seed is printed with the command that replays it.

--accept-loss: when a run stalls on a fork only a lost disk could decide,
the operator accepts the loss (exo recover --accept-loss, at a host that
lost its state first) and the rack gets another quiet phase; entries
delivered before may then change only at the positions the command
reported, and only if every host that delivered them lost its state.
`,
		Example: `  exo sim --hosts 5 --seeds 10000
  exo sim --hosts 3,4,5,7,16 --seeds 1000 --json
  exo sim --hosts 5 --seed 42 --seeds 1 -v      # replay one seed with a trace
  exo sim --hosts 5 --seeds 200 --amnesia 0.3   # restarts that lose their disk
  exo sim --hosts 3,5,7 --seeds 1000 --token     # the token in a fast path (xdp_token)`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Out, o.Err = cmd.OutOrStdout(), cmd.ErrOrStderr()
			o.Progress = !o.JSON && !o.Verbose && o.Seeds >= 100 && isTerminal(o.Err)
			if !o.Faults {
				o.Drop, o.Dup, o.Delay, o.Partitions, o.Crashes, o.Amnesia = 0, 0, 0, false, false, 0
			}
			if err := o.validate(); err != nil {
				return &exitError{code: 2, err: err}
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runSim(cmd.Context(), o)
		},
	}
	def := sim.DefaultOptions(5, 1)
	f := cmd.Flags()
	f.IntSliceVar(&o.Hosts, "hosts", []int{5}, "rack sizes to simulate (1..255), e.g. 3,4,5,7,16")
	f.Uint64Var(&o.Seed, "seed", 1, "first seed")
	f.IntVar(&o.Seeds, "seeds", 100, "number of seeds per rack size")
	f.IntVar(&o.Ticks, "ticks", def.Ticks, "ticks of the faulty phase")
	f.IntVar(&o.Quiet, "quiet", def.Quiet, "ticks after the faults stop within which the rack must converge")
	f.Float64Var(&o.Drop, "drop", def.Drop, "probability that a frame or message is lost")
	f.Float64Var(&o.Dup, "dup", def.Dup, "probability that a frame or message is duplicated")
	f.IntVar(&o.Delay, "delay", def.MaxDelay, "extra random delay in network steps (reordering)")
	f.BoolVar(&o.Faults, "faults", true, "inject faults (--faults=false: a perfect network, no crashes)")
	f.BoolVar(&o.Partitions, "partitions", true, "partition and heal the rack at random")
	f.BoolVar(&o.Crashes, "crashes", true, "crash and restart hosts at random")
	f.Float64Var(&o.Amnesia, "amnesia", 0, "probability that a restart also loses the durable state")
	f.BoolVar(&o.AcceptLoss, "accept-loss", false, "play exo recover --accept-loss when a run stalls on lost state (see above)")
	f.IntVar(&o.Keep, "keep-entries", 0, "compact every host's log as the daemon's keep_entries does (0: never): a host that lost its state rejoins by state transfer")
	f.IntVar(&o.Pace, "transfer-pace", 0, "pace state transfers at this many bytes per tick (the daemon's transfer_rate; 0: none)")
	f.IntVar(&o.Retain, "retain", 0, "with --keep-entries: keep compacted entries on each host's disk until this many behind its agreement pointer (the daemon's retain.entries) and answer fetches from them")
	f.Float64Var(&o.Forge, "forge", 0, "probability per frame that an attacker without the key also delivers a forged copy (changed tag, or changed fields under the old tag); every copy must be BAD_TAG")
	f.Float64Var(&o.Keys, "key-rotations", 0, "per-tick probability that the operator starts a key rotation (when none runs): hosts stage the next key at random ticks; every run must end with every member sending under the newest key")
	f.Float64Var(&o.Roster, "roster-changes", 0, "per-tick probability that a member proposes a membership change (remove a host, add one back, add a spare host); the checker checks the switch points and that consecutive rosters differ by one host")
	f.Float64Var(&o.Propose, "propose", def.ProposeP, "per-tick probability that a client publishes at a host")
	f.IntVar(&o.OOBRate, "oob-bandwidth", def.OOBEntriesPerStep, "log entries one OOB link carries per network step (0: unlimited); messages on a link queue behind each other")
	f.IntVar(&o.FetchBatch, "fetch-batch", def.Config.MaxFetchEntries, "entries in one fetch response at most (the daemon sends 1024; small, so that the simulated logs need many batches too)")
	f.IntVar(&o.Backoff, "idle-backoff", exo.DefaultIdleBackoffMax, "the idle back-off's cap in ticks (the daemon's idle_backoff_max_ticks is 256; -1: none): an idle rack's passes slow down to it, a proposal wakes the rack")
	f.BoolVar(&o.Token, "token", false, "every host runs a fast path that sends (xdp_token: the rule of exo.Engine, the daemon's control plane exo/token) in front of its core, which reads the fast path's records late (docs/token.md)")
	f.IntVar(&o.TokenLag, "token-lag", 4, "with --token: network steps the control plane may take to read its fast path's records (now and then up to 4 ticks more)")
	f.IntVar(&o.TimeoutMin, "token-timeout-min", def.Config.TokenTimeoutMin, "the adaptive token timeout's floor in ticks (token_timeout_min_ticks; 0 or 16: fixed)")
	f.IntVar(&o.IdleRot, "idle-rotations", exo.DefaultIdleRotations, "rotations of empty passes at full speed before the idle back-off (the daemon's idle_rotations: 4, 32 in token mode)")
	f.IntVar(&o.Workers, "workers", runtime.GOMAXPROCS(0), "seeds run in parallel")
	f.BoolVar(&o.JSON, "json", false, "print one JSON report per rack size")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "trace every event (use with --seeds 1)")
	return cmd
}

func (o *simOptions) validate() error {
	for _, h := range o.Hosts {
		if h < 1 || h > exo.MaxRoster {
			return fmt.Errorf("--hosts: %d is outside 1..%d", h, exo.MaxRoster)
		}
	}
	switch {
	case o.Seeds < 1:
		return fmt.Errorf("--seeds: %d must be at least 1", o.Seeds)
	case o.Ticks < 0 || o.Quiet < 1:
		return fmt.Errorf("--ticks must be >= 0 and --quiet >= 1")
	case o.Drop < 0 || o.Drop >= 1, o.Dup < 0 || o.Dup >= 1, o.Amnesia < 0 || o.Amnesia > 1, o.Propose < 0 || o.Propose > 1, o.Forge < 0 || o.Forge > 1, o.Roster < 0 || o.Roster > 1, o.Keys < 0 || o.Keys > 1:
		return fmt.Errorf("--drop and --dup must be in [0,1), --amnesia, --forge and --propose in [0,1]")
	case o.Delay < 0:
		return fmt.Errorf("--delay: %d must not be negative", o.Delay)
	case o.Keep < 0:
		return fmt.Errorf("--keep-entries: %d must not be negative (0: never compact)", o.Keep)
	case o.Pace < 0:
		return fmt.Errorf("--transfer-pace: %d must not be negative (0: no pacing)", o.Pace)
	case o.Retain < 0 || (o.Retain > 0 && o.Keep == 0):
		return fmt.Errorf("--retain: %d must be 0, or positive with --keep-entries (it keeps what compaction cuts)", o.Retain)
	case o.Workers < 1:
		return fmt.Errorf("--workers: %d must be at least 1", o.Workers)
	case o.TimeoutMin < 0 || o.TimeoutMin > exo.DefaultTokenTimeout:
		return fmt.Errorf("--token-timeout-min: %d is outside 0..%d (the token timeout)", o.TimeoutMin, exo.DefaultTokenTimeout)
	case o.IdleRot < 1:
		return fmt.Errorf("--idle-rotations: %d must be at least 1", o.IdleRot)
	case o.TokenLag < 0:
		return fmt.Errorf("--token-lag: %d must not be negative", o.TokenLag)
	case o.OOBRate < 0:
		return fmt.Errorf("--oob-bandwidth: %d must not be negative", o.OOBRate)
	case o.Backoff < -1:
		return fmt.Errorf("--idle-backoff: %d must be -1 (none) or more", o.Backoff)
	case o.FetchBatch < 1:
		return fmt.Errorf("--fetch-batch: %d must be at least 1", o.FetchBatch)
	}
	return nil
}

func (o *simOptions) options(hosts int, seed uint64) sim.Options {
	s := sim.DefaultOptions(hosts, seed)
	s.Ticks, s.Quiet = o.Ticks, o.Quiet
	s.Drop, s.Dup, s.MaxDelay = o.Drop, o.Dup, o.Delay
	s.Partitions, s.Crashes, s.Amnesia, s.ProposeP = o.Partitions, o.Crashes, o.Amnesia, o.Propose
	s.Forge = o.Forge
	s.KeepEntries = o.Keep
	s.Retain = o.Retain
	s.Config.TransferBytesPerTick = o.Pace
	s.AcceptLoss = o.AcceptLoss
	s.RosterChanges = o.Roster
	s.KeyRotations = o.Keys
	s.Config.MaxFetchEntries = o.FetchBatch
	s.Config.IdleBackoffMax = o.Backoff
	s.OOBEntriesPerStep = o.OOBRate
	s.Token, s.TokenLag = o.Token, o.TokenLag
	s.Config.IdleRotations = o.IdleRot
	s.Config.TokenTimeoutMin = o.TimeoutMin
	return s
}

// replay returns the command line that reruns one seed.
func (o *simOptions) replay(hosts int, seed uint64) string {
	def := sim.DefaultOptions(hosts, seed)
	args := []string{"exo sim", fmt.Sprintf("--hosts %d --seed %d --seeds 1", hosts, seed)}
	add := func(cond bool, s string) {
		if cond {
			args = append(args, s)
		}
	}
	add(!o.Faults, "--faults=false")
	add(o.Faults && o.Drop != def.Drop, fmt.Sprintf("--drop %g", o.Drop))
	add(o.Faults && o.Dup != def.Dup, fmt.Sprintf("--dup %g", o.Dup))
	add(o.Faults && o.Delay != def.MaxDelay, fmt.Sprintf("--delay %d", o.Delay))
	add(o.Faults && !o.Partitions, "--partitions=false")
	add(o.Faults && !o.Crashes, "--crashes=false")
	add(o.Amnesia != 0, fmt.Sprintf("--amnesia %g", o.Amnesia))
	add(o.Keep != 0, fmt.Sprintf("--keep-entries %d", o.Keep))
	add(o.Retain != 0, fmt.Sprintf("--retain %d", o.Retain))
	add(o.Pace != 0, fmt.Sprintf("--transfer-pace %d", o.Pace))
	add(o.AcceptLoss, "--accept-loss")
	add(o.Forge != 0, fmt.Sprintf("--forge %g", o.Forge))
	add(o.Roster != 0, fmt.Sprintf("--roster-changes %g", o.Roster))
	add(o.Keys != 0, fmt.Sprintf("--key-rotations %g", o.Keys))
	add(o.Propose != def.ProposeP, fmt.Sprintf("--propose %g", o.Propose))
	add(o.FetchBatch != def.Config.MaxFetchEntries, fmt.Sprintf("--fetch-batch %d", o.FetchBatch))
	add(o.Backoff != exo.DefaultIdleBackoffMax, fmt.Sprintf("--idle-backoff %d", o.Backoff))
	add(o.OOBRate != def.OOBEntriesPerStep, fmt.Sprintf("--oob-bandwidth %d", o.OOBRate))
	add(o.Token, "--token")
	add(o.IdleRot != exo.DefaultIdleRotations, fmt.Sprintf("--idle-rotations %d", o.IdleRot))
	add(o.TimeoutMin != sim.DefaultOptions(5, 1).Config.TokenTimeoutMin, fmt.Sprintf("--token-timeout-min %d", o.TimeoutMin))
	add(o.Token && o.TokenLag != 4, fmt.Sprintf("--token-lag %d", o.TokenLag))
	add(o.Ticks != def.Ticks, fmt.Sprintf("--ticks %d", o.Ticks))
	add(o.Quiet != def.Quiet, fmt.Sprintf("--quiet %d", o.Quiet))
	return strings.Join(args, " ") + " -v"
}

type seedResult struct {
	seed     uint64
	err      error
	stats    sim.Stats
	converge int
}

func runSim(ctx context.Context, o *simOptions) error {
	failed := false
	for _, hosts := range o.Hosts {
		rep, err := simRack(ctx, o, hosts)
		if err != nil {
			return err
		}
		if rep.Violations > 0 {
			failed = true
		}
		if o.JSON {
			enc := json.NewEncoder(o.Out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return fmt.Errorf("sim: writing report: %w", err)
			}
			continue
		}
		fmt.Fprintf(o.Out, "hosts=%d seeds=%d..%d: %d violations, %d stalled after amnesia (%d on an ambiguous fork)\n",
			hosts, rep.FirstSeed, rep.FirstSeed+uint64(rep.Seeds)-1, rep.Violations, rep.Stalled, rep.StalledAmbig)
		fmt.Fprintf(o.Out, "  frames=%d oob=%d proposed=%d delivered-entries=%d dropped-reported=%d",
			rep.Frames, rep.Messages, rep.Proposed, rep.AgreedEntries, rep.Dropped)
		if rep.Forged > 0 {
			fmt.Fprintf(o.Out, " forged=%d (every one BAD_TAG: checked)", rep.Forged)
		}
		if o.Keys > 0 {
			fmt.Fprintf(o.Out, " key-rotations=%d key-switches=%d genuine-bad-tag=%d (every rotation completed: checked; no genuine frame BAD_TAG between members: checked without --roster-changes)", rep.KeyRotations, rep.KeySwitches, rep.GenuineBadTag)
		}
		if o.Roster > 0 {
			fmt.Fprintf(o.Out, " roster-switches=%d (switch points and one-host steps: checked)", rep.RosterSwitches)
		}
		if o.AcceptLoss {
			fmt.Fprintf(o.Out, " accepted-losses=%d lost-entries=%d (each in a reported doubt, delivered only by hosts that lost their state: checked)", rep.AcceptedLosses, rep.LostEntries)
		}
		if o.Keep > 0 {
			fmt.Fprintf(o.Out, " compactions=%d past-floor=%d floor-jumps=%d (each to a compacted position: checked)", rep.Compactions, rep.PastFloor, rep.FloorJumps)
			if o.Retain > 0 {
				fmt.Fprintf(o.Out, " archive-answers=%d archive-misses=%d", rep.ArchiveAnswers, rep.ArchiveMisses)
			}
		}
		fmt.Fprintln(o.Out)
		if t := rep.Token; t != nil {
			fmt.Fprintf(o.Out, "  token: records=%d fast-steps=%d sent-by-fast-path=%d batches=%d handoffs=%d self-halts=%d quiesces=%d arms=%d arm-misses=%d desyncs=%d unlogged-sends=%d (fenced %d) fenced-restarts=%d (taken over %d, fence lifted %d) stalled-with-fenced=%d\n",
				t.Records, t.FastSteps, t.Sent, t.Popped, t.Handoffs, t.Halts, t.Quiesces, t.Arms, t.ArmMisses, t.Desyncs, t.Unlogged, t.Fenced, t.FencedRestarts, t.Recovered, t.Unfenced, rep.StalledFenced)
		}
		fmt.Fprintf(o.Out, "  view-changes=%d takeovers=%d crashes=%d partitions=%d converge-ticks p50=%d max=%d\n",
			rep.ViewChanges, rep.Takeovers, rep.Crashes, rep.Partitions, rep.ConvergeP50, rep.ConvergeMax)
		fmt.Fprintf(o.Out, "  %.1fs, %.0f simulated frames/s\n", rep.Seconds, rep.FramesPerSec)
		if rep.Violations > 0 {
			fmt.Fprintf(o.Out, "  FIRST VIOLATION (seed %d): %s\n  replay: %s\n", rep.FailingSeeds[0], rep.FirstViolation, rep.Replay)
		}
	}
	if failed {
		return &exitError{code: 1, err: fmt.Errorf("sim: property violations found")}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func simRack(ctx context.Context, o *simOptions, hosts int) (*simReport, error) {
	start := time.Now()
	seeds := make(chan uint64)
	results := make([]seedResult, o.Seeds)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for w := 0; w < o.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				r := seedResult{seed: seed}
				s, err := sim.New(o.options(hosts, seed))
				if err != nil {
					r.err = err
				} else {
					if o.Verbose {
						s.Trace(func(l string) {
							mu.Lock()
							fmt.Fprintln(o.Err, l)
							mu.Unlock()
						})
					}
					r.err = s.Run()
					r.stats = s.Stats
					r.converge = s.Checker().QuietTicks
				}
				mu.Lock()
				results[seed-o.Seed] = r
				done++
				if o.Progress && done%(o.Seeds/10) == 0 {
					fmt.Fprintf(o.Err, "\rhosts=%d: %d/%d seeds", hosts, done, o.Seeds)
				}
				mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for i := 0; i < o.Seeds; i++ {
		select {
		case seeds <- o.Seed + uint64(i):
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(seeds)
	wg.Wait()
	if o.Progress {
		fmt.Fprintln(o.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("sim: interrupted: %w", err)
	}
	rep := &simReport{Hosts: hosts, FirstSeed: o.Seed, Seeds: o.Seeds}
	var conv []int
	for _, r := range results {
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
		rep.Takeovers += st.Takeovers
		rep.Crashes += st.Crashes
		rep.Partitions += st.Partitions
		rep.Compactions += st.Compactions
		rep.ArchiveAnswers += st.ArchiveAnswers
		rep.ArchiveMisses += st.ArchiveMisses
		rep.PastFloor += st.PastFloor
		rep.AcceptedLosses += st.AcceptedLosses
		rep.LostEntries += st.LostEntries
		rep.FloorJumps += st.FloorJumps
		if st.StalledAmbiguous {
			rep.StalledAmbig++
		}
		if o.Token {
			if rep.Token == nil {
				rep.Token = &simTokenReport{}
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
		if st.Stalled || st.StalledFenced {
			rep.Stalled += b2i(st.Stalled)
		} else if r.err == nil {
			conv = append(conv, r.converge)
		}
		if r.err != nil {
			rep.Violations++
			rep.FailingSeeds = append(rep.FailingSeeds, r.seed)
			if rep.FirstViolation == "" {
				rep.FirstViolation = r.err.Error()
				rep.Replay = o.replay(hosts, r.seed)
			}
		}
	}
	if len(conv) > 0 {
		slices.Sort(conv)
		rep.ConvergeP50, rep.ConvergeMax = conv[len(conv)/2], conv[len(conv)-1]
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.FramesPerSec = float64(rep.Frames) / rep.Seconds
	return rep, nil
}

// isTerminal reports whether w is a character device (progress lines with
// carriage returns only make sense there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
