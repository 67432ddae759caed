//go:build fpgasim && cgo

// fpgasim.h: the C interface of the Verilated exo_engine (fpgasim.cpp),
// called from sim.go through cgo. One exo_sim is one engine with its own
// VerilatedContext; the functions are not thread-safe (the Go side holds a
// mutex around every call).
#ifndef EXO_FPGASIM_H
#define EXO_FPGASIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct exo_sim exo_sim;

// One verdict of the engine's sideband (verdict_* ports), with the
// token-mode sideband (register map 1.3: verdict_record ... verdict_qhead)
// and the frame the engine sent on its TX port for it.
typedef struct {
	uint64_t seq;        // verdict_seq
	uint64_t cycle;      // the clock edge after which verdict_valid was high
	uint64_t kseq;       // verdict_kseq: tx_kseq before the record
	uint64_t qhead;      // verdict_qhead: tx_qhead after it
	uint32_t latency;    // cycles from the tlast beat to the verdict (the bench's count)
	uint32_t tx_off;     // the TX frame (EXO_SIM_V_SENT): offset in txbuf
	uint32_t tx_len;     // its bytes (Ethernet header included); 0: none
	uint32_t tx_latency; // cycles from the tlast beat to the TX frame's first beat (same count)
	uint8_t reason;      // verdict_reason
	uint8_t slow_path;
	uint8_t sender;
	uint8_t flags;       // EXO_SIM_V_*: verdict_record, _armed, _sent, _popped, _handoff, _halt
} exo_sim_verdict;

// exo_sim_verdict.flags
enum {
	EXO_SIM_V_RECORD = 1,
	EXO_SIM_V_ARMED = 2,
	EXO_SIM_V_SENT = 4,
	EXO_SIM_V_POPPED = 8,
	EXO_SIM_V_HANDOFF = 16,
	EXO_SIM_V_HALT = 32,
};

// Result codes of exo_sim_frames and exo_sim_settle.
enum {
	EXO_SIM_OK = 0,
	EXO_SIM_TIMEOUT = -1,     // fewer verdicts than frames within the timeout
	EXO_SIM_EXTRA = -2,       // more verdicts than frames
	EXO_SIM_EMPTY_FRAME = -3, // a frame of 0 bytes (AXI-Stream has no empty packet)
	EXO_SIM_TX_OVERFLOW = -4, // the TX frames do not fit txbuf
	EXO_SIM_TX_EXTRA = -5,    // a TX beat with no verdict_sent waiting for its frame
	EXO_SIM_TX_TIMEOUT = -6,  // a verdict_sent whose frame did not end within the timeout
	EXO_SIM_UNEXPECTED = -7,  // exo_sim_settle: a verdict or a TX beat with no frame in
};

// exo_sim_new builds the model (MAX_HOSTS as verilated) and holds it in
// reset for reset_cycles cycles; NULL if out of memory.
exo_sim *exo_sim_new(uint32_t reset_cycles);
void exo_sim_free(exo_sim *s);
// exo_sim_reset asserts rst for the given cycles (every register to its
// reset value; the roster MAC table keeps its contents, as in hardware).
void exo_sim_reset(exo_sim *s, uint32_t cycles);
// exo_sim_cycles is the number of rising clock edges since exo_sim_new.
uint64_t exo_sim_cycles(const exo_sim *s);

// exo_sim_csr_write writes one 32-bit CSR (one cycle).
void exo_sim_csr_write(exo_sim *s, uint32_t addr, uint32_t data);
// exo_sim_csr_read reads one 32-bit CSR (one cycle); returns 0, or -1 if
// csr_rvalid did not rise.
int exo_sim_csr_read(exo_sim *s, uint32_t addr, uint32_t *data);

// exo_sim_frames streams n frames (frame i is lens[i] bytes of buf, the
// frames back to back in buf) into s_axis as 64-bit beats, byte 0 of a
// beat in tdata[7:0], tkeep covering the bytes of the last beat, tlast on
// it; gap idle cycles between two frames (0: back to back); beats wait
// while s_axis_tready is low. It collects the verdicts in order into
// out[0..n-1] and waits at most timeout cycles after the last beat.
// *nout is the number of verdicts seen, *stalls the cycles a beat waited
// for tready.
//
// m_axis_tx_tready is held 1. Every TX frame (the beats from tvalid to
// tlast, the bytes tkeep names) goes into txbuf (txcap bytes; *txused
// filled) and to the oldest verdict with verdict_sent whose frame has not
// come yet; after the last verdict it waits (at most timeout cycles) until
// every such frame has ended.
int exo_sim_frames(exo_sim *s, const uint8_t *buf, const uint32_t *lens, uint32_t n,
		   uint32_t gap, uint32_t timeout, exo_sim_verdict *out, uint32_t *nout,
		   uint64_t *stalls, uint8_t *txbuf, uint32_t txcap, uint32_t *txused);

// exo_sim_settle runs the clock with no frame in, as the engine's clock
// runs between two frames on the wire: it reads the CSR status_addr
// (tx_status; one read per cycle) until the bits of busy_mask are 0 and
// those of ready_mask are 1 (no frame being sent, the tag of the frame
// the next token would send ready), or max cycles went by. *cycles is the
// cycles it ran. EXO_SIM_UNEXPECTED if a verdict or a TX beat shows
// meanwhile.
int exo_sim_settle(exo_sim *s, uint32_t status_addr, uint32_t busy_mask, uint32_t ready_mask,
		   uint32_t max, uint32_t *cycles);

#ifdef __cplusplus
}
#endif

#endif
