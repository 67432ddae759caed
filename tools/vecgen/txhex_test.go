package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/goldvec"
)

// The transmit hex form read back on its own: a reader written from
// docs/vectors.md section 8 (no constant, no packer of txhex.go), whose
// records are checked field by field, every word of them, against the
// JSON's transmit cases as internal/goldvec reads them.

// txHexText is vectors_tx.hex as a reader sees it: the words, and the
// comment line right before a word (by word number).
type txHexText struct {
	words []uint64
	notes map[int]string
}

func parseTxHex(data []byte) (txHexText, error) {
	f := txHexText{notes: map[int]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, "//"); ok {
			f.notes[len(f.words)] = strings.TrimSpace(c)
			continue
		}
		if len(line) != 16 || strings.ToLower(line) != line {
			return f, fmt.Errorf("line %d: %q is not 16 lower-case hex digits", ln, line)
		}
		x, err := strconv.ParseUint(line, 16, 64)
		if err != nil {
			return f, fmt.Errorf("line %d: %v", ln, err)
		}
		f.words = append(f.words, x)
	}
	return f, sc.Err()
}

// unpack returns n bytes MSB first from ws, and an error if ws is not
// ceil(n/8) words or its padding is not zero.
func unpack(ws []uint64, n int) ([]byte, error) {
	if len(ws) != (n+7)/8 {
		return nil, fmt.Errorf("%d words for %d bytes", len(ws), n)
	}
	b := make([]byte, 8*len(ws))
	for i, w := range ws {
		for k := range 8 {
			b[8*i+k] = byte(w >> (56 - 8*k))
		}
	}
	for _, x := range b[n:] {
		if x != 0 {
			return nil, fmt.Errorf("padding % x is not zero", b[n:])
		}
	}
	return b[:n], nil
}

func keyWords(k [exo.TagKeyLen]byte) [2]uint64 {
	var w [2]uint64
	for i, x := range k {
		w[i/8] |= uint64(x) << (56 - 8*(i%8))
	}
	return w
}

// readState reads a 6-word state block and a 16-word history.
func readState(s, h []uint64) (exo.Pointers, error) {
	p := exo.NewPointers(uint16(s[0]>>48), int(uint16(s[0]>>32)), s[2])
	p.Epoch = uint32(s[0])
	switch s[1] {
	case 0:
	case 1 << 56:
		p.Halted = true
	default:
		return p, fmt.Errorf("halted word %016x", s[1])
	}
	p.Append, p.Agreed, p.EpochStart = s[3], s[4], s[5]
	for i := range exo.MaxHistory {
		p.History[i] = byte(h[i/8] >> (56 - 8*(i%8)))
	}
	return p, nil
}

// readTx reads a 4-word tx block.
func readTx(w []uint64) (exo.Tx, error) {
	t := exo.Tx{Me: uint8(w[0] >> 48), Pred: uint8(w[0] >> 40), Phase: uint8(w[0] >> 32),
		EmptyRun: uint32(w[1] >> 32), IdleRun: uint32(w[1]), Kseq: w[2], QHead: w[3]}
	switch w[0] >> 56 {
	case 0:
	case 1:
		t.On = true
	default:
		return t, fmt.Errorf("on byte %d", w[0]>>56)
	}
	if w[0]&0xFFFFFFFF != 0 {
		return t, fmt.Errorf("tx word 0 %016x: reserved bits set", w[0])
	}
	return t, nil
}

