//go:build linux && !amd64 && !386

package lab

import "syscall"

const sysSetns = syscall.SYS_SETNS
