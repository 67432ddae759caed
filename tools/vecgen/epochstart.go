package main

import (
	"fmt"

	"github.com/exo-rack/exo/exo"
)

// EpochStart: only frames of the current epoch count towards agreement.
// Accept agrees s-h on appending s only when s >= EpochStart and
// s-EpochStart >= h (exo/pointers.go; the safety bug behind it is in
// docs/explore.md). These vectors pin the rule down: an implementation
// without the register, or with a 32-bit or signed comparison, or with the
// subtraction alone (no s >= EpochStart), fails some of them.

// expectAgreed checks that the Go core left v's agreement pointer at want:
// the agreement a vector of this suite was built to show. Like the intent,
// it only checks the generator; the files hold the core's result.
func (g *gen) expectAgreed(v *vector, want uint64) {
	if got := v.Res.Out.Agreed; got != want {
		g.errorf("%s/%s: built to leave agreed at %d, but the Go core says %d; fix the generator or the core",
			v.Suite, v.Name, want, got)
	}
}

// installed is the state of a host of an n-host rack right after (or some
// frames after) an install of epoch 3 whose new epoch began at append
// pointer es: appended up to a-1 in plain rotation (history as steady),
// agreement pointer agreed.
func installed(n int, es, a, agreed uint64) exo.Pointers {
	return with(steady(n, a), func(p *exo.Pointers) {
		p.Epoch = 3
		p.EpochStart = es
		p.Agreed = agreed
	})
}

