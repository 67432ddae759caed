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

// One verdict of the engine's sideband (verdict_* ports).
typedef struct {
	uint64_t seq;     // verdict_seq
	uint64_t cycle;   // the clock edge after which verdict_valid was high
	uint32_t latency; // cycles from the tlast beat to the verdict (the bench's count)
	uint8_t reason;   // verdict_reason
	uint8_t slow_path;
	uint8_t sender;
	uint8_t pad;
} exo_sim_verdict;

// Result codes of exo_sim_frames.
enum {
	EXO_SIM_OK = 0,
	EXO_SIM_TIMEOUT = -1,     // fewer verdicts than frames within the timeout
	EXO_SIM_EXTRA = -2,       // more verdicts than frames
	EXO_SIM_EMPTY_FRAME = -3, // a frame of 0 bytes (AXI-Stream has no empty packet)
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
int exo_sim_frames(exo_sim *s, const uint8_t *buf, const uint32_t *lens, uint32_t n,
		   uint32_t gap, uint32_t timeout, exo_sim_verdict *out, uint32_t *nout,
		   uint64_t *stalls);

#ifdef __cplusplus
}
#endif

#endif