// txStreamNames are the names of vectors.json's streams, by number.
func txStreamNames(t *testing.T, dir string) map[string]int {
	t.Helper()
	f, err := goldvec.ReadJSON(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for i, s := range f.Streams {
		m[s.Name] = i
	}
	return m
}

var whereStep = regexp.MustCompile(`^stream/(.+)#([0-9]+)$`)

// txSums are what vectors_tx.vh must say.
type txSums struct{ count, words, maxQueue, maxFrame, maxBatch int }

// checkTxRecords checks every record of f against the transmit cases of
// js; streams maps a stream name to its number.
func checkTxRecords(f txHexText, js *goldvec.Set, streams map[string]int) (txSums, error) {
	var s txSums
	r := 0
	for i := range js.TxCases {
		c := &js.TxCases[i]
		fail := func(format string, args ...any) (txSums, error) {
			return s, fmt.Errorf("record %d (%s) at word %d: %s", i, c.Where, r, fmt.Sprintf(format, args...))
		}
		if r+61 > len(f.words) {
			return fail("the file ends (%d words)", len(f.words))
		}
		w := f.words[r:]
		if want := fmt.Sprintf("%d %s %s", i, c.Where, c.Reason); f.notes[r] != want {
			return fail("comment %q, want %q", f.notes[r], want)
		}
		if w[0] != 0x45584f5458563031 {
			return fail("magic %016x", w[0])
		}
		// word 1: index, stream, step
		stream, step, rearmed := uint64(0xFFFF), uint64(0), false
		if m := whereStep.FindStringSubmatch(c.Where); m != nil {
			n, ok := streams[m[1]]
			if !ok {
				return fail("no stream %s in vectors.json", m[1])
			}
			j, _ := strconv.Atoi(m[2])
			stream, step, rearmed = uint64(n), uint64(j), j > 0 && !c.Chained
		}
		if want := uint64(i)<<32 | stream<<16 | step; w[1] != want {
			return fail("word 1 %016x, want %016x", w[1], want)
		}
		// word 2: length and flags
		n := int(w[2] >> 32)
		var fl uint64
		for b, on := range []bool{c.Chained, c.Decoded, c.TagValid, c.Key1Valid, c.Turn.Record, c.Turn.Sent != nil,
			c.Turn.Popped, c.Turn.Handoff, c.Turn.Halt, stream != 0xFFFF, rearmed} {
			if on {
				fl |= 1 << b
			}
		}
		if w[2]&0xFFFFFFFF != fl {
			return fail("flags %#x, want %#x", w[2]&0xFFFFFFFF, fl)
		}
		// word 3: verdict, h, queue
		var fr exo.Frame
		stage, exoLen := uint64(1), 0
		if err := fr.UnmarshalBinary(append([]byte(nil), c.Frame...)); err == nil {
			exoLen = exo.HeaderLen + len(fr.History) + len(fr.Payload)
			stage = 2
			if c.Reason == exo.ReasonAccept {
				stage = 0
			}
		}
		if (exoLen != 0) != c.Decoded {
			return fail("the frame decodes: %v, the JSON says %v", exoLen != 0, c.Decoded)
		}
		slow := uint64(0)
		if c.SlowPath {
			slow = 1
		}
		if want := uint64(c.Reason)<<56 | stage<<48 | slow<<40 | uint64(c.In.Hosts/2)<<32 | uint64(len(c.Queue))<<16; w[3] != want {
			return fail("word 3 %016x, want %016x", w[3], want)
		}
		// word 4: lengths
		if want := uint64(len(c.Frame))<<48 | uint64(exoLen)<<32 | uint64(len(c.Turn.Sent))<<16; w[4] != want {
			return fail("word 4 %016x, want %016x", w[4], want)
		}
		// words 5-8: the keys
		k0, k1 := keyWords(js.Key), [2]uint64{}
		if c.Key1Valid {
			k1 = keyWords(js.Key1)
		}
		if [2]uint64(w[5:7]) != k0 || [2]uint64(w[7:9]) != k1 {
			return fail("keys %016x %016x %016x %016x", w[5], w[6], w[7], w[8])
		}
		// words 9-60: state, tx, history, in and out
		in, err := readState(w[9:15], w[29:45])
		if err != nil {
			return fail("state in: %v", err)
		}
		out, err := readState(w[15:21], w[45:61])
		if err != nil {
			return fail("state out: %v", err)
		}
		if in != c.In || out != c.Out {
			return fail("states %s -> %s, the JSON %s -> %s", goldvec.StateString(in), goldvec.StateString(out),
				goldvec.StateString(c.In), goldvec.StateString(c.Out))
		}
		txIn, err := readTx(w[21:25])
		if err != nil {
			return fail("tx in: %v", err)
		}
		txOut, err := readTx(w[25:29])
		if err != nil {
			return fail("tx out: %v", err)
		}
		if txIn != c.TxIn || txOut != c.TxOut {
			return fail("tx %+v -> %+v, the JSON %+v -> %+v", txIn, txOut, c.TxIn, c.TxOut)
		}
		// words 61..: the frame, the frame sent, the queue
		if n < 61 || r+n > len(f.words) {
			return fail("rec_words %d, %d words left", n, len(f.words)-r)
		}
		data := w[61:n]
		take := func(what string, bytes int) ([]byte, error) {
			k := (bytes + 7) / 8
			if k > len(data) {
				return nil, fmt.Errorf("%s: %d bytes, %d words left in the record", what, bytes, len(data))
			}
			b, err := unpack(data[:k], bytes)
			data = data[k:]
			if err != nil {
				return nil, fmt.Errorf("%s: %v", what, err)
			}
			return b, nil
		}
		frame, err := take("frame", len(c.Frame))
		if err != nil {
			return fail("%v", err)
		}
		sent, err := take("sent", len(c.Turn.Sent))
		if err != nil {
			return fail("%v", err)
		}
		if !bytes.Equal(frame, c.Frame) || !bytes.Equal(sent, c.Turn.Sent) {
			return fail("frame %x sent %x, the JSON %x and %x", frame, sent, c.Frame, c.Turn.Sent)
		}
		for q, b := range c.Queue {
			if len(data) == 0 {
				return fail("queue[%d]: no word left", q)
			}
			if want := uint64(b.Count)<<48 | uint64(len(b.Payload))<<32; data[0] != want {
				return fail("queue[%d] word %016x, want %016x", q, data[0], want)
			}
			data = data[1:]
			p, err := take(fmt.Sprintf("queue[%d]", q), len(b.Payload))
			if err != nil {
				return fail("%v", err)
			}
			if !bytes.Equal(p, b.Payload) {
				return fail("queue[%d] payload %x, the JSON %x", q, p, b.Payload)
			}
			s.maxBatch = max(s.maxBatch, len(b.Payload))
		}
		if len(data) != 0 {
			return fail("%d words left after the queue", len(data))
		}
		for k := range n {
			if _, ok := f.notes[r+k]; ok && k > 0 {
				return fail("a comment line inside the record, before word %d", k)
			}
		}
		s.count++
		s.maxQueue = max(s.maxQueue, len(c.Queue))
		s.maxFrame = max(s.maxFrame, len(c.Frame))
		r += n
	}
	if r != len(f.words) {
		return s, fmt.Errorf("%d records end at word %d, the file has %d", len(js.TxCases), r, len(f.words))
	}
	s.words = r
	return s, nil
}

// parseDefines reads the `define lines of a Verilog header.
func parseDefines(data []byte) map[string]string {
	d := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "`define" {
			d[f[1]] = f[2]
		}
	}
	return d
}

