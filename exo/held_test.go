package exo

import "testing"

// agreedRack is a rack of n hosts that agreed 60 entries at least: one
// proposal each, then 200 ticks.
func agreedRack(t *testing.T, n int) *rack {
	t.Helper()
	r := newRack(t, n, nil)
	for i := range r.nodes {
		r.nodes[i].Propose([]byte("x"))
		r.collect(i)
	}
	r.runTicking(200, nil)
	for i, nd := range r.nodes {
		if a := nd.Pointers().Agreed; a < 60 {
			t.Fatalf("host %d agreed %d: want 60 entries", i, a)
		}
	}
	return r
}

// TestHeldAndArchive: members compacted to different bases, one with an
// archive below its log, announce what they hold; every host computes
// the same rack floor (the lowest position a majority serves) and the
// members that lag; a fetch from below a member's log is answered from its
// archive (entries left to the embedder), and from the archive's base with
// the roster there when asked for less.
func TestHeldAndArchive(t *testing.T) {
	r := agreedRack(t, 5)
	// A: log from 40, archive from 25; B: log from 50, archive from 30;
	// C: log from 20; D and E: whole logs.
	r.nodes[0].Compact(40)
	r.nodes[0].SetArchive(25, []uint8{0, 1, 2, 3, 4})
	r.nodes[1].Compact(50)
	r.nodes[1].SetArchive(30, []uint8{0, 1, 2, 3, 4})
	r.nodes[2].Compact(20)
	if r.nodes[0].ArchiveBase() != 25 || r.nodes[2].ArchiveBase() != 20 {
		t.Fatalf("archive bases %d, %d", r.nodes[0].ArchiveBase(), r.nodes[2].ArchiveBase())
	}
	if _, ok := r.nodes[3].RackFloor(); ok {
		t.Fatal("a rack floor before any announcement")
	}
	for i, nd := range r.nodes {
		nd.AnnounceHeld()
		r.collect(i)
	}
	r.run(1000)
	for i, nd := range r.nodes {
		// Served from: 25, 30, 20, 0, 0 -> the third lowest is 20.
		if f, ok := nd.RackFloor(); !ok || f != 20 || len(nd.HeldByMembers()) != 5 {
			t.Errorf("host %d: rack floor %d %v from %+v, want 20", i, f, ok, nd.HeldByMembers())
		}
	}
	if lag := r.nodes[0].LaggingBelow(r.nodes[0].Pointers().Agreed + 1); len(lag) != 4 {
		t.Errorf("lagging below the end: %+v, want the 4 others", lag)
	}
	// D fetches from 10 at B: answered from B's archive base (30) with the
	// roster there, entries left to the embedder, up to B's log base.
	b := r.nodes[1]
	b.Step(Message{Type: MsgFetch, From: 3, To: 1, Lo: 10, Epoch: b.Pointers().Epoch})
	msgs := append([]Message(nil), b.Ready().Messages...) // Advance reuses the Ready's memory
	b.Advance()
	if len(msgs) != 1 {
		t.Fatalf("answers %v", msgs)
	}
	m := msgs[0]
	if m.Start != 30 || m.ArchiveHi != 50 || m.StartRoster == nil || len(m.Entries) != 0 || m.ArchiveLimit.Entries == 0 {
		t.Fatalf("archive answer %+v: want Start 30, ArchiveHi 50, the roster, no entries", m)
	}
	// From 35: from there, no roster; from 55: from the log as before.
	b.Step(Message{Type: MsgFetch, From: 3, To: 1, Lo: 35, Epoch: b.Pointers().Epoch})
	b.Step(Message{Type: MsgFetch, From: 3, To: 1, Lo: 55, Epoch: b.Pointers().Epoch})
	msgs = append(msgs[:0], b.Ready().Messages...)
	b.Advance()
	if m := msgs[0]; m.Start != 35 || m.ArchiveHi != 50 || m.StartRoster != nil {
		t.Fatalf("archive answer from 35: %+v", m)
	}
	if m := msgs[1]; m.Start != 55 || m.ArchiveHi != 0 || len(m.Entries) == 0 || m.Entries[0].Seq != 55 {
		t.Fatalf("answer from 55: %+v", m)
	}
}

