package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A published message travels as one or more payload records of
// consecutive entries of its sender. Each record starts with a 9-byte
// header: kind (1 byte) and the message id (8 bytes, unique per sender);
// the first fragment of a split message adds its total length (4 bytes).
//
//	kind 0 whole:  [0][id u64][data]
//	kind 1 first:  [1][id u64][total u32][data]
//	kind 2 middle: [2][id u64][data]
//	kind 3 last:   [3][id u64][data]
const (
	fragWhole  = 0
	fragFirst  = 1
	fragMiddle = 2
	fragLast   = 3

	fragHeader = 9
)

// split cuts a message into records whose total size (with the 2-byte
// record length of the wire) fits maxRecord-2 bytes each.
func split(id uint64, msg []byte, maxRecord int) [][]byte {
	room := maxRecord - 2 - fragHeader - 4
	if len(msg) <= room+4 {
		rec := make([]byte, fragHeader+len(msg))
		rec[0] = fragWhole
		binary.BigEndian.PutUint64(rec[1:], id)
		copy(rec[fragHeader:], msg)
		return [][]byte{rec}
	}
	var out [][]byte
	for off := 0; off < len(msg); off += room {
		end := min(off+room, len(msg))
		kind := byte(fragMiddle)
		hdr := fragHeader
		switch {
		case off == 0:
			kind, hdr = fragFirst, fragHeader+4
		case end == len(msg):
			kind = fragLast
		}
		rec := make([]byte, hdr+end-off)
		rec[0] = kind
		binary.BigEndian.PutUint64(rec[1:], id)
		if kind == fragFirst {
			binary.BigEndian.PutUint32(rec[fragHeader:], uint32(len(msg)))
		}
		copy(rec[hdr:], msg[off:end])
		out = append(out, rec)
	}
	return out
}

// errFrag reports a record that breaks the fragment rules.
var errFrag = errors.New("bad fragment")

// reassembler rebuilds the messages of one sender from its records, in
// agreed order.
type reassembler struct {
	id    uint64
	total int
	buf   []byte
	open  bool
}

// add takes one record; it returns the message id and the complete message
// when rec finishes one. A message left incomplete by a new first fragment
// (its rest was dropped by a view change) is discarded.
func (r *reassembler) add(rec []byte, maxMessage int) (id uint64, msg []byte, done bool, err error) {
	if len(rec) < fragHeader {
		return 0, nil, false, fmt.Errorf("%w: %d bytes", errFrag, len(rec))
	}
	kind, id, data := rec[0], binary.BigEndian.Uint64(rec[1:]), rec[fragHeader:]
	switch kind {
	case fragWhole:
		r.open = false
		if len(data) > maxMessage {
			return 0, nil, false, fmt.Errorf("%w: message of %d bytes", errFrag, len(data))
		}
		return id, data, true, nil
	case fragFirst:
		if len(data) < 4 {
			return 0, nil, false, fmt.Errorf("%w: short first fragment", errFrag)
		}
		total := int(binary.BigEndian.Uint32(data))
		if total > maxMessage {
			return 0, nil, false, fmt.Errorf("%w: message of %d bytes", errFrag, total)
		}
		r.id, r.total, r.open = id, total, true
		r.buf = append(r.buf[:0], data[4:]...)
		return 0, nil, false, nil
	case fragMiddle, fragLast:
		if !r.open || r.id != id {
			r.open = false
			return 0, nil, false, fmt.Errorf("%w: fragment of message %d without its start", errFrag, id)
		}
		r.buf = append(r.buf, data...)
		if len(r.buf) > r.total {
			r.open = false
			return 0, nil, false, fmt.Errorf("%w: message %d longer than announced", errFrag, id)
		}
		if kind == fragMiddle {
			return 0, nil, false, nil
		}
		r.open = false
		if len(r.buf) != r.total {
			return 0, nil, false, fmt.Errorf("%w: message %d has %d of %d bytes", errFrag, id, len(r.buf), r.total)
		}
		out := append([]byte(nil), r.buf...)
		return id, out, true, nil
	}
	return 0, nil, false, fmt.Errorf("%w: kind %d", errFrag, kind)
}

// recordID returns the message id a record belongs to.
func recordID(rec []byte) (uint64, bool) {
	if len(rec) < fragHeader {
		return 0, false
	}
	return binary.BigEndian.Uint64(rec[1:]), true
}
