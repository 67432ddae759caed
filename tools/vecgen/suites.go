package main

import (
	"fmt"
	"math"

	"github.com/exo-rack/exo/exo"
)

// The hand-built suites. Each vector says what it was built to exercise
// (its intent); the expected verdict and state written to the files are
// still the Go core's (evaluate), and generation fails if the two differ.

// with returns a copy of p changed by fn.
func with(p exo.Pointers, fn func(*exo.Pointers)) exo.Pointers {
	fn(&p)
	return p
}

// mod returns a copy of r changed by fn.
func mod(r *raw, fn func(*raw)) *raw {
	c := r.clone()
	fn(c)
	return c
}

// rostersAll are the roster sizes every suite that loops over n uses.
var rostersAll = []int{1, 2, 3, 4, 5, 7, 16}

const (
	top = math.MaxUint64 // 2^64-1
	e32 = 1 << 32        // 2^32
)

func (g *gen) suiteAccept() {
	const s = "accept"
	A := exo.ReasonAccept
	for _, n := range append(append([]int(nil), rostersAll...), 32, 33) {
		fresh := exo.NewPointers(1, n, exo.DefaultSeqWindow)
		g.vec(s, fmt.Sprintf("n%d_fresh_from_0", n),
			fmt.Sprintf("n=%d, fresh state (append 0, history all X): host 0 sends seq 0 with an all-X history", n),
			A, fresh, from(fresh, 0))
		if n > 1 {
			g.vec(s, fmt.Sprintf("n%d_fresh_from_last", n),
				fmt.Sprintf("n=%d, fresh state: the first frame of a new rack may come from any host (here %d)", n, n-1),
				A, fresh, from(fresh, uint8(n-1)))
		}
		st := steady(n, 10)
		g.vec(s, fmt.Sprintf("n%d_token_pass", n),
			fmt.Sprintf("n=%d, steady state at append 10: the token holder passes the token (count 0, payload_len 0)", n),
			A, st, next(st))
		g.vec(s, fmt.Sprintf("n%d_one_record", n),
			fmt.Sprintf("n=%d, steady state at append 10: one record \"hello\"", n),
			A, st, next(st).withRecords([]byte("hello")))
		g.vec(s, fmt.Sprintf("n%d_batch", n),
			fmt.Sprintf("n=%d, steady state at append 10: a batch of 4 records, one of them empty", n),
			A, st, next(st).withRecords([]byte("alpha"), nil, []byte{0xde, 0xad, 0xbe, 0xef}, []byte("omega-record")))
		h := uint64(n / 2)
		first := steady(n, h)
		g.vec(s, fmt.Sprintf("n%d_first_agreement", n),
			fmt.Sprintf("n=%d: appending seq h=%d agrees seq 0 (agreed 0 -> 1)", n, h),
			A, first, next(first))
	}
	st := steady(5, 10)
	for _, fl := range []uint16{exo.FlagReadmit | 2, exo.FlagReadmit, exo.FlagReadmit | 4, exo.FlagReadmit | 0xFF} {
		g.vec(s, fmt.Sprintf("readmit_%04x", fl),
			fmt.Sprintf("n=5: flags READMIT|host %d (0x%04x) is a valid flags value; the fast path does not check the host id against the roster", fl&exo.FlagHostMask, fl),
			A, st, mod(next(st), func(r *raw) { r.Flags = fl }))
	}
	g.vec(s, "readmit_batch", "n=5: READMIT|1 on an entry that also carries 2 records", A, st,
		mod(next(st), func(r *raw) { r.Flags = exo.FlagReadmit | 1 }).withRecords([]byte("x"), []byte("yz")))
	g.vec(s, "takeover_out_of_order", "n=5, history [4,3]: host 1 sends instead of host 0 (a token takeover); the fast path does not enforce token order, only the distinct-sender rule",
		A, st, from(st, 1))
	x := steady(5, 1)
	g.vec(s, "history_with_x", "n=5, append 1, history [0,X]: host 1 sends seq 1 with history [0,X]", A, x, next(x))
	vc := with(steady(5, 40), func(p *exo.Pointers) { p.ClearHistory(); p.Epoch = 3; p.Agreed = 37 })
	g.vec(s, "after_view_change", "n=5, epoch 3, append 40, history [X,X] (as after a view change): host 2 sends seq 40 with [X,X]", A, vc, from(vc, 2))
	for _, grp := range []uint16{0, 0x0102, 0xFFFF} {
		p := with(st, func(p *exo.Pointers) { p.Group = grp })
		g.vec(s, fmt.Sprintf("group_%04x", grp), fmt.Sprintf("group 0x%04x in state and frame", grp), A, p, next(p))
	}
	for _, ep := range []uint32{1, 0x01020304, math.MaxUint32} {
		p := with(st, func(p *exo.Pointers) { p.Epoch = ep })
		g.vec(s, fmt.Sprintf("epoch_%08x", ep), fmt.Sprintf("epoch 0x%08x in state and frame (big-endian 32-bit compare)", ep), A, p, next(p))
	}
	big := steady(16, 1000)
	rec := make([]byte, hexFrameMax-exo.HeaderLen-8-2)
	for i := range rec {
		rec[i] = byte(i)
	}
	g.vec(s, "n16_max_hex_frame", fmt.Sprintf("n=16: one %d-byte record, a frame of exactly %d bytes (the largest in the hex form)", len(rec), hexFrameMax),
		A, big, next(big).withRecords(rec))
	many := make([][]byte, 40)
	for i := range many {
		many[i] = []byte{byte(i)}
	}
	g.vec(s, "n7_batch_40", "n=7: a batch of 40 one-byte records", A, steady(7, 77), next(steady(7, 77)).withRecords(many...))
}

