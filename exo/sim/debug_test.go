package sim

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// TestDebugSeed replays one seed with a trace: EXO_SIM_SEED=10
// EXO_SIM_HOSTS=3, and for the long-fault lines EXO_SIM_LAB=1 (the
// daemon's timing), EXO_SIM_TICKS, EXO_SIM_QUIET, EXO_SIM_FAULT_TICKS,
// EXO_SIM_PAUSES and EXO_SIM_PAUSE_TICKS (exo sim's --ticks, --quiet,
// --fault-ticks, --pauses and --pause-ticks).
func TestDebugSeed(t *testing.T) {
	seed, err := strconv.ParseUint(os.Getenv("EXO_SIM_SEED"), 10, 64)
	if err != nil {
		t.Skip("set EXO_SIM_SEED (and EXO_SIM_HOSTS) to replay one seed with a trace")
	}
	n, _ := strconv.Atoi(os.Getenv("EXO_SIM_HOSTS"))
	o := DefaultOptions(n, seed)
	o.LabTiming = os.Getenv("EXO_SIM_LAB") == "1"
	if v := os.Getenv("EXO_SIM_PAUSES"); v != "" {
		if o.Pauses, err = strconv.ParseFloat(v, 64); err != nil {
			t.Fatalf("EXO_SIM_PAUSES: %v", err)
		}
	}
	for env, p := range map[string]*int{"EXO_SIM_TICKS": &o.Ticks, "EXO_SIM_QUIET": &o.Quiet, "EXO_SIM_FAULT_TICKS": &o.FaultTicks, "EXO_SIM_PAUSE_TICKS": &o.PauseTicks} {
		if v := os.Getenv(env); v != "" {
			if *p, err = strconv.Atoi(v); err != nil {
				t.Fatalf("%s: %v", env, err)
			}
		}
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Trace(func(l string) { fmt.Println(l) })
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("majority stall %d ticks, ended at tick %d\n", s.Stats.MajorityStall, s.Stats.MajorityStallAt)
}
