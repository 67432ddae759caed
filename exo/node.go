package exo

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Errors returned by Propose.
var (
	ErrQueueFull = errors.New("exo: proposal queue full")
	ErrTooLarge  = errors.New("exo: payload larger than one frame")
)

// Reject records one frame that was not appended, and why.
type Reject struct {
	From   uint8
	Seq    uint64
	Epoch  uint32
	Reason Reason
}

// EventKind names a control-plane event reported in Ready.Events.
type EventKind uint8

// Control-plane events.
const (
	EventGap          EventKind = iota + 1 // a frame ahead of the append pointer: repair started
	EventDivergence                        // a frame conflicts with the log: view change follows
	EventTakeover                          // this host took the token over after a timeout
	EventViewChange                        // this host started a view change (Epoch = proposed)
	EventInstalled                         // this host moved to a new epoch (Epoch, Seq = log length)
	EventSafety                            // an agreed entry would have changed: a bug, never expected
	EventRetransmit                        // this host re-broadcast its newest frame
	EventKeySwitch                         // this host sends under the staged key now (Peer = its phase)
	EventKeyRetired                        // a key slot was emptied (Peer = its phase)
	EventSkippedAlive                      // a takeover passed this running host over (Peer = the taker)
	EventChangeAgain                       // this host's roster change, voided or cut by a view change, is queued again (Seq = where its fate was agreed, Peer = its member)
	EventPastFloor                         // every member's log was compacted past this host's agreement pointer (Seq): it becomes amnesiac and rejoins by state transfer
	EventFloorJump                         // a state transfer starts at a member's log base (Seq) past this host's log: the entries between are lost to it (Peer = the member)
	EventAcceptedLoss                      // the operator resolved this host's view change (Epoch) on an ambiguous fork without the hosts that could decide it (Seq = the first position in doubt)
)

var eventNames = [...]string{"?", "gap", "divergence", "takeover", "view-change", "installed", "SAFETY", "retransmit", "key-switch", "key-retired", "skipped-alive", "change-again", "past-floor", "floor-jump", "accepted-loss"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one control-plane event.
type Event struct {
	Kind  EventKind
	Epoch uint32
	Seq   uint64
	Peer  uint8
	// Cause says why an EventViewChange started (zero for other kinds).
	Cause Cause
}

// Cause is why a host started a view change: what the trace of a view
// change begins with (docs/recovery.md, "Tracing view changes").
type Cause uint8

// Causes of a view change.
const (
	// CauseDivergence: a frame, a held frame or a fetched entry
	// contradicted the log (two branches; a healed partition, a takeover
	// while the holder's frame was in flight).
	CauseDivergence Cause = iota + 1
	// CauseRetry: the view change this host led got no install within its
	// timeout (too few promises, or an ambiguous fork); it tries again
	// above every epoch it has seen.
	CauseRetry
	// CausePromiseTimeout: this host promised a view change whose install
	// never came (its initiator died, gave up, or its install was lost),
	// or it restarted with a promise above its log's epoch.
	CausePromiseTimeout
	// CauseAmnesiac: this host lost its state; it rejoins only through a
	// view change of its own.
	CauseAmnesiac
	// CauseLeadForBehind: a host far behind asked for a view change it may
	// not lead (its promises would carry its gap); this host leads it.
	CauseLeadForBehind
	// CauseRosterSwitch: a roster change took effect at the end of this
	// epoch; the next epoch has the new roster.
	CauseRosterSwitch
	// CauseFenced: the fast path sent frames the log may lack; the next
	// epoch ends the fence.
	CauseFenced
	// CauseEpochNeverBegan: the epoch this host installed never saw a frame
	// and this host may not send the first.
	CauseEpochNeverBegan
	// CauseLeftOut: this host, halted for longer than a view change takes,
	// hears the rack append in its epoch without it (a healed partition
	// whose minority promised its own view changes).
	CauseLeftOut
	// CauseTokenStuck: no append for longer than every takeover and a
	// view change take, and this host may not send (it is in the
	// history): the hosts that may are gone, cut off, or do not know the
	// epoch (a ring shrunk to 3 of 5 hosts by skips loses one: the 2 left
	// are each in the history, the skipped hosts hear no frame of the
	// epoch, and nothing else would ever act).
	CauseTokenStuck
)

// NumCauses bounds the causes' values (Cause < NumCauses).
const NumCauses = len(causeNames)

var causeNames = [...]string{"", "divergence", "retry", "promise-timeout", "amnesiac", "lead-for-behind", "roster-switch", "fenced", "epoch-never-began", "left-out", "token-stuck"}

func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return fmt.Sprintf("Cause(%d)", uint8(c))
}

// Causes lists every cause, in order (for metrics and reports).
func Causes() []Cause {
	out := make([]Cause, 0, len(causeNames)-1)
	for c := CauseDivergence; int(c) < len(causeNames); c++ {
		out = append(out, c)
	}
	return out
}

// Ready is what the embedder must carry out after a Step, StepFrame,
// Propose or Tick: persist the log changes (Truncate, then Appended) when it
// keeps a durable log, then broadcast Frames, send Messages, and deliver
// Agreed to applications in order. The slices stay valid until Advance.
// A MsgFetch may go before the log is persisted (it asks for entries and
// depends on nothing this host holds): the daemon sends a catch-up's next
// fetch while it writes the batch that came. The sync of entries that
// nothing sent depends on may wait for the next Ready that sends (the
// daemon's fsync "batch"; docs/protocol.md section 6).
type Ready struct {
	Truncate    uint64 // the log was cut back to this length before Appended (when HasTruncate)
	HasTruncate bool
	Appended    []Entry   // entries appended to the log, in order
	Frames      []Frame   // frames to broadcast, in order, each with its key phase and tag set (keys.go)
	Messages    []Message // OOB messages to send
	Agreed      []Entry   // newly agreed entries, in log order: deliver each once
	Dropped     []Entry   // this host's entries a view change removed and whose seq is now agreed with another entry: tell their publishers
	Rejects     []Reject  // frames not appended, with their reason
	Events      []Event
}

// Empty reports whether r holds nothing to do.
func (r *Ready) Empty() bool {
	return !r.HasTruncate && len(r.Appended) == 0 && len(r.Frames) == 0 &&
		len(r.Messages) == 0 && len(r.Agreed) == 0 && len(r.Dropped) == 0 &&
		len(r.Rejects) == 0 && len(r.Events) == 0
}

// HardState is what a host must keep across a restart to rejoin without a
// view change: the log, its epoch, the epoch promised and the skip set.
type HardState struct {
	// Amnesiac is set while a host that lost its state has not been given a
	// log: it must come back amnesiac after another restart.
	Amnesiac bool
	Epoch    uint32
	Promised uint32
	Agreed   uint64
	Skipped  []uint8
	Log      []Entry
	// Roster is the configuration (member ids) in effect at Log[0]; nil: the
	// rack's first roster 0..Config.Hosts-1.
	Roster []uint8
	// KeySent is the fingerprint (KeyFingerprint) of the key this host sent
	// under, 0 if unknown. A host restarted in the middle of a key rotation
	// with the old key and the new one staged goes back to sending under the
	// new one at once if it had already switched to it: another member may
	// have retired the old key since (keys.go).
	KeySent uint64
	// FastArmed: a fast path that sends (token mode) was armed on this
	// log in epoch FastEpoch and not cleanly stopped since (Node.ArmFast,
	// ClearFast). The fast path sends before the log holds its frames, so
	// a host restarted with FastArmed and FastEpoch == Epoch is fenced
	// (docs/token.md section 5).
	FastArmed bool
	FastEpoch uint32
	// Fenced: this host was fenced in Epoch because its fast path sent a
	// frame the log could not take (Node.Fence): it stays fenced after a
	// restart, whatever the fast path's records say.
	Fenced bool
}

