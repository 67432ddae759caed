package fpga

// A SipHash-2-4 of the test's own (the reference algorithm) and the frame
// tag rule of docs/wire.md (hdl/rtl/exo_tag.v): the simulated engine's
// test frames are sealed with it, independently of the Go core's code.

import (
	"encoding/binary"
	"math/bits"
	"testing"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/goldvec"
)

func sipHash24(key [16]byte, m []byte) uint64 {
	k0, k1 := binary.LittleEndian.Uint64(key[0:]), binary.LittleEndian.Uint64(key[8:])
	v0, v1 := k0^0x736f6d6570736575, k1^0x646f72616e646f6d
	v2, v3 := k0^0x6c7967656e657261, k1^0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13) ^ v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16) ^ v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21) ^ v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17) ^ v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(m)
	for ; len(m) >= 8; m = m[8:] {
		w := binary.LittleEndian.Uint64(m)
		v3 ^= w
		round()
		round()
		v0 ^= w
	}
	last := uint64(n) << 56
	for i, c := range m {
		last |= uint64(c) << (8 * i)
	}
	v3 ^= last
	round()
	round()
	v0 ^= last
	v2 ^= 0xff
	for range 4 {
		round()
	}
	return v0 ^ v1 ^ v2 ^ v3
}

// sealExo writes the tag of the Exo frame b (after the Ethernet header)
// under key into its tag field: SipHash-2-4 of b[0:24] || b[32 :
// 32+hist_len+payload_len], big-endian at b[24:32].
func sealExo(b []byte, key [16]byte) {
	end := 32 + int(b[5]) + int(binary.BigEndian.Uint16(b[6:]))
	m := append(append([]byte(nil), b[:24]...), b[32:end]...)
	binary.BigEndian.PutUint64(b[24:], sipHash24(key, m))
}

// TestSipHash24 checks the reference vectors of the SipHash paper
// (key 00..0f, message 00, 01, ..., len-1).
func TestSipHash24(t *testing.T) {
	for _, c := range []struct {
		n    int
		want uint64
	}{{0, 0x726fdb47dd0e0e31}, {1, 0x74f839c593dc67fd}, {7, 0xab0200f58b01d137}, {8, 0x93f5f5799a932462}, {15, 0xa129ca6149be45e5}} {
		m := make([]byte, c.n)
		for i := range m {
			m[i] = byte(i)
		}
		if got := sipHash24(goldvec.TestKey(), m); got != c.want {
			t.Errorf("SipHash-2-4 of %d bytes: %016x, want %016x", c.n, got, c.want)
		}
	}
}

// TestSealMatchesVectors: with format 3 and later (tags under the test
// key), the tag of every decoded frame the files mark tag_valid (every
// ACCEPT among them) is what sealExo computes, and that of every other
// one is not: the frames the simulator tests seal themselves follow the
// same rule as the golden vectors. Format 4: the key is the one of the
// slot the frame's key phase names (Key, or Key1 for phase 1), and a
// frame naming an invalid slot (phase 1 without Key1Valid) is never
// tag_valid (exo.KeyRing.VerifyBytes).
func TestSealMatchesVectors(t *testing.T) {
	vs := loadJSONVectors(t)
	if !vs.HasKey {
		t.Skipf("%s carries no tag key (format 3 does)", vs.Format)
	}
	valid, invalid, phase1 := 0, 0, 0
	for _, c := range vs.Cases {
		if c.Reason == exo.ReasonAccept && !c.TagValid {
			t.Errorf("%s: ACCEPT without a valid tag", c.Where)
		}
		if !c.Decoded {
			continue // tag_valid is for frames the codec accepts
		}
		key, slotValid := vs.Key, true
		if binary.BigEndian.Uint16(c.Frame[exo.OffFlags:])&exo.FlagKeyPhase != 0 {
			if !vs.HasKey1 {
				t.Fatalf("%s: a key phase 1 frame in %s, which has no slot-1 key", c.Where, vs.Format)
			}
			key, slotValid = vs.Key1, c.Key1Valid
			phase1++
		}
		b := append([]byte(nil), c.Frame...)
		sealExo(b, key)
		if same := string(b) == string(c.Frame); (same && slotValid) != c.TagValid {
			t.Fatalf("%s (%s): tag %x, sealExo computes %x (slot valid %v), the files say tag_valid %v", c.Where, c.Reason, c.Frame[24:32], b[24:32], slotValid, c.TagValid)
		} else if same && slotValid {
			valid++
		} else {
			invalid++
		}
	}
	t.Logf("%s: %d frames with their tag under the key of their slot (keys %x, %x), %d decoded frames without; %d of key phase 1",
		vs.Format, valid, vs.Key, vs.Key1, invalid, phase1)
}
