package main

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/exo-rack/exo/exo"
)

// The hex form: vectors.hex holds one 64-bit word per line (16 lower-case
// hex digits, $readmemh format), RecordWords words per vector. A byte
// string is packed most significant byte first: byte k of a word is bits
// [63-8k : 56-8k], so the hex digits read in wire order and header words
// read as the big-endian fields they hold. See docs/vectors.md.

const (
	hexWordBits     = 64
	hexRecordWords  = 64
	hexFrameWord    = 32                                  // first word of the frame bytes
	hexFrameMax     = (hexRecordWords - hexFrameWord) * 8 // 256 bytes
	hexHistoryMax   = 16                                  // history slots stored per state
	hexStateInWord  = 8
	hexStateOutWord = 16
	hexStateWords   = 8
	// hexMagic opens every record. Format 2 ("EXOVEC02") added epoch_start
	// in word 7 of the state block, reserved (0) in format 1 ("EXOVEC01").
	// Format 3 ("EXOVEC03") checks the frame tag: every frame carries its
	// SipHash-2-4 tag under the key in words 4-5 (reserved, 0, in format
	// 2), except the BAD_TAG cases; vflags bit 3 says whether it does.
	// Nothing else moved. Format 4 ("EXOVEC04") has two key slots: the
	// frame's key phase bit (flags 0x4000) picks one; slot 1's key is in
	// words 6-7 (reserved, 0, before) and vflags bit 4 says whether the
	// record's host holds it.
	hexMagic        = 0x45584f5645433034 // "EXOVEC04"
	hexFormat       = "exo-vectors-hex/4"
	hexNoStream     = 0xFFFF
	hexFlagChained  = 1 << 0 // state in = state out of the record before (stream step > 0)
	hexFlagPadded   = 1 << 1 // decoded, and frame_len > exo_len (padding or trailer present)
	hexFlagStream   = 1 << 2 // record is a stream step
	hexFlagTagValid = 1 << 3 // decoded, and the tag field holds the frame's tag under the key of its phase's slot, which holds a key
	hexFlagKey1     = 1 << 4 // key slot 1 holds the key of words 6-7 (else it is empty: a phase-1 frame is BAD_TAG)
	hexKeyWord      = 4      // words 4 and 5: the slot-0 tag key, bytes 0..7 and 8..15, MSB first
	hexKey1Word     = 6      // words 6 and 7: the slot-1 tag key, likewise
)

// hexField is one field of a record: bits [MSB:LSB] of word Word.
type hexField struct {
	Name string
	Word int
	MSB  int
	LSB  int
	Doc  string
}

// stateFields are relative to the first word of a state block.
var stateFields = []hexField{
	{"group", 0, 63, 48, "group id"},
	{"hosts", 0, 47, 32, "roster size n"},
	{"epoch", 0, 31, 0, "epoch"},
	{"halted", 1, 63, 56, "1 if halted, else 0"},
	{"h", 1, 55, 48, "history length floor(n/2) (redundant: hosts/2)"},
	{"window", 2, 63, 0, "SeqWindow"},
	{"append", 3, 63, 0, "append pointer"},
	{"agreed", 4, 63, 0, "agreement pointer"},
	{"hist0_7", 5, 63, 0, "history slots 0..7, slot 0 (most recent) in bits 63:56; 0xFF = none"},
	{"hist8_15", 6, 63, 0, "history slots 8..15, slot 8 in bits 63:56; 0xFF = none"},
	{"epoch_start", 7, 63, 0, "append pointer when the epoch began: appending s agrees s-h only if s >= epoch_start && s-epoch_start >= h"},
}

