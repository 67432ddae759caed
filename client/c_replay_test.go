package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCDecoderReplay: the C client's decoder (client/c: its frame reader
// and reply decoder, reached through exo_internal.h) agrees with the Go
// client's (ReadFrame, parseReply) on FuzzAPIFrame's inputs: its seeds
// (apiFrameSeeds) and its corpus (testdata/fuzz/FuzzAPIFrame), each as the
// stream of frames it is and as the body of one frame of its type argument
// (as FuzzAPIFrame's round trip makes it). client/c/tests/replay, built in
// a copy of client/c with -fsanitize=address,undefined when the compiler
// has them, prints each stream's frames decoded and how the stream ended;
// the test prints the Go client's decoding in the same form and compares:
// the same frames, the same fields, the same verdict (malformed or not,
// the stream's end: eof, cut or a malformed length), and no sanitizer
// report. Where the C library decodes differently on purpose, cVerdict
// says so and expects its way.
func TestCDecoderReplay(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	for _, tool := range []string{cc, "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (not in PATH): the C client cannot be built, its replay of the fuzz corpus cannot run", tool)
		}
	}
	driver := buildCReplay(t, cc)
	inputs := replayInputs(t)
	dir := t.TempDir()
	var files []string
	for i, in := range inputs {
		f := filepath.Join(dir, fmt.Sprintf("%03d", i))
		if err := os.WriteFile(f, in.stream, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a reader that never sees the end
	defer cancel()
	cmd := exec.CommandContext(ctx, driver, files...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "UBSAN_OPTIONS=print_stacktrace=1")
	err := cmd.Run()
	got := splitReplay(stdout.String())
	if err != nil || stderr.Len() > 0 {
		last := "none"
		if len(got.order) > 0 {
			last = inputs[len(got.order)-1].name
		}
		t.Fatalf("replay: %v (the last input begun: %s); its stderr (a sanitizer's report?):\n%s", err, last, stderr.String())
	}
	frames, bad := 0, 0
	for i, in := range inputs {
		want := cVerdicts(in.stream)
		have := got.lines[files[i]]
		frames += len(want) - 1
		if !sameVerdicts(want, have) {
			bad++
			if bad <= 5 {
				t.Errorf("%s (%x): the C library's decoding differs from the Go client's\nC:\n  %s\nwant (Go's):\n  %s",
					in.name, in.stream, strings.Join(have, "\n  "), strings.Join(want, "\n  "))
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d streams decode differently", bad, len(inputs))
	}
	t.Logf("%d streams (%d FuzzAPIFrame inputs, each as a stream and as one frame's body), %d frames: the C and Go decodings agree",
		len(inputs), len(inputs)/2, frames)
}

// buildCReplay builds client/c's tests/replay with make in a copy of
// client/c (its sources only: the tree's own build, TestCClient's, stays
// as it is and unsanitized), and returns its path.
func buildCReplay(t *testing.T, cc string) string {
	dir := t.TempDir()
	err := filepath.WalkDir("c", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if name := d.Name(); name != "Makefile" && !strings.HasSuffix(name, ".c") && !strings.HasSuffix(name, ".h") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, strings.TrimPrefix(p, "c"+string(filepath.Separator)))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	flags := "-O1 -g -fno-omit-frame-pointer"
	const sanitize = " -fsanitize=address,undefined -fno-sanitize-recover=all"
	if err := probeCC(cc, dir, flags+sanitize); err != nil {
		t.Logf("note: %s cannot build and run a program with -fsanitize=address,undefined (%v): the replay runs without the sanitizers", cc, err)
	} else {
		flags += sanitize
	}
	cmd := exec.Command("make", "-s", "-C", dir, "tests/replay")
	// CFLAGS from the environment: the Makefile adds its warnings to it
	// (one on make's command line would replace them).
	cmd.Env = append(os.Environ(), "CC="+cc, "CFLAGS="+flags)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make tests/replay (CFLAGS %s) in a copy of client/c: %v\n%s", flags, err, out)
	}
	t.Logf("client/c/tests/replay built with CFLAGS %s", flags)
	return filepath.Join(dir, "tests", "replay")
}

// probeCC builds and runs an empty program with flags.
func probeCC(cc, dir, flags string) error {
	src, bin := filepath.Join(dir, "probe.c"), filepath.Join(dir, "probe")
	defer os.Remove(src)
	defer os.Remove(bin)
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		return err
	}
	args := append(strings.Fields(flags), "-o", bin, src)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	if out, err := exec.Command(bin).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// replayInput is one stream to replay and what it comes from.
type replayInput struct {
	name   string
	stream []byte
}

// replayInputs are FuzzAPIFrame's seeds and corpus, each twice: its
// stream, and its stream as the body of one frame of its type argument.
func replayInputs(t *testing.T) []replayInput {
	type named struct {
		name string
		apiSeed
	}
	var all []named
	for i, s := range apiFrameSeeds(t) {
		all = append(all, named{fmt.Sprintf("seed %d", i), s})
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzAPIFrame")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s, err := parseAPICorpusFile(b)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		all = append(all, named{filepath.Join(dir, e.Name()), s})
	}
	var inputs []replayInput
	for _, s := range all {
		var w bytes.Buffer
		if err := WriteFrame(&w, s.typ, s.stream); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, replayInput{s.name, s.stream},
			replayInput{fmt.Sprintf("%s as one frame of type %#x", s.name, s.typ), w.Bytes()})
	}
	return inputs
}

// parseAPICorpusFile reads a FuzzAPIFrame corpus file ("go test fuzz v1",
// then its arguments as Go literals: []byte("..."), byte('.'), uint16(n)).
func parseAPICorpusFile(b []byte) (apiSeed, error) {
	var s apiSeed
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 || lines[0] != "go test fuzz v1" {
		return s, errors.New("not a go test fuzz v1 file of 3 arguments")
	}
	for i, want := range []string{"[]byte", "byte", "uint16"} {
		e, err := parser.ParseExpr(lines[i+1])
		if err != nil {
			return s, err
		}
		call, ok := e.(*ast.CallExpr)
		if !ok || types.ExprString(call.Fun) != want || len(call.Args) != 1 {
			return s, fmt.Errorf("argument %d: %s, want a %s", i, lines[i+1], want)
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok {
			return s, fmt.Errorf("argument %d: %s is no literal", i, lines[i+1])
		}
		switch {
		case i == 0 && lit.Kind == token.STRING:
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return s, err
			}
			s.stream = []byte(v)
		case i == 1 && lit.Kind == token.CHAR:
			v, _, tail, err := strconv.UnquoteChar(lit.Value[1:len(lit.Value)-1], '\'')
			if err != nil || tail != "" || v > 0xff {
				return s, fmt.Errorf("argument 1: %s is no byte", lit.Value)
			}
			s.typ = byte(v)
		case i == 2 && lit.Kind == token.INT:
			v, err := strconv.ParseUint(lit.Value, 0, 16)
			if err != nil {
				return s, err
			}
			s.cut = uint16(v)
		default:
			return s, fmt.Errorf("argument %d: %s", i, lines[i+1])
		}
	}
	return s, nil
}

// cReplayOutput is the driver's output: the lines of each input file.
type cReplayOutput struct {
	order []string
	lines map[string][]string
}

func splitReplay(out string) cReplayOutput {
	o := cReplayOutput{lines: map[string][]string{}}
	cur := ""
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if f, ok := strings.CutPrefix(l, "input "); ok {
			cur = f
			o.order = append(o.order, f)
			continue
		}
		o.lines[cur] = append(o.lines[cur], l)
	}
	return o
}