// Node is the Exo protocol state machine of one host. It does no I/O, reads
// no clock and starts no goroutine: frames, OOB messages, proposals and
// ticks go in; a Ready describes what to do. It is not safe for concurrent
// use.
type Node struct {
	cfg  Config
	n, h int
	id   uint8
	keys keyState // the frame-tag key slots and the rotation in flight (keys.go)

	p        Pointers      // fast-path state; p.Epoch is the log's epoch
	promised uint32        // highest epoch promised in a view change (>= p.Epoch)
	amnesiac bool          // restarted without state: may not send or witness
	transfer transferState // an amnesiac host fetching the agreed log (transfer.go)
	// floorFrom lists the members that answered a fetch with a log
	// compacted past this host's agreement pointer, while that pointer
	// stood at floorAt (transfer.go, pastFloor).
	floorFrom []uint8
	floorAt   uint64
	log       []Entry // entries base, base+1, ...
	base      uint64  // seq of log[0]: entries below it were compacted away
	arena     arena

	delivered uint64
	skipped   [MaxHosts]bool
	readmit   [MaxHosts]bool // skipped hosts that asked to be re-admitted
	gone      [MaxHosts]bool // by member id: its process is gone (MsgGone, detector.go)
	emptyRun  int            // consecutive token passes at the end of the log

	pending  [][]byte // proposals not yet broadcast (FIFO)
	pendHead int

	idle         int // ticks since the last append (or install)
	det          detector
	skippedAlive uint64 // EventSkippedAlive so far
	// appendAt is when (clock) the last lateRing positions were appended
	// (seq+1, clock; by seq mod lateRing): the gap a late frame ended
	// (noteLate). late counts such frames.
	appendAt [lateRing][2]uint64
	late     uint64

	haltedTicks int
	// leftOut counts down to the view change of a halted host that heard
	// the rack go on without it (0: none due; viewchange.go, noteLeftOut).
	leftOut      int
	leftOuts     int // left-out view changes since the last install (leftOutAfter)
	skippedTicks int
	maxEpochSeen uint32
	// clock counts Ticks; answeredAt is, by member id, the clock when a
	// fetch answer last came from that member (a round trip over OOB: it
	// reaches this host both ways): the evidence tokenStuck needs that a
	// majority is there to install a view change.
	clock      uint64
	answeredAt [MaxHosts]uint64
	// probes counts the probe rounds sent since the last append or
	// install while not halted (probe); vcHeardAt is the clock when a
	// view change's message (prepare, promise, nack, install) last came:
	// tokenStuck waits for both.
	probes  int
	probeAt int // idle at which the next probe round is due (probes > 0)
	// leadFor counts down to a lead-for-behind view change of this host
	// (0: none), staggered by its place after the host behind.
	leadFor int
	// divergeIn counts down to the view change of a divergence this host
	// saw (0: none), staggered by its place after the divergent
	// position's (diverged).
	divergeIn int
	vcHeardAt uint64
	// promisedFar: the promise held went to an initiator far behind
	// this host (behind).
	promisedFar bool
	// promisedAmnesiac: the promise held went to an initiator that lost
	// its state. lostQuorum: a view change of this host found every
	// member answering and too few of them with their state
	// (ErrLostQuorum) since it last installed an epoch: only the
	// operator moves such a rack on (promiseWait).
	promisedAmnesiac, lostQuorum bool

	held       map[uint64]Entry   // frames beyond a gap, by seq
	orphans    map[uint64][]Entry // own entries view changes removed, by seq: their fate is known when the seq is agreed
	fetching   bool
	fetchTicks int
	fetchEst   detector // the time gap repairs' fetches take to be answered (fetchRTO)
	// batchEst is the time batch fetches (batchFetch: a state transfer's, a
	// catch-up's) take to be answered, apart from the gap repairs' (an
	// answer of FetchBytes takes tens of times longer); batchShift is
	// their back-off kept since one of them was asked again before its
	// answer came, until an answer is timed (RFC 6298 keeps a backed-off
	// RTO until a new sample: Karn's rule times no answer to a fetch sent
	// twice, so a base below the batches' time was never raised).
	batchEst   detector
	batchShift int
	fetchLo    uint64 // where the fetch under way starts
	fetchTries int    // times the fetch under way was sent again without an answer
	fetchPeer  uint8
	fetchEpoch uint32 // the epoch the fetch under way is for (catchUpTo)
	rackEpoch  uint32 // the newest frame heard: its epoch and seq+1 (Recovery)
	rackSeq    uint64
	laterIdle  int      // ticks since a frame of a later epoch than this host's (hearsLater)
	deaf       bool     // restarted from its durable state and heard no frame since (heardAhead)
	hurry      int      // entries to come whose passes skip the idle back-off (MsgWake)
	woke       bool     // this host asked for a wake and has not sent since
	catchup    *catchUp // a later epoch's log, gathered batch by batch (catchup.go)

	// fetchWide: the fetch under way asks for everything from the append
	// pointer on, in this host's own epoch, more than a window behind the
	// rack (SEQ_TOO_FAR, or the next batch after a full one): its answer
	// is a batch of up to FetchBytes, timed as one (batchFetch).
	fetchWide bool
	// fetchesAnswered is, by requester (member id), the last fetch this
	// host answered and when (answerOnce).
	fetchesAnswered [MaxHosts]answeredFetch
	fetchRepeats    uint64 // fetches not answered: the same as one just answered (answerOnce)

	// deferVC counts down the ticks during which a divergence or a fence
	// does not make this host lead a view change: a host refused as far
	// behind leaves it to the host that refused it (diverged), and one that
	// gave its view change up to catch up with a later epoch waits for the
	// catch-up, which ends its fence.
	deferVC int

	vc         *viewChange
	vcFailures int // view changes of this host that timed out since the last install

	// Token mode (fastpath.go): quiet while StepFast steps a frame the
	// fast path answered (this host sends nothing from it); the epoch a
	// fast path was armed in (HardState.FastEpoch); fenced: the log may
	// lack frames the fast path sent in this epoch.
	quiet     bool
	fastArmed bool
	fastEpoch uint32
	fenced    bool
	hardFence bool // fenced by Fence: Unfence does not lift it, only a later epoch
	// fenceTicks counts the ticks this host has been fenced and not
	// halted: after TokenTimeout of them it leads a view change out of
	// the fenced epoch.
	fenceTicks int

	// Membership (membership.go): stable member id, the configuration along
	// the log, at the log's base, and a queued change.
	uid        uint8
	ms, baseMS memberState
	// archBase and archRoster: the application's archive below the log
	// (SetArchive): agreed entries from archBase on, and the roster there.
	archOK     bool
	archBase   uint64
	archRoster []uint8
	memberHeld map[uint8]Held // what the other members last announced (held.go)
	leaving    bool           // a change that removes this host took effect in its log
	notMember  bool           // the current roster does not hold this host
	pendingCfg *ConfigChange
	// voided is this host's configuration entry that a view change voided
	// (its epoch ended before the entry took effect) and the seq of the
	// entry that voided it: once that seq is agreed the void is final and
	// the change is proposed again (reproposeConfig).
	voided       *voidedChange
	orphanCfgs   int   // configuration entries of this host among orphans: their fate is pending
	promisedBy   uint8 // member id the promise went to (promisedByOK)
	promisedByOK bool
	// The promise held before this host began leading view changes (to
	// another initiator, or its log's epoch): it falls back to it when it
	// gives its own view change up (giveUp).
	before      promise
	futureTries int // catch-up fetches since the last install (catchUpPeer)

	rd Ready
}

// NewNode returns a host that starts a rack from scratch: empty log, epoch 0,
// host 0 holding the token.
func NewNode(cfg Config) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	nd := &Node{cfg: cfg, n: cfg.Hosts, h: HistoryLen(cfg.Hosts), id: cfg.ID}
	nd.keys = newKeyState(cfg.KeyPhase, cfg.TagKey)
	nd.p = NewPointers(cfg.Group, cfg.Hosts, cfg.SeqWindow)
	nd.held = make(map[uint64]Entry)
	nd.uid = cfg.ID
	nd.ms = memberState{roster: IdentityRoster(cfg.Hosts)}
	nd.baseMS = nd.ms
	nd.applyRoster(false) // a host outside the first roster is no member
	return nd, nil
}

// NewAmnesiacNode returns a host that restarted without its state. It sends
// nothing and witnesses nothing until a view change it takes part in has
// installed a log on it.
func NewAmnesiacNode(cfg Config) (*Node, error) {
	nd, err := NewNode(cfg)
	if err != nil {
		return nil, err
	}
	nd.amnesiac = true
	nd.p.Halted = true
	nd.transfer.on = true
	return nd, nil
}

// RestartNode returns a host restarted from its durable state. Agreed
// entries of the log are delivered again from its first one (the
// application's state is assumed lost with the process).
func RestartNode(cfg Config, hs HardState) (*Node, error) {
	if hs.Amnesiac {
		nd, err := NewAmnesiacNode(cfg)
		if err == nil {
			nd.restoreTransfer(hs) // a state transfer under way goes on
		}
		return nd, err
	}
	nd, err := NewNode(cfg)
	if err != nil {
		return nil, err
	}
	if hs.Roster != nil {
		nd.ms = memberState{roster: slices.Clone(hs.Roster)}
		if len(hs.Log) > 0 {
			nd.ms.from = hs.Log[0].Seq // in effect there, at least
		}
		nd.baseMS = nd.ms
		nd.applyRoster(true)
	}
	nd.p.Epoch = hs.Epoch
	nd.promised = max(hs.Promised, hs.Epoch)
	nd.keys.restartFP = hs.KeySent
	nd.maxEpochSeen = nd.promised
	if len(hs.Log) > 0 {
		nd.resetAt(hs.Log[0].Seq, hs.Log[0].History)
	}
	// The epoch began at the first entry of the current epoch (entries of
	// older epochs before it came with the install), or at the log's end.
	epochStart := nd.p.Append + uint64(len(hs.Log))
	for i := range hs.Log {
		if hs.Log[i].Epoch == hs.Epoch {
			epochStart = hs.Log[i].Seq
			break
		}
	}
	nd.p.EpochStart = math.MaxUint64 // agreement comes from hs.Agreed
	// Sized ahead: grown entry by entry, the log was copied over and over
	// into fresh pages.
	nd.log = slices.Grow(nd.log, len(hs.Log))
	for i := range hs.Log {
		if hs.Log[i].Seq != nd.p.Append {
			return nil, fmt.Errorf("exo: restart: log entry %d has seq %d, want %d", i, hs.Log[i].Seq, nd.p.Append)
		}
		nd.pushEntry(hs.Log[i])
	}
	nd.voided = nil // a change of the previous run: its operator's wait ended with it
	nd.delivered = nd.base
	if nd.ms.hasNext && nd.p.Append >= nd.ms.nextAt && nd.p.Epoch > nd.ms.pendEpoch {
		nd.ms.switchNow()
		nd.applyRoster(true)
	}
	clear(nd.skipped[:])
	for _, id := range hs.Skipped {
		if int(id) < nd.n {
			nd.skipped[id] = true
		}
	}
	nd.p.EpochStart = epochStart
	nd.p.Agreed = max(nd.p.Agreed, min(hs.Agreed, nd.p.Append))
	nd.fastArmed, nd.fastEpoch = hs.FastArmed, hs.FastEpoch
	nd.fenced = hs.FastArmed && hs.FastEpoch == hs.Epoch || hs.Fenced
	nd.hardFence = hs.Fenced
	nd.p.Halted = nd.promised > nd.p.Epoch || nd.switchPending()
	// The rack ran on while this host was down: it sends nothing before it
	// has heard a frame (heardAhead), or the rack stayed silent for two
	// token timeouts (a whole rack restarted at once).
	nd.deaf = true
	nd.rd = Ready{}
	nd.deliver()
	return nd, nil
}

