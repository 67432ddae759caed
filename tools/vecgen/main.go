// Command vecgen generates the golden frame vectors of the Exo fast path
// into testdata/vectors: (state, frame) -> (reason, state) cases computed
// by the Go core (Frame.UnmarshalBinary and ReasonOf, Pointers.Classify,
// Pointers.Accept), never written by hand. The XDP program (C) and the
// FPGA engine (Verilog) must reproduce every verdict and state update.
// Since format 5 the JSON form also holds the transmit side, (state, tx,
// queue, frame) -> (reason, state, tx, turn and the frame sent) cases of
// exo.Engine.Step (token.go); vectors.hex stays format 4's receive side,
// and vectors_tx.hex holds the transmit cases in records of their own
// (txhex.go).
//
// Usage, from the repository root:
//
//	go run ./tools/vecgen -out testdata/vectors         # regenerate
//	go run ./tools/vecgen -out testdata/vectors -check  # CI: exit 1 if stale
//	go generate ./tools/vecgen                          # same as the first
//
// It writes
//
//	vectors.json  every vector and stream, readable (the full form)
//	vectors.hex   fixed-size records of 64-bit words for $readmemh / C
//	vectors.meta  the hex record layout, the counts and the reason counts
//	vectors.h     the same layout as C defines
//	vectors.vh    the same layout as Verilog defines
//	vectors_tx.hex  the transmit cases, variable-length records of 64-bit words
//	vectors_tx.vh   their count, size and layout as Verilog defines
//
// Output is deterministic (fixed seed, fixed order): the same Go core
// always yields the same bytes, so -check can compare them byte for byte.
// docs/vectors.md describes the files; exo/vectors_test.go replays them.
package main

//go:generate go run . -out ../../testdata/vectors

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/exo-rack/exo/exo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type outFile struct {
	name    string
	content []byte
}

// build generates every file in memory.
func build() (*gen, []outFile, error) {
	g, err := generate()
	if err != nil {
		return g, nil, err
	}
	all := g.all()
	total := 0
	for _, v := range all {
		if v.HexIndex >= 0 {
			total++
		}
	}
	if err := checkTxHex(g); err != nil {
		return g, nil, err
	}
	txHex, txSt := txHexFile(all)
	return g, []outFile{
		{"vectors.json", jsonFile(g, total)},
		{"vectors.hex", hexFile(all, total)},
		{"vectors.meta", metaFile(all, total, len(g.streams)-g.txStreams(), txSt.Count)},
		{"vectors.h", headerFile("c", all, total)},
		{"vectors.vh", headerFile("v", all, total)},
		{"vectors_tx.hex", txHex},
		{"vectors_tx.vh", txHeaderFile(txSt)},
	}, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vecgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "testdata/vectors", "output `dir`")
	check := fs.Bool("check", false, "write nothing; exit 1 and list the stale files if the files in -out differ")
	quiet := fs.Bool("q", false, "do not print the coverage table")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: vecgen [-out dir] [-check] [-q]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	g, files, err := build()
	if err != nil {
		fmt.Fprintf(stderr, "vecgen: %v\n", err)
		for _, e := range g.errs {
			fmt.Fprintf(stderr, "\t%v\n", e)
		}
		return 2
	}
	if !*quiet {
		printCoverage(stdout, g)
	}
	var stale []string
	for _, f := range files {
		path := filepath.Join(*out, f.name)
		old, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "vecgen: %v\n", err)
			return 2
		}
		if err == nil && bytes.Equal(old, f.content) {
			continue
		}
		if *check {
			stale = append(stale, path)
			continue
		}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fmt.Fprintf(stderr, "vecgen: %v\n", err)
			return 2
		}
		if err := os.WriteFile(path, f.content, 0o644); err != nil {
			fmt.Fprintf(stderr, "vecgen: %v\n", err)
			return 2
		}
		fmt.Fprintf(stdout, "vecgen: wrote %s (%d bytes)\n", path, len(f.content))
	}
	if len(stale) > 0 {
		fmt.Fprintf(stderr, "vecgen: golden vectors are stale (run `go run ./tools/vecgen -out testdata/vectors`):\n")
		for _, p := range stale {
			fmt.Fprintf(stderr, "\t%s\n", p)
		}
		return 1
	}
	if *check {
		fmt.Fprintf(stdout, "vecgen: %s is up to date\n", *out)
	}
	return 0
}

// counts per reason, per form and per stage.
type coverage struct {
	json, hex    [exo.NumReasons]int
	codec, state [exo.NumReasons]int
}

func countAll(g *gen) coverage {
	var c coverage
	for _, v := range g.all() {
		r := v.Res.Reason
		c.json[r]++
		if v.HexIndex >= 0 {
			c.hex[r]++
		}
		switch v.Res.Stage {
		case stageCodec:
			c.codec[r]++
		case stageState:
			c.state[r]++
		}
	}
	return c
}

