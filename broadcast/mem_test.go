package broadcast

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

func mac(i int) net.HardwareAddr { return net.HardwareAddr{0x02, 0, 0, 0, 0, byte(i)} }

func TestMemConn(t *testing.T) {
	n := NewMemNetwork()
	testConnPair(t, n.Attach(mac(1)), n.Attach(mac(2)))
}

func TestMemBroadcastToAllOthers(t *testing.T) {
	n := NewMemNetwork()
	defer n.Close()
	cs := []Conn{n.Attach(mac(0)), n.Attach(mac(1)), n.Attach(mac(2)), n.Attach(mac(3))}
	for i, c := range cs {
		if err := c.WriteFrame(exoFrame(t, uint64(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cs {
		var got []uint64
		for range len(cs) - 1 {
			b, src := readOne(t, c)
			s := seqOf(t, b)
			if s == uint64(i) {
				t.Errorf("conn %d received its own frame", i)
			}
			if !bytes.Equal(src, mac(int(s))) {
				t.Errorf("conn %d: frame %d from %v", i, s, src)
			}
			got = append(got, s)
		}
		expectNothing(t, c, 5*time.Millisecond)
		t.Logf("conn %d received %v", i, got)
	}
}

func TestMemPartitionHeal(t *testing.T) {
	n := NewMemNetwork()
	defer n.Close()
	a, b, c, d := n.Attach(mac(1)), n.Attach(mac(2)), n.Attach(mac(3)), n.Attach(mac(4))
	// {a, b} | {c} | {d}: d is in no group, so it is alone with the
	// other unlisted MACs (none).
	n.Partition([]net.HardwareAddr{mac(1), mac(2)}, []net.HardwareAddr{mac(3)})
	if err := a.WriteFrame(exoFrame(t, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if got, _ := readOne(t, b); seqOf(t, got) != 1 {
		t.Error("b did not receive a's frame across its own side")
	}
	expectNothing(t, c, 5*time.Millisecond)
	expectNothing(t, d, 5*time.Millisecond)
	if _, p := n.Lost(); p != 2 {
		t.Errorf("lost to partition: %d, want 2", p)
	}
	n.Heal()
	if err := c.WriteFrame(exoFrame(t, 2, 1)); err != nil {
		t.Fatal(err)
	}
	for _, x := range []Conn{a, b, d} {
		if got, _ := readOne(t, x); seqOf(t, got) != 2 {
			t.Error("frame after Heal not delivered")
		}
	}
}

// TestMemLoss checks the loss rate and that a seed reproduces the same
// losses.
func TestMemLoss(t *testing.T) {
	run := func(seed uint64) []uint64 {
		n := NewMemNetwork()
		defer n.Close()
		a, b := n.Attach(mac(1)), attach(t, n, mac(2), Options{QueueLen: 2000})
		n.SetLoss(0.25, seed)
		for i := range 1000 {
			if err := a.WriteFrame(exoFrame(t, uint64(i), 1)); err != nil {
				t.Fatal(err)
			}
		}
		var got []uint64
		ms := make([]Message, MaxBatch)
		for i := range ms {
			ms[i].Buf = make([]byte, 100)
		}
		for {
			b.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
			k, err := b.ReadFrames(ms)
			if err != nil {
				break
			}
			for _, m := range ms[:k] {
				got = append(got, seqOf(t, m.Buf[:m.N]))
			}
		}
		r, _ := n.Lost()
		if int(r)+len(got) != 1000 {
			t.Errorf("lost %d + received %d != 1000", r, len(got))
		}
		return got
	}
	x, y, z := run(7), run(7), run(8)
	if len(x) < 700 || len(x) > 800 {
		t.Errorf("received %d of 1000 with 25%% loss", len(x))
	}
	if !slices.Equal(x, y) {
		t.Error("same seed, different losses")
	}
	if slices.Equal(x, z) {
		t.Error("different seeds, same losses")
	}
}

// attach is AttachOptions, failing the test on error.
func attach(t testing.TB, n *MemNetwork, m net.HardwareAddr, o Options) Conn {
	t.Helper()
	c, err := n.AttachOptions(m, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMemQueueFull(t *testing.T) {
	n := NewMemNetwork()
	defer n.Close()
	a, b := n.Attach(mac(1)), attach(t, n, mac(2), Options{QueueLen: 4})
	for i := range 10 {
		if err := a.WriteFrame(exoFrame(t, uint64(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if got, _ := readOne(t, b); seqOf(t, got) != uint64(i) {
			t.Errorf("frame %d: wrong seq", i)
		}
	}
	expectNothing(t, b, 5*time.Millisecond)
	if s := b.Stats(); s.Dropped != 6 || s.FramesIn != 4 {
		t.Errorf("stats %+v, want 4 in, 6 dropped", s)
	}
}

func TestMemGroupFilterAndGroupMAC(t *testing.T) {
	n := NewMemNetwork()
	defer n.Close()
	group := net.HardwareAddr{0x03, 0, 0, 0, 0x88, 0xb5}
	a := attach(t, n, mac(1), Options{Dst: group})
	b := attach(t, n, mac(2), Options{Dst: group, FilterGroup: true, Group: 1})
	c := n.Attach(mac(3)) // broadcast only: has not joined the group MAC
	for _, g := range []uint16{2, 1, 3} {
		if err := a.WriteFrame(exoFrame(t, uint64(g), g)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := readOne(t, b); seqOf(t, got) != 1 {
		t.Error("group 1 frame not received")
	}
	expectNothing(t, b, 5*time.Millisecond)
	expectNothing(t, c, 5*time.Millisecond)
	if s := b.Stats(); s.Filtered != 2 || s.FramesIn != 1 {
		t.Errorf("stats %+v, want 1 in, 2 filtered", s)
	}
	if _, err := n.AttachOptions(mac(4), Options{Dst: mac(5)}); err == nil {
		t.Error("a unicast Dst was accepted")
	}
}

func TestMemMTU(t *testing.T) {
	n := NewMemNetwork()
	n.SetMTU(9000)
	a, b := n.Attach(mac(1)), n.Attach(mac(2))
	if a.MTU() != 9000 {
		t.Fatal(a.MTU())
	}
	if err := a.WriteFrame(frameOfLen(t, 1, 1, 9000)); err != nil {
		t.Fatal(err)
	}
	if got, _ := readOne(t, b); len(got) != 9000 {
		t.Errorf("jumbo frame: %d bytes", len(got))
	}
	n.SetMTU(100)
	if _, err := n.AttachOptions(mac(3), Options{}); !errors.Is(err, ErrMTUTooSmall) {
		t.Errorf("MTU 100: %v, want ErrMTUTooSmall", err)
	} else {
		t.Log(err)
	}
}

// TestMemConcurrent runs senders and readers at once (for -race).
func TestMemConcurrent(t *testing.T) {
	n := NewMemNetwork()
	const hosts, frames = 4, 200
	cs := make([]Conn, hosts)
	for i := range cs {
		cs[i] = attach(t, n, mac(i), Options{QueueLen: hosts * frames})
	}
	var wg sync.WaitGroup
	counts := make([]int, hosts)
	for i, c := range cs {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range frames {
				if err := c.WriteFrame(exoFrame(t, uint64(j), 1)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			buf := make([]byte, c.MTU())
			for counts[i] < (hosts-1)*frames {
				if _, _, err := c.ReadFrame(buf); err != nil {
					t.Error(err)
					return
				}
				counts[i]++
			}
		}()
	}
	wg.Wait()
	n.Close()
	if fmt.Sprint(counts) != fmt.Sprint([]int{600, 600, 600, 600}) {
		t.Errorf("received %v", counts)
	}
}
