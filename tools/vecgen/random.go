package main

import (
	"fmt"
	"strings"

	"github.com/exo-rack/exo/exo"
)

// Seeded random vectors: random states and random mutations of the valid
// next frame of that state. Their expectations are whatever the Go core
// says (no intent).

const (
	randomCount      = 360 // hex-sized rosters
	randomLargeCount = 24  // rosters with h > 16 (JSON only)
)

var randomRosters = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33}
var randomLargeRosters = []int{34, 40, 64, 100, 129, 200, 254}

func (g *gen) pick(n int) int { return g.rng.IntN(n) }

func (g *gen) chance(pct int) bool { return g.rng.IntN(100) < pct }

// randState returns a plausible fast-path state: a history of distinct
// roster ids with X only as a suffix, agreed <= append.
func (g *gen) randState(rosters []int) exo.Pointers {
	n := rosters[g.pick(len(rosters))]
	var group uint16 = 1
	if g.chance(30) {
		group = uint16(g.rng.Uint32())
	}
	windows := []uint64{1, 2, 16, exo.DefaultSeqWindow, exo.DefaultSeqWindow, g.rng.Uint64() >> g.pick(64), top}
	p := exo.NewPointers(group, n, windows[g.pick(len(windows))])
	switch g.pick(5) {
	case 0:
	case 1:
		p.Epoch = 1 + uint32(g.pick(100))
	case 2:
		p.Epoch = ^uint32(0) - uint32(g.pick(2))
	default:
		p.Epoch = g.rng.Uint32()
	}
	switch g.pick(7) {
	case 0:
		p.Append = uint64(g.pick(4))
	case 1:
		p.Append = uint64(g.pick(1000))
	case 2:
		p.Append = e32 - 4 + uint64(g.pick(8))
	case 3:
		p.Append = top - uint64(g.pick(5))
	case 4:
		p.Append = 1<<63 - 2 + uint64(g.pick(4))
	default:
		p.Append = g.rng.Uint64()
	}
	h := p.H()
	k := h
	if p.Append < uint64(k) {
		k = int(p.Append)
	}
	if g.chance(15) {
		k = g.pick(k + 1)
	}
	perm := g.rng.Perm(n)
	for i := range k {
		p.History[i] = uint8(perm[i])
	}
	if p.Append >= uint64(h) {
		p.Agreed = p.Append - uint64(h)
	}
	if g.chance(20) && p.Agreed > 0 {
		p.Agreed = g.rng.Uint64N(p.Agreed + 1)
	}
	p.EpochStart = g.randEpochStart(p)
	p.Halted = g.chance(8)
	return p
}

// randEpochStart draws the append pointer at which p's epoch began (from
// g.esRNG, see seedEpochStart): mostly 0 (the rack's first epoch) or a
// value <= append-h (an install long enough ago that the next frame
// agrees as usual), often one in (append-h, append] (a recent install:
// the next frames agree nothing until h+1 frames of the epoch follow an
// entry), rarely 2^64-1 (the value the slow path holds while it
// installs: no frame agrees anything).
func (g *gen) randEpochStart(p exo.Pointers) uint64 {
	r := g.esRNG
	h := uint64(p.H())
	switch x := r.IntN(100); {
	case x < 40:
		return 0
	case x < 65: // <= append-h (<= append when append < h)
		hi := p.Append
		if hi >= h {
			hi -= h
		}
		if hi == top {
			return r.Uint64()
		}
		return r.Uint64N(hi + 1)
	case x < 95: // in (append-h, append]: append-k, k < h
		k := r.Uint64N(max(h, 1))
		return p.Append - min(k, p.Append)
	default:
		return top
	}
}

// randFrame returns the valid next frame of p from a random sender not in
// the history, with random records, flags, tag and padding.
func (g *gen) randFrame(p exo.Pointers) *raw {
	n := int(p.Hosts)
	var free []uint8
	for id := range n {
		if !p.InHistory(uint8(id)) {
			free = append(free, uint8(id))
		}
	}
	r := from(p, free[g.pick(len(free))])
	r.Tag = g.rng.Uint64()
	recs := make([][]byte, g.pick(5))
	for i := range recs {
		recs[i] = make([]byte, g.pick(17))
		for j := range recs[i] {
			recs[i][j] = byte(g.rng.Uint32())
		}
	}
	r.withRecords(recs...)
	if g.chance(10) {
		r.Flags = exo.FlagReadmit | uint16(g.pick(256))
	}
	if g.chance(30) {
		r.padTo(byte(g.pick(256)))
	}
	return r
}

// mutation changes a frame (or the state) and says how.
type mutation func(g *gen, p *exo.Pointers, r *raw) string

