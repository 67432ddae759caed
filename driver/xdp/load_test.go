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
	p, err := load(benchUndo)
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

func TestLoad(t *testing.T) {
	for _, bench := range []bool{false, true} {
		p := loadOrSkip(t, bench)
		info, err := p.EBPF().Info()
		if err != nil {
			t.Fatal(err)
		}
		n, ok := info.VerifiedInstructions()
		insns, _ := info.Instructions()
		t.Logf("bench variant %v: %d instructions, verifier processed %d (budget %d)", bench, len(insns), n, verifierBudget)
		if ok && n > verifierBudget {
			t.Errorf("verifier processed %d instructions, over the budget %d (kernel limit 1000000)", n, verifierBudget)
		}
	}
}
