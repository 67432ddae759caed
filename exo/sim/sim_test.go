package sim

import (
	"testing"

	"github.com/exo-rack/exo/exo"
)

func runSeeds(t *testing.T, hosts int, seeds uint64, opt func(int, uint64) Options) {
	t.Helper()
	for seed := uint64(1); seed <= seeds; seed++ {
		o := opt(hosts, seed)
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Fatalf("hosts=%d seed=%d: %v\nreplay: go run ./cmd/exo sim --hosts %d --seed %d --seeds 1 -v", hosts, seed, err, hosts, seed)
		}
	}
}

func TestSimNoFaults(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 7} {
		runSeeds(t, n, 5, NoFaults)
	}
}

func TestSimFaults(t *testing.T) {
	for _, n := range []int{3, 4, 5} {
		runSeeds(t, n, 20, DefaultOptions)
	}
}

// TestLongFaults: faults held as long as the lab's nemesis holds them,
// with the daemon's timing (Options.FaultTicks, LabTiming), keep every
// property, and the majority stall is measured: a fault-free run's is
// within a token timeout; a faulty run's is longer (some hold of the
// agreement pointer while a connected majority recovers) and ends within
// the faulty phase. Seed 1's was 4,184 ticks before the token-stuck rule,
// 756 with its first version, 1,209 with probes and the conditions on the
// view change (testdata/walkthrough/token_stuck.txt is its case).
func TestLongFaults(t *testing.T) {
	long := func(hosts int, seed uint64) Options {
		o := DefaultOptions(hosts, seed)
		o.LabTiming, o.FaultTicks, o.Ticks, o.Quiet = true, 2000, 12000, 8000
		// Crashes unannounced (no gone notices), as when these figures
		// were taken: with notices seed 1's longest stall is 39 ticks,
		// and the runs are other runs.
		o.Config.GoneTicks = 0
		return o
	}
	for _, seed := range []uint64{1, 2, 3, 158} {
		o := long(5, seed)
		if seed == 158 {
			// Two hosts far behind led view changes in turn, each
			// preempting the last, and the halted witnesses' promise
			// timeouts restarted with every one: no host converged in the
			// quiet phase (before the view change for a host behind was
			// led by one host at a time).
			o.Ticks = 40000
		}
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Fatalf("seed %d: %v\nreplay: go run ./cmd/exo sim --hosts 5 --seed %d --seeds 1 --lab-timing --fault-ticks 2000 --ticks %d --quiet 8000 -v", seed, err, seed, o.Ticks)
		}
		if st := s.Stats; st.MajorityStall <= 40 || st.MajorityStallAt > o.Ticks {
			t.Errorf("seed %d: majority stall %d ticks, ended at tick %d", seed, st.MajorityStall, st.MajorityStallAt)
		}
	}
	o := NoFaults(5, 1)
	o.LabTiming, o.Ticks = true, 4000
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats; st.MajorityStall == 0 || st.MajorityStall > 40 {
		t.Errorf("no faults: majority stall %d ticks (the token timeout is 40)", st.MajorityStall)
	}
}

// TestLeftOutAtTheFloor: seed 164 of 7 hosts with the daemon's timing,
// its token timeout adaptive from 40 to 200 ticks: a host halted 3,000
// entries behind heard the rack append without it for 1,600 ticks before
// its left-out view change (which waited 2 ceilings doubled four times,
// 6,400 ticks), caught up 150 ticks before the quiet phase ended, and was
// still waiting to rejoin with 629 proposals when it did. The wait counts
// in the floor now, as it did with the fixed timeout.
func TestLeftOutAtTheFloor(t *testing.T) {
	o := DefaultOptions(7, 164)
	o.LabTiming, o.FaultTicks, o.Ticks, o.Quiet = true, 2000, 4000, 2000
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(); err != nil {
		t.Fatalf("%v\nreplay: go run ./cmd/exo sim --hosts 7 --seed 164 --seeds 1 --lab-timing --fault-ticks 2000 --ticks 4000 --quiet 2000 -v", err)
	}
}

// TestSimForgedFrames: with an attacker that forges copies of frames (no
// key), every forged copy is rejected as BAD_TAG (the run checks it) and
// the rack's properties still hold.
func TestSimForgedFrames(t *testing.T) {
	forged := uint64(0)
	for _, n := range []int{3, 5} {
		runSeeds(t, n, 10, func(hosts int, seed uint64) Options {
			o := DefaultOptions(hosts, seed)
			o.Forge = 0.05
			return o
		})
		s, _ := New(func() Options { o := DefaultOptions(n, 1); o.Forge = 0.05; return o }())
		_ = s.Run()
		if s.Stats.Forged == 0 || s.Stats.Rejects[exo.ReasonBadTag] < s.Stats.Forged/2 {
			t.Fatalf("n=%d: %d forged, %d BAD_TAG", n, s.Stats.Forged, s.Stats.Rejects[exo.ReasonBadTag])
		}
		forged += s.Stats.Forged
	}
	t.Logf("%d forged frames, every one BAD_TAG", forged)
}

