// exo_engine: the Exo fast path in the NIC (top of the simulated core).
//
//   s_axis (64-bit, from the MAC)
//      |
//      +--------------------------------------+
//      v                                      v
//   +---------------+  fields, codec    +-----------+   +----------+
//   | exo_rx_parser |--verdict--------->| 3-cycle   |   | exo_tag  |<-- key, key1, key_valid
//   | (codec)       |  frame_valid      | delay     |   | SipHash  |
//   +---------------+                   +-----------+   +----------+
//                                             |              | tag_ok
//                                             v              v
//                                        +-----------+  reason  +---------+
//                                        | exo_check |--------->| verdict |--> verdict_*
//                                        | (Classify)|          | counters|
//                                        +-----------+          +---------+
//                                           ^     | accept
//             roster MAC RAM --mac match--->|     v
//                                        +--------------+
//   csr_* (valid/we/addr/wdata/rdata) -->| exo_pointers |  group, hosts, epoch, halted,
//                                        | (Accept)     |  window, append, agreed,
//                                        +--------------+  epoch_start, history
//
// Frame format: see exo_rx_parser.v; the tag rule: exo_tag.v. The
// register map is hw/registers.json (hw/gen/exo_regs.vh,
// docs/registers.md). docs/hdl.md describes the tag stage.
//
// Timing: the beat with tlast is registered by the parser in cycle T
// (frame_valid in T+1). The frame's SipHash tag is known at T+4 (exo_tag:
// the final block enters exo_siphash at T+1 at the latest, 3 cycles to
// the tag), so the decision waits for it: the parser's verdict and fields
// go through a 3-stage delay, exo_check decides in T+4 from them, from
// tag_ok and from the state registers, and the pointers, counters and
// verdict_* registers take the result at the end of T+4: verdict_valid is
// high in cycle T+5, five clock edges after the tlast beat (2 before the
// tag check). The latency is the same for every frame, so the verdicts
// stay in frame order. Every stage takes one frame per cycle, so the
// engine never stalls (s_axis_tready = 1). The history ids are read from
// the parser's capture registers in T+4: the next frame's ids overwrite
// them from its beat 5 on, T+6 at the earliest. Everything captured
// earlier in a frame (the MAC match, group, sender, hist_len, epoch, seq)
// is delayed with the verdict. A frame that can pass the codec is
// at least 6 beats long, so the next one that can reach exo_check ends in
// T+6 or later and sees this frame's update of the pointers.
//
// CSR port: a write (csr_valid & csr_we) takes effect at the clock edge;
// a read (csr_valid & !csr_we) returns csr_rdata with csr_rvalid one
// cycle later.
`resetall
`default_nettype none

module exo_engine #(
    parameter DATA_WIDTH = 64,
    parameter KEEP_WIDTH = DATA_WIDTH/8,
    // largest roster n held; the history holds floor(MAX_HOSTS/2) ids
    parameter MAX_HOSTS = 64,
    parameter MAX_HISTORY = MAX_HOSTS/2,
    // 1: instantiate the roster MAC table (ctrl.mac_check)
    parameter ROSTER_MAC = 1,
    // the transmit queue (exo_tx): slots of SLOT_WORDS 64-bit words
    parameter QUEUE_SLOTS = 4,
    parameter SLOT_WORDS = 512
) (
    input  wire                   clk,
    input  wire                   rst,

    input  wire [DATA_WIDTH-1:0]  s_axis_tdata,
    input  wire [KEEP_WIDTH-1:0]  s_axis_tkeep,
    input  wire                   s_axis_tvalid,
    output wire                   s_axis_tready,
    input  wire                   s_axis_tlast,

    output wire                   verdict_valid,
    output wire [7:0]             verdict_reason,
    output wire                   verdict_slow_path,
    output wire [7:0]             verdict_sender,
    output wire [63:0]            verdict_seq,
    // token mode (exo_tx), with the verdict: the control plane's record
    output wire                   verdict_record,
    output wire                   verdict_armed,
    output wire                   verdict_sent,
    output wire                   verdict_popped,
    output wire                   verdict_handoff,
    output wire                   verdict_halt,
    output wire [63:0]            verdict_kseq,
    output wire [63:0]            verdict_qhead,

    // TX port: this host's frames (token mode)
    output wire [63:0]            m_axis_tx_tdata,
    output wire [7:0]             m_axis_tx_tkeep,
    output wire                   m_axis_tx_tvalid,
    input  wire                   m_axis_tx_tready,
    output wire                   m_axis_tx_tlast,

    // transmit queue stream port: one batch per packet, tuser = its
    // record count on the last beat
    input  wire [63:0]            s_axis_q_tdata,
    input  wire [7:0]             s_axis_q_tkeep,
    input  wire                   s_axis_q_tvalid,
    output wire                   s_axis_q_tready,
    input  wire                   s_axis_q_tlast,
    input  wire [15:0]            s_axis_q_tuser,

    input  wire                   csr_valid,
    input  wire                   csr_we,
    input  wire [11:0]            csr_addr,
    input  wire [31:0]            csr_wdata,
    output wire [31:0]            csr_rdata,
    output wire                   csr_rvalid
);

