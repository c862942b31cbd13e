//===- Offsets.cpp - steps that compute offset and length arrays ----------===//
//
// Entry `i` of an array computed on the device: aligned lengths (S1), the
// chosen samples' lengths (S3/S4), their cumulative offsets (S4) and a cu
// array padded to a static number of entries (S10). Sections are those of
// docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#include "codegen/lowering/StepLowering.h"

using namespace mlir;
using namespace mlir::thd;

Value mlir::thd::lowerElement(AlignLengthsOp op, ElementEmitter &e, OpResult,
                              Value i) {
  int64_t g = op.getGranularity();
  // ceil(v / G) * G, rounding toward +inf for negative lengths too (a
  // truncating (v + G - 1) / G would round -5 up to 0 instead of -4).
  Value v = e.entry(op.getValidLens(), i);
  Value units = arith::CeilDivSIOp::create(e.b, e.loc, v, e.i32(g));
  return e.mul(units, e.i32(g));
}
Value mlir::thd::lowerRowCount(AlignLengthsOp op, ElementEmitter &e, OpResult) {
  return noRowCount(op, e);
}

Value mlir::thd::lowerElement(GatherOp op, ElementEmitter &e, OpResult,
                              Value i) {
  int64_t ids = e.staticLength(op.getIds());
  Value n = op.getNumSeqs()
                ? e.clamp(e.toIndex(e.scalar(op.getNumSeqs())), 0, ids)
                : e.idx(ids);
  Value value = e.entry(op.getValues(), e.toIndex(e.entry(op.getIds(), i)));
  return e.select(e.cmp(arith::CmpIPredicate::slt, i, n), value, e.i32(0));
}
Value mlir::thd::lowerRowCount(GatherOp op, ElementEmitter &e, OpResult) {
  return noRowCount(op, e);
}

Value mlir::thd::lowerElement(CuSeqlensOp op, ElementEmitter &e, OpResult,
                              Value i) {
  Value n = e.count(op.getNumSeqs(), op.getOffsets());
  Value upto = e.minIdx(i, n);
  OpBuilder &b = e.b;
  auto loop = scf::ForOp::create(b, e.loc, e.idx(0), upto, e.idx(1),
                                 ValueRange{e.i32(0)});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value sum = e.add(loop.getRegionIterArgs()[0],
                    e.entry(op.getLengths(), loop.getInductionVar()));
  scf::YieldOp::create(b, e.loc, ValueRange{sum});
  return loop.getResult(0);
}
Value mlir::thd::lowerRowCount(CuSeqlensOp op, ElementEmitter &e, OpResult) {
  return noRowCount(op, e);
}

Value mlir::thd::lowerElement(PadCuSeqlensOp op, ElementEmitter &e, OpResult,
                              Value i) {
  Value n = e.count(op.getNumSeqs(), op.getOffsets());
  return e.cuAt(op.getOffsets(), e.minIdx(i, n));
}
Value mlir::thd::lowerRowCount(PadCuSeqlensOp op, ElementEmitter &e, OpResult) {
  return noRowCount(op, e);
}
