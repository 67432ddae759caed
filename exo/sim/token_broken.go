//go:build exo_broken_token

package sim

// Test build only: the control plane does not halt the fast path before an
// OOB message changes the core.
const brokenToken = true
