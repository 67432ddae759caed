package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"sort"
	"strings"
)

// regSpec is hw/registers.json (kind "registers"): the register map of the
// FPGA engine, a block of word-sized registers and register arrays at byte
// offsets. It generates the Go constants of the driver, a Verilog header
// for the RTL and docs/registers.md.
type regSpec struct {
	Kind      string     `json:"kind"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"` // EXO_REG_GROUP, Go: Group (package regs)
	Title     string     `json:"title"`
	Version   int        `json:"version"`
	Doc       string     `json:"doc"`
	WordBits  int        `json:"word_bits"`
	AddrBits  int        `json:"addr_bits"`
	Outputs   regOutputs `json:"outputs"`
	Constants []constant `json:"constants"`
	Registers []register `json:"registers"`
	Arrays    []regArray `json:"arrays"`

	src string
}

type regOutputs struct {
	Go struct {
		Path    string `json:"path"`
		Package string `json:"package"`
	} `json:"go"`
	Verilog struct {
		Path string `json:"path"`
	} `json:"verilog"`
	Markdown struct {
		Path string `json:"path"`
	} `json:"markdown"`
}

type register struct {
	Name   string     `json:"name"`
	Offset number     `json:"offset"`
	Access string     `json:"access"` // ro, rw, wo
	Reset  *number    `json:"reset"`  // nil: not a plain value (built from fields or parameters)
	Doc    string     `json:"doc"`
	Fields []regField `json:"fields"`
}

type regField struct {
	Name  string `json:"name"`
	LSB   int    `json:"lsb"`
	Width int    `json:"width"`
	Doc   string `json:"doc"`
}

type regArray struct {
	Name   string     `json:"name"`
	Offset number     `json:"offset"`
	Count  int        `json:"count"`
	Stride int        `json:"stride"`
	Access string     `json:"access"`
	Doc    string     `json:"doc"`
	Fields []regField `json:"fields"`
}

func loadRegisters(data []byte, src string) (spec, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r regSpec
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	r.src = src
	if err := r.validate(); err != nil {
		return nil, err
	}
	sort.SliceStable(r.Registers, func(i, j int) bool { return r.Registers[i].Offset.v < r.Registers[j].Offset.v })
	sort.SliceStable(r.Arrays, func(i, j int) bool { return r.Arrays[i].Offset.v < r.Arrays[j].Offset.v })
	return &r, nil
}

