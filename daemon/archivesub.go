package daemon

import (
	"bufio"
	"errors"
	"sync"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/wal"
)

// errArchiveGone: the retained log no longer holds what a subscription
// from it needs (retention removed it meanwhile, or it has no base below
// the subscription's start).
var errArchiveGone = errors.New("daemon: the retained log no longer holds it")

// bulkYieldEvery is how long the daemon's reads of its retained log (for
// fetch answers and subscribers below the history) run before they give
// the daemon's one P to the protocol loop (wal.Reader.YieldEvery, package
// yield): the token's hop through this host waits for that P.
const bulkYieldEvery = time.Millisecond

// archiveBatch is how many bytes of entries a subscription from the
// retained log reads at a time (one flush each).
const archiveBatch = 4 << 20

// archiveStream sends a subscription's messages that lie below the
// subscriber history, from the retained durable log (retain): it decodes
// the entries from a retained base on (where the roster is known) with a
// decoder of its own, as the delivery did, and sends the messages from
// seq from on. It reads with a wal.Reader of its own (which goes on from
// its last read), apart from the protocol loop and the fetch answers.
type archiveStream struct {
	d    *Daemon
	from uint64
	base *wal.Base
	rd   *wal.Reader
	dec  *decoder
	pos  uint64 // the next entry to decode
}

// newArchiveStream picks the retained base to decode from: the newest that
// lies far enough below from that no message completed at or after from
// began before it (a message's fragments span at most its sender's turns
// for max_message_bytes, interleaved with the others' entries), or the
// oldest one.
func (d *Daemon) newArchiveStream(from uint64) *archiveStream {
	a := &archiveStream{d: d, from: from, rd: wal.NewReader(d.cfg.DataDir)}
	a.rd.Class = d.cfg.ArchiveIO
	a.rd.YieldEvery, a.rd.YieldIf = bulkYieldEvery, FramesWaiting(d.conn)
	d.core.Lock()
	defer d.core.Unlock()
	span := uint64(d.cfg.MaxMessage/max(1, d.chunk)+2) * uint64(max(1, len(d.roster))+1)
	if d.disk == nil || d.closed {
		return a
	}
	for _, b := range d.disk.Bases() { // newest first
		if b.At > from {
			continue
		}
		b := b
		a.base = &b
		if b.At+span <= from {
			break
		}
	}
	return a
}

// send writes the messages of the entries [lo, hi) (lo at least from, hi
// the subscriber history's start) to w, a flush a batch. It fails with
// errArchiveGone when the retained log no longer holds them.
func (a *archiveStream) send(lo, hi uint64, emit func(client.Message) error, w *bufio.Writer, wmu *sync.Mutex) error {
	if a.base == nil || lo < a.from {
		return errArchiveGone
	}
	if a.dec == nil {
		a.dec = newDecoder(a.base.Roster, a.d.cfg.Hosts, a.d.cfg.MaxMessage)
		a.pos = a.base.At
	}
	for a.pos < hi {
		es, err := a.rd.Read(a.pos, hi, exo.FetchLimit{Entries: 1 << 16, Bytes: archiveBatch})
		if err != nil || len(es) == 0 || es[0].Seq != a.pos {
			if err != nil && !errors.Is(err, wal.ErrNotRetained) {
				a.d.log.Warn("subscription from the retained log: read failed", "seq", a.pos, "err", err)
			}
			return errArchiveGone
		}
		wmu.Lock()
		var werr error
		for k := range es {
			e := &es[k]
			a.dec.entry(e, func(uid uint8, _ uint64, idx uint16, data []byte) {
				if werr == nil && e.Seq >= lo {
					werr = emit(client.Message{Position: client.Position{Seq: e.Seq, Index: idx}, Sender: uid, Payload: data})
				}
			}, nil)
		}
		if werr == nil {
			werr = w.Flush()
		}
		wmu.Unlock()
		if werr != nil {
			return werr
		}
		a.pos = es[len(es)-1].Seq + 1
		a.d.metrics.archiveSubscribed.Add(float64(len(es)))
	}
	return nil
}
