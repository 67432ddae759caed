package cluster

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeStat(t *testing.T, line string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stat")
	if err := os.WriteFile(p, []byte(line+"\ncpu0 1 2 3 4 5 6 7 8 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMachineShare(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	a, err := readCPUTimes(writeStat(t, "cpu  100 0 50 800 0 0 50 0 0 0"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := readCPUTimes(writeStat(t, "cpu  160 0 70 830 10 0 60 20 5 0"))
	if err != nil {
		t.Fatal(err)
	}
	// busy 60+20+10 = 90, idle 30+10 = 40, steal 20: of 150.
	sh, ok := a.share(b)
	if !ok {
		t.Fatal("share refused two increasing readings")
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"busy", sh.BusyPct, 60}, {"idle", sh.IdlePct, 100 * 40.0 / 150}, {"steal", sh.StealPct, 100 * 20.0 / 150}} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %.3f %%, want %.3f %%", c.name, c.got, c.want)
		}
	}
	if !strings.Contains(sh.String(), "stolen by the hypervisor 13.3 %") {
		t.Errorf("String() = %q", sh.String())
	}
	if _, ok := b.share(a); ok {
		t.Error("share took a reading that went backwards")
	}
	if _, ok := a.share(a); ok {
		t.Error("share took an empty interval")
	}
}

func TestReadCPUTimesBadInput(t *testing.T) {
	for _, line := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, err := readCPUTimes(writeStat(t, line)); err == nil {
			t.Errorf("readCPUTimes(%q) took it", line)
		}
	}
	if _, err := readCPUTimes(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("readCPUTimes of a missing file: no error")
	}
}
