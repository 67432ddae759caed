package main

import (
	"fmt"

	"github.com/exo-rack/exo/exo"
)

// vector is one (state, frame) -> (reason, state) case. Standalone vectors
// have Stream == noStream; a stream's steps are vectors too (Stream,
// Step), whose In is the Out of the step before.
type vector struct {
	Suite  string
	Name   string
	Desc   string
	Intent exo.Reason // the reason the vector was built to exercise, or noIntent
	In     exo.Pointers
	Frame  []byte
	Res    result

	Stream   int // index in gen.streams, or noStream
	Step     int
	HexIndex int // record number in vectors.hex, or -1
	// Key1Valid: key slot 1 holds testKey1 (else it is empty); slot 0
	// always holds testKey.
	Key1Valid bool
	// Kind names what a vector of the tag suite exercises, for the
	// coverage check (kindsRequired); "" for the others.
	Kind string
	// Tx is the transmit side of a format-5 case (the token suite and
	// streams): the exo.Tx before, the transmit queue, and the turn it was
	// built to exercise. nil: token mode off, as in every case before
	// format 5 (the case has no "tx" in the JSON form). A case with a Tx
	// is not in vectors.hex, which stays the receive side of format 4: it
	// has a record of its own in vectors_tx.hex (txhex.go).
	Tx *txCase
}

const noStream = -1

// stream is one initial state and a sequence of frames, each applied to
// the state the previous one left.
type stream struct {
	Name  string
	Desc  string
	In    exo.Pointers
	Steps []*vector
	cur   exo.Pointers
	g     *gen
	idx   int
	// Tx is the transmit side the stream starts from (format 5), nil for
	// a receive-only stream; curTx and queue are carried from step to
	// step like cur, and arm marks the next step as armed again (token.go).
	Tx    *exo.Tx
	curTx exo.Tx
	queue []exo.Batch
	arm   bool
}

// gen collects the vectors. Every expectation comes from evaluate (the Go
// core); Intent only checks that the generator built what it meant to.
type gen struct {
	rng     *rng
	esRNG   *rng // epoch_start draws of randState (a stream of its own)
	tagRNG  *rng // the random tags of the tag suite (a stream of its own)
	vectors []*vector
	streams []*stream
	names   map[string]bool
	errs    []error
}

// seed is the fixed seed of every random choice; changing it changes the
// files (and -check then fails until they are regenerated). It spells the
// format-1 magic and stays so: the hex magic is format 2 now, the seed is
// not a format number.
const seed = 0x45584f5645433031 // "EXOVEC01"

// seedEpochStart seeds the epoch_start draws of the random states. They
// have a stream of their own so that adding them (format 2) left every
// other random choice, hence every random frame, as it was: the diff of
// vectors.json showed only the new field and the agreement it holds back.
const seedEpochStart = seed + 1

// seedTag seeds the random tags of the tag suite (format 3), a stream of
// its own for the same reason: every other random choice stays as it was.
const seedTag = seed + 2

func newGen() *gen {
	return &gen{
		rng:    newRNG(seed),
		esRNG:  newRNG(seedEpochStart),
		tagRNG: newRNG(seedTag),
		names:  map[string]bool{},
	}
}

func (g *gen) errorf(format string, args ...any) {
	g.errs = append(g.errs, fmt.Errorf(format, args...))
}

// vec adds a standalone vector for suite/name: state in, frame r. If intent
// is not noIntent, the Go core's verdict must be intent.
func (g *gen) vec(suite, name, desc string, intent exo.Reason, in exo.Pointers, r *raw) *vector {
	return g.vecBytesKeys(suite, name, desc, intent, in, r.bytes(), !r.NoKey1)
}

func (g *gen) vecBytes(suite, name, desc string, intent exo.Reason, in exo.Pointers, frame []byte) *vector {
	return g.vecBytesKeys(suite, name, desc, intent, in, frame, true)
}

func (g *gen) vecBytesKeys(suite, name, desc string, intent exo.Reason, in exo.Pointers, frame []byte, key1 bool) *vector {
	full := suite + "/" + name
	if g.names[full] {
		g.errorf("duplicate vector name %s", full)
	}
	g.names[full] = true
	v := &vector{Suite: suite, Name: name, Desc: desc, Intent: intent, In: in, Frame: frame, Stream: noStream, HexIndex: -1, Key1Valid: key1}
	g.run(v)
	g.vectors = append(g.vectors, v)
	return v
}