`include "exo_wire.vh"
`include "exo_regs.vh"

localparam NR = EXO_NUM_REASONS;
localparam [15:0] P_MAX_HOSTS   = MAX_HOSTS[15:0];
localparam [7:0]  P_MAX_HISTORY = MAX_HISTORY[7:0];

initial begin
    if (MAX_HOSTS < 2 || MAX_HOSTS > EXO_MAX_HOSTS) begin
        $error("exo_engine: MAX_HOSTS must be 2..%0d", EXO_MAX_HOSTS);
        $finish;
    end
    if (MAX_HISTORY < MAX_HOSTS/2 || MAX_HISTORY > EXO_MAX_HISTORY) begin
        $error("exo_engine: MAX_HISTORY must be floor(MAX_HOSTS/2)..%0d", EXO_MAX_HISTORY);
        $finish;
    end
    if (NR > EXO_REG_COUNTER_COUNT) begin
        $error("exo_engine: more reasons than counters in the register map");
        $finish;
    end
end

// ---------------------------------------------------------------- parser
wire                     pf_valid;
wire [7:0]               pf_codec_reason;
wire [17:0]              pf_len;
wire [47:0]              pf_src_mac;
wire [15:0]              pf_group;
wire [7:0]               pf_sender;
wire [7:0]               pf_hist_len;
wire [31:0]              pf_epoch;
wire [63:0]              pf_seq;
wire [15:0]              pf_count;
wire [8*MAX_HISTORY-1:0] pf_history;

exo_rx_parser #(
    .DATA_WIDTH(DATA_WIDTH),
    .KEEP_WIDTH(KEEP_WIDTH),
    .MAX_HISTORY(MAX_HISTORY),
    .PTR_WIDTH(18)
) rx_parser_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(s_axis_tdata),
    .s_axis_tkeep(s_axis_tkeep),
    .s_axis_tvalid(s_axis_tvalid),
    .s_axis_tready(s_axis_tready),
    .s_axis_tlast(s_axis_tlast),
    .frame_valid(pf_valid),
    .frame_codec_reason(pf_codec_reason),
    .frame_len(pf_len),
    .f_src_mac(pf_src_mac),
    .f_group(pf_group),
    .f_sender(pf_sender),
    .f_hist_len(pf_hist_len),
    .f_epoch(pf_epoch),
    .f_seq(pf_seq),
    .f_count(pf_count),
    .f_history(pf_history)
);

// ---------------------------------------------------------------- tag stage
// two key slots (phase 0: CSR key[0..3], phase 1: key1[0..3]; k0 = words
// 1:0, k1 = words 3:2) and their valid bits (key_valid, 0b01 at reset)
reg  [127:0] key0_reg = 128'd0;
reg  [127:0] key1_reg = 128'd0;
reg  [1:0]   key_valid_reg = 2'b01;
wire         tag_ok;

exo_tag tag_inst (
    .clk(clk),
    .rst(rst),
    .key0(key0_reg),
    .key1(key1_reg),
    .key_valid(key_valid_reg),
    .s_axis_tdata(s_axis_tdata),
    .s_axis_tvalid(s_axis_tvalid),
    .s_axis_tlast(s_axis_tlast),
    .tag_ok(tag_ok)
);

wire        key0_sel = csr_addr >= EXO_REG_KEY_BASE &&
                       csr_addr < EXO_REG_KEY_BASE + EXO_REG_KEY_COUNT*EXO_REG_KEY_STRIDE;
wire [11:0] key0_off = csr_addr - EXO_REG_KEY_BASE;
wire        key1_sel = csr_addr >= EXO_REG_KEY1_BASE &&
                       csr_addr < EXO_REG_KEY1_BASE + EXO_REG_KEY1_COUNT*EXO_REG_KEY1_STRIDE;