func (g *gen) suitePadding() {
	const s = "padding"
	A := exo.ReasonAccept
	st := steady(5, 10)
	g.vec(s, "n5_pass_zero_pad", "n=5 token pass (34 bytes) padded with zeros to 46 bytes (a 60-byte Ethernet frame): padding ignored",
		A, st, next(st).padTo(0))
	g.vec(s, "n5_pass_garbage_pad", "n=5 token pass padded with 0xAA to 46 bytes: padding of any value is ignored",
		A, st, next(st).padTo(0xAA))
	g.vec(s, "n5_pad_looks_like_record", "n=5 token pass (count 0) whose padding reads as a record [00 03 'a' 'b' 'c']: padding is never payload",
		A, st, mod(next(st), func(r *raw) { r.Pad = []byte{0, 3, 'a', 'b', 'c', 0, 0, 0, 0, 0, 0, 0} }))
	g.vec(s, "n5_pad_looks_like_header", "n=5 token pass whose padding starts like another Exo header: ignored",
		A, st, mod(next(st), func(r *raw) { r.Pad = []byte{1, 1, 0, 1, 2, 2, 0, 0, 0, 0, 0, 0} }))
	g.vec(s, "n5_record_padded", "n=5, one 3-byte record (39 bytes) padded to 46", A, st, next(st).withRecords([]byte("abc")).padTo(0x55))
	n1 := steady(1, 10)
	g.vec(s, "n1_pass_padded", "n=1 token pass (32 bytes, no history) padded to 46", A, n1, next(n1).padTo(0))
	n16 := steady(16, 10)
	g.vec(s, "n16_pass_padded", "n=16 token pass (40 bytes) padded to 46", A, n16, next(n16).padTo(0xFF))
	g.vec(s, "n5_exactly_46", "n=5, one 10-byte record: 46 bytes, no padding needed", A, st, next(st).withRecords([]byte("0123456789")))
	g.vec(s, "n5_long_trailer", "n=5 token pass followed by 40 trailing bytes (beyond the 60-byte minimum): ignored",
		A, st, mod(next(st), func(r *raw) {
			for i := range 40 {
				r.Pad = append(r.Pad, byte(0xC0+i))
			}
		}))
	g.vec(s, "n5_gap_padded", "a padded GAP frame: padding does not change the verdict", exo.ReasonGap, st,
		mod(next(st), func(r *raw) { r.Seq++ }).padTo(0))
	g.vec(s, "n5_dup_padded", "a padded DUPLICATE frame", exo.ReasonDuplicate, st,
		from(steady(5, 9), 4).padTo(0))
	g.vec(s, "n5_payload_into_padding", "n=5: payload_len 12 and count 1, record [00 02 aa bb], the other 8 bytes of payload_len are padding zeros: BAD_PAYLOAD (bytes are within the frame, but not exactly count records)",
		exo.ReasonBadPayload, st, mod(next(st), func(r *raw) {
			r.Payload = []byte{0, 2, 0xaa, 0xbb}
			r.Count = 1
			r.PayloadLen = 12
			r.Pad = make([]byte, 8)
		}))
}

