package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exo-rack/exo/exo"
)

const repoVectors = "../../testdata/vectors"

// TestUpToDate is the CI drift check (-check) as a test.
func TestUpToDate(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"-out", repoVectors, "-check", "-q"}, &out, &errb); rc != 0 {
		t.Fatalf("vecgen -check: rc %d\n%s%s", rc, out.String(), errb.String())
	}
}

func TestDeterministic(t *testing.T) {
	_, a, err := build()
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := build()
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if !bytes.Equal(a[i].content, b[i].content) {
			t.Errorf("%s differs between two runs", a[i].name)
		}
	}
}

func TestCheckReportsStale(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if rc := run([]string{"-out", dir, "-check", "-q"}, &out, &errb); rc != 1 {
		t.Fatalf("-check on an empty dir: rc %d, want 1", rc)
	}
	for _, f := range []string{"vectors.json", "vectors.hex", "vectors.meta", "vectors.h", "vectors.vh", "vectors_tx.hex", "vectors_tx.vh"} {
		if !strings.Contains(errb.String(), f) {
			t.Errorf("-check output does not list %s:\n%s", f, errb.String())
		}
	}
	if rc := run([]string{"-out", dir, "-q"}, &out, &errb); rc != 0 {
		t.Fatalf("generate: rc %d\n%s", rc, errb.String())
	}
	if rc := run([]string{"-out", dir, "-check", "-q"}, &out, &errb); rc != 0 {
		t.Fatalf("-check after generate: rc %d", rc)
	}
	path := filepath.Join(dir, "vectors.meta")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if rc := run([]string{"-out", dir, "-check", "-q"}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "vectors.meta") {
		t.Fatalf("-check after editing vectors.meta: rc %d\n%s", rc, errb.String())
	}
}

// TestEvaluateMatchesCore guards the generator's own plumbing: the raw
// encoder writes what AppendSealed writes for a valid frame (the tag under
// testKey included), and a frame with Tagging tagAsIs keeps its tag.
func TestEvaluateMatchesCore(t *testing.T) {
	p := steady(5, 10)
	r := next(p).withRecords([]byte("hello"), nil)
	f := exo.Frame{Type: exo.FrameData, Group: r.Group, Sender: r.Sender, Epoch: r.Epoch, Seq: r.Seq,
		Count: r.Count, Tag: r.Tag, History: r.History, Payload: r.Payload}
	want, err := f.AppendSealed(nil, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.bytes(); !bytes.Equal(got, want) {
		t.Fatalf("raw encoder\n got %x\nwant %x", got, want)
	}
	if !exo.VerifyTag(want, testKey) {
		t.Fatal("the sealed frame does not verify")
	}
	asIs := forged(r, 0x1122334455667788)
	if got, _ := exo.Tag(asIs.bytes(), testKey); got == 0x1122334455667788 || !bytes.Equal(asIs.bytes()[exo.OffTag:exo.HeaderLen], []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}) {
		t.Fatalf("forged frame %x", asIs.bytes())
	}
}

