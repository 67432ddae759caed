package goldvec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadJSONKeepsToSchema: a file that leaves a key out, adds one, has
// a null where the schema writes a value, or has a key of a later format
// than its own is refused, with the place named.
func TestReadJSONKeepsToSchema(t *testing.T) {
	dir, _ := Dir()
	data, err := os.ReadFile(filepath.Join(dir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	token := func(f map[string]any) map[string]any {
		for _, v := range f["vectors"].([]any) {
			if m := v.(map[string]any); m["suite"] == "token" {
				return m
			}
		}
		t.Fatal("no vector of suite token")
		return nil
	}
	for _, c := range []struct {
		name string
		mut  func(f map[string]any)
		want string
	}{
		{"no epoch_start", func(f map[string]any) {
			delete(f["vectors"].([]any)[0].(map[string]any)["state"].(map[string]any), "epoch_start")
		}, `vectors[0].state: no key "epoch_start"`},
		{"no turn flag", func(f map[string]any) {
			delete(token(f)["expect"].(map[string]any)["turn"].(map[string]any), "record")
		}, `no key "record"`},
		{"no key1_valid", func(f map[string]any) {
			delete(f["streams"].([]any)[0].(map[string]any)["steps"].([]any)[1].(map[string]any), "key1_valid")
		}, `streams[0].steps[1]: no key "key1_valid"`},
		{"null for a number", func(f map[string]any) { f["vectors"].([]any)[2].(map[string]any)["hex_index"] = nil }, "vectors[2].hex_index: <nil> reads as"},
		{"unknown key", func(f map[string]any) { f["vectors"].([]any)[0].(map[string]any)["comment"] = "x" }, `unknown field "comment"`},
		{"a step's key in a vector", func(f map[string]any) { f["vectors"].([]any)[0].(map[string]any)["note"] = "x" }, `unknown field "note"`},
		{"a key of format 4 in format 3", func(f map[string]any) { f["format"] = "exo-vectors/3" }, `vectors.json: key "tag_key_1" of format 4 in a file of format 3`},
	} {
		f := decodeMap(t, data)
		c.mut(f)
		d := t.TempDir()
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "vectors.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadJSON(d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestFlatten: the flat list holds every case once, in file order, each
// stream's steps chained but for the first and the armed ones, and the
// transmit side carried along a token stream.
func TestFlatten(t *testing.T) {
	f, err := ReadJSON("")
	if err != nil {
		t.Fatal(err)
	}
	cases, err := f.Flatten()
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != f.VectorsCount+f.StepsCount {
		t.Fatalf("%d cases, header says %d vectors and %d steps", len(cases), f.VectorsCount, f.StepsCount)
	}
	armed := 0
	for i, c := range cases {
		if i < len(f.Vectors) {
			if c.JSONCase != &f.Vectors[i].JSONCase || c.Stream != -1 || c.Chained || c.Armed {
				t.Fatalf("%s: case %d is not vector %d", c.Where, i, i)
			}
			continue
		}
		prev := cases[i-1]
		if c.Chained != (c.Step > 0 && !c.Armed) {
			t.Errorf("%s: chained %v, armed %v", c.Where, c.Chained, c.Armed)
		}
		if c.Chained && (c.In != prev.Out || (c.TxIn == nil) != (prev.TxOut == nil) || c.TxIn != nil && *c.TxIn != *prev.TxOut) {
			t.Errorf("%s: chained, but its state before is not %s's after", c.Where, prev.Where)
		}
		if c.Armed {
			armed++
		}
	}
	if armed == 0 {
		t.Error("no armed step")
	}
}
