package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/lab"
)

func newChaosCmd() *cobra.Command {
	var hosts int
	var dur, every time.Duration
	var seed uint64
	var prefix, out string
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run a seeded nemesis on a lab rack of daemons and check what they agreed",
		Long: `chaos builds a lab rack, starts a daemon per host with a durable log (fsync per
entry) and, while clients publish from every host, a nemesis that at random but
reproducibly (--seed) partitions the rack (random splits, the seed's
{A,B}/{C,D,E} minority split, one-way cuts), heals it, kills daemons with
SIGKILL and restarts them from their logs, and drops a fraction of one host's
frames (nft rules on the bridge). At the end it heals everything and checks
every host's agreed stream and every client's acknowledgements: divergent
streams, lost acknowledged messages, duplicates. It prints a short report,
writes the machine-readable one to --out, and exits 1 on any violation.
Needs root.`,
		Example: `  sudo exo lab chaos --duration 5m --seed 1
  sudo exo lab chaos --duration 30s --seed 7 --out /tmp/chaos.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lab.CheckRoot(); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("exo lab chaos needs root: run with sudo")}
			}
			if hosts < 3 {
				return &exitError{code: 2, err: fmt.Errorf("--hosts: %d, need at least 3", hosts)}
			}
			ctx := cmd.Context()
			rack, err := lab.Up(ctx, lab.Options{Prefix: prefix, Hosts: hosts, Force: true})
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
			c, err := cluster.Start(ctx, rack, cluster.Options{Bin: bin, Dir: dir, Config: cluster.Durable(dir, true)})
			if err != nil {
				return err
			}
			defer c.Stop()
			w := cmd.OutOrStdout()
			rep, err := c.Chaos(ctx, cluster.ChaosOptions{Duration: dur, Seed: seed, Every: every,
				Log: func(s string) { fmt.Fprintln(w, "  "+s) }})
			if err != nil {
				return err
			}
			fmt.Fprintln(w, rep.Summary())
			if out != "" {
				b, _ := json.MarshalIndent(rep, "", "  ")
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
	cmd.Flags().IntVar(&hosts, "hosts", 5, "hosts in the rack")
	cmd.Flags().DurationVar(&dur, "duration", time.Minute, "how long the nemesis runs")
	cmd.Flags().DurationVar(&every, "every", 700*time.Millisecond, "mean time between nemesis actions")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "nemesis seed (the schedule of faults)")
	cmd.Flags().StringVar(&prefix, "prefix", "exochaos", "name prefix of the lab rack")
	cmd.Flags().StringVar(&out, "out", "", "write the JSON report here")
	return cmd
}
