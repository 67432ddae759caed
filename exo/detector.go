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
// fraction), raised to half again the longest gap sampled in the last one
// or two peakWindow of the clock (a windowed maximum, as BBR's):
//
//	timeout = clamp(max(SRTT + max(1, 4 RTTVAR), peak + peak/2 + 1), TokenTimeoutMin, TokenTimeout)
//
// A mean and a deviation follow the body of the gaps, not their tail:
// on a machine whose hosts share CPUs a hop stalls for 5-45 ms about
// every half second while the gaps' mean is 1-2 ms, and a timeout of the
// mean plus four deviations took the token from live hosts 700-940 times
// a minute on the lab rack. The peak remembers the stalls: a gap that
// comes within two thirds of the timeout raises it by half, up to the
// ceiling, and the timeout comes back down once the window has seen no
// such gap. On ticks only: it is part of the
// core's deterministic state, the simulator and the explorer run it as the
// daemon does. A gap is sampled only at full speed (no idle back-off: the
// back-off is added to the takeover deadline on its own) and only when it
// is shorter than the timeout in force (Karn's rule: a gap that ended in a
// takeover measures the detector, not the rack). TokenTimeout is the
// ceiling, and the whole timeout while there is no sample (a fresh node,
// after a restart); TokenTimeoutMin equal to TokenTimeout turns the
// detector off. The takeover stagger follows: half the timeout, at least
// one tick, at most TakeoverStagger.

// detector is the smoothed gap between appends, its mean deviation and
// the longest gaps of the last two windows (the fetch estimators use it
// for answer times, without the peaks).
type detector struct {
	srtt    int // SRTT, 1/64 tick
	rttvar  int // RTTVAR, 1/64 tick
	samples uint64
	// peak is the longest gap sampled in the window under way ([0]) and
	// in the one before it ([1]), in ticks; window is the index of the
	// window under way (clock / peakWindow).
	peak   [2]int
	window uint64
}

// peakWindow is the length, in ticks, of the detector's windows (32.8 s
// at the daemon's 250 us tick): a gap is remembered for one to two of
// them. The lab rack's stalls come in bursts 10-60 s apart; windows of
// 4.1 s forgot each burst before the next, and a 10-minute run without
// faults at a floor of 10 ms and a ceiling of 50 ms took the token over
// 4.4 times a minute, against 0.3 and 1.3 with these (docs/recovery.md,
// session v). The cost is a timeout that stays up to a minute at the level of
// the last burst, never above the ceiling.
const peakWindow = 1 << 17

// detFrac is the detector's fixed point: 1/64 of a tick.
const detFrac = 64

// sample takes the gap, in ticks, between two appends (or a fetch's
// answer time: the fetch estimators use rto alone).
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

// notePeak takes a gap sampled at clock into the windows' peaks.
func (d *detector) notePeak(gap int, clock uint64) {
	d.roll(clock)
	d.peak[0] = max(d.peak[0], gap)
}

// roll moves the windows on to clock's: the window before keeps the
// peak of the one that ended if it ended just now, none otherwise.
func (d *detector) roll(clock uint64) {
	w := clock / peakWindow
	switch {
	case w == d.window:
		return
	case w == d.window+1:
		d.peak[1] = d.peak[0]
	default:
		d.peak[1] = 0
	}
	d.peak[0], d.window = 0, w
}

// rto is SRTT + max(1 tick, 4 RTTVAR), rounded up to whole ticks.
func (d *detector) rto() int {
	return (d.srtt + max(detFrac, 4*d.rttvar) + detFrac - 1) / detFrac
}

// peakAt is the longest gap of the last two windows at clock (0: none).
func (d *detector) peakAt(clock uint64) int {
	switch w := clock / peakWindow; w {
	case d.window:
		return max(d.peak[0], d.peak[1])
	case d.window + 1:
		return d.peak[0]
	}
	return 0
}

// peakRTO is half again peakAt, and a tick (0 when the windows saw no
// gap).
func (d *detector) peakRTO(clock uint64) int {
	p := d.peakAt(clock)
	if p == 0 {
		return 0
	}
	return p + p/2 + 1
}

// timeout is the estimate at clock: the larger of rto and peakRTO.
func (d *detector) timeout(clock uint64) int { return max(d.rto(), d.peakRTO(clock)) }

// tokenTimeout is the takeover timeout in force, in ticks (rank 1, after
// the holder's back-off); the stagger and the retransmissions follow it.
// The other waits counted in token timeouts (the probes' intervals, a wake
// sent again, the fence, a spare's next fetch, the silence that lets a
// host behind send, an epoch's first rotation's allowance,
// neverBeganAfter) count in the ceiling (TokenTimeout), and a left-out
// host's view change in the floor (leftOutAfter): made to follow the
// timeout in force, they set off twice as many view changes on the lab
// rack (113 -> 219 a minute, one-way cuts and seed-splits), 15-25 % more
// in the simulator's detector lines and 2.4 times as many at the lab's
// timing, and recovered no faster (docs/recovery.md, session w).
func (nd *Node) tokenTimeout() int {
	if !nd.detectorOn() {
		return nd.cfg.TokenTimeout
	}
	return min(nd.cfg.TokenTimeout, max(nd.floorTimeout(), nd.det.timeout(nd.clock)))
}