// HardState returns a copy of the state a durable host persists.
func (nd *Node) HardState() HardState {
	hs := nd.HardStateMeta()
	hs.Log = slices.Clone(nd.log)
	return hs
}

// HardStateMeta returns the durable state without the log: a durable host
// keeps the log itself by applying Ready.Truncate and Ready.Appended.
func (nd *Node) HardStateMeta() HardState {
	return HardState{Amnesiac: nd.amnesiac, Epoch: nd.p.Epoch, Promised: nd.promised, Agreed: nd.p.Agreed, Skipped: nd.skippedList(),
		Roster: nd.baseMS.roster, KeySent: nd.keys.sentFP, FastArmed: nd.fastArmed, FastEpoch: nd.fastEpoch, Fenced: nd.hardFence}
}

// ID returns this host's id.
func (nd *Node) ID() uint8 { return nd.id }

// Config returns the configuration in use (defaults applied).
func (nd *Node) Config() Config { return nd.cfg }

// Pointers returns a copy of the fast-path state.
func (nd *Node) Pointers() Pointers { return nd.p }

// Epoch returns the epoch of the current log.
func (nd *Node) Epoch() uint32 { return nd.p.Epoch }

// Promised returns the highest epoch promised to a view change.
func (nd *Node) Promised() uint32 { return nd.promised }

// Halted reports whether the host accepts no frames (view change pending or
// amnesiac).
func (nd *Node) Halted() bool { return nd.p.Halted }

// Amnesiac reports whether the host restarted without state and has not yet
// been given a log.
func (nd *Node) Amnesiac() bool { return nd.amnesiac }

// Log returns the log held in memory, entries LogBase() on (read-only;
// valid until the next call into nd).
func (nd *Node) Log() []Entry { return nd.log }

// LogBase returns the seq of Log()[0]: entries below it were compacted.
func (nd *Node) LogBase() uint64 { return nd.base }

// Entry returns the entry at seq s, if the log holds it.
func (nd *Node) Entry(s uint64) (*Entry, bool) {
	if s < nd.base || s >= nd.p.Append {
		return nil, false
	}
	return &nd.log[s-nd.base], true
}

// Compact drops the entries below seq upTo from memory. The embedder calls
// it once those entries are agreed and delivered at every host of the rack
// (and persisted where a durable log is kept): a view change or a gap
// repair never needs them again. upTo is capped at what this host has
// delivered.
func (nd *Node) Compact(upTo uint64) {
	upTo = min(upTo, nd.delivered)
	if upTo <= nd.base {
		return
	}
	// The configuration at s: a switch due at s applies there (memberAt
	// applies it only when it steps the entry at s).
	at := func(s uint64) memberState {
		m := nd.memberAt(s)
		if m.hasNext && m.nextAt <= s {
			m.switchNow()
		}
		return m
	}
	m := at(upTo)
	if m.pend || m.hasNext {
		// Not inside a configuration change: the log's base is where a
		// roster alone says the configuration (a restart, HardState.Roster,
		// and a state transfer, Message.StartRoster, carry no more).
		upTo = m.pendSeq
		if upTo <= nd.base {
			return
		}
		// A change that took effect right before it (back to back) has
		// switched at upTo: the base carries its roster.
		m = at(upTo)
	}
	nd.baseMS = m
	k := upTo - nd.base
	if k*2 >= uint64(len(nd.log)) {
		// Release the old array, into one with room for as many entries
		// again: a log compacted to keep entries grows back to 2*keep
		// before the next compaction without being copied on the way.
		rest := nd.log[k:]
		nd.log = append(make([]Entry, 0, 2*len(rest)+64), rest...)
	} else {
		nd.log = nd.log[k:]
	}
	nd.base = upTo
}

// resetAt empties the log and places the pointers at seq with history hist
// (the history an entry at seq carries).
func (nd *Node) resetAt(seq uint64, hist []uint8) {
	nd.log = nd.log[:0]
	nd.base = seq
	nd.archOK = false // what lay below is not this log's any more
	nd.p.Append = seq
	nd.p.ClearHistory()
	copy(nd.p.History[:nd.h], hist)
	nd.emptyRun = 0
}

// Pending returns the number of proposals waiting for the token.
func (nd *Node) Pending() int { return len(nd.pending) - nd.pendHead }

// Holder returns the host that holds the token according to this host's
// log: the first host after the newest entry's sender, in token order, that
// is neither skipped nor in the history (a host in the history could not
// send); when every such host is skipped, the first one not in the history.
func (nd *Node) Holder() uint8 {
	last := uint8(nd.n - 1)
	if len(nd.log) > 0 && !nd.freshRoster() {
		last = nd.log[len(nd.log)-1].Sender
	}
	return nd.after(last)
}

// freshRoster reports whether the log ends right at a configuration switch:
// the first frame of the new roster may come from any host.
func (nd *Node) freshRoster() bool { return nd.ms.from > 0 && nd.p.Append == nd.ms.from }

func (nd *Node) after(last uint8) uint8 {
	for pass := 0; pass < 2; pass++ {
		for i := 1; i <= nd.n; i++ {
			y := uint8((int(last) + i) % nd.n)
			if (pass == 1 || !nd.skipped[y]) && !nd.p.InHistory(y) {
				return y
			}
		}
	}
	return uint8((int(last) + 1) % nd.n)
}

// Skipped reports whether the token order currently skips host id.
func (nd *Node) Skipped(id uint8) bool { return int(id) < nd.n && nd.skipped[id] }

func (nd *Node) skippedList() []uint8 {
	var s []uint8
	for i := 0; i < nd.n; i++ {
		if nd.skipped[i] {
			s = append(s, uint8(i))
		}
	}
	return s
}

// Ready returns what must be done; call Advance once it is done.
func (nd *Node) Ready() Ready { return nd.rd }

// HasReady reports whether Ready holds anything.
func (nd *Node) HasReady() bool { return !nd.rd.Empty() }

// Advance releases the last Ready. Its buffers are reused.
func (nd *Node) Advance() {
	r := &nd.rd
	clear(r.Frames)
	clear(r.Messages)
	clear(r.Appended)
	clear(r.Agreed)
	clear(r.Dropped)
	*r = Ready{
		Appended: r.Appended[:0], Frames: r.Frames[:0], Messages: r.Messages[:0],
		Agreed: r.Agreed[:0], Dropped: r.Dropped[:0], Rejects: r.Rejects[:0], Events: r.Events[:0],
	}
}

// Propose queues a payload for broadcast; it goes out in the next frame this
// host sends with the token, batched with other queued payloads.
func (nd *Node) Propose(payload []byte) error {
	if err := nd.queue(payload); err != nil {
		return err
	}
	nd.proposed()
	return nil
}

// ProposeAll queues payloads, in order, as Propose does one by one, but
// sends (or wakes the rack) once, after the last: a holder packs them into
// one frame. On an error the payloads before it are queued.
func (nd *Node) ProposeAll(payloads [][]byte) error {
	var err error
	for _, p := range payloads {
		if err = nd.queue(p); err != nil {
			break
		}
	}
	nd.proposed()
	return err
}

// queue checks a payload and appends it to the proposals.
func (nd *Node) queue(payload []byte) error {
	if reserved(payload) {
		return ErrReserved
	}
	if len(payload)+2 > nd.cfg.MaxBatchBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(payload), nd.cfg.MaxBatchBytes-2)
	}
	if nd.Pending() >= nd.cfg.MaxPending {
		return ErrQueueFull
	}
	if nd.pendHead > 0 && nd.pendHead*2 >= len(nd.pending) {
		k := copy(nd.pending, nd.pending[nd.pendHead:])
		clear(nd.pending[k:])
		nd.pending = nd.pending[:k]
		nd.pendHead = 0
	}
	nd.pending = append(nd.pending, append([]byte(nil), payload...))
	return nil
}

