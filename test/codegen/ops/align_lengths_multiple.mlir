// Lowering of thd.align_lengths with a low-precision `multiple`: the same
// rounding by one constant G = tpPad * lcm(cpPad, share * m), so that every
// rank's share of every sequence is a multiple of m (docs/semantics.md S1).
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// FP8 without CP: G = m = 16.
// CHECK-LABEL: func.func @fp8_cp1
// CHECK-SAME: (%[[V:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[P:[a-z0-9]+]]: memref<4xi32> {llvm.noalias})
// CHECK: %[[X:.+]] = memref.load %[[V]][
// CHECK: %[[Q:.+]] = arith.ceildivsi %[[X]], %c16_i32{{.*}} : i32
// CHECK: %[[R:.+]] = arith.muli %[[Q]], %c16_i32{{.*}} : i32
// CHECK: memref.store %[[R]], %[[P]][
func.func @fp8_cp1(%v: tensor<4xi32>) -> tensor<4xi32> {
  %p = thd.align_lengths %v cp 1 tp 1 multiple 16 : tensor<4xi32>
  return %p : tensor<4xi32>
}

// cp = 2: lcm(4, 2 * 16) = 32.
// CHECK-LABEL: func.func @fp8_cp2
// CHECK: arith.ceildivsi %{{.+}}, %c32_i32{{.*}} : i32
// CHECK: arith.muli %{{.+}}, %c32_i32{{.*}} : i32
func.func @fp8_cp2(%v: tensor<4xi32>) -> tensor<4xi32> {
  %p = thd.align_lengths %v cp 2 tp 1 multiple 16 : tensor<4xi32>
  return %p : tensor<4xi32>
}

// cp = 2, tp = 2 with sequence parallelism: 2 * lcm(4, 32) = 64.
// CHECK-LABEL: func.func @fp8_cp2_sp
// CHECK: arith.ceildivsi %{{.+}}, %c64_i32{{.*}} : i32
// CHECK: arith.muli %{{.+}}, %c64_i32{{.*}} : i32
func.func @fp8_cp2_sp(%v: tensor<4xi32>) -> tensor<4xi32> {
  %p = thd.align_lengths %v cp 2 tp 2 sequence_parallel multiple 16 : tensor<4xi32>
  return %p : tensor<4xi32>
}

// Blockwise FP8 (m = 128) from a parameter, cp = 1, tp = 4 with sequence
// parallelism: 4 * 128 = 512.
// CHECK-LABEL: func.func @blockwise_param
// CHECK: arith.ceildivsi %{{.+}}, %c512_i32{{.*}} : i32
// CHECK: arith.muli %{{.+}}, %c512_i32{{.*}} : i32
func.func @blockwise_param(%v: tensor<4xi32>) -> tensor<4xi32> attributes {thd.params = {M = 128 : i64}} {
  %p = thd.align_lengths %v cp 1 tp 4 sequence_parallel multiple "M" : tensor<4xi32>
  return %p : tensor<4xi32>
}

// Dynamic CP, cp = 2, dp = 2: cpPad = 8, share 4, lcm(8, 4 * 32) = 128.
// CHECK-LABEL: func.func @mxfp8_dynamic_cp
// CHECK: arith.ceildivsi %{{.+}}, %c128_i32{{.*}} : i32
// CHECK: arith.muli %{{.+}}, %c128_i32{{.*}} : i32
func.func @mxfp8_dynamic_cp(%v: tensor<4xi32>) -> tensor<4xi32> {
  %p = thd.align_lengths %v cp 2 tp 1 dynamic_cp dp 2 multiple 32 : tensor<4xi32>
  return %p : tensor<4xi32>
}

// A multiple that 2*cp already holds: G stays 2*cp = 8.
// CHECK-LABEL: func.func @multiple_divides_cp
// CHECK: arith.ceildivsi %{{.+}}, %c8_i32{{.*}} : i32
func.func @multiple_divides_cp(%v: tensor<4xi32>) -> tensor<4xi32> {
  %p = thd.align_lengths %v cp 4 tp 1 multiple 1 : tensor<4xi32>
  return %p : tensor<4xi32>
}
