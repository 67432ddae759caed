// exo_tx: the transmit side of the Exo engine (token mode): the rule of
// exo.Engine.Step (exo/engine.go) beyond Classify and Accept, a transmit
// queue in block RAM, and an AXI-Stream TX port. docs/hardware.md section
// 10 describes it; docs/token.md section 1 the rule.
//
// The rule, decided in the verdict cycle D (T+4 of exo_engine: the cycle
// exo_check classifies the received frame), from the engine's state
// before the frame's update:
//
//   record  = on & (ACCEPT | slow path | a later epoch's roster refusal)
//   halt    = record & verdict not ACCEPT nor HALTED
//   token   = on & ACCEPT & sender == pred & me not in the history after it
//   handoff = token & ((queue empty & idle_run != 2^32-1 &
//                       empty_run after the frame >= idle_run)
//                      | 32 + h + head length > 4096 (exo.MaxFastFrame))
//   send    = token & !handoff
//
// A send pops the head batch (if any), builds this host's next frame
// (Pointers.Next after the received frame: seq append+1, the epoch, the
// history [pred, history[0..h-2]], the phase bit, the batch or no
// records), seals it under the key of tx_cfg.phase and emits it on the
// TX port; the engine accepts it as its own entry in cycle D+1 (exo_engine
// drives exo_pointers with it), and tx_empty_run follows it.
//
// The tag and the first beat. The tag is in the header, before the
// payload, so a sender that computes it from the frame must read the whole
// frame before its first header beat (store-and-forward). The engine
// instead computes, whenever its state or queue changes, the tag of the
// frame the NEXT token would send (the candidate: every field of it is
// known before the token arrives, since an ACCEPT of pred's frame has seq
// = append and moves the history in a known way). When the token comes
// and the candidate is the one computed, the first beat leaves in cycle
// D+1, 5 cycles after the token's last beat, whatever the frame's length.
// When it is not (the state changed less than a candidate's hash before
// the token, tx_ctrl.spec 0), the engine hashes the frame after the
// verdict and sends when the tag is ready (tx_spec_miss counts these).
//
// The candidate's hash: one SipHash block per cycle (exo_siphash): the
// three header words, then the history and payload as 8-byte blocks
// (exo_tx_body), the tag 3 cycles after the final block: 3 +
// floor((h+len)/8) + 1 + 3 cycles (15 for a 64-byte batch at n = 5).
//
// Queue: QUEUE_SLOTS slots of SLOT_WORDS 64-bit words in one RAM (one
// write port: the CSR data window or the s_axis_q stream port, the CSR
// first; one read port: the body generator). Batch i (QHead i) is in slot
// i mod QUEUE_SLOTS; a slot's length and record count are registers. The
// stream port writes the batch at the tail, tuser = its record count on
// its last beat, and publishes it with tlast.
//
// TX port: one 64-bit beat per cycle from the first beat to tlast: the
// MAC (or its FIFO) must take the frame without back-pressure once it
// starts (m_axis_tready is not looked at; the benches hold it high). No
// Ethernet padding: a frame shorter than 60 bytes is padded by the MAC.
`resetall
`default_nettype none

