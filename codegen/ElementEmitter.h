//===- ElementEmitter.h - pipeline outputs, element by element --*- C++ -*-===//
//
// The fused lowering of a pipeline function: every output element is pulled
// through the chain of steps that defines it, with no intermediate buffer
// (codegen/ElementEmitter.cpp). What each step computes per element is in
// codegen/lowering/ (one file per family of steps, reached through
// ElementLoweringOpInterface); where the elements run, a loop on the host or
// the threads of a GPU kernel, is a KernelTarget (codegen/LowerToLoops.cpp,
// codegen/LowerToGPU.cpp).
//
//   ElementEmitter.h  <-  lowering/*.cpp   (per-step element code)
//          ^
//          +----------  LowerToLoops.cpp, LowerToGPU.cpp  (targets, passes)
//
//===----------------------------------------------------------------------===//

#ifndef THDC_CODEGEN_ELEMENTEMITTER_H
#define THDC_CODEGEN_ELEMENTEMITTER_H

#include "dialect/THDOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"

#include <tuple>

namespace mlir::thd {
class ElementEmitter;
} // namespace mlir::thd

#include "codegen/ElementLowering.h.inc"

namespace mlir::thd {

/// Where the element code of a pipeline runs: the hooks that differ between
/// host loops and a GPU kernel.
class KernelTarget {
public:
  virtual ~KernelTarget() = default;

  /// Creates the kernel function taking `argTypes` (the pipeline's buffers,
  /// then one per result) next to `pipeline`, and returns its body, which
  /// ends with its terminator.
  virtual Block *createKernel(func::FuncOp pipeline,
                              ArrayRef<Type> argTypes) = 0;
  /// Called once the kernel body exists, before any element code
  /// (`emitter.scalarAnchor` is the point before which the scalars go).
  virtual void begin(ElementEmitter &emitter) {}
  /// How many consecutive elements of an output `length` long one step of
  /// the element code computes and stores together, with one vector store
  /// where the output is aligned for it (1: an element at a time). Divides
  /// `length`.
  virtual int64_t vectorWidth(int64_t length) { return 1; }
  /// Opens the region computing elements [0, length) of the outputs of one
  /// length, at the builder's insertion point, and returns the first element
  /// of the step (a multiple of vectorWidth(length)); the builder is left
  /// inside the region.
  virtual Value beginElements(ElementEmitter &emitter, int64_t length) = 0;
  /// Where the loads of one-element kernel inputs (the scalars' arguments)
  /// go: with the scalar code, at emitter.hoistPoint() (the GPU issues them
  /// at the kernel's entry, with the staging copies, ahead of its barrier).
  virtual Operation *argumentLoadPoint(ElementEmitter &emitter);
  /// The array `global` as the steps read it (the GPU stages small metadata
  /// arrays in shared memory).
  virtual Value readableArray(ElementEmitter &emitter, Value global) {
    return global;
  }
  /// The first entry and stride of a loop over entries that `reduceEntries`
  /// spreads over threads, and how its partial results are combined.
  virtual std::pair<Value, Value> entryLoopStart(ElementEmitter &emitter,
                                                 Value first, Value step) {
    return {first, step};
  }
  virtual Value combinePartials(ElementEmitter &emitter, Value partial,
                                gpu::AllReduceOperation combine) {
    return partial;
  }
  /// A one-entry `index` buffer that each thread (on the host: the call)
  /// owns, created at the kernel's entry, for state that the element code
  /// carries from one element to the next.
  virtual Value privateCell(ElementEmitter &emitter) = 0;
  /// Called after every output is stored; fails if the kernel cannot be
  /// finished.
  virtual LogicalResult finish(ElementEmitter &emitter) { return success(); }
  /// The largest output length, and every output's length, for the launch
  /// geometry.
  int64_t longestOutput = 1;
  SmallVector<int64_t> outputLengths;
};

/// Builds the element code of one pipeline function for one target, and
/// offers the steps the arithmetic and the shared pieces (sequence search,
/// padding test, reductions) they are made of.
class ElementEmitter {
public:
  ElementEmitter(func::FuncOp pipeline, KernelTarget &target)
      : pipeline(pipeline), b(pipeline.getContext()), loc(pipeline.getLoc()),
        target(target) {}