var mutations = []mutation{
	func(g *gen, p *exo.Pointers, r *raw) string {
		d := int64(g.pick(p.H()+6)) - int64(p.H()+2)
		r.Seq += uint64(d)
		return fmt.Sprintf("seq%+d", d)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		d := uint64(g.pick(2))
		r.Seq = p.Append + p.Window + d
		return fmt.Sprintf("seq=append+window+%d", d)
	},
	func(g *gen, p *exo.Pointers, r *raw) string { r.Seq = g.rng.Uint64(); return "seq=random" },
	func(g *gen, p *exo.Pointers, r *raw) string { r.Seq ^= e32; return "seq^=2^32" },
	func(g *gen, p *exo.Pointers, r *raw) string {
		r.Sender = uint8(g.pick(int(p.Hosts) + 2))
		return fmt.Sprintf("sender=%d", r.Sender)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		if p.H() == 0 || p.History[0] == exo.HistoryNone {
			r.Sender = 0xFF
			return "sender=0xff"
		}
		i := g.pick(p.H())
		for p.History[i] == exo.HistoryNone {
			i--
		}
		r.Sender = p.History[i]
		return fmt.Sprintf("sender=history[%d]", i)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		d := int32(g.pick(3)) - 1
		r.Epoch += uint32(d)
		return fmt.Sprintf("epoch%+d", d)
	},
	func(g *gen, p *exo.Pointers, r *raw) string { r.Epoch = g.rng.Uint32(); return "epoch=random" },
	func(g *gen, p *exo.Pointers, r *raw) string {
		b := g.pick(16)
		r.Group ^= 1 << b
		return fmt.Sprintf("group^=bit%d", b)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		if len(r.History) < 2 {
			return "history-swap(none)"
		}
		i, j := g.pick(len(r.History)), g.pick(len(r.History))
		r.History[i], r.History[j] = r.History[j], r.History[i]
		return fmt.Sprintf("history-swap(%d,%d)", i, j)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		if len(r.History) == 0 {
			return "history-set(none)"
		}
		i := g.pick(len(r.History))
		id := uint8(g.pick(int(p.Hosts) + 2))
		if g.chance(25) {
			id = exo.HistoryNone
		}
		r.History[i] = id
		return fmt.Sprintf("history[%d]=%d", i, id)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		if len(r.History) < 2 {
			return "history-dup(none)"
		}
		i, j := g.pick(len(r.History)), g.pick(len(r.History))
		r.History[j] = r.History[i]
		return fmt.Sprintf("history[%d]=history[%d]", j, i)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		if g.chance(50) || len(r.History) == 0 {
			r.History = append(r.History, uint8(g.pick(int(p.Hosts)+1)))
			r.HistLen++
			return "history+1"
		}
		r.History = r.History[:len(r.History)-1]
		r.HistLen--
		return "history-1"
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		r.Flags = uint16(g.rng.Uint32())
		return fmt.Sprintf("flags=0x%04x", r.Flags)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		r.Flags = exo.FlagReadmit | uint16(g.pick(256))
		return fmt.Sprintf("flags=0x%04x", r.Flags)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		d := int16(g.pick(3)) - 1
		r.Count += uint16(d)
		return fmt.Sprintf("count%+d", d)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		d := int16(g.pick(9)) - 4
		r.PayloadLen += uint16(d)
		return fmt.Sprintf("payload_len%+d", d)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		if len(r.Payload) < 2 {
			r.PayloadLen = uint16(g.rng.Uint32())
			return "payload_len=random"
		}
		x := byte(1 + g.pick(255))
		r.Payload[1] ^= x
		return fmt.Sprintf("record0-len^=0x%02x", x)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		r.Version = byte(g.pick(4))
		return fmt.Sprintf("version=%d", r.Version)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		r.Type = byte(g.pick(4))
		return fmt.Sprintf("type=%d", r.Type)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		r.HistLen = byte(g.rng.Uint32())
		return fmt.Sprintf("hist_len=%d", r.HistLen)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		l := len(r.bytes())
		r.Trunc = 1 + g.pick(l)
		return fmt.Sprintf("truncate=%d", r.Trunc)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		k := 1 + g.pick(24)
		for range k {
			r.Pad = append(r.Pad, byte(g.rng.Uint32()))
		}
		return fmt.Sprintf("trailer+%d", k)
	},
	func(g *gen, p *exo.Pointers, r *raw) string {
		p.Halted = !p.Halted
		return fmt.Sprintf("state.halted=%v", p.Halted)
	},
}

func (g *gen) suiteRandom() {
	g.randomSuite("random", randomCount, randomRosters)
	g.randomSuite("random_large", randomLargeCount, randomLargeRosters)
}

func (g *gen) randomSuite(suite string, count int, rosters []int) {
	for i := range count {
		p := g.randState(rosters)
		r := g.randFrame(p)
		var k int
		switch x := g.pick(100); {
		case x < 20:
			k = 0
		case x < 65:
			k = 1
		case x < 90:
			k = 2
		default:
			k = 3
		}
		var done []string
		for range k {
			done = append(done, mutations[g.pick(len(mutations))](g, &p, r))
		}
		b := r.bytes()
		if g.chance(5) && len(b) > 0 {
			at := g.pick(len(b))
			x := byte(1 + g.pick(255))
			b[at] ^= x
			done = append(done, fmt.Sprintf("byte[%d]^=0x%02x", at, x))
		}
		what := "none (the valid next frame)"
		if len(done) > 0 {
			what = strings.Join(done, ", ")
		}
		es := ""
		if p.EpochStart != 0 {
			es = fmt.Sprintf(", epoch_start 0x%x", p.EpochStart)
		}
		desc := fmt.Sprintf("random (seeded): n=%d, epoch %d, append 0x%x%s, window 0x%x, halted %v, history %s; mutations: %s",
			p.Hosts, p.Epoch, p.Append, es, p.Window, p.Halted, histString(p.Hist()), what)
		g.vecBytes(suite, fmt.Sprintf("%s_%03d", suite, i), desc, noIntent, p, b)
	}
}
