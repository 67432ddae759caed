package exo

import (
	"errors"
	"slices"
	"testing"
)

// TestKeyRotation: a 5-host rack rotates its key while it carries traffic.
// No host switches before every host staged the new key; every host
// switches; the old key is retired after the grace window; no genuine
// frame is ever rejected; the agreed logs are identical and hold every
// payload once; announcements never reach the applications' records.
func TestKeyRotation(t *testing.T) {
	const n = 5
	oldKey, newKey := [TagKeyLen]byte{1}, [TagKeyLen]byte{2}
	r := newRack(t, n, func(c *Config) { c.TagKey = oldKey; c.KeyGraceTicks = 20; c.PassDelay = 1 })
	var phases [2]int
	r.onFrame = func(from int, f Frame) { phases[KeyPhaseOf(f.Flags)]++ }
	published := 0
	step := func(ticks int) {
		for range ticks {
			for i, nd := range r.nodes {
				if err := nd.Propose([]byte{byte(i), byte(published), byte(published >> 8)}); err == nil {
					published++
				}
				r.collect(i)
			}
			r.tickAll()
			r.run(5000)
		}
	}
	step(20)
	// Stage at hosts 0..3: nobody may switch while host 4 lacks the key.
	for i := range 4 {
		ph, err := r.nodes[i].StageKey(newKey)
		if err != nil || ph != 1 {
			t.Fatalf("host %d: StageKey = %d, %v", i, ph, err)
		}
		r.collect(i)
	}
	if _, err := r.nodes[0].StageKey([TagKeyLen]byte{3}); !errors.Is(err, ErrKeyInFlight) {
		t.Fatalf("staging a second key: %v, want ErrKeyInFlight", err)
	}
	if _, err := r.nodes[0].StageKey(oldKey); !errors.Is(err, ErrKeyCurrent) {
		t.Fatalf("staging the current key: %v, want ErrKeyCurrent", err)
	}
	step(30)
	for i, nd := range r.nodes {
		ks := nd.KeyStatus()
		if ks.SendPhase != 0 {
			t.Fatalf("host %d switched before host 4 staged the key", i)
		}
		if i < 4 && !slices.Equal(ks.Waiting, []uint8{4}) {
			t.Fatalf("host %d waits for %v, want [4]", i, ks.Waiting)
		}
	}
	if phases[1] != 0 {
		t.Fatalf("%d frames in phase 1 before every host holds the key", phases[1])
	}
	if _, err := r.nodes[4].StageKey(newKey); err != nil {
		t.Fatal(err)
	}
	r.collect(4)
	step(10)
	for i, nd := range r.nodes {
		ks := nd.KeyStatus()
		if ks.SendPhase != 1 || ks.Staged || !ks.OldValid {
			t.Fatalf("host %d after every host staged: %+v", i, ks)
		}
	}
	step(40)
	for i, nd := range r.nodes {
		ks := nd.KeyStatus()
		if ks.OldValid || ks.Valid != [2]bool{false, true} || ks.Fingerprints[1] != KeyFingerprint(newKey) {
			t.Fatalf("host %d after the grace window: %+v", i, ks)
		}
	}
	before := phases[1]
	step(10)
	if phases[1] == before || phases[0] == 0 {
		t.Fatalf("frames per phase %v", phases)
	}
	for _, rej := range r.rejects {
		if rej.Reason == ReasonBadTag {
			t.Errorf("a genuine frame rejected: %+v", rej)
		}
	}
	// The logs agree, every payload once, and no announcement record
	// looks like a payload.
	seen := map[string]bool{}
	for _, e := range r.agreed[0] {
		_ = e.Records(func(rec []byte) error {
			if IsControlRecord(rec) {
				if _, ok := ParseKeyRecord(rec); !ok {
					t.Errorf("seq %d: a control record that is no key announcement", e.Seq)
				}
				return nil
			}
			if seen[string(rec)] {
				t.Errorf("payload %x agreed twice", rec)
			}
			seen[string(rec)] = true
			return nil
		})
	}
	for i := 1; i < n; i++ {
		m := min(len(r.agreed[0]), len(r.agreed[i]))
		for k := range m {
			if !r.agreed[0][k].Equal(&r.agreed[i][k]) {
				t.Fatalf("host %d: agreed entry %d differs", i, k)
			}
		}
	}
	if len(seen) < published-5*n {
		t.Fatalf("%d payloads agreed of %d published", len(seen), published)
	}
	// A frame under the retired key is refused now.
	f := r.agreed[0][len(r.agreed[0])-1].Frame(1)
	f.Seq += 1000
	f.SealPhase(0, oldKey)
	if got := r.nodes[1].StepFrame(&f); got != ReasonBadTag {
		t.Fatalf("a frame under the retired key: %s", got)
	}
	// And a second rotation goes back to phase 0.
	for i, nd := range r.nodes {
		if ph, err := nd.StageKey([TagKeyLen]byte{4}); err != nil || ph != 0 {
			t.Fatalf("host %d: second rotation: %d %v", i, ph, err)
		}
		r.collect(i)
	}
	step(10)
	for i, nd := range r.nodes {
		if ks := nd.KeyStatus(); ks.SendPhase != 0 {
			t.Fatalf("host %d: second rotation: %+v", i, ks)
		}
	}
	t.Logf("%d payloads agreed; frames in phase 0: %d, in phase 1: %d", len(seen), phases[0], phases[1])
}

