package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manDate is the date the generated manual pages carry: fixed, so that
// the pages in docs/man change only when the commands do (tools/test.sh
// checks that they are current).
var manDate = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)

func newManCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:    "man",
		Short:  "Write the manual pages of exo and its commands (exo.1, exo-daemon.1, ...)",
		Hidden: true,
		Args:   cobra.NoArgs,
		Example: `  exo man --out docs/man
  man -l docs/man/exo-daemon.1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("man: %w", err)
			}
			root := cmd.Root()
			disableAutoGenTag(root)
			hdr := &doc.GenManHeader{Section: "1", Source: "exo", Manual: "exo manual", Date: &manDate}
			if err := doc.GenManTree(root, hdr, out); err != nil {
				return fmt.Errorf("man: %w", err)
			}
			names, _ := filepath.Glob(filepath.Join(out, "*.1"))
			fmt.Fprintf(cmd.OutOrStdout(), "%d manual pages in %s\n", len(names), out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "docs/man", "the directory to write the pages to")
	return cmd
}

// disableAutoGenTag drops cobra's "auto generated" line (it carries the
// day of generation) from every command's page.
func disableAutoGenTag(c *cobra.Command) {
	c.DisableAutoGenTag = true
	for _, sub := range c.Commands() {
		disableAutoGenTag(sub)
	}
}
