package exo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// tagMessage builds the tag's message of the encoded frame b by the
// definition (docs/wire.md): exo[0:24] || exo[32 : 32+hist_len+payload_len].
func tagMessage(b []byte) []byte {
	end := HeaderLen + int(b[OffHistLen]) + int(binary.BigEndian.Uint16(b[OffPayloadLen:]))
	return append(append([]byte(nil), b[:OffTag]...), b[HeaderLen:end]...)
}

// randFrame returns a valid frame with random fields.
func randFrame(rng *rand.Rand) *Frame {
	f := &Frame{Type: FrameData, Group: uint16(rng.Uint32()), Sender: uint8(rng.Uint32()),
		Epoch: rng.Uint32(), Seq: rng.Uint64(), Tag: rng.Uint64()}
	if rng.IntN(4) == 0 {
		f.Flags = FlagReadmit | uint16(rng.IntN(256))
	}
	hl := rng.IntN(20)
	if rng.IntN(8) == 0 {
		hl = MaxHistory
	}
	for i := 0; i < hl; i++ {
		f.History = append(f.History, uint8(i)) // distinct
	}
	for range rng.IntN(5) {
		rec := make([]byte, rng.IntN(40))
		for i := range rec {
			rec[i] = byte(rng.Uint32())
		}
		f.Payload, _ = AppendRecord(f.Payload, rec)
		f.Count++
	}
	return f
}

// TestTagDefinition: the tag computed from the fields, from the bytes, and
// by the definition (SipHash24 of the message) agree, for random frames.
func TestTagDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		f := randFrame(rng)
		var key [TagKeyLen]byte
		for k := range key {
			key[k] = byte(rng.Uint32())
		}
		b, err := f.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		def := SipHash24(key, tagMessage(b))
		if got := f.ComputeTag(key); got != def {
			t.Fatalf("frame %d: ComputeTag %#x, definition %#x", i, got, def)
		}
		if got, err := Tag(b, key); err != nil || got != def {
			t.Fatalf("frame %d: Tag %#x %v, definition %#x", i, got, err, def)
		}
		if VerifyTag(b, key) != (f.Tag == def) || f.VerifyTag(key) != (f.Tag == def) {
			t.Fatalf("frame %d: VerifyTag of the unsealed frame", i)
		}
		// Seal in place, with padding after the frame: the padding is
		// neither covered nor touched.
		pad := make([]byte, rng.IntN(50))
		for k := range pad {
			pad[k] = byte(rng.Uint32())
		}
		padded := append(append([]byte(nil), b...), pad...)
		if err := Seal(padded, key); err != nil {
			t.Fatal(err)
		}
		if binary.BigEndian.Uint64(padded[OffTag:]) != def || !bytes.Equal(padded[len(b):], pad) {
			t.Fatalf("frame %d: Seal wrote %x", i, padded)
		}
		if !VerifyTag(padded, key) {
			t.Fatalf("frame %d: sealed frame does not verify", i)
		}
		sealed, err := f.AppendSealed([]byte("prefix"), key)
		if err != nil || string(sealed[:6]) != "prefix" || !bytes.Equal(sealed[6:], padded[:len(b)]) {
			t.Fatalf("frame %d: AppendSealed = %x, %v", i, sealed, err)
		}
		g := *f
		g.Seal(key)
		if g.Tag != def || !g.VerifyTag(key) {
			t.Fatalf("frame %d: Frame.Seal", i)
		}
		var d Frame
		if err := d.UnmarshalBinary(padded); err != nil || !d.VerifyTag(key) {
			t.Fatalf("frame %d: the decoded sealed frame does not verify (%v)", i, err)
		}
	}
}

// TestTagCoversEveryBit: flipping any bit of the message or of the tag
// breaks the tag; flipping a bit of the padding does not.
func TestTagCoversEveryBit(t *testing.T) {
	key := sipTestKey
	f := docFrame()
	b, err := f.AppendSealed(nil, key)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, 0, 0, 0, 0, 0) // padding to the Ethernet minimum
	for i := range b {
		for bit := range 8 {
			c := append([]byte(nil), b...)
			c[i] ^= 1 << bit
			inFrame := i < len(b)-5
			if _, err := Tag(c, key); err != nil {
				continue // hist_len or payload_len now beyond the bytes
			}
			if VerifyTag(c, key) == inFrame {
				t.Errorf("byte %d bit %d flipped: VerifyTag %v", i, bit, !inFrame)
			}
		}
	}
	other := key
	other[15] ^= 1
	if VerifyTag(b, other) {
		t.Error("the frame verifies under another key")
	}
}