func (r *regSpec) validate() error {
	if r.Kind != "registers" {
		return fmt.Errorf("kind %q, want \"registers\"", r.Kind)
	}
	if !snakeRe.MatchString(r.Prefix) || !snakeRe.MatchString(r.Name) {
		return errors.New("name and prefix must be snake_case")
	}
	if r.WordBits != 32 {
		return fmt.Errorf("word_bits %d: only 32 is supported", r.WordBits)
	}
	if r.AddrBits < 4 || r.AddrBits > 32 {
		return fmt.Errorf("addr_bits %d out of range", r.AddrBits)
	}
	if r.Outputs.Go.Path == "" || r.Outputs.Go.Package == "" || r.Outputs.Verilog.Path == "" || r.Outputs.Markdown.Path == "" {
		return errors.New("outputs: go (path, package), verilog and markdown paths are required")
	}
	names := map[string]bool{}
	taken := func(n string) error {
		if !snakeRe.MatchString(n) {
			return fmt.Errorf("name %q is not snake_case", n)
		}
		if names[n] {
			return fmt.Errorf("name %q used twice", n)
		}
		names[n] = true
		return nil
	}
	for _, c := range r.Constants {
		if err := taken(c.Name); err != nil {
			return err
		}
	}
	words := map[uint64]string{} // byte offset -> owner
	limit := uint64(1) << uint(r.AddrBits)
	claim := func(off uint64, who string) error {
		if off%4 != 0 {
			return fmt.Errorf("%s: offset 0x%X is not word aligned", who, off)
		}
		if off+4 > limit {
			return fmt.Errorf("%s: offset 0x%X beyond addr_bits %d", who, off, r.AddrBits)
		}
		if o, ok := words[off]; ok {
			return fmt.Errorf("%s: offset 0x%X already used by %s", who, off, o)
		}
		words[off] = who
		return nil
	}
	checkAccess := func(who, a string) error {
		switch a {
		case "ro", "rw", "wo":
			return nil
		}
		return fmt.Errorf("%s: access %q (want ro, rw or wo)", who, a)
	}
	checkFields := func(who string, fs []regField) error {
		var used uint64
		for _, f := range fs {
			if !snakeRe.MatchString(f.Name) {
				return fmt.Errorf("%s: field name %q is not snake_case", who, f.Name)
			}
			if f.Width < 1 || f.LSB < 0 || f.LSB+f.Width > r.WordBits {
				return fmt.Errorf("%s.%s: bits %d+%d outside the word", who, f.Name, f.LSB, f.Width)
			}
			m := (uint64(1)<<uint(f.Width) - 1) << uint(f.LSB)
			if used&m != 0 {
				return fmt.Errorf("%s.%s overlaps another field", who, f.Name)
			}
			used |= m
		}
		return nil
	}
	for _, g := range r.Registers {
		if err := taken(g.Name); err != nil {
			return err
		}
		if err := checkAccess(g.Name, g.Access); err != nil {
			return err
		}
		if err := claim(g.Offset.v, g.Name); err != nil {
			return err
		}
		if g.Reset != nil && g.Reset.v >= 1<<uint(r.WordBits) {
			return fmt.Errorf("%s: reset wider than a word", g.Name)
		}
		if err := checkFields(g.Name, g.Fields); err != nil {
			return err
		}
	}
	for _, a := range r.Arrays {
		if err := taken(a.Name); err != nil {
			return err
		}
		if err := checkAccess(a.Name, a.Access); err != nil {
			return err
		}
		if a.Count < 1 || a.Stride < 4 || a.Stride%4 != 0 {
			return fmt.Errorf("%s: count %d, stride %d", a.Name, a.Count, a.Stride)
		}
		for i := 0; i < a.Count; i++ {
			if err := claim(a.Offset.v+uint64(i*a.Stride), fmt.Sprintf("%s[%d]", a.Name, i)); err != nil {
				return err
			}
		}
		if err := checkFields(a.Name, a.Fields); err != nil {
			return err
		}
	}
	return nil
}

func (r *regSpec) files() ([]outFile, error) {
	goSrc, err := r.genGo()
	if err != nil {
		return nil, err
	}
	return []outFile{
		{path: r.Outputs.Go.Path, content: goSrc},
		{path: r.Outputs.Verilog.Path, content: r.genVerilog()},
		{path: r.Outputs.Markdown.Path, content: r.genMarkdown()},
	}, nil
}

func (r *regSpec) sourceLine() string {
	return fmt.Sprintf("Source: %s (%s v%d). Regenerate: go run ./tools/hwgen", r.src, r.Title, r.Version)
}

func fieldMask(f regField) uint64 { return (uint64(1)<<uint(f.Width) - 1) << uint(f.LSB) }

// ---- Go ----

