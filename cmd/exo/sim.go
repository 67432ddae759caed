package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/exo/sim"
)

// simOptions are the flags of exo sim: the sweep run for each rack size,
// and how to print it.
type simOptions struct {
	Hosts        []int
	Faults       bool
	JSON         bool
	Verbose      bool
	ShowProgress bool // print progress to Err (a terminal, long runs)
	sim.Sweep
	Out io.Writer
	Err io.Writer
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

--key-rotations: the operator starts a key rotation when none runs; hosts
stage the next key at random ticks, and every run must end with every
member sending under the newest key.

--roster-changes: a member proposes removing a host, adding one back or
adding a spare; the checker checks the switch points and that consecutive
rosters differ by one host.

--token: every host runs a fast path that sends (xdp_token: the rule of
exo.Engine; the daemon's control plane, exo/token) in front of its core,
which reads the fast path's records late, by --token-lag network steps and
now and then up to 4 ticks more (docs/token.md).

--fault-ticks and --lab-timing: faults held as long as the lab's nemesis
holds them, with the daemon's timers; every report gives the majority
stall, the longest the connected majority's agreement pointer stood still
in the faulty phase (docs/simulation.md).

--forge: an attacker without the key delivers a forged copy of a frame
(changed tag, or changed fields under the old tag); every copy must be
rejected BAD_TAG.
`,
		Example: `  exo sim --hosts 5 --seeds 10000
  exo sim --hosts 3,4,5,7,16 --seeds 1000 --json
  exo sim --hosts 5 --seed 42 --seeds 1 -v      # replay one seed with a trace
  exo sim --hosts 5 --seeds 200 --amnesia 0.3   # restarts that lose their disk
  exo sim --hosts 3,5,7 --seeds 1000 --token     # the token in a fast path (xdp_token)
  exo sim --hosts 5 --seeds 200 --lab-timing --fault-ticks 2000 --ticks 40000 --quiet 8000`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Out, o.Err = cmd.OutOrStdout(), cmd.ErrOrStderr()
			o.ShowProgress = !o.JSON && !o.Verbose && o.Seeds >= 100 && isTerminal(o.Err)
			if !o.Faults {
				b := &o.Base
				b.Drop, b.Dup, b.MaxDelay, b.Partitions, b.Crashes, b.Amnesia = 0, 0, 0, false, false, 0
			}
			o.NoFaults = !o.Faults
			if err := o.validate(); err != nil {
				return &exitError{code: 2, err: err}
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runSim(cmd.Context(), o)
		},
	}
	def := sim.SweepDefaults()
	f := cmd.Flags()
	f.IntSliceVar(&o.Hosts, "hosts", []int{5}, "rack sizes to simulate (1..255), e.g. 3,4,5,7,16")
	f.Uint64Var(&o.FirstSeed, "seed", 1, "first seed")
	f.IntVar(&o.Seeds, "seeds", 100, "number of seeds per rack size")
	f.IntVar(&o.Base.Ticks, "ticks", def.Ticks, "ticks of the faulty phase")
	f.IntVar(&o.Base.FaultTicks, "fault-ticks", 0, "how long a partition or a crash lasts on average, in ticks (0: 50); see below")
	f.IntVar(&o.Base.DiskTicks, "disk-ticks", 0, "a host's disk write (the fsync the daemon waits on before it sends) holds its output 0..N ticks, in the faulty phase (0: none)")
	f.BoolVar(&o.Base.LabTiming, "lab-timing", false, "the daemon's timing in ticks (token timeout 40..200, view-change timeout 800, ...) instead of the core's defaults")
	f.IntVar(&o.Base.Quiet, "quiet", def.Quiet, "ticks after the faults stop within which the rack must converge")
	f.Float64Var(&o.Base.Drop, "drop", def.Drop, "probability that a frame or message is lost")
	f.Float64Var(&o.Base.Dup, "dup", def.Dup, "probability that a frame or message is duplicated")
	f.IntVar(&o.Base.MaxDelay, "delay", def.MaxDelay, "extra random delay in network steps (reordering)")
	f.BoolVar(&o.Faults, "faults", true, "inject faults (--faults=false: a perfect network, no crashes)")
	f.BoolVar(&o.Base.Partitions, "partitions", true, "partition and heal the rack at random")
	f.BoolVar(&o.Base.Crashes, "crashes", true, "crash and restart hosts at random")
	f.Float64Var(&o.Base.Amnesia, "amnesia", 0, "probability that a restart also loses the durable state")
	f.BoolVar(&o.Base.AcceptLoss, "accept-loss", false, "play exo recover --accept-loss when a run stalls on lost state (see above)")
	f.IntVar(&o.Base.KeepEntries, "keep-entries", 0, "compact every host's log as the daemon's keep_entries does (0: never): a host that lost its state rejoins by state transfer")
	f.IntVar(&o.Base.Config.TransferBytesPerTick, "transfer-pace", 0, "pace state transfers at this many bytes per tick (the daemon's transfer_rate; 0: none)")
	f.IntVar(&o.Base.Config.TransferYield, "transfer-yield", 0, "with --transfer-pace: make it the ceiling of an adaptive pace that keeps the rack's growth at this percent of its growth in the transfer's pauses (the daemon's transfer_yield; 0: a fixed pace)")
	f.IntVar(&o.Base.Retain, "retain", 0, "with --keep-entries: how far behind its agreement pointer a host keeps compacted entries on disk to answer fetches (retain.entries)")
	f.Float64Var(&o.Base.Forge, "forge", 0, "probability per frame that a forged copy is delivered too (must be BAD_TAG)")
	f.Float64Var(&o.Base.KeyRotations, "key-rotations", 0, "per-tick probability that the operator starts a key rotation (see below)")
	f.Float64Var(&o.Base.RosterChanges, "roster-changes", 0, "per-tick probability that a member proposes a roster change (see below)")
	f.Float64Var(&o.Base.ProposeP, "propose", def.ProposeP, "per-tick probability that a client publishes at a host")
	f.IntVar(&o.Base.OOBEntriesPerStep, "oob-bandwidth", def.OOBEntriesPerStep, "log entries one OOB link carries per network step (0: unlimited); messages on a link queue behind each other")
	f.IntVar(&o.Base.Config.MaxFetchEntries, "fetch-batch", def.Config.MaxFetchEntries, "entries in one fetch response at most (the daemon: 1024; small, so that short logs need batches too)")
	f.IntVar(&o.Base.Config.FetchWindow, "fetch-window", def.Config.FetchWindow, "batches a catch-up keeps in flight (the daemon's fetch_window; 1: one at a time)")
	f.IntVar(&o.Base.Config.IdleBackoffMax, "idle-backoff", def.Config.IdleBackoffMax, "cap of the idle back-off in ticks (the daemon's idle_backoff_max_ticks; -1: none)")
	f.BoolVar(&o.Base.Token, "token", false, "every host's token is in a fast path in front of its core (xdp_token; see below)")
	f.IntVar(&o.Base.TokenLag, "token-lag", def.TokenLag, "with --token: network steps the control plane may read its fast path's records late")
	f.IntVar(&o.Base.Config.GoneTicks, "gone-ticks", def.Config.GoneTicks, "ticks a takeover waits on a holder whose daemon is known dead (the daemon's gone_ticks; half the crashes are a daemon's alone, whose peers are told; 0: no notices)")
	f.Float64Var(&o.Base.Pauses, "pauses", 0, "per-tick probability that a running host pauses (a process its machine does not schedule): it neither ticks nor reads for 1..--pause-ticks ticks, and loses nothing")
	f.IntVar(&o.Base.PauseTicks, "pause-ticks", 0, "the longest pause in ticks (0: twice the token timeout)")
	f.IntVar(&o.Base.Config.TokenTimeoutMin, "token-timeout-min", def.Config.TokenTimeoutMin, "the adaptive token timeout's floor in ticks (token_timeout_min_ticks; 0 or 16: fixed; with --lab-timing 0 is the daemon's floor, 40, of a ceiling of 200)")
	f.IntVar(&o.Base.Config.IdleRotations, "idle-rotations", def.Config.IdleRotations, "rotations of empty passes at full speed before the idle back-off (the daemon's idle_rotations: 4, 32 in token mode)")
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
	b := &o.Base
	ceiling, labNote := exo.DefaultTokenTimeout, ""
	if b.LabTiming {
		ceiling, labNote = exo.LabTokenTimeout, " with --lab-timing"
	}
	switch {
	case o.Seeds < 1:
		return fmt.Errorf("--seeds: %d must be at least 1", o.Seeds)
	case b.DiskTicks < 0:
		return fmt.Errorf("--disk-ticks: %d must not be negative (0: the disk takes no time)", b.DiskTicks)
	case b.FaultTicks < 0:
		return fmt.Errorf("--fault-ticks: %d must not be negative (0: 50 ticks)", b.FaultTicks)
	case b.Ticks < 0 || b.Quiet < 1:
		return fmt.Errorf("--ticks must be >= 0 and --quiet >= 1")
	case b.Drop < 0 || b.Drop >= 1, b.Dup < 0 || b.Dup >= 1, b.Amnesia < 0 || b.Amnesia > 1, b.ProposeP < 0 || b.ProposeP > 1, b.Forge < 0 || b.Forge > 1, b.RosterChanges < 0 || b.RosterChanges > 1, b.KeyRotations < 0 || b.KeyRotations > 1:
		return fmt.Errorf("--drop and --dup must be in [0,1), --amnesia, --forge and --propose in [0,1]")
	case b.MaxDelay < 0:
		return fmt.Errorf("--delay: %d must not be negative", b.MaxDelay)
	case b.KeepEntries < 0:
		return fmt.Errorf("--keep-entries: %d must not be negative (0: never compact)", b.KeepEntries)
	case b.Config.TransferBytesPerTick < 0:
		return fmt.Errorf("--transfer-pace: %d must not be negative (0: no pacing)", b.Config.TransferBytesPerTick)
	case b.Config.TransferYield < 0 || b.Config.TransferYield > 99 || (b.Config.TransferYield > 0 && b.Config.TransferBytesPerTick == 0):
		return fmt.Errorf("--transfer-yield: %d must be 0, or a percent from 1 to 99 with --transfer-pace (the pace it adapts)", b.Config.TransferYield)
	case b.Retain < 0 || (b.Retain > 0 && b.KeepEntries == 0):
		return fmt.Errorf("--retain: %d must be 0, or positive with --keep-entries (it keeps what compaction cuts)", b.Retain)
	case o.Workers < 1:
		return fmt.Errorf("--workers: %d must be at least 1", o.Workers)
	case b.Config.GoneTicks < 0 || b.Config.GoneTicks > exo.DefaultTokenTimeout:
		return fmt.Errorf("--gone-ticks: %d is outside 0..%d (the token timeout)", b.Config.GoneTicks, exo.DefaultTokenTimeout)
	case b.Config.TokenTimeoutMin < 0 || b.Config.TokenTimeoutMin > ceiling:
		return fmt.Errorf("--token-timeout-min: %d is outside 0..%d (the token timeout's ceiling%s)", b.Config.TokenTimeoutMin, ceiling, labNote)
	case b.Pauses < 0 || b.Pauses > 1:
		return fmt.Errorf("--pauses: %g is outside [0,1]", b.Pauses)
	case b.PauseTicks < 0:
		return fmt.Errorf("--pause-ticks: %d must not be negative (0: twice the token timeout)", b.PauseTicks)
	case b.Config.IdleRotations < 1:
		return fmt.Errorf("--idle-rotations: %d must be at least 1", b.Config.IdleRotations)
	case b.TokenLag < 0:
		return fmt.Errorf("--token-lag: %d must not be negative", b.TokenLag)
	case b.OOBEntriesPerStep < 0:
		return fmt.Errorf("--oob-bandwidth: %d must not be negative", b.OOBEntriesPerStep)
	case b.Config.IdleBackoffMax < -1:
		return fmt.Errorf("--idle-backoff: %d must be -1 (none) or more", b.Config.IdleBackoffMax)
	case b.Config.MaxFetchEntries < 1:
		return fmt.Errorf("--fetch-batch: %d must be at least 1", b.Config.MaxFetchEntries)
	case b.Config.FetchWindow < 1 || b.Config.FetchWindow > exo.MaxFetchWindow:
		return fmt.Errorf("--fetch-window: %d is outside 1..%d", b.Config.FetchWindow, exo.MaxFetchWindow)
	}
	return nil
}

// runSim runs the sweep for every rack size and prints each report.
func runSim(ctx context.Context, o *simOptions) error {
	if o.Verbose {
		o.Trace = func(l string) { fmt.Fprintln(o.Err, l) }
	}
	failed := false
	for _, hosts := range o.Hosts {
		if o.ShowProgress {
			o.Progress = func(done int) { fmt.Fprintf(o.Err, "\rhosts=%d: %d/%d seeds", hosts, done, o.Seeds) }
		}
		rep, err := o.Run(ctx, hosts)
		if o.ShowProgress {
			fmt.Fprintln(o.Err)
		}
		if err != nil {
			return err
		}
		if rep.Violations > 0 {
			failed = true
		}
		if o.JSON {
			if err := writeJSON(o.Out, rep); err != nil {
				return fmt.Errorf("sim: writing report: %w", err)
			}
			continue
		}
		fmt.Fprint(o.Out, rep.Summary())
	}
	if failed {
		return &exitError{code: 1, err: fmt.Errorf("sim: property violations found")}
	}
	return nil
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
