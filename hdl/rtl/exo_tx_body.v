`resetall
`default_nettype none

// exo_tx_body: the history and payload of the frame being hashed or sent
// as 8-byte blocks, block k = bytes 8k..8k+7 of history || payload
// (byte 0 in bits 7:0), one per cycle, block k in cycle start+2+k. The
// payload is the slot's words, read one per cycle (the RAM's registered
// read port, rdata one cycle after raddr); history byte i is hist[8i+7:8i].
// Blocks past the end hold whatever follows (the hasher and the TX port
// mask them).
module exo_tx_body #(
    parameter MAX_HISTORY = 32,
    parameter AW = 11,
    parameter QW = 2,
    parameter SW = 9
) (
    input  wire                     clk,
    input  wire                     start,
    input  wire [7:0]               h,
    input  wire [8*MAX_HISTORY-1:0] hist,
    input  wire [QW-1:0]            slot,
    output wire [AW-1:0]            raddr,
    input  wire [63:0]              rdata,
    output reg                      out_valid,
    output reg  [63:0]              out_block
);

localparam HW = (MAX_HISTORY + 7) / 8;    // history blocks

reg  [15:0]  t = 16'hFFFF;        // cycles since start (the block read now)
reg  [15:0]  t1 = 16'hFFFF;       // t of the word in rdata
reg  [63:0]  prev = 0;            // payload word t1-j0-1 (or the history tail)
wire [4:0]   j0 = h[7:3];
wire [2:0]   s  = h[2:0];
wire [15:0]  wi = t - {11'd0, j0};   // the word read now (t >= j0)
assign raddr = {slot, wi[SW-1:0]};
wire         unused_ok = &{1'b0, wi};

wire [8*8*HW+63:0] hist_ext = {{(8*8*HW+64-8*MAX_HISTORY){1'b0}}, hist};
wire [63:0] tail_raw  = hist_ext[64*j0 +: 64];
wire [63:0] tail_mask = (64'd1 << {s, 3'd0}) - 64'd1;
wire [63:0] tail_word = (tail_raw & tail_mask) << (9'd64 - {3'd0, s, 3'd0});   // W(-1)

wire [63:0] hblk  = hist_ext[64*t1[4:0] +: 64];
wire [63:0] wprev = (t1 == {11'd0, j0}) ? tail_word : prev;
wire [63:0] pblk  = (rdata << {s, 3'd0}) | (s == 3'd0 ? 64'd0 : wprev >> (9'd64 - {3'd0, s, 3'd0}));

always @(posedge clk) begin
    t <= start ? 16'd0 : (t == 16'hFFFF ? t : t + 16'd1);
    t1 <= t;
    out_valid <= t1 != 16'hFFFF;
    out_block <= t1 < {11'd0, j0} ? hblk : pblk;
    if (t1 >= {11'd0, j0})
        prev <= rdata;
end

endmodule

`resetall
