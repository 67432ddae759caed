//go:build linux

package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
)

// badKind is one kind of bad frame that `exo raw --mode inject` sends.
type badKind struct {
	kind string
	// from is the injecting host. The injector writes every header frame
	// with sender id 1, so a frame sent from host B (id 1) carries its
	// sender's MAC and reaches the checks behind the MAC check (the group
	// check); from any other host it is a forged sender.
	from int
	// want are the counters that must count this kind at every receiver.
	want []string
}

var badKinds = []badKind{
	{"garbage", 0, BadInputCounters},
	// A frame cut to 20 bytes is padded by the sender's Conn to the 46-byte
	// Ethernet minimum, which covers the 32-byte header: the receiver sees
	// a header whose history is the zero padding (ids 0, 0), which the codec
	// rejects as BAD_HISTORY_ID. A frame shorter than its header (MALFORMED)
	// cannot reach a receiver over Ethernet at all.
	{"truncated", 0, []string{"rejects.MALFORMED", "rejects.BAD_HISTORY_ID"}},
	{"bad-version", 0, []string{"rejects.BAD_VERSION"}},
	// From B, so that the MAC check (which comes first in the daemon)
	// passes and the core's group check rejects it.
	{"foreign-group", 1, []string{"rejects.BAD_GROUP"}},
	// Sender id 1 (B) from A's MAC.
	{"forged-sender", 0, []string{"foreign_mac"}},
}

