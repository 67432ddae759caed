package main

import (
	"encoding/binary"
	"fmt"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/goldvec"
)

// Stage says which part of the fast path decided a verdict.
type stage uint8

const (
	stageAccept stage = 0 // UnmarshalBinary and Classify passed; Accept applied
	stageCodec  stage = 1 // UnmarshalBinary failed (ReasonOf its error)
	stageState  stage = 2 // Classify returned a non-ACCEPT reason
)

func (s stage) String() string {
	switch s {
	case stageAccept:
		return "accept"
	case stageCodec:
		return "codec"
	case stageState:
		return "state"
	}
	return fmt.Sprintf("stage(%d)", uint8(s))
}

// noIntent marks a vector built without a particular reason in mind
// (random vectors).
const noIntent = exo.Reason(0xFF)

// result is what the Go core says about one frame in one state. It is the
// only source of the expectations written into the vectors.
type result struct {
	Reason  exo.Reason
	Stage   stage
	Out     exo.Pointers
	Decoded *exo.Frame // nil when the codec rejected the frame
	ExoLen  int        // HeaderLen+hist_len+payload_len when decoded, else 0
	// TagValid: decoded, and the tag field holds the tag under the key of
	// the slot its key phase names, and that slot holds a key.
	TagValid bool
	// The transmit side (format 5, vectors with a Tx; token.go): the
	// exo.Tx after, what Step did, and the encoded frame it sent (nil if
	// none).
	TxOut exo.Tx
	Turn  exo.Turn
	Sent  []byte
}

// testKey is the frame-tag key of key slot 0 in every vector (the hex
// form carries it in words 4-5 of every record, the headers as
// EXO_VEC_TAG_KEY*): the SipHash paper's test key 00 01 .. 0f.
var testKey = goldvec.TestKey()

// testKey1 is the key of slot 1 (format 4: key phase 1), 10 11 .. 1f, in
// words 6-7 of every hex record; a vector says whether slot 1 holds it
// (vector.Key1Valid) or is empty.
var testKey1 = goldvec.TestKey1()

// ring returns the key slots of a vector: testKey in slot 0, testKey1 in
// slot 1 when key1 is set.
func ring(key1 bool) exo.KeyRing {
	r := exo.NewKeyRing(0, testKey)
	r.Key[1], r.Valid[1] = testKey1, key1
	return r
}

// evaluate runs the Go fast-path rules: UnmarshalBinary, then
// ClassifyTagged under the key ring (the group, the tag under the slot of
// the frame's key phase, then Classify), then Accept on ACCEPT. The frame
// bytes are copied first so that the decoded frame's slices never alias
// the caller's buffer.
func evaluate(in exo.Pointers, b []byte, key1 bool) (result, error) {
	buf := append([]byte(nil), b...)
	res := result{Out: in}
	var f exo.Frame
	if err := f.UnmarshalBinary(buf); err != nil {
		res.Reason = exo.ReasonOf(err)
		res.Stage = stageCodec
		if res.Reason == exo.ReasonAccept {
			return res, fmt.Errorf("ReasonOf(%v) = ACCEPT", err)
		}
		return res, nil
	}
	res.Decoded = &f
	res.ExoLen = exo.HeaderLen + len(f.History) + len(f.Payload)
	kr := ring(key1)
	res.TagValid = kr.Verify(&f)
	if kr.VerifyBytes(buf) != res.TagValid {
		return res, fmt.Errorf("the tag of the fields and the tag of the bytes disagree")
	}
	before := res.Out
	res.Reason = res.Out.ClassifyTagged(&f, &kr)
	if res.Out != before {
		return res, fmt.Errorf("the state changed in Classify")
	}
	if res.Reason != exo.ReasonAccept {
		res.Stage = stageState
		return res, nil
	}
	res.Stage = stageAccept
	res.Out.Accept(f.Sender, f.Seq)
	return res, nil
}

// raw is a frame with every header field explicit, so that a vector can
// carry values the encoder refuses (bad version, type, flags, lengths).
// Version, Type, HistLen and PayloadLen default to the consistent values
// when built with rawOf.
type raw struct {
	Version    uint8
	Type       uint8
	Group      uint16
	Sender     uint8
	HistLen    uint8
	PayloadLen uint16
	Epoch      uint32
	Count      uint16
	Flags      uint16
	Seq        uint64
	Tag        uint64
	History    []uint8
	Payload    []byte
	Pad        []byte // appended after the frame (Ethernet padding, garbage)
	Trunc      int    // if > 0: cut the encoded bytes (with Pad) to this length
	Empty      bool   // the frame has zero bytes (Trunc cannot say 0)
	// Tagging says what goes in the tag field: the tag under the key of
	// the frame's phase (testKey, or testKey1 for key phase 1; the default:
	// every vector but the forged ones), Tag as it is, or the tag under Key.
	Tagging tagging
	Key     [exo.TagKeyLen]byte // the key of tagKey
	// NoKey1: the vector's host holds no key in slot 1 (format 4; not a
	// property of the frame, carried here for g.vec and stream.step).
	NoKey1 bool
	// Forge changes the encoded, sealed frame (before Trunc): what an
	// attacker without the key does to a genuine frame.
	Forge func(b []byte)
}

// tagging is how raw.bytes fills the tag field.
type tagging uint8

const (
	tagSeal tagging = iota // the tag of the frame under the key of its phase
	tagAsIs                // raw.Tag, whatever it is (a forged or placeholder tag)
	tagKey                 // the tag of the frame under raw.Key (another rack's key)
)

