//go:build exo_broken_distinct

package exo

// Test build only: the distinct-sender rule is switched off.
const (
	brokenDistinct = true
	brokenHistory  = false
)
