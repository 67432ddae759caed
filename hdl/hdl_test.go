package hdl

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rtl = []string{"rtl/exo_rx_parser.v", "rtl/exo_check.v", "rtl/exo_pointers.v",
	"rtl/exo_siphash.v", "rtl/exo_tag.v", "rtl/exo_tx_body.v", "rtl/exo_tx.v", "rtl/exo_engine.v"}

const (
	tb = "tb/exo_engine_tb.v"
	// the unit bench of exo_siphash: 64 reference vectors, 3 passes
	sipTB   = "tb/exo_siphash_tb.v"
	sipRTL  = "rtl/exo_siphash.v"
	sipWant = 3 * 64
)

// vectorCount reads "count N" from testdata/vectors/vectors.meta.
func vectorCount(t *testing.T, root string) int {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "testdata", "vectors", "vectors.meta"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "count "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("vectors.meta has no count line")
	return 0
}

// need skips the test when a tool is missing (CI installs them:
// iverilog, verilator, yosys from Debian, see tools/setup.sh).
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install iverilog verilator): RTL bench not run", tool)
		}
	}
}

func run(t *testing.T, ctx context.Context, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(out, 60))
	}
	return string(out)
}

func tail(b []byte, lines int) string {
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

var passRe = regexp.MustCompile(`exo_engine_tb: PASS (\d+)/(\d+) records`)

// checkPass requires the bench's PASS line with every vector, and logs
// the report (throughput, latency).
func checkPass(t *testing.T, out string, want int) {
	t.Helper()
	m := passRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no PASS line in the bench output:\n%s", tail([]byte(out), 40))
	}
	if m[1] != strconv.Itoa(want) || m[2] != strconv.Itoa(want) {
		t.Fatalf("bench passed %s/%s records, want %d/%d", m[1], m[2], want, want)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "exo_engine_tb:") {
			t.Log(l)
		}
	}
}

func setup(t *testing.T) (root string, defs []string, incs []string, want int) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	want = vectorCount(t, root)
	defs = []string{
		fmt.Sprintf(`-DVEC_HEX="%s"`, filepath.Join(root, "testdata", "vectors", "vectors.hex")),
		"-DSEED=1",
	}
	incs = []string{"-I" + filepath.Join(root, "hw", "gen"), "-I" + filepath.Join(root, "testdata", "vectors")}
	return root, defs, incs, want
}

func TestVectorsIcarus(t *testing.T) {
	need(t, "iverilog", "vvp")
	t.Parallel()
	_, defs, incs, want := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	vvp := filepath.Join(t.TempDir(), "tb.vvp")
	args := append([]string{"-g2012", "-s", "exo_engine_tb", "-o", vvp}, incs...)
	args = append(args, defs...)
	args = append(append(args, tb), rtl...)
	run(t, ctx, ".", "iverilog", args...)
	checkPass(t, run(t, ctx, ".", "vvp", "-n", vvp), want)
}

func TestVectorsVerilator(t *testing.T) {
	need(t, "verilator")
	if testing.Short() {
		t.Skip("-short: the Verilator build takes ~30 s")
	}
	t.Parallel()
	_, defs, incs, want := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	mdir := t.TempDir()
	args := []string{"--binary", "-j", "2", "--timing", "-Wno-fatal", "-Wno-lint", "-Wno-style",
		"--top-module", "exo_engine_tb", "--Mdir", mdir, "-o", "Vtb"}
	args = append(args, incs...)
	args = append(args, defs...)
	args = append(append(args, tb), rtl...)
	run(t, ctx, ".", "verilator", args...)
	checkPass(t, run(t, ctx, ".", filepath.Join(mdir, "Vtb")), want)
}

// TestRTLList: rtl (the files the benches and lint compile, as the
// Makefile's RTL) is every module of rtl/; tools/build-fpga-sim.sh takes
// rtl/*.v as well, so a module left out here would go untested.
func TestRTLList(t *testing.T) {
	files, err := filepath.Glob("rtl/*.v")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range rtl {
		have[f] = true
	}
	for _, f := range files {
		if !have[filepath.ToSlash(f)] {
			t.Errorf("%s is not in the rtl list of hdl_test.go (nor, probably, in the Makefile's RTL)", f)
		}
	}
	if len(files) != len(rtl) {
		t.Errorf("rtl/ has %d files, the rtl list %d", len(files), len(rtl))
	}
}

var sipPassRe = regexp.MustCompile(`exo_siphash_tb: PASS (\d+)/(\d+) reference vectors`)

func checkSipPass(t *testing.T, out string) {
	t.Helper()
	m := sipPassRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no PASS line in the exo_siphash bench output:\n%s", tail([]byte(out), 40))
	}
	if m[1] != strconv.Itoa(sipWant) || m[2] != strconv.Itoa(sipWant) {
		t.Fatalf("exo_siphash bench passed %s/%s, want %d/%d", m[1], m[2], sipWant, sipWant)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "exo_siphash_tb:") {
			t.Log(l)
		}
	}
}

// TestSipHashIcarus runs the unit bench of exo_siphash (the SipHash
// paper's 64 reference vectors) under Icarus.
func TestSipHashIcarus(t *testing.T) {
	need(t, "iverilog", "vvp")
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	vvp := filepath.Join(t.TempDir(), "sip.vvp")
	run(t, ctx, ".", "iverilog", "-g2012", "-DSEED=1", "-s", "exo_siphash_tb", "-o", vvp, sipTB, sipRTL)
	checkSipPass(t, run(t, ctx, ".", "vvp", "-n", vvp))
}