// hexFields is the whole record layout (absolute word numbers).
func hexFields() []hexField {
	f := []hexField{
		{"magic", 0, 63, 0, "0x45584f5645433034 (\"EXOVEC04\")"},
		{"index", 1, 63, 32, "record number, 0-based"},
		{"stream", 1, 31, 16, "stream number, 0xFFFF for a standalone vector"},
		{"step", 1, 15, 0, "step in the stream (0 for standalone)"},
		{"frame_len", 2, 63, 48, "bytes of frame at word 32.. (after the Ethernet header, padding included)"},
		{"exo_len", 2, 47, 32, "32+hist_len+payload_len if the codec accepted the frame, else 0"},
		{"vflags", 2, 31, 16, "bit0 chained, bit1 padded, bit2 stream step, bit3 tag valid, bit4 key slot 1 valid"},
		{"reason", 3, 63, 56, "expected Reason code"},
		{"stage", 3, 55, 48, "0 accept, 1 codec (UnmarshalBinary), 2 state (group, tag, Classify)"},
		{"slow_path", 3, 47, 40, "1 if the reason is a slow-path verdict"},
		{"tag_key_0_7", hexKeyWord, 63, 0, "tag key bytes 0..7, byte 0 in bits 63:56 (SipHash k0 = their little-endian uint64)"},
		{"tag_key_8_15", hexKeyWord + 1, 63, 0, "tag key bytes 8..15, byte 8 in bits 63:56 (SipHash k1 = their little-endian uint64)"},
		{"tag_key1_0_7", hexKey1Word, 63, 0, "slot-1 tag key (key phase 1) bytes 0..7, byte 0 in bits 63:56"},
		{"tag_key1_8_15", hexKey1Word + 1, 63, 0, "slot-1 tag key bytes 8..15, byte 8 in bits 63:56"},
	}
	for _, b := range []struct {
		prefix string
		base   int
	}{{"in_", hexStateInWord}, {"out_", hexStateOutWord}} {
		for _, sf := range stateFields {
			sf.Name = b.prefix + sf.Name
			sf.Word += b.base
			f = append(f, sf)
		}
	}
	return f
}

// stateWords packs a state block.
func stateWords(p exo.Pointers) [hexStateWords]uint64 {
	var w [hexStateWords]uint64
	w[0] = uint64(p.Group)<<48 | uint64(p.Hosts)<<32 | uint64(p.Epoch)
	if p.Halted {
		w[1] = 1 << 56
	}
	w[1] |= uint64(p.H()&0xFF) << 48
	w[2] = p.Window
	w[3] = p.Append
	w[4] = p.Agreed
	w[5] = packBytes(p.History[0:8])
	w[6] = packBytes(p.History[8:16])
	w[7] = p.EpochStart
	return w
}

// packBytes packs up to 8 bytes MSB first.
func packBytes(b []byte) uint64 {
	var x uint64
	for i := range 8 {
		x <<= 8
		if i < len(b) {
			x |= uint64(b[i])
		}
	}
	return x
}

// record builds the hex record of v.
func record(v *vector) [hexRecordWords]uint64 {
	var w [hexRecordWords]uint64
	w[0] = hexMagic
	stream, step := uint64(hexNoStream), uint64(0)
	var fl uint64
	if v.Stream != noStream {
		stream, step = uint64(v.Stream), uint64(v.Step)
		fl |= hexFlagStream
		if v.Step > 0 {
			fl |= hexFlagChained
		}
	}
	if v.Res.Decoded != nil && len(v.Frame) > v.Res.ExoLen {
		fl |= hexFlagPadded
	}
	if v.Res.TagValid {
		fl |= hexFlagTagValid
	}
	if v.Key1Valid {
		fl |= hexFlagKey1
	}
	w[1] = uint64(v.HexIndex)<<32 | stream<<16 | step
	w[2] = uint64(len(v.Frame))<<48 | uint64(v.Res.ExoLen)<<32 | fl<<16
	slow := uint64(0)
	if v.Res.Reason.SlowPath() {
		slow = 1
	}
	w[3] = uint64(v.Res.Reason)<<56 | uint64(v.Res.Stage)<<48 | slow<<40
	w[hexKeyWord] = packBytes(testKey[0:8])
	w[hexKeyWord+1] = packBytes(testKey[8:16])
	w[hexKey1Word] = packBytes(testKey1[0:8])
	w[hexKey1Word+1] = packBytes(testKey1[8:16])
	in, out := stateWords(v.In), stateWords(v.Res.Out)
	copy(w[hexStateInWord:], in[:])
	copy(w[hexStateOutWord:], out[:])
	for i := 0; i < len(v.Frame); i += 8 {
		w[hexFrameWord+i/8] = packBytes(v.Frame[i:min(i+8, len(v.Frame))])
	}
	return w
}

