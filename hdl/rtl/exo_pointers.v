// exo_pointers: the fast-path state of one host (exo.Pointers,
// exo/pointers.go) as registers, loaded through the CSR write port and
// updated in place on ACCEPT exactly as Pointers.Accept does:
//
//   history[1..h-1] <= history[0..h-2]; history[0] <= sender   (h > 0)
//   append_ptr      <= seq + 1                                  (64-bit, wraps)
//   agree_ptr       <= seq - h + 1   if seq >= epoch_start
//                                    && seq - epoch_start >= h
//                                    && seq - h + 1 > agree_ptr
//
// epoch_start is written by the slow path only (CSR). A CSR write in the
// same cycle as an ACCEPT wins over the update of the register it writes.
//
//   register (hw/registers.json)   Go (exo.Pointers)
//   group, hosts, epoch, halted    Group, Hosts, Epoch, Halted
//   window_lo/hi                   Window
//   append_lo/hi                   Append
//   agreed_lo/hi                   Agreed
//   epoch_start_lo/hi              EpochStart
//   history[]                      History (slots 0..MAX_HISTORY-1)
`resetall
`default_nettype none

module exo_pointers #(
    parameter MAX_HISTORY = 32
) (
    input  wire                      clk,
    input  wire                      rst,

    // CSR writes (byte address, 32-bit data)
    input  wire                      csr_wr_en,
    input  wire [11:0]               csr_wr_addr,
    input  wire [31:0]               csr_wr_data,

    // ACCEPT from exo_check
    input  wire                      accept,
    input  wire [7:0]                accept_sender,
    input  wire [63:0]               accept_seq,
    // the transmit side halts the engine (token mode: a hand-off, the slow path)
    input  wire                      halt_set,

    output wire [15:0]               group,
    output wire [15:0]               hosts,
    output wire [31:0]               epoch,
    output wire                      halted,
    output wire [63:0]               window,
    output wire [63:0]               append_ptr,
    output wire [63:0]               agree_ptr,
    output wire [63:0]               epoch_start,
    output wire [8*MAX_HISTORY-1:0]  history
);

`include "exo_wire.vh"
`include "exo_regs.vh"

initial begin
    if (MAX_HISTORY < 1 || MAX_HISTORY > 4*EXO_REG_HISTORY_COUNT) begin
        $error("exo_pointers: MAX_HISTORY must be 1..%0d", 4*EXO_REG_HISTORY_COUNT);
        $finish;
    end
end

reg [15:0]              group_reg = 0, group_next;
reg [15:0]              hosts_reg = 0, hosts_next;
reg [31:0]              epoch_reg = 0, epoch_next;
reg                     halted_reg = 1'b1, halted_next;
reg [63:0]              window_reg = 0, window_next;
reg [63:0]              append_reg = 0, append_next;
reg [63:0]              agree_reg = 0, agree_next;
reg [63:0]              epoch_start_reg = 0, epoch_start_next;
reg [8*MAX_HISTORY-1:0] history_reg = {MAX_HISTORY{EXO_HISTORY_NONE}}, history_next;

assign group       = group_reg;
assign hosts       = hosts_reg;
assign epoch       = epoch_reg;
assign halted      = halted_reg;
assign window      = window_reg;
assign append_ptr  = append_reg;
assign agree_ptr   = agree_reg;
assign epoch_start = epoch_start_reg;
assign history     = history_reg;

