//go:build !linux

package broadcast

import (
	"net"
	"time"
)

// PacketConn is the AF_PACKET Conn; it exists on Linux only, and Listen
// fails elsewhere (use MemNetwork in tests).
type PacketConn struct{}

var _ Conn = (*PacketConn)(nil)

// Listen fails with ErrNotSupported: AF_PACKET is Linux only.
func Listen(ifname string, opts Options) (*PacketConn, error) {
	return nil, &listenError{
		msg:      "broadcast: listen on " + ifname + ": " + ErrNotSupported.Error(),
		sentinel: ErrNotSupported,
	}
}

func (c *PacketConn) WriteFrame(b []byte) error { return ErrNotSupported }
func (c *PacketConn) ReadFrame(b []byte) (int, net.HardwareAddr, error) {
	return 0, nil, ErrNotSupported
}
func (c *PacketConn) ReadFrames(ms []Message) (int, error) { return 0, ErrNotSupported }
func (c *PacketConn) ReadQueued(ms []Message) (int, error) { return 0, ErrNotSupported }
func (c *PacketConn) SetReadDeadline(t time.Time) error    { return ErrNotSupported }
func (c *PacketConn) HardwareAddr() net.HardwareAddr       { return nil }
func (c *PacketConn) RxPoll() RxPoll                       { return RxPollRuntime }
func (c *PacketConn) MTU() int                             { return 0 }
func (c *PacketConn) Stats() Stats                         { return Stats{} }
func (c *PacketConn) Close() error                         { return nil }
