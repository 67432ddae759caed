package wal

import (
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
)

// readerLog is a log of entries with payloads of random sizes (a few
// longer than a Reader's read chunk), appended in batches of random
// lengths, and the entries it holds.
func readerLog(t *testing.T, rng *rand.Rand, dir string, n int, segBytes int64) (*Log, []exo.Entry) {
	t.Helper()
	l, _, err := OpenWith(dir, SyncNone, Options{SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	var all []exo.Entry
	for len(all) < n {
		k := 1 + rng.IntN(50)
		es := make([]exo.Entry, k)
		for i := range es {
			size := rng.IntN(3000)
			if rng.IntN(40) == 0 {
				size = (1 << 20) - 24 - rng.IntN(8) // a record (body and header) past the 1 MiB read chunk
			}
			p := make([]byte, size)
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
			es[i] = exo.Entry{Seq: uint64(len(all) + i), Epoch: 3, Sender: uint8(rng.IntN(5)), History: []uint8{1, 2}, Count: 1, Payload: p}
		}
		if err := l.Append(es); err != nil {
			t.Fatal(err)
		}
		all = append(all, es...)
	}
	return l, all
}

// segmentFirsts returns the first positions of dir's segments, in order.
func segmentFirsts(t *testing.T, dir string) []uint64 {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, s := range segs {
		out = append(out, s.first)
	}
	return out
}

// wantRead is what Reader.Read(lo, hi, lim) must return of a log holding
// all, in segments starting at firsts: from lo to its segment's end, below
// hi, as lim takes them (FetchLimit.Take, the core's own rule).
func wantRead(all []exo.Entry, firsts []uint64, lo, hi uint64, lim exo.FetchLimit) []exo.Entry {
	end := uint64(len(all))
	for _, f := range firsts {
		if f > lo {
			end = f
			break
		}
	}
	es := all[lo:end]
	return es[:lim.Take(es, hi)]
}

// TestReaderMatchesTake: reads in order (as a transfer does), jumps back
// and forth (in slices with yields too), across segments and records
// longer than a read chunk, with
// limits by entries and by bytes, return exactly what the core's
// FetchLimit.Take takes of the entries written; a read of a removed
// segment says ErrNotRetained; the segment being written is read as it
// grows.
func TestReaderMatchesTake(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	dir := t.TempDir()
	l, all := readerLog(t, rng, dir, 3000, 2<<20)
	firsts := segmentFirsts(t, dir)
	if len(firsts) < 4 {
		t.Fatalf("%d segments: the test wants several", len(firsts))
	}
	limit := func() exo.FetchLimit {
		switch rng.IntN(3) {
		case 0:
			return exo.FetchLimit{Entries: rng.IntN(200)}
		case 1:
			return exo.FetchLimit{Entries: rng.IntN(3), Bytes: rng.IntN(4 << 20)}
		}
		return exo.FetchLimit{Entries: 1 << 16, Bytes: 4 << 20}
	}
	var into []byte // ReadInto's buffer, reused from read to read
	check := func(r *Reader, lo, hi uint64, lim exo.FetchLimit) []exo.Entry {
		t.Helper()
		var got []exo.Entry
		var err error
		if r.YieldEvery > 0 {
			got, err = r.ReadInto(&into, lo, hi, lim)
		} else {
			got, err = r.Read(lo, hi, lim)
		}
		if err != nil {
			t.Fatalf("read [%d, %d) %+v: %v", lo, hi, lim, err)
		}
		want := wantRead(all, firsts, lo, hi, lim)
		if len(got) != len(want) {
			t.Fatalf("read [%d, %d) %+v: %d entries, want %d", lo, hi, lim, len(got), len(want))
		}
		equal(t, got, want)
		return got
	}
	r := NewReader(dir)
	end := uint64(len(all))
	// In order, as a transfer reads (in the idle I/O class, as a
	// daemon's transfers do by default).
	idle := NewReader(dir)
	idle.Class = IOIdle
	for lo := uint64(0); lo < end; {
		got := check(idle, lo, end, limit())
		lo += uint64(max(len(got), 1))
	}
	// Anywhere, with a kept answer checked again after later reads (the
	// entries alias buffers of their own).
	// Every second read by a Reader that reads in slices and yields
	// between them (a daemon's: YieldEvery), into one buffer reused from
	// read to read (ReadInto, as a sender does), the same answers.
	sliced := NewReader(dir)
	sliced.YieldEvery = time.Nanosecond
	var kept []exo.Entry
	var keptLo uint64
	for k := range 400 {
		lo := uint64(rng.IntN(int(end)))
		hi := lo + 1 + uint64(rng.IntN(int(end-lo)))
		got := check([]*Reader{r, sliced}[k%2], lo, hi, limit())
		if kept == nil && len(got) > 0 && k%2 == 0 {
			kept, keptLo = got, lo
		}
	}
	equal(t, kept, all[keptLo:keptLo+uint64(len(kept))])
	// The segment being written grows under a reader.
	last := firsts[len(firsts)-1]
	check(r, last, end, exo.FetchLimit{Entries: 1 << 20})
	more := make([]exo.Entry, 20)
	for i := range more {
		more[i] = exo.Entry{Seq: end + uint64(i), Epoch: 3, History: []uint8{1, 2}, Count: 1, Payload: []byte("more")}
	}
	if err := l.Append(more); err != nil {
		t.Fatal(err)
	}
	all = append(all, more...)
	if fs := segmentFirsts(t, dir); fs[len(fs)-1] != last {
		t.Fatalf("the append rolled a segment (%v): the test wants it to grow %d's", fs, last)
	}
	check(r, end-1, end+20, exo.FetchLimit{Entries: 100})
	if _, err := r.Read(end+20, end+30, exo.FetchLimit{Entries: 1}); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("read past the log's end: %v, want ErrNotRetained", err)
	}
	// A removed segment.
	if err := os.Remove(segmentPath(dir, firsts[0])); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(firsts[0]+1, end, exo.FetchLimit{Entries: 1}); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("read of a removed segment: %v, want ErrNotRetained", err)
	}
	check(r, firsts[1], end, exo.FetchLimit{Entries: 5})
}