module exo_tx #(
    parameter MAX_HISTORY = 32,
    parameter QUEUE_SLOTS = 4,
    parameter SLOT_WORDS = 512
) (
    input  wire                      clk,
    input  wire                      rst,

    // CSR (the engine's port, decoded here for the tx_* registers)
    input  wire                      csr_wr,
    input  wire                      csr_rd,
    input  wire [11:0]               csr_addr,
    input  wire [31:0]               csr_wdata,
    input  wire                      clear_counters,
    output reg                       rsel,
    output reg  [31:0]               rdata,

    // key slots
    input  wire [127:0]              key0,
    input  wire [127:0]              key1,

    // the engine's state (before the update of the cycle)
    input  wire [15:0]               st_group,
    input  wire [15:0]               st_hosts,
    input  wire [31:0]               st_epoch,
    input  wire                      st_halted,
    input  wire [63:0]               st_append,
    input  wire [8*MAX_HISTORY-1:0]  st_history,

    // the verdict cycle D
    input  wire                      d_valid,
    input  wire [7:0]                d_reason,
    input  wire [7:0]                d_sender,
    input  wire [15:0]               d_count,
    input  wire [31:0]               d_epoch,

    // to the pointers: halt in D, the own frame's ACCEPT in D+1
    output wire                      halt_set,
    output reg                       own_accept,
    output wire [7:0]                own_sender,

    // with the verdict (D+1)
    output reg                       v_record,
    output reg                       v_armed,
    output reg                       v_sent,
    output reg                       v_popped,
    output reg                       v_handoff,
    output reg                       v_halt,
    output reg  [63:0]               v_kseq,
    output reg  [63:0]               v_qhead,

    // TX port
    output reg  [63:0]               m_axis_tdata,
    output reg  [7:0]                m_axis_tkeep,
    output reg                       m_axis_tvalid,
    input  wire                      m_axis_tready,
    output reg                       m_axis_tlast,

    // queue stream port (a DMA engine)
    input  wire [63:0]               s_axis_q_tdata,
    input  wire [7:0]                s_axis_q_tkeep,
    input  wire                      s_axis_q_tvalid,
    output wire                      s_axis_q_tready,
    input  wire                      s_axis_q_tlast,
    input  wire [15:0]               s_axis_q_tuser
);

`include "exo_wire.vh"
`include "exo_regs.vh"

localparam QW = $clog2(QUEUE_SLOTS);
localparam SW = $clog2(SLOT_WORDS);
localparam AW = QW + SW;
localparam MAX_FAST_FRAME = 4096;   // exo.MaxFastFrame
localparam HB = 8*MAX_HISTORY;

initial begin
    if ((1 << QW) != QUEUE_SLOTS || (1 << SW) != SLOT_WORDS || QUEUE_SLOTS < 2) begin
        $error("exo_tx: QUEUE_SLOTS (>= 2) and SLOT_WORDS must be powers of 2");
        $finish;
    end
end

// ---------------------------------------------------------------- registers
reg         on_reg = 1'b0, spec_en_reg = 1'b1;
reg  [7:0]  me_reg = 0, pred_reg = 0;
reg         phase_reg = 1'b0;
reg  [31:0] empty_run_reg = 0, idle_run_reg = 32'hFFFFFFFF;
reg  [63:0] kseq_reg = 0, qhead_reg = 0, qtail_reg = 0;
reg  [AW-1:0] qwaddr_reg = 0;
reg  [31:0] qwdata_hi_reg = 0;
reg  [47:0] src_mac_reg = 0, dst_mac_reg = 48'hFFFFFFFFFFFF;
reg  [31:0] c_sent = 0, c_empty = 0, c_underrun = 0, c_handoff = 0, c_halts = 0,
            c_spec_miss = 0, c_busy_drop = 0, c_push_full = 0, c_ta_last = 0, c_ta_max = 0;

reg  [15:0] desc_len [0:QUEUE_SLOTS-1];
reg  [15:0] desc_cnt [0:QUEUE_SLOTS-1];
reg  [63:0] qram [0:QUEUE_SLOTS*SLOT_WORDS-1];

integer di;
initial for (di = 0; di < QUEUE_SLOTS; di = di + 1) begin
    desc_len[di] = 0;
    desc_cnt[di] = 0;
end

wire [63:0]   qdepth   = qtail_reg - qhead_reg;
wire          q_full   = qdepth >= QUEUE_SLOTS;
wire          q_empty  = qtail_reg == qhead_reg;
wire [QW-1:0] head_slot = qhead_reg[QW-1:0];
wire [QW-1:0] tail_slot = qtail_reg[QW-1:0];
wire [15:0]   head_len = q_empty ? 16'd0 : desc_len[head_slot];
wire [15:0]   head_cnt = q_empty ? 16'd0 : desc_cnt[head_slot];

