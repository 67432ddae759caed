package exo

import "fmt"

// MsgType is the kind of an out-of-band (OOB) message. OOB messages travel
// over the separate TCP network (package oob), never on the broadcast
// segment.
type MsgType uint8

// OOB message types.
const (
	// MsgFetch asks a peer for its log from Lo on (gap repair, catch-up).
	// Epoch is the requester's log epoch.
	MsgFetch MsgType = iota + 1
	// MsgFetchResp answers MsgFetch: the responder's log epoch (LogEpoch),
	// agreement pointer (Agreed), skip set (Skipped) and its entries from
	// Start on.
	MsgFetchResp
	// MsgPrepare starts a view change to epoch Epoch (phase 1). Lo is the
	// initiator's agreement pointer: responders send their log from
	// min(Lo, their own agreement pointer) on.
	MsgPrepare
	// MsgPromise answers MsgPrepare: the responder will accept nothing of an
	// older epoch and reports its log (LogEpoch, Agreed, Start, Entries).
	// Amnesiac is set by a host that restarted without its state: it counts
	// as unknown, never as a witness.
	MsgPromise
	// MsgNack refuses a MsgPrepare: the responder promised Epoch already.
	MsgNack
	// MsgInstall ends a view change: every receiver that has not promised a
	// newer epoch replaces its log from Start on with Entries, moves to
	// Epoch, and takes Skipped as the token order's skip set.
	MsgInstall
	// MsgRejoin asks to be re-admitted to the token order by a host that the
	// log skips (it was passed over by a takeover while away).
	MsgRejoin
	// MsgWake asks the hosts of an idle rack to pass the token at once for
	// a rotation: its sender has proposals waiting for the token, which
	// the idle back-off would hold for up to IdleBackoffMax ticks a hop.
	// Epoch is the sender's log epoch (a wake of another epoch is
	// ignored).
	MsgWake
	// MsgHeld tells the other members what the sender holds: Lo, the
	// first seq it serves to a fetch (Node.ArchiveBase), and Agreed, its
	// agreement pointer (Node.AnnounceHeld; the rack's floor, RackFloor).
	// It changes nothing in the protocol.
	MsgHeld
	// MsgGone is never sent: the embedder steps it when it learns that
	// the process of member From is gone (its OOB connection to this
	// host ended and a dial to its OOB address was refused: its kernel
	// closed its sockets). The token is then taken over from it after
	// Config.GoneTicks instead of the token timeout (detector.go). A
	// hint only: any frame or message of From's clears it, and a wrong
	// one costs a takeover.
	MsgGone
)

var msgNames = [...]string{"?", "Fetch", "FetchResp", "Prepare", "Promise", "Nack", "Install", "Rejoin", "Wake", "Held", "Gone"}

func (t MsgType) String() string {
	if int(t) < len(msgNames) {
		return msgNames[t]
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}

// Message is one OOB message. Which fields are used depends on Type.
type Message struct {
	Type     MsgType
	From, To uint8
	Epoch    uint32 // Prepare/Promise/Nack/Install: the view change's epoch; Fetch: requester's log epoch
	LogEpoch uint32 // Promise/FetchResp/Nack: the responder's log epoch; Prepare: the initiator's
	Lo       uint64 // Prepare/Fetch: first position wanted
	Hi       uint64 // Fetch: first position not needed (0: to the end); FetchResp: the responder's log end (its append pointer), so a batch capped at MaxFetchEntries is known to be one
	Start    uint64 // Promise/FetchResp/Install: position of Entries[0]
	Agreed   uint64 // Promise/FetchResp/Install/Nack: agreement pointer known
	Skipped  []uint8
	Roster   []uint8 // Promise/FetchResp: the sender's roster (member ids); Install: the roster Skipped refers to
	Amnesiac bool    // Prepare/Promise: the sender lost its state; Fetch: a state transfer (agreed entries only)
	// Fenced (Promise): the responder's log may lack frames its fast path
	// sent in its log's epoch (docs/token.md section 5): it is known only
	// up to its end.
	Fenced bool
	// Forced (Install): the operator resolved this view change without the
	// hosts that lost their state (Node.AcceptLoss); an amnesiac host that
	// promised it takes it.
	Forced bool
	// StartRoster (FetchResp): the roster at Start when the responder's
	// log was compacted past the position asked (Start is its log base): a
	// requester cannot go on from its log and starts there by state
	// transfer (transfer.go).
	StartRoster []uint8
	// ArchiveHi (FetchResp, Promise, as the node hands them over): the
	// entries from Start below ArchiveHi are in the sender's archive
	// (Node.SetArchive): the application reads them and puts them before
	// Entries, then clears ArchiveHi, before sending. A FetchResp (no
	// Entries) takes what ArchiveLimit allows, at least one; a Promise
	// needs all of them (ArchiveLimit.Entries), or is not sent.
	ArchiveHi    uint64
	ArchiveLimit FetchLimit
	Entries      []Entry
}

// FillFromArchive completes m (ArchiveHi set) with entries read from the
// sender's archive by read(lo, hi, limit), which returns entries from lo
// on, in order, as many as it can at once. A fetch answer (no Entries yet)
// takes one read; a promise needs the whole range before its Entries, read
// by as many calls as it takes. It reports whether m may be sent (ArchiveHi
// is then 0). The daemon's OOB sender and the simulator share it.
func FillFromArchive(m *Message, read func(lo, hi uint64, lim FetchLimit) ([]Entry, error)) bool {
	var got []Entry
	lo, lim := m.Start, m.ArchiveLimit
	for lo < m.ArchiveHi {
		es, err := read(lo, m.ArchiveHi, lim)
		if err != nil || len(es) == 0 || es[0].Seq != lo {
			break
		}
		got = append(got, es...)
		lo += uint64(len(es))
		lim.Entries -= len(es)
		if len(m.Entries) == 0 {
			break // a fetch answer: one read is an answer
		}
	}
	if len(got) == 0 || (len(m.Entries) > 0 && lo != m.ArchiveHi) {
		return false
	}
	m.Entries, m.ArchiveHi = append(got, m.Entries...), 0
	return true
}

func (m Message) String() string {
	return fmt.Sprintf("%s %d->%d epoch=%d logEpoch=%d lo=%d start=%d agreed=%d entries=%d",
		m.Type, m.From, m.To, m.Epoch, m.LogEpoch, m.Lo, m.Start, m.Agreed, len(m.Entries))
}
