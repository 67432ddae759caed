package main

import (
	"fmt"
	"strings"

	"github.com/exo-rack/exo/exo"
)

// The transmit hex form: vectors_tx.hex holds every transmit case (the
// cases with a Tx: suite token, then the token_* streams' steps, in the
// JSON's order) for a $readmemh bench of a fast path that sends. Its
// records do not fit vectors.hex's 64 words (n up to 255, frames and
// batches up to 4064 bytes), so they have a length of their own: one
// 64-bit word per line as in vectors.hex, byte strings MSB first (byte k
// of an 8-byte group in bits [63-8k : 56-8k], zero padded), records back
// to back, record r's word 2 bits 63:32 giving its length in words. See
// docs/vectors.md section 8, "The transmit hex form".

const (
	// txMagic opens every record: "EXOTXV01".
	txMagic    = 0x45584f5458563031
	txFormat   = "exo-vectors-tx-hex/1"
	txNoStream = 0xFFFF

	// Word offsets in a record.
	txWordMagic    = 0
	txWordIndex    = 1  // index[63:32] stream[31:16] step[15:0]
	txWordLength   = 2  // rec_words[63:32] flags[31:0]
	txWordVerdict  = 3  // reason[63:56] stage[55:48] slow_path[47:40] h[39:32] queue_n[31:16]
	txWordLens     = 4  // frame_len[63:48] exo_len[47:32] sent_len[31:16]
	txWordKey      = 5  // 5, 6: the slot-0 key, bytes 0-7 and 8-15, MSB first
	txWordKey1     = 7  // 7, 8: the slot-1 key, likewise; 0 where slot 1 is empty
	txWordStateIn  = 9  // 6 words
	txWordStateOut = 15 // 6 words
	txStateWords   = 6
	txWordTxIn     = 21 // 4 words
	txWordTxOut    = 25 // 4 words
	txTxWords      = 4
	txWordHistIn   = 29 // 16 words: slots 0..127, slot 0 in bits 63:56
	txWordHistOut  = 45 // 16 words
	txHistWords    = exo.MaxHistory / 8
	txWordData     = 61 // the frame, the frame sent, the queue

	// Flags, word 2 bits 31:0.
	txFlagChained  = 1 << 0  // stream step, not the first, not armed again: state and tx in are the previous record's out
	txFlagDecoded  = 1 << 1  // the codec accepted the frame
	txFlagTagValid = 1 << 2  // decoded, and the tag verifies under the key of the slot its phase names, which holds a key
	txFlagKey1     = 1 << 3  // key slot 1 holds the key of words 7-8
	txFlagRecord   = 1 << 4  // turn: recorded
	txFlagSent     = 1 << 5  // turn: a frame sent (sent_len > 0)
	txFlagPopped   = 1 << 6  // turn: the queue's head sent
	txFlagHandoff  = 1 << 7  // turn: hand-off
	txFlagHalt     = 1 << 8  // turn: halted
	txFlagStream   = 1 << 9  // a stream step
	txFlagRearmed  = 1 << 10 // a stream step armed again: state and tx in are its own
)

// txFlagNames are the flag names of vectors_tx.vh, bit 0 first.
var txFlagNames = []string{"chained", "decoded", "tag_valid", "key1_valid", "record", "sent", "popped", "handoff", "halt", "stream", "rearmed"}

// packWords packs b MSB first into ceil(len(b)/8) words, zero padded.
func packWords(b []byte) []uint64 {
	w := make([]uint64, 0, (len(b)+7)/8)
	for i := 0; i < len(b); i += 8 {
		w = append(w, packBytes(b[i:min(i+8, len(b))]))
	}
	return w
}

// txStateBlock packs the state block of a transmit record (no history,
// no h: the history has words of its own).
func txStateBlock(p exo.Pointers) [txStateWords]uint64 {
	var w [txStateWords]uint64
	w[0] = uint64(p.Group)<<48 | uint64(p.Hosts)<<32 | uint64(p.Epoch)
	if p.Halted {
		w[1] = 1 << 56
	}
	w[2] = p.Window
	w[3] = p.Append
	w[4] = p.Agreed
	w[5] = p.EpochStart
	return w
}

// txTxBlock packs an exo.Tx.
func txTxBlock(t exo.Tx) [txTxWords]uint64 {
	var w [txTxWords]uint64
	if t.On {
		w[0] = 1 << 56
	}
	w[0] |= uint64(t.Me)<<48 | uint64(t.Pred)<<40 | uint64(t.Phase)<<32
	w[1] = uint64(t.EmptyRun)<<32 | uint64(t.IdleRun)
	w[2] = t.Kseq
	w[3] = t.QHead
	return w
}

