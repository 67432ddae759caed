package exo

import (
	"errors"
	"fmt"
)

// Config is the static configuration of one host's state machine. Every host
// of a rack must use the same Hosts, Group and timing values; only ID differs.
// Times are counted in ticks: the embedder decides how long a tick is (the
// daemon uses a wall-clock ticker, the simulator a virtual one).
type Config struct {
	// ID is this host's stable member id. In the rack's first roster
	// (0..Hosts-1) it is also its position in token order; an id >= Hosts
	// is a host outside the first roster (it is not a member until a
	// configuration entry adds it, docs/protocol.md section 7).
	ID uint8
	// Hosts is the roster size n (1..255). The history length is h = n/2 and a
	// majority is h+1.
	Hosts int
	// Group is the group id carried in every frame; frames of other groups are
	// rejected with BAD_GROUP.
	Group uint16
	// TagKey is the 16-byte frame key: every frame this host sends carries
	// its SipHash-2-4 tag under TagKey, and every frame it receives must
	// (else BAD_TAG). Every host of a rack uses the same key; the daemon
	// derives it from the group key file (docs/security.md). The zero value
	// is a key like any other (the tests' default), not "no check".
	TagKey [TagKeyLen]byte
	// KeyPhase is the key slot (0 or 1) TagKey sits in, and the key phase
	// of the frames this host sends until a rotation (Node.StageKey)
	// switches it. A rack that rotated its key an odd number of times runs
	// under phase 1 (docs/security.md section 5).
	KeyPhase uint8
	// KeyGraceTicks is how long the old key stays valid, for frames still
	// in flight or sent by hosts that switched later, once this host has
	// switched to a new key; then its slot is emptied.
	KeyGraceTicks int

	// TokenTimeout is how many ticks without an append a host waits, after
	// the holder's idle back-off, before it takes the token over from a
	// silent holder (rank 1; host at rank r waits TokenTimeout +
	// (r-1)*TakeoverStagger more).
	TokenTimeout int
	// TokenTimeoutMin is the floor of the adaptive token timeout
	// (detector.go): the timeout in force follows the gaps between
	// appends between TokenTimeoutMin and TokenTimeout. 0, or equal to
	// TokenTimeout: the timeout is TokenTimeout, fixed.
	TokenTimeoutMin int
	// TakeoverStagger separates the takeover deadlines of successive hosts so
	// that two hosts rarely take over at once.
	TakeoverStagger int
	// GoneTicks is how many ticks without an append a host waits before it
	// takes the token over from a holder whose process is known to be
	// gone (MsgGone, detector.go), instead of the back-off and the token
	// timeout; hosts ranked before it whose process is gone are not
	// waited for either. 0: gone notices are ignored.
	GoneTicks int
	// RetransmitTicks is how long the sender of the newest entry waits for a
	// successor frame before it broadcasts its frame again (lost frames).
	RetransmitTicks int
	// PassDelay is how many ticks the token holder waits before an empty
	// token pass when it has nothing to send (0: pass at once). The idle
	// back-off comes on top of it.
	PassDelay int
	// IdleBackoffMax caps the delay, in ticks, of an empty token pass once a
	// few rotations have passed without payloads (it doubles with every
	// idle rotation). 0 disables the back-off. A host with proposals waits
	// no rotation at that pace: it wakes the others (MsgWake).
	IdleBackoffMax int
	// IdleRotations is how many whole rotations of empty passes go at
	// full speed before the idle back-off starts: a publisher that waits
	// for its previous message to be agreed should find the token still
	// moving. A fast path that sends (token mode) passes them in the
	// kernel, a few microseconds a hop, and hands the token up after them
	// (Tx.IdleRun): there it covers the time its control plane takes to
	// refill its queue.
	IdleRotations int
	// ViewChangeTimeout is how long a view change (or a promise without the
	// matching install) may take before the host starts a new one.
	ViewChangeTimeout int
	// RejoinTicks is how often a live host that the log marks as skipped asks
	// the others (MsgRejoin) to re-admit it to the token order.
	RejoinTicks int
	// FetchTicks is how long a gap-repair or catch-up request may stay
	// unanswered before it is sent again.
	FetchTicks int

	// MaxBatchBytes bounds the payload bytes (records with their length
	// prefixes) of one frame.
	MaxBatchBytes int
	// MaxPending bounds the queue of proposals not yet broadcast; Propose
	// returns ErrQueueFull beyond it.
	MaxPending int
	// SeqWindow is how far ahead of the append pointer a frame may be and
	// still be held as a gap; beyond it the frame is rejected as SEQ_TOO_FAR.
	SeqWindow uint64
	// MaxHeld bounds the frames held while a gap is repaired.
	MaxHeld int
	// MaxFetchEntries bounds the entries of one fetch response: an OOB
	// message must stay well below the transport's size cap, so a host
	// further behind catches up batch after batch. The simulator sets it
	// small so that its short logs need several batches too.
	MaxFetchEntries int
	// FetchBytes lets a fetch response hold more than MaxFetchEntries
	// entries while their binary size (Entry.BinarySize) stays within it
	// (0: MaxFetchEntries, exactly). MaxFetchEntries keeps its other role,
	// the measure of "far behind" for view changes; this one sizes a
	// catch-up's batches by bytes, so that a host behind fetches in few
	// round trips whatever the size of its entries.
	FetchBytes int
	// TransferBytesPerTick paces a state transfer (transfer.go): after a
	// batch of B bytes the next fetch leaves no sooner than B divided by
	// this many ticks after the one before, so that a joiner takes its
	// members' CPU and network a little at a time and the rack keeps
	// agreeing (0: no pacing, each batch asked for as the last arrives).
	// Batches follow at once while the rack's agreement pointer is
	// further ahead than the least it was after a batch: the pace never
	// keeps a transfer from ending.
	TransferBytesPerTick int
	// TransferYield makes that pace the ceiling of an adaptive one
	// (pacer.go): the transfer pauses for TransferProbeTicks now and then
	// and compares how fast the rack's log grows, as this host hears its
	// frames, while it fetches and while it pauses; while the rack grows
	// at less than TransferYield percent of its pace in the pauses, the
	// transfer's pace falls in proportion (at most halved at a pause; to
	// a sixteenth of the ceiling at least), and rises by an eighth of the
	// ceiling otherwise. So that
	// a transfer takes from a rack what the rack can spare, not a fixed
	// rate: a member that shares its CPUs and its disk with a transfer
	// agrees less while it reads and sends the batches (0: the fixed pace
	// TransferBytesPerTick).
	TransferYield int
	// TransferProbeTicks is the length of those pauses (at least 4 ticks
	// when TransferYield is set): the rack's growth is measured over
	// their second half, after the last batch's work has settled.
	TransferProbeTicks int
	// TransferTurnBytes is how much of a state transfer one member serves
	// before the next member in turn is asked (transfer.go): the members
	// share the transfer's reads and sends, and each reads its stretch of
	// the retained log in order (the daemon sets its segment size, so that
	// a member reads each segment it serves once; a turn of one batch made
	// every member read every segment, four times the reading over a rack
	// of five, and the rack agreed less during lab joins). 0: a turn is
	// one batch.
	TransferTurnBytes int
	// TransferTicks is the least time a state transfer or a catch-up to a
	// later epoch waits for an answer before it asks another member (0:
	// FetchTicks, as any fetch): an answer of FetchBytes takes longer than
	// a gap repair's, and asking again only doubles the members' work (the
	// late answer is used).
	TransferTicks int
	// FetchWindow is how many batches a catch-up to a later epoch keeps in
	// flight: after the first answer, the next batches (each of the
	// entries the last full batch held) are asked of the members that
	// answered in that epoch in turn, so that their reading, the network
	// and this host's appending overlap instead of taking one round trip
	// a batch (1: one batch at a time; 0: DefaultFetchWindow).
	FetchWindow int
}

