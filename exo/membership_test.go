package exo

import (
	"errors"
	"slices"
	"testing"
)

func TestProposeReservedMagic(t *testing.T) {
	r := newRack(t, 3, nil)
	nd := r.nodes[0]
	if err := nd.Propose(append(slices.Clone(ConfigMagic), 1, 2)); !errors.Is(err, ErrReserved) {
		t.Fatalf("Propose(magic...) = %v, want ErrReserved", err)
	}
	if err := nd.Propose(ConfigMagic[:len(ConfigMagic)-1]); err != nil {
		t.Fatalf("a prefix of the magic is a user payload: %v", err)
	}
	if err := nd.ProposeConfig(ConfigChange{Op: ChangeRemove, Member: 7}); !errors.Is(err, ErrBadChange) {
		t.Fatalf("removing a non-member: %v, want ErrBadChange", err)
	}
	if err := nd.ProposeConfig(ConfigChange{Op: ChangeAdd, Member: 1}); !errors.Is(err, ErrBadChange) {
		t.Fatalf("adding a member: %v, want ErrBadChange", err)
	}
}

// memberRack is a rack of the given member ids (index = member id) where
// ids at or above n start as non-members that follow the log (joiners with
// a log, section 7).
func memberRack(t *testing.T, n, extra int) *rack {
	t.Helper()
	r := newRack(t, n, nil)
	for u := n; u < n+extra; u++ {
		cfg := Config{ID: uint8(u), Hosts: u + 1, Group: 1}
		nd, err := RestartNode(cfg, HardState{Roster: IdentityRoster(n)})
		if err != nil {
			t.Fatal(err)
		}
		r.add(nd, cfg)
	}
	return r
}

// spin runs the rack for ticks ticks: deliveries, then a Tick everywhere.
func spin(r *rack, ticks int) {
	for k := 0; k < ticks; k++ {
		r.run(500)
		for i, nd := range r.nodes {
			nd.Tick()
			r.collect(i)
		}
	}
	r.run(500)
}

// checkAgreed: no two hosts agreed different entries at one seq.
func checkAgreed(t *testing.T, r *rack) {
	t.Helper()
	at := map[uint64]Entry{}
	for i, es := range r.agreed {
		for k, e := range es {
			if k > 0 && e.Seq != es[k-1].Seq+1 {
				t.Fatalf("host %d: agreed seq %d after %d", i, e.Seq, es[k-1].Seq)
			}
			if o, ok := at[e.Seq]; ok && !o.Equal(&e) {
				t.Fatalf("seq %d agreed as %+v and %+v (host %d)", e.Seq, o, e, i)
			}
			at[e.Seq] = e
		}
	}
}

// configSeq returns the seq of the last configuration entry in nd's log.
func configSeq(t *testing.T, nd *Node) uint64 {
	t.Helper()
	for i := len(nd.Log()) - 1; i >= 0; i-- {
		if _, ok := ParseConfigEntry(&nd.Log()[i]); ok {
			return nd.Log()[i].Seq
		}
	}
	t.Fatal("no configuration entry in the log")
	return 0
}

// change proposes c at host at and runs the rack until the change is in
// effect everywhere; it checks the switch point and returns it.
func change(t *testing.T, r *rack, at int, c ConfigChange, want []uint8) uint64 {
	t.Helper()
	oldN := len(r.nodes[at].Roster())
	if err := r.nodes[at].ProposeConfig(c); err != nil {
		t.Fatal(err)
	}
	if err := r.nodes[at].ProposeConfig(ConfigChange{Op: ChangeAdd, Member: 99}); !errors.Is(err, ErrChangeInFlight) {
		t.Fatalf("second change while one is in flight: %v, want ErrChangeInFlight", err)
	}
	r.collect(at)
	spin(r, 60)
	cs := configSeq(t, r.nodes[at])
	wantB := cs + uint64(HistoryLen(oldN)) + 1
	for u, nd := range r.nodes {
		if !slices.Contains(want, uint8(u)) {
			if !nd.Removed() {
				t.Fatalf("host %d: not removed, roster %v", u, nd.Roster())
			}
			continue
		}
		if got := nd.Roster(); !slices.Equal(got, want) {
			t.Fatalf("host %d: roster %v, want %v", u, got, want)
		}
		if nd.Removed() || nd.ChangeInFlight() {
			t.Fatalf("host %d: removed=%v in flight=%v", u, nd.Removed(), nd.ChangeInFlight())
		}
		if nd.ConfigSwitch() != wantB {
			t.Fatalf("host %d: switched at %d, want c+h+1 = %d", u, nd.ConfigSwitch(), wantB)
		}
		e, ok := nd.Entry(wantB)
		if !ok {
			t.Fatalf("host %d: no entry at the switch point %d (append %d)", u, wantB, nd.Pointers().Append)
		}
		c0, _ := nd.Entry(cs)
		last, _ := nd.Entry(wantB - 1)
		if last.Epoch != c0.Epoch || e.Epoch <= c0.Epoch {
			t.Fatalf("host %d: epochs c=%d c+h=%d B=%d: want c+h in c's epoch and B in a later one", u, c0.Epoch, last.Epoch, e.Epoch)
		}
		if len(e.History) != HistoryLen(len(want)) || slices.ContainsFunc(e.History, func(x uint8) bool { return x != HistoryNone }) {
			t.Fatalf("host %d: the first entry of the new roster carries history %v, want %d empty slots", u, e.History, HistoryLen(len(want)))
		}
		if p := nd.Pointers(); int(p.Hosts) != len(want) || p.Agreed <= wantB {
			t.Fatalf("host %d: pointers hosts=%d agreed=%d, want %d hosts and the switch agreed", u, p.Hosts, p.Agreed, len(want))
		}
	}
	checkAgreed(t, r)
	return wantB
}

