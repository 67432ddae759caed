package daemon

import (
	"github.com/exo-rack/exo/exo"
)

// decoder turns agreed entries, in sequence, into the application's
// messages: the roster tracker names each entry's sender (a member id), and
// a reassembler per sender joins a message's fragments. The delivery has
// one; a subscription that starts in the retained log has its own, started
// at a retained base with the roster there.
type decoder struct {
	tracker    *exo.RosterTracker
	reasm      map[uint8]*reassembler // by member id
	maxMessage int
}

func newDecoder(roster []uint8, hosts, maxMessage int) *decoder {
	return &decoder{tracker: exo.NewRosterTracker(roster, hosts), reasm: map[uint8]*reassembler{}, maxMessage: maxMessage}
}

// entry calls msg for each message that e completes, with the sender's
// member id, the message id, the record's index in the entry and the
// message's bytes (valid during the call), and bad for each fragment it
// cannot take. Configuration entries and control records carry no message.
func (dc *decoder) entry(e *exo.Entry, msg func(uid uint8, id uint64, idx uint16, data []byte), bad func(error)) {
	roster := dc.tracker.Observe(e)
	if _, ok := exo.ParseConfigEntry(e); ok || int(e.Sender) >= len(roster) {
		return
	}
	uid := roster[e.Sender]
	ra := dc.reasm[uid]
	if ra == nil {
		ra = &reassembler{}
		dc.reasm[uid] = ra
	}
	var idx uint16
	_ = e.Records(func(rec []byte) error {
		defer func() { idx++ }()
		if exo.IsControlRecord(rec) {
			return nil // a key announcement: for the core, no message
		}
		id, data, done, err := ra.add(rec, dc.maxMessage)
		switch {
		case err != nil:
			if bad != nil {
				bad(err)
			}
		case done:
			msg(uid, id, idx, data)
		}
		return nil
	})
}