// TestTagDocExample is the example of docs/wire.md: the doc frame's tag
// under the test key 00 01 .. 0f.
func TestTagDocExample(t *testing.T) {
	f := docFrame()
	if got := f.ComputeTag(sipTestKey); got != 0xe9e97322a77f7b05 || !f.VerifyTag(sipTestKey) {
		t.Fatalf("doc frame tag %#x", got)
	}
	msg := tagMessage(docFrameBytes)
	if len(msg) != 24+2+7 {
		t.Fatalf("message of %d bytes", len(msg))
	}
}

func TestTagShortFrames(t *testing.T) {
	b, _ := docFrame().MarshalBinary()
	for _, c := range []struct {
		n    int
		want Reason
	}{{0, ReasonMalformed}, {31, ReasonMalformed}, {33, ReasonMalformed}, {34, ReasonBadPayload}, {40, ReasonBadPayload}} {
		if _, err := Tag(b[:c.n], sipTestKey); ReasonOf(err) != c.want {
			t.Errorf("%d bytes: %v, want %s", c.n, err, c.want)
		}
		if err := Seal(b[:c.n], sipTestKey); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrPayload) {
			t.Errorf("Seal of %d bytes: %v", c.n, err)
		}
		if VerifyTag(b[:c.n], sipTestKey) {
			t.Errorf("%d bytes verify", c.n)
		}
	}
}

func TestTagAllocs(t *testing.T) {
	f := docFrame()
	buf := make([]byte, 0, 128)
	b, _ := f.AppendSealed(nil, sipTestKey)
	for name, fn := range map[string]func(){
		"ComputeTag":   func() { _ = f.ComputeTag(sipTestKey) },
		"VerifyTag":    func() { _ = VerifyTag(b, sipTestKey) },
		"Seal":         func() { _ = Seal(b, sipTestKey) },
		"AppendSealed": func() { _, _ = f.AppendSealed(buf[:0], sipTestKey) },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs", name, n)
		}
	}
}

// TestClassifyTaggedOrder: BAD_GROUP, then BAD_TAG, then Classify.
func TestClassifyTaggedOrder(t *testing.T) {
	p := NewPointers(1, 5, 1024)
	f := Frame{Type: FrameData, Group: 1, Sender: 0, History: []uint8{HistoryNone, HistoryNone}}
	f.Seal(sipTestKey)
	ring := NewKeyRing(0, sipTestKey)
	if r := p.ClassifyTagged(&f, &ring); r != ReasonAccept {
		t.Fatalf("sealed frame: %s", r)
	}
	forged := f
	forged.Tag ^= 1
	bad := forged
	bad.Sender = 9 // BAD_SENDER, but the tag is checked first
	other := forged
	other.Group = 2 // another group: its tag is never checked
	for _, c := range []struct {
		name string
		f    Frame
		want Reason
	}{{"forged", forged, ReasonBadTag}, {"forged, sender 9", bad, ReasonBadTag}, {"other group, forged", other, ReasonBadGroup}} {
		if r := p.ClassifyTagged(&c.f, &ring); r != c.want {
			t.Errorf("%s: %s, want %s", c.name, r, c.want)
		}
	}
	wrong := NewKeyRing(0, [TagKeyLen]byte{})
	if r := p.ClassifyTagged(&f, &wrong); r != ReasonBadTag {
		t.Errorf("another key: %s", r)
	}
	// The key phase picks the slot: the same key in slot 1 does not check a
	// phase-0 frame, and a phase-1 frame needs a key in slot 1.
	slot1 := NewKeyRing(1, sipTestKey)
	if r := p.ClassifyTagged(&f, &slot1); r != ReasonBadTag {
		t.Errorf("phase-0 frame, key in slot 1 only: %s", r)
	}
	f1 := f
	f1.SealPhase(1, sipTestKey)
	if r := p.ClassifyTagged(&f1, &slot1); r != ReasonAccept {
		t.Errorf("phase-1 frame, key in slot 1: %s", r)
	}
	if r := p.ClassifyTagged(&f1, &ring); r != ReasonBadTag {
		t.Errorf("phase-1 frame, slot 1 empty: %s", r)
	}
	both := ring
	both.Key[1], both.Valid[1] = [TagKeyLen]byte{9}, true
	if r := p.ClassifyTagged(&f1, &both); r != ReasonBadTag {
		t.Errorf("phase-1 frame under slot 0's key: %s", r)
	}
}

