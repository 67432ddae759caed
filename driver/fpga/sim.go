//go:build fpgasim && cgo

package fpga

/*
#cgo CXXFLAGS: -std=c++17 -O2 -I${SRCDIR}/obj_vl -I/usr/share/verilator/include -I/usr/share/verilator/include/vltstd
#cgo LDFLAGS: ${SRCDIR}/obj_vl/Vexo_engine__ALL.a ${SRCDIR}/obj_vl/libverilated.a -lstdc++ -lpthread
#include <stdlib.h>
#include "fpgasim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/hw/gen/regs"
)

// SimBuilt reports whether this binary has the simulated back end (build
// tag fpgasim, after tools/build-fpga-sim.sh).
const SimBuilt = true

func (o SimOptions) withDefaults() SimOptions {
	if o.ResetCycles <= 0 {
		o.ResetCycles = 4
	}
	if o.Timeout <= 0 {
		o.Timeout = 10000
	}
	return o
}

// OpenSim builds a simulated engine: the Verilated RTL of
// hdl/rtl/exo_engine.v (MAX_HOSTS as tools/build-fpga-sim.sh verilated
// it), held in reset for opts.ResetCycles and released. Close frees it.
func OpenSim(opts SimOptions) (*Sim, error) {
	opts = opts.withDefaults()
	p := C.exo_sim_new(C.uint32_t(opts.ResetCycles))
	if p == nil {
		return nil, errors.New("fpga: sim: cannot allocate the model")
	}
	return &Sim{p: p, opts: opts}, nil
}

// Sim is the simulated engine: a Regs back end (the CSR port: one access
// per clock cycle) and a FrameEngine (the AXI-Stream receive port and the
// verdict sideband). The Verilated model is single-threaded: every method
// holds the Sim's mutex, so calls from several goroutines are serialized
// (one at a time), never concurrent.
type Sim struct {
	mu     sync.Mutex
	p      *C.exo_sim
	opts   SimOptions
	stalls uint64
	txbuf  []byte // the TX frames of one ProcessBatch
}

func (s *Sim) check() error {
	if s.p == nil {
		return errors.New("fpga: sim: closed")
	}
	return nil
}

func checkOff(off uint32) error {
	if off%4 != 0 || off >= regs.Size {
		return fmt.Errorf("fpga: sim: offset 0x%x outside the 0x%x-byte block or not 4-byte aligned", off, regs.Size)
	}
	return nil
}

// Read32 reads a CSR through csr_valid/csr_addr, csr_rdata/csr_rvalid.
func (s *Sim) Read32(off uint32) (uint32, error) {
	if err := checkOff(off); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return 0, err
	}
	var v C.uint32_t
	if C.exo_sim_csr_read(s.p, C.uint32_t(off), &v) != 0 {
		return 0, fmt.Errorf("fpga: sim: read 0x%03x: csr_rvalid did not rise", off)
	}
	return uint32(v), nil
}

// Write32 writes a CSR through csr_valid/csr_we/csr_addr/csr_wdata.
func (s *Sim) Write32(off, v uint32) error {
	if err := checkOff(off); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	C.exo_sim_csr_write(s.p, C.uint32_t(off), C.uint32_t(v))
	return nil
}

// Close frees the model.
func (s *Sim) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		C.exo_sim_free(s.p)
		s.p = nil
	}
	return nil
}

// Reset asserts rst for SimOptions.ResetCycles cycles: every register to
// its reset value (halted = 1, counters 0, mac_check 0).
func (s *Sim) Reset() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	C.exo_sim_reset(s.p, C.uint32_t(s.opts.ResetCycles))
	return nil
}

// Cycles returns the clock cycles simulated so far.
func (s *Sim) Cycles() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return 0
	}
	return uint64(C.exo_sim_cycles(s.p))
}

// Stalls returns the cycles a beat has waited for s_axis_tready so far
// (0 for the RTL of docs/hardware.md, which never stalls).
func (s *Sim) Stalls() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalls
}

// Process streams one whole Ethernet frame (byte 0 = first byte of the
// destination MAC) into s_axis and returns the engine's verdict from the
// sideband. Serialized with every other method of the Sim.
func (s *Sim) Process(frame []byte) (Verdict, error) {
	v, err := s.ProcessBatch([][]byte{frame}, 0)
	if err != nil {
		return Verdict{}, err
	}
	return v[0], nil
}

// ProcessBatch streams frames with gap idle cycles between them (0: back
// to back, as a MAC delivers them at line rate) and returns their
// verdicts in order, each with the frame the engine sent for it on its TX
// port (Verdict.TX, token mode), which it waits for.
func (s *Sim) ProcessBatch(frames [][]byte, gap int) ([]Verdict, error) {
	if len(frames) == 0 {
		return nil, nil
	}
	if gap < 0 {
		return nil, fmt.Errorf("fpga: sim: gap %d < 0", gap)
	}
	total := 0
	lens := make([]C.uint32_t, len(frames))
	for i, f := range frames {
		if len(f) == 0 || len(f) > MaxSimFrame {
			return nil, fmt.Errorf("fpga: sim: frame %d is %d bytes, want 1..%d", i, len(f), MaxSimFrame)
		}
		lens[i] = C.uint32_t(len(f))
		total += len(f)
	}
	buf := make([]byte, 0, total)
	for _, f := range frames {
		buf = append(buf, f...)
	}
	out := make([]C.exo_sim_verdict, len(frames))
	var nout, txused C.uint32_t
	var stalls C.uint64_t

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	// Room for a TX frame per received frame: the longest a fast path
	// sends (exo.MaxFastFrame after the Ethernet header).
	if need := len(frames) * (exo.EthHeaderLen + exo.MaxFastFrame); len(s.txbuf) < need {
		s.txbuf = make([]byte, need)
	}
	rc := C.exo_sim_frames(s.p, (*C.uint8_t)(unsafe.Pointer(&buf[0])), &lens[0], C.uint32_t(len(frames)),
		C.uint32_t(gap), C.uint32_t(s.opts.Timeout), &out[0], &nout, &stalls,
		(*C.uint8_t)(unsafe.Pointer(&s.txbuf[0])), C.uint32_t(len(s.txbuf)), &txused)
	s.stalls += uint64(stalls)
	switch rc {
	case C.EXO_SIM_OK:
	case C.EXO_SIM_TIMEOUT:
		return nil, fmt.Errorf("fpga: sim: %d verdicts for %d frames within %d cycles", nout, len(frames), s.opts.Timeout)
	case C.EXO_SIM_EXTRA:
		return nil, fmt.Errorf("fpga: sim: more verdicts than the %d frames", len(frames))
	case C.EXO_SIM_TX_OVERFLOW:
		return nil, fmt.Errorf("fpga: sim: the TX frames of %d frames exceed %d bytes", len(frames), len(s.txbuf))
	case C.EXO_SIM_TX_EXTRA:
		return nil, errors.New("fpga: sim: a frame on the TX port with no verdict_sent before it")
	case C.EXO_SIM_TX_TIMEOUT:
		return nil, fmt.Errorf("fpga: sim: a verdict_sent whose TX frame did not end within %d cycles", s.opts.Timeout)
	default:
		return nil, fmt.Errorf("fpga: sim: exo_sim_frames returned %d", rc)
	}
	vs := make([]Verdict, len(frames))
	for i, o := range out {
		fl := uint8(o.flags)
		vs[i] = Verdict{
			Reason:   exo.Reason(o.reason),
			SlowPath: o.slow_path != 0,
			Sender:   uint8(o.sender),
			Seq:      uint64(o.seq),
			Cycle:    uint64(o.cycle),
			Latency:  int(o.latency),
			Token: TokenVerdict{
				Record: fl&C.EXO_SIM_V_RECORD != 0, Armed: fl&C.EXO_SIM_V_ARMED != 0,
				Sent: fl&C.EXO_SIM_V_SENT != 0, Popped: fl&C.EXO_SIM_V_POPPED != 0,
				Handoff: fl&C.EXO_SIM_V_HANDOFF != 0, Halt: fl&C.EXO_SIM_V_HALT != 0,
				Kseq: uint64(o.kseq), QHead: uint64(o.qhead),
			},
		}
		if o.tx_len > 0 {
			vs[i].TX = append([]byte(nil), s.txbuf[o.tx_off:o.tx_off+o.tx_len]...)
			vs[i].TxLatency = int(o.tx_latency)
		}
	}
	return vs, nil
}

// Settle runs the clock with no frame in, as the engine's clock runs
// between two frames on the wire (the simulation runs only while it is
// driven), until no frame is being sent and the tag of the frame the next
// token would send is ready (tx_status.spec_ready), or for max cycles
// (default 1024: the candidate of the longest batch hashes in about 540).
// It returns the cycles it ran. Without it a token that comes right after
// a change of the state or the queue finds the tag not ready (a
// speculation miss, tx_spec_miss) although on the wire it would be.
func (s *Sim) Settle(max int) (int, error) {
	if max <= 0 {
		max = 1024
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return 0, err
	}
	var cycles C.uint32_t
	rc := C.exo_sim_settle(s.p, C.uint32_t(regs.TxStatus), C.uint32_t(regs.TxStatusSendingMask),
		C.uint32_t(regs.TxStatusSpecReadyMask), C.uint32_t(max), &cycles)
	if rc != C.EXO_SIM_OK {
		return int(cycles), errors.New("fpga: sim: a verdict or a TX beat while no frame was in (settle)")
	}
	return int(cycles), nil
}
