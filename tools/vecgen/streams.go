package main

import (
	"fmt"

	"github.com/exo-rack/exo/exo"
)

// Streams: one initial state and a sequence of frames, each applied to the
// state the previous one left (the state after each step is in the files).
// Frames are padded to the Ethernet minimum as a NIC would deliver them.

// chain is the "true" log as the token holders build it: it hands out the
// frames the senders broadcast, so that a receiver can get them late, twice
// or out of order.
type chain struct{ p exo.Pointers }

// send returns sender's frame at the chain's append pointer and appends it.
func (c *chain) send(sender uint8, recs ...[]byte) *raw {
	r := from(c.p, sender).withRecords(recs...).padTo(0)
	c.p.Accept(sender, r.Seq)
	return r
}

// sendNext is send from the sender next() would pick.
func (c *chain) sendNext(recs ...[]byte) *raw { return c.send(next(c.p).Sender, recs...) }

// payloadFor varies the payload along a rotation: token pass, one record,
// a batch of two.
func payloadFor(i int) [][]byte {
	switch i % 3 {
	case 1:
		return [][]byte{[]byte(fmt.Sprintf("entry-%d", i))}
	case 2:
		return [][]byte{[]byte("batch"), []byte(fmt.Sprintf("#%d", i))}
	}
	return nil
}

