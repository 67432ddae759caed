package exo

// Pointers is the fast-path state of one host: exactly what the XDP program
// keeps in its BPF map and the FPGA engine in its registers. Classify and
// Accept are the fast-path rules; the golden vectors in testdata/vectors are
// (Pointers, frame) -> (Reason, Pointers) pairs produced by these two
// functions, and the C and Verilog twins must reproduce them.
//
// Everything the fast path cannot decide alone (gaps, divergence, other
// epochs, a view change in progress) is classified with a slow-path reason
// and left to the Node.
type Pointers struct {
	Group  uint16 // group id accepted
	Hosts  uint16 // roster size n
	Epoch  uint32 // epoch of the current log
	Halted bool   // a view change is in progress: no frame is accepted
	Window uint64 // SeqWindow: how far ahead a frame may be held as a gap
	Append uint64 // append pointer: the next sequence number expected
	Agreed uint64 // agreement pointer: every entry below it is agreed
	// EpochStart is the append pointer when the current epoch began: only
	// frames of the current epoch count towards agreement, so appending s
	// agrees s-h only when s-h >= EpochStart.
	EpochStart uint64
	// History holds the senders of entries Append-1, Append-2, ... (most
	// recent first); the first h = Hosts/2 bytes are used, the rest stay
	// HistoryNone.
	History [MaxHistory]uint8
}

// NewPointers returns the initial pointer state of a rack of n hosts.
func NewPointers(group uint16, n int, window uint64) Pointers {
	p := Pointers{Group: group, Hosts: uint16(n), Window: window}
	p.ClearHistory()
	return p
}

// ClearHistory sets every history slot to HistoryNone ("X").
func (p *Pointers) ClearHistory() {
	for i := range p.History {
		p.History[i] = HistoryNone
	}
}

// H returns the history length h = floor(n/2).
func (p *Pointers) H() int { return int(p.Hosts) / 2 }

// Hist returns the used part of the history (h ids, most recent first).
func (p *Pointers) Hist() []uint8 { return p.History[:p.H()] }

// InHistory reports whether id is one of the last h senders.
func (p *Pointers) InHistory(id uint8) bool {
	for _, x := range p.Hist() {
		if x == id {
			return true
		}
	}
	return false
}

// Classify decides what a decoded frame means for this state without
// changing it. The order of the checks is part of the specification: the
// first failing check names the reason. It does not check the frame's tag:
// a received frame goes through ClassifyTagged, which checks the tag
// between checks 1 and 2 (the place the XDP program and the FPGA engine
// check it too); Classify alone is for entries whose tag was checked when
// they arrived, or that came over the authenticated OOB service.
//
//  1. group         -> BAD_GROUP
//     (tag          -> BAD_TAG, in ClassifyTagged)
//  2. sender < n    -> BAD_SENDER
//  3. hist_len == h -> BAD_HISTLEN
//  4. history ids < n or 0xFF -> BAD_HISTORY_ID
//  5. epoch         -> STALE_EPOCH (older) / FUTURE_EPOCH (newer, slow path)
//  6. not halted    -> HALTED (slow path)
//  7. seq < append  -> DUPLICATE, or DIVERGENCE when seq is within the last h
//     entries and its sender differs from the history at that position
//  8. seq > append  -> GAP (slow path), SEQ_TOO_FAR beyond Window
//  9. history equal -> DIVERGENCE (slow path)
//  10. sender not in history -> SENDER_IN_HISTORY (the distinct-sender rule)
//  11. ACCEPT
func (p *Pointers) Classify(f *Frame) Reason {
	n := int(p.Hosts)
	h := n / 2
	switch {
	case f.Group != p.Group:
		return ReasonBadGroup
	case int(f.Sender) >= n:
		return ReasonBadSender
	case len(f.History) != h:
		return ReasonBadHistlen
	}
	for _, id := range f.History {
		if id != HistoryNone && int(id) >= n {
			return ReasonBadHistoryID
		}
	}
	switch {
	case f.Epoch < p.Epoch:
		return ReasonStaleEpoch
	case f.Epoch > p.Epoch:
		return ReasonFutureEpoch
	case p.Halted:
		return ReasonHalted
	}
	if f.Seq < p.Append {
		back := p.Append - 1 - f.Seq // 0 for the newest entry
		if back < uint64(h) && p.History[back] != f.Sender {
			return ReasonDivergence
		}
		return ReasonDuplicate
	}
	if f.Seq > p.Append {
		if f.Seq-p.Append > p.Window {
			return ReasonSeqTooFar
		}
		return ReasonGap
	}
	for i, id := range f.History {
		if p.History[i] != id && !brokenHistory {
			return ReasonDivergence
		}
	}
	if p.InHistory(f.Sender) && !brokenDistinct {
		return ReasonSenderInHistory
	}
	return ReasonAccept
}

// Accept applies a frame that Classify accepted: the sender enters the
// history, the append pointer moves past it and, once h+1 distinct senders
// of the current epoch follow an entry, the agreement pointer moves to it
// (appending s agrees s-h, if s-h >= EpochStart).
func (p *Pointers) Accept(sender uint8, seq uint64) {
	h := p.H()
	if h > 0 {
		copy(p.History[1:h], p.History[:h-1])
		p.History[0] = sender
	}
	p.Append = seq + 1
	if seq >= p.EpochStart && seq-p.EpochStart >= uint64(h) && seq-uint64(h)+1 > p.Agreed {
		p.Agreed = seq - uint64(h) + 1
	}
}
