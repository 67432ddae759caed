package exo

import (
	"encoding/binary"
	"math/bits"
)

// The frame tag (docs/wire.md section 2, docs/security.md): every frame
// carries, in its tag field, SipHash-2-4 under the rack's 16-byte frame key
// of the message
//
//	m = exo[0:24] || exo[32 : 32+hist_len+payload_len]
//
// where exo is the frame after the Ethernet header: the fixed header
// without the tag field, then the history and the payload. Ethernet padding
// is never part of m, so len(m) = 24 + hist_len + payload_len. The 64-bit
// result is written to the tag field big-endian, like every other field.
//
// The codec does not check the tag (UnmarshalBinary decodes any value);
// the receive path does, right after the group check: a frame of another
// group is BAD_GROUP whatever its tag, a frame of this group with a wrong
// tag is BAD_TAG before any other state is looked at (Pointers.ClassifyTagged,
// Node.StepFrame, Node.StepBytes, the XDP program, the FPGA engine).

// tagHeaderLen is the part of the fixed header the tag covers: everything
// before the tag field.
const tagHeaderLen = OffTag

// sipFrame computes the tag from the three header words (the little-endian
// loads of exo[0:8], exo[8:16], exo[16:24]) and the bytes after the tag
// field (history, then payload, in one or two pieces).
func sipFrame(k0, k1, w0, w1, w2 uint64, a, b []byte) uint64 {
	v0, v1, v2, v3 := sipInit(k0, k1)
	v3 ^= w0
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= w0
	v3 ^= w1
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= w1
	v3 ^= w2
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= w2
	return sipFinish(v0, v1, v2, v3, tagHeaderLen, a, b)
}

// tagOfFields is the tag of f under (k0, k1), computed from its fields: the
// header words are built in registers, nothing is encoded.
func tagOfFields(k0, k1 uint64, f *Frame) uint64 {
	w0 := uint64(Version) | uint64(f.Type)<<8 | uint64(bits.ReverseBytes16(f.Group))<<16 |
		uint64(f.Sender)<<32 | uint64(uint8(len(f.History)))<<40 |
		uint64(bits.ReverseBytes16(uint16(len(f.Payload))))<<48
	w1 := uint64(bits.ReverseBytes32(f.Epoch)) | uint64(bits.ReverseBytes16(f.Count))<<32 |
		uint64(bits.ReverseBytes16(f.Flags))<<48
	w2 := bits.ReverseBytes64(f.Seq)
	return sipFrame(k0, k1, w0, w1, w2, f.History, f.Payload)
}

// tagOfBytes is the tag of the encoded frame b under (k0, k1), and whether
// b holds the whole message (header, hist_len history ids, payload_len
// payload bytes).
func tagOfBytes(k0, k1 uint64, b []byte) (uint64, bool) {
	if len(b) < HeaderLen {
		return 0, false
	}
	end := HeaderLen + int(b[OffHistLen]) + int(binary.BigEndian.Uint16(b[OffPayloadLen:]))
	if len(b) < end {
		return 0, false
	}
	le := binary.LittleEndian
	return sipFrame(k0, k1, le.Uint64(b[0:]), le.Uint64(b[8:]), le.Uint64(b[16:]), b[HeaderLen:end], nil), true
}

// ComputeTag returns the tag of f under key: SipHash-2-4 of the frame's
// encoding without the tag field (header bytes 0..23, history, payload),
// computed from the fields without encoding the frame. For a frame
// UnmarshalBinary accepted, it is the tag of the bytes it was decoded from.
// It does not allocate.
func (f *Frame) ComputeTag(key [TagKeyLen]byte) uint64 {
	k0, k1 := sipKey(&key)
	return tagOfFields(k0, k1, f)
}

// Seal sets f.Tag to the tag of f under key.
func (f *Frame) Seal(key [TagKeyLen]byte) { f.Tag = f.ComputeTag(key) }

// VerifyTag reports whether f.Tag is the tag of f under key.
func (f *Frame) VerifyTag(key [TagKeyLen]byte) bool { return f.Tag == f.ComputeTag(key) }

// AppendSealed appends the encoding of f to b with the tag computed under
// key (f.Tag is ignored and left as it is). Like AppendBinary, it does not
// allocate when b has room.
func (f *Frame) AppendSealed(b []byte, key [TagKeyLen]byte) ([]byte, error) {
	start := len(b)
	b, err := f.AppendBinary(b)
	if err != nil {
		return b, err
	}
	k0, k1 := sipKey(&key)
	t, _ := tagOfBytes(k0, k1, b[start:])
	binary.BigEndian.PutUint64(b[start+OffTag:], t)
	return b, nil
}

// Tag returns the tag of the encoded frame b (the bytes after the Ethernet
// header; padding after the payload allowed and ignored) under key. It
// fails with a *DecodeError (MALFORMED, or BAD_PAYLOAD) if b is shorter
// than its header, its history or its payload; it checks nothing else.
func Tag(b []byte, key [TagKeyLen]byte) (uint64, error) {
	k0, k1 := sipKey(&key)
	t, ok := tagOfBytes(k0, k1, b)
	if !ok {
		return 0, shortErr(b)
	}
	return t, nil
}

func shortErr(b []byte) error {
	if len(b) < HeaderLen || len(b) < HeaderLen+int(b[OffHistLen]) {
		return frameErr(ReasonMalformed, len(b), ErrTruncated)
	}
	return frameErr(ReasonBadPayload, OffPayloadLen, ErrPayload)
}

// Seal writes the tag of the encoded frame b under key into b's tag field,
// in place (see Tag for the errors; b is unchanged on error). It does not
// allocate: AppendBinary then Seal is the zero-copy way to send a frame.
func Seal(b []byte, key [TagKeyLen]byte) error {
	t, err := Tag(b, key)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint64(b[OffTag:], t)
	return nil
}

// VerifyTag reports whether the tag field of the encoded frame b holds the
// tag of b under key; false if b is too short to hold its message.
func VerifyTag(b []byte, key [TagKeyLen]byte) bool {
	k0, k1 := sipKey(&key)
	return verifyBytes(k0, k1, b)
}

func verifyBytes(k0, k1 uint64, b []byte) bool {
	t, ok := tagOfBytes(k0, k1, b)
	return ok && binary.BigEndian.Uint64(b[OffTag:]) == t
}

// ClassifyTagged is the whole state stage of the fast path for a decoded
// frame: the group check (BAD_GROUP), then the tag under the key of the
// slot of keys the frame's key phase names (BAD_TAG; an empty slot too),
// then Classify's other checks in their order. This is where the XDP
// program and the FPGA engine check the tag, and where Node.StepFrame does:
// a frame of another group is never checked against this group's key, and
// a forged frame is refused before any other state is read. It does not
// change p.
func (p *Pointers) ClassifyTagged(f *Frame, keys *KeyRing) Reason {
	if f.Group != p.Group {
		return ReasonBadGroup
	}
	if !keys.Verify(f) {
		return ReasonBadTag
	}
	return p.Classify(f)
}