func (g *gen) suiteCodec() {
	const s = "codec"
	st := steady(5, 10)
	v := next(st).withRecords([]byte("hello"))
	M, V, T, F := exo.ReasonMalformed, exo.ReasonBadVersion, exo.ReasonBadType, exo.ReasonBadFlags
	HL, P, HI := exo.ReasonBadHistlen, exo.ReasonBadPayload, exo.ReasonBadHistoryID

	g.vec(s, "malformed_empty", "a zero-length frame", M, st, &raw{Empty: true})
	g.vec(s, "malformed_version_only", "1 byte: version 1 and nothing else", M, st, mod(v, func(r *raw) { r.Trunc = 1 }))
	for _, n := range []int{2, 16, 24, 31} {
		g.vec(s, fmt.Sprintf("malformed_header_%d", n), fmt.Sprintf("a valid frame cut to %d bytes (header incomplete)", n), M, st,
			mod(v, func(r *raw) { r.Trunc = n }))
	}
	g.vec(s, "malformed_header_only", "n=5: the 32-byte header of a frame with hist_len 2, nothing after it", M, st, mod(v, func(r *raw) { r.Trunc = 32 }))
	g.vec(s, "malformed_history_cut", "n=5: hist_len 2 but only 1 history byte", M, st, mod(v, func(r *raw) { r.Trunc = 33 }))
	s16 := steady(16, 10)
	g.vec(s, "malformed_n16_history_cut", "n=16: hist_len 8 but only 4 history bytes", M, s16, mod(next(s16), func(r *raw) { r.Trunc = 36 }))
	g.vec(s, "malformed_histlen_128_short", "hist_len 128 (allowed by the codec) in a 40-byte frame", M, st,
		mod(v, func(r *raw) { r.HistLen = 128; r.Payload = nil; r.PayloadLen = 0; r.Count = 0; r.Pad = make([]byte, 6) }))
	g.vec(s, "malformed_beats_payload", "history cut short and payload_len 0xFFFF beyond the frame: the history's bounds are checked first (MALFORMED, not BAD_PAYLOAD)", M, st,
		mod(v, func(r *raw) { r.PayloadLen = 0xFFFF; r.Trunc = 33 }))

	for _, ver := range []uint8{0, 2, 0xFF} {
		g.vec(s, fmt.Sprintf("bad_version_%02x", ver), fmt.Sprintf("version %d", ver), V, st, mod(v, func(r *raw) { r.Version = ver }))
	}
	g.vec(s, "bad_version_1_byte", "1 byte, version 2: version is checked before the length (BAD_VERSION, not MALFORMED)", V, st,
		mod(v, func(r *raw) { r.Version = 2; r.Trunc = 1 }))
	g.vec(s, "bad_version_short", "10 bytes, version 2 (a shorter later layout)", V, st, mod(v, func(r *raw) { r.Version = 2; r.Trunc = 10 }))
	g.vec(s, "bad_version_beats_type", "version 2 and type 9: version first", V, st, mod(v, func(r *raw) { r.Version = 2; r.Type = 9 }))

	for _, ty := range []uint8{0, 2, 0x81, 0xFF} {
		g.vec(s, fmt.Sprintf("bad_type_%02x", ty), fmt.Sprintf("type %d", ty), T, st, mod(v, func(r *raw) { r.Type = ty }))
	}
	g.vec(s, "bad_type_beats_flags", "type 2 and flags 0x0001: type first", T, st, mod(v, func(r *raw) { r.Type = 2; r.Flags = 1 }))
	g.vec(s, "malformed_beats_type", "31 bytes with type 2: the header length is checked before the type", M, st,
		mod(v, func(r *raw) { r.Type = 2; r.Trunc = 31 }))

	for _, fl := range []uint16{0x0001, 0x0002, 0x00FF, 0x0100, 0x2000, 0x6000, 0x8100, 0xA002, 0xE002, 0x7FFF, 0xFFFF} {
		g.vec(s, fmt.Sprintf("bad_flags_%04x", fl), fmt.Sprintf("flags 0x%04x: KEY_PHASE aside, neither 0 nor READMIT|host", fl), F, st, mod(v, func(r *raw) { r.Flags = fl }))
	}
	g.vec(s, "bad_flags_beats_histlen", "flags 0x0001 and hist_len 200: flags first", F, st, mod(v, func(r *raw) { r.Flags = 1; r.HistLen = 200 }))

	for _, hl := range []uint8{129, 200, 255} {
		g.vec(s, fmt.Sprintf("bad_histlen_%d", hl), fmt.Sprintf("hist_len %d > 128 (codec)", hl), HL, st, mod(v, func(r *raw) { r.HistLen = hl }))
	}
	g.vec(s, "bad_histlen_beats_malformed", "hist_len 129 in a 32-byte frame: hist_len <= 128 is checked before the history's bounds", HL, st,
		mod(v, func(r *raw) { r.HistLen = 129; r.Trunc = 32 }))

	g.vec(s, "bad_payload_beyond_frame", "payload_len 7 but only 5 payload bytes present", P, st, mod(v, func(r *raw) { r.Trunc = 32 + 2 + 5 }))
	g.vec(s, "bad_payload_len_ffff", "payload_len 0xFFFF in a 41-byte frame", P, st, mod(v, func(r *raw) { r.PayloadLen = 0xFFFF }))
	g.vec(s, "bad_payload_count1_empty", "count 1, payload_len 0", P, st, mod(next(st), func(r *raw) { r.Count = 1 }))
	g.vec(s, "bad_payload_count0_bytes", "count 0 with 3 payload bytes", P, st, mod(next(st), func(r *raw) { r.Payload = []byte{0, 1, 'x'}; r.PayloadLen = 3 }))
	g.vec(s, "bad_payload_record_overrun", "count 1, record length 10 in a 7-byte payload", P, st, mod(v, func(r *raw) { r.Payload[1] = 10 }))
	g.vec(s, "bad_payload_record_short", "count 1, record length 4 in a 7-byte payload (1 byte left over)", P, st, mod(v, func(r *raw) { r.Payload[1] = 4 }))
	g.vec(s, "bad_payload_trailing", "one record and 1 trailing byte inside payload_len", P, st,
		mod(v, func(r *raw) { r.Payload = append(r.Payload, 0); r.PayloadLen++ }))
	g.vec(s, "bad_payload_count_high", "count 2 but one record", P, st, mod(v, func(r *raw) { r.Count = 2 }))
	g.vec(s, "bad_payload_count_low", "count 1 but two records", P, st, mod(v, func(r *raw) {
		r.withRecords([]byte("a"), []byte("b"))
		r.Count = 1
	}))
	g.vec(s, "bad_payload_half_prefix", "count 1, payload_len 1 (half a length prefix)", P, st,
		mod(next(st), func(r *raw) { r.Payload = []byte{0}; r.PayloadLen = 1; r.Count = 1 }))
	g.vec(s, "bad_payload_count_ffff", "count 65535 with one record", P, st, mod(v, func(r *raw) { r.Count = 0xFFFF }))

	g.vec(s, "bad_history_id_repeat", "n=5: history [1,1] (repeated id, codec)", HI, st, mod(v, func(r *raw) { r.History = []uint8{1, 1} }))
	s7 := steady(7, 10)
	g.vec(s, "bad_history_id_repeat_n7", "n=7: history [3,2,3]", HI, s7, mod(next(s7), func(r *raw) { r.History = []uint8{3, 2, 3} }))
	g.vec(s, "bad_history_id_repeat_far", "n=16: history [9,8,7,6,5,4,3,9]", HI, s16,
		mod(next(s16), func(r *raw) { r.History = []uint8{9, 8, 7, 6, 5, 4, 3, 9} }))
	g.vec(s, "bad_history_id_repeat_beats_payload", "history [2,2] and bad record framing: the repeated id is found first", HI, st,
		mod(v, func(r *raw) { r.History = []uint8{2, 2}; r.Count = 3 }))
	g.vec(s, "bad_history_id_repeat_beats_group", "history [4,4] and a foreign group: the codec runs before the state checks", HI, st,
		mod(v, func(r *raw) { r.History = []uint8{4, 4}; r.Group = 77 }))
	g.vec(s, "bad_payload_beats_group", "bad framing and a foreign group: codec first", P, st, mod(v, func(r *raw) { r.Count = 0; r.Group = 77 }))
	g.vec(s, "repeat_x_allowed", "n=5, fresh state: history [X,X] repeats 0xFF, which is allowed", exo.ReasonAccept,
		exo.NewPointers(1, 5, 1024), from(exo.NewPointers(1, 5, 1024), 3))
}

