//go:build linux

package xdp

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// loadOrSkip loads the program (the benchmark variant if benchUndo),
// skipping the test only when the kernel refuses BPF (not root, no BPF
// syscall); a verifier rejection fails the test with the log.
func loadOrSkip(tb testing.TB, benchUndo bool) *Program {
	tb.Helper()
	return loadOrSkipWith(tb, benchUndo, LoadOptions{})
}

// loadOrSkipWith is loadOrSkip with load options.
func loadOrSkipWith(tb testing.TB, benchUndo bool, o LoadOptions) *Program {
	tb.Helper()
	p, err := load(benchUndo, o)
	if err != nil {
		var ve *ebpf.VerifierError
		switch {
		case errors.As(err, &ve):
			tb.Fatalf("%v", err)
		case os.Geteuid() != 0 || errors.Is(err, os.ErrPermission) || errors.Is(err, ebpf.ErrNotSupported):
			tb.Skipf("kernel refuses BPF (run as root on Linux >= 5.18): %v", err)
		default:
			tb.Fatal(err)
		}
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// verifierBudget is a guard below the kernel's 1M-instruction complexity
// limit: the program's verification cost grows with the history loops, so
// a change that nears the limit fails here first.
const verifierBudget = 900_000

// TestLoad loads the production and the benchmark variant and checks
// the verifier's cost of each of the object's programs: exo_xdp (attached),
// exo_tok (token mode, tail-called from exo_xdp) and exo_ctl (the control
// operations, BPF_PROG_TEST_RUN only).
func TestLoad(t *testing.T) {
	for _, bench := range []bool{false, true} {
		p := loadOrSkip(t, bench)
		for _, pr := range []struct {
			name string
			prog *ebpf.Program
		}{{"exo_xdp", p.objs.ExoXdp}, {"exo_tok", p.objs.ExoTok}, {"exo_ctl", p.objs.ExoCtl}} {
			info, err := pr.prog.Info()
			if err != nil {
				t.Fatal(err)
			}
			n, ok := info.VerifiedInstructions()
			insns, _ := info.Instructions()
			t.Logf("bench variant %v: %s: %d instructions, verifier processed %d (budget %d)", bench, pr.name, len(insns), n, verifierBudget)
			if !ok {
				t.Errorf("%s: the kernel did not report the verifier's count", pr.name)
			}
			if ok && n > verifierBudget {
				t.Errorf("%s: verifier processed %d instructions, over the budget %d (kernel limit 1000000)", pr.name, n, verifierBudget)
			}
		}
	}
}
