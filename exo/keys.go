package exo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Key rotation (docs/security.md section 5). A host holds two key slots,
// phase 0 and phase 1; the FlagKeyPhase bit of every frame names the slot
// whose key its tag is under, and a frame naming an empty slot is BAD_TAG.
// One slot holds the key the host sends under; the other is empty, or
// holds a new key being rotated in, or the old key during its grace
// window.
//
// A rotation, on every host, without stopping the rack:
//
//  1. StageKey(new): the new key goes into the free slot. The host now
//     accepts frames under both keys and still sends under the old one.
//     Every frame it sends from now on, until the grace window ends,
//     starts with a key announcement record (KeyMagic, the phase, the new
//     key's fingerprint): "I hold this key". A host that sends under a key
//     another member announces announces it again in its next frame: an
//     announcement lost with entries a view change dropped is made good.
//  2. A host switches its own frames to the new phase once its log holds
//     an announcement of that key from every other member of its current
//     roster: no member can then drop its frames as BAD_TAG. Switching is
//     a local decision; since every host's log is the same sequence, the
//     hosts switch within a token rotation of each other.
//  3. The old slot is emptied once KeyGraceTicks have passed since the
//     switch and every member of the roster has been seen sending under
//     the new key: a host never drops the key another member still sends
//     under. Not while a membership change is pending in the log, nor at
//     a host outside the roster. Frames under the old key are BAD_TAG from
//     then on.
//
// Every host also announces its key once more at every roster switch (a
// member just added may wait for it), and a restarted host whose durable
// state says it sent under the key it stages (HardState.KeySent) switches
// to it at once.
//
// The log entries themselves do not depend on the key: the phase bit is the
// frame's (entries keep flags without it), a re-sent entry is sealed under
// the sender's key of the moment, and OOB transfers carry entries, not
// frames.

// KeyMagic starts the key announcement record, the first record of an entry
// whose sender holds a staged key. User payloads that start with it are
// refused (ErrReserved).
var KeyMagic = []byte("\xE0EXOKEY1")

// keyRecordLen is the length of a key announcement record: KeyMagic, the
// phase byte, the 8-byte big-endian fingerprint.
const keyRecordLen = 8 + 1 + 8

// Errors of StageKey.
var (
	ErrKeyInFlight = errors.New("exo: a key rotation is already in flight")
	ErrKeyCurrent  = errors.New("exo: the staged key is the key in use")
)

// KeyAnnouncement says that its entry's sender holds the key with
// Fingerprint in slot Phase.
type KeyAnnouncement struct {
	Phase       uint8
	Fingerprint uint64
}

// Record returns the payload record of a.
func (a KeyAnnouncement) Record() []byte {
	r := make([]byte, 0, keyRecordLen)
	r = append(append(r, KeyMagic...), a.Phase)
	return binary.BigEndian.AppendUint64(r, a.Fingerprint)
}

// ParseKeyRecord reports whether rec is a key announcement record, and its
// content.
func ParseKeyRecord(rec []byte) (KeyAnnouncement, bool) {
	if len(rec) != keyRecordLen || !bytes.HasPrefix(rec, KeyMagic) || rec[len(KeyMagic)] > 1 {
		return KeyAnnouncement{}, false
	}
	return KeyAnnouncement{Phase: rec[len(KeyMagic)], Fingerprint: binary.BigEndian.Uint64(rec[len(KeyMagic)+1:])}, true
}

// ParseKeyEntry reports whether e's first record is a key announcement.
func ParseKeyEntry(e *Entry) (KeyAnnouncement, bool) {
	if e.Count == 0 || len(e.Payload) < 2+keyRecordLen || e.Payload[2] != KeyMagic[0] ||
		int(e.Payload[0])<<8|int(e.Payload[1]) != keyRecordLen {
		return KeyAnnouncement{}, false
	}
	return ParseKeyRecord(e.Payload[2 : 2+keyRecordLen])
}

// IsControlRecord reports whether rec is a record the core wrote (a
// configuration or key announcement record), not an application payload:
// embedders skip it when they deliver records.
func IsControlRecord(rec []byte) bool {
	if len(rec) == 0 || rec[0] != ConfigMagic[0] {
		return false
	}
	if _, ok := ParseKeyRecord(rec); ok {
		return true
	}
	return bytes.HasPrefix(rec, ConfigMagic)
}

// reserved reports whether a user payload starts with a magic the core
// reserves.
func reserved(payload []byte) bool {
	return len(payload) > 0 && payload[0] == ConfigMagic[0] &&
		(bytes.HasPrefix(payload, ConfigMagic) || bytes.HasPrefix(payload, KeyMagic))
}

