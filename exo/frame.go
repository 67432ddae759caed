package exo

//go:generate go run ../tools/hwgen -in ../hw/wire.json -root ..

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// This file is the Exo frame codec (layout v1, docs/wire.md). It checks
// the frame's own consistency only: version, type, flags, lengths, record
// framing and distinct history ids. Everything that needs local state
// (seq, history equality, sender not in history, epoch, group, sender < n,
// hist_len == floor(n/2)) is the state machine's job, and the tag (a key)
// the receive path's, right after the group check (tag.go).
//
// The offsets and sizes come from wire_gen.go, generated from hw/wire.json
// like the C and Verilog twins of the same layout.

// FrameType is the type field of a frame.
type FrameType uint8

// FrameData is the only frame type of layout v1: an entry, a batch of
// 0..N records (0 records passes the token).
const FrameData FrameType = TypeData

// String returns "DATA" or "FrameType(N)".
func (t FrameType) String() string {
	if t == FrameData {
		return "DATA"
	}
	return fmt.Sprintf("FrameType(%d)", uint8(t))
}

// Frame is one Exo frame, without its Ethernet header. The version (1),
// the flags (0), hist_len (len(History)) and payload_len (len(Payload))
// are implied and are not fields.
type Frame struct {
	Type    FrameType
	Group   uint16
	Sender  uint8
	Epoch   uint32
	Seq     uint64
	Count   uint16 // number of records in Payload
	Flags   uint16 // 0, or FlagReadmit | host id
	Tag     uint64 // SipHash-2-4 tag (tag.go): decoded and encoded as is, checked by the receive path
	History []uint8
	Payload []byte // Count records, each [len u16 BE][len bytes]; see AppendRecord
}

// Sentinel errors. Every error of the codec is a *DecodeError wrapping one
// of them (the errors of ForEachRecord's fn are returned as they are), so
// errors.Is(err, ErrPayload) works, and ReasonOf(err) gives the verdict to
// count.
var (
	ErrTruncated = errors.New("exo: frame truncated")                      // MALFORMED
	ErrVersion   = errors.New("exo: unsupported frame version")            // BAD_VERSION
	ErrType      = errors.New("exo: unknown frame type")                   // BAD_TYPE
	ErrHistLen   = errors.New("exo: history too long")                     // BAD_HISTLEN
	ErrPayload   = errors.New("exo: bad payload length or record framing") // BAD_PAYLOAD
	ErrFlags     = errors.New("exo: reserved flags set")                   // BAD_FLAGS
	ErrHistoryID = errors.New("exo: history id repeated")                  // BAD_HISTORY_ID
)

// DecodeError is a frame that fails the codec's checks (on decode, or on
// encode for the same rule). Offset is the byte offset, from the first
// byte after the Ethernet header, of the field or record at fault.
type DecodeError struct {
	Reason Reason
	Offset int
	Err    error // one of the Err* sentinels
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("%v (%s at offset %d)", e.Err, e.Reason, e.Offset)
}

func (e *DecodeError) Unwrap() error { return e.Err }

func frameErr(r Reason, off int, err error) *DecodeError {
	return &DecodeError{Reason: r, Offset: off, Err: err}
}

// ReasonOf maps an error from this codec to its Reason: ReasonAccept for
// nil, the error's Reason for a *DecodeError, the sentinel's Reason for a
// bare sentinel, and ReasonMalformed for anything else. It never returns
// ReasonAccept for a non-nil error.
func ReasonOf(err error) Reason {
	if err == nil {
		return ReasonAccept
	}
	var de *DecodeError
	if errors.As(err, &de) && de.Reason != ReasonAccept {
		return de.Reason
	}
	switch {
	case errors.Is(err, ErrVersion):
		return ReasonBadVersion
	case errors.Is(err, ErrType):
		return ReasonBadType
	case errors.Is(err, ErrHistLen):
		return ReasonBadHistlen
	case errors.Is(err, ErrPayload):
		return ReasonBadPayload
	case errors.Is(err, ErrFlags):
		return ReasonBadFlags
	case errors.Is(err, ErrHistoryID):
		return ReasonBadHistoryID
	}
	return ReasonMalformed
}

// EncodedLen returns the length of the encoded frame: HeaderLen +
// len(History) + len(Payload), without Ethernet padding.
func (f *Frame) EncodedLen() int {
	return HeaderLen + len(f.History) + len(f.Payload)
}

// MarshalBinary encodes f into a new buffer; see AppendBinary.
func (f *Frame) MarshalBinary() ([]byte, error) {
	return f.AppendBinary(make([]byte, 0, f.EncodedLen()))
}

