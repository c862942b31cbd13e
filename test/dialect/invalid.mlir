// Every verifier error of the thd dialect, one per split.
// RUN: thd-opt %s -split-input-file -verify-diagnostics

func.func @f(%v: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'cp' must be at least 1, got 0}}
  %0 = thd.align_lengths %v cp 0 tp 1 : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

func.func @f(%v: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'tp' must be at least 1, got -2}}
  %0 = thd.align_lengths %v cp 1 tp -2 : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

func.func @f(%v: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'dp' must be at least 1, got 0}}
  %0 = thd.align_lengths %v cp 2 tp 1 dynamic_cp dp 0 : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

func.func @f(%v: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{alignment granularity 4294967296 does not fit i32}}
  %0 = thd.align_lengths %v cp 65536 tp 1 dynamic_cp dp 32768 : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

func.func @f(%v: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'multiple' must be at least 1, got 0}}
  %0 = thd.align_lengths %v cp 2 tp 1 multiple 0 : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

func.func @f(%v: tensor<?xi32>) -> tensor<?xi32> attributes {thd.params = {M = 16 : i64}} {
  // expected-error @+1 {{'multiple' must be at least 1, got -16}}
  %0 = thd.align_lengths %v cp 2 tp 1 multiple "0-M" : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

func.func @f(%v: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{cannot evaluate 'multiple'}}
  %0 = thd.align_lengths %v cp 2 tp 1 multiple "M" : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

// 2 * lcm(4, 2 * 2^30) = 2^32: the multiple alone overflows i32.
func.func @f(%v: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{alignment granularity 4294967296 does not fit i32}}
  %0 = thd.align_lengths %v cp 2 tp 2 sequence_parallel multiple 1073741824 : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

// Every factor at int32 max: the product overflows int64, an error, not a
// wrapped (small, valid looking) G.
func.func @f(%v: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{the alignment granularity for cp = 2147483647, tp = 2147483647 (sequence parallel), dp = 2147483647 (dynamic CP), multiple = 2147483647 overflows int64}}
  %0 = thd.align_lengths %v cp 2147483647 tp 2147483647 sequence_parallel dynamic_cp dp 2147483647 multiple 2147483647 : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

// Contiguous CP slicing, then padding each rank's rows: the ranks' rows and
// the padded metadata disagree (S7, S10).
func.func @f(%t: tensor<12xi64>, %cup: tensor<4xi32>, %r: tensor<1xi32>) -> tensor<8xi64> {
  // expected-note @+1 {{sliced contiguously here}}
  %0 = thd.cp_slice %t, %cup, %r cp 2 mode contiguous : tensor<12xi64>, tensor<4xi32> -> tensor<6xi64>
  // expected-error @+1 {{pads the tail of a contiguous CP slice}}
  %1 = thd.pad_tail %0 target 8 : tensor<6xi64> -> tensor<8xi64>
  return %1 : tensor<8xi64>
}

// -----

// The same through a sanitised slice, with cp a parameter.
module attributes {thd.params = {cp = 2 : i64}} {
  func.func @f(%t: tensor<?xi64>, %m: tensor<?xi1>, %cup: tensor<?xi32>, %r: tensor<1xi32>) -> tensor<?xi64> {
    // expected-note @+1 {{sliced contiguously here}}
    %0 = thd.cp_slice %t, %cup, %r cp "cp" mode contiguous : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %1 = thd.cp_slice %m, %cup, %r cp "cp" mode contiguous : tensor<?xi1>, tensor<?xi32> -> tensor<?xi1>
    %2 = thd.sanitize %0, %1 : tensor<?xi64>, tensor<?xi1>
    // expected-error @+1 {{pads the tail of a contiguous CP slice}}
    %3 = thd.pad_tail %2 alignment 8 : tensor<?xi64> -> tensor<?xi64>
    return %3 : tensor<?xi64>
  }
}

// -----

func.func @f(%v: tensor<3xi32>) -> tensor<3xi32> {
  // expected-error @+1 {{result has 3 entries; expected one more than the 3 lengths}}
  %0 = thd.cu_seqlens %v : tensor<3xi32> -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

func.func @f(%p: tensor<?xi64>, %o: tensor<?xi32>, %cu: tensor<?xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{'pad' value 5.000000e-01 : f64 does not fit the element type 'i64'}}
  %0 = thd.pack %p[%o, %o], %cu, %cu pad 0.5 : tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%p: tensor<?xi64>, %o: tensor<?xi32>, %cu: tensor<?xi32>) -> tensor<8xi64> {
  // expected-error @+1 {{result has static length 8 but 'capacity' is 16}}
  %0 = thd.pack %p[%o, %o], %cu, %cu pad 0 capacity "C*cp" : tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<8xi64>
  return %0 : tensor<8xi64>
}
}

