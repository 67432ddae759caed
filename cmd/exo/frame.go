package main

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
)

// exo frame: craft, send, dump and replay raw Exo frames by hand
// (docs/frames.md). Every field is checked before anything is written or
// sent; errors are one line and a non-zero exit (2 for bad input, 1 for a
// failure while running).

func newFrameCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "frame",
		Short: "Craft, send, dump and replay raw Exo frames (hex, raw bytes, pcap/pcapng)",
		Long: `frame works on raw Exo frames (docs/wire.md), one layer below the daemon:
  craft   build frames from flags or JSON: hex, raw bytes or a pcap/pcapng file
  send    send crafted frames (or a pcap's) on an interface, at a rate
  dump    decode frames live on an interface or from a pcap/pcapng file
  replay  send a pcap's Exo frames again, keeping their gaps
Malformed frames are shown with their reason code, never skipped. A Wireshark
dissector for the same frames is tools/wireshark/exo.lua (docs/frames.md).`,
	}
	cmd.AddCommand(newFrameCraftCmd(), newFrameSendCmd(), newFrameDumpCmd(), newFrameReplayCmd())
	return cmd
}

// frameBadInput is an error in the user's input: exit code 2.
func frameBadInput(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

// frameFailed is an error while running: exit code 1.
func frameFailed(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: 1, err: err}
}

// frameFields are the flags that describe frames (craft and send).
type frameFields struct {
	Group      uint64
	Sender     string // id or host name
	Epoch      uint64
	Seq        string // N or A-B
	Frames     int    // --count: frames with seq, seq+1, ...
	History    string
	Payload    string
	PayloadHex string
	Records    []string
	RecordsHex []string
	Flags      string
	Tag        string
	Hosts      int
	JSON       string // file or - (standard input)
	// KeyFile is a group key file (the daemon's key_file): every frame is
	// sealed with its tag under the frame key derived from it
	// (daemon.FrameKey). Without it the tag is Tag's (or the JSON's).
	KeyFile string
	// Note receives the one-line note that the frames are unsigned (no
	// KeyFile), once they are written or sent; nil: no note.
	Note     io.Writer
	unsigned bool // build made frames without computing their tags

	set func(name string) bool // whether a flag was given
}

// frameFieldFlagNames are the flags that describe a frame (not allowed with --json).
var frameFieldFlagNames = []string{"group", "sender", "epoch", "seq", "history", "payload", "payload-hex", "record", "record-hex", "flags", "tag"}

func (o *frameFields) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Uint64Var(&o.Group, "group", 1, "group id (0..65535)")
	f.StringVar(&o.Sender, "sender", "0", "sender: an id 0..254 or a host name (A, B, ..); < --hosts if given")
	f.Uint64Var(&o.Epoch, "epoch", 0, "epoch (0..4294967295)")
	f.StringVar(&o.Seq, "seq", "1", "sequence number N, or an inclusive range A-B (one frame each)")
	f.IntVar(&o.Frames, "count", 1, "frames to build: seq, seq+1, ... (with a single --seq)")
	f.StringVar(&o.History, "history", "", "history ids, most recent first: host names (A, B, .., AA) or numbers; X = none (0xFF), e.g. D,C or 3,2 or X,X")
	f.StringVar(&o.Payload, "payload", "", "one record: this text")
	f.StringVar(&o.PayloadHex, "payload-hex", "", "one record: these bytes in hex (after --payload's)")
	f.StringArrayVar(&o.Records, "record", nil, "one more record: this text (repeatable; after --payload-hex's)")
	f.StringArrayVar(&o.RecordsHex, "record-hex", nil, "one more record: these bytes in hex (repeatable; after --record's)")
	f.StringVar(&o.Flags, "flags", "0", "flags: 0, readmit:HOST (HOST a name or id), or a number such as 0x8003; 0x4000 is the key phase bit (the tag is then checked against key slot 1: use --key-file with the key of that slot)")
	f.StringVar(&o.Tag, "tag", "0", "authentication tag, a 64-bit number (0x... for hex)")
	f.IntVar(&o.Hosts, "hosts", 0, "rack size n: if given, check sender < n, hist_len = floor(n/2), ids < n")
	f.StringVar(&o.JSON, "json", "", "read the frames from this JSON file (- = standard input) instead of the field flags")
	f.StringVar(&o.KeyFile, "key-file", "", "the group key file (key_file): compute each frame's tag (else --tag's: unsigned)")
	o.set = func(name string) bool { return cmd.Flags().Changed(name) }
}

