package daemon

import (
	"fmt"
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
			d := &Daemon{cfg: &cfg, reasm: map[uint8]*reassembler{}, metrics: newMetrics(),
				subs: map[*subscriber]struct{}{}, waiters: map[uint64]func(client.Ack){}, tracker: exo.NewRosterTracker(nil, 5)}
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
