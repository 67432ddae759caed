package daemon

import (
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/exo"
)

// Two daemons claiming one member id (a copied config, a second start on
// the same host, a cloned machine) are an operator fault that the crash
// model does not cover and that can split the agreed log: two hosts send
// different entries under one position. The data_dir lock and the API
// socket check (lock.go) refuse a second daemon on the same host; this
// file catches one anywhere else on the segment. A daemon that receives a
// frame of its own epoch and roster that carries its own position as the
// sender, sealed with the group key, and is not a frame it sent (not the
// entry its log holds at that seq), knows that another host sends as its
// member id. It raises an alarm (one ERROR line, exo_duplicate_id_alarm,
// exo_duplicate_id_frames_total and the status's duplicate_id) and stops
// sending for the rest of its life: no frame, no OOB message, its fast
// path halted for good, publishes and roster changes refused. Which of the
// two is "right" cannot be told from here, so both go silent as soon as
// each sees the other; the rest of the rack goes on without them as
// without a crashed host (docs/operator.md, "Duplicate member id").
//
// What is not taken for another host:
//   - this host's own frames: the socket does not see them
//     (PACKET_IGNORE_OUTGOING), and a copy that comes back anyway (a
//     hairpin, a loop, a replay with their source MAC) is the entry the log
//     holds at its seq;
//   - its retransmissions and a restart from its durable log: the same
//     frames (fsync batch logs every frame before it leaves);
//   - frames of another epoch, or below the seq the current roster
//     applies from: positions there may name other hosts (a roster change
//     shifts them);
//   - frames from the MAC of another current member: that port is the
//     member's own, and the attack tests' insider with the key (exo raw
//     --kind forged-sender) sends from it; the roster MAC check drops
//     them at every host (foreign_mac) as before;
//   - frames whose seq the log no longer holds (compacted) or without a
//     valid tag;
//   - an amnesiac host (--join): it sends nothing and holds no log to
//     compare with.
//
// Nobody relays frames (OOB repair is not on the wire), so a frame with
// this host's position that passes these checks was sent by another host
// under its member id. Only frames that reach the daemon are seen: with
// offload xdp (and fpga-sim) the fast path drops a frame from a MAC that
// is not its sender's before the daemon, and in token mode the frames the
// fast path accepts come up as records (checked as they are read, but the
// fast path has acted on them first).

// dupAlarm is the duplicate member id alarm (core lock held for every
// field).
type dupAlarm struct {
	raised bool
	member int    // this host's member id
	pos    uint8  // its position when the alarm was raised
	mac    string // the source MAC of the first frame
	macs   []string
	ownMAC bool // the first frame came from this host's own MAC
	at     time.Time
	epoch  uint32
	seq    uint64
	frames uint64 // frames seen under this host's member id that it did not send
	// Withheld while raised: frames and OOB messages the core wanted sent.
	heldFrames, heldMsgs uint64
	f                    exo.Frame // scratch for records (token mode)

	framesTotal prometheus.Counter
	alarm       prometheus.Gauge
}

// maxDupMACs bounds the source MACs the status lists.
const maxDupMACs = 4

func (a *dupAlarm) init(reg *prometheus.Registry) {
	a.framesTotal = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "exo", Name: "duplicate_id_frames_total",
		Help: "Frames that carry this host's member id (its position) in its epoch and roster, sealed with the group key, that it did not send: another host sends as this member id."})
	a.alarm = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "exo", Name: "duplicate_id_alarm",
		Help: "1 once another host was seen sending as this host's member id: this host stopped sending (the status's duplicate_id says from which MAC and what to check)."})
	reg.MustRegister(a.framesTotal, a.alarm)
}

// claimsOwnID reports whether f, received from src (raw: its bytes from
// the Exo header on), was sent by another host under this host's member
// id, and if so counts it and raises the alarm (core lock held). The
// caller drops such a frame: the core must not take it for one of its
// own. A frame from another MAC is counted as foreign_mac as well (the
// roster MAC check's count, which it skips).
func (d *Daemon) claimsOwnID(f *exo.Frame, src net.HardwareAddr, raw []byte) bool {
	if f.Sender != d.pos || d.pos == exo.HistoryNone || f.Group != d.cfg.Group {
		return false // the common case: one compare
	}
	nd := d.node
	p := nd.Pointers()
	if nd.Amnesiac() || f.Epoch != p.Epoch || f.Seq < nd.ConfigSwitch() {
		return false
	}
	own := d.MAC()
	if !bytesEqual(src, own) {
		for i, hw := range d.rawMACs {
			if uint8(i) != d.pos && bytesEqual(src, hw) {
				return false // another member's port (see above)
			}
		}
	}
	if e, ok := nd.Entry(f.Seq); ok {
		if e.Equal(&exo.Entry{Seq: f.Seq, Epoch: f.Epoch, Sender: f.Sender, History: f.History, Count: f.Count,
			Flags: f.Flags &^ exo.FlagKeyPhase, Payload: f.Payload}) {
			return false // this host's own frame, back again
		}
	} else if f.Seq < p.Append {
		return false // compacted: cannot tell (an old frame)
	}
	if !d.ring.VerifyBytes(raw) {
		return false // not sealed with the group key: the core's BAD_TAG
	}
	if !bytesEqual(src, own) {
		d.metrics.foreignMAC.Inc()
	}
	d.raiseDup(src, f)
	return true
}

