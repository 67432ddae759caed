// Package wal is the daemon's durable log: the entries of the Exo log in
// append-only segment files with a CRC per record, and the small durable
// state of the core (epoch, promised epoch, skip set, agreement pointer,
// roster at the log's base) in a metadata file replaced atomically.
//
// Record format, big-endian:
//
//	[len u32][crc32c u32 of the body][body: seq u64, epoch u32, sender u8,
//	 flags u16, count u16, hist_len u8, history, payload_len u32, payload]
//
// Open replays the segments and stops at the first record that is short or
// whose CRC does not match (a torn write or corruption): the file is cut
// there, later segments are removed, and the reason is reported, so a
// damaged tail is never handed to the core.
//
// A preallocated segment (Options.Preallocate) is written over zeros that
// were written and fsynced before it took its name: its records end at the
// first zero header (a length and a CRC of 0, which no record has). Its
// appends then change no file size and allocate no block, so fdatasync
// flushes the data alone and need not wait for the file system's journal
// (BenchmarkCommitEntry, ext4 on the lab's disk: 295-307 us an append and
// its sync p50 against 391-412 us for a file that grows, p90 411-465
// against 478-531 us; docs/recovery.md, session q). Whatever could leave
// bytes past the records that were not those zeros (a cut, a restart
// after a crash) cuts the file to its records first, so that no old
// record can come back behind new ones.
package wal

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/yield"
	"golang.org/x/sys/unix"
)

// Sync is the fsync policy.
type Sync int

// Fsync policies.
const (
	SyncNone Sync = iota // never fsync (the OS writes back; a power loss may lose the tail)
	// SyncBatch fsyncs at a Commit that has records to make durable. The
	// daemon commits before it sends anything that depends on the log (a
	// frame, a promise, an answer), when the meta changed, and at most
	// 100 ms after entries it received and did not vouch for yet.
	SyncBatch
	// SyncEntry is SyncBatch with a Commit after every batch of appends
	// (every core Ready that appended), sent or not: the daemon's policy
	// before its lazy commits, kept to compare them. It once meant an
	// fsync after every entry of a batch, which bought nothing (nothing
	// that depends on a batch is sent before Commit) and held the
	// daemon's core for one fsync per entry: 0.8 ms each on the lab
	// machine, so a catch-up batch of 1,024 entries stopped the host for
	// 0.8 s (issue 12's chaos runs).
	SyncEntry
)

// ParseSync reads "none", "batch" or "entry".
func ParseSync(s string) (Sync, error) {
	switch s {
	case "none":
		return SyncNone, nil
	case "batch", "":
		return SyncBatch, nil
	case "entry":
		return SyncEntry, nil
	}
	return 0, fmt.Errorf("fsync policy %q: want none, batch or entry", s)
}

