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

// TestVoidPastLogEnd: a host that fell past the rack's floor cut its
// unagreed entries, a pending roster change among them, and its state
// transfer appended entries of a later epoch: the change became void at a
// seq past the log's end, and voiding it indexed the log there (a panic
// the simulator found: --amnesia 0.2 --keep-entries 16 --roster-changes
// 0.02, seed 419 of 5 hosts, before other changes moved its timing). Such
// a change is no change of this log to void.
func TestVoidPastLogEnd(t *testing.T) {
	nd, err := NewNode(Config{Hosts: 3, ID: 0})
	if err != nil {
		t.Fatal(err)
	}
	for s := uint64(0); s < 5; s++ {
		nd.pushEntry(Entry{Seq: s, Sender: uint8(s % 3), History: []uint8{uint8((s + 2) % 3)}})
	}
	// A change pending at seq 8 of epoch 0, in the part the cut removed.
	nd.ms.pend, nd.ms.pendSeq, nd.ms.pendEpoch = true, 8, 0
	nd.ms.pendChange = ConfigChange{Op: ChangeRemove, Member: 2}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("an entry of a later epoch voiding a change past the log's end: %v", p)
		}
	}()
	nd.pushEntry(Entry{Seq: 5, Epoch: 1, Sender: 2, History: []uint8{1}})
	if nd.ms.pend || nd.voided != nil {
		t.Errorf("pending %v, voided %+v: the change is void and no change of this host's log", nd.ms.pend, nd.voided)
	}
}
