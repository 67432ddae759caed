// exo_tag: the authentication tag of an Exo frame (BAD_TAG), on the
// receive stream, beside exo_rx_parser. The rule, the same in the Go core
// (exo/tag.go, exo/keys.go, SipHash in exo/siphash.go) and the XDP program
// (driver/xdp/bpf/exo.c):
//
//   exo = the bytes after the 14-byte Ethernet header
//   m   = exo[0:24] || exo[32 : 32+hist_len+payload_len]
//         the fixed header without its tag field exo[24:32], then the
//         history ids and the payload; never the Ethernet padding
//   k   = the key of the slot the frame's key phase bit (flags 0x4000,
//         exo[14] bit 6) names: key0 (phase 0) or key1 (phase 1)
//   tag = SipHash-2-4(k, m) (exo_siphash.v), k0 = little-endian uint64 of
//         key[0:8], k1 = of key[8:16] (CSR key word i = key[4i:4i+4] LE:
//         k0 = {key[1], key[0]}, k1 = {key[3], key[2]})
//   exo[24:32] holds the tag big-endian (exo[24] = bits 63:56)
//   tag_ok = the slot is valid (key_valid[phase]) and the tag field is tag
//
// Realignment: exo[0] is stream byte 14 and exo[32] stream byte 46, both
// lane 6 of a beat, so every 8-byte block of m is lanes 6,7 of one beat
// and lanes 0..5 of the next (block = {tdata[47:0], last tdata[63:48]},
// little-endian as SipHash reads it), skipping the one that is the tag:
//
//   beat          0     1     2     3     4     5     6    ..  L/8+3
//   lanes 0-5     eth   eth   exo2  exo10 exo18 exo26 exo34
//   lanes 6,7     eth   exo0  exo8  exo16 exo24 exo32 exo40
//   block done                m[0]  m[1]  m[2]  tag   m[3] ..  final
//   block hashed                    m[0]  m[1]  m[2]  m[3] ..  final
//
// The key phase: the flags are exo[14:16], lanes 4,5 of beat 3, a beat
// after m[0] is complete. The SipHash state is initialized from the key
// with the first block, so the three header blocks m[0..2] are hashed one
// beat late, each from a holding register at the next beat (3, 4, 5),
// m[0] with the key that beat 3's phase bit selects; beat 5, the tag
// field, carries no block of its own, so from m[3] on every block is
// hashed at the beat that completes it, as without the key slots: the
// slip costs no cycle at the end of the frame.
//
// L = len(m) = 24 + hist_len + payload_len is read at beat 2 (exo bytes
// 5..7); m[i] for i >= 3 completes at beat i+3, and the final block (the
// L%8 last bytes, at least 3 full blocks before it) at beat L/8+3. One
// block per beat: exo_siphash absorbs one per cycle, the engine never
// stalls the stream. If the frame ends one beat before the final block
// (its L%8 <= 2 last bytes are in lanes 6,7 of the tlast beat), the final
// block is given in the cycle after tlast, from the lanes kept.
//
// Keys: key0, key1 and key_valid are read at beat 3 of a frame (exo_siphash
// reads k0/k1 with the first block; the valid bit of the chosen slot is
// kept with the frame): the CSR writes after it do not change the frame's
// verdict, those before it do.
//
// Timing, T = the cycle of the tlast beat: the final block enters
// exo_siphash at T+1 at the latest (at the final beat <= T otherwise), so
// its tag is in exo_siphash's output register from T+4 on; tag_ok is then
// valid from T+4 to T+6 (the next frame changes none of its registers
// before: its tag field and key slot validity are captured at its beat 5,
// >= T+6, and its own final block comes at >= T+7). exo_engine reads it
// at T+4. A frame that ends before its final block (truncated: a codec
// verdict) gives no tag; tag_ok is then meaningless and ignored.
`resetall
`default_nettype none

module exo_tag (
    input  wire         clk,
    input  wire         rst,

    // SipHash keys of slots 0 and 1: k0 = key[63:0], k1 = key[127:64]
    // (CSR key words 1:0, 3:2; key1 words 1:0, 3:2); key_valid[i]: slot i
    // holds a key
    input  wire [127:0] key0,
    input  wire [127:0] key1,
    input  wire [1:0]   key_valid,

    // the receive stream (s_axis_tready is 1: a beat is every tvalid cycle)
    input  wire [63:0]  s_axis_tdata,
    input  wire         s_axis_tvalid,
    input  wire         s_axis_tlast,

    // the last frame's tag field equals SipHash-2-4(k, m)
    output wire         tag_ok
);

