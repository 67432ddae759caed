package main

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/exo-rack/exo/exo"
)

// The frame tag (format 3): every frame of every other suite carries its
// SipHash-2-4 tag under testKey (raw.bytes seals it). This suite holds the
// frames that do not: forged tags, tags under other keys, and genuine
// frames changed after they were sealed, and shows where the check sits:
// after the codec and the group check, before every other state check. It
// also pins down what the tag covers (exo[0:24], the history, the payload;
// never the tag field or the padding), its byte order and the key
// convention (k0 = little-endian key[0:8]).

// Kinds of vector the coverage check requires in the hex form (vector.Kind).
const (
	kindTagBit      = "BAD_TAG: one bit of the tag flipped"
	kindTagRandom   = "BAD_TAG: a random tag"
	kindOtherKey    = "BAD_TAG: the tag under another key"
	kindKeyHalves   = "BAD_TAG: the key convention (k0/k1 order, byte order)"
	kindTagByteOrd  = "BAD_TAG: the tag written little-endian"
	kindHeaderBit   = "BAD_TAG: a header bit flipped, the tag kept"
	kindHistoryBit  = "BAD_TAG: a history bit flipped, the tag kept"
	kindPayloadBit  = "BAD_TAG: a payload bit flipped, the tag kept"
	kindTagCoverage = "BAD_TAG: a tag over the wrong bytes (tag field or padding included)"
	kindPadding     = "ACCEPT: the padding changed after sealing"
	kindLenMod8     = "ACCEPT: tag message length mod 8"
	kindGroupFirst  = "BAD_GROUP before BAD_TAG"
	kindTagFirst    = "BAD_TAG before the other state checks"
	kindCodecFirst  = "the codec before BAD_TAG"
	kindReplay      = "DUPLICATE: a replay of an accepted frame, tag and all"
)

var kindsRequired = []string{kindTagBit, kindTagRandom, kindOtherKey, kindKeyHalves, kindTagByteOrd,
	kindHeaderBit, kindHistoryBit, kindPayloadBit, kindTagCoverage, kindPadding, kindLenMod8,
	kindGroupFirst, kindTagFirst, kindCodecFirst, kindReplay}

// otherKey is another rack's key: 0f 0e .. 00.
var otherKey = [exo.TagKeyLen]byte{15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}

// keyVariants are the keys an implementation gets when it reads testKey
// with the wrong convention: k0 and k1 exchanged, each half big-endian,
// the whole key reversed.
func keyVariants() []struct {
	name string
	key  [exo.TagKeyLen]byte
} {
	var swapped, halvesBE, reversed [exo.TagKeyLen]byte
	copy(swapped[:8], testKey[8:])
	copy(swapped[8:], testKey[:8])
	for i := range 8 {
		halvesBE[i] = testKey[7-i]
		halvesBE[8+i] = testKey[15-i]
	}
	for i := range testKey {
		reversed[i] = testKey[15-i]
	}
	return []struct {
		name string
		key  [exo.TagKeyLen]byte
	}{
		{"k0_k1_swapped", swapped},
		{"halves_big_endian", halvesBE},
		{"key_reversed", reversed},
	}
}

// forged returns a copy of r with tag t as it is.
func forged(r *raw, t uint64) *raw {
	return mod(r, func(c *raw) { c.Tagging, c.Tag = tagAsIs, t })
}

// keyed returns a copy of r sealed under key.
func keyed(r *raw, key [exo.TagKeyLen]byte) *raw {
	return mod(r, func(c *raw) { c.Tagging, c.Key = tagKey, key })
}

// after returns a copy of r changed by fn once sealed: the tag is kept.
func after(r *raw, fn func(b []byte)) *raw {
	return mod(r, func(c *raw) { c.Forge = fn })
}

// flip flips bit (0 = least significant) of byte off of the frame.
func flip(off, bit int) func(b []byte) {
	return func(b []byte) { b[off] ^= 1 << bit }
}

// sipOver returns SipHash-2-4 under testKey of the bytes sel picks from
// the encoded frame: a tag computed over the wrong bytes.
func sipOver(r *raw, sel func(b []byte) []byte) uint64 {
	b := r.bytes()
	return exo.SipHash24(testKey, sel(b))
}