  /// Replaces the pipeline by its kernel. On failure (a step that cannot be
  /// lowered, with a diagnostic) the pipeline is left as it was.
  LogicalResult run();

  //===--------------------------------------------------------------------===//
  // Values of the pipeline, element by element (cached)
  //===--------------------------------------------------------------------===//

  /// A tensor<1xi32> value as an i32, computed once before every loop.
  Value scalar(Value tensor);
  /// Entry `i` (index) of an offset or length array, as i32. `inBounds`:
  /// the caller knows `i` is inside the array, so no clamp is emitted.
  Value entry(Value array, Value i, bool inBounds = false);
  /// Entry `i` of a cumulative-offset array: entry 0 is 0 by definition.
  Value cuAt(Value array, Value i, bool inBounds = false);
  /// Row `r` (index) of a per-token value.
  Value row(Value tensor, Value r);
  /// The number of meaningful rows of a per-token value (index).
  Value rowCount(Value tensor);
  /// Records `value` as the scalar of `result`, for steps that compute
  /// several scalars together.
  void defineScalar(Value result, Value value) { scalars[result] = value; }

  //===--------------------------------------------------------------------===//
  // Shared pieces of the steps
  //===--------------------------------------------------------------------===//

  /// The meaningful sequence count of `array` read with `numSeqs` (or all of
  /// its entries when null), clamped into the array (index).
  Value count(Value numSeqs, Value array);
  /// Largest s in [0, n-1] with cuPadded[s] / divisor <= pos (0 when
  /// n == 0): the sequence that covers `pos`; positions past the end join
  /// the last one. The offsets must not decrease (thd.validate checks it);
  /// on offsets that do, which sequence is found is unspecified.
  ///
  /// Searches with the same (cuPadded, n, divisor) share a cursor: the
  /// sequence found for the thread's previous element. When `pos` lies in
  /// it or in the next one, no search runs; else a binary search does.
  /// A thread's elements are consecutive rows (or a warp's lanes apart),
  /// so the cursor answers almost every row at the cost of three loads.
  Value findSequence(Value cuPadded, Value n, Value pos, int64_t divisor);
  /// Records that `pos` lies in sequence `s`, so a later search is answered
  /// without searching.
  void knowSequence(Value cuPadded, Value n, Value pos, int64_t divisor,
                    Value s) {
    sequences[std::make_tuple(resolve(cuPadded), n, pos, divisor)] = s;
  }
  /// Whether row `r` of the buffer described by (cu, cuPadded, n) is
  /// padding (i1).
  Value paddingAt(Value cu, Value cuPadded, Value n, Value r);
  /// A loop over entries [1, end) with accumulator `init`; `body(i, acc)`
  /// returns the new one. Spread over a block's threads on the GPU, whose
  /// partial results `combine` merges.
  Value reduceEntries(Value end, Value init, gpu::AllReduceOperation combine,
                      function_ref<Value(Value, Value)> body);
  /// The constant `fill` (or zero) of `elementType`.
  Value fillValue(TypedAttr fill, Type elementType);
  /// A per-element cache that steps key as they need (cleared with the
  /// other per-element caches for each group of outputs).
  DenseMap<std::tuple<Value, Value, Value, int64_t, Value>, Value> elementCache;
  /// A per-kernel store for steps that compute several values at once.
  DenseMap<Operation *, SmallVector<Value, 4>> stepValues;
  /// Records a failure; the diagnostic has been emitted.
  void fail() { status = failure(); }

