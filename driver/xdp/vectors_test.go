//go:build linux

package xdp

// Replays every golden vector of testdata/vectors (docs/vectors.md), both
// forms, through the loaded XDP program with BPF_PROG_TEST_RUN: load the
// case's two key slots (slot 0 the vectors' tag_key, slot 1 tag_key_1 when
// the case says key1_valid, else empty), set the state before, run the
// frame behind an Ethernet header, and require the expected reason, the
// action it implies and every field of the state after.

import (
	"encoding/binary"
	"fmt"
	"net"
	"testing"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/goldvec"
)

var testSrcMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}

// vecKey is the vectors' slot-0 tag key (format 3 on): 00 01 .. 0f;
// vecKey1 their slot-1 key (format 4): 10 11 .. 1f.
var (
	vecKey  = goldvec.TestKey()
	vecKey1 = func() (k [exo.TagKeyLen]byte) {
		for i := range k {
			k[i] = 0x10 + byte(i)
		}
		return k
	}()
)

// loadVectors reads one form with goldvec and requires format 4 or 5
// with vecKey in slot 0 and vecKey1 in slot 1: the program checks tags
// under the slot the key phase names, so older formats do not apply.
// Format 5 (JSON) adds the transmit cases (Set.TxCases, run by
// TestGoldenVectorsToken); its receive side (Set.Cases) is format 4's.
func loadVectors(t *testing.T, load func(dir string) (goldvec.Set, error)) goldvec.Set {
	t.Helper()
	vs, err := load("")
	if err != nil {
		t.Fatal(err)
	}
	if vs.Version != 4 && vs.Version != 5 {
		t.Fatalf("%s: format version %d, want 4 or 5", vs.Format, vs.Version)
	}
	if !vs.HasKey || vs.Key != vecKey {
		t.Fatalf("%s: tag key %x (%v), want %x", vs.Format, vs.Key, vs.HasKey, vecKey)
	}
	if !vs.HasKey1 || vs.Key1 != vecKey1 {
		t.Fatalf("%s: slot-1 tag key %x (%v), want %x", vs.Format, vs.Key1, vs.HasKey1, vecKey1)
	}
	return vs
}

// caseKeys is the key ring case c runs under: vecKey in slot 0 (always
// valid), vecKey1 in slot 1 if c.Key1Valid, else slot 1 empty.
func caseKeys(c *goldvec.Case) exo.KeyRing {
	r := exo.NewKeyRing(0, vecKey)
	r.Key[1], r.Valid[1] = vecKey1, c.Key1Valid
	return r
}

// phaseStats counts what the key slots did in a run: cases run with slot 1
// valid, and the frames of key phase 1 (that decode far enough to have a
// flags word) accepted, or BAD_TAG with slot 1 empty and with it valid.
type phaseStats struct {
	key1Valid, phase1Accept, phase1BadTagEmpty, phase1BadTagValid int
}

func (s phaseStats) String() string {
	return fmt.Sprintf("slot 1 valid in %d cases; key phase 1 frames: %d ACCEPT, %d BAD_TAG with slot 1 empty, %d BAD_TAG with slot 1 valid",
		s.key1Valid, s.phase1Accept, s.phase1BadTagEmpty, s.phase1BadTagValid)
}

func setKey(tb testing.TB, p *Program, key [exo.TagKeyLen]byte) {
	tb.Helper()
	if err := p.SetKey(key); err != nil {
		tb.Fatal(err)
	}
}

