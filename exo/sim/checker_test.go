package sim

import (
	"testing"

	"github.com/exo-rack/exo/exo"
)

// TestCheckerAcceptedLoss: after an override (exo recover --accept-loss)
// the checker lets an agreed entry be replaced only at a position the
// override reported in doubt, and only when every host that delivered the
// old entry lost its state since.
func TestCheckerAcceptedLoss(t *testing.T) {
	pass := func(seq uint64, sender uint8) exo.Entry { return exo.Entry{Seq: seq, Epoch: 1, Sender: sender} }
	run := func(lost bool, doubt exo.Doubt, survivor bool) *Checker {
		c := NewChecker(3)
		for s := uint64(0); s < 3; s++ {
			c.Agreed(1, 0, pass(s, uint8(s%3))) // host 1, incarnation 0
			if survivor {
				c.Agreed(2, 0, pass(s, uint8(s%3)))
			}
		}
		if lost {
			c.LostState(1, 0) // host 1 restarted without its disk
		}
		c.Doubted(doubt)
		c.Agreed(0, 0, pass(0, 0))
		c.Agreed(0, 0, pass(1, 1))
		c.Agreed(0, 0, exo.Entry{Seq: 2, Epoch: 2, Sender: 0}) // another entry at seq 2
		return c
	}
	if c := run(true, exo.Doubt{From: 2, To: 3}, false); c.Err() != nil || c.Lost != 1 {
		t.Fatalf("a loss in the doubt, of a host that lost its state: %v (lost %d), want accepted", c.Err(), c.Lost)
	}
	if c := run(true, exo.Doubt{From: 3, To: 5}, false); c.Err() == nil {
		t.Fatal("a loss outside the reported doubt was accepted")
	}
	if c := run(false, exo.Doubt{From: 2, To: 3}, false); c.Err() == nil {
		t.Fatal("a loss at a host that kept its state was accepted")
	}
	if c := run(true, exo.Doubt{From: 2, To: 3}, true); c.Err() == nil {
		t.Fatal("a loss of an entry another host still holds was accepted")
	}
}