const (
	metaFile  = "meta.json"
	maxRecord = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Meta is the durable state besides the log.
//
// Roster and RosterAt were added with membership changes (docs/protocol.md
// section 7): Roster is the configuration (member ids) in effect at seq
// RosterAt, the core's log base when the meta was set
// (exo.HardState.Roster is the roster at Log[0]). A metadata file written
// before them has neither: the roster is then the rack's first one
// (0..n-1), which is right since such a rack never changed its roster.
// Open hands the core the log from RosterAt on, and Compact never removes
// entries at or beyond the RosterAt of the metadata on disk.
type Meta struct {
	Amnesiac bool    `json:"amnesiac"`
	Epoch    uint32  `json:"epoch"`
	Promised uint32  `json:"promised"`
	Agreed   uint64  `json:"agreed"`
	Skipped  []uint8 `json:"skipped"`
	Roster   []uint8 `json:"roster,omitempty"`
	RosterAt uint64  `json:"roster_at,omitempty"`
	// KeySent is exo.HardState.KeySent (added with key rotation; 0 in an
	// older file).
	KeySent uint64 `json:"key_sent,omitempty"`
	// FastArmed and FastEpoch are exo.HardState's (token mode: a fast path
	// that sends was armed in that epoch and not cleanly stopped; a
	// restart is fenced, docs/token.md section 5).
	FastArmed bool   `json:"fast_armed,omitempty"`
	FastEpoch uint32 `json:"fast_epoch,omitempty"`
	Fenced    bool   `json:"fenced,omitempty"`
	// Retained lists former values of RosterAt with the roster at each,
	// oldest first, that the segments still hold: where the retained log
	// below RosterAt (the archive, Archive) may start. SetMeta records
	// them as RosterAt moves up; the caller's Meta need not carry them.
	Retained []Base `json:"retained,omitempty"`
}

// Base is a position of the log with the roster in force there.
type Base struct {
	At     uint64  `json:"at"`
	Roster []uint8 `json:"roster"`
}

type segment struct {
	first uint64 // seq of its first record
	path  string
	size  int64 // bytes (the last segment's: Log.size)
}

// Log is an open durable log. It is not safe for concurrent use.
type Log struct {
	dir  string
	sync Sync
	segs []segment
	f    *os.File // the last segment, open for writing at size
	size int64
	// fsize is the last segment's file size: more than size while the
	// zeros of a preallocated segment are ahead of its records.
	fsize int64
	// prep writes the next segment's file ahead (nil: Options.Preallocate
	// off, or no fsync to make cheaper).
	prep *preparer
	// prepared and grown count the segments begun on a prepared file and
	// on a new, empty one (Prepared).
	prepared, grown uint64
	offs            []int64 // offset of each record of the last segment
	end             uint64  // seq after the last record
	meta            Meta
	disk            Meta // the meta last written (or read)
	dirty           bool
	// unsynced: records were written (or the log cut) since the last
	// fsync of the last segment.
	unsynced bool
	syncs    uint64 // fsyncs of segments (Syncs)
	buf      []byte
	segMax   int64  // a segment is rolled at this size (Options.SegmentBytes)
	Repair   string // what Open cut from a damaged tail ("" if nothing)
}

// Options tunes a log.
type Options struct {
	// SegmentBytes is the size at which a segment file is closed and the
	// next one begun (default 64 MiB): the unit in which retention
	// removes the log (Retain).
	SegmentBytes int64
	// Preallocate writes each next segment's file ahead of time (zeros
	// to SegmentBytes, fsynced in pieces: writeZeros) on a goroutine of
	// the log's, so that the appends that follow are synced with
	// fdatasync over blocks that exist. A roll that finds the next file
	// not ready yet begins an empty segment, as without it. It costs a
	// segment of disk space ahead (the prepared file) and the zeros'
	// writes. Ignored with SyncNone.
	Preallocate bool
}

// DefaultSegmentBytes is Options.SegmentBytes's default.
const DefaultSegmentBytes = 64 << 20

// Open opens (or creates) the log in dir and returns it with the durable
// state it holds (empty when new), with default Options.
func Open(dir string, sync Sync) (*Log, exo.HardState, error) {
	return OpenWith(dir, sync, Options{})
}

// OpenWith is Open with options. The state's log starts at the meta's
// RosterAt: segments wholly below it (the archive, read on demand by a
// Reader) are not read, so a restart's memory follows the in-memory log,
// not the retained one.
func OpenWith(dir string, sync Sync, o Options) (*Log, exo.HardState, error) {
	var hs exo.HardState
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, hs, fmt.Errorf("wal: %w", err)
	}
	l := &Log{dir: dir, sync: sync, segMax: o.SegmentBytes}
	if l.segMax <= 0 {
		l.segMax = DefaultSegmentBytes
	}
	// A prepared file that a stop or a crash left is not known to be
	// whole: it is written again.
	if err := os.Remove(filepath.Join(dir, PreparedFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, hs, fmt.Errorf("wal: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, metaFile)); err == nil {
		if err := json.Unmarshal(b, &l.meta); err != nil {
			return nil, hs, fmt.Errorf("wal: %s: %w", metaFile, err)
		}
		l.disk = l.meta
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, hs, fmt.Errorf("wal: %w", err)
	}
	segs, err := listSegments(dir)
	if err != nil {
		return nil, hs, err
	}
	l.segs = segs
	var entries []exo.Entry
	read := -1 // the last segment read (l.offs and l.size are its)
	for i := 0; i < len(l.segs); i++ {
		s := l.segs[i]
		if i > 0 && s.first != l.end {
			l.Repair = fmt.Sprintf("segment %s does not follow seq %d: removed with every later segment", s.path, l.end)
			l.dropFrom(i)
			break
		}
		if l.meta.Roster != nil && i+1 < len(l.segs) && l.segs[i+1].first <= l.meta.RosterAt {
			// Wholly below the core's log: archive, not read here (its
			// records are checked when a Reader reads them).
			fi, err := os.Stat(s.path)
			if err != nil {
				return nil, hs, fmt.Errorf("wal: %w", err)
			}
			l.segs[i].size = fi.Size()
			l.end = l.segs[i+1].first
			continue
		}
		from := uint64(0)
		if l.meta.Roster != nil {
			from = l.meta.RosterAt // the core's log starts there
		}
		es, offs, good, next, err := readSegment(s, from)
		l.segs[i].size = good
		entries = append(entries, es...)
		l.end = next
		l.offs, l.size, read = offs, good, i
		if err != nil {
			l.Repair = fmt.Sprintf("%s: %v at byte %d: truncated there, later segments removed", s.path, err, good)
			if err := os.Truncate(s.path, good); err != nil {
				return nil, hs, fmt.Errorf("wal: repair: %w", err)
			}
			l.dropFrom(i + 1)
			l.offs, l.size = offs, good
			break
		}
	}
	if n := len(l.segs); n > 0 && read != n-1 {
		// The segments after an archive segment were removed (they did
		// not follow it): its records' offsets, for the appends.
		_, offs, good, _, err := readSegment(l.segs[n-1], math.MaxUint64)
		if err != nil {
			return nil, hs, fmt.Errorf("wal: %s: %w", l.segs[n-1].path, err)
		}
		l.offs, l.size = offs, good
	}
	if len(l.segs) > 0 {
		last := l.segs[len(l.segs)-1]
		if l.f, err = l.openLast(last.path); err != nil {
			return nil, hs, err
		}
	}
	if o.Preallocate && sync != SyncNone {
		l.prep = &preparer{path: filepath.Join(dir, PreparedFile), size: l.segMax}
		l.prep.start()
	}
	l.trimRetained()
	if l.meta.Roster != nil {
		// The roster is the one at RosterAt: entries below it (kept by a
		// whole-segment compaction) are not handed to the core.
		k := 0
		for k < len(entries) && entries[k].Seq < l.meta.RosterAt {
			k++
		}
		entries = entries[k:]
	}
	hs = exo.HardState{Amnesiac: l.meta.Amnesiac, Epoch: l.meta.Epoch, Promised: l.meta.Promised,
		Agreed: min(l.meta.Agreed, l.end), Skipped: l.meta.Skipped, Log: entries,
		Roster: slices.Clone(l.meta.Roster), KeySent: l.meta.KeySent, FastArmed: l.meta.FastArmed, FastEpoch: l.meta.FastEpoch, Fenced: l.meta.Fenced}
	return l, hs, nil
}

// Empty reports whether the log holds neither entries nor state.
func (l *Log) Empty() bool {
	return len(l.segs) == 0 && l.meta.Epoch == 0 && l.meta.Promised == 0 && !l.meta.Amnesiac
}

// trimRetained drops the retained bases that the segments no longer hold
// (all of them when there is no segment).
func (l *Log) trimRetained() {
	k := 0
	for k < len(l.meta.Retained) && (len(l.segs) == 0 || l.meta.Retained[k].At < l.segs[0].first) {
		k++
	}
	if k > 0 {
		l.meta.Retained = slices.Clone(l.meta.Retained[k:])
		l.dirty = true
	}
}

func (l *Log) dropFrom(i int) {
	for _, s := range l.segs[i:] {
		os.Remove(s.path)
	}
	l.segs = l.segs[:i]
}

// segmentPath is the file of the segment whose first record is first.
func segmentPath(dir string, first uint64) string {
	return filepath.Join(dir, fmt.Sprintf("seg-%020d.log", first))
}

// listSegments returns the segment files in dir, in order.
func listSegments(dir string) ([]segment, error) {
	names, err := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	var segs []segment
	for _, n := range names {
		first, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(n), "seg-"), ".log"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("wal: unexpected file %s", n)
		}
		segs = append(segs, segment{first: first, path: n})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].first < segs[j].first })
	return segs, nil
}