// TestFillFromArchive: a fetch answer takes one read; a promise needs its
// whole range before its entries, over as many reads as it takes, or is
// not sent.
func TestFillFromArchive(t *testing.T) {
	arch := make([]Entry, 100)
	for i := range arch {
		arch[i] = Entry{Seq: uint64(i), Epoch: 1, Count: 1, Payload: []byte{byte(i)}}
	}
	read := func(per int) func(lo, hi uint64, lim FetchLimit) ([]Entry, error) {
		return func(lo, hi uint64, lim FetchLimit) ([]Entry, error) {
			n := min(uint64(per), hi-lo, uint64(max(lim.Entries, 1)))
			return arch[lo : lo+n], nil
		}
	}
	m := Message{Type: MsgFetchResp, Start: 10, ArchiveHi: 60, ArchiveLimit: FetchLimit{Entries: 30}}
	if !FillFromArchive(&m, read(20)) || m.ArchiveHi != 0 || len(m.Entries) != 20 || m.Entries[0].Seq != 10 {
		t.Fatalf("fetch answer: %d entries from %v, ArchiveHi %d", len(m.Entries), m.Entries[0].Seq, m.ArchiveHi)
	}
	p := Message{Type: MsgPromise, Start: 10, ArchiveHi: 60, ArchiveLimit: FetchLimit{Entries: 50}, Entries: arch[60:70]}
	if !FillFromArchive(&p, read(20)) || len(p.Entries) != 60 {
		t.Fatalf("promise: %d entries, want 60", len(p.Entries))
	}
	for i, e := range p.Entries {
		if e.Seq != uint64(10+i) {
			t.Fatalf("promise entry %d is seq %d", i, e.Seq)
		}
	}
	short := Message{Type: MsgPromise, Start: 10, ArchiveHi: 60, ArchiveLimit: FetchLimit{Entries: 50}, Entries: arch[60:70]}
	gone := func(lo, hi uint64, lim FetchLimit) ([]Entry, error) {
		if lo >= 30 {
			return nil, nil // the rest was removed meanwhile
		}
		return read(20)(lo, hi, lim)
	}
	if FillFromArchive(&short, gone) {
		t.Fatal("a promise missing part of its range was filled")
	}
}

// TestTwoFloorJumpsInOneReady: a host in its state transfer that jumps
// past its log's end twice in one Ready (two answers, each from a member
// compacted past where it stood) must cut its durable log at the first
// jump's point: cut at the second's, the log on disk kept the entries of
// the first jump, and no longer matched the node's (the simulator:
// --amnesia 0.2 --keep-entries 16 --retain 64, seed 848 of 7 hosts).
func TestTwoFloorJumpsInOneReady(t *testing.T) {
	src := agreedRack(t, 3).nodes[0]
	x, err := NewAmnesiacNode(Config{Hosts: 3, ID: 2, MaxFetchEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	answer := func(start uint64) Message {
		es := append([]Entry(nil), src.Log()[start-src.LogBase():start-src.LogBase()+4]...)
		return Message{Type: MsgFetchResp, From: x.fetchPeer, To: 2, LogEpoch: src.Pointers().Epoch,
			Agreed: src.Pointers().Agreed, Start: start, Hi: src.Pointers().Append, Entries: es, StartRoster: []uint8{0, 1, 2}}
	}
	// The transfer's first fetch (at its first tick), then its answer from
	// 0: the durable log starts there.
	x.Tick()
	x.Advance()
	x.Step(answer(0))
	x.Advance()
	x.Step(answer(10)) // a jump past 4
	x.Step(answer(40)) // and another, in the same Ready
	rd := x.Ready()
	if !rd.HasTruncate || rd.Truncate != 0 {
		t.Fatalf("Ready cuts the durable log at %d (%v): want 0, the log on disk started there", rd.Truncate, rd.HasTruncate)
	}
	if len(rd.Appended) == 0 || rd.Appended[0].Seq != 40 || x.LogBase() != 40 {
		t.Fatalf("appended from %v, log base %d: want 40", rd.Appended, x.LogBase())
	}
}
