package hugepage

import (
	"context"
	"time"
)

// Stats is what one pass of Advise did.
type Stats struct {
	// Advised: mappings asked for huge pages in this pass (new since the
	// last), and their bytes.
	Advised      int
	AdvisedBytes int64
	// Collapsed: mappings whose small pages were collapsed into huge
	// ones, and their bytes.
	Collapsed      int
	CollapsedBytes int64
	// Huge: the process's anonymous memory in huge pages after the pass
	// (smaps' AnonHugePages, summed), and its anonymous memory in all.
	Huge, Anon int64
}

// Run calls Advise now and every interval until ctx ends, and report with
// each pass's Stats and error (report may be nil).
func Run(ctx context.Context, every time.Duration, report func(Stats, error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		st, err := Advise()
		if report != nil {
			report(st, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