func (g *gen) suiteTag() {
	const s = "tag"
	A, T := exo.ReasonAccept, exo.ReasonBadTag
	vk := func(name, desc, kind string, intent exo.Reason, in exo.Pointers, r *raw) *vector {
		v := g.vec(s, name, desc, intent, in, r)
		v.Kind = kind
		return v
	}
	st := steady(5, 100) // history [4,3], next sender 0
	v := next(st).withRecords([]byte("tagged"))
	hl := len(v.History)
	pay := exo.HeaderLen + hl // first payload byte

	vk("sealed", "n=5: the valid next frame with its tag under the test key 00 01 .. 0f: accept", "", A, st, v)
	vk("sealed_padded", "the same frame padded to 46 bytes: the padding is not covered, accept", kindPadding, A, st, mod(v, func(r *raw) { r.padTo(0) }))

	// Forged tags.
	for i := range 4 {
		t := g.tagRNG.Uint64()
		vk(fmt.Sprintf("random_%d", i), fmt.Sprintf("a random tag 0x%016x", t), kindTagRandom, T, st, forged(v, t))
	}
	vk("zero", "tag 0", kindTagRandom, T, st, forged(v, 0))
	vk("ones", "tag 0xffffffffffffffff", kindTagRandom, T, st, forged(v, top))
	vk("placeholder", "the placeholder tag of format 2 (carried, not checked then)", kindTagRandom, T, st, forged(v, tagFor(v.Seq)))
	for _, bit := range []int{0, 1, 7, 8, 31, 32, 55, 56, 63} {
		off := exo.OffTag + 7 - bit/8 // the tag is big-endian: bit 0 is in its last byte
		vk(fmt.Sprintf("tag_bit_%d", bit), fmt.Sprintf("the right tag with bit %d (of the big-endian 64-bit value) flipped", bit),
			kindTagBit, T, st, after(v, flip(off, bit%8)))
	}
	vk("tag_little_endian", "the right tag written little-endian (byte order of the tag field)", kindTagByteOrd, T, st,
		after(v, func(b []byte) {
			binary.LittleEndian.PutUint64(b[exo.OffTag:], binary.BigEndian.Uint64(b[exo.OffTag:]))
		}))
	vk("other_key", "sealed under another rack's key 0f 0e .. 00", kindOtherKey, T, st, keyed(v, otherKey))
	near := testKey
	near[15] ^= 0x80
	vk("other_key_one_bit", "sealed under the test key with one bit of byte 15 flipped", kindOtherKey, T, st, keyed(v, near))
	vk("zero_key", "sealed under the all-zero key", kindOtherKey, T, st, keyed(v, [exo.TagKeyLen]byte{}))
	for _, kv := range keyVariants() {
		vk("key_"+kv.name, fmt.Sprintf("sealed under the test key read with another convention (%s): k0 must be the little-endian uint64 of key[0:8], k1 of key[8:16]", kv.name),
			kindKeyHalves, T, st, keyed(v, kv.key))
	}

	// Tags over the wrong bytes.
	vk("over_tag_field_zero", "a tag over the whole frame with the tag field zero (exo[0:32] || rest): the tag field is not part of the message", kindTagCoverage, T, st,
		forged(v, sipOver(v, func(b []byte) []byte {
			c := append([]byte(nil), b...)
			clear(c[exo.OffTag : exo.OffTag+exo.SizeTag])
			return c
		})))
	vk("over_header_only", "a tag over exo[0:24] only (the history and the payload are part of the message)", kindTagCoverage, T, st,
		forged(v, sipOver(v, func(b []byte) []byte { return b[:exo.OffTag] })))
	padded := mod(v, func(r *raw) { r.padTo(0) })
	vk("over_padding", "a tag over the message and the padding zeros after it: padding is never covered", kindTagCoverage, T, st,
		forged(padded, sipOver(padded, func(b []byte) []byte {
			return append(append([]byte(nil), b[:exo.OffTag]...), b[exo.HeaderLen:]...)
		})))
	vk("swapped_halves", "the right tag with its two 32-bit halves exchanged", kindTagByteOrd, T, st,
		after(v, func(b []byte) {
			binary.BigEndian.PutUint64(b[exo.OffTag:], bits.RotateLeft64(binary.BigEndian.Uint64(b[exo.OffTag:]), 32))
		}))

	// Genuine frames changed after sealing (the tag kept): each change
	// alone would give the reason in the description.
	hdr := []struct {
		name, what string
		off, bit   int
	}{
		{"sender", "sender 0 -> 1 (1 is not in the history: would be accepted)", exo.OffSender, 0},
		{"epoch", "epoch 0 -> 1 (would be FUTURE_EPOCH)", exo.OffEpoch + 3, 0},
		{"epoch_msb", "epoch bit 31 (would be FUTURE_EPOCH)", exo.OffEpoch, 7},
		{"seq", "seq 100 -> 101 (would be GAP)", exo.OffSeq + 7, 0},
		{"seq_msb", "seq bit 63 (would be SEQ_TOO_FAR)", exo.OffSeq, 7},
		{"seq_bit7", "seq 100 -> 228 (would be GAP)", exo.OffSeq + 7, 7},
		{"flags", "flags 0 -> READMIT|0 (valid flags: would be accepted)", exo.OffFlags, 7},
		{"flags_host", "flags READMIT|0 -> READMIT|1 of a sealed READMIT frame", exo.OffFlags + 1, 0},
	}
	for _, c := range hdr {
		fr := v
		if c.name == "flags_host" {
			fr = mod(v, func(r *raw) { r.Flags = exo.FlagReadmit })
		}
		vk("header_"+c.name, "a sealed frame with one header bit flipped and the tag kept: "+c.what, kindHeaderBit, T, st, after(fr, flip(c.off, c.bit)))
	}
	vk("history_0", "history [4,3] -> [5,3] after sealing (5 >= n: would be BAD_HISTORY_ID in the state stage)", kindHistoryBit, T, st,
		after(v, flip(exo.OffHistory, 0)))
	vk("history_1", "history [4,3] -> [4,2] after sealing (would be DIVERGENCE)", kindHistoryBit, T, st,
		after(v, flip(exo.OffHistory+1, 0)))
	vk("history_high_bit", "history [4,3] -> [4,0x83] after sealing (would be BAD_HISTORY_ID in the state stage)", kindHistoryBit, T, st,
		after(v, flip(exo.OffHistory+1, 7)))
	vk("payload_first", "the first record byte ('t') flipped after sealing", kindPayloadBit, T, st, after(v, flip(pay+2, 0)))
	vk("payload_last", "the last payload byte flipped after sealing (the last, partial block of the message)", kindPayloadBit, T, st,
		after(v, flip(pay+len(v.Payload)-1, 7)))
	big := steady(16, 1000)
	bigV := next(big).withRecords(make([]byte, hexFrameMax-exo.HeaderLen-8-2))
	vk("payload_last_n16_256", "n=16, a 256-byte frame: its last byte flipped after sealing", kindPayloadBit, T, big,
		after(bigV, flip(hexFrameMax-1, 0)))
	vk("n16_256_sealed", "n=16, the same 256-byte frame sealed: accept", "", A, big, bigV)

	// Padding is not covered: any change of it keeps the frame valid.
	for i, pad := range [][]byte{
		{0xff, 0xff, 0xff, 0xff},
		{0, 0, 0, 0, 0, 0, 0, 1},
		nil, // a copy of the tag
	} {
		name := fmt.Sprintf("padding_%d", i)
		desc := fmt.Sprintf("sealed, then padded with %x: accept", pad)
		r := after(v, nil)
		if pad == nil {
			desc = "sealed, then padded with a copy of its own tag and header: accept"
			r = mod(v, func(c *raw) { c.Pad = make([]byte, 32) })
			r.Forge = func(b []byte) { copy(b[len(b)-32:], b[:32]) }
		} else {
			r.Pad = pad
		}
		vk(name, desc, kindPadding, A, st, r)
	}
	vk("padding_bit_flipped", "a padded sealed frame with one padding bit flipped: accept", kindPadding, A, st,
		after(padded, func(b []byte) { b[len(b)-1] ^= 1 }))
	vk("padding_long_trailer", "sealed, then a 60-byte trailer of 0x5a: accept", kindPadding, A, st,
		mod(v, func(c *raw) { c.Pad = bytesOf(60, 0x5a) }))

	// Every length of the tag's message mod 8 (the last block holds
	// len(m) mod 8 bytes and the length byte), sealed and forged.
	for k := range 8 {
		r := next(st).withRecords(bytesOf(k, byte('a'+k)))
		m := 24 + hl + len(r.Payload)
		vk(fmt.Sprintf("len_mod8_%d", m%8), fmt.Sprintf("a %d-byte record: the tag's message is %d bytes (%d mod 8): accept", k, m, m%8),
			kindLenMod8, A, st, r)
		last := exo.HeaderLen + hl + len(r.Payload) - 1 // the last byte of the message
		what := "its last byte (a record byte) flipped"
		if k == 0 {
			last = exo.HeaderLen + hl - 1 // the record is its length prefix alone: flip the last history id
			what = "its last history id changed from 3 to 2"
		}
		vk(fmt.Sprintf("len_mod8_%d_forged", m%8), fmt.Sprintf("the same frame with %s after sealing (message %d bytes)", what, m),
			kindPayloadBit, T, st, after(r, flip(last, 0)))
	}
	one := steady(1, 10)
	vk("n1_message_24", "n=1 (h=0) token pass: the message is exo[0:24] alone (3 blocks and the length block): accept", kindLenMod8, A, one, next(one))
	vk("n1_message_24_forged", "the same frame with the last header byte before the tag (seq's low byte) flipped", kindHeaderBit, T, one,
		after(next(one), flip(exo.OffTag-1, 0)))

	// Where the check sits.
	G := exo.ReasonBadGroup
	vk("group_beats_tag", "another group (2), the tag of the group-1 frame kept: BAD_GROUP, the tag is never checked", kindGroupFirst, G, st,
		after(v, flip(exo.OffGroup+1, 1)))
	vk("group_other_key", "another group's frame sealed under another key: BAD_GROUP", kindGroupFirst, G, st,
		keyed(mod(v, func(r *raw) { r.Group = 2 }), otherKey))
	vk("group_our_key", "another group's frame sealed under our key (a valid tag): BAD_GROUP all the same", kindGroupFirst, G, st,
		mod(v, func(r *raw) { r.Group = 0x0101 }))
	vk("group_zero_tag", "group 0xffff, tag 0: BAD_GROUP", kindGroupFirst, G, st, forged(mod(v, func(r *raw) { r.Group = 0xffff }), 0))
	h5 := with(st, func(p *exo.Pointers) { p.Halted = true })
	e5 := with(st, func(p *exo.Pointers) { p.Epoch = 5 })
	bad := forged(v, 0x5eed)
	for _, c := range []struct {
		name, what string
		want       exo.Reason // of the same frame sealed
		in         exo.Pointers
		r          *raw
	}{
		{"sender", "sender 9", exo.ReasonBadSender, st, mod(bad, func(r *raw) { r.Sender = 9 })},
		{"histlen", "hist_len 3", exo.ReasonBadHistlen, st, mod(bad, func(r *raw) { r.History = []uint8{4, 3, 2}; r.HistLen = 3 })},
		{"history_id", "history [7,3]", exo.ReasonBadHistoryID, st, mod(bad, func(r *raw) { r.History = []uint8{7, 3} })},
		{"stale_epoch", "state epoch 5, frame epoch 0", exo.ReasonStaleEpoch, e5, bad},
		{"future_epoch", "frame epoch 9", exo.ReasonFutureEpoch, st, mod(bad, func(r *raw) { r.Epoch = 9 })},
		{"halted", "a halted state", exo.ReasonHalted, h5, bad},
		{"duplicate", "seq 99 from its sender 4", exo.ReasonDuplicate, st, mod(bad, func(r *raw) { r.Seq = 99; r.Sender = 4; r.History = []uint8{3, 2} })},
		{"divergence", "history [3,4]", exo.ReasonDivergence, st, mod(bad, func(r *raw) { r.History = []uint8{3, 4} })},
		{"gap", "seq 101", exo.ReasonGap, st, mod(bad, func(r *raw) { r.Seq = 101 })},
		{"too_far", "seq 2^40", exo.ReasonSeqTooFar, st, mod(bad, func(r *raw) { r.Seq = 1 << 40 })},
		{"sender_in_history", "sender 4 = history[0]", exo.ReasonSenderInHistory, st, mod(bad, func(r *raw) { r.Sender = 4 })},
	} {
		vk("tag_beats_"+c.name, fmt.Sprintf("a forged tag and %s (%s when sealed): BAD_TAG first", c.what, c.want), kindTagFirst, T, c.in, c.r)
		// The same frame sealed: the tag passes, the state check decides.
		sealed := mod(c.r, func(r *raw) { r.Tagging = tagSeal })
		vk("sealed_"+c.name, fmt.Sprintf("the same frame sealed: %s, %s", c.what, c.want), "", c.want, c.in, sealed)
	}
	for _, c := range []struct {
		name, what string
		want       exo.Reason
		r          *raw
	}{
		{"version", "version 2", exo.ReasonBadVersion, mod(bad, func(r *raw) { r.Version = 2 })},
		{"type", "type 2", exo.ReasonBadType, mod(bad, func(r *raw) { r.Type = 2 })},
		{"flags", "flags 0x0001", exo.ReasonBadFlags, mod(bad, func(r *raw) { r.Flags = 1 })},
		{"histlen", "hist_len 200", exo.ReasonBadHistlen, mod(bad, func(r *raw) { r.HistLen = 200 })},
		{"history_repeat", "history [4,4]", exo.ReasonBadHistoryID, mod(bad, func(r *raw) { r.History = []uint8{4, 4} })},
		{"payload", "count 2 with one record", exo.ReasonBadPayload, mod(bad, func(r *raw) { r.Count = 2 })},
		{"truncated", "the payload cut short", exo.ReasonBadPayload, mod(bad, func(r *raw) { r.Trunc = pay + 3 })},
		{"malformed", "the header cut at 28 bytes (inside the tag field)", exo.ReasonMalformed, mod(bad, func(r *raw) { r.Trunc = 28 })},
	} {
		vk("codec_"+c.name, "a forged tag and "+c.what+": the codec decides first", kindCodecFirst, c.want, st, c.r)
	}

	// Every roster size: sealed, forged tag, forged history.
	for _, n := range rostersAll {
		p := steady(n, 50)
		r := next(p).withRecords([]byte{byte(n)})
		where := fmt.Sprintf("n=%d (h=%d) at append 50", n, n/2)
		vk(fmt.Sprintf("n%d_sealed", n), where+": the valid next frame: accept", "", A, p, r)
		vk(fmt.Sprintf("n%d_tag_bit", n), where+": the tag's bit 0 flipped", kindTagBit, T, p, after(r, flip(exo.OffTag+7, 0)))
		if h := n / 2; h > 0 {
			id := absent(p)
			vk(fmt.Sprintf("n%d_history_last", n), fmt.Sprintf("%s: the oldest history id changed to %d after sealing", where, id), kindHistoryBit, T, p,
				after(r, func(b []byte) { b[exo.OffHistory+h-1] = id }))
		}
	}

	// JSON only: a large roster and a large payload.
	p64 := steady(64, 1000)
	r64 := next(p64).withRecords([]byte("large roster"))
	vk("n64_sealed", "n=64 (JSON only): the valid next frame: accept", "", A, p64, r64)
	id64 := absent(p64)
	vk("n64_history_last", fmt.Sprintf("n=64 (JSON only): the oldest of 32 history ids changed to %d after sealing", id64), "", T, p64,
		after(r64, func(b []byte) { b[exo.OffHistory+31] = id64 }))
	p5 := steady(5, 10)
	r1200 := next(p5).withRecords(bytesOf(1200, 0x77))
	vk("payload_1200_sealed", "n=5, one 1200-byte record (JSON only): accept", "", A, p5, r1200)
	vk("payload_1200_last", "n=5, one 1200-byte record (JSON only): its last byte flipped after sealing", "", T, p5,
		after(r1200, flip(exo.HeaderLen+2+2+1199, 0)))
}

