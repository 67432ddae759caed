// exo_siphash: SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast
// short-input PRF", 2012), the keyed hash of the Exo frame tag (BAD_TAG).
// Twins: exo/siphash.go (Go core) and driver/xdp/bpf/exo.c (XDP); which
// bytes of a frame are hashed is exo_tag.v (the same rule as exo/tag.go).
//
//   v0 = k0 ^ "somepseu"   v1 = k1 ^ "dorandom"
//   v2 = k0 ^ "lygenera"   v3 = k1 ^ "tedbytes"
//   per 8-byte block m (little-endian):  v3 ^= m; 2 x SipRound; v0 ^= m
//   final block: the len%8 last bytes, len(m) mod 256 in bits 63:56
//   finalization: v2 ^= 0xff; 4 x SipRound; tag = v0 ^ v1 ^ v2 ^ v3
//
// Hardware: two SipRounds per cycle (one unrolled pair, 8 64-bit adders
// with a depth of 4 adds), so a message block is absorbed in ONE cycle:
// one block per 64-bit beat, full line rate. Finalization (4 rounds) is
// two more pipeline stages of two rounds each, with their own registers,
// so the absorber takes the next message's first block in the cycle after
// a final block: the core accepts one block every cycle, any mix of
// first/last, without backpressure.
//
// Cycle cost: a message of len bytes is floor(len/8)+1 blocks = as many
// cycles; the tag of the block given with in_last in cycle F is in out_tag
// with out_valid in cycle F+3 (registered; out_tag holds it until the
// next tag). Area: 6 SipRounds of logic (absorber 2, finalizer 2 + 2),
// 2 x 256 + 64 state registers (absorber, finalizer, tag).
//
// Interface: in_block is a message block, message byte 8i+j of block i in
// bits 8j+7:8j (byte 0 in bits 7:0, as AXI-Stream lane j). in_first: this
// block starts a message (the state is initialized from k0, k1 in the same
// cycle; k0/k1 are read only then). in_last: this block holds the last
// len%8 bytes of the message (possibly none) and in_len = len mod 256; the
// core zeroes bytes len%8..6 and puts in_len in byte 7, so the caller may
// leave anything (padding, the next frame) in the unused lanes. A
// one-block message (len < 8) has in_first and in_last set together.
`resetall
`default_nettype none

module exo_siphash (
    input  wire        clk,
    input  wire        rst,

    input  wire [63:0] k0,
    input  wire [63:0] k1,

    input  wire        in_valid,
    input  wire        in_first,
    input  wire        in_last,
    input  wire [7:0]  in_len,
    input  wire [63:0] in_block,

    output wire        out_valid,
    output wire [63:0] out_tag
);

// the state is {v0, v1, v2, v3}: v0 in bits 255:192 .. v3 in bits 63:0
function [255:0] sipround;
    input [255:0] v;
    reg [63:0] v0, v1, v2, v3;
    begin
        v0 = v[255:192]; v1 = v[191:128]; v2 = v[127:64]; v3 = v[63:0];
        v0 = v0 + v1; v1 = {v1[50:0], v1[63:51]}; v1 = v1 ^ v0; v0 = {v0[31:0], v0[63:32]};
        v2 = v2 + v3; v3 = {v3[47:0], v3[63:48]}; v3 = v3 ^ v2;
        v0 = v0 + v3; v3 = {v3[42:0], v3[63:43]}; v3 = v3 ^ v0;
        v2 = v2 + v1; v1 = {v1[46:0], v1[63:47]}; v1 = v1 ^ v2; v2 = {v2[31:0], v2[63:32]};
        sipround = {v0, v1, v2, v3};
    end
endfunction

localparam [63:0] C0 = 64'h736f6d6570736575;   // "somepseu"
localparam [63:0] C1 = 64'h646f72616e646f6d;   // "dorandom"
localparam [63:0] C2 = 64'h6c7967656e657261;   // "lygenera"
localparam [63:0] C3 = 64'h7465646279746573;   // "tedbytes"

reg [255:0] v_reg = 0;          // absorber state
reg [255:0] f_reg = 0;          // finalization, after rounds 1-2
reg         f_valid_reg = 1'b0;
reg         fin_reg = 1'b0;     // v_reg holds a message's last block
reg [63:0]  tag_reg = 0;
reg         tag_valid_reg = 1'b0;

assign out_valid = tag_valid_reg;
assign out_tag   = tag_reg;

// ---- absorber: one block, two rounds, one cycle
reg [63:0]  m;
reg [255:0] v_in;
reg [255:0] v_out;
integer j;

always @* begin
    m = in_block;
    if (in_last) begin
        for (j = 0; j < 7; j = j + 1)
            if (j >= {29'd0, in_len[2:0]})
                m[8*j +: 8] = 8'd0;
        m[63:56] = in_len;
    end
    v_in = in_first ? {k0 ^ C0, k1 ^ C1, k0 ^ C2, k1 ^ C3} : v_reg;
    v_in[63:0] = v_in[63:0] ^ m;
    v_out = sipround(sipround(v_in));
    v_out[255:192] = v_out[255:192] ^ m;
end

// ---- finalizer: v2 ^= 0xff, rounds 1-2 | rounds 3-4, fold
wire [255:0] f_in  = {v_reg[255:72], v_reg[71:64] ^ 8'hff, v_reg[63:0]};
wire [255:0] f_out = sipround(sipround(f_reg));

always @(posedge clk) begin
    if (in_valid)
        v_reg <= v_out;
    fin_reg <= in_valid && in_last;
    if (fin_reg)
        f_reg <= sipround(sipround(f_in));
    f_valid_reg <= fin_reg;
    if (f_valid_reg)
        tag_reg <= f_out[255:192] ^ f_out[191:128] ^ f_out[127:64] ^ f_out[63:0];
    tag_valid_reg <= f_valid_reg;

    if (rst) begin
        fin_reg <= 1'b0;
        f_valid_reg <= 1'b0;
        tag_valid_reg <= 1'b0;
    end
end

endmodule

`resetall
