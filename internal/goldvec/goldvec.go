// Package goldvec defines the JSON form of the golden vectors of
// testdata/vectors (docs/vectors.md) and reads them for the drivers'
// tests: the JSON form (vectors.json) and the hex form (vectors.hex with
// its manifest vectors.meta), both as one list of (state, frame) ->
// (reason, state') cases.
//
// It reads format 2 (exo-vectors/2, EXOVEC02), format 3 (exo-vectors/3,
// EXOVEC03: the SipHash tag check, with the test key in the files),
// format 4 (exo-vectors/4, EXOVEC04: two key slots; the frame's key phase
// bit picks one, slot 1 may be empty) and format 5 (exo-vectors/5: the
// transmit side, exo.Engine.Step, in the JSON form only; its hex form is
// still exo-vectors-hex/4). The hex reader takes every field position from
// vectors.meta, so words that move between formats move here too.
//
// Format 5 splits the JSON cases in two lists. Set.Cases are the receive
// side, as before: every case without a "tx" object (token mode off),
// whose expectation is Classify and Accept, what a receive-only fast path
// (the XDP program with xdp_token off, the FPGA engine) must do. Set.TxCases
// are the cases with one (suite token, the token_* streams): the state
// before is Case.In and Case.TxIn, the transmit queue Case.Queue, and the
// expectation Case.Out, Case.TxOut and Case.Turn, what exo.Engine.Step does
// with the queue's head and the key of slot TxIn.Phase.
//
// The package owns the JSON form's schema (schema.go): the Go types of
// vectors.json, which tools/vecgen fills to write the file and every Go
// reader decodes into (ReadJSON, JSONFile.Flatten, LoadJSON; the core's
// replay in exo/vectors_test.go). The hex forms have no Go types to
// share: LoadHex takes its layout from vectors.meta, while the core's
// check and tools/vecgen's tests read the hex files with the layout
// docs/vectors.md gives.
//
// The readers return errors rather than failing a test, so they can be
// used outside tests.
package goldvec

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/exo-rack/exo/exo"
)

// Case is one (state, frame) -> (reason, state') case.
type Case struct {
	// Where names the case in messages: "suite/name" or
	// "stream/name#step" for the JSON form, "hex record i" for the hex.
	Where   string
	In, Out exo.Pointers
	Frame   []byte // after the Ethernet header
	Reason  exo.Reason
	// SlowPath: the frame goes to the slow path.
	SlowPath bool
	// Chained: a stream step after the first; In is the previous step's
	// Out, and a replay should carry the state rather than set In.
	Chained bool
	// Decoded: the codec accepted the frame.
	Decoded bool
	// TagValid: the frame decodes and its tag field is its tag under the
	// key; TagKnown says the files say so (format 3).
	TagValid, TagKnown bool
	// Key1Valid: key slot 1 holds Set.Key1 for this case (format 4);
	// slot 0 always holds Set.Key. Before format 4 there is no slot 1.
	Key1Valid bool

	// The transmit side (format 5, Set.TxCases only). HasTx: the case has
	// one. TxIn is the exo.Tx before (in a stream: the previous step's
	// TxOut, unless the step was armed again: then Chained is false and In
	// and TxIn are the armed state), TxOut the exo.Tx after. Queue is the
	// transmit queue before the case, head first (empty: none); Step sends
	// only its head. Turn is what Step did.
	HasTx       bool
	TxIn, TxOut exo.Tx
	Queue       []exo.Batch
	Turn        Turn
}

// Turn is the expected exo.Turn of a transmit case.
type Turn struct {
	// Record: the frame goes to the control plane (TxOut.Kseq =
	// TxIn.Kseq+1).
	Record bool
	// Sent is the frame the fast path sent, encoded (Frame.AppendBinary,
	// sealed under the key of slot TxIn.Phase, no Ethernet padding); nil
	// when it sent nothing.
	Sent []byte
	// Popped: Sent carries the queue's head (TxOut.QHead = TxIn.QHead+1).
	Popped bool
	// Handoff: the idle rack's token went to the control plane (halted).
	Handoff bool
	// Halt: the fast path halted itself (Out.Halted): a hand-off, or a
	// slow-path verdict other than HALTED.
	Halt bool
}