// fieldsGiven reports whether any frame field flag was given.
func (o *frameFields) fieldsGiven() bool {
	if o.set == nil {
		return false
	}
	for _, n := range frameFieldFlagNames {
		if o.set(n) {
			return true
		}
	}
	return false
}

// frameBuilt is one checked, encoded frame.
type frameBuilt struct {
	Frame exo.Frame
	Bytes []byte // the Exo frame: the bytes after the Ethernet header, unpadded
}

// build checks every field and encodes the frames; nothing is written.
func (o *frameFields) build(stdin io.Reader) ([]frameBuilt, error) {
	if o.Hosts < 0 || o.Hosts > exo.MaxHosts {
		return nil, frameBadInput("--hosts %d: want 1..%d", o.Hosts, exo.MaxHosts)
	}
	var specs []frameSpec
	if o.JSON != "" {
		if o.fieldsGiven() {
			return nil, frameBadInput("--json %s: give the frame fields in the JSON, not also as flags (%s)", o.JSON, strings.Join(frameFieldFlagNames, ", "))
		}
		s, err := frameReadSpecs(o.JSON, stdin)
		if err != nil {
			return nil, err
		}
		specs = s
	} else {
		s, err := o.spec()
		if err != nil {
			return nil, err
		}
		specs = []frameSpec{s}
	}
	var out []frameBuilt
	for i, s := range specs {
		fs, err := s.frames(o.Hosts)
		if err != nil {
			if len(specs) > 1 {
				return nil, frameBadInput("frame %d of %s: %v", i+1, o.JSON, errors.Unwrap(err))
			}
			return nil, err
		}
		out = append(out, fs...)
	}
	if len(out) == 0 {
		return nil, frameBadInput("no frames: %s holds no frame object", o.JSON)
	}
	if err := o.seal(out); err != nil {
		return nil, err
	}
	return out, nil
}

// seal computes the frames' tags under the frame key of KeyFile or, without
// one, leaves the given tags (noteUnsigned then says so).
func (o *frameFields) seal(frames []frameBuilt) error {
	if o.KeyFile == "" {
		o.unsigned = true
		return nil
	}
	if o.set != nil && o.set("tag") {
		return frameBadInput("--tag and --key-file: with --key-file the tag is computed (give one of them)")
	}
	groupKey, err := daemon.ReadKey(o.KeyFile)
	if err != nil {
		return frameBadInput("--key-file: %v", err)
	}
	key := daemon.FrameKey(groupKey)
	o.unsigned = false
	for i := range frames {
		if err := exo.Seal(frames[i].Bytes, key); err != nil {
			return frameFailed(err)
		}
		frames[i].Frame.Tag = binary.BigEndian.Uint64(frames[i].Bytes[exo.OffTag:])
	}
	return nil
}

// noteUnsigned writes, after the frames were written or sent, the one-line
// note that they are unsigned (built without --key-file).
func (o *frameFields) noteUnsigned() {
	if o.unsigned && o.Note != nil {
		fmt.Fprintf(o.Note, "exo frame: note: the frames are unsigned (tag from --tag, or 0; not computed): a rack drops them as BAD_TAG; --key-file FILE computes it\n")
	}
}

