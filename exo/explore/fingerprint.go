package explore

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"sync"

	"github.com/exo-rack/exo/exo"
)

// Fingerprint selects what part of a node's state goes into the fingerprint
// that deduplicates explored states.
type Fingerprint uint8

const (
	// FingerprintDeep hashes every field of a Node, the unexported ones
	// included (read through package reflect, never written), except its
	// configuration, its byte arena and its (empty) Ready. Two states with
	// equal deep fingerprints behave identically, so merging them loses
	// nothing: within the bounds, the search is complete.
	FingerprintDeep Fingerprint = iota
	// FingerprintExported hashes only what the exported accessors show: the
	// log, Pointers, Promised, Halted, Amnesiac, Skipped, Pending, Delivered.
	// Timers (idle, halted, skipped and fetch ticks), the view change in
	// progress (its epoch, promises and timer), held frames, the fetch
	// state, maxEpochSeen, the re-admission requests, the empty-pass run and
	// the pending payloads' contents are invisible: states that differ only
	// there are merged, so the search may miss interleavings (it stays
	// sound: every violation it reports is real and replayable).
	FingerprintExported
)

func (f Fingerprint) String() string {
	switch f {
	case FingerprintDeep:
		return "deep"
	case FingerprintExported:
		return "exported"
	}
	return fmt.Sprintf("Fingerprint(%d)", uint8(f))
}

// fp is a 128-bit fingerprint.
type fp struct{ a, b uint64 }

func (x fp) less(y fp) bool { return x.a < y.a || (x.a == y.a && x.b < y.b) }

// hasher is a deterministic, non-cryptographic 128-bit hash (two chained
// splitmix64 lanes). Deterministic matters: the order in which the search
// visits in-flight items depends on their hashes, and a run must be
// reproducible.
type hasher struct{ a, b uint64 }

func newHasher() hasher { return hasher{0x243f6a8885a308d3, 0x13198a2e03707344} }

func mix(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	return z ^ z>>31
}

func (h *hasher) u64(x uint64) {
	h.a = mix(h.a ^ x)
	h.b = mix(h.b + (x<<32 | x>>32) + 0x9e3779b97f4a7c15)
}

func (h *hasher) bool(b bool) {
	if b {
		h.u64(1)
	} else {
		h.u64(0)
	}
}

func (h *hasher) bytes(p []byte) {
	h.u64(uint64(len(p)) | 1<<63)
	for len(p) >= 8 {
		h.u64(binary.LittleEndian.Uint64(p))
		p = p[8:]
	}
	if len(p) > 0 {
		var t [8]byte
		copy(t[:], p)
		h.u64(binary.LittleEndian.Uint64(t[:]))
	}
}

func (h *hasher) fp(x fp) { h.u64(x.a); h.u64(x.b) }

func (h *hasher) sum() fp { return fp{mix(h.a ^ 0x5851f42d4c957f2d), mix(h.b ^ 0x14057b7ef767814f)} }

func (h *hasher) entry(e *exo.Entry) {
	h.u64(e.Seq)
	h.u64(uint64(e.Epoch)<<32 | uint64(e.Sender)<<16 | uint64(e.Count))
	h.u64(uint64(e.Flags))
	h.bytes(e.History)
	h.bytes(e.Payload)
}

func (h *hasher) entries(es []exo.Entry) {
	h.u64(uint64(len(es)))
	for i := range es {
		h.entry(&es[i])
	}
}

func (h *hasher) frame(f *exo.Frame) {
	h.u64(uint64(f.Type)<<56 | uint64(f.Group)<<40 | uint64(f.Sender)<<32 | uint64(f.Epoch))
	h.u64(f.Seq)
	h.u64(uint64(f.Count)<<16 | uint64(f.Flags))
	h.u64(f.Tag)
	h.bytes(f.History)
	h.bytes(f.Payload)
}

func (h *hasher) message(m *exo.Message) {
	h.u64(uint64(m.Type)<<56 | uint64(m.From)<<48 | uint64(m.To)<<40)
	h.u64(uint64(m.Epoch)<<32 | uint64(m.LogEpoch))
	h.u64(m.Lo)
	h.u64(m.Hi)
	h.u64(m.Start)
	h.u64(m.Agreed)
	h.bytes(m.Skipped)
	h.bool(m.Amnesiac)
	h.entries(m.Entries)
}

