package daemon

import (
	"time"

	"github.com/exo-rack/exo/exo"
)

// vcTrace follows the view changes at this host for the log and the
// metrics, so that a run's daemon logs trace each one: started (with its
// cause), installed (at every host, and how long the view change took at
// the host that led it), and the first frame of the new epoch (how long
// the rack stood still after the install).
type vcTrace struct {
	started   map[uint32]vcStart // epochs this host proposed, not yet installed
	installed time.Time          // when this host last moved to a new epoch
	waiting   uint32             // that epoch, until its first frame (0: none)
}

type vcStart struct {
	at    time.Time
	cause exo.Cause
}

// start records that this host proposed epoch e.
func (t *vcTrace) start(e uint32, cause exo.Cause, now time.Time) {
	if t.started == nil {
		t.started = map[uint32]vcStart{}
	}
	if len(t.started) >= 64 { // proposals that never installed: keep the newest
		for k := range t.started {
			if k < e {
				delete(t.started, k)
			}
		}
	}
	t.started[e] = vcStart{now, cause}
}

// install records that this host moved to epoch e; led reports whether it
// proposed e itself, and then since when and why.
func (t *vcTrace) install(e uint32, now time.Time) (s vcStart, led bool) {
	s, led = t.started[e]
	for k := range t.started {
		if k <= e {
			delete(t.started, k)
		}
	}
	t.installed, t.waiting = now, e
	return s, led
}

// firstFrame returns the first entry of appended that is a frame of the
// epoch installed last, once per epoch.
func (t *vcTrace) firstFrame(appended []exo.Entry) (*exo.Entry, bool) {
	if t.waiting == 0 {
		return nil, false
	}
	for i := range appended {
		if appended[i].Epoch == t.waiting {
			t.waiting = 0
			return &appended[i], true
		}
	}
	return nil, false
}