// readSegment reads the records of a segment: those from seq from on are
// checked and decoded; those below it (archive: below the core's log, in
// the segment where that log starts) are only walked, their headers'
// lengths followed (a Reader checks them when it reads them). It returns
// the entries decoded, the offsets of all the records, the end of the
// last good record, the seq after it, and the error that stopped it (nil
// at a clean end). A restart whose log started late in a 64 MiB segment
// decoded and checked the whole segment, then dropped the part below.
func readSegment(s segment, from uint64) ([]exo.Entry, []int64, int64, uint64, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, nil, 0, s.first, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, 0, s.first, err
	}
	size := fi.Size()
	var offs []int64
	var off int64
	want := s.first
	// The records below from: their headers walked through a window of
	// walkWindow bytes read again and again, nothing kept. Read into a
	// buffer of the whole segment, a restarted daemon's fresh heap took a
	// page fault for every 4 KiB of it (up to 64 MiB) before the first
	// entry it needed: an 8 MB segment took 61 ms to open in a new process
	// and 12 ms in one that had opened it before.
	win := make([]byte, 0, walkWindow)
	var winAt int64
	for want < from {
		if off == size {
			return nil, offs, off, want, nil
		}
		if size-off < 8 {
			return nil, offs, off, want, fmt.Errorf("torn record header (%d bytes)", size-off)
		}
		if off < winAt || off+8 > winAt+int64(len(win)) {
			n, err := f.ReadAt(win[:min(int64(cap(win)), size-off)], off)
			if n < 8 {
				return nil, offs, off, want, fmt.Errorf("read header: %w", err)
			}
			win, winAt = win[:n], off
		}
		h := win[off-winAt:]
		ln := binary.BigEndian.Uint32(h)
		if ln == 0 && binary.BigEndian.Uint32(h[4:]) == 0 {
			return nil, offs, off, want, nil // a preallocated segment's zeros
		}
		if ln > maxRecord {
			return nil, offs, off, want, fmt.Errorf("record length %d", ln)
		}
		if size-off-8 < int64(ln) {
			return nil, offs, off, want, errors.New("torn record body")
		}
		offs = append(offs, off)
		off += 8 + int64(ln)
		want++
	}
	// From from on, one buffer of the rest of the segment (at most
	// segmentBytes plus a record): the entries alias it, so a restart
	// allocates and copies the log once here (the core copies it again
	// into its own memory), instead of a buffer per record and a copy of
	// each history and payload. It is read as the records need it, so that
	// the zeros of a preallocated segment's end are neither read nor
	// touched.
	at := off // buf[i] is the segment's byte at+i
	buf := make([]byte, size-at)
	have := 0
	fill := func(n int) error { // buf[:n] read (n <= len(buf))
		for have < n {
			k := min(len(buf)-have, max(n-have, 4<<20))
			m, err := f.ReadAt(buf[have:have+k], at+int64(have))
			have += m
			if err != nil && have < n {
				return err
			}
		}
		return nil
	}
	var es []exo.Entry
	if walked := want - s.first; walked > 0 && off > 0 {
		// As many records again as the bytes left hold at the walked
		// records' mean size: grown from nothing, the entries' and
		// offsets' slices were a fifth of a restart's log read.
		est := int((size-at)/(off/int64(walked))) + 16
		es = make([]exo.Entry, 0, est)
		offs = slices.Grow(offs, est)
	}
	for {
		rest := buf[off-at:]
		if len(rest) == 0 {
			return es, offs, off, want, nil
		}
		if len(rest) < 8 {
			return es, offs, off, want, fmt.Errorf("torn record header (%d bytes)", len(rest))
		}
		if err := fill(int(off-at) + 8); err != nil {
			return es, offs, off, want, err
		}
		ln := binary.BigEndian.Uint32(rest)
		if ln == 0 && binary.BigEndian.Uint32(rest[4:]) == 0 {
			return es, offs, off, want, nil // a preallocated segment's zeros
		}
		if ln > maxRecord {
			return es, offs, off, want, fmt.Errorf("record length %d", ln)
		}
		if uint64(len(rest)-8) < uint64(ln) {
			return es, offs, off, want, errors.New("torn record body")
		}
		if err := fill(int(off-at) + 8 + int(ln)); err != nil {
			return es, offs, off, want, err
		}
		body := rest[8 : 8+ln : 8+ln]
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(rest[4:]) {
			return es, offs, off, want, errors.New("checksum mismatch")
		}
		e, err := decodeEntry(body)
		if err != nil {
			return es, offs, off, want, err
		}
		if e.Seq != want {
			return es, offs, off, want, fmt.Errorf("record seq %d, want %d", e.Seq, want)
		}
		es = append(es, e)
		offs = append(offs, off)
		off += 8 + int64(ln)
		want++
	}
}

// AgreedStep is how far the agreement pointer may run ahead of the one
// the meta file on disk holds before SetMeta has the next Commit write it
// (a new agreement pointer alone was never written: a restarted host
// started from the one of its last epoch change or roster event, and its
// catch-up to a later epoch fetched again everything from there, 4-7 MB
// for a lab host 1,200 entries behind). Any agreement pointer persisted is
// a true one, however old; a newer one only saves a restart refetching.
const AgreedStep = 1024

// walkWindow is what readSegment reads at once of the records it walks
// without decoding (those below the core's log).
const walkWindow = 1 << 20

func appendEntry(b []byte, e *exo.Entry) []byte {
	b, _ = e.AppendBinary(b) // histories are h ids, far below 256
	return b
}

var errRecord = errors.New("malformed record")