// sameVerdicts compares two decodings line by line; a malformed frame or
// end compares by that class alone (each library words its reason).
func sameVerdicts(a, b []string) bool {
	class := func(l string) string {
		if i := strings.Index(l, "malformed"); i >= 0 { // no hex digit in it
			return l[:i+len("malformed")]
		}
		return l
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if class(a[i]) != class(b[i]) {
			return false
		}
	}
	return true
}

// cVerdicts decodes stream as the Go client does (ReadFrame through a
// small buffer, so frames straddle its refills, then parseReply) and
// prints it in the form of client/c/tests/replay: what the C library
// must print.
func cVerdicts(stream []byte) []string {
	r := bufio.NewReaderSize(bytes.NewReader(stream), 16)
	var lines []string
	var buf []byte
	for {
		typ, body, b, err := ReadFrame(r, buf)
		buf = b
		switch {
		case err == io.EOF:
			return append(lines, "end eof")
		case err == io.ErrUnexpectedEOF:
			return append(lines, "end cut")
		case errors.Is(err, ErrFrame):
			return append(lines, "end malformed: "+err.Error())
		case err != nil:
			return append(lines, "end "+err.Error())
		}
		lines = append(lines, fmt.Sprintf("frame 0x%02x %s", typ, cVerdict(typ, body)))
	}
}

// cVerdict is the verdict on one frame: the Go client's decoding, with
// the C library's documented differences (docs/api.md, "The C client").
func cVerdict(typ byte, body []byte) string {
	r, err := parseReply(typ, body)
	switch {
	case err != nil:
		return "malformed: " + err.Error()
	case typ == TypeError && r.err.Code == 0:
		return "malformed: an Error of code 0 (C: 0 is success; Go: an APIError of code 0)"
	case typ == TypeRosterQueued || typ == TypeKeyDone || typ == TypeLossAccepted:
		return "malformed: the C client sends no Roster, Key, AcceptLoss: their replies are unexpected"
	}
	switch typ {
	case TypePublished:
		return fmt.Sprintf("published req=%d seq=%d index=%d", r.id, r.pos.Seq, r.pos.Index)
	case TypeMessage:
		return fmt.Sprintf("message seq=%d index=%d sender=%d payload=%x", r.msg.Seq, r.msg.Index, r.msg.Sender, r.msg.Payload)
	case TypeStatusReply:
		return fmt.Sprintf("status json=%x", r.json)
	case TypeHelloReply:
		return fmt.Sprintf("hello-reply version=%d features=%x", r.hello.Version, strings.Join(r.hello.Features, ","))
	case TypeError:
		return fmt.Sprintf("error req=%d code=%d text=%x", r.id, r.err.Code, r.err.Text)
	case TypePublishedBatch:
		s := fmt.Sprintf("published-batch req=%d count=%d", r.id, len(r.acks))
		for _, a := range r.acks {
			if a.Err == nil {
				s += fmt.Sprintf(" ok=%d.%d", a.Pos.Seq, a.Pos.Index)
				continue
			}
			ae := a.Err.(*APIError)
			// exo_result's text: at most MaxResultText bytes, a C string.
			text := ae.Text[:min(len(ae.Text), MaxResultText)]
			if i := strings.IndexByte(text, 0); i >= 0 {
				text = text[:i]
			}
			s += fmt.Sprintf(" err=%d:%x", ae.Code, text)
		}
		return s
	}
	return "decoded, but the test knows no such type"
}