// TestReservedKeyMagic: a user payload cannot pose as an announcement.
func TestReservedKeyMagic(t *testing.T) {
	r := newRack(t, 3, nil)
	rec := KeyAnnouncement{Phase: 1, Fingerprint: 7}.Record()
	if err := r.nodes[0].Propose(rec); !errors.Is(err, ErrReserved) {
		t.Fatalf("Propose(announcement) = %v, want ErrReserved", err)
	}
	if a, ok := ParseKeyRecord(rec); !ok || a.Phase != 1 || a.Fingerprint != 7 {
		t.Fatalf("ParseKeyRecord = %+v %v", a, ok)
	}
}

// TestKeySentSurvivesRestart: a host that switched to a new key, restarted
// from its durable state with the old key and the new one staged again
// (key_file and next_key_file), sends under the new key at once, whatever
// its log says: another member may have retired the old key meanwhile.
func TestKeySentSurvivesRestart(t *testing.T) {
	oldKey, newKey := [TagKeyLen]byte{1}, [TagKeyLen]byte{2}
	cfg := Config{ID: 0, Hosts: 3, Group: 1, TagKey: oldKey}
	nd, err := NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if hs := nd.HardStateMeta(); hs.KeySent != KeyFingerprint(oldKey) {
		t.Fatalf("KeySent %x, want the fingerprint of the old key", hs.KeySent)
	}
	// Restarted from a durable state that says it sent under newKey; its
	// (empty) log holds no announcement of the other members.
	hs := HardState{KeySent: KeyFingerprint(newKey)}
	r, err := RestartNode(cfg, hs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.StageKey(newKey); err != nil {
		t.Fatal(err)
	}
	ks := r.KeyStatus()
	if ks.SendPhase != 1 || ks.Staged || !ks.OldValid {
		t.Fatalf("after the restart: %+v, want sending under the new key (phase 1) with the old one still valid", ks)
	}
	if r.HardStateMeta().KeySent != KeyFingerprint(newKey) {
		t.Fatal("KeySent not kept")
	}
	// Without it, the same host waits for the others' announcements.
	r2, err := RestartNode(cfg, HardState{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.StageKey(newKey); err != nil {
		t.Fatal(err)
	}
	if ks := r2.KeyStatus(); ks.SendPhase != 0 || !ks.Staged || len(ks.Waiting) != 2 {
		t.Fatalf("a restart that had not switched: %+v", ks)
	}
}