// txHistBlock packs the history: the h slots of Hist(), then 0xFF.
func txHistBlock(p exo.Pointers) [txHistWords]uint64 {
	var b [exo.MaxHistory]byte
	for i := range b {
		b[i] = exo.HistoryNone
	}
	copy(b[:], p.Hist())
	var w [txHistWords]uint64
	copy(w[:], packWords(b[:]))
	return w
}

// txFlags are the flags of a transmit case.
func txFlags(v *vector) uint64 {
	var fl uint64
	t := v.Res.Turn
	for _, b := range []struct {
		on bool
		f  uint64
	}{
		{v.Stream != noStream && v.Step > 0 && !v.Tx.Arm, txFlagChained},
		{v.Res.Decoded != nil, txFlagDecoded},
		{v.Res.TagValid, txFlagTagValid},
		{v.Key1Valid, txFlagKey1},
		{t.Record, txFlagRecord},
		{t.Sent, txFlagSent},
		{t.Popped, txFlagPopped},
		{t.Handoff, txFlagHandoff},
		{t.Halt, txFlagHalt},
		{v.Stream != noStream, txFlagStream},
		{v.Stream != noStream && v.Tx.Arm, txFlagRearmed},
	} {
		if b.on {
			fl |= b.f
		}
	}
	return fl
}

// txRecord builds the record of transmit case v, record number index.
func txRecord(v *vector, index int) []uint64 {
	w := make([]uint64, txWordData)
	w[txWordMagic] = txMagic
	stream, step := uint64(txNoStream), uint64(0)
	if v.Stream != noStream {
		stream, step = uint64(v.Stream), uint64(v.Step)
	}
	w[txWordIndex] = uint64(index)<<32 | stream<<16 | step
	slow := uint64(0)
	if v.Res.Reason.SlowPath() {
		slow = 1
	}
	w[txWordVerdict] = uint64(v.Res.Reason)<<56 | uint64(v.Res.Stage)<<48 | slow<<40 |
		uint64(v.In.H()&0xFF)<<32 | uint64(len(v.Tx.Queue))<<16
	w[txWordLens] = uint64(len(v.Frame))<<48 | uint64(v.Res.ExoLen)<<32 | uint64(len(v.Res.Sent))<<16
	w[txWordKey] = packBytes(testKey[0:8])
	w[txWordKey+1] = packBytes(testKey[8:16])
	if v.Key1Valid {
		w[txWordKey1] = packBytes(testKey1[0:8])
		w[txWordKey1+1] = packBytes(testKey1[8:16])
	}
	in, out := txStateBlock(v.In), txStateBlock(v.Res.Out)
	copy(w[txWordStateIn:], in[:])
	copy(w[txWordStateOut:], out[:])
	tin, tout := txTxBlock(v.Tx.In), txTxBlock(v.Res.TxOut)
	copy(w[txWordTxIn:], tin[:])
	copy(w[txWordTxOut:], tout[:])
	hin, hout := txHistBlock(v.In), txHistBlock(v.Res.Out)
	copy(w[txWordHistIn:], hin[:])
	copy(w[txWordHistOut:], hout[:])
	w = append(w, packWords(v.Frame)...)
	w = append(w, packWords(v.Res.Sent)...)
	for _, b := range v.Tx.Queue {
		w = append(w, uint64(b.Count)<<48|uint64(len(b.Payload))<<32)
		w = append(w, packWords(b.Payload)...)
	}
	w[txWordLength] = uint64(len(w))<<32 | txFlags(v)
	return w
}

// txStats sums up the transmit hex form for its header and vectors_tx.vh.
type txStats struct {
	Count, Words                     int
	MaxQueue, MaxFrame, MaxBatch     int
	MaxSent, MaxRecordWords, Streams int
}

// txCases are the transmit cases in the JSON's order: the vectors with a
// Tx, then the token streams' steps.
func txCases(vs []*vector) []*vector {
	var out []*vector
	for _, v := range vs {
		if v.Tx != nil {
			out = append(out, v)
		}
	}
	return out
}

// checkTxHex refuses a transmit case that does not fit its record's
// fields (16-bit lengths, counts, stream and step numbers).
func checkTxHex(g *gen) error {
	for _, v := range txCases(g.all()) {
		if len(v.Frame) > 0xFFFF || len(v.Res.Sent) > 0xFFFF || len(v.Tx.Queue) > 0xFFFF || v.Step > 0xFFFF || v.Stream >= txNoStream {
			return fmt.Errorf("%s/%s: does not fit a vectors_tx.hex record", v.Suite, v.Name)
		}
		for _, b := range v.Tx.Queue {
			if len(b.Payload) > 0xFFFF {
				return fmt.Errorf("%s/%s: a batch of %d bytes does not fit a vectors_tx.hex record", v.Suite, v.Name, len(b.Payload))
			}
		}
	}
	return nil
}

