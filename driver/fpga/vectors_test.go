package fpga

// Readers of the golden vectors (testdata/vectors, docs/vectors.md) for
// the simulated engine (sim_test.go). They read format 2 (exo-vectors/2,
// EXOVEC02) and format 3 (exo-vectors/3, EXOVEC03: the SipHash tag check,
// with the test key in the files); the hex reader takes every field
// position from vectors.meta, so words that move between formats move
// here too. TestVectorReaders checks them without the simulator.

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/exo-rack/exo/exo"
)

const vectorsDir = "../../testdata/vectors"

// golden is one (state, frame) -> (reason, state') case.
type golden struct {
	where    string
	in, out  exo.Pointers
	frame    []byte // after the Ethernet header
	reason   exo.Reason
	slowPath bool
	chained  bool // a stream step after the first: in is the previous out
	decoded  bool // the codec accepted the frame
	// format 3: the frame decodes and its tag field is its tag under the
	// key (tagKnown: the files say so)
	tagValid, tagKnown bool
}

// vectorSet is one form of the vectors.
type vectorSet struct {
	format  string
	version int      // 2 or 3
	key     [16]byte // the SipHash key of the tags (format 3)
	hasKey  bool
	cases   []golden
}

// testKey is the key format 3 documents: bytes 00..0f.
func testKey() (k [16]byte) {
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

// ---- JSON form ----------------------------------------------------------

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
	Suite   string    `json:"suite"`
	Name    string    `json:"name"`
	State   *vecState `json:"state"`
	Frame   string    `json:"frame"`
	Decoded *struct {
		TagValid *bool `json:"tag_valid"` // format 3
	} `json:"decoded"`
	Expect struct {
		Reason   uint8    `json:"reason"`
		SlowPath bool     `json:"slow_path"`
		State    vecState `json:"state"`
	} `json:"expect"`
}

// vecFile is the part of vectors.json the driver test needs; unknown keys
// are ignored (format 3 adds some).
type vecFile struct {
	Format       string          `json:"format"`
	TagKey       json.RawMessage `json:"tag_key"` // format 3
	Key          json.RawMessage `json:"key"`
	VectorsCount int             `json:"vectors_count"`
	StepsCount   int             `json:"steps_count"`
	HexRecords   int             `json:"hex_records"`
	Vectors      []vecCase       `json:"vectors"`
	Streams      []struct {
		Name  string    `json:"name"`
		State vecState  `json:"state"`
		Steps []vecCase `json:"steps"`
	} `json:"streams"`
}

// parseKey reads a key written as a hex string ("000102..0f", with or
// without 0x) or as an array of 16 byte values.
func parseKey(raw json.RawMessage) ([16]byte, error) {
	var k [16]byte
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		b, err := hex.DecodeString(strings.TrimPrefix(strings.ReplaceAll(s, ":", ""), "0x"))
		if err != nil || len(b) != 16 {
			return k, fmt.Errorf("key %q is not 16 hex bytes", s)
		}
		copy(k[:], b)
		return k, nil
	}
	var a []int
	if err := json.Unmarshal(raw, &a); err != nil || len(a) != 16 {
		return k, fmt.Errorf("key %s is neither a hex string nor 16 bytes", raw)
	}
	for i, x := range a {
		k[i] = byte(x)
	}
	return k, nil
}

