// Package sim is a deterministic simulator for the Exo state machine: n
// hosts on a virtual broadcast segment and OOB network that drops,
// duplicates, reorders, delays, partitions (two-way and one-way) and heals,
// hosts that crash and restart with or without their durable state, clients
// that publish, and a checker for the properties of PROTOCOL.md section 8.
//
// Everything is driven by one seeded PCG generator: a seed fully determines
// a run, so a failing seed is a reproducible regression test.
package sim

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/exo/token"
)

// Options configures one simulated run.
type Options struct {
	Hosts int
	Seed  uint64
	// Ticks is the length of the faulty phase; Quiet the fault-free phase
	// after it, in which liveness is checked.
	Ticks, Quiet int
	// StepsPerTick is how many network steps (one hop each) make one tick.
	StepsPerTick int

	Drop, Dup float64 // per-frame/message probabilities
	MaxDelay  int     // extra delay in steps, uniform 0..MaxDelay (reordering)
	// OOBEntriesPerStep is the OOB network's bandwidth, in log entries a
	// step on each link (0: unlimited). A message of k entries occupies
	// its link for ceil(k/OOBEntriesPerStep) steps, and messages on one
	// link queue behind it, as on the daemon's TCP connections: an
	// install or a promise that carries thousands of entries takes longer
	// than a view-change timeout there.
	OOBEntriesPerStep int
	Partitions        bool // random two-way and one-way partitions and heals
	// FaultTicks is how long, on average, a partition or a crash lasts
	// (0: 50 ticks, the default's rates: a new partition 1% a tick, a
	// heal 2%, a crash 1% and 5-64 ticks down). The lab's nemesis holds
	// its faults for 0.7 s on average, 70 token timeouts of the daemon's:
	// faults as long as that (with the daemon's timing, LabTiming) find
	// what a fault gone within a few token timeouts cannot.
	FaultTicks int
	// LabTiming runs every host with the daemon's timing
	// (exo.Config.WithLabTiming) instead of the core's defaults, whose
	// view-change timeout is 2.5 token timeouts where the daemon's is 20.
	LabTiming bool
	Crashes   bool // random crashes and restarts
	// DiskTicks models the daemon's disk write (the fsync it waits on
	// before it sends anything of a Ready that wrote entries, fetches
	// but): in the faulty phase such a Ready holds the host's output, and
	// all of its output after it, for 0..DiskTicks ticks (uniform). 0: the disk
	// takes no time. A token timeout measures one hop; an epoch's first
	// senders each write the install first (exo's installAllowance).
	DiskTicks int
	// Amnesia is the probability that a restart loses the durable state too
	// (a host whose disk died). With it, agreement and validity are still
	// checked, but liveness cannot be promised: a view change that would
	// need the lost knowledge waits (see docs/protocol.md), and such a stall
	// is counted in Stats.Stalled instead of being a violation.
	Amnesia float64
	// KeepEntries, when positive, compacts each host's log (memory and
	// disk) as the daemon's keep_entries does: once the agreement pointer
	// is 2*KeepEntries past the log's base, to KeepEntries behind it. A
	// host that lost its state then rejoins by state transfer from a
	// compacted log (transfer.go).
	KeepEntries int
	// Retain, with KeepEntries, keeps what compaction cuts from a host's
	// log on its simulated disk, as the daemon's retention policy does
	// (retain.entries, wal.Log.Retain): the archive starts at the first
	// former log base that leaves at most Retain agreed entries behind the
	// agreement pointer, and the host answers fetches from below its
	// log's base out of it (exo.Node.SetArchive). A host that lost its
	// disk lost its archive too.
	Retain int
	// AcceptLoss plays the operator's way out of a stall on an ambiguous
	// fork (exo recover --accept-loss, Node.AcceptLoss): when the quiet
	// phase ends with a view change waiting on one, its initiator accepts
	// the loss and the rack gets another quiet phase. The checker then
	// allows an entry delivered before to be replaced only at a position
	// the command reported, and only if every host that delivered it lost
	// its state since.
	AcceptLoss bool
	ProposeP   float64 // per-tick probability that a client publishes at a host
	// Forge is the per-frame probability that an attacker on the segment
	// also delivers a forged copy of a frame: its tag changed, or a field,
	// the history or the payload changed with the tag kept. Every forged
	// copy must be rejected as BAD_TAG (a violation otherwise). 0 draws
	// nothing, so runs without it are those of a build without it.
	Forge float64
	// RosterChanges is the per-tick probability that a member proposes a
	// membership change (docs/protocol.md section 7): remove a member, add
	// a non-member back, or add the spare host (member id Hosts, which
	// follows the log as a non-member from the start). The roster stays
	// within Hosts-1..Hosts+1; a replace is a remove followed by an add. 0
	// draws nothing and adds no spare host.
	RosterChanges float64
	// KeyRotations is the per-tick probability that the operator starts a
	// key rotation when none runs (docs/security.md section 5): from then
	// on every live host stages the next rack key at a random tick (10% a
	// tick), a restarted host stages it again if it had, and in the quiet
	// phase every host that has not staged it does. The run must end with
	// every member sending under the new key. Config.KeyGraceTicks
	// defaults to 40 ticks here. 0 draws nothing.
	KeyRotations float64
	// Token puts a fast path that sends (exo.Engine's rule, token.Mem) in
	// front of every host's core, driven by the control plane the daemon
	// runs (token.Driver, docs/token.md): a frame reaches the fast path at
	// once, which may answer it with the host's next frame at once; the
	// core steps the fast path's records later (TokenLag), halts it before
	// it acts on its own and arms it again. A crash loses the records not
	// read yet, and a restart after the fast path was armed in the log's
	// epoch is fenced. 0 hosts without it.
	Token bool
	// TokenLag is how many steps the control plane may take to read its
	// fast path's records after a frame (uniform 0..TokenLag; now and then
	// up to 4 ticks more, a daemon that did not run). 0: 4 steps.
	TokenLag int

	// Pauses is the per-tick probability that a running host pauses: a
	// process its machine does not schedule (on the lab rack, 5 daemons
	// and their load on 2 vCPUs, a hop stalls for 5-45 ms about every
	// half second: the token timeout's false takeovers). For 1..PauseTicks
	// ticks it neither ticks nor steps anything; what reaches it waits, in
	// order, until it runs again, and it loses nothing. 0 draws nothing.
	Pauses float64
	// PauseTicks is the longest pause in ticks (0: twice the token
	// timeout).
	PauseTicks int

	// Config is the protocol configuration (ID and Hosts are set per host).
	Config exo.Config
}

// DefaultOptions returns options with every fault switched on.
func DefaultOptions(hosts int, seed uint64) Options {
	// A small window and hold buffer, so that hosts cut off for a while
	// fall further behind than they can hold and must catch up by fetching;
	// fetch responses as small against the simulated logs (hundreds of
	// entries) as the daemon's 1,024 entries are against a real rack's, so
	// that catching up takes many batches here too; and an OOB network as
	// slow against the view-change timeout as the lab rack's, where a
	// message carrying a host's gap of thousands of entries takes about a
	// view-change timeout (here: 320 entries in the 320 steps of one).
	// The token timeout is fixed, as the daemon's by default; exo sim
	// --token-timeout-min makes it adapt (detector.go).
	// Odd seeds size fetch answers by bytes as well, as the daemon does
	// (fetch_bytes): 4 entries, and more while they fit in 300 bytes.
	cfg := exo.Config{SeqWindow: 24, MaxHeld: 8, MaxFetchEntries: 4, GoneTicks: 1}
	if seed%2 == 1 {
		cfg.FetchBytes = 300
	}
	return Options{Hosts: hosts, Seed: seed, Ticks: 400, Quiet: 300, StepsPerTick: 8,
		Drop: 0.02, Dup: 0.02, MaxDelay: 6, Partitions: true, Crashes: true, OOBEntriesPerStep: 1,
		ProposeP: 0.3, Config: cfg}
}

// NoFaults returns options with every fault switched off.
func NoFaults(hosts int, seed uint64) Options {
	o := DefaultOptions(hosts, seed)
	o.Drop, o.Dup, o.MaxDelay, o.Partitions, o.Crashes = 0, 0, 0, false, false
	return o
}

type delivery struct {
	at     int64
	order  uint64
	to     int
	from   int
	frame  *exo.Frame
	msg    *exo.Message
	forged bool // a forged copy (Options.Forge): must be BAD_TAG
}

