package explore

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func envInt(k string, d int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return d
}

func TestScratch(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	o := Defaults(envInt("N", 3))
	o.MaxDepth = envInt("D", o.MaxDepth)
	o.MaxStates = envInt("S", o.MaxStates)
	o.TicksPerHost = envInt("T", o.TicksPerHost)
	o.MaxInFlight = envInt("F", o.MaxInFlight)
	o.Proposals = envInt("P", o.Proposals)
	o.Drops = envInt("DROPS", 0)
	o.Dups = envInt("DUPS", 0)
	o.Restarts = envInt("R", 0)
	o.Amnesia = envInt("A", 0)
	o.Fingerprint = Fingerprint(envInt("FP", 0))
	o.Timeout = time.Duration(envInt("TO", 60)) * time.Second
	o.Minimize = true
	r, err := Explore(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v", r.String())
	if r.Violation != nil {
		t.Logf("VIOLATION\n%s", r.Violation)
	}
}
