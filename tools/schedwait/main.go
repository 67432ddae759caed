// Command schedwait reads Go execution traces (runtime/trace, or a
// daemon's /debug/pprof/trace with enable_pprof) and says how long each
// goroutine waited for a P once it was runnable, and, for the goroutines
// named, what held the P during their long waits: the question of a
// daemon whose protocol loop runs on one P beside bulk work
// (docs/recovery.md, session t).
//
//	go run ./tools/schedwait -g frameLoop -over 2ms cycle1-A.trace
//
// A goroutine is named by the two outermost functions of its stacks (its
// entry and what that called: "Run.func1 > frameLoop"). Per goroutine it
// prints its runs, their CPU-side time (running: the trace cannot tell a
// thread the kernel descheduled), its scheduling delays (runnable to
// running: count, p50, p99, max) and its longest run and syscall; then,
// for each goroutine whose name contains -g, its waits over -over and the
// time each other goroutine ran in them, and the syscalls over -over by
// stack.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	g := flag.String("g", "frameLoop", "report the long waits of the goroutines whose name contains this")
	over := flag.Duration("over", 2*time.Millisecond, "a wait or a syscall this long or longer is reported")
	top := flag.Int("top", 15, "how many goroutines to list, by running time")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: schedwait [-g name] [-over d] [-top n] trace...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "schedwait:", err)
			os.Exit(1)
		}
		rep, err := analyse(f, *over)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "schedwait: %s: %v\n", path, err)
			os.Exit(1)
		}
		fmt.Printf("== %s (%v)\n", path, rep.span.Round(time.Millisecond))
		rep.print(os.Stdout, *g, *over, *top)
	}
}

// goroutine is what a trace says of one goroutine.
type goroutine struct {
	name     string
	runs     []time.Duration
	delays   []time.Duration
	syscalls []time.Duration
	// since is when it became runnable, started running or entered a
	// syscall (by state).
	runnableAt, runningAt, syscallAt trace.Time
}

// interval is a span of time of one goroutine: a run, or a wait for a P.
type interval struct {
	g          trace.GoID
	start, end trace.Time
}

// report is one trace's reading.
type report struct {
	span  time.Duration
	gs    map[trace.GoID]*goroutine
	runs  []interval // every run, in the order they ended
	waits []interval // every wait for a P
	// longSyscalls are the syscalls of at least -over, by stack.
	longSyscalls map[string][]time.Duration
}

// analyse reads a trace.
func analyse(in io.Reader, over time.Duration) (*report, error) {
	r, err := trace.NewReader(in)
	if err != nil {
		return nil, err
	}
	rep := &report{gs: map[trace.GoID]*goroutine{}, longSyscalls: map[string][]time.Duration{}}
	var first, last trace.Time
	syscallStack := map[trace.GoID]string{}
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if first == 0 {
			first = ev.Time()
		}
		last = ev.Time()
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		id := st.Resource.Goroutine()
		g := rep.gs[id]
		if g == nil {
			g = &goroutine{}
			rep.gs[id] = g
		}
		if n := name(st.Stack); n != "" && (g.name == "" || strings.HasPrefix(g.name, "runtime.") && !strings.HasPrefix(n, "runtime.")) {
			g.name = n
		}
		from, to := st.Goroutine()
		t := ev.Time()
		switch {
		case from == trace.GoRunnable && to == trace.GoRunning && g.runnableAt != 0:
			g.delays = append(g.delays, time.Duration(t-g.runnableAt))
			rep.waits = append(rep.waits, interval{id, g.runnableAt, t})
		case from == trace.GoRunning && g.runningAt != 0:
			g.runs = append(g.runs, time.Duration(t-g.runningAt))
			rep.runs = append(rep.runs, interval{id, g.runningAt, t})
		case from == trace.GoSyscall && g.syscallAt != 0:
			d := time.Duration(t - g.syscallAt)
			g.syscalls = append(g.syscalls, d)
			if d >= over {
				rep.longSyscalls[syscallStack[id]] = append(rep.longSyscalls[syscallStack[id]], d)
			}
		}
		g.runnableAt, g.runningAt, g.syscallAt = 0, 0, 0
		switch to {
		case trace.GoRunnable:
			g.runnableAt = t
		case trace.GoRunning:
			g.runningAt = t
		case trace.GoSyscall:
			g.syscallAt = t
			syscallStack[id] = frames(ev.Stack(), 6)
		}
	}
	rep.span = time.Duration(last - first)
	return rep, nil
}