wire [15:0] h = {1'b0, hosts_reg[15:1]};
wire [63:0] h64 = {48'd0, h};
// appending seq agrees seq-h: agreed becomes seq-h+1
wire [63:0] agree_cand = accept_seq - h64 + 64'd1;
wire        agree_move = (accept_seq >= epoch_start_reg) &&
                         (accept_seq - epoch_start_reg >= h64) &&
                         (agree_cand > agree_reg);

wire        hist_sel  = csr_wr_addr >= EXO_REG_HISTORY_BASE &&
                        csr_wr_addr < EXO_REG_HISTORY_BASE + EXO_REG_HISTORY_COUNT*EXO_REG_HISTORY_STRIDE;
wire [11:0] hist_off  = csr_wr_addr - EXO_REG_HISTORY_BASE;
wire [9:0]  hist_word = hist_off[11:2];
wire [1:0]  unused_hist_off = hist_off[1:0];   // word aligned

integer i;

always @* begin
    group_next = group_reg;
    hosts_next = hosts_reg;
    epoch_next = epoch_reg;
    halted_next = halted_reg;
    window_next = window_reg;
    append_next = append_reg;
    agree_next = agree_reg;
    epoch_start_next = epoch_start_reg;
    history_next = history_reg;

    // Pointers.Accept
    if (accept) begin
        for (i = 1; i < MAX_HISTORY; i = i + 1)
            if (i < h)
                history_next[8*i +: 8] = history_reg[8*(i-1) +: 8];
        if (h != 0)
            history_next[7:0] = accept_sender;
        append_next = accept_seq + 64'd1;
        if (agree_move)
            agree_next = agree_cand;
    end

    if (halt_set)
        halted_next = 1'b1;

    // CSR writes win
    if (csr_wr_en) begin
        case (csr_wr_addr)
            EXO_REG_GROUP:          group_next = csr_wr_data[15:0];
            EXO_REG_HOSTS:          hosts_next = csr_wr_data[15:0];
            EXO_REG_EPOCH:          epoch_next = csr_wr_data;
            EXO_REG_HALTED:         halted_next = csr_wr_data[0];
            EXO_REG_WINDOW_LO:      window_next[31:0] = csr_wr_data;
            EXO_REG_WINDOW_HI:      window_next[63:32] = csr_wr_data;
            EXO_REG_APPEND_LO:      append_next[31:0] = csr_wr_data;
            EXO_REG_APPEND_HI:      append_next[63:32] = csr_wr_data;
            EXO_REG_AGREED_LO:      agree_next[31:0] = csr_wr_data;
            EXO_REG_AGREED_HI:      agree_next[63:32] = csr_wr_data;
            EXO_REG_EPOCH_START_LO: epoch_start_next[31:0] = csr_wr_data;
            EXO_REG_EPOCH_START_HI: epoch_start_next[63:32] = csr_wr_data;
            default: ;
        endcase
        if (hist_sel)
            for (i = 0; i < MAX_HISTORY; i = i + 1)
                if (i / 4 == {22'd0, hist_word})
                    history_next[8*i +: 8] = csr_wr_data[8*(i % 4) +: 8];
    end
end

always @(posedge clk) begin
    group_reg <= group_next;
    hosts_reg <= hosts_next;
    epoch_reg <= epoch_next;
    halted_reg <= halted_next;
    window_reg <= window_next;
    append_reg <= append_next;
    agree_reg <= agree_next;
    epoch_start_reg <= epoch_start_next;
    history_reg <= history_next;

    if (rst) begin
        group_reg <= EXO_REG_GROUP_RESET[15:0];
        hosts_reg <= EXO_REG_HOSTS_RESET[15:0];
        epoch_reg <= EXO_REG_EPOCH_RESET;
        halted_reg <= EXO_REG_HALTED_RESET[0];
        window_reg <= {EXO_REG_WINDOW_HI_RESET, EXO_REG_WINDOW_LO_RESET};
        append_reg <= {EXO_REG_APPEND_HI_RESET, EXO_REG_APPEND_LO_RESET};
        agree_reg <= {EXO_REG_AGREED_HI_RESET, EXO_REG_AGREED_LO_RESET};
        epoch_start_reg <= {EXO_REG_EPOCH_START_HI_RESET, EXO_REG_EPOCH_START_LO_RESET};
        history_reg <= {MAX_HISTORY{EXO_HISTORY_NONE}};
    end
end

endmodule

`resetall