func formatVersion(format, prefix string) (int, error) {
	v, ok := strings.CutPrefix(format, prefix)
	if !ok {
		return 0, fmt.Errorf("format %q, want %s2 or %s3", format, prefix, prefix)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 || n > 3 {
		return 0, fmt.Errorf("format %q: this reader knows versions 2 and 3", format)
	}
	return n, nil
}

func loadJSONVectors(t testing.TB) vectorSet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vectorsDir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vf vecFile
	if err := json.Unmarshal(data, &vf); err != nil {
		t.Fatalf("vectors.json: %v", err)
	}
	vs := vectorSet{format: vf.Format}
	if vs.version, err = formatVersion(vf.Format, "exo-vectors/"); err != nil {
		t.Fatalf("vectors.json: %v", err)
	}
	key := vf.TagKey
	if len(key) == 0 {
		key = vf.Key
	}
	if len(key) > 0 && string(key) != "null" {
		if vs.key, err = parseKey(key); err != nil {
			t.Fatalf("vectors.json: %v", err)
		}
		vs.hasKey = true
	} else if vs.version >= 3 {
		vs.key, vs.hasKey = testKey(), true
	}
	add := func(where string, in exo.Pointers, c *vecCase, chained bool) exo.Pointers {
		want, err := c.Expect.State.pointers()
		if err != nil {
			t.Fatalf("%s: expect: %v", where, err)
		}
		frame, err := hex.DecodeString(c.Frame)
		if err != nil {
			t.Fatalf("%s: frame: %v", where, err)
		}
		g := golden{where: where, in: in, out: want, frame: frame, reason: exo.Reason(c.Expect.Reason), slowPath: c.Expect.SlowPath, chained: chained, decoded: c.Decoded != nil}
		if vs.version >= 3 {
			g.tagKnown = true
			g.tagValid = c.Decoded != nil && c.Decoded.TagValid != nil && *c.Decoded.TagValid
		}
		vs.cases = append(vs.cases, g)
		return want
	}
	for i := range vf.Vectors {
		c := &vf.Vectors[i]
		if c.State == nil {
			t.Fatalf("%s/%s: no state", c.Suite, c.Name)
		}
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
			in = add(fmt.Sprintf("stream/%s#%d", s.Name, j), in, &s.Steps[j], j > 0)
			steps++
		}
	}
	if len(vf.Vectors) != vf.VectorsCount || steps != vf.StepsCount {
		t.Fatalf("vectors.json: %d vectors, %d steps; header says %d, %d", len(vf.Vectors), steps, vf.VectorsCount, vf.StepsCount)
	}
	return vs
}

// ---- hex form -----------------------------------------------------------

// hexField is a "field <name> <word> <msb> <lsb>" line of vectors.meta.
type hexField struct{ word, msb, lsb int }

type hexMeta struct {
	format  string
	count   int
	words   int // record_words
	magic   uint64
	chained uint64 // flag_chained
	tagOK   uint64 // flag_tag_valid (format 3)
	fields  map[string]hexField
}