type queue []*delivery

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].order < q[j].order
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*delivery)) }
func (q *queue) Pop() any {
	old := *q
	d := old[len(old)-1]
	*q = old[:len(old)-1]
	return d
}

type host struct {
	node    *exo.Node
	up      bool
	durable exo.HardState // written by every Ready
	// synced is what the last fsync made durable: the durable state as of
	// the last Ready that sent a frame or a message other than a fetch,
	// changed the meta, or came lazySyncTicks after the one before (the
	// daemon's mustCommit); a crash loses what was written after it.
	synced   exo.HardState
	syncedAt int64
	// archive is the simulated disk's part below the log's base
	// (Options.Retain): entries from bases[0].at on; bases are the former
	// log bases with the roster at each, where the archive may start.
	archive []exo.Entry
	bases   []archBase
	downFor int
	// pausedFor is how many more ticks the host is paused (Options.Pauses);
	// deafFor how many ticks after that what reaches it still waits.
	pausedFor, deafFor int

	inc     int // incarnation, for the checker's delivery streams
	removed bool
	switch_ uint64 // the last configuration switch seq reported to the checker
	keyIdx  int    // index of the rack key it sends under (Options.KeyRotations)
	staged  bool   // it staged key keyIdx+1
	// silent is how many more of its ticks must do nothing, as its last
	// NextTick said (0 after any other input): checked on every tick.
	silent int
	// diskUntil is the step until which the host's output waits on its
	// disk (Options.DiskTicks).
	diskUntil int64
	// Options.Token: the fast path, its control plane, and the step at
	// which the control plane reads the fast path's records (-1: none
	// due).
	fp     *token.Mem
	drv    *token.Driver
	readAt int64
	keepFP bool // the last crash was the daemon's alone: fp outlived it
	// asked is the roster change an operator proposed at this host and
	// waits for, as `exo roster` does, until the host's status shows it in
	// effect (nil: none); askedAt is the tick it was proposed.
	asked     *exo.ConfigChange
	askedAt   int
	askedFrom uint64 // the seq its roster applied from when it was asked
}

// Sim is one simulated rack.
type Sim struct {
	// brokenArchive (tests only) fills archive answers with the content of
	// the entry after each, as a reader off by one would: the checker must
	// catch it.
	brokenArchive bool
	// brokenSync (tests only) sends frames before the entries received
	// are fsynced, as a daemon whose lazy commit forgot them would: a
	// crash then loses entries this host vouched for, and the checker
	// must catch it.
	brokenSync bool
	opt        Options
	rng        *rand.Rand
	hosts      []*host
	cut        [][]bool  // cut[a][b]: nothing from a reaches b
	busy       [][]int64 // busy[a][b]: the OOB link from a to b carries a message until this step
	q          queue
	now        int64
	order      uint64
	tick       int
	quiet      bool
	// amnesiac is set once any host restarted without its state; fenced
	// once any restarted fenced (Options.Token).
	amnesiac, fenced bool
	// The majority stall under way (Stats.MajorityStall): its length, and
	// the furthest agreement pointer of the connected majority when it
	// began.
	stallRun    int
	stallAgreed uint64
	// stallSet is the connected majority (a bit per host, 0: none);
	// reachDirty says the cuts or the hosts up changed since it was found.
	stallSet   int
	reachDirty bool

	keyGen int // index of the newest rack key (0: Config.TagKey)

	nextID uint64
	chk    *Checker
	Stats  Stats
	trace  func(string)
}

// Stats counts what happened in a run.
type Stats struct {
	Frames, Messages, Delivered, Dropped uint64
	Proposed, Agreed                     uint64
	ViewChanges, Takeovers, Crashes      uint64
	Partitions                           uint64
	Forged                               uint64 // forged copies sent (Options.Forge)
	RosterChanges                        uint64 // configuration switches seen (max over hosts)
	KeyRotations                         uint64 // rotations started (Options.KeyRotations)
	KeySwitches                          uint64 // hosts that switched to a new key (summed)
	GenuineBadTag                        uint64 // frames not forged that got BAD_TAG at a member (a violation with KeyRotations)
	Rejects                              [exo.NumReasons]uint64
	MaxAgreed                            uint64

	// Pauses counts the hosts paused (Options.Pauses); FalseTakeovers the
	// takeovers that passed over a host while it ran (EventSkippedAlive,
	// reported by that host).
	Pauses, FalseTakeovers uint64

	// ViewChangeCauses counts the view changes started, by cause
	// (exo.Cause): which waits set them off.
	ViewChangeCauses [exo.NumCauses]uint64

	// MajorityStall is the longest run of ticks in the faulty phase in
	// which the up hosts that reach each other both ways made a majority
	// of the rack and none of them advanced its agreement pointer (the
	// lab's view-change hold, where the rack could have moved);
	// MajorityStallAt the tick it ended (or the faulty phase did).
	MajorityStall, MajorityStallAt int
	// Stalled is set when a run with amnesiac restarts did not converge:
	// allowed (see Options.Amnesia), but reported.
	Stalled bool
	// StalledAmbiguous: a view change was waiting on a fork that only the
	// lost knowledge could decide.
	StalledAmbiguous bool
	Steps            int64
	// Ticks counts the hosts' ticks; SilentTicks those after which
	// NextTick promised at least one silent tick (a daemon sleeps through
	// them).
	Ticks, SilentTicks uint64
	// Token (Options.Token): the control planes' counters, summed, and
	// the restarts that came back fenced. StalledFenced: a run that did
	// not converge with fenced hosts (allowed, as after amnesia: safety
	// over liveness; docs/token.md section 5).
	Token          token.Stats
	FencedRestarts uint64
	Compactions    uint64 // log compactions (Options.KeepEntries)
	UnsyncedLost   uint64 // log entries written and not fsynced that crashes lost (host.synced)
	GoneNotices    uint64 // MsgGone sent: at crashes of a daemon alone, and wrong ones at heals
	ArchiveAnswers uint64 // fetch answers filled from an archive (Options.Retain)
	ArchiveMisses  uint64 // fetch answers dropped: the archive no longer held their start
	PastFloor      uint64 // hosts that fell behind every member's log and became amnesiac
	AcceptedLosses uint64 // operator overrides of a stall on an ambiguous fork (Options.AcceptLoss)
	LostEntries    uint64 // agreed entries replaced after an override (each checked against its doubt)
	FloorJumps     uint64 // state transfers that started past the host's log
	StalledFenced  bool
	// Recovered counts the restarts that took a surviving fast path over
	// (Driver.Recover); Unfenced those of them that lifted the fence.
	Recovered, Unfenced uint64
}

// New builds a simulated rack.
func New(opt Options) (*Sim, error) {
	if opt.Hosts < 1 || opt.Hosts > exo.MaxHosts {
		return nil, fmt.Errorf("sim: hosts %d outside 1..%d", opt.Hosts, exo.MaxHosts)
	}
	if opt.StepsPerTick < 1 {
		opt.StepsPerTick = 1
	}
	s := &Sim{opt: opt, rng: rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15)), reachDirty: true}
	s.chk = NewChecker(opt.Hosts)
	total := opt.Hosts
	if opt.RosterChanges > 0 {
		total++ // the spare host
	}
	s.cut = make([][]bool, total)
	s.busy = make([][]int64, total)
	for i := range s.cut {
		s.cut[i] = make([]bool, total)
		s.busy[i] = make([]int64, total)
	}
	for i := 0; i < total; i++ {
		var nd *exo.Node
		var err error
		var hs exo.HardState
		if i < opt.Hosts {
			nd, err = exo.NewNode(s.config(i))
		} else {
			// A joiner with a log: it follows the rack as a non-member.
			hs = exo.HardState{Roster: exo.IdentityRoster(opt.Hosts)}
			nd, err = exo.RestartNode(s.config(i), hs)
		}
		if err != nil {
			return nil, fmt.Errorf("sim: host %d: %w", i, err)
		}
		s.hosts = append(s.hosts, &host{node: nd, up: true, durable: hs, synced: hs, readAt: -1})
		if opt.Token {
			s.attach(i, false)
		}
	}
	return s, nil
}