// absent returns the smallest roster id that is not in p's history.
func absent(p exo.Pointers) uint8 {
	for id := range uint8(p.Hosts) {
		if !p.InHistory(id) {
			return id
		}
	}
	return 0
}

// bytesOf returns n bytes of value x.
func bytesOf(n int, x byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = x
	}
	return b
}

// tagStreams: replays and forgeries between genuine frames.
func (g *gen) tagStreams() {
	A, T, U := exo.ReasonAccept, exo.ReasonBadTag, exo.ReasonDuplicate
	st := steady(5, 20)
	c := &chain{st}
	f20 := c.sendNext([]byte("pay 20"))
	f21 := c.sendNext()
	f22 := c.sendNext([]byte("pay"), []byte("22"))
	f23 := c.sendNext()
	s := g.newStream("tag_replay_n5", "n=5 at append 20: genuine frames, their replays (DUPLICATE: the tag of a frame already appended is valid, seq and the history decide) and forgeries in between (BAD_TAG); no forged frame changes the state", st)
	step := func(note, kind string, intent exo.Reason, r *raw) {
		v := s.step(note, intent, r)
		v.Kind = kind
	}
	step("seq 20 from host 0: accept", "", A, f20)
	step("seq 20 again, as captured (a replay, tag and all): duplicate", kindReplay, U, f20)
	step("seq 20 with its padding changed: duplicate", kindReplay, U, mod(f20, func(r *raw) { r.padTo(0xee) }))
	step("seq 21 with a forged tag: bad tag, state unchanged", kindTagRandom, T, forged(f21, 0x2121212121212121))
	step("seq 21 sealed under another key: bad tag", kindOtherKey, T, keyed(f21, otherKey))
	step("seq 21 carrying the tag of seq 23 (a tag replayed onto another frame): bad tag", kindTagRandom, T,
		forged(f21, binary.BigEndian.Uint64(f23.bytes()[exo.OffTag:])))
	step("seq 21 from host 1: accept", "", A, f21)
	step("seq 22 with a record byte flipped after sealing: bad tag", kindPayloadBit, T, after(f22, flip(exo.HeaderLen+2+2, 0)))
	step("seq 22 from host 2: accept", "", A, f22)
	step("seq 20 replayed once more (below the history now): duplicate", kindReplay, U, f20)
	step("seq 22 replayed: duplicate", kindReplay, U, f22)
	step("seq 23 from host 3 with its sender changed to 4 after sealing (4 may send: it would be accepted): bad tag", kindHeaderBit, T,
		after(f23, func(b []byte) { b[exo.OffSender] = 4 }))
	step("seq 23 from host 3: accept", "", A, f23)
}

