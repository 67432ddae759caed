package main

import (
	"bytes"
	"fmt"
	"go/format"
	"strconv"
	"strings"
)

// The four twins of hw/wire.json. Each emitter walks the (sorted) spec in
// the same order: constants, MAC constants, header fields, sections,
// enums.

func (w *wireSpec) sourceLine() string {
	return fmt.Sprintf("Source: %s (%s v%d). Regenerate: go generate ./exo", w.src, w.Title, w.LayoutVersion)
}

// ---- Go ----

func (w *wireSpec) genGo() ([]byte, error) {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("// %s\n// %s\n\n", genHeader, w.sourceLine())
	p("package %s\n\n", w.Outputs.Go.Package)
	if len(w.Enums) > 0 {
		p("import \"strconv\"\n\n")
	}

	p("// Constants of the %s v%d.\n", w.Title, w.LayoutVersion)
	p("const (\n")
	for _, c := range w.Constants {
		p("%s", goComment(c.Doc, "\t"))
		p("\t%s = %s\n", goName(c.Name), formatNumber(c.Value, "0x%X"))
	}
	for _, m := range w.MACs {
		p("%s", goComment(m.Doc, "\t"))
		p("\t%s = %q\n", goName(m.Name), strings.ToLower(m.Value))
	}
	p(")\n\n")

	p("// Offsets (Off*) and sizes (Size*) of the fixed header fields, in bytes\n")
	p("// from the first byte after the Ethernet header. Multi-byte fields are\n")
	p("// big-endian.\n")
	p("const (\n")
	for _, f := range w.Header {
		p("%s", goComment(f.Name+": "+f.Doc, "\t"))
		p("\t%s = %d\n", goName("off", f.Name), f.Offset)
		p("\t%s = %d\n", goName("size", f.Name), f.Size)
	}
	p(")\n\n")

	if len(w.Sections) > 0 {
		s := w.Sections[0]
		p("%s", goComment(fmt.Sprintf("%s starts the variable part: %s Its length is the %s field; the sections that follow it (%s) start at variable offsets.",
			goName("off", s.Name), s.Doc, s.LengthField, sectionNames(w.Sections[1:])), ""))
		p("const %s = %s\n\n", goName("off", s.Name), goName("header_len"))
	}

	for _, e := range w.Enums {
		typ := goName(e.Name)
		num := "Num" + typ + "s"
		p("%s", goComment(fmt.Sprintf("%s is the enum %q of %s. %s", typ, e.Name, w.src, e.Doc), ""))
		p("//\n// The names are identical (modulo case) in C (enum %s, %s_*) and\n// Verilog (%s_*).\n",
			cLower(w.Prefix, e.Name), cName(w.Prefix, e.Name), cName(w.Prefix, e.Name))
		p("type %s uint8\n\n", typ)
		p("// %s values.\nconst (\n", typ)
		for _, v := range e.Values {
			p("%s", goComment(v.Doc, "\t"))
			p("\t%s %s = %d\n", goName(e.Name, v.Name), typ, v.Value)
		}
		p(")\n\n")
		p("// %s is the number of %s values; valid values are 0..%s-1.\n", num, typ, num)
		p("const %s = %d\n\n", num, len(e.Values))
		p("var _%s_name = [%s]string{\n", typ, num)
		for _, v := range e.Values {
			p("\t%s: %q,\n", goName(e.Name, v.Name), v.Name)
		}
		p("}\n\n")
		p("var _%s_doc = [%s]string{\n", typ, num)
		for _, v := range e.Values {
			p("\t%s: %q,\n", goName(e.Name, v.Name), v.Doc)
		}
		p("}\n\n")
		p("// Bit i set: %s i is a slow-path verdict.\n", typ)
		p("const _%s_slowPath uint64 = %#x\n\n", typ, e.slowPathMask())
		p("// String returns the name of r as written in %s, e.g. %q,\n// or %q for an undefined value.\n",
			w.src, e.Values[len(e.Values)-1].Name, typ+"(255)")
		p("func (r %s) String() string {\n", typ)
		p("\tif r < %s {\n\t\treturn _%s_name[r]\n\t}\n", num, typ)
		p("\treturn \"%s(\" + strconv.Itoa(int(r)) + \")\"\n}\n\n", typ)
		p("// SlowPath reports whether r hands the frame to the Go control plane\n// (rather than accepting or dropping it).\n")
		p("func (r %s) SlowPath() bool {\n\treturn r < %s && _%s_slowPath>>r&1 != 0\n}\n\n", typ, num, typ)
		p("// Doc returns the one-line description of r, or \"\" for an undefined value.\n")
		p("func (r %s) Doc() string {\n", typ)
		p("\tif r < %s {\n\t\treturn _%s_doc[r]\n\t}\n\treturn \"\"\n}\n\n", num, typ)
	}

	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("generated Go does not parse: %v\n%s", err, b.Bytes())
	}
	return out, nil
}

