package daemon

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestWriteStatusText: every line of exo status for a status with every
// part: the alarm first, the fields, the log, keys, recovery, token
// timeout and counters lines.
func TestWriteStatusText(t *testing.T) {
	floor := uint64(40)
	st := Status{ID: 1, Hosts: 3, Epoch: 4, Append: 1000, Agreed: 990, LogBase: 100, RetainedBase: 50, LogBytes: 3 << 20, RackFloor: &floor,
		Holder: 2, Pending: 3, Delivered: 5000, Subscribers: 1, Waiting: 2, Skipped: []int{0}, Roster: []int{0, 1, 2}, Position: 1, Known: []int{0, 1, 2, 3},
		Counters: map[string]uint64{"frames_in": 10, "frames_out": 5, "rejects.GAP": 2},
		Keys:     &KeyStatus{SendPhase: 0, Staged: true, Waiting: []int{2}},
		Recovery: RecoveryStatus{BehindEntries: 12, StateTransfer: true, TransferTo: 2000, TransferPace: 12_500_000, TransferRackPercent: 74, RackSeq: 1500, Fetching: true, FetchPeer: 2, FetchTicks: 3, Gathered: 9, GatherEpoch: 4,
			ViewChange: &ViewChangeStatus{Epoch: 5, Promised: []int{1}, Need: 2, Ambiguous: true, Cause: "divergence"}},
		Detector:    DetectorStatus{TimeoutTicks: 16, TimeoutMs: 4, MinTicks: 8, MaxTicks: 16, SRTTTicks: 1.5, RTTVarTicks: 0.25, PeakTicks: 9, Samples: 99, FalseTakeovers: 3, LateFrames: 2},
		DuplicateID: &DuplicateIDStatus{MemberID: 1, MAC: "02:e0:00:00:00:09", MACs: []string{"02:e0:00:00:00:09"}, FirstSeen: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Seq: 77, Frames: 4, Message: "dup", Check: "check", Fix: "fix"},
		Memory:      &MemoryStatus{HugePages: "on", AnonBytes: 300 << 20, HugeBytes: 296 << 20, Error: "madvise: EINVAL"}}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteStatusText(&out, raw); err != nil {
		t.Fatal(err)
	}
	want := `duplicate_id         ALARM: dup (first seen 2025-01-02T03:04:05Z at seq 77, 4 frames, from [02:e0:00:00:00:09]). Check: check. Fix: fix
id                   1
hosts                3
roster               [0 1 2]
epoch                4
halted               false
append_pointer       1000
agreement_pointer    990
token_holder         2
queue_depth          3
messages_delivered   5000
publishes_waiting    2
subscribers          1
skipped_hosts        [0]
log                  in memory from seq 100; retained on disk from seq 50 (served to hosts that join or fall behind); durable log 3.0 MiB; the rack's floor (a majority serves from) seq 40
keys                 sending under slot 0; new key staged, waiting for [2] (exo key status)
recovery             behind by 12 entries; state transfer: fetching the rack's agreed log up to seq 2000 before rejoining (the rack's newest frame heard: seq 1500; progress: append_pointer, counters fetched_entries, exo top's ETA); paced at 12.5 MB/s, the rack at 74% of its rate in the transfer's pauses (transfer_yield); fetching from member 2 (3 ticks); gathered 9 entries of epoch 4; leading view change 5 (promises [1] of 2 needed, started on divergence, waits on hosts that lost their state: exo recover shows what accepting the loss gives up)
token_timeout        4 ms (16 ticks, between 8 and 16; smoothed gap 1.50 ticks, deviation 0.25, longest of the last 33-66 s 9, 99 samples); false takeovers 3, late frames of holders passed over 2
memory               300 MiB anonymous, 296 MiB of it in huge pages (huge_pages on); the kernel refused some: madvise: EINVAL
counters             frames_in=10 frames_out=5 rejects.GAP=2
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	// An older daemon's status: no keys, no detector, no roster.
	out.Reset()
	if err := WriteStatusText(&out, []byte(`{"id":0,"hosts":1,"log_base":7,"recovery":{"behind_epoch":true,"rack_epoch":9},"counters":{}}`)); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "roster               <nil>\n") || !strings.Contains(got, "log                  in memory from seq 7\n") ||
		!strings.Contains(got, "recovery             behind: the rack is in epoch 9\n") || strings.Contains(got, "keys") || strings.Contains(got, "token_timeout") || strings.Contains(got, "\nmemory ") {
		t.Errorf("older status:\n%s", got)
	}
	if err := WriteStatusText(&out, []byte("{")); err == nil || !strings.HasPrefix(err.Error(), "status: ") {
		t.Errorf("bad JSON: %v", err)
	}
}

// TestRecoveryLineStateTransfer: the status says when a host fetches the
// rack's agreed log before it rejoins, and where the rack is.
func TestRecoveryLineStateTransfer(t *testing.T) {
	st := Status{Halted: true, Recovery: RecoveryStatus{StateTransfer: true, RackEpoch: 7, RackSeq: 123456, BehindEpoch: true}}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	line := recoveryLine(m["recovery"].(map[string]any))
	if !strings.Contains(line, "state transfer: fetching the rack's agreed log") || !strings.Contains(line, "seq 123456") {
		t.Fatalf("recovery line %q: want the state transfer and the rack's seq", line)
	}
	st.Recovery.StateTransfer = false
	b, _ = json.Marshal(st)
	m = nil
	_ = json.Unmarshal(b, &m)
	if line := recoveryLine(m["recovery"].(map[string]any)); strings.Contains(line, "state transfer") {
		t.Fatalf("recovery line %q without a transfer", line)
	}
}