// TestTxHex reads vectors_tx.hex and vectors_tx.vh back and checks every
// record and define against the JSON's transmit cases.
func TestTxHex(t *testing.T) {
	js, err := goldvec.LoadJSON(repoVectors)
	if err != nil {
		t.Fatal(err)
	}
	if len(js.TxCases) == 0 {
		t.Fatal("no transmit case in vectors.json")
	}
	data, err := os.ReadFile(filepath.Join(repoVectors, "vectors_tx.hex"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseTxHex(data)
	if err != nil {
		t.Fatal(err)
	}
	s, err := checkTxRecords(f, &js, txStreamNames(t, repoVectors))
	if err != nil {
		t.Fatal(err)
	}
	vh, err := os.ReadFile(filepath.Join(repoVectors, "vectors_tx.vh"))
	if err != nil {
		t.Fatal(err)
	}
	d := parseDefines(vh)
	for name, want := range map[string]int{"VEC_TX_COUNT": s.count, "VEC_TX_WORDS": s.words,
		"VEC_TX_MAX_QUEUE": s.maxQueue, "VEC_TX_MAX_FRAME": s.maxFrame, "VEC_TX_MAX_BATCH": s.maxBatch} {
		if d[name] != strconv.Itoa(want) {
			t.Errorf("vectors_tx.vh: %s = %q, want %d", name, d[name], want)
		}
	}
	if !strings.Contains(string(vh), "`ifndef EXO_VECTORS_TX_VH\n`define EXO_VECTORS_TX_VH\n") || !strings.HasSuffix(string(vh), "`endif\n") {
		t.Error("vectors_tx.vh: no include guard")
	}
	meta, err := os.ReadFile(filepath.Join(repoVectors, "vectors.meta"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(meta), fmt.Sprintf("\ntx_count %d\n", s.count)) {
		t.Errorf("vectors.meta does not say tx_count %d", s.count)
	}
	t.Logf("vectors_tx.hex: %d records, %d words; largest queue %d, frame %d, batch %d", s.count, s.words, s.maxQueue, s.maxFrame, s.maxBatch)
}

// TestTxHexCheckBites: the check above reads every word. A bit flipped
// anywhere in a few records (a standalone case with a queue and a frame
// sent, the largest record, a re-armed stream step, the last record) is
// caught.
func TestTxHexCheckBites(t *testing.T) {
	js, err := goldvec.LoadJSON(repoVectors)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(repoVectors, "vectors_tx.hex"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseTxHex(data)
	if err != nil {
		t.Fatal(err)
	}
	streams := txStreamNames(t, repoVectors)
	// the records' first words, and the ones to break
	var starts []int
	big, rearmed := 0, -1
	for r := 0; r < len(f.words); r += int(f.words[r+2] >> 32) {
		i := len(starts)
		starts = append(starts, r)
		if f.words[r+2]>>32 > f.words[starts[big]+2]>>32 {
			big = i
		}
		if rearmed < 0 && f.words[r+2]&(1<<10) != 0 {
			rearmed = i
		}
	}
	if rearmed < 0 {
		t.Fatal("no re-armed record")
	}
	starts = append(starts, len(f.words))
	tested := 0
	for _, i := range []int{0, big, rearmed, len(starts) - 2} {
		for k := starts[i]; k < starts[i+1]; k++ {
			for _, bit := range []uint{0, 17, 33, 63} {
				orig := f.words[k]
				f.words[k] ^= 1 << bit
				if _, err := checkTxRecords(f, &js, streams); err == nil {
					t.Errorf("record %d, word %d (+%d): bit %d flipped, not caught", i, k, k-starts[i], bit)
				}
				f.words[k] = orig
				tested++
			}
		}
	}
	if _, err := checkTxRecords(f, &js, streams); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bit flips in records 0, %d (the largest), %d (re-armed), %d (the last), all caught", tested, big, rearmed, len(starts)-2)
}

// TestTxHexVerilog walks vectors_tx.hex with $readmemh in iverilog
// (testdata/txread_tb.v, built on vectors_tx.vh).
func TestTxHexVerilog(t *testing.T) {
	iv, err := exec.LookPath("iverilog")
	if err != nil {
		t.Skip("iverilog not found")
	}
	vvp, err := exec.LookPath("vvp")
	if err != nil {
		t.Skip("vvp not found")
	}
	js, err := goldvec.LoadJSON(repoVectors)
	if err != nil {
		t.Fatal(err)
	}
	words := 0
	var sum uint32
	sent := 0
	for i := range js.TxCases {
		c := &js.TxCases[i]
		words += 61 + (len(c.Frame)+7)/8 + (len(c.Turn.Sent)+7)/8
		for _, b := range c.Queue {
			words += 1 + (len(b.Payload)+7)/8
		}
		if c.Turn.Sent != nil {
			sent++
		}
		for _, b := range c.Turn.Sent {
			sum = sum*31 + uint32(b)
		}
	}
	want := fmt.Sprintf("records %d\nwords %d\nsent %d\nchecksum %08x\nerrors 0\n", len(js.TxCases), words, sent, sum)
	hexPath, err := filepath.Abs(filepath.Join(repoVectors, "vectors_tx.hex"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "txread.vvp")
	cmd := exec.Command(iv, "-g2005", "-I", repoVectors, fmt.Sprintf("-DVEC_TX_HEX=%q", hexPath), "-o", bin, "testdata/txread_tb.v")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("iverilog: %v\n%s", err, out)
	}
	out, err := exec.Command(vvp, "-n", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("vvp: %v\n%s", err, out)
	}
	var got strings.Builder
	for _, l := range strings.SplitAfter(string(out), "\n") {
		for _, p := range []string{"records ", "words ", "sent ", "checksum ", "errors "} {
			if strings.HasPrefix(l, p) {
				got.WriteString(l)
			}
		}
	}
	if got.String() != want {
		t.Errorf("Verilog bench:\n%s\nwant:\n%s", out, want)
	}
}