// Defaults used by WithDefaults for fields left zero.
const (
	DefaultTokenTimeout      = 16
	DefaultTakeoverStagger   = 8
	DefaultRetransmitTicks   = 6
	DefaultIdleBackoffMax    = 4
	DefaultIdleRotations     = 4
	DefaultViewChangeTimeout = 40
	DefaultRejoinTicks       = 30
	DefaultFetchTicks        = 6
	DefaultMaxBatchBytes     = 1400
	DefaultMaxPending        = 4096
	DefaultSeqWindow         = 1024
	DefaultMaxHeld           = 256
	DefaultKeyGraceTicks     = 20000
	DefaultMaxFetchEntries   = 1024
	DefaultFetchWindow       = 4
)

// The daemon's timing, in its ticks of 250 us (daemon.Config's defaults):
// its view-change timeout is 20 token timeouts at the floor, where the
// core's default is 2.5. exo sim --lab-timing runs hosts with it
// (WithLabTiming). The token timeout is adaptive: LabTokenTimeout (50 ms)
// is its ceiling, LabTokenTimeoutMin (10 ms) its floor. On the 2-vCPU lab
// rack, whose daemons stall for up to 45-53 ms in bursts, a fixed 10 ms
// took live holders over 30-50 times a minute without a fault, and these
// bounds 0.3-1.3 times in three 10-minute runs (docs/recovery.md,
// sessions v and w).
const (
	LabTokenTimeout      = 200
	LabTokenTimeoutMin   = 40
	LabTakeoverStagger   = 20
	LabViewChangeTimeout = 800
	LabRetransmitTicks   = 12
	LabFetchTicks        = 20
	LabRejoinTicks       = 400
)