// frameSpec is one frame description, from flags or from JSON, before it
// is checked: numbers are wide so that out-of-range values get a message.
type frameSpec struct {
	Group, Sender, Epoch uint64
	Seq                  uint64
	SeqEnd               uint64 // inclusive; == Seq for one frame
	History              []string
	Records              [][]byte
	Flags                string
	Tag                  string
	Count                *uint64 // the count field, if given: must equal len(Records)
}

// spec turns the flags into a frameSpec.
func (o *frameFields) spec() (frameSpec, error) {
	s := frameSpec{Group: o.Group, Epoch: o.Epoch, Flags: o.Flags, Tag: o.Tag}
	var err error
	if s.Sender, err = strconv.ParseUint(strings.TrimSpace(o.Sender), 0, 64); err != nil {
		id, ok := lab.ParseHostName(strings.TrimSpace(o.Sender))
		if !ok {
			return s, frameBadInput("--sender %q: want an id 0..254 or a host name (A, B, ..)", o.Sender)
		}
		s.Sender = uint64(id)
	}
	a, b, isRange := strings.Cut(o.Seq, "-")
	if s.Seq, err = strconv.ParseUint(strings.TrimSpace(a), 0, 64); err != nil {
		return s, frameBadInput("--seq %q: want a 64-bit number N or a range A-B", o.Seq)
	}
	s.SeqEnd = s.Seq
	if isRange {
		if s.SeqEnd, err = strconv.ParseUint(strings.TrimSpace(b), 0, 64); err != nil || s.SeqEnd < s.Seq {
			return s, frameBadInput("--seq %q: want a range A-B with A <= B", o.Seq)
		}
		if o.Frames != 1 {
			return s, frameBadInput("--seq %s is a range: --count %d would give the frames twice; use one of them", o.Seq, o.Frames)
		}
	}
	if o.Frames < 1 {
		return s, frameBadInput("--count %d: want at least 1 frame", o.Frames)
	}
	if !isRange {
		if uint64(o.Frames-1) > ^uint64(0)-s.Seq {
			return s, frameBadInput("--seq %d --count %d: the sequence number would overflow 64 bits", s.Seq, o.Frames)
		}
		s.SeqEnd = s.Seq + uint64(o.Frames-1)
	}
	if o.History != "" {
		s.History = strings.Split(o.History, ",")
	}
	given := func(name string) bool { return o.set != nil && o.set(name) }
	if given("payload") {
		s.Records = append(s.Records, []byte(o.Payload))
	}
	if given("payload-hex") {
		r, err := frameParseHex(o.PayloadHex)
		if err != nil {
			return s, frameBadInput("--payload-hex: %v", err)
		}
		s.Records = append(s.Records, r)
	}
	for _, r := range o.Records {
		s.Records = append(s.Records, []byte(r))
	}
	for i, h := range o.RecordsHex {
		r, err := frameParseHex(h)
		if err != nil {
			return s, frameBadInput("--record-hex #%d: %v", i+1, err)
		}
		s.Records = append(s.Records, r)
	}
	return s, nil
}

// frameMaxFrames bounds one craft or send: a typo like --seq 1-1e18 must not
// try to build the frames.
const frameMaxFrames = 10_000_000

