package exo

import "bytes"

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