// TestRegressionSeeds replays seeds that once failed during development;
// each line names what broke.
func TestRegressionSeeds(t *testing.T) {
	for _, c := range []struct {
		hosts   int
		seed    uint64
		amnesia float64
		why     string
		keys    float64 // Options.KeyRotations
		roster  float64 // Options.RosterChanges
	}{
		{3, 10, 0, "two hosts duelling view changes while the third was amnesiac", 0, 0},
		{3, 114, 0, "holder computed as a host in its own history: token stuck", 0, 0},
		{3, 40, 0, "token stuck after skips", 0, 0},
		{16, 18, 0, "non-responders skipped at install, then re-admission storms", 0, 0},
		{16, 11, 0, "rejoin view changes every RejoinTicks", 0, 0},
		{7, 502, 0.2, "an amnesiac host restarted again before any Ready came back non-amnesiac", 0, 0},
		{7, 889, 0.2, "same as 502", 0, 0},
		{16, 3536, 0, "an entry reported dropped by one view change was kept by a later one", 0, 0},
		{3, 1, 0, "two orphans at one seq: the first was never reported", 0, 0},
		{5, 1, 0, "a host more than SeqWindow behind rejected every frame as SEQ_TOO_FAR and never caught up (found by exo lab chaos, then by the sim with a small window)", 0, 0},
		{5, 1, 0, "key rotation: no announcement was ever parsed (record length off by one: the records reached the checker as payloads): no host switched", 0.02, 0},
		{5, 5, 0, "key rotation: a host's announcements were all dropped by view changes and it stopped announcing: the others waited forever (fix: re-announce the key sent under when another member announces it)", 0.02, 0},
		{3, 9, 0, "key rotation: a host switched, fell behind, retired the old key on a timer and heard nothing again (fix: retire only once every member was seen under the new key)", 0.02, 0},
		{3, 46, 0, "key rotation: a host restarted mid-rotation with the new key alone (fix: old + staged new, as next_key_file)", 0.02, 0},
		{5, 258, 0, "key rotation with roster changes: an old key held for a re-added member blocked the next stage (fix: staging retires it)", 0.02, 0.01},
	} {
		o := DefaultOptions(c.hosts, c.seed)
		o.Config.MaxFetchEntries = exo.DefaultMaxFetchEntries // as they were found, before fetch batches and OOB bandwidth were modelled
		o.OOBEntriesPerStep = 0
		o.Amnesia = c.amnesia
		o.KeyRotations, o.RosterChanges = c.keys, c.roster
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Errorf("hosts=%d seed=%d (%s): %v", c.hosts, c.seed, c.why, err)
		}
	}
}

// TestFetchBatchSeeds replays seeds that failed once fetch responses were
// capped as the daemon caps them (Config.MaxFetchEntries, 4 here): the lab
// rack's SAFETY events and its host that never caught up (issue 12).
// Before the fix, a capped response of a later epoch was adopted as if it
// were that epoch's whole log.
func TestFetchBatchSeeds(t *testing.T) {
	for _, c := range []struct {
		hosts int
		seed  uint64
		why   string
	}{
		{3, 17, "a host adopted a later epoch's first batch, then sent frames of its own and fetched forever (every entry it lacked was of an older epoch: STALE_EPOCH): left behind for good"},
		{7, 10, "same at 7 hosts"},
		{5, 229, "the answer to a fetch sent before an install moved the agreement pointer, one batch long, was taken for the later epoch's whole log: SAFETY"},
		{7, 60, "same at 7 hosts"},
		{5, 539, "SAFETY twice, and a host left behind"},
	} {
		o := DefaultOptions(c.hosts, c.seed)
		o.OOBEntriesPerStep = 0 // as they were found
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Errorf("hosts=%d seed=%d (%s): %v", c.hosts, c.seed, c.why, err)
		}
	}
}

// TestIdleBackoffSeeds replays seeds that did not converge once the idle
// back-off was modelled at the daemon's scale (Config.IdleBackoffMax 64
// and 256): a host that an install of a later epoch could not reach (it
// lacked what precedes the install's suffix) began to catch up only when
// one of the rack's frames came, and an idle rack sends one per back-off.
// It now catches up from the install's initiator at once.
func TestIdleBackoffSeeds(t *testing.T) {
	for _, c := range []struct {
		hosts, backoff int
		seed           uint64
	}{{3, 64, 556}, {3, 256, 556}} {
		o := DefaultOptions(c.hosts, c.seed)
		o.Config.IdleBackoffMax = c.backoff
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Errorf("hosts=%d seed=%d idle back-off %d: %v", c.hosts, c.seed, c.backoff, err)
		}
	}
}