// proposed sends what was queued if this host holds the token, else wakes
// a backed-off rack for it.
func (nd *Node) proposed() {
	nd.maybeSend(false)
	if nd.hasProposal() {
		nd.wake()
	}
}

// hasProposal reports whether something waits for this host's turn: a
// payload or a configuration change. The holder sends it without the idle
// back-off, and its host wakes a backed-off rack for it (MsgWake).
func (nd *Node) hasProposal() bool { return nd.Pending() > 0 || nd.pendingCfg != nil }

// StepBytes decodes a received frame (the bytes after the Ethernet header,
// padding allowed) and steps it. The tag is checked over the received bytes
// (after the group check, before any other state: see StepFrame).
func (nd *Node) StepBytes(b []byte) Reason {
	var f Frame
	if err := f.UnmarshalBinary(b); err != nil {
		r := ReasonOf(err)
		nd.rd.Rejects = append(nd.rd.Rejects, Reject{Reason: r})
		return r
	}
	if f.Group != nd.p.Group {
		nd.reject(&f, ReasonBadGroup)
		return ReasonBadGroup
	}
	if !nd.keys.verifyBytes(b) {
		nd.reject(&f, ReasonBadTag)
		return ReasonBadTag
	}
	nd.sawPhase(f.Sender, KeyPhaseOf(f.Flags))
	return nd.step(&f)
}

// StepFrame applies a received, decoded frame and returns its verdict.
// The frame's slices are copied if it is kept.
//
// The checks before the state machine's (Pointers.Classify): the type
// (BAD_TYPE), the group (BAD_GROUP), then the tag under the key of the slot
// the frame's key phase names (keys.go), computed from the frame's fields (BAD_TAG; for a frame UnmarshalBinary
// accepted, that is the tag of the bytes it came from). A frame of another
// group is never checked against this group's key; a forged frame is
// refused before any other state is read (not even the epoch it claims).
func (nd *Node) StepFrame(f *Frame) Reason {
	if f.Type != FrameData {
		nd.reject(f, ReasonBadType)
		return ReasonBadType
	}
	if f.Group != nd.p.Group {
		nd.reject(f, ReasonBadGroup)
		return ReasonBadGroup
	}
	if !nd.keys.verify(f) {
		nd.reject(f, ReasonBadTag)
		return ReasonBadTag
	}
	nd.sawPhase(f.Sender, KeyPhaseOf(f.Flags))
	nd.heard(f)
	if int(f.Sender) < len(nd.ms.roster) {
		nd.alive(nd.ms.roster[f.Sender]) // (a frame of another roster may clear another member's mark: a slower takeover only)
	}
	return nd.step(f)
}

// step applies a frame of this group whose tag verified.
func (nd *Node) step(f *Frame) Reason {
	if f.Epoch > nd.maxEpochSeen && int(f.Sender) < nd.n {
		nd.maxEpochSeen = f.Epoch
	}
	r := nd.p.Classify(f)
	if f.Epoch > nd.p.Epoch && (r == ReasonBadSender || r == ReasonBadHistlen || r == ReasonBadHistoryID) && !nd.amnesiac {
		// A frame of a later epoch under another roster (section 7): this
		// host missed a configuration switch. Catch up as from any frame of
		// a later epoch.
		nd.reject(f, r)
		nd.catchUpTo(f)
		return r
	}
	switch r {
	case ReasonHalted:
		nd.reject(f, r)
		nd.noteLeftOut(f)
	case ReasonAccept:
		nd.appendHeard(entryOf(f))
		nd.drainHeld()
		nd.maybeSend(false)
	case ReasonGap:
		nd.reject(f, r)
		nd.hold(f)
	case ReasonDivergence:
		nd.reject(f, r)
		nd.noteLate(f)
		nd.event(EventDivergence, f.Epoch, f.Seq, f.Sender)
		nd.diverged(f.Seq)
	case ReasonDuplicate:
		nd.reject(f, r)
		nd.noteLate(f) // (a late frame older than the history)
	case ReasonFutureEpoch:
		nd.reject(f, r)
		if !nd.amnesiac {
			nd.catchUpTo(f)
		}
	case ReasonSeqTooFar:
		// Too far ahead to hold: this host fell behind. Catch up from the
		// sender (the fetch continues batch by batch until it is close).
		nd.reject(f, r)
		if !nd.fetching {
			nd.event(EventGap, f.Epoch, nd.p.Append, f.Sender)
			nd.fetch(nd.uidOf(f.Sender), nd.p.Append, 0)
			// A batch, not a gap's few entries: timed as one. Timed
			// as a gap repair (FetchTicks), a lab host restarted 1,300
			// entries behind in its epoch asked three members for its
			// first batch within 19 ms, and fetched it three times.
			nd.fetchWide = true
		}
	default:
		nd.reject(f, r)
	}
	return r
}

// frameOf returns the frame that carries e, with its tag.
func (nd *Node) frameOf(e *Entry) Frame {
	f := e.Frame(nd.p.Group)
	nd.keys.seal(&f)
	return f
}

func entryOf(f *Frame) Entry {
	return Entry{Seq: f.Seq, Epoch: f.Epoch, Sender: f.Sender, History: f.History, Count: f.Count, Flags: f.Flags &^ FlagKeyPhase, Payload: f.Payload}
}

func (nd *Node) reject(f *Frame, r Reason) {
	nd.rd.Rejects = append(nd.rd.Rejects, Reject{From: f.Sender, Seq: f.Seq, Epoch: f.Epoch, Reason: r})
}

func (nd *Node) event(k EventKind, epoch uint32, seq uint64, peer uint8) {
	nd.rd.Events = append(nd.rd.Events, Event{Kind: k, Epoch: epoch, Seq: seq, Peer: peer})
}

// pushEntry appends e to the log (copying its slices) and moves the
// pointers, the skip set and the idle-pass counter. It is the only place the
// log grows.
func (nd *Node) pushEntry(e Entry) {
	if nd.ms.hasNext && e.Seq >= nd.ms.nextAt {
		// The first entry of the next configuration (it came with an
		// install or a fetch of a later epoch).
		nd.ms.switchNow()
		nd.applyRoster(true)
	}
	// Token order: the expected sender is the holder (see Holder); hosts
	// passed over by a takeover are skipped until a view change re-admits
	// them, or they send again.
	// The first frame of a new rack may come from any host.
	// At most one lap: an entry whose sender is not a position of this
	// roster (an install of a corrupt or foreign log) must not spin here.
	for x, k := nd.Holder(), 0; k < nd.n && len(nd.log) > 0 && !nd.freshRoster() && x != e.Sender; x, k = uint8((int(x)+1)%nd.n), k+1 {
		if !nd.p.InHistory(x) {
			nd.skipped[x] = true
		}
	}
	nd.skipped[e.Sender] = false
	if x, ok := e.Readmits(); ok && int(x) < nd.n {
		nd.skipped[x] = false
		nd.readmit[x] = false
	}

	e.History = nd.arena.copy(e.History)
	e.Payload = nd.arena.copy(e.Payload)
	nd.log = append(nd.log, e)
	nd.p.Accept(e.Sender, e.Seq)
	if e.Count > 0 {
		nd.observeKey(&nd.log[len(nd.log)-1])
	}
	wasPend, pendSeq, pendChange := nd.ms.pend, nd.ms.pendSeq, nd.ms.pendChange
	if nd.ms.observe(&nd.log[len(nd.log)-1]) {
		// The change took effect: this epoch ends here; a view change
		// installs the next one under the new roster.
		nd.p.Halted = true
		nd.haltedTicks = 0
		_, stays := slices.BinarySearch(nd.ms.next, nd.uid)
		nd.leaving = !stays
		if !stays && e.Seq >= nd.delivered {
			// A change it queued can no longer be proposed here (its
			// operator is told by the status: removed). (Not when an
			// install appends agreed entries again.)
			nd.pendingCfg, nd.voided = nil, nil
		}
	} else if wasPend && !nd.ms.pend && pendSeq >= nd.base && pendSeq < nd.p.Append && e.Seq >= nd.delivered {
		// The pending change is void (its epoch ended first): if it was
		// this host's, it is proposed again once the void is agreed. (An
		// install appends agreed entries again: a void among them was
		// seen when they were delivered. A host past the rack's floor cut
		// its unagreed entries, the pending change's among them, and its
		// transfer appends others: no change of its log to void. Indexed,
		// it panicked: --roster-changes with --amnesia, seed 419.)
		if c := &nd.log[pendSeq-nd.base]; int(c.Sender) < len(nd.ms.roster) && nd.ms.roster[c.Sender] == nd.uid {
			nd.voided = &voidedChange{change: pendChange, at: e.Seq}
		}
	}
	if idlePass(&e) {
		nd.emptyRun++
	} else {
		nd.emptyRun = 0
	}
	if nd.hurry > 0 {
		nd.hurry--
	}
	if e.Sender == nd.id {
		nd.woke = false
	}
}

// idlePass reports whether e is a token pass for the idle back-off: no
// record, or a key announcement alone (during a key rotation every frame
// a host sends carries one, and an idle rack then spun at line rate until
// the rotation ended).
func idlePass(e *Entry) bool {
	if e.Count == 0 {
		return true
	}
	_, ann := ParseKeyEntry(e)
	return ann && e.Count == 1
}

