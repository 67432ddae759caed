package oob

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's TCP socket options for the retransmission timer's bounds
// (include/uapi/linux/tcp.h, Linux 6.15 and later; golang.org/x/sys does
// not name them yet).
const (
	tcpRTOMaxMS = 44 // TCP_RTO_MAX_MS: the ceiling of the back-off, ms (1,000..120,000)
	tcpRTOMinUS = 45 // TCP_RTO_MIN_US: the floor of the timer, µs (rounded up to jiffies)
)

// setRTO bounds the retransmission timer of the socket fd (see
// Config.RTOMin): an unsupported option (an older kernel) is reported
// with errRTOUnsupported, the socket keeps the kernel's bounds.
func setRTO(fd uintptr, lo, hi time.Duration) error {
	var errs []error
	if lo > 0 {
		errs = append(errs, syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpRTOMinUS, int(lo/time.Microsecond)))
	}
	if hi > 0 {
		errs = append(errs, syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpRTOMaxMS, int(hi/time.Millisecond)))
	}
	err := errors.Join(errs...)
	if errors.Is(err, syscall.ENOPROTOOPT) {
		return errRTOUnsupported
	}
	return err
}

// rtoOf reads the socket's retransmission timer bounds back.
func rtoOf(fd uintptr) (lo, hi time.Duration, err error) {
	us, err := syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpRTOMinUS)
	if err != nil {
		return 0, 0, err
	}
	ms, err := syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpRTOMaxMS)
	if err != nil {
		return 0, 0, err
	}
	return time.Duration(us) * time.Microsecond, time.Duration(ms) * time.Millisecond, nil
}

// backedOff reports whether the socket fd has a segment unacknowledged
// through two retransmission timeouts or more (TCP_INFO's backoff and
// unacked), or is no longer established (its peer closed it: the peer's
// process ended).
func backedOff(fd uintptr) bool {
	info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	return err == nil && (info.Unacked > 0 && info.Backoff >= 2 || info.State != tcpEstablished)
}

// tcpEstablished is Linux's TCP_ESTABLISHED (include/net/tcp_states.h),
// TCP_INFO's state of an open connection.
const tcpEstablished = 1
