package goldvec

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
// vectors.meta give, read here independently of the readers.
func TestCounts(t *testing.T) {
	js, hx := loadBoth(t)
	dir, _ := Dir()
	data, err := os.ReadFile(filepath.Join(dir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct {
		Vectors    int `json:"vectors_count"`
		Steps      int `json:"steps_count"`
		HexRecords int `json:"hex_records"`
	}
	if err := json.Unmarshal(data, &hdr); err != nil {
		t.Fatal(err)
	}
	if len(js.Cases) != hdr.Vectors+hdr.Steps {
		t.Errorf("JSON: %d cases, header says %d vectors + %d steps", len(js.Cases), hdr.Vectors, hdr.Steps)
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