// TestReplaceFiveFourFive replaces host 2 by host 5 in a rack of five: remove
// 2 (5 -> 4 hosts), then add 5 (4 -> 5), with a fixed schedule on a perfect
// network, checking the switch point, the rosters, the fast-path roster size
// and agreement at every step; then payloads still get agreed.
func TestReplaceFiveFourFive(t *testing.T) {
	r := memberRack(t, 5, 1)
	r.nodes[0].Broadcast()
	r.collect(0)
	r.run(200)
	b1 := change(t, r, 1, ConfigChange{Op: ChangeRemove, Member: 2}, []uint8{0, 1, 3, 4})
	// Positions shifted: member 3 is now position 2.
	if id := r.nodes[3].ID(); id != 2 {
		t.Fatalf("member 3 has position %d after removing 2, want 2", id)
	}
	b2 := change(t, r, 4, ConfigChange{Op: ChangeAdd, Member: 5}, []uint8{0, 1, 3, 4, 5})
	t.Logf("switch points: %d (remove 2), %d (add 5); epochs %d", b1, b2, r.nodes[0].Epoch())
	if b2 <= b1 {
		t.Fatalf("switch points %d then %d", b1, b2)
	}
	if id := r.nodes[5].ID(); id != 4 {
		t.Fatalf("member 5 has position %d, want 4", id)
	}
	for _, u := range []int{0, 5} {
		if err := r.nodes[u].Propose([]byte{byte(u), 1, 2, 3, 4, 5, 6, 7}); err != nil {
			t.Fatal(err)
		}
		r.collect(u)
	}
	spin(r, 60)
	checkAgreed(t, r)
	n := 0
	for _, e := range r.agreed[5] {
		if e.Seq > b2 && e.Count > 0 {
			n++
		}
	}
	t.Logf("added host: %d payload entries agreed after the switch, agreed pointer %d", n, r.nodes[5].Pointers().Agreed)
	if n < 2 {
		t.Fatalf("added host agreed %d payload entries after the switch, want 2", n)
	}
	if got := r.nodes[2].Pointers().Hosts; got != 5 || !r.nodes[2].Removed() {
		t.Logf("removed host: hosts=%d removed=%v", got, r.nodes[2].Removed())
	}
}

// TestVoidChange: a configuration entry that a view change carries into a
// later epoch before c+h was appended in its own epoch never takes effect.
func TestVoidChange(t *testing.T) {
	m := memberState{roster: IdentityRoster(5)}
	cfg := Entry{Seq: 10, Epoch: 1, Count: 1}
	cfg.Payload, _ = AppendRecord(nil, ConfigChange{Op: ChangeRemove, Member: 4}.Record())
	if m.observe(&cfg) || !m.pend {
		t.Fatal("config entry not pending")
	}
	m.observe(&Entry{Seq: 11, Epoch: 1})
	if m.observe(&Entry{Seq: 12, Epoch: 2}) || m.pend || m.hasNext {
		t.Fatalf("entry carried into epoch 2 before c+h: %+v, want void", m)
	}
	m = memberState{roster: IdentityRoster(5)}
	m.observe(&cfg)
	m.observe(&Entry{Seq: 11, Epoch: 1})
	if !m.observe(&Entry{Seq: 12, Epoch: 1}) || m.nextAt != 13 || !slices.Equal(m.next, []uint8{0, 1, 2, 3}) {
		t.Fatalf("c+h in c's epoch: %+v, want effective at 13", m)
	}
	if got := RosterAfter(IdentityRoster(5), []Entry{cfg, {Seq: 11, Epoch: 1}, {Seq: 12, Epoch: 1}}); !slices.Equal(got, []uint8{0, 1, 2, 3}) {
		t.Fatalf("RosterAfter = %v", got)
	}
}

// TestRemovedHostDropsItsQueuedChange: a change queued at a host that
// another change removes can no longer be proposed there; it is dropped
// (no change in flight: its operator's wait ends with "removed"), and the
// host, added back later, does not send it.
func TestRemovedHostDropsItsQueuedChange(t *testing.T) {
	r := memberRack(t, 5, 0)
	r.nodes[0].Broadcast()
	r.collect(0)
	r.run(200)
	// Both queued before either is in a log: host 0's goes first, host
	// 2's waits behind it (a configuration entry is sent only when none
	// is pending in the log).
	if err := r.nodes[0].ProposeConfig(ConfigChange{Op: ChangeRemove, Member: 2}); err != nil {
		t.Fatal(err)
	}
	if err := r.nodes[2].ProposeConfig(ConfigChange{Op: ChangeRemove, Member: 1}); err != nil {
		t.Fatal(err)
	}
	r.collect(0)
	r.collect(2)
	spin(r, 60)
	if got := r.nodes[0].Roster(); !slices.Equal(got, []uint8{0, 1, 3, 4}) {
		t.Fatalf("roster %v after host 0's change, want [0 1 3 4] (host 2's change went first?)", got)
	}
	if nd := r.nodes[2]; !nd.Removed() || nd.ChangeInFlight() {
		t.Fatalf("host 2 removed=%v in flight=%v: want removed and its queued change dropped", nd.Removed(), nd.ChangeInFlight())
	}
	change(t, r, 0, ConfigChange{Op: ChangeAdd, Member: 2}, []uint8{0, 1, 2, 3, 4})
	spin(r, 60)
	for u, nd := range r.nodes {
		if got := nd.Roster(); !slices.Equal(got, []uint8{0, 1, 2, 3, 4}) {
			t.Fatalf("host %d: roster %v after host 2 came back: it sent its old change", u, got)
		}
	}
}