func (g *gen) suiteEpochStart() {
	const s = "epoch_start"
	A := exo.ReasonAccept
	add := func(name, desc string, p exo.Pointers, r *raw, agreed uint64) {
		g.expectAgreed(g.vec(s, name, desc, A, p, r), agreed)
	}

	// The first frames of a new epoch at append 1000, for every roster.
	const es = 1000
	for _, n := range rostersAll {
		h := uint64(n / 2)
		where := fmt.Sprintf("n=%d (h=%d), epoch 3 began at append %d (epoch_start %d)", n, h, es, es)
		if h == 0 {
			p := installed(n, es, es, es)
			add(fmt.Sprintf("n%d_first", n), where+", agreed 1000: the first frame of the epoch (seq 1000) agrees itself (h=0): agreed 1001",
				p, next(p), es+1)
			continue
		}
		low := es - h - 1 // the install's agreement pointer, below what the old rule would give
		p := installed(n, es, es, low)
		add(fmt.Sprintf("n%d_first_held", n),
			fmt.Sprintf("%s, agreed %d: the first frame of the epoch (seq %d) agrees nothing (seq-epoch_start = 0 < h); without epoch_start it would agree seq %d",
				where, low, es, es-h), p, next(p), low)
		if h >= 2 {
			a := es + h - 1
			p := installed(n, es, a, low)
			add(fmt.Sprintf("n%d_last_held", n),
				fmt.Sprintf("%s, agreed %d: seq %d (the h-th frame of the epoch, seq-epoch_start = h-1) still agrees nothing; without epoch_start it would agree seq %d",
					where, low, a, a-h), p, next(p), low)
		}
		p = installed(n, es, es+h, low)
		add(fmt.Sprintf("n%d_boundary", n),
			fmt.Sprintf("%s, agreed %d: seq %d = epoch_start+h is the first frame that agrees: seq %d = epoch_start, agreed jumps to %d",
				where, low, es+h, es, es+1), p, next(p), es+1)
		p = installed(n, es, es+h+1, es+1)
		add(fmt.Sprintf("n%d_beyond", n),
			fmt.Sprintf("%s, agreed %d: seq %d = epoch_start+h+1 agrees seq %d: agreed %d", where, es+1, es+h+1, es+1, es+2),
			p, next(p), es+2)
		p = installed(n, es, es+100, es+100-h)
		add(fmt.Sprintf("n%d_far_beyond", n),
			fmt.Sprintf("%s, agreed %d: seq %d, long after the start, agrees as without epoch_start", where, es+100-h, es+100),
			p, next(p), es+101-h)
	}

	// The install's agreement pointer may be anywhere up to epoch_start.
	p := installed(5, es, es+1, es)
	add("n5_held_agreed_at_start", "n=5, epoch_start 1000, agreed 1000 (the install agreed everything before the epoch): seq 1001 agrees nothing",
		p, next(p), es)
	p = installed(5, es, es+2, es)
	add("n5_boundary_agreed_at_start", "n=5, epoch_start 1000, agreed 1000: seq 1002 agrees seq 1000, agreed 1001", p, next(p), es+1)
	p = installed(5, 1, 2, 0)
	add("n5_epoch_start_1_held", "n=5, epoch_start 1 (an install after one entry), append 2: seq 2 agrees nothing (seq-h = 0 < epoch_start)", p, next(p), 0)
	p = installed(5, 1, 3, 0)
	add("n5_epoch_start_1_boundary", "n=5, epoch_start 1, append 3: seq 3 agrees seq 1, agreed 2 (seq 0 of the older epoch is agreed with it)", p, next(p), 2)

	// Wide comparisons: 32-bit, signed, and near 2^64.
	p = installed(5, e32-1, e32+1, e32-4)
	add("across_2e32_boundary",
		"n=5, epoch_start 2^32-1, append 2^32+1: seq-epoch_start = 2, the boundary: agreed 2^32 (a 32-bit comparator sees seq 1 < epoch_start 0xffffffff and holds it back)",
		p, next(p), e32)
	p = installed(5, e32-1, e32, e32-4)
	add("across_2e32_held", "n=5, epoch_start 2^32-1, append 2^32: seq-epoch_start = 1 < h: agreed stays 2^32-4", p, next(p), e32-4)
	p = installed(5, 5, e32+6, e32+4)
	add("alias32_beyond", "n=5, epoch_start 5, append 2^32+6: agrees as usual, agreed 2^32+5 (a 32-bit comparator sees seq-epoch_start = 1 < h)",
		p, next(p), e32+5)
	p = installed(5, 1<<63-1, 1<<63+1, 1<<63-4)
	add("sign_2e63_boundary", "n=5, epoch_start 2^63-1, append 2^63+1: the boundary, agreed 2^63 (a signed comparator sees seq < epoch_start)",
		p, next(p), 1<<63)
	p = installed(5, 1<<63, 1<<63+1, 1<<63-4)
	add("sign_2e63_held", "n=5, epoch_start 2^63, append 2^63+1: held, agreed stays 2^63-4", p, next(p), 1<<63-4)
	p = installed(5, top-3, top-1, top-6)
	add("top_boundary", "n=5, epoch_start 2^64-4, append 2^64-2: the boundary, agreed 2^64-3", p, next(p), top-2)
	p = installed(5, top-2, top, top-5)
	add("top_wrap_boundary", "n=5, epoch_start 2^64-3, seq 2^64-1: the boundary, agreed 2^64-2, and the append pointer wraps to 0", p, next(p), top-1)
	p = installed(5, top-1, top, top-5)
	add("top_wrap_held", "n=5, epoch_start 2^64-2, seq 2^64-1: held (seq-epoch_start = 1 < h), the append pointer wraps to 0", p, next(p), top-5)

	// epoch_start 2^64-1: no frame agrees anything (the slow path holds
	// this value while it installs an epoch).
	for _, c := range []struct {
		n      int
		a, agr uint64
		what   string
	}{
		{5, 100, 90, "seq 100 < epoch_start: agrees nothing (seq-epoch_start wraps to 101 >= h, so the test seq >= epoch_start is needed)"},
		{16, 100, 80, "seq 100: agrees nothing"},
		{1, 100, 90, "h=0, seq 100 < epoch_start: agrees nothing (seq-epoch_start >= 0 always holds; only seq >= epoch_start decides)"},
		{5, top, top - 5, "seq 2^64-1 = epoch_start, seq-epoch_start = 0 < h: agrees nothing; append wraps to 0"},
		{1, top, top, "h=0, seq 2^64-1 = epoch_start: would agree up to seq+1, which wraps to 0, not above agreed: nothing moves; append wraps to 0"},
	} {
		p := installed(c.n, top, c.a, c.agr)
		name := fmt.Sprintf("max_n%d_append_%d", c.n, c.a)
		if c.a == top {
			name = fmt.Sprintf("max_n%d_append_top", c.n)
		}
		add(name, fmt.Sprintf("n=%d, epoch_start 2^64-1, append 0x%x, agreed 0x%x: %s", c.n, c.a, c.agr, c.what),
			p, next(p), c.agr)
	}

	// epoch_start does not change the verdicts (Classify ignores it) nor
	// does a verdict other than ACCEPT change it.
	p = installed(5, es, es+1, es-3)
	g.vec(s, "n5_duplicate", "n=5, epoch_start 1000, append 1001: seq 1000 again from its sender: DUPLICATE, state (epoch_start) unchanged",
		exo.ReasonDuplicate, p, mod(next(p), func(r *raw) { r.Seq = es; r.Sender = p.History[0]; r.History = []uint8{4, 3} }))
	g.vec(s, "n5_stale_epoch", "n=5, epoch_start 1000, append 1001: a frame of the old epoch 2 for seq 1001: STALE_EPOCH, it counts towards nothing",
		exo.ReasonStaleEpoch, p, mod(next(p), func(r *raw) { r.Epoch = 2 }))
	g.vec(s, "n5_gap", "n=5, epoch_start 1000, append 1001: seq 1003: GAP", exo.ReasonGap, p, mod(next(p), func(r *raw) { r.Seq = es + 3 }))
	g.vec(s, "n5_halted", "n=5, epoch_start 1000, halted: HALTED", exo.ReasonHalted,
		with(p, func(q *exo.Pointers) { q.Halted = true }), next(p))
}