// frames checks s and encodes its frames.
func (s *frameSpec) frames(hosts int) ([]frameBuilt, error) {
	if s.Group > 0xFFFF {
		return nil, frameBadInput("group %d: want 0..65535", s.Group)
	}
	if s.Sender >= exo.HistoryNone {
		return nil, frameBadInput("sender %d: want an id 0..254 (255 is the history's none marker)", s.Sender)
	}
	if hosts > 0 && s.Sender >= uint64(hosts) {
		return nil, frameBadInput("sender %d: not in a rack of --hosts %d (ids 0..%d)", s.Sender, hosts, hosts-1)
	}
	if s.Epoch > 0xFFFFFFFF {
		return nil, frameBadInput("epoch %d: want 0..4294967295", s.Epoch)
	}
	if s.SeqEnd < s.Seq || s.SeqEnd-s.Seq >= frameMaxFrames {
		return nil, frameBadInput("seq %d..%d: at most %d frames at once", s.Seq, s.SeqEnd, frameMaxFrames)
	}
	hist, err := frameParseHistory(s.History, hosts)
	if err != nil {
		return nil, err
	}
	if len(hist) > exo.MaxHistory {
		return nil, frameBadInput("history of %d ids: at most %d", len(hist), exo.MaxHistory)
	}
	if hosts > 0 && len(hist) != hosts/2 {
		return nil, frameBadInput("history of %d ids: a rack of --hosts %d needs floor(%d/2) = %d (X for none)", len(hist), hosts, hosts, hosts/2)
	}
	seen := map[uint8]bool{}
	for _, id := range hist {
		if id != exo.HistoryNone && seen[id] {
			return nil, frameBadInput("history %s: id %d (%s) repeated", strings.Join(s.History, ","), id, lab.HostName(int(id)))
		}
		seen[id] = true
	}
	flags, err := frameParseFlags(s.Flags, hosts)
	if err != nil {
		return nil, err
	}
	tag, err := strconv.ParseUint(strings.TrimSpace(s.Tag), 0, 64)
	if err != nil {
		return nil, frameBadInput("tag %q: want a 64-bit number (0x... for hex)", s.Tag)
	}
	if len(s.Records) > 0xFFFF {
		return nil, frameBadInput("%d records: at most 65535 (the count field is 16 bits)", len(s.Records))
	}
	var payload []byte
	size := 0
	for _, r := range s.Records {
		size += exo.RecordLenSize + len(r)
	}
	if size > exo.MaxPayload {
		return nil, frameBadInput("payload of %d bytes (%d records with their 2-byte lengths): at most %d (payload_len is 16 bits)", size, len(s.Records), exo.MaxPayload)
	}
	for _, r := range s.Records {
		if payload, err = exo.AppendRecord(payload, r); err != nil {
			return nil, frameBadInput("payload: %v", err)
		}
	}
	if s.Count != nil && *s.Count != uint64(len(s.Records)) {
		return nil, frameBadInput("count %d: the frame has %d records (the count field is derived from them)", *s.Count, len(s.Records))
	}
	base := exo.Frame{
		Type: exo.FrameData, Group: uint16(s.Group), Sender: uint8(s.Sender), Epoch: uint32(s.Epoch),
		Count: uint16(len(s.Records)), Flags: flags, Tag: tag, History: hist, Payload: payload,
	}
	out := make([]frameBuilt, 0, s.SeqEnd-s.Seq+1)
	for seq := s.Seq; ; seq++ {
		f := base
		f.Seq = seq
		b, err := f.MarshalBinary()
		if err != nil {
			return nil, frameBadInput("frame seq %d: %v", seq, err)
		}
		out = append(out, frameBuilt{Frame: f, Bytes: b})
		if seq == s.SeqEnd {
			break
		}
	}
	return out, nil
}

// frameHostID parses a host name (A, B, .., AA) or a number 0..254.
func frameHostID(s string) (uint8, bool) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseUint(s, 0, 8); err == nil && n < exo.HistoryNone {
		return uint8(n), true
	}
	if id, ok := lab.ParseHostName(s); ok && id < exo.HistoryNone {
		return uint8(id), true
	}
	return 0, false
}

// frameParseHistory parses history ids: names, numbers, X (or 255) for none.
func frameParseHistory(ids []string, hosts int) ([]uint8, error) {
	hist := make([]uint8, 0, len(ids))
	for _, s := range ids {
		t := strings.TrimSpace(s)
		if strings.EqualFold(t, "X") || t == "255" || t == "0xff" || t == "0xFF" {
			hist = append(hist, exo.HistoryNone)
			continue
		}
		id, ok := frameHostID(t)
		if !ok {
			return nil, frameBadInput("history id %q: want a host name (A..), an id 0..254, or X for none", s)
		}
		if hosts > 0 && int(id) >= hosts {
			return nil, frameBadInput("history id %s (%d): not in a rack of --hosts %d", t, id, hosts)
		}
		hist = append(hist, id)
	}
	return hist, nil
}

