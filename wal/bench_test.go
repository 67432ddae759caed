package wal

import (
	"testing"

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
