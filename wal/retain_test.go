package wal

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
)

// retainLog writes 0..n in segments of about segBytes, moving the core's
// base (RosterAt) up every step entries as the daemon's compaction does,
// and returns the log.
func retainLog(t *testing.T, dir string, n, step uint64, segBytes int64) *Log {
	t.Helper()
	l, _, err := OpenWith(dir, SyncNone, Options{SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	for from := uint64(0); from < n; from += step {
		if err := l.Append(entries(from, from+step)); err != nil {
			t.Fatal(err)
		}
		l.SetMeta(Meta{Epoch: 1, Agreed: from + step, Roster: []uint8{0, 1, 2}, RosterAt: from})
		if err := l.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestRetain: the bases the core's log passed are recorded; a policy's
// floor cuts at the first of them at or past it, whole segments below
// go; a Reader reads what is left and says ErrNotRetained below it; a
// reopen reads only the core's log.
func TestRetain(t *testing.T) {
	dir := t.TempDir()
	l := retainLog(t, dir, 10000, 1000, 16<<10) // ~30-byte records: ~550 a segment
	if len(l.meta.Retained) != 9 || l.meta.Retained[0].At != 0 || l.meta.Retained[8].At != 8000 {
		t.Fatalf("retained bases %+v, want 0, 1000, .. 8000", l.meta.Retained)
	}
	if base, _ := l.Archive(); base != 0 {
		t.Fatalf("archive base %d, want 0", base)
	}
	size0 := l.Size()
	// A zero policy keeps nothing below RosterAt.
	if f, _ := l.Floor(Policy{}, 10000, time.Now()); f != 9000 {
		t.Fatalf("zero policy floor %d, want RosterAt 9000", f)
	}
	// Entries: at most 4,500 behind agreed 10,000 -> floor 5,500 -> base 6,000.
	f, err := l.Floor(Policy{Entries: 4500}, 10000, time.Now())
	if err != nil || f != 5500 {
		t.Fatalf("entries floor %d %v, want 5500", f, err)
	}
	base, err := l.Retain(f)
	if bs := l.Bases(); err == nil && (len(bs) != 4 || bs[0].At != 9000 || bs[1].At != 8000 || bs[3].At != 6000) {
		t.Fatalf("bases after retain %+v, want 9000 (RosterAt), 8000, 7000, 6000", bs)
	}
	if err != nil || base != 6000 {
		t.Fatalf("retain: base %d %v, want 6000", base, err)
	}
	if l.Size() >= size0 || l.segs[0].first > 6000 || l.segs[1].first <= 6000 {
		t.Fatalf("segments after retain: first %d, %d; size %d of %d", l.segs[0].first, l.segs[1].first, l.Size(), size0)
	}
	r := NewReader(dir)
	got, err := r.Read(6000, 9000, exo.FetchLimit{Entries: 100})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, entries(6000, 6100))
	// Bytes: more than one segment's worth per read is cut at the segment.
	got, err = r.Read(6100, 9000, exo.FetchLimit{Entries: 1, Bytes: 1 << 30})
	if err != nil || len(got) == 0 || got[len(got)-1].Seq >= 9000 {
		t.Fatalf("read by bytes: %d entries %v", len(got), err)
	}
	equal(t, got, entries(6100, got[len(got)-1].Seq+1))
	if _, err := r.Read(l.segs[0].first-1, 9000, exo.FetchLimit{Entries: 1}); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("read below the retained log: %v, want ErrNotRetained", err)
	}
	// Bytes: the newest segments within the bound.
	f, _ = l.Floor(Policy{Bytes: 3 * (16 << 10)}, 10000, time.Now())
	if _, err := l.Retain(f); err != nil {
		t.Fatal(err)
	}
	if l.Size() > 3*(16<<10)+(16<<10) {
		t.Fatalf("bytes bound 48 KiB: %d bytes kept", l.Size())
	}
	// Age: segments older than the bound go (their mtime set back).
	old := time.Now().Add(-time.Hour)
	for _, s := range l.segs[:len(l.segs)-1] {
		os.Chtimes(s.path, old, old)
	}
	f, _ = l.Floor(Policy{Age: time.Minute}, 10000, time.Now())
	if f != l.segs[len(l.segs)-1].first && f != 9000 {
		t.Fatalf("age floor %d, want the last segment's first %d", f, l.segs[len(l.segs)-1].first)
	}
	base, _ = l.Retain(f)
	if base != 9000 {
		t.Fatalf("age: base %d, want RosterAt 9000 (no archive)", base)
	}
	l.Close()
	// A reopen reads the core's log only and keeps the bases it holds.
	l2, hs, err := OpenWith(dir, SyncNone, Options{SegmentBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, hs.Log, entries(9000, 10000))
	if b, _ := l2.Archive(); b != 9000 {
		t.Fatalf("reopened archive base %d", b)
	}
}

// TestOpenSkipsArchive: a reopen with an archive does not read it (its
// segments are not parsed: a damaged one is found only by a Reader) and
// still appends where the log ends.
func TestOpenSkipsArchive(t *testing.T) {
	dir := t.TempDir()
	l := retainLog(t, dir, 5000, 1000, 16<<10)
	first := l.segs[0]
	l.Close()
	// Damage the first (archived) segment's middle.
	b, _ := os.ReadFile(first.path)
	b[len(b)/2] ^= 0xff
	os.WriteFile(first.path, b, 0o640)
	l2, hs, err := OpenWith(dir, SyncNone, Options{SegmentBytes: 16 << 10})
	if err != nil || l2.Repair != "" {
		t.Fatalf("open: %v, repair %q", err, l2.Repair)
	}
	equal(t, hs.Log, entries(4000, 5000))
	if base, _ := l2.Archive(); base != 0 {
		t.Fatalf("archive base %d, want 0", base)
	}
	if err := l2.Append(entries(5000, 5010)); err != nil {
		t.Fatal(err)
	}
	// The records before the damage are read; the read that reaches it
	// fails.
	r, lo := NewReader(dir), uint64(0)
	for lo < 4000 {
		es, err := r.Read(lo, 4000, exo.FetchLimit{Entries: 5000})
		if err != nil {
			break
		}
		equal(t, es, entries(lo, lo+uint64(len(es))))
		lo += uint64(len(es))
	}
	if lo >= first.first+550 || lo == 0 {
		t.Fatalf("read the archive to %d past damage in its first segment", lo)
	}
}

// TestResetStartsAnew: after Reset (a state transfer's floor jump) the
// log appends at any seq, holds nothing before it, and a reopen starts
// there; the retained bases went with the segments.
func TestResetStartsAnew(t *testing.T) {
	dir := t.TempDir()
	l := retainLog(t, dir, 3000, 1000, 16<<10)
	if err := l.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(entries(9000, 9100)); err != nil {
		t.Fatal(err)
	}
	l.SetMeta(Meta{Epoch: 2, Agreed: 9050, Roster: []uint8{0, 1, 2}, RosterAt: 9000})
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(l.meta.Retained) != 0 {
		t.Fatalf("retained bases after a reset: %+v", l.meta.Retained)
	}
	l.Close()
	_, hs, err := OpenWith(dir, SyncNone, Options{SegmentBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, hs.Log, entries(9000, 9100))
	if _, err := NewReader(dir).Read(500, 3000, exo.FetchLimit{Entries: 10}); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("read before the reset's start: %v, want ErrNotRetained", err)
	}
}