// -----

func.func @f(%p: tensor<?xi64>, %o: tensor<?xi32>, %cu: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{result element type 'i32' differs from the input element type 'i64'}}
  %0 = thd.pack %p[%o, %o], %cu, %cu pad 0 : tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<0xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{cumulative-offset arrays need at least one entry, got 0}}
  %0 = thd.max_seqlen %cu : tensor<0xi32>
  return %0 : tensor<1xi32>
}

// -----

func.func @f(%cu: tensor<4xi32>, %cup: tensor<5xi32>) -> tensor<?xi1> {
  // expected-error @+1 {{cu_seqlens has 4 entries but cu_seqlens_padded has 5}}
  %0 = thd.padding_mask %cu, %cup : tensor<4xi32>, tensor<5xi32> -> tensor<?xi1>
  return %0 : tensor<?xi1>
}

// -----

func.func @f(%cu: tensor<0xi32>) -> tensor<?xi1> {
  // expected-error @+1 {{cumulative-offset arrays need at least one entry, got 0}}
  %0 = thd.padding_mask %cu, %cu : tensor<0xi32>, tensor<0xi32> -> tensor<?xi1>
  return %0 : tensor<?xi1>
}

// -----

func.func @f(%cu: tensor<?xi64>) -> tensor<?xi1> {
  // expected-error @+1 {{operand #0 must be 1D tensor of 32-bit signless integer values}}
  %0 = thd.padding_mask %cu, %cu : tensor<?xi64>, tensor<?xi64> -> tensor<?xi1>
  return %0 : tensor<?xi1>
}

// -----

func.func @f(%t: tensor<12xi64>, %m: tensor<8xi1>) -> tensor<12xi64> {
  // expected-error @+1 {{input has 12 rows but the mask has 8}}
  %0 = thd.sanitize %t, %m : tensor<12xi64>, tensor<8xi1>
  return %0 : tensor<12xi64>
}

// -----

func.func @f(%t: tensor<?xi64>, %m: tensor<?xi1>) -> tensor<?xi64> {
  // expected-error @+1 {{'fill' value true does not fit the element type 'i64'}}
  %0 = thd.sanitize %t, %m fill true : tensor<?xi64>, tensor<?xi1>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi8>, %m: tensor<?xi1>) -> tensor<?xi8> {
  // expected-error @+1 {{'fill' value 300 : i64 does not fit the element type 'i8'}}
  %0 = thd.sanitize %t, %m fill 300 : tensor<?xi8>, tensor<?xi1>
  return %0 : tensor<?xi8>
}

// -----

func.func @f(%t: tensor<?xi64>, %m: tensor<?xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{operand #1 must be 1D tensor of 1-bit signless integer values}}
  %0 = "thd.sanitize"(%t, %m) : (tensor<?xi64>, tensor<?xi32>) -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi64>, %cup: tensor<?xi32>, %r: tensor<1xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{'cp' must be at least 1, got 0}}
  %0 = thd.cp_slice %t, %cup, %r cp 0 mode zigzag : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<12xi64>, %cup: tensor<?xi32>, %r: tensor<1xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{input length 12 is not divisible by 2*cp = 8 (zigzag partitioning)}}
  %0 = thd.cp_slice %t, %cup, %r cp 4 mode zigzag : tensor<12xi64>, tensor<?xi32> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<10xi64>, %cup: tensor<?xi32>, %r: tensor<1xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{input length 10 is not divisible by cp = 4 (contiguous partitioning)}}
  %0 = thd.cp_slice %t, %cup, %r cp 4 mode contiguous : tensor<10xi64>, tensor<?xi32> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%t: tensor<16xi64>, %cup: tensor<?xi32>, %r: tensor<1xi32>) -> tensor<16xi64> {
  // expected-error @+1 {{result has 16 rows; expected 16 / cp = 8}}
  %0 = thd.cp_slice %t, %cup, %r cp "cp" mode zigzag : tensor<16xi64>, tensor<?xi32> -> tensor<16xi64>
  return %0 : tensor<16xi64>
}
}