// readerWant is what hexread.c and hexread_tb.v must print for the hex
// form, computed from the generator's own records.
func readerWant(t *testing.T) string {
	t.Helper()
	g, _, err := build()
	if err != nil {
		t.Fatal(err)
	}
	var sum uint32
	var counts [256]int
	n, valid := 0, 0
	for _, v := range g.all() {
		if v.HexIndex < 0 {
			continue
		}
		n++
		for _, b := range v.Frame {
			sum = sum*31 + uint32(b)
		}
		counts[v.Res.Reason]++
		if v.Res.TagValid {
			valid++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "records %d\nchecksum %08x\n", n, sum)
	for r, c := range counts {
		if c > 0 {
			fmt.Fprintf(&b, "reason %d %d\n", r, c)
		}
	}
	fmt.Fprintf(&b, "tags_valid %d\n", valid)
	b.WriteString("errors 0\n")
	return b.String()
}

// TestHexReaderC reads the hex form with a C reader built on vectors.h.
func TestHexReaderC(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found")
	}
	bin := filepath.Join(t.TempDir(), "hexread")
	cmd := exec.Command(cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-I", repoVectors, "-o", bin, "testdata/hexread.c")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, filepath.Join(repoVectors, "vectors.hex")).CombinedOutput()
	if err != nil {
		t.Fatalf("hexread: %v\n%s", err, out)
	}
	if want := readerWant(t); string(out) != want {
		t.Errorf("C reader:\n%s\nwant:\n%s", out, want)
	}
}

// TestHexReaderVerilog reads the hex form with $readmemh in iverilog.
func TestHexReaderVerilog(t *testing.T) {
	iv, err := exec.LookPath("iverilog")
	if err != nil {
		t.Skip("iverilog not found")
	}
	vvp, err := exec.LookPath("vvp")
	if err != nil {
		t.Skip("vvp not found")
	}
	hexPath, err := filepath.Abs(filepath.Join(repoVectors, "vectors.hex"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "hexread.vvp")
	cmd := exec.Command(iv, "-g2005", "-I", repoVectors, fmt.Sprintf("-DVEC_HEX=%q", hexPath), "-o", bin, "testdata/hexread_tb.v")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("iverilog: %v\n%s", err, out)
	}
	out, err := exec.Command(vvp, "-n", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("vvp: %v\n%s", err, out)
	}
	// vvp may add a "$finish called" line; keep the bench's lines.
	var got strings.Builder
	for _, l := range strings.SplitAfter(string(out), "\n") {
		for _, p := range []string{"records ", "checksum ", "reason ", "tags_valid ", "errors "} {
			if strings.HasPrefix(l, p) {
				got.WriteString(l)
			}
		}
	}
	if want := readerWant(t); got.String() != want {
		t.Errorf("Verilog bench:\n%s\nwant:\n%s", out, want)
	}
}

// TestTransmitJSONOnly: the transmit cases (format 5) stay out of
// vectors.hex, which is format 4's receive side: no record, the token
// streams after every receive-side stream (so no record's stream number
// moved), and the manifest counts the receive-side streams only. (They
// are in vectors_tx.hex: txhex_test.go.)
func TestTransmitJSONOnly(t *testing.T) {
	g, files, err := build()
	if err != nil {
		t.Fatal(err)
	}
	seenTx := false
	for _, s := range g.streams {
		if s.Tx != nil {
			seenTx = true
		} else if seenTx {
			t.Errorf("stream %s (receive side) after a token stream: the hex records' stream numbers would move", s.Name)
		}
	}
	n := 0
	for _, v := range g.all() {
		if v.Tx == nil {
			continue
		}
		n++
		if v.HexIndex >= 0 {
			t.Errorf("%s/%s: a transmit case in the hex form", v.Suite, v.Name)
		}
	}
	if n == 0 || g.txStreams() == 0 {
		t.Fatalf("%d transmit cases, %d token streams", n, g.txStreams())
	}
	for _, f := range files {
		if f.name == "vectors.meta" && !strings.Contains(string(f.content), fmt.Sprintf("\nstreams %d\n", len(g.streams)-g.txStreams())) {
			t.Errorf("vectors.meta does not count the %d receive-side streams", len(g.streams)-g.txStreams())
		}
		if f.name == "vectors.meta" && !strings.Contains(string(f.content), "format exo-vectors-hex/4\n") {
			t.Error("vectors.meta is not format 4")
		}
	}
}

// TestTurnCheckBites: the generator refuses a transmit case whose intent
// is not what exo.Engine.Step does, and a phase-1 case without slot 1.
func TestTurnCheckBites(t *testing.T) {
	g := newGen()
	st := steady(5, 101)
	tx := txOf(5, 2, 1)
	g.txVec("wrong_intent", "built as a hand-off, but the queue holds a batch", exo.ReasonAccept, tHand, st, tx, qs(batch([]byte("b"))), from(st, 1))
	g.txVec("phase1_no_key1", "phase 1 with slot 1 empty", exo.ReasonAccept, tPass, st, withTx(tx, func(x *exo.Tx) { x.Phase = 1 }), nil, noKey1(from(st, 1)))
	g.txVec("oversized", "a batch beyond a slot", exo.ReasonAccept, tPop, st, tx, qs(batch(fill(slotMax-1, 0))), from(st, 1))
	if len(g.errs) != 3 {
		t.Fatalf("%d generator errors, want 3: %v", len(g.errs), g.errs)
	}
	for i, want := range []string{"turn record+handoff+halt", "phase 1 with key slot 1 empty", "does not fit"} {
		if !strings.Contains(g.errs[i].Error(), want) {
			t.Errorf("error %d: %v, want %q", i, g.errs[i], want)
		}
	}
}