// TestSipHashVerilator: the same bench under Verilator.
func TestSipHashVerilator(t *testing.T) {
	need(t, "verilator")
	if testing.Short() {
		t.Skip("-short: the Verilator build takes ~20 s")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mdir := t.TempDir()
	run(t, ctx, ".", "verilator", "--binary", "-j", "2", "--timing", "-Wno-fatal", "-Wno-lint", "-Wno-style",
		"-DSEED=1", "--top-module", "exo_siphash_tb", "--Mdir", mdir, "-o", "Vsip", sipTB, sipRTL)
	checkSipPass(t, run(t, ctx, ".", filepath.Join(mdir, "Vsip")))
}

// TestLint runs verilator --lint-only -Wall on the RTL alone, for the
// three roster sizes of the area table: the RTL must stay warning-free.
func TestLint(t *testing.T) {
	need(t, "verilator")
	root, _, _, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range []int{5, 64, 255} {
		args := []string{"--lint-only", "-Wall", "-I" + filepath.Join(root, "hw", "gen"),
			fmt.Sprintf("-GMAX_HOSTS=%d", n), "--top-module", "exo_engine"}
		run(t, ctx, ".", "verilator", append(args, rtl...)...)
	}
}

// txCount reads VEC_TX_COUNT from testdata/vectors/vectors_tx.vh: the
// transmit records the transmit bench must pass.
func txCount(t *testing.T, root string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "testdata", "vectors", "vectors_tx.vh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`define VEC_TX_COUNT (\\d+)").FindSubmatch(b)
	if m == nil {
		t.Fatal("vectors_tx.vh has no VEC_TX_COUNT")
	}
	n, err := strconv.Atoi(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// txBench is a bench of the transmit side: its file, top module, and the
// PASS line it must print (want formats it from the transmit count).
type txBench struct {
	file, top string
	pass      func(n int) string
}

var (
	txTB   = txBench{"tb/exo_tx_tb.v", "exo_tx_tb", func(n int) string { return fmt.Sprintf("exo_tx_tb: PASS %d/%d transmit records x 2", n, n) }}
	ringTB = txBench{"tb/exo_ring_tb.v", "exo_ring_tb", func(int) string { return "exo_ring_tb: PASS" }}
)

func txSetup(t *testing.T) (defs, incs []string, n int) {
	t.Helper()
	root, _, incs, _ := setup(t)
	defs = []string{fmt.Sprintf(`-DVEC_TX_HEX="%s"`, filepath.Join(root, "testdata", "vectors", "vectors_tx.hex")), "-DSEED=1"}
	return defs, incs, txCount(t, root)
}

func checkTx(t *testing.T, b txBench, out string, n int) {
	t.Helper()
	if !strings.Contains(out, b.pass(n)) {
		t.Fatalf("no %q in the bench output:\n%s", b.pass(n), tail([]byte(out), 40))
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, b.top+":") {
			t.Log(l)
		}
	}
}

func runTxIcarus(t *testing.T, b txBench) {
	need(t, "iverilog", "vvp")
	t.Parallel()
	defs, incs, n := txSetup(t)
	if b.top == ringTB.top {
		// A fifth of the ring's hops: Icarus's full run (some 6 minutes of
		// one CPU alone) passed its 10 minutes in CI beside the lab tests;
		// Verilator runs them all.
		defs = append(defs, "-DRING_SCALE=5")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	vvp := filepath.Join(t.TempDir(), "tb.vvp")
	args := append([]string{"-g2012", "-s", b.top, "-o", vvp}, incs...)
	args = append(args, defs...)
	args = append(append(args, b.file), rtl...)
	run(t, ctx, ".", "iverilog", args...)
	checkTx(t, b, run(t, ctx, ".", "vvp", "-n", vvp), n)
}

func runTxVerilator(t *testing.T, b txBench) {
	need(t, "verilator")
	if testing.Short() {
		t.Skip("-short: the Verilator build takes ~30 s")
	}
	t.Parallel()
	defs, incs, n := txSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mdir := t.TempDir()
	args := []string{"--binary", "-j", "2", "--timing", "-Wno-fatal", "-Wno-lint", "-Wno-style",
		"--top-module", b.top, "--Mdir", mdir, "-o", "Vtb"}
	args = append(args, incs...)
	args = append(args, defs...)
	args = append(append(args, b.file), rtl...)
	run(t, ctx, ".", "verilator", args...)
	checkTx(t, b, run(t, ctx, ".", filepath.Join(mdir, "Vtb")), n)
}

// TestTxVectorsIcarus: the transmit side against every transmit vector,
// byte for byte, with the tag computed ahead and after the verdict.
func TestTxVectorsIcarus(t *testing.T) { runTxIcarus(t, txTB) }

// TestTxVectorsVerilator: the same bench under Verilator.
func TestTxVectorsVerilator(t *testing.T) { runTxVerilator(t, txTB) }

// TestRingIcarus: five engines pass the token for thousands of hops;
// identical pointers and logs, the turnaround per hop.
func TestRingIcarus(t *testing.T) { runTxIcarus(t, ringTB) }

// TestRingVerilator: the same ring under Verilator.
func TestRingVerilator(t *testing.T) { runTxVerilator(t, ringTB) }
