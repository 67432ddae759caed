//go:build linux

package xdp

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

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/lab"
)

// The AF_XDP tests run in network namespaces they create, named
// axdp-<pid>-<n>-a and -b, joined by one veth pair (exo0 on each side), and
// deleted on cleanup. No frame is ever sent outside them.

var (
	vethMACA = net.HardwareAddr{0x02, 0xe0, 0, 0, 0xa0, 0x0a}
	vethMACB = net.HardwareAddr{0x02, 0xe0, 0, 0, 0xa0, 0x0b}
)

const vethIf = "exo0"

var axdpSeq atomic.Int32

// vethPair is two network namespaces joined by a veth pair.
type vethPair struct{ A, B string }

// newVethPair creates the namespaces and the veth pair (MTU 1500, one RX
// queue unless queues > 1) and waits until both ends are operationally up.
// It skips the test, saying why, when not root or when the kernel refuses
// network namespaces.
func newVethPair(tb testing.TB, queues int) *vethPair {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("AF_XDP test skipped: needs root (network namespaces, AF_XDP, BPF)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Fatalf("AF_XDP tests need iproute2's ip: %v", err)
	}
	n := axdpSeq.Add(1)
	p := &vethPair{A: fmt.Sprintf("axdp-%d-%d-a", os.Getpid(), n), B: fmt.Sprintf("axdp-%d-%d-b", os.Getpid(), n)}
	for _, ns := range []string{p.A, p.B} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			tb.Skipf("AF_XDP test skipped: the kernel refused a network namespace: ip netns add %s: %v: %s", ns, err, out)
		}
		tb.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				tb.Errorf("cleanup: ip netns del %s: %v: %s", ns, err, out)
			}
		})
	}
	q := []string{}
	if queues > 1 {
		q = []string{"numtxqueues", fmt.Sprint(queues), "numrxqueues", fmt.Sprint(queues)}
	}
	args := append([]string{"-n", p.A, "link", "add", vethIf, "mtu", "1500"}, q...)
	args = append(args, "type", "veth", "peer", "name", vethIf, "netns", p.B, "mtu", "1500")
	ipCmd(tb, append(args, q...)...)
	ipCmd(tb, "-n", p.A, "link", "set", vethIf, "address", vethMACA.String(), "up")
	ipCmd(tb, "-n", p.B, "link", "set", vethIf, "address", vethMACB.String(), "up")
	for _, ns := range []string{p.A, p.B} {
		waitOperUp(tb, ns, vethIf)
	}
	return p
}

// newBridgedPair is newVethPair with a Linux bridge between a and b, as in
// the lab rack: a's exo0 and b's exo0 are veth pairs to ports of bridge
// br0 in a third namespace, axdp-<pid>-<n>-br. The bridge floods a
// broadcast frame to its ports as clones of one skb, which XDP on b's
// veth must copy before it can run (generic and native mode alike).
func newBridgedPair(tb testing.TB) *vethPair {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("AF_XDP test skipped: needs root (network namespaces, AF_XDP, BPF)")
	}
	n := axdpSeq.Add(1)
	p := &vethPair{A: fmt.Sprintf("axdp-%d-%d-a", os.Getpid(), n), B: fmt.Sprintf("axdp-%d-%d-b", os.Getpid(), n)}
	br := fmt.Sprintf("axdp-%d-%d-br", os.Getpid(), n)
	for _, ns := range []string{p.A, p.B, br} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			tb.Skipf("AF_XDP test skipped: the kernel refused a network namespace: ip netns add %s: %v: %s", ns, err, out)
		}
		tb.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				tb.Errorf("cleanup: ip netns del %s: %v: %s", ns, err, out)
			}
		})
	}
	ipCmd(tb, "-n", br, "link", "add", "br0", "type", "bridge")
	ipCmd(tb, "-n", br, "link", "set", "br0", "up")
	for _, e := range []struct {
		ns, port string
		mac      net.HardwareAddr
	}{{p.A, "pa", vethMACA}, {p.B, "pb", vethMACB}} {
		ipCmd(tb, "-n", e.ns, "link", "add", vethIf, "mtu", "1500", "type", "veth", "peer", "name", e.port, "netns", br, "mtu", "1500")
		ipCmd(tb, "-n", e.ns, "link", "set", vethIf, "address", e.mac.String(), "up")
		ipCmd(tb, "-n", br, "link", "set", e.port, "master", "br0", "up")
	}
	for _, e := range []struct{ ns, ifname string }{{p.A, vethIf}, {p.B, vethIf}, {br, "pa"}, {br, "pb"}} {
		waitOperUp(tb, e.ns, e.ifname)
	}
	return p
}

func ipCmd(tb testing.TB, args ...string) {
	tb.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		tb.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// waitOperUp is lab.WaitOperUp with a 5 s limit, failing tb.
func waitOperUp(tb testing.TB, ns, ifname string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := lab.WaitOperUp(ctx, ns, ifname); err != nil {
		tb.Fatal(err)
	}
}

// mustNetns is lab.InNetns failing tb on error.
func mustNetns(tb testing.TB, ns string, fn func() error) {
	tb.Helper()
	if err := lab.InNetns(ns, fn); err != nil {
		tb.Fatal(err)
	}
}

// listenIn opens a broadcast.PacketConn on exo0 in ns.
func listenIn(tb testing.TB, ns string, opts broadcast.Options) *broadcast.PacketConn {
	tb.Helper()
	var c *broadcast.PacketConn
	mustNetns(tb, ns, func() (err error) {
		c, err = broadcast.Listen(vethIf, opts)
		return err
	})
	return c
}

// attachIn attaches p to exo0 in ns.
func attachIn(tb testing.TB, ns string, p *Program, mode Mode) *Attachment {
	tb.Helper()
	var a *Attachment
	mustNetns(tb, ns, func() (err error) {
		a, err = p.Attach(vethIf, mode)
		return err
	})
	return a
}

// xskIn opens an XSKConn on exo0 in ns.
func xskIn(tb testing.TB, ns string, p *Program, opts XSKOptions) *XSKConn {
	tb.Helper()
	var c *XSKConn
	mustNetns(tb, ns, func() (err error) {
		c, err = NewXSKConn(p, vethIf, opts)
		return err
	})
	return c
}
