//go:build fpgasim && cgo

// fpgasim.cpp: the Verilated exo_engine (hdl/rtl/exo_engine.v) behind a C
// interface (fpgasim.h) for cgo. Build the model first:
// tools/build-fpga-sim.sh (docs/fpga.md).
//
// Clocking: inputs change while clk is low; tick() settles them (eval),
// raises clk (eval: the registers take their next values) and lowers it
// again without an eval (the design has no negedge logic; the next tick's
// first eval covers it). Registered outputs are read right after the
// rising edge, as the Verilog bench reads them at the falling edge.

#include "fpgasim.h"

#include <cstring>
#include <deque>
#include <memory>
#include <new>
#include <vector>

#include "Vexo_engine.h"
#include "verilated.h"

struct exo_sim {
	std::unique_ptr<VerilatedContext> ctx;
	std::unique_ptr<Vexo_engine> m;
	uint64_t cycles = 0; // rising edges so far
};

static void tick(exo_sim *s) {
	s->m->eval();
	s->m->clk = 1;
	s->m->eval();
	s->m->clk = 0;
	s->ctx->timeInc(1);
	s->cycles++;
}

static void idle_inputs(Vexo_engine *m) {
	m->s_axis_tdata = 0;
	m->s_axis_tkeep = 0;
	m->s_axis_tvalid = 0;
	m->s_axis_tlast = 0;
	m->csr_valid = 0;
	m->csr_we = 0;
	m->csr_addr = 0;
	m->csr_wdata = 0;
	// the TX port: always taken (a MAC that never back-pressures); the
	// queue's stream port: idle (the queue is written through the CSRs)
	m->m_axis_tx_tready = 1;
	m->s_axis_q_tdata = 0;
	m->s_axis_q_tkeep = 0;
	m->s_axis_q_tvalid = 0;
	m->s_axis_q_tlast = 0;
	m->s_axis_q_tuser = 0;
}

extern "C" exo_sim *exo_sim_new(uint32_t reset_cycles) {
	exo_sim *s = new (std::nothrow) exo_sim;
	if (!s)
		return nullptr;
	s->ctx.reset(new VerilatedContext);
	s->m.reset(new Vexo_engine{s->ctx.get(), "exo_engine"});
	s->m->clk = 0;
	idle_inputs(s->m.get());
	exo_sim_reset(s, reset_cycles);
	return s;
}

extern "C" void exo_sim_free(exo_sim *s) {
	if (!s)
		return;
	s->m->final();
	delete s;
}

extern "C" void exo_sim_reset(exo_sim *s, uint32_t cycles) {
	idle_inputs(s->m.get());
	s->m->rst = 1;
	for (uint32_t i = 0; i < cycles; i++)
		tick(s);
	s->m->rst = 0;
	tick(s);
}

extern "C" uint64_t exo_sim_cycles(const exo_sim *s) { return s->cycles; }

extern "C" void exo_sim_csr_write(exo_sim *s, uint32_t addr, uint32_t data) {
	Vexo_engine *m = s->m.get();
	m->csr_valid = 1;
	m->csr_we = 1;
	m->csr_addr = addr & 0xFFF;
	m->csr_wdata = data;
	tick(s);
	m->csr_valid = 0;
	m->csr_we = 0;
}

extern "C" int exo_sim_csr_read(exo_sim *s, uint32_t addr, uint32_t *data) {
	Vexo_engine *m = s->m.get();
	m->csr_valid = 1;
	m->csr_we = 0;
	m->csr_addr = addr & 0xFFF;
	tick(s);
	m->csr_valid = 0;
	if (!m->csr_rvalid)
		return -1;
	*data = m->csr_rdata;
	return 0;
}