// TestViewChangeDuelSeeds replays seeds that never converged once the OOB
// network's bandwidth was modelled (Options.OOBEntriesPerStep): the lab
// rack's stalls of 20-50 s (issue 12). A host far behind made every
// install carry its gap to every host; the installs took longer than the
// others' view-change timeout, so they started view changes of their own
// that preempted each other; and a host far behind led view changes that
// halted the rack and never completed, while its own promise made it
// refuse the rack's later epoch. Fixed by installs that carry each host
// only what it lacks, witnesses that refuse to promise to an initiator far
// behind them (it catches up instead, or they lead the view change), and
// initiators that give their own view change up for the rack's later
// epoch.
func TestViewChangeDuelSeeds(t *testing.T) {
	for _, c := range []struct {
		hosts int
		seed  uint64
	}{{3, 556}, {3, 1111}, {5, 331}, {5, 388}, {5, 452}, {7, 243}, {7, 315},
		// Hosts behind in the rack's own epoch (their log diverged) led view
		// changes, one after the other, that never completed: now a host
		// that refuses one leads it itself.
		{5, 4537}, {5, 14183}, {5, 14259}, {7, 2099}, {7, 11291},
		// A host restarted with a promise to its own dead view change was
		// refused by hosts far ahead and could not give it up: it now
		// adopts their log halted and leads from there; the answers of
		// two epochs to its catch-up undid each other (the later epoch's
		// now wins); and the two others sat in two epochs that never
		// began, each waiting for the other to send.
		{3, 10127},
		// With the rule above too eager (before every takeover had its
		// turn) and installs to hosts that had not answered starting at
		// the initiator's agreement pointer, 16 hosts went from view
		// change to view change, four of them one entry behind.
		{16, 375}, {16, 397}} {
		s, err := New(DefaultOptions(c.hosts, c.seed))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Errorf("hosts=%d seed=%d: %v", c.hosts, c.seed, err)
		}
	}
}

// TestCatchUpSendSeeds replays seeds of key rotations that never converged
// once fetch batches and OOB bandwidth were modelled.
func TestCatchUpSendSeeds(t *testing.T) {
	for _, c := range []struct {
		hosts, seed, bandwidth int
		why                    string
	}{
		{3, 2, 4, "a host that adopted a prefix of a later epoch's log sent a frame at its end at once, which contradicted the rack's entry there: a view change each time it caught up (fix: it sends nothing before its log reaches the end of the log it adopted from)"},
		{3, 6, 1, "a rotation waiting for a host behind: every frame carried a key announcement, so the idle back-off never began and the rack outran the host's catch-up (fix: an announcement alone is an idle pass)"},
		{5, 3, 1, "same"},
	} {
		o := DefaultOptions(c.hosts, uint64(c.seed))
		o.KeyRotations, o.OOBEntriesPerStep = 0.02, c.bandwidth
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Errorf("hosts=%d seed=%d (%s): %v", c.hosts, c.seed, c.why, err)
		}
	}
}

// TestNextTickIdle: on a rack with no faults and no load, most ticks are
// promised silent by NextTick (the daemon sleeps through them); every run
// checks that the promise holds.
func TestNextTickIdle(t *testing.T) {
	o := NoFaults(5, 1)
	o.ProposeP = 0
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if s.Stats.Ticks == 0 || s.Stats.SilentTicks*2 < s.Stats.Ticks {
		t.Fatalf("%d of %d ticks promised silent", s.Stats.SilentTicks, s.Stats.Ticks)
	}
	t.Logf("%d of %d ticks promised silent", s.Stats.SilentTicks, s.Stats.Ticks)
}

// TestDeterministic: a seed fully determines a run.
func TestDeterministic(t *testing.T) {
	run := func() Stats {
		s, err := New(DefaultOptions(5, 77))
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Run()
		return s.Stats
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("two runs of seed 77 differ:\n%+v\n%+v", a, b)
	}
	// Seed 1902 of --hosts 3 --amnesia 0.2 --roster-changes 0.02
	// --accept-loss ran two ways, one run in a few: a pipelined catch-up
	// took the answers it kept ahead in the map's order, and a view
	// change read its promises so too. Nothing in the core may depend on
	// the order a map is walked in.
	o := DefaultOptions(3, 1902)
	o.Amnesia, o.RosterChanges, o.AcceptLoss = 0.2, 0.02, true
	var first Stats
	for k := range 10 {
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Run()
		if k == 0 {
			first = s.Stats
		} else if s.Stats != first {
			t.Fatalf("run %d of seed 1902 differs from the first:\n%+v\n%+v", k, first, s.Stats)
		}
	}
}

