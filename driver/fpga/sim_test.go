//go:build fpgasim && cgo

package fpga

// The simulated engine (the Verilated RTL) through the driver: every
// golden vector through Engine.SetState, Engine.Process and Engine.State;
// the counters; the roster MAC check; the key registers and the two key
// slots (SetKeys, key phases, a rotation); benchmarks.
// Build the model first: tools/build-fpga-sim.sh; run with -count=1 (the
// test cache does not see a rebuilt .a).

import (
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/hw/gen/regs"
	"github.com/exo-rack/exo/internal/goldvec"
)

var testSrcMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x10}

// openSim opens a simulated engine with the test key (00..0f) loaded:
// the frames of benchFrame are sealed with it.
func openSim(tb testing.TB) (*Engine, *Sim) {
	tb.Helper()
	e, s, err := OpenSimEngine(SimOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	if err := e.SetKey(goldvec.TestKey()); err != nil {
		tb.Fatal(err)
	}
	return e, s
}

func TestSimInfo(t *testing.T) {
	e, _ := openSim(t)
	i := e.Info()
	t.Logf("%s (rb_version 0x%08x, rb_next_ptr 0x%x)", i, i.Version, i.NextPtr)
	if i.MaxHistory != i.MaxHosts/2 || i.NextPtr != 0 {
		t.Errorf("info %+v", i)
	}
	st, err := e.Status()
	if err != nil || st.CfgErr || st.Busy {
		t.Errorf("status %+v %v", st, err)
	}
	// out of reset the engine is halted, its state zero, its history X
	s, err := e.State()
	if err != nil {
		t.Fatal(err)
	}
	want := exo.Pointers{Halted: true}
	want.ClearHistory()
	if s != want {
		t.Errorf("state out of reset %s, want %s", goldvec.StateString(s), goldvec.StateString(want))
	}
	if _, err := e.Regs().Read32(regs.Size); err == nil {
		t.Error("read beyond the block: no error")
	}
	if _, err := e.Regs().Read32(2); err == nil {
		t.Error("unaligned read: no error")
	}
}

// frameFields returns the sender and seq of an Exo frame long enough to
// hold them.
func frameFields(b []byte) (uint8, uint64, bool) {
	if len(b) < exo.OffSeq+exo.SizeSeq {
		return 0, 0, false
	}
	return b[exo.OffSender], binary.BigEndian.Uint64(b[exo.OffSeq:]), true
}

// runVectors runs every case through the engine; in a stream the state is
// loaded only before the first step. The key slots are the case's
// (vs.Keys: slot 0 always, slot 1 when the case says so, format 4),
// loaded through Engine.SetKeys when they change; phase1 counts the cases
// whose frame names slot 1. Cases whose roster the engine was not built
// for (hosts > caps.max_hosts) are skipped and counted.
func runVectors(t *testing.T, e *Engine, vs goldvec.Set) (agree, ran, skipped, phase1 int) {
	t.Helper()
	var ring exo.KeyRing
	if vs.HasKey {
		ring = vs.Keys(&goldvec.Case{})
		if err := e.SetKeys(ring); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.ClearCounters(); err != nil {
		t.Fatal(err)
	}
	var counts [exo.NumReasons]uint32
	failByReason := map[exo.Reason]int{}
	skipStream := false
	logged := 0
	fail := func(c goldvec.Case, format string, args ...any) {
		failByReason[c.Reason]++
		if logged++; logged <= 20 {
			t.Errorf("%s: %s\n\tstate %s\n\tframe %x", c.Where, fmt.Sprintf(format, args...), goldvec.StateString(c.In), c.Frame)
		}
	}
	for _, c := range vs.Cases {
		if c.Chained && skipStream {
			skipped++
			continue
		}
		skipStream = false
		if int(c.In.Hosts) > e.Info().MaxHosts {
			skipped++
			skipStream = true
			continue
		}
		if !c.Chained {
			if err := e.SetState(c.In); err != nil {
				t.Fatalf("%s: %v", c.Where, err)
			}
		}
		if r := vs.Keys(&c); vs.HasKey && r != ring {
			if err := e.SetKeys(r); err != nil {
				t.Fatalf("%s: %v", c.Where, err)
			}
			ring = r
		}
		if len(c.Frame) >= exo.OffFlags+2 && exo.KeyPhaseOf(binary.BigEndian.Uint16(c.Frame[exo.OffFlags:])) == 1 {
			phase1++
		}
		ran++
		v, err := e.Process(EthernetFrame(testSrcMAC, c.Frame))
		if err != nil {
			t.Fatalf("%s: %v", c.Where, err)
		}
		if c.Reason < exo.NumReasons {
			counts[c.Reason]++
		}
		ok := true
		if v.Reason != c.Reason || v.SlowPath != c.SlowPath {
			fail(c, "verdict %s slow %v, want %s slow %v", v.Reason, v.SlowPath, c.Reason, c.SlowPath)
			ok = false
		} else if snd, seq, has := frameFields(c.Frame); has && c.Reason == exo.ReasonAccept && (v.Sender != snd || v.Seq != seq) {
			fail(c, "sideband sender %d seq %d, want %d %d", v.Sender, v.Seq, snd, seq)
			ok = false
		}
		got, err := e.State()
		if err != nil {
			t.Fatal(err)
		}
		if got != c.Out {
			fail(c, "state after\n\tgot  %s\n\twant %s", goldvec.StateString(got), goldvec.StateString(c.Out))
			ok = false
			if err := e.SetState(c.Out); err != nil { // let a stream go on
				t.Fatal(err)
			}
		}
		if ok {
			agree++
		}
	}
	cnt, err := e.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if cnt.PerReason != counts || cnt.FramesIn != uint32(ran) || cnt.Accepted != counts[exo.ReasonAccept] {
		t.Errorf("counters %+v, want per reason %v, frames_in %d", cnt, counts, ran)
	}
	if len(failByReason) > 0 {
		var rs []string
		for r, n := range failByReason {
			rs = append(rs, fmt.Sprintf("%s:%d", r, n))
		}
		sort.Strings(rs)
		t.Logf("disagreements by expected reason: %s", strings.Join(rs, " "))
	}
	return agree, ran, skipped, phase1
}

func TestSimVectorsJSON(t *testing.T) {
	e, s := openSim(t)
	vs := loadJSONVectors(t)
	c0 := s.Cycles()
	t0 := time.Now()
	agree, ran, skipped, phase1 := runVectors(t, e, vs)
	note := ""
	if skipped > 0 {
		note = fmt.Sprintf("; %d cases skipped: hosts > caps.max_hosts %d (MAX_HOSTS=255 %s runs them)", skipped, e.Info().MaxHosts, SimBuildScript)
	}
	t.Logf("%s (key %v, key1 %v): %d of %d cases agree (verdict, sideband, state after, counters; %d frames of key phase 1)%s; %d cycles, %v",
		vs.Format, vs.HasKey, vs.HasKey1, agree, ran, phase1, note, s.Cycles()-c0, time.Since(t0).Round(time.Millisecond))
	if agree != ran {
		t.Errorf("%d of %d cases disagree", ran-agree, ran)
	}
	if e.Info().MaxHosts >= 255 && skipped != 0 {
		t.Errorf("%d cases skipped with max_hosts %d", skipped, e.Info().MaxHosts)
	}
}

func TestSimVectorsHex(t *testing.T) {
	e, _ := openSim(t)
	vs := loadHexVectors(t)
	agree, ran, skipped, phase1 := runVectors(t, e, vs)
	t.Logf("%s (key %v, key1 %v): %d of %d records agree (%d of key phase 1); %d skipped", vs.Format, vs.HasKey, vs.HasKey1, agree, ran, phase1, skipped)
	if agree != len(vs.Cases) {
		t.Errorf("%d of %d records disagree or were skipped", len(vs.Cases)-agree, len(vs.Cases))
	}
}

// TestSimStreamsBackToBack streams every stream of the vectors with no
// idle cycle between its frames (ProcessBatch, gap 0), as a MAC at line
// rate would: each frame is checked against the state its predecessor
// left while that one may still be in the pipeline. Every verdict and the
// state after the last frame must be the expected ones. The key slots are
// the stream's (a stream's steps share them).
func TestSimStreamsBackToBack(t *testing.T) {
	e, s := openSim(t)
	vs := loadJSONVectors(t)
	var streams [][]goldvec.Case
	for _, c := range vs.Cases {
		if c.Chained {
			streams[len(streams)-1] = append(streams[len(streams)-1], c)
		} else if strings.HasPrefix(c.Where, "stream/") {
			streams = append(streams, []goldvec.Case{c})
		}
	}
	frames, steps := 0, 0
	for _, st := range streams {
		if int(st[0].In.Hosts) > e.Info().MaxHosts {
			continue
		}
		if err := e.SetState(st[0].In); err != nil {
			t.Fatal(err)
		}
		if vs.HasKey {
			for _, c := range st[1:] {
				if vs.Keys(&c) != vs.Keys(&st[0]) {
					t.Fatalf("%s: the key slots change within the stream: it cannot run back to back", c.Where)
				}
			}
			if err := e.SetKeys(vs.Keys(&st[0])); err != nil {
				t.Fatal(err)
			}
		}
		batch := make([][]byte, len(st))
		for i, c := range st {
			batch[i] = EthernetFrame(testSrcMAC, c.Frame)
		}
		got, err := s.ProcessBatch(batch, 0)
		if err != nil {
			t.Fatalf("%s: %v", st[0].Where, err)
		}
		for i, v := range got {
			if v.Reason != st[i].Reason {
				t.Errorf("%s back to back: %s, want %s", st[i].Where, v.Reason, st[i].Reason)
			}
		}
		last := st[len(st)-1]
		if p, err := e.State(); err != nil || p != last.Out {
			t.Errorf("%s back to back: state after\n\tgot  %s\n\twant %s", last.Where, goldvec.StateString(p), goldvec.StateString(last.Out))
		}
		frames += len(st)
		steps++
	}
	t.Logf("%d streams, %d frames back to back: every verdict and final state as expected", steps, frames)
}

// benchState is an n=5 state at append 1000, history [4, 3], the frames
// of benchFrame follow it in rotation (as the bench's back-to-back run).
func benchState() exo.Pointers {
	st := exo.NewPointers(1, 5, 1024)
	st.Epoch, st.Append, st.Agreed = 7, 1000, 998
	st.History[0], st.History[1] = 4, 3
	return st
}

// benchFrame is the valid DATA frame from sender at seq with history
// [h0, h1], one record "hello", sealed with the test key, padded to 60
// bytes with its Ethernet header (8 beats); source MAC
// 02:00:00:00:00:<sender>.
func benchFrame(tb testing.TB, sender uint8, seq uint64, h0, h1 uint8) []byte {
	payload, err := exo.AppendRecord(nil, []byte("hello"))
	if err != nil {
		tb.Fatal(err)
	}
	f := exo.Frame{Type: exo.FrameData, Group: 1, Sender: sender, Epoch: 7, Seq: seq, Count: 1, History: []uint8{h0, h1}, Payload: payload}
	b, err := f.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	sealExo(b, goldvec.TestKey())
	eth := EthernetFrame(net.HardwareAddr{2, 0, 0, 0, 0, sender}, b)
	for len(eth) < exo.MinEthFrame {
		eth = append(eth, 0)
	}
	return eth
}

// rotation returns n frames of the n=5 rotation from benchState.
func rotation(tb testing.TB, n int) [][]byte {
	h0, h1 := uint8(4), uint8(3)
	out := make([][]byte, n)
	for i := range out {
		snd := uint8(i % 5)
		out[i] = benchFrame(tb, snd, 1000+uint64(i), h0, h1)
		h0, h1 = snd, h0
	}
	return out
}

func TestSimMACCheck(t *testing.T) {
	e, _ := openSim(t)
	if err := e.SetState(benchState()); err != nil {
		t.Fatal(err)
	}
	roster := make([]net.HardwareAddr, 5)
	for i := range roster {
		roster[i] = net.HardwareAddr{2, 0, 0, 0, 0, 0xa0 + byte(i)}
	}
	if err := e.SetRoster(roster); err != nil {
		t.Fatal(err)
	}
	if on, err := e.MACCheck(); err != nil || !on {
		t.Fatalf("mac_check %v %v after SetRoster", on, err)
	}
	f := benchFrame(t, 0, 1000, 4, 3) // from 02:00:00:00:00:00, roster says :a0
	v, err := e.Process(f)
	if err != nil || v.Reason != exo.ReasonBadSender {
		t.Fatalf("wrong MAC: %v %v, want BAD_SENDER", v, err)
	}
	// The MAC holds only the frames whose epoch is not later than the
	// engine's (7), as in the daemon and the XDP program: a later epoch
	// from another MAC goes on to the other rules (FUTURE_EPOCH, the slow
	// path) so that a host that missed a membership change catches up.
	for _, c := range []struct {
		name   string
		src    net.HardwareAddr
		epoch  uint32
		mut    func(b []byte) // on the Exo bytes, before sealing
		reason exo.Reason
	}{
		{"older epoch, wrong MAC", nil, 6, nil, exo.ReasonBadSender},
		{"older epoch, another member's MAC", roster[2], 6, nil, exo.ReasonBadSender},
		{"same epoch, another member's MAC", roster[2], 7, nil, exo.ReasonBadSender},
		{"later epoch, wrong MAC", nil, 8, nil, exo.ReasonFutureEpoch},
		{"later epoch, another member's MAC", roster[2], 8, nil, exo.ReasonFutureEpoch},
		{"much later epoch, wrong MAC", nil, 0xffffffff, nil, exo.ReasonFutureEpoch},
		{"later epoch, its own MAC", roster[0], 8, nil, exo.ReasonFutureEpoch},
		{"later epoch, wrong MAC, history id 9 of 5", nil, 8, func(b []byte) { b[exo.OffHistory+1] = 9 }, exo.ReasonBadHistoryID},
		{"later epoch, wrong MAC, sender 7 of 5", nil, 8, func(b []byte) { b[exo.OffSender] = 7 }, exo.ReasonBadSender},
	} {
		g := append([]byte(nil), f...)
		if c.src != nil {
			copy(g[6:12], c.src)
		}
		x := g[exo.EthHeaderLen:]
		binary.BigEndian.PutUint32(x[exo.OffEpoch:], c.epoch)
		if c.mut != nil {
			c.mut(x)
		}
		sealExo(x, goldvec.TestKey())
		v, err := e.Process(g)
		if err != nil || v.Reason != c.reason || v.SlowPath != c.reason.SlowPath() {
			t.Errorf("%s: %+v %v, want %s", c.name, v, err, c.reason)
		}
		if c.reason == exo.ReasonFutureEpoch {
			// and with a bad tag, BAD_TAG: the tag first
			g[exo.EthHeaderLen+exo.OffTag] ^= 0x40
			if v, err := e.Process(g); err != nil || v.Reason != exo.ReasonBadTag {
				t.Errorf("%s, bad tag: %+v %v, want BAD_TAG", c.name, v, err)
			}
		}
	}
	if st, err := e.State(); err != nil || st.Append != 1000 || st.Epoch != 7 {
		t.Fatalf("state after the epoch cases: %s %v", goldvec.StateString(st), err)
	}
	// at epoch 8 the epoch-8 frame from another MAC is held to its MAC
	e8 := benchState()
	e8.Epoch = 8
	if err := e.SetState(e8); err != nil {
		t.Fatal(err)
	}
	g := append([]byte(nil), f...)
	binary.BigEndian.PutUint32(g[exo.EthHeaderLen+exo.OffEpoch:], 8)
	sealExo(g[exo.EthHeaderLen:], goldvec.TestKey())
	if v, err := e.Process(g); err != nil || v.Reason != exo.ReasonBadSender {
		t.Errorf("epoch 8 at epoch 8, wrong MAC: %+v %v, want BAD_SENDER", v, err)
	}
	if err := e.SetState(benchState()); err != nil {
		t.Fatal(err)
	}
	copy(f[6:12], roster[0])
	if v, err = e.Process(f); err != nil || v.Reason != exo.ReasonAccept || v.Sender != 0 || v.Seq != 1000 || v.Latency < 1 {
		t.Fatalf("right MAC: %+v %v, want ACCEPT from 0 at 1000", v, err)
	}
	lv, err := e.LastVerdict()
	if err != nil || lv.Reason != exo.ReasonAccept || lv.SlowPath {
		t.Fatalf("last_verdict %v %v", lv, err)
	}
	// ClearCounters keeps the check on
	if err := e.ClearCounters(); err != nil {
		t.Fatal(err)
	}
	if on, _ := e.MACCheck(); !on {
		t.Error("ClearCounters turned mac_check off")
	}
	if c, _ := e.Counters(); c != (Counters{}) {
		t.Errorf("counters after clear: %+v", c)
	}
	if got := e.Roster(); len(got) != 5 || got[4].String() != "02:00:00:00:00:a4" {
		t.Errorf("Roster() = %v", got)
	}
	if err := e.SetRoster(nil); err != nil {
		t.Fatal(err)
	}
	f2 := benchFrame(t, 1, 1001, 0, 4) // from :01, check off: ACCEPT
	if v, err = e.Process(f2); err != nil || v.Reason != exo.ReasonAccept {
		t.Fatalf("check off: %v %v", v, err)
	}
	st, err := e.State()
	if err != nil || st.Append != 1002 || st.Agreed != 1000 || st.History[0] != 1 || st.History[1] != 0 {
		t.Fatalf("state %s %v", goldvec.StateString(st), err)
	}
	// a halted engine: HALTED, slow path
	if err := e.Halt(); err != nil {
		t.Fatal(err)
	}
	if v, err = e.Process(benchFrame(t, 2, 1002, 1, 0)); err != nil || v.Reason != exo.ReasonHalted || !v.SlowPath {
		t.Fatalf("halted: %v %v", v, err)
	}
	if err := e.SetRoster(make([]net.HardwareAddr, e.Info().MaxHosts+1)); err == nil {
		t.Error("a roster above max_hosts: no error")
	}
}

func TestSimKeyAndErrors(t *testing.T) {
	e, s := openSim(t)
	if err := e.SetKey(goldvec.TestKey()); err != nil {
		t.Fatal(err)
	}
	if err := e.SetKeys(exo.KeyRing{Key: [2][16]byte{goldvec.TestKey(), {15: 1}}, Valid: [2]bool{true, true}}); err != nil {
		t.Fatal(err)
	}
	for i := range regs.KeyCount {
		// write-only: the map says reads give 0
		if v, err := s.Read32(regs.KeyBase + uint32(i)*regs.KeyStride); err != nil || v != 0 {
			t.Errorf("key[%d] reads %#x %v, want 0 (write-only)", i, v, err)
		}
		if v, err := s.Read32(regs.Key1Base + uint32(i)*regs.Key1Stride); err != nil || v != 0 {
			t.Errorf("key1[%d] reads %#x %v, want 0 (write-only)", i, v, err)
		}
	}
	if v, err := s.Read32(regs.KeyValid); err != nil || v != 3 {
		t.Errorf("key_valid reads %#x %v, want 3", v, err)
	}
	big := exo.NewPointers(1, e.Info().MaxHosts+1, 1024)
	if err := e.SetState(big); err == nil || !strings.Contains(err.Error(), "max_hosts") {
		t.Errorf("SetState with %d hosts: %v", big.Hosts, err)
	}
	if _, err := e.Process(nil); err == nil {
		t.Error("empty frame: no error")
	}
	// a CSR write of hosts above max_hosts (not through SetState): cfg_err
	if err := s.Write32(regs.Hosts, uint32(e.Info().MaxHosts+1)); err != nil {
		t.Fatal(err)
	}
	if st, err := e.Status(); err != nil || !st.CfgErr {
		t.Errorf("status %+v %v, want cfg_err", st, err)
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if st, err := e.Status(); err != nil || st.CfgErr {
		t.Errorf("status after reset %+v %v", st, err)
	}
	if v, err := s.Read32(regs.KeyValid); err != nil || v != regs.KeyValidReset {
		t.Errorf("key_valid after reset %#x %v, want %#x", v, err, regs.KeyValidReset)
	}
}

// keyFrame is the valid DATA frame of benchFrame (sender, seq, history
// [h0, h1]), built with exo.Frame and sealed by Frame.SealPhase under key
// with key phase phase; the test's own sealExo must agree.
func keyFrame(tb testing.TB, phase uint8, key [16]byte, sender uint8, seq uint64, h0, h1 uint8) []byte {
	tb.Helper()
	payload, err := exo.AppendRecord(nil, []byte("hello"))
	if err != nil {
		tb.Fatal(err)
	}
	f := exo.Frame{Type: exo.FrameData, Group: 1, Sender: sender, Epoch: 7, Seq: seq, Count: 1, History: []uint8{h0, h1}, Payload: payload}
	f.SealPhase(phase, key)
	b, err := f.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	own := append([]byte(nil), b...)
	sealExo(own, key)
	if string(own) != string(b) || exo.KeyPhaseOf(binary.BigEndian.Uint16(b[exo.OffFlags:])) != phase {
		tb.Fatalf("Frame.SealPhase(%d): %x, sealExo: %x", phase, b, own)
	}
	return EthernetFrame(net.HardwareAddr{2, 0, 0, 0, 0, sender}, b)
}

// TestSimKeySlots: the two key slots through Engine.SetKeys. A frame of
// key phase 1 sealed under key B is accepted while slot 1 holds B and is
// valid, BAD_TAG when slot 1 is invalid or holds another key, or when
// the frame is sealed under slot 0's key; a frame of phase 0 does not
// care about slot 1; a rotation A -> B -> C (each step writing only the
// slot no frame names) keeps every frame of the phase in use accepted.
func TestSimKeySlots(t *testing.T) {
	e, s := openSim(t)
	var a, b, c [16]byte
	for i := range a {
		a[i], b[i], c[i] = byte(i), 0xb0+byte(i), 0xc0+byte(i)
	}
	set := func(k0, k1 [16]byte, v0, v1 bool) {
		t.Helper()
		if err := e.SetKeys(exo.KeyRing{Key: [2][16]byte{k0, k1}, Valid: [2]bool{v0, v1}}); err != nil {
			t.Fatal(err)
		}
		got, err := e.Keys()
		if err != nil || got.Valid != [2]bool{v0, v1} || v0 && got.Key[0] != k0 || v1 && got.Key[1] != k1 {
			t.Fatalf("Keys() = %+v %v after SetKeys", got, err)
		}
	}
	// the n=5 rotation of benchFrame: frame i is from i%5 at 1000+i
	next, h0, h1 := 0, uint8(4), uint8(3)
	if err := e.SetState(benchState()); err != nil {
		t.Fatal(err)
	}
	try := func(what string, phase uint8, key [16]byte, want exo.Reason) {
		t.Helper()
		snd := uint8(next % 5)
		v, err := e.Process(keyFrame(t, phase, key, snd, 1000+uint64(next), h0, h1))
		if err != nil {
			t.Fatal(err)
		}
		if v.Reason != want {
			t.Errorf("%s: %s, want %s", what, v.Reason, want)
		}
		if v.Reason == exo.ReasonAccept {
			next++
			h0, h1 = snd, h0
		}
	}
	set(a, b, true, true)
	try("phase 1 under B, slot 1 = B valid", 1, b, exo.ReasonAccept)
	try("phase 0 under A, slot 0 = A valid", 0, a, exo.ReasonAccept)
	try("phase 1 under A (slot 0's key)", 1, a, exo.ReasonBadTag)
	try("phase 0 under B (slot 1's key)", 0, b, exo.ReasonBadTag)
	set(a, b, true, false)
	try("phase 1 under B, slot 1 invalid", 1, b, exo.ReasonBadTag)
	try("phase 0 under A, slot 1 invalid", 0, a, exo.ReasonAccept)
	set(a, c, true, true)
	try("phase 1 under B, slot 1 = C", 1, b, exo.ReasonBadTag)
	try("phase 0 under A, slot 1 = C", 0, a, exo.ReasonAccept)
	set(a, b, false, true)
	try("phase 0 under A, slot 0 invalid", 0, a, exo.ReasonBadTag)
	try("phase 1 under B, slot 0 invalid", 1, b, exo.ReasonAccept)
	// SetKey: slot 0 alone, as before key rotation
	if err := e.SetKey(c); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Keys(); err != nil || got.Valid != [2]bool{true, false} || got.Key[0] != c {
		t.Fatalf("Keys() after SetKey %+v %v", got, err)
	}
	try("after SetKey(C): phase 1 under B", 1, b, exo.ReasonBadTag)
	try("after SetKey(C): phase 0 under C", 0, c, exo.ReasonAccept)

	// a rotation: batches of 16 frames back to back, between two batches
	// one SetKeys that changes only the slot the batches before and after
	// do not use (the RTL bench does it with frames in flight)
	steps := []struct {
		ring  exo.KeyRing
		phase uint8
		key   [16]byte
	}{
		{exo.NewKeyRing(0, a), 0, a},
		{exo.KeyRing{Key: [2][16]byte{a, b}, Valid: [2]bool{true, true}}, 0, a},  // stage B
		{exo.KeyRing{Key: [2][16]byte{a, b}, Valid: [2]bool{true, true}}, 1, b},  // switch
		{exo.KeyRing{Key: [2][16]byte{a, b}, Valid: [2]bool{false, true}}, 1, b}, // retire A
		{exo.KeyRing{Key: [2][16]byte{c, b}, Valid: [2]bool{true, true}}, 1, b},  // stage C
		{exo.KeyRing{Key: [2][16]byte{c, b}, Valid: [2]bool{true, true}}, 0, c},  // switch
		{exo.KeyRing{Key: [2][16]byte{c, b}, Valid: [2]bool{true, false}}, 0, c}, // retire B
	}
	if err := e.SetState(benchState()); err != nil {
		t.Fatal(err)
	}
	next, h0, h1 = 0, 4, 3
	c0 := s.Cycles()
	for _, st := range steps {
		if err := e.SetKeys(st.ring); err != nil {
			t.Fatal(err)
		}
		batch := make([][]byte, 16)
		for i := range batch {
			snd := uint8(next % 5)
			batch[i] = keyFrame(t, st.phase, st.key, snd, 1000+uint64(next), h0, h1)
			for len(batch[i]) < exo.MinEthFrame {
				batch[i] = append(batch[i], 0)
			}
			next++
			h0, h1 = snd, h0
		}
		vs, err := s.ProcessBatch(batch, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vs {
			if v.Reason != exo.ReasonAccept {
				t.Fatalf("rotation, ring %+v, phase %d: frame %d %s", st.ring.Valid, st.phase, i, v.Reason)
			}
		}
	}
	p, err := e.State()
	if err != nil || p.Append != 1000+uint64(next) {
		t.Fatalf("after the rotation: %s %v", goldvec.StateString(p), err)
	}
	t.Logf("key slots: phase 1 accepted under slot 1 only while it is valid and holds the frame's key, phase 0 unaffected; rotation A -> B -> C: %d frames in %d back-to-back batches, one SetKeys between two, all ACCEPT (%d cycles with the CSR writes)",
		next, len(steps), s.Cycles()-c0)
}

// TestSimBackToBack streams 256 minimum-size frames with no idle cycle
// (ProcessBatch, gap 0): one verdict per 8 cycles, all ACCEPT, no stall,
// as the Verilog bench's back-to-back run. Every other frame is of key
// phase 1, under the key of slot 1.
func TestSimBackToBack(t *testing.T) {
	e, s := openSim(t)
	if err := e.SetState(benchState()); err != nil {
		t.Fatal(err)
	}
	key1 := [16]byte{0: 0xb0, 15: 0xbf}
	if err := e.SetKeys(exo.KeyRing{Key: [2][16]byte{goldvec.TestKey(), key1}, Valid: [2]bool{true, true}}); err != nil {
		t.Fatal(err)
	}
	frames := rotation(t, 256)
	for i := 1; i < len(frames); i += 2 {
		b := frames[i][exo.EthHeaderLen:]
		b[exo.OffFlags] |= exo.FlagKeyPhase >> 8
		sealExo(b, key1)
	}
	vs, err := s.ProcessBatch(frames, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if v.Reason != exo.ReasonAccept || v.Seq != 1000+uint64(i) || v.Latency != vs[0].Latency {
			t.Fatalf("frame %d: %+v (frame 0: latency %d)", i, v, vs[0].Latency)
		}
	}
	per := float64(vs[len(vs)-1].Cycle-vs[0].Cycle) / float64(len(vs)-1)
	t.Logf("back-to-back: %d minimum-size frames (key phases 0 and 1 alternating), %.2f cycles/frame, latency tlast -> verdict %d cycles, %d stalls",
		len(vs), per, vs[0].Latency, s.Stalls())
	if per != 8 || s.Stalls() != 0 {
		t.Errorf("%.2f cycles/frame, %d stalls; want 8, 0", per, s.Stalls())
	}
	st, err := e.State()
	if err != nil || st.Append != 1256 || st.Agreed != 1254 {
		t.Errorf("state %s %v", goldvec.StateString(st), err)
	}
}

// TestSimTag: a frame sealed with the loaded key is accepted; a wrong tag
// is BAD_TAG, after the group check. Skipped for an engine without the tag
// check (the RTL before SipHash: it ignores the tag).
func TestSimTag(t *testing.T) {
	e, _ := openSim(t)
	good := benchFrame(t, 0, 1000, 4, 3)
	bad := append([]byte(nil), good...)
	bad[exo.EthHeaderLen+exo.OffTag+7] ^= 1
	otherKey := append([]byte(nil), good...)
	sealExo(otherKey[exo.EthHeaderLen:], [16]byte{15: 1})
	badGroup := append([]byte(nil), bad...)
	badGroup[exo.EthHeaderLen+exo.OffGroup+1] = 2
	run := func(f []byte) exo.Reason {
		t.Helper()
		if err := e.SetState(benchState()); err != nil {
			t.Fatal(err)
		}
		v, err := e.Process(f)
		if err != nil {
			t.Fatal(err)
		}
		return v.Reason
	}
	if r := run(good); r != exo.ReasonAccept {
		t.Fatalf("sealed frame: %s, want ACCEPT", r)
	}
	if r := run(bad); r == exo.ReasonAccept {
		t.Skip("the engine accepts a wrong tag: this RTL has no tag check (BAD_TAG) yet")
	} else if r != exo.ReasonBadTag {
		t.Errorf("wrong tag: %s, want BAD_TAG", r)
	}
	if r := run(otherKey); r != exo.ReasonBadTag {
		t.Errorf("tag under another key: %s, want BAD_TAG", r)
	}
	if r := run(badGroup); r != exo.ReasonBadGroup {
		t.Errorf("wrong tag and group: %s, want BAD_GROUP (the group check comes first)", r)
	}
	// the key registers: another key makes the sealed frame BAD_TAG
	if err := e.SetKey([16]byte{15: 1}); err != nil {
		t.Fatal(err)
	}
	if r := run(good); r != exo.ReasonBadTag {
		t.Errorf("after SetKey(another key): %s, want BAD_TAG", r)
	}
	if r := run(otherKey); r != exo.ReasonAccept {
		t.Errorf("sealed under the new key: %s, want ACCEPT", r)
	}
}

// BenchmarkProcess: one in-order frame per Process call (each really moves
// the pointers: n=1, h=0), through the Engine. Reports frames/s of the
// simulation and cycles/frame (beats + 2-cycle decision + the idle cycle
// Process adds to catch a second verdict).
func BenchmarkProcess(b *testing.B) {
	e, s := openSim(b)
	st := exo.NewPointers(1, 1, 1<<20)
	st.Epoch = 7
	if err := e.SetState(st); err != nil {
		b.Fatal(err)
	}
	payload, _ := exo.AppendRecord(nil, make([]byte, 64))
	f := exo.Frame{Type: exo.FrameData, Group: 1, Epoch: 7, Count: 1, Payload: payload}
	raw, err := f.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	frame := EthernetFrame(testSrcMAC, raw)
	seqOff := exo.EthHeaderLen + exo.OffSeq
	key := goldvec.TestKey()
	c0 := s.Cycles()
	b.ResetTimer()
	for i := range b.N {
		binary.BigEndian.PutUint64(frame[seqOff:], uint64(i))
		sealExo(frame[exo.EthHeaderLen:], key) // ~0.1 us of the loop
		v, err := e.Process(frame)
		if err != nil || v.Reason != exo.ReasonAccept {
			b.Fatalf("frame %d: %v %v", i, v, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
	b.ReportMetric(float64(s.Cycles()-c0)/float64(b.N), "cycles/frame")
	b.ReportMetric(float64(len(frame)), "bytes/frame")
}

// BenchmarkProcessBatch: 256 minimum-size frames back to back per
// ProcessBatch call (the line-rate case): frames/s of the simulation and
// the engine's cycles/frame (8).
func BenchmarkProcessBatch(b *testing.B) {
	e, s := openSim(b)
	frames := rotation(b, 256)
	var cycles, n uint64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if err := e.SetState(benchState()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		vs, err := s.ProcessBatch(frames, 0)
		if err != nil {
			b.Fatal(err)
		}
		if vs[255].Reason != exo.ReasonAccept {
			b.Fatalf("last frame %v", vs[255])
		}
		cycles += vs[255].Cycle - vs[0].Cycle
		n += 255
	}
	b.StopTimer()
	b.ReportMetric(float64(256*b.N)/b.Elapsed().Seconds(), "frames/s")
	b.ReportMetric(float64(cycles)/float64(n), "cycles/frame")
}
