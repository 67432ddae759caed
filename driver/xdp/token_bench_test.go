//go:build linux

package xdp

// Token mode's cost per frame, measured by the kernel (BPF_PROG_TEST_RUN
// with repeat) on the benchmark variant, which undoes each recorded frame:
// the state under the lock, and the packet (its length and bytes) after
// the record, so that the same frame from pred is accepted and answered
// again and again. An upper bound: the undo is included.

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/exo-rack/exo/exo"
)

// tokBenchCases: the predecessor's frame answered by an empty pass, by a
// batch of one 64-byte record, and a frame that is recorded only (another
// sender); all n = 5.
func tokBenchCases() []struct {
	name   string
	e      exo.Engine
	queue  []exo.Batch
	frame  []byte
	action Action
} {
	b := tokBase()
	other := b
	other.Pred = 3
	return []struct {
		name   string
		e      exo.Engine
		queue  []exo.Batch
		frame  []byte
		action Action
	}{
		{"accept_send_pass", b, nil, seal(predFrame(b, 0, nil), tokKeys), ActionTX},
		{"accept_send_batch_64", b, []exo.Batch{batchOf(64)}, seal(predFrame(b, 0, nil), tokKeys), ActionTX},
		{"accept_record_only", other, nil, seal(predFrame(b, 0, nil), tokKeys), ActionDrop},
		{"accept_1400_send_pass", b, nil, seal(predFrame(b, 1, payloadOf(1400)), tokKeys), ActionTX},
	}
}

// TestTokenBenchVariant: the benchmark variant answers the same frame the
// same way every time and leaves the state as it was (but for the
// records it writes).
func TestTokenBenchVariant(t *testing.T) {
	h := newTokHarnessBench(t, true, LoadOptions{})
	for _, bc := range tokBenchCases() {
		h.set(bc.e, bc.queue, tokKeys)
		var first []byte
		for i := range 3 {
			act, out := h.run(testSrcMAC, bc.frame)
			if act != bc.action {
				t.Fatalf("%s run %d: %s, want %s", bc.name, i, act, bc.action)
			}
			if i == 0 {
				first = out
			} else if !bytes.Equal(out, first) {
				t.Fatalf("%s run %d: another frame", bc.name, i)
			}
			if got, _ := h.tok.Read(); got != bc.e {
				t.Fatalf("%s run %d: the state moved: %+v", bc.name, i, got.Tx)
			}
		}
		if n := len(h.records()); n != 3 {
			t.Fatalf("%s: %d records, want 3", bc.name, n)
		}
		// Repeat in the kernel: the packet is restored between runs.
		if _, act, err := h.p.Bench(EthernetFrame(testSrcMAC, bc.frame), 100); err != nil || act != bc.action {
			t.Fatalf("%s: bench: %s %v", bc.name, act, err)
		}
		if n := len(h.records()); n != 100 {
			t.Fatalf("%s: %d records after 100 repeats", bc.name, n)
		}
	}
}

