//go:build !linux

package lab

import (
	"errors"
	"net"
	"time"
)

var errNotLinux = errors.New("lab: network namespaces need Linux")

type rackLock struct{}

func (*rackLock) release()          {}
func (*rackLock) removeAndRelease() {}

func InNetns(string, func() error) error           { return errNotLinux }
func writeSysctls(string, map[string]string) error { return errNotLinux }
func killNetnsProcs([]string, time.Duration) error { return errNotLinux }
func lock(string) (*rackLock, error)               { return nil, errNotLinux }
func setDontFragment(*net.UDPConn) error           { return errNotLinux }

// Claim is a process's claim on a rack prefix (Linux only).
type Claim struct{}

// ClaimPrefix claims rack prefix (Linux only).
func ClaimPrefix(string) (*Claim, error) { return nil, errNotLinux }

// Release ends the claim.
func (*Claim) Release() {}