// TestSimRosterChanges: members remove hosts, add them back and add a spare
// host under drops, partitions and crashes; the checker checks agreement,
// the switch points (every host switches where the agreed log says, to the
// roster it says) and that consecutive rosters differ by one host.
func TestSimRosterChanges(t *testing.T) {
	for _, n := range []int{3, 4, 5} {
		switches := uint64(0)
		runSeeds(t, n, 15, func(hosts int, seed uint64) Options {
			o := DefaultOptions(hosts, seed)
			o.RosterChanges = 0.03
			return o
		})
		for seed := uint64(1); seed <= 3; seed++ {
			o := DefaultOptions(n, seed)
			o.RosterChanges = 0.03
			s, _ := New(o)
			_ = s.Run()
			switches += s.Stats.RosterChanges
		}
		if switches == 0 {
			t.Fatalf("n=%d: no roster switch in 3 seeds", n)
		}
		t.Logf("n=%d: %d roster switches in seeds 1..3", n, switches)
	}
}

// TestKeyRotationRosterSeeds replays seeds of key rotations combined with
// membership changes that once let a member drop genuine frames of another
// member as BAD_TAG; none may now (Stats.GenuineBadTag, counted but not a
// violation when rosters change: see Options.KeyRotations).
func TestKeyRotationRosterSeeds(t *testing.T) {
	for _, c := range []struct {
		hosts int
		seed  uint64
		why   string
	}{
		{3, 25, "a member removed and re-added missed a rotation: the operator now stages the new key on hosts outside the roster at once"},
		{3, 58, "a member added while a rotation ran had not staged the key when others had switched (same fix)"},
		{3, 31, "a host being removed lacked the key the new roster's first frames used (the check now counts only hosts in each other's roster)"},
		{5, 209, "a restart in a rotation went back to the old key while a member had retired it"},
		{3, 242, "a restart of the only member took the newest key alone though it had never switched"},
		{3, 630, "a host that had switched restarted under the old key (fix: HardState.KeySent)"},
		{3, 580, "a re-added member waited forever for announcements of members that had stopped announcing (fix: re-announce at every roster switch)"},
		{3, 122, "a non-member retired the old key it still needed once added back (fix: no retire outside the roster or while a change is pending)"},
	} {
		o := DefaultOptions(c.hosts, c.seed)
		o.Config.MaxFetchEntries = exo.DefaultMaxFetchEntries // as they were found
		o.OOBEntriesPerStep = 0
		o.KeyRotations, o.RosterChanges = 0.02, 0.02
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Errorf("hosts=%d seed=%d (%s): %v", c.hosts, c.seed, c.why, err)
		}
		if s.Stats.GenuineBadTag != 0 {
			t.Errorf("hosts=%d seed=%d (%s): %d genuine frames BAD_TAG between members", c.hosts, c.seed, c.why, s.Stats.GenuineBadTag)
		}
	}
}

// TestSimToken runs racks whose hosts all hold the token in a fast path
// (Options.Token: exo.Engine's rule, the daemon's control plane), with
// every fault, roster changes and key rotations.
func TestSimToken(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 7} {
		runSeeds(t, n, 20, func(hosts int, seed uint64) Options {
			o := DefaultOptions(hosts, seed)
			o.Token = true
			return o
		})
	}
	runSeeds(t, 3, 20, func(hosts int, seed uint64) Options {
		o := DefaultOptions(hosts, seed)
		o.Token, o.RosterChanges, o.KeyRotations = true, 0.02, 0.02
		return o
	})
	s, _ := New(func() Options { o := NoFaults(5, 1); o.Token = true; return o }())
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats.Token; st.Sent == 0 || st.Fast == 0 || st.Handoffs == 0 {
		t.Fatalf("5 hosts without faults: the fast paths did not run the token: %+v", st)
	}
	t.Logf("5 hosts, no faults: %d of %d frames sent by the fast paths, %d hand-offs", s.Stats.Token.Sent, s.Stats.Frames, s.Stats.Token.Handoffs)
}

// TestTokenSeeds replays token-mode seeds that failed during development.
func TestTokenSeeds(t *testing.T) {
	for _, c := range []struct {
		hosts  int
		seed   uint64
		roster float64
		why    string
	}{
		{3, 61, 0.02, "a host that missed a membership change while its fast path was halted heard nothing: the fast path dropped the later epoch's frames as BAD_SENDER/BAD_HISTLEN (fix: a fast path that sends hands them up)"},
		{3, 59, 0, "a restarted host's fast path had no state: it dropped every frame as BAD_GROUP and the core never heard the rack (fix: a halted fast path is written the core's pointers)"},
		{5, 332, 0.02, "a core bug the token's timing exposed: a host that gave its view change up while its log ended at an effective roster change was no longer halted, took the token over in the old epoch, and its entry (sent under the old roster) was never reported dropped: a message lost (fix: giveUp keeps a log that ends at a switch halted)"},
	} {
		o := DefaultOptions(c.hosts, c.seed)
		o.Token, o.RosterChanges = true, c.roster
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Errorf("hosts=%d seed=%d (%s): %v", c.hosts, c.seed, c.why, err)
		}
	}
}

