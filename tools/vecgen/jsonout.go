package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/exo-rack/exo/exo"
)

// The JSON form. Keys are written in a fixed order, one key per line at
// the vector level, so that diffs of vectors.json stay readable.

// jsonFormat names the JSON form; format 2 added "epoch_start" to STATE,
// format 3 the frame tag: "tag_key" at the top, "tag_valid" in DECODED,
// and every frame sealed under the key but the BAD_TAG cases.
// Format 4: two key slots, "tag_key_1" at the top, "key1_valid" in every
// vector and step. Format 5: the transmit side (exo.Engine.Step, suite
// "token" and the token_* streams): "tx" and "queue" in a case (and "tx"
// in a stream, "state" and "tx" in a step the control plane armed
// again), "tx" and "turn" in its "expect", "tx_cases" and "tx_coverage"
// at the top. A case without "tx" is one with token mode off: its keys
// are those of format 4.
const jsonFormat = "exo-vectors/5"

type jState struct {
	Group  uint16 `json:"group"`
	Hosts  uint16 `json:"hosts"`
	Epoch  uint32 `json:"epoch"`
	Halted bool   `json:"halted"`
	Window uint64 `json:"window"`
	Append uint64 `json:"append"`
	Agreed uint64 `json:"agreed"`
	// EpochStart is exo.Pointers.EpochStart (format exo-vectors/2 on).
	EpochStart uint64 `json:"epoch_start"`
	History    []int  `json:"history"`
}

func stateJSON(p exo.Pointers) jState {
	s := jState{Group: p.Group, Hosts: p.Hosts, Epoch: p.Epoch, Halted: p.Halted,
		Window: p.Window, Append: p.Append, Agreed: p.Agreed, EpochStart: p.EpochStart, History: []int{}}
	for _, id := range p.Hist() {
		s.History = append(s.History, int(id))
	}
	return s
}

type jDecoded struct {
	Type       uint8    `json:"type"`
	Group      uint16   `json:"group"`
	Sender     uint8    `json:"sender"`
	HistLen    int      `json:"hist_len"`
	PayloadLen int      `json:"payload_len"`
	Epoch      uint32   `json:"epoch"`
	Count      uint16   `json:"count"`
	Flags      uint16   `json:"flags"`
	Seq        uint64   `json:"seq"`
	Tag        string   `json:"tag"`
	TagValid   bool     `json:"tag_valid"` // the tag is the frame's tag under the key of its phase's slot, which holds a key (format 3, 4)
	History    []int    `json:"history"`
	Records    []string `json:"records"`
}

func decodedJSON(r result) *jDecoded {
	f := r.Decoded
	if f == nil {
		return nil
	}
	d := &jDecoded{Type: uint8(f.Type), Group: f.Group, Sender: f.Sender, HistLen: len(f.History),
		PayloadLen: len(f.Payload), Epoch: f.Epoch, Count: f.Count, Flags: f.Flags, Seq: f.Seq,
		Tag: fmt.Sprintf("%016x", f.Tag), TagValid: r.TagValid, History: []int{}, Records: []string{}}
	for _, id := range f.History {
		d.History = append(d.History, int(id))
	}
	if err := exo.ForEachRecord(f.Payload, f.Count, func(rec []byte) error {
		d.Records = append(d.Records, hex.EncodeToString(rec))
		return nil
	}); err != nil {
		panic(err) // UnmarshalBinary checked the framing
	}
	return d
}

type jExpect struct {
	Reason   uint8  `json:"reason"`
	Name     string `json:"name"`
	Stage    string `json:"stage"`
	SlowPath bool   `json:"slow_path"`
	State    jState `json:"state"`
	// Format 5, cases with a tx only: the exo.Tx after, and what Step did.
	Tx   *jTx   `json:"tx,omitempty"`
	Turn *jTurn `json:"turn,omitempty"`
}

func expectJSON(v *vector) jExpect {
	r := v.Res
	e := jExpect{Reason: uint8(r.Reason), Name: r.Reason.String(), Stage: r.Stage.String(),
		SlowPath: r.Reason.SlowPath(), State: stateJSON(r.Out)}
	if v.Tx != nil {
		tx := txJSON(r.TxOut)
		e.Tx = &tx
		e.Turn = &jTurn{Record: r.Turn.Record, Popped: r.Turn.Popped, Handoff: r.Turn.Handoff, Halt: r.Turn.Halt}
		if r.Turn.Sent {
			e.Turn.Sent = hex.EncodeToString(r.Sent)
		}
	}
	return e
}

