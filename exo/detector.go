package exo

import "slices"

// The token's failure detector (docs/protocol.md section 5): how long a
// host waits, without an append, before it takes the token over from a
// silent holder. A fixed timeout is either slow (a dead holder stalls the
// rack for the whole of it) or jumpy (a loaded rack whose hops slow down
// takes the token from live hosts). The detector follows the gaps between
// appends this host sees, in ticks, as TCP follows round trips (RFC 6298):
//
//	SRTT   = 7/8 SRTT + 1/8 gap
//	RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - gap|
//	timeout = clamp(SRTT + max(1, 4 RTTVAR), TokenTimeoutMin, TokenTimeout)
//
// in fixed point (1/64 of a tick: the mean of gaps of 0 or 1 tick is a
// fraction), on ticks only: it is part of the
// core's deterministic state, the simulator and the explorer run it as the
// daemon does. A gap is sampled only at full speed (no idle back-off: the
// back-off is added to the takeover deadline on its own) and only when it
// is shorter than the timeout in force (Karn's rule: a gap that ended in a
// takeover measures the detector, not the rack). TokenTimeout is the
// ceiling, and the whole timeout while there is no sample (a fresh node,
// after a restart); TokenTimeoutMin equal to TokenTimeout turns the
// detector off. The takeover stagger follows: half the timeout, at least
// one tick, at most TakeoverStagger.

// detector is the smoothed gap between appends and its mean deviation.
type detector struct {
	srtt    int // SRTT, 1/64 tick
	rttvar  int // RTTVAR, 1/64 tick
	samples uint64
}

// detFrac is the detector's fixed point: 1/64 of a tick.
const detFrac = 64

// sample takes the gap, in ticks, between two appends.
func (d *detector) sample(gap int) {
	g := gap * detFrac
	if d.samples == 0 {
		d.srtt, d.rttvar = g, g/2
	} else {
		err := g - d.srtt
		d.srtt += err / 8
		if err < 0 {
			err = -err
		}
		d.rttvar += (err - d.rttvar) / 4
	}
	d.samples++
}

// rto is SRTT + max(1 tick, 4 RTTVAR), rounded up to whole ticks.
func (d *detector) rto() int {
	return (d.srtt + max(detFrac, 4*d.rttvar) + detFrac - 1) / detFrac
}

// tokenTimeout is the takeover timeout in force, in ticks (rank 1, after
// the holder's back-off).
func (nd *Node) tokenTimeout() int {
	lo, hi := nd.cfg.TokenTimeoutMin, nd.cfg.TokenTimeout
	if lo <= 0 || lo >= hi || nd.det.samples == 0 {
		return hi
	}
	return min(hi, max(lo, nd.det.rto()))
}

// takeoverStagger is the extra wait of each further rank: half the
// timeout in force, at least 1, at most TakeoverStagger.
func (nd *Node) takeoverStagger() int {
	return min(nd.cfg.TakeoverStagger, max(1, nd.tokenTimeout()/2))
}

// sampleGap feeds the detector the gap that an append ends (before idle
// is reset): only at full speed and below the timeout in force.
func (nd *Node) sampleGap() {
	if nd.backoff() > nd.cfg.PassDelay || nd.p.Halted || nd.idle >= nd.tokenTimeout() {
		return
	}
	nd.det.sample(nd.idle)
}

// Detector is the token's failure detector as the status shows it.
type Detector struct {
	// Timeout is the takeover timeout in force, in ticks.
	Timeout int
	// Stagger is the extra wait per takeover rank, in ticks.
	Stagger int
	// SRTT and RTTVar are the smoothed gap between appends and its mean
	// deviation, in ticks (fractional).
	SRTT, RTTVar float64
	// Samples counts the gaps it took.
	Samples uint64
	// Min and Max are the floor and the ceiling (TokenTimeoutMin,
	// TokenTimeout); equal, the detector is off.
	Min, Max int
	// SkippedAlive counts the times a takeover passed this host over
	// while it was running (false takeovers, seen by their victim).
	SkippedAlive uint64
	// GoneTicks is Config.GoneTicks (0: gone notices ignored); Gone lists
	// the members whose process is known gone now (MsgGone, not heard
	// since).
	GoneTicks int
	Gone      []uint8
}

// Detector returns the failure detector's state.
func (nd *Node) Detector() Detector {
	lo := nd.cfg.TokenTimeoutMin
	if lo <= 0 || lo > nd.cfg.TokenTimeout {
		lo = nd.cfg.TokenTimeout
	}
	return Detector{Timeout: nd.tokenTimeout(), Stagger: nd.takeoverStagger(),
		SRTT: float64(nd.det.srtt) / detFrac, RTTVar: float64(nd.det.rttvar) / detFrac, Samples: nd.det.samples,
		Min: lo, Max: nd.cfg.TokenTimeout, SkippedAlive: nd.skippedAlive, GoneTicks: nd.cfg.GoneTicks, Gone: nd.goneList()}
}

// goneList is the members whose process is known gone, in roster order.
func (nd *Node) goneList() []uint8 {
	var g []uint8
	for _, u := range nd.ms.roster {
		if nd.gone[u] {
			g = append(g, u)
		}
	}
	return g
}

// A process that dies (kill -9, a crash of the daemon alone, a stop) has
// its sockets closed by its kernel: the members it had OOB connections to
// see them end, and a dial to its OOB address is refused. The embedder
// steps that as MsgGone (never sent on the wire). A host then takes the
// token over from a holder whose process is gone after GoneTicks, without
// the holder's back-off and the token timeout, and waits for no host
// ranked before it whose process is gone: a killed daemon stalls the rack
// for a round trip and a tick, not for a token timeout. A notice is a hint
// only: any frame or message of the member clears it, and a wrong one
// costs what a false timeout costs (a takeover, a fork, a view change),
// never safety (the explorer delivers notices about live hosts at any
// time). A machine that dies, or a partition, closes nothing: the token
// timeout remains the detector for those.

// stepGone marks member u's process gone (MsgGone).
func (nd *Node) stepGone(u uint8) {
	if nd.cfg.GoneTicks <= 0 || u == nd.uid || int(u) >= MaxHosts || !slices.Contains(nd.ms.roster, u) {
		return
	}
	nd.gone[u] = true
}

// alive clears member u's gone mark: it was heard.
func (nd *Node) alive(u uint8) {
	if int(u) < MaxHosts {
		nd.gone[u] = false
	}
}

// goneAt reports whether the process of the member at position pos is
// known to be gone.
func (nd *Node) goneAt(pos uint8) bool {
	return nd.cfg.GoneTicks > 0 && int(pos) < len(nd.ms.roster) && nd.gone[nd.ms.roster[pos]]
}

// takeoverWait is how many ticks without an append this host waits before
// it takes the token over from holder: takeoverAfter of its rank, less
// the hosts ranked before it whose process is gone, and, when the
// holder's own process is gone, GoneTicks in place of the back-off, the
// token timeout and an epoch's install allowance.
func (nd *Node) takeoverWait(holder uint8) int {
	if nd.cfg.GoneTicks <= 0 {
		return nd.takeoverAfter(nd.rank(holder))
	}
	rank := nd.rankCounting(holder, func(pos uint8) bool { return !nd.goneAt(pos) })
	if nd.goneAt(holder) {
		return nd.cfg.GoneTicks + (rank-1)*nd.takeoverStagger()
	}
	return nd.takeoverAfter(rank)
}