func (g *gen) streamsAll() {
	A := exo.ReasonAccept
	for _, n := range rostersAll {
		p := exo.NewPointers(1, n, exo.DefaultSeqWindow)
		s := g.newStream(fmt.Sprintf("rotation_n%d", n),
			fmt.Sprintf("n=%d (h=%d): normal token rotation from a fresh state, two full rounds and a bit; token passes, single records and batches; appending seq s agrees s-h (agreed = s-h+1)", n, n/2), p)
		for i := range 2*n + 3 {
			r := s.next().withRecords(payloadFor(i)...).padTo(0)
			s.step(fmt.Sprintf("host %d sends seq %d (%d records)", r.Sender, r.Seq, r.Count), A, r)
		}
	}

	{ // duplicate, gap, repair
		st := steady(5, 20)
		c := &chain{st}
		f20 := c.sendNext([]byte("a"))
		f21 := c.sendNext()
		f22 := c.sendNext([]byte("c"), []byte("d"))
		f23 := c.sendNext()
		s := g.newStream("duplicate_gap_n5", "n=5 at append 20: an accept, its duplicate, a gap (seq 22 before 21), the repair, the held frame re-applied, and a frame too far ahead", st)
		s.step("seq 20 from host 0: accept", A, f20)
		s.step("seq 20 again (retransmission): duplicate, state unchanged", exo.ReasonDuplicate, f20)
		s.step("seq 22 from host 2 before seq 21: gap (slow path holds it), state unchanged", exo.ReasonGap, f22)
		s.step("seq 21 from host 1 (the gap repaired): accept", A, f21)
		s.step("seq 22 re-applied: accept", A, f22)
		s.step("seq 22 again: duplicate", exo.ReasonDuplicate, f22)
		s.step("seq 23 from host 3: accept", A, f23)
		s.step("seq 24+1024+1 (beyond the window): too far", exo.ReasonSeqTooFar, mod(next(s.cur), func(r *raw) { r.Seq += 1025 }).padTo(0))
		s.step("seq 24 from host 4: accept", A, s.next().padTo(0))
	}

	{ // divergence
		st := steady(5, 20)
		s := g.newStream("divergence_n5", "n=5 at append 20: after accepting seq 20, a frame whose history disagrees, and a competing entry for seq 20; neither changes the state, the right frame is then accepted", st)
		s.step("seq 20 from host 0: accept", A, s.next().padTo(0))
		s.step("seq 21 from host 1 with history [3,4] (it saw another seq 20): divergence", exo.ReasonDivergence,
			mod(s.next(), func(r *raw) { r.History = []uint8{3, 4} }).padTo(0))
		s.step("seq 20 from host 3 (a competing entry for seq 20): divergence", exo.ReasonDivergence,
			from(steady(5, 20), 3).padTo(0))
		s.step("seq 21 from host 1 with the right history [0,4]: accept", A, s.next().padTo(0))
		s.step("seq 20 from host 0 again: duplicate", exo.ReasonDuplicate, from(steady(5, 20), 0).padTo(0))
	}

	{ // concurrent takeover
		st := steady(7, 50) // holder is 50 mod 7 = 1
		s := g.newStream("concurrent_takeover_n7", "n=7 at append 50, token holder 1 is silent: hosts 2 and 3 both time out and send seq 50; the first wins, the second is a divergence at an old seq, and 3 then sends seq 51", st)
		r2 := from(s.cur, 2).padTo(0)
		r3 := from(s.cur, 3).padTo(0)
		s.step("seq 50 from host 2 (takeover): accept", A, r2)
		s.step("seq 50 from host 3 (a concurrent takeover): divergence", exo.ReasonDivergence, r3)
		s.step("seq 51 from host 3 with history [2,0,6]: accept", A, from(s.cur, 3).padTo(0))
		for range 5 {
			s.step("rotation continues", A, s.next().padTo(0))
		}
	}

	{ // minority halts
		st := steady(5, 10) // history [4,3]
		s := g.newStream("minority_halts_n5", "n=5 at append 10, partitioned: hosts 0 and 1 are a minority (h+1 = 3); after they append one entry each, neither may append again (SENDER_IN_HISTORY), so the agreement pointer stops; frames of the majority arrive as a gap and, after its view change, as a future epoch", st)
		s.step("seq 10 from host 0: accept", A, s.next().withRecords([]byte("minority")).padTo(0))
		s.step("seq 11 from host 1: accept (agrees seq 9)", A, s.next().padTo(0))
		s.step("host 0 times out and takes over seq 12 with history [1,0]: sender in history", exo.ReasonSenderInHistory, from(s.cur, 0).padTo(0))
		s.step("host 1 times out and takes over seq 12 with history [1,0]: sender in history", exo.ReasonSenderInHistory, from(s.cur, 1).padTo(0))
		s.step("host 0 again, with a batch: sender in history", exo.ReasonSenderInHistory, from(s.cur, 0).withRecords([]byte("x"), []byte("y")).padTo(0))
		s.step("a majority frame (seq 14 from host 3) leaks through: gap", exo.ReasonGap, mod(from(s.cur, 3), func(r *raw) { r.Seq = 14; r.History = []uint8{2, 4} }).padTo(0))
		s.step("the majority's next epoch: future epoch", exo.ReasonFutureEpoch, mod(from(s.cur, 2), func(r *raw) { r.Epoch = 1 }).padTo(0))
	}

	{ // majority continues
		st := steady(5, 10)
		s := g.newStream("majority_continues_n5", "n=5 at append 10, partitioned: hosts 2, 3 and 4 are a majority; 3 distinct senders are enough for h=2, so they keep appending and agreeing", st)
		for i := range 9 {
			s.step("majority host sends", A, from(s.cur, uint8(2+i%3)).withRecords(payloadFor(i)...).padTo(0))
		}
	}

	{ // halted
		st := with(steady(5, 30), func(p *exo.Pointers) { p.Halted = true; p.Epoch = 2 })
		s := g.newStream("halted_n5", "n=5, halted (a view change is in progress): every frame of the current epoch goes to the slow path; epochs are checked first", st)
		s.step("the valid next frame: halted", exo.ReasonHalted, s.next().padTo(0))
		s.step("a duplicate: halted", exo.ReasonHalted, mod(s.next(), func(r *raw) { r.Seq = 29; r.Sender = 4; r.History = []uint8{3, 2} }).padTo(0))
		s.step("sender in history: halted", exo.ReasonHalted, from(s.cur, 4).padTo(0))
		s.step("epoch 3: future epoch", exo.ReasonFutureEpoch, mod(s.next(), func(r *raw) { r.Epoch = 3 }).padTo(0))
		s.step("epoch 1: stale epoch", exo.ReasonStaleEpoch, mod(s.next(), func(r *raw) { r.Epoch = 1 }).padTo(0))
		s.step("foreign group: bad group", exo.ReasonBadGroup, mod(s.next(), func(r *raw) { r.Group = 2 }).padTo(0))
	}

	{ // epochs
		st := with(steady(5, 30), func(p *exo.Pointers) { p.Epoch = 3 })
		s := g.newStream("epochs_n5", "n=5 at epoch 3: frames of the old epoch are dropped, a newer epoch goes to the slow path, the current one is accepted", st)
		s.step("epoch 2 (an old leader): stale", exo.ReasonStaleEpoch, mod(s.next(), func(r *raw) { r.Epoch = 2 }).padTo(0))
		s.step("epoch 3: accept", A, s.next().padTo(0))
		s.step("epoch 4: future epoch", exo.ReasonFutureEpoch, mod(s.next(), func(r *raw) { r.Epoch = 4 }).padTo(0))
		s.step("epoch 3: accept", A, s.next().padTo(0))
		s.step("epoch 0: stale", exo.ReasonStaleEpoch, mod(s.next(), func(r *raw) { r.Epoch = 0 }).padTo(0))
		s.step("epoch 3: accept", A, s.next().padTo(0))
	}

	{ // skip and re-admit
		st := steady(5, 10)
		s := g.newStream("skip_readmit_n5", "n=5 at append 10, host 2 is down and skipped: 0,1,3,4,0,1; then host 3 re-admits host 2 (flags READMIT|2) and host 2 sends again; all accepted by the fast path", st)
		for _, snd := range []uint8{0, 1, 3, 4, 0, 1} {
			s.step(fmt.Sprintf("host %d", snd), A, from(s.cur, snd).padTo(0))
		}
		s.step("host 3 with flags READMIT|2", A, mod(from(s.cur, 3), func(r *raw) { r.Flags = exo.FlagReadmit | 2 }).withRecords([]byte("readmit")).padTo(0))
		for _, snd := range []uint8{4, 2, 3} {
			s.step(fmt.Sprintf("host %d", snd), A, from(s.cur, snd).padTo(0))
		}
	}

	{ // n=2 alternation
		s := g.newStream("alternation_n2", "n=2 (h=1): hosts alternate; the same host twice in a row is refused", exo.NewPointers(1, 2, exo.DefaultSeqWindow))
		for range 4 {
			s.step("next host", A, s.next().padTo(0))
		}
		s.step("host 1 again: sender in history", exo.ReasonSenderInHistory, from(s.cur, 1).padTo(0))
		s.step("host 0: accept", A, s.next().padTo(0))
	}

	{ // near 2^32
		s := g.newStream("cross_2e32_n4", "n=4 (h=2): appending across seq 2^32", steady(4, e32-3))
		for range 6 {
			s.step("next host", A, s.next().padTo(0))
		}
		s.step("seq 2^32-1 again from its sender: duplicate", exo.ReasonDuplicate, mod(s.next(), func(r *raw) { r.Seq = e32 - 1; r.Sender = uint8((e32 - 1) % 4) }).padTo(0))
	}

	{ // wrap
		s := g.newStream("wrap_2e64_n3", "n=3 (h=1): appending up to seq 2^64-1; the append pointer then wraps to 0 (64-bit arithmetic of the Go core; the protocol gives seq 2^64 no meaning)", steady(3, top-3))
		for range 4 {
			s.step("next host", A, s.next().padTo(0))
		}
		s.step("seq 2^64-1 again: after the wrap seq > append (0) by more than the window, so too far (not a duplicate)", exo.ReasonSeqTooFar,
			mod(s.next(), func(r *raw) { r.Seq = top; r.Sender = uint8(top % 3) }).padTo(0))
	}

	g.epochStartStreams()
	g.tagStreams()
	g.keyPhaseStreams()
	g.randomStreams()
}

// randomStreams are seeded random walks: mostly the valid next frame,
// sometimes a mutated one, so that the state carried from step to step is
// exercised with every verdict.
func (g *gen) randomStreams() {
	for i, n := range []int{3, 5, 7, 16} {
		st := g.randState([]int{n})
		st.Halted = false
		s := g.newStream(fmt.Sprintf("random_walk_%d_n%d", i, n),
			fmt.Sprintf("random walk (seeded), n=%d: 70%% valid next frames, 30%% one random mutation", n), st)
		for range 30 {
			p := s.cur
			r := g.randFrame(p)
			note := fmt.Sprintf("valid next frame from host %d", r.Sender)
			if g.chance(30) {
				m := mutations[g.pick(len(mutations)-1)] // not the state mutation
				note = "mutated: " + m(g, &p, r)
			}
			s.step(note, noIntent, r)
		}
	}
}
