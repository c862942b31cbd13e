// Lowering of thd.validate: the bits that need no loop (num_seqs, cp_rank,
// start, total, first entry) before one reduction over entries [1, n] that
// ORs the per-entry bits (decrease, valid above padded in 64 bits,
// divisibility, samples); the checked count is num_seqs when the status is
// 0. On the GPU the threads of the block share the entries (gpu.all_reduce).
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s
// RUN: thd-opt %s --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @validate
// CHECK-SAME: (%[[CU:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[RANK:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[STATUS:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[CHECKED:[a-z0-9]+]]: memref<1xi32> {llvm.noalias})
// CHECK-DAG: %[[RAW:.+]] = memref.load %[[N]][
// CHECK-DAG: arith.cmpi sgt, %[[RAW]], %c5_i32{{.*}} : i32
// CHECK-DAG: arith.select %{{.+}}, %c1_i32{{.*}}, %c0_i32{{.*}} : i32
// CHECK-DAG: %[[R:.+]] = memref.load %[[RANK]][
// CHECK-DAG: arith.cmpi sge, %[[R]], %c2_i32{{.*}} : i32
// CHECK-DAG: arith.select %{{.+}}, %c32_i32{{.*}}, %c0_i32{{.*}} : i32
// CHECK-DAG: arith.select %{{.+}}, %c8_i32{{.*}}, %c0_i32{{.*}} : i32
// CHECK-DAG: arith.cmpi sgt, %{{.+}}, %c16_i32{{.*}} : i32
// CHECK-DAG: arith.select %{{.+}}, %c2_i32{{.*}}, %c0_i32{{.*}} : i32
// CHECK-DAG: arith.remsi %{{.+}}, %c4_i32{{.*}} : i32
// CHECK: %[[BITS:.+]] = scf.for %[[I:.+]] = %c1{{.*}} to %{{.+}} step %{{.+}} iter_args(%[[ACC:.+]] = %{{.+}}) -> (i32)
// CHECK-DAG: memref.load %[[CU]][
// CHECK-DAG: memref.load %[[CUP]][
// CHECK-DAG: arith.select %{{.+}}, %c8_i32{{.*}}, %c0_i32{{.*}} : i32
// CHECK-DAG: arith.extsi %{{.+}} : i32 to i64
// CHECK-DAG: arith.cmpi sgt, %{{.+}}, %{{.+}} : i64
// CHECK-DAG: arith.select %{{.+}}, %c16_i32{{.*}}, %c0_i32{{.*}} : i32
// CHECK-DAG: arith.remsi %{{.+}}, %c4_i32{{.*}} : i32
// CHECK: scf.yield %{{.+}} : i32
// CHECK: %[[VALID:.+]] = arith.cmpi eq, %[[BITS]], %c0_i32{{.*}} : i32
// CHECK: %[[COUNT:.+]] = arith.select %[[VALID]], %[[RAW]], %c0_i32{{.*}} : i32
// CHECK-DAG: memref.store %[[BITS]], %[[STATUS]][
// CHECK-DAG: memref.store %[[COUNT]], %[[CHECKED]][
func.func @validate(%cu: tensor<7xi32>, %cup: tensor<7xi32>, %rank: tensor<1xi32>, %n: tensor<1xi32>)
    -> (tensor<1xi32>, tensor<1xi32>) {
  %status, %checked = thd.validate %cu, %cup, %rank num_seqs %n cp 2 mode zigzag
      max_tokens 16 max_seqs 5 : tensor<7xi32>, tensor<7xi32>
  return %status, %checked : tensor<1xi32>, tensor<1xi32>
}

