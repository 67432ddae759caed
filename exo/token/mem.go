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
	slots [QueueSlots]exo.Batch // batch i in slot i % QueueSlots
	tail  uint64                // batches E.QHead..tail-1 wait
	ring  []Record              // records not released; read from ring[read:]
	read  int
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
	if m.E.QHead < m.tail {
		head = &m.slots[m.E.QHead%QueueSlots]
	}
	kseq, armed := m.E.Kseq, m.E.On && !m.E.Halted
	r, t := m.E.Step(f, head, m.Keys.Key[m.E.Phase&1])
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

// Push publishes a batch in slot tail % QueueSlots; false with QueueSlots
// batches waiting. (The control plane reuses a slot only once the record
// of the batch taken from it is released: Taken.)
func (m *Mem) Push(b exo.Batch) (bool, error) {
	if m.tail-m.E.QHead >= QueueSlots {
		return false, nil
	}
	b.Payload = append([]byte(nil), b.Payload...)
	m.slots[m.tail%QueueSlots] = b
	m.tail++
	return true, nil
}

// Reclaim empties the queue (the fast path is halted).
func (m *Mem) Reclaim() (int, error) {
	if !m.E.Halted {
		return 0, fmt.Errorf("token: reclaim while the fast path runs")
	}
	n := int(m.tail - m.E.QHead)
	m.tail = m.E.QHead
	return n, nil
}

// Records hands every record written since the last read to fn.
func (m *Mem) Records(fn func(*Record)) (int, error) {
	n := len(m.ring) - m.read
	for ; m.read < len(m.ring); m.read++ {
		fn(&m.ring[m.read])
	}
	return n, nil
}

// Release forgets the records read.
func (m *Mem) Release() error {
	k := copy(m.ring, m.ring[m.read:])
	clear(m.ring[k:])
	m.ring = m.ring[:k]
	m.read = 0
	return nil
}

// Taken returns batch i if its slot still holds it.
func (m *Mem) Taken(i uint64) (exo.Batch, bool) {
	if i >= m.E.QHead || m.E.QHead-i > QueueSlots || m.tail-i > QueueSlots {
		return exo.Batch{}, false
	}
	return m.slots[i%QueueSlots], true
}

// Crash is the end of the control plane that drove m (a killed daemon): m
// stops (the XDP program detaches with its process; its pinned maps stay),
// and the records not released will be read again by the next one.
func (m *Mem) Crash() {
	m.E.Halted = true
	m.read = 0
}

// Waiting returns how many records wait to be read.
func (m *Mem) Waiting() int { return len(m.ring) - m.read }

// Urgent reports whether a record waiting to be read needs the control
// plane at once: the slow path (a verdict other than ACCEPT) or a halt,
// the records the XDP program wakes even a control plane that sleeps
// through agreements for (its urgent-only wait, docs/token.md section 2).
func (m *Mem) Urgent() bool {
	for i := m.read; i < len(m.ring); i++ {
		if r := &m.ring[i]; r.Reason != exo.ReasonAccept || r.Halt {
			return true
		}
	}
	return false
}
