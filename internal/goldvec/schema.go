package goldvec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/exo-rack/exo/exo"
)

// The JSON form's schema (docs/vectors.md sections 3 and 8): the Go types
// of vectors.json, the one definition of its keys. tools/vecgen fills them
// to write the file, ReadJSON and LoadJSON decode it into them. The order
// of the fields is the order of the keys in the file, and a key a case may
// lack is a pointer or carries omitempty (omitzero for a list that is
// written empty, "[]", where it is present).

// JSONFile is vectors.json.
type JSONFile struct {
	Format        string `json:"format"` // exo-vectors/<version>
	GeneratedBy   string `json:"generated_by"`
	Doc           string `json:"doc"`
	LayoutVersion int    `json:"layout_version"` // exo.Version, the frame layout
	Seed          string `json:"seed"`           // of the random suites
	TagKey        string `json:"tag_key"`        // format 3: slot 0's key, in hex
	TagKey1       string `json:"tag_key_1"`      // format 4: slot 1's key, in hex
	Tag           string `json:"tag"`            // format 3: how a tag is computed, in words
	VectorsCount  int    `json:"vectors_count"`
	StreamsCount  int    `json:"streams_count"`
	StepsCount    int    `json:"steps_count"`
	HexRecords    int    `json:"hex_records"` // records in vectors.hex
	Transmit      string `json:"transmit"`    // format 5: how a case with a tx runs, in words
	TxCases       int    `json:"tx_cases"`    // format 5: the cases with a tx
	// TxCoverage counts the transmit cases (format 5).
	TxCoverage JSONTxCoverage    `json:"tx_coverage"`
	NotCovered []JSONNotCovered  `json:"not_covered"` // empty since format 3
	Coverage   []JSONReasonCount `json:"coverage"`    // one per reason, in reason order
	Vectors    []JSONVector      `json:"vectors"`
	Streams    []JSONStream      `json:"streams"`
}

// JSONTxCoverage counts the transmit cases for the header (format 5).
type JSONTxCoverage struct {
	Cases      int `json:"cases"`       // cases with a tx: the token suite and the token streams' steps
	Streams    int `json:"streams"`     // streams with a tx
	TokenOn    int `json:"token_on"`    // of them, with tx.on
	Record     int `json:"record"`      // turn.record
	Dropped    int `json:"dropped"`     // token on, not recorded (a drop verdict)
	Sent       int `json:"sent"`        // turn.sent present
	Popped     int `json:"popped"`      // turn.popped (sent with the queue's head)
	Pass       int `json:"sent_pass"`   // sent without records (an empty pass)
	SentPhase1 int `json:"sent_phase1"` // sent with flags 0x4000, under tag_key_1
	SentShort  int `json:"sent_short"`  // sent, shorter than the 46 bytes of the Ethernet minimum
	Handoff    int `json:"handoff"`     // turn.handoff
	Halt       int `json:"halt"`        // turn.halt (hand-offs and slow-path verdicts)
	Armed      int `json:"armed_steps"` // stream steps with their own state and tx (re-armed)
}

// JSONNotCovered is a reason no case exercises, and why (formats 1 and 2).
type JSONNotCovered struct {
	Reason uint8  `json:"reason"`
	Name   string `json:"name"`
	Why    string `json:"why"`
}

// JSONReasonCount is the number of cases with one reason.
type JSONReasonCount struct {
	Reason   uint8  `json:"reason"`
	Name     string `json:"name"`
	SlowPath bool   `json:"slow_path"`
	Count    int    `json:"count"`
}

