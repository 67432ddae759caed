// exo_tx_tb: self-checking bench of the engine's transmit side (exo_tx)
// against the transmit cases of the golden vectors (testdata/vectors/
// vectors_tx.hex, docs/vectors.md section 8: exo.Engine.Step), under
// Icarus (iverilog -g2012) and Verilator 5 (--binary --timing).
//
// For every record: arm the engine (the pointers, the tx registers, the
// keys, the queue: batch i of the case in slot (qhead+i) mod QUEUE_SLOTS
// through the CSR window) unless the record is a CHAINED stream step (then
// the engine carries its state from the step before, and only the batches
// the control plane queued meanwhile are pushed); stream an Ethernet
// header and the frame; then compare:
//   - the verdict and its record sideband (record, sent, popped, handoff,
//     halt, armed, the kseq before and the qhead after);
//   - the frame on the TX port byte for byte: the Ethernet header (the
//     tx_dst_mac, tx_src_mac registers, EtherType 0x88B5), then the
//     expected sent bytes, tlast on the last, one beat per cycle; no beat
//     at all when the case sends nothing;
//   - the pointers and the tx registers read back through the CSR port.
// The suite runs twice: with the candidate's tag computed ahead
// (tx_ctrl.spec 1) and after the verdict (spec 0); both must agree with
// the vectors byte for byte. The turnaround (the received frame's tlast
// beat to the first TX beat) is reported per mode.
`timescale 1ns/1ps
`resetall
`default_nettype none

`include "vectors_tx.vh"

module exo_tx_tb;

`include "exo_wire.vh"
`include "exo_regs.vh"

