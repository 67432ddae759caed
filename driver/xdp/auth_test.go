//go:build linux

package xdp

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/goldvec"
)

// authRack is an n=5 rack at append 10 (history [4,3]) whose roster MACs
// are 02:00:00:00:00:0i, with a key other than the vectors'.
var (
	authKey    = [exo.TagKeyLen]byte{0xa5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0x5a}
	authRoster = func() []net.HardwareAddr {
		var r []net.HardwareAddr
		for i := range 5 {
			r = append(r, net.HardwareAddr{0x02, 0, 0, 0, 0, byte(i)})
		}
		return r
	}()
)

func authState() exo.Pointers {
	st := exo.NewPointers(1, 5, 1024)
	st.Append, st.Agreed = 10, 8
	st.History[0], st.History[1] = 4, 3
	return st
}

// sealedFrame is frame f sealed under key, behind an Ethernet header from
// src.
func sealedFrame(tb testing.TB, src net.HardwareAddr, f exo.Frame, key [exo.TagKeyLen]byte) []byte {
	tb.Helper()
	b, err := f.AppendSealed(nil, key)
	if err != nil {
		tb.Fatal(err)
	}
	return EthernetFrame(src, b)
}

// TestAuthDrops shows the frames an attacker on the segment can send
// dropped (XDP_DROP) and counted, each under its own counter: a forged
// tag, a frame of another group, a frame from a MAC that is not its
// sender's, a replay of an accepted frame; and the genuine frames passed.
func TestAuthDrops(t *testing.T) {
	p := loadOrSkip(t, false)
	st := authState()
	if err := p.SetState(st); err != nil {
		t.Fatal(err)
	}
	setKey(t, p, authKey)
	if err := p.SetRoster(authRoster); err != nil {
		t.Fatal(err)
	}
	if err := p.ResetCounters(); err != nil {
		t.Fatal(err)
	}
	rec, _ := exo.AppendRecord(nil, []byte("authentic"))
	f10 := exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Seq: 10, Count: 1, History: []uint8{4, 3}, Payload: rec}
	f11 := exo.Frame{Type: exo.FrameData, Group: 1, Sender: 1, Seq: 11, History: []uint8{0, 4}}
	other := f10
	other.Group = 2
	forgedTag := sealedFrame(t, authRoster[0], f10, authKey)
	forgedTag[exo.EthHeaderLen+exo.OffTag+7] ^= 1
	forgedPayload := sealedFrame(t, authRoster[0], f10, authKey)
	forgedPayload[len(forgedPayload)-1] ^= 0x20 // "authentiC", tag kept
	wrongKey := authKey
	wrongKey[0] ^= 1
	beyond := f10
	beyond.Sender = 7 // not a roster id: BAD_SENDER, not a foreign MAC

	var wantCounts [exo.NumReasons]uint64
	wantForeign := uint64(0)
	for _, c := range []struct {
		name    string
		frame   []byte
		reason  exo.Reason
		action  Action
		foreign bool
	}{
		{"forged tag (one bit)", forgedTag, exo.ReasonBadTag, ActionDrop, false},
		{"payload changed, tag kept", forgedPayload, exo.ReasonBadTag, ActionDrop, false},
		{"sealed under another key", sealedFrame(t, authRoster[0], f10, wrongKey), exo.ReasonBadTag, ActionDrop, false},
		{"unsealed (tag 0)", EthernetFrame(authRoster[0], mustMarshal(t, f10)), exo.ReasonBadTag, ActionDrop, false},
		{"another group (sealed under our key)", sealedFrame(t, authRoster[0], other, authKey), exo.ReasonBadGroup, ActionDrop, false},
		{"another group, forged tag", EthernetFrame(authRoster[0], mustMarshal(t, other)), exo.ReasonBadGroup, ActionDrop, false},
		{"genuine, from another host's MAC", sealedFrame(t, authRoster[2], f10, authKey), exo.ReasonBadSender, ActionDrop, true},
		{"genuine, from a MAC outside the roster", sealedFrame(t, testSrcMAC, f10, authKey), exo.ReasonBadSender, ActionDrop, true},
		{"forged tag from another host's MAC: the tag first", func() []byte {
			b := sealedFrame(t, authRoster[2], f10, authKey)
			b[exo.EthHeaderLen+exo.OffTag] ^= 0x80
			return b
		}(), exo.ReasonBadTag, ActionDrop, false},
		{"sender beyond the roster", sealedFrame(t, authRoster[0], beyond, authKey), exo.ReasonBadSender, ActionDrop, false},
		{"genuine seq 10 from its MAC", sealedFrame(t, authRoster[0], f10, authKey), exo.ReasonAccept, ActionPass, false},
		{"seq 10 replayed (tag and all)", sealedFrame(t, authRoster[0], f10, authKey), exo.ReasonDuplicate, ActionDrop, false},
		{"seq 10 replayed with padding", append(sealedFrame(t, authRoster[0], f10, authKey), 0, 0, 0, 0, 0), exo.ReasonDuplicate, ActionDrop, false},
		{"genuine seq 11, padded", append(sealedFrame(t, authRoster[1], f11, authKey), 0xee, 0xee), exo.ReasonAccept, ActionPass, false},
		{"seq 11 replayed", sealedFrame(t, authRoster[1], f11, authKey), exo.ReasonDuplicate, ActionDrop, false},
	} {
		v, err := p.Run(c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !v.HasReason || v.Reason != c.reason || v.Action != c.action || v.ForeignMAC != c.foreign {
			t.Errorf("%s: %v (foreign MAC %v), want %s %s (foreign MAC %v)", c.name, v, v.ForeignMAC, c.action, c.reason, c.foreign)
		}
		if c.foreign {
			wantForeign++
		} else {
			wantCounts[c.reason]++
		}
	}
	got, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if got != wantCounts {
		t.Errorf("reason counters %v, want %v", got, wantCounts)
	}
	if n, _ := p.ForeignMACs(); n != wantForeign {
		t.Errorf("foreign MAC counter %d, want %d", n, wantForeign)
	}
	after, _ := p.State()
	if after.Append != 12 || after.History[0] != 1 || after.History[1] != 0 {
		t.Errorf("state after: %s, want append 12 history [1,0]", goldvec.StateString(after))
	}
	t.Logf("counters: BAD_TAG %d, BAD_GROUP %d, BAD_SENDER %d, DUPLICATE %d, ACCEPT %d, foreign MAC %d",
		got[exo.ReasonBadTag], got[exo.ReasonBadGroup], got[exo.ReasonBadSender], got[exo.ReasonDuplicate], got[exo.ReasonAccept], wantForeign)
}

