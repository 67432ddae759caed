package exo

import (
	"errors"
	"testing"
)

// forkLog returns a log of five hosts to seq 10 (agreed to 8) and a
// witness whose log is its last two entries followed by tail.
func forkLog() ([]Entry, func(id uint8, tail ...Entry) Witness) {
	own := make([]Entry, 10)
	for i := range own {
		own[i] = Entry{Seq: uint64(i), Epoch: 1, Sender: uint8(i % 5)}
	}
	return own, func(id uint8, tail ...Entry) Witness {
		return Witness{ID: id, LogEpoch: 1, Agreed: 8, Start: 8, Entries: append([]Entry{own[8], own[9]}, tail...)}
	}
}

// TestResolveForcedDoubt: a fork that only hosts which did not answer
// could decide makes Resolve wait (ErrAmbiguous); forced (the operator's
// AcceptLoss), it takes the branch most witnesses hold and reports the
// other one in doubt, from the fork to its end.
func TestResolveForcedDoubt(t *testing.T) {
	// Five hosts (h = 2); 0, 1 and 2 answered, 3 and 4 did not. At seq 10
	// hosts 0 and 1 hold A (sent by 1), and 0 sent D after it; host 2
	// holds B (sent by 2) and C (sent by 3) after it. With 3 and 4
	// unknown, either branch may have been agreed: A by 1, 0 and 4 (the
	// frames at 11 and 12 sent by 0 and 4), B by 2, 3 and 4.
	a := Entry{Seq: 10, Epoch: 1, Sender: 1}
	d := Entry{Seq: 11, Epoch: 1, Sender: 0}
	b := Entry{Seq: 10, Epoch: 1, Sender: 2}
	c := Entry{Seq: 11, Epoch: 1, Sender: 3}
	own, w := forkLog()
	ws := []Witness{w(0, a, d), w(1, a), w(2, b, c)}
	if _, err := Resolve(5, 8, 0, own, ws); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Resolve: %v, want ErrAmbiguous", err)
	}
	res, dt, err := resolve(5, 8, 0, own, ws, true)
	if err != nil || dt == nil {
		t.Fatalf("forced: %v, doubt %v", err, dt)
	}
	if got := res.Entries[len(res.Entries)-1]; !got.SameID(&d) || res.Start+uint64(len(res.Entries)) != 12 {
		t.Fatalf("forced resolution ends with %+v at %d, want A at 10 and D at 11", got, res.Start+uint64(len(res.Entries)))
	}
	if dt.From != 10 || dt.To != 12 || len(dt.Lost) != 2 || !dt.Lost[0].SameID(&b) || !dt.Lost[1].SameID(&c) {
		t.Fatalf("doubt %d..%d lost %+v, want 10..12 with B and C", dt.From, dt.To, dt.Lost)
	}
	// Without D, A cannot have been agreed: the frames at 11 and 12 would
	// come from two hosts other than its sender 1 that held A, and only 4
	// may have (0 and 1 sent nothing after it, 2 and 3 hold B). B is the
	// only branch that may have been, and Resolve takes it without the
	// operator.
	ws = []Witness{w(0, a), w(1, a), w(2, b, c)}
	res, err = Resolve(5, 8, 0, own, ws)
	if err != nil {
		t.Fatalf("Resolve without D: %v, want B", err)
	}
	if got := res.Entries[len(res.Entries)-1]; !got.SameID(&c) || res.Start+uint64(len(res.Entries)) != 12 {
		t.Fatalf("resolution without D ends with %+v at %d, want B at 10 and C at 11", got, res.Start+uint64(len(res.Entries)))
	}
	// Without a fork nothing is in doubt.
	if _, d, err := resolve(5, 8, 0, own, []Witness{w(0, a), w(1, a), w(2, a)}, true); err != nil || d != nil {
		t.Fatalf("no fork: doubt %v, err %v", d, err)
	}
}

// TestResolveTakeoverRaceWithAHostDown is a lab rack's stall: host 4 was
// killed (its disk then wiped), 0 took the token over from 3, which was
// slow, not dead, and both sent at seq 10: 0 and 1 hold X (sent by 0, and
// 1 sent F after it), 3 and 2 hold Y (sent by 3, nothing after it). Each
// branch is held by two witnesses and may have been held by 4, so the
// view change waited for 4, which came back without its state: the rack
// stalled for good. Y cannot have been agreed (the frames at 11 and 12
// would come from two hosts other than 3 that held Y; only 4 may have),
// so X is taken.
func TestResolveTakeoverRaceWithAHostDown(t *testing.T) {
	x := Entry{Seq: 10, Epoch: 1, Sender: 0}
	f := Entry{Seq: 11, Epoch: 1, Sender: 1}
	y := Entry{Seq: 10, Epoch: 1, Sender: 3}
	own, w := forkLog()
	ws := []Witness{w(0, x, f), w(1, x, f), w(2, y), w(3, y)}
	res, err := Resolve(5, 8, 0, own, ws)
	if err != nil {
		t.Fatalf("Resolve: %v, want X and F", err)
	}
	if got := res.Entries[len(res.Entries)-1]; !got.SameID(&f) || res.Start+uint64(len(res.Entries)) != 12 {
		t.Fatalf("resolution ends with %+v at %d, want X at 10 and F at 11", got, res.Start+uint64(len(res.Entries)))
	}
	// With a frame after Y from 2, Y too may have been agreed (by 3, 2
	// and 4): the view change waits for 4.
	g := Entry{Seq: 11, Epoch: 1, Sender: 2}
	ws = []Witness{w(0, x, f), w(1, x, f), w(2, y, g), w(3, y)}
	if _, err := Resolve(5, 8, 0, own, ws); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Resolve with G: %v, want ErrAmbiguous", err)
	}
}
