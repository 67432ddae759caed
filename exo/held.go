package exo

import "sort"

// What each member holds, and the rack's floor. A member serves fetches
// from its ArchiveBase (its retained log, or its log's base) to its log's
// end; the rack's floor is the lowest position that a majority of the
// members still serve: a host that joins, or falls behind, below it may
// find too few members to fetch from, and where no member serves it, it
// starts at a member's base (a floor jump). The members tell each other
// what they hold (MsgHeld) when their embedders ask (AnnounceHeld: the
// daemon does every second); it informs operators and changes nothing in
// the protocol.

// Held is what one member last said it holds.
type Held struct {
	Member uint8  `json:"member"`
	Lo     uint64 `json:"serves_from"` // the first seq it serves to a fetch
	Agreed uint64 `json:"agreed"`      // its agreement pointer
}

// AnnounceHeld sends what this host holds (MsgHeld) to every other member
// of its roster. An amnesiac host serves nothing and announces nothing.
func (nd *Node) AnnounceHeld() {
	if nd.amnesiac {
		return
	}
	for _, u := range nd.ms.roster {
		if u != nd.uid {
			nd.rd.Messages = append(nd.rd.Messages, Message{Type: MsgHeld, From: nd.uid, To: u, Lo: nd.ArchiveBase(), Agreed: nd.p.Agreed})
		}
	}
}

// heldBy records what member m.From said it holds.
func (nd *Node) heldBy(m Message) {
	if nd.memberHeld == nil {
		nd.memberHeld = map[uint8]Held{}
	}
	nd.memberHeld[m.From] = Held{Member: m.From, Lo: m.Lo, Agreed: m.Agreed}
}

// HeldByMembers returns what each member of the current roster holds, as
// far as this host knows: its own state, and what the others last
// announced (members never heard from are missing), by member id.
func (nd *Node) HeldByMembers() []Held {
	var out []Held
	for _, u := range nd.ms.roster {
		if u == nd.uid {
			if !nd.amnesiac {
				out = append(out, Held{Member: u, Lo: nd.ArchiveBase(), Agreed: nd.p.Agreed})
			}
			continue
		}
		if h, ok := nd.memberHeld[u]; ok {
			out = append(out, h)
		}
	}
	return out
}

// RackFloor returns the lowest position that a majority (h+1) of the
// current roster's members serve, from what they last announced, and
// false while fewer than h+1 members are known.
func (nd *Node) RackFloor() (uint64, bool) {
	held := nd.HeldByMembers()
	need := len(nd.ms.roster)/2 + 1
	if len(held) < need {
		return 0, false
	}
	los := make([]uint64, 0, len(held))
	for _, h := range held {
		los = append(los, h.Lo)
	}
	sort.Slice(los, func(i, j int) bool { return los[i] < los[j] })
	return los[need-1], true
}

// LaggingBelow returns the members that, as far as this host knows, have
// agreed less than seq: they still need what lies below it (retention
// that cuts there should say so).
func (nd *Node) LaggingBelow(seq uint64) []Held {
	var out []Held
	for _, h := range nd.HeldByMembers() {
		if h.Agreed < seq && h.Member != nd.uid {
			out = append(out, h)
		}
	}
	return out
}
