package sim

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestSweepReplay: the replay names exactly the flags whose settings
// differ from exo sim's defaults, in exo sim's order.
func TestSweepReplay(t *testing.T) {
	s := &Sweep{Base: SweepDefaults()}
	if got, want := s.Replay(5, 3), "exo sim --hosts 5 --seed 3 --seeds 1 -v"; got != want {
		t.Errorf("defaults: %q, want %q", got, want)
	}
	s.NoFaults = true
	b := &s.Base
	b.Drop, b.Dup, b.MaxDelay, b.Partitions, b.Crashes, b.Amnesia = 0, 0, 0, false, false, 0
	if got, want := s.Replay(5, 4), "exo sim --hosts 5 --seed 4 --seeds 1 --faults=false -v"; got != want {
		t.Errorf("no faults: %q, want %q", got, want)
	}
	s = &Sweep{Base: SweepDefaults()}
	b = &s.Base
	b.Drop, b.Dup, b.MaxDelay, b.Partitions, b.Crashes, b.Amnesia = 0.1, 0.2, 3, false, false, 0.5
	b.KeepEntries, b.Retain, b.Config.TransferBytesPerTick, b.Config.TransferYield, b.AcceptLoss = 10, 5, 100, 80, true
	b.Forge, b.RosterChanges, b.KeyRotations, b.ProposeP = 0.01, 0.02, 0.03, 0.9
	b.Config.MaxFetchEntries, b.Config.IdleBackoffMax, b.OOBEntriesPerStep, b.Token = 9, -1, 0, true
	b.Config.IdleRotations, b.Config.TokenTimeoutMin, b.TokenLag, b.Ticks, b.Quiet = 7, 3, 2, 100, 50
	b.FaultTicks, b.LabTiming = 500, true
	const every = "--drop 0.1 --dup 0.2 --delay 3 --partitions=false --crashes=false --amnesia 0.5 --keep-entries 10 --retain 5 --transfer-pace 100 --transfer-yield 80 --accept-loss --forge 0.01 --roster-changes 0.02 --key-rotations 0.03 --propose 0.9 --fetch-batch 9 --idle-backoff -1 --oob-bandwidth 0"
	if got, want := s.Replay(7, 11), "exo sim --hosts 7 --seed 11 --seeds 1 "+every+" --token --idle-rotations 7 --token-timeout-min 3 --token-lag 2 --fault-ticks 500 --lab-timing --ticks 100 --quiet 50 -v"; got != want {
		t.Errorf("every flag:\n%q, want\n%q", got, want)
	}
	b.Token = false // --token-lag goes with --token only
	if got, want := s.Replay(7, 12), "exo sim --hosts 7 --seed 12 --seeds 1 "+every+" --idle-rotations 7 --token-timeout-min 3 --fault-ticks 500 --lab-timing --ticks 100 --quiet 50 -v"; got != want {
		t.Errorf("without --token:\n%q, want\n%q", got, want)
	}
}

// TestSweepOptions: a run's options are the seed's defaults with the
// sweep's settings over them.
func TestSweepOptions(t *testing.T) {
	s := &Sweep{Base: SweepDefaults()}
	s.Base.Drop, s.Base.Token, s.Base.StepsPerTick = 0.3, true, 99
	s.Base.FaultTicks, s.Base.LabTiming = 700, true
	for _, seed := range []uint64{1, 2} {
		o, def := s.Options(4, seed), DefaultOptions(4, seed)
		if o.Hosts != 4 || o.Seed != seed || o.Drop != 0.3 || !o.Token || o.TokenLag != 4 || o.StepsPerTick != def.StepsPerTick || o.Config.FetchBytes != def.Config.FetchBytes ||
			o.FaultTicks != 700 || !o.LabTiming {
			t.Errorf("seed %d: %+v", seed, o)
		}
	}
}

// TestSweepRun: a short sweep sums its seeds' runs, reports progress, and
// prints the figures its settings turn on; a cancelled one says so.
func TestSweepRun(t *testing.T) {
	s := &Sweep{FirstSeed: 3, Seeds: 20, Workers: 2, Base: SweepDefaults()}
	s.Base.Ticks, s.Base.Quiet, s.Base.Token, s.Base.KeepEntries = 100, 200, true, 20
	var progress []int
	s.Progress = func(done int) { progress = append(progress, done) }
	rep, err := s.Run(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Hosts != 3 || rep.FirstSeed != 3 || rep.Seeds != 20 || rep.Violations != 0 || rep.Frames == 0 || rep.Token == nil || len(progress) != 10 || progress[9] != 20 {
		t.Fatalf("report %+v, progress %v", rep, progress)
	}
	sum := rep.Summary()
	for _, want := range []string{"hosts=3 seeds=3..22: 0 violations", " compactions=", "\n  token: records=", "\n  view-changes=", " majority-stall-ticks p50=", "\n  view-change causes: "} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	if strings.Contains(sum, "archive-answers") || strings.Contains(sum, "roster-switches") || strings.Count(sum, "\n") != 6 {
		t.Errorf("summary:\n%s", sum)
	}
	var causes uint64
	for _, k := range rep.ViewChangeCauses {
		causes += k
	}
	if rep.ViewChanges == 0 || causes != rep.ViewChanges {
		t.Errorf("view changes %d, by cause %v (sum %d): every view change has its cause", rep.ViewChanges, rep.ViewChangeCauses, causes)
	}
	b, err := json.Marshal(rep)
	if err != nil || strings.Contains(string(b), "base") || !strings.Contains(string(b), `"token":{"records":`) {
		t.Errorf("JSON %s: %v", b, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Run(ctx, 3); !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "sim: interrupted") {
		t.Errorf("cancelled: %v", err)
	}
}