// appendHeard appends an entry heard on the wire (a frame accepted now,
// or held for a gap): if it passes this host over, a takeover did so
// while this host was running (EventSkippedAlive; an entry fetched or
// installed after a restart may skip it too, for the time it was down,
// and is not counted).
func (nd *Node) appendHeard(e Entry) {
	wasSkipped := nd.skipped[nd.id]
	nd.appendEntry(e)
	if !wasSkipped && nd.skipped[nd.id] {
		nd.skippedAlive++
		nd.event(EventSkippedAlive, e.Epoch, e.Seq, e.Sender)
	}
}

func (nd *Node) appendEntry(e Entry) {
	nd.sampleGap()
	nd.appendAt[e.Seq%lateRing] = [2]uint64{e.Seq + 1, nd.clock}
	nd.pushEntry(e)
	nd.rd.Appended = append(nd.rd.Appended, nd.log[len(nd.log)-1])
	nd.idle, nd.probes = 0, 0
	nd.deliver()
}

// deliver moves newly agreed entries to Ready.Agreed.
func (nd *Node) deliver() {
	for nd.delivered < nd.p.Agreed {
		e := &nd.log[nd.delivered-nd.base]
		nd.rd.Agreed = append(nd.rd.Agreed, *e)
		if len(nd.orphans) > 0 {
			for _, o := range nd.orphans[e.Seq] {
				_, isCfg := ParseConfigEntry(&o)
				if isCfg {
					nd.orphanCfgs--
				}
				if !o.SameID(e) {
					nd.rd.Dropped = append(nd.rd.Dropped, o)
					if isCfg {
						nd.reproposeConfig(&o)
					}
				}
			}
			delete(nd.orphans, e.Seq)
		}
		if v := nd.voided; v != nil && v.at == e.Seq {
			nd.voided = nil
			nd.reproposeChange(v.change, e)
		}
		nd.delivered++
	}
}

// hold keeps a frame beyond a gap and asks its sender for the missing
// entries.
func (nd *Node) hold(f *Frame) {
	if _, ok := nd.held[f.Seq]; !ok && len(nd.held) < nd.cfg.MaxHeld {
		e := entryOf(f)
		e.History = append([]uint8(nil), e.History...)
		e.Payload = append([]byte(nil), e.Payload...)
		nd.held[f.Seq] = e
	}
	if !nd.fetching || nd.fetchElsewhere(f.Sender) {
		again := nd.fetching
		nd.event(EventGap, f.Epoch, nd.p.Append, f.Sender)
		nd.fetch(nd.uidOf(f.Sender), nd.p.Append, f.Seq)
		if again {
			nd.fetchTries++
		}
	}
}

// fetchElsewhere reports whether a frame from sender shows a better host
// to fetch from than the one the fetch under way waits on: that fetch was
// sent again already (the host before did not answer in time), it had
// twice the time an answer takes before the back-off (fetchBase), and it
// is not at sender, whose frame just came. The retries' back-off
// (fetchRTO) is for a host slow to answer; behind a partition the host
// asked may not answer at all, and after the heal the backed-off retry
// came up to 64 x FetchTicks later (lab hosts resumed 300 ms after a
// heal), while the rack's frames named a host that may answer. Twice the
// base time, and counted as a retry: a rack whose OOB answers are all
// lost still sends one fetch per two answer times, not one per frame.
func (nd *Node) fetchElsewhere(sender uint8) bool {
	return nd.fetching && nd.fetchTries > 0 && nd.fetchTicks >= 2*nd.fetchBase() && nd.fetchPeer != nd.uidOf(sender)
}

// catchUpTo fetches the log of the later epoch of frame f, unless a fetch
// is under way and has not had its time to answer (fetchRTO): every frame
// of the later epoch would otherwise send a fetch, and their answers pile
// up. A frame of an epoch newer than the one fetched waits too: the answer
// under way comes from a member of the rack, in the epoch that member is
// in by then, and the next fetch goes on from it (stepCatchUp keeps what
// is agreed). Fetching at once for every newer epoch made a restarted lab
// host, on a rack that changed epochs every second or so under load, fetch
// its 100,000-entry gap three and a half times (308 MB).
func (nd *Node) catchUpTo(f *Frame) {
	if c := nd.catchup; c != nil && c.peers != nil && f.Epoch == c.epoch {
		if u := c.senderID(f.Sender); u != nd.uid {
			c.addPeer(u) // a member in the epoch gathered: asked in turn
		}
	}
	if nd.fetching && nd.fetchTicks < nd.fetchRTO() && !nd.fetchElsewhere(f.Sender) {
		return
	}
	again := nd.fetching
	peer := nd.catchUpPeer(f.Sender, f.Epoch)
	lo, hi := nd.catchUpLo(f.Epoch), uint64(0)
	if c := nd.catchup; again && c != nil && f.Epoch == c.epoch && c.pipelined() && lo == c.end() {
		// The batch at the end had its time: asked again up to the next
		// batch in flight, as fetchAgain does; unbounded, it overlapped
		// every batch of the pipeline (a restarted lab host fetched two
		// to three times the log it lacked).
		hi = c.againAt(nd.fetchPeer, peer, nd.clock)
	}
	nd.fetch(peer, lo, hi)
	nd.fetchEpoch = f.Epoch
	if again {
		nd.fetchTries++
	}
}

// fetch asks member peer (a member id) for its log from lo on.
func (nd *Node) fetch(peer uint8, lo, hi uint64) {
	nd.fetchWide = false // (a caller that asks for a batch in its epoch sets it)
	nd.fetching = true
	nd.fetchTicks = 0
	nd.fetchPeer, nd.fetchLo = peer, lo
	nd.fetchEpoch = nd.p.Epoch
	if nd.catchup != nil {
		// A retry of a catch-up is for the epoch gathered (catchUpTo
		// would otherwise take the next frame of it for a newer one).
		nd.fetchEpoch = max(nd.fetchEpoch, nd.catchup.epoch)
	}
	nd.rd.Messages = append(nd.rd.Messages, Message{Type: MsgFetch, From: nd.uid, To: peer,
		Epoch: nd.p.Epoch, Lo: lo, Hi: hi})
}

// fetchAgain sends the fetch under way again, to the member after the one
// that did not answer in time: from the append pointer, or for a catch-up
// from where the batches gathered end.
func (nd *Node) fetchAgain() {
	wide := nd.fetchWide
	defer func() { nd.fetchTries++; nd.fetchWide = wide }()
	pos, _ := nd.posOf(nd.fetchPeer)
	peer := uint8((int(pos) + 1) % nd.n)
	if peer == nd.id {
		peer = uint8((int(peer) + 1) % nd.n)
	}
	lo, hi := nd.p.Append, uint64(0)
	if c := nd.catchup; c != nil {
		lo = c.end() // the next batch of a later epoch's log
		if c.pipelined() {
			hi = c.againAt(nd.fetchPeer, nd.uidOf(peer), nd.clock)
		}
	}
	nd.fetch(nd.uidOf(peer), lo, hi)
}

// FetchLimit sizes one fetch answer: Entries entries (or as many as
// there are), then more while the answer's binary size stays within Bytes
// (0: Entries exactly). The node sizes answers from its log with it, and
// an application sizes those it fills from its archive (SetArchive) with
// the one the answer carries.
type FetchLimit struct {
	Entries int
	Bytes   int
}

// More reports whether an answer of n entries and size bytes so far takes
// one more entry of next bytes.
func (l FetchLimit) More(n, size, next int) bool {
	return n < l.Entries || (l.Bytes > 0 && size+next <= l.Bytes)
}

// Take returns how many of es, from the first, an answer takes: those
// below hi, as many as l allows.
func (l FetchLimit) Take(es []Entry, hi uint64) int {
	n, size := 0, 0
	for n < len(es) && es[n].Seq < hi {
		next := es[n].BinarySize()
		if !l.More(n, size, next) {
			break
		}
		size += next
		n++
	}
	return n
}

// fetchLimit is this node's answer size (Config.MaxFetchEntries and
// Config.FetchBytes).
func (nd *Node) fetchLimit() FetchLimit {
	return FetchLimit{Entries: nd.cfg.MaxFetchEntries, Bytes: nd.cfg.FetchBytes}
}

// fetchEnd is where a fetch response from start ends, given the log's end
// (or the asked bound) end, under fetchLimit.
func (nd *Node) fetchEnd(start, end uint64) uint64 {
	return start + uint64(nd.fetchLimit().Take(nd.log[start-nd.base:end-nd.base], end))
}

// SetArchive tells the node that its application keeps the agreed entries
// from base up to the log's base (LogBase) outside the node, readable on
// demand: the durable log's older segments, which the daemon's retention
// policy keeps (docs/recovery.md, "Retention"); roster is the roster in
// force at base. A fetch from below LogBase is then answered from there:
// the answer (MsgFetchResp with ArchiveHi set) leaves its Entries to the
// application, which reads them, at most ArchiveLimit, from Start below
// ArchiveHi before sending it, or drops the answer when it no longer holds
// them (the requester asks again). base at or past LogBase means none;
// compacting the log (Compact) does not move base; a log that starts anew
// (a floor jump, a cut for lost state) drops the archive.
func (nd *Node) SetArchive(base uint64, roster []uint8) {
	nd.archOK, nd.archBase, nd.archRoster = base < nd.base, base, slices.Clone(roster)
}