// -----

func.func @f(%t: tensor<?xi64>, %cup: tensor<?xi32>, %r: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{result element type 'i32' differs from the input element type 'i64'}}
  %0 = thd.cp_slice %t, %cup, %r cp 2 mode zigzag : tensor<?xi64>, tensor<?xi32> -> tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

func.func @f(%t: tensor<?xi64>, %cup: tensor<?xi32>, %r: tensor<2xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{operand #2 must be tensor<1xi32>}}
  %0 = "thd.cp_slice"(%t, %cup, %r) <{cp = 2 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0>}> : (tensor<?xi64>, tensor<?xi32>, tensor<2xi32>) -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi64>, %cup: tensor<?xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{'cp' must be at least 1, got 0}}
  %0 = thd.cp_unslice %t, %cup cp 0 mode zigzag rows_per_rank 4 : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi64>, %cup: tensor<?xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{'rows_per_rank' must be at least 1, got 0}}
  %0 = thd.cp_unslice %t, %cup cp 2 mode zigzag rows_per_rank 0 : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi64>, %cup: tensor<?xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{cannot evaluate 'rows_per_rank'}}
  %0 = thd.cp_unslice %t, %cup cp 2 mode zigzag rows_per_rank "C" : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi64>, %cup: tensor<?xi32>) -> tensor<?xf32> {
  // expected-error @+1 {{result element type 'f32' differs from the input element type 'i64'}}
  %0 = thd.cp_unslice %t, %cup cp 2 mode zigzag rows_per_rank 4 : tensor<?xi64>, tensor<?xi32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @f(%t: tensor<12xi64>, %cup: tensor<?xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{input has 12 rows; expected cp * rows_per_rank = 2 * 4 = 8}}
  %0 = thd.cp_unslice %t, %cup cp 2 mode zigzag rows_per_rank 4 : tensor<12xi64>, tensor<?xi32> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64}} {
func.func @f(%t: tensor<?xi64>, %cup: tensor<?xi32>) -> tensor<8xi64> {
  // expected-error @+1 {{result has 8 rows; expected cp * rows_per_rank = 2 * 8 = 16}}
  %0 = thd.cp_unslice %t, %cup cp "cp" mode contiguous rows_per_rank "C" : tensor<?xi64>, tensor<?xi32> -> tensor<8xi64>
  return %0 : tensor<8xi64>
}
}

// -----

func.func @f(%t: tensor<?xi64>, %cup: tensor<?xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{gathers cp * rows_per_rank = 4 * 1073741824 = 4294967296 rows, more than i32 offsets address (2147483647)}}
  %0 = thd.cp_unslice %t, %cup cp 4 mode zigzag rows_per_rank 1073741824 : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi64>, %cup: tensor<0xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{cumulative-offset arrays need at least one entry, got 0}}
  %0 = thd.cp_unslice %t, %cup cp 2 mode zigzag rows_per_rank 4 : tensor<?xi64>, tensor<0xi32> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi64>, %cup: tensor<?xi32>, %n: tensor<2xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{operand #2 must be tensor<1xi32>}}
  %0 = "thd.cp_unslice"(%t, %cup, %n) <{cp = 2 : i64, rows_per_rank = 4 : i64}> : (tensor<?xi64>, tensor<?xi32>, tensor<2xi32>) -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%cup: tensor<?xi32>, %r: tensor<1xi32>) -> tensor<6xi32> {
  // expected-error @+1 {{result has 6 rows but 'length' is 8}}
  %0 = thd.rope_positions %cup, %r max_seqlen %r cp 2 length 8 table_rows 16 : tensor<?xi32> -> tensor<6xi32>
  return %0 : tensor<6xi32>
}

// -----

func.func @f(%cup: tensor<?xi32>, %r: tensor<1xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{'table_rows' must be at least 1, got 0}}
  %0 = thd.rope_positions %cup, %r max_seqlen %r cp 2 length 8 table_rows 0 : tensor<?xi32> -> tensor<8xi32>
  return %0 : tensor<8xi32>
}

// -----

func.func @f(%cup: tensor<?xi32>, %r: tensor<1xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{expected 'max_seqlen'}}
  %0 = thd.rope_positions %cup, %r cp 2 length 8 table_rows 16 : tensor<?xi32> -> tensor<8xi32>
  return %0 : tensor<8xi32>
}

// -----

