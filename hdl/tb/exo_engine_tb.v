// exo_engine_tb: self-checking bench of exo_engine against the golden
// vectors (testdata/vectors/vectors.hex, docs/vectors.md section 7), under
// Icarus (iverilog -g2012) and Verilator 5 (--binary --timing).
//
// For every record: load the state block in_* through the CSR port (or,
// for a CHAINED stream step, check that the engine holds in_*), stream a
// 14-byte Ethernet header and the frame_len frame bytes beat by beat with
// random tvalid gaps, wait for the verdict, compare it with reason and the
// state read back through the CSR port with out_*, register by register.
// Then: the counters per reason against the vectors' counts; a
// back-to-back stream of minimum-size frames (no gaps: one frame every 8
// beats, no tready stall allowed); the cycle report. $fatal on any
// mismatch.
`timescale 1ns/1ps
`default_nettype none
`include "vectors.vh"
`ifndef VEC_HEX
`define VEC_HEX "../testdata/vectors/vectors.hex"
`endif
`ifndef SEED
`define SEED 1
`endif

module exo_engine_tb;

localparam N = `EXO_VEC_COUNT;
localparam W = `EXO_VEC_RECORD_WORDS;
localparam MAX_HOSTS = 64;
localparam MAX_HISTORY = MAX_HOSTS/2;
localparam BACK_TO_BACK = 256;

`include "exo_wire.vh"
`include "exo_regs.vh"

reg clk = 1'b0;
reg rst = 1'b1;
always #5 clk = ~clk;

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
reg         csr_valid = 1'b0;
reg         csr_we = 1'b0;
reg  [11:0] csr_addr = 0;
reg  [31:0] csr_wdata = 0;
wire [31:0] csr_rdata;
wire        csr_rvalid;

exo_engine #(
    .MAX_HOSTS(MAX_HOSTS)
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
    .csr_rvalid(csr_rvalid)
);

reg [63:0] mem [0:N*W-1];
reg [7:0]  pkt [0:2047];
integer    seed = `SEED;
integer    cycle = 0;
always @(posedge clk) cycle <= cycle + 1;

// verdict monitor: every verdict, with the cycle it came
integer    verdicts = 0;
integer    last_verdict_cycle = 0;
reg [7:0]  last_reason = 0;
always @(posedge clk) begin
    if (verdict_valid) begin
        verdicts <= verdicts + 1;
        last_verdict_cycle <= cycle;
        last_reason <= verdict_reason;
    end
end

// no stall from the engine, ever
always @(posedge clk) begin
    if (!rst && s_axis_tvalid && !s_axis_tready)
        $fatal(1, "tready stall at cycle %0d", cycle);
end

// ---------------------------------------------------------------- CSR bus model
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

