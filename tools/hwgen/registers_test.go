package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistersLoad checks hw/registers.json itself: it loads, and the
// generated twins agree on a few offsets the RTL and the bench rely on.
func TestRegistersLoad(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "hw", "registers.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := loadRegisters(data, "hw/registers.json")
	if err != nil {
		t.Fatal(err)
	}
	r := s.(*regSpec)
	files, err := r.files()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("%d files, want 3", len(files))
	}
	var goSrc, vh string
	for _, f := range files {
		switch {
		case strings.HasSuffix(f.path, ".go"):
			goSrc = strings.Join(strings.Fields(string(f.content)), " ")
		case strings.HasSuffix(f.path, ".vh"):
			vh = string(f.content)
		}
	}
	for _, want := range []string{"AppendLo = 0x038", "HistoryBase = 0x100", "CounterBase = 0x200", "RbType = 0x000"} {
		if !strings.Contains(goSrc, want) {
			t.Errorf("Go twin lacks %q", want)
		}
	}
	for _, want := range []string{"EXO_REG_APPEND_LO = 12'h038", "EXO_REG_HISTORY_BASE = 12'h100", "EXO_REG_COUNTER_BASE = 12'h200"} {
		if !strings.Contains(vh, want) {
			t.Errorf("Verilog twin lacks %q", want)
		}
	}
}

// TestRegistersReject checks that the loader refuses broken maps.
func TestRegistersReject(t *testing.T) {
	base := `{"kind":"registers","name":"x","prefix":"x_reg","title":"t","version":1,"doc":"d","word_bits":32,"addr_bits":8,
"outputs":{"go":{"path":"a.go","package":"a"},"verilog":{"path":"a.vh"},"markdown":{"path":"a.md"}},`
	for name, body := range map[string]string{
		"overlap":       `"registers":[{"name":"a","offset":"0x0","access":"rw"},{"name":"b","offset":"0x0","access":"rw"}]}`,
		"unaligned":     `"registers":[{"name":"a","offset":"0x2","access":"rw"}]}`,
		"beyond":        `"registers":[{"name":"a","offset":"0x100","access":"rw"}]}`,
		"bad access":    `"registers":[{"name":"a","offset":"0x0","access":"rx"}]}`,
		"array overlap": `"registers":[{"name":"a","offset":"0x10","access":"rw"}],"arrays":[{"name":"b","offset":"0x0","count":8,"stride":4,"access":"ro"}]}`,
		"field overlap": `"registers":[{"name":"a","offset":"0x0","access":"rw","fields":[{"name":"f","lsb":0,"width":4},{"name":"g","lsb":3,"width":2}]}]}`,
		"field outside": `"registers":[{"name":"a","offset":"0x0","access":"rw","fields":[{"name":"f","lsb":30,"width":4}]}]}`,
		"name twice":    `"registers":[{"name":"a","offset":"0x0","access":"rw"}],"arrays":[{"name":"a","offset":"0x10","count":1,"stride":4,"access":"ro"}]}`,
	} {
		if _, err := loadRegisters([]byte(base+body), "x.json"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := loadRegisters([]byte(base+`"registers":[{"name":"a","offset":"0x0","access":"rw"}],"arrays":[{"name":"b","offset":"0x4","count":2,"stride":8,"access":"ro"},{"name":"c","offset":"0x8","count":2,"stride":8,"access":"ro"}]}`), "x.json"); err != nil {
		t.Errorf("interleaved arrays refused: %v", err)
	}
}
