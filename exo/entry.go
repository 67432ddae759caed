package exo

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Entry is one position of the log: the frame that was appended there.
// Entries are identified by (Epoch, Seq, Sender): a host never sends two
// different frames with the same three values, so equal identities mean equal
// contents.
type Entry struct {
	Seq     uint64
	Epoch   uint32  // epoch the frame was sent in
	Sender  uint8   // who sent it
	History []uint8 // the sender's history when it sent (h ids)
	Count   uint16  // number of payload records (0: a token pass)
	Flags   uint16  // 0, or FlagReadmit | host id (never FlagKeyPhase: the key phase is the frame's, not the entry's)
	Payload []byte  // records, as on the wire
}

// Equal reports whether two entries are the same frame.
func (e *Entry) Equal(o *Entry) bool {
	return e.Seq == o.Seq && e.Epoch == o.Epoch && e.Sender == o.Sender &&
		e.Count == o.Count && e.Flags == o.Flags && bytes.Equal(e.History, o.History) &&
		bytes.Equal(e.Payload, o.Payload)
}

// SameID reports whether two entries have the same identity.
func (e *Entry) SameID(o *Entry) bool {
	return e.Seq == o.Seq && e.Epoch == o.Epoch && e.Sender == o.Sender
}

// Clone returns a deep copy of e.
func (e Entry) Clone() Entry {
	e.History = append([]uint8(nil), e.History...)
	e.Payload = append([]byte(nil), e.Payload...)
	return e
}

// Frame returns the frame that carries e in group g, under key phase 0
// (Node sets the phase of the frames it sends).
func (e *Entry) Frame(group uint16) Frame {
	return Frame{Type: FrameData, Group: group, Sender: e.Sender, Epoch: e.Epoch,
		Seq: e.Seq, Count: e.Count, Flags: e.Flags, History: e.History, Payload: e.Payload}
}

// Readmits returns the host this entry re-admits to the token order, if any.
func (e *Entry) Readmits() (uint8, bool) {
	return uint8(e.Flags & FlagHostMask), e.Flags&FlagReadmit != 0
}

// Records calls fn for every payload record of e, in order.
func (e *Entry) Records(fn func(rec []byte) error) error {
	return ForEachRecord(e.Payload, e.Count, fn)
}

// arena hands out copies of byte slices from slabs so that appending an
// entry does not allocate per frame. Slabs start small and double up to
// maxSlab, so that an idle host costs little memory.
type arena struct{ slab []byte }

const (
	minSlab = 4 << 10
	maxSlab = 1 << 20
)

func (a *arena) copy(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if len(b) > maxSlab/4 {
		return append([]byte(nil), b...)
	}
	if cap(a.slab)-len(a.slab) < len(b) {
		size := min(max(2*cap(a.slab), minSlab), maxSlab)
		for size < len(b) {
			size *= 2
		}
		a.slab = make([]byte, 0, size)
	}
	start := len(a.slab)
	a.slab = append(a.slab, b...)
	return a.slab[start:len(a.slab):len(a.slab)]
}

// entryFixed is the size of an entry's binary form without its history and
// payload.
const entryFixed = 8 + 4 + 1 + 2 + 2 + 1 + 4

// ErrEntryEncoding is returned for a malformed binary entry.
var ErrEntryEncoding = errors.New("exo: malformed binary entry")

// AppendBinary appends e's binary form to b: seq u64, epoch u32, sender u8,
// flags u16, count u16, history length u8, history, payload length u32,
// payload (integers big-endian). The durable log's records and the OOB
// messages' entries are in it: one encoding, no reflection, about a tenth of
// gob's cost for a log batch.
func (e *Entry) AppendBinary(b []byte) ([]byte, error) {
	if len(e.History) > 255 {
		return b, ErrEntryEncoding
	}
	b = binary.BigEndian.AppendUint64(b, e.Seq)
	b = binary.BigEndian.AppendUint32(b, e.Epoch)
	b = append(b, e.Sender)
	b = binary.BigEndian.AppendUint16(b, e.Flags)
	b = binary.BigEndian.AppendUint16(b, e.Count)
	b = append(b, uint8(len(e.History)))
	b = append(b, e.History...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Payload)))
	return append(b, e.Payload...), nil
}

// BinarySize is the length of e's binary form.
func (e *Entry) BinarySize() int { return entryFixed + len(e.History) + len(e.Payload) }

// DecodeEntry decodes the entry at the front of b and returns the rest of
// b. The entry's History and Payload alias b (nil when empty): clone them
// if b is reused.
func DecodeEntry(b []byte) (Entry, []byte, error) {
	var e Entry
	if len(b) < entryFixed {
		return e, b, ErrEntryEncoding
	}
	e.Seq = binary.BigEndian.Uint64(b)
	e.Epoch = binary.BigEndian.Uint32(b[8:])
	e.Sender = b[12]
	e.Flags = binary.BigEndian.Uint16(b[13:])
	e.Count = binary.BigEndian.Uint16(b[15:])
	hl := int(b[17])
	if len(b) < entryFixed+hl {
		return e, b, ErrEntryEncoding
	}
	if hl > 0 {
		e.History = b[18 : 18+hl : 18+hl]
	}
	pl := binary.BigEndian.Uint32(b[18+hl:])
	rest := b[entryFixed+hl:]
	if uint64(len(rest)) < uint64(pl) {
		return e, b, ErrEntryEncoding
	}
	if pl > 0 {
		e.Payload = rest[:pl:pl]
	}
	return e, rest[pl:], nil
}
