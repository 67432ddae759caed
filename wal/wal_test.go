package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/exo-rack/exo/exo"
)

func entries(from, to uint64) []exo.Entry {
	var es []exo.Entry
	for s := from; s < to; s++ {
		es = append(es, exo.Entry{Seq: s, Epoch: 1, Sender: uint8(s % 5), History: []uint8{1, 2},
			Count: 1, Payload: []byte(fmt.Sprintf("\x00\x05e%04d", s))})
	}
	return es
}

func equal(t *testing.T, got, want []exo.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range got {
		if !got[i].Equal(&want[i]) {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// replaceTail cuts l at seq at, appends es and commits: a view change's
// install, as the daemon writes it.
func replaceTail(t *testing.T, l *Log, at uint64, es []exo.Entry) {
	t.Helper()
	if err := l.Truncate(at); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(es); err != nil {
		t.Fatal(err)
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestRoundTrip: entries and meta survive a reopen; a truncation too.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, pol := range []Sync{SyncNone, SyncBatch, SyncEntry} {
		d := filepath.Join(dir, fmt.Sprint(pol))
		l, hs, err := Open(d, pol)
		if err != nil || len(hs.Log) != 0 || !l.Empty() {
			t.Fatalf("new log: %v %+v", err, hs)
		}
		if err := l.Append(entries(0, 100)); err != nil {
			t.Fatal(err)
		}
		l.SetMeta(Meta{Epoch: 3, Promised: 4, Agreed: 90, Skipped: []uint8{2}})
		if err := l.Commit(); err != nil {
			t.Fatal(err)
		}
		replaceTail(t, l, 60, entries(60, 70))
		l.Close()
		l, hs, err = Open(d, pol)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, hs.Log, entries(0, 70))
		if hs.Epoch != 3 || hs.Promised != 4 || hs.Agreed != 70 || len(hs.Skipped) != 1 || l.Repair != "" {
			t.Fatalf("meta %+v repair %q", hs, l.Repair)
		}
		l.Close()
	}
}

// TestTornTail: a torn or corrupt tail is detected, cut, never returned.
func TestTornTail(t *testing.T) {
	for _, c := range []struct {
		name string
		hurt func(path string, size int64)
	}{
		{"torn header", func(p string, n int64) { os.Truncate(p, n-3-20) }},
		{"torn body", func(p string, n int64) { os.Truncate(p, n-5) }},
		{"flipped bit", func(p string, n int64) {
			f, _ := os.OpenFile(p, os.O_RDWR, 0)
			b := make([]byte, 1)
			f.ReadAt(b, n-10)
			b[0] ^= 0x40
			f.WriteAt(b, n-10)
			f.Close()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _, err := Open(dir, SyncBatch)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Append(entries(0, 50)); err != nil {
				t.Fatal(err)
			}
			l.Commit()
			l.Close()
			seg := l.segs[0].path
			st, _ := os.Stat(seg)
			c.hurt(seg, st.Size())
			l, hs, err := Open(dir, SyncBatch)
			if err != nil {
				t.Fatal(err)
			}
			if l.Repair == "" {
				t.Fatal("damage not reported")
			}
			equal(t, hs.Log, entries(0, 49)) // the damaged last record is gone
			// The log goes on from there.
			if err := l.Append(entries(49, 55)); err != nil {
				t.Fatal(err)
			}
			l.Close()
			_, hs, err = Open(dir, SyncBatch)
			if err != nil {
				t.Fatal(err)
			}
			equal(t, hs.Log, entries(0, 55))
			t.Logf("repair: %s", l.Repair)
		})
	}
}

// TestRestartNode: a node restarted from the log continues where it was.
func TestRestartNode(t *testing.T) {
	cfg := exo.Config{ID: 0, Hosts: 3, Group: 1}
	nd, _ := exo.NewNode(cfg)
	dir := t.TempDir()
	l, _, err := Open(dir, SyncEntry)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 30; k++ {
		_ = nd.Propose([]byte{byte(k)})
		nd.Broadcast()
		rd := nd.Ready()
		if rd.HasTruncate {
			l.Truncate(rd.Truncate)
		}
		if err := l.Append(rd.Appended); err != nil {
			t.Fatal(err)
		}
		hs := nd.HardStateMeta()
		l.SetMeta(Meta{Epoch: hs.Epoch, Promised: hs.Promised, Agreed: hs.Agreed, Skipped: hs.Skipped})
		l.Commit()
		nd.Advance()
		// Feed the node frames of the two other hosts so the log grows.
		p := nd.Pointers()
		for _, s := range []uint8{1, 2} {
			f := exo.Frame{Type: exo.FrameData, Group: 1, Sender: s, Seq: p.Append, History: append([]uint8(nil), p.Hist()...)}
			f.Seal(nd.Config().TagKey)
			if r := nd.StepFrame(&f); r != exo.ReasonAccept {
				t.Fatalf("frame %d from %d: %v", f.Seq, s, r)
			}
			p = nd.Pointers()
		}
		rd = nd.Ready()
		l.Append(rd.Appended)
		l.Commit()
		nd.Advance()
	}
	l.Close()
	_, hs, err := Open(dir, SyncEntry)
	if err != nil {
		t.Fatal(err)
	}
	back, err := exo.RestartNode(cfg, hs)
	if err != nil {
		t.Fatal(err)
	}
	if back.Pointers().Append != nd.Pointers().Append || back.Pointers().History != nd.Pointers().History {
		t.Fatalf("restarted at %+v, was %+v", back.Pointers(), nd.Pointers())
	}
}

// TestMetaCompat: a metadata file written before membership changes (no
// roster) loads with a nil roster, which the core reads as 0..n-1.
func TestMetaCompat(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(dir, SyncBatch)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(entries(0, 10)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	old := `{"amnesiac":false,"epoch":3,"promised":4,"agreed":8,"skipped":"Ag=="}`
	if err := os.WriteFile(filepath.Join(dir, metaFile), []byte(old), 0o640); err != nil {
		t.Fatal(err)
	}
	l, hs, err := Open(dir, SyncBatch)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if hs.Roster != nil || hs.Epoch != 3 || hs.Promised != 4 || hs.Agreed != 8 || len(hs.Skipped) != 1 || hs.Skipped[0] != 2 {
		t.Fatalf("old meta: %+v", hs)
	}
	equal(t, hs.Log, entries(0, 10))
	// The core restarts from it on the identity roster.
	cfg := exo.Config{Hosts: 5, ID: 1}
	nd, err := exo.RestartNode(cfg.WithDefaults(), hs)
	if err != nil {
		t.Fatal(err)
	}
	if r := nd.Roster(); len(r) != 5 || r[4] != 4 {
		t.Fatalf("roster %v", r)
	}
}

// TestMetaRoster: the roster and its seq survive a reopen; Open hands the
// core the log from RosterAt; Compact keeps the entries from the RosterAt
// on disk.
func TestMetaRoster(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(dir, SyncBatch)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(entries(0, 100)); err != nil {
		t.Fatal(err)
	}
	l.SetMeta(Meta{Epoch: 2, Promised: 2, Agreed: 90, Roster: []uint8{0, 1, 3, 7}, RosterAt: 40})
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, metaFile))
	l.Close()
	l, hs, err := Open(dir, SyncBatch)
	if err != nil {
		t.Fatalf("%v (meta %s)", err, b)
	}
	if fmt.Sprint(hs.Roster) != "[0 1 3 7]" || hs.Epoch != 2 {
		t.Fatalf("roster meta: %+v (meta %s)", hs, b)
	}
	equal(t, hs.Log, entries(40, 100))
	// A change of the roster alone is written.
	l.SetMeta(Meta{Epoch: 2, Promised: 2, Agreed: 90, Roster: []uint8{0, 1, 3}, RosterAt: 40})
	if !l.dirty {
		t.Fatal("roster change not marked for writing")
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, hs, _ = Open(dir, SyncBatch); fmt.Sprint(hs.Roster) != "[0 1 3]" {
		t.Fatalf("roster %v", hs.Roster)
	}
}

// TestCompactKeepsRosterBase: Compact never removes a segment holding
// entries at or after the RosterAt on disk.
func TestCompactKeepsRosterBase(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(dir, SyncNone)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.segs = nil
	// Three segments: 0..9, 10..19, 20..29.
	for _, r := range [][2]uint64{{0, 10}, {10, 20}, {20, 30}} {
		if err := l.roll(r[0]); err != nil {
			t.Fatal(err)
		}
		if err := l.Append(entries(r[0], r[1])); err != nil {
			t.Fatal(err)
		}
	}
	l.SetMeta(Meta{Epoch: 1, Roster: []uint8{0, 1, 2}, RosterAt: 12})
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	// The core compacted to 25, but the meta on disk says 12.
	if err := l.Compact(25); err != nil {
		t.Fatal(err)
	}
	if len(l.segs) != 2 || l.segs[0].first != 10 {
		t.Fatalf("segments after compact: %+v", l.segs)
	}
	l.SetMeta(Meta{Epoch: 1, Roster: []uint8{0, 1, 2}, RosterAt: 25})
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := l.Compact(25); err != nil {
		t.Fatal(err)
	}
	if len(l.segs) != 1 || l.segs[0].first != 20 {
		t.Fatalf("segments after the second compact: %+v", l.segs)
	}
	l.Close()
	_, hs, err := Open(dir, SyncNone)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, hs.Log, entries(25, 30))
}

// TestCommitSyncsWhatWasWritten: a Commit fsyncs the segment only when
// records were written or the log cut since the last one (Syncs counts
// it), and Pending says whether a Commit has anything to do.
func TestCommitSyncsWhatWasWritten(t *testing.T) {
	l, _, err := Open(t.TempDir(), SyncBatch)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	step := func(what string, pending bool, syncs uint64) {
		t.Helper()
		if l.Pending() != pending {
			t.Fatalf("%s: Pending %v, want %v", what, l.Pending(), pending)
		}
		if err := l.Commit(); err != nil {
			t.Fatal(err)
		}
		if l.Syncs() != syncs || l.Pending() {
			t.Fatalf("%s: %d fsyncs (pending %v), want %d", what, l.Syncs(), l.Pending(), syncs)
		}
	}
	if err := l.Append(entries(0, 10)); err != nil {
		t.Fatal(err)
	}
	step("records written", true, 1)
	step("nothing written", false, 1)
	l.SetMeta(Meta{Epoch: 2})
	if !l.MetaPending() {
		t.Fatal("a changed meta is not pending")
	}
	step("the meta alone", true, 1)
	if err := l.Truncate(5); err != nil {
		t.Fatal(err)
	}
	step("the log cut", true, 2)
	if err := l.Append(entries(5, 6)); err != nil {
		t.Fatal(err)
	}
	step("one record", true, 3)
}

// TestOpenSkipsBelowBase: in the segment where the core's log starts
// (RosterAt), Open decodes and checks only the records from there on; the
// ones below are archive, walked by their lengths and checked when a
// Reader reads them. A damaged record below the base leaves the log
// whole (the Reader reports it); one above is cut as always; the log
// goes on after either.
func TestOpenSkipsBelowBase(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  uint64 // the record whose body gets one byte flipped
		repair  bool
		logFrom uint64
		logTo   uint64
	}{
		{"below the base", 10, false, 40, 100},
		{"above the base", 70, true, 40, 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _, err := Open(dir, SyncBatch)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Append(entries(0, 100)); err != nil {
				t.Fatal(err)
			}
			l.SetMeta(Meta{Epoch: 2, Promised: 2, Agreed: 90, Roster: []uint8{0, 1, 2}, RosterAt: 40})
			if err := l.Commit(); err != nil {
				t.Fatal(err)
			}
			off := l.offs[tc.damage]
			l.Close()
			path := segmentPath(dir, 0)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[off+8+3] ^= 0xff // inside the record's body: its checksum fails
			if err := os.WriteFile(path, b, 0o640); err != nil {
				t.Fatal(err)
			}
			l, hs, err := Open(dir, SyncBatch)
			if err != nil {
				t.Fatal(err)
			}
			if (l.Repair != "") != tc.repair {
				t.Fatalf("repair %q, want one: %v", l.Repair, tc.repair)
			}
			equal(t, hs.Log, entries(tc.logFrom, tc.logTo))
			if err := l.Append(entries(tc.logTo, tc.logTo+5)); err != nil {
				t.Fatal(err)
			}
			if err := l.Commit(); err != nil {
				t.Fatal(err)
			}
			l.Close()
			if _, hs, err = Open(dir, SyncBatch); err != nil {
				t.Fatal(err)
			}
			equal(t, hs.Log, entries(tc.logFrom, tc.logTo+5))
			if !tc.repair {
				_, err := NewReader(dir).Read(tc.damage, tc.damage+1, exo.FetchLimit{Entries: 1})
				if err == nil {
					t.Fatalf("the Reader read the damaged record %d without an error", tc.damage)
				}
			}
		})
	}
}