// TestAuthForeignMACEpoch: the roster MAC check holds a frame to its
// position's MAC only when the frame's epoch is not later than the
// state's (the daemon's rule, docs/security.md): a genuine frame of this
// or an older epoch from another MAC is dropped and counted as a foreign
// MAC; the same frame of a later epoch goes on to the state checks
// (FUTURE_EPOCH, passed, the slow path) so that a host that missed a
// membership change, after which positions shift, still learns it is
// behind. The tag and the group still come first, the other state rules
// still apply, and no pointer moves.
func TestAuthForeignMACEpoch(t *testing.T) {
	p := loadOrSkip(t, false)
	st := authState()
	st.Epoch = 3
	setKey(t, p, authKey)
	if err := p.SetRoster(authRoster); err != nil {
		t.Fatal(err)
	}
	if err := p.ResetCounters(); err != nil {
		t.Fatal(err)
	}
	outsider := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99} // no roster id's MAC
	at := func(epoch uint32) exo.Frame {
		return exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Epoch: epoch, Seq: 10, History: []uint8{4, 3}}
	}
	badHist := at(4)
	badHist.History = []uint8{4} // hist_len 1 of n = 5: BAD_HISTLEN
	forged := sealedFrame(t, authRoster[2], at(4), authKey)
	forged[exo.EthHeaderLen+exo.OffTag+3] ^= 0x10

	var wantCounts [exo.NumReasons]uint64
	wantForeign := uint64(0)
	for _, c := range []struct {
		name    string
		epoch   uint32 // the state's epoch for this run
		frame   []byte
		reason  exo.Reason
		action  Action
		foreign bool
	}{
		{"same epoch, another member's MAC", 3, sealedFrame(t, authRoster[2], at(3), authKey), exo.ReasonBadSender, ActionDrop, true},
		{"same epoch, a MAC outside the roster", 3, sealedFrame(t, outsider, at(3), authKey), exo.ReasonBadSender, ActionDrop, true},
		{"older epoch, another member's MAC (not STALE_EPOCH)", 3, sealedFrame(t, authRoster[2], at(2), authKey), exo.ReasonBadSender, ActionDrop, true},
		{"later epoch, another member's MAC", 3, sealedFrame(t, authRoster[2], at(4), authKey), exo.ReasonFutureEpoch, ActionPass, false},
		{"later epoch, a MAC outside the roster (the daemon checks known members)", 3, sealedFrame(t, outsider, at(4), authKey), exo.ReasonFutureEpoch, ActionPass, false},
		{"much later epoch, another member's MAC", 3, sealedFrame(t, authRoster[1], at(0xffffffff), authKey), exo.ReasonFutureEpoch, ActionPass, false},
		{"later epoch, its own MAC", 3, sealedFrame(t, authRoster[0], at(4), authKey), exo.ReasonFutureEpoch, ActionPass, false},
		{"later epoch, another member's MAC, forged tag: the tag first", 3, forged, exo.ReasonBadTag, ActionDrop, false},
		{"later epoch, another member's MAC, another group: the group first", 3, func() []byte {
			g := at(4)
			g.Group = 2
			return sealedFrame(t, authRoster[2], g, authKey)
		}(), exo.ReasonBadGroup, ActionDrop, false},
		{"later epoch, another member's MAC, wrong hist_len: the state rules apply", 3, sealedFrame(t, authRoster[2], badHist, authKey), exo.ReasonBadHistlen, ActionDrop, false},
		{"epoch 4 from another member's MAC once the state is at epoch 4", 4, sealedFrame(t, authRoster[2], at(4), authKey), exo.ReasonBadSender, ActionDrop, true},
		{"epoch 5 from another member's MAC, the state at epoch 4", 4, sealedFrame(t, authRoster[2], at(5), authKey), exo.ReasonFutureEpoch, ActionPass, false},
		{"epoch 4 from its own MAC, the state at epoch 4", 4, sealedFrame(t, authRoster[0], at(4), authKey), exo.ReasonAccept, ActionPass, false},
	} {
		s := st
		s.Epoch = c.epoch
		if err := p.SetState(s); err != nil {
			t.Fatal(err)
		}
		v, err := p.Run(c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !v.HasReason || v.Reason != c.reason || v.Action != c.action || v.ForeignMAC != c.foreign {
			t.Errorf("%s: %v (foreign MAC %v), want %s %s (foreign MAC %v)", c.name, v, v.ForeignMAC, c.action, c.reason, c.foreign)
		}
		if c.foreign {
			wantForeign++
		} else {
			wantCounts[c.reason]++
		}
		after, err := p.State()
		if err != nil {
			t.Fatal(err)
		}
		if c.reason != exo.ReasonAccept && (after.Epoch != s.Epoch || after.Append != s.Append || after.Agreed != s.Agreed || after.History != s.History) {
			t.Errorf("%s: state moved to %s", c.name, goldvec.StateString(after))
		}
	}
	got, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if got != wantCounts {
		t.Errorf("reason counters %v, want %v", got, wantCounts)
	}
	if n, _ := p.ForeignMACs(); n != wantForeign {
		t.Errorf("foreign MAC counter %d, want %d", n, wantForeign)
	}
	t.Logf("foreign MAC %d, FUTURE_EPOCH %d, BAD_TAG %d, BAD_GROUP %d, BAD_HISTLEN %d, ACCEPT %d",
		wantForeign, got[exo.ReasonFutureEpoch], got[exo.ReasonBadTag], got[exo.ReasonBadGroup], got[exo.ReasonBadHistlen], got[exo.ReasonAccept])
}