// WithLabTiming returns c with the daemon's timing (the Lab constants), its
// token timeout's floor LabTokenTimeoutMin unless c sets one.
func (c Config) WithLabTiming() Config {
	c.TokenTimeout, c.TakeoverStagger, c.ViewChangeTimeout = LabTokenTimeout, LabTakeoverStagger, LabViewChangeTimeout
	c.RetransmitTicks, c.FetchTicks, c.RejoinTicks = LabRetransmitTicks, LabFetchTicks, LabRejoinTicks
	if c.TokenTimeoutMin == 0 {
		c.TokenTimeoutMin = LabTokenTimeoutMin
	}
	return c
}

// WithDefaults returns c with every zero timing and size field set to its
// default. IdleBackoffMax is left as given when negative (-1 disables it).
func (c Config) WithDefaults() Config {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.TokenTimeout, DefaultTokenTimeout)
	set(&c.TakeoverStagger, DefaultTakeoverStagger)
	set(&c.RetransmitTicks, DefaultRetransmitTicks)
	set(&c.IdleBackoffMax, DefaultIdleBackoffMax)
	if c.IdleBackoffMax < 0 {
		c.IdleBackoffMax = 0
	}
	set(&c.IdleRotations, DefaultIdleRotations)
	set(&c.ViewChangeTimeout, DefaultViewChangeTimeout)
	set(&c.RejoinTicks, DefaultRejoinTicks)
	set(&c.FetchTicks, DefaultFetchTicks)
	set(&c.MaxBatchBytes, DefaultMaxBatchBytes)
	set(&c.MaxPending, DefaultMaxPending)
	set(&c.MaxHeld, DefaultMaxHeld)
	set(&c.KeyGraceTicks, DefaultKeyGraceTicks)
	set(&c.MaxFetchEntries, DefaultMaxFetchEntries)
	set(&c.FetchWindow, DefaultFetchWindow)
	if c.SeqWindow == 0 {
		c.SeqWindow = DefaultSeqWindow
	}
	return c
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid config")

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
}