// TestRosterChangeFateSeeds replays seeds in which an operator's roster
// change never took effect nor ended (Sim.operators: the wait of
// `exo roster`), found after TestRackTokenFaults' `exo roster replace`
// waited 60 s on a rack churning view changes: the change was voided and
// nothing proposed it again.
func TestRosterChangeFateSeeds(t *testing.T) {
	for _, c := range []struct {
		hosts int
		seed  uint64
		token bool
		why   string
	}{
		{5, 1, false, "a view change voided the change (its epoch ended first) and nothing proposed it again"},
		{5, 67, false, "the change, cut by a view change, was not proposed again because another host's change was in flight"},
		{5, 285, false, "an install appended agreed entries again: the void among them was recorded after its delivery and the change stayed in flight for ever"},
		{3, 904, false, "an install replayed an old removal of this host: its queued change was dropped"},
		{5, 23, false, "this host was removed by another change: its queued change stayed in flight for ever"},
		{5, 21, true, "with the fast path: the change was cut while another was in flight, and dropped"},
	} {
		o := DefaultOptions(c.hosts, c.seed)
		o.RosterChanges, o.Token = 0.02, c.token
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Errorf("hosts=%d seed=%d token=%v (%s): %v", c.hosts, c.seed, c.token, c.why, err)
		}
	}
}

// TestStateTransferSeeds replays seeds with compacted logs (KeepEntries,
// as the daemon's keep_entries) that fail when a piece of the state
// transfer is taken out (transfer.go); each line names the mutants that
// fail it. Before state transfer, a host that lost its state, or fell
// behind every member's log, could not rejoin a compacted rack at all.
func TestStateTransferSeeds(t *testing.T) {
	for _, c := range []struct {
		hosts   int
		seed    uint64
		amnesia float64
		roster  float64
		why     string
	}{
		{3, 2, 0.2, 0, "a host behind every member's log base fetched for ever (no past-floor)"},
		{5, 9, 0.2, 0, "an amnesiac host could not start from a compacted member's base (no past-floor, no floor jump)"},
		{3, 25, 0.2, 0, "an amnesiac host's transfer never ended (no floor jump)"},
		{3, 5, 0, 0.02, "an amnesiac host's view change met witnesses compacted past its log and retried for ever (no return to the transfer, no floor jump)"},
		{3, 4, 0, 0.02, "a log compacted inside a configuration change restarted without the change pending (compaction inside a change)"},
		{5, 2, 0, 0.02, "all of the above with roster changes at 5 hosts"},
		{5, 131, 0.2, 0.02, "a compaction to a change's entry that came right after another change's switch kept the roster before that switch (a host that started there by state transfer switched to other rosters than the rack)"},
	} {
		o := DefaultOptions(c.hosts, c.seed)
		o.KeepEntries, o.Amnesia, o.RosterChanges = 32, c.amnesia, c.roster
		if c.seed == 131 {
			o.KeepEntries = 16
		}
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Errorf("hosts=%d seed=%d amnesia=%g roster=%g (%s): %v", c.hosts, c.seed, c.amnesia, c.roster, c.why, err)
		}
		if s.Stats.Compactions == 0 {
			t.Errorf("hosts=%d seed=%d: no compaction: the seed no longer tests the transfer", c.hosts, c.seed)
		}
	}
}

// TestTransferTurnSeeds: once a state transfer's batches went to the
// members in turn, the turn came back to one member (the others late), a
// late answer of that member was taken for the answer to the fetch under
// way, and each such answer sent the same fetch again: the host asked for
// each batch eight times and was still in its transfer at the quiet
// phase's end (fix: only the answer from where the fetch under way asked
// moves the transfer on).
func TestTransferTurnSeeds(t *testing.T) {
	o := DefaultOptions(5, 358)
	o.Amnesia = 0.2
	runClean(t, o)
}

