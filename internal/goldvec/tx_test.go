package goldvec

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exo-rack/exo/exo"
)

// The transmit side (format 5): the reader splits the cases, decodes the
// tx, queue and turn, chains the token streams (armed steps start again),
// and what it returns is what exo.Engine.Step does.

func loadJSONOrFail(t *testing.T) Set {
	t.Helper()
	js, err := LoadJSON("")
	if err != nil {
		t.Fatal(err)
	}
	if js.Version != 5 {
		t.Fatalf("%s: want format 5", js.Format)
	}
	return js
}

// stepCase runs one transmit case the way a fast path does: the codec, the
// group, the tag under the slot the frame names, then exo.Engine.Step with
// the queue's head and the key of slot TxIn.Phase.
func stepCase(vs *Set, c *Case, e *exo.Engine) (exo.Reason, exo.Turn, []byte) {
	var f exo.Frame
	if err := f.UnmarshalBinary(append([]byte(nil), c.Frame...)); err != nil {
		return exo.ReasonOf(err), exo.Turn{}, nil
	}
	kr := vs.Keys(c)
	if f.Group == e.Group && !kr.Verify(&f) {
		return exo.ReasonBadTag, exo.Turn{}, nil
	}
	var head *exo.Batch
	if len(c.Queue) > 0 {
		head = &c.Queue[0]
	}
	r, turn := e.Step(&f, head, vs.SendKey(c))
	var sent []byte
	if turn.Sent {
		var err error
		if sent, err = turn.Frame.AppendBinary(nil); err != nil {
			panic(err)
		}
	}
	return r, turn, sent
}

// TestTransmitCases replays every transmit case through exo.Engine.Step,
// carrying the state (pointers and tx) along the streams.
func TestTransmitCases(t *testing.T) {
	js := loadJSONOrFail(t)
	if len(js.TxCases) == 0 {
		t.Fatal("no transmit case")
	}
	for _, c := range js.Cases {
		if c.HasTx || c.Turn.Sent != nil || c.Queue != nil {
			t.Fatalf("%s: a receive-side case with a transmit side", c.Where)
		}
	}
	var prev *Case
	var sent, chained, armed int
	for i := range js.TxCases {
		c := &js.TxCases[i]
		if !c.HasTx {
			t.Fatalf("%s: a transmit case without HasTx", c.Where)
		}
		if c.Chained {
			chained++
			if prev == nil || c.In != prev.Out || c.TxIn != prev.TxOut {
				t.Fatalf("%s: chained, but its state is not the previous step's", c.Where)
			}
		} else if strings.Contains(c.Where, "#") && !strings.HasSuffix(c.Where, "#0") {
			armed++
			if prev == nil || c.TxIn.Kseq != prev.TxOut.Kseq {
				t.Errorf("%s: armed again with Kseq %d, the fast path was at %d", c.Where, c.TxIn.Kseq, prev.TxOut.Kseq)
			}
		}
		e := exo.Engine{Pointers: c.In, Tx: c.TxIn}
		r, turn, b := stepCase(&js, c, &e)
		if r != c.Reason || e.Pointers != c.Out || e.Tx != c.TxOut {
			t.Errorf("%s: Step says %s %s %+v, the file %s %s %+v", c.Where, r, StateString(e.Pointers), e.Tx, c.Reason, StateString(c.Out), c.TxOut)
		}
		got := Turn{Record: turn.Record, Sent: b, Popped: turn.Popped, Handoff: turn.Handoff, Halt: turn.Halt}
		if got.Record != c.Turn.Record || got.Popped != c.Turn.Popped || got.Handoff != c.Turn.Handoff || got.Halt != c.Turn.Halt || !bytes.Equal(got.Sent, c.Turn.Sent) {
			t.Errorf("%s: turn %+v, the file %+v", c.Where, got, c.Turn)
		}
		if c.Turn.Sent != nil {
			sent++
			if !exo.VerifyTag(c.Turn.Sent, js.SendKey(c)) {
				t.Errorf("%s: the frame sent is not sealed under slot %d's key", c.Where, c.TxIn.Phase)
			}
		}
		prev = c
	}
	if chained == 0 || armed == 0 || sent == 0 {
		t.Errorf("%d chained, %d re-armed steps, %d frames sent: want some of each", chained, armed, sent)
	}
	t.Logf("%s: %d receive-side cases, %d transmit cases (%d chained, %d re-armed, %d sent a frame)", js.Format, len(js.Cases), len(js.TxCases), chained, armed, sent)
}