// JSONVector is a standalone case, named suite/name.
type JSONVector struct {
	Suite       string    `json:"suite"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	State       JSONState `json:"state"` // the state before
	JSONCase
}

// JSONStream is one initial state (and tx) and the steps run from it.
type JSONStream struct {
	Name        string     `json:"name"`
	Description string     `json:"description"`
	State       JSONState  `json:"state"`
	Tx          *JSONTx    `json:"tx,omitempty"` // format 5: a token stream
	Steps       []JSONStep `json:"steps"`
}

// JSONStep is one step of a stream. Its state (and tx) before are the
// step before's expect.state (and expect.tx), or the stream's for step 0,
// unless it carries its own: the control plane armed the fast path again
// before it (format 5, token streams).
type JSONStep struct {
	Note  string     `json:"note"`
	State *JSONState `json:"state,omitempty"`
	JSONCase
}

// JSONCase holds the keys a vector and a step share: the transmit side
// before, the frame, and the expectation.
type JSONCase struct {
	// Tx is the exo.Tx before (format 5): in a vector of suite token, or
	// with a step's own state. nil: token mode off (or, in a step, the tx
	// carried from the step before).
	Tx *JSONTx `json:"tx,omitempty"`
	// Queue is the transmit queue before, head first (format 5): present
	// ("[]" if empty) in every case with a transmit side, absent in the
	// others.
	Queue    []JSONBatch  `json:"queue,omitzero"`
	Frame    string       `json:"frame"` // after the Ethernet header, in hex
	FrameLen int          `json:"frame_len"`
	Decoded  *JSONDecoded `json:"decoded"` // null: the codec rejected the frame
	Expect   JSONExpect   `json:"expect"`
	// Key1Valid: key slot 1 holds tag_key_1 (format 4).
	Key1Valid bool `json:"key1_valid"`
	HexIndex  int  `json:"hex_index"` // the record in vectors.hex, -1 for none
}

// JSONState is an exo.Pointers: the fast-path state of one host.
type JSONState struct {
	Group  uint16 `json:"group"`
	Hosts  uint16 `json:"hosts"`
	Epoch  uint32 `json:"epoch"`
	Halted bool   `json:"halted"`
	Window uint64 `json:"window"`
	Append uint64 `json:"append"`
	Agreed uint64 `json:"agreed"`
	// EpochStart is exo.Pointers.EpochStart (format 2).
	EpochStart uint64 `json:"epoch_start"`
	// History holds the h = hosts/2 most recent senders, most recent
	// first (255: none).
	History []int `json:"history"`
}

// StateJSON is p as the JSON form writes it.
func StateJSON(p exo.Pointers) JSONState {
	s := JSONState{Group: p.Group, Hosts: p.Hosts, Epoch: p.Epoch, Halted: p.Halted,
		Window: p.Window, Append: p.Append, Agreed: p.Agreed, EpochStart: p.EpochStart, History: []int{}}
	for _, id := range p.Hist() {
		s.History = append(s.History, int(id))
	}
	return s
}

// Pointers is the exo.Pointers s writes; the slots of the history beyond
// h are HistoryNone.
func (s *JSONState) Pointers() (exo.Pointers, error) {
	p := exo.NewPointers(s.Group, int(s.Hosts), s.Window)
	p.Epoch, p.Halted, p.Append, p.Agreed, p.EpochStart = s.Epoch, s.Halted, s.Append, s.Agreed, s.EpochStart
	if len(s.History) != p.H() {
		return p, fmt.Errorf("history has %d ids, want h = %d", len(s.History), p.H())
	}
	for i, id := range s.History {
		if id < 0 || id > 0xFF {
			return p, fmt.Errorf("history id %d", id)
		}
		p.History[i] = uint8(id)
	}
	return p, nil
}

// JSONDecoded is the frame as exo.Frame.UnmarshalBinary decoded it.
type JSONDecoded struct {
	Type       uint8  `json:"type"`
	Group      uint16 `json:"group"`
	Sender     uint8  `json:"sender"`
	HistLen    int    `json:"hist_len"`
	PayloadLen int    `json:"payload_len"`
	Epoch      uint32 `json:"epoch"`
	Count      uint16 `json:"count"`
	Flags      uint16 `json:"flags"`
	Seq        uint64 `json:"seq"`
	Tag        string `json:"tag"` // 16 hex digits
	// TagValid: the tag is the frame's tag under the key of its phase's
	// slot, which holds a key (format 3; the slot since format 4).
	TagValid bool     `json:"tag_valid"`
	History  []int    `json:"history"`
	Records  []string `json:"records"` // the payload's records, in hex
}

// JSONExpect is the expectation of a case.
type JSONExpect struct {
	Reason   uint8     `json:"reason"`
	Name     string    `json:"name"`  // the reason's name
	Stage    string    `json:"stage"` // accept, codec or state
	SlowPath bool      `json:"slow_path"`
	State    JSONState `json:"state"` // the state after
	// Format 5, cases with a transmit side only: the exo.Tx after, and
	// what exo.Engine.Step did.
	Tx   *JSONTx   `json:"tx,omitempty"`
	Turn *JSONTurn `json:"turn,omitempty"`
}

// JSONTx is an exo.Tx (format 5).
type JSONTx struct {
	On       bool   `json:"on"`
	Me       uint8  `json:"me"`
	Pred     uint8  `json:"pred"`
	Phase    uint8  `json:"phase"`
	EmptyRun uint32 `json:"empty_run"`
	IdleRun  uint32 `json:"idle_run"`
	Kseq     uint64 `json:"kseq"`
	QHead    uint64 `json:"qhead"`
}

// TxJSON is t as the JSON form writes it.
func TxJSON(t exo.Tx) JSONTx {
	return JSONTx{On: t.On, Me: t.Me, Pred: t.Pred, Phase: t.Phase, EmptyRun: t.EmptyRun, IdleRun: t.IdleRun, Kseq: t.Kseq, QHead: t.QHead}
}

// Tx is the exo.Tx t writes.
func (t *JSONTx) Tx() exo.Tx {
	return exo.Tx{On: t.On, Me: t.Me, Pred: t.Pred, Phase: t.Phase, EmptyRun: t.EmptyRun, IdleRun: t.IdleRun, Kseq: t.Kseq, QHead: t.QHead}
}

// JSONBatch is one exo.Batch of the transmit queue.
type JSONBatch struct {
	Count   uint16 `json:"count"`
	Payload string `json:"payload"` // in hex
}

// QueueJSON is q as the JSON form writes it: never nil, so that an empty
// queue is written "[]".
func QueueJSON(q []exo.Batch) []JSONBatch {
	out := []JSONBatch{}
	for _, b := range q {
		out = append(out, JSONBatch{Count: b.Count, Payload: hex.EncodeToString(b.Payload)})
	}
	return out
}

// Batch is the exo.Batch b writes.
func (b *JSONBatch) Batch() (exo.Batch, error) {
	p, err := hex.DecodeString(b.Payload)
	return exo.Batch{Count: b.Count, Payload: p}, err
}

// JSONTurn is an exo.Turn (format 5). Sent is the frame sent, encoded
// (Frame.AppendBinary, no padding) in hex, absent when nothing was sent.
type JSONTurn struct {
	Record  bool   `json:"record"`
	Sent    string `json:"sent,omitempty"`
	Popped  bool   `json:"popped"`
	Handoff bool   `json:"handoff"`
	Halt    bool   `json:"halt"`
}

// ---- reading -------------------------------------------------------------

// ReadJSON reads dir/vectors.json (dir "" is Dir()) into a JSONFile and
// checks that it keeps to the schema (keepsToSchema) and that its counts
// are those of its header.
func ReadJSON(dir string) (*JSONFile, error) { return load(dir, readJSON, "vectors.json: ") }

func readJSON(dir string) (*JSONFile, error) {
	data, err := os.ReadFile(filepath.Join(dir, "vectors.json"))
	if err != nil {
		return nil, err
	}
	var f JSONFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the object")
	}
	v, err := f.Version()
	if err != nil {
		return nil, err
	}
	if err := keepsToSchema(data, &f, v); err != nil {
		return nil, err
	}
	steps := 0
	for _, s := range f.Streams {
		steps += len(s.Steps)
	}
	if len(f.Vectors) != f.VectorsCount || len(f.Streams) != f.StreamsCount || steps != f.StepsCount {
		return nil, fmt.Errorf("%d vectors, %d streams, %d steps; header says %d, %d, %d",
			len(f.Vectors), len(f.Streams), steps, f.VectorsCount, f.StreamsCount, f.StepsCount)
	}
	return &f, nil
}

// Version is the version of f's format line, 2 to 5.
func (f *JSONFile) Version() (int, error) {
	return formatVersion(f.Format, "exo-vectors/", jsonMaxVersion)
}

// since is the format that added a key, by its path from the top ("[]"
// for the elements of a list); every other key is in every format this
// package reads (2 on).
var since = map[string]int{
	"tag_key": 3, "tag": 3, "vectors[].decoded.tag_valid": 3, "streams[].steps[].decoded.tag_valid": 3,
	"tag_key_1": 4, "vectors[].key1_valid": 4, "streams[].steps[].key1_valid": 4,
	"transmit": 5, "tx_cases": 5, "tx_coverage": 5,
	"vectors[].tx": 5, "vectors[].queue": 5, "vectors[].expect.tx": 5, "vectors[].expect.turn": 5,
	"streams[].tx": 5, "streams[].steps[].state": 5, "streams[].steps[].tx": 5, "streams[].steps[].queue": 5,
	"streams[].steps[].expect.tx": 5, "streams[].steps[].expect.turn": 5,
}

// keepsToSchema checks data, decoded into f, against the schema: data as
// plain JSON values must be what f is written back as, every key and every
// value, but for the keys of a format later than the file's (version),
// which it must not have. So a key the schema writes is never missing
// (a reader would take zero for it: an epoch_start, a flag of the turn),
// and no value reads as another (a null as 0).
func keepsToSchema(data []byte, f *JSONFile, version int) error {
	back, err := json.Marshal(f)
	if err != nil {
		return err
	}
	var file, schema any
	for _, x := range []struct {
		b []byte
		v *any
	}{{data, &file}, {back, &schema}} {
		dec := json.NewDecoder(bytes.NewReader(x.b))
		dec.UseNumber() // 64-bit numbers stay exact
		if err := dec.Decode(x.v); err != nil {
			return err
		}
	}
	return sameValue("", "", file, schema, version)
}

// sameValue compares a value of the file with the schema's: where names
// it in messages, path in since.
func sameValue(where, path string, file, schema any, version int) error {
	switch s := schema.(type) {
	case map[string]any:
		fo, ok := file.(map[string]any)
		if !ok {
			return fmt.Errorf("%s%v is not an object", at(where), file)
		}
		keys := make([]string, 0, len(s)+len(fo))
		for k := range s {
			keys = append(keys, k)
		}
		for k := range fo {
			if _, ok := s[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			_, inFile := fo[k]
			_, inSchema := s[k]
			added := since[join(path, k)]
			switch {
			case inFile && added > version:
				return fmt.Errorf("%skey %q of format %d in a file of format %d", at(where), k, added, version)
			case !inFile && inSchema && added <= version:
				return fmt.Errorf("%sno key %q", at(where), k)
			case inFile && !inSchema:
				return fmt.Errorf("%skey %q is %v, which the schema does not write", at(where), k, fo[k])
			}
		}
		for _, k := range keys {
			if _, inFile := fo[k]; inFile {
				if err := sameValue(join(where, k), join(path, k), fo[k], s[k], version); err != nil {
					return err
				}
			}
		}
		return nil
	case []any:
		fa, ok := file.([]any)
		if !ok || len(fa) != len(s) {
			return fmt.Errorf("%s%v is not a list of %d", at(where), file, len(s))
		}
		for i := range s {
			if err := sameValue(fmt.Sprintf("%s[%d]", where, i), path+"[]", fa[i], s[i], version); err != nil {
				return err
			}
		}
		return nil
	default:
		if file != schema {
			return fmt.Errorf("%s%v reads as %v", at(where), file, schema)
		}
		return nil
	}
}

// at is where as the start of a message: "" at the top.
func at(where string) string {
	if where == "" {
		return ""
	}
	return where + ": "
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// FlatCase is one case of a JSONFile with what the file says around it.
type FlatCase struct {
	*JSONCase
	Where string // "suite/name" or "stream/name#step"
	// Stream is the index of the case's stream in JSONFile.Streams, -1
	// for a vector; Step is its step in the stream.
	Stream, Step int
	// In and Out are the states before and after (expect.state). TxIn and
	// TxOut are the exo.Tx before and after (expect.tx) of a case with a
	// transmit side, nil for one without.
	In, Out     exo.Pointers
	TxIn, TxOut *exo.Tx
	// Chained: a step after the first whose state (and tx) before are the
	// step before's after. Armed: a step with a state and tx of its own,
	// never Chained.
	Chained, Armed bool
}

// Flatten lists the cases of f in file order, the vectors and then each
// stream's steps, and checks how their keys go together: a tx comes with
// a queue and an expected tx and turn, and a step's own state with a tx,
// in a stream with one.
func (f *JSONFile) Flatten() ([]FlatCase, error) {
	var out []FlatCase
	// add appends c, run from in and txIn, and returns the state and tx
	// after it.
	add := func(fc FlatCase) (exo.Pointers, *exo.Tx, error) {
		c := fc.JSONCase
		var err error
		if fc.Out, err = c.Expect.State.Pointers(); err != nil {
			return fc.Out, nil, fmt.Errorf("%s: expect: %w", fc.Where, err)
		}
		switch {
		case fc.TxIn == nil && (c.Queue != nil || c.Expect.Tx != nil || c.Expect.Turn != nil):
			return fc.Out, nil, fmt.Errorf("%s: a queue or an expected tx or turn without a tx", fc.Where)
		case fc.TxIn != nil && (c.Expect.Tx == nil || c.Expect.Turn == nil):
			return fc.Out, nil, fmt.Errorf("%s: a tx without expect.tx and expect.turn", fc.Where)
		case fc.TxIn != nil:
			tx := c.Expect.Tx.Tx()
			fc.TxOut = &tx
		}
		out = append(out, fc)
		return fc.Out, fc.TxOut, nil
	}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		fc := FlatCase{JSONCase: &v.JSONCase, Where: v.Suite + "/" + v.Name, Stream: -1}
		var err error
		if fc.In, err = v.State.Pointers(); err != nil {
			return nil, fmt.Errorf("%s: %w", fc.Where, err)
		}
		if v.Tx != nil {
			tx := v.Tx.Tx()
			fc.TxIn = &tx
		}
		if _, _, err := add(fc); err != nil {
			return nil, err
		}
	}
	for si := range f.Streams {
		s := &f.Streams[si]
		in, err := s.State.Pointers()
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", s.Name, err)
		}
		var tx *exo.Tx
		if s.Tx != nil {
			t := s.Tx.Tx()
			tx = &t
		}
		for j := range s.Steps {
			c := &s.Steps[j]
			fc := FlatCase{JSONCase: &c.JSONCase, Where: fmt.Sprintf("stream/%s#%d", s.Name, j), Stream: si, Step: j, Chained: j > 0}
			if c.State != nil || c.Tx != nil {
				// armed again: the step's own state and tx
				if s.Tx == nil || c.State == nil || c.Tx == nil {
					return nil, fmt.Errorf("%s: a step with its own state needs both state and tx, in a stream with a tx", fc.Where)
				}
				if in, err = c.State.Pointers(); err != nil {
					return nil, fmt.Errorf("%s: %w", fc.Where, err)
				}
				t := c.Tx.Tx()
				tx, fc.Chained, fc.Armed = &t, false, true
			}
			fc.In = in
			if tx != nil {
				t := *tx
				fc.TxIn = &t
			}
			if in, tx, err = add(fc); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
