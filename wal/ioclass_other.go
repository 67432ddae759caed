//go:build !linux

package wal

import "errors"

// inClass runs f: I/O classes are Linux's.
func inClass(_ IOClass, f func()) { f() }

// threadIOClass is not known outside Linux.
func threadIOClass() (int, error) { return 0, errors.New("wal: I/O classes are Linux's") }