// AppendBinary appends the encoding of f to b (encoding.BinaryAppender).
// It does not allocate when cap(b)-len(b) >= f.EncodedLen(). It checks the
// rules UnmarshalBinary checks (type, hist_len <= MaxHistory, distinct
// history ids, payload length <= MaxPayload, Count records framing exactly
// Payload) and returns the same *DecodeError, with b unchanged, if one
// fails. It does not pad to the Ethernet minimum: that is the sender's
// (or the NIC's) job, and the receiver ignores the padding.
func (f *Frame) AppendBinary(b []byte) ([]byte, error) {
	if err := f.validate(); err != nil {
		return b, err
	}
	n := f.EncodedLen()
	start := len(b)
	if cap(b)-start < n {
		nb := make([]byte, start, start+n)
		copy(nb, b)
		b = nb
	}
	b = b[:start+n]
	h := b[start : start+HeaderLen]
	h[OffVersion] = Version
	h[OffType] = uint8(f.Type)
	binary.BigEndian.PutUint16(h[OffGroup:], f.Group)
	h[OffSender] = f.Sender
	h[OffHistLen] = uint8(len(f.History))
	binary.BigEndian.PutUint16(h[OffPayloadLen:], uint16(len(f.Payload)))
	binary.BigEndian.PutUint32(h[OffEpoch:], f.Epoch)
	binary.BigEndian.PutUint16(h[OffCount:], f.Count)
	binary.BigEndian.PutUint16(h[OffFlags:], f.Flags)
	binary.BigEndian.PutUint64(h[OffSeq:], f.Seq)
	binary.BigEndian.PutUint64(h[OffTag:], f.Tag)
	off := start + OffHistory
	off += copy(b[off:], f.History)
	copy(b[off:], f.Payload)
	return b, nil
}

// validate checks the rules of the codec on a Frame about to be encoded.
// Offsets in the errors are those of the encoded frame.
func (f *Frame) validate() error {
	if f.Type != FrameData {
		return frameErr(ReasonBadType, OffType, ErrType)
	}
	if !ValidFlags(f.Flags) {
		return frameErr(ReasonBadFlags, OffFlags, ErrFlags)
	}
	if len(f.History) > MaxHistory {
		return frameErr(ReasonBadHistlen, OffHistLen, ErrHistLen)
	}
	if i := repeatedHistoryID(f.History); i >= 0 {
		return frameErr(ReasonBadHistoryID, OffHistory+i, ErrHistoryID)
	}
	if len(f.Payload) > MaxPayload {
		return frameErr(ReasonBadPayload, OffPayloadLen, ErrPayload)
	}
	if i := recordFramingError(f.Payload, f.Count); i >= 0 {
		return frameErr(ReasonBadPayload, OffHistory+len(f.History)+i, ErrPayload)
	}
	return nil
}

// UnmarshalBinary decodes b (the bytes after the Ethernet header) into f.
// History and Payload alias b (zero copy; their capacity is clipped, so
// appending to them never writes into b). Bytes after the payload, such as
// Ethernet minimum-size padding, are ignored. On error f is unchanged and
// the error is a *DecodeError. UnmarshalBinary never panics and does not
// allocate on success.
//
// The checks, in order: version (BAD_VERSION), header length (MALFORMED),
// type (BAD_TYPE), flags (BAD_FLAGS), hist_len <= MaxHistory
// (BAD_HISTLEN), history within b (MALFORMED), payload within b
// (BAD_PAYLOAD), repeated history id other than HistoryNone
// (BAD_HISTORY_ID), exact record framing (BAD_PAYLOAD). Version comes
// first so that a frame of a later, shorter layout is BAD_VERSION.
func (f *Frame) UnmarshalBinary(b []byte) error {
	if len(b) < OffVersion+SizeVersion {
		return frameErr(ReasonMalformed, len(b), ErrTruncated)
	}
	if b[OffVersion] != Version {
		return frameErr(ReasonBadVersion, OffVersion, ErrVersion)
	}
	if len(b) < HeaderLen {
		return frameErr(ReasonMalformed, len(b), ErrTruncated)
	}
	if FrameType(b[OffType]) != FrameData {
		return frameErr(ReasonBadType, OffType, ErrType)
	}
	if !ValidFlags(binary.BigEndian.Uint16(b[OffFlags:])) {
		return frameErr(ReasonBadFlags, OffFlags, ErrFlags)
	}
	hl := int(b[OffHistLen])
	if hl > MaxHistory {
		return frameErr(ReasonBadHistlen, OffHistLen, ErrHistLen)
	}
	pl := int(binary.BigEndian.Uint16(b[OffPayloadLen:]))
	histEnd := OffHistory + hl
	if len(b) < histEnd {
		return frameErr(ReasonMalformed, len(b), ErrTruncated)
	}
	end := histEnd + pl
	if len(b) < end {
		return frameErr(ReasonBadPayload, OffPayloadLen, ErrPayload)
	}
	hist := b[OffHistory:histEnd:histEnd]
	if i := repeatedHistoryID(hist); i >= 0 {
		return frameErr(ReasonBadHistoryID, OffHistory+i, ErrHistoryID)
	}
	count := binary.BigEndian.Uint16(b[OffCount:])
	payload := b[histEnd:end:end]
	if i := recordFramingError(payload, count); i >= 0 {
		return frameErr(ReasonBadPayload, histEnd+i, ErrPayload)
	}
	*f = Frame{
		Type:    FrameType(b[OffType]),
		Group:   binary.BigEndian.Uint16(b[OffGroup:]),
		Sender:  b[OffSender],
		Epoch:   binary.BigEndian.Uint32(b[OffEpoch:]),
		Seq:     binary.BigEndian.Uint64(b[OffSeq:]),
		Count:   count,
		Flags:   binary.BigEndian.Uint16(b[OffFlags:]),
		Tag:     binary.BigEndian.Uint64(b[OffTag:]),
		History: hist,
		Payload: payload,
	}
	return nil
}