// hexFile renders every hex record, each preceded by a // comment line
// ($readmemh skips comments; so must a C reader).
func hexFile(vs []*vector, total int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "// Code generated by vecgen; DO NOT EDIT.\n")
	fmt.Fprintf(&b, "// Exo golden vectors, hex form: %d records of %d 64-bit words (see vectors.meta, docs/vectors.md).\n", total, hexRecordWords)
	fmt.Fprintf(&b, "// %s; tag_key %x (SipHash-2-4, slot 0, also in words 4-5 of every record), tag_key_1 %x (slot 1, words 6-7)\n", hexFormat, testKey, testKey1)
	for _, v := range vs {
		if v.HexIndex < 0 {
			continue
		}
		fmt.Fprintf(&b, "// %d %s/%s %s\n", v.HexIndex, v.Suite, v.Name, v.Res.Reason)
		w := record(v)
		for _, x := range w {
			fmt.Fprintf(&b, "%016x\n", x)
		}
	}
	return []byte(b.String())
}

// layoutConsts are the named constants shared by vectors.meta, vectors.h
// and vectors.vh.
func layoutConsts(total int) []struct {
	Name  string
	Value string
} {
	return []struct {
		Name  string
		Value string
	}{
		{"count", fmt.Sprint(total)},
		{"word_bits", fmt.Sprint(hexWordBits)},
		{"record_words", fmt.Sprint(hexRecordWords)},
		{"frame_word", fmt.Sprint(hexFrameWord)},
		{"frame_max", fmt.Sprint(hexFrameMax)},
		{"history_max", fmt.Sprint(hexHistoryMax)},
		{"state_in_word", fmt.Sprint(hexStateInWord)},
		{"state_out_word", fmt.Sprint(hexStateOutWord)},
		{"state_words", fmt.Sprint(hexStateWords)},
		{"magic", fmt.Sprintf("0x%016x", uint64(hexMagic))},
		{"no_stream", "0xffff"},
		{"flag_chained", fmt.Sprint(hexFlagChained)},
		{"flag_padded", fmt.Sprint(hexFlagPadded)},
		{"flag_stream", fmt.Sprint(hexFlagStream)},
		{"flag_tag_valid", fmt.Sprint(hexFlagTagValid)},
		{"flag_key1_valid", fmt.Sprint(hexFlagKey1)},
		{"tag_key_0_7", fmt.Sprintf("0x%016x", packBytes(testKey[0:8]))},
		{"tag_key_8_15", fmt.Sprintf("0x%016x", packBytes(testKey[8:16]))},
		{"tag_k0", fmt.Sprintf("0x%016x", binary.LittleEndian.Uint64(testKey[0:8]))},
		{"tag_k1", fmt.Sprintf("0x%016x", binary.LittleEndian.Uint64(testKey[8:16]))},
		{"tag_key1_0_7", fmt.Sprintf("0x%016x", packBytes(testKey1[0:8]))},
		{"tag_key1_8_15", fmt.Sprintf("0x%016x", packBytes(testKey1[8:16]))},
		{"tag1_k0", fmt.Sprintf("0x%016x", binary.LittleEndian.Uint64(testKey1[0:8]))},
		{"tag1_k1", fmt.Sprintf("0x%016x", binary.LittleEndian.Uint64(testKey1[8:16]))},
		{"stage_accept", fmt.Sprint(uint8(stageAccept))},
		{"stage_codec", fmt.Sprint(uint8(stageCodec))},
		{"stage_state", fmt.Sprint(uint8(stageState))},
	}
}

// hexCounts counts the hex records per reason.
func hexCounts(vs []*vector) [exo.NumReasons]int {
	var c [exo.NumReasons]int
	for _, v := range vs {
		if v.HexIndex >= 0 {
			c[v.Res.Reason]++
		}
	}
	return c
}