// KeyFingerprint names a key without revealing it: SipHash-2-4 under the
// key of the string "exo key fingerprint v1" (a PRF output: it tells which
// key, not what key).
func KeyFingerprint(key [TagKeyLen]byte) uint64 {
	return SipHash24(key, []byte("exo key fingerprint v1"))
}

// KeyPhaseOf returns the key phase (0 or 1) a flags value names.
func KeyPhaseOf(flags uint16) uint8 {
	if flags&FlagKeyPhase != 0 {
		return 1
	}
	return 0
}

// KeyRing is the two key slots a frame's tag is checked against: the
// frame's key phase picks the slot; an invalid slot verifies nothing.
type KeyRing struct {
	Key   [2][TagKeyLen]byte
	Valid [2]bool
}

// NewKeyRing returns a ring with key in slot phase and the other slot
// empty.
func NewKeyRing(phase uint8, key [TagKeyLen]byte) KeyRing {
	var r KeyRing
	r.Key[phase&1], r.Valid[phase&1] = key, true
	return r
}

// Verify reports whether f.Tag is the tag of f under the key of the slot
// f's key phase names.
func (r *KeyRing) Verify(f *Frame) bool {
	ph := KeyPhaseOf(f.Flags)
	return r.Valid[ph] && f.VerifyTag(r.Key[ph])
}

// VerifyBytes reports whether the encoded frame b carries the tag of b
// under the key of the slot its key phase names; false if b is too short
// to hold its message.
func (r *KeyRing) VerifyBytes(b []byte) bool {
	if len(b) < HeaderLen {
		return false
	}
	ph := KeyPhaseOf(binary.BigEndian.Uint16(b[OffFlags:]))
	return r.Valid[ph] && VerifyTag(b, r.Key[ph])
}

// SealPhase sets f's key phase bit to phase and f.Tag to the tag under key.
func (f *Frame) SealPhase(phase uint8, key [TagKeyLen]byte) {
	f.Flags &^= FlagKeyPhase
	if phase&1 == 1 {
		f.Flags |= FlagKeyPhase
	}
	f.Seal(key)
}

// keyState is a host's two key slots and the rotation in flight.
type keyState struct {
	ring     KeyRing
	w        [2][2]uint64 // SipHash k0, k1 of each slot
	send     uint8        // phase of the frames this host sends
	staged   bool         // slot 1-send holds a new key not yet sent under
	announce bool         // frames this host sends carry the announcement of the new key
	// reannounce: another member announced the key this host sends under
	// (it waits for every member's announcement, and this host's may have
	// been lost with entries a view change dropped): the next frame this
	// host sends carries it once more.
	reannounce bool
	grace      int // ticks left before the old slot (1-send) may be emptied; 0: none running
	// oldValid: since the switch, slot 1-send still holds the old key;
	// moved: the members (bit per member id) seen sending under the new
	// key since (a tag-checked frame of this host's send phase). The old
	// key is retired once the grace window has passed and every member
	// of the roster has moved: a host never drops the key another member
	// still sends under (it could not hear that member, nor learn that it
	// falls behind).
	oldValid bool
	moved    [4]uint64
	// sentFP is the fingerprint of the key sent under (HardState.KeySent);
	// restartFP the one the durable state had at a restart: staging that
	// key switches to it at once.
	sentFP, restartFP uint64
	// ann holds each member's newest announcement seen in the log (by
	// member id); nil until the first one.
	ann map[uint8]KeyAnnouncement
}

func newKeyState(phase uint8, key [TagKeyLen]byte) keyState {
	ks := keyState{ring: NewKeyRing(phase, key), send: phase, sentFP: KeyFingerprint(key)}
	ks.w[phase][0], ks.w[phase][1] = sipKey(&key)
	return ks
}

// verifyBytes checks the tag of the encoded frame b (at least HeaderLen
// bytes: it decoded) under the slot its phase names.
func (ks *keyState) verifyBytes(b []byte) bool {
	ph := KeyPhaseOf(binary.BigEndian.Uint16(b[OffFlags:]))
	return ks.ring.Valid[ph] && verifyBytes(ks.w[ph][0], ks.w[ph][1], b)
}

// verify checks f's tag, from its fields.
func (ks *keyState) verify(f *Frame) bool {
	ph := KeyPhaseOf(f.Flags)
	return ks.ring.Valid[ph] && f.Tag == tagOfFields(ks.w[ph][0], ks.w[ph][1], f)
}

