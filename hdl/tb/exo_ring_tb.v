// exo_ring_tb: five engines in token mode pass the token through a model
// of the broadcast segment, under Icarus and Verilator (make -C hdl test).
//
// The segment: every TX beat of an engine reaches the other four engines'
// receive ports WIRE_DELAY cycles later (a 10 GbE segment at 156.25 MHz:
// 12 bytes of inter-frame gap and 8 of preamble are 2.5 beats), in order;
// two engines sending at once is a collision and fails the bench. Each
// engine's host keeps its transmit queue at QDEPTH batches through the
// s_axis_q stream port (one record of PAYLOAD-2 bytes per batch, bytes
// derived from the engine and the batch number), so every token carries a
// batch. The rack starts from the state of the first transmit vector
// (n = 5, append 101) and its frame from host 1, given to all five.
//
// Per run (PAYLOAD 64, then 1500): HOPS frames sent by the engines, then
// the hosts stop filling their queues: the ring passes empty tokens until
// an engine's empty run reaches tx_idle_run and it hands the token off
// (halts). The bench then checks:
//   - every verdict of every engine was ACCEPT (nothing dropped, no slow
//     path), every TX frame one beat per cycle, s_axis_tready always 1;
//   - the five engines' pointers (append, agreed, history, epoch) equal;
//     the one that handed off halted, the others not;
//   - the five logs: every entry each engine accepted (received or its
//     own), by seq, the same sender and the same payload checksum at
//     every engine, up to the agreement pointer;
// and reports the turnaround per hop (the predecessor's tlast beat at the
// receiving engine -> that engine's first TX beat), the tags computed
// ahead (tx_spec_miss), and the hops per second of simulated time.
`timescale 1ns/1ps
`resetall
`default_nettype none

`include "vectors_tx.vh"

module exo_ring_tb;

`include "exo_wire.vh"
`include "exo_regs.vh"

localparam N = 5;
localparam MAX_HOSTS = 8;
localparam MAX_HISTORY = MAX_HOSTS / 2;
localparam QUEUE_SLOTS = 4;
localparam SLOT_WORDS = 256;
localparam WIRE_DELAY = 3;
localparam QDEPTH = 3;
localparam IDLE_RUN = 4;
localparam LOGN = 8192;

reg clk = 1'b0;
reg rst = 1'b1;
always #3.2 clk = ~clk;   // 156.25 MHz: 10 GbE with a 64-bit data path

integer cycle = 0;
always @(posedge clk) cycle <= cycle + 1;

// ---------------------------------------------------------------- engines
wire [63:0] rx_tdata;
wire [7:0]  rx_tkeep;
wire        rx_tlast;
wire [N-1:0] rx_tvalid, rx_tready;
wire [N-1:0] v_valid, v_sent, v_popped, v_handoff;
wire [8*N-1:0] v_reason;
wire [64*N-1:0] tx_tdata;
wire [8*N-1:0] tx_tkeep;
wire [N-1:0] tx_tvalid, tx_tlast;
reg  [N-1:0] csr_valid = 0, csr_we = 0;
reg  [11:0] csr_addr = 0;
reg  [31:0] csr_wdata = 0;
wire [32*N-1:0] csr_rdata;
wire [N-1:0] csr_rvalid;
reg  [64*N-1:0] q_tdata = 0;
reg  [N-1:0] q_tvalid = 0, q_tlast = 0;
reg  [8*N-1:0] q_tkeep = 0;
wire [N-1:0] q_tready;