// Validate reports the first invalid field of c, naming it.
func (c Config) Validate() error {
	switch {
	case c.Hosts < 1 || c.Hosts > MaxRoster:
		return configErr("Hosts", "%d is outside 1..%d", c.Hosts, MaxRoster)
	case c.ID == HistoryNone:
		return configErr("ID", "%d is reserved", c.ID)
	case c.TokenTimeout < 1:
		return configErr("TokenTimeout", "%d must be at least 1 (a takeover waits the holder's idle back-off and then TokenTimeout)", c.TokenTimeout)
	case c.TokenTimeoutMin < 0 || c.TokenTimeoutMin > c.TokenTimeout:
		return configErr("TokenTimeoutMin", "%d is outside 0..TokenTimeout (%d): the floor of the adaptive timeout", c.TokenTimeoutMin, c.TokenTimeout)
	case c.IdleRotations < 1:
		return configErr("IdleRotations", "%d must be at least 1", c.IdleRotations)
	case c.PassDelay < 0:
		return configErr("PassDelay", "%d must not be negative", c.PassDelay)
	case c.GoneTicks < 0 || c.GoneTicks > c.TokenTimeout:
		return configErr("GoneTicks", "%d is outside 0..TokenTimeout (%d): a takeover from a holder known dead waits at most what one from a silent holder does", c.GoneTicks, c.TokenTimeout)
	case c.TakeoverStagger < 1:
		return configErr("TakeoverStagger", "%d must be at least 1", c.TakeoverStagger)
	case c.RetransmitTicks < 1:
		return configErr("RetransmitTicks", "%d must be at least 1", c.RetransmitTicks)
	case c.ViewChangeTimeout < 1:
		return configErr("ViewChangeTimeout", "%d must be at least 1", c.ViewChangeTimeout)
	case c.RejoinTicks < 1:
		return configErr("RejoinTicks", "%d must be at least 1", c.RejoinTicks)
	case c.FetchTicks < 1:
		return configErr("FetchTicks", "%d must be at least 1", c.FetchTicks)
	case c.MaxBatchBytes < 3 || c.MaxBatchBytes > 65535:
		return configErr("MaxBatchBytes", "%d is outside 3..65535", c.MaxBatchBytes)
	case c.MaxPending < 1:
		return configErr("MaxPending", "%d must be at least 1", c.MaxPending)
	case c.MaxHeld < 1:
		return configErr("MaxHeld", "%d must be at least 1", c.MaxHeld)
	case c.SeqWindow < 1:
		return configErr("SeqWindow", "%d must be at least 1", c.SeqWindow)
	case c.KeyPhase > 1:
		return configErr("KeyPhase", "%d is neither 0 nor 1", c.KeyPhase)
	case c.FetchBytes < 0:
		return configErr("FetchBytes", "%d must not be negative", c.FetchBytes)
	case c.TransferYield < 0 || c.TransferYield > 99:
		return configErr("TransferYield", "%d is outside 0..99 (percent)", c.TransferYield)
	case c.TransferYield > 0 && c.TransferProbeTicks < 4:
		return configErr("TransferProbeTicks", "%d must be at least 4 with TransferYield", c.TransferProbeTicks)
	case c.TransferTurnBytes < 0:
		return configErr("TransferTurnBytes", "%d must not be negative", c.TransferTurnBytes)
	case c.MaxFetchEntries < 1:
		return configErr("MaxFetchEntries", "%d must be at least 1", c.MaxFetchEntries)
	case c.FetchWindow < 1 || c.FetchWindow > MaxFetchWindow:
		return configErr("FetchWindow", "%d is outside 1..%d", c.FetchWindow, MaxFetchWindow)
	case c.KeyGraceTicks < 1:
		return configErr("KeyGraceTicks", "%d must be at least 1", c.KeyGraceTicks)
	}
	return nil
}

// MaxFetchWindow bounds Config.FetchWindow: each batch in flight is up to
// FetchBytes of memory at both ends.
const MaxFetchWindow = 16

// MaxRoster is the largest roster: ids 0..254, since 0xFF (HistoryNone)
// marks an empty history slot.
const MaxRoster = MaxHosts - 1

// HistoryLen returns h = floor(n/2) for a roster of n hosts.
func HistoryLen(n int) int { return n / 2 }

// Majority returns h+1, the number of distinct senders that agree an entry.
func Majority(n int) int { return n/2 + 1 }
