//go:build exo_broken_history && !exo_broken_distinct

package explore

import "testing"

// TestBrokenHistory: with the history comparison switched off in the core,
// a host appends a frame sent on another branch of the log.
//
//	go test -tags exo_broken_history ./exo/explore -run Broken -v
func TestBrokenHistory(t *testing.T) {
	checkBroken(t, 3, "agreement")
}