// metaFile is the manifest of the hex form, one "key value..." per line.
// txCount, the records of vectors_tx.hex, is the one line about another
// file.
func metaFile(vs []*vector, total, streams, txCount int) []byte {
	var b strings.Builder
	b.WriteString("# Code generated by vecgen; DO NOT EDIT.\n")
	b.WriteString("# Manifest of vectors.hex (docs/vectors.md). Lines: key value | field name word msb lsb | reason code name count\n")
	b.WriteString("format " + hexFormat + "\n")
	b.WriteString("file vectors.hex\n")
	b.WriteString("byte_order msb_first\n")
	fmt.Fprintf(&b, "tag_key %x\n", testKey)
	fmt.Fprintf(&b, "tag_key_1 %x\n", testKey1)
	for _, c := range layoutConsts(total) {
		fmt.Fprintf(&b, "%s %s\n", c.Name, c.Value)
	}
	fmt.Fprintf(&b, "streams %d\n", streams)
	fmt.Fprintf(&b, "tx_count %d\n", txCount)
	for _, f := range hexFields() {
		fmt.Fprintf(&b, "field %s %d %d %d\n", f.Name, f.Word, f.MSB, f.LSB)
	}
	fmt.Fprintf(&b, "field frame %d 63 0\n", hexFrameWord)
	counts := hexCounts(vs)
	for r := range exo.Reason(exo.NumReasons) {
		fmt.Fprintf(&b, "reason %d %s %d\n", r, r, counts[r])
	}
	return []byte(b.String())
}

// headerFile renders the layout as C (lang "c") or Verilog ("v") defines.
func headerFile(lang string, vs []*vector, total int) []byte {
	var b strings.Builder
	def := func(name, value string) {
		name = "EXO_VEC_" + strings.ToUpper(name)
		if lang == "c" {
			fmt.Fprintf(&b, "#define %s %s\n", name, value)
		} else {
			fmt.Fprintf(&b, "`define %s %s\n", name, value)
		}
	}
	b.WriteString("// Code generated by vecgen; DO NOT EDIT.\n")
	b.WriteString("// Layout of testdata/vectors/vectors.hex (docs/vectors.md): RECORD_WORDS 64-bit\n")
	b.WriteString("// words per vector; field F of record i is bits [F_MSB:F_LSB] of word\n")
	b.WriteString("// i*RECORD_WORDS + F_WORD.\n")
	guard := "EXO_VECTORS_H"
	if lang == "c" {
		fmt.Fprintf(&b, "#ifndef %s\n#define %s\n", guard, guard)
	} else {
		b.WriteString("`ifndef EXO_VECTORS_VH\n`define EXO_VECTORS_VH\n")
	}
	for _, c := range layoutConsts(total) {
		v := c.Value
		if strings.HasPrefix(v, "0x") {
			if lang == "c" {
				v += "ULL"
			} else {
				v = fmt.Sprintf("%d'h%s", len(v[2:])*4, v[2:])
			}
		}
		def(c.Name, v)
	}
	// The tag key whole: 16 bytes for C, one 128-bit value (byte 0 most
	// significant) for Verilog.
	if lang == "c" {
		var kb []string
		for _, x := range testKey {
			kb = append(kb, fmt.Sprintf("0x%02x", x))
		}
		def("tag_key_bytes", "{"+strings.Join(kb, ", ")+"}")
		kb = kb[:0]
		for _, x := range testKey1 {
			kb = append(kb, fmt.Sprintf("0x%02x", x))
		}
		def("tag_key1_bytes", "{"+strings.Join(kb, ", ")+"}")
	} else {
		def("tag_key", fmt.Sprintf("128'h%x", testKey))
		def("tag_key1", fmt.Sprintf("128'h%x", testKey1))
	}
	for _, f := range hexFields() {
		def(f.Name+"_word", fmt.Sprint(f.Word))
		def(f.Name+"_msb", fmt.Sprint(f.MSB))
		def(f.Name+"_lsb", fmt.Sprint(f.LSB))
	}
	counts := hexCounts(vs)
	for r := range exo.Reason(exo.NumReasons) {
		def("count_"+r.String(), fmt.Sprint(counts[r]))
	}
	if lang == "c" {
		fmt.Fprintf(&b, "#endif /* %s */\n", guard)
	} else {
		b.WriteString("`endif\n")
	}
	return []byte(b.String())
}
