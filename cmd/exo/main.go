// Command exo is the one command-line tool of the Exo rack atomic broadcast
// appliance: the daemon (exo daemon); its operators' and applications'
// commands over the local API (send, tail, status, top, roster, key,
// recover); the rack lab and what runs on it (lab, demo, bench, probe,
// lab chaos); the protocol simulator (sim); the raw-frame tools (frame,
// raw). Every command is its flags, one call into a package and its
// output; the manual pages (docs/man) are generated from the commands.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code through cobra; quiet: the
// command printed what it had to say (exo status --brief), nothing more
// goes to stderr.
type exitError struct {
	code  int
	err   error
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// writeJSON writes v as indented JSON: the --json output of the commands.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "exo",
		Short: "Exo: rack-scale atomic broadcast over raw Ethernet",
		Long: `exo drives the Exo rack atomic broadcast appliance: hosts of one rack agree on
one total order of messages by taking turns broadcasting raw Ethernet frames
that carry a 64-bit sequence number and the ids of the previous floor(n/2)
senders. See docs/protocol.md and docs/wire.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.SetVersionTemplate("exo {{.Version}}\n")
	root.AddCommand(newSimCmd(nil))
	root.AddCommand(newLabCmd(nil))
	root.AddCommand(newFrameCmd())
	root.AddCommand(newProbeCmd(), newProbeEndpointCmd())
	root.AddCommand(newDaemonCmd(), newSendCmd(), newTailCmd(), newStatusCmd(), newDemoCmd(), newBenchCmd(), newRawCmd())
	root.AddCommand(newRecoverCmd())
	root.AddCommand(newTopCmd(), newRosterCmd(), newKeyCmd())
	root.AddCommand(newManCmd())
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		var ee *exitError
		isExit := errors.As(err, &ee)
		if !isExit || !ee.quiet {
			fmt.Fprintln(os.Stderr, "exo:", err)
		}
		if isExit {
			os.Exit(ee.code)
		}
		os.Exit(2)
	}
}
