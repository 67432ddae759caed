package frames

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
)

// InputError is an error in the input (a field out of range, a bad option,
// an unreadable description), as opposed to a failure while running (a
// corrupt capture, an interface that cannot be opened). exo frame exits
// with 2 for the first and 1 for the second, so a script can tell them
// apart.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// inputErr returns an *InputError with a formatted message.
func inputErr(format string, a ...any) error {
	return &InputError{Err: fmt.Errorf(format, a...)}
}

// Fields describe frames as exo frame craft and send take them on the
// command line, as typed: the numbers that only one form can take are
// parsed, the rest (Sender, Seq, History, Flags, Tag) is text that Spec
// parses, so that every mistake gets a message naming its flag.
type Fields struct {
	Group      uint64
	Sender     string // id or host name
	Epoch      uint64
	Seq        string // N or A-B
	Count      int    // frames with seq, seq+1, ... (--count)
	History    string // ids, most recent first, comma-separated
	Payload    string
	PayloadHex string
	Records    []string
	RecordsHex []string
	Flags      string
	Tag        string

	// Given reports whether a flag of this name (fieldFlags, "key-file",
	// "src", ...) was given: an empty --payload is one empty record, and
	// some flags exclude others. Nil: none was.
	Given func(name string) bool
}

// fieldFlags are the flags that describe a frame (not allowed with a JSON
// source).
var fieldFlags = []string{"group", "sender", "epoch", "seq", "history", "payload", "payload-hex", "record", "record-hex", "flags", "tag"}

func (o *Fields) given(name string) bool { return o.Given != nil && o.Given(name) }

// fieldsGiven reports whether any frame field flag was given.
func (o *Fields) fieldsGiven() bool {
	for _, n := range fieldFlags {
		if o.given(n) {
			return true
		}
	}
	return false
}

// Source is where crafted frames come from: the field flags or a JSON
// stream, checked against an optional rack size and sealed with an
// optional group key.
type Source struct {
	Fields
	// Hosts is the rack size n; if > 0, sender < n, hist_len = floor(n/2)
	// and every id < n.
	Hosts int
	// JSON is a file of JSON frames ("-": In) used instead of the fields.
	JSON string
	In   io.Reader
	// KeyFile is a group key file (the daemon's key_file): every frame is
	// sealed with its tag under the frame key derived from it
	// (daemon.FrameKey). Without it the tag is Tag's (or the JSON's) and
	// the frames are unsigned: a rack drops them as BAD_TAG.
	KeyFile string
}

// Built is one checked, encoded frame.
type Built struct {
	Frame exo.Frame
	Bytes []byte // the Exo frame: the bytes after the Ethernet header, unpadded
}

// Build checks every field of src and encodes (and, with a key file,
// seals) its frames; nothing is written.
func Build(src Source) ([]Built, error) {
	if src.Hosts < 0 || src.Hosts > exo.MaxHosts {
		return nil, inputErr("--hosts %d: want 1..%d", src.Hosts, exo.MaxHosts)
	}
	var specs []Spec
	if src.JSON != "" {
		if src.fieldsGiven() {
			return nil, inputErr("--json %s: give the frame fields in the JSON, not also as flags (%s)", src.JSON, strings.Join(fieldFlags, ", "))
		}
		s, err := ReadSpecs(src.JSON, src.In)
		if err != nil {
			return nil, err
		}
		specs = s
	} else {
		s, err := src.Spec()
		if err != nil {
			return nil, err
		}
		specs = []Spec{s}
	}
	var out []Built
	for i, s := range specs {
		fs, err := s.Build(src.Hosts)
		if err != nil {
			if len(specs) > 1 {
				return nil, inputErr("frame %d of %s: %v", i+1, src.JSON, errors.Unwrap(err))
			}
			return nil, err
		}
		out = append(out, fs...)
	}
	if len(out) == 0 {
		return nil, inputErr("no frames: %s holds no frame object", src.JSON)
	}
	if err := src.seal(out); err != nil {
		return nil, err
	}
	return out, nil
}