// run evaluates v with the Go core and checks the intent.
func (g *gen) run(v *vector) {
	var res result
	var err error
	if v.Tx != nil {
		res, err = evaluateTx(v.In, v.Tx, v.Frame, v.Key1Valid)
	} else {
		res, err = evaluate(v.In, v.Frame, v.Key1Valid)
		if err == nil {
			err = checkTokenOff(v.In, v.Frame, v.Key1Valid, res)
		}
	}
	if err != nil {
		g.errorf("%s/%s: %v", v.Suite, v.Name, err)
	}
	v.Res = res
	if v.Intent != noIntent && res.Reason != v.Intent {
		g.errorf("%s/%s: built to exercise %s, but the Go core says %s (%s stage); fix the generator or the core",
			v.Suite, v.Name, v.Intent, res.Reason, res.Stage)
	}
	if v.Tx != nil && err == nil {
		if got := turnOf(res.Turn); got != v.Tx.Want {
			g.errorf("%s/%s: built to exercise the turn %s, but exo.Engine.Step says %s; fix the generator or the core",
				v.Suite, v.Name, v.Tx.Want, got)
		}
	}
}

// newStream starts a stream from state in.
func (g *gen) newStream(name, desc string, in exo.Pointers) *stream {
	full := "stream/" + name
	if g.names[full] {
		g.errorf("duplicate stream name %s", full)
	}
	g.names[full] = true
	s := &stream{Name: name, Desc: desc, In: in, cur: in, g: g, idx: len(g.streams)}
	g.streams = append(g.streams, s)
	return s
}

// step applies frame r to the stream's current state.
func (s *stream) step(note string, intent exo.Reason, r *raw) *vector {
	v := &vector{
		Suite: "stream", Name: fmt.Sprintf("%s#%d", s.Name, len(s.Steps)), Desc: note,
		Intent: intent, In: s.cur, Frame: r.bytes(),
		Stream: s.idx, Step: len(s.Steps), HexIndex: -1, Key1Valid: !r.NoKey1,
	}
	if s.Tx != nil {
		s.g.errorf("stream %s: a token stream steps with txStep", s.Name)
	}
	s.g.run(v)
	s.cur = v.Res.Out
	s.Steps = append(s.Steps, v)
	return v
}

// next is the valid next frame of the stream's current state.
func (s *stream) next() *raw { return next(s.cur) }

// all returns every vector, standalone first, then the streams' steps in
// order: the order of the records in vectors.hex.
func (g *gen) all() []*vector {
	out := append([]*vector(nil), g.vectors...)
	for _, s := range g.streams {
		out = append(out, s.Steps...)
	}
	return out
}

// assignHex numbers the vectors that fit a hex record. A stream goes into
// the hex form whole or not at all, so that its records chain.
func (g *gen) assignHex() int {
	n := 0
	for _, v := range g.vectors {
		if v.Tx == nil && hexable(v.In, v.Frame) && hexable(v.Res.Out, nil) {
			v.HexIndex = n
			n++
		}
	}
	for _, s := range g.streams {
		ok := len(s.Steps) <= 0xFFFF && s.Tx == nil
		for _, v := range s.Steps {
			ok = ok && hexable(v.In, v.Frame)
		}
		if !ok {
			continue
		}
		for _, v := range s.Steps {
			v.HexIndex = n
			n++
		}
	}
	return n
}

// generate builds every suite, in a fixed order.
func generate() (*gen, error) {
	g := newGen()
	g.suiteAccept()
	g.suitePadding()
	g.suiteCodec()
	g.suiteState()
	g.suiteSeq()
	g.suitePerN()
	g.suiteLarge()
	g.suiteEpochStart()
	g.suiteTag()
	g.suiteKeyPhase()
	g.suiteRandom()
	g.suiteToken()
	g.streamsAll()
	g.tokenStreams()
	if len(g.streams) > 0xFFFF {
		g.errorf("too many streams")
	}
	g.assignHex()
	if len(g.errs) > 0 {
		return g, fmt.Errorf("%d generator errors, first: %w", len(g.errs), g.errs[0])
	}
	if err := g.checkCoverage(); err != nil {
		return g, err
	}
	if err := g.checkTxCoverage(); err != nil {
		return g, err
	}
	return g, nil
}
