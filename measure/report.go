package measure

import (
	"fmt"
	"io"
)

// UsageError is an error in what the caller asked for, found before
// anything was measured (exo exits 2 on one): a raft peer that cannot be
// found or built, for instance.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// sayTo returns a printf of one line to w (nothing when w is nil): the
// measurements log their figures as they go, for a person to follow.
func sayTo(w io.Writer) func(string, ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
}