// decodeEntry decodes one record's body (exactly one entry); its history
// and payload alias b.
func decodeEntry(b []byte) (exo.Entry, error) {
	e, rest, err := exo.DecodeEntry(b)
	if err != nil || len(rest) != 0 {
		return exo.Entry{}, errRecord
	}
	return e, nil
}

// Truncate cuts the log back to length seq (entries seq.. are removed).
func (l *Log) Truncate(seq uint64) error {
	if seq >= l.end {
		return nil
	}
	l.unsynced = true
	for len(l.segs) > 0 && l.segs[len(l.segs)-1].first > seq {
		last := l.segs[len(l.segs)-1]
		if l.f != nil {
			l.f.Close()
			l.f = nil
		}
		if err := os.Remove(last.path); err != nil {
			return fmt.Errorf("wal: truncate: %w", err)
		}
		l.segs = l.segs[:len(l.segs)-1]
		l.offs = nil
		if len(l.segs) > 0 {
			// Reload the offsets of the new last segment.
			_, offs, good, _, err := readSegment(l.segs[len(l.segs)-1], math.MaxUint64) // the offsets only
			if err != nil {
				return fmt.Errorf("wal: truncate: %w", err)
			}
			l.offs, l.size = offs, good
			f, err := l.openLast(l.segs[len(l.segs)-1].path)
			if err != nil {
				return err
			}
			l.f = f
		}
	}
	if len(l.segs) == 0 {
		l.end = seq
		l.trimRetained()
		return nil
	}
	first := l.segs[len(l.segs)-1].first
	k := seq - first
	if k < uint64(len(l.offs)) {
		off := l.offs[k]
		if err := l.f.Truncate(off); err != nil {
			return fmt.Errorf("wal: truncate: %w", err)
		}
		l.offs = l.offs[:k]
		l.size, l.fsize = off, off
	}
	l.end = seq
	return nil
}

// Reset removes every segment: the log starts anew at the seq of the next
// Append (a state transfer that jumps past this host's log, where the
// entries between are not this host's to keep). The meta is kept.
func (l *Log) Reset() error {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	for _, sg := range l.segs {
		if err := os.Remove(sg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("wal: reset: %w", err)
		}
	}
	l.segs, l.offs, l.size, l.end = nil, nil, 0, 0
	l.trimRetained()
	return syncDir(l.dir)
}

// Append writes entries at the end of the log (their seqs must follow).
func (l *Log) Append(es []exo.Entry) error {
	// The records go out in writes of about 1 MiB, not one per entry: a
	// catch-up appends thousands of entries in one batch.
	l.buf = l.buf[:0]
	l.unsynced = l.unsynced || len(es) > 0
	flush := func() error {
		if len(l.buf) == 0 {
			return nil
		}
		_, err := l.f.WriteAt(l.buf, l.size-int64(len(l.buf)))
		l.buf = l.buf[:0]
		l.fsize = max(l.fsize, l.size)
		if err != nil {
			return fmt.Errorf("wal: append: %w", err)
		}
		return nil
	}
	for i := range es {
		e := &es[i]
		if len(l.segs) > 0 && e.Seq != l.end {
			if err := flush(); err != nil {
				return err
			}
			return fmt.Errorf("wal: append seq %d at end %d", e.Seq, l.end)
		}
		if l.f == nil || l.size >= l.segMax {
			if err := flush(); err != nil {
				return err
			}
			if err := l.roll(e.Seq); err != nil {
				return err
			}
		}
		at := len(l.buf)
		l.buf = append(l.buf, 0, 0, 0, 0, 0, 0, 0, 0)
		l.buf = appendEntry(l.buf, e)
		rec := l.buf[at:]
		binary.BigEndian.PutUint32(rec, uint32(len(rec)-8))
		binary.BigEndian.PutUint32(rec[4:], crc32.Checksum(rec[8:], castagnoli))
		l.offs = append(l.offs, l.size)
		l.size += int64(len(rec))
		l.end = e.Seq + 1
		if len(l.buf) >= 1<<20 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// roll ends the last segment (cut to its records, synced) and begins the
// segment of first: on the prepared file when it is ready, else empty.
func (l *Log) roll(first uint64) error {
	if l.f != nil {
		if l.fsize > l.size {
			if err := l.f.Truncate(l.size); err != nil {
				return fmt.Errorf("wal: %w", err)
			}
		}
		if err := datasync(l.f); err != nil {
			return fmt.Errorf("wal: fsync: %w", err)
		}
		l.syncs++
		l.f.Close()
		l.f = nil
		l.segs[len(l.segs)-1].size = l.size
	}
	path := segmentPath(l.dir, first)
	var f *os.File
	fsize := int64(0)
	ok, err := l.prep.take(path)
	if err != nil {
		return err
	}
	if ok {
		if f, err = os.OpenFile(path, os.O_WRONLY, 0o640); err != nil {
			return fmt.Errorf("wal: %w", err)
		}
		fsize = l.segMax
		l.prepared++
		l.prep.start() // the one after it
	} else {
		if f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640); err != nil {
			return fmt.Errorf("wal: %w", err)
		}
		l.grown++
	}
	l.f, l.size, l.fsize, l.offs = f, 0, fsize, nil
	l.segs = append(l.segs, segment{first: first, path: path})
	return syncDir(l.dir)
}

// openLast opens the segment at path to write at the end of its records
// (Log.size): a file longer than them (a preallocated segment's zeros, or
// what a crash left past the last synced record) is cut to them first, so
// that the appends never run into bytes they did not write.
func (l *Log) openLast(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0o640)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() > l.size {
		if err = f.Truncate(l.size); err == nil {
			err = datasync(f)
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: %s: %w", path, err)
	}
	l.fsize = l.size
	return f, nil
}

// Prepared returns how many segments the log began on a prepared file
// (Options.Preallocate) and how many on an empty one, since it was
// opened.
func (l *Log) Prepared() (prepared, grown uint64) { return l.prepared, l.grown }

// datasync is fdatasync(2): the file's data and what reading it back
// needs (its size), not its times.
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// SetMeta records the durable state; it is written at the next Commit when
// it changed (the agreement pointer alone is written lazily: it can be
// recomputed after a restart).
func (l *Log) SetMeta(m Meta) {
	old := l.meta
	m.Retained = old.Retained
	if old.Roster != nil && m.RosterAt > old.RosterAt && len(l.segs) > 0 && l.segs[0].first <= old.RosterAt {
		// The core's log base moved up over entries the segments still
		// hold: the old base may start the retained log.
		m.Retained = append(slices.Clone(old.Retained), Base{At: old.RosterAt, Roster: slices.Clone(old.Roster)})
		l.dirty = true
	}
	l.meta = m
	if m.Agreed >= l.disk.Agreed+AgreedStep {
		l.dirty = true
	}
	if m.Amnesiac != old.Amnesiac || m.Epoch != old.Epoch || m.Promised != old.Promised || !slices.Equal(m.Skipped, old.Skipped) ||
		!slices.Equal(m.Roster, old.Roster) || (m.Roster == nil) != (old.Roster == nil) || m.RosterAt != old.RosterAt ||
		m.KeySent != old.KeySent || m.FastArmed != old.FastArmed || m.FastEpoch != old.FastEpoch || m.Fenced != old.Fenced {
		l.meta.Roster = slices.Clone(m.Roster)
		l.dirty = true
	}
}

// Commit makes everything written so far durable under the policy: the
// appended entries (fsync for SyncBatch) and a changed meta (written to a
// temporary file, fsynced, renamed). Call it before sending anything that
// depends on it.
func (l *Log) Commit() error {
	if l.f != nil && l.sync != SyncNone && l.unsynced {
		if err := datasync(l.f); err != nil {
			return fmt.Errorf("wal: fsync: %w", err)
		}
		l.syncs++
	}
	l.unsynced = false
	if !l.dirty {
		return nil
	}
	b, err := json.Marshal(l.meta)
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.dir, metaFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	_, err = f.Write(b)
	if err == nil && l.sync != SyncNone {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(l.dir, metaFile))
	}
	if err == nil && l.sync != SyncNone {
		err = syncDir(l.dir)
	}
	if err != nil {
		return fmt.Errorf("wal: meta: %w", err)
	}
	l.dirty = false
	l.disk = l.meta
	return nil
}