func loadHexMeta(t testing.TB) hexMeta {
	t.Helper()
	f, err := os.Open(filepath.Join(vectorsDir, "vectors.meta"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := hexMeta{fields: map[string]hexField{}}
	num := func(s string) uint64 {
		x, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("vectors.meta: %q: %v", s, err)
		}
		return x
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) < 2 || strings.HasPrefix(w[0], "#") {
			continue
		}
		switch w[0] {
		case "format":
			m.format = w[1]
		case "count":
			m.count = int(num(w[1]))
		case "record_words":
			m.words = int(num(w[1]))
		case "magic":
			m.magic = num(w[1])
		case "flag_chained":
			m.chained = num(w[1])
		case "flag_tag_valid":
			m.tagOK = num(w[1])
		case "field":
			if len(w) != 5 {
				t.Fatalf("vectors.meta: %q", sc.Text())
			}
			m.fields[w[1]] = hexField{int(num(w[2])), int(num(w[3])), int(num(w[4]))}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if m.count == 0 || m.words == 0 || m.magic == 0 {
		t.Fatalf("vectors.meta: count %d, record_words %d, magic %#x", m.count, m.words, m.magic)
	}
	return m
}

func (m hexMeta) field(t testing.TB, name string) hexField {
	t.Helper()
	f, ok := m.fields[name]
	if !ok {
		t.Fatalf("vectors.meta: no field %s", name)
	}
	return f
}

func (f hexField) get(rec []uint64) uint64 {
	w := rec[f.word] >> f.lsb
	if n := f.msb - f.lsb + 1; n < 64 {
		w &= 1<<n - 1
	}
	return w
}

// byteAt is byte k of the MSB-first byte string starting at word w.
func byteAt(rec []uint64, w, k int) byte { return byte(rec[w+k/8] >> (56 - 8*(k%8))) }

func loadHexVectors(t testing.TB) vectorSet {
	t.Helper()
	m := loadHexMeta(t)
	vs := vectorSet{format: m.format}
	var err error
	if vs.version, err = formatVersion(m.format, "exo-vectors-hex/"); err != nil {
		t.Fatalf("vectors.meta: %v", err)
	}
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
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(words) != m.count*m.words {
		t.Fatalf("vectors.hex: %d words, vectors.meta says %d records of %d", len(words), m.count, m.words)
	}

	// the key: format 3 has it in fields tag_key_*, MSB first in word order
	var keyFields []hexField
	for name, fl := range m.fields {
		if strings.HasPrefix(name, "tag_key") || strings.HasPrefix(name, "key") {
			keyFields = append(keyFields, fl)
		}
	}
	sort.Slice(keyFields, func(i, j int) bool {
		a, b := keyFields[i], keyFields[j]
		return a.word < b.word || a.word == b.word && a.msb > b.msb
	})

	magic := m.field(t, "magic")
	frameLen, exoLen, vflags := m.field(t, "frame_len"), m.field(t, "exo_len"), m.field(t, "vflags")
	reason, slow := m.field(t, "reason"), m.field(t, "slow_path")
	frameW := m.field(t, "frame").word
	state := func(rec []uint64, p string) exo.Pointers {
		g := func(n string) uint64 { return m.field(t, p+n).get(rec) }
		s := exo.NewPointers(uint16(g("group")), int(g("hosts")), g("window"))
		s.Epoch, s.Halted = uint32(g("epoch")), g("halted") != 0
		s.Append, s.Agreed, s.EpochStart = g("append"), g("agreed"), g("epoch_start")
		h0, h8 := m.field(t, p+"hist0_7"), m.field(t, p+"hist8_15")
		for i := 0; i < s.H() && i < 16; i++ {
			w := h0.word
			if i >= 8 {
				w = h8.word
			}
			s.History[i] = byteAt(rec, w, i%8)
		}
		return s
	}
	for i := range m.count {
		rec := words[i*m.words : (i+1)*m.words]
		if magic.get(rec) != m.magic {
			t.Fatalf("hex record %d: magic %016x, want %016x", i, magic.get(rec), m.magic)
		}
		if i == 0 && len(keyFields) > 0 {
			var kb []byte
			for _, kf := range keyFields {
				v := kf.get(rec)
				for b := (kf.msb-kf.lsb+1)/8 - 1; b >= 0; b-- {
					kb = append(kb, byte(v>>(8*b)))
				}
			}
			if len(kb) != 16 {
				t.Fatalf("vectors.meta: the key fields hold %d bytes, want 16", len(kb))
			}
			copy(vs.key[:], kb)
			vs.hasKey = true
		}
		n := int(frameLen.get(rec))
		if frameW*8+n > m.words*8 {
			t.Fatalf("hex record %d: frame_len %d", i, n)
		}
		frame := make([]byte, n)
		for k := range frame {
			frame[k] = byteAt(rec, frameW, k)
		}
		vs.cases = append(vs.cases, golden{
			where:    fmt.Sprintf("hex record %d", i),
			in:       state(rec, "in_"),
			out:      state(rec, "out_"),
			frame:    frame,
			reason:   exo.Reason(reason.get(rec)),
			slowPath: slow.get(rec) != 0,
			chained:  vflags.get(rec)&m.chained != 0,
			decoded:  exoLen.get(rec) != 0,
			tagKnown: m.tagOK != 0,
			tagValid: m.tagOK != 0 && vflags.get(rec)&m.tagOK != 0,
		})
	}
	if vs.version >= 3 && !vs.hasKey {
		vs.key, vs.hasKey = testKey(), true
	}
	return vs
}

func stateString(p exo.Pointers) string {
	return fmt.Sprintf("{group %d hosts %d epoch %d halted %v window %d append %d agreed %d epoch_start %d history %v}",
		p.Group, p.Hosts, p.Epoch, p.Halted, p.Window, p.Append, p.Agreed, p.EpochStart, p.Hist())
}

// TestVectorReaders reads both forms (no simulator needed) and checks them
// against each other: the hex records are the JSON cases that fit a
// record, in the same order.
func TestVectorReaders(t *testing.T) {
	js, hx := loadJSONVectors(t), loadHexVectors(t)
	if js.version != hx.version || js.hasKey != hx.hasKey || js.key != hx.key {
		t.Fatalf("forms disagree: json %s key %v %x, hex %s key %v %x", js.format, js.hasKey, js.key, hx.format, hx.hasKey, hx.key)
	}
	j := 0
	for i, h := range hx.cases {
		for j < len(js.cases) && (string(js.cases[j].frame) != string(h.frame) || js.cases[j].in != h.in) {
			j++
		}
		if j == len(js.cases) {
			t.Fatalf("hex record %d is not a JSON case (in JSON order)", i)
		}
		if c := js.cases[j]; c.out != h.out || c.reason != h.reason || c.slowPath != h.slowPath || c.tagValid != h.tagValid || c.decoded != h.decoded {
			t.Fatalf("hex record %d and %s disagree", i, c.where)
		}
		j++
	}
	t.Logf("%s: %d cases; %s: %d records; key %v %x", js.format, len(js.cases), hx.format, len(hx.cases), js.hasKey, js.key)
}