// nodeFP returns the fingerprint of one node.
func nodeFP(nd *exo.Node, mode Fingerprint) fp {
	h := newHasher()
	if mode == FingerprintExported {
		exportedNode(&h, nd)
	} else {
		deepNode(&h, nd)
	}
	return h.sum()
}

func exportedNode(h *hasher, nd *exo.Node) {
	p := nd.Pointers()
	h.u64(uint64(p.Epoch)<<32 | uint64(nd.Promised()))
	h.bool(p.Halted)
	h.bool(nd.Halted())
	h.bool(nd.Amnesiac())
	h.u64(p.Append)
	h.u64(p.Agreed)
	h.bytes(p.Hist())
	h.u64(uint64(nd.Pending()))
	h.u64(nd.Delivered())
	var sk uint64
	for i := 0; i < int(p.Hosts) && i < 64; i++ {
		if nd.Skipped(uint8(i)) {
			sk |= 1 << i
		}
	}
	h.u64(sk)
	h.bool(nd.ViewChangeAmbiguous())
	h.u64(nd.LogBase())
	h.entries(nd.Log())
}

// deepSkip names the Node fields the deep fingerprint leaves out: the
// configuration (the same in every state of one host), the byte arena (memory
// the log's slices point into: the log is hashed by content) and the Ready
// (always empty between two actions: it is drained and Advanced).
var deepSkip = map[string]bool{"cfg": true, "arena": true, "rd": true}

var deepFields = sync.OnceValue(func() []int {
	t := reflect.TypeFor[exo.Node]()
	var idx []int
	for i := 0; i < t.NumField(); i++ {
		if !deepSkip[t.Field(i).Name] {
			idx = append(idx, i)
		}
	}
	return idx
})

func deepNode(h *hasher, nd *exo.Node) {
	v := reflect.ValueOf(nd).Elem()
	for _, i := range deepFields() {
		h.u64(uint64(i))
		deepValue(h, v.Field(i))
	}
}

// deepValue hashes any value by content, unexported fields included. Maps
// are hashed independently of their iteration order.
func deepValue(h *hasher, v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		h.bool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		h.u64(uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		h.u64(v.Uint())
	case reflect.Float32, reflect.Float64:
		h.u64(math.Float64bits(v.Float()))
	case reflect.String:
		h.bytes([]byte(v.String()))
	case reflect.Slice:
		if v.IsNil() {
			h.u64(0xdead)
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			h.bytes(v.Bytes())
			return
		}
		h.u64(uint64(v.Len()))
		for i := 0; i < v.Len(); i++ {
			deepValue(h, v.Index(i))
		}
	case reflect.Array:
		n := v.Len()
		h.u64(uint64(n))
		switch v.Type().Elem().Kind() {
		case reflect.Bool:
			// Pack eight flags a byte: [256]bool arrays are common.
			var w uint64
			for i := 0; i < n; i++ {
				if v.Index(i).Bool() {
					w |= 1 << (i % 64)
				}
				if i%64 == 63 || i == n-1 {
					h.u64(w)
					w = 0
				}
			}
		case reflect.Uint8:
			if v.CanAddr() {
				h.bytes(v.Bytes())
				return
			}
			fallthrough
		default:
			for i := 0; i < n; i++ {
				deepValue(h, v.Index(i))
			}
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			deepValue(h, v.Field(i))
		}
	case reflect.Pointer:
		if v.IsNil() {
			h.u64(0xbeef)
			return
		}
		h.u64(0xfeed)
		deepValue(h, v.Elem())
	case reflect.Map:
		// Order-independent: sum the fingerprints of the (key, value) pairs.
		h.u64(uint64(v.Len()))
		var sa, sb uint64
		it := v.MapRange()
		for it.Next() {
			k := newHasher()
			deepValue(&k, it.Key())
			deepValue(&k, it.Value())
			s := k.sum()
			sa += s.a
			sb += s.b
		}
		h.u64(sa)
		h.u64(sb)
	case reflect.Interface:
		if v.IsNil() {
			h.u64(0xcafe)
			return
		}
		deepValue(h, v.Elem())
	default:
		// Funcs, channels, unsafe pointers: a Node holds none today. Hash
		// the kind so that the fingerprint stays deterministic; such a field
		// would be treated as hidden state.
		h.u64(uint64(v.Kind()))
	}
}
