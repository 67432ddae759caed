package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"testing"
	"time"
)

// TestRackSeedPartition plays the slides' scenario (55-81) on the real lab
// rack: {A,B} are cut from {C,D,E} by drop rules on the bridge; the majority
// keeps agreeing, the minority's agreement pointer does not move; after the
// heal, every host holds the same agreed log within a bounded time, and
// everything the majority agreed during the partition is at A and B.
func TestRackSeedPartition(t *testing.T) { seedPartition(t, "software") }

// TestRackSeedPartitionXDP is TestRackSeedPartition with offload "xdp".
func TestRackSeedPartitionXDP(t *testing.T) {
	requireXDP(t)
	seedPartition(t, "xdp")
}

// TestRackSeedPartitionToken is TestRackSeedPartition in token mode
// (xdp_token on: the XDP programs pass the token and send the hosts'
// frames): the cut comes while the fast paths run, the minority's fast
// paths hand their frames up (a gap, then silence), the heal goes through
// the control planes.
func TestRackSeedPartitionToken(t *testing.T) {
	requireXDP(t)
	seedPartition(t, "xdp-token")
}

// TestRackSeedPartitionAFXDP is TestRackSeedPartition with offload "xdp"
// and AF_XDP delivery.
func TestRackSeedPartitionAFXDP(t *testing.T) {
	requireXDP(t)
	seedPartition(t, "xdp-afxdp")
}

// TestRackSeedPartitionFPGASim is TestRackSeedPartition with offload
// "fpga-sim".
func TestRackSeedPartitionFPGASim(t *testing.T) {
	requireFPGASim(t)
	seedPartition(t, "fpga-sim")
}

// TestRackSeedPartitionFPGASimToken is TestRackSeedPartition in token
// mode on the simulated FPGA engines (fpga_token on): the cut comes while
// the engines pass the token, the minority's engines hand their frames up
// (a gap, then silence), the heal goes through the control planes.
func TestRackSeedPartitionFPGASimToken(t *testing.T) {
	requireFPGASim(t)
	seedPartition(t, "fpga-sim-token")
}

func seedPartition(t *testing.T, offload string) {
	r := rack(t, 5)
	c := startWith(t, r, withOffload(offload))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := []int{0, 1, 2, 3, 4}
	if _, err := c.Publish(ctx, Load{Hosts: all, PerHost: 200, Size: 64}); err != nil {
		t.Fatal(err)
	}
	if err := r.Partition(ctx, [][]int{{0, 1}, {2, 3, 4}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let in-flight frames and the minority's takeovers settle
	a0, err := c.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The majority publishes during the partition; the minority tries to.
	res, err := c.Publish(ctx, Load{Hosts: []int{2, 3, 4}, PerHost: 500, Size: 64, Round: 1})
	if err != nil {
		t.Fatal(err)
	}
	minority := make(chan error, 1)
	mctx, mcancel := context.WithCancel(ctx)
	go func() {
		_, err := c.Publish(mctx, Load{Hosts: []int{0, 1}, PerHost: 50, Size: 64, Round: 2})
		minority <- err
	}()
	time.Sleep(500 * time.Millisecond)
	a1, err := c.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := c.Status(ctx, 1)
	cMaj, _ := c.Status(ctx, 2)
	if a1.Agreed != a0.Agreed {
		t.Fatalf("the minority's agreement pointer moved during the partition: %d -> %d", a0.Agreed, a1.Agreed)
	}
	t.Logf("partition {A,B}/{C,D,E}: majority agreed %d msgs at %.0f msgs/s (agreement pointer %d); minority A stays at %d (B %d)",
		res.Published, res.Rate(), cMaj.Agreed, a1.Agreed, b1.Agreed)
	healed := time.Now()
	if err := r.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	// Within a bounded time every host has the majority's agreed log.
	var converged time.Duration
	for {
		st := make([]uint64, 5)
		same := true
		for i := range st {
			s, err := c.Status(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			st[i] = s.Agreed
			if s.Agreed < cMaj.Agreed || s.Halted {
				same = false
			}
		}
		if same {
			converged = time.Since(healed)
			break
		}
		if time.Since(healed) > 30*time.Second {
			t.Fatalf("30s after the heal the hosts are at %v (majority had %d)", st, cMaj.Agreed)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := <-minority; err != nil {
		t.Logf("minority publishes: %v", err)
	}
	mcancel()
	// Every message the majority agreed during the partition is at A and B,
	// in the same order as everywhere.
	want := 5*200 + 3*500
	s, err := c.Collect(ctx, all, want)
	if err != nil {
		t.Fatal(err)
	}
	k := want
	for i := range s {
		s[i] = s[i][:k]
	}
	if err := Compare(s); err != nil {
		t.Fatal(err)
	}
	for _, h := range []int{0, 1} { // A and B hold all the majority agreed while they were cut off
		n := 0
		for _, m := range s[h] {
			if binary.BigEndian.Uint64(m.Payload)>>32 == 1 {
				n++
			}
		}
		if n != 3*500 {
			t.Fatalf("host %s holds %d of the %d messages the majority agreed during the partition", r.Hosts[h].Name, n, 3*500)
		}
	}
	if offload != "software" {
		checkOffloadWorked(t, c, 5)
	} else {
		// The OOB lanes across the partition (the minority's wakes, the
		// majority's answers), stuck in retransmission back-off or waiting
		// to dial again, were dialed anew when the other side's frames
		// came (oob.Transport.Reachable), not at their next retransmission
		// or dial, up to a second later.
		redials := 0
		for h := range 5 {
			b, err := os.ReadFile(c.LogPath(h))
			if err != nil {
				t.Fatal(err)
			}
			redials += bytes.Count(b, []byte("oob connection reset")) + bytes.Count(b, []byte("oob dial again at once"))
		}
		if redials == 0 {
			t.Errorf("no OOB lane was reset or dialed at once after the heal (no host's log names one)")
		}
	}
	st, _ := c.Status(ctx, 0)
	t.Logf("offload %s healed: every host reached the majority's agreement pointer %d within %v; epoch now %d; the first %d messages identical at all 5",
		offload, cMaj.Agreed, converged, st.Epoch, k)
}
