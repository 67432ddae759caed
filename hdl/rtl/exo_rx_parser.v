// exo_rx_parser: AXI-Stream receive path of the Exo engine. Parses the Exo
// frame behind a 14-byte Ethernet header at the fixed offsets of
// hw/wire.json (hw/gen/exo_wire.vh) and runs the codec checks of
// exo.Frame.UnmarshalBinary (exo/frame.go) as the bytes stream past.
//
// Stream bytes (AXI-Stream byte lane i = tdata[8i+7:8i], byte 0 first):
//
//   0                   6                  12     14
//   +-------------------+-------------------+------+----------------------+
//   | dst MAC           | src MAC           | 88B5 | Exo frame (offset 0) |
//   +-------------------+-------------------+------+----------------------+
//
// Exo frame (offsets after the Ethernet header, big-endian fields):
//
//    0       1     2       4       5         6             8
//   +-------+-----+-------+-------+---------+-------------+
//   |version| type| group |sender |hist_len | payload_len |
//   +-------+-----+-------+-------+---------+-------------+
//    8             12      14      16                24            32
//   +-------------+-------+-------+-----------------+-------------+
//   | epoch       | count | flags | seq (64)        | tag (64)    |
//   +-------------+-------+-------+-----------------+-------------+
//    32             32+hist_len                32+hist_len+payload_len
//   +--------------+--------------------------+---------------------
//   | history ids  | payload: count records   | padding / trailer
//   +--------------+ [len u16][len bytes] ... +---------------------
//
// Codec checks, in the order of UnmarshalBinary (the first failing check
// names the reason): len < 1 MALFORMED; version != 1 BAD_VERSION; len < 32
// MALFORMED; type != DATA BAD_TYPE; flags, the KEY_PHASE bit (0x4000)
// aside, not 0 / READMIT|id BAD_FLAGS (exo.ValidFlags);
// hist_len > 128 BAD_HISTLEN; history beyond the frame MALFORMED; payload
// beyond the frame BAD_PAYLOAD; a repeated history id other than 0xFF
// BAD_HISTORY_ID (all hist_len ids, up to 128); payload not exactly count
// records BAD_PAYLOAD. Bytes after the payload (Ethernet padding, a
// trailer) are ignored.
//
// The parser never stalls: s_axis_tready is 1 out of reset. At the beat
// with tlast it registers the codec verdict and raises frame_valid for one
// cycle. The field outputs (f_*) are the capture registers themselves:
// they hold the frame's values during the frame_valid cycle, because the
// first beat of the next frame carries only Ethernet bytes (14 > 8) and
// the Exo bytes start in its second beat. tkeep must be contiguous from
// lane 0 (all ones except, possibly, on the tlast beat).
`resetall
`default_nettype none

module exo_rx_parser #(
    parameter DATA_WIDTH = 64,
    parameter KEEP_WIDTH = DATA_WIDTH/8,
    // history ids kept for the checks (slots 0..MAX_HISTORY-1); the
    // repeated-id check covers all hist_len <= 128 ids regardless
    parameter MAX_HISTORY = 32,
    // byte counter width: frames up to 2^PTR_WIDTH-1 bytes
    parameter PTR_WIDTH = 18
) (
    input  wire                      clk,
    input  wire                      rst,

    input  wire [DATA_WIDTH-1:0]     s_axis_tdata,
    input  wire [KEEP_WIDTH-1:0]     s_axis_tkeep,
    input  wire                      s_axis_tvalid,
    output wire                      s_axis_tready,
    input  wire                      s_axis_tlast,

    output wire                      frame_valid,
    output wire [7:0]                frame_codec_reason,
    output wire [PTR_WIDTH-1:0]      frame_len,
    output wire [47:0]               f_src_mac,
    output wire [15:0]               f_group,
    output wire [7:0]                f_sender,
    output wire [7:0]                f_hist_len,
    output wire [31:0]               f_epoch,
    output wire [63:0]               f_seq,
    output wire [15:0]               f_count,
    output wire [8*MAX_HISTORY-1:0]  f_history
);

