//go:build linux

package xdp

// Replays every golden vector of testdata/vectors (docs/vectors.md), both
// forms, through the loaded XDP program with BPF_PROG_TEST_RUN: load the
// vectors' tag key, set the state before, run the frame behind an Ethernet
// header, and require the expected reason, the action it implies and every
// field of the state after.

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/exo-rack/exo/exo"
)

const vectorsDir = "../../testdata/vectors"

var testSrcMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}

type vecState struct {
	Group      uint16  `json:"group"`
	Hosts      uint16  `json:"hosts"`
	Epoch      uint32  `json:"epoch"`
	Halted     bool    `json:"halted"`
	Window     uint64  `json:"window"`
	Append     uint64  `json:"append"`
	Agreed     uint64  `json:"agreed"`
	EpochStart *uint64 `json:"epoch_start"`
	History    []int   `json:"history"`
}

func (s vecState) pointers() (exo.Pointers, error) {
	if s.EpochStart == nil {
		return exo.Pointers{}, fmt.Errorf("state without epoch_start")
	}
	p := exo.NewPointers(s.Group, int(s.Hosts), s.Window)
	p.Epoch, p.Halted, p.Append, p.Agreed, p.EpochStart = s.Epoch, s.Halted, s.Append, s.Agreed, *s.EpochStart
	if len(s.History) != p.H() {
		return p, fmt.Errorf("history has %d ids, want h = %d", len(s.History), p.H())
	}
	for i, id := range s.History {
		p.History[i] = uint8(id)
	}
	return p, nil
}

type vecCase struct {
	Suite  string    `json:"suite"`
	Name   string    `json:"name"`
	State  *vecState `json:"state"`
	Frame  string    `json:"frame"`
	Expect struct {
		Reason   uint8    `json:"reason"`
		SlowPath bool     `json:"slow_path"`
		State    vecState `json:"state"`
	} `json:"expect"`
}

type vecFile struct {
	Format       string    `json:"format"`
	TagKey       string    `json:"tag_key"`
	VectorsCount int       `json:"vectors_count"`
	StepsCount   int       `json:"steps_count"`
	HexRecords   int       `json:"hex_records"`
	Vectors      []vecCase `json:"vectors"`
	Streams      []struct {
		Name  string    `json:"name"`
		State vecState  `json:"state"`
		Steps []vecCase `json:"steps"`
	} `json:"streams"`
}

// golden is one (state, frame) -> (reason, state') case.
type golden struct {
	where   string
	in, out exo.Pointers
	frame   []byte // after the Ethernet header
	reason  exo.Reason
	chained bool // a stream step after the first: in is the previous out
}

func loadJSONCases(t *testing.T) []golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vectorsDir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vf vecFile
	if err := json.Unmarshal(data, &vf); err != nil {
		t.Fatalf("vectors.json: %v", err)
	}
	if vf.Format != "exo-vectors/3" {
		t.Fatalf("vectors.json: format %q, want exo-vectors/3", vf.Format)
	}
	if vf.TagKey != hex.EncodeToString(vecKey[:]) {
		t.Fatalf("vectors.json: tag_key %q, want %x", vf.TagKey, vecKey)
	}
	var out []golden
	add := func(where string, in exo.Pointers, c *vecCase, chained bool) exo.Pointers {
		want, err := c.Expect.State.pointers()
		if err != nil {
			t.Fatalf("%s: expect: %v", where, err)
		}
		frame, err := hex.DecodeString(c.Frame)
		if err != nil {
			t.Fatalf("%s: frame: %v", where, err)
		}
		out = append(out, golden{where, in, want, frame, exo.Reason(c.Expect.Reason), chained})
		return want
	}
	for i := range vf.Vectors {
		c := &vf.Vectors[i]
		in, err := c.State.pointers()
		if err != nil {
			t.Fatalf("%s/%s: %v", c.Suite, c.Name, err)
		}
		add(c.Suite+"/"+c.Name, in, c, false)
	}
	steps := 0
	for _, s := range vf.Streams {
		in, err := s.State.pointers()
		if err != nil {
			t.Fatalf("stream %s: %v", s.Name, err)
		}
		for j := range s.Steps {
			in = add(fmt.Sprintf("stream %s step %d", s.Name, j), in, &s.Steps[j], j > 0)
			steps++
		}
	}
	if len(vf.Vectors) != vf.VectorsCount || steps != vf.StepsCount {
		t.Fatalf("vectors.json: %d vectors, %d steps; header says %d, %d", len(vf.Vectors), steps, vf.VectorsCount, vf.StepsCount)
	}
	return out
}

// vecKey is the vectors' tag key (format 3): 00 01 .. 0f.
var vecKey = [exo.TagKeyLen]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// Hex form (docs/vectors.md section 4): 64-word records, MSB-first bytes.
const (
	hexMagic     = 0x45584f5645433033 // "EXOVEC03"
	recordWords  = 64
	stateInWord  = 8
	stateOutWord = 16
	frameWord    = 32
	frameMax     = 256
	flagChained  = 1
)