// TestNodeFramesSealed: every frame a host sends carries its tag under
// the rack's key; a host with another key (same group) rejects every one
// of them as BAD_TAG, through StepFrame and StepBytes alike, and changes
// nothing.
func TestNodeFramesSealed(t *testing.T) {
	key := sipTestKey
	r := newRack(t, 3, func(c *Config) { c.TagKey = key })
	var sent []Frame
	r.onFrame = func(_ int, f Frame) {
		sent = append(sent, Frame{Type: f.Type, Group: f.Group, Sender: f.Sender, Epoch: f.Epoch, Seq: f.Seq,
			Count: f.Count, Flags: f.Flags, Tag: f.Tag,
			History: append([]uint8(nil), f.History...), Payload: append([]byte(nil), f.Payload...)})
	}
	for k := range 6 {
		_ = r.nodes[k%3].Propose([]byte{byte(k)})
		r.collect(k % 3)
	}
	r.run(1000)
	if len(sent) < 6 || r.nodes[1].Pointers().Agreed == 0 {
		t.Fatalf("%d frames sent, agreed %d", len(sent), r.nodes[1].Pointers().Agreed)
	}
	outsider, err := NewNode(Config{ID: 2, Hosts: 3, Group: 1}) // the zero key
	if err != nil {
		t.Fatal(err)
	}
	for i := range sent {
		f := &sent[i]
		if !f.VerifyTag(key) {
			t.Fatalf("frame %d (seq %d from %d) is not sealed", i, f.Seq, f.Sender)
		}
		b, _ := f.MarshalBinary()
		for how, step := range map[string]func() Reason{
			"StepFrame": func() Reason { return outsider.StepFrame(f) },
			"StepBytes": func() Reason { return outsider.StepBytes(append(b, 0xAA, 0xBB)) },
		} {
			if got := step(); got != ReasonBadTag {
				t.Fatalf("%s frame %d: %s, want BAD_TAG", how, i, got)
			}
			rd := outsider.Ready()
			if len(rd.Rejects) != 1 || rd.Rejects[0].Reason != ReasonBadTag || rd.Rejects[0].Seq != f.Seq ||
				len(rd.Messages) != 0 || len(rd.Events) != 0 || len(rd.Appended) != 0 {
				t.Fatalf("%s frame %d: Ready %+v", how, i, rd)
			}
			outsider.Advance()
		}
	}
	if p := outsider.Pointers(); p != NewPointers(1, 3, DefaultSeqWindow) {
		t.Fatalf("the outsider's pointers moved: %+v", p)
	}
	// A forged frame of a future epoch does not make the host fetch, nor
	// raise the highest epoch it has seen; a sealed one does.
	nd, _ := NewNode(Config{ID: 0, Hosts: 3, Group: 1, TagKey: key})
	fut := Frame{Type: FrameData, Group: 1, Sender: 1, Epoch: 9, History: []uint8{HistoryNone}}
	if got := nd.StepFrame(&fut); got != ReasonBadTag || len(nd.Ready().Messages) != 0 || nd.maxEpochSeen != 0 {
		t.Fatalf("forged future epoch: %s, %d messages, max epoch seen %d", got, len(nd.Ready().Messages), nd.maxEpochSeen)
	}
	nd.Advance()
	fut.Seal(key)
	if got := nd.StepFrame(&fut); got != ReasonFutureEpoch || len(nd.Ready().Messages) == 0 || nd.maxEpochSeen != 9 {
		t.Fatalf("sealed future epoch: %s", got)
	}
}

func BenchmarkComputeTag(b *testing.B) {
	f := benchFrame(b)
	for i := 0; i < b.N; i++ {
		_ = f.ComputeTag(sipTestKey)
	}
}

func BenchmarkVerifyTagBytes(b *testing.B) {
	buf, _ := benchFrame(b).AppendSealed(nil, sipTestKey)
	for i := 0; i < b.N; i++ {
		if !VerifyTag(buf, sipTestKey) {
			b.Fatal("does not verify")
		}
	}
}
