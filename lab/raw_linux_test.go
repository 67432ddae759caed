//go:build linux

package lab

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// etherExo is the Exo EtherType (IEEE 802 local experimental 1).
const etherExo = 0x88B5

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// rawSocket opens an AF_PACKET socket for Exo frames on host id's exo0.
func rawSocket(t *testing.T, r *Rack, id int) (fd, ifindex int) {
	t.Helper()
	err := InNetns(r.Hosts[id].Netns, func() error {
		ifi, err := net.InterfaceByName(Ifname)
		if err != nil {
			return err
		}
		ifindex = ifi.Index
		fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, int(htons(etherExo)))
		if err != nil {
			return err
		}
		return syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(etherExo), Ifindex: ifindex})
	})
	if err != nil {
		t.Fatalf("raw socket on %s: %v", r.Hosts[id].Name, err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	tv := syscall.NsecToTimeval(int64(20 * time.Millisecond))
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd, ifindex
}

// broadcastReach sends a broadcast Exo frame from host `from` a few times
// and reports which hosts received it.
func broadcastReach(t *testing.T, r *Rack, from int) []bool {
	t.Helper()
	fds := make([]int, len(r.Hosts))
	var ifindex int
	for id := range r.Hosts {
		var ifi int
		fds[id], ifi = rawSocket(t, r, id)
		if id == from {
			ifindex = ifi
		}
	}
	payload := append([]byte("exo lab broadcast from "), r.Hosts[from].Name...)
	frame := append(append(append([]byte{}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), r.Hosts[from].MAC...), byte(etherExo>>8), byte(etherExo&0xff))
	frame = append(frame, payload...)
	to := &syscall.SockaddrLinklayer{Protocol: htons(etherExo), Ifindex: ifindex, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	got := make([]bool, len(r.Hosts))
	buf := make([]byte, 2048)
	for range 5 {
		if err := syscall.Sendto(fds[from], frame, 0, to); err != nil {
			t.Fatalf("sending from %s: %v", r.Hosts[from].Name, err)
		}
		for id, fd := range fds {
			if id == from {
				continue
			}
			for {
				n, _, err := syscall.Recvfrom(fd, buf, 0)
				if err != nil {
					break // timeout: nothing more queued
				}
				if bytes.Contains(buf[:n], payload) {
					got[id] = true
				}
			}
		}
	}
	return got
}

// TestBroadcastFrames: raw Exo broadcast frames are flooded to every port
// and the partition applies to them per receiving port.
func TestBroadcastFrames(t *testing.T) {
	needRack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := upOrSkip(t, ctx, Options{Prefix: fmt.Sprintf("exob%d", syscall.Getpid()), Hosts: 3})
	if got := broadcastReach(t, r, 0); !got[1] || !got[2] {
		t.Errorf("A's broadcast reached %v, want B and C", got)
	}
	if err := r.Partition(ctx, [][]int{{0}, {1, 2}}); err != nil {
		t.Fatal(err)
	}
	if got := broadcastReach(t, r, 0); got[1] || got[2] {
		t.Errorf("partitioned A's broadcast reached %v, want nobody", got)
	}
	if got := broadcastReach(t, r, 1); got[0] || !got[2] {
		t.Errorf("B's broadcast reached %v, want C only", got)
	}
	if err := r.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.PartitionOneWay(ctx, []int{2}, []int{0}); err != nil {
		t.Fatal(err)
	}
	if got := broadcastReach(t, r, 2); got[0] || !got[1] {
		t.Errorf("C's broadcast with C->A cut reached %v, want B only", got)
	}
}

// TestSpoofedSourceMAC: a frame sent from C's port with A's source MAC (a
// replay, a forgery) is flooded like any broadcast, but the switch keeps
// A's forwarding entry on A's port: unicast to A still reaches A only.
func TestSpoofedSourceMAC(t *testing.T) {
	needRack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := upOrSkip(t, ctx, Options{Prefix: fmt.Sprintf("exos%d", syscall.Getpid()), Hosts: 3})
	fd, ifindex := rawSocket(t, r, 2)
	frame := append(append(append([]byte{}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), r.Hosts[0].MAC...), byte(etherExo>>8), byte(etherExo&0xff))
	frame = append(frame, make([]byte, 50)...)
	to := &syscall.SockaddrLinklayer{Protocol: htons(etherExo), Ifindex: ifindex, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for range 10 {
		if err := syscall.Sendto(fd, frame, 0, to); err != nil {
			t.Fatalf("sending from C: %v", err)
		}
	}
	out, err := run(ctx, "", "bridge", "-n", r.SwitchNetns, "fdb", "show", "dev", r.Hosts[0].Port)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, r.Hosts[0].MAC.String()) {
		t.Fatalf("after C sent frames with A's source MAC, A's port holds %q; want A's MAC %s there", out, r.Hosts[0].MAC)
	}
	if ok, err := r.Probe(ctx, 1, 0, time.Second); err != nil || !ok {
		t.Fatalf("B -> A after the spoofed frames: reached=%v, %v", ok, err)
	}
}
