// txread_tb.v: reads testdata/vectors/vectors_tx.hex the way an FPGA test
// bench does ($readmemh into reg [63:0] mem[0:`VEC_TX_WORDS-1]) and walks
// its variable-length records (record at word r, the next at r +
// rec_words, word r+2 bits 63:32): magic and index of every record, the
// record's length against its frame, sent and queue lengths (61 header
// words, then ceil(len/8) words each, one more per batch), padding bytes
// zero, the largest queue, frame and batch against vectors_tx.vh. It
// prints a checksum of every byte of the frames sent; tools/vecgen's test
// compares what it prints with Go.
//
//   iverilog -g2005 -I testdata/vectors -DVEC_TX_HEX='"testdata/vectors/vectors_tx.hex"' \
//       -o /tmp/txread tools/vecgen/testdata/txread_tb.v && vvp /tmp/txread
`include "vectors_tx.vh"
`ifndef VEC_TX_HEX
`define VEC_TX_HEX "vectors_tx.hex"
`endif
module txread_tb;
  reg [63:0] mem [0:`VEC_TX_WORDS-1];
  integer i, r, k, p, q, n, qn, flen, slen, blen, errors;
  integer max_queue, max_frame, max_batch, sent;
  reg [31:0] sum;
  reg [63:0] w;
  reg [7:0] b;

  // bytes checks that the n-byte string at word p is zero padded and
  // returns its word count; with add, it adds the bytes to sum.
  task chk_bytes(input integer at, input integer len, input integer add);
    integer j;
    begin
      for (j = 0; j < (len + 7) / 8 * 8; j = j + 1) begin
        w = mem[at + j / 8];
        b = w >> (56 - 8 * (j % 8));
        if (j >= len && b !== 8'h00) begin
          $display("record %0d: byte %0d of a %0d-byte string at word %0d is %h, not 0", i, j, len, at, b);
          errors = errors + 1;
        end
        if (j < len && add) sum = sum * 31 + b;
      end
    end
  endtask

  initial begin
    $readmemh(`VEC_TX_HEX, mem);
    errors = 0; sum = 0; sent = 0;
    max_queue = 0; max_frame = 0; max_batch = 0;
    r = 0;
    for (i = 0; i < `VEC_TX_COUNT && errors == 0; i = i + 1) begin
      if (mem[r + `VEC_TX_MAGIC_WORD] !== `VEC_TX_MAGIC) begin
        $display("record %0d at word %0d: bad magic %h", i, r, mem[r]);
        errors = errors + 1;
      end
      w = mem[r + `VEC_TX_INDEX_WORD];
      if (w[63:32] !== i) begin
        $display("record %0d: index %0d", i, w[63:32]);
        errors = errors + 1;
      end
      w = mem[r + `VEC_TX_LENGTH_WORD];
      n = w[63:32];
      if (w[31:0] & `VEC_TX_FLAG_SENT) sent = sent + 1;
      w = mem[r + `VEC_TX_VERDICT_WORD];
      qn = w[31:16];
      w = mem[r + `VEC_TX_LENS_WORD];
      flen = w[63:48];
      slen = w[31:16];
      if (qn > max_queue) max_queue = qn;
      if (flen > max_frame) max_frame = flen;
      p = r + `VEC_TX_DATA_WORD;
      chk_bytes(p, flen, 0);
      p = p + (flen + 7) / 8;
      chk_bytes(p, slen, 1);
      p = p + (slen + 7) / 8;
      for (q = 0; q < qn; q = q + 1) begin
        w = mem[p];
        blen = w[47:32];
        if (blen > max_batch) max_batch = blen;
        chk_bytes(p + 1, blen, 0);
        p = p + 1 + (blen + 7) / 8;
      end
      if (p !== r + n) begin
        $display("record %0d: rec_words %0d, its strings end at word %0d", i, n, p - r);
        errors = errors + 1;
      end
      r = r + n;
    end
    if (r !== `VEC_TX_WORDS) begin
      $display("%0d records end at word %0d, VEC_TX_WORDS is %0d", i, r, `VEC_TX_WORDS);
      errors = errors + 1;
    end
    if (max_queue !== `VEC_TX_MAX_QUEUE || max_frame !== `VEC_TX_MAX_FRAME || max_batch !== `VEC_TX_MAX_BATCH) begin
      $display("largest queue %0d, frame %0d, batch %0d; vectors_tx.vh says %0d, %0d, %0d",
               max_queue, max_frame, max_batch, `VEC_TX_MAX_QUEUE, `VEC_TX_MAX_FRAME, `VEC_TX_MAX_BATCH);
      errors = errors + 1;
    end
    $display("records %0d", i);
    $display("words %0d", r);
    $display("sent %0d", sent);
    $display("checksum %h", sum);
    $display("errors %0d", errors);
    $finish;
  end
endmodule