func.func @f(%cup: tensor<1xi32>, %r: tensor<1xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{needs at least 2 cu_seqlens_padded entries (rows continue the last sequence), got 1}}
  %0 = thd.rope_positions %cup, %r max_seqlen %r cp 2 length 8 table_rows 16 : tensor<1xi32> -> tensor<8xi32>
  return %0 : tensor<8xi32>
}

// -----

func.func @f(%cup: tensor<0xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{needs at least 1 cu_seqlens_padded entries (the tail starts at the last one), got 0}}
  %0 = thd.seq_idx %cup length 4 : tensor<0xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @f(%cup: tensor<?xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'length' must be at least 0, got -1}}
  %0 = thd.seq_idx %cup length -1 : tensor<?xi32> -> tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

func.func @f(%t: tensor<?xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{expects exactly one of 'target' and 'alignment', got both}}
  %0 = thd.pad_tail %t target 8 alignment 4 : tensor<?xi64> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{expects exactly one of 'target' and 'alignment', got neither}}
  %0 = thd.pad_tail %t : tensor<?xi64> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{'alignment' must be at least 1, got 0}}
  %0 = thd.pad_tail %t alignment 0 : tensor<?xi64> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%t: tensor<12xi64>) -> tensor<8xi64> {
  // expected-error @+1 {{input has 12 rows, more than the target 8; refusing to silently truncate}}
  %0 = thd.pad_tail %t target "C" : tensor<12xi64> -> tensor<8xi64>
  return %0 : tensor<8xi64>
}
}

// -----

func.func @f(%t: tensor<6xi64>) -> tensor<6xi64> {
  // expected-error @+1 {{result has 6 rows; expected 8}}
  %0 = thd.pad_tail %t target 8 : tensor<6xi64> -> tensor<6xi64>
  return %0 : tensor<6xi64>
}

// -----

func.func @f(%t: tensor<6xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{'fill' value true does not fit the element type 'i64'}}
  %0 = thd.pad_tail %t target 8 fill true : tensor<6xi64> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @f(%t: tensor<?xi64>) -> tensor<6xi64> {
  // expected-error @+1 {{result has 6 rows, not a multiple of the alignment 4}}
  %0 = thd.pad_tail %t alignment 4 : tensor<?xi64> -> tensor<6xi64>
  return %0 : tensor<6xi64>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'max_seqs' must be at least 2 with policy append_dummy_sequence (one entry is reserved for the dummy sequence), got 1}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag target 8 max_seqs 1 policy append_dummy_sequence : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{policy split_dummy_sequences needs 'max_seqs' (the dummies go in its spare entries) and 'dummy_length'}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag target 8 policy split_dummy_sequences dummy_length 4 : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{policy split_dummy_sequences needs 'max_seqs' (the dummies go in its spare entries) and 'dummy_length'}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag target 8 max_seqs 4 policy split_dummy_sequences : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'dummy_length' goes with policy split_dummy_sequences, not append_dummy_sequence}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag target 8 max_seqs 4 policy append_dummy_sequence dummy_length 4 : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{dummy_length 6 is not divisible by 2*cp = 4 under zigzag CP}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 2 mode zigzag target 8 max_seqs 4 policy split_dummy_sequences dummy_length 6 : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'dummy_length' must be at least 1, got 0}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag target 8 max_seqs 4 policy split_dummy_sequences dummy_length 0 : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'max_seqs' must be at least 1, got 0}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag target 8 max_seqs 0 policy none : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{global target target*cp = 14 is not divisible by 2*cp = 4 under zigzag CP with policy append_dummy_sequence}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 2 mode zigzag target 7 policy append_dummy_sequence : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{global target target*cp = 21 is not divisible by 2*cp = 6 under zigzag CP with policy extend_last}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 3 mode zigzag target 7 policy extend_last : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{alignment 5 is odd: under zigzag CP with cp = 2 the padded tail would not be divisible by 2*cp = 4}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 2 mode zigzag alignment 5 policy append_dummy_sequence : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{expects exactly one of 'target' and 'alignment', got both}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag target 8 alignment 4 policy none : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{expects exactly one of 'target' and 'alignment', got neither}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag policy none : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'alignment' must be at least 1, got -4}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag alignment -4 policy none : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'target' must be at least 1, got 0}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag target 0 policy none : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'cp' must be at least 1, got 0}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 0 mode zigzag target 8 policy none : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %a#0 : tensor<?xi32>
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%cu: tensor<?xi32>, %ms: tensor<1xi32>) -> tensor<5xi32> {
  // expected-error @+1 {{results must have max_seqs + 1 = 7 entries, got 5}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp "cp" mode zigzag target "C" max_seqs "N" policy append_dummy_sequence : tensor<?xi32>, tensor<?xi32> -> tensor<5xi32>, tensor<5xi32>
  return %a#0 : tensor<5xi32>
}
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%cu: tensor<9xi32>, %ms: tensor<1xi32>) -> tensor<7xi32> {
  // expected-error @+1 {{cu_seqlens has 9 entries, more than max_seqs + 1 = 7}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp "cp" mode zigzag target "C" max_seqs "N" policy append_dummy_sequence : tensor<9xi32>, tensor<9xi32> -> tensor<7xi32>, tensor<7xi32>
  return %a#0 : tensor<7xi32>
}
}

