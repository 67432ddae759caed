package measure

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/exo-rack/exo/broadcast/frames"
)

// TestRawLoadReplay: exo raw --replay-pcap takes a capture's valid,
// untagged Exo frames, whole (the part of the former TestFramePcapng that
// is exo raw's).
func TestRawLoadReplay(t *testing.T) {
	const golden = "../testdata/pcap/golden.pcap"
	pkts, err := frames.ReadPcap(golden)
	if err != nil {
		t.Fatal(err)
	}
	replay, err := loadReplay(golden)
	if err != nil {
		t.Fatal(err)
	}
	// The golden capture: 7 valid Exo frames, then 11 malformed, then IPv4.
	if len(replay) != 7 {
		t.Fatalf("loadReplay: %d frames, want the 7 valid ones", len(replay))
	}
	for i := range replay {
		if !bytes.Equal(replay[i], pkts[i].Data) {
			t.Errorf("frame %d is not the captured one", i+1)
		}
	}
	if _, err := loadReplay(filepath.Join(t.TempDir(), "none.pcap")); err == nil {
		t.Error("loadReplay of a missing file: no error")
	}
}