// ArchiveBase returns the first position this node answers fetches from:
// the archive's base (SetArchive), or LogBase without one.
func (nd *Node) ArchiveBase() uint64 {
	if !nd.archOK {
		return nd.base
	}
	return min(nd.archBase, nd.base)
}

// archiveAnswer answers a fetch from below the log's base out of the
// archive (SetArchive): from m.Lo, or from the archive's base with the
// roster there when it was cut past m.Lo too; up to the log's base (the
// next fetch goes on from the log).
func (nd *Node) archiveAnswer(m *Message) Message {
	start := max(m.Lo, nd.archBase)
	hi := nd.base
	if m.Hi > start && m.Hi < hi {
		hi = m.Hi // a bound asked for
	}
	resp := Message{Type: MsgFetchResp, From: nd.uid, To: m.From, LogEpoch: nd.p.Epoch, Agreed: nd.p.Agreed,
		Start: start, Hi: nd.p.Append, Skipped: nd.skippedList(), Roster: nd.ms.roster,
		ArchiveHi: hi, ArchiveLimit: nd.fetchLimit()}
	if start > m.Lo {
		resp.StartRoster = slices.Clone(nd.archRoster)
	}
	return resp
}

// answered takes note of a fetch answer m: the ticks the fetch under way
// took go to the fetch estimator (RFC 6298, as the token timeout's
// detector; a batch's to the batches' own), only when m answers that very
// fetch and it was not sent again (Karn's rule: the answer to a fetch sent
// twice times neither; sampling them drove the estimate down, each short
// sample making the next retry come sooner), and the back-off of retries
// ends, but for batches: an answer to a batch sent again keeps the
// back-off for the next ones until one is timed.
func (nd *Node) answered(m *Message) {
	batch := nd.batchFetch()
	switch {
	case nd.fetching && m.From == nd.fetchPeer && m.Start == nd.fetchLo && nd.fetchTries == 0:
		if batch {
			nd.batchEst.sample(nd.fetchTicks)
			nd.batchShift = 0
		} else {
			nd.fetchEst.sample(nd.fetchTicks)
		}
	case nd.fetching && nd.fetchTries > 0 && batch:
		// A batch asked again before its answer came: the next batches
		// start with the back-off until one is timed.
		nd.batchShift = min(nd.batchShift+1, 3)
	}
	nd.fetchTries = 0
}

// batchFetch reports whether the fetch under way (or the next) is for a
// batch of up to FetchBytes: a state transfer's, a catch-up's to a later
// epoch, its first fetch included, or one in this host's own epoch from
// more than a window behind (fetchWide).
func (nd *Node) batchFetch() bool {
	return nd.transfer.on || nd.catchup != nil || nd.fetchEpoch > nd.p.Epoch || nd.fetchWide
}

// fetchCap is the longest a fetch waits for its answer, back-off included.
func (nd *Node) fetchCap() int { return max(64*nd.cfg.FetchTicks, 4*nd.cfg.TransferTicks) }

// fetchRTO is how long a fetch may go unanswered before it is sent again
// (to another host, or at the next frame of a later epoch): FetchTicks, or
// the estimator's timeout (smoothed answer time plus 4 deviations) when
// answers take longer (from a busy host), up to 16 x FetchTicks; for a
// batch (batchFetch) at least TransferTicks, or the batches' own
// estimator's timeout, with the back-off kept since a batch was asked
// again (batchShift); doubled for each time the fetch was sent again
// without an answer (up to 8 times); fetchCap at most. Sending again
// before the answer could come only multiplies the work of both sides: a
// restarted lab host asked up to five hosts for each batch of its
// catch-up.
func (nd *Node) fetchRTO() int {
	return min(nd.fetchBase()<<min(nd.fetchTries, 3), nd.fetchCap())
}

// fetchBase is fetchRTO before the back-off of retries.
func (nd *Node) fetchBase() int {
	base := nd.cfg.FetchTicks
	if nd.fetchEst.samples > 0 {
		base = min(max(nd.cfg.FetchTicks, nd.fetchEst.rto()), 16*nd.cfg.FetchTicks)
	}
	if nd.batchFetch() {
		// Batches of up to FetchBytes (a state transfer, a catch-up to a
		// later epoch, its first fetch included) take longer than a gap
		// repair's: asked again sooner, they came twice or more (a lab
		// host restarted 47,568 entries behind fetched 4 times their
		// bytes; one restarted 52,390 behind asked ten members for its
		// first batch in 214 ms, before the first answer came).
		base = max(base, nd.cfg.TransferTicks)
		if nd.batchEst.samples > 0 {
			base = max(base, nd.batchEst.rto())
		}
		base = min(base<<nd.batchShift, nd.fetchCap())
	}
	return base
}

// drainHeld appends held frames that the log has reached.
func (nd *Node) drainHeld() {
	for len(nd.held) > 0 {
		e, ok := nd.held[nd.p.Append]
		for s := range nd.held {
			if s < nd.p.Append {
				delete(nd.held, s)
			}
		}
		if !ok {
			return
		}
		delete(nd.held, e.Seq)
		f := e.Frame(nd.p.Group)
		switch r := nd.p.Classify(&f); r {
		case ReasonAccept:
			nd.appendHeard(e)
		case ReasonDivergence:
			nd.event(EventDivergence, e.Epoch, e.Seq, e.Sender)
			nd.diverged(e.Seq)
			return
		default:
			nd.rd.Rejects = append(nd.rd.Rejects, Reject{From: e.Sender, Seq: e.Seq, Epoch: e.Epoch, Reason: r})
		}
	}
	if len(nd.held) == 0 {
		nd.fetching = false
	}
}

// canSend reports whether this host may put a frame on the wire now.
func (nd *Node) canSend() bool {
	return !nd.p.Halted && !nd.amnesiac && !nd.Removed() && !nd.fenced && (brokenDistinct || !nd.p.InHistory(nd.id)) &&
		(!nd.heardAhead() || nd.idle > 2*nd.cfg.TokenTimeout) && !nd.hearsLater()
}

// hearsLater reports whether frames of a later epoch than this host's came
// within the last laterSilence ticks: the rack runs on in that epoch, and a
// frame of this one would be stale everywhere (a lab host restarted 90,000
// entries behind took the token over in its old epoch while it caught up,
// its log's silence taken for the rack's). It catches up instead; once
// such frames stop for that long (the later epoch's hosts gone), it may
// send again.
// laterSilence is how long frames of a later epoch must have stopped
// before a host that heard them sends in its own: a view-change timeout
// (the later epoch is gone, not between two frames: 2 token timeouts let a
// lab host send in its old epoch in a lull of 20 ms).
func (nd *Node) laterSilence() int { return max(2*nd.cfg.TokenTimeout, nd.cfg.ViewChangeTimeout) }

func (nd *Node) hearsLater() bool {
	return nd.rackEpoch > nd.p.Epoch && nd.laterIdle <= nd.laterSilence()
}

// heardAhead reports whether a frame of this host's epoch showed the rack
// ahead of its log (or a catch-up's responder had more than it adopted).
// Such a host sends nothing: its frame would contradict the rack's entry
// at its log's end (a host that adopted a late install, or a prefix of a
// later epoch's log, did just that, and each time a view change followed).
// It catches up instead, unless the rack stays silent for 2 TokenTimeouts
// (a frame only this host heard, from a host that then died).
func (nd *Node) heardAhead() bool {
	return nd.deaf || nd.rackEpoch == nd.p.Epoch && nd.rackSeq > nd.p.Append
}

// Broadcast makes this host send a frame now, as a token takeover does: with
// its queued proposals, or empty. It sends nothing and reports false when the
// rules forbid it: halted, amnesiac, or this host is in its own history
// (every receiver would reject the frame with SENDER_IN_HISTORY).
func (nd *Node) Broadcast() bool {
	if !nd.canSend() {
		return false
	}
	nd.send()
	return true
}

// idleDelay is how long this host's empty token pass waits: the rack's
// back-off, unless a wake (MsgWake) asked for passes at once.
func (nd *Node) idleDelay() int {
	if nd.hurry > 0 {
		return nd.cfg.PassDelay
	}
	return nd.backoff()
}

// backoff is how long an empty token pass waits on this log: PassDelay,
// plus, after IdleRotations rotations without payloads, a tick that
// doubles with every further idle rotation, up to IdleBackoffMax (an idle
// rack slows down within a few rotations; a proposal does not wait for
// it: MsgWake). Every host that holds the log computes the same value: a
// successor waits that long more before it takes the token over (Tick),
// and the sender of the newest entry before it sends it again.
func (nd *Node) backoff() int {
	if nd.cfg.IdleBackoffMax == 0 || nd.emptyRun < nd.cfg.IdleRotations*nd.n {
		return nd.cfg.PassDelay
	}
	return nd.cfg.PassDelay + min(nd.cfg.IdleBackoffMax, 1<<min(20, nd.emptyRun/nd.n-nd.cfg.IdleRotations))
}

