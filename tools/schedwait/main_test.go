package main

import (
	"bytes"
	"runtime"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// spinner holds the one P for d, without a call into the scheduler.
func spinner(d time.Duration, done chan<- struct{}) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
	close(done)
}

// waiter sleeps for d, five times: its timers fire while the spinner
// holds the P, and it waits for the P until the runtime preempts the
// spinner (every 10 ms).
func waiter(d time.Duration, done chan<- struct{}) {
	for range 5 {
		time.Sleep(d)
	}
	close(done)
}

// TestLongWaitHeldBySpinner traces a program on one P in which a
// goroutine's timers fire during another's 100 ms of spinning: schedwait
// reports waits of the sleeper for the P of 1 ms or more (nothing else
// runs that long), with the spinner holding the P in them, and names
// both.
func TestLongWaitHeldBySpinner(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	slept, spun := make(chan struct{}), make(chan struct{})
	go waiter(2*time.Millisecond, slept)
	go spinner(100*time.Millisecond, spun)
	<-spun
	<-slept
	trace.Stop()
	rep, err := analyse(&buf, 2*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	waits, held := rep.longWaits("waiter", time.Millisecond)
	if len(waits) == 0 {
		t.Fatalf("no wait of the sleeper of 1 ms or more; its delays: %v", delaysOf(rep, "waiter"))
	}
	var total time.Duration
	for _, d := range waits {
		total += d
	}
	if s := held["schedwait.spinner"]; s < total/2 {
		t.Errorf("in the sleeper's waits (%v) the spinner held the P %v (all: %v)", waits, s, held)
	}
	var out strings.Builder
	rep.print(&out, "waiter", time.Millisecond, 10)
	if !strings.Contains(out.String(), "schedwait.waiter") || !strings.Contains(out.String(), "schedwait.spinner") {
		t.Errorf("the report does not name the goroutines:\n%s", out.String())
	}
}

// delaysOf is the scheduling delays of the goroutines named name.
func delaysOf(rep *report, name string) []time.Duration {
	var ds []time.Duration
	for _, g := range rep.gs {
		if strings.Contains(g.name, name) {
			ds = append(ds, g.delays...)
		}
	}
	return ds
}
