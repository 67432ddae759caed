package exo

import "slices"

// Recovery is what a host does to get back in step with the rack: the view
// change it leads, the fetch under way, the later epoch's log it gathers,
// and where the frames it hears show the rack to be. Operators read it
// (exo status, the metrics), and so do the checkers that must say why a
// host did not move.
type Recovery struct {
	// RackEpoch and RackSeq locate the newest frame this host heard whose
	// tag verified: its epoch, and its seq + 1. A host whose epoch is
	// below RackEpoch, or whose append pointer is below RackSeq in that
	// epoch, is behind.
	RackEpoch uint32
	RackSeq   uint64
	// Fetching is set while a gap repair or a catch-up waits for an
	// answer from FetchPeer (a member id), sent FetchTicks ago.
	Fetching   bool
	FetchPeer  uint8
	FetchTicks int
	// Gathered entries of epoch GatherEpoch's log (a catch-up adopts a
	// later epoch's log only once it holds it up to a frame of that epoch,
	// catchup.go).
	GatherEpoch uint32
	Gathered    int
	// ViewChange is the view change this host leads, nil if none.
	ViewChange *ViewChangeStatus
	// Transferring is set while this host, amnesiac, fetches the rack's
	// agreed log before it rejoins (state transfer, transfer.go);
	// TransferTo is the highest agreement pointer a member reported to it
	// meanwhile (where the transfer heads; 0 before the first answer).
	Transferring bool
	TransferTo   uint64
	// TransferPace is the transfer's pace in force, in bytes per tick (0:
	// unpaced), and TransferRackPercent how fast the rack's log grew
	// while the transfer ran, in percent of its growth in the transfer's
	// pauses, at the last pause (0: none yet; Config.TransferYield).
	TransferPace        int
	TransferRackPercent int
	// FetchRepeats counts the fetches this host did not answer because
	// their requester had asked the same a moment before (answerOnce): an
	// OOB connection that had held them behind a partition.
	FetchRepeats uint64
}

// ViewChangeStatus is a view change in progress at its initiator.
type ViewChangeStatus struct {
	Epoch uint32
	Lo    uint64 // the initiator's agreement pointer: witnesses answer from it
	Ticks int    // since it started
	// Promised lists the member ids that promised (the initiator too);
	// Need is how many the roster's majority takes.
	Promised []uint8
	Need     int
	// Ambiguous: a majority answered but a fork could only be decided by
	// hosts that did not (or lost their state): it waits for them.
	Ambiguous bool
	// Failures counts this host's view changes that timed out since its
	// last install (each one doubles the next timeout, up to 4x).
	Failures int
	// Cause is why this host started it: a trace of a stall names what
	// set off each of its view changes.
	Cause Cause
}

// Behind reports how far the rack's frames showed the rack to be ahead of
// this host: entries in its own epoch, or later (true) when the rack is in
// a later epoch.
func (r Recovery) Behind(p Pointers) (entries uint64, laterEpoch bool) {
	switch {
	case r.RackEpoch > p.Epoch:
		return 0, true
	case r.RackEpoch == p.Epoch && r.RackSeq > p.Append:
		return r.RackSeq - p.Append, false
	}
	return 0, false
}

// Recovery returns what this host does to get back in step with the rack.
func (nd *Node) Recovery() Recovery {
	r := Recovery{RackEpoch: nd.rackEpoch, RackSeq: nd.rackSeq, FetchRepeats: nd.fetchRepeats,
		Fetching: nd.fetching, FetchPeer: nd.fetchPeer, FetchTicks: nd.fetchTicks, Transferring: nd.transfer.on}
	if nd.transfer.on {
		r.TransferTo = nd.transfer.seen
		r.TransferPace, r.TransferRackPercent = nd.transferPace(), nd.transfer.pacer.ratio
	}
	if c := nd.catchup; c != nil {
		r.GatherEpoch, r.Gathered = c.epoch, len(c.entries)
	}
	if vc := nd.vc; vc != nil {
		s := &ViewChangeStatus{Epoch: vc.epoch, Lo: vc.lo, Ticks: vc.ticks, Need: Majority(len(nd.ms.roster)),
			Ambiguous: vc.ambiguous, Failures: nd.vcFailures, Cause: vc.cause}
		for u := range vc.promises {
			s.Promised = append(s.Promised, u)
		}
		slices.Sort(s.Promised)
		r.ViewChange = s
	}
	return r
}

// heard notes a frame whose tag verified: where the rack is.
func (nd *Node) heard(f *Frame) {
	nd.deaf = false
	if f.Epoch > nd.p.Epoch {
		nd.laterIdle = 0
	}
	nd.heardAt(f.Epoch, f.Seq+1)
}

// heardAt notes that the rack's log of epoch e reaches seq end.
func (nd *Node) heardAt(e uint32, end uint64) {
	switch {
	case e > nd.rackEpoch:
		nd.rackEpoch, nd.rackSeq = e, end
	case e == nd.rackEpoch:
		nd.rackSeq = max(nd.rackSeq, end)
	}
}
