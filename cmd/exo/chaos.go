package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/lab"
)

func newChaosCmd() *cobra.Command {
	var hosts, wipes int
	var dur, every, catchUp time.Duration
	var seed uint64
	var prefix, out, offload string
	var jsonOut bool
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

At the end it heals everything and checks: every host reaches, within
--catch-up of the final heal, the furthest agreement pointer any host had
then; a last round is agreed; every host's agreed stream is the same, with
every acknowledged message once at its position; no daemon reported a
SAFETY event. It explains every stall of the rack's agreement pointer over
1 s (the view changes that ran and what they waited for, halted hosts, hosts
catching up, and how long a connected majority of live hosts existed). It
prints a report (--json: as JSON), writes the JSON one to --out, and exits 1
on any violation. Needs root.`,
		Example: `  sudo exo lab chaos --hosts 7 --duration 5m --seed 1
  sudo exo lab chaos --duration 30s --seed 7 --out /tmp/chaos.json
  sudo exo lab chaos --hosts 7 --duration 1m --wipes 1   # a lost disk too (short logs: see docs/recovery.md)
  sudo exo lab chaos --duration 5m --offload xdp-token  # the token in the kernel`,
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
			case dur <= 0 || every <= 0 || catchUp <= 0:
				return &exitError{code: 2, err: fmt.Errorf("--duration, --every and --catch-up must be positive")}
			}
			setOffload, err := cluster.WithOffload(offload)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--offload: %w", err)}
			}
			ctx := cmd.Context()
			rack, err := lab.Up(ctx, lab.Options{Prefix: prefix, Hosts: hosts, Force: true, BPFDir: daemon.DefaultBPFDir})
			if err != nil {
				return err
			}
			defer lab.Down(context.Background(), prefix)
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "exo-chaos-")
			if err != nil {
				return err
			}
			c, err := cluster.Start(ctx, rack, cluster.Options{Bin: bin, Dir: dir, Config: cluster.Hooks(cluster.Durable(dir, true), setOffload)})
			if err != nil {
				return err
			}
			w, logw := cmd.OutOrStdout(), cmd.OutOrStdout()
			if jsonOut {
				logw = cmd.ErrOrStderr()
			}
			fmt.Fprintf(logw, "chaos on %d hosts for %v, seed %d, offload %s (daemon logs in %s)\n", hosts, dur, seed, offload, dir)
			rep, err := c.Chaos(ctx, cluster.ChaosOptions{Duration: dur, Seed: seed, Every: every, Wipes: wipes, CatchUp: catchUp,
				Log: func(s string) { fmt.Fprintln(logw, "  "+s) }})
			if serr := c.Stop(); serr != nil && err == nil {
				fmt.Fprintf(logw, "stopping the daemons: %v\n", serr)
			}
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
	cmd.Flags().DurationVar(&dur, "duration", time.Minute, "how long the nemesis runs")
	cmd.Flags().DurationVar(&every, "every", 700*time.Millisecond, "mean time between nemesis actions")
	cmd.Flags().DurationVar(&catchUp, "catch-up", 5*time.Second, "every host must reach the furthest agreement pointer within this long of the final heal")
	cmd.Flags().IntVar(&wipes, "wipes", 0, "times a host's durable log is wiped (restart with --join); long runs need state transfer (docs/recovery.md)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "nemesis seed (the schedule of faults)")
	cmd.Flags().StringVar(&prefix, "prefix", "exochaos", "name prefix of the lab rack")
	cmd.Flags().StringVar(&offload, "offload", "software", "the daemons' fast path: "+strings.Join(cluster.OffloadModes, ", ")+" (xdp-token: the XDP programs pass the token, docs/token.md)")
	cmd.Flags().StringVar(&out, "out", "", "write the JSON report here")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON (the actions go to stderr)")
	return cmd
}