// seal computes the frames' tags under the frame key of KeyFile; without
// one it leaves the given tags.
func (src *Source) seal(frames []Built) error {
	if src.KeyFile == "" {
		return nil
	}
	if src.given("tag") {
		return inputErr("--tag and --key-file: with --key-file the tag is computed (give one of them)")
	}
	groupKey, err := daemon.ReadKey(src.KeyFile)
	if err != nil {
		return inputErr("--key-file: %v", err)
	}
	key := daemon.FrameKey(groupKey)
	for i := range frames {
		if err := exo.Seal(frames[i].Bytes, key); err != nil {
			return fmt.Errorf("sealing frame %d: %w", i+1, err)
		}
		frames[i].Frame.Tag = binary.BigEndian.Uint64(frames[i].Bytes[exo.OffTag:])
	}
	return nil
}

// Spec is one frame description, from flags or from JSON, before it is
// checked: numbers are wide so that out-of-range values get a message
// rather than wrap. One Spec describes the frames Seq..SeqEnd, equal but
// for their sequence numbers.
type Spec struct {
	Group, Sender, Epoch uint64
	Seq                  uint64
	SeqEnd               uint64 // inclusive; == Seq for one frame
	History              []string
	Records              [][]byte
	Flags                string
	Tag                  string
	Count                *uint64 // the count field, if given: must equal len(Records)
}

// Spec turns the field flags into a Spec.
func (o *Fields) Spec() (Spec, error) {
	s := Spec{Group: o.Group, Epoch: o.Epoch, Flags: o.Flags, Tag: o.Tag}
	var err error
	if s.Sender, err = strconv.ParseUint(strings.TrimSpace(o.Sender), 0, 64); err != nil {
		id, ok := lab.ParseHostName(strings.TrimSpace(o.Sender))
		if !ok {
			return s, inputErr("--sender %q: want an id 0..254 or a host name (A, B, ..)", o.Sender)
		}
		s.Sender = uint64(id)
	}
	a, b, isRange := strings.Cut(o.Seq, "-")
	if s.Seq, err = strconv.ParseUint(strings.TrimSpace(a), 0, 64); err != nil {
		return s, inputErr("--seq %q: want a 64-bit number N or a range A-B", o.Seq)
	}
	s.SeqEnd = s.Seq
	if isRange {
		if s.SeqEnd, err = strconv.ParseUint(strings.TrimSpace(b), 0, 64); err != nil || s.SeqEnd < s.Seq {
			return s, inputErr("--seq %q: want a range A-B with A <= B", o.Seq)
		}
		if o.Count != 1 {
			return s, inputErr("--seq %s is a range: --count %d would give the frames twice; use one of them", o.Seq, o.Count)
		}
	}
	if o.Count < 1 {
		return s, inputErr("--count %d: want at least 1 frame", o.Count)
	}
	if !isRange {
		if uint64(o.Count-1) > ^uint64(0)-s.Seq {
			return s, inputErr("--seq %d --count %d: the sequence number would overflow 64 bits", s.Seq, o.Count)
		}
		s.SeqEnd = s.Seq + uint64(o.Count-1)
	}
	if o.History != "" {
		s.History = strings.Split(o.History, ",")
	}
	if o.given("payload") {
		s.Records = append(s.Records, []byte(o.Payload))
	}
	if o.given("payload-hex") {
		r, err := parseHex(o.PayloadHex)
		if err != nil {
			return s, inputErr("--payload-hex: %v", err)
		}
		s.Records = append(s.Records, r)
	}
	for _, r := range o.Records {
		s.Records = append(s.Records, []byte(r))
	}
	for i, h := range o.RecordsHex {
		r, err := parseHex(h)
		if err != nil {
			return s, inputErr("--record-hex #%d: %v", i+1, err)
		}
		s.Records = append(s.Records, r)
	}
	return s, nil
}

// MaxFrames bounds one Spec: a typo like --seq 1-1e18 must not try to
// build the frames.
const MaxFrames = 10_000_000