// -----

func.func @f(%cu: tensor<4xi32>, %ms: tensor<1xi32>) -> tensor<6xi32> {
  // expected-error @+1 {{result has 6 entries; expected between 4 and 5 without 'max_seqs'}}
  %a:4 = thd.pad_tail_metadata %cu, %cu, %ms cp 1 mode zigzag target 16 policy append_dummy_sequence : tensor<4xi32>, tensor<4xi32> -> tensor<6xi32>, tensor<6xi32>
  return %a#0 : tensor<6xi32>
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%cu: tensor<9xi32>) -> tensor<7xi32> {
  // expected-error @+1 {{input has 9 entries, more than the 7 requested; num_seqs exceeds the capacity}}
  %0 = thd.pad_cu_seqlens %cu entries "N+1" : tensor<9xi32> -> tensor<7xi32>
  return %0 : tensor<7xi32>
}
}

// -----

func.func @f(%cu: tensor<4xi32>) -> tensor<5xi32> {
  // expected-error @+1 {{result has 5 entries but 'entries' is 7}}
  %0 = thd.pad_cu_seqlens %cu entries 7 : tensor<4xi32> -> tensor<5xi32>
  return %0 : tensor<5xi32>
}

// -----

func.func @f(%cu: tensor<4xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{'entries' must be at least 1, got 0}}
  %0 = thd.pad_cu_seqlens %cu entries 0 : tensor<4xi32> -> tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%cu: tensor<7xi32>, %r: tensor<1xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{'max_seqs' is 7 but the cu arrays hold only 7 entries (at most 6 sequences)}}
  %0, %1 = thd.validate %cu, %cu, %r cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N+1" : tensor<7xi32>, tensor<7xi32>
  return %0 : tensor<1xi32>
}
}

// -----

// tail_slot keeps one of the max_seqs slots for the dummy over a tail.
func.func @f(%cu: tensor<7xi32>, %r: tensor<1xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{'max_seqs' is 0 with 'tail_slot': a microbatch with a tail keeps one of the max_seqs slots for its dummy sequence, so there must be one}}
  %0, %1 = thd.validate %cu, %cu, %r cp 2 mode zigzag max_tokens 16 max_seqs 0 tail_slot : tensor<7xi32>, tensor<7xi32>
  return %0 : tensor<1xi32>
}

// -----

// Contiguous CP checks no offset but cuts the padded buffer of max_tokens
// rows into cp equal ranges.
module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 3 : i64}} {
func.func @f(%cu: tensor<7xi32>, %r: tensor<1xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{'max_tokens' is 16, not a multiple of cp = 3: contiguous CP gives every rank max_tokens / cp rows of the padded buffer}}
  %0, %1 = thd.validate %cu, %cu, %r cp "cp" mode contiguous max_tokens 16 max_seqs "N" tail_slot : tensor<7xi32>, tensor<7xi32>
  return %0 : tensor<1xi32>
}
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%cu: tensor<7xi32>, %r: tensor<1xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{'max_tokens' must be at least 0, got -16}}
  %0, %1 = thd.validate %cu, %cu, %r cp "cp" mode zigzag max_tokens "-C*cp" max_seqs 2 : tensor<7xi32>, tensor<7xi32>
  return %0 : tensor<1xi32>
}
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%t: tensor<?xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{cannot evaluate 'target': in parameter expression "K": parameter 'K' is not declared}}
  %0 = thd.pad_tail %t target "K" : tensor<?xi64> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}
}

// -----