// frameParseFlags parses 0, readmit:HOST or a number, and checks it.
func frameParseFlags(s string, hosts int) (uint16, error) {
	s = strings.TrimSpace(s)
	var fl uint16
	if h, ok := strings.CutPrefix(strings.ToLower(s), "readmit:"); ok {
		id, ok := frameHostID(h)
		if !ok {
			return 0, frameBadInput("flags %q: want readmit:HOST with a host name or id 0..254", s)
		}
		fl = exo.FlagReadmit | uint16(id)
	} else {
		n, err := strconv.ParseUint(s, 0, 16)
		if err != nil {
			return 0, frameBadInput("flags %q: want 0, readmit:HOST, or a 16-bit number", s)
		}
		fl = uint16(n)
	}
	if !exo.ValidFlags(fl) {
		return 0, frameBadInput("flags %#04x: want 0 or READMIT (0x8000) | host id; other bits are BAD_FLAGS", fl)
	}
	if fl != 0 && hosts > 0 && int(fl&exo.FlagHostMask) >= hosts {
		return 0, frameBadInput("flags readmit:%d: host not in a rack of --hosts %d", fl&exo.FlagHostMask, hosts)
	}
	return fl, nil
}

func frameParseHex(s string) ([]byte, error) {
	s = strings.NewReplacer(" ", "", ":", "", "\n", "", "\t", "").Replace(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not hex: %v", err)
	}
	return b, nil
}

// frameJSON is one frame of craft --json: the same fields as the flags,
// and the same names as dump --json prints, so that dump's output can be
// crafted again. Unknown fields (dump's time, reason, ...) are ignored.
type frameJSON struct {
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

// frameReadSpecs reads JSON frames from a file or standard input: a
// stream of objects or arrays of objects (dump --json's output is one).
func frameReadSpecs(path string, stdin io.Reader) ([]frameSpec, error) {
	var r io.Reader
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, frameBadInput("--json: %v", err)
		}
		defer f.Close()
		r = f
	}
	dec := json.NewDecoder(bufio.NewReader(r))
	var specs []frameSpec
	for n := 1; ; {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return specs, nil
		} else if err != nil {
			return nil, frameBadInput("--json %s: not JSON after %d frames: %v", path, len(specs), err)
		}
		var objs []json.RawMessage
		if t := strings.TrimSpace(string(raw)); strings.HasPrefix(t, "[") {
			if err := json.Unmarshal(raw, &objs); err != nil {
				return nil, frameBadInput("--json %s: %v", path, err)
			}
		} else {
			objs = []json.RawMessage{raw}
		}
		for _, o := range objs {
			s, err := frameParseJSON(o)
			if err != nil {
				return nil, frameBadInput("--json %s: frame %d: %v", path, n, err)
			}
			specs = append(specs, s)
			n++
		}
	}
}