// seal sets f's phase and tag for sending.
func (ks *keyState) seal(f *Frame) {
	if ks.send == 1 {
		f.Flags |= FlagKeyPhase
	}
	f.Tag = tagOfFields(ks.w[ks.send][0], ks.w[ks.send][1], f)
}

// KeyStatus describes a host's key slots and rotation.
type KeyStatus struct {
	SendPhase    uint8     // key phase of the frames this host sends
	Valid        [2]bool   // slots holding a key
	Fingerprints [2]uint64 // KeyFingerprint of each valid slot's key
	// Staged: slot 1-SendPhase holds a new key this host does not send
	// under yet; Waiting lists the members (ids) whose announcement of it
	// the log does not hold yet.
	Staged  bool
	Waiting []uint8
	// OldValid: since a switch, slot 1-SendPhase still holds the old
	// key. It is retired once GraceTicks (the grace window left) is 0 and
	// no member is left in NotMoved (members not yet seen sending under
	// the new key); RetireKey forces it.
	OldValid   bool
	GraceTicks int
	NotMoved   []uint8
}

// KeyStatus returns the state of this host's keys.
func (nd *Node) KeyStatus() KeyStatus {
	ks := &nd.keys
	st := KeyStatus{SendPhase: ks.send, Valid: ks.ring.Valid, Staged: ks.staged, GraceTicks: ks.grace, OldValid: ks.oldValid}
	if ks.oldValid {
		st.NotMoved = nd.notMoved()
	}
	for i := range 2 {
		if ks.ring.Valid[i] {
			st.Fingerprints[i] = KeyFingerprint(ks.ring.Key[i])
		}
	}
	if ks.staged {
		st.Waiting = nd.keyWaiting()
	}
	return st
}

// Keys returns a copy of this host's key ring (for an offload engine that
// checks tags in front of the core).
func (nd *Node) Keys() KeyRing { return nd.keys.ring }

// StageKey puts key into the free key slot and starts a rotation to it
// (see the comment at the top of keys.go): the host accepts frames under
// it from now on, announces it in its frames, and sends under it once the
// log shows every other member holds it too. It returns the new key's
// phase. Staging the key already staged announces it again and is not an
// error; staging another key while one is staged is ErrKeyInFlight. Staging
// while the last rotation's old key is still held retires that key.
func (nd *Node) StageKey(key [TagKeyLen]byte) (uint8, error) {
	ks := &nd.keys
	next := 1 - ks.send
	if key == ks.ring.Key[ks.send] {
		return 0, ErrKeyCurrent
	}
	if ks.staged && key == ks.ring.Key[next] {
		ks.announce = true
		nd.checkKeySwitch()
		return next, nil
	}
	if ks.staged {
		return 0, fmt.Errorf("%w: slot %d holds another staged key (RetireKey cancels it)", ErrKeyInFlight, next)
	}
	if ks.oldValid {
		// The last rotation's old key is still held for a member not yet
		// seen under the new one: the operator moves on, the old key goes.
		nd.RetireKey()
	}
	if nd.cfg.MaxBatchBytes < 2+keyRecordLen {
		return 0, fmt.Errorf("%w: MaxBatchBytes %d cannot carry the %d-byte announcement", ErrConfig, nd.cfg.MaxBatchBytes, 2+keyRecordLen)
	}
	ks.ring.Key[next], ks.ring.Valid[next] = key, true
	ks.w[next][0], ks.w[next][1] = sipKey(&key)
	ks.staged, ks.announce = true, true
	if ks.restartFP != 0 && ks.restartFP == KeyFingerprint(key) {
		// This host sent under it before it restarted: go on doing so.
		nd.switchKey()
		return next, nil
	}
	nd.checkKeySwitch()
	return next, nil
}

// RetireKey empties the slot this host does not send under: it cancels a
// staged key, or ends the old key's grace window at once. It reports
// whether the slot held a key.
func (nd *Node) RetireKey() bool {
	ks := &nd.keys
	old := 1 - ks.send
	had := ks.ring.Valid[old]
	ks.ring.Key[old], ks.ring.Valid[old] = [TagKeyLen]byte{}, false
	ks.w[old] = [2]uint64{}
	ks.staged, ks.announce, ks.grace, ks.oldValid = false, false, 0, false
	if had {
		nd.event(EventKeyRetired, nd.p.Epoch, nd.p.Append, old)
	}
	return had
}