`include "exo_wire.vh"

localparam HDR_BITS = 8*EXO_HEADER_LEN;
// sized copies of the layout constants for PTR_WIDTH+1-bit arithmetic
localparam [PTR_WIDTH:0]   P_ETH     = EXO_ETH_HEADER_LEN;
localparam [PTR_WIDTH:0]   P_HDR     = EXO_HEADER_LEN;
localparam [PTR_WIDTH:0]   P_HIST    = EXO_OFF_HISTORY;
localparam [PTR_WIDTH:0]   P_RECLEN  = EXO_RECORD_LEN_SIZE;
localparam [PTR_WIDTH-1:0] P_KEEP    = KEEP_WIDTH[PTR_WIDTH-1:0];
// last lane-0 offset before the counter saturates
localparam [PTR_WIDTH-1:0] PTR_LAST  = {PTR_WIDTH{1'b1}} - P_KEEP - P_KEEP + 1'b1;

// elaboration-time checks
initial begin
    if (DATA_WIDTH != 64) begin
        $error("exo_rx_parser: DATA_WIDTH must be 64 (the Exo header must not start in the first beat)");
        $finish;
    end
    if (KEEP_WIDTH*8 != DATA_WIDTH) begin
        $error("exo_rx_parser: KEEP_WIDTH must be DATA_WIDTH/8");
        $finish;
    end
    if (MAX_HISTORY < 1 || MAX_HISTORY > EXO_MAX_HISTORY) begin
        $error("exo_rx_parser: MAX_HISTORY must be 1..%0d", EXO_MAX_HISTORY);
        $finish;
    end
end

// header field slices of hdr_reg (byte k of the header at bits
// [8*(HEADER_LEN-k)-1 -: 8], so multi-byte fields read big-endian)
`define EXO_HDR_FIELD(r, off, size) r[8*(EXO_HEADER_LEN-(off))-1 -: 8*(size)]

reg [PTR_WIDTH-1:0]     ptr_reg = 0, ptr_next;           // stream offset of lane 0
reg [HDR_BITS-1:0]      hdr_reg = 0, hdr_next;
reg [47:0]              src_mac_reg = 0, src_mac_next;
reg [8*MAX_HISTORY-1:0] hist_reg = 0, hist_next;
reg [255:0]             seen_reg = 0, seen_next;          // history ids seen (repeat check)
reg                     dup_reg = 1'b0, dup_next;
reg                     ovf_reg = 1'b0, ovf_next;         // frame longer than the counter
reg [PTR_WIDTH:0]       rec_off_reg = 0, rec_off_next;    // payload offset of the next record's length
reg [16:0]              recs_reg = 0, recs_next;          // records framed so far
reg [7:0]               len_hi_reg = 0, len_hi_next;      // first byte of a record length

reg                     frame_valid_reg = 1'b0, frame_valid_next;
reg [7:0]               reason_reg = 0, reason_next;
reg [PTR_WIDTH-1:0]     len_reg = 0, len_next;

assign s_axis_tready = 1'b1;

assign frame_valid        = frame_valid_reg;
assign frame_codec_reason = reason_reg;
assign frame_len          = len_reg;
assign f_src_mac          = src_mac_reg;
assign f_group            = `EXO_HDR_FIELD(hdr_reg, EXO_OFF_GROUP, EXO_SIZE_GROUP);
assign f_sender           = `EXO_HDR_FIELD(hdr_reg, EXO_OFF_SENDER, EXO_SIZE_SENDER);
assign f_hist_len         = `EXO_HDR_FIELD(hdr_reg, EXO_OFF_HIST_LEN, EXO_SIZE_HIST_LEN);
assign f_epoch            = `EXO_HDR_FIELD(hdr_reg, EXO_OFF_EPOCH, EXO_SIZE_EPOCH);
assign f_seq              = `EXO_HDR_FIELD(hdr_reg, EXO_OFF_SEQ, EXO_SIZE_SEQ);
assign f_count            = `EXO_HDR_FIELD(hdr_reg, EXO_OFF_COUNT, EXO_SIZE_COUNT);
assign f_history          = hist_reg;