// Build checks s (against a rack of hosts hosts if hosts > 0) and encodes
// its frames; every error is an *InputError.
func (s *Spec) Build(hosts int) ([]Built, error) {
	if s.Group > 0xFFFF {
		return nil, inputErr("group %d: want 0..65535", s.Group)
	}
	if s.Sender >= exo.HistoryNone {
		return nil, inputErr("sender %d: want an id 0..254 (255 is the history's none marker)", s.Sender)
	}
	if hosts > 0 && s.Sender >= uint64(hosts) {
		return nil, inputErr("sender %d: not in a rack of --hosts %d (ids 0..%d)", s.Sender, hosts, hosts-1)
	}
	if s.Epoch > 0xFFFFFFFF {
		return nil, inputErr("epoch %d: want 0..4294967295", s.Epoch)
	}
	if s.SeqEnd < s.Seq || s.SeqEnd-s.Seq >= MaxFrames {
		return nil, inputErr("seq %d..%d: at most %d frames at once", s.Seq, s.SeqEnd, MaxFrames)
	}
	hist, err := parseHistory(s.History, hosts)
	if err != nil {
		return nil, err
	}
	if len(hist) > exo.MaxHistory {
		return nil, inputErr("history of %d ids: at most %d", len(hist), exo.MaxHistory)
	}
	if hosts > 0 && len(hist) != hosts/2 {
		return nil, inputErr("history of %d ids: a rack of --hosts %d needs floor(%d/2) = %d (X for none)", len(hist), hosts, hosts, hosts/2)
	}
	seen := map[uint8]bool{}
	for _, id := range hist {
		if id != exo.HistoryNone && seen[id] {
			return nil, inputErr("history %s: id %d (%s) repeated", strings.Join(s.History, ","), id, lab.HostName(int(id)))
		}
		seen[id] = true
	}
	flags, err := parseFlags(s.Flags, hosts)
	if err != nil {
		return nil, err
	}
	tag, err := strconv.ParseUint(strings.TrimSpace(s.Tag), 0, 64)
	if err != nil {
		return nil, inputErr("tag %q: want a 64-bit number (0x... for hex)", s.Tag)
	}
	if len(s.Records) > 0xFFFF {
		return nil, inputErr("%d records: at most 65535 (the count field is 16 bits)", len(s.Records))
	}
	var payload []byte
	size := 0
	for _, r := range s.Records {
		size += exo.RecordLenSize + len(r)
	}
	if size > exo.MaxPayload {
		return nil, inputErr("payload of %d bytes (%d records with their 2-byte lengths): at most %d (payload_len is 16 bits)", size, len(s.Records), exo.MaxPayload)
	}
	for _, r := range s.Records {
		if payload, err = exo.AppendRecord(payload, r); err != nil {
			return nil, inputErr("payload: %v", err)
		}
	}
	if s.Count != nil && *s.Count != uint64(len(s.Records)) {
		return nil, inputErr("count %d: the frame has %d records (the count field is derived from them)", *s.Count, len(s.Records))
	}
	base := exo.Frame{
		Type: exo.FrameData, Group: uint16(s.Group), Sender: uint8(s.Sender), Epoch: uint32(s.Epoch),
		Count: uint16(len(s.Records)), Flags: flags, Tag: tag, History: hist, Payload: payload,
	}
	out := make([]Built, 0, s.SeqEnd-s.Seq+1)
	for seq := s.Seq; ; seq++ {
		f := base
		f.Seq = seq
		b, err := f.MarshalBinary()
		if err != nil {
			return nil, inputErr("frame seq %d: %v", seq, err)
		}
		out = append(out, Built{Frame: f, Bytes: b})
		if seq == s.SeqEnd {
			break
		}
	}
	return out, nil
}

// HostID parses a host name (A, B, .., AA) or a number 0..254.
func HostID(s string) (uint8, bool) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseUint(s, 0, 8); err == nil && n < exo.HistoryNone {
		return uint8(n), true
	}
	if id, ok := lab.ParseHostName(s); ok && id < exo.HistoryNone {
		return uint8(id), true
	}
	return 0, false
}

// parseHistory parses history ids: names, numbers, X (or 255) for none.
func parseHistory(ids []string, hosts int) ([]uint8, error) {
	hist := make([]uint8, 0, len(ids))
	for _, s := range ids {
		t := strings.TrimSpace(s)
		if strings.EqualFold(t, "X") || t == "255" || t == "0xff" || t == "0xFF" {
			hist = append(hist, exo.HistoryNone)
			continue
		}
		id, ok := HostID(t)
		if !ok {
			return nil, inputErr("history id %q: want a host name (A..), an id 0..254, or X for none", s)
		}
		if hosts > 0 && int(id) >= hosts {
			return nil, inputErr("history id %s (%d): not in a rack of --hosts %d", t, id, hosts)
		}
		hist = append(hist, id)
	}
	return hist, nil
}

