package exo

// The adaptive pace of a state transfer (Config.TransferYield). A fixed
// pace is right for one rack only: on hosts with CPUs and disks of their
// own a transfer can go much faster than the rack notices, while on the
// lab rack of a 2-vCPU machine 25 MB/s cost the rack half its agreed
// rate in 2 GiB joins (docs/recovery.md). The cost is the members'
// reading and sending, and the joiner's writing, on machines they share
// with the rack's hot path; what it costs shows in how fast the rack's
// log grows, which the joiner hears in the frames it receives (the rack's
// log end, Recovery.RackSeq) whether it is a member or not.
//
// So the transfer measures it by comparison, as a background transport
// measures the delay it adds (LEDBAT, RFC 6817): after every probeEvery
// pauses' lengths of transfer it pauses for Config.TransferProbeTicks
// after a batch, and takes the rack's growth over the pause's second half
// (the "quiet" rate, smoothed over pauses, 1/4 a pause) and over the
// stretch of transfer since the last pause (the "busy" rate). The two are
// measured seconds apart, so that the machine's own swings (a factor of
// two between windows of seconds on the lab rack) fall on both. When busy
// is below Config.TransferYield percent of quiet, the pace falls in
// proportion (times busy/quiet over the yield, at most halved), to a
// sixteenth of the ceiling (Config.TransferBytesPerTick) at least;
// otherwise it rises by an eighth of the ceiling, to the ceiling. The
// pauses take 1/(probeEvery+1) of the transfer's time. A rack that grew
// by fewer than idleEntries in a pause's measured half (idle: its token
// passes back off; or unheard) has capacity to spare: the pace rises. All
// on ticks: the simulator runs it as the daemon does.

// probeEvery is how many probe lengths of transfer come between two
// pauses.
const probeEvery = 8

// idleEntries is the least growth of the rack over a pause's measured
// half that compares: below it the rack is taken as idle.
const idleEntries = 8

// growthScale is the fixed point of the growth rates: entries per
// growthScale ticks.
const growthScale = 1024

// pacer is a state transfer's adaptive pace.
type pacer struct {
	pace int // bytes per tick in force; 0: the ceiling
	// mark is where the window under way started: the clock, and the
	// rack's log end as this host heard it.
	markAt  uint64
	markSeq uint64
	marked  bool
	// probe is the ticks left of the pause under way (0: none); due is
	// the clock at which the next pause is due (0: not yet set).
	probe int
	due   uint64
	// quiet is the smoothed growth in the pauses (quietN of them), busy
	// the growth over the last stretch of transfer (growthScale), and
	// ratio busy/quiet in percent at the last pause (0: none yet).
	quiet, busy int
	quietN      int
	ratio       int
}

// transferPace is the pace in force, in bytes per tick (0: unpaced).
func (nd *Node) transferPace() int {
	ceil := nd.cfg.TransferBytesPerTick
	if p := nd.transfer.pacer.pace; p > 0 && nd.cfg.TransferYield > 0 {
		return min(p, ceil)
	}
	return ceil
}

// pacerMark starts a window at this clock.
func (nd *Node) pacerMark() {
	p := &nd.transfer.pacer
	p.markAt, p.markSeq, p.marked = nd.clock, nd.rackSeq, true
}

// pacerGrowth is the rack's growth since the mark, in entries per
// growthScale ticks; false when the window measures nothing (no mark, no
// tick, no frame heard). Across epochs: seqs go on from one epoch to the
// next (a view change cuts at most the unagreed suffix, a few entries),
// and the lab rack, loaded, changed epoch some 14 times a second, so that
// windows within one epoch were too few to measure anything.
func (nd *Node) pacerGrowth() (int, bool) {
	p := &nd.transfer.pacer
	if !p.marked || nd.clock <= p.markAt || nd.rackSeq == 0 {
		return 0, false
	}
	if nd.rackSeq < p.markSeq {
		return 0, true
	}
	return int((nd.rackSeq - p.markSeq) * growthScale / (nd.clock - p.markAt)), true
}

// pacerWait is the wait after a paced batch (wait ticks by the pace):
// longer when a pause is due, which ends the stretch of transfer since
// the last one.
func (nd *Node) pacerWait(wait int) int {
	p := &nd.transfer.pacer
	if nd.cfg.TransferYield == 0 {
		return wait
	}
	if p.due == 0 {
		// The first paced batch: the first stretch starts here.
		p.due = nd.clock + uint64(probeEvery*nd.cfg.TransferProbeTicks)
		nd.pacerMark()
		return wait
	}
	if nd.clock < p.due {
		return wait
	}
	g, ok := nd.pacerGrowth()
	p.busy = -1
	if ok {
		p.busy = g
	}
	p.marked = false
	p.probe = max(wait, nd.cfg.TransferProbeTicks)
	return p.probe
}

// pacerTick runs a pause's clock (the transfer's wait counts down
// alongside): its second half is measured; at its end the pace is
// decided and the next stretch starts.
func (nd *Node) pacerTick(left int) {
	p := &nd.transfer.pacer
	if p.probe == 0 {
		return
	}
	if left == p.probe/2 {
		nd.pacerMark()
	}
	if left > 0 {
		return
	}
	if nd.rackSeq < p.markSeq+idleEntries && p.marked {
		// A rack that hardly grew in the pause is idle (its passes back
		// off) or unheard: it has capacity to spare, and a few entries
		// measure nothing. The pace rises.
		p.pace = min(nd.cfg.TransferBytesPerTick, nd.transferPace()+max(1, nd.cfg.TransferBytesPerTick/8))
	} else if g, ok := nd.pacerGrowth(); ok {
		if p.quietN == 0 {
			p.quiet = g
		} else {
			p.quiet += (g - p.quiet) / 4
		}
		p.quietN++
		if p.busy >= 0 {
			p.decide(nd.cfg.TransferBytesPerTick, nd.cfg.TransferYield)
		}
	}
	p.probe = 0
	p.due = nd.clock + uint64(probeEvery*nd.cfg.TransferProbeTicks)
	nd.pacerMark()
}

// decide moves the pace after a pause: while the rack grew at less than
// yield percent of its quiet rate while the transfer ran, down in
// proportion (the pace times the ratio over yield, at most halved: the
// lab rack's 256 MB joins ended before a quarter at a time had lowered
// it much), and up by an eighth of ceil otherwise.
func (p *pacer) decide(ceil, yield int) {
	if p.quiet <= 0 {
		return // a rack that did not grow in the pauses: nothing to compare
	}
	p.ratio = max(1, p.busy*100/p.quiet)
	pace := p.pace
	if pace == 0 {
		pace = ceil
	}
	if p.ratio < yield {
		pace = max(ceil/16, 1, pace*max(p.ratio, yield/2)/yield)
	} else {
		pace = min(ceil, pace+max(1, ceil/8))
	}
	p.pace = pace
}
