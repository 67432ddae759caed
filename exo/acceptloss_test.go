package exo

import (
	"errors"
	"testing"
)

// TestResolveForcedDoubt: a fork that only hosts which did not answer
// could decide makes Resolve wait (ErrAmbiguous); forced (the operator's
// AcceptLoss), it takes the branch most witnesses hold and reports the
// other one in doubt, from the fork to its end.
func TestResolveForcedDoubt(t *testing.T) {
	// Five hosts (h = 2); 0, 1 and 2 answered, 3 and 4 did not. At seq 10
	// hosts 0 and 1 hold A (sent by 1), host 2 holds B (sent by 2) and C
	// after it: with 3 and 4 unknown, either branch may have been agreed
	// (A by 0, 1 and one of them; B by 2, 3 and 4).
	a := Entry{Seq: 10, Epoch: 1, Sender: 1}
	b := Entry{Seq: 10, Epoch: 1, Sender: 2}
	c := Entry{Seq: 11, Epoch: 1, Sender: 3}
	own := make([]Entry, 10)
	for i := range own {
		own[i] = Entry{Seq: uint64(i), Epoch: 1, Sender: uint8(i % 5)}
	}
	w := func(id uint8, tail ...Entry) Witness {
		return Witness{ID: id, LogEpoch: 1, Agreed: 8, Start: 8, Entries: append([]Entry{own[8], own[9]}, tail...)}
	}
	ws := []Witness{w(0, a), w(1, a), w(2, b, c)}
	if _, err := Resolve(5, 8, 0, own, ws); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Resolve: %v, want ErrAmbiguous", err)
	}
	res, d, err := resolve(5, 8, 0, own, ws, true)
	if err != nil || d == nil {
		t.Fatalf("forced: %v, doubt %v", err, d)
	}
	if got := res.Entries[len(res.Entries)-1]; !got.SameID(&a) || res.Start+uint64(len(res.Entries)) != 11 {
		t.Fatalf("forced resolution ends with %+v at %d, want A at 10", got, res.Start+uint64(len(res.Entries)))
	}
	if d.From != 10 || d.To != 12 || len(d.Lost) != 2 || !d.Lost[0].SameID(&b) || !d.Lost[1].SameID(&c) {
		t.Fatalf("doubt %d..%d lost %+v, want 10..12 with B and C", d.From, d.To, d.Lost)
	}
	// Without a fork nothing is in doubt.
	if _, d, err := resolve(5, 8, 0, own, []Witness{w(0, a), w(1, a), w(2, a)}, true); err != nil || d != nil {
		t.Fatalf("no fork: doubt %v, err %v", d, err)
	}
}
