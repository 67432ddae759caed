//go:build exo_broken_distinct

package explore

import "testing"

// TestBrokenDistinct: with the distinct-sender rule switched off in the
// core, a host appends a frame whose sender is in its history, so fewer than
// h+1 distinct senders "agree" an entry and two hosts agree different ones.
// The explorer must find it, and the trace must replay.
//
//	go test -tags exo_broken_distinct ./exo/explore -run Broken -v
func TestBrokenDistinct(t *testing.T) {
	checkBroken(t, 3, "agreement")
}
