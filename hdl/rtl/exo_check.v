// exo_check: the fast-path rules of exo.Pointers.Classify (exo/pointers.go,
// docs/protocol.md section 2) as one combinational cone. The first failing
// check names the verdict; a codec verdict (from exo_rx_parser) comes
// before all of them.
//
//   #  check (Go: Classify)                          verdict
//   0  codec (Frame.UnmarshalBinary)                 codec_reason
//   1  group == group register                       BAD_GROUP
//   1a tag == SipHash-2-4(key, m) (exo_tag.v)         BAD_TAG
//   2  sender < n, and its roster MAC (if checked)   BAD_SENDER
//      when f_epoch <= epoch
//   3  hist_len == h = floor(n/2)                    BAD_HISTLEN
//   4  history ids < n or 0xFF                       BAD_HISTORY_ID
//   5  epoch older / newer                           STALE_EPOCH / FUTURE_EPOCH
//   6  not halted                                    HALTED
//   7  seq < append: back = append-1-seq;            DIVERGENCE if back < h and
//                                                   history[back] != sender,
//                                                   else DUPLICATE
//   8  seq > append                                  SEQ_TOO_FAR if seq-append >
//                                                   window, else GAP
//   9  frame history == history[0..h-1]              else DIVERGENCE
//  10  sender not in history[0..h-1]                 else SENDER_IN_HISTORY
//  11                                                ACCEPT
//
// BAD_TAG comes right after BAD_GROUP, before every other rule of the
// state stage (docs/hdl.md): a frame of another group is BAD_GROUP
// whatever its tag (another group may use another key), and nothing else
// about a frame with a bad tag is believed (its sender, epoch, seq).
//
// Rule 2's MAC part (mac_ok = 0: the source MAC is not roster_mac[sender])
// applies only to a frame whose epoch is not later than the epoch
// register: a frame of a later epoch goes on to rules 3-5 whatever its MAC
// (FUTURE_EPOCH, a slow-path verdict: the daemon takes it only from the
// MAC of a known member). After a membership change the positions shift,
// and a host that missed it must still hear the later epoch to catch up;
// the tag (rule 1a) already proved a key holder. The same rule as the
// daemon's and the XDP program's (docs/security.md).
//
// All sequence arithmetic is unsigned 64-bit, as in Go. h must be at most
// MAX_HISTORY (exo_engine refuses a roster larger than MAX_HOSTS).
`resetall
`default_nettype none

module exo_check #(
    parameter MAX_HISTORY = 32
) (
    input  wire [7:0]                codec_reason,
    input  wire [15:0]               f_group,
    input  wire [7:0]                f_sender,
    input  wire [7:0]                f_hist_len,
    input  wire [31:0]               f_epoch,
    input  wire [63:0]               f_seq,
    input  wire [8*MAX_HISTORY-1:0]  f_history,
    // the frame's source MAC matches roster_mac[sender] (1 when unchecked);
    // a mismatch is BAD_SENDER only when f_epoch <= epoch
    input  wire                      mac_ok,
    // the frame's tag field verifies (exo_tag)
    input  wire                      tag_ok,

    input  wire [15:0]               group,
    input  wire [15:0]               hosts,
    input  wire [31:0]               epoch,
    input  wire                      halted,
    input  wire [63:0]               window,
    input  wire [63:0]               append_ptr,
    input  wire [8*MAX_HISTORY-1:0]  history,

    output reg  [7:0]                reason
);

`include "exo_wire.vh"

localparam BACK_BITS = (MAX_HISTORY > 1) ? $clog2(MAX_HISTORY) : 1;

wire [15:0] h = {1'b0, hosts[15:1]};

// rule 4: a history id of the frame that is neither < n nor 0xFF
reg bad_id;
// rule 9: the frame's history differs from ours in the first h slots
reg hist_differs;
// rule 10: the sender is one of the last h senders
reg sender_in_history;
// rule 7: the history slot of an old seq
reg [7:0] back_id;
integer i;

wire [63:0] back = append_ptr - 64'd1 - f_seq;   // 0 for the newest entry
wire [63:0] ahead = f_seq - append_ptr;

always @* begin
    bad_id = 1'b0;
    hist_differs = 1'b0;
    sender_in_history = 1'b0;
    back_id = EXO_HISTORY_NONE;
    for (i = 0; i < MAX_HISTORY; i = i + 1) begin
        if (i < h) begin
            if (f_history[8*i +: 8] != EXO_HISTORY_NONE && {8'd0, f_history[8*i +: 8]} >= hosts)
                bad_id = 1'b1;
            if (f_history[8*i +: 8] != history[8*i +: 8])
                hist_differs = 1'b1;
            if (history[8*i +: 8] == f_sender)
                sender_in_history = 1'b1;
        end
    end
    // rule 7 reads slot back only when back < h <= MAX_HISTORY
    back_id = history[8*back[BACK_BITS-1:0] +: 8];

    if (codec_reason != EXO_REASON_ACCEPT)
        reason = codec_reason;
    else if (f_group != group)
        reason = EXO_REASON_BAD_GROUP;
    else if (!tag_ok)
        reason = EXO_REASON_BAD_TAG;
    else if ({8'd0, f_sender} >= hosts || (!mac_ok && f_epoch <= epoch))
        reason = EXO_REASON_BAD_SENDER;
    else if ({8'd0, f_hist_len} != h)
        reason = EXO_REASON_BAD_HISTLEN;
    else if (bad_id)
        reason = EXO_REASON_BAD_HISTORY_ID;
    else if (f_epoch < epoch)
        reason = EXO_REASON_STALE_EPOCH;
    else if (f_epoch > epoch)
        reason = EXO_REASON_FUTURE_EPOCH;
    else if (halted)
        reason = EXO_REASON_HALTED;
    else if (f_seq < append_ptr)
        reason = (back < {48'd0, h} && back_id != f_sender) ? EXO_REASON_DIVERGENCE : EXO_REASON_DUPLICATE;
    else if (f_seq > append_ptr)
        reason = (ahead > window) ? EXO_REASON_SEQ_TOO_FAR : EXO_REASON_GAP;
    else if (hist_differs)
        reason = EXO_REASON_DIVERGENCE;
    else if (sender_in_history)
        reason = EXO_REASON_SENDER_IN_HISTORY;
    else
        reason = EXO_REASON_ACCEPT;
end

endmodule

`resetall
