package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/lab"
	"github.com/exo-rack/exo/measure"
)

func newDemoCmd() *cobra.Command {
	o := &measure.DemoOptions{}
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Build a lab rack, run a daemon per host, publish from every host, compare the streams",
		Long: `demo runs the appliance end to end on this machine: it builds a lab rack (one
network namespace per host, veth pairs, a bridge; see exo lab), starts an exo
daemon in every namespace on raw Ethernet frames, publishes messages from
every host at once, follows every host's agreed stream and checks that they
are identical, then measures agreement latency at low load, prints the
figures and tears everything down. Needs root.`,
		Example: `  sudo exo demo
  sudo exo demo --hosts 7 --messages 50000 --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Hosts < 1 || o.Hosts > 255 {
				return &exitError{code: 2, err: fmt.Errorf("--hosts: %d is outside 1..255", o.Hosts)}
			}
			if o.Messages < o.Hosts {
				return &exitError{code: 2, err: fmt.Errorf("--messages: %d is fewer than one per host", o.Messages)}
			}
			if err := lab.CheckRoot(); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("exo demo needs root (network namespaces, veth, raw sockets): run with sudo")}
			}
			if !jsonOut {
				o.Log = cmd.OutOrStdout()
				if isTerminal(cmd.ErrOrStderr()) {
					o.Progress = cmd.ErrOrStderr()
				}
			}
			rep, err := measure.Demo(cmd.Context(), *o)
			if err != nil || !jsonOut {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().IntVar(&o.Hosts, "hosts", 5, "hosts in the rack")
	cmd.Flags().IntVar(&o.Messages, "messages", 20000, "messages to publish, spread over all hosts")
	cmd.Flags().IntVar(&o.Size, "size", 64, "payload bytes")
	cmd.Flags().StringVar(&o.Prefix, "prefix", "exodemo", "name prefix of the lab rack")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "leave the rack and daemons running at the end")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON")
	return cmd
}
