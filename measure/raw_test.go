package measure

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/exo-rack/exo/broadcast/frames"
	"github.com/exo-rack/exo/exo"
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

// TestBadFrames: every kind of bad frame is built, and an unknown kind is
// none; the baseline frame decodes as the baseline's group.
func TestBadFrames(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, kind := range []string{"garbage", "foreign-group", "truncated", "bad-version", "forged-sender", "forged-tag"} {
		b := badFrame(kind, 3, rng, nil)
		var f exo.Frame
		if len(b) == 0 || (kind != "garbage" && kind != "truncated" && kind != "bad-version" && f.UnmarshalBinary(b) != nil) {
			t.Errorf("%s: %d bytes", kind, len(b))
		}
	}
	if b := badFrame("nonsense", 0, rng, nil); b != nil {
		t.Errorf("unknown kind: %d bytes", len(b))
	}
	var f exo.Frame
	if err := f.UnmarshalBinary(rawFrame(7, 64)); err != nil || f.Group != rawGroup || f.Seq != 7 {
		t.Errorf("baseline frame: %+v, %v", f, err)
	}
}
