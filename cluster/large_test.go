package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
)

// TestRackLargeMessage: host A publishes one 1 MiB message (the default
// max_message_bytes: several hundred fragments in consecutive entries of A)
// while B..E publish small messages; every host delivers it whole (same
// SHA-256) at the position A's publish returned, the streams are identical,
// and one byte more is refused as too large.
func TestRackLargeMessage(t *testing.T) {
	r := rack(t, 5)
	c := start(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := []int{0, 1, 2, 3, 4}
	small := []int{1, 2, 3, 4}
	const perHost = 2000

	big := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < len(big); i += 8 {
		binary.LittleEndian.PutUint64(big[i:], rng.Uint64())
	}
	sum := sha256.Sum256(big)

	cl, err := client.Dial(ctx, c.Socket(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Publish(ctx, append(big, 0)); !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("publishing 1 MiB + 1 byte: got %v, want %v", err, client.ErrTooLarge)
	}

	// B..E publish rounds of small messages until the large message is
	// agreed, and one round more.
	bigDone := make(chan struct{})
	loadDone := make(chan struct{})
	var res LoadResult
	var loadErr error
	rounds := 0
	go func() {
		defer close(loadDone)
		for last := false; !last; rounds++ {
			select {
			case <-bigDone:
				last = true
			default:
			}
			r, err := c.Publish(ctx, Load{Hosts: small, PerHost: perHost, Size: 64, Round: rounds})
			res.Published += r.Published
			res.Elapsed += r.Elapsed
			res.Failed += r.Failed
			res.Errors = append(res.Errors, r.Errors...)
			if err != nil {
				loadErr = err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond) // the small load is running
	t0 := time.Now()
	var pos client.Position
	for {
		pos, err = cl.Publish(ctx, big)
		if errors.Is(err, client.ErrQueueFull) || errors.Is(err, client.ErrDropped) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		break
	}
	if err != nil {
		t.Fatalf("publishing 1 MiB: %v", err)
	}
	bigLatency := time.Since(t0)
	close(bigDone)
	<-loadDone
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	if res.Failed > 0 {
		t.Fatalf("%d small publishes failed: %v", res.Failed, res.Errors)
	}
	streams, err := c.Collect(ctx, all, rounds*len(small)*perHost+1)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare(streams); err != nil {
		t.Fatal(err)
	}
	for h, s := range streams {
		found := 0
		for _, m := range s {
			if len(m.Payload) < 1000 {
				continue
			}
			found++
			if m.Position != pos || m.Sender != 0 {
				t.Errorf("host %s: the large message is at %d.%d from %d, A's publish returned %d.%d",
					r.Hosts[h].Name, m.Seq, m.Index, m.Sender, pos.Seq, pos.Index)
			}
			if got := sha256.Sum256(m.Payload); got != sum || len(m.Payload) != len(big) {
				t.Errorf("host %s: the large message has %d bytes, sha256 %x; published %d bytes, sha256 %x",
					r.Hosts[h].Name, len(m.Payload), got[:8], len(big), sum[:8])
			}
		}
		if found != 1 {
			t.Errorf("host %s delivered the large message %d times", r.Hosts[h].Name, found)
		}
	}
	seen := map[[2]uint64]bool{}
	var before, after int
	for _, m := range streams[0] {
		if len(m.Payload) != 64 {
			continue
		}
		seen[[2]uint64{binary.BigEndian.Uint64(m.Payload), binary.BigEndian.Uint64(m.Payload[8:])}] = true
		if m.Seq < pos.Seq {
			before++
		} else {
			after++
		}
	}
	for rd := range rounds {
		for _, h := range small {
			for k := range perHost {
				if !seen[[2]uint64{uint64(rd)<<32 | uint64(h), uint64(k)}] {
					t.Fatalf("small message %d of host %d in round %d missing", k, h, rd)
				}
			}
		}
	}
	if before == 0 || after == 0 {
		t.Errorf("the small messages were not concurrent with the large one: %d agreed before it, %d after", before, after)
	}
	st, _ := c.Status(ctx, 0)
	t.Logf("1 MiB from A agreed at %d.%d after %v (%.1f MB/s), delivered whole on all 5 hosts (sha256 %x...); "+
		"%d small messages from B..E at %.0f msgs/s, %d agreed before it and %d after; agreement pointer %d",
		pos.Seq, pos.Index, bigLatency.Round(time.Millisecond), float64(len(big))/bigLatency.Seconds()/1e6, sum[:8],
		res.Published, res.Rate(), before, after, st.Agreed)
}