func (r *regSpec) genGo() ([]byte, error) {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("// %s\n// %s\n\n", genHeader, r.sourceLine())
	p("%s", goComment(fmt.Sprintf("Package %s is the %s v%d: byte offsets of the 32-bit registers of the FPGA engine, their fields (Shift, Mask) and register arrays (Base, Count, Stride). %s", r.Outputs.Go.Package, r.Title, r.Version, r.Doc), ""))
	p("package %s\n\n", r.Outputs.Go.Package)

	p("// Version of the register map description (hw/registers.json).\nconst MapVersion = %d\n\n", r.Version)
	if len(r.Constants) > 0 {
		p("const (\n")
		for _, c := range r.Constants {
			p("%s", goComment(c.Doc, "\t"))
			p("\t%s = %s\n", goName(c.Name), formatNumber(c.Value, "0x%08X"))
		}
		p(")\n\n")
	}
	p("// Register byte offsets.\nconst (\n")
	for _, g := range r.Registers {
		p("%s", goComment(fmt.Sprintf("%s (%s): %s", g.Name, g.Access, g.Doc), "\t"))
		p("\t%s = 0x%03X\n", goName(g.Name), g.Offset.v)
	}
	p(")\n\n")
	p("// Reset values of the registers that have a plain one.\nconst (\n")
	for _, g := range r.Registers {
		if g.Reset != nil {
			p("\t%s = 0x%08X\n", goName(g.Name, "reset"), g.Reset.v)
		}
	}
	p(")\n\n")
	p("// Fields: value = (word & Mask) >> Shift.\nconst (\n")
	fields := func(owner string, fs []regField) {
		for _, f := range fs {
			p("%s", goComment(fmt.Sprintf("%s.%s: %s", owner, f.Name, f.Doc), "\t"))
			p("\t%s = %d\n", goName(owner, f.Name, "shift"), f.LSB)
			p("\t%s = 0x%08X\n", goName(owner, f.Name, "mask"), fieldMask(f))
		}
	}
	for _, g := range r.Registers {
		fields(g.Name, g.Fields)
	}
	for _, a := range r.Arrays {
		fields(a.Name, a.Fields)
	}
	p(")\n\n")
	p("// Register arrays: element i is at Base + i*Stride.\nconst (\n")
	for _, a := range r.Arrays {
		p("%s", goComment(fmt.Sprintf("%s (%s): %s", a.Name, a.Access, a.Doc), "\t"))
		p("\t%s = 0x%03X\n", goName(a.Name, "base"), a.Offset.v)
		p("\t%s = %d\n", goName(a.Name, "count"), a.Count)
		p("\t%s = %d\n", goName(a.Name, "stride"), a.Stride)
	}
	p(")\n\n")
	p("// Size is the byte size of the register block (2^addr_bits).\nconst Size = 0x%X\n", uint64(1)<<uint(r.AddrBits))
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("generated Go does not parse: %v\n%s", err, b.Bytes())
	}
	return out, nil
}

// ---- Verilog ----

func (r *regSpec) genVerilog() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	vComment := func(doc string) {
		for _, l := range wrap(doc, 72) {
			p("// %s\n", l)
		}
	}
	pre := cName(r.Prefix)
	ab := r.AddrBits
	p("// %s\n// %s\n//\n", genHeader, r.sourceLine())
	p("// Verilog-2005. `include this file inside a module body: localparams are\n")
	p("// module-scoped (no include guard, as hw/gen/exo_wire.vh).\n//\n")
	vComment(r.Doc)
	p("\n/* verilator lint_off UNUSEDPARAM */\n\n")
	p("localparam %s_ADDR_BITS = %d;\n", pre, ab)
	p("localparam %s_MAP_VERSION = %d;\n\n", pre, r.Version)
	for _, c := range r.Constants {
		vComment(c.Doc)
		if c.Value.hex {
			p("localparam [%d:0] %s = %d'h%08X;\n", r.WordBits-1, cName(pre, c.Name), r.WordBits, c.Value.v)
		} else {
			p("localparam %s = %d;\n", cName(pre, c.Name), c.Value.v)
		}
	}
	p("\n// Register byte offsets (%s).\n", strings.ToLower(pre))
	for _, g := range r.Registers {
		p("localparam [%d:0] %s = %d'h%03X; // %s\n", ab-1, cName(pre, g.Name), ab, g.Offset.v, g.Access)
		if g.Reset != nil {
			p("localparam [%d:0] %s = %d'h%08X;\n", r.WordBits-1, cName(pre, g.Name, "reset"), r.WordBits, g.Reset.v)
		}
		for _, f := range g.Fields {
			p("localparam %s = %d;\n", cName(pre, g.Name, f.Name, "lsb"), f.LSB)
			p("localparam %s = %d;\n", cName(pre, g.Name, f.Name, "width"), f.Width)
		}
	}
	p("\n// Register arrays: element i at BASE + i*STRIDE.\n")
	for _, a := range r.Arrays {
		p("localparam [%d:0] %s = %d'h%03X; // %s\n", ab-1, cName(pre, a.Name, "base"), ab, a.Offset.v, a.Access)
		p("localparam %s = %d;\n", cName(pre, a.Name, "count"), a.Count)
		p("localparam %s = %d;\n", cName(pre, a.Name, "stride"), a.Stride)
		for _, f := range a.Fields {
			p("localparam %s = %d;\n", cName(pre, a.Name, f.Name, "lsb"), f.LSB)
			p("localparam %s = %d;\n", cName(pre, a.Name, f.Name, "width"), f.Width)
		}
	}
	p("\n/* verilator lint_on UNUSEDPARAM */\n")
	return b.Bytes()
}