genvar g;
generate
for (g = 0; g < N; g = g + 1) begin : eng
    exo_engine #(
        .MAX_HOSTS(MAX_HOSTS),
        .QUEUE_SLOTS(QUEUE_SLOTS),
        .SLOT_WORDS(SLOT_WORDS)
    ) dut (
        .clk(clk),
        .rst(rst),
        .s_axis_tdata(rx_tdata),
        .s_axis_tkeep(rx_tkeep),
        .s_axis_tvalid(rx_tvalid[g]),
        .s_axis_tready(rx_tready[g]),
        .s_axis_tlast(rx_tlast),
        .verdict_valid(v_valid[g]),
        .verdict_reason(v_reason[8*g +: 8]),
        .verdict_slow_path(),
        .verdict_sender(),
        .verdict_seq(),
        .csr_valid(csr_valid[g]),
        .csr_we(csr_we[g]),
        .csr_addr(csr_addr),
        .csr_wdata(csr_wdata),
        .csr_rdata(csr_rdata[32*g +: 32]),
        .csr_rvalid(csr_rvalid[g]),
        .verdict_record(),
        .verdict_armed(),
        .verdict_sent(v_sent[g]),
        .verdict_popped(v_popped[g]),
        .verdict_handoff(v_handoff[g]),
        .verdict_halt(),
        .verdict_kseq(),
        .verdict_qhead(),
        .m_axis_tx_tdata(tx_tdata[64*g +: 64]),
        .m_axis_tx_tkeep(tx_tkeep[8*g +: 8]),
        .m_axis_tx_tvalid(tx_tvalid[g]),
        .m_axis_tx_tready(1'b1),
        .m_axis_tx_tlast(tx_tlast[g]),
        .s_axis_q_tdata(q_tdata[64*g +: 64]),
        .s_axis_q_tkeep(q_tkeep[8*g +: 8]),
        .s_axis_q_tvalid(q_tvalid[g]),
        .s_axis_q_tready(q_tready[g]),
        .s_axis_q_tlast(q_tlast[g]),
        .s_axis_q_tuser(16'd1)
    );
end
endgenerate

// ---------------------------------------------------------------- segment
// the bench injects the first frame through inj_*; engines through TX
reg  [63:0] inj_tdata = 0;
reg  [7:0]  inj_tkeep = 0;
reg         inj_tvalid = 1'b0, inj_tlast = 1'b0;
reg  [63:0] seg_data [0:WIRE_DELAY-1];
reg  [7:0]  seg_keep [0:WIRE_DELAY-1];
reg  [WIRE_DELAY-1:0] seg_valid = 0, seg_last = 0;
reg  [3:0]  seg_src [0:WIRE_DELAY-1];
integer     collisions = 0, k, e;
reg  [63:0] in_data;
reg  [7:0]  in_keep;
reg         in_valid, in_last;
reg  [3:0]  in_src;
integer     senders;

always @* begin
    in_data = inj_tdata; in_keep = inj_tkeep; in_valid = inj_tvalid; in_last = inj_tlast; in_src = 4'd15;
    senders = inj_tvalid ? 1 : 0;
    for (e = 0; e < N; e = e + 1)
        if (tx_tvalid[e]) begin
            in_data = tx_tdata[64*e +: 64]; in_keep = tx_tkeep[8*e +: 8];
            in_valid = 1'b1; in_last = tx_tlast[e]; in_src = e[3:0];
            senders = senders + 1;
        end
end

always @(posedge clk) begin
    if (senders > 1) collisions <= collisions + 1;
    for (k = WIRE_DELAY - 1; k > 0; k = k - 1) begin
        seg_data[k] <= seg_data[k-1]; seg_keep[k] <= seg_keep[k-1];
        seg_src[k] <= seg_src[k-1];
    end
    seg_valid <= {seg_valid[WIRE_DELAY-2:0], in_valid};
    seg_last <= {seg_last[WIRE_DELAY-2:0], in_last};
    seg_data[0] <= in_data; seg_keep[0] <= in_keep; seg_src[0] <= in_src;
end

assign rx_tdata = seg_data[WIRE_DELAY-1];
assign rx_tkeep = seg_keep[WIRE_DELAY-1];
assign rx_tlast = seg_last[WIRE_DELAY-1];
generate
for (g = 0; g < N; g = g + 1) begin : rxv
    assign rx_tvalid[g] = seg_valid[WIRE_DELAY-1] && seg_src[WIRE_DELAY-1] != g;
end
endgenerate

// ---------------------------------------------------------------- what crossed the segment
// frames on the segment's output, in order: seq, sender, checksum; each
// engine's verdicts consume them in order (its own frames it skips)
reg  [7:0]  fb [0:4095];
integer     fb_len = 0;
reg  [63:0] fr_seq [0:LOGN-1];
reg  [7:0]  fr_sender [0:LOGN-1];
reg  [3:0]  fr_src [0:LOGN-1];      // the segment's sender: an engine, or 15 (the bench)
reg  [3:0]  cur_src = 0;
reg  [31:0] fr_sum [0:LOGN-1];
integer     fr_n = 0;
integer     last_tl = 0;          // cycle of the last tlast at the receivers
integer     bb;

function [31:0] csum(input integer len);
    integer i;
    begin
        csum = 32'h811c9dc5;
        for (i = 14 + 32; i < len; i = i + 1)
            csum = (csum ^ {24'd0, fb[i]}) * 32'h01000193;
    end
endfunction

always @(posedge clk) begin
    if (seg_valid[WIRE_DELAY-1]) begin
        cur_src = seg_src[WIRE_DELAY-1];
        for (bb = 0; bb < 8; bb = bb + 1)
            if (rx_tkeep[bb]) begin
                fb[fb_len] = rx_tdata[8*bb +: 8];
                fb_len = fb_len + 1;
            end
        if (rx_tlast) begin
            fr_seq[fr_n % LOGN] = {fb[30], fb[31], fb[32], fb[33], fb[34], fb[35], fb[36], fb[37]};
            fr_sender[fr_n % LOGN] = fb[18];
            fr_src[fr_n % LOGN] = cur_src;
            fr_sum[fr_n % LOGN] = csum(fb_len);
            fr_n = fr_n + 1;
            fb_len = 0;
            last_tl = cycle;
        end
    end
end

// per engine: the log (by seq - base), the frames consumed, counters
localparam [63:0] BASE = 64'd101;
reg  [7:0]  lg_sender [0:N*LOGN-1];
reg  [31:0] lg_sum [0:N*LOGN-1];
integer     consumed [0:N-1];
integer     bad_verdicts = 0, verdicts = 0, gaps = 0;
integer     ta_min = 1000000, ta_max = 0, ta_sum = 0, ta_n = 0, hops = 0;
integer     ta_hist [0:7];        // 5, 6, 7, 8, 9, 10-15, 16-63, 64+
reg  [N-1:0] in_tx = 0;
integer     popped [0:N-1];
integer     pushed [0:N-1];
integer     i2;

always @(posedge clk) begin
    for (i2 = 0; i2 < N; i2 = i2 + 1) begin
        if (v_valid[i2]) begin
            verdicts = verdicts + 1;
            if (v_reason[8*i2 +: 8] != EXO_REASON_ACCEPT) bad_verdicts = bad_verdicts + 1;
            // the frame it judged: the next on the segment it did not send
            while (consumed[i2] < fr_n && fr_src[consumed[i2] % LOGN] == i2[3:0])
                consumed[i2] = consumed[i2] + 1;
            lg_sender[i2*LOGN + (fr_seq[consumed[i2] % LOGN] - BASE) % LOGN] = fr_sender[consumed[i2] % LOGN];
            lg_sum[i2*LOGN + (fr_seq[consumed[i2] % LOGN] - BASE) % LOGN] = fr_sum[consumed[i2] % LOGN];
            consumed[i2] = consumed[i2] + 1;
            if (v_popped[i2]) popped[i2] = popped[i2] + 1;
        end
        if (tx_tvalid[i2] && !in_tx[i2]) begin
            hops = hops + 1;
            if (cycle - last_tl < ta_min) ta_min = cycle - last_tl;
            if (cycle - last_tl > ta_max) ta_max = cycle - last_tl;
            ta_sum = ta_sum + (cycle - last_tl);
            ta_n = ta_n + 1;
            case (cycle - last_tl)
                5: ta_hist[0] = ta_hist[0] + 1;
                6: ta_hist[1] = ta_hist[1] + 1;
                7: ta_hist[2] = ta_hist[2] + 1;
                8: ta_hist[3] = ta_hist[3] + 1;
                9: ta_hist[4] = ta_hist[4] + 1;
                default:
                    if (cycle - last_tl < 16) ta_hist[5] = ta_hist[5] + 1;
                    else if (cycle - last_tl < 64) ta_hist[6] = ta_hist[6] + 1;
                    else ta_hist[7] = ta_hist[7] + 1;
            endcase
        end
        if (tx_tvalid[i2] && tx_tlast[i2]) in_tx[i2] = 1'b0;
        else if (tx_tvalid[i2]) in_tx[i2] = 1'b1;
        else if (in_tx[i2]) gaps = gaps + 1;
        if (!rx_tready[i2]) gaps = gaps + 1;
    end
end

// the own frames go into the own log from the TX port
reg  [7:0]  ob [0:N*4096-1];
integer     ob_len [0:N-1];
integer     i3, bo;
function [31:0] osum(input integer en, input integer len);
    integer i;
    begin
        osum = 32'h811c9dc5;
        for (i = 14 + 32; i < len; i = i + 1)
            osum = (osum ^ {24'd0, ob[en*4096 + i]}) * 32'h01000193;
    end
endfunction
reg [63:0] oseq;
always @(posedge clk) begin
    for (i3 = 0; i3 < N; i3 = i3 + 1)
        if (tx_tvalid[i3]) begin
            for (bo = 0; bo < 8; bo = bo + 1)
                if (tx_tkeep[8*i3 + bo]) begin
                    ob[i3*4096 + ob_len[i3]] = tx_tdata[64*i3 + 8*bo +: 8];
                    ob_len[i3] = ob_len[i3] + 1;
                end
            if (tx_tlast[i3]) begin
                oseq = {ob[i3*4096+30], ob[i3*4096+31], ob[i3*4096+32], ob[i3*4096+33],
                        ob[i3*4096+34], ob[i3*4096+35], ob[i3*4096+36], ob[i3*4096+37]};
                lg_sender[i3*LOGN + (oseq - BASE) % LOGN] = i3[7:0];
                lg_sum[i3*LOGN + (oseq - BASE) % LOGN] = osum(i3, ob_len[i3]);
                ob_len[i3] = 0;
            end
        end
end

// ---------------------------------------------------------------- hosts: the queue port
integer payload = 64;
integer big0 = 0;                 // engine 0's batches (0: payload)
integer spec_on = 1;
reg     refill = 1'b0;
integer qbeat [0:N-1];
integer nb [0:N-1];
integer i4, bq;
reg [63:0] w;
reg fire, mid;
integer plen;
always @(posedge clk) begin
    for (i4 = 0; i4 < N; i4 = i4 + 1) begin
        fire = q_tvalid[i4] && q_tready[i4];
        mid = fire && !q_tlast[i4];          // the batch goes on
        if (fire && q_tlast[i4]) begin
            pushed[i4] = pushed[i4] + 1;
            qbeat[i4] = 0;
        end else if (fire)
            qbeat[i4] = qbeat[i4] + 1;
        if (q_tvalid[i4] && !fire) begin
            // held
        end else if (!mid && !(refill && pushed[i4] - popped[i4] < QDEPTH)) begin
            q_tvalid[i4] <= 1'b0;
            q_tlast[i4] <= 1'b0;
        end else begin
            // beat qbeat of batch pushed[i4]: [len-2 u16 BE][bytes]
            plen = (i4 == 0 && big0 != 0) ? big0 : payload;
            for (bq = 0; bq < 8; bq = bq + 1) begin
                if (8*qbeat[i4] + bq == 0) w[8*bq +: 8] = (plen - 2) >> 8;
                else if (8*qbeat[i4] + bq == 1) w[8*bq +: 8] = (plen - 2) & 255;
                else w[8*bq +: 8] = (i4 * 37 + pushed[i4] * 11 + 8*qbeat[i4] + bq) & 255;
            end
            q_tdata[64*i4 +: 64] <= w;
            q_tvalid[i4] <= 1'b1;
            q_tlast[i4] <= 8*(qbeat[i4] + 1) >= plen;
            q_tkeep[8*i4 +: 8] <= 8*(qbeat[i4] + 1) <= plen ? 8'hFF : 8'hFF >> (8*(qbeat[i4] + 1) - plen);
        end
    end
end

// ---------------------------------------------------------------- CSR
task csr_write(input integer en, input [11:0] addr, input [31:0] data);
    begin
        @(negedge clk);
        csr_valid = 0; csr_valid[en] = 1'b1; csr_we = 0; csr_we[en] = 1'b1; csr_addr = addr; csr_wdata = data;
        @(negedge clk);
        csr_valid = 0; csr_we = 0;
    end
endtask
task csr_read(input integer en, input [11:0] addr, output [31:0] data);
    begin
        @(negedge clk);
        csr_valid = 0; csr_valid[en] = 1'b1; csr_we = 0; csr_addr = addr;
        @(negedge clk);
        csr_valid = 0;
        if (!csr_rvalid[en]) $fatal(1, "engine %0d: csr_rvalid low at 0x%03h", en, addr);
        data = csr_rdata[32*en +: 32];
    end
endtask
task csr_write64(input integer en, input [11:0] lo, input [63:0] v);
    begin
        csr_write(en, lo, v[31:0]);
        csr_write(en, lo + 12'd4, v[63:32]);
    end
endtask
task csr_read64(input integer en, input [11:0] lo, output [63:0] v);
    reg [31:0] l, h;
    begin
        csr_read(en, lo, l);
        csr_read(en, lo + 12'd4, h);
        v = {h, l};
    end
endtask

reg [63:0] mem [0:`VEC_TX_WORDS-1];
function [7:0] byte_at(input integer wd, input integer kk);
    reg [63:0] x;
    begin
        x = mem[wd + kk/8];
        byte_at = x[63 - 8*(kk%8) -: 8];
    end
endfunction

task arm(input integer en);
    reg [63:0] s0;
    integer kk;
    begin
        s0 = mem[`VEC_TX_STATE_IN_WORD];
        csr_write(en, EXO_REG_HALTED, 32'd1);
        csr_write(en, EXO_REG_GROUP, {16'd0, s0[63:48]});
        csr_write(en, EXO_REG_HOSTS, {16'd0, s0[47:32]});
        csr_write(en, EXO_REG_EPOCH, s0[31:0]);
        csr_write64(en, EXO_REG_WINDOW_LO, mem[`VEC_TX_STATE_IN_WORD + 2]);
        csr_write64(en, EXO_REG_APPEND_LO, mem[`VEC_TX_STATE_IN_WORD + 3]);
        csr_write64(en, EXO_REG_AGREED_LO, mem[`VEC_TX_STATE_IN_WORD + 4]);
        csr_write64(en, EXO_REG_EPOCH_START_LO, mem[`VEC_TX_STATE_IN_WORD + 5]);
        csr_write(en, EXO_REG_HISTORY_BASE, {byte_at(`VEC_TX_HIST_IN_WORD, 3), byte_at(`VEC_TX_HIST_IN_WORD, 2),
                                            byte_at(`VEC_TX_HIST_IN_WORD, 1), byte_at(`VEC_TX_HIST_IN_WORD, 0)});
        for (kk = 0; kk < 4; kk = kk + 1)
            csr_write(en, EXO_REG_KEY_BASE + 4*kk, {byte_at(`VEC_TX_TAG_KEY_WORD, 4*kk+3), byte_at(`VEC_TX_TAG_KEY_WORD, 4*kk+2),
                                                   byte_at(`VEC_TX_TAG_KEY_WORD, 4*kk+1), byte_at(`VEC_TX_TAG_KEY_WORD, 4*kk)});
        csr_write(en, EXO_REG_TX_CFG, {16'd0, 8'((en + N - 1) % N), 8'(en)});
        csr_write(en, EXO_REG_TX_IDLE_RUN, IDLE_RUN);
        csr_write(en, EXO_REG_TX_SRC_MAC_LO, 32'h0000_0010 + en);
        csr_write(en, EXO_REG_TX_CTRL, {30'd0, spec_on[0], 1'b1});     // on, spec
        csr_write(en, EXO_REG_HALTED, 32'd0);
    end
endtask

// ---------------------------------------------------------------- a run
integer en, i, run, quiet, last_hops, flen, misses, tmax, ty;
reg [63:0] ap0, ag0, ap, ag;
reg [31:0] h0, hh, x, halted_n, sent_sum;
integer hop_target;
real    ns;
reg [8*48-1:0] what;

task ring(input integer p, input integer big, input integer sp, input integer target);
    integer c0, c1;
    begin
        payload = p;
        big0 = big;
        spec_on = sp;
        rst = 1'b1;
        repeat (4) @(negedge clk);
        rst = 1'b0;
        fr_n = 0; fb_len = 0; hops = 0; verdicts = 0; bad_verdicts = 0; gaps = 0; collisions = 0;
        ta_min = 1000000; ta_max = 0; ta_sum = 0; ta_n = 0;
        for (i = 0; i < 8; i = i + 1) ta_hist[i] = 0;
        for (en = 0; en < N; en = en + 1) begin
            consumed[en] = 0; popped[en] = 0; pushed[en] = 0; qbeat[en] = 0; ob_len[en] = 0;
            arm(en);
        end
        for (i = 0; i < N*LOGN; i = i + 1) begin lg_sender[i] = 8'hEE; lg_sum[i] = 0; end
        refill = 1'b1;
        quiet = 0;
        while ((pushed[0] < QDEPTH || pushed[N-1] < QDEPTH) && quiet < 10000) begin @(negedge clk); quiet = quiet + 1; end
        if (quiet >= 10000) $fatal(1, "ring %0d: the hosts could not fill their queues (pushed %0d)", p, pushed[0]);
        // the first frame: host 1's at seq 101 (the first transmit vector), to all five
        flen = mem[`VEC_TX_LENS_WORD][63:48];
        for (i = 0; i < 14 + flen; i = i + 8) begin
            @(negedge clk);
            inj_tvalid = 1'b1;
            inj_tdata = 0; inj_tkeep = 0;
            for (k = 0; k < 8; k = k + 1)
                if (i + k < 14 + flen) begin
                    inj_tkeep[k] = 1'b1;
                    inj_tdata[8*k +: 8] = i + k < 6 ? 8'hFF : i + k < 12 ? 8'h10 + 8'(i + k) :
                                          i + k == 12 ? 8'h88 : i + k == 13 ? 8'hB5 :
                                          byte_at(`VEC_TX_DATA_WORD, i + k - 14);
                end
            inj_tlast = i + 8 >= 14 + flen;
        end
        @(negedge clk);
        inj_tvalid = 1'b0; inj_tlast = 1'b0;
        // the injected frame is given to every engine: engine 1 too
        c0 = cycle;
        quiet = 0; last_hops = 0;
        while (hops < target) begin
            @(negedge clk);
            if (hops != last_hops) begin quiet = 0; last_hops = hops; end
            else quiet = quiet + 1;
            if (quiet > 5000) begin
                for (en = 0; en < N; en = en + 1) begin
                    csr_read(en, EXO_REG_HALTED, x);
                    csr_read64(en, EXO_REG_APPEND_LO, ap);
                    csr_read(en, EXO_REG_COUNTER_BASE, h0);
                    $display("engine %0d: halted %0d append %0d accepts %0d pushed %0d popped %0d verdicts-consumed %0d", en, x, ap, h0, pushed[en], popped[en], consumed[en]);
                end
                $fatal(1, "ring %0d: the token stopped after %0d hops (%0d frames on the segment, %0d bad verdicts)", p, hops, fr_n, bad_verdicts);
            end
        end
        c1 = cycle;
        refill = 1'b0;
        // the ring runs dry and an engine hands off
        quiet = 0; last_hops = hops;
        while (quiet < 4000) begin
            @(negedge clk);
            if (hops != last_hops || tx_tvalid != 0 || seg_valid != 0) begin quiet = 0; last_hops = hops; end
            else quiet = quiet + 1;
        end
        if (collisions != 0) $fatal(1, "ring %0d: %0d collisions on the segment", p, collisions);
        if (bad_verdicts != 0) $fatal(1, "ring %0d: %0d verdicts other than ACCEPT", p, bad_verdicts);
        if (gaps != 0) $fatal(1, "ring %0d: %0d idle or stalled cycles inside frames", p, gaps);
        // the same pointers everywhere; one engine halted (the hand-off)
        halted_n = 0; misses = 0; tmax = 0; sent_sum = 0;
        csr_read64(0, EXO_REG_APPEND_LO, ap0);
        csr_read64(0, EXO_REG_AGREED_LO, ag0);
        csr_read(0, EXO_REG_HISTORY_BASE, h0);
        for (en = 0; en < N; en = en + 1) begin
            csr_read64(en, EXO_REG_APPEND_LO, ap);
            csr_read64(en, EXO_REG_AGREED_LO, ag);
            csr_read(en, EXO_REG_HISTORY_BASE, hh);
            if (ap !== ap0 || ag !== ag0 || hh !== h0)
                $fatal(1, "ring %0d: engine %0d append %0d agreed %0d history %h, engine 0 %0d %0d %h",
                       p, en, ap, ag, hh, ap0, ag0, h0);
            csr_read(en, EXO_REG_HALTED, x);
            halted_n = halted_n + x;
            csr_read(en, EXO_REG_TX_SPEC_MISS, x);
            misses = misses + x;
            csr_read(en, EXO_REG_TX_TURNAROUND_MAX, x);
            if (x > tmax) tmax = x;
            csr_read(en, EXO_REG_TX_SENT, x);
            sent_sum = sent_sum + x;
        end
        if (halted_n != 1) $fatal(1, "ring %0d: %0d engines halted, want 1 (the hand-off)", p, halted_n);
        if (sent_sum != hops) $fatal(1, "ring %0d: tx_sent %0d, frames on the TX ports %0d", p, sent_sum, hops);
        if (ap0 - BASE != hops + 1) $fatal(1, "ring %0d: append %0d after %0d frames", p, ap0, hops + 1);
        // the logs
        for (i = 0; i < ag0 - BASE; i = i + 1)
            for (en = 1; en < N; en = en + 1)
                if (lg_sender[en*LOGN + i % LOGN] !== lg_sender[i % LOGN] || lg_sum[en*LOGN + i % LOGN] !== lg_sum[i % LOGN] ||
                    lg_sender[i % LOGN] === 8'hEE)
                    $fatal(1, "ring %0d: entry %0d: engine %0d sender %0d sum %h, engine 0 %0d %h", p, BASE + i, en,
                           lg_sender[en*LOGN + i % LOGN], lg_sum[en*LOGN + i % LOGN], lg_sender[i % LOGN], lg_sum[i % LOGN]);
        ns = 6.4 * (c1 - c0);
        if (big != 0) $sformat(what, "%0d-byte batches, %0d at engine 0", p, big);
        else $sformat(what, "%0d-byte batches", p);
        $display("exo_ring_tb: %0s, spec %0d: %0d hops with a batch in %0d cycles = %0.1f cycles/hop, %0.2f M hops/s of simulated time at 156.25 MHz (then %0d empty passes and 1 hand-off); %0d verdicts, all ACCEPT; pointers equal at the 5 engines (append %0d, agreed %0d), %0d entries identical",
                 what, sp, target, c1 - c0, (1.0 * (c1 - c0)) / target, target / ns * 1000.0,
                 hops - target, verdicts, ap0, ag0, ag0 - BASE);
        $display("exo_ring_tb: %0s, spec %0d: turnaround (the predecessor's tlast -> the first TX beat) min %0d, max %0d, mean %0.2f cycles; 5:%0d 6:%0d 7:%0d 8:%0d 9:%0d 10-15:%0d 16-63:%0d 64+:%0d; tag ready at the verdict %0d of %0d (tx_spec_miss %0d); 0 stalls, 0 gaps",
                 what, sp, ta_min, ta_max, (1.0 * ta_sum) / ta_n, ta_hist[0], ta_hist[1], ta_hist[2], ta_hist[3], ta_hist[4],
                 ta_hist[5], ta_hist[6], ta_hist[7], hops - misses, hops, misses);
    end
endtask

// RING_SCALE divides every run's hops (default 1): go test runs Icarus,
// the slow simulator, with 5 (its full run took over 10 minutes of a
// loaded 2-vCPU machine), Verilator and make with the full runs.
`ifndef RING_SCALE
`define RING_SCALE 1
`endif

initial begin
    $readmemh(`VEC_TX_HEX, mem);
    if (mem[0] !== `VEC_TX_MAGIC) $fatal(1, "vectors_tx.hex: bad magic");
    t0_check;
    ring(64, 0, 1, 5000 / `RING_SCALE);
    ring(1500, 0, 1, 1000 / `RING_SCALE);
    ring(64, 1500, 1, 1000 / `RING_SCALE);
    ring(64, 0, 0, 1000 / `RING_SCALE);
    ring(1500, 0, 0, 500 / `RING_SCALE);
    $display("exo_ring_tb: PASS, %0d cycles", cycle);
    $finish;
end

// the first vector is the one the ring starts from: n = 5, host 2 after 1
task t0_check;
    reg [63:0] s0, t0;
    begin
        s0 = mem[`VEC_TX_STATE_IN_WORD];
        t0 = mem[`VEC_TX_TX_IN_WORD];
        if (s0[47:32] != N || t0[55:48] != 2 || t0[47:40] != 1 || !(mem[2][31:0] & `VEC_TX_FLAG_SENT))
            $fatal(1, "the first transmit vector is not host 2 answering host 1 at n = 5");
    end
endtask

endmodule

`resetall