// TestAuthKeyAndRosterChanges: a new key makes the old key's frames
// BAD_TAG; an empty roster turns the MAC check off.
func TestAuthKeyAndRosterChanges(t *testing.T) {
	p := loadOrSkip(t, false)
	st := authState()
	f := exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Seq: 10, History: []uint8{4, 3}}
	run := func(frame []byte) Verdict {
		t.Helper()
		if err := p.SetState(st); err != nil {
			t.Fatal(err)
		}
		v, err := p.Run(frame)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Freshly loaded: no key slot valid (not even under the zero key), no
	// roster.
	if v := run(sealedFrame(t, testSrcMAC, f, [exo.TagKeyLen]byte{})); v.Reason != exo.ReasonBadTag {
		t.Errorf("zero key before SetKey: %v, want BAD_TAG (no key loaded)", v)
	}
	setKey(t, p, [exo.TagKeyLen]byte{})
	if v := run(sealedFrame(t, testSrcMAC, f, [exo.TagKeyLen]byte{})); v.Reason != exo.ReasonAccept {
		t.Errorf("zero key after SetKey(zero key): %v", v)
	}
	setKey(t, p, authKey)
	if v := run(sealedFrame(t, testSrcMAC, f, [exo.TagKeyLen]byte{})); v.Reason != exo.ReasonBadTag {
		t.Errorf("old key after SetKey: %v", v)
	}
	if v := run(sealedFrame(t, testSrcMAC, f, authKey)); v.Reason != exo.ReasonAccept {
		t.Errorf("new key, no roster: %v", v)
	}
	if err := p.SetRoster(authRoster); err != nil {
		t.Fatal(err)
	}
	if v := run(sealedFrame(t, testSrcMAC, f, authKey)); !v.ForeignMAC || v.Action != ActionDrop {
		t.Errorf("roster loaded, foreign MAC: %v", v)
	}
	setKey(t, p, authKey) // the key update keeps the roster
	if v := run(sealedFrame(t, testSrcMAC, f, authKey)); !v.ForeignMAC {
		t.Errorf("roster lost by SetKey: %v", v)
	}
	if err := p.SetRoster(authRoster); err != nil {
		t.Fatal(err)
	}
	if v := run(sealedFrame(t, authRoster[0], f, authKey)); v.Reason != exo.ReasonAccept {
		t.Errorf("key lost by SetRoster: %v", v)
	}
	if err := p.SetRoster(nil); err != nil {
		t.Fatal(err)
	}
	if v := run(sealedFrame(t, testSrcMAC, f, authKey)); v.Reason != exo.ReasonAccept || v.ForeignMAC {
		t.Errorf("empty roster: %v", v)
	}
	if err := p.SetRoster([]net.HardwareAddr{{1, 2, 3}}); err == nil {
		t.Error("a 3-byte MAC was taken")
	}
}

