package main

import "math/bits"

// rng is the generator's own pseudo-random source (SplitMix64), so that the
// vectors do not depend on the standard library keeping its random
// algorithms unchanged from one Go release to the next: the same seed
// always yields the same files.
type rng struct{ s uint64 }

func newRNG(seed uint64) *rng { return &rng{s: seed} }

// Uint64 returns the next SplitMix64 output.
func (r *rng) Uint64() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *rng) Uint32() uint32 { return uint32(r.Uint64() >> 32) }

// Uint64N returns a value in [0, n) (multiply-high; the tiny bias does not
// matter here). n must be > 0.
func (r *rng) Uint64N(n uint64) uint64 {
	hi, _ := bits.Mul64(r.Uint64(), n)
	return hi
}

// IntN returns a value in [0, n); n must be > 0.
func (r *rng) IntN(n int) int { return int(r.Uint64N(uint64(n))) }

// Perm returns a random permutation of 0..n-1 (Fisher-Yates).
func (r *rng) Perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.IntN(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}
