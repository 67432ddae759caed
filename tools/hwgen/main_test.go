package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const repoRoot = "../.."

func loadRepoWire(t *testing.T) (*wireSpec, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "hw", "wire.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := loadWire(data, "hw/wire.json")
	if err != nil {
		t.Fatal(err)
	}
	return s.(*wireSpec), data
}

// TestGeneratedUpToDate is the CI drift check (-check) as a test.
func TestGeneratedUpToDate(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"-root", repoRoot, "-check"}, &out, &errb); rc != 0 {
		t.Fatalf("hwgen -check: rc %d\n%s%s", rc, out.String(), errb.String())
	}
}

func TestCheckReportsStale(t *testing.T) {
	root := t.TempDir()
	data, err := os.ReadFile(filepath.Join(repoRoot, "hw", "wire.json"))
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(root, "hw", "wire.json")
	must(t, os.MkdirAll(filepath.Dir(in), 0o755))
	must(t, os.WriteFile(in, data, 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	doc := "intro\n" + beginMarker("docs/wire_table.md") + "\nSTALE-PLACEHOLDER\n" + endMarker + "\noutro\n"
	must(t, os.WriteFile(filepath.Join(root, "docs", "wire.md"), []byte(doc), 0o644))

	var out, errb bytes.Buffer
	if rc := run([]string{"-root", root, "-check"}, &out, &errb); rc != 1 {
		t.Fatalf("-check on an empty tree: rc %d, want 1", rc)
	}
	for _, p := range []string{"exo/wire_gen.go", "hw/gen/exo_wire.h", "hw/gen/exo_wire.vh", "docs/wire_table.md", "docs/wire.md"} {
		if !strings.Contains(errb.String(), p) {
			t.Errorf("-check output does not list %s:\n%s", p, errb.String())
		}
	}
	if _, err := os.Stat(filepath.Join(root, "exo", "wire_gen.go")); err == nil {
		t.Fatal("-check wrote a file")
	}
	if rc := run([]string{"-root", root}, &out, &errb); rc != 0 {
		t.Fatalf("generate: rc %d: %s", rc, errb.String())
	}
	errb.Reset()
	if rc := run([]string{"-root", root, "-check"}, &out, &errb); rc != 0 {
		t.Fatalf("-check after generate: rc %d: %s", rc, errb.String())
	}
	got, _ := os.ReadFile(filepath.Join(root, "docs", "wire.md"))
	if !strings.HasPrefix(string(got), "intro\n"+beginMarker("docs/wire_table.md")+"\n### Fields") ||
		!strings.HasSuffix(string(got), "|\n"+endMarker+"\noutro\n") || strings.Contains(string(got), "STALE-PLACEHOLDER") {
		t.Fatalf("splice:\n%s", got)
	}
	// One changed byte in a generated file is stale.
	h := filepath.Join(root, "hw", "gen", "exo_wire.h")
	b, _ := os.ReadFile(h)
	must(t, os.WriteFile(h, bytes.Replace(b, []byte("EXO_OFF_SEQ 16"), []byte("EXO_OFF_SEQ 17"), 1), 0o644))
	errb.Reset()
	if rc := run([]string{"-root", root, "-check"}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "hw/gen/exo_wire.h") ||
		strings.Contains(errb.String(), "wire_gen.go") {
		t.Fatalf("-check after edit: rc %d: %s", rc, errb.String())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeterministic: the output does not depend on the order of the JSON
// lists (other than sections, whose order is the wire order).
func TestDeterministic(t *testing.T) {
	_, data := loadRepoWire(t)
	var raw map[string]any
	must(t, json.Unmarshal(data, &raw))
	reverse := func(v any) {
		l := v.([]any)
		for i, j := 0, len(l)-1; i < j; i, j = i+1, j-1 {
			l[i], l[j] = l[j], l[i]
		}
	}
	reverse(raw["constants"])
	reverse(raw["header"])
	for _, e := range raw["enums"].([]any) {
		reverse(e.(map[string]any)["values"])
	}
	shuffled, err := json.Marshal(raw)
	must(t, err)

	gen := func(data []byte) []outFile {
		s, err := loadWire(data, "hw/wire.json")
		must(t, err)
		files, err := s.files()
		must(t, err)
		return files
	}
	a, b := gen(data), gen(shuffled)
	if len(a) != len(b) {
		t.Fatal("different file sets")
	}
	for i := range a {
		if a[i].path != b[i].path || !bytes.Equal(a[i].content, b[i].content) {
			t.Errorf("%s differs with reordered input", a[i].path)
		}
		if a[i].splice != nil && !bytes.Equal(a[i].splice.body, b[i].splice.body) {
			t.Errorf("%s splice differs with reordered input", a[i].path)
		}
	}
	for _, f := range a {
		if f.splice == nil && !bytes.Contains(f.content, []byte(genHeader)) {
			t.Errorf("%s: no %q header", f.path, genHeader)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	_, data := loadRepoWire(t)
	tests := []struct {
		name, old, new, want string
	}{
		{"overlap", `"name": "flags", "offset": 14`, `"name": "flags", "offset": 13`, "offset 13"},
		{"bad size", `"name": "epoch", "offset": 8, "size": 4`, `"name": "epoch", "offset": 8, "size": 3`, "size 3"},
		{"header_len", `"name": "header_len", "value": 32`, `"name": "header_len", "value": 40`, "header_len is 40"},
		{"dup reason value", `"name": "BAD_FLAGS", "value": 18`, `"name": "BAD_FLAGS", "value": 17`, "both = 17"},
		{"sparse reason", `"name": "BAD_FLAGS", "value": 18`, `"name": "BAD_FLAGS", "value": 40`, "dense"},
		{"lower reason", `"name": "BAD_FLAGS"`, `"name": "bad_flags"`, "UPPER_SNAKE"},
		{"unknown key", `"kind": "wire",`, `"kind": "wire", "colour": 1,`, "unknown field"},
		{"bits", `"name": "history_none", "value": "0xFF", "bits": 8`, `"name": "history_none", "value": "0x1FF", "bits": 8`, "does not fit"},
		{"section", `"length_field": "payload_len"`, `"length_field": "payload_size"`, "not a header field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Contains(data, []byte(tt.old)) {
				t.Fatalf("hw/wire.json has no %q", tt.old)
			}
			_, err := loadWire(bytes.Replace(data, []byte(tt.old), []byte(tt.new), 1), "x.json")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	tests := []struct{ in, goN, cN string }{
		{"hist_len", "HistLen", "EXO_HIST_LEN"},
		{"BAD_HISTORY_ID", "BadHistoryID", "EXO_BAD_HISTORY_ID"},
		{"default_dst_mac", "DefaultDstMAC", "EXO_DEFAULT_DST_MAC"},
		{"SENDER_IN_HISTORY", "SenderInHistory", "EXO_SENDER_IN_HISTORY"},
	}
	for _, tt := range tests {
		if g := goName(tt.in); g != tt.goN {
			t.Errorf("goName(%q) = %q, want %q", tt.in, g, tt.goN)
		}
		if c := cName("exo", tt.in); c != tt.cN {
			t.Errorf("cName(%q) = %q, want %q", tt.in, c, tt.cN)
		}
		// Identical modulo case and underscores.
		if strings.ToLower(tt.goN) != strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(tt.cN, "EXO_")), "_", "") {
			t.Errorf("%s and %s differ beyond case", tt.goN, tt.cN)
		}
	}
}

// want lists every NAME=value a twin must define, from the JSON.
func (w *wireSpec) wantValues() map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range w.Constants {
		m[cName(w.Prefix, c.Name)] = c.Value.v
	}
	for _, f := range w.Header {
		m[cName(w.Prefix, "off", f.Name)] = uint64(f.Offset)
		m[cName(w.Prefix, "size", f.Name)] = uint64(f.Size)
	}
	m[cName(w.Prefix, "off", w.Sections[0].Name)] = w.constant("header_len").Value.v
	for _, e := range w.Enums {
		for _, v := range e.Values {
			m[cName(w.Prefix, e.Name, v.Name)] = uint64(v.Value)
		}
		m[cName(w.Prefix, "num", e.Name+"s")] = uint64(len(e.Values))
		m[cName(w.Prefix, e.Name, "slow_path_mask")] = e.slowPathMask()
	}
	return m
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func parseValues(t *testing.T, out []byte) map[string]uint64 {
	t.Helper()
	got := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		got[strings.TrimSpace(name)] = v
	}
	return got
}

func compareValues(t *testing.T, twin string, want, got map[string]uint64) {
	t.Helper()
	for _, k := range sortedKeys(want) {
		if g, ok := got[k]; !ok || g != want[k] {
			t.Errorf("%s: %s = %d (present %v), want %d", twin, k, g, ok, want[k])
		}
	}
}

// TestCTwin compiles hw/gen/exo_wire.h strictly and checks every value.
func TestCTwin(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		if cc, err = exec.LookPath("cc"); err != nil {
			t.Skip("no C compiler")
		}
	}
	w, _ := loadRepoWire(t)
	want := w.wantValues()
	var src strings.Builder
	src.WriteString("#define EXO_WIRE_WANT_NAMES\n#include <stdio.h>\n#include <string.h>\n#include \"exo_wire.h\"\n")
	src.WriteString("static const unsigned char mac[6] = EXO_DEFAULT_DST_MAC;\nint main(void) {\n")
	for _, k := range sortedKeys(want) {
		fmt.Fprintf(&src, "\tprintf(\"%s=%%llu\\n\", (unsigned long long)(%s));\n", k, k)
	}
	for _, e := range w.Enums {
		for _, v := range e.Values {
			fmt.Fprintf(&src, "\tif (strcmp(%s_names[%s], %q) != 0) return 2;\n", cLower(w.Prefix, e.Name), cName(w.Prefix, e.Name, v.Name), v.Name)
			fmt.Fprintf(&src, "\tif (%s_slow_path(%s) != %d) return 3;\n", cLower(w.Prefix, e.Name), cName(w.Prefix, e.Name, v.Name), b2i(v.SlowPath))
		}
		fmt.Fprintf(&src, "\tif (%s_slow_path(200)) return 4;\n", cLower(w.Prefix, e.Name))
	}
	src.WriteString("\tif (mac[0] != 0xff || mac[5] != 0xff) return 5;\n\treturn 0;\n}\n")

	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "t.c"), []byte(src.String()), 0o644))
	exe := filepath.Join(dir, "t")
	cmd := exec.Command(cc, "-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
		"-I", filepath.Join(repoRoot, "hw", "gen"), "-o", exe, filepath.Join(dir, "t.c"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	compareValues(t, "C", want, parseValues(t, out))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestVerilogTwin includes hw/gen/exo_wire.vh in a Verilog-2005 module
// (twice, in two modules: no include guard) and checks every value.
func TestVerilogTwin(t *testing.T) {
	iv, err := exec.LookPath("iverilog")
	if err != nil {
		t.Skip("no iverilog")
	}
	vvp, err := exec.LookPath("vvp")
	if err != nil {
		t.Skip("no vvp")
	}
	w, _ := loadRepoWire(t)
	want := w.wantValues()
	var src strings.Builder
	src.WriteString("module other;\n`include \"exo_wire.vh\"\nendmodule\n\nmodule tb;\n`include \"exo_wire.vh\"\ninitial begin\n")
	for _, k := range sortedKeys(want) {
		fmt.Fprintf(&src, "\t$display(\"%s=%%0d\", %s);\n", k, k)
	}
	for _, e := range w.Enums {
		for _, v := range e.Values {
			fmt.Fprintf(&src, "\tif (%s[%s] !== 1'b%d) $display(\"FAIL slow path %s\");\n",
				cName(w.Prefix, e.Name, "slow_path_mask"), cName(w.Prefix, e.Name, v.Name), b2i(v.SlowPath), v.Name)
		}
	}
	src.WriteString("\tif (EXO_DEFAULT_DST_MAC !== 48'hffffffffffff) $display(\"FAIL mac\");\n")
	src.WriteString("\t$finish;\nend\nendmodule\n")

	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "tb.v"), []byte(src.String()), 0o644))
	vv := filepath.Join(dir, "tb.vvp")
	cmd := exec.Command(iv, "-g2005", "-Wall", "-s", "tb", "-I", filepath.Join(repoRoot, "hw", "gen"), "-o", vv, filepath.Join(dir, "tb.v"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("iverilog warnings:\n%s", out)
	}
	out, err = exec.Command(vvp, "-n", vv).Output()
	if err != nil {
		t.Fatalf("vvp: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("FAIL")) {
		t.Fatalf("vvp:\n%s", out)
	}
	compareValues(t, "Verilog", want, parseValues(t, out))
}