// Equal reports whether f and g have the same fields, comparing History
// and Payload byte-wise (a nil and an empty slice are equal).
func (f *Frame) Equal(g *Frame) bool {
	if f == nil || g == nil {
		return f == g
	}
	return f.Type == g.Type &&
		f.Group == g.Group &&
		f.Sender == g.Sender &&
		f.Epoch == g.Epoch &&
		f.Seq == g.Seq &&
		f.Count == g.Count &&
		f.Flags == g.Flags &&
		f.Tag == g.Tag &&
		string(f.History) == string(g.History) &&
		string(f.Payload) == string(g.Payload)
}

// AppendRecord appends one record, [len(rec) u16 BE][rec], to payload.
// It fails with ErrPayload (BAD_PAYLOAD), leaving payload unchanged, if
// len(rec) > 65535 or if the result would exceed MaxPayload bytes. The
// caller counts the records it appends into Frame.Count.
func AppendRecord(payload []byte, rec []byte) ([]byte, error) {
	if len(rec) > MaxPayload || len(payload)+RecordLenSize+len(rec) > MaxPayload {
		return payload, frameErr(ReasonBadPayload, len(payload), ErrPayload)
	}
	payload = binary.BigEndian.AppendUint16(payload, uint16(len(rec)))
	return append(payload, rec...), nil
}

// ForEachRecord calls fn for each of the count records of payload, in
// order; rec aliases payload. It first checks that payload is exactly
// count records and fails with ErrPayload (BAD_PAYLOAD; Offset relative to
// the payload) before calling fn at all if not. It stops at, and returns,
// the first error from fn.
func ForEachRecord(payload []byte, count uint16, fn func(rec []byte) error) error {
	if i := recordFramingError(payload, count); i >= 0 {
		return frameErr(ReasonBadPayload, i, ErrPayload)
	}
	off := 0
	for range count {
		n := int(binary.BigEndian.Uint16(payload[off:]))
		off += RecordLenSize
		if err := fn(payload[off : off+n : off+n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// recordFramingError returns -1 if payload is exactly count records, else
// the offset in payload of the first record (or trailing byte) at fault.
func recordFramingError(payload []byte, count uint16) int {
	off := 0
	for range count {
		if len(payload)-off < RecordLenSize {
			return off
		}
		n := int(binary.BigEndian.Uint16(payload[off:]))
		if len(payload)-off-RecordLenSize < n {
			return off
		}
		off += RecordLenSize + n
	}
	if off != len(payload) {
		return off
	}
	return -1
}

// repeatedHistoryID returns -1 if no id other than HistoryNone appears
// twice in hist, else the index of the first repeat.
func repeatedHistoryID(hist []uint8) int {
	var seen [MaxHosts / 64]uint64
	for i, id := range hist {
		if id == HistoryNone {
			continue
		}
		w, bit := id/64, uint64(1)<<(id%64)
		if seen[w]&bit != 0 {
			return i
		}
		seen[w] |= bit
	}
	return -1
}

// ValidFlags reports whether a flags value is allowed in layout v1: the
// FlagKeyPhase bit either way, and otherwise 0, or FlagReadmit with a host
// id in the low byte.
func ValidFlags(fl uint16) bool {
	fl &^= FlagKeyPhase
	return fl == 0 || (fl&FlagReadmit != 0 && fl&^(FlagReadmit|FlagHostMask) == 0)
}