// attach puts a fresh, halted fast path and its control plane in front of
// host i's core (Options.Token), and arms it if it may run.
//
// A fast path that survived a killed daemon (pinned, kept) is taken over
// instead: its records not released are stepped again (Driver.Recover).
func (s *Sim) attach(i int, kept bool) {
	h := s.hosts[i]
	if !kept {
		h.fp = token.NewMem(h.node.Keys())
	}
	h.readAt = -1
	h.drv = token.New(h.node, h.fp, token.Config{
		MaxBatch: h.node.Config().MaxBatchBytes,
		// The durable meta now (the fence, before the first arming of an
		// epoch); the log follows with the next Ready, as in the daemon.
		Persist: func() error {
			log := h.durable.Log
			h.durable = h.node.HardStateMeta()
			h.durable.Log = log
			h.sync(s.now) // the daemon's token mode commits in full
			return nil
		},
		Ready: func() error { s.ready(i); return nil },
	})
	if kept {
		fenced := h.node.Fenced()
		ok, err := h.drv.Recover()
		if err != nil {
			s.chk.violation("t=%d host %d: token recovery: %v", s.tick, i, err)
		}
		s.Stats.Recovered++
		if fenced && ok {
			s.Stats.Unfenced++
		}
		s.tracef("host %d takes its fast path over (recovered %v, fenced %v)", i, ok, h.node.Fenced())
	}
	s.sync(i)
}

// sync runs host i's control plane after its core moved: it carries out
// the core's Ready, then halts or arms the fast path (Driver.Sync).
func (s *Sim) sync(i int) {
	h := s.hosts[i]
	s.ready(i)
	if h.drv == nil || !h.up {
		return
	}
	if _, err := h.drv.Sync(); err != nil {
		s.chk.violation("t=%d host %d: token: %v", s.tick, i, err)
	}
	s.ready(i)
	// The records stepped are logged now: released, most of the time
	// at once (a daemon killed between the two reads them again).
	if s.rng.Float64() < 0.7 {
		if err := h.drv.Release(); err != nil {
			s.chk.violation("t=%d host %d: token release: %v", s.tick, i, err)
		}
	}
}

// quiesce halts host i's fast path and steps its records before its core
// acts on its own (a tick that may do something, an OOB message, a
// proposal to the core).
func (s *Sim) quiesce(i int) {
	h := s.hosts[i]
	if h.drv == nil {
		return
	}
	if err := h.drv.Quiesce(); err != nil {
		s.chk.violation("t=%d host %d: token: %v", s.tick, i, err)
	}
	h.readAt = -1
	h.silent = 0
}

// sleepsThrough reports whether host h's control plane sleeps through the
// record that just came (the daemon's urgent-only wait: nobody on the host
// waits for what the rack agrees): it reads it with the next one it wakes
// for, at a deadline of its core (a quiesce), or with a proposal. Drawn
// per record, half the time while no proposal of the host waits; never
// once records pile up (the daemon is woken before its ring fills).
func (s *Sim) sleepsThrough(h *host) bool {
	return h.drv.Pending() == 0 && h.fp.Waiting() < maxSleptRecords && s.rng.Float64() < 0.5
}

// maxSleptRecords bounds the records a control plane that sleeps through
// agreements leaves unread in the simulator (the XDP program wakes it when
// its ring is half full).
const maxSleptRecords = 256

// lag is how many steps host i's control plane takes to read a record.
func (s *Sim) lag() int64 {
	l := s.opt.TokenLag
	if l <= 0 {
		l = 4
	}
	d := int64(s.rng.IntN(l + 1))
	if !s.quiet && s.rng.Float64() < 0.02 {
		d += int64(s.rng.IntN(4*s.opt.StepsPerTick + 1))
	}
	return d
}

// Trace sets a function that receives a line per notable event.
func (s *Sim) Trace(fn func(string)) { s.trace = fn }

func (s *Sim) tracef(format string, args ...any) {
	if s.trace != nil {
		s.trace(fmt.Sprintf("t=%d ", s.tick) + fmt.Sprintf(format, args...))
	}
}

func (s *Sim) config(i int) exo.Config {
	c := s.opt.Config
	if s.opt.LabTiming {
		c = c.WithLabTiming()
	}
	c.ID = uint8(i)
	c.Hosts = max(s.opt.Hosts, i+1)
	if s.opt.KeyRotations > 0 {
		if c.KeyGraceTicks == 0 {
			c.KeyGraceTicks = 40
		}
		if s.hosts != nil && i < len(s.hosts) {
			// A restart comes back under the key its configuration
			// names (restart sets keyIdx; a staged key is staged again).
			k := s.hosts[i].keyIdx
			c.TagKey, c.KeyPhase = s.key(k), uint8(k%2)
		}
	}
	return c
}

// rotating reports whether a rotation runs at some member but except: a
// member has not switched to the newest key, or still holds the old one.
func (s *Sim) rotating(except int) bool {
	if s.keyGen == 0 {
		return false
	}
	for i, h := range s.hosts {
		if i == except || h.node.Removed() {
			continue // a host outside the roster is not waited for
		}
		if h.keyIdx != s.keyGen || h.staged {
			return true
		}
		if h.up && h.node.KeyStatus().OldValid {
			return true
		}
	}
	return false
}

// key returns rack key k: Config.TagKey for 0, then keys derived from the
// seed.
func (s *Sim) key(k int) [exo.TagKeyLen]byte {
	if k == 0 {
		return s.opt.Config.TagKey
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(k))
	var key [exo.TagKeyLen]byte
	binary.LittleEndian.PutUint64(key[:], exo.SipHash24(s.opt.Config.TagKey, b[:])^s.opt.Seed)
	binary.LittleEndian.PutUint64(key[8:], exo.SipHash24(s.opt.Config.TagKey, append(b[:], 1)))
	return key
}

// keys moves key rotations along: starts one when none runs, and has
// hosts stage the new key.
func (s *Sim) keys(all bool) {
	busy := false
	for _, h := range s.hosts {
		if h.keyIdx < s.keyGen || h.staged {
			busy = true
		}
	}
	if !busy && !all && s.rng.Float64() < s.opt.KeyRotations {
		s.keyGen++
		s.Stats.KeyRotations++
		s.tracef("key rotation to key %d starts", s.keyGen)
		busy = true
	}
	if !busy {
		return
	}
	for i, h := range s.hosts {
		// Hosts outside the roster (spares, removed hosts) get the new key
		// at once, as an operator pushes it to every configured host: one
		// may be added while the rotation runs.
		if h.up && !h.staged && h.keyIdx == s.keyGen-1 && (all || h.node.Removed() || s.rng.Float64() < 0.1) {
			s.stage(i)
		}
	}
}

// stage has host i stage the rack's newest key.
func (s *Sim) stage(i int) {
	h := s.hosts[i]
	h.silent = 0
	s.quiesce(i)
	defer s.sync(i)
	if _, err := h.node.StageKey(s.key(s.keyGen)); err != nil {
		if !errors.Is(err, exo.ErrKeyInFlight) {
			s.chk.violation("host %d: StageKey: %v", i, err)
		}
		return // the last rotation's grace window still runs: later
	}
	h.staged = true
	s.tracef("host %d stages key %d", i, s.keyGen)
	s.ready(i)
}

// Checker returns the run's checker.
func (s *Sim) Checker() *Checker { return s.chk }

