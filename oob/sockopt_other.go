//go:build !linux

package oob

import "time"

// setRTO: the retransmission timer's bounds are Linux socket options.
func setRTO(fd uintptr, lo, hi time.Duration) error { return errRTOUnsupported }

// rtoOf: the retransmission timer's bounds are Linux socket options.
func rtoOf(fd uintptr) (lo, hi time.Duration, err error) { return 0, 0, errRTOUnsupported }

// backedOff: TCP_INFO is Linux's.
func backedOff(fd uintptr) bool { return false }