// BenchmarkToken reports the kernel's time per frame of token mode
// (ns/frame), in chunks of repeats the ring holds, with the ring read
// between them (outside the timer).
func BenchmarkToken(b *testing.B) {
	for _, bc := range tokBenchCases() {
		b.Run(bc.name, func(b *testing.B) {
			h := newTokHarnessBench(b, true, LoadOptions{})
			h.set(bc.e, bc.queue, tokKeys)
			frame := EthernetFrame(testSrcMAC, bc.frame)
			if act, _ := h.run(testSrcMAC, bc.frame); act != bc.action {
				b.Fatalf("warm-up: %s", act)
			}
			h.records()
			b.ResetTimer()
			var total time.Duration
			// Chunks the ring holds with RingRoom to spare.
			chunk := (DefaultRingSize - 2*RingRoom) / ((ringHdrLen + RecordHeaderLen + len(bc.frame) + 7) &^ 7)
			for done := 0; done < b.N; {
				n := min(b.N-done, chunk)
				d, act, err := h.p.Bench(frame, n)
				if err != nil || act != bc.action {
					b.Fatalf("bench: %s %v", act, err)
				}
				total += d * time.Duration(n)
				done += n
				b.StopTimer()
				if got := len(h.records()); got != n {
					b.Fatalf("%d records for %d runs", got, n)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/frame")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkTokenStream runs in-order frames one per BPF_PROG_TEST_RUN
// call on the production program, each accepted and answered (n = 1:
// this host is its own predecessor, so every frame of sender 0 at the
// append pointer is the token and the answer is the next seq): the cost
// of a frame plus the syscall, to set against BenchmarkRunStream.
func BenchmarkTokenStream(b *testing.B) {
	h := newTokHarness(b, LoadOptions{})
	e := exo.Engine{Pointers: exo.NewPointers(1, 1, 1024)}
	e.Append = 10
	e.Tx = exo.Tx{On: true, Me: 0, Pred: 0, IdleRun: exo.NoIdleRun}
	h.set(e, nil, tokKeys)
	f := exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Seq: e.Append}
	in := EthernetFrame(testSrcMAC, seal(f, tokKeys))
	b.ResetTimer()
	for i := range b.N {
		// As BenchmarkRunStream: seal in place, one run, an output
		// buffer of the frame's size plus 256 bytes.
		binary.BigEndian.PutUint64(in[exo.EthHeaderLen+exo.OffSeq:], e.Append+2*uint64(i))
		if err := exo.Seal(in[exo.EthHeaderLen:], tokKey0); err != nil {
			b.Fatal(err)
		}
		opts := ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+256)}
		ret, err := h.p.objs.ExoXdp.Run(&opts)
		if err != nil || Action(ret) != ActionTX {
			b.Fatalf("frame %d: %s %v", i, Action(ret), err)
		}
		if i%20000 == 19999 {
			b.StopTimer()
			h.records()
			b.StartTimer()
		}
	}
}

// BenchmarkTokenControl: one control operation (exo_ctl through
// BPF_PROG_TEST_RUN) per op; and Push (a Reclaim, itself a READ, each
// time the queue is full).
func BenchmarkTokenControl(b *testing.B) {
	h := newTokHarness(b, LoadOptions{})
	e := tokBase()
	h.set(e, nil, tokKeys)
	b.Run("read", func(b *testing.B) {
		for range b.N {
			if _, err := h.tok.Read(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("arm", func(b *testing.B) {
		for range b.N {
			if ok, err := h.tok.Arm(e); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("push_reclaim_64", func(b *testing.B) {
		bt := batchOf(64)
		if _, err := h.tok.Halt(); err != nil {
			b.Fatal(err)
		}
		for range b.N {
			ok, err := h.tok.Push(bt)
			if err != nil {
				b.Fatal(err)
			}
			if !ok {
				if _, err := h.tok.Reclaim(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkTokenRecords: the consumer's cost per record (Records over a
// ring the benchmark variant filled, 100-byte received frames).
func BenchmarkTokenRecords(b *testing.B) {
	h := newTokHarnessBench(b, true, LoadOptions{})
	e := tokBase()
	e.Halted = true // HALTED records, nothing sent
	h.set(e, nil, tokKeys)
	frame := EthernetFrame(testSrcMAC, seal(predFrame(e, 1, payloadOf(32)), tokKeys))
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(b.N-done, 50000)
		b.StopTimer()
		if _, _, err := h.p.Bench(frame, n); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		got, err := h.tok.Records(func(r *Record) {
			if r.Reason != exo.ReasonHalted {
				b.Fatalf("record %s", r.Reason)
			}
		})
		if err != nil || got != n {
			b.Fatalf("%d records of %d: %v", got, n, err)
		}
		if err := h.tok.Release(); err != nil {
			b.Fatal(err)
		}
		done += n
	}
}