`include "exo_wire.vh"

localparam BW = 15;   // beat counter: saturates at 2^15-1 beats (262 136 bytes)

// the 64-bit layout above is fixed by the wire format
initial begin
    if (EXO_ETH_HEADER_LEN % 8 != 6 || (EXO_ETH_HEADER_LEN + EXO_OFF_TAG) % 8 != 6 ||
        EXO_SIZE_TAG != 8 || EXO_OFF_TAG + EXO_SIZE_TAG != EXO_OFF_HISTORY ||
        EXO_OFF_HIST_LEN != 5 || EXO_OFF_PAYLOAD_LEN != 6) begin
        $error("exo_tag: the realignment assumes exo[0] and the tag at lane 6, and hist_len/payload_len at exo 5..7");
        $finish;
    end
    if ((EXO_ETH_HEADER_LEN + EXO_OFF_FLAGS) / 8 != (EXO_ETH_HEADER_LEN + 8) / 8 + 1 ||
        EXO_SIZE_FLAGS != 2 || EXO_FLAG_KEY_PHASE[7:0] != 8'd0) begin
        $error("exo_tag: the key phase bit must be in the high flags byte, in the beat after m[0]");
        $finish;
    end
end

localparam [BW-1:0] B_M0    = (EXO_ETH_HEADER_LEN + 8) / 8;                 // 2: m[0], and L
localparam [BW-1:0] B_TAG   = (EXO_ETH_HEADER_LEN + EXO_OFF_TAG + 8) / 8;   // 5: the tag field
localparam [BW-1:0] B_LAST  = {BW{1'b1}};
localparam [BW-1:0] B_FIN   = B_TAG - 2;                                    // 3: final at beat L/8 + 3
localparam [16:0]   L_FIXED = EXO_OFF_TAG;                                  // 24 header bytes in m
localparam [BW-1:0] B_PHASE = B_M0 + 1;                                     // 3: the flags, m[0] hashed
// the key phase bit: flags byte 0 (big-endian: bits 15:8) at stream byte
// 14+14 = lane 4 of beat 3
localparam integer  PH_BIT  = 8*((EXO_ETH_HEADER_LEN + EXO_OFF_FLAGS) % 8) + $clog2(EXO_FLAG_KEY_PHASE) - 8;

reg [BW-1:0] beat_reg = 0;       // index of the next beat in its frame
reg [15:0]   carry_reg = 0;      // lanes 6,7 of the last beat
reg [16:0]   len_reg = 0;        // L, from beat 2
reg          flush_reg = 1'b0;   // give the final block from carry_reg now
reg [63:0]   frame_tag_reg = 0;  // the frame's tag field
reg [63:0]   hold_reg = 0;       // m[0..2], hashed one beat late
reg          kv_reg = 1'b0;      // key_valid of the frame's slot, at beat 3
reg          frame_kv_reg = 1'b0;// the same, kept with frame_tag_reg

// beat 3: the frame's key phase picks the slot
wire         phase   = s_axis_tdata[PH_BIT];
wire [127:0] key_sel = phase ? key1 : key0;

// final block at beat L/8 + 3 (m[i] at beat i+3 for i >= 3)
wire [BW-1:0] fin_beat = {{(BW-14){1'b0}}, len_reg[16:3]} + B_FIN;
wire [63:0]   block    = {s_axis_tdata[47:0], carry_reg};

reg        blk_valid, blk_first, blk_last;
reg [63:0] blk_data;
reg        flush_next;
integer    j;

always @* begin
    blk_valid = 1'b0;
    blk_first = 1'b0;
    blk_last = 1'b0;
    blk_data = block;
    flush_next = 1'b0;
    if (flush_reg) begin
        // the cycle after tlast: no beat of the next frame can carry a
        // block yet (beat 0 is Ethernet only)
        blk_valid = 1'b1;
        blk_last = 1'b1;
        blk_data = {48'd0, carry_reg};
    end else if (s_axis_tvalid) begin
        if (beat_reg > B_M0 && beat_reg <= B_TAG) begin
            blk_valid = 1'b1;                    // m[0..2], held: always full (L >= 24)
            blk_first = beat_reg == B_PHASE;
            blk_data = hold_reg;
        end else if (beat_reg > B_TAG && beat_reg <= fin_beat) begin
            blk_valid = 1'b1;                    // m[3..]
            blk_last = beat_reg == fin_beat;
        end
        flush_next = s_axis_tlast && beat_reg >= B_TAG && beat_reg + 1'b1 == fin_beat;
    end
end

always @(posedge clk) begin
    if (s_axis_tvalid) begin
        carry_reg <= s_axis_tdata[63:48];
        if (s_axis_tlast)
            beat_reg <= 0;
        else if (beat_reg != B_LAST)
            beat_reg <= beat_reg + 1'b1;
        if (beat_reg == B_M0)   // hist_len in lane 3, payload_len in lanes 4,5 (big-endian)
            len_reg <= L_FIXED + {9'd0, s_axis_tdata[31:24]} + {1'b0, s_axis_tdata[39:32], s_axis_tdata[47:40]};
        if (beat_reg >= B_M0 && beat_reg < B_TAG)
            hold_reg <= block;
        if (beat_reg == B_PHASE)
            kv_reg <= key_valid[phase];
        if (beat_reg == B_TAG) begin
            for (j = 0; j < 8; j = j + 1)
                frame_tag_reg[63-8*j -: 8] <= block[8*j +: 8];
            frame_kv_reg <= kv_reg;
        end
    end
    flush_reg <= flush_next;

    if (rst) begin
        beat_reg <= 0;
        flush_reg <= 1'b0;
    end
end

wire [63:0] sip_tag;
wire        sip_valid;

exo_siphash siphash_inst (
    .clk(clk),
    .rst(rst),
    .k0(key_sel[63:0]),
    .k1(key_sel[127:64]),
    .in_valid(blk_valid),
    .in_first(blk_first),
    .in_last(blk_last),
    .in_len(len_reg[7:0]),
    .in_block(blk_data),
    .out_valid(sip_valid),
    .out_tag(sip_tag)
);

// the tag register holds the last tag: the valid strobe is not needed
wire unused_ok = &{1'b0, sip_valid};

assign tag_ok = frame_kv_reg && sip_tag == frame_tag_reg;

endmodule

`resetall