// SendKey is the key the fast path of c seals the frame it sends with:
// the key of slot TxIn.Phase (Set.Key for 0, Set.Key1 for 1).
func (vs *Set) SendKey(c *Case) [exo.TagKeyLen]byte {
	if c.TxIn.Phase&1 == 1 {
		return vs.Key1
	}
	return vs.Key
}

// Keys returns the key ring a case runs under: Set.Key in slot 0, and
// Set.Key1 in slot 1 when the case says slot 1 holds it.
func (vs *Set) Keys(c *Case) exo.KeyRing {
	r := exo.NewKeyRing(0, vs.Key)
	r.Key[1], r.Valid[1] = vs.Key1, c.Key1Valid && vs.HasKey1
	return r
}

// Set is one form of the vectors.
type Set struct {
	Format  string              // the format line: exo-vectors/5, exo-vectors-hex/4
	Version int                 // 2 to 5 (JSON), 2 to 4 (hex)
	Key     [exo.TagKeyLen]byte // the SipHash key of the tags (format 3)
	HasKey  bool                // Key is set
	Key1    [exo.TagKeyLen]byte // the key of slot 1 (format 4)
	HasKey1 bool                // Key1 is set
	Cases   []Case              // in file order; the receive side (no tx)
	// TxCases are the cases with a transmit side (format 5, JSON form):
	// the token suite's vectors, then the token streams' steps, in file
	// order.
	TxCases []Case
}

// TestKey is the tag key of slot 0 in every vector since format 3: bytes
// 00..0f, the SipHash paper's test key.
func TestKey() (k [exo.TagKeyLen]byte) {
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

// TestKey1 is the key of slot 1 since format 4: bytes 10..1f.
func TestKey1() (k [exo.TagKeyLen]byte) {
	for i := range k {
		k[i] = byte(16 + i)
	}
	return k
}

// StateString formats p with every field, for messages.
func StateString(p exo.Pointers) string {
	return fmt.Sprintf("{group %d hosts %d epoch %d halted %v window %d append %d agreed %d epoch_start %d history %v}",
		p.Group, p.Hosts, p.Epoch, p.Halted, p.Window, p.Append, p.Agreed, p.EpochStart, p.Hist())
}

// Dir finds testdata/vectors: it walks up from the working directory
// (a package directory, in tests) to the module root, the first directory
// with a go.mod, and returns its testdata/vectors.
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			v := filepath.Join(d, "testdata", "vectors")
			if _, err := os.Stat(filepath.Join(v, "vectors.json")); err != nil {
				return "", fmt.Errorf("goldvec: module root %s: %w", d, err)
			}
			return v, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("goldvec: no go.mod above %s", wd)
		}
		d = up
	}
}

// load runs read on dir, or on Dir() for "", and puts prefix before its
// errors.
func load[T any](dir string, read func(dir string) (T, error), prefix string) (T, error) {
	var zero T
	if dir == "" {
		var err error
		if dir, err = Dir(); err != nil {
			return zero, err
		}
	}
	v, err := read(dir)
	if err != nil {
		return zero, fmt.Errorf("%s%w", prefix, err)
	}
	return v, nil
}

// ---- JSON form ----------------------------------------------------------

// parseKey reads a key written as 32 hex digits.
func parseKey(s string) ([exo.TagKeyLen]byte, error) {
	var k [exo.TagKeyLen]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(k) {
		return k, fmt.Errorf("key %q is not %d hex bytes", s, len(k))
	}
	copy(k[:], b)
	return k, nil
}