wire [11:0] key1_off = csr_addr - EXO_REG_KEY1_BASE;

always @(posedge clk) begin
    if (csr_valid && csr_we && key0_sel)
        key0_reg[32*key0_off[3:2] +: 32] <= csr_wdata;
    if (csr_valid && csr_we && key1_sel)
        key1_reg[32*key1_off[3:2] +: 32] <= csr_wdata;
    if (csr_valid && csr_we && csr_addr == EXO_REG_KEY_VALID)
        key_valid_reg <= {csr_wdata[EXO_REG_KEY_VALID_SLOT1_LSB], csr_wdata[EXO_REG_KEY_VALID_SLOT0_LSB]};
    if (rst) begin
        key0_reg <= 128'd0;
        key1_reg <= 128'd0;
        key_valid_reg <= EXO_REG_KEY_VALID_RESET[1:0];
    end
end

// ---------------------------------------------------------------- state
wire [15:0]              st_group;
wire [15:0]              st_hosts;
wire [31:0]              st_epoch;
wire                     st_halted;
wire [63:0]              st_window;
wire [63:0]              st_append;
wire [63:0]              st_agreed;
wire [63:0]              st_epoch_start;
wire [8*MAX_HISTORY-1:0] st_history;

wire csr_wr = csr_valid && csr_we;
wire csr_rd = csr_valid && !csr_we;

reg  [7:0] reason;
wire       accept;
wire [7:0] d_sender;
wire [63:0] d_seq;
wire [15:0] d_count;
wire       tx_halt_set, tx_own_accept;
wire [7:0] tx_own_sender;
// the pointers take a received frame's ACCEPT in its verdict cycle and the
// own frame's (token mode) in the cycle after: never both (two verdicts
// are at least 6 cycles apart)
wire       ptr_accept = accept || tx_own_accept;
wire [7:0] ptr_sender = tx_own_accept ? tx_own_sender : d_sender;
wire [63:0] ptr_seq   = tx_own_accept ? st_append : d_seq;

exo_pointers #(
    .MAX_HISTORY(MAX_HISTORY)
) pointers_inst (
    .clk(clk),
    .rst(rst),
    .csr_wr_en(csr_wr),
    .csr_wr_addr(csr_addr),
    .csr_wr_data(csr_wdata),
    .accept(ptr_accept),
    .accept_sender(ptr_sender),
    .accept_seq(ptr_seq),
    .halt_set(tx_halt_set),
    .group(st_group),
    .hosts(st_hosts),
    .epoch(st_epoch),
    .halted(st_halted),
    .window(st_window),
    .append_ptr(st_append),
    .agree_ptr(st_agreed),
    .epoch_start(st_epoch_start),
    .history(st_history)
);

// ---------------------------------------------------------------- roster MAC table
reg         mac_check_reg = 1'b0, mac_check_next;
reg  [47:0] roster_mac_rd;   // roster_mac[f_sender], read every cycle
// a mismatch is BAD_SENDER only for a frame whose epoch is not later than
// the epoch register (exo_check rule 2)
wire        mac_ok = !mac_check_reg || roster_mac_rd == pf_src_mac;

