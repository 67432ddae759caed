package host

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/driver/fpga"
	"github.com/exo-rack/exo/exo"
)

// setupFPGAToken builds token mode on the simulated FPGA engine
// (fpga_token on, offload fpga-sim; docs/token.md section 7): it opens the
// engine, puts it in front of d (SetOffload: the roster MACs and the key
// slots; the pointers are the token driver's to write), hands its
// token-mode handle to d (SetToken, which arms it when the log is in the
// plain case), then starts the engine's wire: a goroutine that plays the
// NIC on conn, the daemon's socket, which the daemon does not read in
// token mode. It returns the fast path and the function that stops the
// wire (once the daemon closed conn) and frees the engine.
func setupFPGAToken(cfg *daemon.Config, d *daemon.Daemon, conn daemon.FrameConn, log *slog.Logger) (daemon.Offload, func(), error) {
	eng, _, err := fpga.OpenSimEngine(fpga.SimOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("fpga_token: offload fpga-sim: %w", err)
	}
	fail := func(err error) (daemon.Offload, func(), error) {
		eng.Close()
		return nil, nil, fmt.Errorf("fpga_token: %w", err)
	}
	info := eng.Info()
	if len(cfg.Roster) > info.MaxHosts {
		return fail(fmt.Errorf("the roster has %d hosts, this engine build holds %d (MAX_HOSTS)", len(cfg.Roster), info.MaxHosts))
	}
	tok, err := fpga.NewToken(eng, fpga.TokenOptions{Src: d.MAC()})
	if err != nil {
		return fail(err)
	}
	x := &fpgaTokenOffload{eng: eng, tok: tok}
	if err := d.SetOffload(x); err != nil {
		return fail(err)
	}
	if err := d.SetToken(tok, false); err != nil {
		d.ClearOffload()
		return fail(err)
	}
	w := &wire{conn: conn, tok: tok, minFrame: d.TokenMinFrame(), log: log, done: make(chan struct{})}
	go w.run()
	log.Info("token mode: the simulated FPGA engine sends this host's frames", "engine", info.String(), "min_frame", w.minFrame)
	return x, func() {
		// The daemon closed conn when it stopped (or Host.Close did):
		// the wire ends, then the engine goes.
		w.stop()
		if err := eng.Close(); err != nil {
			log.Warn("closing the simulated engine", "err", err)
		}
	}, nil
}

// fpgaTokenOffload is the simulated engine in token mode as the daemon's
// Offload: the roster MACs, the key slots and the counters per reason;
// the pointers are written by the token driver (Token.Set), never by
// SetState.
type fpgaTokenOffload struct {
	eng *fpga.Engine
	tok *fpga.Token
}

// Name is the offload mode the status and the metrics show.
func (x *fpgaTokenOffload) Name() string { return "fpga-sim-token" }

// SetState does nothing: in token mode the engine moves its state itself,
// and the control plane writes it by compare-and-set (Token.Set).
func (x *fpgaTokenOffload) SetState(exo.Pointers) error { return nil }

// SetRoster rewrites the engine's MAC table (daemon.RosterOffload), and
// the Go rule's beside it.
func (x *fpgaTokenOffload) SetRoster(macs []net.HardwareAddr) error { return x.tok.SetRoster(macs) }

// SetKeys writes both key slots of the engine (daemon.KeyOffload), and
// the Go rule's.
func (x *fpgaTokenOffload) SetKeys(ring exo.KeyRing) error { return x.tok.SetKeys(ring) }

// Counters returns the engine's verdicts, per reason.
func (x *fpgaTokenOffload) Counters() ([exo.NumReasons]uint64, error) {
	var out [exo.NumReasons]uint64
	c, err := x.eng.Counters()
	for r, v := range c.PerReason {
		out[r] = uint64(v)
	}
	return out, err
}

// Close does nothing: the engine goes when the wire has stopped (the
// function setupFPGAToken returns).
func (x *fpgaTokenOffload) Close() error { return nil }

// wire plays the NIC of the simulated engine: every frame the host's
// socket receives goes through the engine (Token.Receive), whose answer
// goes out on the socket right away, padded to minFrame.
type wire struct {
	conn     daemon.FrameConn
	tok      *fpga.Token
	minFrame int
	log      *slog.Logger
	done     chan struct{}
	stopOnce sync.Once
	stopping atomic.Bool

	buf    []byte // the answer after its Ethernet header, padded
	logged int    // differences logged so far
}

// run reads the socket until it is closed.
func (w *wire) run() {
	defer close(w.done)
	defer w.tok.Close() // the daemon's wait on records ends too
	msgs := make([]broadcast.Message, broadcast.MaxBatch)
	for i := range msgs {
		msgs[i].Buf = make([]byte, w.conn.MTU()+64)
		msgs[i].Src = make(net.HardwareAddr, 6)
	}
	eth := make([]byte, 0, exo.EthHeaderLen+w.conn.MTU()+64)
	var errAt time.Time
	for {
		n, err := w.conn.ReadFrames(msgs)
		switch {
		case err == nil:
		case errors.Is(err, net.ErrClosed):
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			if w.stopping.Load() {
				return
			}
			// Nobody else reads this socket; a deadline is stale.
			w.conn.SetReadDeadline(time.Time{})
			continue
		default:
			if time.Since(errAt) > 5*time.Second {
				w.log.Warn("fpga_token: reading the socket", "err", err)
				errAt = time.Now()
			}
			time.Sleep(time.Millisecond)
			continue
		}
		for i := 0; i < n; i++ {
			m := &msgs[i]
			if m.Truncated {
				continue
			}
			eth = append(eth[:0], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
			eth = append(eth, m.Src...)
			eth = append(eth, byte(exo.EtherType>>8), byte(exo.EtherType&0xff))
			eth = append(eth, m.Buf[:m.N]...)
			if _, err := w.tok.Receive(eth, w.send); err != nil {
				if errors.Is(err, fpga.ErrTokenClosed) {
					return
				}
				if time.Since(errAt) > 5*time.Second {
					w.log.Error("fpga_token: the simulated engine failed on a frame", "err", err)
					errAt = time.Now()
				}
			}
		}
		if w.tok.NumDifferences() > w.logged {
			// The frames on which the engine and the Go rule differed
			// (never expected): the first ones, once.
			for _, s := range w.tok.Differences()[w.logged:] {
				w.log.Error("fpga_token: the engine and the Go rule differ", "frame", s)
				w.logged++
			}
		}
	}
}

// send puts the engine's answer on the wire: the socket writes its own
// Ethernet header (the same: broadcast, this host's MAC, 0x88B5), so the
// bytes after the engine's go, padded to minFrame.
func (w *wire) send(eth []byte) error {
	w.buf = append(w.buf[:0], eth[exo.EthHeaderLen:]...)
	for len(w.buf) < w.minFrame-exo.EthHeaderLen {
		w.buf = append(w.buf, 0)
	}
	return w.conn.WriteFrame(w.buf)
}

// stop ends the wire and the Token, and waits for the wire's goroutine:
// the owner of the socket closes it first as a rule; a read still
// blocked is woken by a deadline.
func (w *wire) stop() {
	w.stopOnce.Do(func() {
		w.stopping.Store(true)
		w.tok.Close()
		w.conn.SetReadDeadline(time.Now())
		<-w.done
	})
}