func (g *gen) suiteState() {
	const s = "state"
	st := steady(5, 100) // history [4,3], next sender 0
	v := next(st).withRecords([]byte("state"))
	s16 := steady(16, 100)

	G := exo.ReasonBadGroup
	g.vec(s, "bad_group", "frame group 2, state group 1", G, st, mod(v, func(r *raw) { r.Group = 2 }))
	g.vec(s, "bad_group_ffff", "frame group 0xFFFF, state group 1", G, st, mod(v, func(r *raw) { r.Group = 0xFFFF }))
	g.vec(s, "bad_group_low_byte", "state group 0x0100, frame group 0x0001 (16-bit big-endian compare)", G,
		with(st, func(p *exo.Pointers) { p.Group = 0x0100 }), mod(v, func(r *raw) { r.Group = 0x0001 }))
	g.vec(s, "bad_group_beats_sender", "foreign group and sender 9: group first", G, st, mod(v, func(r *raw) { r.Group = 3; r.Sender = 9 }))

	S := exo.ReasonBadSender
	g.vec(s, "bad_sender_n", "n=5: sender 5", S, st, mod(v, func(r *raw) { r.Sender = 5 }))
	g.vec(s, "bad_sender_ff", "n=5: sender 0xFF", S, st, mod(v, func(r *raw) { r.Sender = 0xFF }))
	g.vec(s, "bad_sender_n1", "n=1: sender 1", S, steady(1, 5), mod(next(steady(1, 5)), func(r *raw) { r.Sender = 1 }))
	g.vec(s, "bad_sender_n16", "n=16: sender 16", S, s16, mod(next(s16), func(r *raw) { r.Sender = 16 }))
	g.vec(s, "bad_sender_beats_histlen", "sender 7 and hist_len 3: sender first", S, st,
		mod(v, func(r *raw) { r.Sender = 7; r.History = []uint8{4, 3, 2}; r.HistLen = 3 }))

	HL := exo.ReasonBadHistlen
	for _, c := range []struct {
		n  int
		hl int
	}{{5, 0}, {5, 1}, {5, 3}, {5, 128}, {4, 1}, {4, 3}, {1, 1}, {2, 0}, {2, 2}, {3, 2}, {7, 2}, {16, 7}, {16, 9}, {16, 0}} {
		p := steady(c.n, 100)
		r := next(p)
		h := make([]uint8, c.hl)
		for i := range h {
			h[i] = exo.HistoryNone
			if i < len(r.History) {
				h[i] = r.History[i]
			}
		}
		r.History = h
		r.fix()
		g.vec(s, fmt.Sprintf("bad_histlen_n%d_%d", c.n, c.hl),
			fmt.Sprintf("n=%d (h=%d): hist_len %d (state check hist_len == floor(n/2))", c.n, c.n/2, c.hl), HL, p, r)
	}
	g.vec(s, "bad_histlen_beats_history_id", "hist_len 3 (n=5) with history id 9: hist_len first", HL, st,
		mod(v, func(r *raw) { r.History = []uint8{9, 4, 3}; r.HistLen = 3 }))

	HI := exo.ReasonBadHistoryID
	g.vec(s, "bad_history_id_n", "n=5: history [5,3] (5 is not a roster id)", HI, st, mod(v, func(r *raw) { r.History = []uint8{5, 3} }))
	g.vec(s, "bad_history_id_second", "n=5: history [4,6]", HI, st, mod(v, func(r *raw) { r.History = []uint8{4, 6} }))
	g.vec(s, "bad_history_id_fe", "n=5: history [0xFE,3] (0xFE is not 'none')", HI, st, mod(v, func(r *raw) { r.History = []uint8{0xFE, 3} }))
	g.vec(s, "bad_history_id_n16", "n=16: id 16 in the last slot", HI, s16, mod(next(s16), func(r *raw) { r.History[7] = 16 }))
	g.vec(s, "bad_history_id_n2", "n=2: history [2]", HI, steady(2, 9), mod(next(steady(2, 9)), func(r *raw) { r.History = []uint8{2} }))
	g.vec(s, "bad_history_id_beats_epoch", "history id 7 (n=5) and a stale epoch: history ids first", HI,
		with(st, func(p *exo.Pointers) { p.Epoch = 4 }), mod(v, func(r *raw) { r.History = []uint8{7, 3}; r.Epoch = 3 }))

	FE, SE, H := exo.ReasonFutureEpoch, exo.ReasonStaleEpoch, exo.ReasonHalted
	e5 := with(st, func(p *exo.Pointers) { p.Epoch = 5 })
	v5 := next(e5)
	g.vec(s, "stale_epoch", "state epoch 5, frame epoch 4", SE, e5, mod(v5, func(r *raw) { r.Epoch = 4 }))
	g.vec(s, "stale_epoch_0", "state epoch 5, frame epoch 0", SE, e5, mod(v5, func(r *raw) { r.Epoch = 0 }))
	g.vec(s, "stale_epoch_max", "state epoch 0xFFFFFFFF, frame epoch 0xFFFFFFFE", SE,
		with(st, func(p *exo.Pointers) { p.Epoch = math.MaxUint32 }), mod(v, func(r *raw) { r.Epoch = math.MaxUint32 - 1 }))
	g.vec(s, "stale_epoch_high_byte", "state epoch 0x01000000, frame epoch 0x00FFFFFF (unsigned big-endian compare)", SE,
		with(st, func(p *exo.Pointers) { p.Epoch = 0x01000000 }), mod(v, func(r *raw) { r.Epoch = 0x00FFFFFF }))
	g.vec(s, "future_epoch", "state epoch 5, frame epoch 6", FE, e5, mod(v5, func(r *raw) { r.Epoch = 6 }))
	g.vec(s, "future_epoch_max", "state epoch 5, frame epoch 0xFFFFFFFF", FE, e5, mod(v5, func(r *raw) { r.Epoch = math.MaxUint32 }))
	g.vec(s, "future_epoch_sign", "state epoch 0x7FFFFFFF, frame epoch 0x80000000 (unsigned)", FE,
		with(st, func(p *exo.Pointers) { p.Epoch = 0x7FFFFFFF }), mod(v, func(r *raw) { r.Epoch = 0x80000000 }))
	g.vec(s, "future_epoch_beats_seq", "frame epoch 6 at a seq far beyond the window: epoch first", FE, e5,
		mod(v5, func(r *raw) { r.Epoch = 6; r.Seq = 1 << 40 }))
	g.vec(s, "stale_epoch_beats_dup", "frame epoch 4 at an old seq: epoch first", SE, e5, mod(v5, func(r *raw) { r.Epoch = 4; r.Seq = 3 }))

	hs := with(st, func(p *exo.Pointers) { p.Halted = true })
	g.vec(s, "halted", "halted state, a frame that would be accepted", H, hs, next(hs))
	g.vec(s, "halted_dup", "halted state, an old seq", H, hs, mod(next(hs), func(r *raw) { r.Seq = 50 }))
	g.vec(s, "halted_gap", "halted state, a seq beyond the window", H, hs, mod(next(hs), func(r *raw) { r.Seq = 1 << 50 }))
	g.vec(s, "halted_sender_in_history", "halted state, sender in history", H, hs, from(hs, 4))
	g.vec(s, "halted_future_epoch", "halted state, frame epoch +1: epoch before halted", FE, hs, mod(next(hs), func(r *raw) { r.Epoch = 1 }))
	g.vec(s, "halted_stale_epoch", "halted state (epoch 5), frame epoch 4", SE,
		with(hs, func(p *exo.Pointers) { p.Epoch = 5 }), mod(next(hs), func(r *raw) { r.Epoch = 4 }))
	g.vec(s, "halted_bad_group", "halted state, foreign group: group first", G, hs, mod(next(hs), func(r *raw) { r.Group = 9 }))

	SIH := exo.ReasonSenderInHistory
	g.vec(s, "sender_in_history_0", "n=5, history [4,3]: host 4 sends again (history[0])", SIH, st, from(st, 4))
	g.vec(s, "sender_in_history_1", "n=5, history [4,3]: host 3 sends (history[1])", SIH, st, from(st, 3))
	g.vec(s, "sender_in_history_n2", "n=2, history [1]: host 1 sends twice in a row", SIH, steady(2, 8), from(steady(2, 8), 1))
	g.vec(s, "sender_in_history_n16_last", "n=16: the sender is history[7], the oldest slot", SIH, s16, from(s16, s16.History[7]))
	g.vec(s, "sender_in_history_x", "n=5, append 1, history [0,X]: host 0 sends again", SIH, steady(5, 1), from(steady(5, 1), 0))

	D := exo.ReasonDivergence
	g.vec(s, "divergence_history_swapped", "seq == append, history [3,4] against local [4,3]", D, st, mod(v, func(r *raw) { r.History = []uint8{3, 4} }))
	g.vec(s, "divergence_history_other", "seq == append, history [4,2] against [4,3]", D, st, mod(v, func(r *raw) { r.History = []uint8{4, 2} }))
	g.vec(s, "divergence_history_x", "seq == append, history [4,X] against [4,3]", D, st, mod(v, func(r *raw) { r.History = []uint8{4, 0xFF} }))
	g.vec(s, "divergence_fresh", "fresh state (history [X,X]), frame history [1,X]", D,
		exo.NewPointers(1, 5, 1024), mod(from(exo.NewPointers(1, 5, 1024), 0), func(r *raw) { r.History = []uint8{1, 0xFF} }))
	g.vec(s, "divergence_beats_sender_in_history", "history [1,2] against [4,3] from sender 1 (in the frame's history): divergence first", D, st,
		mod(v, func(r *raw) { r.History = []uint8{1, 2}; r.Sender = 1 }))
	g.vec(s, "divergence_n16_last_slot", "n=16: only history[7] differs", D, s16, mod(next(s16), func(r *raw) { r.History[7] = r.Sender }))
	g.vec(s, "divergence_old_seq_0", "seq = append-1 from sender 0, local history[0] = 4", D, st, mod(v, func(r *raw) { r.Seq = 99 }))
	g.vec(s, "divergence_old_seq_1", "seq = append-2 from sender 0, local history[1] = 3", D, st, mod(v, func(r *raw) { r.Seq = 98 }))
	g.vec(s, "divergence_old_seq_n16", "n=16: seq = append-8 (the oldest entry still in the history) from the wrong sender", D, s16,
		mod(next(s16), func(r *raw) { r.Seq = 92 }))
	g.vec(s, "divergence_old_seq_n2", "n=2: seq = append-1 from the wrong sender", D, steady(2, 9),
		mod(next(steady(2, 9)), func(r *raw) { r.Seq = 8 }))
	g.vec(s, "divergence_old_seq_vs_x", "n=5, history [X,X] at append 40 (after a view change): seq 39 from host 1 diverges from X", D,
		with(st, func(p *exo.Pointers) { p.ClearHistory(); p.Append = 40; p.Agreed = 38 }),
		mod(v, func(r *raw) { r.Seq = 39; r.Sender = 1; r.History = []uint8{0xFF, 0xFF} }))

	U := exo.ReasonDuplicate
	g.vec(s, "duplicate_last", "seq = append-1 from the right sender (4)", U, st, mod(v, func(r *raw) { r.Seq = 99; r.Sender = 4; r.History = []uint8{3, 2} }))
	g.vec(s, "duplicate_second", "seq = append-2 from the right sender (3)", U, st, mod(v, func(r *raw) { r.Seq = 98; r.Sender = 3; r.History = []uint8{2, 1} }))
	g.vec(s, "duplicate_beyond_history", "seq = append-3 (no longer in the history) from any sender: duplicate", U, st,
		mod(v, func(r *raw) { r.Seq = 97; r.Sender = 0 }))
	g.vec(s, "duplicate_seq_0", "seq 0 at append 100", U, st, mod(v, func(r *raw) { r.Seq = 0 }))
	g.vec(s, "duplicate_n1", "n=1 (h=0): any seq below append is a duplicate", U, steady(1, 100),
		mod(next(steady(1, 100)), func(r *raw) { r.Seq = 99 }))
	g.vec(s, "duplicate_odd_history", "seq = append-1 from the right sender, with a history that does not match: the history of an old seq is not compared", U, st,
		mod(v, func(r *raw) { r.Seq = 99; r.Sender = 4; r.History = []uint8{0, 1} }))
}

