package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// wireSpec is hw/wire.json: a frame layout (fixed header plus variable
// sections), named constants and enums (the reason codes).
type wireSpec struct {
	Kind          string      `json:"kind"`
	Name          string      `json:"name"`
	Prefix        string      `json:"prefix"` // C/Verilog name prefix, e.g. "exo" -> EXO_OFF_SEQ
	Title         string      `json:"title"`
	LayoutVersion int         `json:"layout_version"`
	Doc           string      `json:"doc"`
	Outputs       wireOutputs `json:"outputs"`
	Constants     []constant  `json:"constants"`
	MACs          []macConst  `json:"macs"`
	Header        []field     `json:"header"`
	Sections      []section   `json:"sections"`
	Enums         []enum      `json:"enums"`

	src string // input path relative to the root, for "Source:" lines
}

type wireOutputs struct {
	Go struct {
		Path    string `json:"path"`
		Package string `json:"package"`
	} `json:"go"`
	C struct {
		Path string `json:"path"`
	} `json:"c"`
	Verilog struct {
		Path string `json:"path"`
	} `json:"verilog"`
	Markdown struct {
		Path   string   `json:"path"`
		Splice []string `json:"splice"` // hand-written files with a generated block
	} `json:"markdown"`
}

// number is a non-negative integer written in JSON either as a number or
// as a string with a base prefix ("0x88B5"); hex remembers which, so that
// the generated twins print it the same way.
type number struct {
	v   uint64
	hex bool
}

func (n *number) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return fmt.Errorf("bad number %q", s)
		}
		n.v = v
		n.hex = strings.HasPrefix(strings.ToLower(s), "0x")
		return nil
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("bad number %s", b)
	}
	n.v = v
	return nil
}

type constant struct {
	Name  string `json:"name"`
	Value number `json:"value"`
	Bits  int    `json:"bits"` // >0: a sized value (Verilog [bits-1:0]); 0: a plain integer
	Doc   string `json:"doc"`
}

type macConst struct {
	Name  string `json:"name"`
	Value string `json:"value"` // "ff:ff:ff:ff:ff:ff"
	Doc   string `json:"doc"`

	bytes [6]byte
}

type field struct {
	Name   string `json:"name"`
	Offset int    `json:"offset"`
	Size   int    `json:"size"`
	Doc    string `json:"doc"`
}

// section is a variable-length part after the fixed header; sections
// follow each other in order, each as long as its length field says.
type section struct {
	Name        string `json:"name"`
	LengthField string `json:"length_field"`
	Doc         string `json:"doc"`
}

type enum struct {
	Name   string      `json:"name"`
	Bits   int         `json:"bits"`
	Doc    string      `json:"doc"`
	Values []enumValue `json:"values"`
}

type enumValue struct {
	Name     string `json:"name"` // UPPER_SNAKE, identical (modulo case) in every twin
	Value    int    `json:"value"`
	SlowPath bool   `json:"slow_path"`
	Doc      string `json:"doc"`
}

var (
	snakeRe = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	upperRe = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)
	macRe   = regexp.MustCompile(`^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$`)
)

// peekKind returns the "kind" of an input file.
func peekKind(data []byte) (string, error) {
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(data, &k); err != nil {
		return "", err
	}
	if k.Kind == "" {
		return "", errors.New(`missing "kind"`)
	}
	return k.Kind, nil
}

func loadWire(data []byte, src string) (spec, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireSpec
	if err := dec.Decode(&w); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	w.src = src
	if err := w.validate(); err != nil {
		return nil, err
	}
	w.sort()
	return &w, nil
}