// parseFlags parses 0, readmit:HOST or a number, and checks it.
func parseFlags(s string, hosts int) (uint16, error) {
	s = strings.TrimSpace(s)
	var fl uint16
	if h, ok := strings.CutPrefix(strings.ToLower(s), "readmit:"); ok {
		id, ok := HostID(h)
		if !ok {
			return 0, inputErr("flags %q: want readmit:HOST with a host name or id 0..254", s)
		}
		fl = exo.FlagReadmit | uint16(id)
	} else {
		n, err := strconv.ParseUint(s, 0, 16)
		if err != nil {
			return 0, inputErr("flags %q: want 0, readmit:HOST, or a 16-bit number", s)
		}
		fl = uint16(n)
	}
	if !exo.ValidFlags(fl) {
		return 0, inputErr("flags %#04x: want 0 or READMIT (0x8000) | host id; other bits are BAD_FLAGS", fl)
	}
	if fl != 0 && hosts > 0 && int(fl&exo.FlagHostMask) >= hosts {
		return 0, inputErr("flags readmit:%d: host not in a rack of --hosts %d", fl&exo.FlagHostMask, hosts)
	}
	return fl, nil
}

// parseHex reads bytes written in hex, with an optional 0x and any spaces,
// colons, tabs and newlines between them.
func parseHex(s string) ([]byte, error) {
	s = strings.NewReplacer(" ", "", ":", "", "\n", "", "\t", "").Replace(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not hex: %v", err)
	}
	return b, nil
}

// specJSON is one JSON frame: the same fields as the flags, and the same
// names as Decoded's, so that a dump's output can be crafted again.
// Unknown fields (a dump's time, reason, ...) are ignored.
type specJSON struct {
	Group      *uint64           `json:"group"`
	Sender     *uint64           `json:"sender"`
	Epoch      *uint64           `json:"epoch"`
	Seq        *uint64           `json:"seq"`
	Frames     *uint64           `json:"frames"` // frames with seq, seq+1, ...
	History    json.RawMessage   `json:"history"`
	Payload    *string           `json:"payload"`
	PayloadHex *string           `json:"payload_hex"`
	Records    []json.RawMessage `json:"records"`
	Flags      json.RawMessage   `json:"flags"`
	Tag        json.RawMessage   `json:"tag"`
	Count      *uint64           `json:"count"`
	Version    *uint64           `json:"version"`
	Type       *uint64           `json:"type"`
	Valid      *bool             `json:"valid"`
}

// ReadSpecs reads JSON frames from the file path, or from stdin if path is
// "-": a stream of objects or arrays of objects (Dump's JSON output is
// one). Fields: group, sender, epoch, seq, frames (like --count),
// history ([3, 2], ["D", "C"] or "D,C"), payload, payload_hex, records
// (each "text" or {"text"|"hex"|"base64": ...}), flags and tag (number or
// string), count (checked against the records); a version, type or valid
// field other than a valid DATA frame's is refused.
func ReadSpecs(path string, stdin io.Reader) ([]Spec, error) {
	var r io.Reader
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, inputErr("--json: %v", err)
		}
		defer f.Close()
		r = f
	}
	dec := json.NewDecoder(bufio.NewReader(r))
	var specs []Spec
	for n := 1; ; {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return specs, nil
		} else if err != nil {
			return nil, inputErr("--json %s: not JSON after %d frames: %v", path, len(specs), err)
		}
		var objs []json.RawMessage
		if t := strings.TrimSpace(string(raw)); strings.HasPrefix(t, "[") {
			if err := json.Unmarshal(raw, &objs); err != nil {
				return nil, inputErr("--json %s: %v", path, err)
			}
		} else {
			objs = []json.RawMessage{raw}
		}
		for _, o := range objs {
			s, err := parseSpecJSON(o)
			if err != nil {
				return nil, inputErr("--json %s: frame %d: %v", path, n, err)
			}
			specs = append(specs, s)
			n++
		}
	}
}