// Pending reports whether a Commit has anything to make durable: records
// written or the log cut since the last one, or a changed meta.
func (l *Log) Pending() bool { return l.unsynced || l.dirty }

// Syncs returns how many times the log fsynced a segment (a Commit with
// records written since the last one, a segment rolled over).
func (l *Log) Syncs() uint64 { return l.syncs }

// MetaPending reports whether the meta changed since it was last written
// (SetMeta): a Commit must write it before anything that depends on it
// leaves.
func (l *Log) MetaPending() bool { return l.dirty }

// Compact removes whole segments that end below seq, and never an entry at
// or beyond the RosterAt of the meta on disk (the roster it records is the
// one at that seq: Commit the meta of the compacted core first).
func (l *Log) Compact(seq uint64) error {
	if l.disk.Roster != nil {
		seq = min(seq, l.disk.RosterAt)
	}
	for len(l.segs) > 1 && l.segs[1].first <= seq {
		if err := os.Remove(l.segs[0].path); err != nil {
			return fmt.Errorf("wal: compact: %w", err)
		}
		l.segs = l.segs[1:]
	}
	l.trimRetained()
	return nil
}

// Policy is a retention policy: how much of the agreed log the segments
// keep below the core's log (RosterAt). A zero field sets no bound; a
// zero Policy keeps nothing below it.
type Policy struct {
	Entries uint64        // at most this many entries behind the agreement pointer
	Bytes   int64         // at most this many bytes of segments in all
	Age     time.Duration // no segment whose newest record is older than this
}

// Zero reports whether p sets no bound.
func (p Policy) Zero() bool { return p.Entries == 0 && p.Bytes == 0 && p.Age == 0 }

// Floor returns the position below which p removes the log, given the
// agreement pointer and the time now: never above agreed. With a zero
// policy it is RosterAt (the log is kept with the core's, no further). A
// floor above RosterAt asks the caller to compact the core's log there
// first (the segments hold at least the core's log).
func (l *Log) Floor(p Policy, agreed uint64, now time.Time) (uint64, error) {
	if p.Zero() {
		return min(l.meta.RosterAt, agreed), nil
	}
	var floor uint64
	if p.Entries > 0 && agreed > p.Entries {
		floor = agreed - p.Entries
	}
	if p.Bytes > 0 {
		total := l.size
		for i := len(l.segs) - 2; i >= 0; i-- {
			total += l.segs[i].size
			if total > p.Bytes {
				floor = max(floor, l.segs[i+1].first)
				break
			}
		}
	}
	if p.Age > 0 {
		for i := len(l.segs) - 2; i >= 0; i-- {
			fi, err := os.Stat(l.segs[i].path)
			if err != nil {
				return 0, fmt.Errorf("wal: retain: %w", err)
			}
			if now.Sub(fi.ModTime()) > p.Age {
				floor = max(floor, l.segs[i+1].first)
				break
			}
		}
	}
	return min(floor, agreed), nil
}

// Retain removes the log below floor (Floor's answer) as far as it can:
// the retained log must start at a base whose roster is known (a former
// RosterAt, Meta.Retained, or RosterAt itself), so it starts at the first
// such base at or past floor, and whole segments below it are removed. It
// returns the archive's new base (Archive).
func (l *Log) Retain(floor uint64) (uint64, error) {
	k := 0
	for k < len(l.meta.Retained) && l.meta.Retained[k].At < floor {
		k++
	}
	if k > 0 {
		l.meta.Retained = slices.Clone(l.meta.Retained[k:])
		l.dirty = true
		if err := l.Commit(); err != nil {
			return 0, err
		}
	}
	base, _ := l.Archive()
	if err := l.Compact(base); err != nil {
		return 0, err
	}
	return base, nil
}

// Archive returns where the retained log starts and the roster there: the
// oldest retained base, or RosterAt (no archive) without one.
func (l *Log) Archive() (uint64, []uint8) {
	if len(l.meta.Retained) > 0 && len(l.segs) > 0 && l.meta.Retained[0].At >= l.segs[0].first {
		r := l.meta.Retained[0]
		return r.At, slices.Clone(r.Roster)
	}
	return l.meta.RosterAt, slices.Clone(l.meta.Roster)
}