func frameParseJSON(raw json.RawMessage) (frameSpec, error) {
	var j frameJSON
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&j); err != nil {
		return frameSpec{}, err
	}
	if j.Valid != nil && !*j.Valid {
		return frameSpec{}, errors.New("a malformed frame (valid: false): craft builds valid frames only")
	}
	if j.Version != nil && *j.Version != exo.Version {
		return frameSpec{}, fmt.Errorf("version %d: only version %d frames can be crafted", *j.Version, exo.Version)
	}
	if j.Type != nil && *j.Type != exo.TypeData {
		return frameSpec{}, fmt.Errorf("type %d: only DATA (%d) frames can be crafted", *j.Type, exo.TypeData)
	}
	s := frameSpec{Group: 1, Flags: "0", Tag: "0", Seq: 1, Count: j.Count}
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
		if *j.Frames < 1 || *j.Frames > frameMaxFrames || *j.Frames-1 > ^uint64(0)-s.Seq {
			return s, fmt.Errorf("frames %d: want 1..%d, within 64-bit seq", *j.Frames, frameMaxFrames)
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
		r, err := frameParseHex(*j.PayloadHex)
		if err != nil {
			return s, fmt.Errorf("payload_hex: %v", err)
		}
		s.Records = append(s.Records, r)
	}
	for i, rr := range j.Records {
		r, err := frameParseRecordJSON(rr)
		if err != nil {
			return s, fmt.Errorf("record %d: %v", i, err)
		}
		s.Records = append(s.Records, r)
	}
	var err error
	if s.Flags, err = frameNumOrString(j.Flags, "0"); err != nil {
		return s, fmt.Errorf("flags: %v", err)
	}
	if s.Tag, err = frameNumOrString(j.Tag, "0"); err != nil {
		return s, fmt.Errorf("tag: %v", err)
	}
	return s, nil
}

// frameParseRecordJSON reads a record: "text", or {"text"|"hex"|"base64": ...}
// (dump --json prints base64 and, when printable, text: base64 wins).
func frameParseRecordJSON(raw json.RawMessage) ([]byte, error) {
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
		return frameParseHex(*o.Hex)
	case o.Text != nil:
		return []byte(*o.Text), nil
	}
	return nil, errors.New(`want "text" or {"text"|"hex"|"base64": ...}`)
}

// frameNumOrString returns a JSON number or string as a string.
func frameNumOrString(raw json.RawMessage, def string) (string, error) {
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

// frameEthOptions are the Ethernet header flags of craft.
type frameEthOptions struct {
	Src string
	Dst string
}

// macs parses the source and destination MACs; the default source is
// the lab rack's MAC of the sender (02:e0:00:00:00:<sender+1>).
func (e *frameEthOptions) macs(sender uint8) (src, dst net.HardwareAddr, err error) {
	dst, err = net.ParseMAC(e.Dst)
	if err != nil || len(dst) != 6 {
		return nil, nil, frameBadInput("--dst %q: want a MAC such as ff:ff:ff:ff:ff:ff", e.Dst)
	}
	if e.Src == "" {
		return lab.HostMAC(int(sender)), dst, nil
	}
	src, err = net.ParseMAC(e.Src)
	if err != nil || len(src) != 6 {
		return nil, nil, frameBadInput("--src %q: want a MAC such as 02:e0:00:00:00:01", e.Src)
	}
	if src[0]&1 != 0 {
		return nil, nil, frameBadInput("--src %s: a source MAC must be unicast (first byte even)", e.Src)
	}
	return src, dst, nil
}

// frameCraftOptions are the flags of exo frame craft.
type frameCraftOptions struct {
	frameFields
	frameEthOptions
	Out   string // raw bytes
	Pcap  string // pcap, or pcapng if it ends in .pcapng
	Hex   bool
	Time  string // first frame's timestamp in the pcap
	Gap   time.Duration
	In    io.Reader
	Print io.Writer
}

func newFrameCraftCmd() *cobra.Command {
	o := &frameCraftOptions{}
	cmd := &cobra.Command{
		Use:   "craft",
		Short: "Build Exo frames from flags or JSON: hex, raw bytes or pcap/pcapng",
		Long: `craft builds Exo frames (docs/wire.md) and writes them as hex (one frame per
line, the bytes after the Ethernet header; the default), as raw bytes (--out),
or as a pcap or pcapng capture with Ethernet headers (--pcap; padded to the
60-byte minimum), which Wireshark (tools/wireshark/exo.lua), exo frame dump,
send and replay read. Every field is checked before anything is written.`,
		Example: `  exo frame craft --sender 4 --epoch 1 --seq 3 --history D,C --payload hello --tag 0x0123456789abcdef
  exo frame craft --hosts 5 --sender E --history D,C --seq 3 --payload hello --key-file /etc/exo/key
  exo frame craft --hosts 5 --sender E --history D,C --seq 1-100 --record a --record b --pcap run.pcap
  exo frame craft --sender 0 --history X,X --flags readmit:C --count 10 --out frames.bin
  exo frame dump --pcap in.pcap --json | exo frame craft --json - --pcap copy.pcap`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return frameBadInput("craft takes no arguments (got %q): the payload is --payload TEXT", args[0])
			}
			o.In, o.Print, o.Note = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			return runFrameCraft(o)
		},
	}
	o.addFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "", "write the frames' raw bytes (after the Ethernet header, unpadded, back to back) to this file (- = standard output)")
	f.StringVar(&o.Pcap, "pcap", "", "write a capture with Ethernet headers to this file: pcap, or pcapng if the name ends in .pcapng")
	f.BoolVar(&o.Hex, "hex", false, "print hex even with --out or --pcap")
	f.StringVar(&o.Src, "src", "", "pcap: source MAC (default: the lab MAC of the sender, 02:e0:00:00:00:<sender+1>)")
	f.StringVar(&o.Dst, "dst", exo.DefaultDstMAC, "pcap: destination MAC")
	f.StringVar(&o.Time, "time", "2025-01-01T00:00:00Z", "pcap: timestamp of the first frame (RFC 3339, or now)")
	f.DurationVar(&o.Gap, "gap", time.Millisecond, "pcap: time between frames (exo frame replay keeps it)")
	return cmd
}