func.func @f(%t: tensor<?xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{cannot evaluate 'target': in parameter expression "C": parameter 'C' is not declared (no enclosing op declares 'thd.params')}}
  %0 = thd.pad_tail %t target "C" : tensor<?xi64> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%t: tensor<?xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{in parameter expression "C*": expected a number, a parameter name or '('}}
  %0 = thd.pad_tail %t target "C*" : tensor<?xi64> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%t: tensor<?xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{in parameter expression "C/3": 8 is not divisible by 3}}
  %0 = thd.pad_tail %t target "C/3" : tensor<?xi64> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}
}

// -----

func.func @f(%t: tensor<?xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{expected an integer or a quoted parameter expression such as "C*cp"}}
  %0 = thd.pad_tail %t target C : tensor<?xi64> -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

// expected-error @+1 {{parameter 'C' must have an i64 default, got "big"}}
module attributes {thd.params = {C = "big"}} {
}

// -----

// expected-error @+1 {{parameter 'cp' must have an i64 default, got 2 : i32}}
module attributes {thd.params = {cp = 2 : i32}} {
}

// -----

// expected-error @+1 {{'thd.params' must be a dictionary of i64 defaults}}
module attributes {thd.params = [1, 2]} {
}

// -----

// expected-error @+1 {{unknown thd attribute 'thd.param' on an operation}}
module attributes {thd.param = {C = 8 : i64}} {
}

// -----

// expected-error @+1 {{'thd.capacity' of argument #0 needs a 1-D tensor, got 'tensor<2x2xi64>'}}
func.func @f(%t: tensor<2x2xi64> {thd.capacity = 4 : i64}) {
  return
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
// expected-error @+1 {{argument #0 has static length 8 but 'thd.capacity' is 16}}
func.func @f(%t: tensor<8xi64> {thd.capacity = #thd.expr<"C*cp">}) {
  return
}
}

// -----

// expected-error @+1 {{'thd.name' of result #0 must be a non-empty string}}
func.func @f(%t: tensor<8xi64>) -> (tensor<8xi64> {thd.name = ""}) {
  return %t : tensor<8xi64>
}

// -----

// expected-error @+1 {{unknown thd attribute 'thd.size' on argument #0}}
func.func @f(%t: tensor<8xi64> {thd.size = 8}) {
  return
}

// -----

// expected-error @+1 {{parameter name '1C' is not an identifier}}
module attributes {thd.params = {"1C" = 8 : i64}} {
}

// -----

// expected-error @+1 {{in parameter expression "C*": expected a number, a parameter name or '('}}
func.func @f(%t: tensor<?xi64> {thd.capacity = #thd.expr<"C*">}) {
  return
}

// -----

module attributes {thd.params = {C = 8 : i64}} {
  // expected-error @+1 {{'thd.capacity' of argument #0 must be non-negative, got -8}}
  func.func @f(%t: tensor<?xi64> {thd.capacity = #thd.expr<"-C">}) {
    return
  }
}

// -----

func.func @f(%v: tensor<5xi32>, %ids: tensor<3xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{result has 4 entries but there are 3 ids}}
  %0 = thd.gather %v[%ids] : tensor<5xi32>, tensor<3xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @f(%v: tensor<0xi32>, %ids: tensor<3xi32>) -> tensor<3xi32> {
  // expected-error @+1 {{gathers from an empty array}}
  %0 = thd.gather %v[%ids] : tensor<0xi32>, tensor<3xi32> -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

func.func @f(%t: tensor<8xi64>, %m: tensor<8xi1>) -> tensor<8xi32> {
  // expected-error @+1 {{yields 1 values of types 'tensor<8xi64>' but has results of types 'tensor<8xi32>'}}
  %0 = thd.fused -> tensor<8xi32> {
    %s = thd.sanitize %t, %m : tensor<8xi64>, tensor<8xi1>
    thd.yield %s : tensor<8xi64>
  }
  return %0 : tensor<8xi32>
}

// -----

// A foreign terminator is a diagnostic, not an unchecked cast (found by the
// adversarial review: an abort, undefined behaviour in release).
func.func @f(%t: tensor<8xi64>) -> tensor<8xi64> {
  // expected-error @+1 {{must end its body with 'thd.yield', got 'func.return'}}
  %0 = thd.fused -> tensor<8xi64> {
    func.return %t : tensor<8xi64>
  }
  return %0 : tensor<8xi64>
}

// -----

func.func @f(%t: tensor<8xi64>) -> tensor<8xi64> {
  %0 = thd.fused -> tensor<8xi64> {
    // expected-error @+1 {{cannot run inside a fused kernel: only thd steps and constants can}}
    %c = tensor.cast %t : tensor<8xi64> to tensor<8xi64>
    thd.yield %c : tensor<8xi64>
  }
  return %0 : tensor<8xi64>
}

// -----

// expected-error @+1 {{'thd.grid' must be three positive sizes [x, y, z]}}
func.func @f() attributes {thd.grid = array<i64: 1, 0, 1>} {
  return
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64, P = 64 : i64}} {
func.func @f(%cu: tensor<7xi32>, %r: tensor<1xi32>, %offsets: tensor<8xi32>, %lengths: tensor<7xi32>, %ids: tensor<5xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{has 8 sample offsets but 7 sample lengths}}
  %0, %1 = thd.validate %cu, %cu, %r samples(%offsets, %lengths, %ids : tensor<8xi32>, tensor<7xi32>, tensor<5xi32>) pool_rows "P"
      cp "cp" mode zigzag max_tokens "C*cp" max_seqs 2 : tensor<7xi32>, tensor<7xi32>
  return %0 : tensor<1xi32>
}
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64, P = 0 : i64}} {
func.func @f(%cu: tensor<7xi32>, %r: tensor<1xi32>, %offsets: tensor<8xi32>, %ids: tensor<5xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{'pool_rows' must be at least 1, got 0}}
  %0, %1 = thd.validate %cu, %cu, %r samples(%offsets, %offsets, %ids : tensor<8xi32>, tensor<8xi32>, tensor<5xi32>) pool_rows "P"
      cp "cp" mode zigzag max_tokens "C*cp" max_seqs 2 : tensor<7xi32>, tensor<7xi32>
  return %0 : tensor<1xi32>
}
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
func.func @f(%cu: tensor<7xi32>, %r: tensor<1xi32>, %offsets: tensor<8xi32>, %ids: tensor<5xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{'samples' takes the sample offsets, the sample lengths and the chosen sample ids, all three}}
  %0, %1 = "thd.validate"(%cu, %cu, %r, %offsets, %ids) <{cp = 2 : i64, max_tokens = 16 : i64, max_seqs = 2 : i64, pool_rows = 8 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 0, 1>}> : (tensor<7xi32>, tensor<7xi32>, tensor<1xi32>, tensor<8xi32>, tensor<5xi32>) -> (tensor<1xi32>, tensor<1xi32>)
  return %0 : tensor<1xi32>
}
}

