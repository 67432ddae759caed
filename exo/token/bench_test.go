package token_test

import (
	"testing"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/exo/token"
)

// benchHost is one host of benchRing: a core, its in-memory fast path and
// its control plane, with a Ready that only advances.
type benchHost struct {
	nd  *exo.Node
	fp  *token.Mem
	drv *token.Driver
}

// benchRing is a rack of n hosts whose fast paths pass the token to each
// other in memory; the control planes read their records every readEvery
// frames, as a daemon reads a batch of them per wake-up.
type benchRing struct {
	hosts []*benchHost
	net   []*exo.Frame // frames in flight, in order
	from  []int
}

func newBenchRing(b *testing.B, n int) *benchRing {
	var key [exo.TagKeyLen]byte
	for k := range key {
		key[k] = byte(0x10 + k)
	}
	r := &benchRing{}
	for i := range n {
		cfg := exo.Config{ID: uint8(i), Hosts: n, Group: 7, TagKey: key, IdleRotations: 1 << 20}
		nd, err := exo.NewNode(cfg)
		if err != nil {
			b.Fatal(err)
		}
		h := &benchHost{nd: nd, fp: token.NewMem(nd.Keys())}
		h.drv = token.New(nd, h.fp, token.Config{MaxBatch: nd.Config().MaxBatchBytes, Ready: func() error {
			if h.nd.HasReady() {
				h.nd.Ready()
				h.nd.Advance()
			}
			return nil
		}})
		r.hosts = append(r.hosts, h)
	}
	for i := range r.hosts {
		r.sync(b, i)
	}
	return r
}

func (r *benchRing) sync(b *testing.B, i int) {
	h := r.hosts[i]
	r.ready(i)
	if _, err := h.drv.Sync(); err != nil {
		b.Fatal(err)
	}
	r.ready(i)
	if err := h.drv.Release(); err != nil {
		b.Fatal(err)
	}
}

// ready carries out host i's Ready: its core's frames go on the wire.
func (r *benchRing) ready(i int) {
	h := r.hosts[i]
	if !h.nd.HasReady() {
		return
	}
	rd := h.nd.Ready()
	for _, f := range rd.Frames {
		r.broadcast(i, f)
	}
	h.nd.Advance()
	// Keep the last entries only, as the daemon does (keep_entries).
	if a := h.nd.Pointers().Agreed; a > 2*benchKeep {
		h.nd.Compact(a - benchKeep)
	}
}

// benchKeep is the entries a benchmark host keeps in memory.
const benchKeep = 4096

func (r *benchRing) broadcast(from int, f exo.Frame) {
	r.net = append(r.net, &f)
	r.from = append(r.from, from)
}

// BenchmarkDriverRecords measures the control plane's cost per record on
// a rack of 5 hosts whose fast paths pass the token (empty passes, and one
// 64-byte record in every other frame): the fast path's rule (token.Mem,
// exo.Engine.Step), then each host's control plane stepping its records in
// batches of about 20 (token.Driver.Step: the core's StepFast and
// StepSent, the log, the agreement), Sync and Release. ns/op is per frame
// sent (each frame is 4 records: one per other host, plus the sender's
// own record of the frame it answered). The daemon's per-record cost on
// the lab rack is this plus the ring's reading and the delivery.
func BenchmarkDriverRecords(b *testing.B) {
	r := newBenchRing(b, 5)
	// Start the ring: host 0's core sends the first frame.
	h0 := r.hosts[0]
	h0.drv.Quiesce()
	h0.nd.Broadcast()
	r.sync(b, 0)
	payload := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		if len(r.net) == 0 {
			b.Fatalf("the ring stopped after %d frames", sent)
		}
		f, from := r.net[0], r.from[0]
		r.net, r.from = r.net[1:], r.from[1:]
		for i, h := range r.hosts {
			if i == from {
				continue
			}
			if out, _ := h.fp.Frame(f); out != nil {
				sent++
				r.broadcast(i, *out)
			}
		}
		if sent%2 == 0 {
			for _, h := range r.hosts {
				if h.drv.Pending() < 4 {
					if err := h.drv.Propose(payload); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		if sent%20 == 0 {
			for i, h := range r.hosts {
				if _, err := h.fp.Records(h.drv.Step); err != nil {
					b.Fatal(err)
				}
				r.sync(b, i)
			}
		}
	}
}
