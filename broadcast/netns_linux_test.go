//go:build linux

package broadcast

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exo-rack/exo/lab"
)

// The AF_PACKET tests run in network namespaces they create: two
// namespaces joined by one veth pair, interface exo0 on each side. No
// frame is ever sent outside them.

// Fixed MACs of the two ends.
var (
	macA = net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x0a}
	macB = net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x0b}
)

const testIf = "exo0"

var netnsSeq atomic.Int32

// vethPair is two network namespaces joined by a veth pair.
type vethPair struct {
	A, B string // namespace names
}

// newVethPair creates the namespaces exo-bt-<pid>-<n>-a and -b and a veth
// pair between them, with the given MTU, and deletes them on cleanup.
// It skips the test, saying why, when not root or when the kernel
// refuses network namespaces; any other failure fails the test.
func newVethPair(tb testing.TB, mtu int) *vethPair {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("AF_PACKET test skipped: needs root (CAP_NET_ADMIN to create network namespaces, CAP_NET_RAW for AF_PACKET); run as root, CI does")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Fatalf("AF_PACKET tests need iproute2's ip: %v", err)
	}
	n := netnsSeq.Add(1)
	p := &vethPair{
		A: fmt.Sprintf("exo-bt-%d-%d-a", os.Getpid(), n),
		B: fmt.Sprintf("exo-bt-%d-%d-b", os.Getpid(), n),
	}
	for _, ns := range []string{p.A, p.B} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			tb.Skipf("AF_PACKET test skipped: the kernel refused a network namespace: ip netns add %s: %v: %s", ns, err, out)
		}
		tb.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				tb.Errorf("cleanup: ip netns del %s: %v: %s", ns, err, out)
			}
		})
	}
	ip(tb, "-n", p.A, "link", "add", testIf, "mtu", fmt.Sprint(mtu), "type", "veth",
		"peer", "name", testIf, "netns", p.B, "mtu", fmt.Sprint(mtu))
	ip(tb, "-n", p.A, "link", "set", testIf, "address", macA.String(), "up")
	ip(tb, "-n", p.B, "link", "set", testIf, "address", macB.String(), "up")
	for _, ns := range []string{p.A, p.B} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := lab.WaitOperUp(ctx, ns, testIf)
		cancel()
		if err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

// ip runs the ip command, failing the test on error.
func ip(tb testing.TB, args ...string) {
	tb.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		tb.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// listenIn opens a PacketConn on exo0 in namespace ns, closed on cleanup.
func listenIn(tb testing.TB, ns string, opts Options) *PacketConn {
	tb.Helper()
	var c *PacketConn
	err := lab.InNetns(ns, func() (err error) {
		c, err = Listen(testIf, opts)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
