package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/exo"
)

// BenchmarkDeliverEntry delivers entries of 11 messages of 64 bytes (the
// chaos runs' load) into the subscriber history, without subscribers: what a
// restart does for every agreed entry of its durable log, and a catch-up for
// every entry it fetched. Reported per entry.
//
//	go test ./daemon -run '^$' -bench DeliverEntry
func BenchmarkDeliverEntry(b *testing.B) {
	for _, keep := range []int{1 << 18, 1 << 22} { // the default; the lab checkers'
		b.Run(fmt.Sprintf("keep%d", keep), func(b *testing.B) {
			cfg := Config{ID: 0, MaxMessage: 1 << 20, KeepEntries: keep}
			d := &Daemon{cfg: &cfg, metrics: newMetrics(),
				subs: map[*subscriber]struct{}{}, waiters: map[uint64]func(client.Ack){}, dec: newDecoder(nil, 5, cfg.MaxMessage)}
			var payload []byte
			const msgs = 11
			for i := 0; i < msgs; i++ {
				msg := make([]byte, 64)
				msg[0] = byte(i)
				var err error
				if payload, err = exo.AppendRecord(payload, split(uint64(i+1), msg, 1400)[0]); err != nil {
					b.Fatal(err)
				}
			}
			e := exo.Entry{Epoch: 1, Sender: 1, History: []uint8{3, 4}, Count: msgs, Payload: payload}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				e.Seq = uint64(i)
				d.deliverEntry(&e)
			}
			if d.delivCnt != uint64(b.N*msgs) {
				b.Fatalf("delivered %d messages, want %d", d.delivCnt, b.N*msgs)
			}
		})
	}
}

// flatHistory returns the subscriber history as one list of messages (d.mu
// held).
func (d *Daemon) flatHistory() []client.Message {
	var out []client.Message
	for _, ms := range d.history {
		out = append(out, ms...)
	}
	return out
}

// TestReplayKeepsNewestHistory: a restarted daemon's first delivery builds
// the history of the newest keep_entries messages only; what it holds is
// what a full delivery would hold at its end (positions, senders,
// payloads), a message whose fragments straddle the cut included, and the
// messages before it count as delivered and compacted.
func TestReplayKeepsNewestHistory(t *testing.T) {
	const keep, entries = 1024, 300
	newD := func() *Daemon {
		cfg := Config{ID: 0, MaxMessage: 1 << 20, KeepEntries: keep}
		return &Daemon{cfg: &cfg, metrics: newMetrics(), log: slog.New(slog.DiscardHandler),
			subs: map[*subscriber]struct{}{}, waiters: map[uint64]func(client.Ack){}, dec: newDecoder(nil, 5, cfg.MaxMessage)}
	}
	var es []exo.Entry
	big := make([]byte, 3000) // three fragments of 1,000-odd bytes, in three entries
	for i := range big {
		big[i] = byte(i)
	}
	frags := split(999, big, 1100)
	if len(frags) != 3 {
		t.Fatalf("%d fragments", len(frags))
	}
	for i := 0; i < entries; i++ {
		var rs records
		add := func(rec []byte) { rs.add(t, rec) }
		// One sender's entries 204, 208 and 212 carry the fragments of a
		// message, around the cut (the newest 1,024 messages begin in entry
		// 207): its records are consecutive in that sender's stream.
		switch i {
		case 212:
			add(frags[2])
		case 208:
			add(frags[1])
		}
		for k := 0; k < 11 && i != 208; k++ {
			add(split(uint64(i*100+k), []byte(fmt.Sprintf("m%d.%d", i, k)), 1400)[0])
		}
		if i == 204 {
			add(frags[0])
		}
		es = append(es, exo.Entry{Seq: uint64(i), Epoch: 1, Sender: uint8(1 + i%4), History: []uint8{0, 0}, Count: rs.count, Payload: rs.payload})
	}
	full, replay := newD(), newD()
	full.deliverAgreed(es)
	replay.replaying = true
	replay.deliverAgreed(es)
	const want = (entries-1)*11 + 1
	if replay.delivCnt != full.delivCnt || full.delivCnt != want {
		t.Fatalf("delivered %d (replay) and %d (full), want %d", replay.delivCnt, full.delivCnt, want)
	}
	got, all := replay.flatHistory(), full.flatHistory()
	if len(got) < keep || len(got) > len(all) {
		t.Fatalf("the replay's history holds %d messages, want %d..%d", len(got), keep, len(all))
	}
	tail := all[len(all)-len(got):]
	for i := range got {
		if got[i].Position != tail[i].Position || got[i].Sender != tail[i].Sender || !bytes.Equal(got[i].Payload, tail[i].Payload) {
			t.Fatalf("message %d of the history: %+v, want %+v", i, got[i], tail[i])
		}
	}
	if !slices.ContainsFunc(got, func(m client.Message) bool { return bytes.Equal(m.Payload, big) }) {
		t.Fatal("the message whose fragments straddle the cut is not in the history")
	}
	if replay.histBase != want-len(got) {
		t.Fatalf("histBase %d, want %d", replay.histBase, want-len(got))
	}
}