// TestTransmitCounts: the header's tx_coverage is what the cases say.
func TestTransmitCounts(t *testing.T) {
	js := loadJSONOrFail(t)
	hdr, err := ReadJSON("")
	if err != nil {
		t.Fatal(err)
	}
	var rec, sent, pop, hand, halt int
	for _, c := range js.TxCases {
		for _, x := range []struct {
			on bool
			n  *int
		}{{c.Turn.Record, &rec}, {c.Turn.Sent != nil, &sent}, {c.Turn.Popped, &pop}, {c.Turn.Handoff, &hand}, {c.Turn.Halt, &halt}} {
			if x.on {
				*x.n++
			}
		}
	}
	h := hdr.TxCoverage
	if hdr.TxCases != len(js.TxCases) || h.Cases != len(js.TxCases) || h.Record != rec || h.Sent != sent || h.Popped != pop || h.Handoff != hand || h.Halt != halt {
		t.Errorf("header tx_cases %d %+v; the cases: %d, record %d sent %d popped %d handoff %d halt %d",
			hdr.TxCases, h, len(js.TxCases), rec, sent, pop, hand, halt)
	}
}

// TestFormat4StillRead: the current file with its transmit side taken out
// and its format line set back to 4 reads as a format-4 file with the same
// receive-side cases (and agrees with the hex form); a tx in a format-4
// file is refused.
func TestFormat4StillRead(t *testing.T) {
	js := loadJSONOrFail(t)
	dir, _ := Dir()
	data, err := os.ReadFile(filepath.Join(dir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := decodeMap(t, data)
	f["format"] = "exo-vectors/4"
	delete(f, "tx_cases")
	delete(f, "tx_coverage")
	delete(f, "transmit")
	var vecs, streams []any
	for _, v := range f["vectors"].([]any) {
		if _, tx := v.(map[string]any)["tx"]; !tx {
			vecs = append(vecs, v)
		}
	}
	steps := 0
	for _, s := range f["streams"].([]any) {
		if _, tx := s.(map[string]any)["tx"]; !tx {
			streams = append(streams, s)
			steps += len(s.(map[string]any)["steps"].([]any))
		}
	}
	f["vectors"], f["streams"] = vecs, streams
	f["vectors_count"], f["streams_count"], f["steps_count"] = len(vecs), len(streams), steps
	write := func(f map[string]any) string {
		d := t.TempDir()
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "vectors.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	v4, err := LoadJSON(write(f))
	if err != nil {
		t.Fatal(err)
	}
	if v4.Version != 4 || len(v4.TxCases) != 0 || len(v4.Cases) != len(js.Cases) {
		t.Fatalf("format 4: version %d, %d cases, %d transmit cases; want 4, %d, 0", v4.Version, len(v4.Cases), len(v4.TxCases), len(js.Cases))
	}
	for i := range v4.Cases {
		a, b := v4.Cases[i], js.Cases[i]
		if a.Where != b.Where || a.In != b.In || a.Out != b.Out || !bytes.Equal(a.Frame, b.Frame) || a.Reason != b.Reason || a.Chained != b.Chained || a.Key1Valid != b.Key1Valid {
			t.Fatalf("format 4 case %d (%s) differs from the format-5 receive side", i, a.Where)
		}
	}
	hx, err := LoadHex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Agree(v4, hx); err != nil {
		t.Errorf("format 4 against the hex form: %v", err)
	}
	// a tx in a format-4 file
	vecs[0].(map[string]any)["tx"] = map[string]any{"on": true}
	if _, err := LoadJSON(write(f)); err == nil || !strings.Contains(err.Error(), "format 4") {
		t.Errorf("a tx in format 4: %v, want an error", err)
	}
	// format 6 is not known
	delete(vecs[0].(map[string]any), "tx")
	f["format"] = "exo-vectors/6"
	if _, err := LoadJSON(write(f)); err == nil {
		t.Error("format 6: no error")
	}
}

// decodeMap decodes a JSON object keeping its numbers exact (64-bit
// values do not fit a float64).
func decodeMap(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var f map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestTransmitErrors: a transmit case must carry its expectation.
func TestTransmitErrors(t *testing.T) {
	dir, _ := Dir()
	data, err := os.ReadFile(filepath.Join(dir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mut  func(v map[string]any)
		want string
	}{
		{"no turn", func(v map[string]any) { delete(v["expect"].(map[string]any), "turn") }, "expect.turn"},
		{"no expected tx", func(v map[string]any) { delete(v["expect"].(map[string]any), "tx") }, "expect.tx"},
		{"bad sent", func(v map[string]any) { v["expect"].(map[string]any)["turn"].(map[string]any)["sent"] = "zz" }, "turn.sent"},
		{"bad queue", func(v map[string]any) { v["queue"] = []any{map[string]any{"count": 1, "payload": "q"}} }, "queue[0]"},
		{"queue without tx", func(v map[string]any) { delete(v, "tx") }, "without a tx"},
	} {
		f := decodeMap(t, data)
		for _, v := range f["vectors"].([]any) {
			if m := v.(map[string]any); m["suite"] == "token" && m["name"] == "pred_one_record" {
				c.mut(m)
			}
		}
		d := t.TempDir()
		b, _ := json.Marshal(f)
		if err := os.WriteFile(filepath.Join(d, "vectors.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadJSON(d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %s", c.name, err, c.want)
		}
	}
}