task csr_write64(input [11:0] addr_lo, input [63:0] v);
    begin
        csr_write(addr_lo, v[31:0]);
        csr_write(addr_lo + 12'd4, v[63:32]);
    end
endtask

task csr_read64(input [11:0] addr_lo, output [63:0] v);
    reg [31:0] lo, hi;
    begin
        csr_read(addr_lo, lo);
        csr_read(addr_lo + 12'd4, hi);
        v = {hi, lo};
    end
endtask

// ---------------------------------------------------------------- state blocks
// load the 8-word state block at mem[s..s+7] (docs/vectors.md section 4)
task load_state(input integer s);
    reg [63:0] w0, w1;
    reg [127:0] hist;
    integer k;
    reg [31:0] word;
    begin
        w0 = mem[s]; w1 = mem[s + 1];
        hist = {mem[s + 5], mem[s + 6]};
        csr_write(EXO_REG_HALTED, 32'd1);               // halt while loading
        csr_write(EXO_REG_GROUP, {16'd0, w0[63:48]});
        csr_write(EXO_REG_HOSTS, {16'd0, w0[47:32]});
        csr_write(EXO_REG_EPOCH, w0[31:0]);
        csr_write64(EXO_REG_WINDOW_LO, mem[s + 2]);
        csr_write64(EXO_REG_APPEND_LO, mem[s + 3]);
        csr_write64(EXO_REG_AGREED_LO, mem[s + 4]);
        csr_write64(EXO_REG_EPOCH_START_LO, mem[s + 7]);
        for (k = 0; k < MAX_HISTORY / 4; k = k + 1) begin
            if (k < 4)
                word = {hist[127 - 8*(4*k+3) -: 8], hist[127 - 8*(4*k+2) -: 8],
                        hist[127 - 8*(4*k+1) -: 8], hist[127 - 8*(4*k) -: 8]};
            else
                word = 32'hFFFFFFFF;
            csr_write(EXO_REG_HISTORY_BASE + 4*k, word);
        end
        csr_write(EXO_REG_HALTED, {31'd0, w1[56]});
    end
endtask

// read the engine's state as a state block
task read_state(output [63:0] w0, output [63:0] w1, output [63:0] w2, output [63:0] w3,
                output [63:0] w4, output [63:0] w5, output [63:0] w6, output [63:0] w7);
    reg [31:0] a, b, c;
    reg [63:0] hist;
    integer k;
    begin
        csr_read(EXO_REG_GROUP, a);
        csr_read(EXO_REG_HOSTS, b);
        csr_read(EXO_REG_EPOCH, c);
        w0 = {a[15:0], b[15:0], c};
        csr_read(EXO_REG_HALTED, a);
        w1 = {7'd0, a[0], b[8:1], 48'd0};
        csr_read64(EXO_REG_WINDOW_LO, w2);
        csr_read64(EXO_REG_APPEND_LO, w3);
        csr_read64(EXO_REG_AGREED_LO, w4);
        csr_read64(EXO_REG_EPOCH_START_LO, w7);
        for (k = 0; k < 4; k = k + 1) begin
            csr_read(EXO_REG_HISTORY_BASE + 4*k, a);
            hist = (k < 2) ? w5 : w6;
            hist[63 - 32*(k%2) -: 32] = {a[7:0], a[15:8], a[23:16], a[31:24]};
            if (k < 2) w5 = hist; else w6 = hist;
        end
        // slots 16..MAX_HISTORY-1 stay 0xFF (the vectors hold 16)
        for (k = 4; k < MAX_HISTORY / 4; k = k + 1) begin
            csr_read(EXO_REG_HISTORY_BASE + 4*k, a);
            if (a !== 32'hFFFFFFFF) $fatal(1, "history word %0d is %h, want ffffffff", k, a);
        end
    end
endtask

task compare_state(input integer rec, input integer s, input [8*8-1:0] what);
    reg [63:0] g [0:7];
    integer k;
    begin
        read_state(g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]);
        for (k = 0; k < 8; k = k + 1)
            if (g[k] !== mem[s + k])
                $fatal(1, "record %0d: %0s state word %0d is %h, want %h", rec, what, k, g[k], mem[s + k]);
    end
endtask

// ---------------------------------------------------------------- frames
// stream pkt[0..len-1] as 64-bit beats (byte 0 in tdata[7:0]); gaps: the
// percentage of idle cycles before a beat. Returns the cycle of the tlast
// beat's handshake.
task send(input integer len, input integer gaps, output integer tlast_cycle);
    integer beat, nbeats, k, idx;
    begin
        nbeats = (len + 7) / 8;
        if (nbeats == 0) nbeats = 1;
        for (beat = 0; beat < nbeats; beat = beat + 1) begin
            if (gaps > 0) begin
                while (($random(seed) & 32'h7fffffff) % 100 < gaps) begin
                    @(negedge clk);
                    s_axis_tvalid = 1'b0;
                end
            end
            @(negedge clk);
            s_axis_tvalid = 1'b1;
            s_axis_tlast = (beat == nbeats - 1);
            for (k = 0; k < 8; k = k + 1) begin
                idx = beat * 8 + k;
                s_axis_tdata[8*k +: 8] = (idx < len) ? pkt[idx] : 8'h00;
                s_axis_tkeep[k] = (idx < len);
            end
            tlast_cycle = cycle;   // handshake at the next posedge
        end
        @(negedge clk);
        s_axis_tvalid = 1'b0;
        s_axis_tlast = 1'b0;
        s_axis_tkeep = 0;
    end
endtask

task eth_header(input [7:0] src);
    integer k;
    begin
        for (k = 0; k < 6; k = k + 1) pkt[k] = 8'hFF;
        pkt[6] = 8'h02; pkt[7] = 8'h00; pkt[8] = 8'h00; pkt[9] = 8'h00; pkt[10] = 8'h00; pkt[11] = src;
        pkt[12] = EXO_ETHER_TYPE[15:8];
        pkt[13] = EXO_ETHER_TYPE[7:0];
    end
endtask

// a minimum-size frame (60 bytes with its Ethernet header, 8 beats): the
// valid next DATA frame of an n = 5 rack in group 1, epoch 7, one record
// "hello"; source MAC 02:00:00:00:00:<sender>
task build_min(input [7:0] snd, input [63:0] seq, input [7:0] h0, input [7:0] h1);
    integer k;
    begin
        eth_header(snd);
        for (k = 14; k < 60; k = k + 1) pkt[k] = 8'h00;   // padding to 60 bytes
        pkt[14 + EXO_OFF_VERSION] = EXO_VERSION;
        pkt[14 + EXO_OFF_TYPE] = EXO_TYPE_DATA;
        pkt[14 + EXO_OFF_GROUP] = 8'd0; pkt[14 + EXO_OFF_GROUP + 1] = 8'd1;
        pkt[14 + EXO_OFF_SENDER] = snd;
        pkt[14 + EXO_OFF_HIST_LEN] = 8'd2;
        pkt[14 + EXO_OFF_PAYLOAD_LEN] = 8'd0; pkt[14 + EXO_OFF_PAYLOAD_LEN + 1] = 8'd7;
        pkt[14 + EXO_OFF_EPOCH + 3] = 8'd7;
        pkt[14 + EXO_OFF_COUNT + 1] = 8'd1;
        for (k = 0; k < 8; k = k + 1) pkt[14 + EXO_OFF_SEQ + k] = seq[63 - 8*k -: 8];
        pkt[14 + EXO_OFF_HISTORY] = h0; pkt[14 + EXO_OFF_HISTORY + 1] = h1;
        pkt[14 + 34] = 8'd0; pkt[14 + 35] = 8'd5;
        pkt[14 + 36] = "h"; pkt[14 + 37] = "e"; pkt[14 + 38] = "l"; pkt[14 + 39] = "l"; pkt[14 + 40] = "o";
    end
endtask

// load the n = 5 state the minimum-size frames expect: append 1000,
// agreed 998, history [4, 3]
task load_n5;
    begin
        csr_write(EXO_REG_HALTED, 32'd1);
        csr_write(EXO_REG_GROUP, 32'd1);
        csr_write(EXO_REG_HOSTS, 32'd5);
        csr_write(EXO_REG_EPOCH, 32'd7);
        csr_write64(EXO_REG_WINDOW_LO, 64'd1024);
        csr_write64(EXO_REG_APPEND_LO, 64'd1000);
        csr_write64(EXO_REG_AGREED_LO, 64'd998);
        csr_write64(EXO_REG_EPOCH_START_LO, 64'd0);
        csr_write(EXO_REG_HISTORY_BASE, 32'hFFFF0304);
        csr_write(EXO_REG_HALTED, 32'd0);
    end
endtask

// ---------------------------------------------------------------- main
integer i, k, base, flen, nverd, t_last, lat, lat_min, lat_max, lat_sum;
integer counts [0:31];
integer stalls, t0, t1;
reg [63:0] w;
reg [15:0] vflags;
reg [7:0]  want_reason;
reg [31:0] r32;
reg [63:0] a64, g64;
reg [7:0]  hist0, hist1, sender;

initial begin
    $readmemh(`VEC_HEX, mem);
    if (mem[0] !== `EXO_VEC_MAGIC) $fatal(1, "vectors.hex: bad magic %h (format 2 expected)", mem[0]);
    for (k = 0; k < 32; k = k + 1) counts[k] = 0;
    lat_min = 1000; lat_max = 0; lat_sum = 0;

    repeat (4) @(negedge clk);
    rst = 1'b0;
    csr_read(EXO_REG_RB_TYPE, r32);
    if (r32 !== EXO_REG_RB_TYPE_EXO) $fatal(1, "rb_type %h", r32);
    csr_read(EXO_REG_CAPS, r32);
    if (r32 !== {16'd32, 16'd64}) $fatal(1, "caps %h", r32);
    csr_write(EXO_REG_CTRL, 32'd1);   // clear counters

    for (i = 0; i < N; i = i + 1) begin
        base = i * W;
        w = mem[base + `EXO_VEC_FRAME_LEN_WORD];
        flen = w[`EXO_VEC_FRAME_LEN_MSB:`EXO_VEC_FRAME_LEN_LSB];
        vflags = w[`EXO_VEC_VFLAGS_MSB:`EXO_VEC_VFLAGS_LSB];
        w = mem[base + `EXO_VEC_REASON_WORD];
        want_reason = w[`EXO_VEC_REASON_MSB:`EXO_VEC_REASON_LSB];

        if (vflags & `EXO_VEC_FLAG_CHAINED)
            compare_state(i, base + `EXO_VEC_STATE_IN_WORD, "in");
        else
            load_state(base + `EXO_VEC_STATE_IN_WORD);

        eth_header(8'h10);
        for (k = 0; k < flen; k = k + 1) begin
            w = mem[base + `EXO_VEC_FRAME_WORD + k / 8];
            pkt[14 + k] = w[63 - 8 * (k % 8) -: 8];
        end
        nverd = verdicts;
        send(14 + flen, 30, t_last);
        while (verdicts == nverd) @(negedge clk);
        if (verdicts != nverd + 1) $fatal(1, "record %0d: %0d verdicts for one frame", i, verdicts - nverd);
        lat = last_verdict_cycle - t_last;
        if (lat < lat_min) lat_min = lat;
        if (lat > lat_max) lat_max = lat;
        lat_sum = lat_sum + lat;
        if (last_reason !== want_reason)
            $fatal(1, "record %0d: verdict %0d, want %0d", i, last_reason, want_reason);
        counts[want_reason] = counts[want_reason] + 1;
        compare_state(i, base + `EXO_VEC_STATE_OUT_WORD, "out");
    end
    $display("exo_engine_tb: vectors: %0d of %0d records pass (verdict and state)", N, N);

    // counters per reason
    for (k = 0; k < EXO_NUM_REASONS; k = k + 1) begin
        csr_read(EXO_REG_COUNTER_BASE + 4*k, r32);
        if (r32 != counts[k]) $fatal(1, "counter[%0d] = %0d, want %0d", k, r32, counts[k]);
    end
    csr_read(EXO_REG_FRAMES_IN, r32);
    if (r32 != N) $fatal(1, "frames_in %0d, want %0d", r32, N);
    csr_read(EXO_REG_FRAMES_ACCEPTED, r32);
    if (r32 != counts[0]) $fatal(1, "frames_accepted %0d, want %0d", r32, counts[0]);
    $display("exo_engine_tb: counters: %0d reasons match", EXO_NUM_REASONS);

    // roster MAC check (ctrl.mac_check; not in the vectors, which carry no MAC)
    load_n5;
    csr_write(EXO_REG_ROSTER_MAC_LO_BASE, 32'h000000AA);   // host 0: 02:00:00:00:00:aa
    csr_write(EXO_REG_ROSTER_MAC_HI_BASE, 32'h00000200);
    csr_write(EXO_REG_CTRL, 32'd2);
    build_min(8'd0, 64'd1000, 8'd4, 8'd3);                 // from 02:00:00:00:00:00
    nverd = verdicts;
    send(60, 0, t_last);
    while (verdicts == nverd) @(negedge clk);
    if (last_reason !== EXO_REASON_BAD_SENDER) $fatal(1, "mac_check: wrong MAC gave %0d, want BAD_SENDER", last_reason);
    csr_write(EXO_REG_ROSTER_MAC_LO_BASE, 32'h00000000);   // host 0: 02:00:00:00:00:00
    csr_write(EXO_REG_ROSTER_MAC_HI_BASE, 32'h00000200);
    nverd = verdicts;
    send(60, 0, t_last);
    while (verdicts == nverd) @(negedge clk);
    if (last_reason !== EXO_REASON_ACCEPT) $fatal(1, "mac_check: right MAC gave %0d, want ACCEPT", last_reason);
    csr_write(EXO_REG_CTRL, 32'd0);
    nverd = verdicts;
    send(60, 0, t_last);                                    // a duplicate now
    while (verdicts == nverd) @(negedge clk);
    if (last_reason !== EXO_REASON_DUPLICATE) $fatal(1, "mac_check off: %0d, want DUPLICATE", last_reason);
    $display("exo_engine_tb: roster MAC check: wrong MAC BAD_SENDER, right MAC ACCEPT");

    // back-to-back minimum-size frames, n = 5, no gaps
    load_n5;
    csr_write(EXO_REG_CTRL, 32'd1);
    nverd = verdicts;
    hist0 = 8'd4; hist1 = 8'd3;
    stalls = 0;
    @(negedge clk);
    t0 = cycle;
    for (i = 0; i < BACK_TO_BACK; i = i + 1) begin
        sender = i % 5;
        build_min(sender, 64'd1000 + i, hist0, hist1);
        // stream without the trailing idle cycle of send(): beats back to back
        for (k = 0; k < 8; k = k + 1) begin
            if (k > 0 || i > 0) @(negedge clk);
            s_axis_tvalid = 1'b1;
            s_axis_tlast = (k == 7);
            s_axis_tdata = {pkt[8*k+7], pkt[8*k+6], pkt[8*k+5], pkt[8*k+4], pkt[8*k+3], pkt[8*k+2], pkt[8*k+1], pkt[8*k]};
            s_axis_tkeep = (k == 7) ? 8'h0F : 8'hFF;
        end
        t_last = cycle;
        hist1 = hist0; hist0 = sender;
    end
    @(negedge clk);
    s_axis_tvalid = 1'b0; s_axis_tlast = 1'b0;
    t1 = cycle;
    while (verdicts != nverd + BACK_TO_BACK) begin
        @(negedge clk);
        if (cycle - t1 > 100) $fatal(1, "back-to-back: %0d verdicts of %0d", verdicts - nverd, BACK_TO_BACK);
    end
    lat = last_verdict_cycle - t_last;
    csr_read(EXO_REG_COUNTER_BASE + 4*EXO_REASON_ACCEPT, r32);
    if (r32 != BACK_TO_BACK) $fatal(1, "back-to-back: %0d ACCEPT of %0d (last reason %0d)", r32, BACK_TO_BACK, last_reason);
    csr_read64(EXO_REG_APPEND_LO, g64);
    if (g64 != 64'd1000 + BACK_TO_BACK) $fatal(1, "back-to-back: append %0d", g64);
    csr_read64(EXO_REG_AGREED_LO, g64);
    if (g64 != 64'd1000 + BACK_TO_BACK - 2) $fatal(1, "back-to-back: agreed %0d", g64);
    $display("exo_engine_tb: back-to-back: %0d minimum-size frames (60 bytes, 8 beats) in %0d cycles = %0d.%02d cycles/frame, 0 tready stalls, all ACCEPT, agreed = append-2",
             BACK_TO_BACK, t1 - t0, (t1 - t0) / BACK_TO_BACK, ((t1 - t0) * 100 / BACK_TO_BACK) % 100);
    if (t1 - t0 != 8 * BACK_TO_BACK) $fatal(1, "back-to-back: %0d cycles, want %0d", t1 - t0, 8 * BACK_TO_BACK);
    $display("exo_engine_tb: latency tlast beat -> verdict and pointer update: min %0d, max %0d, mean %0d.%02d cycles over %0d frames (back-to-back: %0d)",
             lat_min, lat_max, lat_sum / N, (lat_sum * 100 / N) % 100, N, lat);
    $display("exo_engine_tb: PASS %0d/%0d records, %0d cycles", N, N, cycle);
    $finish;
end

endmodule

`resetall