generate
if (ROSTER_MAC) begin : g_roster
    localparam MAC_AW = $clog2(MAX_HOSTS);
    reg [47:0] roster_mac_mem [0:MAX_HOSTS-1];
    wire       mac_sel = csr_addr >= EXO_REG_ROSTER_MAC_LO_BASE &&
                         csr_addr < EXO_REG_ROSTER_MAC_LO_BASE + EXO_REG_ROSTER_MAC_LO_COUNT*EXO_REG_ROSTER_MAC_LO_STRIDE;
    wire [11:0] mac_off = csr_addr - EXO_REG_ROSTER_MAC_LO_BASE;
    wire [8:0]  mac_idx = mac_off[11:3];
    wire        mac_hi  = mac_off[2];
    // the two halves are written separately: keep the last low half and
    // write the whole entry with the high half (driver: lo, then hi)
    reg  [31:0] mac_lo_reg = 0;
    wire        unused_mac_ok = &{1'b0, mac_off[1:0]};
    always @(posedge clk) begin
        if (csr_wr && mac_sel && !mac_hi)
            mac_lo_reg <= csr_wdata;
        if (csr_wr && mac_sel && mac_hi && {7'd0, mac_idx} < P_MAX_HOSTS)
            roster_mac_mem[mac_idx[MAC_AW-1:0]] <= {csr_wdata[15:0], mac_lo_reg};
        roster_mac_rd <= roster_mac_mem[pf_sender[MAC_AW-1:0]];
    end
end else begin : g_no_roster
    always @(posedge clk) roster_mac_rd <= 48'd0;
end
endgenerate

// ---------------------------------------------------------------- delay to the tag
// frame_valid (T+1) -> decision (T+4): the parser's verdict and the
// fields the next frame can overwrite by T+4 (the source MAC match,
// group, sender, hist_len, epoch, seq). f_history is read from the
// capture registers in T+4 (see the timing note above).
localparam VD = 3;
localparam PW = 1 + 8 + 16 + 8 + 8 + 32 + 64 + 16 + 1;

reg  [VD*PW-1:0] delay_reg = {VD*PW{1'b0}};
wire [PW-1:0]    delay_in = {pf_valid, pf_codec_reason, pf_group, pf_sender, pf_hist_len,
                             pf_epoch, pf_seq, pf_count, mac_ok};
wire             d_valid;
wire [7:0]       d_codec_reason;
wire [15:0]      d_group;
wire [7:0]       d_hist_len;
wire [31:0]      d_epoch;
wire             d_mac_ok;
reg  [VD-1:0]    delay_valid;

assign {d_valid, d_codec_reason, d_group, d_sender, d_hist_len, d_epoch, d_seq, d_count, d_mac_ok} =
    delay_reg[VD*PW-1 -: PW];

integer dv, dr;

always @* begin
    for (dv = 0; dv < VD; dv = dv + 1)
        delay_valid[dv] = delay_reg[dv*PW + PW-1];
end

always @(posedge clk) begin
    delay_reg <= {delay_reg[(VD-1)*PW-1:0], delay_in};
    if (rst)
        for (dr = 0; dr < VD; dr = dr + 1)
            delay_reg[dr*PW + PW-1] <= 1'b0;
end

// ---------------------------------------------------------------- checks
wire [7:0] check_reason;
wire       cfg_err = st_hosts > P_MAX_HOSTS;

assign accept = d_valid && reason == EXO_REASON_ACCEPT;

exo_check #(
    .MAX_HISTORY(MAX_HISTORY)
) check_inst (
    .codec_reason(d_codec_reason),
    .f_group(d_group),
    .f_sender(d_sender),
    .f_hist_len(d_hist_len),
    .f_epoch(d_epoch),
    .f_seq(d_seq),
    .f_history(pf_history),
    .mac_ok(d_mac_ok),
    .tag_ok(tag_ok),
    .group(st_group),
    .hosts(st_hosts),
    .epoch(st_epoch),
    .halted(st_halted || cfg_err),
    .window(st_window),
    .append_ptr(st_append),
    .history(st_history),
    .reason(check_reason)
);

always @* begin
    reason = check_reason;
end

// ---------------------------------------------------------------- transmit side
wire        tx_rsel;
wire [31:0] tx_rdata;
wire        clear_counters = csr_wr && csr_addr == EXO_REG_CTRL && csr_wdata[EXO_REG_CTRL_CLEAR_COUNTERS_LSB];

exo_tx #(
    .MAX_HISTORY(MAX_HISTORY),
    .QUEUE_SLOTS(QUEUE_SLOTS),
    .SLOT_WORDS(SLOT_WORDS)
) tx_inst (
    .clk(clk),
    .rst(rst),
    .csr_wr(csr_wr),
    .csr_rd(csr_rd),
    .csr_addr(csr_addr),
    .csr_wdata(csr_wdata),
    .clear_counters(clear_counters),
    .rsel(tx_rsel),
    .rdata(tx_rdata),
    .key0(key0_reg),
    .key1(key1_reg),
    .st_group(st_group),
    .st_hosts(st_hosts),
    .st_epoch(st_epoch),
    .st_halted(st_halted || cfg_err),
    .st_append(st_append),
    .st_history(st_history),
    .d_valid(d_valid),
    .d_reason(reason),
    .d_sender(d_sender),
    .d_count(d_count),
    .d_epoch(d_epoch),
    .halt_set(tx_halt_set),
    .own_accept(tx_own_accept),
    .own_sender(tx_own_sender),
    .v_record(verdict_record),
    .v_armed(verdict_armed),
    .v_sent(verdict_sent),
    .v_popped(verdict_popped),
    .v_handoff(verdict_handoff),
    .v_halt(verdict_halt),
    .v_kseq(verdict_kseq),
    .v_qhead(verdict_qhead),
    .m_axis_tdata(m_axis_tx_tdata),
    .m_axis_tkeep(m_axis_tx_tkeep),
    .m_axis_tvalid(m_axis_tx_tvalid),
    .m_axis_tready(m_axis_tx_tready),
    .m_axis_tlast(m_axis_tx_tlast),
    .s_axis_q_tdata(s_axis_q_tdata),
    .s_axis_q_tkeep(s_axis_q_tkeep),
    .s_axis_q_tvalid(s_axis_q_tvalid),
    .s_axis_q_tready(s_axis_q_tready),
    .s_axis_q_tlast(s_axis_q_tlast),
    .s_axis_q_tuser(s_axis_q_tuser)
);

// ---------------------------------------------------------------- verdict, counters
reg         verdict_valid_reg = 1'b0, verdict_valid_next;
reg  [7:0]  verdict_reason_reg = 0, verdict_reason_next;
reg  [7:0]  verdict_sender_reg = 0, verdict_sender_next;
reg  [63:0] verdict_seq_reg = 0, verdict_seq_next;
reg  [32*NR-1:0] counter_reg = 0, counter_next;
reg  [31:0] frames_in_reg = 0, frames_in_next;
reg  [31:0] frames_acc_reg = 0, frames_acc_next;
reg         rx_busy_reg = 1'b0, rx_busy_next;   // between a first beat and its tlast
reg  [31:0] rdata_reg = 0, rdata_next;
reg         rvalid_reg = 1'b0, rvalid_next;

assign verdict_valid     = verdict_valid_reg;
assign verdict_reason    = verdict_reason_reg;
assign verdict_slow_path = EXO_REASON_SLOW_PATH_MASK[verdict_reason_reg[4:0]] && verdict_reason_reg < NR;
assign verdict_sender    = verdict_sender_reg;
assign verdict_seq       = verdict_seq_reg;
assign csr_rdata         = rdata_reg;
assign csr_rvalid        = rvalid_reg;

wire        hist_rsel  = csr_addr >= EXO_REG_HISTORY_BASE &&
                         csr_addr < EXO_REG_HISTORY_BASE + EXO_REG_HISTORY_COUNT*EXO_REG_HISTORY_STRIDE;
wire [11:0] hist_roff  = csr_addr - EXO_REG_HISTORY_BASE;
wire        cnt_rsel   = csr_addr >= EXO_REG_COUNTER_BASE &&
                         csr_addr < EXO_REG_COUNTER_BASE + EXO_REG_COUNTER_COUNT*EXO_REG_COUNTER_STRIDE;
wire [11:0] cnt_roff   = csr_addr - EXO_REG_COUNTER_BASE;

integer i;
reg [7:0] slot;

// bits deliberately unused: the frame length (the verdict already holds
// every length check) and the byte-in-word bits of word addresses
wire unused_ok = &{1'b0, pf_len, hist_roff[11:8], hist_roff[1:0], cnt_roff[1:0],
                   key0_off[11:4], key0_off[1:0], key1_off[11:4], key1_off[1:0]};

// status.busy: a frame is between its first beat and its verdict
wire busy = rx_busy_reg || pf_valid || (|delay_valid);

always @* begin
    verdict_valid_next = 1'b0;
    verdict_reason_next = verdict_reason_reg;
    verdict_sender_next = verdict_sender_reg;
    verdict_seq_next = verdict_seq_reg;
    counter_next = counter_reg;
    frames_in_next = frames_in_reg;
    frames_acc_next = frames_acc_reg;
    rx_busy_next = rx_busy_reg;
    mac_check_next = mac_check_reg;
    rdata_next = 32'd0;
    rvalid_next = 1'b0;
    slot = 8'd0;

    if (s_axis_tvalid)
        rx_busy_next = !s_axis_tlast;
    if (d_valid) begin
        verdict_valid_next = 1'b1;
        verdict_reason_next = reason;
        verdict_sender_next = d_sender;
        verdict_seq_next = d_seq;
        frames_in_next = frames_in_reg + 1;
        if (accept)
            frames_acc_next = frames_acc_reg + 1;
        for (i = 0; i < NR; i = i + 1)
            if (reason == i[7:0])
                counter_next[32*i +: 32] = counter_reg[32*i +: 32] + 1;
    end

    if (csr_wr && csr_addr == EXO_REG_CTRL) begin
        mac_check_next = csr_wdata[EXO_REG_CTRL_MAC_CHECK_LSB];
        if (csr_wdata[EXO_REG_CTRL_CLEAR_COUNTERS_LSB]) begin
            counter_next = 0;
            frames_in_next = 0;
            frames_acc_next = 0;
        end
    end

    if (csr_rd) begin
        rvalid_next = 1'b1;
        case (csr_addr)
            EXO_REG_RB_TYPE:        rdata_next = EXO_REG_RB_TYPE_RESET;
            EXO_REG_RB_VERSION:     rdata_next = EXO_REG_RB_VERSION_RESET;
            EXO_REG_RB_NEXT_PTR:    rdata_next = EXO_REG_RB_NEXT_PTR_RESET;
            EXO_REG_CAPS:           rdata_next = (MAX_HOSTS << EXO_REG_CAPS_MAX_HOSTS_LSB) |
                                                 (MAX_HISTORY << EXO_REG_CAPS_MAX_HISTORY_LSB);
            EXO_REG_CTRL:           rdata_next = {30'd0, mac_check_reg, 1'b0};
            EXO_REG_STATUS:         rdata_next = {30'd0, busy, cfg_err};
            EXO_REG_LAST_VERDICT:   rdata_next = {23'd0, verdict_slow_path, verdict_reason_reg};
            EXO_REG_GROUP:          rdata_next = {16'd0, st_group};
            EXO_REG_HOSTS:          rdata_next = {16'd0, st_hosts};
            EXO_REG_EPOCH:          rdata_next = st_epoch;
            EXO_REG_HALTED:         rdata_next = {31'd0, st_halted};
            EXO_REG_WINDOW_LO:      rdata_next = st_window[31:0];
            EXO_REG_WINDOW_HI:      rdata_next = st_window[63:32];
            EXO_REG_APPEND_LO:      rdata_next = st_append[31:0];
            EXO_REG_APPEND_HI:      rdata_next = st_append[63:32];
            EXO_REG_AGREED_LO:      rdata_next = st_agreed[31:0];
            EXO_REG_AGREED_HI:      rdata_next = st_agreed[63:32];
            EXO_REG_EPOCH_START_LO: rdata_next = st_epoch_start[31:0];
            EXO_REG_EPOCH_START_HI: rdata_next = st_epoch_start[63:32];
            EXO_REG_FRAMES_IN:      rdata_next = frames_in_reg;
            EXO_REG_FRAMES_ACCEPTED: rdata_next = frames_acc_reg;
            EXO_REG_KEY_VALID:      rdata_next = {30'd0, key_valid_reg};
            default: begin
                if (hist_rsel) begin
                    for (i = 0; i < 4; i = i + 1) begin
                        slot = {hist_roff[7:2], i[1:0]};
                        rdata_next[8*i +: 8] = (slot < P_MAX_HISTORY) ? st_history[8*slot +: 8] : EXO_HISTORY_NONE;
                    end
                end
                if (cnt_rsel)
                    for (i = 0; i < NR; i = i + 1)
                        if (cnt_roff[11:2] == i[9:0])
                            rdata_next = counter_reg[32*i +: 32];
                if (tx_rsel)
                    rdata_next = tx_rdata;
            end
        endcase
    end
end

always @(posedge clk) begin
    verdict_valid_reg <= verdict_valid_next;
    verdict_reason_reg <= verdict_reason_next;
    verdict_sender_reg <= verdict_sender_next;
    verdict_seq_reg <= verdict_seq_next;
    counter_reg <= counter_next;
    frames_in_reg <= frames_in_next;
    frames_acc_reg <= frames_acc_next;
    rx_busy_reg <= rx_busy_next;
    mac_check_reg <= mac_check_next;
    rdata_reg <= rdata_next;
    rvalid_reg <= rvalid_next;

    if (rst) begin
        verdict_valid_reg <= 1'b0;
        counter_reg <= 0;
        frames_in_reg <= 0;
        frames_acc_reg <= 0;
        rx_busy_reg <= 1'b0;
        mac_check_reg <= 1'b0;
        rvalid_reg <= 1'b0;
    end
end

endmodule

`resetall
