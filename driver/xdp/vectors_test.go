//go:build linux

package xdp

// Replays every golden vector of testdata/vectors (docs/vectors.md), both
// forms, through the loaded XDP program with BPF_PROG_TEST_RUN: load the
// vectors' tag key, set the state before, run the frame behind an Ethernet
// header, and require the expected reason, the action it implies and every
// field of the state after.

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/goldvec"
)

var testSrcMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}

// vecKey is the vectors' tag key (format 3): 00 01 .. 0f.
var vecKey = goldvec.TestKey()

// loadVectors reads one form with goldvec and requires format 3 under
// vecKey: the program checks tags, so older formats do not apply.
func loadVectors(t *testing.T, load func(dir string) (goldvec.Set, error)) []goldvec.Case {
	t.Helper()
	vs, err := load("")
	if err != nil {
		t.Fatal(err)
	}
	if vs.Version != 3 {
		t.Fatalf("%s: format version %d, want 3", vs.Format, vs.Version)
	}
	if !vs.HasKey || vs.Key != vecKey {
		t.Fatalf("%s: tag key %x (%v), want %x", vs.Format, vs.Key, vs.HasKey, vecKey)
	}
	return vs.Cases
}

func setKey(tb testing.TB, p *Program, key [exo.TagKeyLen]byte) {
	tb.Helper()
	if err := p.SetKey(key); err != nil {
		tb.Fatal(err)
	}
}

// runGolden runs every case and returns how many agree; it fails t on
// each disagreement. In a stream, the state is set only before the first
// step: later steps run on whatever the program left in its map, so the
// program has to carry its state from frame to frame.
func runGolden(t *testing.T, p *Program, cases []goldvec.Case) (agree int, counts [exo.NumReasons]uint64) {
	t.Helper()
	bad := 0
	for _, c := range cases {
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
			t.Errorf("%s: got %v, want %s %s\n\tstate %s\n\tframe %x", c.Where, v, wantAction, c.Reason, goldvec.StateString(c.In), c.Frame)
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
	return agree, counts
}

func TestGoldenVectorsJSON(t *testing.T) {
	p := loadOrSkip(t, false)
	setKey(t, p, vecKey)
	cases := loadVectors(t, goldvec.LoadJSON)
	if err := p.ResetCounters(); err != nil {
		t.Fatal(err)
	}
	agree, want := runGolden(t, p, cases)
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
	t.Logf("vectors.json: %d of %d vectors agree (verdict, action and state after)", agree, len(cases))
	if agree != len(cases) {
		t.Errorf("%d of %d vectors disagree", len(cases)-agree, len(cases))
	}
}

func TestGoldenVectorsHex(t *testing.T) {
	p := loadOrSkip(t, false)
	setKey(t, p, vecKey)
	cases := loadVectors(t, goldvec.LoadHex)
	agree, _ := runGolden(t, p, cases)
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