func bitsOf(w uint64, hi, lo int) uint64 { return w >> lo & (1<<(hi-lo+1) - 1) }

func hexState(w []uint64) exo.Pointers {
	p := exo.NewPointers(uint16(bitsOf(w[0], 63, 48)), int(bitsOf(w[0], 47, 32)), w[2])
	p.Epoch = uint32(w[0])
	p.Halted = bitsOf(w[1], 63, 56) != 0
	p.Append, p.Agreed, p.EpochStart = w[3], w[4], w[7]
	for i := 0; i < p.H() && i < 16; i++ {
		p.History[i] = byte(w[5+i/8] >> (56 - 8*(i%8)))
	}
	return p
}

func loadHexCases(t *testing.T) []golden {
	t.Helper()
	f, err := os.Open(filepath.Join(vectorsDir, "vectors.hex"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var words []uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		x, err := strconv.ParseUint(line, 16, 64)
		if err != nil {
			t.Fatalf("vectors.hex: %v", err)
		}
		words = append(words, x)
	}
	if err := sc.Err(); err != nil || len(words)%recordWords != 0 {
		t.Fatalf("vectors.hex: %v, %d words", err, len(words))
	}
	var out []golden
	for i := 0; i < len(words)/recordWords; i++ {
		w := words[i*recordWords : (i+1)*recordWords]
		if w[0] != hexMagic {
			t.Fatalf("hex record %d: magic %016x, want EXOVEC03", i, w[0])
		}
		var key [exo.TagKeyLen]byte
		binary.BigEndian.PutUint64(key[0:], w[4])
		binary.BigEndian.PutUint64(key[8:], w[5])
		if key != vecKey {
			t.Fatalf("hex record %d: tag key %x, want %x", i, key, vecKey)
		}
		n := int(bitsOf(w[2], 63, 48))
		if n > frameMax {
			t.Fatalf("hex record %d: frame_len %d", i, n)
		}
		frame := make([]byte, n)
		for k := range frame {
			frame[k] = byte(w[frameWord+k/8] >> (56 - 8*(k%8)))
		}
		out = append(out, golden{
			where:   fmt.Sprintf("hex record %d", i),
			in:      hexState(w[stateInWord : stateInWord+8]),
			out:     hexState(w[stateOutWord : stateOutWord+8]),
			frame:   frame,
			reason:  exo.Reason(bitsOf(w[3], 63, 56)),
			chained: bitsOf(w[2], 31, 16)&flagChained != 0,
		})
	}
	return out
}

func setKey(tb testing.TB, p *Program, key [exo.TagKeyLen]byte) {
	tb.Helper()
	if err := p.SetKey(key); err != nil {
		tb.Fatal(err)
	}
}

func stateString(p exo.Pointers) string {
	return fmt.Sprintf("{group %d hosts %d epoch %d halted %v window %d append %d agreed %d epoch_start %d history %v}",
		p.Group, p.Hosts, p.Epoch, p.Halted, p.Window, p.Append, p.Agreed, p.EpochStart, p.Hist())
}

// runGolden runs every case and returns how many agree; it fails t on
// each disagreement. In a stream, the state is set only before the first
// step: later steps run on whatever the program left in its map, so the
// program has to carry its state from frame to frame.
func runGolden(t *testing.T, p *Program, cases []golden) (agree int, counts [exo.NumReasons]uint64) {
	t.Helper()
	bad := 0
	for _, c := range cases {
		if !c.chained {
			if err := p.SetState(c.in); err != nil {
				t.Fatal(err)
			}
		}
		v, err := p.Run(EthernetFrame(testSrcMAC, c.frame))
		if err != nil {
			t.Fatalf("%s: %v", c.where, err)
		}
		got, err := p.State()
		if err != nil {
			t.Fatal(err)
		}
		wantAction := ActionDrop
		if c.reason == exo.ReasonAccept || c.reason.SlowPath() {
			wantAction = ActionPass
		}
		ok := true
		if !v.HasReason || v.Reason != c.reason || v.Action != wantAction {
			t.Errorf("%s: got %v, want %s %s\n\tstate %s\n\tframe %x", c.where, v, wantAction, c.reason, stateString(c.in), c.frame)
			ok = false
		}
		if got != c.out {
			t.Errorf("%s: state after\n\tgot  %s\n\twant %s", c.where, stateString(got), stateString(c.out))
			ok = false
			if err := p.SetState(c.out); err != nil { // let a stream go on
				t.Fatal(err)
			}
		}
		if ok {
			agree++
		} else if bad++; bad > 20 {
			t.Fatalf("too many disagreements")
		}
		if c.reason < exo.NumReasons {
			counts[c.reason]++
		}
	}
	return agree, counts
}

func TestGoldenVectorsJSON(t *testing.T) {
	p := loadOrSkip(t, false)
	setKey(t, p, vecKey)
	cases := loadJSONCases(t)
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
	cases := loadHexCases(t)
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
		t.Errorf("state changed: %s", stateString(got))
	}
}