extern "C" int exo_sim_frames(exo_sim *s, const uint8_t *buf, const uint32_t *lens, uint32_t n,
			      uint32_t gap, uint32_t timeout, exo_sim_verdict *out, uint32_t *nout,
			      uint64_t *stalls, uint8_t *txbuf, uint32_t txcap, uint32_t *txused) {
	Vexo_engine *m = s->m.get();
	std::deque<uint64_t> tlast;   // edge of each tlast handshake, oldest first
	std::deque<uint32_t> waiting; // verdicts with verdict_sent whose TX frame has not started
	std::vector<uint64_t> tlast_of(n, 0); // the tlast edge of each verdict's frame
	int64_t cur = -1;             // the verdict whose TX frame is on the port now
	uint32_t got = 0, used = 0;
	int err = EXO_SIM_OK;
	*stalls = 0;
	*txused = 0;

	for (uint32_t i = 0; i < n; i++)
		if (lens[i] == 0)
			return EXO_SIM_EMPTY_FRAME;

	// after every rising edge: collect a verdict, then a TX beat
	auto monitor = [&]() {
		if (m->verdict_valid) {
			if (got >= n) {
				if (!err)
					err = EXO_SIM_EXTRA;
			} else {
				exo_sim_verdict &v = out[got];
				v.seq = m->verdict_seq;
				v.cycle = s->cycles;
				v.kseq = m->verdict_kseq;
				v.qhead = m->verdict_qhead;
				v.reason = m->verdict_reason;
				v.slow_path = m->verdict_slow_path;
				v.sender = m->verdict_sender;
				v.flags = (m->verdict_record ? EXO_SIM_V_RECORD : 0) | (m->verdict_armed ? EXO_SIM_V_ARMED : 0) |
					  (m->verdict_sent ? EXO_SIM_V_SENT : 0) | (m->verdict_popped ? EXO_SIM_V_POPPED : 0) |
					  (m->verdict_handoff ? EXO_SIM_V_HANDOFF : 0) | (m->verdict_halt ? EXO_SIM_V_HALT : 0);
				v.latency = 0;
				v.tx_off = 0;
				v.tx_len = 0;
				v.tx_latency = 0;
				if (!tlast.empty()) {
					// tlast taken at edge E, verdict_valid high after edge E+1
					// (pointers updated at that edge): 2 cycles as the bench counts
					v.latency = (uint32_t)(s->cycles - tlast.front() + 1);
					tlast_of[got] = tlast.front();
					tlast.pop_front();
				}
				if (m->verdict_sent)
					waiting.push_back(got);
				got++;
			}
		}
		if (!m->m_axis_tx_tvalid)
			return;
		if (cur < 0) {
			// a first beat: the frame of the oldest verdict that sent
			if (waiting.empty()) {
				if (!err)
					err = EXO_SIM_TX_EXTRA;
				return;
			}
			cur = waiting.front();
			waiting.pop_front();
			out[cur].tx_off = used;
			out[cur].tx_latency = (uint32_t)(s->cycles - tlast_of[cur] + 1);
		}
		uint64_t data = m->m_axis_tx_tdata;
		uint32_t keep = m->m_axis_tx_tkeep;
		for (uint32_t k = 0; k < 8; k++) {
			if (!(keep & (1u << k)))
				continue;
			if (used >= txcap) {
				if (!err)
					err = EXO_SIM_TX_OVERFLOW;
				break;
			}
			txbuf[used++] = (uint8_t)(data >> (8 * k));
			out[cur].tx_len++;
		}
		if (m->m_axis_tx_tlast)
			cur = -1;
	};

	const uint8_t *p = buf;
	for (uint32_t i = 0; i < n; i++) {
		if (i > 0)
			for (uint32_t g = 0; g < gap; g++) {
				tick(s);
				monitor();
			}
		uint32_t len = lens[i];
		uint32_t nbeats = (len + 7) / 8;
		for (uint32_t b = 0; b < nbeats; b++) {
			uint64_t data = 0;
			uint32_t keep = 0;
			for (uint32_t k = 0; k < 8; k++) {
				uint32_t idx = b * 8 + k;
				if (idx < len) {
					data |= (uint64_t)p[idx] << (8 * k);
					keep |= 1u << k;
				}
			}
			m->s_axis_tdata = data;
			m->s_axis_tkeep = keep;
			m->s_axis_tvalid = 1;
			m->s_axis_tlast = b == nbeats - 1;
			for (;;) {
				m->eval(); // tready may depend on the inputs
				bool ready = m->s_axis_tready;
				tick(s);
				monitor();
				if (ready)
					break;
				(*stalls)++;
			}
			if (b == nbeats - 1)
				tlast.push_back(s->cycles);
		}
		m->s_axis_tvalid = 0;
		m->s_axis_tlast = 0;
		m->s_axis_tkeep = 0;
		m->s_axis_tdata = 0;
		p += len;
	}
	for (uint32_t w = 0; w < timeout && got < n; w++) {
		tick(s);
		monitor();
	}
	// the TX frames of the last verdicts
	for (uint32_t w = 0; w < timeout && (!waiting.empty() || cur >= 0); w++) {
		tick(s);
		monitor();
	}
	// one more cycle: a second verdict for the last frame would show here
	tick(s);
	monitor();
	*nout = got;
	*txused = used;
	if (err)
		return err;
	if (got < n)
		return EXO_SIM_TIMEOUT;
	if (!waiting.empty() || cur >= 0)
		return EXO_SIM_TX_TIMEOUT;
	return EXO_SIM_OK;
}

extern "C" int exo_sim_settle(exo_sim *s, uint32_t status_addr, uint32_t busy_mask, uint32_t ready_mask,
			      uint32_t max, uint32_t *cycles) {
	Vexo_engine *m = s->m.get();
	uint32_t c = 0;
	int err = EXO_SIM_OK;
	while (c < max) {
		uint32_t v = 0;
		bool ok = exo_sim_csr_read(s, status_addr, &v) == 0;
		c++;
		if (m->verdict_valid || m->m_axis_tx_tvalid)
			err = EXO_SIM_UNEXPECTED;
		if (ok && (v & busy_mask) == 0 && (v & ready_mask) == ready_mask)
			break;
	}
	*cycles = c;
	return err;
}