// formatVersion reads the version of a format line: 2 to max.
func formatVersion(format, prefix string, max int) (int, error) {
	v, ok := strings.CutPrefix(format, prefix)
	if !ok {
		return 0, fmt.Errorf("format %q, want %s2 to %d", format, prefix, max)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 || n > max {
		return 0, fmt.Errorf("format %q: this reader knows versions 2 to %d", format, max)
	}
	return n, nil
}

// Versions this reader knows: format 5 changed the JSON form only.
const (
	jsonMaxVersion = 5
	hexMaxVersion  = 4
)

// hexVersion is the version of the hex form that goes with a JSON version.
func hexVersion(jsonVersion int) int { return min(jsonVersion, hexMaxVersion) }

// LoadJSON reads dir/vectors.json (dir "" is Dir()) with ReadJSON: the
// vectors, then the streams' steps in order.
func LoadJSON(dir string) (Set, error) { return load(dir, loadJSON, "vectors.json: ") }

func loadJSON(dir string) (Set, error) {
	f, err := readJSON(dir)
	if err != nil {
		return Set{}, err
	}
	vs := Set{Format: f.Format}
	if vs.Version, err = f.Version(); err != nil {
		return Set{}, err
	}
	if vs.Version >= 3 {
		if vs.Key, err = parseKey(f.TagKey); err != nil {
			return Set{}, fmt.Errorf("tag_key: %w", err)
		}
		vs.HasKey = true
	}
	if vs.Version >= 4 {
		if vs.Key1, err = parseKey(f.TagKey1); err != nil {
			return Set{}, fmt.Errorf("tag_key_1: %w", err)
		}
		vs.HasKey1 = true
	}
	cases, err := f.Flatten()
	if err != nil {
		return Set{}, err
	}
	for i := range cases {
		c := &cases[i]
		frame, err := hex.DecodeString(c.Frame)
		if err != nil {
			return Set{}, fmt.Errorf("%s: frame: %w", c.Where, err)
		}
		g := Case{Where: c.Where, In: c.In, Out: c.Out, Frame: frame, Reason: exo.Reason(c.Expect.Reason),
			SlowPath: c.Expect.SlowPath, Chained: c.Chained, Decoded: c.Decoded != nil}
		if vs.Version >= 3 {
			g.TagKnown = true
			g.TagValid = c.Decoded != nil && c.Decoded.TagValid
		}
		if vs.Version >= 4 {
			g.Key1Valid = c.Key1Valid
		}
		if c.TxIn == nil {
			vs.Cases = append(vs.Cases, g)
			continue
		}
		g.HasTx, g.TxIn, g.TxOut = true, *c.TxIn, *c.TxOut
		for i := range c.Queue {
			b, err := c.Queue[i].Batch()
			if err != nil {
				return Set{}, fmt.Errorf("%s: queue[%d]: %w", c.Where, i, err)
			}
			g.Queue = append(g.Queue, b)
		}
		t := c.Expect.Turn
		g.Turn = Turn{Record: t.Record, Popped: t.Popped, Handoff: t.Handoff, Halt: t.Halt}
		if t.Sent != "" {
			if g.Turn.Sent, err = hex.DecodeString(t.Sent); err != nil {
				return Set{}, fmt.Errorf("%s: turn.sent: %w", c.Where, err)
			}
		}
		vs.TxCases = append(vs.TxCases, g)
	}
	return vs, nil
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
	key1    uint64 // flag_key1_valid (format 4)
	fields  map[string]hexField
}

func loadHexMeta(dir string) (hexMeta, error) {
	f, err := os.Open(filepath.Join(dir, "vectors.meta"))
	if err != nil {
		return hexMeta{}, err
	}
	defer f.Close()
	m := hexMeta{fields: map[string]hexField{}}
	var bad error
	num := func(s string) uint64 {
		x, err := strconv.ParseUint(s, 0, 64)
		if err != nil && bad == nil {
			bad = fmt.Errorf("vectors.meta: %q: %w", s, err)
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
		case "flag_key1_valid":
			m.key1 = num(w[1])
		case "field":
			if len(w) != 5 {
				return m, fmt.Errorf("vectors.meta: %q", sc.Text())
			}
			m.fields[w[1]] = hexField{int(num(w[2])), int(num(w[3])), int(num(w[4]))}
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("vectors.meta: %w", err)
	}
	if bad != nil {
		return m, bad
	}
	if m.count == 0 || m.words == 0 || m.magic == 0 {
		return m, fmt.Errorf("vectors.meta: count %d, record_words %d, magic %#x", m.count, m.words, m.magic)
	}
	for name, fl := range m.fields {
		if fl.word < 0 || fl.word >= m.words || fl.lsb < 0 || fl.msb < fl.lsb || fl.msb > 63 {
			return m, fmt.Errorf("vectors.meta: field %s %v does not fit a record of %d words", name, fl, m.words)
		}
	}
	return m, nil
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

// LoadHex reads dir/vectors.hex (dir "" is Dir()) with the field
// positions, record size, magic and flags of dir/vectors.meta. It checks
// the record count against the manifest, the magic of every record, and
// that every record carries the same key (format 3: fields tag_key_*, MSB
// first in word order). A format 3 set without key fields gets TestKey.
func LoadHex(dir string) (Set, error) { return load(dir, loadHex, "") }

func loadHex(dir string) (Set, error) {
	m, err := loadHexMeta(dir)
	if err != nil {
		return Set{}, err
	}
	vs := Set{Format: m.format}
	if vs.Version, err = formatVersion(m.format, "exo-vectors-hex/", hexMaxVersion); err != nil {
		return Set{}, fmt.Errorf("vectors.meta: %w", err)
	}
	var missing []string
	field := func(name string) hexField {
		f, ok := m.fields[name]
		if !ok {
			missing = append(missing, name)
		}
		return f
	}
	magic := field("magic")
	frameLen, exoLen, vflags := field("frame_len"), field("exo_len"), field("vflags")
	reason, slow := field("reason"), field("slow_path")
	frameW := field("frame").word
	type stateFields struct{ group, hosts, window, epoch, halted, append, agreed, epochStart, h0, h8 hexField }
	stateOf := func(p string) stateFields {
		return stateFields{field(p + "group"), field(p + "hosts"), field(p + "window"), field(p + "epoch"), field(p + "halted"),
			field(p + "append"), field(p + "agreed"), field(p + "epoch_start"), field(p + "hist0_7"), field(p + "hist8_15")}
	}
	inF, outF := stateOf("in_"), stateOf("out_")
	if len(missing) > 0 {
		return Set{}, fmt.Errorf("vectors.meta: no field %s", strings.Join(missing, ", "))
	}
	state := func(rec []uint64, f stateFields) exo.Pointers {
		s := exo.NewPointers(uint16(f.group.get(rec)), int(f.hosts.get(rec)), f.window.get(rec))
		s.Epoch, s.Halted = uint32(f.epoch.get(rec)), f.halted.get(rec) != 0
		s.Append, s.Agreed, s.EpochStart = f.append.get(rec), f.agreed.get(rec), f.epochStart.get(rec)
		for i := 0; i < s.H() && i < 16; i++ {
			w := f.h0.word
			if i >= 8 {
				w = f.h8.word
			}
			s.History[i] = byteAt(rec, w, i%8)
		}
		return s
	}

	// the key: format 3 has it in fields tag_key_*, MSB first in word
	// order; format 4 the slot-1 key in fields tag_key1_*
	var keyFields, key1Fields []hexField
	for name, fl := range m.fields {
		switch {
		case strings.HasPrefix(name, "tag_key1"):
			key1Fields = append(key1Fields, fl)
		case strings.HasPrefix(name, "tag_key") || strings.HasPrefix(name, "key"):
			keyFields = append(keyFields, fl)
		}
	}
	for _, kf := range [][]hexField{keyFields, key1Fields} {
		sort.Slice(kf, func(i, j int) bool {
			a, b := kf[i], kf[j]
			return a.word < b.word || a.word == b.word && a.msb > b.msb
		})
	}
	if vs.Version >= 4 && (len(key1Fields) == 0 || m.key1 == 0) {
		return Set{}, errors.New("vectors.meta: format 4 without the tag_key1 fields or flag_key1_valid")
	}
	keyOf := func(rec []uint64, fields []hexField) ([]byte, error) {
		var kb []byte
		for _, kf := range fields {
			v := kf.get(rec)
			for b := (kf.msb-kf.lsb+1)/8 - 1; b >= 0; b-- {
				kb = append(kb, byte(v>>(8*b)))
			}
		}
		if len(kb) != exo.TagKeyLen {
			return nil, fmt.Errorf("vectors.meta: the key fields hold %d bytes, want %d", len(kb), exo.TagKeyLen)
		}
		return kb, nil
	}

	words, err := readHexWords(filepath.Join(dir, "vectors.hex"))
	if err != nil {
		return Set{}, err
	}
	if len(words) != m.count*m.words {
		return Set{}, fmt.Errorf("vectors.hex: %d words, vectors.meta says %d records of %d", len(words), m.count, m.words)
	}
	for i := range m.count {
		rec := words[i*m.words : (i+1)*m.words]
		if magic.get(rec) != m.magic {
			return Set{}, fmt.Errorf("hex record %d: magic %016x, want %016x", i, magic.get(rec), m.magic)
		}
		if len(key1Fields) > 0 {
			kb, err := keyOf(rec, key1Fields)
			if err != nil {
				return Set{}, err
			}
			if i == 0 {
				copy(vs.Key1[:], kb)
				vs.HasKey1 = true
			} else if string(kb) != string(vs.Key1[:]) {
				return Set{}, fmt.Errorf("hex record %d: slot-1 key %x, record 0 has %x", i, kb, vs.Key1)
			}
		}
		if len(keyFields) > 0 {
			kb, err := keyOf(rec, keyFields)
			if err != nil {
				return Set{}, err
			}
			if i == 0 {
				copy(vs.Key[:], kb)
				vs.HasKey = true
			} else if string(kb) != string(vs.Key[:]) {
				return Set{}, fmt.Errorf("hex record %d: key %x, record 0 has %x", i, kb, vs.Key)
			}
		}
		n := int(frameLen.get(rec))
		if frameW*8+n > m.words*8 {
			return Set{}, fmt.Errorf("hex record %d: frame_len %d", i, n)
		}
		frame := make([]byte, n)
		for k := range frame {
			frame[k] = byteAt(rec, frameW, k)
		}
		vs.Cases = append(vs.Cases, Case{
			Where:    fmt.Sprintf("hex record %d", i),
			In:       state(rec, inF),
			Out:      state(rec, outF),
			Frame:    frame,
			Reason:   exo.Reason(reason.get(rec)),
			SlowPath: slow.get(rec) != 0,
			Chained:  vflags.get(rec)&m.chained != 0,
			Decoded:  exoLen.get(rec) != 0,
			TagKnown: m.tagOK != 0,
			TagValid: m.tagOK != 0 && vflags.get(rec)&m.tagOK != 0,
			// format 4
			Key1Valid: m.key1 != 0 && vflags.get(rec)&m.key1 != 0,
		})
	}
	if vs.Version >= 3 && !vs.HasKey {
		vs.Key, vs.HasKey = TestKey(), true
	}
	return vs, nil
}

// readHexWords reads one 64-bit hex word a line, skipping blank lines and
// // comments.
func readHexWords(path string) ([]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
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
			return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		words = append(words, x)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return words, nil
}

// Agree checks the two forms against each other: the same format version
// (the hex form of JSON format 5 is format 4) and key, and every hex
// record is a JSON case of the receive side (same frame and state before)
// in JSON order, with the same state after, reason, slow path, decoding
// and tag validity. It returns how many hex records it matched.
func Agree(js, hx Set) (int, error) {
	if hexVersion(js.Version) != hx.Version || js.HasKey != hx.HasKey || js.Key != hx.Key || js.HasKey1 != hx.HasKey1 || js.Key1 != hx.Key1 {
		return 0, fmt.Errorf("forms disagree: json %s key %v %x key1 %v %x, hex %s key %v %x key1 %v %x",
			js.Format, js.HasKey, js.Key, js.HasKey1, js.Key1, hx.Format, hx.HasKey, hx.Key, hx.HasKey1, hx.Key1)
	}
	j := 0
	for i, h := range hx.Cases {
		for j < len(js.Cases) && (string(js.Cases[j].Frame) != string(h.Frame) || js.Cases[j].In != h.In || js.Cases[j].Key1Valid != h.Key1Valid) {
			j++
		}
		if j == len(js.Cases) {
			return i, fmt.Errorf("hex record %d is not a JSON case (in JSON order)", i)
		}
		if c := js.Cases[j]; c.Out != h.Out || c.Reason != h.Reason || c.SlowPath != h.SlowPath || c.TagValid != h.TagValid || c.Decoded != h.Decoded || c.Key1Valid != h.Key1Valid {
			return i, fmt.Errorf("%s and %s disagree", h.Where, c.Where)
		}
		j++
	}
	return len(hx.Cases), nil
}
