// Driver appended to the lowered example by run-golden.test (the lowered
// module's closing brace is removed first): runs both CP ranks on docs/semantics.md's
// running example and prints every output but the i1 mask.
  memref.global "private" constant @tok : memref<16xi64> = dense<[11, 12, 13, 99, 21, 22, 99, 99, 31, 32, 33, 34, 7, 7, 7, 7]>
  memref.global "private" constant @lab : memref<16xi64> = dense<[12, 13, 1, 99, 22, 2, 99, 99, 32, 33, 34, 3, 7, 7, 7, 7]>
  memref.global "private" constant @pos : memref<16xi64> = dense<[0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 7, 7, 7, 7]>
  memref.global "private" constant @lm : memref<16xf32> = dense<1.0>
  memref.global "private" constant @cu : memref<7xi32> = dense<[0, 3, 5, 9, -1, -1, -1]>
  memref.global "private" constant @cup : memref<7xi32> = dense<[0, 4, 8, 12, -1, -1, -1]>
  memref.global "private" constant @n : memref<1xi32> = dense<3>
  memref.global "private" constant @r0 : memref<1xi32> = dense<0>
  memref.global "private" constant @r1 : memref<1xi32> = dense<1>
  func.func private @printMemrefI64(memref<*xi64>)
  func.func private @printMemrefI32(memref<*xi32>)
  func.func private @printMemrefF32(memref<*xf32>)
  func.func @run(%rank: memref<1xi32>) {
    %t = memref.get_global @tok : memref<16xi64>
    %l = memref.get_global @lab : memref<16xi64>
    %p = memref.get_global @pos : memref<16xi64>
    %m = memref.get_global @lm : memref<16xf32>
    %cu = memref.get_global @cu : memref<7xi32>
    %cup = memref.get_global @cup : memref<7xi32>
    %n = memref.get_global @n : memref<1xi32>
    %o0 = memref.alloc() : memref<8xi64>
    %o1 = memref.alloc() : memref<8xi64>
    %o2 = memref.alloc() : memref<8xi64>
    %o3 = memref.alloc() : memref<8xf32>
    %o4 = memref.alloc() : memref<8xi1>
    %o5 = memref.alloc() : memref<7xi32>
    %o6 = memref.alloc() : memref<7xi32>
    %o7 = memref.alloc() : memref<1xi32>
    %o8 = memref.alloc() : memref<1xi32>
    func.call @megatron_graph_step(%t, %l, %p, %m, %cu, %cup, %n, %rank, %o0, %o1, %o2, %o3, %o4, %o5, %o6, %o7, %o8) : (memref<16xi64>, memref<16xi64>, memref<16xi64>, memref<16xf32>, memref<7xi32>, memref<7xi32>, memref<1xi32>, memref<1xi32>, memref<8xi64>, memref<8xi64>, memref<8xi64>, memref<8xf32>, memref<8xi1>, memref<7xi32>, memref<7xi32>, memref<1xi32>, memref<1xi32>) -> ()
    %c0 = memref.cast %o0 : memref<8xi64> to memref<*xi64>
    func.call @printMemrefI64(%c0) : (memref<*xi64>) -> ()
    %c1 = memref.cast %o1 : memref<8xi64> to memref<*xi64>
    func.call @printMemrefI64(%c1) : (memref<*xi64>) -> ()
    %c2 = memref.cast %o2 : memref<8xi64> to memref<*xi64>
    func.call @printMemrefI64(%c2) : (memref<*xi64>) -> ()
    %c3 = memref.cast %o3 : memref<8xf32> to memref<*xf32>
    func.call @printMemrefF32(%c3) : (memref<*xf32>) -> ()
    %c5 = memref.cast %o5 : memref<7xi32> to memref<*xi32>
    func.call @printMemrefI32(%c5) : (memref<*xi32>) -> ()
    %c6 = memref.cast %o6 : memref<7xi32> to memref<*xi32>
    func.call @printMemrefI32(%c6) : (memref<*xi32>) -> ()
    %c7 = memref.cast %o7 : memref<1xi32> to memref<*xi32>
    func.call @printMemrefI32(%c7) : (memref<*xi32>) -> ()
    %c8 = memref.cast %o8 : memref<1xi32> to memref<*xi32>
    func.call @printMemrefI32(%c8) : (memref<*xi32>) -> ()
    return
  }
  func.func @main() {
    %r0 = memref.get_global @r0 : memref<1xi32>
    %r1 = memref.get_global @r1 : memref<1xi32>
    func.call @run(%r0) : (memref<1xi32>) -> ()
    func.call @run(%r1) : (memref<1xi32>) -> ()
    return
  }
}

