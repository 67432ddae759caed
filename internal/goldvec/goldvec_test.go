package goldvec

import (
	"bufio"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/exo-rack/exo/exo"
)

func loadBoth(t *testing.T) (js, hx Set) {
	t.Helper()
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if js, err = LoadJSON(dir); err != nil {
		t.Fatal(err)
	}
	if hx, err = LoadHex(dir); err != nil {
		t.Fatal(err)
	}
	return js, hx
}

// TestFormsAgree: where both forms have a case, they have the same frame,
// reason and states; the format 3 key is the test key.
func TestFormsAgree(t *testing.T) {
	js, hx := loadBoth(t)
	n, err := Agree(js, hx)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(hx.Cases) || n == 0 {
		t.Fatalf("%d of %d hex records matched", n, len(hx.Cases))
	}
	if js.Version >= 3 && js.Key != TestKey() {
		t.Errorf("%s key %x, want the test key %x", js.Format, js.Key, TestKey())
	}
	chained := 0
	for _, c := range js.Cases {
		if c.Chained {
			if !strings.HasPrefix(c.Where, "stream/") {
				t.Errorf("%s: chained outside a stream", c.Where)
			}
			chained++
		}
	}
	if chained == 0 {
		t.Error("no chained stream step")
	}
	t.Logf("%s: %d cases (%d chained); %s: %d records; key %x", js.Format, len(js.Cases), chained, hx.Format, len(hx.Cases), js.Key)
}

// TestCounts: the numbers of cases are the ones the JSON header and
// vectors.meta give (the meta read here, apart from the readers).
func TestCounts(t *testing.T) {
	js, hx := loadBoth(t)
	dir, _ := Dir()
	hdr, err := ReadJSON(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(js.Cases)+len(js.TxCases) != hdr.VectorsCount+hdr.StepsCount {
		t.Errorf("JSON: %d + %d transmit cases, header says %d vectors + %d steps", len(js.Cases), len(js.TxCases), hdr.VectorsCount, hdr.StepsCount)
	}
	if len(hx.Cases) != hdr.HexRecords {
		t.Errorf("hex: %d records, vectors.json says hex_records %d", len(hx.Cases), hdr.HexRecords)
	}
	f, err := os.Open(filepath.Join(dir, "vectors.meta"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	count := -1
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "count "); ok {
			if count, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(hx.Cases) != count {
		t.Errorf("hex: %d records, vectors.meta says count %d", len(hx.Cases), count)
	}
}

func TestTestKey(t *testing.T) {
	if k := TestKey(); hex.EncodeToString(k[:]) != "000102030405060708090a0b0c0d0e0f" {
		t.Fatalf("TestKey() = %x, want 00..0f", k)
	}
	if k := TestKey1(); hex.EncodeToString(k[:]) != "101112131415161718191a1b1c1d1e1f" {
		t.Fatalf("TestKey1() = %x, want 10..1f", k)
	}
}

// TestLoadErrors: a missing directory is an error, not a panic.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadJSON(dir); err == nil {
		t.Error("LoadJSON of an empty directory: no error")
	}
	if _, err := LoadHex(dir); err == nil {
		t.Error("LoadHex of an empty directory: no error")
	}
}

// TestKeySlots: format 4 carries the slot-1 key 10..1f, some cases with
// slot 1 empty, and every case's tag_valid is what its key ring says.
func TestKeySlots(t *testing.T) {
	for _, load := range []func(string) (Set, error){LoadJSON, LoadHex} {
		vs, err := load("")
		if err != nil {
			t.Fatal(err)
		}
		if vs.Version < 4 {
			t.Fatalf("%s: want format 4", vs.Format)
		}
		if !vs.HasKey1 || hex.EncodeToString(vs.Key1[:]) != "101112131415161718191a1b1c1d1e1f" {
			t.Fatalf("%s: slot-1 key %v %x, want 10..1f", vs.Format, vs.HasKey1, vs.Key1)
		}
		var with, without, phase1 int
		for i := range vs.Cases {
			c := &vs.Cases[i]
			if c.Key1Valid {
				with++
			} else {
				without++
			}
			var f exo.Frame
			if f.UnmarshalBinary(c.Frame) != nil {
				continue
			}
			if f.Flags&exo.FlagKeyPhase != 0 {
				phase1++
			}
			kr := vs.Keys(c)
			if kr.Verify(&f) != c.TagValid {
				t.Errorf("%s: tag_valid %v, the key ring says %v", c.Where, c.TagValid, !c.TagValid)
			}
		}
		if without == 0 || with == 0 || phase1 == 0 {
			t.Errorf("%s: %d cases with slot 1, %d without, %d frames in phase 1: want some of each", vs.Format, with, without, phase1)
		}
		t.Logf("%s: %d cases with slot 1, %d without, %d decoded frames in phase 1", vs.Format, with, without, phase1)
	}
}