// TestRackBadInput: a 5-host rack under publish load from every host is
// flooded with bad frames (garbage, truncated, bad version, another group,
// a forged sender, and frames the kernel's filter must drop: another
// EtherType, 802.1Q / 802.1ad tagged Exo frames). Every host delivers the
// identical, complete sequence; every receiving daemon counts each kind
// under its reason and nothing else; the kernel-filtered frames never reach
// a daemon. Reports the agreed throughput without and with the flood.
func TestRackBadInput(t *testing.T) {
	r := rack(t, 5)
	c := start(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := []int{0, 1, 2, 3, 4}
	others := func(from int) []int {
		return slices.DeleteFunc(slices.Clone(all), func(h int) bool { return h == from })
	}
	counters := func() []map[string]uint64 {
		t.Helper()
		cs, err := c.Counters(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	// settle waits until the bad-input counters of every host stop moving
	// (the daemons have read what the kernel queued) and returns them.
	settle := func() []map[string]uint64 {
		t.Helper()
		var last uint64
		stable := 0
		for deadline := time.Now().Add(10 * time.Second); ; {
			cs := counters()
			var s uint64
			for _, m := range cs {
				s += SumCounters(m, BadInputCounters)
			}
			if s == last {
				if stable++; stable >= 4 {
					return cs
				}
			} else {
				last, stable = s, 0
			}
			if time.Now().After(deadline) {
				t.Logf("bad-input counters still moving after 10s")
				return cs
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// The loads: (round, messages per host); every host publishes.
	type round struct{ round, perHost int }
	var rounds []round
	var roundsMu sync.Mutex
	load := func(ctx context.Context, rd, perHost int) (LoadResult, error) {
		roundsMu.Lock()
		rounds = append(rounds, round{rd, perHost})
		roundsMu.Unlock()
		res, err := c.Publish(ctx, Load{Hosts: all, PerHost: perHost, Size: 64, Round: rd})
		if err == nil && res.Failed > 0 {
			err = fmt.Errorf("round %d: %d publishes failed: %v", rd, res.Failed, res.Errors)
		}
		return res, err
	}
	start0 := counters()

	// 1. Frames the kernel must drop before the daemon (quiet rack): the
	// BPF filter's Linux-only checks (VLAN tag present, packet type) are
	// not run by the filter's unit tests. The Exo frame inside has a bad
	// version, so that one reaching a daemon would be counted BAD_VERSION.
	exoBad, err := (&exo.Frame{Type: exo.FrameData, Group: 7, Sender: 1, Seq: 1, History: []uint8{0, 4}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	exoBad[exo.OffVersion] = 9
	srcA := r.Hosts[0].MAC
	filtered := []struct {
		name  string
		frame []byte
		// priority: an 802.1p priority tag (VLAN id 0) means "no VLAN"
		// (IEEE 802.1Q); Linux clears such a tag before packet sockets
		// see the frame, so it reaches the daemon as an untagged frame.
		// Reported, not asserted.
		priority bool
	}{
		{"EtherType 0x88B6", ethFrame(srcA, exo.EtherType+1, exoBad), false},
		{"802.1Q VLAN 5", ethFrame(srcA, exo.EtherType, exoBad, [4]byte{0x81, 0x00, 0x00, 0x05}), false},
		{"802.1ad S-VLAN 5", ethFrame(srcA, exo.EtherType, exoBad, [4]byte{0x88, 0xa8, 0x00, 0x05}), false},
		{"802.1ad S-VLAN 5 + 802.1Q 6", ethFrame(srcA, exo.EtherType, exoBad, [4]byte{0x88, 0xa8, 0x00, 0x05}, [4]byte{0x81, 0x00, 0x00, 0x06}), false},
		{"802.1p priority tag (VLAN 0)", ethFrame(srcA, exo.EtherType, exoBad, [4]byte{0x81, 0x00, 0xa0, 0x00}), true},
	}
	const perFiltered = 2000
	for _, f := range filtered {
		before := settle()
		n, err := sendEthernet(r, 0, [][]byte{f.frame}, perFiltered)
		if err != nil {
			t.Skipf("cannot send raw frames from %s: %v", r.Hosts[0].Name, err)
		}
		after := settle()
		var reached []string
		for _, h := range others(0) {
			d := CounterDelta(before[h], after[h])
			bad := SumCounters(d, BadInputCounters)
			if bad > 0 {
				reached = append(reached, fmt.Sprintf("%s %s", r.Hosts[h].Name, FormatCounters(d, BadInputCounters)))
			}
			if bad > 0 && !f.priority {
				t.Errorf("%s: %d of %d frames reached the daemon on %s: %s", f.name, bad, n, r.Hosts[h].Name, FormatCounters(d, BadInputCounters))
			}
		}
		if len(reached) == 0 {
			t.Logf("%-30s %d frames sent from A: none reached a daemon", f.name, n)
		} else {
			t.Logf("%-30s %d frames sent from A: reached the daemons as untagged frames: %s", f.name, n, strings.Join(reached, ", "))
		}
	}
	// The same Exo frame, untagged with the Exo EtherType, must arrive:
	// the frames above were dropped by the filter, not lost on the way.
	{
		before := settle()
		n, err := sendEthernet(r, 0, [][]byte{ethFrame(srcA, exo.EtherType, exoBad)}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		after := settle()
		var got []string
		for _, h := range others(0) {
			d := CounterDelta(before[h], after[h])
			if d["rejects.BAD_VERSION"] == 0 {
				t.Errorf("control: none of the %d untagged Exo frames from A was counted on %s", n, r.Hosts[h].Name)
			}
			got = append(got, fmt.Sprintf("%s=%d", r.Hosts[h].Name, d["rejects.BAD_VERSION"]))
		}
		t.Logf("%-30s %d frames sent from A: counted BAD_VERSION %s", "control: untagged 0x88B5", n, strings.Join(got, " "))
	}

	// events sums the view changes started and the token takeovers of
	// every host between two counter snapshots.
	events := func(before, after []map[string]uint64) string {
		var vc, to uint64
		for h := range all {
			d := CounterDelta(before[h], after[h])
			vc += d["view_changes"]
			to += d["takeovers"]
		}
		return fmt.Sprintf("%d view changes started, %d token takeovers", vc, to)
	}

	// 2. Throughput without a flood.
	c0 := counters()
	base, err := load(ctx, 0, 5000)
	if err != nil {
		t.Fatal(err)
	}
	c1 := counters()

	// 3. Throughput under a flood: every kind injected at once, in a loop,
	// for as long as the load runs.
	var injected atomic.Int64
	floodCtx, stopFlood := context.WithCancel(ctx)
	var fwg sync.WaitGroup
	floodErr := make(chan error, len(badKinds)+1)
	for _, k := range badKinds {
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			for floodCtx.Err() == nil {
				res, err := c.Inject(floodCtx, k.from, k.kind, 5000)
				if err != nil {
					if floodCtx.Err() == nil {
						floodErr <- err
					}
					return
				}
				injected.Add(res.Frames)
			}
		}()
	}
	fwg.Add(1)
	go func() {
		defer fwg.Done()
		var fs [][]byte
		for _, f := range filtered {
			fs = append(fs, f.frame)
		}
		for floodCtx.Err() == nil {
			n, err := sendEthernet(r, 0, fs, 250)
			injected.Add(int64(n))
			if err != nil {
				floodErr <- err
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond) // the injectors are running
	flooded, err := load(ctx, 1, 5000)
	stopFlood()
	fwg.Wait()
	close(floodErr)
	if err != nil {
		t.Fatal(err)
	}
	for err := range floodErr {
		t.Fatalf("flood: %v", err)
	}
	c2 := counters()
	t.Logf("without flood: %d msgs, %.0f agreed msgs/s (publish-to-agreed p50 %dus p99 %dus), %s",
		base.Published, base.Rate(), base.Latency.ValueAtQuantile(50), base.Latency.ValueAtQuantile(99), events(c0, c1))
	t.Logf("with flood:    %d msgs, %.0f agreed msgs/s (publish-to-agreed p50 %dus p99 %dus), %s; "+
		"%d bad frames injected meanwhile (%.0f frames/s, 5 inject processes + 1 filtered-frame sender)",
		flooded.Published, flooded.Rate(), flooded.Latency.ValueAtQuantile(50), flooded.Latency.ValueAtQuantile(99), events(c1, c2),
		injected.Load(), float64(injected.Load())/flooded.Elapsed.Seconds())

	// 4. Each kind alone, counted, while every host keeps publishing.
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadErr := make(chan error, 1)
	go func() {
		defer close(loadErr)
		for rd := 2; loadCtx.Err() == nil; rd++ {
			if _, err := load(ctx, rd, 2000); err != nil { // a started round completes
				loadErr <- err
				return
			}
			// Keep the total well below what the daemons' delivered-message
			// history holds, so that Collect can follow from seq 0.
			time.Sleep(150 * time.Millisecond)
		}
	}()
	const perKind = 5000
	for _, k := range badKinds {
		before := settle()
		res, err := c.Inject(ctx, k.from, k.kind, perKind)
		if err != nil {
			stopLoad()
			t.Fatal(err)
		}
		after := settle()
		var line []string
		for _, h := range others(k.from) {
			d := CounterDelta(before[h], after[h])
			want, bad := SumCounters(d, k.want), SumCounters(d, BadInputCounters)
			line = append(line, fmt.Sprintf("%s %d (%.0f%%)", r.Hosts[h].Name, want, 100*float64(want)/float64(res.Frames)))
			switch {
			case want == 0:
				t.Errorf("%s: none of %d frames from %s counted on %s (bad-input counters moved: %s)",
					k.kind, res.Frames, r.Hosts[k.from].Name, r.Hosts[h].Name, FormatCounters(d, BadInputCounters))
			case bad > uint64(res.Frames):
				t.Errorf("%s: %d frames from %s counted %d times on %s: %s",
					k.kind, res.Frames, r.Hosts[k.from].Name, bad, r.Hosts[h].Name, FormatCounters(d, BadInputCounters))
			case bad != want:
				t.Errorf("%s: on %s, %d frames counted under other reasons than %v: %s",
					k.kind, r.Hosts[h].Name, bad-want, k.want, FormatCounters(d, BadInputCounters))
			}
			if h == others(k.from)[0] {
				t.Logf("%-14s %d frames from %s at %.0f/s; on %s: %s", k.kind, res.Frames, r.Hosts[k.from].Name,
					res.Rate, r.Hosts[h].Name, FormatCounters(d, BadInputCounters))
			}
		}
		t.Logf("%-14s counted at each receiver: %s", k.kind, strings.Join(line, ", "))
	}
	stopLoad()
	if err := <-loadErr; err != nil {
		t.Fatal(err)
	}

	// 5. Every host delivered the identical, complete sequence.
	want := 0
	for _, rd := range rounds {
		want += 5 * rd.perHost
	}
	streams, err := c.Collect(ctx, all, want)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare(streams); err != nil {
		t.Fatal(err)
	}
	seen := make(map[[2]uint64]bool, want)
	for _, m := range streams[0] {
		seen[[2]uint64{binary.BigEndian.Uint64(m.Payload), binary.BigEndian.Uint64(m.Payload[8:])}] = true
	}
	for _, rd := range rounds {
		for h := range 5 {
			for k := range rd.perHost {
				if !seen[[2]uint64{uint64(rd.round)<<32 | uint64(h), uint64(k)}] {
					t.Fatalf("message %d of host %d in round %d missing", k, h, rd.round)
				}
			}
		}
	}
	st, _ := c.Status(ctx, 0)
	t.Logf("%d messages in %d rounds, identical and complete on all 5 hosts; epoch %d; per-kind phase: %s; whole test: %s",
		want, len(rounds), st.Epoch, events(c2, counters()), events(start0, counters()))
}
