//go:build linux

package xdp

import (
	"encoding/binary"
	"testing"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/goldvec"
)

// benchKey is the benchmarks' tag key (Program.SetKey); benchKey1 the key
// in slot 1 during a rotation (the accept_phase1 case).
var (
	benchKey  = [exo.TagKeyLen]byte{0xbe, 0x4c, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	benchKey1 = [exo.TagKeyLen]byte{0xbe, 0x4c, 0x01, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
)

// benchFrames returns an n=5 state and an in-order frame it accepts (one
// 64-byte record, sealed under benchKey), and the same frame from another
// group (dropped before its tag is checked).
func benchFrames(tb testing.TB) (exo.Pointers, []byte, []byte) {
	tb.Helper()
	st := exo.NewPointers(1, 5, 1024)
	st.Append, st.Agreed = 10, 9
	st.History[0], st.History[1] = 4, 3
	payload, err := exo.AppendRecord(nil, make([]byte, 64))
	if err != nil {
		tb.Fatal(err)
	}
	f := exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Seq: 10, Count: 1, History: []uint8{4, 3}, Payload: payload}
	b, err := f.AppendSealed(nil, benchKey)
	if err != nil {
		tb.Fatal(err)
	}
	accept := EthernetFrame(testSrcMAC, b)
	drop := append([]byte(nil), accept...)
	binary.BigEndian.PutUint16(drop[exo.EthHeaderLen+exo.OffGroup:], 2)
	return st, accept, drop
}

// BenchmarkRun reports ns per frame measured by the kernel with
// BPF_PROG_TEST_RUN repeat runs (b.N runs in one syscall). "accept" runs
// the benchmark variant of the program that undoes each ACCEPT, so the same
// in-order frame is accepted every time (an upper bound: it includes the
// undo, and the tag check over its 92-byte message); "drop_bad_group" is a
// frame of another group (no tag check), "drop_bad_tag" the accept frame
// with one bit of its tag flipped (the whole tag check, then a drop).
// "accept_phase1" is the accept frame with key phase 1, sealed under
// benchKey1, with both key slots valid (a rotation in progress); the other
// cases load benchKey alone (SetKey).
func BenchmarkRun(b *testing.B) {
	st, accept, drop := benchFrames(b)
	phase1 := append([]byte(nil), accept...)
	phase1[exo.EthHeaderLen+exo.OffFlags] |= exo.FlagKeyPhase >> 8
	if err := exo.Seal(phase1[exo.EthHeaderLen:], benchKey1); err != nil {
		b.Fatal(err)
	}
	rotating := exo.KeyRing{Key: [2][exo.TagKeyLen]byte{benchKey, benchKey1}, Valid: [2]bool{true, true}}
	badVersion := append([]byte(nil), accept...)
	badVersion[exo.EthHeaderLen+exo.OffVersion] = 2
	badTag := append([]byte(nil), accept...)
	badTag[exo.EthHeaderLen+exo.OffTag+7] ^= 1
	single := exo.NewKeyRing(0, benchKey)
	for _, bc := range []struct {
		name   string
		frame  []byte
		ring   exo.KeyRing
		undo   bool
		reason exo.Reason
		action Action
	}{
		{"accept", accept, single, true, exo.ReasonAccept, ActionPass},
		{"accept_phase1", phase1, rotating, true, exo.ReasonAccept, ActionPass},
		{"drop_bad_group", drop, single, false, exo.ReasonBadGroup, ActionDrop},
		{"drop_bad_version", badVersion, single, false, exo.ReasonBadVersion, ActionDrop},
		{"drop_bad_tag", badTag, single, false, exo.ReasonBadTag, ActionDrop},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := loadOrSkip(b, bc.undo)
			if err := p.SetState(st); err != nil {
				b.Fatal(err)
			}
			if err := p.SetKeys(bc.ring); err != nil {
				b.Fatal(err)
			}
			v, err := p.Run(bc.frame)
			if err != nil || v.Reason != bc.reason || v.Action != bc.action {
				b.Fatalf("warm-up run: %v %v, want %s %s", v, err, bc.action, bc.reason)
			}
			if got, _ := p.State(); got != st {
				b.Fatalf("state moved: %s", goldvec.StateString(got))
			}
			b.ResetTimer()
			d, act, err := p.Bench(bc.frame, b.N)
			if err != nil {
				b.Fatal(err)
			}
			if act != bc.action {
				b.Fatalf("action %s", act)
			}
			b.ReportMetric(float64(d.Nanoseconds()), "ns/frame")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkRunStream runs in-order frames one per BPF_PROG_TEST_RUN call
// with the production program (each really moves the pointers): the cost
// of a frame plus the syscall.
func BenchmarkRunStream(b *testing.B) {
	st, accept, _ := benchFrames(b)
	p := loadOrSkip(b, false)
	st.Hosts, st.History[0], st.History[1] = 1, exo.HistoryNone, exo.HistoryNone // n=1: h=0, every frame from sender 0 is in order
	if err := p.SetState(st); err != nil {
		b.Fatal(err)
	}
	setKey(b, p, benchKey)
	f := append([]byte(nil), accept...)
	f[exo.EthHeaderLen+exo.OffHistLen] = 0
	f = append(f[:exo.EthHeaderLen+exo.HeaderLen], f[exo.EthHeaderLen+exo.HeaderLen+2:]...)
	b.ResetTimer()
	for i := range b.N {
		binary.BigEndian.PutUint64(f[exo.EthHeaderLen+exo.OffSeq:], st.Append+uint64(i))
		if err := exo.Seal(f[exo.EthHeaderLen:], benchKey); err != nil {
			b.Fatal(err)
		}
		v, err := p.Run(f)
		if err != nil || v.Reason != exo.ReasonAccept {
			b.Fatalf("frame %d: %v %v", i, v, err)
		}
	}
}