// keyWaiting returns the members whose announcement of the staged key the
// log does not hold (this host aside).
func (nd *Node) keyWaiting() []uint8 {
	ks := &nd.keys
	want := KeyAnnouncement{Phase: 1 - ks.send, Fingerprint: KeyFingerprint(ks.ring.Key[1-ks.send])}
	var w []uint8
	for _, u := range nd.ms.roster {
		if a, ok := ks.ann[u]; u != nd.uid && (!ok || a != want) {
			w = append(w, u)
		}
	}
	return w
}

// checkKeySwitch switches this host's frames to the staged key once every
// other member announced it.
func (nd *Node) checkKeySwitch() {
	ks := &nd.keys
	if !ks.staged || len(nd.keyWaiting()) > 0 {
		return
	}
	nd.switchKey()
}

// switchKey makes the staged key the one this host sends under.
func (nd *Node) switchKey() {
	ks := &nd.keys
	ks.send = 1 - ks.send
	ks.sentFP = KeyFingerprint(ks.ring.Key[ks.send])
	ks.staged = false
	ks.grace = nd.cfg.KeyGraceTicks
	ks.oldValid = true
	ks.moved = [4]uint64{}
	ks.moved[nd.uid/64] |= 1 << (nd.uid % 64)
	nd.event(EventKeySwitch, nd.p.Epoch, nd.p.Append, ks.send)
}

// observeKey records the key announcement e carries, if any (e is the
// newest entry of the log, under the current roster).
func (nd *Node) observeKey(e *Entry) {
	a, ok := ParseKeyEntry(e)
	if !ok {
		return
	}
	u := nd.uidOf(e.Sender)
	if u == HistoryNone {
		return
	}
	if nd.keys.ann == nil {
		nd.keys.ann = make(map[uint8]KeyAnnouncement)
	}
	nd.keys.ann[u] = a
	ks := &nd.keys
	if u != nd.uid && !ks.staged && a.Phase == ks.send && a.Fingerprint == KeyFingerprint(ks.ring.Key[ks.send]) {
		ks.reannounce = true
	}
	nd.checkKeySwitch()
}

// sawPhase notes that the member at position sender sent a frame whose tag
// verified under the key of slot phase.
func (nd *Node) sawPhase(sender uint8, phase uint8) {
	ks := &nd.keys
	if ks.oldValid && phase == ks.send {
		if u := nd.uidOf(sender); u != HistoryNone {
			ks.moved[u/64] |= 1 << (u % 64)
		}
	}
}

// notMoved returns the members not yet seen sending under the new key.
func (nd *Node) notMoved() []uint8 {
	var w []uint8
	for _, u := range nd.ms.roster {
		if nd.keys.moved[u/64]&(1<<(u%64)) == 0 {
			w = append(w, u)
		}
	}
	return w
}

// tickKeys counts the old key's grace window down, and retires the old
// key once it has passed and every member sends under the new one.
func (nd *Node) tickKeys() {
	ks := &nd.keys
	if !ks.oldValid {
		return
	}
	if ks.grace > 0 {
		ks.grace--
	}
	// Not while a membership change is pending (its next roster may hold
	// a member still on the old key), nor outside the roster (a host that
	// is not a member is not waited for: it keeps hearing the old key).
	if ks.grace == 0 && len(nd.notMoved()) == 0 && !nd.ms.pend && !nd.ms.hasNext && !nd.Removed() {
		ks.oldValid = false
		ks.announce = false
		old := 1 - ks.send
		ks.ring.Key[old], ks.ring.Valid[old] = [TagKeyLen]byte{}, false
		ks.w[old] = [2]uint64{}
		nd.event(EventKeyRetired, nd.p.Epoch, nd.p.Append, old)
	}
}

// announcement returns the record the next frame this host sends starts
// with, or nil.
func (nd *Node) announcement() []byte {
	ks := &nd.keys
	if !ks.announce && !ks.reannounce {
		return nil
	}
	ks.reannounce = false
	ph := 1 - ks.send // staged
	if !ks.staged {
		ph = ks.send // switched: the key now sent under
	}
	return KeyAnnouncement{Phase: ph, Fingerprint: KeyFingerprint(ks.ring.Key[ph])}.Record()
}

// clone is keyState's part of Node.Clone.
func (ks keyState) clone() keyState {
	if ks.ann != nil {
		m := make(map[uint8]KeyAnnouncement, len(ks.ann))
		for k, v := range ks.ann {
			m[k] = v
		}
		ks.ann = m
	}
	return ks
}