// Bases returns the positions the retained log may be read from with a
// known roster, newest first: RosterAt, then the retained bases the
// segments still hold. A reader that starts at one and follows the
// configuration entries knows the roster of every entry after it.
func (l *Log) Bases() []Base {
	out := []Base{{At: l.meta.RosterAt, Roster: slices.Clone(l.meta.Roster)}}
	for i := len(l.meta.Retained) - 1; i >= 0; i-- {
		if r := l.meta.Retained[i]; len(l.segs) > 0 && r.At >= l.segs[0].first && r.At < l.meta.RosterAt {
			out = append(out, Base{At: r.At, Roster: slices.Clone(r.Roster)})
		}
	}
	return out
}

// Size returns the bytes of the log's segments.
func (l *Log) Size() int64 {
	total := l.size
	for i := 0; i+1 < len(l.segs); i++ {
		total += l.segs[i].size
	}
	return total
}

// Close closes the log. A preparation of the next segment under way is
// cut short at its next sync (1 MiB at most), and its file removed.
func (l *Log) Close() error {
	err := l.prep.stop()
	l.prep = nil
	if l.f == nil {
		return err
	}
	if serr := datasync(l.f); err == nil {
		err = serr
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// PreparedFile is the name, in the log's directory, of the next segment's
// file while it is prepared (Options.Preallocate): disk space the log
// holds beyond its segments.
const PreparedFile = "next-segment.prep"

// preparer writes the next segment's file ahead: size bytes of zeros,
// fsynced, at path, on a goroutine of its own (writeZeros).
type preparer struct {
	path string
	size int64
	done chan error    // the preparation under way or finished; nil: none
	quit chan struct{} // closed by stop: a preparation under way ends early
}

// start begins a preparation if none is under way or ready.
func (p *preparer) start() {
	if p == nil || p.done != nil {
		return
	}
	done := make(chan error, 1)
	p.done = done
	if p.quit == nil {
		p.quit = make(chan struct{})
	}
	quit := p.quit
	go func() {
		done <- writeZeros(p.path, p.size, quit)
	}()
}

// take renames the prepared file to path if it is ready (false if not, or
// if its preparation failed: the caller begins an empty segment).
func (p *preparer) take(path string) (bool, error) {
	if p == nil || p.done == nil {
		return false, nil
	}
	select {
	case err := <-p.done:
		p.done = nil
		if err != nil {
			os.Remove(p.path)
			p.start() // try again for the next roll
			return false, nil
		}
	default:
		return false, nil
	}
	if err := os.Rename(p.path, path); err != nil {
		return false, fmt.Errorf("wal: %w", err)
	}
	return true, nil
}

// stop ends the preparation under way (at its next sync), waits for it
// and removes its file.
func (p *preparer) stop() error {
	if p == nil {
		return nil
	}
	if p.quit != nil {
		close(p.quit)
		p.quit = nil
	}
	if p.done != nil {
		<-p.done
		p.done = nil
	}
	if err := os.Remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}

// Zeros are written in prepWrite pieces, synced every prepSync bytes,
// with a prepPause after each sync, in the daemon's own I/O class: a
// daemon runs on one P, which a long write holds, and the five daemons of
// a lab rack roll their segments at about the same time onto one disk.
// The file system's journal commits the data of every file it allocated
// blocks to before the commit that any fsync waits for (ext4's ordered
// mode): a first version wrote 1 MiB pieces and synced once at the end,
// in the idle class, and every daemon's fsyncs waited behind zeros the
// disk served last (holds of the rack of at most 0.24-0.55 s in four
// runs, 0.09-0.16 s without; docs/recovery.md, session q).
const (
	prepWrite = 64 << 10
	prepSync  = 1 << 20
	prepPause = 2 * time.Millisecond
)

// errStopped ends a preparation that the log's Close cut short.
var errStopped = errors.New("wal: stopped")

// writeZeros writes a file of size zero bytes at path and fsyncs it, in
// pieces (prepWrite, prepSync, prepPause); errStopped once quit is
// closed.
func writeZeros(path string, size int64, quit <-chan struct{}) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	zeros := make([]byte, min(size, prepWrite))
	for off := int64(0); off < size && err == nil; off += int64(len(zeros)) {
		_, err = f.Write(zeros[:min(int64(len(zeros)), size-off)])
		if done := off + int64(len(zeros)); err == nil && done%prepSync == 0 && done < size {
			if err = datasync(f); err == nil {
				select {
				case <-quit:
					err = errStopped
				case <-time.After(prepPause):
				}
			}
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Reader reads ranges of the retained log from the segment files, apart
// from the Log that writes them and safe for concurrent use: a daemon
// answers fetches from below its in-memory log with it (the archive,
// exo.Node.SetArchive) outside its core's lock. A read costs what it
// returns: it reads the records asked for, from where the last read of
// the same segment ended (a transfer reads the log in order) or from the
// nearest of the positions it noted while skipping through that segment,
// and decodes only them. (It read and decoded a whole segment, 64 MiB by
// default, at the first read in it: the first answer of each member's
// turn in a state transfer took ten times the others', past the
// joiner's fetch timeout, and the same batch was then asked of another
// member, which read a whole segment too: 7 % of a 256 MB transfer was
// fetched twice on the lab rack; docs/recovery.md.)
type Reader struct {
	dir string
	// Class is the I/O class its reads run in (IONormal unless set
	// before the first Read): see IOClass.
	Class IOClass
	// YieldEvery, when set before the first Read, makes a long read go
	// in pieces of readSlice bytes and give its P away (package yield)
	// once it has worked that long since it last did: a daemon reads its
	// fetch answers on the one P its protocol loop runs on.
	YieldEvery time.Duration
	// YieldIf, if set with YieldEvery, says whether to yield at all
	// (yield.Slicer.Waiting): whether the protocol loop's frame waits.
	YieldIf func() bool
	mu      sync.Mutex
	slicer  yield.Slicer // (under mu)
	// what it knows of the segments it read last, the latest last
	// (readCursors at most: two transfers at once, in different
	// segments, each go on from their own last read)
	cursors []*segCursor
}

// segCursor is what a Reader knows of a segment: which file it was (seg,
// fi), where its recent reads ended (ends, the latest last: readEnds at
// most, so that two transfers reading in order in one segment each go on
// from their own last read), and a position every readMarkEvery records
// skipped or read (marks, in order).
type segCursor struct {
	seg   segment
	fi    os.FileInfo
	ends  []readMark
	marks []readMark
}

// readEnds is how many read ends a segCursor keeps.
const readEnds = 4

// readCursors is how many segments a Reader keeps cursors for.
const readCursors = 4

// readMark is a record's position in a segment: seq starts at off.
type readMark struct {
	seq uint64
	off int64
}

// readMarkEvery is how many records apart a Reader notes positions.
const readMarkEvery = 512

// NewReader returns a Reader of the log in dir.
func NewReader(dir string) *Reader { return &Reader{dir: dir} }

// ErrNotRetained is returned by Reader.Read for a position the segments no
// longer hold (retention removed it) or do not hold yet.
var ErrNotRetained = errors.New("wal: position not retained")

// Read returns the entries from lo on, below hi, as many as lim allows
// (one segment at most: a shorter answer is still an answer). It fails
// with ErrNotRetained when no segment holds lo. The entries alias a
// buffer of their own (the caller may keep them).
func (r *Reader) Read(lo, hi uint64, lim exo.FetchLimit) ([]exo.Entry, error) {
	return r.ReadInto(nil, lo, hi, lim)
}

// ReadInto is Read with the records read into the caller's buffer *buf
// (nil buf: Read's own buffers), grown first to what lim may take if it
// is smaller, and *buf set to it: the entries alias it until the caller
// reuses it. A sender that encodes each answer before it reads the next
// reads them all into one buffer, where new buffers for each cost the
// serving host their zeroing, page faults and collections. A record that
// does not fit goes into a buffer of its own, as with Read.
func (r *Reader) ReadInto(buf *[]byte, lo, hi uint64, lim exo.FetchLimit) ([]exo.Entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if lo >= hi {
		return nil, nil
	}
	if buf != nil {
		if want := readChunk(lim); int64(cap(*buf)) < want {
			*buf = make([]byte, 0, want)
		}
	}
	var es []exo.Entry
	var err error
	inClass(r.Class, func() { es, err = r.read(buf, lo, hi, lim) })
	return es, err
}

// readChunk is what a read under lim takes from the file at once: the
// whole answer (records and their headers) when it is bounded by bytes,
// at least 1 MiB.
func readChunk(lim exo.FetchLimit) int64 {
	chunk := int64(1 << 20)
	if lim.Bytes > 0 {
		chunk = max(chunk, int64(lim.Bytes)+int64(lim.Bytes)/8+64<<10)
	}
	return chunk
}

// read is Read's work, on the thread of the Reader's class.
func (r *Reader) read(into *[]byte, lo, hi uint64, lim exo.FetchLimit) ([]exo.Entry, error) {
	seg, err := r.segmentOf(lo)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(seg.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: seq %d (its segment was removed)", ErrNotRetained, lo)
	}
	if err != nil {
		return nil, fmt.Errorf("wal: read: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wal: read: %w", err)
	}
	c := r.cursor(seg, fi)
	seq, off := c.from(lo)
	off, err = c.skip(f, fi.Size(), seq, off, lo)
	if err != nil {
		return nil, err
	}
	var slicer *yield.Slicer
	if r.YieldEvery > 0 {
		r.slicer.Every, r.slicer.Waiting = r.YieldEvery, r.YieldIf
		slicer = &r.slicer
	}
	return c.collect(f, fi.Size(), lo, hi, off, lim, slicer, into)
}

// readSlice is the piece a Reader with YieldEvery reads at once.
const readSlice = 256 << 10

// cursor returns the Reader's cursor of the segment seg, the file fi (a
// new one if it has none, or had one of another file of that name),
// latest in its list.
func (r *Reader) cursor(seg segment, fi os.FileInfo) *segCursor {
	for i, c := range r.cursors {
		if c.seg == seg {
			r.cursors = slices.Delete(r.cursors, i, i+1)
			if os.SameFile(c.fi, fi) {
				r.cursors = append(r.cursors, c)
				return c
			}
			break
		}
	}
	if len(r.cursors) == readCursors {
		r.cursors = slices.Delete(r.cursors, 0, 1)
	}
	c := &segCursor{seg: seg, fi: fi}
	r.cursors = append(r.cursors, c)
	return c
}

// segmentOf returns the segment that holds lo, if any: the one with the
// highest first position at or below it.
func (r *Reader) segmentOf(lo uint64) (segment, error) {
	segs, err := listSegments(r.dir)
	if err != nil {
		return segment{}, fmt.Errorf("wal: read: %w", err)
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i].first > lo })
	if i == 0 {
		return segment{}, fmt.Errorf("%w: seq %d (the oldest segment starts later)", ErrNotRetained, lo)
	}
	return segs[i-1], nil
}

// from returns the known record position nearest below or at lo in the
// segment: the end of the last read, a noted position, or the
// segment's start.
func (c *segCursor) from(lo uint64) (uint64, int64) {
	seq, off := c.seg.first, int64(0)
	for _, e := range c.ends {
		if e.seq <= lo && e.seq > seq {
			seq, off = e.seq, e.off
		}
	}
	i := sort.Search(len(c.marks), func(i int) bool { return c.marks[i].seq > lo })
	if i > 0 && c.marks[i-1].seq > seq {
		seq, off = c.marks[i-1].seq, c.marks[i-1].off
	}
	return seq, off
}

// ended records that a read from lo ended at end: it replaces the end of
// the read it went on from, if any.
func (c *segCursor) ended(lo uint64, end readMark) {
	c.ends = slices.DeleteFunc(c.ends, func(e readMark) bool { return e.seq == lo || e.seq == end.seq })
	if len(c.ends) == readEnds {
		c.ends = slices.Delete(c.ends, 0, 1)
	}
	c.ends = append(c.ends, end)
}

// note records that seq starts at off (every readMarkEvery records).
func (c *segCursor) note(seq uint64, off int64) {
	if (seq-c.seg.first)%readMarkEvery == 0 && (len(c.marks) == 0 || c.marks[len(c.marks)-1].seq < seq) {
		c.marks = append(c.marks, readMark{seq, off})
	}
}

// skip walks the record headers from seq at off to lo's record and
// returns where it starts; the bodies are neither read whole nor checked
// (collect checks those it returns).
func (c *segCursor) skip(f *os.File, size int64, seq uint64, off int64, lo uint64) (int64, error) {
	var buf []byte
	bufOff := int64(0)
	for seq < lo {
		if off+8 > size {
			return 0, fmt.Errorf("%w: seq %d (segment %s ends at %d)", ErrNotRetained, lo, filepath.Base(c.seg.path), seq)
		}
		if off < bufOff || off+8 > bufOff+int64(len(buf)) {
			if buf == nil {
				buf = make([]byte, 1<<20)
			}
			n, err := f.ReadAt(buf[:cap(buf)], off)
			if n < 8 && err != nil {
				return 0, fmt.Errorf("wal: read %s: %w", c.seg.path, err)
			}
			buf, bufOff = buf[:n], off
		}
		ln := binary.BigEndian.Uint32(buf[off-bufOff:])
		if ln == 0 && off+8 <= bufOff+int64(len(buf)) && binary.BigEndian.Uint32(buf[off-bufOff+4:]) == 0 {
			// A preallocated segment's zeros: its records end here.
			return 0, fmt.Errorf("%w: seq %d (segment %s ends at %d)", ErrNotRetained, lo, filepath.Base(c.seg.path), seq)
		}
		if ln > maxRecord {
			return 0, fmt.Errorf("wal: read %s: record length %d at offset %d", c.seg.path, ln, off)
		}
		off += 8 + int64(ln)
		seq++
		c.note(seq, off)
	}
	return off, nil
}

// collect reads and checks the records from lo's (at off) on, below hi,
// as many as lim allows, up to the segment's end (a torn record at the end
// of the segment being written ends the answer there). With a slicer it
// reads readSlice bytes at a time, and lets the slicer yield between.
// With into (ReadInto) it reads on into *into, contiguously, while it has
// room.
func (c *segCursor) collect(f *os.File, size int64, lo, hi uint64, off int64, lim exo.FetchLimit, slicer *yield.Slicer, into *[]byte) ([]exo.Entry, error) {
	var es []exo.Entry
	chunk := readChunk(lim)
	if slicer != nil {
		chunk = readSlice
	}
	want, total, limited := lo, 0, false
	var buf []byte
	caller := into != nil // buf is the caller's buffer
	if caller {
		buf = (*into)[:0]
	}
	bufOff := off
	whole := func() bool { // the record at off is whole in buf
		end := bufOff + int64(len(buf))
		return off+8 <= end && off+8+int64(binary.BigEndian.Uint32(buf[off-bufOff:])) <= end
	}
	for want < hi && off < size {
		if !whole() {
			// Read on: into the caller's buffer after what it holds
			// while it has room, else from the record into a new buffer
			// (the entries returned alias the old one), a chunk or the
			// record whole when it is longer.
			if slicer != nil && len(buf) > 0 {
				slicer.Maybe()
			}
			if end := bufOff + int64(len(buf)); caller && len(buf) < cap(buf) && end < size {
				n := min(int64(cap(buf)-len(buf)), chunk, size-end)
				got, _ := f.ReadAt(buf[len(buf):len(buf)+int(n)], end)
				buf = buf[:len(buf)+got]
				if got > 0 {
					continue
				}
			}
			read := func(n int64) {
				buf, bufOff, caller = make([]byte, n), off, false
				got, _ := f.ReadAt(buf, off)
				buf = buf[:got]
			}
			read(min(chunk, size-off))
			if len(buf) >= 8 && !whole() {
				if need := 8 + int64(binary.BigEndian.Uint32(buf)); need <= maxRecord+8 && off+need <= size {
					read(need)
				}
			}
			if len(buf) < 8 {
				break // a torn tail: the segment being written
			}
		}
		rest := buf[off-bufOff:]
		ln := binary.BigEndian.Uint32(rest)
		if ln == 0 && binary.BigEndian.Uint32(rest[4:]) == 0 {
			break // a preallocated segment's zeros: its written end
		}
		if ln > maxRecord {
			return c.tail(es, lo, fmt.Errorf("record length %d at offset %d", ln, off))
		}
		if !whole() {
			break // a torn tail: the segment being written
		}
		body := rest[8 : 8+ln : 8+ln]
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(rest[4:]) {
			return c.tail(es, lo, fmt.Errorf("checksum mismatch at offset %d", off))
		}
		e, err := decodeEntry(body)
		if err != nil {
			return c.tail(es, lo, err)
		}
		if e.Seq != want {
			return c.tail(es, lo, fmt.Errorf("record seq %d at offset %d, want %d", e.Seq, off, want))
		}
		size := e.BinarySize()
		if !lim.More(len(es), total, size) {
			limited = true // as many as lim allows (none: an empty answer)
			break
		}
		es = append(es, e)
		total += size
		off += 8 + int64(ln)
		want++
		c.note(want, off)
	}
	if len(es) > 0 {
		c.ended(lo, readMark{want, off})
	}
	if len(es) == 0 && !limited {
		return nil, fmt.Errorf("%w: seq %d (segment %s ends before it)", ErrNotRetained, lo, filepath.Base(c.seg.path))
	}
	return es, nil
}

// tail ends a read at damage: the entries before it are an answer; with
// none, the damage is the error.
func (c *segCursor) tail(es []exo.Entry, lo uint64, err error) ([]exo.Entry, error) {
	if len(es) > 0 {
		return es, nil
	}
	return nil, fmt.Errorf("wal: read %s at seq %d: %w", c.seg.path, lo, err)
}