func runFrameCraft(o *frameCraftOptions) error {
	frames, err := o.build(o.In)
	if err != nil {
		return err
	}
	var pcapData []byte
	if o.Pcap != "" {
		start, err := frameParseTime(o.Time)
		if err != nil {
			return err
		}
		if o.Gap < 0 {
			return frameBadInput("--gap %v: want >= 0", o.Gap)
		}
		pkts := make([]frameCapPacket, len(frames))
		for i, f := range frames {
			src, dst, err := o.macs(f.Frame.Sender)
			if err != nil {
				return err
			}
			pkts[i] = frameCapPacket{Time: start.Add(time.Duration(i) * o.Gap), Data: frameEth(dst, src, f.Bytes)}
		}
		if pcapData, err = frameWriteCapture(pkts, strings.HasSuffix(strings.ToLower(o.Pcap), ".pcapng")); err != nil {
			return frameFailed(err)
		}
	} else if o.set != nil && (o.set("src") || o.set("dst") || o.set("time") || o.set("gap")) {
		return frameBadInput("--src, --dst, --time and --gap are for --pcap output")
	}
	// Everything is checked: write.
	if o.Pcap != "" {
		if err := os.WriteFile(o.Pcap, pcapData, 0o644); err != nil {
			return frameFailed(err)
		}
	}
	if o.Out != "" {
		var raw []byte
		for _, f := range frames {
			raw = append(raw, f.Bytes...)
		}
		if o.Out == "-" {
			if _, err := o.Print.Write(raw); err != nil {
				return frameFailed(err)
			}
		} else if err := os.WriteFile(o.Out, raw, 0o644); err != nil {
			return frameFailed(err)
		}
	}
	if (o.Out == "" && o.Pcap == "") || o.Hex {
		w := bufio.NewWriter(o.Print)
		for _, f := range frames {
			fmt.Fprintln(w, hex.EncodeToString(f.Bytes))
		}
		if err := w.Flush(); err != nil {
			return frameFailed(err)
		}
	}
	o.noteUnsigned()
	return nil
}

func frameParseTime(s string) (time.Time, error) {
	if s == "now" || s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, frameBadInput("--time %q: want RFC 3339 (2025-01-01T00:00:00Z) or now", s)
	}
	return t, nil
}