// validate checks everything a hand edit of the JSON can get wrong, so
// that the generated twins are always consistent.
func (w *wireSpec) validate() error {
	if !snakeRe.MatchString(w.Prefix) {
		return fmt.Errorf("prefix %q: want lower_snake", w.Prefix)
	}
	if w.LayoutVersion <= 0 {
		return errors.New("layout_version must be > 0")
	}
	o := w.Outputs
	if o.Go.Path == "" || o.Go.Package == "" || o.C.Path == "" || o.Verilog.Path == "" || o.Markdown.Path == "" {
		return errors.New("outputs: go (path, package), c, verilog and markdown paths are required")
	}

	names := map[string]string{} // every generated name must be unique
	claim := func(name, what string) error {
		if prev, ok := names[name]; ok {
			return fmt.Errorf("%s: name %q already used by %s", what, name, prev)
		}
		names[name] = what
		return nil
	}

	consts := map[string]constant{}
	for _, c := range w.Constants {
		if !snakeRe.MatchString(c.Name) {
			return fmt.Errorf("constant %q: want lower_snake", c.Name)
		}
		if c.Doc == "" {
			return fmt.Errorf("constant %q: missing doc", c.Name)
		}
		if c.Bits < 0 || c.Bits > 64 || (c.Bits > 0 && c.Bits < 64 && c.Value.v>>uint(c.Bits) != 0) {
			return fmt.Errorf("constant %q: value %d does not fit in %d bits", c.Name, c.Value.v, c.Bits)
		}
		if c.Bits == 0 && c.Value.v > 1<<31-1 {
			return fmt.Errorf("constant %q: unsized value %d too large for a Verilog integer; give bits", c.Name, c.Value.v)
		}
		if err := claim(c.Name, "constant "+c.Name); err != nil {
			return err
		}
		consts[c.Name] = c
	}
	for i := range w.MACs {
		m := &w.MACs[i]
		if !snakeRe.MatchString(m.Name) || m.Doc == "" {
			return fmt.Errorf("mac %q: want lower_snake name and a doc", m.Name)
		}
		if !macRe.MatchString(m.Value) {
			return fmt.Errorf("mac %q: bad value %q", m.Name, m.Value)
		}
		for j := range m.bytes {
			b, _ := strconv.ParseUint(m.Value[3*j:3*j+2], 16, 8)
			m.bytes[j] = byte(b)
		}
		if err := claim(m.Name, "mac "+m.Name); err != nil {
			return err
		}
	}

	hl, ok := consts["header_len"]
	if !ok {
		return errors.New(`constant "header_len" is required`)
	}
	fields := append([]field(nil), w.Header...)
	sort.SliceStable(fields, func(i, j int) bool { return fields[i].Offset < fields[j].Offset })
	next := 0
	byName := map[string]field{}
	for _, f := range fields {
		if !snakeRe.MatchString(f.Name) || f.Doc == "" {
			return fmt.Errorf("field %q: want lower_snake name and a doc", f.Name)
		}
		switch f.Size {
		case 1, 2, 4, 8:
		default:
			return fmt.Errorf("field %q: size %d not in {1,2,4,8}", f.Name, f.Size)
		}
		if f.Offset != next {
			return fmt.Errorf("field %q: offset %d, want %d (fields must tile the header with no gap or overlap)", f.Name, f.Offset, next)
		}
		if f.Offset%f.Size != 0 {
			return fmt.Errorf("field %q: offset %d not aligned to its size %d", f.Name, f.Offset, f.Size)
		}
		if _, dup := byName[f.Name]; dup {
			return fmt.Errorf("field %q twice", f.Name)
		}
		byName[f.Name] = f
		next += f.Size
	}
	if uint64(next) != hl.Value.v {
		return fmt.Errorf("header fields end at %d, header_len is %d", next, hl.Value.v)
	}
	for _, s := range w.Sections {
		if !snakeRe.MatchString(s.Name) || s.Doc == "" {
			return fmt.Errorf("section %q: want lower_snake name and a doc", s.Name)
		}
		if _, dup := byName[s.Name]; dup {
			return fmt.Errorf("section %q: name clashes with a field", s.Name)
		}
		if _, ok := byName[s.LengthField]; !ok {
			return fmt.Errorf("section %q: length_field %q is not a header field", s.Name, s.LengthField)
		}
		byName[s.Name] = field{}
	}

	for _, e := range w.Enums {
		if !snakeRe.MatchString(e.Name) || e.Doc == "" {
			return fmt.Errorf("enum %q: want lower_snake name and a doc", e.Name)
		}
		if e.Bits <= 0 || e.Bits > 8 {
			return fmt.Errorf("enum %q: bits %d not in 1..8", e.Name, e.Bits)
		}
		if len(e.Values) == 0 || len(e.Values) > 64 {
			return fmt.Errorf("enum %q: %d values, want 1..64", e.Name, len(e.Values))
		}
		seen := map[int]string{}
		for _, v := range e.Values {
			if !upperRe.MatchString(v.Name) || v.Doc == "" {
				return fmt.Errorf("enum %q value %q: want UPPER_SNAKE name and a doc", e.Name, v.Name)
			}
			if v.Value < 0 || v.Value >= len(e.Values) || v.Value >= 1<<uint(e.Bits) {
				return fmt.Errorf("enum %q value %s = %d: values must be dense 0..%d", e.Name, v.Name, v.Value, len(e.Values)-1)
			}
			if prev, dup := seen[v.Value]; dup {
				return fmt.Errorf("enum %q: %s and %s both = %d", e.Name, prev, v.Name, v.Value)
			}
			seen[v.Value] = v.Name
			if err := claim(e.Name+"_"+strings.ToLower(v.Name), "enum "+e.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// sort puts every list in its canonical order, so that the twins do not
// depend on the order of the JSON.
func (w *wireSpec) sort() {
	sort.SliceStable(w.Constants, func(i, j int) bool { return w.Constants[i].Name < w.Constants[j].Name })
	sort.SliceStable(w.MACs, func(i, j int) bool { return w.MACs[i].Name < w.MACs[j].Name })
	sort.SliceStable(w.Header, func(i, j int) bool { return w.Header[i].Offset < w.Header[j].Offset })
	sort.SliceStable(w.Enums, func(i, j int) bool { return w.Enums[i].Name < w.Enums[j].Name })
	for _, e := range w.Enums {
		sort.SliceStable(e.Values, func(i, j int) bool { return e.Values[i].Value < e.Values[j].Value })
	}
	// Sections keep their order: it is the order on the wire.
}

func (w *wireSpec) constant(name string) constant {
	for _, c := range w.Constants {
		if c.Name == name {
			return c
		}
	}
	panic("hwgen: no constant " + name) // validate guarantees the ones we ask for
}

func (w *wireSpec) files() ([]outFile, error) {
	goSrc, err := w.genGo()
	if err != nil {
		return nil, err
	}
	md := w.genMarkdown(2)
	files := []outFile{
		{path: w.Outputs.Go.Path, content: goSrc},
		{path: w.Outputs.C.Path, content: w.genC()},
		{path: w.Outputs.Verilog.Path, content: w.genVerilog()},
		{path: w.Outputs.Markdown.Path, content: md},
	}
	for _, p := range w.Outputs.Markdown.Splice {
		files = append(files, outFile{path: p, splice: &spliceRegion{
			id:   w.Outputs.Markdown.Path,
			body: w.genMarkdownBody(3),
		}})
	}
	return files, nil
}

// slowPathMask returns the bit mask (bit i = value i) of slow-path values.
func (e enum) slowPathMask() uint64 {
	var m uint64
	for _, v := range e.Values {
		if v.SlowPath {
			m |= 1 << uint(v.Value)
		}
	}
	return m
}

// offsetExpr describes where section i starts, e.g. "32+hist_len".
func (w *wireSpec) sectionOffset(i int) string {
	s := strconv.FormatUint(w.constant("header_len").Value.v, 10)
	for _, prev := range w.Sections[:i] {
		s += "+" + prev.LengthField
	}
	return s
}