// txHexFile renders vectors_tx.hex (and returns its counts for
// vectors_tx.vh): each record preceded by "// <index> <name> <REASON>".
func txHexFile(vs []*vector) ([]byte, txStats) {
	var st txStats
	var body strings.Builder
	streams := map[int]bool{}
	for i, v := range txCases(vs) {
		w := txRecord(v, i)
		fmt.Fprintf(&body, "// %d %s/%s %s\n", i, v.Suite, v.Name, v.Res.Reason)
		for _, x := range w {
			fmt.Fprintf(&body, "%016x\n", x)
		}
		st.Count++
		st.Words += len(w)
		st.MaxRecordWords = max(st.MaxRecordWords, len(w))
		st.MaxQueue = max(st.MaxQueue, len(v.Tx.Queue))
		st.MaxFrame = max(st.MaxFrame, len(v.Frame))
		st.MaxSent = max(st.MaxSent, len(v.Res.Sent))
		for _, b := range v.Tx.Queue {
			st.MaxBatch = max(st.MaxBatch, len(b.Payload))
		}
		if v.Stream != noStream {
			streams[v.Stream] = true
		}
	}
	st.Streams = len(streams)
	var b strings.Builder
	b.WriteString("// Code generated by vecgen; DO NOT EDIT.\n")
	fmt.Fprintf(&b, "// Exo golden vectors, transmit side (exo.Engine.Step): %d records, %d 64-bit words, variable length (see vectors_tx.vh, docs/vectors.md section 8).\n", st.Count, st.Words)
	fmt.Fprintf(&b, "// %s, magic 0x%016x; record r: word r+2 bits 63:32 are its length, so the next record starts there. Byte strings MSB first.\n", txFormat, uint64(txMagic))
	fmt.Fprintf(&b, "// The suite token, then the token_* streams whole, in the order of vectors.json; tag_key %x (words 5-6), tag_key_1 %x (words 7-8 where slot 1 holds it).\n", testKey, testKey1)
	b.WriteString(body.String())
	return []byte(b.String()), st
}

// txHeaderFile renders vectors_tx.vh.
func txHeaderFile(st txStats) []byte {
	var b strings.Builder
	def := func(name string, value any) {
		fmt.Fprintf(&b, "`define VEC_TX_%s %v\n", strings.ToUpper(name), value)
	}
	b.WriteString("// Code generated by vecgen; DO NOT EDIT.\n")
	b.WriteString("// Layout of testdata/vectors/vectors_tx.hex (docs/vectors.md section 8): the\n")
	b.WriteString("// transmit cases, variable-length records of 64-bit words, back to back;\n")
	b.WriteString("// the record at word r is REC_WORDS = word r+2 bits 63:32 words long, and\n")
	b.WriteString("// field F of it starts at word r + F_WORD.\n")
	b.WriteString("`ifndef EXO_VECTORS_TX_VH\n`define EXO_VECTORS_TX_VH\n")
	def("count", st.Count)
	def("words", st.Words)
	def("max_queue", st.MaxQueue)
	def("max_frame", st.MaxFrame)
	def("max_batch", st.MaxBatch)
	def("max_sent", st.MaxSent)
	def("max_record_words", st.MaxRecordWords)
	def("streams", st.Streams)
	def("word_bits", hexWordBits)
	def("magic", fmt.Sprintf("64'h%016x", uint64(txMagic)))
	def("no_stream", "16'hffff")
	for i, n := range txFlagNames {
		def("flag_"+n, 1<<i)
	}
	for _, w := range []struct {
		name string
		word int
	}{
		{"magic", txWordMagic}, {"index", txWordIndex}, {"length", txWordLength}, {"verdict", txWordVerdict},
		{"lens", txWordLens}, {"tag_key", txWordKey}, {"tag_key1", txWordKey1},
		{"state_in", txWordStateIn}, {"state_out", txWordStateOut},
		{"tx_in", txWordTxIn}, {"tx_out", txWordTxOut},
		{"hist_in", txWordHistIn}, {"hist_out", txWordHistOut}, {"data", txWordData},
	} {
		def(w.name+"_word", w.word)
	}
	b.WriteString("`endif\n")
	return []byte(b.String())
}