localparam MAX_HOSTS = 255;
localparam MAX_HISTORY = MAX_HOSTS / 2;
localparam QUEUE_SLOTS = 4;
localparam SLOT_WORDS = 512;
localparam NW = `VEC_TX_WORDS;

reg clk = 1'b0;
reg rst = 1'b1;
always #3.2 clk = ~clk;   // 156.25 MHz

reg  [63:0] s_axis_tdata = 0;
reg  [7:0]  s_axis_tkeep = 0;
reg         s_axis_tvalid = 1'b0;
wire        s_axis_tready;
reg         s_axis_tlast = 1'b0;
wire        verdict_valid;
wire [7:0]  verdict_reason;
wire        verdict_slow_path;
wire [7:0]  verdict_sender;
wire [63:0] verdict_seq;
wire        v_record, v_armed, v_sent, v_popped, v_handoff, v_halt;
wire [63:0] v_kseq, v_qhead;
wire [63:0] tx_tdata;
wire [7:0]  tx_tkeep;
wire        tx_tvalid, tx_tlast;
reg         csr_valid = 1'b0, csr_we = 1'b0;
reg  [11:0] csr_addr = 0;
reg  [31:0] csr_wdata = 0;
wire [31:0] csr_rdata;
wire        csr_rvalid;
wire        q_tready;
reg  [63:0] q_tdata = 0;
reg         q_tvalid = 1'b0;

exo_engine #(
    .MAX_HOSTS(MAX_HOSTS),
    .QUEUE_SLOTS(QUEUE_SLOTS),
    .SLOT_WORDS(SLOT_WORDS)
) dut (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(s_axis_tdata),
    .s_axis_tkeep(s_axis_tkeep),
    .s_axis_tvalid(s_axis_tvalid),
    .s_axis_tready(s_axis_tready),
    .s_axis_tlast(s_axis_tlast),
    .verdict_valid(verdict_valid),
    .verdict_reason(verdict_reason),
    .verdict_slow_path(verdict_slow_path),
    .verdict_sender(verdict_sender),
    .verdict_seq(verdict_seq),
    .csr_valid(csr_valid),
    .csr_we(csr_we),
    .csr_addr(csr_addr),
    .csr_wdata(csr_wdata),
    .csr_rdata(csr_rdata),
    .csr_rvalid(csr_rvalid),
    .verdict_record(v_record),
    .verdict_armed(v_armed),
    .verdict_sent(v_sent),
    .verdict_popped(v_popped),
    .verdict_handoff(v_handoff),
    .verdict_halt(v_halt),
    .verdict_kseq(v_kseq),
    .verdict_qhead(v_qhead),
    .m_axis_tx_tdata(tx_tdata),
    .m_axis_tx_tkeep(tx_tkeep),
    .m_axis_tx_tvalid(tx_tvalid),
    .m_axis_tx_tready(1'b1),
    .m_axis_tx_tlast(tx_tlast),
    .s_axis_q_tdata(q_tdata),
    .s_axis_q_tkeep(8'hFF),
    .s_axis_q_tvalid(q_tvalid),
    .s_axis_q_tready(q_tready),
    .s_axis_q_tlast(1'b1),
    .s_axis_q_tuser(16'd1)
);

reg [63:0] mem [0:NW-1];
integer    cycle = 0;
always @(posedge clk) cycle <= cycle + 1;

// ---------------------------------------------------------------- capture
reg  [7:0]  txbuf [0:8191];
integer     tx_len = 0, tx_beats = 0, tx_first = -1, tx_frames = 0, tx_gaps = 0;
reg         tx_in_frame = 1'b0;
integer     b;
always @(posedge clk) begin
    if (tx_tvalid) begin
        if (!tx_in_frame) begin
            tx_first <= cycle;
            tx_in_frame = 1'b1;
        end
        for (b = 0; b < 8; b = b + 1)
            if (tx_tkeep[b]) begin
                txbuf[tx_len] = tx_tdata[8*b +: 8];
                tx_len = tx_len + 1;
            end
        tx_beats = tx_beats + 1;
        if (tx_tlast) begin
            tx_frames = tx_frames + 1;
            tx_in_frame = 1'b0;
        end
    end else if (tx_in_frame)
        tx_gaps = tx_gaps + 1;
end

reg        vseen = 1'b0;
reg [7:0]  vreason;
reg        vrec, varm, vsent, vpop, vhand, vhalt;
reg [63:0] vkseq, vqhead;
always @(posedge clk) begin
    if (verdict_valid) begin
        vseen <= 1'b1;
        vreason <= verdict_reason;
        vrec <= v_record; varm <= v_armed; vsent <= v_sent; vpop <= v_popped;
        vhand <= v_handoff; vhalt <= v_halt; vkseq <= v_kseq; vqhead <= v_qhead;
    end
end

// ---------------------------------------------------------------- CSR
task csr_write(input [11:0] addr, input [31:0] data);
    begin
        @(negedge clk);
        csr_valid = 1'b1; csr_we = 1'b1; csr_addr = addr; csr_wdata = data;
        @(negedge clk);
        csr_valid = 1'b0; csr_we = 1'b0;
    end
endtask
task csr_read(input [11:0] addr, output [31:0] data);
    begin
        @(negedge clk);
        csr_valid = 1'b1; csr_we = 1'b0; csr_addr = addr;
        @(negedge clk);
        csr_valid = 1'b0;
        if (!csr_rvalid) $fatal(1, "csr_rvalid low after a read of 0x%03h", addr);
        data = csr_rdata;
    end
endtask
task csr_write64(input [11:0] lo, input [63:0] v);
    begin
        csr_write(lo, v[31:0]);
        csr_write(lo + 12'd4, v[63:32]);
    end
endtask
task csr_read64(input [11:0] lo, output [63:0] v);
    reg [31:0] l, h;
    begin
        csr_read(lo, l);
        csr_read(lo + 12'd4, h);
        v = {h, l};
    end
endtask

// byte k (MSB first) of the words from w on
function [7:0] byte_at(input integer w, input integer k);
    reg [63:0] x;
    begin
        x = mem[w + k/8];
        byte_at = x[63 - 8*(k%8) -: 8];
    end
endfunction

// the key words of the CSR: word i = key bytes 4i..4i+3, little-endian
task load_key(input [11:0] base, input integer w);
    integer i;
    begin
        for (i = 0; i < 4; i = i + 1)
            csr_write(base + 4*i, {byte_at(w, 4*i+3), byte_at(w, 4*i+2), byte_at(w, 4*i+1), byte_at(w, 4*i)});
    end
endtask

// ---------------------------------------------------------------- arming
integer spec = 1;
localparam [47:0] SRC_MAC = 48'h02_00_00_00_00_02;

task arm(input integer r);
    reg [63:0] s0, s1, t0, t1;
    reg [31:0] word;
    integer k, flags;
    begin
        flags = mem[r + 2][31:0];
        s0 = mem[r + `VEC_TX_STATE_IN_WORD];
        s1 = mem[r + `VEC_TX_STATE_IN_WORD + 1];
        t0 = mem[r + `VEC_TX_TX_IN_WORD];
        t1 = mem[r + `VEC_TX_TX_IN_WORD + 1];
        csr_write(EXO_REG_HALTED, 32'd1);
        csr_write(EXO_REG_GROUP, {16'd0, s0[63:48]});
        csr_write(EXO_REG_HOSTS, {16'd0, s0[47:32]});
        csr_write(EXO_REG_EPOCH, s0[31:0]);
        csr_write64(EXO_REG_WINDOW_LO, mem[r + `VEC_TX_STATE_IN_WORD + 2]);
        csr_write64(EXO_REG_APPEND_LO, mem[r + `VEC_TX_STATE_IN_WORD + 3]);
        csr_write64(EXO_REG_AGREED_LO, mem[r + `VEC_TX_STATE_IN_WORD + 4]);
        csr_write64(EXO_REG_EPOCH_START_LO, mem[r + `VEC_TX_STATE_IN_WORD + 5]);
        for (k = 0; k < (MAX_HISTORY + 3) / 4; k = k + 1) begin
            word = {byte_at(r + `VEC_TX_HIST_IN_WORD, 4*k+3), byte_at(r + `VEC_TX_HIST_IN_WORD, 4*k+2),
                    byte_at(r + `VEC_TX_HIST_IN_WORD, 4*k+1), byte_at(r + `VEC_TX_HIST_IN_WORD, 4*k)};
            csr_write(EXO_REG_HISTORY_BASE + 4*k, word);
        end
        load_key(EXO_REG_KEY_BASE, r + `VEC_TX_TAG_KEY_WORD);
        load_key(EXO_REG_KEY1_BASE, r + `VEC_TX_TAG_KEY1_WORD);
        csr_write(EXO_REG_KEY_VALID, {30'd0, (flags & `VEC_TX_FLAG_KEY1_VALID) != 0, 1'b1});
        csr_write(EXO_REG_TX_CTRL, {30'd0, spec[0], t0[56]});
        csr_write(EXO_REG_TX_CFG, {15'd0, t0[32], t0[47:40], t0[55:48]});
        csr_write(EXO_REG_TX_EMPTY_RUN, t1[63:32]);
        csr_write(EXO_REG_TX_IDLE_RUN, t1[31:0]);
        csr_write64(EXO_REG_TX_KSEQ_LO, mem[r + `VEC_TX_TX_IN_WORD + 2]);
        csr_write64(EXO_REG_TX_QHEAD_LO, mem[r + `VEC_TX_TX_IN_WORD + 3]);
        csr_write64(EXO_REG_TX_QTAIL_LO, mem[r + `VEC_TX_TX_IN_WORD + 3]);
        csr_write64(EXO_REG_TX_SRC_MAC_LO, {16'd0, SRC_MAC});
        csr_write(EXO_REG_HALTED, {31'd0, s1[56]});
    end
endtask

// push the case's batches from number `from` on (those the engine does not hold)
task push_queue(input integer r, input integer from);
    integer qn, i, w, len, cnt, k, slot;
    reg [63:0] qhead, x;
    reg [63:0] le;
    begin
        qn = mem[r + 3][31:16];
        w = r + `VEC_TX_DATA_WORD + (mem[r + 4][63:48] + 7) / 8 + (mem[r + 4][31:16] + 7) / 8;
        csr_read64(EXO_REG_TX_QTAIL_LO, qhead);
        for (i = 0; i < qn; i = i + 1) begin
            cnt = mem[w][63:48];
            len = mem[w][47:32];
            if (i >= from && i < QUEUE_SLOTS) begin
                slot = (qhead + i - from) % QUEUE_SLOTS;
                csr_write(EXO_REG_TX_QWADDR, slot * SLOT_WORDS);
                for (k = 0; k < (len + 7) / 8; k = k + 1) begin
                    x = mem[w + 1 + k];
                    le = {x[7:0], x[15:8], x[23:16], x[31:24], x[39:32], x[47:40], x[55:48], x[63:56]};
                    csr_write(EXO_REG_TX_QWDATA_HI, le[63:32]);
                    csr_write(EXO_REG_TX_QWDATA_LO, le[31:0]);
                end
                csr_write(EXO_REG_TX_PUSH, {len[15:0], cnt[15:0]});
            end
            w = w + 1 + (len + 7) / 8;
        end
    end
endtask

// ---------------------------------------------------------------- streaming
reg [7:0] pkt [0:8191];
integer   rx_last = 0;
task send_frame(input integer len);
    integer i, k;
    begin
        @(negedge clk);
        for (i = 0; i < len; i = i + 8) begin
            s_axis_tvalid = 1'b1;
            s_axis_tdata = 0;
            s_axis_tkeep = 0;
            for (k = 0; k < 8; k = k + 1)
                if (i + k < len) begin
                    s_axis_tdata[8*k +: 8] = pkt[i + k];
                    s_axis_tkeep[k] = 1'b1;
                end
            s_axis_tlast = i + 8 >= len;
            if (s_axis_tlast) rx_last = cycle;
            @(negedge clk);
        end
        s_axis_tvalid = 1'b0;
        s_axis_tlast = 1'b0;
    end
endtask

// ---------------------------------------------------------------- one record
integer ta_min = 1000000, ta_max = 0, ta_sum = 0, ta_n = 0, n_sent = 0, n_rec = 0;

task run_record(input integer idx, input integer r);
    integer flags, flen, slen, i, wait_c, exp_len, depth;
    reg [63:0] t0, s_out[0:5], tx_out[0:3], got, got2;
    reg [31:0] x32;
    reg [7:0] exp_b;
    begin
        flags = mem[r + 2][31:0];
        flen = mem[r + 4][63:48];
        slen = mem[r + 4][31:16];
        if (flags & `VEC_TX_FLAG_CHAINED) begin
            csr_read64(EXO_REG_TX_QTAIL_LO, got);
            csr_read64(EXO_REG_TX_QHEAD_LO, got2);
            depth = got - got2;
            push_queue(r, depth);
        end else begin
            arm(r);
            push_queue(r, 0);
        end
        // the Ethernet header, then the frame
        for (i = 0; i < 6; i = i + 1) pkt[i] = 8'hFF;
        for (i = 0; i < 6; i = i + 1) pkt[6 + i] = 8'h10 + i[7:0];
        pkt[12] = 8'h88; pkt[13] = 8'hB5;
        for (i = 0; i < flen; i = i + 1) pkt[14 + i] = byte_at(r + `VEC_TX_DATA_WORD, i);
        tx_len = 0; tx_beats = 0; tx_first = -1;
        @(negedge clk);
        vseen = 1'b0;
        send_frame(14 + flen);
        wait_c = 0;
        while (!vseen && wait_c < 40) begin @(negedge clk); wait_c = wait_c + 1; end
        if (!vseen) $fatal(1, "record %0d: no verdict", idx);
        // the frame: every beat, or none
        wait_c = 0;
        exp_len = (flags & `VEC_TX_FLAG_SENT) ? 14 + slen : 0;
        while (wait_c < 1500 && !(exp_len != 0 && tx_len >= exp_len && !tx_in_frame)) begin
            @(negedge clk); wait_c = wait_c + 1;
        end
        if (vreason !== mem[r + 3][63:56])
            $fatal(1, "record %0d: reason %0d, want %0d", idx, vreason, mem[r + 3][63:56]);
        if (vrec !== ((flags & `VEC_TX_FLAG_RECORD) != 0) || vsent !== ((flags & `VEC_TX_FLAG_SENT) != 0) ||
            vpop !== ((flags & `VEC_TX_FLAG_POPPED) != 0) || vhand !== ((flags & `VEC_TX_FLAG_HANDOFF) != 0) ||
            vhalt !== ((flags & `VEC_TX_FLAG_HALT) != 0))
            $fatal(1, "record %0d: turn record %b sent %b popped %b handoff %b halt %b, flags %h", idx,
                   vrec, vsent, vpop, vhand, vhalt, flags);
        if (vrec) begin
            n_rec = n_rec + 1;
            if (vkseq !== mem[r + `VEC_TX_TX_IN_WORD + 2] || vqhead !== mem[r + `VEC_TX_TX_OUT_WORD + 3])
                $fatal(1, "record %0d: record kseq %0d qhead %0d", idx, vkseq, vqhead);
            t0 = mem[r + `VEC_TX_STATE_IN_WORD + 1];
            if (varm !== !t0[56]) $fatal(1, "record %0d: armed %b", idx, varm);
        end
        if (tx_len != exp_len)
            $fatal(1, "record %0d: %0d bytes on the TX port, want %0d", idx, tx_len, exp_len);
        if (exp_len != 0) begin
            for (i = 0; i < 6; i = i + 1)
                if (txbuf[i] !== 8'hFF) $fatal(1, "record %0d: dst MAC byte %0d", idx, i);
            for (i = 0; i < 6; i = i + 1)
                if (txbuf[6 + i] !== SRC_MAC[47 - 8*i -: 8]) $fatal(1, "record %0d: src MAC byte %0d", idx, i);
            if (txbuf[12] !== 8'h88 || txbuf[13] !== 8'hB5) $fatal(1, "record %0d: EtherType", idx);
            for (i = 0; i < slen; i = i + 1) begin
                exp_b = byte_at(r + `VEC_TX_DATA_WORD + (flen + 7) / 8, i);
                if (txbuf[14 + i] !== exp_b)
                    $fatal(1, "record %0d: sent byte %0d is %h, want %h", idx, i, txbuf[14 + i], exp_b);
            end
            if (tx_beats != (exp_len + 7) / 8)
                $fatal(1, "record %0d: %0d beats for %0d bytes", idx, tx_beats, exp_len);
            n_sent = n_sent + 1;
            ta_sum = ta_sum + (tx_first - rx_last);
            if (tx_first - rx_last < ta_min) ta_min = tx_first - rx_last;
            if (tx_first - rx_last > ta_max) ta_max = tx_first - rx_last;
            ta_n = ta_n + 1;
        end
        // the state and the tx registers after
        for (i = 0; i < 6; i = i + 1) s_out[i] = mem[r + `VEC_TX_STATE_OUT_WORD + i];
        for (i = 0; i < 4; i = i + 1) tx_out[i] = mem[r + `VEC_TX_TX_OUT_WORD + i];
        csr_read(EXO_REG_GROUP, x32); if (x32[15:0] !== s_out[0][63:48]) $fatal(1, "record %0d: group", idx);
        csr_read(EXO_REG_HOSTS, x32); if (x32[15:0] !== s_out[0][47:32]) $fatal(1, "record %0d: hosts", idx);
        csr_read(EXO_REG_EPOCH, x32); if (x32 !== s_out[0][31:0]) $fatal(1, "record %0d: epoch", idx);
        csr_read(EXO_REG_HALTED, x32); if (x32[0] !== s_out[1][56]) $fatal(1, "record %0d: halted %b", idx, x32[0]);
        csr_read64(EXO_REG_WINDOW_LO, got); if (got !== s_out[2]) $fatal(1, "record %0d: window", idx);
        csr_read64(EXO_REG_APPEND_LO, got); if (got !== s_out[3]) $fatal(1, "record %0d: append %0d, want %0d", idx, got, s_out[3]);
        csr_read64(EXO_REG_AGREED_LO, got); if (got !== s_out[4]) $fatal(1, "record %0d: agreed %0d, want %0d", idx, got, s_out[4]);
        csr_read64(EXO_REG_EPOCH_START_LO, got); if (got !== s_out[5]) $fatal(1, "record %0d: epoch_start", idx);
        for (i = 0; i < (MAX_HISTORY + 3) / 4; i = i + 1) begin
            csr_read(EXO_REG_HISTORY_BASE + 4*i, x32);
            if (x32 !== {byte_at(r + `VEC_TX_HIST_OUT_WORD, 4*i+3), byte_at(r + `VEC_TX_HIST_OUT_WORD, 4*i+2),
                         byte_at(r + `VEC_TX_HIST_OUT_WORD, 4*i+1), byte_at(r + `VEC_TX_HIST_OUT_WORD, 4*i)} &&
                4*i + 3 < MAX_HISTORY)
                $fatal(1, "record %0d: history word %0d %h", idx, i, x32);
        end
        csr_read(EXO_REG_TX_EMPTY_RUN, x32);
        if (x32 !== tx_out[1][63:32]) $fatal(1, "record %0d: empty_run %0d, want %0d", idx, x32, tx_out[1][63:32]);
        csr_read64(EXO_REG_TX_KSEQ_LO, got); if (got !== tx_out[2]) $fatal(1, "record %0d: kseq %0d, want %0d", idx, got, tx_out[2]);
        csr_read64(EXO_REG_TX_QHEAD_LO, got); if (got !== tx_out[3]) $fatal(1, "record %0d: qhead %0d, want %0d", idx, got, tx_out[3]);
    end
endtask

// ---------------------------------------------------------------- a push racing the token
// Record 0's state (host 2, the token in host 1's frame) with the queue
// empty; while host 1's frame streams in, a one-beat batch (one 6-byte
// record) arrives on the s_axis_q port at beat j of the frame. The rule
// takes the queue as it is in the verdict cycle: the frame sent carries
// the batch (popped, count 1, payload_len 8, its bytes) or is an empty
// pass (not popped, count 0), never a mix, whatever the cycle the push
// lands in, the one right before the verdict included (the candidate
// hashed for an empty queue must not go out then). Each frame sent is
// given back to the engine: DUPLICATE (its tag verifies), not BAD_TAG.
integer race_pop = 0, race_pass = 0, race_switch = 0;
integer q_at = -1;
// the one-beat batch [00 06] 00 02 03 04 05 06 07 (bytes LSB first) in cycle q_at
always @(negedge clk) begin
    q_tvalid <= cycle == q_at;
    q_tdata <= 64'h0706050403020600;
end
task push_race;
    integer j, i, flen, popped_prev;
    reg [7:0] cnt_lo, plen_lo;
    begin
        popped_prev = -1;
        flen = mem[4][63:48];
        for (j = 0; j < 14; j = j + 1) begin
            spec = 1;
            arm(0);
            for (i = 0; i < 6; i = i + 1) pkt[i] = 8'hFF;
            for (i = 0; i < 6; i = i + 1) pkt[6 + i] = 8'h10 + i[7:0];
            pkt[12] = 8'h88; pkt[13] = 8'hB5;
            for (i = 0; i < flen; i = i + 1) pkt[14 + i] = byte_at(`VEC_TX_DATA_WORD, i);
            repeat (200) @(negedge clk);          // the empty pass's tag is ready
            tx_len = 0; tx_beats = 0;
            vseen = 1'b0;
            q_at = cycle + 1 + j;              // the frame's beat j (send_frame starts at the next negedge)
            send_frame(14 + flen);
            i = 0;
            while (!(vseen && !tx_in_frame && tx_len > 0) && i < 300) begin @(negedge clk); i = i + 1; end
            if (!vsent || tx_len == 0) $fatal(1, "push race %0d: no frame sent (verdict seen %b, reason %0d, sent %b, %0d bytes)", j, vseen, vreason, vsent, tx_len);
            cnt_lo = txbuf[14 + 13];
            plen_lo = txbuf[14 + 7];
            if (vpop) begin
                race_pop = race_pop + 1;
                if (cnt_lo != 1 || plen_lo != 8 || tx_len != 14 + 32 + 2 + 8 || txbuf[14 + 34] != 8'h00 ||
                    txbuf[14 + 35] != 8'h06 || txbuf[14 + 41] != 8'h07)
                    $fatal(1, "push race %0d: popped, but the frame has count %0d payload_len %0d (%0d bytes)", j, cnt_lo, plen_lo, tx_len);
            end else begin
                race_pass = race_pass + 1;
                if (cnt_lo != 0 || plen_lo != 0 || tx_len != 14 + 32 + 2)
                    $fatal(1, "push race %0d: not popped, but the frame has count %0d payload_len %0d", j, cnt_lo, plen_lo);
            end
            if (popped_prev != -1 && popped_prev != vpop) race_switch = race_switch + 1;
            popped_prev = vpop;
            // the frame sent, back to the engine: its tag verifies
            for (i = 0; i < tx_len; i = i + 1) pkt[i] = txbuf[i];
            vseen = 1'b0;
            send_frame(tx_len);
            i = 0;
            while (!vseen && i < 40) begin @(negedge clk); i = i + 1; end
            if (vreason !== EXO_REASON_DUPLICATE)
                $fatal(1, "push race %0d: the frame sent, given back, is %0d (want DUPLICATE: its tag verifies)", j, vreason);
        end
        if (race_pop == 0 || race_pass == 0 || race_switch != 1)
            $fatal(1, "push race: %0d frames with the batch, %0d empty passes, %0d switches (want both, one switch)",
                   race_pop, race_pass, race_switch);
        $display("exo_tx_tb: a push racing the token (s_axis_q, beats 0..13 of the token's frame): %0d frames carry the batch, %0d empty passes, one switch, every frame consistent with its record and its tag verified",
                 race_pop, race_pass);
    end
endtask

// ---------------------------------------------------------------- main
integer idx, r, pass_n, miss0, miss1, sent0, sent1;
reg [31:0] x;
initial begin
    $readmemh(`VEC_TX_HEX, mem);
    if (mem[0] !== `VEC_TX_MAGIC) $fatal(1, "vectors_tx.hex: bad magic %h", mem[0]);
    repeat (4) @(negedge clk);
    rst = 1'b0;
    csr_read(EXO_REG_RB_VERSION, x);
    if (x !== EXO_REG_RB_VERSION_EXO) $fatal(1, "rb_version %h", x);
    csr_read(EXO_REG_TX_CAPS, x);
    if (x !== {SLOT_WORDS[15:0], QUEUE_SLOTS[15:0]}) $fatal(1, "tx_caps %h", x);
    for (pass_n = 0; pass_n < 2; pass_n = pass_n + 1) begin
        spec = 1 - pass_n;
        csr_write(EXO_REG_CTRL, 32'd1);   // clear the counters
        ta_min = 1000000; ta_max = 0; ta_sum = 0; ta_n = 0; n_sent = 0; n_rec = 0;
        r = 0;
        for (idx = 0; idx < `VEC_TX_COUNT; idx = idx + 1) begin
            if (mem[r] !== `VEC_TX_MAGIC) $fatal(1, "record %0d: bad magic at word %0d", idx, r);
            run_record(idx, r);
            r = r + mem[r + 2][63:32];
        end
        if (r != NW) $fatal(1, "records end at word %0d of %0d", r, NW);
        csr_read(EXO_REG_TX_SENT, x);
        if (x != n_sent) $fatal(1, "tx_sent %0d, frames seen %0d", x, n_sent);
        csr_read(EXO_REG_TX_SPEC_MISS, x);
        if (spec == 0 && x != n_sent) $fatal(1, "spec off: tx_spec_miss %0d of %0d", x, n_sent);
        if (pass_n == 0) begin miss0 = x; sent0 = n_sent; end else begin miss1 = x; sent1 = n_sent; end
        if (tx_gaps != 0) $fatal(1, "%0d idle cycles inside a TX frame", tx_gaps);
        $display("exo_tx_tb: tx_ctrl.spec %0d: %0d/%0d records, %0d records to the control plane, %0d frames sent byte for byte (tag ready at the verdict: %0d), turnaround tlast -> first TX beat min %0d, max %0d, mean %0.2f cycles",
                 spec, `VEC_TX_COUNT, `VEC_TX_COUNT, n_rec, n_sent, n_sent - x, ta_min, ta_max,
                 ta_n == 0 ? 0.0 : (1.0 * ta_sum) / ta_n);
    end
    push_race;
    $display("exo_tx_tb: PASS %0d/%0d transmit records x 2 (tag ahead, tag after the verdict), %0d cycles",
             `VEC_TX_COUNT, `VEC_TX_COUNT, cycle);
    $finish;
end

endmodule

`resetall