// -----

module attributes {thd.params = {C = 8 : i64, N = 9223372036854775807 : i64, cp = 2 : i64}} {
func.func @f(%cu: tensor<7xi32>, %r: tensor<1xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{'max_seqs' must be at most 2147483647, got 9223372036854775807}}
  %0, %1 = thd.validate %cu, %cu, %r cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N" : tensor<7xi32>, tensor<7xi32>
  return %0 : tensor<1xi32>
}
}

// -----

// Configuration values are bounded by the device's 32-bit offsets (and the
// verifiers' arithmetic stays clear of overflow).
module attributes {thd.params = {C = 8 : i64}} {
func.func @f(%t: tensor<8xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{'target' must be at most 2147483647, got 4294967296}}
  %p = thd.pad_tail %t target 4294967296 : tensor<8xi64> -> tensor<?xi64>
  return %p : tensor<?xi64>
}
}

// -----

module attributes {thd.params = {cp = 9223372036854775807 : i64}} {
func.func @f(%t: tensor<16xi64>, %cup: tensor<7xi32>, %r: tensor<1xi32>) -> tensor<?xi64> {
  // expected-error @+1 {{'cp' must be at most 2147483647, got 9223372036854775807}}
  %s = thd.cp_slice %t, %cup, %r cp "cp" mode zigzag : tensor<16xi64>, tensor<7xi32> -> tensor<?xi64>
  return %s : tensor<?xi64>
}
}

// -----

// Argument attributes on a function whose body does not take its arguments
// (found by the pipeline fuzzer: the thd attribute check indexed the entry
// block's missing arguments).
// expected-error @+1 {{'func.func' op entry block must have 1 arguments to match function signature}}
func.func @f(tensor<?xi64> {thd.name = "tokens", thd.capacity = 8 : i64}) {
  return
}

// -----

