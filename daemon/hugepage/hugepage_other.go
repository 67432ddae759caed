//go:build !linux

package hugepage

import "errors"

// Advise does nothing outside Linux.
func Advise() (Stats, error) {
	return Stats{}, errors.New("hugepage: transparent huge pages are Linux's")
}