// ---------------------------------------------------------------- the rule (cycle D)
wire [7:0]  h8 = st_hosts[8:1];
wire [15:0] h16 = {8'd0, h8};
wire        d_acc  = d_valid && d_reason == EXO_REASON_ACCEPT;
wire        d_slow = d_valid && d_reason < EXO_NUM_REASONS && EXO_REASON_SLOW_PATH_MASK[d_reason[4:0]];
wire        d_later = d_valid && d_epoch > st_epoch &&
                      (d_reason == EXO_REASON_BAD_SENDER || d_reason == EXO_REASON_BAD_HISTLEN ||
                       d_reason == EXO_REASON_BAD_HISTORY_ID);
wire        rec    = on_reg && (d_acc || d_slow || d_later);
wire        halt_v = rec && !d_acc && d_reason != EXO_REASON_HALTED;

// me in the history after the frame: the sender, or slots 0..h-2 before
reg         me_in_hist;
integer     mi;
always @* begin
    me_in_hist = d_sender == me_reg;
    for (mi = 0; mi < MAX_HISTORY - 1; mi = mi + 1)
        if (mi + 1 < h16 && st_history[8*mi +: 8] == me_reg)
            me_in_hist = 1'b1;
end

function [31:0] pass_run(input [31:0] run, input [15:0] count);
    pass_run = count != 16'd0 ? 32'd0 : (run == 32'hFFFFFFFF ? run : run + 32'd1);
endfunction

wire [31:0] run_after = d_acc ? pass_run(empty_run_reg, d_count) : empty_run_reg;
wire        token     = on_reg && d_acc && d_sender == pred_reg && !me_in_hist;
wire        too_long  = !q_empty && (32'd32 + {16'd0, h16} + {16'd0, head_len}) > MAX_FAST_FRAME;
wire        idle_stop = q_empty && idle_run_reg != 32'hFFFFFFFF && run_after >= idle_run_reg;
wire        handoff   = token && (idle_stop || too_long);
reg  [1:0]  tx_state = 2'd0;        // 0 idle, 1 waiting for the tag, 2 emitting
localparam  S_IDLE = 2'd0, S_WAIT = 2'd1, S_EMIT = 2'd2;
wire        busy      = tx_state != S_IDLE;
wire        busy_drop = token && !handoff && busy;
wire        send      = token && !handoff && !busy;

assign halt_set   = halt_v || handoff || busy_drop;
assign own_sender = me_reg;

// ---------------------------------------------------------------- the candidate
// The frame the next token sends, from the state now: seq append+1, the
// history [pred, history[0..h-2]], the queue head. s_* is the one hashed
// (or being hashed); match says it is the candidate of now.
reg  [HB-1:0] c_hist;
integer ci;
always @* begin
    c_hist = {HB{1'b0}};
    c_hist[7:0] = pred_reg;
    for (ci = 1; ci < MAX_HISTORY; ci = ci + 1)
        if (ci < h16)
            c_hist[8*ci +: 8] = st_history[8*(ci-1) +: 8];
end
wire [63:0]  c_seq = st_append + 64'd1;
wire [127:0] c_key = phase_reg ? key1 : key0;

reg  [HB-1:0]  s_hist = 0;
reg  [63:0]    s_seq = 0;
reg  [15:0]    s_group = 0;
reg  [31:0]    s_epoch = 0;
reg  [7:0]     s_h = 0, s_me = 0;
reg            s_phase = 0, s_batch = 0;
reg  [QW-1:0]  s_slot = 0;
reg  [15:0]    s_len = 0, s_cnt = 0;
reg  [127:0]   s_key = 0;
reg            s_valid = 1'b0;      // s_* holds a candidate (hashed or being hashed)
reg            s_done = 1'b0;       // s_tag is its tag
reg  [63:0]    s_tag = 0;

wire match = s_valid && s_hist == c_hist && s_seq == c_seq && s_group == st_group &&
             s_epoch == st_epoch && s_h == h8 && s_me == me_reg && s_phase == phase_reg &&
             s_batch == !q_empty && s_slot == head_slot && s_len == head_len &&
             s_cnt == head_cnt && s_key == c_key;

// ---------------------------------------------------------------- header words
// exo bytes 0..23 as three little-endian words (the SipHash blocks and
// the TX beats), then the tag, big-endian
function [63:0] put_be(input [63:0] w, input integer off, input integer size, input [63:0] v);
    integer k;
    begin
        put_be = w;
        for (k = 0; k < size; k = k + 1)
            put_be[8*(off + k) +: 8] = v[8*(size-1-k) +: 8];
    end
endfunction

wire [15:0] s_flags = s_phase ? EXO_FLAG_KEY_PHASE : 16'd0;
wire [63:0] q0 = put_be(put_be(put_be(put_be(put_be(put_be(64'd0,
                    EXO_OFF_VERSION, 1, {56'd0, EXO_VERSION}),
                    EXO_OFF_TYPE, 1, {56'd0, EXO_TYPE_DATA}),
                    EXO_OFF_GROUP, 2, {48'd0, s_group}),
                    EXO_OFF_SENDER, 1, {56'd0, s_me}),
                    EXO_OFF_HIST_LEN, 1, {56'd0, s_h}),
                    EXO_OFF_PAYLOAD_LEN, 2, {48'd0, s_batch ? s_len : 16'd0});
wire [63:0] q1 = put_be(put_be(put_be(64'd0,
                    EXO_OFF_EPOCH - 8, 4, {32'd0, s_epoch}),
                    EXO_OFF_COUNT - 8, 2, {48'd0, s_batch ? s_cnt : 16'd0}),
                    EXO_OFF_FLAGS - 8, 2, {48'd0, s_flags});
wire [63:0] q2 = put_be(64'd0, 0, 8, s_seq);
wire [63:0] q3 = put_be(64'd0, 0, 8, s_tag);
wire [15:0] s_plen = s_batch ? s_len : 16'd0;
wire [15:0] body_len = {8'd0, s_h} + s_plen;           // history + payload
wire [15:0] body_blocks = {3'd0, body_len[15:3]} + 16'd1;      // the hash's (final may be empty)
wire [15:0] frame_bytes = 16'd46 + body_len;           // on the TX port
wire [15:0] frame_beats = (frame_bytes + 16'd7) >> 3;

// ---------------------------------------------------------------- body generator
wire         g_start;          // body block 0 three cycles later
wire         g_valid;
wire [63:0]  g_block;
wire [AW-1:0] g_raddr;
reg  [63:0]  g_rdata = 0;

exo_tx_body #(
    .MAX_HISTORY(MAX_HISTORY),
    .AW(AW),
    .QW(QW),
    .SW(SW)
) body_inst (
    .clk(clk),
    .start(g_start),
    .h(s_h),
    .hist(s_hist),
    .slot(s_slot),
    .raddr(g_raddr),
    .rdata(g_rdata),
    .out_valid(g_valid),
    .out_block(g_block)
);

always @(posedge clk)
    g_rdata <= qram[g_raddr];

// ---------------------------------------------------------------- hasher
// job: cycle J q0 (first), J+1 q1, J+2 q2, J+3+k body block k (the
// generator started in J+1); the tag 3 cycles after the final block
reg  [15:0] hj_cnt = 0;          // cycles since J
reg         hj_run = 1'b0;
reg  [7:0]  hj_id = 0;           // job number
reg  [3:0]  hj_fin = 0;          // the final block's job went in 1..3 cycles ago (shift)
reg  [23:0] hj_fin_id = 0;
wire        sip_valid;
wire [63:0] sip_tag;
wire [15:0] msg_len = 16'd24 + body_len;
reg         h_in_valid, h_in_first, h_in_last;
reg  [63:0] h_in_block;

always @* begin
    h_in_valid = 1'b0;
    h_in_first = 1'b0;
    h_in_last = 1'b0;
    h_in_block = 64'd0;
    if (hj_run) begin
        h_in_valid = 1'b1;
        case (hj_cnt)
            16'd0: begin h_in_block = q0; h_in_first = 1'b1; end
            16'd1: h_in_block = q1;
            16'd2: h_in_block = q2;
            default: begin
                h_in_block = g_block;
                h_in_last = hj_cnt == body_blocks + 16'd2;
            end
        endcase
    end
end

exo_siphash siphash_inst (
    .clk(clk),
    .rst(rst),
    .k0(s_key[63:0]),
    .k1(s_key[127:64]),
    .in_valid(h_in_valid),
    .in_first(h_in_first),
    .in_last(h_in_last),
    .in_len(msg_len[7:0]),
    .in_block(h_in_block),
    .out_valid(sip_valid),
    .out_tag(sip_tag)
);

// the hasher starts on the candidate of now: speculation (idle, the
// candidate changed), or a token whose tag is neither ready nor being
// computed (a miss)
wire        hit        = spec_en_reg && match && s_done;
wire        hash_start = (tx_state == S_IDLE && !(d_valid && send) && spec_en_reg && !match) ||
                         (d_valid && send && !hit && !(match && hj_run));

// ---------------------------------------------------------------- TX
reg  [15:0] e_beat = 0;          // beat computed in this cycle
reg  [63:0] e_prev = 0;          // body block k-1 (q_{k+3})
reg  [31:0] ta_cnt = 0;          // cycles since the verdict of the token

// beat b = q_{b-2} bytes 2..7, then q_{b-1} bytes 0..1
function [63:0] beat_of(input [47:0] qa_hi, input [15:0] qb_lo);
    beat_of = {qb_lo, qa_hi};
endfunction

// the body generator starts in J (block k in J+3+k for the hasher) or in
// the emission's cycle 2 (block 0 for beat 5)
assign g_start = (hj_run && hj_cnt == 16'd0) || (tx_state == S_EMIT && e_beat == 16'd2);

wire [63:0] qm2 = {dst_mac_reg[7:0], dst_mac_reg[15:8], dst_mac_reg[23:16], dst_mac_reg[31:24],
                   dst_mac_reg[39:32], dst_mac_reg[47:40], 16'd0};
wire [63:0] qm1 = {EXO_ETHER_TYPE[7:0], EXO_ETHER_TYPE[15:8],
                   src_mac_reg[7:0], src_mac_reg[15:8], src_mac_reg[23:16], src_mac_reg[31:24],
                   src_mac_reg[39:32], src_mac_reg[47:40]};

reg  [63:0] e_data;
always @* begin
    case (e_beat)
        16'd0: e_data = beat_of(qm2[63:16], qm1[15:0]);
        16'd1: e_data = beat_of(qm1[63:16], q0[15:0]);
        16'd2: e_data = beat_of(q0[63:16], q1[15:0]);
        16'd3: e_data = beat_of(q1[63:16], q2[15:0]);
        16'd4: e_data = beat_of(q2[63:16], q3[15:0]);
        16'd5: e_data = beat_of(q3[63:16], g_block[15:0]);
        default: e_data = beat_of(e_prev[63:16], g_block[15:0]);
    endcase
end

wire [2:0]  last_bytes = frame_bytes[2:0];
wire [7:0]  last_keep  = last_bytes == 3'd0 ? 8'hFF : (8'hFF >> (4'd8 - {1'b0, last_bytes}));

// ---------------------------------------------------------------- queue writes
wire        csr_qw   = csr_wr && csr_addr == EXO_REG_TX_QWDATA_LO;
wire        csr_push = csr_wr && csr_addr == EXO_REG_TX_PUSH;
wire [15:0] push_len = csr_wdata[EXO_REG_TX_PUSH_LEN_LSB +: 16];
wire        push_ok  = !q_full && push_len <= SLOT_WORDS*8;
reg  [SW:0] qs_wi = 0;           // stream port: words of the batch so far
reg  [15:0] qs_len = 0;
assign s_axis_q_tready = !q_full && !csr_qw && !qs_wi[SW];
wire        qs_beat = s_axis_q_tvalid && s_axis_q_tready;

function [3:0] popcount8(input [7:0] k);
    integer b;
    begin
        popcount8 = 0;
        for (b = 0; b < 8; b = b + 1)
            popcount8 = popcount8 + {3'd0, k[b]};
    end
endfunction

always @(posedge clk) begin
    if (csr_qw)
        qram[qwaddr_reg] <= {qwdata_hi_reg, csr_wdata};
    else if (qs_beat)
        qram[{tail_slot, qs_wi[SW-1:0]}] <= s_axis_q_tdata;
end

// ---------------------------------------------------------------- CSR reads
always @* begin
    rsel = 1'b1;
    rdata = 32'd0;
    case (csr_addr)
        EXO_REG_TX_CTRL:           rdata = {30'd0, spec_en_reg, on_reg};
        EXO_REG_TX_CFG:            rdata = {15'd0, phase_reg, pred_reg, me_reg};
        EXO_REG_TX_EMPTY_RUN:      rdata = empty_run_reg;
        EXO_REG_TX_IDLE_RUN:       rdata = idle_run_reg;
        EXO_REG_TX_KSEQ_LO:        rdata = kseq_reg[31:0];
        EXO_REG_TX_KSEQ_HI:        rdata = kseq_reg[63:32];
        EXO_REG_TX_QHEAD_LO:       rdata = qhead_reg[31:0];
        EXO_REG_TX_QHEAD_HI:       rdata = qhead_reg[63:32];
        EXO_REG_TX_QTAIL_LO:       rdata = qtail_reg[31:0];
        EXO_REG_TX_QTAIL_HI:       rdata = qtail_reg[63:32];
        EXO_REG_TX_QWADDR:         rdata = {{(32-AW){1'b0}}, qwaddr_reg};
        EXO_REG_TX_SRC_MAC_LO:     rdata = src_mac_reg[31:0];
        EXO_REG_TX_SRC_MAC_HI:     rdata = {16'd0, src_mac_reg[47:32]};
        EXO_REG_TX_DST_MAC_LO:     rdata = dst_mac_reg[31:0];
        EXO_REG_TX_DST_MAC_HI:     rdata = {16'd0, dst_mac_reg[47:32]};
        EXO_REG_TX_CAPS:           rdata = (SLOT_WORDS << EXO_REG_TX_CAPS_SLOT_WORDS_LSB) |
                                           (QUEUE_SLOTS << EXO_REG_TX_CAPS_QUEUE_SLOTS_LSB);
        EXO_REG_TX_STATUS:         rdata = {29'd0, q_full, s_done && match, busy};
        EXO_REG_TX_SENT:           rdata = c_sent;
        EXO_REG_TX_EMPTY:          rdata = c_empty;
        EXO_REG_TX_UNDERRUN:       rdata = c_underrun;
        EXO_REG_TX_HANDOFF:        rdata = c_handoff;
        EXO_REG_TX_HALTS:          rdata = c_halts;
        EXO_REG_TX_SPEC_MISS:      rdata = c_spec_miss;
        EXO_REG_TX_BUSY_DROP:      rdata = c_busy_drop;
        EXO_REG_TX_PUSH_FULL:      rdata = c_push_full;
        EXO_REG_TX_TURNAROUND_LAST: rdata = c_ta_last;
        EXO_REG_TX_TURNAROUND_MAX: rdata = c_ta_max;
        EXO_REG_TX_QWDATA_LO, EXO_REG_TX_QWDATA_HI, EXO_REG_TX_PUSH: rdata = 32'd0;
        default:                   rsel = 1'b0;
    endcase
end

wire unused_ok = &{1'b0, csr_rd, m_axis_tready, st_hosts, g_valid, hj_fin[3], msg_len[15:8], csr_push,
                   e_prev[15:0], qm2[15:0],
                   qdepth[63:32]};

// ---------------------------------------------------------------- sequential
always @(posedge clk) begin
    // defaults: one-cycle pulses
    own_accept <= 1'b0;
    v_record <= 1'b0;
    v_sent <= 1'b0;
    v_popped <= 1'b0;
    v_handoff <= 1'b0;
    v_halt <= 1'b0;

    // the own frame's entry (D+1): empty_run follows it
    if (own_accept)
        empty_run_reg <= pass_run(empty_run_reg, s_batch ? s_cnt : 16'd0);

    // ---- the verdict cycle D
    if (d_valid) begin
        v_record <= rec;
        v_armed <= !st_halted;
        v_kseq <= kseq_reg;
        v_qhead <= qhead_reg + {63'd0, send && !q_empty};
        v_sent <= send;
        v_popped <= send && !q_empty;
        v_handoff <= handoff;
        v_halt <= halt_set;
        if (rec)
            kseq_reg <= kseq_reg + 64'd1;
        if (d_acc)
            empty_run_reg <= run_after;
        if (token && q_empty)
            c_underrun <= c_underrun + 1;
        if (handoff)
            c_handoff <= c_handoff + 1;
        if (halt_set)
            c_halts <= c_halts + 1;
        if (busy_drop)
            c_busy_drop <= c_busy_drop + 1;
        if (send) begin
            own_accept <= 1'b1;
            if (!q_empty)
                qhead_reg <= qhead_reg + 64'd1;
            c_sent <= c_sent + 1;
            if (q_empty)
                c_empty <= c_empty + 1;
            ta_cnt <= 0;
            if (hit) begin
                // the candidate's tag is ready: beat 0 now
                tx_state <= S_EMIT;
                e_beat <= 16'd1;
                m_axis_tvalid <= 1'b1;
                m_axis_tdata <= e_data;
                m_axis_tkeep <= 8'hFF;
                m_axis_tlast <= 1'b0;
                c_ta_last <= 0;
            end else begin
                c_spec_miss <= c_spec_miss + 1;
                tx_state <= S_WAIT;   // the candidate is latched below (hash_start)
            end
        end
    end

    // ---- the hasher
    if (hj_run) begin
        hj_cnt <= hj_cnt + 16'd1;
        if (h_in_last)
            hj_run <= 1'b0;
    end
    hj_fin <= {hj_fin[2:0], h_in_last};
    hj_fin_id <= {hj_fin_id[15:0], hj_id};
    if (sip_valid && hj_fin[2] && hj_fin_id[23:16] == hj_id && s_valid) begin
        s_tag <= sip_tag;
        s_done <= 1'b1;
    end

    if (hash_start) begin
        // latch the candidate of now (before this cycle's update) and
        // hash it from the next cycle
        hj_run <= 1'b1;
        hj_cnt <= 0;
        hj_id <= hj_id + 8'd1;
        s_valid <= 1'b1;
        s_done <= 1'b0;
        s_hist <= c_hist;
        s_seq <= c_seq;
        s_group <= st_group;
        s_epoch <= st_epoch;
        s_h <= h8;
        s_me <= me_reg;
        s_phase <= phase_reg;
        s_batch <= !q_empty;
        s_slot <= head_slot;
        s_len <= head_len;
        s_cnt <= head_cnt;
        s_key <= c_key;
    end

    // ---- waiting for the tag
    if (tx_state == S_WAIT) begin
        ta_cnt <= ta_cnt + 1;
        if (s_done) begin
            tx_state <= S_EMIT;
            e_beat <= 16'd1;
            m_axis_tvalid <= 1'b1;
            m_axis_tdata <= e_data;
            m_axis_tkeep <= 8'hFF;
            m_axis_tlast <= 1'b0;
            c_ta_last <= ta_cnt + 1;
            if (ta_cnt + 1 > c_ta_max)
                c_ta_max <= ta_cnt + 1;
        end
    end

    // ---- emitting: beat e_beat computed now, out next cycle
    if (tx_state == S_EMIT) begin
        if (e_beat >= 16'd5)
            e_prev <= g_block;
        if (e_beat < frame_beats) begin
            m_axis_tvalid <= 1'b1;
            m_axis_tdata <= e_data;
            m_axis_tlast <= e_beat == frame_beats - 16'd1;
            m_axis_tkeep <= e_beat == frame_beats - 16'd1 ? last_keep : 8'hFF;
            e_beat <= e_beat + 16'd1;
        end else begin
            m_axis_tvalid <= 1'b0;
            m_axis_tlast <= 1'b0;
            tx_state <= S_IDLE;
            e_beat <= 0;
            s_valid <= 1'b0;          // the state moved on: a new candidate
            s_done <= 1'b0;
        end
    end

    // ---- CSR writes (win over the engine's updates)
    if (csr_wr) begin
        case (csr_addr)
            EXO_REG_TX_CTRL: begin
                on_reg <= csr_wdata[EXO_REG_TX_CTRL_ON_LSB];
                spec_en_reg <= csr_wdata[EXO_REG_TX_CTRL_SPEC_LSB];
            end
            EXO_REG_TX_CFG: begin
                me_reg <= csr_wdata[EXO_REG_TX_CFG_ME_LSB +: 8];
                pred_reg <= csr_wdata[EXO_REG_TX_CFG_PRED_LSB +: 8];
                phase_reg <= csr_wdata[EXO_REG_TX_CFG_PHASE_LSB];
            end
            EXO_REG_TX_EMPTY_RUN:  empty_run_reg <= csr_wdata;
            EXO_REG_TX_IDLE_RUN:   idle_run_reg <= csr_wdata;
            EXO_REG_TX_KSEQ_LO:    kseq_reg[31:0] <= csr_wdata;
            EXO_REG_TX_KSEQ_HI:    kseq_reg[63:32] <= csr_wdata;
            EXO_REG_TX_QHEAD_LO:   qhead_reg[31:0] <= csr_wdata;
            EXO_REG_TX_QHEAD_HI:   qhead_reg[63:32] <= csr_wdata;
            EXO_REG_TX_QTAIL_LO:   qtail_reg[31:0] <= csr_wdata;
            EXO_REG_TX_QTAIL_HI:   qtail_reg[63:32] <= csr_wdata;
            EXO_REG_TX_QWADDR:     qwaddr_reg <= csr_wdata[AW-1:0];
            EXO_REG_TX_QWDATA_HI:  qwdata_hi_reg <= csr_wdata;
            EXO_REG_TX_QWDATA_LO:  qwaddr_reg <= qwaddr_reg + 1'b1;
            EXO_REG_TX_SRC_MAC_LO: src_mac_reg[31:0] <= csr_wdata;
            EXO_REG_TX_SRC_MAC_HI: src_mac_reg[47:32] <= csr_wdata[15:0];
            EXO_REG_TX_DST_MAC_LO: dst_mac_reg[31:0] <= csr_wdata;
            EXO_REG_TX_DST_MAC_HI: dst_mac_reg[47:32] <= csr_wdata[15:0];
            EXO_REG_TX_PUSH: begin
                if (push_ok) begin
                    desc_len[tail_slot] <= push_len;
                    desc_cnt[tail_slot] <= csr_wdata[EXO_REG_TX_PUSH_COUNT_LSB +: 16];
                    qtail_reg <= qtail_reg + 64'd1;
                end else
                    c_push_full <= c_push_full + 1;
            end
            default: ;
        endcase
    end else if (qs_beat) begin
        qs_wi <= qs_wi + 1'b1;
        qs_len <= qs_len + {12'd0, popcount8(s_axis_q_tkeep)};
        if (s_axis_q_tlast) begin
            desc_len[tail_slot] <= qs_len + {12'd0, popcount8(s_axis_q_tkeep)};
            desc_cnt[tail_slot] <= s_axis_q_tuser;
            qtail_reg <= qtail_reg + 64'd1;
            qs_wi <= 0;
            qs_len <= 0;
        end
    end
    if (clear_counters) begin
        c_sent <= 0; c_empty <= 0; c_underrun <= 0; c_handoff <= 0; c_halts <= 0;
        c_spec_miss <= 0; c_busy_drop <= 0; c_push_full <= 0; c_ta_last <= 0; c_ta_max <= 0;
    end

    if (rst) begin
        on_reg <= EXO_REG_TX_CTRL_RESET[EXO_REG_TX_CTRL_ON_LSB];
        spec_en_reg <= EXO_REG_TX_CTRL_RESET[EXO_REG_TX_CTRL_SPEC_LSB];
        me_reg <= 0; pred_reg <= 0; phase_reg <= 0;
        empty_run_reg <= 0;
        idle_run_reg <= EXO_REG_TX_IDLE_RUN_RESET;
        kseq_reg <= 0; qhead_reg <= 0; qtail_reg <= 0; qwaddr_reg <= 0;
        src_mac_reg <= 0;
        dst_mac_reg <= {EXO_REG_TX_DST_MAC_HI_RESET[15:0], EXO_REG_TX_DST_MAC_LO_RESET};
        tx_state <= S_IDLE;
        m_axis_tvalid <= 1'b0;
        m_axis_tlast <= 1'b0;
        s_valid <= 1'b0;
        s_done <= 1'b0;
        hj_run <= 1'b0;
        e_beat <= 0;
        own_accept <= 1'b0;
        qs_wi <= 0;
        qs_len <= 0;
        c_sent <= 0; c_empty <= 0; c_underrun <= 0; c_handoff <= 0; c_halts <= 0;
        c_spec_miss <= 0; c_busy_drop <= 0; c_push_full <= 0; c_ta_last <= 0; c_ta_max <= 0;
    end
end

endmodule

`resetall
