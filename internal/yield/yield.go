// Package yield lets bulk work on a daemon's one P give way to the
// goroutines whose I/O is ready: the protocol loop waiting for its next
// frame above all.
//
// A daemon runs with GOMAXPROCS 1 (daemon.Config.Procs). A goroutine that
// reads, encodes and writes a 4 MiB fetch answer holds that P for
// milliseconds, and the protocol loop, parked in the runtime's network
// poller, waits: the token's hop through this host takes that long, and the
// rack's token timeout takes the token over (the execution traces of the
// lab rack's members serving a state transfer show the protocol loop
// waiting up to 58 ms with the answers' sender on the P; docs/recovery.md).
// runtime.Gosched does not help: the scheduler takes the yielding
// goroutine back from its run queue without polling the network. A short
// sleep does: with nothing runnable the scheduler polls the network, and a
// ready frame's goroutine runs before the sleeper wakes.
package yield

import "time"

// sleep is short enough to cost nothing where frames are ready; on a host
// with nothing ready the runtime's poller rounds it up to a millisecond.
const sleep = 20 * time.Microsecond

// Now gives way to every goroutine whose I/O is ready.
func Now() { time.Sleep(sleep) }

// Slicer yields (Now) once its work has run for Every since the last
// yield: call Maybe between bounded pieces of bulk work. The zero Slicer
// with Every 0 never yields.
type Slicer struct {
	Every time.Duration
	// Waiting, if set, reports whether what the work should give way to
	// waits (a frame on the protocol loop's socket): Maybe yields only
	// then. Every yield with nothing ready is a whole sleep of the
	// runtime's poller (1.1 ms on the lab machine): a member serving a
	// restarted host slept after every millisecond of work, and a 4 MiB
	// answer took 300-600 ms to build and write under load.
	Waiting func() bool
	last    time.Time
}

// Maybe yields if the work ran for Every since the last yield (or since
// the first call) and, with Waiting set, something waits.
func (s *Slicer) Maybe() {
	if s.Every <= 0 {
		return
	}
	now := time.Now()
	if s.last.IsZero() {
		s.last = now
		return
	}
	if now.Sub(s.last) >= s.Every {
		if s.Waiting == nil || s.Waiting() {
			Now()
		}
		s.last = time.Now()
	}
}