// jTx is an exo.Tx (format 5).
type jTx struct {
	On       bool   `json:"on"`
	Me       uint8  `json:"me"`
	Pred     uint8  `json:"pred"`
	Phase    uint8  `json:"phase"`
	EmptyRun uint32 `json:"empty_run"`
	IdleRun  uint32 `json:"idle_run"`
	Kseq     uint64 `json:"kseq"`
	QHead    uint64 `json:"qhead"`
}

func txJSON(t exo.Tx) jTx {
	return jTx{On: t.On, Me: t.Me, Pred: t.Pred, Phase: t.Phase, EmptyRun: t.EmptyRun, IdleRun: t.IdleRun, Kseq: t.Kseq, QHead: t.QHead}
}

// jBatch is one exo.Batch of the transmit queue.
type jBatch struct {
	Count   uint16 `json:"count"`
	Payload string `json:"payload"`
}

func queueJSON(q []exo.Batch) []jBatch {
	out := []jBatch{}
	for _, b := range q {
		out = append(out, jBatch{Count: b.Count, Payload: hex.EncodeToString(b.Payload)})
	}
	return out
}

// jTurn is an exo.Turn; Sent is the frame sent, encoded (AppendBinary, no
// padding), absent when nothing was sent.
type jTurn struct {
	Record  bool   `json:"record"`
	Sent    string `json:"sent,omitempty"`
	Popped  bool   `json:"popped"`
	Handoff bool   `json:"handoff"`
	Halt    bool   `json:"halt"`
}