func printCoverage(w io.Writer, g *gen) {
	c := countAll(g)
	steps, hexN, tot := 0, 0, 0
	for _, s := range g.streams {
		steps += len(s.Steps)
	}
	for r := range c.hex {
		hexN += c.hex[r]
		tot += c.json[r]
	}
	fmt.Fprintf(w, "vecgen: %d vectors + %d streams (%d steps) = %d cases; %d in the hex form\n",
		len(g.vectors), len(g.streams), steps, tot, hexN)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "code\treason\tpath\tjson\thex\tcodec\tstate\t\n")
	for r := range exo.Reason(exo.NumReasons) {
		path := "drop"
		switch {
		case r == exo.ReasonAccept:
			path = "accept"
		case r.SlowPath():
			path = "slow"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t\n", r, r, path, c.json[r], c.hex[r], c.codec[r], c.state[r])
	}
	tw.Flush()
	t := txCoverage(g)
	fmt.Fprintf(w, "vecgen: transmit side (exo.Engine.Step, vectors.json and vectors_tx.hex): %d cases (%d in %d streams, %d re-armed steps), token on in %d: %d recorded, %d dropped; %d sent (%d with the head batch, %d empty passes, %d in key phase 1, %d shorter than the Ethernet minimum), %d hand-offs, %d halts\n",
		t.Cases, t.Cases-countTxVectors(g), t.Streams, t.Armed, t.TokenOn, t.Record, t.Dropped, t.Sent, t.Popped, t.Pass, t.SentPhase1, t.SentShort, t.Handoff, t.Halt)
}

// countTxVectors counts the standalone vectors with a transmit side.
func countTxVectors(g *gen) int {
	n := 0
	for _, v := range g.vectors {
		if v.Tx != nil {
			n++
		}
	}
	return n
}

// checkCoverage fails generation when a required case is missing.
func (g *gen) checkCoverage() error {
	c := countAll(g)
	var missing []string
	for r := range exo.Reason(exo.NumReasons) {
		if c.hex[r] == 0 || c.json[r] == 0 {
			missing = append(missing, r.String())
		}
	}
	need := map[string]bool{}
	have := func(k string) { need[k] = true }
	for _, v := range g.all() {
		if v.HexIndex < 0 {
			continue
		}
		if v.Kind != "" {
			have(v.Kind)
		}
		if v.Res.Decoded != nil && v.Res.Reason != exo.ReasonBadTag && !v.Res.TagValid &&
			v.Res.Reason != exo.ReasonBadGroup && v.Kind == "" {
			// Only the tag suite's frames may carry a wrong tag, and
			// only where another check decides first.
			missing = append(missing, fmt.Sprintf("%s/%s: a frame without its tag outside the tag suite", v.Suite, v.Name))
		}
		f := v.Res.Decoded
		switch v.Res.Reason {
		case exo.ReasonDivergence:
			if f.Seq < v.In.Append {
				have("DIVERGENCE old seq, other sender")
			} else {
				have("DIVERGENCE history mismatch")
			}
		case exo.ReasonBadHistlen, exo.ReasonBadHistoryID:
			have(fmt.Sprintf("%s %s", v.Res.Reason, v.Res.Stage))
		case exo.ReasonAccept:
			have(fmt.Sprintf("ACCEPT n=%d", v.In.Hosts))
			switch {
			case f.Seq < 8:
				have("ACCEPT seq near 0")
			case f.Seq>>32 == 0 && f.Seq > 1<<32-8 || f.Seq>>32 == 1 && uint32(f.Seq) < 8:
				have("ACCEPT seq near 2^32")
			case f.Seq > top-8:
				have("ACCEPT seq near 2^64-1")
			}
			if f.Flags&exo.FlagReadmit != 0 {
				have("ACCEPT READMIT")
			}
			if f.Count >= 2 {
				have("ACCEPT batch")
			}
			if f.Count == 0 {
				have("ACCEPT token pass")
			}
			if len(v.Frame) > v.Res.ExoLen {
				have("ACCEPT padded")
			}
			if k := epochStartCase(v.In, f.Seq, v.Res.Out); k != "" {
				have(k)
			}
		}
	}
	want := []string{"DIVERGENCE old seq, other sender", "DIVERGENCE history mismatch",
		"BAD_HISTLEN codec", "BAD_HISTLEN state", "BAD_HISTORY_ID codec", "BAD_HISTORY_ID state",
		"ACCEPT seq near 0", "ACCEPT seq near 2^32", "ACCEPT seq near 2^64-1", "ACCEPT READMIT",
		"ACCEPT batch", "ACCEPT token pass", "ACCEPT padded",
		esHeld, esBoundary, esBeyond, esMax}
	want = append(want, kindsRequired...)
	for _, n := range rostersAll {
		want = append(want, fmt.Sprintf("ACCEPT n=%d", n))
	}
	for _, k := range want {
		if !need[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("coverage: no hex vector for %q", missing)
	}
	return nil
}

// Kinds of ACCEPT with epoch_start > 0 that the hex form must hold.
const (
	esHeld     = "ACCEPT epoch_start > 0, agreement held back"
	esBoundary = "ACCEPT epoch_start > 0, seq = epoch_start+h"
	esBeyond   = "ACCEPT epoch_start > 0, seq > epoch_start+h"
	esMax      = "ACCEPT epoch_start 2^64-1"
)

// epochStartCase names the kind of an ACCEPT of seq from state in with
// epoch_start > 0 (out is the state after), or "".
func epochStartCase(in exo.Pointers, seq uint64, out exo.Pointers) string {
	es, h := in.EpochStart, uint64(in.H())
	switch {
	case es == 0:
		return ""
	case es == top && out.Agreed == in.Agreed:
		return esMax
	case seq >= h && seq-h+1 > in.Agreed && out.Agreed == in.Agreed:
		return esHeld // the rule without epoch_start would have moved it
	case seq >= es && seq-es == h && out.Agreed == es+1:
		return esBoundary
	case seq >= es && seq-es > h && out.Agreed == seq-h+1:
		return esBeyond
	}
	return ""
}
