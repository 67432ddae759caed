package daemon

import (
	"strings"
	"testing"
)

// TestHealth: each condition gives its level and says why; the most
// serious level wins and its reason comes first.
func TestHealth(t *testing.T) {
	ok := Status{ID: 1, Epoch: 4, Agreed: 100, Roster: []int{0, 1, 2}}
	for _, c := range []struct {
		name string
		edit func(*Status)
		want Health
		why  string
	}{
		{"in step", func(*Status) {}, Healthy, "member 1 in step"},
		{"skipped", func(s *Status) { s.Skipped = []int{2} }, Degraded, "positions [2] skipped"},
		{"behind", func(s *Status) { s.Recovery.BehindEntries = 40 }, Degraded, "behind the rack by 40"},
		{"behind an epoch", func(s *Status) { s.Recovery.BehindEpoch, s.Recovery.RackEpoch = true, 9 }, Degraded, "rack is in epoch 9"},
		{"spare", func(s *Status) { s.Removed, s.Halted = true, true }, Degraded, "not a member"},
		{"view change", func(s *Status) {
			s.Halted, s.Recovery.ViewChange = true, &ViewChangeStatus{Epoch: 7, Promised: []int{1}, Need: 2}
		}, Halted, "leading view change 7 (1 of 2"},
		{"stalled", func(s *Status) {
			s.Halted, s.Skipped, s.Recovery.ViewChange = true, []int{0}, &ViewChangeStatus{Epoch: 7, Ambiguous: true}
		}, Halted, "waits on hosts that lost their state"},
		{"promised", func(s *Status) { s.Halted, s.Promised = true, 8 }, Halted, "promised epoch 8"},
		{"transfer", func(s *Status) { s.Halted, s.Recovery.StateTransfer, s.Recovery.TransferTo = true, true, 900 }, Halted, "state transfer"},
		{"duplicate id", func(s *Status) { s.DuplicateID = &DuplicateIDStatus{MemberID: 1, MAC: "02:00:00:00:00:09"} }, Halted, "another host sends as member id 1"},
	} {
		s := ok
		c.edit(&s)
		h, why := s.Health()
		if h != c.want || len(why) == 0 || !strings.Contains(why[0], c.why) {
			t.Errorf("%s: %v %q, want %v and first %q", c.name, h, why, c.want, c.why)
		}
	}
}