// TestStateTransferStalls: with compacted logs (KeepEntries 16, hosts
// losing their disk at a fifth of restarts), runs that stall on anything
// other than an ambiguous fork stay rare. Such stalls are not violations
// (an amnesiac host may leave a rack unable to decide safely), so the seed
// tests above do not see them; this bound does. Measured on seeds 1..200:
// 2 at 3 hosts, 1 at 5; without the return to the transfer when witnesses
// were compacted past an amnesiac initiator's log, 47 and 44.
func TestStateTransferStalls(t *testing.T) {
	for _, hosts := range []int{3, 5} {
		plain := 0
		for seed := uint64(1); seed <= 200; seed++ {
			o := DefaultOptions(hosts, seed)
			o.KeepEntries, o.Amnesia = 16, 0.2
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Run(); err != nil {
				t.Fatalf("hosts=%d seed=%d: %v", hosts, seed, err)
			}
			if s.Stats.Stalled && !s.Stats.StalledAmbiguous {
				plain++
			}
		}
		t.Logf("hosts=%d: %d of 200 runs stalled other than on an ambiguous fork", hosts, plain)
		if plain > 10 {
			t.Errorf("hosts=%d: %d of 200 runs stalled other than on an ambiguous fork (measured 1-2; 44-47 without the return to the transfer)", hosts, plain)
		}
	}
}

// TestAcceptLossReleasesStalls: with the operator's override
// (Options.AcceptLoss), no run stalls on lost state any more, and every
// entry an override replaced was in the doubt it reported and delivered
// only by hosts that lost their state (the checker's rule; none was
// replaced on these seeds: the branches in doubt were never agreed).
// Without it, 3 of the 600 runs stall (1, 2 and 0; 1, 17 and 12 before a
// branch needed the chain of frames that would have agreed it).
func TestAcceptLossReleasesStalls(t *testing.T) {
	total := uint64(0)
	for _, hosts := range []int{3, 5, 7} {
		stalled, accepted := 0, uint64(0)
		for seed := uint64(1); seed <= 200; seed++ {
			o := DefaultOptions(hosts, seed)
			o.Amnesia, o.AcceptLoss = 0.2, true
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Run(); err != nil {
				t.Errorf("hosts=%d seed=%d: %v", hosts, seed, err)
			}
			if s.Stats.Stalled {
				stalled++
			}
			accepted += s.Stats.AcceptedLosses
		}
		t.Logf("hosts=%d: %d overrides, %d runs still stalled", hosts, accepted, stalled)
		if stalled > 0 {
			t.Errorf("hosts=%d: %d runs stalled after %d overrides, want none stalled", hosts, stalled, accepted)
		}
		total += accepted
	}
	// The override ran (a fork that only a lost disk can decide is rarer
	// since a branch needs the chain of frames that would have agreed it:
	// none at 7 hosts in these seeds).
	if total == 0 {
		t.Errorf("no override in %d runs: the test shows nothing", 3*200)
	}
}

// TestFarBehindDuelSeed: two hosts far behind led view changes in turn,
// each preempting the last before its promises came, and the halted
// witnesses restarted their promise timeouts with every prepare: no host
// that could lead did, and the run never converged (a halted witness that
// promised one host far behind and then another keeps its timeout).
func TestFarBehindDuelSeed(t *testing.T) {
	o := DefaultOptions(5, 365)
	o.Amnesia, o.KeepEntries, o.Retain = 0.2, 16, 100000
	runClean(t, o)
}

// runClean runs the simulator with o and fails the test on a violation.
func runClean(t *testing.T, o Options) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
}

// TestPastFloorRosterOfTwo replays a run where a host removed from the
// roster, and re-added once the rack's only member had compacted far past
// its log, fetched for ever: it became amnesiac (to rejoin by state
// transfer) only once h+1 = 2 members had answered past its pointer, and
// the roster of two had one other member. It stalled for good before
// floorReached counted every other member as enough.
func TestPastFloorRosterOfTwo(t *testing.T) {
	o := DefaultOptions(3, 329)
	o.Amnesia, o.KeepEntries, o.RosterChanges = 0.2, 16, 0.02
	runClean(t, o)
}

