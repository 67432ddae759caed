//go:build linux

package lab

// sysSetns is setns(2) on linux/386 (the syscall package lacks it here).
const sysSetns = 346