// TestAgreedWrittenEveryStep: a new agreement pointer alone makes the
// meta file be written again once it is AgreedStep past the one on disk,
// not before (the file is written with two fsyncs); a restart then starts
// from it rather than from the last epoch change's.
func TestAgreedWrittenEveryStep(t *testing.T) {
	d := t.TempDir()
	l, _, err := Open(d, SyncBatch)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3 * AgreedStep
	if err := l.Append(entries(0, n)); err != nil {
		t.Fatal(err)
	}
	l.SetMeta(Meta{Epoch: 3, Promised: 3, Agreed: 10})
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	l.SetMeta(Meta{Epoch: 3, Promised: 3, Agreed: 10 + AgreedStep - 1})
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	reopen := func() uint64 {
		l.Close()
		var hs exo.HardState
		if l, hs, err = Open(d, SyncBatch); err != nil {
			t.Fatal(err)
		}
		return hs.Agreed
	}
	if got := reopen(); got != 10 {
		t.Fatalf("agreement pointer %d after a step short of AgreedStep, want 10 (the meta file not written again)", got)
	}
	l.SetMeta(Meta{Epoch: 3, Promised: 3, Agreed: 10 + AgreedStep})
	if !l.Pending() {
		t.Fatalf("AgreedStep past the meta file's agreement pointer: nothing pending")
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := reopen(); got != 10+AgreedStep {
		t.Fatalf("agreement pointer %d after a step of AgreedStep, want %d", got, 10+AgreedStep)
	}
	l.Close()
}

// TestOpenWalksLongPrefix: the records below the core's log, several
// times walkWindow of them and of sizes that straddle its end, are walked
// through the window; the log from the base, the offsets of every record
// (a cut, then appends after it) and the Reader's view below the base
// come out as written.
func TestOpenWalksLongPrefix(t *testing.T) {
	big := func(from, to uint64) []exo.Entry {
		es := entries(from, to)
		for i := range es {
			es[i].Payload = append(es[i].Payload, make([]byte, 7_000+int(es[i].Seq%13)*997)...)
		}
		return es
	}
	dir := t.TempDir()
	l, _, err := Open(dir, SyncBatch)
	if err != nil {
		t.Fatal(err)
	}
	const n, base = 900, 700 // some 8 MB below the base
	if err := l.Append(big(0, n)); err != nil {
		t.Fatal(err)
	}
	l.SetMeta(Meta{Epoch: 2, Promised: 2, Agreed: 800, Roster: []uint8{0, 1, 2}, RosterAt: base})
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	offs := slices.Clone(l.offs)
	l.Close()
	l, hs, err := Open(dir, SyncBatch)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, hs.Log, big(base, n))
	if !slices.Equal(l.offs, offs) {
		t.Fatalf("the records' offsets after the reopen differ from the writer's (%d and %d of them)", len(l.offs), len(offs))
	}
	replaceTail(t, l, 850, entries(850, 860))
	l.Close()
	if _, hs, err = Open(dir, SyncBatch); err != nil {
		t.Fatal(err)
	}
	equal(t, hs.Log, append(big(base, 850), entries(850, 860)...))
	got, err := NewReader(dir).Read(100, 300, exo.FetchLimit{Entries: 200})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, big(100, 300))
}
