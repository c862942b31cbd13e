// RUN: thd-opt %s --canonicalize -split-input-file | FileCheck %s --enable-var-scope

// cp_slice with cp = 1 is its input.
// CHECK-LABEL: func.func @cp_slice_cp1
// CHECK-SAME: (%[[T:.+]]: tensor<8xi64>,
// CHECK-NOT: thd.cp_slice
// CHECK: return %[[T]]
func.func @cp_slice_cp1(%t: tensor<8xi64>, %cup: tensor<4xi32>,
                        %rank: tensor<1xi32>) -> tensor<8xi64> {
  %s = thd.cp_slice %t, %cup, %rank cp 1 mode zigzag
      : tensor<8xi64>, tensor<4xi32> -> tensor<8xi64>
  return %s : tensor<8xi64>
}

// -----

// cp = 2 keeps half the rows: no fold.
// CHECK-LABEL: func.func @cp_slice_cp2
// CHECK: thd.cp_slice {{.*}} cp 2
func.func @cp_slice_cp2(%t: tensor<8xi64>, %cup: tensor<4xi32>,
                        %rank: tensor<1xi32>) -> tensor<4xi64> {
  %s = thd.cp_slice %t, %cup, %rank cp 2 mode zigzag
      : tensor<8xi64>, tensor<4xi32> -> tensor<4xi64>
  return %s : tensor<4xi64>
}

// -----

// A cp still given by a parameter is not folded, even when its default is
// 1: the value may be overridden when the parameters are bound.
// CHECK-LABEL: func.func @cp_slice_param
// CHECK: thd.cp_slice {{.*}} cp "cp"
module attributes {thd.params = {cp = 1 : i64}} {
func.func @cp_slice_param(%t: tensor<?xi64>, %cup: tensor<?xi32>,
                          %rank: tensor<1xi32>) -> tensor<?xi64> {
  %s = thd.cp_slice %t, %cup, %rank cp "cp" mode zigzag
      : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
  return %s : tensor<?xi64>
}
}

// -----

// cp = 1 that also changes the type (static to dynamic) is not replaced.
// CHECK-LABEL: func.func @cp_slice_cp1_type_change
// CHECK: thd.cp_slice {{.*}} cp 1
func.func @cp_slice_cp1_type_change(%t: tensor<8xi64>, %cup: tensor<4xi32>,
                                    %rank: tensor<1xi32>) -> tensor<?xi64> {
  %s = thd.cp_slice %t, %cup, %rank cp 1 mode zigzag
      : tensor<8xi64>, tensor<4xi32> -> tensor<?xi64>
  return %s : tensor<?xi64>
}

// -----

// cp_unslice with cp = 1 is its input; cp = 2 reorders rows: no fold.
// CHECK-LABEL: func.func @cp_unslice_cp1
// CHECK-SAME: (%[[T:.+]]: tensor<8xi64>,
// CHECK-NOT: thd.cp_unslice
// CHECK: return %[[T]]
func.func @cp_unslice_cp1(%t: tensor<8xi64>, %cup: tensor<4xi32>) -> tensor<8xi64> {
  %s = thd.cp_unslice %t, %cup cp 1 mode zigzag rows_per_rank 8
      : tensor<8xi64>, tensor<4xi32> -> tensor<8xi64>
  return %s : tensor<8xi64>
}

// -----

// CHECK-LABEL: func.func @cp_unslice_cp2
// CHECK: thd.cp_unslice {{.*}} cp 2
func.func @cp_unslice_cp2(%t: tensor<8xi64>, %cup: tensor<4xi32>) -> tensor<8xi64> {
  %s = thd.cp_unslice %t, %cup cp 2 mode zigzag rows_per_rank 4
      : tensor<8xi64>, tensor<4xi32> -> tensor<8xi64>
  return %s : tensor<8xi64>
}

// -----

// A pipeline argument padded to its own length is itself, and so is a
// pad_tail of a pad_tail to the same target.
// CHECK-LABEL: func.func @pad_tail_own_length
// CHECK-SAME: (%[[T:.+]]: tensor<8xi64>)
// CHECK-NOT: thd.pad_tail
// CHECK: return %[[T]], %[[T]]
func.func @pad_tail_own_length(%t: tensor<8xi64>)
    -> (tensor<8xi64>, tensor<8xi64>) {
  %p = thd.pad_tail %t target 8 : tensor<8xi64> -> tensor<8xi64>
  %q = thd.pad_tail %p target 8 fill 7 : tensor<8xi64> -> tensor<8xi64>
  return %p, %q : tensor<8xi64>, tensor<8xi64>
}

// -----

// Padding to a longer target adds rows: no fold.
// CHECK-LABEL: func.func @pad_tail_longer
// CHECK: thd.pad_tail {{.*}} target 8
func.func @pad_tail_longer(%t: tensor<6xi64>) -> tensor<8xi64> {
  %p = thd.pad_tail %t target 8 : tensor<6xi64> -> tensor<8xi64>
  return %p : tensor<8xi64>
}

// -----

// After a CP slice only T/cp rows are meaningful: padding to the static
// length still fills the rest, so it stays.
// CHECK-LABEL: func.func @pad_tail_after_slice
// CHECK: %[[S:.+]] = thd.cp_slice
// CHECK: thd.pad_tail %[[S]] target 4
func.func @pad_tail_after_slice(%t: tensor<8xi64>, %cup: tensor<4xi32>,
                                %rank: tensor<1xi32>) -> tensor<4xi64> {
  %s = thd.cp_slice %t, %cup, %rank cp 2 mode zigzag
      : tensor<8xi64>, tensor<4xi32> -> tensor<4xi64>
  %p = thd.pad_tail %s target 4 : tensor<4xi64> -> tensor<4xi64>
  return %p : tensor<4xi64>
}

// -----

// With an alignment the length depends on the data: no fold.
// CHECK-LABEL: func.func @pad_tail_alignment
// CHECK: thd.pad_tail {{.*}} alignment 4
func.func @pad_tail_alignment(%t: tensor<8xi64>) -> tensor<?xi64> {
  %p = thd.pad_tail %t alignment 4 : tensor<8xi64> -> tensor<?xi64>
  return %p : tensor<?xi64>
}