// TestAuthKeyPhase: the key phase bit (exo.FlagKeyPhase) picks the key
// slot a frame's tag is checked under, as exo.KeyRing.Verify does: each
// case runs through the program (BPF_PROG_TEST_RUN) and through the Go
// reference (UnmarshalBinary, then Pointers.ClassifyTagged under the same
// ring), and both must give the expected reason.
func TestAuthKeyPhase(t *testing.T) {
	p := loadOrSkip(t, false)
	keyA := authKey
	keyB := [exo.TagKeyLen]byte{0xb0, 0x0b, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xbb}
	st := authState()
	f := exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Seq: 10, History: []uint8{4, 3}}
	sealed := func(f exo.Frame, phase uint8, key [exo.TagKeyLen]byte) []byte {
		f.SealPhase(phase, key)
		return EthernetFrame(testSrcMAC, mustMarshal(t, f))
	}
	// withFlags is f sealed under key with its flags word set to flags
	// (also values the encoder refuses).
	withFlags := func(flags uint16, key [exo.TagKeyLen]byte) []byte {
		b := mustMarshal(t, f)
		binary.BigEndian.PutUint16(b[exo.OffFlags:], flags)
		if err := exo.Seal(b, key); err != nil {
			t.Fatal(err)
		}
		return EthernetFrame(testSrcMAC, b)
	}
	readmit := f
	readmit.Flags = exo.FlagReadmit | 2
	flipped := sealed(f, 0, keyA) // phase 0 under A, then the phase bit set: the tag covers it
	flipped[exo.EthHeaderLen+exo.OffFlags] |= exo.FlagKeyPhase >> 8

	both := exo.KeyRing{Key: [2][exo.TagKeyLen]byte{keyA, keyB}, Valid: [2]bool{true, true}}
	onlyA := exo.NewKeyRing(0, keyA)
	onlyB1 := exo.NewKeyRing(1, keyB)
	sameAA := exo.KeyRing{Key: [2][exo.TagKeyLen]byte{keyA, keyA}, Valid: [2]bool{true, true}}
	for _, c := range []struct {
		name   string
		ring   exo.KeyRing
		frame  []byte
		reason exo.Reason
	}{
		{"phase 1 under B, slot 1 = B", both, sealed(f, 1, keyB), exo.ReasonAccept},
		{"phase 1 under A (slot 0's key), slot 1 = B", both, sealed(f, 1, keyA), exo.ReasonBadTag},
		{"phase 0 under A, slot 1 = B", both, sealed(f, 0, keyA), exo.ReasonAccept},
		{"phase 0 under B (slot 1's key)", both, sealed(f, 0, keyB), exo.ReasonBadTag},
		{"phase 1 under B, slot 1 empty", onlyA, sealed(f, 1, keyB), exo.ReasonBadTag},
		{"phase 1 under A, slot 1 empty", onlyA, sealed(f, 1, keyA), exo.ReasonBadTag},
		{"phase 1 under the zero key, slot 1 empty", onlyA, sealed(f, 1, [exo.TagKeyLen]byte{}), exo.ReasonBadTag},
		{"phase 0 under A, slot 1 empty", onlyA, sealed(f, 0, keyA), exo.ReasonAccept},
		{"phase 0 under A, slot 0 empty (A retired)", onlyB1, sealed(f, 0, keyA), exo.ReasonBadTag},
		{"phase 0 under the zero key, slot 0 empty", onlyB1, sealed(f, 0, [exo.TagKeyLen]byte{}), exo.ReasonBadTag},
		{"phase 1 under B, slot 0 empty", onlyB1, sealed(f, 1, keyB), exo.ReasonAccept},
		{"phase bit set after sealing (both slots A)", sameAA, flipped, exo.ReasonBadTag},
		{"phase 1 under A, both slots A", sameAA, sealed(f, 1, keyA), exo.ReasonAccept},
		{"phase 1 readmit (flags 0xC002) under B", both, sealed(readmit, 1, keyB), exo.ReasonAccept},
		{"phase 0 readmit (flags 0x8002) under A", both, sealed(readmit, 0, keyA), exo.ReasonAccept},
		{"flags 0x4001 (host id without readmit)", both, withFlags(0x4001, keyB), exo.ReasonBadFlags},
		{"flags 0x6000 (phase and an unknown bit)", both, withFlags(0x6000, keyB), exo.ReasonBadFlags},
		{"flags 0x2000 (an unknown bit)", both, withFlags(0x2000, keyA), exo.ReasonBadFlags},
		{"flags 0xC100 (a bit above the host id)", both, withFlags(0xC100, keyB), exo.ReasonBadFlags},
		{"another group, phase 1, slot 1 empty", onlyA, func() []byte {
			g := f
			g.Group = 2
			return sealed(g, 1, keyB)
		}(), exo.ReasonBadGroup},
	} {
		if err := p.SetKeys(c.ring); err != nil {
			t.Fatal(err)
		}
		if err := p.SetState(st); err != nil {
			t.Fatal(err)
		}
		v, err := p.Run(c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := ActionDrop
		if c.reason == exo.ReasonAccept {
			want = ActionPass
		}
		if !v.HasReason || v.Reason != c.reason || v.Action != want {
			t.Errorf("%s: program %v, want %s %s", c.name, v, want, c.reason)
		}
		var g exo.Frame
		ref := exo.ReasonOf(g.UnmarshalBinary(c.frame[exo.EthHeaderLen:]))
		if ref == exo.ReasonAccept {
			ref = st.ClassifyTagged(&g, &c.ring)
		}
		if ref != c.reason {
			t.Errorf("%s: Go reference %s, want %s", c.name, ref, c.reason)
		}
	}
}

