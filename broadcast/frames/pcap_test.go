package frames

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
)

// TestPcapng: Craft writes pcapng when asked, Dump reads it with filters,
// and Dump's Write gives the frames shown, byte for byte, in a pcap.
func TestPcapng(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pcapng")
	c, err := Craft(CraftOptions{
		Source:  Source{Fields: Fields{Group: 9, Sender: "B", Seq: "5-7", Count: 1, History: "A,X", Records: []string{"r"}, Flags: "0", Tag: "0"}},
		Capture: true, NG: true, Dst: exo.DefaultDstMAC, Time: "2025-01-01T00:00:00Z", Gap: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(c.Pcap, []byte(pcapngMagic)) {
		t.Fatalf("not a pcapng file: % x", c.Pcap[:8])
	}
	if err := os.WriteFile(path, c.Pcap, 0o644); err != nil {
		t.Fatal(err)
	}
	out := dumpAll(t, DumpOptions{Pcap: path, Group: 9, Sender: "1", SeqMin: 6, SeqMax: 7, JSON: true})
	if n := strings.Count(out, "\n"); n != 2 || !strings.Contains(out, `"seq":6`) || !strings.Contains(out, `"time":"2025-01-01T00:00:02Z"`) {
		t.Fatalf("pcapng dump with filters: %s", out)
	}

	// Write: the frames shown, byte for byte, in a pcap a dump reads back.
	all, err := ReadPcap(path)
	if err != nil {
		t.Fatal(err)
	}
	wrote := filepath.Join(t.TempDir(), "shown.pcap")
	dumpAll(t, DumpOptions{Pcap: path, Group: 9, SeqMin: 6, SeqMax: ^uint64(0), Write: wrote})
	back, err := ReadPcap(wrote)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || len(back) != 2 || !bytes.Equal(back[0].Data, all[1].Data) || !bytes.Equal(back[1].Data, all[2].Data) {
		t.Fatalf("Write: %d frames written of %d, want seq 6 and 7 byte for byte", len(back), len(all))
	}
	o := DumpOptions{Pcap: path, Group: 9, SeqMax: ^uint64(0), Write: filepath.Join(t.TempDir(), "no", "such", "dir.pcap"), Out: &bytes.Buffer{}}
	if _, err := Dump(t.Context(), o); err == nil || !strings.HasPrefix(err.Error(), "--write: ") {
		t.Errorf("Write into a missing directory: %v", err)
	}
}

// TestReadPcapCorrupt: a file that is not a whole capture is one error
// that names the file, and no packet.
func TestReadPcapCorrupt(t *testing.T) {
	dir := t.TempDir()
	golden, err := os.ReadFile(goldenPcap)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"garbage.pcap":   {[]byte("this is not a capture at all, just text\n"), "not a pcap or pcapng file (first bytes 74 68 69 73)"},
		"cut.pcap":       {golden[:len(golden)-30], "corrupt pcap file: packet 19 is cut short"},
		"empty.pcap":     {nil, "not a pcap or pcapng file: only 0 bytes"},
		"badlen.pcapng":  {append([]byte{0x0a, 0x0d, 0x0d, 0x0a, 0xff, 0xff, 0xff, 0x7f}, make([]byte, 20)...), "corrupt pcapng file"},
		"badrecord.pcap": {append(append([]byte{}, golden[:24]...), 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f), "corrupt pcap file at packet 1"},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, c.b, 0o644); err != nil {
			t.Fatal(err)
		}
		pkts, err := ReadPcap(p)
		if err == nil || pkts != nil || !strings.Contains(err.Error(), p+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %d packets, error %v; want none and %q", name, len(pkts), err, c.want)
		}
		var ie *InputError
		if errors.As(err, &ie) {
			t.Errorf("%s: a corrupt capture is a failure, not bad input: %v", name, err)
		}
	}
}