// jTxCoverage counts the transmit cases for the header (format 5).
type jTxCoverage struct {
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

func txCoverage(g *gen) jTxCoverage {
	c := jTxCoverage{Streams: g.txStreams()}
	for _, v := range g.all() {
		if v.Tx == nil {
			continue
		}
		c.Cases++
		t := v.Res.Turn
		if v.Tx.In.On {
			c.TokenOn++
			if !t.Record {
				c.Dropped++
			}
		}
		if v.Tx.Arm {
			c.Armed++
		}
		for _, x := range []struct {
			on bool
			n  *int
		}{{t.Record, &c.Record}, {t.Sent, &c.Sent}, {t.Popped, &c.Popped}, {t.Sent && !t.Popped, &c.Pass},
			{t.Sent && t.Frame.Flags&exo.FlagKeyPhase != 0, &c.SentPhase1},
			{t.Sent && len(v.Res.Sent) < exo.MinEthFrame-exo.EthHeaderLen, &c.SentShort},
			{t.Handoff, &c.Handoff}, {t.Halt, &c.Halt}} {
			if x.on {
				*x.n++
			}
		}
	}
	return c
}

// marshal is json.Marshal without HTML escaping (descriptions say "<=").
func marshal(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

type kv struct {
	k string
	v any
}

// writeObj writes an object with one key per line, at the given indent.
func writeObj(b *bytes.Buffer, indent string, fields []kv, last bool) {
	b.WriteString(indent + "{\n")
	for i, f := range fields {
		val := marshal(f.v)
		fmt.Fprintf(b, "%s  %q: %s", indent, f.k, val)
		if i < len(fields)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(indent + "}")
	if !last {
		b.WriteByte(',')
	}
	b.WriteByte('\n')
}

// txFields are the inputs of a case's transmit side: "tx" (standalone
// vectors and re-armed steps, with "state" before it for the latter) and
// "queue".
func txFields(v *vector) []kv {
	if v.Tx == nil {
		return nil
	}
	var f []kv
	if v.Stream == noStream || v.Tx.Arm {
		if v.Stream != noStream {
			f = append(f, kv{"state", stateJSON(v.In)})
		}
		f = append(f, kv{"tx", txJSON(v.Tx.In)})
	}
	return append(f, kv{"queue", queueJSON(v.Tx.Queue)})
}

func frameFields(v *vector) []kv {
	return []kv{
		{"frame", hex.EncodeToString(v.Frame)},
		{"frame_len", len(v.Frame)},
		{"decoded", decodedJSON(v.Res)},
		{"expect", expectJSON(v)},
		{"key1_valid", v.Key1Valid},
		{"hex_index", v.HexIndex},
	}
}

// jsonFile renders vectors.json.
func jsonFile(g *gen, hexTotal int) []byte {
	var b bytes.Buffer
	all := g.all()
	var counts [exo.NumReasons]int
	for _, v := range all {
		counts[v.Res.Reason]++
	}
	steps := 0
	for _, s := range g.streams {
		steps += len(s.Steps)
	}
	b.WriteString("{\n")
	head := []kv{
		{"format", jsonFormat},
		{"generated_by", "go run ./tools/vecgen -out testdata/vectors (Code generated by vecgen; DO NOT EDIT.)"},
		{"doc", "docs/vectors.md"},
		{"layout_version", exo.Version},
		{"seed", fmt.Sprintf("0x%016x", uint64(seed))},
		{"tag_key", fmt.Sprintf("%x", testKey)},
		{"tag_key_1", fmt.Sprintf("%x", testKey1)},
		{"tag", "SipHash-2-4 under the key of the slot the frame's KEY_PHASE bit (flags 0x4000) names: tag_key (slot 0, always valid) or tag_key_1 (slot 1, valid where key1_valid), k0 = little-endian key[0:8], k1 = little-endian key[8:16], of exo[0:24] || exo[32:32+hist_len+payload_len], big-endian in exo[24:32]; an empty slot: BAD_TAG (docs/wire.md)"},
		{"vectors_count", len(g.vectors)},
		{"streams_count", len(g.streams)},
		{"steps_count", steps},
		{"hex_records", hexTotal},
		{"transmit", "cases with \"tx\" run exo.Engine.Step (exo/engine.go, docs/token.md): the codec, the group, the tag, then Step(frame, queue[0] or none, the key of slot tx.phase); the frame sent is in expect.turn.sent, sealed under tag_key (phase 0) or tag_key_1 (phase 1); JSON only (docs/vectors.md)"},
		{"tx_cases", txCoverage(g).Cases},
		{"tx_coverage", txCoverage(g)},
	}
	for _, f := range head {
		val := marshal(f.v)
		fmt.Fprintf(&b, "  %q: %s,\n", f.k, val)
	}
	b.WriteString("  \"not_covered\": [],\n")
	b.WriteString("  \"coverage\": [\n")
	for r := range exo.Reason(exo.NumReasons) {
		sep := ","
		if r == exo.NumReasons-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    {\"reason\": %d, \"name\": %q, \"slow_path\": %v, \"count\": %d}%s\n", r, r.String(), r.SlowPath(), counts[r], sep)
	}
	b.WriteString("  ],\n")
	b.WriteString("  \"vectors\": [\n")
	for i, v := range g.vectors {
		fields := append([]kv{
			{"suite", v.Suite},
			{"name", v.Name},
			{"description", v.Desc},
			{"state", stateJSON(v.In)},
		}, append(txFields(v), frameFields(v)...)...)
		writeObj(&b, "   ", fields, i == len(g.vectors)-1)
	}
	b.WriteString("  ],\n")
	b.WriteString("  \"streams\": [\n")
	for i, s := range g.streams {
		b.WriteString("   {\n")
		head := []kv{{"name", s.Name}, {"description", s.Desc}, {"state", stateJSON(s.In)}}
		if s.Tx != nil {
			head = append(head, kv{"tx", txJSON(*s.Tx)})
		}
		for _, f := range head {
			val := marshal(f.v)
			fmt.Fprintf(&b, "    %q: %s,\n", f.k, val)
		}
		b.WriteString("    \"steps\": [\n")
		for j, v := range s.Steps {
			fields := append(append([]kv{{"note", v.Desc}}, txFields(v)...), frameFields(v)...)
			writeObj(&b, "     ", fields, j == len(s.Steps)-1)
		}
		b.WriteString("    ]\n")
		b.WriteString("   }")
		if i < len(g.streams)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  ]\n")
	b.WriteString("}\n")
	if !json.Valid(b.Bytes()) {
		panic("vecgen: generated vectors.json is not valid JSON")
	}
	return b.Bytes()
}
