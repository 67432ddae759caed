package exo

import (
	"errors"
	"testing"
)

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