// epochStartStreams: the first frames of a new epoch, carried from frame
// to frame.
func (g *gen) epochStartStreams() {
	A := exo.ReasonAccept
	for _, c := range []struct {
		n      int
		agreed uint64
	}{{3, 998}, {5, 995}, {16, 990}} {
		h := uint64(c.n / 2)
		const es = 1000
		st := installed(c.n, es, es, c.agreed)
		s := g.newStream(fmt.Sprintf("new_epoch_n%d", c.n),
			fmt.Sprintf("n=%d (h=%d): epoch 3 installed at append 1000 with agreed %d (epoch_start 1000); frames 1..%d of the epoch agree nothing, frame %d (seq %d) agrees seq 1000 (agreed 1001), then each frame agrees one more", c.n, h, c.agreed, h, h+1, es+h),
			st)
		for i := range h + 4 {
			r := s.next().withRecords(payloadFor(int(i))...).padTo(0)
			want := c.agreed
			if r.Seq >= es+h {
				want = r.Seq - h + 1
			}
			note := fmt.Sprintf("host %d sends seq %d: agreed %d", r.Sender, r.Seq, want)
			if i == 1 && c.n == 5 {
				s.step(fmt.Sprintf("a late frame of the old epoch 2 for seq %d from host %d: stale epoch, it counts towards nothing", r.Seq, r.Sender),
					exo.ReasonStaleEpoch, mod(r, func(r *raw) { r.Epoch = 2 }))
			}
			g.expectAgreed(s.step(note, A, r), want)
		}
	}
	st := installed(5, top, 500, 490)
	s := g.newStream("epoch_start_max_n5", "n=5, epoch_start 2^64-1 (the value the slow path holds while it installs): frames are accepted, nothing is agreed", st)
	for i := range 7 {
		g.expectAgreed(s.step("next host: agreed stays 490", A, s.next().withRecords(payloadFor(i)...).padTo(0)), 490)
	}
}