// fix sets HistLen and PayloadLen from History and Payload.
func (r *raw) fix() *raw {
	r.HistLen = uint8(len(r.History))
	r.PayloadLen = uint16(len(r.Payload))
	return r
}

// clone returns a deep copy of r.
func (r *raw) clone() *raw {
	c := *r
	c.History = append([]uint8(nil), r.History...)
	c.Payload = append([]byte(nil), r.Payload...)
	c.Pad = append([]byte(nil), r.Pad...)
	return &c
}

// bytes encodes r at the offsets of exo/wire_gen.go, without any check.
func (r *raw) bytes() []byte {
	if r.Empty {
		return []byte{}
	}
	b := make([]byte, exo.HeaderLen, exo.HeaderLen+len(r.History)+len(r.Payload)+len(r.Pad))
	b[exo.OffVersion] = r.Version
	b[exo.OffType] = r.Type
	binary.BigEndian.PutUint16(b[exo.OffGroup:], r.Group)
	b[exo.OffSender] = r.Sender
	b[exo.OffHistLen] = r.HistLen
	binary.BigEndian.PutUint16(b[exo.OffPayloadLen:], r.PayloadLen)
	binary.BigEndian.PutUint32(b[exo.OffEpoch:], r.Epoch)
	binary.BigEndian.PutUint16(b[exo.OffCount:], r.Count)
	binary.BigEndian.PutUint16(b[exo.OffFlags:], r.Flags)
	binary.BigEndian.PutUint64(b[exo.OffSeq:], r.Seq)
	binary.BigEndian.PutUint64(b[exo.OffTag:], r.Tag)
	b = append(b, r.History...)
	b = append(b, r.Payload...)
	b = append(b, r.Pad...)
	// The tag covers exo[0:24] and the hist_len + payload_len bytes after
	// the header, as the header says (not the padding). A frame whose
	// header claims more bytes than it has cannot be sealed: it keeps Tag
	// (the codec rejects it before the tag matters).
	switch r.Tagging {
	case tagSeal:
		k := testKey
		if r.Flags&exo.FlagKeyPhase != 0 {
			k = testKey1
		}
		_ = exo.Seal(b, k)
	case tagKey:
		_ = exo.Seal(b, r.Key)
	}
	if r.Forge != nil {
		r.Forge(b)
	}
	if r.Trunc > 0 && r.Trunc < len(b) {
		b = b[:r.Trunc]
	}
	return b
}

// padTo pads r with byte v up to the Ethernet minimum (MinEthFrame -
// EthHeaderLen bytes after the Ethernet header), as a NIC would.
func (r *raw) padTo(v byte) *raw {
	n := exo.HeaderLen + len(r.History) + len(r.Payload)
	r.Pad = nil
	for ; n < exo.MinEthFrame-exo.EthHeaderLen; n++ {
		r.Pad = append(r.Pad, v)
	}
	return r
}

// records builds a payload of the given records.
func records(recs ...[]byte) (payload []byte, count uint16) {
	for _, rec := range recs {
		var err error
		payload, err = exo.AppendRecord(payload, rec)
		if err != nil {
			panic(err)
		}
		count++
	}
	return payload, count
}

// withRecords sets r's payload to the given records.
func (r *raw) withRecords(recs ...[]byte) *raw {
	r.Payload, r.Count = records(recs...)
	r.PayloadLen = uint16(len(r.Payload))
	return r
}

// tagFor is the placeholder tag of generated frames (format 2 carried it
// unchecked): it stays in raw.Tag, and so in the frames that cannot be
// sealed (their header claims more bytes than they have); every other
// frame gets its real tag from raw.bytes.
func tagFor(seq uint64) uint64 { return 0x0123456789abcdef ^ seq*0x9e3779b97f4a7c15 }

// next returns the valid next frame for state p: seq = append pointer,
// history = p's history, epoch and group of p, and a sender not in the
// history (the host after the most recent sender in id order, skipping
// ids in the history). It is a token pass (no records).
func next(p exo.Pointers) *raw {
	n := int(p.Hosts)
	s := 0
	if h := p.H(); h > 0 && p.History[0] != exo.HistoryNone {
		s = (int(p.History[0]) + 1) % n
	}
	for i := 0; i < n && p.InHistory(uint8(s)); i++ {
		s = (s + 1) % n
	}
	return from(p, uint8(s))
}

// from returns the valid-looking next frame of p sent by sender.
func from(p exo.Pointers, sender uint8) *raw {
	r := &raw{
		Version: exo.Version,
		Type:    exo.TypeData,
		Group:   p.Group,
		Sender:  sender,
		Epoch:   p.Epoch,
		Seq:     p.Append,
		Tag:     tagFor(p.Append),
		History: append([]uint8(nil), p.Hist()...),
	}
	return r.fix()
}

// steady returns the state of a host of an n-host rack (group 1, epoch e,
// window w) that has appended seqs ..a-1 in plain token rotation, the
// sender of seq s being s mod n: history = (a-1) mod n, (a-2) mod n, ...,
// X where fewer than h entries exist, and agreed = a-h (0 below h).
func steady(n int, a uint64) exo.Pointers {
	p := exo.NewPointers(1, n, exo.DefaultSeqWindow)
	p.Append = a
	h := p.H()
	for i := 0; i < h && uint64(i) < a; i++ {
		p.History[i] = uint8((a - 1 - uint64(i)) % uint64(n))
	}
	if a >= uint64(h) {
		p.Agreed = a - uint64(h)
	}
	return p
}

// hexable reports whether a vector fits the fixed-size hex record.
func hexable(p exo.Pointers, frame []byte) bool {
	return p.H() <= hexHistoryMax && len(frame) <= hexFrameMax
}
