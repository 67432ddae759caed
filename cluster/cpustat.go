package cluster

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuTimes is the machine's CPU time by state, summed over its CPUs, in
// clock ticks (the first line of /proc/stat).
type cpuTimes struct {
	busy, idle, steal uint64
}

// readCPUTimes reads the first line of /proc/stat: user nice system idle
// iowait irq softirq steal (guest time is counted in user already).
func readCPUTimes(path string) (cpuTimes, error) {
	f, err := os.Open(path)
	if err != nil {
		return cpuTimes{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuTimes{}, fmt.Errorf("%s: empty", path)
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("%s: first line %q is not the cpu totals", path, sc.Text())
	}
	var v [8]uint64
	for i := range v {
		if v[i], err = strconv.ParseUint(fields[i+1], 10, 64); err != nil {
			return cpuTimes{}, fmt.Errorf("%s: field %d: %w", path, i+1, err)
		}
	}
	// user nice system idle iowait irq softirq steal
	return cpuTimes{busy: v[0] + v[1] + v[2] + v[5] + v[6], idle: v[3] + v[4], steal: v[7]}, nil
}

// MachineShare is how the machine's CPUs spent a run, in percent of their
// time: a run on a loaded or oversubscribed machine (a virtual machine
// whose host runs other guests: steal) stalls its daemons for
// milliseconds at a time, and its takeovers and stalls say as much about
// the machine as about exo.
type MachineShare struct {
	BusyPct  float64 `json:"busy_pct"`
	IdlePct  float64 `json:"idle_pct"`
	StealPct float64 `json:"steal_pct"`
}

// share is what the CPUs did between a and b.
func (a cpuTimes) share(b cpuTimes) (MachineShare, bool) {
	busy, idle, steal := b.busy-a.busy, b.idle-a.idle, b.steal-a.steal
	all := busy + idle + steal
	if b.busy < a.busy || b.idle < a.idle || b.steal < a.steal || all == 0 {
		return MachineShare{}, false
	}
	pct := func(x uint64) float64 { return 100 * float64(x) / float64(all) }
	return MachineShare{BusyPct: pct(busy), IdlePct: pct(idle), StealPct: pct(steal)}, true
}

func (s MachineShare) String() string {
	return fmt.Sprintf("busy %.1f %%, idle %.1f %%, stolen by the hypervisor %.1f %%", s.BusyPct, s.IdlePct, s.StealPct)
}
