package exo

import "testing"

// TestCaughtUpSpareFetchesAtTokenPace: a spare (a host out of the roster,
// started without state) transfers the agreed log and then follows it by
// fetching. Once it is within a batch of the rack, it asks again after a
// token timeout, not at every tick: a fetch a tick (4,000 a second in the
// daemon) cost the members of a lab rack a third of their rate while a new
// host followed them.
func TestCaughtUpSpareFetchesAtTokenPace(t *testing.T) {
	const n, batch = 3, 4
	r := loadedRack(t, n, batch, 60)
	cfg := Config{ID: n, Hosts: n, Group: 1, MaxFetchEntries: batch}
	spare, err := NewAmnesiacNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.add(spare, cfg)
	fetches := 0
	r.dropMsg = func(m Message) bool {
		if m.Type == MsgFetch && m.From == n {
			fetches++
		}
		return false
	}
	var rackAgreed []uint64 // the rack's agreement pointer after each tick
	tick := func() {
		for i, nd := range r.nodes {
			nd.Tick()
			r.collect(i)
		}
		r.run(1000)
		rackAgreed = append(rackAgreed, r.nodes[0].Pointers().Agreed)
	}
	tt := spare.cfg.TokenTimeout
	// behind reports whether the spare lacks what the rack had agreed two
	// token timeouts ago (the rack sends empty frames when idle: it moves
	// on while the spare waits between fetches).
	behind := func() bool {
		k := len(rackAgreed) - 1 - 2*tt
		return k < 0 || spare.Pointers().Agreed < rackAgreed[k]
	}
	for k := 0; k < 500 && behind(); k++ {
		tick()
	}
	if behind() || !spare.Transferring() {
		t.Fatalf("the spare's agreement pointer %d, the rack's %d, transferring %v: it did not catch up", spare.Pointers().Agreed, r.nodes[0].Pointers().Agreed, spare.Transferring())
	}
	const ticks = 400
	fetches = 0
	for k := 0; k < ticks; k++ {
		tick()
	}
	if max := ticks/tt + 1; fetches > max {
		t.Fatalf("a caught-up spare sent %d fetches in %d ticks; at most %d (one a token timeout of %d ticks)", fetches, ticks, max, tt)
	}
	if behind() {
		t.Fatalf("the spare's agreement pointer %d, the rack's %d: it stopped following the log", spare.Pointers().Agreed, r.nodes[0].Pointers().Agreed)
	}
}

// TestPacedTransferEnds: a transfer paced far below the rack's log growth
// (Config.TransferBytesPerTick) still gains on the rack, so it ends:
// batches follow at once while the rack is further ahead than the least it
// was after a batch (the least gap then shrinks by a batch a paced wait).
// While the transfer gains (the rack does not grow), the pace holds.
func TestPacedTransferEnds(t *testing.T) {
	const n, batch = 3, 4
	newSpare := func(r *rack, perTick int) *Node {
		cfg := Config{ID: n, Hosts: n, Group: 1, MaxFetchEntries: batch, TransferBytesPerTick: perTick}
		spare, err := NewAmnesiacNode(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.add(spare, cfg)
		return spare
	}
	// The rack grows at every tick (about an entry every other tick);
	// the pace is one byte a tick (a batch of 4 entries waits over 100
	// ticks): the pace alone falls further behind at every batch.
	r := loadedRack(t, n, batch, 60)
	spare := newSpare(r, 1)
	gapAt := func(ticks int) uint64 {
		for k := 0; k < ticks; k++ {
			for i, nd := range r.nodes {
				nd.Tick()
				r.collect(i)
			}
			r.run(1000)
		}
		return r.nodes[0].Pointers().Agreed - spare.Pointers().Agreed
	}
	first := gapAt(500)
	last := gapAt(2500)
	if last >= first || !spare.Transferring() {
		t.Fatalf("the paced spare was %d entries behind the rack, then %d 2,500 ticks later (transferring %v): the pace kept the transfer from gaining", first, last, spare.Transferring())
	}
	// A rack that does not grow (its members do not tick): the spare's
	// fetches keep the pace.
	r = loadedRack(t, n, batch, 60)
	const perTick = 20
	spare = newSpare(r, perTick)
	fetches, bytes := 0, 0
	r.dropMsg = func(m Message) bool {
		switch {
		case m.Type == MsgFetch && m.From == n:
			fetches++
		case m.Type == MsgFetchResp && m.To == n:
			for i := range m.Entries {
				bytes += m.Entries[i].BinarySize()
			}
		}
		return false
	}
	const paced = 400
	for k := 0; k < paced; k++ {
		spare.Tick()
		r.collect(n)
		r.run(1000)
	}
	if bytes > perTick*paced+2*batch*64 || fetches < 2 {
		t.Fatalf("%d fetches brought %d bytes in %d ticks at %d bytes a tick: the pace was not kept", fetches, bytes, paced, perTick)
	}
}
