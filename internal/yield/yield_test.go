package yield

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// spin runs for d on the CPU, without a call into the scheduler.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// readerRunsAt runs 100 pieces of bulk work of 200 us each on one P,
// with between calls after each piece, while a goroutine waits in the
// runtime's network poller for a pipe the work writes to at piece 10; it
// returns the piece the work was at when that goroutine ran.
func readerRunsAt(t *testing.T, between func()) int {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var piece int
	seen := make(chan int, 1)
	go func() {
		var b [1]byte
		if _, err := r.Read(b[:]); err != nil {
			t.Error(err)
		}
		seen <- piece
	}()
	time.Sleep(10 * time.Millisecond) // the reader parks in the poller
	for piece = 0; piece < 100; piece++ {
		if piece == 10 {
			if _, err := w.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
		}
		spin(200 * time.Microsecond)
		between()
	}
	return <-seen
}

// TestNowLetsReadyIORun: with Now between the pieces, the goroutine whose
// data came at piece 10 runs right after it. Without a yield it would run
// only when the runtime's monitor preempts the work or polls the network
// itself, some 10 ms (50 pieces) later; runtime.Gosched does not poll the
// network (it fails this test).
func TestNowLetsReadyIORun(t *testing.T) {
	for round := range 5 {
		if at := readerRunsAt(t, Now); at > 11 {
			t.Errorf("round %d: the reader ran at piece %d, the data came at piece 10", round, at)
		}
	}
}

// TestSlicerYieldsEvery: Maybe yields only once Every has passed since the
// last yield (pieces of 200 us, Every 1 ms: the reader runs at one of the
// next 5 pieces); a zero Every never (the reader runs only when the
// runtime's monitor polls the network: later than the next piece anyway).
func TestSlicerYieldsEvery(t *testing.T) {
	for _, c := range []struct {
		every           time.Duration
		atLeast, atMost int
	}{{time.Millisecond, 10, 15}, {0, 12, 100}} {
		s := Slicer{Every: c.every}
		if at := readerRunsAt(t, s.Maybe); at > c.atMost || at < c.atLeast {
			t.Errorf("Every %v: the reader ran at piece %d, want %d..%d", c.every, at, c.atLeast, c.atMost)
		}
	}
}

// TestSlicerWaiting: with Waiting set, a Slicer yields only when it
// reports something waiting; a yield costs a sleep of the runtime's
// poller, so slicing with nothing waiting must not sleep at all.
func TestSlicerWaiting(t *testing.T) {
	asked := 0
	waiting := false
	s := Slicer{Every: time.Microsecond, Waiting: func() bool { asked++; return waiting }}
	s.Maybe()
	start := time.Now()
	for i := 0; i < 200; i++ {
		spin(2 * time.Microsecond)
		s.Maybe()
	}
	idle := time.Since(start)
	if asked == 0 {
		t.Fatalf("Waiting was never asked")
	}
	waiting = true
	start = time.Now()
	for i := 0; i < 200; i++ {
		spin(2 * time.Microsecond)
		s.Maybe()
	}
	busy := time.Since(start)
	// 200 yields sleep at least 200 x 20 us; 200 pieces of 2 us without
	// them take a small part of that.
	if busy < 200*sleep {
		t.Fatalf("200 slices with something waiting took %v: fewer yields than slices (each sleeps %v)", busy, sleep)
	}
	if idle >= busy/2 {
		t.Fatalf("200 slices with nothing waiting took %v, with something waiting %v: it yielded anyway", idle, busy)
	}
}
