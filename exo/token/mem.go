package token

import (
	"fmt"

	"github.com/exo-rack/exo/exo"
)

// Mem is a fast path in memory: exo.Engine's rule behind the checks the
// XDP program makes first (the group, the tag under the key slot the
// frame's phase names), a transmit queue and a ring of records. The
// simulator puts one in front of every host's core (exo sim --token), and
// the tests drive a Driver with it.
type Mem struct {
	// E is the fast path's state. It starts halted (the zero Engine with
	// Halted set by NewMem).
	E exo.Engine
	// Keys are the key slots it checks tags against, and sends under (the
	// slot E.Phase names). The embedder keeps them the core's (the daemon
	// writes the XDP program's key map whenever they change).
	Keys  exo.KeyRing
	queue []exo.Batch // published, not taken: batches E.QHead on
	ring  []Record
	buf   []byte
}

// NewMem returns a halted fast path with an empty queue and ring.
func NewMem(keys exo.KeyRing) *Mem {
	m := &Mem{Keys: keys}
	m.E.Halted = true
	return m
}

// Frame runs a received frame through the fast path and returns the frame
// it sent in answer (this host's next entry), or nil, and its verdict. A
// frame of another group or with a bad tag is dropped before the rule, as
// in the XDP program.
func (m *Mem) Frame(f *exo.Frame) (*exo.Frame, exo.Reason) {
	if f.Type != exo.FrameData {
		return nil, exo.ReasonBadType
	}
	if f.Group != m.E.Group {
		return nil, exo.ReasonBadGroup
	}
	if !m.Keys.Verify(f) {
		return nil, exo.ReasonBadTag
	}
	var head *exo.Batch
	if len(m.queue) > 0 {
		head = &m.queue[0]
	}
	kseq, armed := m.E.Kseq, m.E.On && !m.E.Halted
	r, t := m.E.Step(f, head, m.Keys.Key[m.E.Phase&1])
	if t.Popped {
		m.queue = m.queue[1:]
	}
	if t.Record {
		var err error
		if m.buf, err = f.AppendBinary(m.buf[:0]); err != nil {
			panic(fmt.Sprintf("token: a frame that passed the fast path does not encode: %v", err))
		}
		m.ring = append(m.ring, Record{Kseq: kseq, QHead: m.E.QHead, TxTag: t.Frame.Tag, Reason: r, Armed: armed,
			Sent: t.Sent, Popped: t.Popped, Handoff: t.Handoff, Halt: t.Halt, Frame: append([]byte(nil), m.buf...)})
	}
	if !t.Sent {
		return nil, r
	}
	return &t.Frame, r
}

// Halt stops the fast path.
func (m *Mem) Halt() (exo.Engine, error) {
	m.E.Halted = true
	return m.E, nil
}

// Set writes e (its Kseq aside) if the fast path produced exactly e.Kseq
// records.
func (m *Mem) Set(e exo.Engine) (bool, error) {
	if e.Kseq != m.E.Kseq {
		return false, nil
	}
	m.E = e
	return true, nil
}

// Push publishes a batch; false with QueueSlots batches waiting.
func (m *Mem) Push(b exo.Batch) (bool, error) {
	if len(m.queue) >= QueueSlots {
		return false, nil
	}
	b.Payload = append([]byte(nil), b.Payload...)
	m.queue = append(m.queue, b)
	return true, nil
}

// Reclaim empties the queue (the fast path is halted).
func (m *Mem) Reclaim() (int, error) {
	if !m.E.Halted {
		return 0, fmt.Errorf("token: reclaim while the fast path runs")
	}
	n := len(m.queue)
	m.queue = nil
	return n, nil
}

// Records hands every record written so far to fn, and forgets them.
func (m *Mem) Records(fn func(*Record)) (int, error) {
	n := len(m.ring)
	for i := range m.ring {
		fn(&m.ring[i])
	}
	clear(m.ring)
	m.ring = m.ring[:0]
	return n, nil
}

// Waiting returns how many records wait to be read.
func (m *Mem) Waiting() int { return len(m.ring) }