// name is a goroutine's name from one of its stacks: its two outermost
// functions (below runtime.goexit), package paths cut.
func name(st trace.Stack) string {
	var fs []string
	for f := range st.Frames() {
		fs = append(fs, short(f.Func))
	}
	if len(fs) > 0 && fs[len(fs)-1] == "runtime.goexit" {
		fs = fs[:len(fs)-1]
	}
	switch len(fs) {
	case 0:
		return ""
	case 1:
		return fs[0]
	}
	return fs[len(fs)-1] + " > " + fs[len(fs)-2]
}

// frames is a stack's innermost n functions, innermost first.
func frames(st trace.Stack, n int) string {
	var fs []string
	for f := range st.Frames() {
		if len(fs) == n {
			break
		}
		fs = append(fs, short(f.Func))
	}
	return strings.Join(fs, " < ")
}

// short cuts a function's package path: github.com/x/y/pkg.F -> pkg.F.
func short(fn string) string { return fn[strings.LastIndex(fn, "/")+1:] }

// quantile is the q-quantile of ds (0 for none).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func sum(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s
}

// longWaits returns, for the goroutines whose name contains g, their
// waits for a P of at least over, and the time each goroutine (by name)
// ran within them.
func (r *report) longWaits(g string, over time.Duration) ([]time.Duration, map[string]time.Duration) {
	var waits []time.Duration
	held := map[string]time.Duration{}
	for _, w := range r.waits {
		if d := time.Duration(w.end - w.start); d < over || !strings.Contains(r.gs[w.g].name, g) {
			continue
		}
		waits = append(waits, time.Duration(w.end-w.start))
		for _, run := range r.runs {
			if lo, hi := max(run.start, w.start), min(run.end, w.end); hi > lo {
				held[r.gs[run.g].name] += time.Duration(hi - lo)
			}
		}
	}
	return waits, held
}

func (r *report) print(out io.Writer, g string, over time.Duration, top int) {
	ids := make([]trace.GoID, 0, len(r.gs))
	for id := range r.gs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return sum(r.gs[ids[i]].runs) > sum(r.gs[ids[j]].runs) })
	us := func(d time.Duration) string { return d.Round(time.Microsecond).String() }
	fmt.Fprintf(out, "%-7s %-50s %6s %10s | %6s %9s %9s %9s | %9s %9s\n", "goid", "goroutine", "runs", "running", "delays", "p50", "p99", "max", "run max", "sys max")
	for _, id := range ids[:min(top, len(ids))] {
		x := r.gs[id]
		fmt.Fprintf(out, "%-7d %-50.50s %6d %10s | %6d %9s %9s %9s | %9s %9s\n", id, x.name, len(x.runs), us(sum(x.runs)),
			len(x.delays), us(quantile(x.delays, .5)), us(quantile(x.delays, .99)), us(quantile(x.delays, 1)), us(quantile(x.runs, 1)), us(quantile(x.syscalls, 1)))
	}
	waits, held := r.longWaits(g, over)
	fmt.Fprintf(out, "waits of %q for a P of %v or more: %d, max %s; the P ran meanwhile:\n", g, over, len(waits), us(quantile(waits, 1)))
	names := make([]string, 0, len(held))
	for n := range held {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return held[names[i]] > held[names[j]] })
	for _, n := range names {
		fmt.Fprintf(out, "  %10s  %s\n", us(held[n]), n)
	}
	stacks := make([]string, 0, len(r.longSyscalls))
	for s := range r.longSyscalls {
		stacks = append(stacks, s)
	}
	sort.Slice(stacks, func(i, j int) bool { return len(r.longSyscalls[stacks[i]]) > len(r.longSyscalls[stacks[j]]) })
	fmt.Fprintf(out, "syscalls of %v or more, by stack:\n", over)
	for _, s := range stacks {
		fmt.Fprintf(out, "  %4d, max %9s  %s\n", len(r.longSyscalls[s]), us(quantile(r.longSyscalls[s], 1)), s)
	}
}