// Kinds of the key phase suite (format 4).
const (
	kindPhase1       = "ACCEPT: key phase 1 under slot 1's key"
	kindPhaseNoKey   = "BAD_TAG: key phase 1 with slot 1 empty"
	kindPhaseWrong   = "BAD_TAG: sealed under the other slot's key"
	kindPhaseFlipped = "BAD_TAG: the key phase bit flipped after sealing"
	kindPhaseFlags   = "BAD_FLAGS: key phase with a reserved bit"
)

func init() {
	kindsRequired = append(kindsRequired, kindPhase1, kindPhaseNoKey, kindPhaseWrong, kindPhaseFlipped, kindPhaseFlags)
}

// phase1 returns a copy of r in key phase 1 (sealed under testKey1).
func phase1(r *raw) *raw { return mod(r, func(c *raw) { c.Flags |= exo.FlagKeyPhase }) }

// noKey1 returns a copy of r for a host whose slot 1 is empty.
func noKey1(r *raw) *raw { return mod(r, func(c *raw) { c.NoKey1 = true }) }

// suiteKeyPhase: two key slots (key rotation, docs/security.md section 5).
// The frame's KEY_PHASE bit names the slot whose key its tag is under; an
// empty slot is BAD_TAG; the bit is covered by the tag; the codec ignores it.
func (g *gen) suiteKeyPhase() {
	const s = "keyphase"
	A, T, F := exo.ReasonAccept, exo.ReasonBadTag, exo.ReasonBadFlags
	vk := func(name, desc, kind string, intent exo.Reason, in exo.Pointers, r *raw) {
		g.vec(s, name, desc, intent, in, r).Kind = kind
	}
	st := steady(5, 100)
	v := next(st).withRecords([]byte("phase"))
	p1 := phase1(v)
	vk("phase0", "phase 0 sealed under slot 0's key, slot 1 holds another key: accept", "", A, st, v)
	vk("phase0_no_key1", "phase 0 sealed under slot 0's key, slot 1 empty: accept", "", A, st, noKey1(v))
	vk("phase1", "phase 1 (flags 0x4000) sealed under slot 1's key 10 11 .. 1f: accept", kindPhase1, A, st, p1)
	vk("phase1_padded", "the same, padded: accept", kindPhase1, A, st, mod(p1, func(r *raw) { r.padTo(0) }))
	vk("phase1_no_key1", "phase 1 sealed under slot 1's key, but this host's slot 1 is empty: bad tag", kindPhaseNoKey, T, st, noKey1(p1))
	vk("phase1_under_key0", "phase 1 sealed under slot 0's key: bad tag", kindPhaseWrong, T, st, keyed(p1, testKey))
	vk("phase0_under_key1", "phase 0 sealed under slot 1's key: bad tag", kindPhaseWrong, T, st, keyed(v, testKey1))
	vk("phase1_under_key0_no_key1", "phase 1 sealed under slot 0's key, slot 1 empty: bad tag", kindPhaseNoKey, T, st, noKey1(keyed(p1, testKey)))
	vk("phase_bit_set_after", "phase 0 sealed, then the key phase bit set (the tag kept): bad tag", kindPhaseFlipped, T, st,
		after(v, flip(exo.OffFlags, 6)))
	vk("phase_bit_cleared_after", "phase 1 sealed, then the key phase bit cleared (the tag kept): bad tag", kindPhaseFlipped, T, st,
		after(p1, flip(exo.OffFlags, 6)))
	vk("phase_bit_cleared_no_key1", "phase 1 sealed, the bit cleared, slot 1 empty: bad tag", kindPhaseFlipped, T, st,
		noKey1(after(p1, flip(exo.OffFlags, 6))))
	readmit := mod(p1, func(r *raw) { r.Flags = exo.FlagKeyPhase | exo.FlagReadmit | 2 })
	vk("phase1_readmit", "flags KEY_PHASE|READMIT|2 sealed under slot 1's key: accept", kindPhase1, A, st, readmit)
	vk("phase1_readmit_no_key1", "flags KEY_PHASE|READMIT|2, slot 1 empty: bad tag", kindPhaseNoKey, T, st, noKey1(readmit))
	vk("phase1_reserved_2000", "flags KEY_PHASE|0x2000: the codec refuses (bad flags) before the tag", kindPhaseFlags, F, st,
		mod(p1, func(r *raw) { r.Flags = exo.FlagKeyPhase | 0x2000 }))
	vk("phase1_readmit_reserved", "flags KEY_PHASE|READMIT|0x0100: bad flags", kindPhaseFlags, F, st,
		mod(p1, func(r *raw) { r.Flags = exo.FlagKeyPhase | exo.FlagReadmit | 0x0100 }))
	vk("phase1_group_first", "phase 1 of another group, slot 1 empty: bad group, the tag never checked", "", exo.ReasonBadGroup, st,
		noKey1(mod(p1, func(r *raw) { r.Group = 2 })))
	vk("phase1_tag_bit", "phase 1, the tag's bit 0 flipped: bad tag", kindTagBit, T, st, after(p1, flip(exo.OffTag+7, 0)))
	// The state checks behind a valid phase-1 tag, and the tag before them
	// when slot 1 is empty.
	for _, c := range []struct {
		name string
		want exo.Reason
		in   exo.Pointers
		r    *raw
	}{
		{"gap", exo.ReasonGap, st, mod(p1, func(r *raw) { r.Seq = 101 })},
		{"duplicate", exo.ReasonDuplicate, st, mod(p1, func(r *raw) { r.Seq = 99; r.Sender = 4; r.History = []uint8{3, 2} })},
		{"divergence", exo.ReasonDivergence, st, mod(p1, func(r *raw) { r.History = []uint8{3, 4} })},
		{"future_epoch", exo.ReasonFutureEpoch, st, mod(p1, func(r *raw) { r.Epoch = 9 })},
		{"halted", exo.ReasonHalted, with(st, func(p *exo.Pointers) { p.Halted = true }), p1},
		{"sender", exo.ReasonBadSender, st, mod(p1, func(r *raw) { r.Sender = 9 })},
	} {
		vk("phase1_"+c.name, fmt.Sprintf("phase 1 sealed under slot 1's key: %s", c.want), "", c.want, c.in, c.r)
		vk("phase1_"+c.name+"_no_key1", fmt.Sprintf("the same frame with slot 1 empty: bad tag before %s", c.want), kindPhaseNoKey, T, c.in, noKey1(c.r))
	}
	for _, n := range rostersAll {
		p := steady(n, 50)
		r := phase1(next(p).withRecords([]byte{byte(n), 1}))
		vk(fmt.Sprintf("n%d_phase1", n), fmt.Sprintf("n=%d: the valid next frame in phase 1: accept", n), kindPhase1, A, p, r)
		vk(fmt.Sprintf("n%d_phase1_no_key1", n), fmt.Sprintf("n=%d: the same with slot 1 empty: bad tag", n), kindPhaseNoKey, T, p, noKey1(r))
	}
}

