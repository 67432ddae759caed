package host

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/driver/xdp"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/exo/token"
)

// setupToken builds token mode (xdp_token on, docs/token.md): it loads the
// XDP program, with its maps pinned per data directory when the daemon
// keeps a durable log (so that a killed daemon's records reach the next
// one), halts it, puts it in front of d (SetOffload: the roster MACs and
// the key slots; the pointers are the token driver's to write), hands its
// token-mode handle to d (SetToken: a takeover steps the records the last
// daemon did not release), then attaches it. It returns the fast path and
// the function that detaches it: after a clean stop, the pins are
// removed too (nothing is left to take over).
func setupToken(cfg *daemon.Config, d *daemon.Daemon, log *slog.Logger) (daemon.Offload, func(), error) {
	pins := ""
	if cfg.DataDir != "" {
		var err error
		if pins, err = PinDir(cfg); err != nil {
			return nil, nil, err
		}
		mounted, err := xdp.MountBPF(cfg.BPFDir)
		if err != nil {
			return nil, nil, fmt.Errorf("xdp_token: %w (bpf_dir)", err)
		}
		if mounted {
			log.Warn("token mode: mounted a bpffs on bpf_dir; in a mount namespace of this process alone (ip netns exec) it goes with the process, and a killed daemon's records with it (mount one first where the restarts see it: exo lab up does)", "bpf_dir", cfg.BPFDir)
		}
		if !d.Restarted() {
			// An empty (or wiped) durable log: the records of the maps
			// pinned there belong to a log that is gone.
			if err := xdp.RemovePins(pins); err != nil {
				return nil, nil, err
			}
		}
	}
	prog, err := xdp.LoadWith(xdp.LoadOptions{PinDir: pins})
	if err != nil {
		return nil, nil, fmt.Errorf("xdp_token: %w", err)
	}
	takeOver := prog.Pinned()
	tok, err := prog.Token(d.MAC())
	if err != nil {
		prog.Close()
		return nil, nil, fmt.Errorf("xdp_token: %w", err)
	}
	x := &tokenOffload{xdpOffload: xdpOffload{prog: prog}, tok: tok}
	fail := func(err error) (daemon.Offload, func(), error) {
		x.Close()
		return nil, nil, fmt.Errorf("xdp_token: %w", err)
	}
	// Halted before anything else: a pinned state may say armed.
	if _, err := tok.Halt(); err != nil {
		return fail(err)
	}
	if err := d.SetOffload(x); err != nil {
		return fail(err)
	}
	if err := tok.SetMinFrame(d.TokenMinFrame()); err != nil {
		d.ClearOffload()
		return fail(err)
	}
	if err := d.SetToken(&tokenPath{tok: tok, prog: prog}, takeOver); err != nil {
		d.ClearOffload()
		return fail(err)
	}
	// Generic mode on a veth (native XDP_TX does not reach a bridge from a
	// veth: docs/xdp.md section 8); xdp_mode decides elsewhere.
	mode := cfg.XDPMode
	if mode == "" || mode == "auto" {
		if drv, err := driverOf(cfg.Interface); err == nil && drv == "veth" {
			mode = "generic"
		}
	}
	if err := x.attach(cfg.Interface, mode, log); err != nil {
		d.ClearOffload()
		return fail(err)
	}
	log.Info("token mode: the XDP program sends this host's frames", "pinned", pins != "", "took_over", takeOver)
	return x, func() {
		if err := x.Close(); err != nil {
			log.Warn("detaching XDP", "err", err)
		}
	}, nil
}

// PinDir is where token mode pins its maps: one directory per durable log
// (a hash of data_dir's absolute path) under bpf_dir.
// A runner that kills a daemon for good removes it (xdp.RemovePins): the
// pinned ring keeps its memory until then.
func PinDir(cfg *daemon.Config) (string, error) {
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return "", fmt.Errorf("xdp_token: data_dir: %w", err)
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(cfg.BPFDir, "exo-"+hex.EncodeToString(sum[:8])), nil
}

// tokenOffload is the XDP program in token mode as the daemon's Offload:
// the roster MACs, the key slots and the counters as in xdpOffload; the
// pointers are written by the token driver (exo_ctl), never by SetState.
type tokenOffload struct {
	xdpOffload
	tok *xdp.Token
}

// Name is the offload mode the status and the metrics show.
func (x *tokenOffload) Name() string { return "xdp-token" }

// SetState does nothing: in token mode the program moves its state
// itself, and the control plane writes it by compare-and-set (Token.Arm).
func (x *tokenOffload) SetState(exo.Pointers) error { return nil }

// Close closes the token-mode handle, then detaches and closes the
// program (its pinned maps stay for the next daemon until Unpin).
func (x *tokenOffload) Close() error {
	x.tok.Close()
	return x.xdpOffload.Close()
}

// Unpin removes the pinned maps: a clean stop left nothing to take over.
func (x *tokenOffload) Unpin() error { return x.prog.Unpin() }

// tokenPath adapts the program's token-mode handle to the daemon's
// TokenPath (package exo/token's FastPath, with the wait and counters).
type tokenPath struct {
	tok  *xdp.Token
	prog *xdp.Program
}

func (t *tokenPath) Halt() (exo.Engine, error) {
	e, err := t.tok.Halt()
	if err == xdp.ErrLost {
		err = fmt.Errorf("%w: %v", token.ErrLost, err)
	}
	return e, err
}

func (t *tokenPath) Set(e exo.Engine) (bool, error) { return t.tok.Arm(e) }

func (t *tokenPath) Push(b exo.Batch) (bool, error) { return t.tok.Push(b) }

func (t *tokenPath) Reclaim() (int, error) {
	bs, err := t.tok.Reclaim()
	return len(bs), err
}

func (t *tokenPath) Records(fn func(*token.Record)) (int, error) {
	var r token.Record
	return t.tok.Records(func(x *xdp.Record) {
		r = token.Record{Kseq: x.Kseq, QHead: x.QHead, TxTag: x.TxTag, Reason: x.Reason, Armed: x.Armed,
			Sent: x.Sent, Popped: x.Popped, Handoff: x.Handoff, Halt: x.Halt, Src: x.Src, Frame: x.Frame, Written: x.Written}
		fn(&r)
	})
}

func (t *tokenPath) Since(written time.Duration) time.Duration {
	if written == 0 {
		return 0
	}
	return xdp.MonoSince(written)
}

func (t *tokenPath) SetUrgentOnly(on bool) { t.tok.SetUrgentOnly(on) }

func (t *tokenPath) Release() error { return t.tok.Release() }

func (t *tokenPath) Taken(i uint64) (exo.Batch, bool) { return t.tok.Taken(i) }

func (t *tokenPath) Wait(deadline time.Time) error {
	err := t.tok.Wait(deadline)
	if err == xdp.ErrClosed {
		return net.ErrClosed
	}
	return err
}

func (t *tokenPath) TokenCounters() (map[string]uint64, error) {
	c, err := t.prog.TokenCounters()
	return map[string]uint64{"TX": c.TX, "TX_EMPTY": c.TXEmpty, "HANDOFF": c.Handoff, "TX_NOROOM": c.TXNoRoom,
		"RING_FULL": c.RingFull, "LOST": c.Lost, "MODE": c.Mode, "TX_ERR": c.TXErr}, err
}
