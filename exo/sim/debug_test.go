package sim

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// TestDebugSeed replays one seed with a trace: EXO_SIM_SEED=10 EXO_SIM_HOSTS=3.
func TestDebugSeed(t *testing.T) {
	seed, err := strconv.ParseUint(os.Getenv("EXO_SIM_SEED"), 10, 64)
	if err != nil {
		t.Skip("set EXO_SIM_SEED (and EXO_SIM_HOSTS) to replay one seed with a trace")
	}
	n, _ := strconv.Atoi(os.Getenv("EXO_SIM_HOSTS"))
	s, err := New(DefaultOptions(n, seed))
	if err != nil {
		t.Fatal(err)
	}
	s.Trace(func(l string) { fmt.Println(l) })
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
}