func (g *gen) suiteSeq() {
	const s = "seq"
	A, U, GP, TF, D := exo.ReasonAccept, exo.ReasonDuplicate, exo.ReasonGap, exo.ReasonSeqTooFar, exo.ReasonDivergence

	st := steady(5, 100)
	v := next(st)
	g.vec(s, "gap_1", "seq = append+1", GP, st, mod(v, func(r *raw) { r.Seq = 101 }))
	g.vec(s, "gap_2", "seq = append+2", GP, st, mod(v, func(r *raw) { r.Seq = 102 }))
	g.vec(s, "gap_window", "seq = append+window (1024): the last seq held as a gap", GP, st, mod(v, func(r *raw) { r.Seq = 100 + 1024 }))
	g.vec(s, "too_far_window_1", "seq = append+window+1", TF, st, mod(v, func(r *raw) { r.Seq = 100 + 1025 }))
	g.vec(s, "too_far_max", "seq 2^64-1 at append 100", TF, st, mod(v, func(r *raw) { r.Seq = top }))
	g.vec(s, "gap_beats_history", "seq = append+1 with a history that matches nothing: seq first", GP, st,
		mod(v, func(r *raw) { r.Seq = 101; r.History = []uint8{1, 2} }))
	w1 := with(st, func(p *exo.Pointers) { p.Window = 1 })
	g.vec(s, "window1_gap", "window 1: seq = append+1 is a gap", GP, w1, mod(v, func(r *raw) { r.Seq = 101 }))
	g.vec(s, "window1_too_far", "window 1: seq = append+2 is too far", TF, w1, mod(v, func(r *raw) { r.Seq = 102 }))
	w0 := with(st, func(p *exo.Pointers) { p.Window = 0 })
	g.vec(s, "window0_too_far", "window 0 (not a valid Config, but a valid register value): every seq above append is too far", TF, w0,
		mod(v, func(r *raw) { r.Seq = 101 }))
	wmax := exo.NewPointers(1, 5, top)
	g.vec(s, "window_max_gap", "window 2^64-1, append 0: seq 2^64-1 is a gap", GP, wmax, mod(next(wmax), func(r *raw) { r.Seq = top }))

	z := exo.NewPointers(1, 5, exo.DefaultSeqWindow)
	g.vec(s, "zero_gap", "fresh state, seq 1", GP, z, mod(next(z), func(r *raw) { r.Seq = 1 }))
	g.vec(s, "zero_too_far", "fresh state, seq 2^64-1", TF, z, mod(next(z), func(r *raw) { r.Seq = top }))

	// Near 2^32: a 32-bit comparator would get these wrong.
	for _, a := range []uint64{e32 - 2, e32 - 1, e32, e32 + 1} {
		p := steady(5, a)
		g.vec(s, fmt.Sprintf("accept_%x", a), fmt.Sprintf("accept at append 0x%x (near 2^32)", a), A, p, next(p))
	}
	lo := steady(5, 5)
	g.vec(s, "alias32_too_far", "append 5, seq 2^32+5 (equal low 32 bits): too far, not accept", TF, lo, mod(next(lo), func(r *raw) { r.Seq = e32 + 5 }))
	lo1m := with(lo, func(p *exo.Pointers) { p.Window = top })
	g.vec(s, "alias32_gap", "append 5, window 2^64-1, seq 2^32+5: gap, not accept", GP, lo1m, mod(next(lo1m), func(r *raw) { r.Seq = e32 + 5 }))
	hi := steady(5, e32+5)
	g.vec(s, "alias32_dup", "append 2^32+5, seq 5 (equal low 32 bits): duplicate, not accept", U, hi, mod(next(hi), func(r *raw) { r.Seq = 5 }))
	g.vec(s, "alias32_dup_hist", "append 2^32+5, seq 2^32+4 from the right sender: duplicate", U, hi,
		mod(next(hi), func(r *raw) { r.Seq = e32 + 4; r.Sender = hi.History[0] }))
	g.vec(s, "div32_old_seq", "append 2^32+5, seq 2^32+4 from the wrong sender", D, hi, mod(next(hi), func(r *raw) { r.Seq = e32 + 4 }))
	acr := steady(5, e32-2)
	g.vec(s, "gap_across_2e32", "append 2^32-2, seq 2^32+3", GP, acr, mod(next(acr), func(r *raw) { r.Seq = e32 + 3 }))
	g.vec(s, "too_far_across_2e32", "append 2^32-2, seq 2^32+1023 (window 1024 + 1)", TF, acr, mod(next(acr), func(r *raw) { r.Seq = e32 - 2 + 1025 }))

	// Near 2^63 (sign bit) and 2^64-1.
	p63 := steady(5, 1<<63)
	g.vec(s, "accept_2e63", "accept at append 2^63 (unsigned compare)", A, p63, next(p63))
	g.vec(s, "dup_2e63", "append 2^63, seq 2^63-3", U, p63, mod(next(p63), func(r *raw) { r.Seq = 1<<63 - 3 }))
	g.vec(s, "too_far_2e63", "append 2^63-1, seq 2^63+1024", TF, steady(5, 1<<63-1), mod(next(steady(5, 1<<63-1)), func(r *raw) { r.Seq = 1<<63 + 1024 }))
	bo := steady(5, 0x0102030405060708)
	g.vec(s, "accept_byte_order", "append 0x0102030405060708: every byte of seq differs (byte-order check)", A, bo, next(bo))
	g.vec(s, "gap_byte_order", "append 0x0102030405060708, seq 0x0102030405060709", GP, bo, mod(next(bo), func(r *raw) { r.Seq++ }))
	g.vec(s, "dup_byte_order", "append 0x0102030405060708, seq 0x0807060504030201 byte-swapped is larger: too far, not duplicate", TF, bo,
		mod(next(bo), func(r *raw) { r.Seq = 0x0807060504030201 }))
	g.vec(s, "dup_byte_order_swapped", "append 0x0807060504030201, seq 0x0102030405060708: duplicate", U, steady(5, 0x0807060504030201),
		mod(next(steady(5, 0x0807060504030201)), func(r *raw) { r.Seq = 0x0102030405060708 }))

	for _, a := range []uint64{top - 3, top - 2, top - 1} {
		p := steady(5, a)
		g.vec(s, fmt.Sprintf("accept_top_minus_%d", top-a), fmt.Sprintf("accept at append 2^64-1-%d", top-a), A, p, next(p))
	}
	pt := steady(5, top)
	g.vec(s, "accept_top_wraps", "accept seq 2^64-1: the append pointer wraps to 0 (64-bit arithmetic, as in the Go core); agreed = 2^64-2", A, pt, next(pt))
	g.vec(s, "accept_top_wraps_n1", "n=1 (h=0), accept seq 2^64-1: append wraps to 0 and agreed (seq-h+1 = 0) does not move", A, steady(1, top), next(steady(1, top)))
	g.vec(s, "dup_top", "append 2^64-1, seq 2^64-2 from the right sender", U, pt, mod(next(pt), func(r *raw) { r.Seq = top - 1; r.Sender = pt.History[0] }))
	g.vec(s, "div_top", "append 2^64-1, seq 2^64-2 from the wrong sender", D, pt, mod(next(pt), func(r *raw) { r.Seq = top - 1 }))
	g.vec(s, "dup_top_zero", "append 2^64-1, seq 0", U, pt, mod(next(pt), func(r *raw) { r.Seq = 0 }))
	nt := steady(5, top-10)
	g.vec(s, "gap_top", "append 2^64-11, seq 2^64-1", GP, nt, mod(next(nt), func(r *raw) { r.Seq = top }))
	ntw := with(nt, func(p *exo.Pointers) { p.Window = 9 })
	g.vec(s, "too_far_top", "append 2^64-11, window 9, seq 2^64-1 (10 ahead)", TF, ntw, mod(next(ntw), func(r *raw) { r.Seq = top }))
	g.vec(s, "gap_top_window_edge", "append 2^64-11, window 10, seq 2^64-1", GP, with(nt, func(p *exo.Pointers) { p.Window = 10 }),
		mod(next(nt), func(r *raw) { r.Seq = top }))
}