// TestAuthMaxFrame: the tag of the largest frame BPF_PROG_TEST_RUN hands
// the program in its linear buffer (a page less the XDP headroom and the
// skb_shared_info tailroom: 3520 bytes on x86-64; longer test data goes to
// fragments the program does not read) is checked over every byte. The
// program itself is verified for messages up to MaxFrame.
func TestAuthMaxFrame(t *testing.T) {
	p := loadOrSkip(t, false)
	st := exo.NewPointers(1, 1, 1024) // n=1: no history
	st.Append = 10
	setKey(t, p, authKey)
	frameOf := func(exoLen int) []byte {
		payload, _ := exo.AppendRecord(nil, make([]byte, exoLen-exo.HeaderLen-exo.RecordLenSize))
		f := exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Seq: 10, Count: 1, Payload: payload}
		return sealedFrame(t, testSrcMAC, f, authKey)
	}
	run := func(b []byte) Verdict {
		t.Helper()
		if err := p.SetState(st); err != nil {
			t.Fatal(err)
		}
		v, err := p.Run(b)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// The largest frame the test run keeps linear.
	var good []byte
	for n := MaxFrame; n > 1000; n-- {
		if b := frameOf(n); run(b).Reason == exo.ReasonAccept {
			good = b
			break
		}
	}
	if len(good) < 3000 {
		t.Fatalf("no sealed frame above 3000 bytes was accepted (largest %d)", len(good))
	}
	t.Logf("largest linear test frame: %d bytes (a %d-byte tag message)", len(good), len(good)-exo.EthHeaderLen-exo.SizeTag)
	for _, c := range []struct {
		name string
		at   int
	}{{"last byte", len(good) - 1}, {"byte 2000", exo.EthHeaderLen + 2000}, {"first record byte", exo.EthHeaderLen + exo.HeaderLen + exo.RecordLenSize}} {
		b := append([]byte(nil), good...)
		b[c.at] ^= 1
		if v := run(b); v.Reason != exo.ReasonBadTag {
			t.Errorf("%s flipped: %v, want BAD_TAG", c.name, v)
		}
	}
}

func mustMarshal(tb testing.TB, f exo.Frame) []byte {
	tb.Helper()
	b, err := f.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