// runGolden runs every case and returns how many agree; it fails t on
// each disagreement. Before each case it loads the case's key slots
// (SetKeys: slot 1 follows Case.Key1Valid). In a stream, the state is set
// only before the first step: later steps run on whatever the program left
// in its map, so the program has to carry its state from frame to frame.
func runGolden(t *testing.T, p *Program, cases []goldvec.Case) (agree int, counts [exo.NumReasons]uint64, ps phaseStats) {
	t.Helper()
	bad := 0
	for i := range cases {
		c := &cases[i]
		if err := p.SetKeys(caseKeys(c)); err != nil {
			t.Fatal(err)
		}
		if c.Key1Valid {
			ps.key1Valid++
		}
		if len(c.Frame) >= exo.OffFlags+2 && binary.BigEndian.Uint16(c.Frame[exo.OffFlags:])&exo.FlagKeyPhase != 0 {
			switch {
			case c.Reason == exo.ReasonAccept:
				ps.phase1Accept++
			case c.Reason == exo.ReasonBadTag && c.Key1Valid:
				ps.phase1BadTagValid++
			case c.Reason == exo.ReasonBadTag:
				ps.phase1BadTagEmpty++
			}
		}
		if !c.Chained {
			if err := p.SetState(c.In); err != nil {
				t.Fatal(err)
			}
		}
		v, err := p.Run(EthernetFrame(testSrcMAC, c.Frame))
		if err != nil {
			t.Fatalf("%s: %v", c.Where, err)
		}
		got, err := p.State()
		if err != nil {
			t.Fatal(err)
		}
		wantAction := ActionDrop
		if c.Reason == exo.ReasonAccept || c.Reason.SlowPath() {
			wantAction = ActionPass
		}
		ok := true
		if !v.HasReason || v.Reason != c.Reason || v.Action != wantAction {
			t.Errorf("%s: got %v, want %s %s (slot 1 valid %v)\n\tstate %s\n\tframe %x", c.Where, v, wantAction, c.Reason, c.Key1Valid, goldvec.StateString(c.In), c.Frame)
			ok = false
		}
		if got != c.Out {
			t.Errorf("%s: state after\n\tgot  %s\n\twant %s", c.Where, goldvec.StateString(got), goldvec.StateString(c.Out))
			ok = false
			if err := p.SetState(c.Out); err != nil { // let a stream go on
				t.Fatal(err)
			}
		}
		if ok {
			agree++
		} else if bad++; bad > 20 {
			t.Fatalf("too many disagreements")
		}
		if c.Reason < exo.NumReasons {
			counts[c.Reason]++
		}
	}
	return agree, counts, ps
}

// checkPhaseCoverage fails t unless the run covered both key slots.
func checkPhaseCoverage(t *testing.T, ps phaseStats) {
	t.Helper()
	if ps.key1Valid == 0 || ps.phase1Accept == 0 || ps.phase1BadTagEmpty == 0 {
		t.Errorf("the vectors do not exercise key slot 1: %s", ps)
	}
}

func TestGoldenVectorsJSON(t *testing.T) {
	p := loadOrSkip(t, false)
	vs := loadVectors(t, goldvec.LoadJSON)
	cases := vs.Cases
	if err := p.ResetCounters(); err != nil {
		t.Fatal(err)
	}
	agree, want, ps := runGolden(t, p, cases)
	got, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("per-reason counters %v, want %v", got, want)
	}
	other, err := p.OtherCounters()
	if err != nil {
		t.Fatal(err)
	}
	if other != [3]uint64{} {
		t.Errorf("other counters (not Exo, unclassified, no meta) = %v, want 0", other)
	}
	if n, err := p.ForeignMACs(); err != nil || n != 0 {
		t.Errorf("foreign MAC counter %d (%v), want 0 (no roster loaded)", n, err)
	}
	if want[exo.ReasonBadTag] == 0 {
		t.Error("no BAD_TAG vector")
	}
	checkPhaseCoverage(t, ps)
	t.Logf("%s: %s", vs.Format, ps)
	t.Logf("vectors.json: %d of %d vectors agree (verdict, action and state after)", agree, len(cases))
	if agree != len(cases) {
		t.Errorf("%d of %d vectors disagree", len(cases)-agree, len(cases))
	}
}

func TestGoldenVectorsHex(t *testing.T) {
	p := loadOrSkip(t, false)
	vs := loadVectors(t, goldvec.LoadHex)
	cases := vs.Cases
	agree, _, ps := runGolden(t, p, cases)
	checkPhaseCoverage(t, ps)
	t.Logf("%s: %s", vs.Format, ps)
	t.Logf("vectors.hex: %d of %d records agree (verdict, action and state after)", agree, len(cases))
	if agree != len(cases) {
		t.Errorf("%d of %d records disagree", len(cases)-agree, len(cases))
	}
}

// TestNotExoPasses checks that other EtherTypes and runts pass untouched,
// counted apart, and leave the state alone.
func TestNotExoPasses(t *testing.T) {
	p := loadOrSkip(t, false)
	st := exo.NewPointers(1, 5, 1024)
	if err := p.SetState(st); err != nil {
		t.Fatal(err)
	}
	if err := p.ResetCounters(); err != nil {
		t.Fatal(err)
	}
	arp := EthernetFrame(testSrcMAC, make([]byte, 46))
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	for _, f := range [][]byte{arp, arp[:14]} {
		v, err := p.Run(f)
		if err != nil {
			t.Fatal(err)
		}
		if v.Action != ActionPass || v.HasReason {
			t.Errorf("non-Exo frame: %v, want XDP_PASS without a reason", v)
		}
	}
	other, _ := p.OtherCounters()
	if other[0] != 2 {
		t.Errorf("not-Exo counter %d, want 2", other[0])
	}
	if got, _ := p.State(); got != st {
		t.Errorf("state changed: %s", goldvec.StateString(got))
	}
}