// Run runs the faulty phase and the quiet phase and returns the checker's
// verdict: nil when no property was violated.
func (s *Sim) Run() error {
	for s.tick = 0; s.tick < s.opt.Ticks; s.tick++ {
		s.faults()
		s.clients()
		s.step()
		s.operators()
		s.watchStall()
	}
	s.endStall()
	s.beginQuiet()
	s.quietPhase()
	for k := 0; s.opt.AcceptLoss && k < 4 && !s.settled() && s.acceptLoss(); k++ {
		s.quietPhase()
	}
	for _, h := range s.hosts {
		s.collect(h)
	}
	members := s.members()
	for i, h := range s.hosts {
		// Every host is up and reachable in the quiet phase, and members
		// answer fetches while halted: a member's state transfer always
		// ends (in its view change, which may then wait on a fork). (A
		// host the rack removed may not know it yet, and one its log removed
		// follows the log: neither leads a view change.)
		if h.up && h.node.Transferring() && !h.node.Removed() && slices.Contains(members, h.node) {
			s.chk.violation("host %d: still in its state transfer at the end of the quiet phase (log %d..%d)", i, h.node.LogBase(), h.node.Pointers().Append)
		}
	}
	if s.fenced && !s.amnesiac && !s.settled() {
		s.Stats.StalledFenced = true
		s.chk.QuietTicks = s.tick - s.opt.Ticks
	} else if s.amnesiac && !s.settled() {
		s.Stats.Stalled = true
		for _, h := range s.hosts {
			s.Stats.StalledAmbiguous = s.Stats.StalledAmbiguous || h.node.ViewChangeAmbiguous()
		}
		s.chk.QuietTicks = s.tick - s.opt.Ticks
	} else {
		s.chk.Final(s.members(), s.tick-s.opt.Ticks, s.opt.Quiet)
		for i, h := range s.hosts {
			if h.asked != nil {
				s.chk.violation("host %d: the roster change %s proposed at tick %d stayed in flight (roster %v, change in flight %v): the operator's `exo roster` waits for ever",
					i, *h.asked, h.askedAt, h.node.Roster(), h.node.ChangeInFlight())
			}
		}
		if s.opt.KeyRotations > 0 && !s.keysDone() {
			for i, h := range s.hosts {
				ks := h.node.KeyStatus()
				s.tracef("host %d key %d staged %v phase %d waiting %v grace %d", i, h.keyIdx, ks.Staged, ks.SendPhase, ks.Waiting, ks.GraceTicks)
			}
			s.chk.violation("key rotation to key %d did not complete in the quiet phase", s.keyGen)
		}
	}
	s.chk.FinalRoster()
	s.Stats.LostEntries = uint64(s.chk.Lost)
	s.Stats.RosterChanges = uint64(s.chk.Switches)
	s.Stats.Steps = s.now
	return s.chk.Err()
}

// members returns the nodes of the current roster: the one of the host
// furthest ahead (newest epoch, then longest log) that is a member. Without
// roster changes, every node.
func (s *Sim) members() []*exo.Node {
	if s.opt.RosterChanges == 0 {
		return s.nodes()
	}
	var ref *exo.Node
	for _, h := range s.hosts {
		nd := h.node
		if nd.Removed() || nd.Amnesiac() {
			continue
		}
		if ref == nil || nd.Epoch() > ref.Epoch() || (nd.Epoch() == ref.Epoch() && nd.Pointers().Append > ref.Pointers().Append) {
			ref = nd
		}
	}
	if ref == nil {
		return s.nodes()
	}
	var out []*exo.Node
	for _, u := range ref.Roster() {
		if int(u) < len(s.hosts) {
			out = append(out, s.hosts[u].node)
		}
	}
	return out
}

func (s *Sim) nodes() []*exo.Node {
	var out []*exo.Node
	for _, h := range s.hosts {
		out = append(out, h.node)
	}
	return out
}

// step runs one tick: its network steps, then a Tick at every live host.
func (s *Sim) step() {
	for i := 0; i < s.opt.StepsPerTick; i++ {
		s.now++
		// Everything due in this step reaches its host before any host's
		// Ready is carried out, as in the daemon, which steps a batch of
		// frames or messages and then handles one Ready.
		touched := make([]bool, len(s.hosts))
		for len(s.q) > 0 && s.q[0].at <= s.now {
			d := heap.Pop(&s.q).(*delivery)
			if h := s.hosts[d.to]; h.up && (h.pausedFor > 0 || h.deafFor > 0) {
				// It waits in its socket until the host runs again
				// (its order kept: the heap orders by at, then order).
				d.at = s.now + 1
				heap.Push(&s.q, d)
				continue
			}
			if s.deliver(d) {
				touched[d.to] = true
			}
		}
		for h, t := range touched {
			if t {
				s.sync(h)
			}
		}
		for i, h := range s.hosts {
			if h.up && h.pausedFor == 0 && h.deafFor == 0 && h.readAt >= 0 && h.readAt <= s.now {
				// The control plane wakes and reads its fast path's
				// records (in a batch, as the daemon does).
				h.readAt = -1
				h.silent = 0
				if _, err := h.fp.Records(h.drv.Step); err != nil {
					s.chk.violation("host %d: token records: %v", i, err)
				}
				s.sync(i)
			}
		}
	}
	for i, h := range s.hosts {
		if h.up && h.pausedFor > 0 {
			h.pausedFor--
			continue
		}
		if h.deafFor > 0 {
			h.deafFor--
		}
		if h.up {
			if h.drv != nil && h.node.NextTick() <= 1 {
				// The core's deadline is due (the daemon's frame loop
				// fires it then): it may act on its own.
				s.quiesce(i)
			}
			h.node.Tick()
			if h.silent > 0 {
				h.silent--
				if rd := h.node.Ready(); h.node.HasReady() && (len(rd.Frames) > 0 || len(rd.Messages) > 0 || len(rd.Events) > 0 ||
					len(rd.Appended) > 0 || rd.HasTruncate || len(rd.Agreed) > 0 || len(rd.Dropped) > 0) {
					s.chk.violation("t=%d host %d: a tick that NextTick promised silent did something: %d frames, %d messages, events %v",
						s.tick, i, len(rd.Frames), len(rd.Messages), rd.Events)
				}
			}
			s.sync(i)
			if d := h.node.NextTick(); d != exo.NoTick {
				h.silent = d - 1
			} else {
				h.silent = 1 << 30
			}
			if h.silent > 0 {
				s.Stats.SilentTicks++
			}
			s.Stats.Ticks++
			if (s.opt.Retain > 0 || s.opt.Config.GoneTicks > 0) && s.tick%64 == i%64 {
				// What it serves, to the others, as the daemon announces
				// it every second (it informs only: MsgHeld; it clears
				// a wrong gone notice about this host).
				h.node.AnnounceHeld()
				s.sync(i)
			}
		}
	}
	for _, h := range s.hosts {
		if h.up {
			s.Stats.MaxAgreed = max(s.Stats.MaxAgreed, h.node.Pointers().Agreed)
		}
	}
}

func (s *Sim) deliver(d *delivery) bool {
	h := s.hosts[d.to]
	if !h.up {
		return false
	}
	if d.frame != nil && h.fp != nil {
		// The fast path answers at once; the core reads the record later.
		h.fp.Keys = h.node.Keys()
		sent, r := h.fp.Frame(d.frame)
		if d.forged && r != exo.ReasonBadTag {
			s.chk.violation("host %d: a forged frame (seq %d from %d) got %s at the fast path, want BAD_TAG", d.to, d.frame.Seq, d.frame.Sender, r)
		}
		if sent != nil {
			s.Stats.Frames++
			for b := range s.hosts {
				if b != d.to {
					s.send(d.to, b, sent, nil, 0)
				}
			}
		}
		if h.fp.Waiting() > 0 && h.readAt < 0 && (h.fp.Urgent() || !s.sleepsThrough(h)) {
			h.readAt = s.now + s.lag()
		}
		return false
	}
	h.silent = 0
	if d.frame != nil {
		r := h.node.StepFrame(d.frame)
		s.Stats.Rejects[r]++
		if d.forged && r != exo.ReasonBadTag {
			s.chk.violation("host %d: a forged frame (seq %d from %d) got %s, want BAD_TAG", d.to, d.frame.Seq, d.frame.Sender, r)
		}
		if !d.forged && r == exo.ReasonBadTag && !h.node.Removed() &&
			slices.Contains(s.hosts[d.from].node.Roster(), uint8(d.to)) && slices.Contains(h.node.Roster(), uint8(d.from)) {
			// A genuine frame between two hosts each in the other's
			// roster, under a key the receiver does not hold (any more):
			// the rotation rules must never let it happen. (A host a
			// membership change removes is not waited for: the rotation
			// may leave it behind.)
			s.Stats.GenuineBadTag++
			// Checked without membership changes. With them, a host added
			// back during a rotation may send under the old key for a few
			// frames after a member retired it (until it reads the
			// others' announcements); counted, and liveness is checked.
			if s.opt.KeyRotations > 0 && s.opt.RosterChanges == 0 {
				s.chk.violation("t=%d host %d: a genuine frame (seq %d epoch %d from host %d at position %d, key phase %d) got BAD_TAG",
					s.tick, d.to, d.frame.Seq, d.frame.Epoch, d.from, d.frame.Sender, exo.KeyPhaseOf(d.frame.Flags))
			}
		}
	} else {
		if !brokenToken {
			s.quiesce(d.to)
		}
		h.node.Step(*d.msg)
	}
	return true
}

