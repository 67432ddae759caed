// hexread_tb.v: reads testdata/vectors/vectors.hex the way an FPGA test
// bench does ($readmemh into reg [63:0], records indexed by
// `EXO_VEC_RECORD_WORDS) and checks the record framing, not the verdicts:
// magic and index of every record, frame bytes zero beyond frame_len,
// state unchanged unless ACCEPT, on ACCEPT out_append = seq + 1,
// epoch_start kept and the agreement rule (appending s agrees s-h only if
// s >= epoch_start && s-epoch_start >= h), the chaining of stream steps
// and the tag key in every record (format 3). It prints a checksum of every frame byte and
// the count of each reason; tools/vecgen's test compares them with Go.
//
//   iverilog -g2005 -I testdata/vectors -DVEC_HEX='"testdata/vectors/vectors.hex"' \
//       -o /tmp/hexread tools/vecgen/testdata/hexread_tb.v && vvp /tmp/hexread
`include "vectors.vh"
`ifndef VEC_HEX
`define VEC_HEX "vectors.hex"
`endif
module hexread_tb;
  localparam N = `EXO_VEC_COUNT;
  localparam W = `EXO_VEC_RECORD_WORDS;
  reg [63:0] mem [0:N*W-1];
  integer counts [0:255];
  integer i, k, base, errors, flen, tags_valid;
  reg [31:0] sum;
  reg [7:0] b, reason, stage;
  reg [15:0] vflags;
  reg [63:0] w, seq, h, es, agreed;
  initial begin
    $readmemh(`VEC_HEX, mem);
    errors = 0;
    tags_valid = 0;
    sum = 0;
    for (k = 0; k < 256; k = k + 1) counts[k] = 0;
    for (i = 0; i < N; i = i + 1) begin
      base = i * W;
      if (mem[base + `EXO_VEC_MAGIC_WORD] !== `EXO_VEC_MAGIC) begin
        $display("record %0d: bad magic %h", i, mem[base]);
        errors = errors + 1;
      end
      w = mem[base + `EXO_VEC_INDEX_WORD];
      if (w[`EXO_VEC_INDEX_MSB:`EXO_VEC_INDEX_LSB] !== i) begin
        $display("record %0d: index %0d", i, w[`EXO_VEC_INDEX_MSB:`EXO_VEC_INDEX_LSB]);
        errors = errors + 1;
      end
      w = mem[base + `EXO_VEC_FRAME_LEN_WORD];
      flen = w[`EXO_VEC_FRAME_LEN_MSB:`EXO_VEC_FRAME_LEN_LSB];
      vflags = w[`EXO_VEC_VFLAGS_MSB:`EXO_VEC_VFLAGS_LSB];
      w = mem[base + `EXO_VEC_REASON_WORD];
      reason = w[`EXO_VEC_REASON_MSB:`EXO_VEC_REASON_LSB];
      stage = w[`EXO_VEC_STAGE_MSB:`EXO_VEC_STAGE_LSB];
      counts[reason] = counts[reason] + 1;
      // The tag key (words 4-5, format 3) and the tag-valid flag.
      if ({mem[base + `EXO_VEC_TAG_KEY_0_7_WORD], mem[base + `EXO_VEC_TAG_KEY_8_15_WORD]} !== `EXO_VEC_TAG_KEY) begin
        $display("record %0d: tag key differs from EXO_VEC_TAG_KEY", i);
        errors = errors + 1;
      end
      if ({mem[base + `EXO_VEC_TAG_KEY1_0_7_WORD], mem[base + `EXO_VEC_TAG_KEY1_8_15_WORD]} !== `EXO_VEC_TAG_KEY1) begin
        $display("record %0d: slot-1 tag key differs from EXO_VEC_TAG_KEY1", i);
        errors = errors + 1;
      end
      if (vflags & `EXO_VEC_FLAG_TAG_VALID) tags_valid = tags_valid + 1;
      // Frame bytes: byte k is bits [63-8*(k%8) -: 8] of word FRAME_WORD + k/8.
      for (k = 0; k < `EXO_VEC_FRAME_MAX; k = k + 1) begin
        w = mem[base + `EXO_VEC_FRAME_WORD + k / 8];
        b = w[63 - 8 * (k % 8) -: 8];
        if (k < flen) sum = sum * 31 + b;
        else if (b !== 8'h00) begin
          $display("record %0d: frame byte %0d beyond frame_len is %h", i, k, b);
          errors = errors + 1;
        end
      end
      // seq is the 8 bytes at frame offset 16: frame word 2.
      seq = mem[base + `EXO_VEC_FRAME_WORD + 2];
      if (stage == `EXO_VEC_STAGE_ACCEPT) begin
        if (mem[base + `EXO_VEC_OUT_APPEND_WORD] !== seq + 64'd1) begin
          $display("record %0d: ACCEPT but out_append %h != seq+1", i, mem[base + `EXO_VEC_OUT_APPEND_WORD]);
          errors = errors + 1;
        end
        // Agreement: 64-bit unsigned compares and wrapping subtractions.
        w = mem[base + `EXO_VEC_IN_H_WORD];
        h = w[`EXO_VEC_IN_H_MSB:`EXO_VEC_IN_H_LSB];
        w = mem[base + `EXO_VEC_IN_EPOCH_START_WORD];
        es = w[`EXO_VEC_IN_EPOCH_START_MSB:`EXO_VEC_IN_EPOCH_START_LSB];
        w = mem[base + `EXO_VEC_IN_AGREED_WORD];
        agreed = w[`EXO_VEC_IN_AGREED_MSB:`EXO_VEC_IN_AGREED_LSB];
        if (seq >= es && seq - es >= h && seq - h + 64'd1 > agreed) agreed = seq - h + 64'd1;
        if (mem[base + `EXO_VEC_OUT_AGREED_WORD] !== agreed || mem[base + `EXO_VEC_OUT_EPOCH_START_WORD] !== es) begin
          $display("record %0d: ACCEPT but out_agreed %h (want %h) / out_epoch_start do not follow the agreement rule", i,
                   mem[base + `EXO_VEC_OUT_AGREED_WORD], agreed);
          errors = errors + 1;
        end
      end else begin
        for (k = 0; k < `EXO_VEC_STATE_WORDS; k = k + 1)
          if (mem[base + `EXO_VEC_STATE_IN_WORD + k] !== mem[base + `EXO_VEC_STATE_OUT_WORD + k]) begin
            $display("record %0d: %0d changed state word %0d", i, reason, k);
            errors = errors + 1;
          end
      end
      if (vflags & `EXO_VEC_FLAG_CHAINED) begin
        for (k = 0; k < `EXO_VEC_STATE_WORDS; k = k + 1)
          if (mem[base + `EXO_VEC_STATE_IN_WORD + k] !== mem[base - W + `EXO_VEC_STATE_OUT_WORD + k]) begin
            $display("record %0d: chained, but state word %0d is not the previous state out", i, k);
            errors = errors + 1;
          end
      end
    end
    $display("records %0d", N);
    $display("checksum %h", sum);
    for (k = 0; k < 256; k = k + 1)
      if (counts[k] != 0) $display("reason %0d %0d", k, counts[k]);
    $display("tags_valid %0d", tags_valid);
    $display("errors %0d", errors);
    $finish;
  end
endmodule
