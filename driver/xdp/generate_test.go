//go:build linux

package xdp

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGeneratedFilesCurrent regenerates exo_bpfel.go and exo_bpfel.o into a
// temporary directory with the go:generate line of gen.go and requires
// them to equal the committed files. It skips when clang is not installed
// (a build needs only the committed files).
func TestGeneratedFilesCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not running clang")
	}
	if _, err := exec.LookPath("clang"); err != nil {
		t.Skip("clang not installed: generated files not checked")
	}
	src, err := os.ReadFile("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^//go:generate go tool bpf2go (.*)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("gen.go: no go:generate bpf2go line")
	}
	tmp := t.TempDir()
	args := append([]string{"tool", "bpf2go", "-output-dir", tmp}, strings.Fields(string(m[1]))...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOPACKAGE=xdp", "GOFILE=gen.go")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, name := range []string{"exo_bpfel.go", "exo_bpfel.o"} {
		want, err := os.ReadFile(filepath.Join(tmp, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./driver/xdp", name)
		}
	}
}
