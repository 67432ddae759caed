package exo

import (
	"encoding/binary"
	"math/bits"
)

// SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
// 2012), the frame tag's PRF: 2 compression rounds per 8-byte block, 4
// finalization rounds, a 128-bit key and a 64-bit output. The key
// convention is the reference implementation's: k0 is the little-endian
// uint64 of key[0:8], k1 that of key[8:16]; message blocks are read
// little-endian too. docs/wire.md and docs/security.md say how the frame
// tag uses it.

// TagKeyLen is the length of a frame-tag key in bytes.
const TagKeyLen = 16

// sipInit returns the initial state for key (k0, k1).
func sipInit(k0, k1 uint64) (v0, v1, v2, v3 uint64) {
	return k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d, k0 ^ 0x6c7967656e657261, k1 ^ 0x7465646279746573
}

// sipRound is one SipRound. It is small enough to be inlined, so that the
// state stays in registers; a block (c = 2 rounds) is written out as
//
//	v3 ^= m; round; round; v0 ^= m
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// sipFinish absorbs the message a || b, whose first n0 bytes (a multiple
// of 8) have already been absorbed into the state, then the last block
// (the remaining bytes and the message length) and runs the d = 4
// finalization rounds. The two pieces let the frame tag's message, which
// has a hole where the tag field is, be hashed without copying it.
func sipFinish(v0, v1, v2, v3 uint64, n0 int, a, b []byte) uint64 {
	n := uint64(n0 + len(a) + len(b))
	le := binary.LittleEndian
	for len(a) >= 8 {
		m := le.Uint64(a)
		v3 ^= m
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= m
		a = a[8:]
	}
	var t uint64 // the pending bytes of a partial block, little-endian
	nt := uint(0)
	if len(a) > 0 {
		for _, c := range a {
			t |= uint64(c) << (8 * nt)
			nt++
		}
		for nt < 8 && len(b) > 0 {
			t |= uint64(b[0]) << (8 * nt)
			nt++
			b = b[1:]
		}
		if nt == 8 {
			v3 ^= t
			v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
			v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
			v0 ^= t
			t, nt = 0, 0
		}
	}
	for len(b) >= 8 {
		m := le.Uint64(b)
		v3 ^= m
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= m
		b = b[8:]
	}
	for _, c := range b {
		t |= uint64(c) << (8 * nt)
		nt++
	}
	m := t | n<<56
	v3 ^= m
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= m
	v2 ^= 0xff
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return v0 ^ v1 ^ v2 ^ v3
}

// sipKey splits a 16-byte key into k0, k1 (little-endian halves).
func sipKey(key *[TagKeyLen]byte) (k0, k1 uint64) {
	return binary.LittleEndian.Uint64(key[0:8]), binary.LittleEndian.Uint64(key[8:16])
}

// SipHash24 returns SipHash-2-4 of m under key (k0 = little-endian
// key[0:8], k1 = little-endian key[8:16]), as the reference implementation
// defines it; its 8-byte output there is the little-endian encoding of the
// returned value. It does not allocate.
func SipHash24(key [TagKeyLen]byte, m []byte) uint64 {
	k0, k1 := sipKey(&key)
	v0, v1, v2, v3 := sipInit(k0, k1)
	return sipFinish(v0, v1, v2, v3, 0, m, nil)
}
