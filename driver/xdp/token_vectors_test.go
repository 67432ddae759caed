//go:build linux

package xdp

// The golden vectors' transmit cases (format 5, docs/vectors.md section
// 8) through token mode: arm each case's state and tx, fill the queue,
// run the frame, and require the vector's verdict, action, frame sent,
// state and tx after, record and counters. Stream steps after the first
// run on the state and queue the program left (plus the batches the
// control plane queued meanwhile); a step armed again is set afresh.

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/goldvec"
)

func TestGoldenVectorsToken(t *testing.T) {
	vs, err := goldvec.LoadJSON("")
	if err != nil {
		t.Fatal(err)
	}
	if vs.Version < 5 || len(vs.TxCases) == 0 {
		t.Fatalf("%s: no transmit cases (format 5)", vs.Format)
	}
	h := newTokHarness(t, LoadOptions{})
	var st tokStats
	agree, big, bad := 0, 0, 0
	for i := range vs.TxCases {
		c := &vs.TxCases[i]
		keys := vs.Keys(c)
		e := exo.Engine{Pointers: c.In, Tx: c.TxIn}
		tc := tokCase{name: c.Where, e: e, queue: c.Queue, keys: keys, frame: c.Frame}
		if !c.Chained {
			h.set(e, c.Queue, keys)
		} else if !h.carry(&tc) {
			bad++
			continue
		}
		// The vector's expectation, as the harness states it.
		x := tokExpect{reason: c.Reason, stepped: c.Decoded, after: exo.Engine{Pointers: c.Out, Tx: c.TxOut},
			turn: exo.Turn{Record: c.Turn.Record, Sent: c.Turn.Sent != nil, Popped: c.Turn.Popped,
				Handoff: c.Turn.Handoff, Halt: c.Turn.Halt},
			sent: c.Turn.Sent, action: ActionDrop}
		if x.turn.Sent {
			x.turn.Frame.Tag = binary.BigEndian.Uint64(c.Turn.Sent[exo.OffTag:])
		}
		switch {
		case !e.On && (x.reason == exo.ReasonAccept || x.reason.SlowPath()):
			x.action = ActionPass
		case x.turn.Sent:
			x.action = ActionTX
		}
		// The Go rule must say the same (a check of the harness; a
		// frame longer than MaxFrame is never sent by the program).
		m := tokModel(e, c.Frame, c.Queue, keys, 1<<20)
		if !m.noroom && (m.reason != x.reason || m.after != x.after || m.turn.Record != x.turn.Record || m.turn.Sent != x.turn.Sent ||
			m.turn.Popped != x.turn.Popped || m.turn.Handoff != x.turn.Handoff || m.turn.Halt != x.turn.Halt || !bytes.Equal(m.sent, x.sent)) {
			t.Errorf("%s: exo.Engine.Step disagrees with the vector (%s %+v, want %s %+v)", c.Where, m.reason, m.after.Tx, x.reason, x.after.Tx)
		}
		if x.turn.Sent && max(exo.MinEthFrame, exo.EthHeaderLen+len(x.sent)) > h.room {
			// The frame sent does not fit a test run's buffer (a page
			// less headroom and tailroom), or is longer than MaxFrame:
			// the program hands off (TX_NOROOM), which the model
			// states.
			big++
			x = tokModel(e, c.Frame, c.Queue, keys, h.room)
			if !x.noroom {
				t.Fatalf("%s: the model sends %d bytes in a %d-byte buffer", c.Where, len(x.sent), h.room)
			}
		}
		if h.runCase(&tc, &x, &st) {
			agree++
		} else if bad++; bad > 20 {
			t.Fatal("too many disagreements")
		}
	}
	t.Logf("%s: %s", vs.Format, &st)
	t.Logf("vectors.json transmit cases: %d of %d agree (action, frame sent, state and tx after, record, counters); %d of them send a frame longer than a test run's %d-byte buffer holds (or MaxFrame) and were checked as the program's TX_NOROOM hand-off",
		agree, len(vs.TxCases), big, h.room)
	if agree != len(vs.TxCases) {
		t.Errorf("%d of %d transmit cases disagree", len(vs.TxCases)-agree, len(vs.TxCases))
	}
}

// carry prepares a stream step that runs on the state the program left:
// the state must be the step's state before, and the queue must hold the
// step's queue, less the batches the control plane queued since (pushed
// here).
func (h *tokHarness) carry(c *tokCase) bool {
	t := h.tb
	t.Helper()
	got, err := h.tok.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got != c.e {
		t.Errorf("%s: carried state\n\tgot  %s %+v\n\twant %s %+v", c.name, StateString(got.Pointers), got.Tx, StateString(c.e.Pointers), c.e.Tx)
		return false
	}
	_, tail := h.tok.Queue()
	waiting := int(tail - got.QHead)
	if waiting > len(c.queue) {
		t.Errorf("%s: the program's queue holds %d batches, the step's %d", c.name, waiting, len(c.queue))
		return false
	}
	for i := range waiting {
		s := h.tok.slot(got.QHead + uint64(i))
		n := binary.NativeEndian.Uint16(s[0:])
		if b := c.queue[i]; binary.NativeEndian.Uint16(s[2:]) != b.Count || int(n) != len(b.Payload) || !bytes.Equal(s[8:8+int(n)], b.Payload) {
			t.Errorf("%s: queued batch %d differs from the step's", c.name, i)
			return false
		}
	}
	for _, b := range c.queue[waiting:] {
		if ok, err := h.tok.Push(b); err != nil || !ok {
			t.Fatalf("%s: push: %v %v", c.name, ok, err)
		}
	}
	if err := h.p.SetKeys(c.keys); err != nil {
		t.Fatal(err)
	}
	return true
}