// suitePerN runs the same scenarios for every roster size, at appends near
// 0, near 2^32 and near 2^64-1.
func (g *gen) suitePerN() {
	const s = "n"
	for _, n := range rostersAll {
		h := n / 2
		for _, base := range []uint64{3, e32 + 3, top - 4} {
			p := steady(n, base)
			p.Epoch = 7
			v := next(p).withRecords([]byte{byte(n), byte(base)})
			tag := fmt.Sprintf("n%d_%x", n, base)
			where := fmt.Sprintf("n=%d (h=%d), epoch 7, append 0x%x, history %v", n, h, base, histString(p.Hist()))
			add := func(name, what string, intent exo.Reason, in exo.Pointers, r *raw) {
				g.vec(s, tag+"_"+name, where+": "+what, intent, in, r)
			}
			add("accept", "the valid next frame", exo.ReasonAccept, p, v)
			if base > uint64(h) {
				add("duplicate", "seq append-h-1 (below the history)", exo.ReasonDuplicate, p, mod(v, func(r *raw) { r.Seq = base - uint64(h) - 1 }))
			} else {
				add("duplicate", "seq 0 from its sender", exo.ReasonDuplicate, p, mod(v, func(r *raw) { r.Seq = 0; r.Sender = p.History[base-1] }))
			}
			add("gap", "seq append+1", exo.ReasonGap, p, mod(v, func(r *raw) { r.Seq = base + 1 }))
			w2 := with(p, func(q *exo.Pointers) { q.Window = 2 })
			add("too_far", "window 2, seq append+3", exo.ReasonSeqTooFar, w2, mod(v, func(r *raw) { r.Seq = base + 3 }))
			add("future_epoch", "frame epoch 8", exo.ReasonFutureEpoch, p, mod(v, func(r *raw) { r.Epoch = 8 }))
			add("stale_epoch", "frame epoch 6", exo.ReasonStaleEpoch, p, mod(v, func(r *raw) { r.Epoch = 6 }))
			hp := with(p, func(q *exo.Pointers) { q.Halted = true })
			add("halted", "halted, the valid next frame", exo.ReasonHalted, hp, v)
			add("bad_group", "group 0x8001", exo.ReasonBadGroup, p, mod(v, func(r *raw) { r.Group = 0x8001 }))
			add("bad_sender", fmt.Sprintf("sender %d", n), exo.ReasonBadSender, p, mod(v, func(r *raw) { r.Sender = uint8(n) }))
			add("bad_histlen", fmt.Sprintf("hist_len %d", h+1), exo.ReasonBadHistlen, p,
				mod(v, func(r *raw) { r.History = append(r.History, exo.HistoryNone); r.HistLen++ }))
			add("bad_flags", "flags 0x0001", exo.ReasonBadFlags, p, mod(v, func(r *raw) { r.Flags = 1 }))
			add("readmit", fmt.Sprintf("flags READMIT|%d", n-1), exo.ReasonAccept, p, mod(v, func(r *raw) { r.Flags = exo.FlagReadmit | uint16(n-1) }))
			add("bad_payload", "count 2 with one record", exo.ReasonBadPayload, p, mod(v, func(r *raw) { r.Count = 2 }))
			if h == 0 {
				continue
			}
			add("bad_history_id", fmt.Sprintf("history[0] = %d", n), exo.ReasonBadHistoryID, p, mod(v, func(r *raw) { r.History[0] = uint8(n) }))
			add("divergence_history", "history[h-1] changed", exo.ReasonDivergence, p, mod(v, func(r *raw) {
				r.History[h-1] = r.Sender // not in the history, so no repeat
			}))
			add("divergence_old_seq", "seq append-1 from a sender other than history[0]", exo.ReasonDivergence, p,
				mod(v, func(r *raw) { r.Seq = base - 1 }))
			add("duplicate_recent", "seq append-1 from history[0]", exo.ReasonDuplicate, p,
				mod(v, func(r *raw) { r.Seq = base - 1; r.Sender = p.History[0] }))
			add("sender_in_history", fmt.Sprintf("sender %d = history[0]", p.History[0]), exo.ReasonSenderInHistory, p, from(p, p.History[0]))
			last := 0
			for i, id := range p.Hist() {
				if id != exo.HistoryNone {
					last = i
				}
			}
			if last > 0 {
				add("sender_in_history_last", fmt.Sprintf("sender %d = history[%d], the oldest known", p.History[last], last),
					exo.ReasonSenderInHistory, p, from(p, p.History[last]))
			}
			if h >= 2 {
				add("bad_history_id_repeat", "history[h-1] = history[0] (codec)", exo.ReasonBadHistoryID, p,
					mod(v, func(r *raw) { r.History[h-1] = r.History[0] }))
			}
		}
	}
}