// registered fields used while the history and payload stream past
wire [7:0]  r_hist_len    = `EXO_HDR_FIELD(hdr_reg, EXO_OFF_HIST_LEN, EXO_SIZE_HIST_LEN);
wire [15:0] r_payload_len = `EXO_HDR_FIELD(hdr_reg, EXO_OFF_PAYLOAD_LEN, EXO_SIZE_PAYLOAD_LEN);
wire [15:0] r_count       = `EXO_HDR_FIELD(hdr_reg, EXO_OFF_COUNT, EXO_SIZE_COUNT);

// offsets of the variable sections (valid once the header is in)
// lane-0 offset of the beat, 32-bit for the compares with constants
wire [31:0] ptr32 = {{(32-PTR_WIDTH){1'b0}}, ptr_reg};

wire [PTR_WIDTH:0] hist_end = P_HDR + {{(PTR_WIDTH-7){1'b0}}, r_hist_len};
wire [PTR_WIDTH:0] pay_end  = hist_end + {{(PTR_WIDTH-15){1'b0}}, r_payload_len};

integer i, j, k;
reg [PTR_WIDTH:0]   lane_s;      // stream offset of a lane
reg [PTR_WIDTH:0]   lane_e;      // Exo offset of a lane (valid when lane_s >= 14)
reg [PTR_WIDTH:0]   lane_p;      // payload offset of a lane
reg [KEEP_WIDTH-1:0] lane_hist;  // lane i carries a history id
reg [PTR_WIDTH:0]   total;
reg [PTR_WIDTH-1:0] flen;
reg [3:0]           nkeep;
reg [7:0]           f_version, f_type, f_hl;
reg [15:0]          f_flags, f_pl, f_cnt;
reg                 flags_ok;

always @* begin
    ptr_next = ptr_reg;
    hdr_next = hdr_reg;
    src_mac_next = src_mac_reg;
    hist_next = hist_reg;
    seen_next = seen_reg;
    dup_next = dup_reg;
    ovf_next = ovf_reg;
    rec_off_next = rec_off_reg;
    recs_next = recs_reg;
    len_hi_next = len_hi_reg;
    frame_valid_next = 1'b0;
    reason_next = reason_reg;
    len_next = len_reg;

    lane_hist = 0;
    lane_s = 0;
    lane_e = 0;
    lane_p = 0;
    total = 0;
    flen = 0;
    nkeep = 0;
    f_version = 0; f_type = 0; f_hl = 0; f_flags = 0; f_pl = 0; f_cnt = 0;
    flags_ok = 1'b0;

    if (s_axis_tvalid) begin
        if (ptr_reg == 0) begin
            // first beat: a new frame; reset the per-frame state
            seen_next = 256'd0;
            dup_next = 1'b0;
            ovf_next = 1'b0;
            rec_off_next = 0;
            recs_next = 0;
        end
        // fixed positions: Exo byte k is stream byte 14+k, in the beat
        // whose lane-0 offset is (14+k) & ~7, at lane (14+k) % 8; the
        // loops unroll to constant lane selects
        for (k = 6; k < 12; k = k + 1)
            if (ptr32 == (k / KEEP_WIDTH) * KEEP_WIDTH && s_axis_tkeep[k % KEEP_WIDTH])
                src_mac_next[8*(11-k) +: 8] = s_axis_tdata[8*(k % KEEP_WIDTH) +: 8];
        for (k = 0; k < EXO_HEADER_LEN; k = k + 1)
            if (ptr32 == ((EXO_ETH_HEADER_LEN + k) / KEEP_WIDTH) * KEEP_WIDTH &&
                s_axis_tkeep[(EXO_ETH_HEADER_LEN + k) % KEEP_WIDTH])
                hdr_next[8*(EXO_HEADER_LEN-1-k) +: 8] = s_axis_tdata[8*((EXO_ETH_HEADER_LEN + k) % KEEP_WIDTH) +: 8];
        // history slots 0..MAX_HISTORY-1 (bytes beyond hist_len land here
        // too; exo_check reads only the first h = hist_len slots)
        for (k = 0; k < MAX_HISTORY; k = k + 1)
            if (ptr32 == ((EXO_ETH_HEADER_LEN + EXO_OFF_HISTORY + k) / KEEP_WIDTH) * KEEP_WIDTH &&
                s_axis_tkeep[(EXO_ETH_HEADER_LEN + EXO_OFF_HISTORY + k) % KEEP_WIDTH])
                hist_next[8*k +: 8] = s_axis_tdata[8*((EXO_ETH_HEADER_LEN + EXO_OFF_HISTORY + k) % KEEP_WIDTH) +: 8];

        for (i = 0; i < KEEP_WIDTH; i = i + 1) begin
            lane_s = {1'b0, ptr_reg} + i[PTR_WIDTH:0];
            lane_e = lane_s - P_ETH;
            if (s_axis_tkeep[i]) begin
                if (lane_s >= P_ETH) begin
                    // history ids
                    if (lane_e >= P_HIST && lane_e < hist_end) begin
                        lane_hist[i] = 1'b1;
                        if (s_axis_tdata[8*i +: 8] != EXO_HISTORY_NONE) begin
                            // repeated id: seen in an earlier beat, or in an
                            // earlier lane of this beat
                            if (seen_reg[s_axis_tdata[8*i +: 8]])
                                dup_next = 1'b1;
                            for (j = 0; j < i; j = j + 1)
                                if (lane_hist[j] && s_axis_tdata[8*j +: 8] == s_axis_tdata[8*i +: 8])
                                    dup_next = 1'b1;
                            seen_next[s_axis_tdata[8*i +: 8]] = 1'b1;
                        end
                    end
                    // payload records: [len u16 BE][len bytes], count of them
                    if (lane_e >= hist_end && lane_e < pay_end) begin
                        lane_p = lane_e - hist_end;
                        if (recs_next < {1'b0, r_count}) begin
                            if (lane_p == rec_off_next) begin
                                len_hi_next = s_axis_tdata[8*i +: 8];
                            end else if (lane_p == rec_off_next + 1) begin
                                rec_off_next = rec_off_next + P_RECLEN + {{(PTR_WIDTH-15){1'b0}}, len_hi_next, s_axis_tdata[8*i +: 8]};
                                recs_next = recs_next + 1;
                            end
                        end
                    end
                end
                nkeep = nkeep + 1;
            end
        end

        if (s_axis_tlast) begin
            ptr_next = 0;
            total = {1'b0, ptr_reg} + {{(PTR_WIDTH-3){1'b0}}, nkeep};
            if (ovf_next || total[PTR_WIDTH])
                flen = {PTR_WIDTH{1'b1}};
            else if (total >= P_ETH)
                flen = total[PTR_WIDTH-1:0] - P_ETH[PTR_WIDTH-1:0];
            else
                flen = 0;
            len_next = flen;
            f_version = `EXO_HDR_FIELD(hdr_next, EXO_OFF_VERSION, EXO_SIZE_VERSION);
            f_type    = `EXO_HDR_FIELD(hdr_next, EXO_OFF_TYPE, EXO_SIZE_TYPE);
            f_hl      = `EXO_HDR_FIELD(hdr_next, EXO_OFF_HIST_LEN, EXO_SIZE_HIST_LEN);
            f_pl      = `EXO_HDR_FIELD(hdr_next, EXO_OFF_PAYLOAD_LEN, EXO_SIZE_PAYLOAD_LEN);
            f_cnt     = `EXO_HDR_FIELD(hdr_next, EXO_OFF_COUNT, EXO_SIZE_COUNT);
            // the key phase bit is either way (it names the tag's key
            // slot: exo_tag); the rest is 0 or READMIT | host id
            f_flags   = `EXO_HDR_FIELD(hdr_next, EXO_OFF_FLAGS, EXO_SIZE_FLAGS) & ~EXO_FLAG_KEY_PHASE;
            flags_ok  = (f_flags == 16'd0) ||
                        ((f_flags & EXO_FLAG_READMIT) != 16'd0 &&
                         (f_flags & ~(EXO_FLAG_READMIT | EXO_FLAG_HOST_MASK)) == 16'd0);
            // the codec checks, in the order of exo.Frame.UnmarshalBinary
            if (flen < EXO_OFF_VERSION + EXO_SIZE_VERSION)
                reason_next = EXO_REASON_MALFORMED;
            else if (f_version != EXO_VERSION)
                reason_next = EXO_REASON_BAD_VERSION;
            else if (flen < EXO_HEADER_LEN)
                reason_next = EXO_REASON_MALFORMED;
            else if (f_type != EXO_TYPE_DATA)
                reason_next = EXO_REASON_BAD_TYPE;
            else if (!flags_ok)
                reason_next = EXO_REASON_BAD_FLAGS;
            else if (f_hl > EXO_MAX_HISTORY)
                reason_next = EXO_REASON_BAD_HISTLEN;
            else if ({1'b0, flen} < P_HDR + {{(PTR_WIDTH-7){1'b0}}, f_hl})
                reason_next = EXO_REASON_MALFORMED;
            else if ({1'b0, flen} < P_HDR + {{(PTR_WIDTH-7){1'b0}}, f_hl} + {{(PTR_WIDTH-15){1'b0}}, f_pl})
                reason_next = EXO_REASON_BAD_PAYLOAD;
            else if (dup_next)
                reason_next = EXO_REASON_BAD_HISTORY_ID;
            else if (recs_next != {1'b0, f_cnt} || rec_off_next != {{(PTR_WIDTH-15){1'b0}}, f_pl})
                reason_next = EXO_REASON_BAD_PAYLOAD;
            else
                reason_next = EXO_REASON_ACCEPT;
            frame_valid_next = 1'b1;
        end else if (ptr_reg < PTR_LAST) begin
            ptr_next = ptr_reg + P_KEEP;
        end else begin
            // saturate: a frame too long for the counter keeps its last
            // offset and its length reads as 2^PTR_WIDTH-1 (all checks
            // that compare lengths then see "long enough")
            ovf_next = 1'b1;
        end
    end
end

always @(posedge clk) begin
    ptr_reg <= ptr_next;
    hdr_reg <= hdr_next;
    src_mac_reg <= src_mac_next;
    hist_reg <= hist_next;
    seen_reg <= seen_next;
    dup_reg <= dup_next;
    ovf_reg <= ovf_next;
    rec_off_reg <= rec_off_next;
    recs_reg <= recs_next;
    len_hi_reg <= len_hi_next;
    frame_valid_reg <= frame_valid_next;
    reason_reg <= reason_next;
    len_reg <= len_next;

    if (rst) begin
        ptr_reg <= 0;
        frame_valid_reg <= 1'b0;
        reason_reg <= 0;
        len_reg <= 0;
    end
end

`undef EXO_HDR_FIELD

endmodule

`resetall