  //===--------------------------------------------------------------------===//
  // Arithmetic. Positions are `index`, offsets `i32`.
  //===--------------------------------------------------------------------===//

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value i32(int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
  }
  Value toIndex(Value v) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  }
  Value toI32(Value v) {
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
  }
  Value minIdx(Value a, Value c) {
    return arith::MinSIOp::create(b, loc, a, c);
  }
  Value maxIdx(Value a, Value c) {
    return arith::MaxSIOp::create(b, loc, a, c);
  }
  Value clamp(Value v, int64_t lo, int64_t hi) {
    return minIdx(maxIdx(v, idx(lo)), idx(hi));
  }
  Value cmp(arith::CmpIPredicate p, Value a, Value c) {
    return arith::CmpIOp::create(b, loc, p, a, c);
  }
  Value select(Value c, Value t, Value f) {
    return arith::SelectOp::create(b, loc, c, t, f);
  }
  Value add(Value a, Value c) { return arith::AddIOp::create(b, loc, a, c); }
  Value sub(Value a, Value c) { return arith::SubIOp::create(b, loc, a, c); }
  Value mul(Value a, Value c) { return arith::MulIOp::create(b, loc, a, c); }
  Value divS(Value a, Value c) { return arith::DivSIOp::create(b, loc, a, c); }
  Value divU(Value a, Value c) { return arith::DivUIOp::create(b, loc, a, c); }
  Value remS(Value a, Value c) { return arith::RemSIOp::create(b, loc, a, c); }
  Value andI(Value a, Value c) { return arith::AndIOp::create(b, loc, a, c); }
  Value orI(Value a, Value c) { return arith::OrIOp::create(b, loc, a, c); }

  /// Buffers are naturally aligned (the runtime's contract): telling LLVM
  /// keeps 8-byte elements in one access instead of two 4-byte ones.
  static llvm::MaybeAlign alignOf(Value memref);
  /// A load from a kernel buffer, its index clamped into the buffer unless
  /// `inBounds`.
  Value load(Value memref, Value index, bool inBounds = false);

  /// Stores `values` into `out` at `elements` (consecutive): one vector
  /// store when there are several and `out` is aligned for it at run time,
  /// else one store each.
  void storeElements(ArrayRef<Value> values, Value out,
                     ArrayRef<Value> elements);
  /// The static length of a ranked 1-D value.
  static int64_t staticLength(Value value) {
    return cast<ShapedType>(value.getType()).getDimSize(0);
  }
  /// A bound integer attribute.
  static int64_t intAttr(Attribute attr) {
    return cast<IntegerAttr>(attr).getInt();
  }

  func::FuncOp pipeline;
  OpBuilder b;
  Location loc;
  KernelTarget &target;
  /// The kernel being built and the point before which scalars go.
  Operation *kernel = nullptr;
  Operation *scalarAnchor = nullptr;
  /// The op before which a value computed once for the whole kernel (a
  /// scalar, a clamped count, a cursor's initial store) goes when it is
  /// first asked for at the builder's insertion point: scalarAnchor, unless
  /// that point is in scalar code before it, where the value must come
  /// earlier. See the definition.
  Operation *hoistPoint();
  /// The pipeline's arguments as the kernel's buffers.
  IRMapping memrefOf;

  /// The value a fused kernel yields for one of its results; any other
  /// value itself.
  static Value resolve(Value value);

private:
  /// cuPadded[s] / divisor as an index: where sequence s starts.
  Value sequenceStart(Value cuPadded, Value s, int64_t divisor,
                      bool inBounds = false);
  /// The binary search of findSequence over entries [1, n].
  Value searchSequence(Value cuPadded, Value n, Value pos, int64_t divisor);
  /// The step's element lowering, or null after a diagnostic.
  ElementLoweringOpInterface loweringOf(Value value, StringRef role);

  DenseMap<Value, Value> scalars;
  DenseMap<std::pair<Value, Value>, Value> rows;
  DenseMap<std::tuple<Value, Value, Value, int64_t>, Value> sequences;
  DenseMap<std::pair<Value, int64_t>, Value> counts;
  DenseMap<std::tuple<Value, Value, int64_t>, Value> cursors;
  /// Whether an output buffer is aligned to a byte count (i1), computed
  /// once before the element code.
  DenseMap<std::pair<Value, int64_t>, Value> alignedOutputs;
  LogicalResult status = success();
};

/// Lowers every function of `module` that holds thd steps for `target`,
/// after checking that every parameter is bound.
LogicalResult
lowerPipelines(ModuleOp module,
               function_ref<std::unique_ptr<KernelTarget>()> makeTarget);

/// Attaches the element lowering of every step (codegen/lowering/).
void registerElementLoweringModels(DialectRegistry &registry);

} // namespace mlir::thd

#endif // THDC_CODEGEN_ELEMENTEMITTER_H
