//go:build linux

package xdp

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/exo-rack/exo/exo"
)

// TestTokenPinnedTakeover: with the maps pinned (LoadOptions.PinDir), a
// program loaded again after the first one is gone (a killed daemon)
// takes the state, the queue and the ring over: the records read but not
// released, and those not read, come again, in order, and the batches the
// program took are still in their slots (Taken); after Unpin, a new load
// starts afresh.
func TestTokenPinnedTakeover(t *testing.T) {
	dir := t.TempDir()
	mounted, err := MountBPF(filepath.Join(dir, "bpf"))
	if err != nil {
		t.Skipf("pinning test skipped: the kernel refused a bpffs: %v", err)
	}
	if mounted {
		t.Cleanup(func() { unmount(t, filepath.Join(dir, "bpf")) })
	}
	pins := filepath.Join(dir, "bpf", "host")
	h := newTokHarness(t, LoadOptions{PinDir: pins, RingSize: 1 << 20})
	if h.p.Pinned() {
		t.Fatal("a fresh pin directory reported as taken over")
	}
	e := tokBase()
	q := []exo.Batch{batchOf(5), batchOf(7, 9), batchOf(11)}
	h.set(e, q, tokKeys)
	// Three turns: host 1's frame, then the frames of hosts 3, 4, 0, 1
	// answered in a 5-host rotation; each of this host's frames takes a
	// batch.
	var sent [][]byte
	for turn := range 3 {
		st, err := h.tok.Read()
		if err != nil {
			t.Fatal(err)
		}
		act, out := h.run(testSrcMAC, seal(predFrame(st, 0, nil), tokKeys))
		if act != ActionTX {
			t.Fatalf("turn %d: %s", turn, act)
		}
		sent = append(sent, out)
		st, _ = h.tok.Read()
		for _, s := range []uint8{3, 4, 0} {
			f := predFrame(st, 0, nil)
			f.Sender = s
			if a, _ := h.run(testSrcMAC, seal(f, tokKeys)); a != ActionDrop {
				t.Fatalf("turn %d: host %d's frame: %s", turn, s, a)
			}
			st, _ = h.tok.Read()
		}
	}
	// Read them all without releasing them (a daemon killed before it
	// logged them), and go.
	var all []Record
	if _, err := h.tok.Records(func(r *Record) { all = append(all, recCopy(r)) }); err != nil {
		t.Fatal(err)
	}
	if len(all) != 12 {
		t.Fatalf("%d records, want 12", len(all))
	}
	h.tok.Close()
	if err := h.p.Close(); err != nil {
		t.Fatal(err)
	}

	p2 := loadOrSkipWith(t, false, LoadOptions{PinDir: pins, RingSize: 1 << 20})
	if !p2.Pinned() {
		t.Fatal("the pinned maps were not taken over")
	}
	tok2, err := p2.Token(tokMAC)
	if err != nil {
		t.Fatal(err)
	}
	defer tok2.Close()
	st2, err := tok2.Halt()
	if err != nil {
		t.Fatal(err)
	}
	if st2.Kseq != e.Kseq+12 || st2.QHead != e.QHead+3 || st2.Append != e.Append+15 {
		t.Fatalf("state taken over: kseq %d qhead %d append %d; want %d %d %d", st2.Kseq, st2.QHead, st2.Append, e.Kseq+12, e.QHead+3, e.Append+15)
	}
	var again []Record
	if _, err := tok2.Records(func(r *Record) { again = append(again, recCopy(r)) }); err != nil {
		t.Fatal(err)
	}
	if len(again) != len(all) {
		t.Fatalf("%d records not released came again, want %d", len(again), len(all))
	}
	for i := range all {
		if again[i].Kseq != all[i].Kseq || !bytes.Equal(again[i].Frame, all[i].Frame) || again[i].Sent != all[i].Sent {
			t.Fatalf("record %d taken over differs: kseq %d against %d", i, again[i].Kseq, all[i].Kseq)
		}
	}
	for i, b := range q {
		got, ok := tok2.Taken(e.QHead + uint64(i))
		if !ok || got.Count != b.Count || !bytes.Equal(got.Payload, b.Payload) {
			t.Fatalf("batch %d not in its slot after the takeover: %v %+v", i, ok, got)
		}
		if !bytes.Contains(sent[i], b.Payload) {
			t.Fatalf("batch %d is not what the program sent", i)
		}
	}
	if _, ok := tok2.Taken(e.QHead + 3); ok {
		t.Fatal("Taken returned a batch that was never pushed")
	}
	// Released, they do not come again.
	if err := tok2.Release(); err != nil {
		t.Fatal(err)
	}
	if n, err := tok2.Records(func(*Record) {}); n != 0 || err != nil {
		t.Fatalf("%d records after the release: %v", n, err)
	}
	tok2.Close()
	if err := p2.Unpin(); err != nil {
		t.Fatal(err)
	}
	p2.Close()
	p3 := loadOrSkipWith(t, false, LoadOptions{PinDir: pins, RingSize: 1 << 20})
	if p3.Pinned() {
		t.Fatal("after Unpin, a new load took maps over")
	}
	if err := p3.Unpin(); err != nil {
		t.Fatal(err)
	}
}

// TestTokenMinFrame: with SetMinFrame, the frames the program sends are
// padded with zeros to that length, in a buffer grown to it.
func TestTokenMinFrame(t *testing.T) {
	h := newTokHarness(t, LoadOptions{})
	if err := h.tok.SetMinFrame(300); err != nil {
		t.Fatal(err)
	}
	e := tokBase()
	h.set(e, []exo.Batch{batchOf(5)}, tokKeys)
	act, out := h.run(testSrcMAC, seal(predFrame(e, 0, nil), tokKeys))
	if act != ActionTX || len(out) != 300 {
		t.Fatalf("%s, %d bytes; want XDP_TX, 300 bytes", act, len(out))
	}
	var f exo.Frame
	if err := f.UnmarshalBinary(out[exo.EthHeaderLen:]); err != nil {
		t.Fatal(err)
	}
	end := exo.EthHeaderLen + f.EncodedLen()
	if !bytes.Equal(out[end:], make([]byte, len(out)-end)) {
		t.Fatal("the padding is not zeros")
	}
	if err := h.tok.SetMinFrame(59); err == nil {
		t.Fatal("a minimum below 60 accepted")
	}
}
