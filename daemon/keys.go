package daemon

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/exo"
)

// Key rotation without stopping the rack (docs/security.md section 5). The
// core holds the two frame-key slots and decides when to switch and when
// to retire the old key; the daemon reads key files, keeps the group key
// of each slot for the OOB handshake, and hands the slots to the fast path
// whenever they change.

// KeyedOOB is an OOB transport whose group keys change at run time: the
// primary key is proved, every key is accepted.
type KeyedOOB interface {
	SetKeys(primary []byte, others ...[]byte) error
}

// KeyOffload is a fast path that checks frame tags itself (the XDP
// program, the FPGA engine): the daemon writes both key slots whenever
// they change.
type KeyOffload interface {
	SetKeys(ring exo.KeyRing) error
}

// keyGraceTicks converts the grace window to ticks.
func keyGraceTicks(grace, tick time.Duration) int {
	if tick <= 0 || grace <= 0 {
		return exo.DefaultKeyGraceTicks
	}
	return max(1, int(grace/tick))
}

// KeyStatus is the key part of the status (exo key status).
type KeyStatus struct {
	SendPhase    int      `json:"send_phase"`
	Slots        [2]*Slot `json:"slots"`
	Staged       bool     `json:"staged"`
	Waiting      []int    `json:"waiting_for"`   // members whose announcement of the staged key is not in the log yet
	OldValid     bool     `json:"old_key_valid"` // the old key is still accepted after a switch
	GraceSeconds float64  `json:"grace_left_seconds"`
	NotMoved     []int    `json:"not_moved"` // members not yet seen sending under the new key
}

// Slot describes one key slot.
type Slot struct {
	Fingerprint string `json:"fingerprint"`
	File        string `json:"file,omitempty"`
}

// StageKeyFile reads a group key file and stages its frame key (the core's
// StageKey): this host accepts frames under it at once, announces it in
// its frames, and sends under it once every member announced it.
func (d *Daemon) StageKeyFile(path string) error {
	if !utf8.ValidString(path) || !filepath.IsAbs(path) || strings.ContainsRune(path, 0) {
		return &client.APIError{Code: client.CodeBadRequest, Text: fmt.Sprintf("key: the key file must be an absolute path on the daemon's host, got %q", path)}
	}
	g, err := ReadKey(path)
	if err != nil {
		return &client.APIError{Code: client.CodeBadRequest, Text: err.Error()}
	}
	d.core.Lock()
	defer d.core.Unlock()
	d.catchUpClock(time.Now(), false)
	d.quiesce("key")
	ph, err := d.node.StageKey(FrameKey(g))
	if err != nil {
		return &client.APIError{Code: client.CodeBadChange, Text: fmt.Sprintf("stage %s: %v", path, err)}
	}
	d.groupKeys[ph], d.keyFiles[ph] = g, path
	d.log.Info("key staged", "file", path, "phase", ph, "fingerprint", fmt.Sprintf("%016x", exo.KeyFingerprint(FrameKey(g))),
		"waiting_for", ints(d.node.KeyStatus().Waiting))
	d.metrics.keyEvents.WithLabelValues("staged").Inc()
	if err := d.keysChanged(); err != nil {
		return &client.APIError{Code: client.CodeBadChange, Text: err.Error()}
	}
	d.readyLocked()
	return nil
}

// RetireKey empties the key slot this host does not send under: it cancels
// a staged key, or ends the old key's grace window at once.
func (d *Daemon) RetireKey() error {
	d.core.Lock()
	defer d.core.Unlock()
	d.catchUpClock(time.Now(), false)
	d.quiesce("key")
	defer d.readyLocked()
	if !d.node.RetireKey() {
		return &client.APIError{Code: client.CodeBadChange, Text: "no key to retire: the other slot is empty"}
	}
	d.metrics.keyEvents.WithLabelValues("retired").Inc()
	if err := d.keysChanged(); err != nil {
		return &client.APIError{Code: client.CodeBadChange, Text: err.Error()}
	}
	d.readyLocked()
	return nil
}

// keysChanged follows the core's key slots: the frame-tag check of the
// daemon's own MAC rule, the OOB keys, the fast path. Called with d.core
// held.
func (d *Daemon) keysChanged() error {
	ks := d.node.KeyStatus()
	d.ring = d.node.Keys()
	for ph := range 2 {
		if !ks.Valid[ph] {
			d.groupKeys[ph], d.keyFiles[ph] = nil, ""
		}
		d.keyFPs[ph] = ks.Fingerprints[ph]
	}
	d.metrics.keyPhase.Set(float64(ks.SendPhase))
	if ko, ok := d.oob.(KeyedOOB); ok {
		if err := ko.SetKeys(d.groupKeys[ks.SendPhase], d.groupKeys[1-ks.SendPhase]); err != nil {
			return fmt.Errorf("daemon: oob keys: %w", err)
		}
	}
	if d.off != nil {
		if ko, ok := d.off.off.(KeyOffload); ok {
			if err := ko.SetKeys(d.ring); err != nil {
				return fmt.Errorf("daemon: offload %s: keys: %w", d.off.off.Name(), err)
			}
		}
	}
	return nil
}

// keyStatus is the key part of the status. Called with d.core held.
func (d *Daemon) keyStatus() *KeyStatus {
	ks := d.node.KeyStatus()
	st := &KeyStatus{SendPhase: int(ks.SendPhase), Staged: ks.Staged, OldValid: ks.OldValid,
		GraceSeconds: (d.cfg.Tick * time.Duration(ks.GraceTicks)).Seconds(), Waiting: ints(ks.Waiting), NotMoved: ints(ks.NotMoved)}
	for ph := range 2 {
		if ks.Valid[ph] {
			st.Slots[ph] = &Slot{Fingerprint: fmt.Sprintf("%016x", ks.Fingerprints[ph]), File: d.keyFiles[ph]}
		}
	}
	return st
}

func ints(xs []uint8) []int {
	out := []int{}
	for _, x := range xs {
		out = append(out, int(x))
	}
	return out
}
