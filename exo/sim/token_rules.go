//go:build !exo_broken_token

package sim

// brokenToken lets a test build (tag exo_broken_token) break the token
// mode's hand-off on purpose: an OOB message is stepped into the core
// while the fast path runs, as if the control plane did not quiesce it.
// The simulator must catch it (TestCheckerCatchesBrokenToken). False in
// every normal build.
const brokenToken = false
