//go:build !exo_broken_distinct && !exo_broken_history

package exo

// These constants exist so that a test build can break one protocol rule on
// purpose (build tags exo_broken_distinct, exo_broken_history) and show that
// the simulator catches it. In every normal build both are false and the
// compiler removes the branches.
const (
	brokenDistinct = false
	brokenHistory  = false
)