func goComment(doc, indent string) string {
	var b strings.Builder
	for _, line := range wrap(doc, 72) {
		b.WriteString(indent + "// " + line + "\n")
	}
	return b.String()
}

func sectionNames(ss []section) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// formatNumber prints n in hex (with the given hex format) if the JSON
// wrote it in hex, else in decimal.
func formatNumber(n number, hexFormat string) string {
	if n.hex {
		return fmt.Sprintf(hexFormat, n.v)
	}
	return strconv.FormatUint(n.v, 10)
}

// wrap splits s into lines of at most width runes (longer words stay whole).
func wrap(s string, width int) []string {
	var lines []string
	var cur string
	for _, word := range strings.Fields(s) {
		switch {
		case cur == "":
			cur = word
		case len(cur)+1+len(word) <= width:
			cur += " " + word
		default:
			lines = append(lines, cur)
			cur = word
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// ---- C ----

func cComment(doc, indent string) string {
	doc = strings.ReplaceAll(doc, "*/", "* /")
	lines := wrap(doc, 72)
	if len(lines) == 1 {
		return indent + "/* " + lines[0] + " */\n"
	}
	var b strings.Builder
	b.WriteString(indent + "/*\n")
	for _, l := range lines {
		b.WriteString(indent + " * " + l + "\n")
	}
	b.WriteString(indent + " */\n")
	return b.String()
}

func (w *wireSpec) genC() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	guard := cName(w.Name, "h")

	p("/* %s */\n/* %s */\n\n", genHeader, w.sourceLine())
	p("#ifndef %s\n#define %s\n\n", guard, guard)
	p("%s\n", cComment(w.Doc, ""))

	for _, c := range w.Constants {
		p("%s", cComment(c.Doc, ""))
		v := formatNumber(c.Value, "0x%X")
		if c.Value.v > 1<<31-1 {
			v += "ULL"
		}
		p("#define %s %s\n", cName(w.Prefix, c.Name), v)
	}
	for _, m := range w.MACs {
		p("%s", cComment(m.Doc+" Initializer for a 6-byte array.", ""))
		parts := make([]string, len(m.bytes))
		for i, x := range m.bytes {
			parts[i] = fmt.Sprintf("0x%02x", x)
		}
		p("#define %s { %s }\n", cName(w.Prefix, m.Name), strings.Join(parts, ", "))
	}
	p("\n")

	p("/* Fixed header fields: %s_OFF_x is the byte offset after the Ethernet\n", cName(w.Prefix))
	p(" * header, %s_SIZE_x the size in bytes. Multi-byte fields are big-endian. */\n", cName(w.Prefix))
	for _, f := range w.Header {
		p("%s", cComment(f.Name+": "+f.Doc, ""))
		p("#define %s %d\n", cName(w.Prefix, "off", f.Name), f.Offset)
		p("#define %s %d\n", cName(w.Prefix, "size", f.Name), f.Size)
	}
	if len(w.Sections) > 0 {
		s := w.Sections[0]
		p("%s", cComment(s.Name+": "+s.Doc+" Length: field "+s.LengthField+".", ""))
		p("#define %s %d\n", cName(w.Prefix, "off", s.Name), w.constant("header_len").Value.v)
	}
	p("\n")

	for _, e := range w.Enums {
		p("%s", cComment(e.Doc, ""))
		p("enum %s {\n", cLower(w.Prefix, e.Name))
		for _, v := range e.Values {
			p("%s", cComment(v.Doc, "\t"))
			p("\t%s = %d,\n", cName(w.Prefix, e.Name, v.Name), v.Value)
		}
		p("};\n\n")
		num := cName(w.Prefix, "num", e.Name+"s")
		mask := cName(w.Prefix, e.Name, "slow_path_mask")
		p("#define %s %d\n\n", num, len(e.Values))
		p("/* Bit i set: %s i is a slow-path verdict (handed to the control plane). */\n", e.Name)
		p("#define %s 0x%016XULL\n\n", mask, e.slowPathMask())
		p("static inline int %s_slow_path(unsigned int r)\n{\n", cLower(w.Prefix, e.Name))
		p("\treturn r < %s && ((%s >> r) & 1ULL) != 0;\n}\n\n", num, mask)
		p("#ifdef %s\n", cName(w.Name, "want_names"))
		p("/* Names, identical to Go's %s.String(); define %s to get them. */\n", goName(e.Name), cName(w.Name, "want_names"))
		p("static const char *const %s_names[%s] = {\n", cLower(w.Prefix, e.Name), num)
		for _, v := range e.Values {
			p("\t[%s] = %q,\n", cName(w.Prefix, e.Name, v.Name), v.Name)
		}
		p("};\n#endif\n\n")
	}
	p("#endif /* %s */\n", guard)
	return b.Bytes()
}

// ---- Verilog ----

func (w *wireSpec) genVerilog() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	vComment := func(doc string) {
		for _, l := range wrap(doc, 72) {
			p("// %s\n", l)
		}
	}

	p("// %s\n// %s\n//\n", genHeader, w.sourceLine())
	p("// Verilog-2005. `include this file inside a module body: localparams are\n")
	p("// module-scoped. There is no include guard on purpose, so that every\n")
	p("// module that includes it gets its own copy.\n//\n")
	vComment(w.Doc)
	p("\n/* verilator lint_off UNUSEDPARAM */\n\n")

	for _, c := range w.Constants {
		vComment(c.Doc)
		if c.Bits > 0 {
			lit := fmt.Sprintf("%d'd%d", c.Bits, c.Value.v)
			if c.Value.v > 0 && c.Value.hex {
				lit = fmt.Sprintf("%d'h%X", c.Bits, c.Value.v)
			}
			p("localparam [%d:0] %s = %s;\n", c.Bits-1, cName(w.Prefix, c.Name), lit)
		} else {
			p("localparam %s = %d;\n", cName(w.Prefix, c.Name), c.Value.v)
		}
	}
	for _, m := range w.MACs {
		vComment(m.Doc)
		p("localparam [47:0] %s = 48'h%X;\n", cName(w.Prefix, m.Name), m.bytes[:])
	}
	p("\n// Fixed header fields: %s_OFF_x is the byte offset after the Ethernet\n", cName(w.Prefix))
	p("// header, %s_SIZE_x the size in bytes. Multi-byte fields are big-endian.\n", cName(w.Prefix))
	for _, f := range w.Header {
		vComment(f.Name + ": " + f.Doc)
		p("localparam %s = %d;\n", cName(w.Prefix, "off", f.Name), f.Offset)
		p("localparam %s = %d;\n", cName(w.Prefix, "size", f.Name), f.Size)
	}
	if len(w.Sections) > 0 {
		s := w.Sections[0]
		vComment(s.Name + ": " + s.Doc + " Length: field " + s.LengthField + ".")
		p("localparam %s = %d;\n", cName(w.Prefix, "off", s.Name), w.constant("header_len").Value.v)
	}
	p("\n")
	for _, e := range w.Enums {
		vComment(e.Doc)
		for _, v := range e.Values {
			p("localparam [%d:0] %-*s = %d'd%d; // %s\n", e.Bits-1, maxEnumName(w.Prefix, e), cName(w.Prefix, e.Name, v.Name), e.Bits, v.Value, v.Doc)
		}
		n := len(e.Values)
		p("localparam %s = %d;\n", cName(w.Prefix, "num", e.Name+"s"), n)
		p("// Bit i set: %s i is a slow-path verdict (handed to the control plane).\n", e.Name)
		p("localparam [%d:0] %s = %d'h%X;\n\n", n-1, cName(w.Prefix, e.Name, "slow_path_mask"), n, e.slowPathMask())
	}
	p("/* verilator lint_on UNUSEDPARAM */\n")
	return b.Bytes()
}

func maxEnumName(prefix string, e enum) int {
	m := 0
	for _, v := range e.Values {
		m = max(m, len(cName(prefix, e.Name, v.Name)))
	}
	return m
}

// ---- Markdown ----

func mdCell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

func (w *wireSpec) genMarkdown(level int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!-- %s -->\n<!-- %s -->\n\n", genHeader, w.sourceLine())
	fmt.Fprintf(&b, "# %s v%d (generated)\n\n", w.Title, w.LayoutVersion)
	fmt.Fprintf(&b, "%s\n\n", w.Doc)
	b.Write(w.genMarkdownBody(level))
	return b.Bytes()
}

// genMarkdownBody is the part shared by the generated table file and the
// generated block of hand-written docs; level is its heading level.
func (w *wireSpec) genMarkdownBody(level int) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	h := strings.Repeat("#", level)
	pre := cName(w.Prefix)

	p("%s Fields\n\n", h)
	p("Offsets are in bytes from the first byte after the %d-byte Ethernet header;\n", w.constant("eth_header_len").Value.v)
	p("multi-byte fields are big-endian. Go: `Off<Field>`, `Size<Field>`; C and\nVerilog: `%s_OFF_<FIELD>`, `%s_SIZE_<FIELD>`.\n\n", pre, pre)
	p("| offset | size | field | Go offset | C / Verilog offset | meaning |\n")
	p("|---:|---:|---|---|---|---|\n")
	for _, f := range w.Header {
		p("| %d | %d | `%s` | `%s` | `%s` | %s |\n", f.Offset, f.Size, f.Name,
			goName("off", f.Name), cName(w.Prefix, "off", f.Name), mdCell(f.Doc))
	}
	for i, s := range w.Sections {
		goOff, cOff := "-", "-"
		if i == 0 {
			goOff, cOff = "`"+goName("off", s.Name)+"`", "`"+cName(w.Prefix, "off", s.Name)+"`"
		}
		p("| %s | `%s` | `%s` | %s | %s | %s |\n", w.sectionOffset(i), s.LengthField, s.Name, goOff, cOff, mdCell(s.Doc))
	}
	p("\n%s Constants\n\n", h)
	p("| name | value | Go | C / Verilog | meaning |\n|---|---:|---|---|---|\n")
	for _, c := range w.Constants {
		p("| `%s` | %s | `%s` | `%s` | %s |\n", c.Name, formatNumber(c.Value, "0x%X"),
			goName(c.Name), cName(w.Prefix, c.Name), mdCell(c.Doc))
	}
	for _, m := range w.MACs {
		p("| `%s` | %s | `%s` | `%s` | %s |\n", m.Name, strings.ToLower(m.Value),
			goName(m.Name), cName(w.Prefix, m.Name), mdCell(m.Doc))
	}
	for _, e := range w.Enums {
		p("\n%s Enum `%s` (%d bits)\n\n%s\n\n", h, e.Name, e.Bits, mdCell(e.Doc))
		p("Go: `type %s`, `%s<Name>`; C: `enum %s`, `%s_<NAME>`; Verilog: `%s_<NAME>`.\n\n",
			goName(e.Name), goName(e.Name), cLower(w.Prefix, e.Name), cName(w.Prefix, e.Name), cName(w.Prefix, e.Name))
		p("| code | name | path | meaning |\n|---:|---|---|---|\n")
		for _, v := range e.Values {
			path := "drop"
			switch {
			case v.SlowPath:
				path = "**slow path**"
			case v.Value == 0:
				path = "accept"
			}
			p("| %d | `%s` | %s | %s |\n", v.Value, v.Name, path, mdCell(v.Doc))
		}
	}
	return b.Bytes()
}