// retransmitEvery is how often the sender of the newest entry sends it
// again while nobody follows it: after the successor's back-off (before
// it, the successor is only waiting), RetransmitTicks, or half the token
// timeout in force if that is shorter: a lost frame goes again before its
// successor's successor takes the token over.
func (nd *Node) retransmitEvery() int {
	return min(nd.cfg.RetransmitTicks, max(1, nd.tokenTimeout()/2)) + nd.backoff() - nd.cfg.PassDelay
}

// wake asks the other members to pass the token at once (MsgWake): a
// proposal waits and the rack backs off. Once until this host sends (Tick
// sends it again every TokenTimeout while the proposal waits).
func (nd *Node) wake() {
	if nd.woke || nd.backoff() <= nd.cfg.PassDelay || nd.Holder() == nd.id || nd.p.Halted {
		return
	}
	nd.woke = true
	for _, u := range nd.ms.roster {
		if u != nd.uid {
			nd.rd.Messages = append(nd.rd.Messages, Message{Type: MsgWake, From: nd.uid, To: u, Epoch: nd.p.Epoch})
		}
	}
}

// maybeSend broadcasts this host's frame if it holds the token (or takes it
// over when takeover is set).
func (nd *Node) maybeSend(takeover bool) {
	if nd.quiet || !nd.canSend() {
		return
	}
	if !takeover {
		if nd.Holder() != nd.id {
			return
		}
		if !nd.hasProposal() && nd.idle < nd.idleDelay() {
			return
		}
	}
	nd.send()
}

// send builds the next frame from the queued proposals (possibly none: a
// token pass), appends it locally and queues it for broadcast.
func (nd *Node) send() {
	var payload []byte
	var count uint16
	size := 0
	if nd.pendingCfg != nil && !nd.ms.pend && !nd.ms.hasNext {
		if _, ok := nd.pendingCfg.Apply(nd.ms.roster); !ok {
			// A change that waited behind another one and no longer
			// applies (ChangeInFlight: dropped).
			nd.pendingCfg = nil
		}
	}
	if nd.pendingCfg != nil && !nd.ms.pend && !nd.ms.hasNext {
		// A configuration entry goes alone in its frame.
		payload, _ = AppendRecord(nil, nd.pendingCfg.Record())
		count = 1
		nd.pendingCfg = nil
		size = nd.cfg.MaxBatchBytes
	} else if rec := nd.announcement(); rec != nil {
		// A key announcement (keys.go) leads the frame.
		payload, _ = AppendRecord(nil, rec)
		count = 1
		size = len(payload)
	}
	for size < nd.cfg.MaxBatchBytes && nd.pendHead < len(nd.pending) && count < 65535 {
		rec := nd.pending[nd.pendHead]
		if size+2+len(rec) > nd.cfg.MaxBatchBytes {
			break
		}
		payload, _ = AppendRecord(payload, rec) // lengths checked by Propose
		size += 2 + len(rec)
		count++
		nd.pending[nd.pendHead] = nil
		nd.pendHead++
	}
	if nd.pendHead == len(nd.pending) {
		nd.pending = nd.pending[:0]
		nd.pendHead = 0
	}
	var flags uint16
	for x := 0; x < nd.n; x++ {
		if nd.readmit[x] && nd.skipped[x] {
			flags = FlagReadmit | uint16(x)
			break
		}
	}
	f := nd.p.Next(nd.id, count, flags, payload)
	nd.appendEntry(entryOf(&f))
	last := &nd.log[len(nd.log)-1]
	nd.rd.Frames = append(nd.rd.Frames, nd.frameOf(last))
	if nd.switchPending() {
		nd.startViewChange(CauseRosterSwitch)
	}
}

// Tick advances the host's clock by one tick: idle passes, retransmissions,
// token takeovers, fetch retries and view-change timeouts.
func (nd *Node) Tick() {
	nd.idle++
	nd.clock++
	if nd.laterIdle <= nd.laterSilence() {
		nd.laterIdle++
	}
	if nd.deferVC > 0 {
		nd.deferVC--
	}
	nd.tickKeys()
	if nd.fetching {
		// Counted while halted too: a catch-up (catchUpTo) is sent again
		// once the one under way had its time.
		nd.fetchTicks++
	}
	if nd.p.Halted {
		if nd.catchup != nil && nd.fetching && nd.fetchTicks >= nd.fetchRTO() {
			// A halted host gathering a later epoch's log asks again too:
			// it may be what halts the rack (a lab host restarted under a
			// promise led view changes the others refused, and the rack
			// sent no frame that would have made it ask again: its gather
			// stood still for seconds on one lost answer).
			nd.fetchAgain()
		}
		nd.tickHalted()
		return
	}
	nd.haltedTicks = 0
	if nd.fenced {
		nd.fenceTicks++
	}
	if nd.fetching && nd.fetchTicks >= nd.fetchRTO() {
		nd.fetchAgain()
	}
	if nd.skipped[nd.id] {
		// Passed over while it was away: ask the others to re-admit it; the
		// next frame sent carries the re-admission, so every host applies it
		// at the same point of the log.
		nd.skippedTicks++
		if nd.skippedTicks >= nd.cfg.RejoinTicks {
			nd.skippedTicks = 0
			for _, u := range nd.ms.roster {
				if u != nd.uid {
					nd.rd.Messages = append(nd.rd.Messages, Message{Type: MsgRejoin, From: nd.uid, To: u, Epoch: nd.p.Epoch})
				}
			}
		}
	} else {
		nd.skippedTicks = 0
	}
	if nd.woke && nd.hasProposal() && nd.idle%nd.cfg.TokenTimeout == 0 {
		// A wake may have been lost (or reached hosts that restarted):
		// again, every TokenTimeout without an append, until this host
		// sends.
		nd.woke = false
		nd.wake()
	}
	holder := nd.Holder()
	if len(nd.log) > 0 && !nd.freshRoster() && nd.log[len(nd.log)-1].Sender == nd.id && nd.idle%nd.retransmitEvery() == 0 {
		last := &nd.log[len(nd.log)-1]
		nd.rd.Frames = append(nd.rd.Frames, nd.frameOf(last))
		nd.event(EventRetransmit, last.Epoch, last.Seq, nd.id)
	}
	if nd.leadFor > 0 {
		if nd.leadFor--; nd.leadFor == 0 && nd.vc == nil {
			nd.startViewChange(CauseLeadForBehind)
			return
		}
	}
	if nd.divergeIn > 0 {
		if nd.divergeIn--; nd.divergeIn == 0 && nd.vc == nil {
			nd.startViewChange(CauseDivergence)
			return
		}
	}
	switch {
	case nd.fenced && nd.vc == nil && !nd.notMember && nd.fenceTicks >= nd.cfg.TokenTimeout && nd.deferVC == 0:
		// A fenced host sends nothing in this epoch (fastpath.go), not
		// even its clients' proposals: once it had a token timeout to
		// catch up with the frames it hears, a view change moves the rack
		// to the next epoch, where the fence ends.
		nd.startViewChange(CauseFenced)
	case nd.tokenStuck():
		nd.startViewChange(CauseTokenStuck)
	case nd.probeDue(holder):
		nd.probe()
	case holder == nd.id:
		nd.maybeSend(false)
	case nd.p.Epoch > 0 && nd.p.Append == nd.p.EpochStart && nd.p.InHistory(nd.id) && nd.vc == nil && !nd.notMember &&
		nd.idle >= nd.neverBeganAfter():
		// The epoch this host installed never began: no frame of it came,
		// and this host may not send the first (it sent the last entry the
		// install carried). Hosts that missed the install cannot learn of
		// it from this host (a retransmission carries its entry's own,
		// older epoch): two hosts of a 3-host rack in two such epochs
		// waited for each other for ever. A view change brings the rack
		// to one epoch, once every takeover had its turn.
		nd.startViewChange(CauseEpochNeverBegan)
	default:
		if nd.idle >= nd.takeoverWait(holder) && nd.canSend() {
			nd.event(EventTakeover, nd.p.Epoch, nd.p.Append, holder)
			nd.maybeSend(true)
		}
	}
}

// stuckAfter is how long a host that may not send waits without an append
// before it leads a view change (CauseTokenStuck): the holder's token
// timeout, every other host's takeover, and a view change's timeout (one
// under way elsewhere installs first), then a stagger by position (two
// stuck hosts of a rack would otherwise lead theirs at once, and duel).
func (nd *Node) stuckAfter() int {
	return nd.neverBeganAfter() + int(nd.id)*nd.cfg.TakeoverStagger
}

// neverBeganAfter is how long a host waits without an append, once every
// takeover had its turn, before it gives the token up for lost: the token
// timeout's ceiling, every rank's stagger (the configured one, the
// longest), and a view change's timeout. CauseEpochNeverBegan leads one after it;
// stuckAfter adds a stagger by position.
func (nd *Node) neverBeganAfter() int {
	return nd.cfg.TokenTimeout + nd.n*nd.cfg.TakeoverStagger + nd.cfg.ViewChangeTimeout
}