// damagedLog writes entries 0..99 in one segment, rewrites its file with
// damage (given the file and each record's offset) and returns a Reader.
func damagedLog(t *testing.T, damage func(b []byte, offs []int64) []byte) *Reader {
	t.Helper()
	dir := t.TempDir()
	l, _, err := OpenWith(dir, SyncNone, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(entries(0, 100)); err != nil {
		t.Fatal(err)
	}
	path := segmentPath(dir, 0)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, damage(b, l.offs), 0o640); err != nil {
		t.Fatal(err)
	}
	return NewReader(dir)
}

// TestInClass: a read in the idle class runs on a thread of that class,
// and the thread has its own class back after it (a goroutine that ran on
// it later, an fsync, must not yield the disk).
func TestInClass(t *testing.T) {
	runtime.LockOSThread() // one thread for the whole test
	defer runtime.UnlockOSThread()
	before, err := threadIOClass()
	if err != nil {
		t.Skipf("the kernel does not say a thread's I/O class: %v", err)
	}
	if before == ioprioClassIdle {
		t.Fatalf("the test's thread is in the idle class already")
	}
	var during int
	inClass(IOIdle, func() { during, err = threadIOClass() })
	if err != nil || during != ioprioClassIdle {
		t.Fatalf("class during an idle read: %d (%v), want %d", during, err, ioprioClassIdle)
	}
	inClass(IONormal, func() { during, _ = threadIOClass() })
	if during != before {
		t.Fatalf("class during a normal read: %d, want the thread's %d", during, before)
	}
	if after, _ := threadIOClass(); after != before {
		t.Fatalf("class after an idle read: %d, want %d back", after, before)
	}
}

// TestReaderTornTail: a record cut short at the end of the segment being
// written ends an answer before it; a read from it says ErrNotRetained.
func TestReaderTornTail(t *testing.T) {
	r := damagedLog(t, func(b []byte, _ []int64) []byte { return b[:len(b)-5] })
	got, err := r.Read(90, 200, exo.FetchLimit{Entries: 100})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, entries(90, 99))
	if _, err := r.Read(99, 200, exo.FetchLimit{Entries: 1}); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("read of the torn record: %v, want ErrNotRetained", err)
	}
}

// TestReaderDamage: a damaged record in the middle of a segment ends an
// answer before it; a read from it fails with the damage (not
// ErrNotRetained); a read past it, which skips its body, succeeds.
func TestReaderDamage(t *testing.T) {
	r := damagedLog(t, func(b []byte, offs []int64) []byte {
		b[offs[50]+20] ^= 0xff // in record 50's body
		return b
	})
	got, err := r.Read(40, 100, exo.FetchLimit{Entries: 100})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, entries(40, 50))
	if _, err := r.Read(50, 100, exo.FetchLimit{Entries: 1}); err == nil || errors.Is(err, ErrNotRetained) {
		t.Fatalf("read of the damaged record: %v, want the damage", err)
	}
	got, err = r.Read(51, 100, exo.FetchLimit{Entries: 100})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, entries(51, 100))
}

// TestReaderTwoTransfers: two transfers at once, reading in order through
// one Reader (a daemon's, for every fetch it answers), from different
// segments and at times from the same one, each go on from their own last
// read: no read skips a record.
func TestReaderTwoTransfers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	dir := t.TempDir()
	_, all := readerLog(t, rng, dir, 3000, 2<<20)
	firsts := segmentFirsts(t, dir)
	if len(firsts) < 3 {
		t.Fatalf("%d segments: the test wants several", len(firsts))
	}
	r := NewReader(dir)
	los := []uint64{0, firsts[2]}
	lim := exo.FetchLimit{Entries: 7}
	for range 40 {
		for k := range los {
			lo := los[k]
			if lo >= uint64(len(all)) {
				continue
			}
			seq, off := uint64(0), int64(-1)
			if c := r.cursorOf(lo); c != nil {
				seq, off = c.from(lo)
			}
			got, err := r.Read(lo, uint64(len(all)), lim)
			if err != nil {
				t.Fatal(err)
			}
			equal(t, got, wantRead(all, firsts, lo, uint64(len(all)), lim))
			if !slices.Contains(firsts, lo) && (seq != lo || off < 0) {
				// (Not a segment's first read: its last read ended at lo.)
				t.Fatalf("read at %d started from %d (offset %d): the cursor of its segment was lost", lo, seq, off)
			}
			los[k] += uint64(len(got))
		}
	}
}

// cursorOf returns r's cursor of the segment that holds lo, if it has one.
func (r *Reader) cursorOf(lo uint64) *segCursor {
	seg, err := r.segmentOf(lo)
	if err != nil {
		return nil
	}
	for _, c := range r.cursors {
		if c.seg == seg {
			return c
		}
	}
	return nil
}