// send schedules a frame or message from a to b through the faulty
// network, leaving a after wait steps (its disk: Options.DiskTicks).
func (s *Sim) send(a, b int, f *exo.Frame, m *exo.Message, wait int64) {
	if s.cut[a][b] {
		return
	}
	copies := 1
	if !s.quiet {
		if s.rng.Float64() < s.opt.Drop {
			return
		}
		if s.rng.Float64() < s.opt.Dup {
			copies = 2
		}
	}
	for c := 0; c < copies; c++ {
		delay := 1 + wait
		if s.opt.MaxDelay > 0 && !s.quiet {
			delay += int64(s.rng.IntN(s.opt.MaxDelay + 1))
		}
		if m != nil && s.opt.OOBEntriesPerStep > 0 {
			// The link carries one message after the other.
			tx := int64((len(m.Entries) + s.opt.OOBEntriesPerStep - 1) / s.opt.OOBEntriesPerStep)
			s.busy[a][b] = max(s.busy[a][b], s.now) + tx
			delay += s.busy[a][b] - s.now
		}
		s.order++
		heap.Push(&s.q, &delivery{at: s.now + delay, order: s.order, to: b, from: a, frame: f, msg: m})
	}
	if f != nil && s.opt.Forge > 0 && !s.quiet && s.rng.Float64() < s.opt.Forge {
		s.order++
		s.Stats.Forged++
		heap.Push(&s.q, &delivery{at: s.now + 1 + int64(s.rng.IntN(s.opt.MaxDelay+1)), order: s.order, to: b, from: a,
			frame: s.forge(f), forged: true})
	}
}

// forge returns a copy of f that an attacker without the key could send:
// one bit of the tag flipped, or one bit of the seq, the epoch, the sender,
// the flags, the history or the payload flipped with the tag kept.
func (s *Sim) forge(f *exo.Frame) *exo.Frame {
	g := *f
	g.History = append([]uint8(nil), f.History...)
	g.Payload = append([]byte(nil), f.Payload...)
	bit := uint(s.rng.IntN(64))
	switch k := s.rng.IntN(7); {
	case k == 1:
		g.Seq ^= 1 << bit
	case k == 2:
		g.Epoch ^= 1 << (bit % 32)
	case k == 3:
		g.Sender ^= 1 << (bit % 8)
	case k == 4:
		g.Flags ^= 1 << (bit % 16)
	case k == 5 && len(g.History) > 0:
		g.History[s.rng.IntN(len(g.History))] ^= 1 << (bit % 8)
	case k == 6 && len(g.Payload) > 0:
		g.Payload[s.rng.IntN(len(g.Payload))] ^= 1 << (bit % 8)
	default:
		g.Tag ^= 1 << bit
	}
	return &g
}

// ready carries out host i's Ready: persist, broadcast, send, deliver.
func (s *Sim) ready(i int) {
	h := s.hosts[i]
	nd := h.node
	if !nd.HasReady() {
		return
	}
	rd := nd.Ready()
	for _, e := range rd.Events {
		switch e.Kind {
		case exo.EventViewChange:
			s.Stats.ViewChanges++
			if int(e.Cause) < exo.NumCauses {
				s.Stats.ViewChangeCauses[e.Cause]++
			}
		case exo.EventTakeover:
			s.Stats.Takeovers++
		case exo.EventSkippedAlive:
			s.Stats.FalseTakeovers++
		case exo.EventSafety:
			s.chk.violation("host %d: safety event at seq %d (epoch %d)", i, e.Seq, e.Epoch)
		case exo.EventFloorJump:
			// Its delivered stream resumes at a member's log base: only
			// where retention really removed what lay between.
			if top := s.maxBase(); e.Seq > top || s.opt.KeepEntries == 0 {
				s.chk.violation("host %d: a state transfer jumped to seq %d, but no host's log starts past %d", i, e.Seq, top)
			}
			s.chk.Begin(i, h.inc, e.Seq)
			s.Stats.FloorJumps++
			h.archive, h.bases = nil, nil // its log starts anew (the node dropped its archive)
			h.switch_ = nd.ConfigSwitch() // the roster at the base: no switch this host saw
		case exo.EventPastFloor:
			// It became amnesiac: as after a crash, its publishers learn
			// nothing more of what they published there.
			s.Stats.PastFloor++
			s.chk.Crashed(i, nd)
			s.chk.LostState(i, h.inc)
			s.amnesiac = true
			h.asked = nil // its operator's command fails: the host lost its state
		case exo.EventKeySwitch:
			h.keyIdx++
			h.staged = false
			s.Stats.KeySwitches++
		}
		switch {
		case e.Kind == exo.EventViewChange:
			s.tracef("host %d %s epoch=%d seq=%d peer=%d cause=%s", i, e.Kind, e.Epoch, e.Seq, e.Peer, e.Cause)
		case e.Kind != exo.EventRetransmit || s.quiet:
			s.tracef("host %d %s epoch=%d seq=%d peer=%d", i, e.Kind, e.Epoch, e.Seq, e.Peer)
		}
	}
	if s.quiet {
		for _, r := range rd.Rejects {
			s.tracef("host %d reject %s from %d seq %d epoch %d", i, r.Reason, r.From, r.Seq, r.Epoch)
		}
		for _, m := range rd.Messages {
			s.tracef("host %d send %s", i, m)
		}
	}
	// The simulated disk, synchronous, before anything is sent: the log is
	// kept by applying Truncate and Appended, as a real durable log does.
	log := h.durable.Log
	if rd.HasTruncate {
		keep := 0
		for keep < len(log) && log[keep].Seq < rd.Truncate {
			keep++
		}
		log = slices.Clone(log[:keep]) // the synced log (a prefix of the old one) stays as it was
	}
	log = append(log, rd.Appended...)
	old := h.durable
	h.durable = nd.HardStateMeta()
	h.durable.Log = log
	sends := rd
	if s.brokenSync {
		sends.Frames = nil
	}
	if mustSync(sends, old, h.durable) || (!s.brokenSync && s.now-h.syncedAt >= lazySyncTicks*int64(s.opt.StepsPerTick)) || h.fp != nil {
		h.sync(s.now)
	}
	if cur := nd.Log(); len(cur) != len(log) || (len(log) > 0 && !cur[len(cur)-1].Equal(&log[len(log)-1])) {
		s.chk.violation("host %d: Ready.Truncate/Appended do not reproduce the log (%d vs %d entries)", i, len(log), len(cur))
	}
	if s.opt.DiskTicks > 0 && !s.quiet && (len(rd.Appended) > 0 || rd.HasTruncate) {
		h.diskUntil = max(h.diskUntil, s.now) + int64(s.rng.IntN(s.opt.DiskTicks*s.opt.StepsPerTick+1))
	}
	wait := max(0, h.diskUntil-s.now)
	for fi := range rd.Frames {
		f := rd.Frames[fi]
		s.Stats.Frames++
		for b := range s.hosts {
			if b != i {
				s.send(i, b, &f, nil, wait)
			}
		}
	}
	for mi := range rd.Messages {
		m := rd.Messages[mi]
		if m.ArchiveHi > 0 && !s.fillArchive(h, &m) {
			s.Stats.ArchiveMisses++
			continue
		}
		s.Stats.Messages++
		if m.Type == exo.MsgFetch {
			s.send(i, int(m.To), nil, &m, 0) // the daemon sends fetches before its disk write
		} else {
			s.send(i, int(m.To), nil, &m, wait)
		}
	}
	for _, e := range rd.Agreed {
		s.chk.Agreed(i, h.inc, e)
		s.Stats.Agreed++
	}
	// A switch counts once this host agreed past it: a switch on an
	// unagreed tail may be undone by a view change (docs/protocol.md 7).
	if sw := nd.ConfigSwitch(); sw != h.switch_ && nd.Pointers().Agreed > sw {
		h.switch_ = sw
		// A roster in force from the log's base is no switch: a view
		// change that cut a switch on an unagreed tail leaves the roster
		// the host restarted with (seed 381 of --amnesia 0.2
		// --keep-entries 16 --roster-changes 0.02 reported its base, 79,
		// as a switch to the rack's first roster).
		if !nd.RosterAtBase() {
			s.chk.Switched(i, sw, nd.Roster())
			s.tracef("host %d switched at seq %d to roster %v", i, sw, nd.Roster())
		}
	}
	if nd.Removed() != h.removed {
		h.removed = nd.Removed()
		if h.removed {
			// Out of the roster: what it published and did not see agreed
			// will not be sent (its publishers are told).
			s.chk.Crashed(i, nd)
		}
	}
	for _, e := range rd.Dropped {
		s.tracef("host %d dropped its entry seq %d epoch %d", i, e.Seq, e.Epoch)
		s.chk.Dropped(i, e)
		s.Stats.Dropped++
	}
	nd.Advance()
	if k := uint64(s.opt.KeepEntries); k > 0 && nd.Pointers().Agreed > nd.LogBase()+2*k {
		// As the daemon compacts: memory, then the disk from the new
		// base (its meta names the roster there); what retention keeps
		// of the rest goes to the archive.
		oldBase, oldRoster := nd.LogBase(), nd.BaseRoster()
		nd.Compact(nd.Pointers().Agreed - k)
		cut := 0
		for cut < len(h.durable.Log) && h.durable.Log[cut].Seq < nd.LogBase() {
			cut++
		}
		if len(h.durable.Log) > 0 && h.durable.Log[0].Seq == oldBase {
			s.retain(h, h.durable.Log[:cut], oldBase, oldRoster)
		}
		log := h.durable.Log[cut:]
		h.durable = nd.HardStateMeta()
		h.durable.Log = log
		h.sync(s.now) // the daemon commits the meta of the new base in full
		s.Stats.Compactions++
	}
}

