package daemon

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// fragRecords encodes records as the fuzzer's record stream: each record
// is [len u16 BE][record].
func fragRecords(recs ...[]byte) []byte {
	var b []byte
	for _, r := range recs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(r)))
		b = append(b, r...)
	}
	return b
}

// FuzzReassembly: a reassembler fed an arbitrary sequence of records
// (stream: [len u16][record]..., as agreed entries of one sender would
// carry them) never panics; every message it yields is at most maxMessage
// bytes, carries the id of the record that finished it, and, when it was
// fragmented, is exactly the data of its first fragment followed by that
// of the middle and last fragments accepted since, of the length the first
// announced; an error is errFrag and yields nothing; its buffer stays
// within maxMessage plus one record. Then, on the same (dirty) reassembler,
// split(msg) of a message of at most maxMessage bytes, at a record size
// the config allows, is records of at most maxRecord-2 bytes that
// reassemble to exactly msg with its id, at the last record and not
// before.
func FuzzReassembly(f *testing.F) {
	const id = 0x0102030405060708
	msg := bytes.Repeat([]byte("0123456789abcdef"), 20) // 320 bytes
	three := split(id, msg, 130)                        // first, middle, last
	whole := split(id+1, []byte("small"), 64)
	f.Add(fragRecords(three...), msg, uint32(1<<20), uint16(130))
	f.Add(fragRecords(whole...), []byte("x"), uint32(1<<20), uint16(16))
	f.Add(fragRecords(three[0], three[2]), msg, uint32(1000), uint16(100))                                             // middle missing: too short
	f.Add(fragRecords(three[0], three[1], three[1], three[2]), msg, uint32(1000), uint16(200))                         // duplicated middle: too long
	f.Add(fragRecords(three[1], three[2]), msg, uint32(1000), uint16(1500))                                            // no start
	f.Add(fragRecords(three[0], whole[0], three[1], three[2]), msg, uint32(1000), uint16(16))                          // a whole message in between
	f.Add(fragRecords(three[0], split(id+2, msg, 130)[0], three[1]), msg, uint32(1000), uint16(17))                    // a new start abandons the old
	f.Add(fragRecords(three[0]), msg, uint32(100), uint16(130))                                                        // announced total above the max
	f.Add(fragRecords([]byte{fragFirst, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}, []byte{9}), []byte{}, uint32(1), uint16(65535)) // short first, short record
	f.Add(fragRecords([]byte{7, 0, 0, 0, 0, 0, 0, 0, 1}), []byte{}, uint32(0), uint16(0))                              // bad kind
	f.Fuzz(func(t *testing.T, stream, msg []byte, maxMsg uint32, maxRecord uint16) {
		maxMessage := 1 + int(maxMsg%(64<<20)) // the config allows 1..64 MiB
		var r reassembler
		// The fragmented message being rebuilt, as far as the outputs say.
		var open bool
		var openID uint64
		var openTotal int
		var openBuf []byte
		maxRec := 0
		for k := 0; len(stream) >= 2; k++ {
			n := int(binary.BigEndian.Uint16(stream))
			stream = stream[2:]
			n = min(n, len(stream))
			rec := stream[:n:n]
			stream = stream[n:]
			maxRec = max(maxRec, n)
			gotID, out, done, err := r.add(rec, maxMessage)
			if err != nil {
				if !errors.Is(err, errFrag) || done || out != nil || gotID != 0 {
					t.Fatalf("record %d: err %v with done=%v id=%d msg of %d", k, err, done, gotID, len(out))
				}
				if len(rec) >= fragHeader && (rec[0] == fragMiddle || rec[0] == fragLast) {
					open = false
				}
				continue
			}
			kind, rid, data := rec[0], binary.BigEndian.Uint64(rec[1:]), rec[fragHeader:]
			switch kind {
			case fragWhole:
				if !done || gotID != rid || !bytes.Equal(out, data) {
					t.Fatalf("record %d: whole message: done=%v id %d (record %d) %x, want %x", k, done, gotID, rid, out, data)
				}
				open = false
			case fragFirst:
				if done || out != nil {
					t.Fatalf("record %d: a first fragment finished a message", k)
				}
				open, openID, openTotal = true, rid, int(binary.BigEndian.Uint32(data))
				openBuf = append(openBuf[:0], data[4:]...)
				if openTotal > maxMessage {
					t.Fatalf("record %d: accepted a first fragment announcing %d bytes, max %d", k, openTotal, maxMessage)
				}
			case fragMiddle, fragLast:
				if !open || openID != rid {
					t.Fatalf("record %d: accepted kind %d of message %d without its start", k, kind, rid)
				}
				openBuf = append(openBuf, data...)
				if kind == fragMiddle {
					if done || out != nil {
						t.Fatalf("record %d: a middle fragment finished a message", k)
					}
					break
				}
				open = false
				if !done || gotID != rid || len(out) != openTotal || !bytes.Equal(out, openBuf) {
					t.Fatalf("record %d: last fragment: done=%v id %d (want %d) %d bytes (announced %d)\n got %x\nwant %x",
						k, done, gotID, rid, len(out), openTotal, out, openBuf)
				}
			default:
				t.Fatalf("record %d: kind %d accepted", k, kind)
			}
			if done && len(out) > maxMessage {
				t.Fatalf("record %d: yielded a message of %d bytes, max %d", k, len(out), maxMessage)
			}
			if len(r.buf) > maxMessage+maxRec {
				t.Fatalf("record %d: buffer of %d bytes, max message %d, largest record %d", k, len(r.buf), maxMessage, maxRec)
			}
		}

		// A valid split reassembles, whatever came before.
		if len(msg) > maxMessage {
			msg = msg[:maxMessage]
		}
		mr := 2 + fragHeader + 4 + 1 + int(maxRecord)%(65535-(2+fragHeader+4+1)+1) // batch_bytes' range
		const sid = 0xfeedfacecafebeef
		recs := split(sid, msg, mr)
		for i, rec := range recs {
			if len(rec) > mr-2 {
				t.Fatalf("split: record %d of %d bytes, max record %d", i, len(rec), mr)
			}
			gotID, out, done, err := r.add(rec, maxMessage)
			if err != nil {
				t.Fatalf("split record %d/%d: %v", i, len(recs), err)
			}
			if last := i == len(recs)-1; done != last {
				t.Fatalf("split record %d/%d: done=%v", i, len(recs), done)
			}
			if done && (gotID != sid || !bytes.Equal(out, msg)) {
				t.Fatalf("split of %d bytes into %d records of <= %d: got id %#x %d bytes", len(msg), len(recs), mr, gotID, len(out))
			}
		}
	})
}

// TestReassemblyWholeAboveMax: a whole (unfragmented) record whose data is
// larger than max_message_bytes is delivered as a message, while a
// fragmented message announcing the same size is refused. A host with a
// larger max_message_bytes (or a larger MTU / batch_bytes) than ours makes
// our daemon deliver messages above our configured maximum.
func TestReassemblyWholeAboveMax(t *testing.T) {
	var r reassembler
	rec := split(1, bytes.Repeat([]byte{'x'}, 200), 1500)[0] // one whole record
	if _, msg, done, err := r.add(rec, 100); err == nil || done {
		t.Fatalf("max 100: a whole record of 200 bytes: done=%v msg of %d bytes", done, len(msg))
	}
}
