// A fused kernel ending in another dialect's terminator: FusedOp::verify
// cast it to thd.yield unchecked (an abort; undefined behaviour in release).
func.func @f(%t: tensor<8xi64>, %m: tensor<8xi1>) -> tensor<8xi64> {
  %0 = thd.fused -> tensor<8xi64> {
    %s = thd.sanitize %t, %m : tensor<8xi64>, tensor<8xi1>
    func.return %s : tensor<8xi64>
  }
  return %0 : tensor<8xi64>
}
