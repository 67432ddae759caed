//go:build exo_broken_history && !exo_broken_distinct

package exo

// Test build only: the history comparison is switched off.
const (
	brokenDistinct = false
	brokenHistory  = true
)