// floorTimeout is the adaptive token timeout's floor (TokenTimeout when
// the timeout is fixed).
func (nd *Node) floorTimeout() int {
	if lo := nd.cfg.TokenTimeoutMin; lo > 0 && lo < nd.cfg.TokenTimeout {
		return lo
	}
	return nd.cfg.TokenTimeout
}

// detectorOn reports whether the timeout in force follows the detector: a
// floor below the ceiling, and a gap sampled.
func (nd *Node) detectorOn() bool {
	return nd.floorTimeout() < nd.cfg.TokenTimeout && nd.det.samples > 0
}

// untilPeakForgotten is how many ticks from now the detector's windows
// next move on, while a peak raises the timeout in force (0: none does).
// A takeover (and a retransmission) may be due sooner from that tick on,
// so NextTick wakes the host then (once in 33 s at the daemon's tick).
func (nd *Node) untilPeakForgotten() int {
	if !nd.detectorOn() || nd.det.peakAt(nd.clock) == 0 {
		return 0
	}
	return int(peakWindow - nd.clock%peakWindow)
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
	nd.det.notePeak(nd.idle, nd.clock)
}

// lateRing is how many recent appends noteLate knows the time of: a
// stall of 45 ms is some 45 appends of a loaded lab rack.
const lateRing = 64

// noteLate takes a frame of this epoch for a position the log holds from
// another sender (a divergence, or, past the history, a duplicate's
// position), sent by the host whose turn that position was (the next
// after its predecessor's sender): in a rack without faults,
// the frame of a holder that a takeover passed over while it ran (a false
// takeover; its victim counts it too, but only when it hears the
// takeover's frame in time, one in thirteen on the lab rack). The host a
// takeover passed over, which hears the taker's frame after its own,
// learns nothing here: that frame's sender was not the holder. The gap it
// ends, from the append before its position to now, is what the holder
// really took: the peak takes it (not the mean: such gaps are the tail),
// unless it is over twice the ceiling (a partition that healed, not a
// slow host). Without it the detector could learn a stall only from gaps
// under the timeout in force, never from those it took over too soon.
func (nd *Node) noteLate(f *Frame) {
	if f.Epoch != nd.p.Epoch || f.Seq == 0 || f.Seq >= nd.p.Append || f.Seq < nd.base {
		return
	}
	if e := &nd.log[f.Seq-nd.base]; e.Sender == f.Sender || e.Epoch != f.Epoch {
		return // a retransmission, or a position an install filled
	}
	if f.Seq-1 < nd.base || nd.n == 0 || int(f.Sender) != (int(nd.log[f.Seq-1-nd.base].Sender)+1)%nd.n {
		return // not the holder's turn it claims (a taker's frame, at the host it passed over)
	}
	a := nd.appendAt[(f.Seq-1)%lateRing]
	if a[0] != f.Seq || nd.clock < a[1] {
		return // not among the last appends, or a restart's
	}
	if gap := nd.clock - a[1]; gap <= uint64(2*nd.cfg.TokenTimeout) {
		nd.det.notePeak(int(gap), nd.clock)
		nd.late++
	}
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
	// Peak is the longest gap between appends sampled in the detector's
	// last one or two windows (33-66 s at the daemon's tick), in ticks: the
	// timeout is at least half again as long.
	Peak int
	// Samples counts the gaps it took.
	Samples uint64
	// Min and Max are the floor and the ceiling (TokenTimeoutMin,
	// TokenTimeout); equal, the detector is off.
	Min, Max int
	// SkippedAlive counts the times a takeover passed this host over
	// while it was running (false takeovers, seen by their victim).
	SkippedAlive uint64
	// Late counts the frames of passed-over holders this host heard after
	// the takeover (false takeovers, seen by any host; noteLate).
	Late uint64
	// GoneTicks is Config.GoneTicks (0: gone notices ignored); Gone lists
	// the members whose process is known gone now (MsgGone, not heard
	// since).
	GoneTicks int
	Gone      []uint8
}

// Detector returns the failure detector's state.
func (nd *Node) Detector() Detector {
	return Detector{Timeout: nd.tokenTimeout(), Stagger: nd.takeoverStagger(),
		SRTT: float64(nd.det.srtt) / detFrac, RTTVar: float64(nd.det.rttvar) / detFrac, Peak: nd.det.peakAt(nd.clock), Samples: nd.det.samples,
		Min: nd.floorTimeout(), Max: nd.cfg.TokenTimeout, SkippedAlive: nd.skippedAlive, Late: nd.late, GoneTicks: nd.cfg.GoneTicks, Gone: nd.goneList()}
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