// keyPhaseStreams: a rotation as a receiver sees it. Hosts switch to the
// new key one by one (phase 0 and phase 1 frames interleave, both keys
// valid), frames in flight under the old key are still taken, replays of
// either phase are duplicates; once the old slot is emptied, its frames
// are refused.
func (g *gen) keyPhaseStreams() {
	A, T, U := exo.ReasonAccept, exo.ReasonBadTag, exo.ReasonDuplicate
	st := steady(5, 40)
	c := &chain{st}
	f := make([]*raw, 6)
	for i := range f {
		f[i] = c.sendNext([]byte(fmt.Sprintf("rot %d", i)))
	}
	s := g.newStream("keyphase_rotation_n5", "n=5 at append 40, both key slots valid: hosts switch to key phase 1 one by one; frames of either phase are taken in order, replays of either are duplicates", st)
	step := func(note, kind string, intent exo.Reason, r *raw) { s.step(note, intent, r).Kind = kind }
	step("seq 40 from host 0, phase 0: accept", "", A, f[0])
	step("seq 41 from host 1, phase 1 (it switched): accept", kindPhase1, A, phase1(f[1]))
	step("seq 42 from host 2, phase 0 (not yet switched): accept", "", A, f[2])
	step("seq 41 again in phase 1 (a replay): duplicate", "", U, phase1(f[1]))
	step("seq 41 again as phase 0 (a retransmission sealed under the old key): duplicate", "", U, f[1])
	step("seq 43 from host 3, phase 1 sealed under slot 0's key: bad tag", kindPhaseWrong, T, keyed(phase1(f[3]), testKey))
	step("seq 43 from host 3, phase 1: accept", kindPhase1, A, phase1(f[3]))
	step("seq 44 from host 4, phase 1: accept", kindPhase1, A, phase1(f[4]))
	step("seq 45 from host 0, phase 1: accept", kindPhase1, A, phase1(f[5]))

	// The next rotation goes back to phase 0; once it is done, slot 1 (the
	// old key) is emptied.
	st2 := steady(5, 60)
	c2 := &chain{st2}
	a := noKey1(c2.sendNext([]byte("new")))
	b := noKey1(c2.sendNext([]byte("late")))
	s2 := g.newStream("keyphase_old_retired_n5", "n=5 at append 60, a rotation from phase 1 back to phase 0 done and slot 1 (the old key) emptied: frames of the old phase are refused, however genuine", st2)
	s2.step("seq 60 from host 0, phase 0: accept", A, a)
	s2.step("seq 61 from host 1, phase 1 under the retired key (a host still on the old key): bad tag", T, phase1(b)).Kind = kindPhaseNoKey
	s2.step("seq 60 replayed in phase 1 under the retired key: bad tag (not even a duplicate)", T, phase1(a)).Kind = kindPhaseNoKey
	s2.step("seq 61 from host 1, phase 0: accept", A, b)
}
