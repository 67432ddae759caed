package wal

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
)

// BenchmarkAppendBatch appends and commits (fsync per batch) batches of
// 5,000 entries of 11 64-byte records, as a catch-up does with one fetch
// answer; reported per batch.
//
//	go test ./wal -run '^$' -bench AppendBatch
func BenchmarkAppendBatch(b *testing.B) {
	l, _, err := Open(b.TempDir(), SyncBatch)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const batch = 5000
	es := make([]exo.Entry, batch)
	for i := range es {
		es[i] = exo.Entry{Epoch: 1, Sender: uint8(i % 5), History: []uint8{1, 2}, Count: 11, Payload: make([]byte, 11*68)}
	}
	b.SetBytes(int64(batch * es[0].BinarySize()))
	seq := uint64(0)
	for i := 0; i < b.N; i++ {
		for k := range es {
			es[k].Seq = seq
			seq++
		}
		if err := l.Append(es); err != nil {
			b.Fatal(err)
		}
		if err := l.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReaderTransfer reads a log of two 64 MiB segments of 1.4 KB
// entries in order, in answers of 4 MiB (a state transfer's fetches),
// with a fresh Reader (a member asked for its first batch), beside 256 MiB
// of live heap (a daemon's, which paces its collector): first_ms is
// the first answer's time, the one a joiner's fetch timeout must allow;
// the bytes are the whole read's. read: Read, new buffers for each
// answer; into: ReadInto one buffer, reused, in slices with yields (a
// daemon's sender).
//
//	go test ./wal -run '^$' -bench ReaderTransfer
func BenchmarkReaderTransfer(b *testing.B) {
	dir := b.TempDir()
	l, _, err := Open(dir, SyncNone)
	if err != nil {
		b.Fatal(err)
	}
	e := exo.Entry{Epoch: 1, History: []uint8{1, 2}, Count: 1, Payload: make([]byte, 1400)}
	per := e.BinarySize()
	n := uint64(2 * DefaultSegmentBytes / int64(per+8))
	es := make([]exo.Entry, 0, 4096)
	for s := uint64(0); s < n; s++ {
		e.Seq, e.Sender = s, uint8(s%5)
		es = append(es, e)
		if len(es) == cap(es) || s == n-1 {
			if err := l.Append(es); err != nil {
				b.Fatal(err)
			}
			es = es[:0]
		}
	}
	l.Close()
	lim := exo.FetchLimit{Entries: 1, Bytes: 4 << 20}
	// A daemon's heap (its in-memory log, the subscribers' history):
	// the collector's pace follows it.
	heap := make([]byte, 256<<20)
	for i := range heap {
		heap[i] = byte(i)
	}
	for _, mode := range []string{"read", "into"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(n) * int64(per))
			var first time.Duration
			for i := 0; i < b.N; i++ {
				r := NewReader(dir)
				var buf *[]byte
				if mode == "into" {
					r.YieldEvery, buf = time.Millisecond, new([]byte)
				}
				for lo := uint64(0); lo < n; {
					t0 := time.Now()
					got, err := r.ReadInto(buf, lo, n, lim)
					if err != nil || len(got) == 0 {
						b.Fatalf("read at %d: %d entries, %v", lo, len(got), err)
					}
					if lo == 0 {
						first += time.Since(t0)
					}
					lo += uint64(len(got))
				}
			}
			b.ReportMetric(float64(first.Microseconds())/1e3/float64(b.N), "first_ms")
		})
	}
	runtime.KeepAlive(heap)
}

// BenchmarkOpenLateBase opens a log of one 64 MiB segment of 60,000
// entries of 11 64-byte records whose core log starts at seq 35,000 (a
// restart after a compaction: keep_entries below what the segment holds),
// as a restarted daemon does first; reported per open.
//
//	go test ./wal -run '^$' -bench OpenLateBase
func BenchmarkOpenLateBase(b *testing.B) {
	dir := b.TempDir()
	l, _, err := Open(dir, SyncNone)
	if err != nil {
		b.Fatal(err)
	}
	const n, base = 60_000, 35_000
	es := make([]exo.Entry, n)
	for i := range es {
		es[i] = exo.Entry{Seq: uint64(i), Epoch: 1, Sender: uint8(i % 5), History: []uint8{1, 2}, Count: 11, Payload: make([]byte, 11*68)}
	}
	if err := l.Append(es); err != nil {
		b.Fatal(err)
	}
	l.SetMeta(Meta{Epoch: 1, Agreed: n, Roster: []uint8{0, 1, 2, 3, 4}, RosterAt: base})
	if err := l.Commit(); err != nil {
		b.Fatal(err)
	}
	l.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, hs, err := Open(dir, SyncNone)
		if err != nil {
			b.Fatal(err)
		}
		if len(hs.Log) != n-base {
			b.Fatalf("%d entries in the core's log, want %d", len(hs.Log), n-base)
		}
		l.Close()
	}
}

// BenchmarkCommitEntry appends one entry of 11 messages of 68 bytes and
// commits it (fsync: batch), as a daemon does before a frame that depends
// on it leaves: on a segment appended to (fsync of a file that grows) and
// on a prepared one (fdatasync over zeros written ahead; the next
// segment's preparation, once a segment, finished before the timing).
// p50_us and p90_us are the commits' percentiles.
//
//	go test ./wal -run '^$' -bench CommitEntry -count 4
func BenchmarkCommitEntry(b *testing.B) {
	for _, prealloc := range []bool{false, true} {
		name := "appended"
		if prealloc {
			name = "preallocated"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			l, _, err := OpenWith(dir, SyncBatch, Options{Preallocate: prealloc})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			e := exo.Entry{Epoch: 1, History: []uint8{1, 2}, Count: 11, Payload: make([]byte, 11*68)}
			if prealloc {
				waitPrepared(b, l)
			}
			if err := l.Append([]exo.Entry{e}); err != nil {
				b.Fatal(err)
			}
			if prealloc {
				// The segment after this one is prepared meanwhile
				// (64 MiB of zeros, once a segment): not timed here.
				waitPrepared(b, l)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e.Seq, e.Sender = uint64(i+1), uint8(i%5)
				t0 := time.Now()
				if err := l.Append([]exo.Entry{e}); err != nil {
					b.Fatal(err)
				}
				if err := l.Commit(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50_us")
			b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds()), "p90_us")
			if p, _ := l.Prepared(); prealloc != (p > 0) {
				b.Fatalf("preallocate %v: %d segments prepared", prealloc, p)
			}
		})
	}
}
