package fpga

// The golden vectors (testdata/vectors, docs/vectors.md) for the
// simulated engine (sim_test.go) and the tag check (tag_test.go), read by
// internal/goldvec: formats 2 to 4 (4: two key slots), the hex form's
// fields from vectors.meta. TestVectorReaders checks them without the simulator.

import (
	"testing"

	"github.com/exo-rack/exo/internal/goldvec"
)

// loadJSONVectors reads vectors.json, failing tb if it cannot.
func loadJSONVectors(tb testing.TB) goldvec.Set {
	tb.Helper()
	return mustLoad(tb)(goldvec.LoadJSON(""))
}

// loadHexVectors reads vectors.hex with vectors.meta, failing tb if it
// cannot.
func loadHexVectors(tb testing.TB) goldvec.Set {
	tb.Helper()
	return mustLoad(tb)(goldvec.LoadHex(""))
}

func mustLoad(tb testing.TB) func(goldvec.Set, error) goldvec.Set {
	return func(vs goldvec.Set, err error) goldvec.Set {
		if err != nil {
			tb.Fatal(err)
		}
		return vs
	}
}

// TestVectorReaders reads both forms (no simulator needed) and checks them
// against each other: the hex records are the JSON cases that fit a
// record, in the same order.
func TestVectorReaders(t *testing.T) {
	js, hx := loadJSONVectors(t), loadHexVectors(t)
	if _, err := goldvec.Agree(js, hx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d cases; %s: %d records; key %v %x; key1 %v %x", js.Format, len(js.Cases), hx.Format, len(hx.Cases), js.HasKey, js.Key, js.HasKey1, js.Key1)
}