// suiteLarge has rosters whose history does not fit the hex record (JSON
// only), and a frame larger than the hex record.
func (g *gen) suiteLarge() {
	const s = "large"
	for _, n := range []int{34, 64, 128, 200, 255} {
		p := steady(n, 1000)
		v := next(p).withRecords([]byte("large roster"))
		where := fmt.Sprintf("n=%d (h=%d, JSON only)", n, n/2)
		g.vec(s, fmt.Sprintf("n%d_accept", n), where+": the valid next frame", exo.ReasonAccept, p, v)
		g.vec(s, fmt.Sprintf("n%d_sender_in_history", n), where+": the oldest sender in the history sends again", exo.ReasonSenderInHistory, p, from(p, p.History[n/2-1]))
		g.vec(s, fmt.Sprintf("n%d_divergence", n), where+": the oldest history slot differs", exo.ReasonDivergence, p,
			mod(v, func(r *raw) { r.History[n/2-1] = r.Sender }))
		g.vec(s, fmt.Sprintf("n%d_divergence_old_seq", n), where+": seq append-h from the wrong sender", exo.ReasonDivergence, p,
			mod(v, func(r *raw) { r.Seq = 1000 - uint64(n/2) }))
		if n < 255 { // with n = 255 the only id >= n is 0xFF, "none"
			g.vec(s, fmt.Sprintf("n%d_bad_history_id", n), where+": history id n", exo.ReasonBadHistoryID, p,
				mod(v, func(r *raw) { r.History[n/4] = uint8(n) }))
		}
		g.vec(s, fmt.Sprintf("n%d_bad_histlen", n), where+": hist_len h-1", exo.ReasonBadHistlen, p,
			mod(v, func(r *raw) { r.History = r.History[:n/2-1]; r.HistLen-- }))
	}
	p := steady(5, 10)
	big := make([]byte, 1200)
	for i := range big {
		big[i] = byte(i * 7)
	}
	g.vec(s, "n5_payload_1200", "n=5: one 1200-byte record (larger than a hex record, JSON only)", exo.ReasonAccept, p, next(p).withRecords(big))
	g.vec(s, "n5_payload_1200_short", "n=5: the same frame cut 1 byte short: BAD_PAYLOAD", exo.ReasonBadPayload, p,
		mod(next(p).withRecords(big), func(r *raw) { r.Trunc = exo.HeaderLen + 2 + 2 + 1200 - 1 }))
}

func histString(h []uint8) string {
	s := "["
	for i, id := range h {
		if i > 0 {
			s += ","
		}
		if id == exo.HistoryNone {
			s += "X"
		} else {
			s += fmt.Sprint(id)
		}
	}
	return s + "]"
}
