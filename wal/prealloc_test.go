package wal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/exo-rack/exo/exo"
)

// waitPrepared waits for the next segment's preparation under way and
// leaves it ready for the next roll.
func waitPrepared(t testing.TB, l *Log) {
	t.Helper()
	if l.prep == nil || l.prep.done == nil {
		t.Fatal("no preparation under way")
	}
	if err := <-l.prep.done; err != nil {
		t.Fatalf("preparation: %v", err)
	}
	l.prep.done = make(chan error, 1)
	l.prep.done <- nil
}

// appendPrepared appends es in batches of 50, letting the next segment's
// preparation finish before each, so that every roll finds it ready.
func appendPrepared(t *testing.T, l *Log, es []exo.Entry) {
	t.Helper()
	for len(es) > 0 {
		k := min(50, len(es))
		if l.prep != nil && l.prep.done != nil {
			waitPrepared(t, l)
		}
		if err := l.Append(es[:k]); err != nil {
			t.Fatal(err)
		}
		es = es[k:]
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func openPrealloc(t *testing.T, dir string) (*Log, exo.HardState) {
	t.Helper()
	l, hs, err := OpenWith(dir, SyncBatch, Options{SegmentBytes: 4 << 10, Preallocate: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Repair != "" {
		t.Fatalf("repair at open: %s", l.Repair)
	}
	return l, hs
}

// readAll reads lo..hi with a Reader, an answer at a time.
func readAll(t *testing.T, dir string, lo, hi uint64) []exo.Entry {
	t.Helper()
	r := NewReader(dir)
	var got []exo.Entry
	for lo < hi {
		es, err := r.Read(lo, hi, exo.FetchLimit{Entries: 300})
		if len(es) == 0 && err == nil {
			t.Fatalf("read from %d: no entries", lo)
		}
		if err != nil {
			t.Fatalf("read from %d: %v", lo, err)
		}
		got = append(got, es...)
		lo += uint64(len(es))
	}
	return got
}

// TestPreallocatedSegments: segments begun on prepared files hold the
// same log as appended ones, for the writer, a Reader and a reopen; a
// segment that ends is cut to its records, the one being written keeps
// its zeros until a reopen cuts them, and a Close leaves no prepared
// file.
func TestPreallocatedSegments(t *testing.T) {
	dir := t.TempDir()
	l, _ := openPrealloc(t, dir)
	appendPrepared(t, l, entries(0, 1000))
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	prepared, grown := l.Prepared()
	if grown != 0 || prepared != uint64(len(l.segs)) || prepared < 3 {
		t.Fatalf("%d segments: %d prepared, %d begun empty; want all prepared", len(l.segs), prepared, grown)
	}
	for i, s := range l.segs {
		size := fileSize(t, s.path)
		switch last := i == len(l.segs)-1; {
		case last && size != l.segMax:
			t.Fatalf("segment being written %s: %d bytes, want the prepared %d", s.path, size, l.segMax)
		case !last && size != s.size:
			t.Fatalf("ended segment %s: %d bytes, its records %d", s.path, size, s.size)
		}
	}
	equal(t, readAll(t, dir, 0, 1000), entries(0, 1000))
	if _, err := NewReader(dir).Read(1000, 1001, exo.FetchLimit{Entries: 1}); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("read past the records (into the zeros): %v, want ErrNotRetained", err)
	}
	last := l.segs[len(l.segs)-1]
	records := l.size
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, PreparedFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("prepared file after Close: %v", err)
	}
	l, hs := openPrealloc(t, dir)
	equal(t, hs.Log, entries(0, 1000))
	if size := fileSize(t, last.path); size != records {
		t.Fatalf("after the reopen the last segment is %d bytes, its records %d", size, records)
	}
	appendPrepared(t, l, entries(1000, 1500))
	l.Close()
	l, hs = openPrealloc(t, dir)
	equal(t, hs.Log, entries(0, 1500))
	l.Close()
}

// onlyPrepared appends until the log writes a segment begun on a prepared
// file and returns the seq that segment starts at.
func onlyPrepared(t *testing.T, l *Log) uint64 {
	t.Helper()
	for l.prepared == 0 {
		appendPrepared(t, l, entries(l.end, l.end+50))
	}
	return l.segs[len(l.segs)-1].first
}

// TestPreallocatedCutStaysCut: entries cut from a prepared segment never
// come back, though the entries appended after the cut have their sizes
// (old records would follow the new ones in step, if the file kept them).
func TestPreallocatedCutStaysCut(t *testing.T) {
	dir := t.TempDir()
	l, _ := openPrealloc(t, dir)
	s0 := onlyPrepared(t, l)
	if l.end < s0+20 {
		appendPrepared(t, l, entries(l.end, s0+20))
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	end := l.end
	later := entries(s0+10, s0+15)
	for i := range later {
		later[i].Epoch = 2 // the same size: the records line up
	}
	replaceTail(t, l, s0+10, later)
	l.Close()
	l, hs := openPrealloc(t, dir)
	defer l.Close()
	want := append(entries(0, s0+10), later...)
	equal(t, hs.Log, want)
	t.Logf("prepared segment from %d, log to %d cut at %d, appended to %d", s0, end, s0+10, s0+15)
}

// TestPreallocatedStrayRecordCut: bytes past the zeros that end a
// prepared segment's records (a write that a crash kept while losing one
// before it) are cut at the reopen, not read after the next appends.
func TestPreallocatedStrayRecordCut(t *testing.T) {
	dir := t.TempDir()
	l, _ := openPrealloc(t, dir)
	onlyPrepared(t, l)
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	end, size, path := l.end, l.size, l.segs[len(l.segs)-1].path
	l.Close()
	// The record of end+1, where it would be once end's record (of the
	// same size) is appended.
	sd := t.TempDir()
	other, _, err := Open(sd, SyncBatch)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Append(entries(end+1, end+2)); err != nil {
		t.Fatal(err)
	}
	rec := other.size
	other.Close()
	stray, err := os.ReadFile(other.segs[0].path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(stray, size+rec); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l, hs := openPrealloc(t, dir)
	equal(t, hs.Log, entries(0, end))
	if err := l.Append(entries(end, end+1)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, hs = openPrealloc(t, dir)
	defer l.Close()
	equal(t, hs.Log, entries(0, end+1))
}

// TestCloseStopsPreparation: a stop cuts a preparation short at its next
// sync (a daemon's stop does not wait for a segment of zeros), and a
// Close leaves no prepared file.
func TestCloseStopsPreparation(t *testing.T) {
	dir := t.TempDir()
	quit := make(chan struct{})
	close(quit)
	path := filepath.Join(dir, "z")
	if err := writeZeros(path, 64<<20, quit); !errors.Is(err, errStopped) {
		t.Fatalf("writeZeros after quit: %v, want errStopped", err)
	}
	if n := fileSize(t, path); n != prepSync {
		t.Fatalf("stopped after %d bytes, want the first %d", n, prepSync)
	}
	l, _, err := OpenWith(dir, SyncBatch, Options{SegmentBytes: 1 << 30, Preallocate: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, PreparedFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("prepared file after Close: %v", err)
	}
}