// lazySyncTicks is the daemon's lazySync (100 ms) in its ticks of 250 us.
const lazySyncTicks = 400

// sync makes the state written durable, as an fsync does.
func (h *host) sync(now int64) {
	h.synced, h.syncedAt = h.durable, now
}

// mustSync reports whether the daemon fsyncs before carrying out rd, after
// the durable state went from old to cur (daemon.mustCommit): rd sends a
// frame or a message other than a fetch, or the meta changed.
func mustSync(rd exo.Ready, old, cur exo.HardState) bool {
	if len(rd.Frames) > 0 {
		return true
	}
	for _, m := range rd.Messages {
		if m.Type != exo.MsgFetch {
			return true
		}
	}
	return old.Amnesiac != cur.Amnesiac || old.Epoch != cur.Epoch || old.Promised != cur.Promised ||
		!slices.Equal(old.Skipped, cur.Skipped) || !slices.Equal(old.Roster, cur.Roster) ||
		(old.Log == nil) != (cur.Log == nil) || (len(old.Log) > 0 && len(cur.Log) > 0 && old.Log[0].Seq != cur.Log[0].Seq) ||
		old.KeySent != cur.KeySent || old.FastArmed != cur.FastArmed || old.FastEpoch != cur.FastEpoch || old.Fenced != cur.Fenced
}

// archBase is a former log base and the roster in force there.
type archBase struct {
	at     uint64
	roster []uint8
}

// retain moves what compaction cut (cut, the log from oldBase with
// oldRoster there) into host h's archive, then removes from the archive's
// front what Options.Retain no longer keeps, and tells the node.
func (s *Sim) retain(h *host, cut []exo.Entry, oldBase uint64, oldRoster []uint8) {
	if s.opt.Retain <= 0 || len(cut) == 0 {
		return
	}
	if len(h.archive) > 0 && h.archive[len(h.archive)-1].Seq+1 != cut[0].Seq {
		h.archive, h.bases = nil, nil // not contiguous: start anew
	}
	if len(h.archive) == 0 {
		h.bases = nil
	}
	h.bases = append(h.bases, archBase{at: oldBase, roster: slices.Clone(oldRoster)})
	h.archive = append(h.archive, cut...)
	// At most Retain entries behind the agreement pointer, cut at the
	// first former base at or past that floor (wal.Log.Retain).
	var floor uint64
	if agreed := h.node.Pointers().Agreed; agreed > uint64(s.opt.Retain) {
		floor = agreed - uint64(s.opt.Retain)
	}
	k := 0
	for k < len(h.bases) && h.bases[k].at < floor {
		k++
	}
	h.bases = h.bases[k:]
	if len(h.bases) == 0 {
		h.archive = nil
		h.node.SetArchive(h.node.LogBase(), nil) // none
		return
	}
	drop := 0
	for drop < len(h.archive) && h.archive[drop].Seq < h.bases[0].at {
		drop++
	}
	h.archive = append([]exo.Entry(nil), h.archive[drop:]...)
	h.node.SetArchive(h.bases[0].at, h.bases[0].roster)
}

// fillArchive fills a fetch answer or a promise that the node left to the
// archive (exo.Message.ArchiveHi), as the daemon's OOB sender does; false
// when the archive no longer holds what it needs (the message is dropped).
func (s *Sim) fillArchive(h *host, m *exo.Message) bool {
	ok := exo.FillFromArchive(m, func(lo, hi uint64, lim exo.FetchLimit) ([]exo.Entry, error) {
		if len(h.archive) == 0 || lo < h.archive[0].Seq || lo > h.archive[len(h.archive)-1].Seq {
			return nil, nil
		}
		i := int(lo - h.archive[0].Seq)
		n := lim.Take(h.archive[i:], hi)
		es := slices.Clone(h.archive[i : i+n])
		if s.brokenArchive && i+n < len(h.archive) {
			// Each entry's content from the next position, under its own seq.
			for k := range es {
				e := h.archive[i+k+1]
				e.Seq = es[k].Seq
				es[k] = e
			}
		}
		return es, nil
	})
	if ok {
		s.Stats.ArchiveAnswers++
	}
	return ok
}

// quietPhase steps the rack for Options.Quiet ticks, or until it settled.
func (s *Sim) quietPhase() {
	for end := s.tick + s.opt.Quiet; s.tick < end; s.tick++ {
		if s.opt.KeyRotations > 0 {
			s.keys(true) // hosts still in the last grace window stage later
		}
		s.step()
		s.operators()
		if s.settled() {
			break
		}
	}
}

// acceptLoss runs the operator's command at a host whose view change waits
// on an ambiguous fork, and tells the checker what it reported; false if
// no host waits on one.
func (s *Sim) acceptLoss() bool {
	// An amnesiac initiator first: its rejoin is what waits (it takes
	// no install but its own), and an override elsewhere leaves it so.
	// As the operator's guide says, the operator looks there first: an
	// amnesiac host that leads a view change whose promises are still on
	// their way (just started) is given the time of a view change to show
	// whether it waits on lost state.
	vct := s.opt.Config.ViewChangeTimeout
	if vct == 0 {
		vct = exo.DefaultViewChangeTimeout
	}
	for k := 0; k <= vct && s.amnesiacLeadsUndecided(); k++ {
		s.step()
		s.tick++
	}
	order := make([]int, 0, len(s.hosts))
	for i, h := range s.hosts {
		if h.node.Amnesiac() {
			order = append(order, i)
		}
	}
	for i, h := range s.hosts {
		if !h.node.Amnesiac() {
			order = append(order, i)
		}
	}
	for _, i := range order {
		h := s.hosts[i]
		if !h.up || !h.node.ViewChangeAmbiguous() {
			continue
		}
		d, err := h.node.AcceptLoss()
		if err != nil {
			s.chk.violation("host %d: accept-loss refused on an ambiguous fork: %v", i, err)
			return false
		}
		s.tracef("host %d: the operator accepts the loss of seq %d..%d (%d entries held on other branches)", i, d.From, d.To-1, len(d.Lost))
		s.chk.Doubted(d)
		s.Stats.AcceptedLosses++
		h.silent = 0 // an input: what NextTick said before no longer holds (seed 7174)
		s.sync(i)
		return true
	}
	return false
}

// amnesiacLeadsUndecided reports whether an up amnesiac host leads a view
// change that does not wait on lost state (yet).
func (s *Sim) amnesiacLeadsUndecided() bool {
	for _, h := range s.hosts {
		if h.up && h.node.Amnesiac() && h.node.Recovery().ViewChange != nil && !h.node.ViewChangeAmbiguous() {
			return true
		}
	}
	return false
}

// maxBase returns the highest log base of the rack's hosts.
func (s *Sim) maxBase() uint64 {
	var top uint64
	for _, h := range s.hosts {
		top = max(top, h.node.LogBase())
	}
	return top
}

