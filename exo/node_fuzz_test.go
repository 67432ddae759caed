package exo

import (
	"reflect"
	"testing"
)

// FuzzNodeStepBytes feeds arbitrary bytes to a host in the middle of a run:
// it never panics; a frame that is not accepted leaves the log and the
// pointers as they were (never a partial accept) and is reported with a
// non-ACCEPT reason; an accepted one moves the append pointer by one.
func FuzzNodeStepBytes(f *testing.F) {
	r := newRack(f, 5, nil)
	for k := 0; k < 12; k++ {
		_ = r.nodes[k%5].Propose([]byte{byte(k)})
		r.collect(k % 5)
	}
	r.run(10000)
	base := r.nodes[0]
	p := base.Pointers()
	next := Frame{Type: FrameData, Group: 1, Sender: base.Holder(), Seq: p.Append, History: append([]uint8(nil), p.Hist()...)}
	var key [TagKeyLen]byte // the rack's (zero) key
	good, _ := next.AppendSealed(nil, key)
	f.Add(good)
	f.Add(good[:HeaderLen])
	old := next
	old.Seq--
	b, _ := old.AppendSealed(nil, key)
	f.Add(b)
	forged := append([]byte(nil), good...)
	forged[OffTag] ^= 0x80
	f.Add(forged)
	f.Fuzz(func(t *testing.T, in []byte) {
		nd := base.Clone()
		nd.Advance()
		before := nd.Pointers()
		logLen := len(nd.Log())
		r := nd.StepBytes(in)
		rd := nd.Ready()
		if r == ReasonAccept {
			if nd.Pointers().Append < before.Append+1 {
				t.Fatalf("accepted but append pointer %d -> %d", before.Append, nd.Pointers().Append)
			}
			return
		}
		if r >= NumReasons {
			t.Fatalf("reason %d out of range", r)
		}
		if len(rd.Rejects) == 0 {
			t.Fatalf("reason %s not reported in Ready.Rejects", r)
		}
		if len(nd.Log()) != logLen || len(rd.Appended) != 0 || len(rd.Agreed) != 0 {
			t.Fatalf("%s: the log changed", r)
		}
		after := nd.Pointers()
		after.Halted = before.Halted // a divergence starts a view change
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("%s: pointers changed %+v -> %+v", r, before, after)
		}
	})
}