// raiseDup counts a frame of another host under this host's member id and
// raises the alarm on the first (core lock held).
func (d *Daemon) raiseDup(src net.HardwareAddr, f *exo.Frame) {
	a := &d.dup
	a.frames++
	a.framesTotal.Inc()
	mac := src.String()
	if len(a.macs) < maxDupMACs && !slices.Contains(a.macs, mac) {
		a.macs = append(a.macs, mac)
	}
	if a.raised {
		return
	}
	a.raised, a.member, a.pos, a.mac, a.ownMAC, a.at, a.epoch, a.seq =
		true, d.cfg.ID, d.pos, mac, bytesEqual(src, d.MAC()), time.Now(), f.Epoch, f.Seq
	a.alarm.Set(1)
	d.log.Error("DUPLICATE MEMBER ID: another host sends as this host's member id; this host stops sending (no frame, no OOB message) until it is restarted",
		"member_id", d.cfg.ID, "position", d.pos, "from_mac", mac, "own_mac", a.ownMAC, "epoch", f.Epoch, "seq", f.Seq,
		"check", dupCheck(a.ownMAC), "fix", dupFix)
}

// checkRecord is claimsOwnID for a record of the fast path in token mode
// (core lock held): it raises the alarm; the record is stepped all the
// same (the fast path acted on it already), and the fast path is halted
// for good at the next tokenSync. It reports whether the record is such a
// frame.
func (d *Daemon) checkRecord(frame, src []byte) bool {
	if len(frame) <= exo.OffSender || frame[exo.OffSender] != d.pos || d.pos == exo.HistoryNone || len(src) != 6 {
		return false
	}
	if d.dup.f.UnmarshalBinary(frame) != nil {
		return false
	}
	return d.claimsOwnID(&d.dup.f, src, frame)
}

// dupStopped reports whether the alarm stopped this host's sends (core
// lock held).
func (d *Daemon) dupStopped() bool { return d.dup.raised }

// withholdSends drops the frames and OOB messages of a Ready while the
// alarm is raised (core lock held): rd is the caller's copy.
func (d *Daemon) withholdSends(rd *exo.Ready) {
	if !d.dup.raised {
		return
	}
	d.dup.heldFrames += uint64(len(rd.Frames))
	d.dup.heldMsgs += uint64(len(rd.Messages))
	rd.Frames, rd.Messages = nil, nil
}

// dupRefusal is the error of a publish or a roster change while the alarm
// is raised, nil otherwise (core lock held).
func (d *Daemon) dupRefusal() *client.APIError {
	if !d.dup.raised {
		return nil
	}
	return &client.APIError{Code: client.CodeShuttingDown,
		Text: fmt.Sprintf("this host stopped sending: another host sends as its member id %d (from MAC %s; exo status says what to check)", d.dup.member, d.dup.mac)}
}

// dupFix is what the operator does about the alarm.
const dupFix = "stop one of the two daemons; give the other host its own member id (list it in every host's config, then exo roster add or exo roster replace); restart this daemon once only one host sends as this id"

// dupCheck is where the other sender may be.
func dupCheck(ownMAC bool) string {
	if ownMAC {
		return "the frames come from this host's own MAC: a cloned machine (a copy of this host, MAC included, on the segment), or a second daemon for this id behind another port with this MAC"
	}
	return "a copied config (another host started with this host's id, its roster entry edited), a second daemon for this id on another host, a cloned machine"
}

// DuplicateIDStatus is the status's duplicate_id: another host was seen
// sending as this host's member id, and this host stopped sending.
type DuplicateIDStatus struct {
	MemberID  int       `json:"member_id"`
	Position  int       `json:"position"`
	MAC       string    `json:"mac"`  // source MAC of the first frame
	MACs      []string  `json:"macs"` // the source MACs seen (up to 4)
	OwnMAC    bool      `json:"own_mac"`
	FirstSeen time.Time `json:"first_seen"`
	Epoch     uint32    `json:"epoch"`
	Seq       uint64    `json:"seq"`
	Frames    uint64    `json:"frames"`
	// StoppedSending: this host sends nothing (always true with the
	// alarm); the frames and OOB messages withheld since.
	StoppedSending bool   `json:"stopped_sending"`
	HeldFrames     uint64 `json:"frames_withheld"`
	HeldMessages   uint64 `json:"oob_messages_withheld"`
	Message        string `json:"message"`
	Check          string `json:"check"`
	Fix            string `json:"fix"`
}

// dupStatus is the status's duplicate_id, nil without the alarm (core
// lock held).
func (d *Daemon) dupStatus() *DuplicateIDStatus {
	a := &d.dup
	if !a.raised {
		return nil
	}
	return &DuplicateIDStatus{MemberID: a.member, Position: int(a.pos), MAC: a.mac, MACs: append([]string(nil), a.macs...),
		OwnMAC: a.ownMAC, FirstSeen: a.at, Epoch: a.epoch, Seq: a.seq, Frames: a.frames,
		StoppedSending: true, HeldFrames: a.heldFrames, HeldMessages: a.heldMsgs,
		Message: fmt.Sprintf("another host sends as member id %d from MAC %s; this host stopped sending", a.member, a.mac),
		Check:   dupCheck(a.ownMAC), Fix: dupFix}
}