// faults injects partitions, heals, crashes and restarts at random.
func (s *Sim) faults() {
	n := s.opt.Hosts
	k := 1.0 // how much longer than the default's faults last
	if s.opt.FaultTicks > 0 {
		k = float64(s.opt.FaultTicks) / 50
	}
	if s.opt.Partitions && s.rng.Float64() < 0.01/k {
		s.heal()
		s.Stats.Partitions++
		switch s.rng.IntN(3) {
		case 0: // two sides
			side := make([]int, n)
			for i := range side {
				side[i] = s.rng.IntN(2)
			}
			for a := 0; a < n; a++ {
				for b := 0; b < n; b++ {
					s.cut[a][b] = side[a] != side[b]
				}
			}
			s.tracef("partition %v", side)
		case 1: // one host isolated one way
			a := s.rng.IntN(n)
			out := s.rng.IntN(2) == 0
			for b := 0; b < n; b++ {
				if b != a {
					if out {
						s.cut[a][b] = true
					} else {
						s.cut[b][a] = true
					}
				}
			}
			s.tracef("one-way cut host %d out=%v", a, out)
		default: // the seed's minority/majority split
			perm := s.rng.Perm(n)
			minority := make([]bool, n)
			for _, x := range perm[:n/2] {
				minority[x] = true
			}
			for a := 0; a < n; a++ {
				for b := 0; b < n; b++ {
					s.cut[a][b] = minority[a] != minority[b]
				}
			}
			s.tracef("minority split %v", minority)
		}
	} else if s.rng.Float64() < 0.02/k {
		s.heal()
		if s.rng.Float64() < 0.3 && s.opt.Config.GoneTicks > 0 {
			// A wrong gone notice: a connection that a host closed as
			// stuck during the partition ends at its peer at the heal,
			// and the probe that would find the host alive is not
			// trusted here (the worst case).
			a, b := s.rng.IntN(n), s.rng.IntN(n)
			if a != b {
				s.Stats.GoneNotices++
				s.send(a, b, nil, &exo.Message{Type: exo.MsgGone, From: uint8(a), To: uint8(b)}, 0)
				s.tracef("wrong gone notice about host %d to host %d", a, b)
			}
		}
	}
	if s.opt.RosterChanges > 0 && s.rng.Float64() < s.opt.RosterChanges {
		s.rosterChange()
	}
	if s.opt.Pauses > 0 && s.rng.Float64() < s.opt.Pauses {
		i := s.rng.IntN(len(s.hosts))
		if h := s.hosts[i]; h.up && h.pausedFor == 0 {
			most := s.opt.PauseTicks
			if most <= 0 {
				most = 2 * h.node.Config().TokenTimeout
			}
			// Half the pauses delay what reaches the host a tick more: it
			// acts before it reads, as a lab daemon whose frames were late
			// to reach its socket too (its frame then diverges from a
			// takeover's: the late frame the detector learns from).
			h.pausedFor, h.deafFor = 1+s.rng.IntN(most), s.rng.IntN(2)
			s.Stats.Pauses++
			s.tracef("pause host %d for %d ticks (deaf %d more)", i, h.pausedFor, h.deafFor)
		}
	}
	if s.opt.KeyRotations > 0 {
		s.keys(false)
	}
	if !s.opt.Crashes {
		return
	}
	down := 0
	for _, h := range s.hosts {
		if !h.up || h.node.Amnesiac() {
			down++
		}
	}
	for i, h := range s.hosts {
		if !h.up {
			h.downFor--
			if h.downFor <= 0 {
				s.restart(i)
			}
		}
	}
	if down < exo.HistoryLen(n) && s.rng.Float64() < 0.01/k {
		i := s.rng.IntN(n)
		if s.hosts[i].up {
			s.crash(i)
			s.hosts[i].downFor = int(float64(s.hosts[i].downFor) * k)
		}
	}
}

// watchStall measures the majority stall (Stats.MajorityStall) after a
// tick of the faulty phase: the largest set of up hosts that reach each
// other both ways, if it is a majority, must see its furthest agreement
// pointer advance. Only without roster changes (a fixed majority).
func (s *Sim) watchStall() {
	n := s.opt.Hosts
	if s.opt.RosterChanges > 0 || n > 16 {
		return
	}
	if s.reachDirty {
		s.stallSet, s.reachDirty = s.majoritySet(), false
	}
	best := s.stallSet
	if best == 0 {
		s.endStall()
		s.stallAgreed = 0
		return
	}
	var agreed uint64
	for a := 0; a < n; a++ {
		if best&(1<<a) != 0 {
			agreed = max(agreed, s.hosts[a].node.Pointers().Agreed)
		}
	}
	if agreed > s.stallAgreed {
		s.endStall()
		s.stallAgreed = agreed
		return
	}
	s.stallRun++
}

// majoritySet returns the largest set of up hosts that reach each other
// both ways (a bit per host), if it is a majority of the rack; else 0.
// Every subset is tried: found again only when the cuts or the hosts up
// change (at 16 hosts, every tick made the simulator 3.6 times slower).
func (s *Sim) majoritySet() int {
	n := s.opt.Hosts
	best, bestSize := 0, 0
	for set := 1; set < 1<<n; set++ {
		size := bits.OnesCount(uint(set))
		if size <= bestSize || 2*size <= n {
			continue
		}
		ok := true
		for a := 0; a < n && ok; a++ {
			if set&(1<<a) == 0 {
				continue
			}
			if !s.hosts[a].up {
				ok = false
				break
			}
			for b := 0; b < n; b++ {
				if b != a && set&(1<<b) != 0 && (s.cut[a][b] || s.cut[b][a]) {
					ok = false
					break
				}
			}
		}
		if ok {
			best, bestSize = set, size
		}
	}
	return best
}

// endStall ends the majority stall under way, if it is the longest yet.
func (s *Sim) endStall() {
	if s.stallRun > s.Stats.MajorityStall {
		s.Stats.MajorityStall, s.Stats.MajorityStallAt = s.stallRun, s.tick
		s.tracef("majority stall of %d ticks ended", s.stallRun)
	}
	s.stallRun = 0
}

func (s *Sim) heal() {
	s.reachDirty = true
	for a := range s.cut {
		clear(s.cut[a])
	}
}

func (s *Sim) crash(i int) {
	h := s.hosts[i]
	h.up = false
	h.pausedFor, h.deafFor = 0, 0
	s.reachDirty = true
	h.asked = nil // the operator's command fails: the daemon is gone
	h.downFor = 5 + s.rng.IntN(60)
	s.Stats.Crashes++
	// The machine goes down with the daemon: what was written and not
	// fsynced is lost (the worst case; a daemon killed alone keeps it).
	if n, m := len(h.durable.Log), len(h.synced.Log); n > m {
		s.Stats.UnsyncedLost += uint64(n - m)
	}
	h.durable = h.synced
	s.chk.Crashed(i, h.node)
	h.keepFP = false
	if h.fp != nil && s.rng.Float64() < 0.7 {
		// The daemon dies, the host lives on: the fast path's pinned
		// maps, with its records not released, wait for the next one.
		h.fp.Crash()
		h.keepFP = true
	}
	s.tracef("crash host %d (fast path kept: %v)", i, h.keepFP)
	if s.rng.Float64() < 0.5 && s.opt.Config.GoneTicks > 0 { // (drawn either way: runs with and without notices differ by them alone)
		// The daemon alone died: its kernel closed its sockets, and
		// every host that reaches it learns that its process is gone
		// (its connection ended, a dial refused: exo.MsgGone).
		for j, o := range s.hosts {
			if j != i && o.up {
				s.Stats.GoneNotices++
				s.send(i, j, nil, &exo.Message{Type: exo.MsgGone, From: uint8(i), To: uint8(j)}, 0)
			}
		}
	}
}