// TestRosterAmnesiaSeeds replays runs that combine roster changes with
// hosts losing their disks (--amnesia with --roster-changes, and the
// operator's override): each stalled for good before the fix it names.
func TestRosterAmnesiaSeeds(t *testing.T) {
	for _, c := range []struct {
		hosts int
		seed  uint64
		keep  int
		why   string
	}{
		{3, 22, 0, "an amnesiac host restarts with the first roster: it asked members that had left, stopped at a lagging one, and led view changes nobody current answered (fix: back to the transfer from the rack's roster)"},
		{3, 76, 0, "the same, after a remove and an add"},
		{3, 17, 0, "an override installed at the other member of a roster of two, which the amnesiac host ignored (fix: an amnesiac host takes a forced install it promised)"},
		{3, 84, 0, "the same at another seed"},
		{3, 687, 32, "with compaction: an amnesiac initiator went back to the transfer but asked a member that had no more, not the witness that had (fix: ask that witness first)"},
		{5, 2929, 0, "a transfer ended at the word of a lagging member though another had reported more (fix: the highest agreement pointer reported counts)"},
		{3, 292, 32, "with compaction: two floor jumps in one Ready delivered the entries of the first after the second began the stream (fix: a jump drops what the Ready delivered before it)"},
		{3, 265, 0, "the operator accepted the loss at a member while the host that lost its state had just started a view change of its own, which then took no install (fix: the operator looks at a host that lost its state first, as the guide says)"},
		{5, 174, 0, "an amnesiac initiator whose log ends before a roster change asked the old roster's members only and never reached a majority of the new one (fix: a witness's unknown roster's members are asked too)"},
		{3, 467, 0, "a roster of one whose only member lost its disk: the rack's log was held by spares only, which nobody asked, and the override refused (fix: the amnesiac initiator asks the hosts it knows of outside the roster, and the operator resolves with what they hold)"},
		{3, 4179, 0, "the same at another seed"},
		{3, 7162, 0, "the same, where the operator resolved with one spare's log while another spare that held and delivered more had not answered (fix: with no member as witness, every host asked must answer first)"},
		{3, 4819, 0, "an amnesiac initiator's view changes from seq 0 timed out before their promises (whole logs) came, three times, and its transfer began too late to end in the quiet phase (fix: a promise to an earlier view change of its own sends it back to the transfer too)"},
		{3, 9161, 0, "the same at another seed"},
		{3, 5230, 0, "a roster of one whose member lost its disk: a spare of the config that no roster named, which had announced it held 37 more agreed entries, was not asked, and the override replaced what it had delivered (fix: every host that said what it holds is asked)"},
		{3, 7174, 0, "the simulator's operator: the override is an input, after which NextTick's promise of silence no longer holds (fix in the simulator)"},
		{3, 3779, 0, "a roster of two, one member without its disk: the two led view changes in turn, each ambiguous half the time, and the operator found none to resolve (fix: a host whose view change lacked members with their state does not preempt that of a host that lost it)"},
		{3, 749, 0, "the same at another seed"},
		{3, 2558, 0, "a roster of one added a host that restarted without its state: its transfer ended at the change's switch point, under the old roster, and it followed as a spare while the member waited for its frames (fix: a transfer ending at a switch point takes the switch)"},
		{3, 1884, 0, "the same at another seed"},
		{3, 5070, 0, "a roster of one whose member lost its disk: its transfer found no other member to ask and ended after a few entries, out of the roster they named (fix: it asks the hosts that hold more, spares included)"},
		{3, 8212, 0, "a host two epochs behind read the later epoch's frame senders in its own roster, sent its pipelined catch-up fetches to itself and answered them from its old log (fix: senders are read in the gathered epoch's roster)"},
		{5, 3312, 0, "an amnesiac host ignored installs that showed the rack 200 entries ahead and led a view change from seq 9 whose promises came late (fix: such an install sends it back to the transfer)"},
	} {
		o := DefaultOptions(c.hosts, c.seed)
		o.Amnesia, o.RosterChanges, o.AcceptLoss, o.KeepEntries = 0.2, 0.02, true, c.keep
		if c.keep > 0 {
			o.Amnesia = 0
		}
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Errorf("hosts=%d seed=%d (%s): %v", c.hosts, c.seed, c.why, err)
		}
		if s.Stats.Stalled {
			t.Errorf("hosts=%d seed=%d (%s): stalled", c.hosts, c.seed, c.why)
		}
	}
}

// TestRetainSeeds: with what compaction cuts retained on disk
// (Options.Retain far above KeepEntries) hosts that lost their disk or
// fell behind every member's in-memory log catch up from the members'
// archives, entry by entry: no floor jump, no past-floor, and fetch
// answers come from the archives. A reader that fills answers one entry
// late is caught.
func TestRetainSeeds(t *testing.T) {
	run := func(broken bool) (violations int, answers, jumps uint64) {
		for _, c := range []struct {
			hosts  int
			roster float64
		}{{3, 0}, {5, 0}, {3, 0.02}, {5, 0.02}} {
			for seed := uint64(1); seed <= 15; seed++ {
				o := DefaultOptions(c.hosts, seed)
				o.KeepEntries, o.Retain, o.Amnesia, o.RosterChanges = 16, 1<<20, 0.2, c.roster
				s, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				s.brokenArchive = broken
				if err := s.Run(); err != nil {
					violations++
					if !broken {
						t.Errorf("hosts=%d seed=%d roster=%g: %v", c.hosts, seed, c.roster, err)
					}
				}
				answers += s.Stats.ArchiveAnswers
				jumps += s.Stats.FloorJumps + s.Stats.PastFloor
			}
		}
		return
	}
	// A view change whose witnesses all compacted past its initiator's
	// lo waited for ever (witnesses contradict an agreed entry): promises
	// are now completed from the archive.
	o := DefaultOptions(5, 53)
	o.KeepEntries, o.Retain, o.Amnesia = 16, 100000, 0.2
	if s, err := New(o); err != nil {
		t.Fatal(err)
	} else if err := s.Run(); err != nil {
		t.Errorf("hosts=5 seed=53 (a promise compacted past the initiator's lo): %v", err)
	}
	if _, answers, jumps := run(false); answers == 0 || jumps != 0 {
		t.Errorf("%d answers from archives, %d floor jumps and past-floor events: want some, and none", answers, jumps)
	}
	if v, _, _ := run(true); v == 0 {
		t.Error("archive answers filled one entry late passed every seed: the checker does not bite")
	}
}