// With samples: inside the reduction, the chosen id is checked against the
// pool's 8 samples and offset + length (in 64 bits) against its 64 rows.
// CHECK-LABEL: func.func @validate_samples
// CHECK-SAME: %[[OFFSETS:[a-z0-9]+]]: memref<8xi32> {llvm.noalias}, %[[LENGTHS:[a-z0-9]+]]: memref<8xi32> {llvm.noalias}, %[[IDS:[a-z0-9]+]]: memref<5xi32> {llvm.noalias}, %[[STATUS:[a-z0-9]+]]: memref<1xi32> {llvm.noalias})
// CHECK: %[[BITS:.+]] = scf.for
// CHECK: %[[ID:.+]] = memref.load %[[IDS]][
// CHECK: arith.cmpi sge, %[[ID]], %c8_i32{{.*}} : i32
// CHECK-DAG: memref.load %[[OFFSETS]][
// CHECK-DAG: memref.load %[[LENGTHS]][
// CHECK: %[[END:.+]] = arith.addi %{{.+}}, %{{.+}} : i64
// CHECK: arith.cmpi sgt, %[[END]], %c64_i64{{.*}} : i64
// CHECK: arith.select %{{.+}}, %c64_i32{{.*}}, %c0_i32{{.*}} : i32
// CHECK: scf.yield
// CHECK: memref.store %[[BITS]], %[[STATUS]][
func.func @validate_samples(%cu: tensor<7xi32>, %cup: tensor<7xi32>, %rank: tensor<1xi32>, %n: tensor<1xi32>,
                            %offsets: tensor<8xi32>, %lengths: tensor<8xi32>, %ids: tensor<5xi32>)
    -> tensor<1xi32> {
  %status, %checked = thd.validate %cu, %cup, %rank num_seqs %n
      samples(%offsets, %lengths, %ids : tensor<8xi32>, tensor<8xi32>, tensor<5xi32>) pool_rows 64
      cp 2 mode zigzag max_tokens 16 max_seqs 5 : tensor<7xi32>, tensor<7xi32>
  return %status : tensor<1xi32>
}

// With tail_slot, num_seqs may be max_seqs (6) only when the padded total
// cu_seqlens_padded[n] is max_tokens (24): no tail, so no dummy needs a slot.
// CHECK-LABEL: func.func @validate_tail_slot
// CHECK-DAG: %[[RAW:.+]] = memref.load %{{.+}}[
// CHECK-DAG: %[[ABOVE:.+]] = arith.cmpi sgt, %[[RAW]], %c6_i32{{.*}} : i32
// CHECK-DAG: %[[FULL:.+]] = arith.cmpi eq, %[[RAW]], %c6_i32{{.*}} : i32
// CHECK-DAG: %[[TAIL:.+]] = arith.cmpi slt, %{{.+}}, %c24_i32{{.*}} : i32
// CHECK-DAG: %[[NOSLOT:.+]] = arith.andi %[[FULL]], %[[TAIL]] : i1
// CHECK-DAG: arith.ori %{{.+}}, %[[NOSLOT]] : i1
// CHECK: scf.for
func.func @validate_tail_slot(%cu: tensor<7xi32>, %cup: tensor<7xi32>, %rank: tensor<1xi32>, %n: tensor<1xi32>)
    -> tensor<1xi32> {
  %status, %checked = thd.validate %cu, %cup, %rank num_seqs %n cp 2 mode zigzag
      max_tokens 24 max_seqs 6 tail_slot : tensor<7xi32>, tensor<7xi32>
  return %status : tensor<1xi32>
}

// Contiguous CP checks the offsets for no multiple: no remainder anywhere.
// CHECK-LABEL: func.func @validate_contiguous
// CHECK-NOT: arith.remsi
// CHECK: scf.for
// CHECK-NOT: arith.remsi
// CHECK: return
func.func @validate_contiguous(%cu: tensor<7xi32>, %cup: tensor<7xi32>, %rank: tensor<1xi32>, %n: tensor<1xi32>)
    -> tensor<1xi32> {
  %status, %checked = thd.validate %cu, %cup, %rank num_seqs %n cp 3 mode contiguous
      max_tokens 24 max_seqs 6 : tensor<7xi32>, tensor<7xi32>
  return %status : tensor<1xi32>
}

// GPU-LABEL: gpu.func @validate
// GPU: %[[PART:.+]] = scf.for
// GPU: %[[BITS:.+]] = gpu.all_reduce or %[[PART]] uniform
// GPU: arith.cmpi eq, %[[BITS]], %c0_i32{{.*}} : i32
