package measure

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat (fixed at 100
// by the kernel ABI on every architecture Go supports on Linux).
const userHZ = 100

// procCPU returns the CPU time (utime + stime) of process pid ("self":
// this one) from /proc/<pid>/stat.
func procCPU(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	// The command name, in parentheses, may hold spaces: the fields
	// after it are state(3) ppid(4) ... utime(14) stime(15).
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: too few fields", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%s/stat: bad utime/stime", pid)
	}
	return time.Duration(u+st) * time.Second / userHZ, nil
}

// machineBusy returns the busy CPU time of the whole machine (every core:
// user, system, irq, softirq) from /proc/stat.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy uint64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 7 { // steal, guest (counted in user), guest_nice
			break
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * time.Second / userHZ, nil
}

// quantilesUs returns p50, p99 and p999 of h in microseconds: h's values
// divided by div (1 for a histogram in microseconds, 1000 for one in
// nanoseconds).
func quantilesUs(h *hdrhistogram.Histogram, div float64) (p50, p99, p999 float64) {
	q := func(p float64) float64 { return float64(h.ValueAtQuantile(p)) / div }
	return q(50), q(99), q(99.9)
}

// medianFigures returns, field by field, the median of the numeric fields
// of figs (the upper median for an even count) and the first's strings.
func medianFigures[T any](figs []T) T {
	out := figs[0]
	v := reflect.ValueOf(&out).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Float64:
			xs := make([]float64, len(figs))
			for k := range figs {
				xs[k] = reflect.ValueOf(figs[k]).Field(i).Float()
			}
			slices.Sort(xs)
			f.SetFloat(xs[len(xs)/2])
		case reflect.Int64, reflect.Int:
			xs := make([]int64, len(figs))
			for k := range figs {
				xs[k] = reflect.ValueOf(figs[k]).Field(i).Int()
			}
			slices.Sort(xs)
			f.SetInt(xs[len(xs)/2])
		case reflect.Uint64:
			xs := make([]uint64, len(figs))
			for k := range figs {
				xs[k] = reflect.ValueOf(figs[k]).Field(i).Uint()
			}
			slices.Sort(xs)
			f.SetUint(xs[len(xs)/2])
		}
	}
	return out
}