// stuck reports whether the token may be stuck at this host, not halted:
// it is in the history, so it may not send, and it hears no later epoch
// (it catches up to that instead); not in an epoch that never began
// (CauseEpochNeverBegan's case). Whether it is depends on how long no
// append came (probeDue, tokenStuck).
func (nd *Node) stuck() bool { return nd.stuckUnlessLater() && !nd.hearsLater() }

// stuckUnlessLater is stuck without its condition on a later epoch (which
// NextTick counts down apart).
func (nd *Node) stuckUnlessLater() bool {
	return nd.vc == nil && !nd.notMember && !nd.Removed() && nd.p.InHistory(nd.id) &&
		!(nd.p.Epoch > 0 && nd.p.Append == nd.p.EpochStart)
}

// probeInterval is the time between probe rounds after k of them (and
// the window in which their answers count for tokenStuck): 1, 2, 4, then
// 8 token timeouts.
func (nd *Node) probeInterval(k int) int { return nd.cfg.TokenTimeout << min(k, 3) }

// tokenStuck reports whether this host should lead a view change because
// the token cannot move (CauseTokenStuck): stuck for stuckAfter; its
// probes went out twice at least and did not start a fetch (an answer with
// the frame it lacked, or of a later epoch, does); no view change's message
// came for a view-change timeout (one under way elsewhere decides the
// epoch); and a majority of the roster (itself included) answered its
// fetches within the last probe interval. Without these a view change
// could not install (a minority, or a host cut off one way) or broke into
// one about to: the
// rule without them, in one 5-minute lab chaos run, fired right after
// installs that had not reached the host yet, halted the hosts that
// promised, and set off duels of promise timeouts (view changes 666 ->
// 2,032, heal p50 40 -> 78 ms).
func (nd *Node) tokenStuck() bool {
	return nd.stuck() && nd.idle >= nd.stuckAfter() && nd.probes >= 2 && !nd.fetching &&
		(nd.vcHeardAt == 0 || nd.clock-nd.vcHeardAt > uint64(nd.cfg.ViewChangeTimeout)) &&
		nd.answeredMajority(uint64(nd.probeInterval(nd.probes)))
}

// probeDue reports whether this host, stuck (it may not send), asks every
// other member for its log from its append pointer now (probe): from the
// tick its takeover would have been due, then after 1, 2, 4 and from then
// on every 8 token timeouts (a minority probes all through a partition:
// every token timeout was 400 fetches a second from each host). The holder
// may lack the frame that makes it the holder (its sender died before it
// retransmitted it), and a host in an older epoch hears nothing of the
// later one while no one sends: the answers bring the frame, the later
// epoch to the host behind (a fetch of a later epoch makes it catch up),
// and tokenStuck's evidence that a majority is there.
func (nd *Node) probeDue(holder uint8) bool {
	if !nd.stuck() || nd.fetching || holder == nd.id {
		return false
	}
	return nd.idle >= nd.nextProbe(holder)
}

// nextProbe is the idle count at which the next probe round is due.
func (nd *Node) nextProbe(holder uint8) int {
	if nd.probes == 0 {
		return nd.takeoverAfter(nd.rank(holder))
	}
	return nd.probeAt
}

// probe sends a fetch from the append pointer to every other member.
func (nd *Node) probe() {
	nd.probeAt = nd.idle + nd.probeInterval(nd.probes)
	nd.probes++
	for _, u := range nd.ms.roster {
		if u != nd.uid {
			nd.rd.Messages = append(nd.rd.Messages, Message{Type: MsgFetch, From: nd.uid, To: u, Epoch: nd.p.Epoch, Lo: nd.p.Append})
		}
	}
}

// answeredMajority reports whether, within the last within ticks, enough
// other members answered a fetch of this host's (its probes, or any) to
// make a majority of the roster with itself. A frame or a message heard
// proves less: a host cut off one way hears the rack, and at a heal the
// rack's first frames came before the recovery they start (the rule
// counted them at first, and fired at heals, in duels).
func (nd *Node) answeredMajority(within uint64) bool {
	heard := 1
	for _, u := range nd.ms.roster {
		if u != nd.uid && nd.answeredAt[u] > 0 && nd.clock-nd.answeredAt[u] <= within {
			heard++
		}
	}
	return 2*heard > len(nd.ms.roster)
}

// takeoverAfter is how many ticks without an append the host at rank
// after the holder waits before it takes the token over: the holder's
// back-off, then the token timeout in force (the failure detector's,
// detector.go), then its stagger per rank, and in an epoch's first
// rotation one more TokenTimeout (installAllowance). The back-off
// is the log's, without a wake's hurry: a holder that missed the wake
// still passes within it.
func (nd *Node) takeoverAfter(rank int) int {
	return nd.backoff() - nd.cfg.PassDelay + nd.tokenTimeout() + (rank-1)*nd.takeoverStagger() + nd.installAllowance()
}

// installAllowance is the extra wait of a takeover in an epoch's first
// rotation (its first n frames): TokenTimeout. Each of those senders
// first received the install over the OOB network and wrote it to its
// disk, and this host counts from its own install, which may have come
// first (the initiator's does): a token timeout measures one hop, not an
// OOB message and a disk write more. On the lab rack, 81 of the 210
// takeovers of a run with two kills and no other fault came within 40 ms
// of an install or of an epoch's first frame, each a fork and another
// view change (docs/recovery.md, "False takeovers").
func (nd *Node) installAllowance() int {
	if nd.p.Epoch == 0 || nd.p.Append < nd.p.EpochStart || nd.p.Append-nd.p.EpochStart >= uint64(nd.n) {
		return 0
	}
	return nd.cfg.TokenTimeout
}

// rank is this host's place in the takeover order after holder: live hosts
// first, in token order, then skipped ones.
func (nd *Node) rank(holder uint8) int { return nd.rankCounting(holder, nil) }

// rankCounting is rank with only the hosts ranked before this one for
// which counts holds counted (nil: all of them).
func (nd *Node) rankCounting(holder uint8, counts func(pos uint8) bool) int {
	r := 0
	for pass := 0; pass < 2; pass++ {
		for i := 1; i < nd.n; i++ {
			y := uint8((int(holder) + i) % nd.n)
			if nd.skipped[y] != (pass == 1) {
				continue
			}
			if y == nd.id {
				return r + 1
			}
			if counts == nil || counts(y) {
				r++
			}
		}
	}
	return r
}

// Clone returns an independent copy of nd, for model checkers that explore
// many futures of one state. Entry payloads are shared: they are never
// written after they are appended.
func (nd *Node) Clone() *Node {
	c := *nd
	c.arena = arena{}
	c.log = slices.Clone(nd.log)
	c.pending = slices.Clone(nd.pending[nd.pendHead:])
	c.pendHead = 0
	c.held = maps.Clone(nd.held)
	c.memberHeld = maps.Clone(nd.memberHeld)
	c.archRoster = slices.Clone(nd.archRoster)
	c.orphans = maps.Clone(nd.orphans)
	c.floorFrom = slices.Clone(nd.floorFrom)         // appended to in place (pastFloor)
	c.transfer.slow = slices.Clone(nd.transfer.slow) // appended to, deleted from in place
	if nd.voided != nil {
		v := *nd.voided
		c.voided = &v
	}
	if nd.catchup != nil {
		cu := *nd.catchup
		cu.entries = slices.Clone(cu.entries)
		cu.sent, cu.peers, cu.ahead = slices.Clone(cu.sent), slices.Clone(cu.peers), maps.Clone(cu.ahead) // appended to, deleted from in place
		c.catchup = &cu
	}
	c.keys = nd.keys.clone()
	if nd.vc != nil {
		vc := *nd.vc
		vc.promises = maps.Clone(nd.vc.promises)
		vc.asked = slices.Clone(nd.vc.asked) // appended to in place
		c.vc = &vc
	}
	c.rd = Ready{
		Truncate: nd.rd.Truncate, HasTruncate: nd.rd.HasTruncate,
		Appended: slices.Clone(nd.rd.Appended), Frames: slices.Clone(nd.rd.Frames),
		Messages: slices.Clone(nd.rd.Messages), Agreed: slices.Clone(nd.rd.Agreed),
		Dropped: slices.Clone(nd.rd.Dropped), Rejects: slices.Clone(nd.rd.Rejects),
		Events: slices.Clone(nd.rd.Events),
	}
	return &c
}

// Delivered returns how many entries have been handed to Ready.Agreed.
func (nd *Node) Delivered() uint64 { return nd.delivered }

// catchUpPeer returns the member to fetch a later epoch from, after a frame
// of that epoch from position pos: the host at pos for the first tries (the
// frame's sender), then the other members in turn. Positions are read in
// the epoch's roster once a catch-up to it learnt it from an answer, else
// in this host's (after a roster change, positions of a later epoch may
// name other hosts there, or this one).
func (nd *Node) catchUpPeer(pos uint8, epoch uint32) uint8 {
	roster := nd.ms.roster
	if c := nd.catchup; c != nil && c.epoch == epoch && c.roster != nil {
		roster = c.roster
	}
	nd.futureTries++
	k := max(nd.futureTries-3, 0)
	n := len(roster)
	for i := 0; i < n; i++ {
		if u := roster[(int(pos)+k+i)%n]; u != nd.uid {
			return u
		}
	}
	return nd.uidOf(pos)
}