// extend_last lengthens the last sequence: a slice taken with the offsets
// from before it, then padded, holds that sequence's chunks at its old
// length (S7, S10).
func.func @f(%t: tensor<16xi64>, %cu: tensor<7xi32>, %cup: tensor<7xi32>, %n: tensor<1xi32>,
             %r: tensor<1xi32>, %ms: tensor<1xi32>) -> (tensor<8xi64>, tensor<7xi32>) {
  // expected-note @+1 {{sliced here}}
  %0 = thd.cp_slice %t, %cup, %r num_seqs %n cp 2 mode zigzag : tensor<16xi64>, tensor<7xi32> -> tensor<8xi64>
  // expected-error @+1 {{pads the tail of a CP slice taken with offsets that extend_last then lengthens}}
  %1 = thd.pad_tail %0 target 8 : tensor<8xi64> -> tensor<8xi64>
  // expected-note @+1 {{the last sequence extended here}}
  %cu2, %cup2, %ms2, %n2 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag
      target 8 max_seqs 6 policy extend_last : tensor<7xi32>, tensor<7xi32> -> tensor<7xi32>, tensor<7xi32>
  return %1, %cup2 : tensor<8xi64>, tensor<7xi32>
}

// -----

func.func @f(%status: tensor<1xi32>, %cu: tensor<0xi32>, %n: tensor<1xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{cumulative-offset arrays need at least one entry, got 0}}
  %0, %1 = thd.dropped %status, %cu num_seqs %n : tensor<0xi32>
  return %0 : tensor<1xi32>
}

// -----

func.func @f(%status: tensor<2xi32>, %cu: tensor<7xi32>, %n: tensor<1xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{operand #0 must be tensor<1xi32>}}
  %0, %1 = "thd.dropped"(%status, %cu, %n) : (tensor<2xi32>, tensor<7xi32>, tensor<1xi32>) -> (tensor<1xi32>, tensor<1xi32>)
  return %0 : tensor<1xi32>
}

// -----

func.func @f(%cup: tensor<6xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{'chunk_size' must be a power of two, got 48}}
  %0, %1, %2 = thd.linear_chunks %cup chunk_size 48 rows 200 : tensor<6xi32> -> tensor<?xi32>, tensor<6xi32>
  return %2 : tensor<1xi32>
}

// -----

func.func @f(%cup: tensor<6xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{'chunk_size' must be at least 1, got 0}}
  %0, %1, %2 = thd.linear_chunks %cup chunk_size 0 rows 200 : tensor<6xi32> -> tensor<?xi32>, tensor<6xi32>
  return %2 : tensor<1xi32>
}

// -----

func.func @f(%cup: tensor<6xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{'rows' must be at least 0, got -1}}
  %0, %1, %2 = thd.linear_chunks %cup chunk_size 64 rows -1 : tensor<6xi32> -> tensor<?xi32>, tensor<6xi32>
  return %2 : tensor<1xi32>
}

// -----

func.func @f(%cup: tensor<1xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{needs at least 2 cu_seqlens_padded entries (one sequence), got 1}}
  %0, %1, %2 = thd.linear_chunks %cup chunk_size 64 rows 200 : tensor<1xi32> -> tensor<?xi32>, tensor<1xi32>
  return %2 : tensor<1xi32>
}

// -----

func.func @f(%cup: tensor<6xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{has ceil(rows / chunk_size) + N = 2147483652 chunks, more than i32 offsets address as two entries each (2147483647)}}
  %0, %1, %2 = thd.linear_chunks %cup chunk_size 1 rows 2147483647 : tensor<6xi32> -> tensor<?xi32>, tensor<6xi32>
  return %2 : tensor<1xi32>
}

// -----

func.func @f(%cup: tensor<6xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{chunk_offsets has 7 entries; expected the 6 of cu_seqlens_padded}}
  %0, %1, %2 = thd.linear_chunks %cup chunk_size 64 rows 200 : tensor<6xi32> -> tensor<18xi32>, tensor<7xi32>
  return %2 : tensor<1xi32>
}

// -----

func.func @f(%cup: tensor<6xi32>) -> tensor<1xi32> {
  // expected-error @+1 {{chunk_indices has 8 entries; expected 2 * (ceil(rows / chunk_size) + N) = 18}}
  %0, %1, %2 = thd.linear_chunks %cup chunk_size 64 rows 200 : tensor<6xi32> -> tensor<8xi32>, tensor<6xi32>
  return %2 : tensor<1xi32>
}