// ---- Markdown ----

func (r *regSpec) genMarkdown() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("<!-- %s -->\n<!-- %s -->\n\n", genHeader, r.sourceLine())
	p("# %s v%d (generated)\n\n%s\n\n", r.Title, r.Version, r.Doc)
	p("Twins: Go `%s` (package `%s`), Verilog `%s` (`%s_*`).\n\n", r.Outputs.Go.Path, r.Outputs.Go.Package, r.Outputs.Verilog.Path, cName(r.Prefix))
	p("Block size: 0x%X bytes (%d address bits), %d-bit words.\n\n", uint64(1)<<uint(r.AddrBits), r.AddrBits, r.WordBits)
	if len(r.Constants) > 0 {
		p("## Constants\n\n| name | value | meaning |\n|---|---|---|\n")
		for _, c := range r.Constants {
			p("| `%s` | %s | %s |\n", c.Name, formatNumber(c.Value, "0x%08X"), mdCell(c.Doc))
		}
		p("\n")
	}
	p("## Registers\n\n| offset | name | access | reset | meaning |\n|---:|---|---|---|---|\n")
	for _, g := range r.Registers {
		reset := "—"
		if g.Reset != nil {
			reset = fmt.Sprintf("0x%08X", g.Reset.v)
		}
		p("| 0x%03X | `%s` | %s | %s | %s |\n", g.Offset.v, g.Name, g.Access, reset, mdCell(g.Doc))
	}
	p("\n## Register arrays\n\n| base | name | count | stride | access | element i |\n|---:|---|---:|---:|---|---|\n")
	for _, a := range r.Arrays {
		last := a.Offset.v + uint64((a.Count-1)*a.Stride)
		p("| 0x%03X | `%s` | %d | %d | %s | 0x%03X + %d·i (last 0x%03X): %s |\n", a.Offset.v, a.Name, a.Count, a.Stride, a.Access, a.Offset.v, a.Stride, last, mdCell(a.Doc))
	}
	var any bool
	for _, g := range r.Registers {
		if len(g.Fields) > 0 {
			any = true
		}
	}
	if any {
		p("\n## Fields\n\n| register | field | bits | meaning |\n|---|---|---|---|\n")
		for _, g := range r.Registers {
			for _, f := range g.Fields {
				bits := fmt.Sprintf("%d", f.LSB)
				if f.Width > 1 {
					bits = fmt.Sprintf("%d:%d", f.LSB+f.Width-1, f.LSB)
				}
				p("| `%s` | `%s` | %s | %s |\n", g.Name, f.Name, bits, mdCell(f.Doc))
			}
		}
	}
	return b.Bytes()
}