func parseSpecJSON(raw json.RawMessage) (Spec, error) {
	var j specJSON
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&j); err != nil {
		return Spec{}, err
	}
	if j.Valid != nil && !*j.Valid {
		return Spec{}, errors.New("a malformed frame (valid: false): craft builds valid frames only")
	}
	if j.Version != nil && *j.Version != exo.Version {
		return Spec{}, fmt.Errorf("version %d: only version %d frames can be crafted", *j.Version, exo.Version)
	}
	if j.Type != nil && *j.Type != exo.TypeData {
		return Spec{}, fmt.Errorf("type %d: only DATA (%d) frames can be crafted", *j.Type, exo.TypeData)
	}
	s := Spec{Group: 1, Flags: "0", Tag: "0", Seq: 1, Count: j.Count}
	for _, p := range []struct {
		dst *uint64
		src *uint64
	}{{&s.Group, j.Group}, {&s.Sender, j.Sender}, {&s.Epoch, j.Epoch}, {&s.Seq, j.Seq}} {
		if p.src != nil {
			*p.dst = *p.src
		}
	}
	s.SeqEnd = s.Seq
	if j.Frames != nil {
		if *j.Frames < 1 || *j.Frames > MaxFrames || *j.Frames-1 > ^uint64(0)-s.Seq {
			return s, fmt.Errorf("frames %d: want 1..%d, within 64-bit seq", *j.Frames, MaxFrames)
		}
		s.SeqEnd = s.Seq + *j.Frames - 1
	}
	if len(j.History) > 0 && string(j.History) != "null" {
		var ids []any
		var str string
		if json.Unmarshal(j.History, &str) == nil {
			if str != "" {
				s.History = strings.Split(str, ",")
			}
		} else if err := json.Unmarshal(j.History, &ids); err != nil {
			return s, fmt.Errorf("history: want [3, 2], [\"D\", \"C\"] or \"D,C\": %v", err)
		} else {
			for _, id := range ids {
				switch v := id.(type) {
				case float64:
					s.History = append(s.History, strconv.FormatFloat(v, 'f', -1, 64))
				case string:
					s.History = append(s.History, v)
				default:
					return s, fmt.Errorf("history id %v: want a number or a name", id)
				}
			}
		}
	}
	if j.Payload != nil {
		s.Records = append(s.Records, []byte(*j.Payload))
	}
	if j.PayloadHex != nil {
		r, err := parseHex(*j.PayloadHex)
		if err != nil {
			return s, fmt.Errorf("payload_hex: %v", err)
		}
		s.Records = append(s.Records, r)
	}
	for i, rr := range j.Records {
		r, err := parseRecordJSON(rr)
		if err != nil {
			return s, fmt.Errorf("record %d: %v", i, err)
		}
		s.Records = append(s.Records, r)
	}
	var err error
	if s.Flags, err = numOrString(j.Flags, "0"); err != nil {
		return s, fmt.Errorf("flags: %v", err)
	}
	if s.Tag, err = numOrString(j.Tag, "0"); err != nil {
		return s, fmt.Errorf("tag: %v", err)
	}
	return s, nil
}

// parseRecordJSON reads a record: "text", or {"text"|"hex"|"base64": ...}
// (Dump's JSON gives base64 and, when printable, text: base64 wins).
func parseRecordJSON(raw json.RawMessage) ([]byte, error) {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return []byte(str), nil
	}
	var o struct {
		Text   *string `json:"text"`
		Hex    *string `json:"hex"`
		Base64 *string `json:"base64"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, errors.New(`want "text" or {"text"|"hex"|"base64": ...}`)
	}
	switch {
	case o.Base64 != nil:
		b, err := base64.StdEncoding.DecodeString(*o.Base64)
		if err != nil {
			return nil, fmt.Errorf("base64: %v", err)
		}
		return b, nil
	case o.Hex != nil:
		return parseHex(*o.Hex)
	case o.Text != nil:
		return []byte(*o.Text), nil
	}
	return nil, errors.New(`want "text" or {"text"|"hex"|"base64": ...}`)
}

// numOrString returns a JSON number or string as a string, def if absent.
func numOrString(raw json.RawMessage, def string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return def, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", errors.New("want a number or a string")
	}
	return n.String(), nil
}
