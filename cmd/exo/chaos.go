package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
)

func newChaosCmd() *cobra.Command {
	var hosts, wipes, count, timeout, timeoutMin, fetchWindow, goneTicks, loadWindow int
	var fsync, hugePages, preallocate, logLevel string
	var dur, every, catchUp, spacing time.Duration
	var only []string
	var seed uint64
	var prefix, out, offload string
	var jsonOut, cpuProfile, memProfile, keepData bool
	var restartProfile time.Duration
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run a seeded nemesis on a lab rack of daemons and check what they agreed",
		Long: `chaos builds a lab rack, starts a daemon per host with a durable log (fsync per
batch) and, while clients publish from every host, a nemesis that at random but
reproducibly (--seed) partitions the rack (random splits, the seed's
{A,B}/{C,D,E} minority split, one-way cuts on the bridge), cuts one direction
of a host's own interface (ingress or egress), heals it, kills daemons with
SIGKILL (also 100-350 ms after a heal, during the reconciliation) and restarts
them from their logs 1-4 s later, drops a fraction of one host's frames, and
with --wipes kills a host, wipes its durable log and restarts it with --join.

--only restricts the nemesis to some actions (partition, seed-split,
one-way, host-cut, loss, heal, kill, heal-kill, wipe, and none: no fault, a
probe of the measurement), --count ends the run after that many actions, and
--spacing paces it: one action every --spacing, undone --spacing after it
(a heal; the killed host restarted from its log) and the rack given
--spacing again before the next, so that each action's figure is its own.
"--only kill --count 50 --spacing 1500ms" is "kill -9 of a random host, 50
times"; "--only none --duration 10m --spacing 1s" is a steady load without
faults (the daemons' takeovers then are all false ones). --offload picks
the daemons' fast path (xdp-token: the XDP programs pass the token,
docs/token.md).

Recovery figures: a subscriber on every host sees each advance of its
agreement pointer as the message arrives. Per kind of action (kill,
heal-kill, restart, partition, seed-split, one-way, host-cut-ingress,
host-cut-egress, loss, heal, none) the report gives count, p50, p90, p99 and
max of the time from the action (once it had taken effect: a kill when
its SIGKILL is sent, a network fault or heal when nft has loaded the rules,
a restart when the daemon's API answers) until agreement moved again at every host
that must move: the hosts in every largest set of live hosts that reach each
other both ways, when that set is a majority (with a two-way partition, the
majority side). A host moves again when it delivers an entry h+n entries
past the rack's agreement pointer at the action (every host's turn came
once after it). In the random schedule the next action cuts a measurement
short (counted apart). Also: the view-change holds (stalls of the rack's
agreement pointer in which an epoch was installed), the daemons' takeovers,
view changes and false takeovers (n/a when the daemons do not report them),
and the resolution (how often a moving host's pointer is seen advancing;
what a status read costs).

At the end it heals everything and checks: every host reaches, within
--catch-up of the final heal, the furthest agreement pointer any host had
then; a last round is agreed; every host's agreed stream is the same, with
every acknowledged message once at its position; no daemon reported a
SAFETY event. It explains every stall of the rack's agreement pointer over
1 s (the view changes that ran and what they waited for, halted hosts, hosts
catching up, and how long a connected majority of live hosts existed). It
prints a report (--json: as JSON), writes the JSON one to --out, and exits 1
on any violation. The daemons' durable logs (1-2 GB in 5 minutes) are removed
after a run without violations (--keep-data keeps them); their logs, configs
and profiles stay. Needs root.`,
		Example: `  sudo exo lab chaos --hosts 7 --duration 5m --seed 1
  sudo exo lab chaos --duration 30s --seed 7 --out /tmp/chaos.json
  sudo exo lab chaos --hosts 7 --duration 1m --wipes 1   # a lost disk too (short logs: see docs/recovery.md)
  sudo exo lab chaos --duration 5m --offload xdp-token  # the token in the kernel
  sudo exo lab chaos --only kill --count 50 --spacing 1500ms   # kill -9 of a random host, 50 times
  sudo exo lab chaos --only none --duration 10m --spacing 1s   # no fault: false takeovers (adaptive 10-50 ms)
  sudo exo lab chaos --only none --duration 10m --spacing 1s --token-timeout 40   # the same, fixed 10 ms`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lab.CheckRoot(); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("exo lab chaos needs root: run with sudo")}
			}
			switch {
			case hosts < 3:
				return &exitError{code: 2, err: fmt.Errorf("--hosts: %d, need at least 3", hosts)}
			case hosts > 16:
				return &exitError{code: 2, err: fmt.Errorf("--hosts: %d, at most 16 (the checker tries every set of hosts for a connected majority)", hosts)}
			case wipes < 0:
				return &exitError{code: 2, err: fmt.Errorf("--wipes: %d must not be negative", wipes)}
			case count < 0 || spacing < 0:
				return &exitError{code: 2, err: fmt.Errorf("--count and --spacing must not be negative")}
			case count > 0 && !cmd.Flags().Changed("duration"):
				dur = 0 // --count ends the run
			case dur <= 0:
				return &exitError{code: 2, err: fmt.Errorf("--duration must be positive")}
			}
			if timeout < 0 {
				return &exitError{code: 2, err: fmt.Errorf("--token-timeout: %d must not be negative (0: the daemons' default, %d)", timeout, daemon.DefaultTokenTimeout)}
			}
			if hi := cmp.Or(timeout, daemon.DefaultTokenTimeout); timeoutMin > hi {
				return &exitError{code: 2, err: fmt.Errorf("--token-timeout-min: %d is above the token timeout (%d): it is the adaptive timeout's floor, that its ceiling", timeoutMin, hi)}
			}
			if timeoutMin < 0 {
				return &exitError{code: 2, err: fmt.Errorf("--token-timeout-min: %d must not be negative (0: the daemons' default)", timeoutMin)}
			}
			if hi := cmp.Or(timeout, daemon.DefaultTokenTimeout); goneTicks < -1 || goneTicks > hi {
				return &exitError{code: 2, err: fmt.Errorf("--gone-ticks: %d is outside -1..%d, the token timeout (-1: gone notices ignored; 0: the daemons' default, 1)", goneTicks, hi)}
			}
			if loadWindow < 1 || loadWindow > 4096 {
				return &exitError{code: 2, err: fmt.Errorf("--load-window: %d is outside 1..4096", loadWindow)}
			}
			if fsync != "" && fsync != "batch" && fsync != "entry" && fsync != "none" {
				return &exitError{code: 2, err: fmt.Errorf("--fsync: %q is neither batch, entry nor none", fsync)}
			}
			if hugePages != "" && hugePages != "on" && hugePages != "off" {
				return &exitError{code: 2, err: fmt.Errorf("--huge-pages: %q is neither on nor off", hugePages)}
			}
			if preallocate != "" && preallocate != "on" && preallocate != "off" {
				return &exitError{code: 2, err: fmt.Errorf("--preallocate: %q is neither on nor off", preallocate)}
			}
			if fetchWindow < 0 || fetchWindow > exo.MaxFetchWindow {
				return &exitError{code: 2, err: fmt.Errorf("--fetch-window: %d is outside 1..%d (0: the daemons' default, %d)", fetchWindow, exo.MaxFetchWindow, exo.DefaultFetchWindow)}
			}
			if logLevel != "debug" && logLevel != "info" && logLevel != "warn" && logLevel != "error" {
				return &exitError{code: 2, err: fmt.Errorf("--log-level: %q is none of debug, info, warn, error", logLevel)}
			}
			if restartProfile < 0 {
				return &exitError{code: 2, err: fmt.Errorf("--restart-cpuprofile: %v must not be negative", restartProfile)}
			}
			if every <= 0 || catchUp <= 0 {
				return &exitError{code: 2, err: fmt.Errorf("--every and --catch-up must be positive")}
			}
			copts := cluster.ChaosOptions{Duration: dur, Seed: seed, Every: every, Wipes: wipes, CatchUp: catchUp,
				Only: only, Count: count, Spacing: spacing, LoadWindow: loadWindow}
			if err := cluster.CheckChaosOptions(copts); err != nil {
				return &exitError{code: 2, err: err}
			}
			if _, err := cluster.WithOffload(offload); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--offload: %w", err)}
			}
			w, logw := cmd.OutOrStdout(), cmd.OutOrStdout()
			if jsonOut {
				logw = cmd.ErrOrStderr()
			}
			copts.Log = func(s string) { fmt.Fprintln(logw, "  "+s) }
			rep, dir, err := cluster.RunChaos(cmd.Context(), cluster.ChaosRun{
				Lab:     cluster.LabOptions{Prefix: prefix, Hosts: hosts},
				Offload: offload, CPUProfile: cpuProfile, MemProfile: memProfile, RestartProfileFor: restartProfile, KeepData: keepData, TokenTimeout: timeout, TokenTimeoutMin: timeoutMin, FetchWindow: fetchWindow, GoneTicks: goneTicks, Fsync: fsync, HugePages: hugePages, Preallocate: preallocate, LogLevel: logLevel, Chaos: copts,
				Say: func(s string) { fmt.Fprintln(logw, s) },
			})
			if err != nil {
				return err
			}
			b, _ := json.MarshalIndent(rep, "", "  ")
			if jsonOut {
				fmt.Fprintln(w, string(b))
			} else {
				fmt.Fprintln(w, rep.Summary())
			}
			if out != "" {
				if err := os.WriteFile(out, b, 0o644); err != nil {
					return err
				}
			}
			if len(rep.Violations) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("chaos: %d violations (daemon logs in %s)", len(rep.Violations), dir)}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&hosts, "hosts", 5, "hosts in the rack (3..16)")
	cmd.Flags().DurationVar(&dur, "duration", time.Minute, "how long the nemesis runs (with --count: no bound unless given)")
	cmd.Flags().StringSliceVar(&only, "only", nil, "only these actions: "+strings.Join(cluster.ChaosActions, ", ")+" (none: no fault)")
	cmd.Flags().IntVar(&count, "count", 0, "end the run after this many actions (0: --duration ends it)")
	cmd.Flags().DurationVar(&spacing, "spacing", 0, "pace the nemesis: an action every --spacing, undone (heal, restart) --spacing after it, each measured on its own (0: random, --every)")
	cmd.Flags().DurationVar(&every, "every", 700*time.Millisecond, "mean time between nemesis actions (random schedule)")
	cmd.Flags().DurationVar(&catchUp, "catch-up", 5*time.Second, "every host must reach the furthest agreement pointer within this long of the final heal")
	cmd.Flags().IntVar(&wipes, "wipes", 0, "times a host's durable log is wiped (restart with --join); long runs need state transfer (docs/recovery.md)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "nemesis seed (the schedule of faults)")
	cmd.Flags().StringVar(&prefix, "prefix", "exochaos", "name prefix of the lab rack")
	cmd.Flags().StringVar(&offload, "offload", "software", "the daemons' fast path: "+strings.Join(cluster.OffloadModes, ", "))
	cmd.Flags().StringVar(&out, "out", "", "write the JSON report here")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON (the actions go to stderr)")
	cmd.Flags().StringVar(&fsync, "fsync", "", "every daemon's fsync policy: batch (the default: before anything that depends on the log is sent) entry (also after every batch of entries received: the policy before batch became lazy) or none (never: a crash of the machine may lose what the host vouched for; to tell the fsyncs' share of a figure)")
	cmd.Flags().StringVar(&preallocate, "preallocate", "", "every daemon's preallocate: on (the daemons' default: the durable log's next segment written ahead, appends synced with fdatasync) or off (segments grow as they are written)")
	cmd.Flags().StringVar(&hugePages, "huge-pages", "", "every daemon's huge_pages: on (the heap in transparent huge pages, freed sooner when a daemon is killed) or off (the daemons' default)")
	cmd.Flags().IntVar(&fetchWindow, "fetch-window", 0, "every daemon's fetch_window: the batches a host catching up keeps in flight (0: the daemons' default, 4; 1: one at a time)")
	cmd.Flags().IntVar(&goneTicks, "gone-ticks", 0, "every daemon's gone_ticks: how long a takeover waits on a holder whose daemon is known dead (its OOB connections ended, a dial refused); -1: such notices ignored (0: the daemons' default, 1 tick)")
	cmd.Flags().IntVar(&loadWindow, "load-window", 16, "messages each host's client keeps in flight (publishes awaiting agreement): 16 saturates the CPUs of a small machine; 1 is a light load")
	cmd.Flags().IntVar(&timeout, "token-timeout", 0, "every daemon's token_timeout_ticks in ticks of 250µs: the adaptive token timeout's ceiling (0: the daemons' default, 200); alone, a fixed timeout (40: the daemons' default before 2026-11-28)")
	cmd.Flags().IntVar(&timeoutMin, "token-timeout-min", 0, "every daemon's token_timeout_min_ticks, the adaptive token timeout's floor in ticks of 250µs (0: the daemons' default: 40, or --token-timeout's value when that is set: fixed)")
	cmd.Flags().BoolVar(&keepData, "keep-data", false, "keep the daemons' durable logs after a run without violations (removed by default: 1-2 GB a 5-minute run; the daemons' logs stay)")
	cmd.Flags().BoolVar(&cpuProfile, "cpuprofile", false, "every daemon writes a CPU profile to <daemon log dir>/<host>.cpu.pprof (a killed daemon's run leaves none)")
	cmd.Flags().BoolVar(&memProfile, "memprofile", false, "every daemon writes a heap profile to <daemon log dir>/<host>.mem.pprof when the run stops it (a killed daemon's run leaves none; its restart's run writes it)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "every daemon's log level: debug (also every fetch sent, answered and received, with its range, size and time: a catch-up traced), info, warn or error")
	cmd.Flags().DurationVar(&restartProfile, "restart-cpuprofile", 0, "every restarted daemon writes a CPU profile of its first this long (its log read and catch-up) to <daemon log dir>/<host>.restart<k>.cpu.pprof (0: none)")
	return cmd
}