// BenchmarkReplay delivers a restarted daemon's 100,000 agreed entries (11
// messages of 64 bytes each) with the default keep_entries: as a restart
// does (the newest keep_entries messages into the history), and as every
// later delivery does (all of them, the history trimmed as it goes).
//
//	go test ./daemon -run '^$' -bench Replay
func BenchmarkReplay(b *testing.B) {
	const entries, msgs = 100_000, 11
	var payload []byte
	for i := 0; i < msgs; i++ {
		payload, _ = exo.AppendRecord(payload, split(uint64(i+1), make([]byte, 64), 1400)[0])
	}
	es := make([]exo.Entry, entries)
	for i := range es {
		es[i] = exo.Entry{Seq: uint64(i), Epoch: 1, Sender: 1, History: []uint8{3, 4}, Count: msgs, Payload: payload}
	}
	for _, replaying := range []bool{true, false} {
		b.Run(fmt.Sprintf("replaying=%v", replaying), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cfg := Config{ID: 0, MaxMessage: 1 << 20, KeepEntries: 1 << 18}
				d := &Daemon{cfg: &cfg, metrics: newMetrics(), replaying: replaying,
					subs: map[*subscriber]struct{}{}, waiters: map[uint64]func(client.Ack){}, dec: newDecoder(nil, 5, cfg.MaxMessage)}
				d.deliverAgreed(es)
			}
		})
	}
}

// TestDeliverChunks: delivered messages share chunks of memory
// (deliverEntry); every payload and message list stays what it was while
// later entries fill the chunks and open new ones, a message larger than
// a chunk (reassembled from fragments in several entries) included, and a
// subscriber's queue holds the same messages as the history.
func TestDeliverChunks(t *testing.T) {
	cfg := Config{ID: 0, MaxMessage: 1 << 20, KeepEntries: 1 << 20}
	d := &Daemon{cfg: &cfg, metrics: newMetrics(), log: slog.New(slog.DiscardHandler),
		subs: map[*subscriber]struct{}{}, waiters: map[uint64]func(client.Ack){}, dec: newDecoder(nil, 5, cfg.MaxMessage)}
	sub := &subscriber{ch: make(chan client.Message, 1<<16)}
	d.subs[sub] = struct{}{}
	big := make([]byte, 3*payChunk/2)
	for i := range big {
		big[i] = byte(i * 7)
	}
	frags := split(1<<40, big, 1400)
	var want [][]byte
	const entries = 3000
	for i, f := 0, 0; i < entries; i++ {
		var rs records
		add := func(rec []byte) { rs.add(t, rec) }
		sender := uint8(1)
		if i%2 == 0 && i > 100 && f < len(frags) {
			// The big message's fragments, one every other entry, each
			// alone in an entry of another sender (a sender's fragments
			// are consecutive in its stream).
			sender = 2
			add(frags[f])
			if f++; f == len(frags) {
				want = append(want, big)
			}
		} else {
			for k := 0; k < 1+i%13; k++ {
				msg := bytes.Repeat([]byte{byte(i), byte(k)}, 1+(i*31+k*17)%500)
				add(split(uint64(i*100+k), msg, 1400)[0])
				want = append(want, msg)
			}
		}
		d.deliverEntry(&exo.Entry{Seq: uint64(i), Epoch: 1, Sender: sender, History: []uint8{0, 0}, Count: rs.count, Payload: rs.payload})
	}
	got := d.flatHistory()
	if len(got) != len(want) {
		t.Fatalf("%d messages in the history, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Payload, want[i]) {
			t.Fatalf("message %d (seq %d): %d bytes, not what was delivered (%d bytes)", i, got[i].Seq, len(got[i].Payload), len(want[i]))
		}
		q := <-sub.ch
		if q.Position != got[i].Position || !bytes.Equal(q.Payload, want[i]) {
			t.Fatalf("message %d in the subscriber's queue: %+v, want %+v", i, q.Position, got[i].Position)
		}
	}
}

// records builds an entry's payload of records, and counts them.
type records struct {
	payload []byte
	count   uint16
}

func (r *records) add(t *testing.T, rec []byte) {
	t.Helper()
	var err error
	if r.payload, err = exo.AppendRecord(r.payload, rec); err != nil {
		t.Fatal(err)
	}
	r.count++
}

// TestPauseGCNested: daemons that read their logs side by side in one
// process turn the collector off once and back on once, to the setting it
// had, when the last of them is done (restored by the first, it ran again
// under the second; restored by each, the second put back "off").
func TestPauseGCNested(t *testing.T) {
	orig := debug.SetGCPercent(77)
	defer debug.SetGCPercent(orig)
	first, second := pauseGC(), pauseGC()
	first()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("GC percent %d while a second daemon reads its log, want -1 (off)", got)
	}
	second()
	if got := debug.SetGCPercent(77); got != 77 {
		t.Fatalf("GC percent %d once both are done, want 77 (as before)", got)
	}
}