// TestSpareWitnessSeed: a spare being added follows the log and promises
// to view changes; counted as a member holding a branch, it made two
// branches of a fork at the change's last entry look possible (3 holders
// each where the roster of 5 has 6 answering hosts), and the rack waited
// for ever on a fork every member had answered (seed 5168 of the issue's
// `exo sim --hosts 5 --amnesia 0.2 --roster-changes 0.02`).
func TestSpareWitnessSeed(t *testing.T) {
	o := DefaultOptions(5, 5168)
	o.Amnesia, o.RosterChanges = 0.2, 0.02
	runClean(t, o)
}

// TestTransferFromSpareSeed: the only member of a roster of one lost its
// disk; its transfer asked a spare that followed the log (it held more)
// but went on with members only: none, so one batch per view change, and
// the transfer was still running when the quiet phase ended (seed 4179 of
// the command with --accept-loss). It goes on from the spare now
// (the run still stalls: nobody that kept its state is a member).
func TestTransferFromSpareSeed(t *testing.T) {
	o := DefaultOptions(3, 4179)
	o.Amnesia, o.RosterChanges, o.AcceptLoss = 0.2, 0.02, true
	runClean(t, o)
}

// TestLazySyncSeeds: hosts fsync their log only before they send what
// depends on it (a frame, a message other than a fetch), on a change of
// the meta, or lazySyncTicks after entries came (the daemon's fsync
// "batch"), and a crash loses what was written after the last fsync. The
// rule keeps every property; a daemon that sent frames before the entries
// they vouch for were fsynced breaks agreement, and the checker says so.
func TestLazySyncSeeds(t *testing.T) {
	run := func(broken bool) (violations int, lost uint64) {
		for _, n := range []int{3, 5} {
			for seed := uint64(1); seed <= 100; seed++ {
				s, err := New(DefaultOptions(n, seed))
				if err != nil {
					t.Fatal(err)
				}
				s.brokenSync = broken
				if err := s.Run(); err != nil {
					violations++
					if !broken {
						t.Errorf("hosts=%d seed=%d: %v", n, seed, err)
					}
				}
				lost += s.Stats.UnsyncedLost
			}
		}
		return
	}
	if _, lost := run(false); lost == 0 {
		t.Error("no crash lost an unsynced entry: the model is not exercised")
	}
	if v, _ := run(true); v == 0 {
		t.Error("frames sent before their entries were fsynced passed every seed: the checker does not bite")
	}
}

// TestPausesDetector: hosts that their machine pauses for up to 24 ticks
// (Options.Pauses; no other fault) break nothing, and the failure
// detector, its floor 4 and its ceiling 16 ticks, takes the token over
// less often than a timeout fixed at its floor: the longest recent gaps,
// and the late frames of holders passed over, raise its timeout
// (exo/detector.go). In a run without faults every takeover passed a
// running host over (a paused one, or one that, paused, fell behind and
// could not send in its turn). Measured: 649 takeovers fixed, 234 with
// the detector; with its mean and deviation alone 444, over three fifths.
func TestPausesDetector(t *testing.T) {
	run := func(min, max int) (takeovers, pauses uint64) {
		for seed := uint64(1); seed <= 10; seed++ {
			o := NoFaults(5, seed)
			o.Pauses, o.PauseTicks, o.Ticks = 0.02, 24, 2000
			o.Config.TokenTimeout, o.Config.TokenTimeoutMin = max, min
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Run(); err != nil {
				t.Fatalf("seed %d, token timeout %d..%d: %v", seed, min, max, err)
			}
			takeovers += s.Stats.Takeovers
			pauses += s.Stats.Pauses
		}
		return takeovers, pauses
	}
	fixed, pauses := run(4, 4)
	adaptive, _ := run(4, 16)
	t.Logf("%d pauses: %d takeovers with a fixed timeout of 4 ticks, %d with the detector between 4 and 16", pauses, fixed, adaptive)
	if pauses == 0 || fixed == 0 {
		t.Fatalf("%d pauses, %d takeovers with the fixed timeout: the pauses do not pause", pauses, fixed)
	}
	if 5*adaptive > 3*fixed {
		t.Fatalf("the detector took the token over %d times, the fixed timeout at its floor %d: want at most three fifths", adaptive, fixed)
	}
}
