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
