// Pipelines that cannot be made static: each error names the op and why.
// RUN: thd-opt %s -split-input-file -verify-diagnostics --thd-force-static-shapes

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64}} {
  // expected-error @+1 {{cannot make argument #0 ('tokens') static: it has the dynamic type 'tensor<?xi64>' and no 'thd.capacity'}}
  func.func @no_capacity(%t: tensor<?xi64> {thd.name = "tokens"}) -> tensor<?xi64> {
    return %t : tensor<?xi64>
  }
}

// -----

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64}} {
  func.func @mask_without_capacity(%cu: tensor<?xi32> {thd.capacity = 5 : i64}) -> tensor<?xi1> {
    // expected-error @+1 {{cannot be made static: its result has cu_seqlens_padded[num_seqs] rows, a value known only on the device; bound it with a 'capacity'}}
    %m = thd.padding_mask %cu, %cu : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>
    return %m : tensor<?xi1>
  }
}

// -----

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64}} {
  func.func @pad_to_alignment(%t: tensor<?xi64> {thd.capacity = #thd.expr<"C">}) -> tensor<?xi64> {
    // expected-error @+1 {{cannot be made static: with 'alignment' its length round_up(rows, alignment) depends on the data; pad to a 'target' instead}}
    %p = thd.pad_tail %t alignment 4 : tensor<?xi64> -> tensor<?xi64>
    return %p : tensor<?xi64>
  }
}

// -----

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64}} {
  func.func @metadata_without_max_seqs(%cu: tensor<?xi32> {thd.capacity = 5 : i64}, %ms: tensor<1xi32>) -> tensor<?xi32> {
    // expected-error @+1 {{cannot be made static: without 'max_seqs' the number of entries depends on the data}}
    %m:4 = thd.pad_tail_metadata %cu, %cu, %ms cp "cp" mode zigzag target "C" policy append_dummy_sequence : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
    return %m#0 : tensor<?xi32>
  }
}

// -----

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64}} {
  func.func @truncating_target(%t: tensor<?xi64> {thd.capacity = #thd.expr<"C*cp">}) -> tensor<?xi64> {
    // expected-error @+1 {{cannot be made static: the input's capacity 16 exceeds the target 8, so a full input would be truncated}}
    %p = thd.pad_tail %t target "C" : tensor<?xi64> -> tensor<?xi64>
    return %p : tensor<?xi64>
  }
}

// -----

module attributes {thd.params = {C = 8 : i64, cp = 4 : i64}} {
  func.func @indivisible_capacity(%t: tensor<?xi64> {thd.capacity = 12 : i64}, %cu: tensor<5xi32>, %r: tensor<1xi32>) -> tensor<?xi64> {
    // expected-error @+1 {{cannot be made static: the input's capacity 12 is not divisible by 8, so the rank's share has no whole number of rows}}
    %s = thd.cp_slice %t, %cu, %r cp "cp" mode zigzag : tensor<?xi64>, tensor<5xi32> -> tensor<?xi64>
    return %s : tensor<?xi64>
  }
}

// -----

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64}} {
  func.func @mismatched_capacities(%t: tensor<?xi64> {thd.capacity = 16 : i64}, %cu: tensor<5xi32>) -> tensor<?xi64> {
    %m = thd.padding_mask %cu, %cu capacity 8 : tensor<5xi32>, tensor<5xi32> -> tensor<?xi1>
    // expected-error @+1 {{cannot be made static: the input's capacity is 16 rows but the mask's is 8}}
    %s = thd.sanitize %t, %m : tensor<?xi64>, tensor<?xi1>
    return %s : tensor<?xi64>
  }
}

// -----

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64}} {
  func.func @foreign_op(%t: tensor<?xi64> {thd.capacity = 16 : i64}) -> tensor<?xi64> {
    // expected-error @+1 {{cannot be made static: thdc does not know how to bound the shape of this op's results}}
    %c = tensor.cast %t : tensor<?xi64> to tensor<?xi64>
    return %c : tensor<?xi64>
  }
}

// -----

// Offsets and GPU indices are 32-bit: C = 2^30 with cp = 2 used to compile
// to a kernel that never loaded its inputs.
module attributes {thd.params = {C = 1073741824 : i64, cp = 2 : i64}} {
  // expected-error @+1 {{cannot be made static: argument #0 ('tokens') would have 2147483648 rows; thdc needs 1 to 2147483647}}
  func.func @too_long(%t: tensor<?xi64> {thd.name = "tokens", thd.capacity = #thd.expr<"C*cp">}) -> tensor<?xi64> {
    return %t : tensor<?xi64>
  }
}

// -----

// A zero capacity used to compile to code that loads element -1.
module attributes {thd.params = {P = 0 : i64}} {
  // expected-error @+1 {{cannot be made static: argument #0 ('pool') would have 0 rows; thdc needs 1 to 2147483647}}
  func.func @empty(%t: tensor<?xi64> {thd.name = "pool", thd.capacity = #thd.expr<"P">}) -> tensor<?xi64> {
    return %t : tensor<?xi64>
  }
}

// -----

// The cumulative offsets of 2^31 - 1 lengths have one entry too many.
module attributes {thd.params = {N = 2147483647 : i64}} {
  func.func @cu_too_long(%l: tensor<?xi32> {thd.capacity = #thd.expr<"N">}) -> tensor<?xi32> {
    // expected-error @+1 {{cannot be made static: result #0 would have 2147483648 rows; thdc needs 1 to 2147483647}}
    %c = thd.cu_seqlens %l : tensor<?xi32> -> tensor<?xi32>
    return %c : tensor<?xi32>
  }
}

// -----

// The verifier checks the chunk capacity of thd.linear_chunks only once
// cu_seqlens_padded is static, here first: its error is the only one. The
// lengths of the results used to be read from the failed capacity, a
// garbage row count (different on every run) reported in a second error.
module attributes {thd.params = {R = 2000000000 : i64, N = 5 : i64}} {
  func.func @too_many_linear_chunks(%cup: tensor<?xi32> {thd.capacity = #thd.expr<"N+1">}) -> tensor<1xi32> {
    // expected-error @+1 {{'thd.linear_chunks' op has ceil(rows / chunk_size) + N = 2000000005 chunks, more than i32 offsets address as two entries each (2147483647)}}
    %i, %o, %c = thd.linear_chunks %cup chunk_size 1 rows "R" : tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
    return %c : tensor<1xi32>
  }
}
