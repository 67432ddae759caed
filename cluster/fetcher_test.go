package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/oob"
)

// TestFetcherProcess is a joiner's fetches without its daemon, run by
// TestRackJoinCycles (EXO_JOIN_FETCHER=1) as a process of the test binary
// in the spare's namespace: with the spare's config (EXO_FETCHER_CONFIG)
// it speaks the OOB protocol as that host, asks the members for the
// agreed log from seq 0 as an amnesiac joiner does (one fetch in flight,
// from each member in turn for 64 MiB), at a pace (EXO_FETCHER_RATE
// bytes a second) for a time (EXO_FETCHER_FOR), and drops the answers.
// The members serve as they serve a join; the joiner's core, log and
// delivery are left out. Skipped otherwise.
func TestFetcherProcess(t *testing.T) {
	path := os.Getenv("EXO_FETCHER_CONFIG")
	if path == "" {
		t.Skip("a helper process of TestRackJoinCycles (EXO_JOIN_FETCHER=1)")
	}
	rate := float64(envInt(t, "EXO_FETCHER_RATE", 25e6))
	d, err := time.ParseDuration(os.Getenv("EXO_FETCHER_FOR"))
	if err != nil {
		t.Fatalf("EXO_FETCHER_FOR: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg daemon.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	key, err := daemon.ReadKey(cfg.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	peers, own := map[uint8]string{}, ""
	var members []uint8
	for _, m := range cfg.Roster {
		peers[uint8(m.ID)] = m.OOB
		if m.ID == cfg.ID {
			own = m.OOB
		} else if m.ID < cfg.Hosts {
			members = append(members, uint8(m.ID))
		}
	}
	tr, err := oob.New(oob.Config{ID: uint8(cfg.ID), Group: cfg.Group, Listen: own, Peers: peers, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	go tr.Run(ctx)
	var lo uint64
	var got, turn int64
	k, answers, late := 0, 0, 0
	start := time.Now()
	for time.Since(start) < d {
		u := members[k]
		tr.Send(exo.Message{Type: exo.MsgFetch, From: uint8(cfg.ID), To: u, Lo: lo, Amnesiac: true})
		timeout := time.After(2 * time.Second)
	wait:
		for {
			select {
			case m := <-tr.Recv():
				if m.Type != exo.MsgFetchResp || m.From != u || len(m.Entries) == 0 {
					continue
				}
				n := int64(0)
				for i := range m.Entries {
					n += int64(m.Entries[i].BinarySize())
				}
				lo = m.Start + uint64(len(m.Entries))
				got, turn = got+n, turn+n
				answers++
				break wait
			case <-timeout:
				late++
				turn = 64 << 20 // the next member
				break wait
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
		if turn >= 64<<20 {
			k, turn = (k+1)%len(members), 0
		}
		time.Sleep(time.Until(start.Add(time.Duration(float64(got) / rate * float64(time.Second)))))
	}
	fmt.Printf("fetcher: %d answers, %d bytes, up to seq %d, %d late, in %v\n", answers, got, lo, late, time.Since(start).Round(time.Millisecond))
}
