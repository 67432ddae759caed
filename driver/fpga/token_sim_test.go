//go:build fpgasim && cgo

package fpga

// Token (the engine in token mode as the control plane drives it) on a
// rack in memory: every host a core (exo.Node), its control plane
// (exo/token's Driver) and a simulated engine behind a Token, the frames
// the engines and the cores send delivered to every other host in order.
// What the daemon runs on the lab rack (fpga_token), without the sockets.

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/exo/token"
)

type ringHost struct {
	nd  *exo.Node
	tok *Token
	drv *token.Driver
	mac net.HardwareAddr
	got map[uint64]bool // the records agreed, by their number
}

type tokenRing struct {
	t     *testing.T
	hosts []*ringHost
	wire  [][]byte // Ethernet frames in flight, in order
}

func newTokenRing(t *testing.T, n int) *tokenRing {
	var key [exo.TagKeyLen]byte
	for k := range key {
		key[k] = byte(0x40 + k)
	}
	r := &tokenRing{t: t}
	var macs []net.HardwareAddr
	for i := range n {
		macs = append(macs, net.HardwareAddr{0x02, 0xe0, 0, 0, 1, byte(i)})
	}
	for i := range n {
		nd, err := exo.NewNode(exo.Config{ID: uint8(i), Hosts: n, Group: 7, TagKey: key, IdleRotations: 1 << 20,
			MaxBatchBytes: 512})
		if err != nil {
			t.Fatal(err)
		}
		e, _, err := OpenSimEngine(SimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		tok, err := NewToken(e, TokenOptions{Src: macs[i]})
		if err != nil {
			t.Fatal(err)
		}
		if err := tok.SetKeys(nd.Keys()); err != nil {
			t.Fatal(err)
		}
		if err := tok.SetRoster(macs); err != nil {
			t.Fatal(err)
		}
		h := &ringHost{nd: nd, tok: tok, mac: macs[i], got: map[uint64]bool{}}
		h.drv = token.New(nd, tok, token.Config{MaxBatch: 512, Ready: func() error { r.ready(h); return nil }})
		r.hosts = append(r.hosts, h)
	}
	for _, h := range r.hosts {
		r.sync(h)
	}
	return r
}

// ready carries out a host's Ready: its core's frames on the wire, the
// records of its agreed entries noted.
func (r *tokenRing) ready(h *ringHost) {
	if !h.nd.HasReady() {
		return
	}
	rd := h.nd.Ready()
	for i := range rd.Frames {
		b, err := rd.Frames[i].AppendBinary(nil)
		if err != nil {
			r.t.Fatal(err)
		}
		r.wire = append(r.wire, EthernetFrame(h.mac, b))
	}
	for i := range rd.Agreed {
		_ = rd.Agreed[i].Records(func(rec []byte) error {
			h.got[binary.BigEndian.Uint64(rec)] = true
			return nil
		})
	}
	h.nd.Advance()
}

func (r *tokenRing) sync(h *ringHost) {
	r.ready(h)
	if _, err := h.drv.Sync(); err != nil {
		r.t.Fatal(err)
	}
	r.ready(h)
	if err := h.drv.Release(); err != nil {
		r.t.Fatal(err)
	}
}

// TestTokenRing: 5 hosts whose simulated engines pass the token and send
// the records their control planes queue; the control planes read their
// records every few frames (as a daemon reads them in batches). Every
// record is agreed at every host, the engines agreed with the Go rule on
// every frame (RULE_DIFFERS 0) and on their state at every halt, the
// control planes never desynced, and the engines sent nearly every frame
// (the cores only started the ring).
func TestTokenRing(t *testing.T) {
	const n, perHost = 5, 60
	r := newTokenRing(t, n)
	h0 := r.hosts[0]
	if err := h0.drv.Quiesce(); err != nil {
		t.Fatal(err)
	}
	h0.nd.Broadcast()
	r.sync(h0)
	next := make([]int, n)
	frames := 0
	start := time.Now()
	for done := false; !done; {
		if len(r.wire) == 0 {
			t.Fatalf("the ring stopped after %d frames", frames)
		}
		eth := r.wire[0]
		r.wire = r.wire[1:]
		frames++
		for _, h := range r.hosts {
			if string(eth[6:12]) == string(h.mac) {
				continue
			}
			if _, err := h.tok.Receive(eth, func(tx []byte) error {
				r.wire = append(r.wire, append([]byte(nil), tx...))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		for i, h := range r.hosts {
			if next[i] < perHost && h.drv.Pending() < 8 && frames%3 == i%3 {
				rec := make([]byte, 8+i)
				binary.BigEndian.PutUint64(rec, uint64(i)<<32|uint64(next[i]))
				if err := h.drv.Propose(rec); err != nil {
					t.Fatal(err)
				}
				next[i]++
			}
			if frames%7 == i {
				if _, err := h.tok.Records(h.drv.Step); err != nil {
					t.Fatal(err)
				}
				r.sync(h)
			}
		}
		done = true
		for _, h := range r.hosts {
			done = done && len(h.got) == n*perHost
		}
		if frames > 20000 {
			t.Fatalf("not every record agreed after %d frames", frames)
		}
	}
	for i, h := range r.hosts {
		c, err := h.tok.TokenCounters()
		if err != nil {
			t.Fatal(err)
		}
		st := h.drv.Stats()
		if c["RULE_DIFFERS"] != 0 || c["STATE_DIFFERS"] != 0 || st.Desyncs != 0 || st.Unlogged != 0 {
			t.Errorf("host %d: rule differs %d, state differs %d, desyncs %d, unlogged %d: %v", i, c["RULE_DIFFERS"],
				c["STATE_DIFFERS"], st.Desyncs, st.Unlogged, h.tok.Differences())
		}
		if c["TX"] == 0 || st.Sent == 0 || c["SPEC_MISS"] != 0 {
			t.Errorf("host %d: the engine sent %d frames (%d speculation misses), the control plane saw %d", i, c["TX"], c["SPEC_MISS"], st.Sent)
		}
		t.Logf("host %d: engine %v; control plane %+v", i, c, st)
	}
	t.Logf("%d records of %d hosts agreed everywhere in %d frames (%v)", n*perHost, n, frames, time.Since(start))
}

// TestTokenWait: Wait returns at once while records wait, at its
// deadline when none comes, when a record worth it comes, and with
// net.ErrClosed after Close; urgent-only, an agreement of nothing does
// not wake it.
func TestTokenWait(t *testing.T) {
	r := newTokenRing(t, 3)
	h := r.hosts[1]
	if err := h.tok.Wait(time.Now().Add(5 * time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Wait on nothing: %v", err)
	}
	// A frame of host 0 (host 1's predecessor): an ACCEPT, answered.
	h0 := r.hosts[0]
	if err := h0.drv.Quiesce(); err != nil {
		t.Fatal(err)
	}
	h0.nd.Broadcast()
	r.ready(h0)
	woke := make(chan error, 1)
	h.tok.SetUrgentOnly(true)
	go func() { woke <- h.tok.Wait(time.Now().Add(200 * time.Millisecond)) }()
	time.Sleep(20 * time.Millisecond)
	var sent [][]byte
	if _, err := h.tok.Receive(r.wire[0], func(tx []byte) error { sent = append(sent, tx); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 {
		t.Fatalf("host 1 answered its predecessor's frame with %d frames", len(sent))
	}
	if err := <-woke; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("urgent-only Wait woken by a plain ACCEPT: %v", err)
	}
	if err := h.tok.Wait(time.Now().Add(time.Second)); err != nil {
		t.Errorf("Wait with a record waiting: %v", err)
	}
	k := 0
	if _, err := h.tok.Records(func(rec *token.Record) {
		k++
		if !rec.Sent || rec.Reason != exo.ReasonAccept || len(rec.Src) != 6 || rec.TxTag == 0 {
			t.Errorf("record %+v", rec)
		}
	}); err != nil || k != 1 {
		t.Fatalf("records: %d %v", k, err)
	}
	go func() { woke <- h.tok.Wait(time.Time{}) }()
	time.Sleep(10 * time.Millisecond)
	h.tok.Close()
	if err := <-woke; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Wait after Close: %v", err)
	}
	if _, err := h.tok.Receive(r.wire[0], func([]byte) error { return nil }); !errors.Is(err, ErrTokenClosed) {
		t.Errorf("Receive after Close: %v", err)
	}
}