func (s *Sim) restart(i int) {
	h := s.hosts[i]
	var err error
	h.inc++
	// The operator keeps every host's configuration current: while a
	// rotation runs (here or at another member), the old key and the new
	// one (next_key_file, staged again after the restart); after it, the
	// newest key alone.
	if s.keyGen > 0 {
		switch {
		case s.rotating(i) || (h.keyIdx < s.keyGen && !h.node.Removed()):
			h.keyIdx, h.staged = s.keyGen-1, true
		default:
			// The rotation is over at every member (or this host is no
			// member, not waited for): the newest key alone.
			h.keyIdx, h.staged = s.keyGen, false
		}
	}
	if s.rng.Float64() >= s.opt.Amnesia {
		h.node, err = exo.RestartNode(s.config(i), h.durable)
		s.tracef("restart host %d durable", i)
		if err == nil && len(h.archive) > 0 {
			h.node.SetArchive(h.bases[0].at, h.bases[0].roster)
		}
		if err == nil {
			// It delivers its log again from its base (compacted), or
			// goes on with a state transfer (amnesiac before the crash).
			s.chk.Begin(i, h.inc, h.node.LogBase())
			h.switch_ = h.node.ConfigSwitch() // the roster at its log's base: no switch seen
		}
		if err == nil && h.node.Fenced() {
			s.fenced = true
			s.Stats.FencedRestarts++
			s.tracef("host %d restarts fenced in epoch %d", i, h.node.Epoch())
		}
	} else {
		h.node, err = exo.NewAmnesiacNode(s.config(i))
		h.durable = exo.HardState{Amnesiac: true}
		h.sync(s.now) // the disk is new, and says so at once
		h.archive, h.bases = nil, nil
		s.chk.LostState(i, h.inc-1)
		s.amnesiac = true
		s.tracef("restart host %d amnesiac", i)
	}
	if err != nil {
		s.chk.violation("restart host %d: %v", i, err)
		return
	}
	h.up = true
	s.reachDirty = true
	h.silent = 0
	if s.opt.Token {
		s.collect(h)
		s.attach(i, h.keepFP && !h.node.Amnesiac())
	}
	if h.staged {
		h.staged = false
		s.stage(i) // the staged key is in its configuration (next_key_file)
	}
	if s.opt.Config.GoneTicks > 0 || s.opt.Retain > 0 {
		// The daemon announces what it holds as it starts (its first
		// loop): the others hear it again (a gone notice about it is
		// cleared).
		h.node.AnnounceHeld()
	}
	s.sync(i)
}

// collect adds a control plane's counters to the run's, and checks them:
// the fast path and the core never disagree on a frame while the core
// runs (a desync), and every frame a fast path sent is logged, but after
// the core halted (a roster change took effect there, which the fast path
// cannot see: those frames are never appended anywhere, docs/token.md
// section 4).
func (s *Sim) collect(h *host) {
	if h.drv == nil {
		return
	}
	st := h.drv.Stats()
	if st.Desyncs > 0 {
		s.chk.violation("token: %d frames on which the fast path and the core disagreed", st.Desyncs)
	}
	if st.Fenced > 0 {
		s.chk.violation("token: %d frames the fast path sent that the log could not take while the core ran", st.Fenced)
	}
	t := &s.Stats.Token
	t.Records += st.Records
	t.Fast += st.Fast
	t.Sent += st.Sent
	t.Popped += st.Popped
	t.Handoffs += st.Handoffs
	t.Halts += st.Halts
	t.Quiesces += st.Quiesces
	t.Arms += st.Arms
	t.ArmMisses += st.ArmMisses
	t.Desyncs += st.Desyncs
	t.Unlogged += st.Unlogged
	t.Fenced += st.Fenced
	t.Reproposed += st.Reproposed
	h.drv = nil
}

// rosterChange has a random live member propose one membership change.
func (s *Sim) rosterChange() {
	i := s.rng.IntN(len(s.hosts))
	h := s.hosts[i]
	if !h.up || h.node.Removed() || h.node.Amnesiac() || h.asked != nil {
		return // (the operator waits for the change asked here before the next)
	}
	roster := h.node.Roster()
	var c exo.ConfigChange
	var out []uint8
	for u := range s.hosts {
		if !slices.Contains(roster, uint8(u)) {
			out = append(out, uint8(u))
		}
	}
	switch {
	case len(roster) >= s.opt.Hosts+1 || (len(roster) >= s.opt.Hosts && (len(out) == 0 || s.rng.IntN(2) == 0)):
		if len(roster) <= 1 {
			return
		}
		c = exo.ConfigChange{Op: exo.ChangeRemove, Member: roster[s.rng.IntN(len(roster))]}
	case len(out) > 0:
		c = exo.ConfigChange{Op: exo.ChangeAdd, Member: out[s.rng.IntN(len(out))]}
	default:
		return
	}
	if c.Op == exo.ChangeAdd && s.opt.KeyRotations > 0 {
		// The operator gives a host the rack's keys before adding it.
		if u := s.hosts[c.Member]; u.keyIdx < s.keyGen && !u.staged {
			if !u.up {
				return
			}
			s.stage(int(c.Member))
			if !u.staged {
				return
			}
		}
	}
	h.silent = 0
	s.quiesce(i)
	defer s.sync(i)
	if err := h.node.ProposeConfig(c); err != nil {
		return
	}
	h.asked, h.askedAt, h.askedFrom = &c, s.tick, h.node.ConfigSwitch()
	s.tracef("host %d proposes %s (roster %v)", i, c, roster)
}

// operators polls, as `exo roster` does after it proposed a change, each
// host where a change was asked, until the host has no change in flight:
// the change is then in effect in its roster, or it was dropped. A drop
// is a violation unless the roster changed since it was asked (another
// change came first or made it moot) or this host was removed: a view
// change that cut or voided it must have proposed it again. A crash of the
// host ends the wait (the command fails: daemon gone).
func (s *Sim) operators() {
	for i, h := range s.hosts {
		if h.asked == nil || !h.up {
			continue
		}
		nd := h.node
		if !nd.Removed() && nd.ChangeInFlight() {
			continue
		}
		roster := nd.Roster()
		_, in := slices.BinarySearch(roster, h.asked.Member)
		if !nd.Removed() && (h.asked.Op == exo.ChangeAdd) != in && nd.ConfigSwitch() == h.askedFrom {
			s.chk.violation("host %d: the roster change %s proposed at tick %d was dropped while the roster stayed %v from seq %d", i, *h.asked, h.askedAt, roster, h.askedFrom)
		}
		h.asked = nil
	}
}

// clients publish payloads that carry a unique id.
func (s *Sim) clients() {
	for i, h := range s.hosts {
		if h.up && !h.node.Removed() && s.rng.Float64() < s.opt.ProposeP {
			s.propose(i)
		}
	}
}

func (s *Sim) propose(i int) {
	h := s.hosts[i]
	s.nextID++
	p := make([]byte, 8+s.rng.IntN(24))
	binary.BigEndian.PutUint64(p, s.nextID)
	h.silent = 0
	var err error
	if h.drv != nil {
		if h.drv.Pending() >= h.node.Config().MaxPending {
			err = exo.ErrQueueFull
		} else {
			err = h.drv.Propose(p)
		}
	} else {
		err = h.node.Propose(p)
	}
	if err != nil {
		s.nextID--
		return
	}
	s.Stats.Proposed++
	s.chk.Proposed(i, h.inc, s.nextID)
	s.sync(i)
}

// beginQuiet heals every fault, restarts crashed hosts and publishes one
// last payload at every host; from then on the rack must converge.
func (s *Sim) beginQuiet() {
	s.quiet = true
	s.heal()
	for _, h := range s.hosts {
		h.pausedFor, h.deafFor = 0, 0 // what waits for it is delivered from the next step
	}
	for i, h := range s.hosts {
		if !h.up {
			s.restart(i)
		}
	}
	for i, h := range s.hosts {
		if !h.node.Removed() {
			s.propose(i)
		}
	}
	if s.opt.KeyRotations > 0 {
		s.keys(true)
	}
	s.chk.QuietStart(s.nodes())
}

// settled reports whether every host is in one epoch, halted nowhere, and
// has delivered everything published that was not dropped.
func (s *Sim) settled() bool {
	for _, h := range s.hosts {
		if h.asked != nil {
			return false
		}
	}
	if s.opt.KeyRotations > 0 {
		if !s.keysDone() {
			return false
		}
	}
	return s.chk.converged(s.members())
}

// keysDone reports whether every member sends under the rack's newest key.
func (s *Sim) keysDone() bool {
	for _, nd := range s.members() {
		if ks := nd.KeyStatus(); ks.Staged || ks.SendPhase != uint8(s.keyGen%2) {
			return false
		}
	}
	for _, h := range s.hosts {
		if h.keyIdx != s.keyGen && !h.node.Removed() {
			return false
		}
	}
	return true
}
