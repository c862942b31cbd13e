//===- LowerToLoops.cpp - thd pipelines to fused loops over memrefs -------===//
//
// Every result of a pipeline is computed element by element, pulling each
// element through the chain of thd ops that defines it: the row of a tail-
// padded CP slice of a sanitised token is one load, one binary search and a
// few selects, with no intermediate buffer. This is the fusion that makes a
// microbatch one kernel; the same loops run on the CPU and, mapped onto GPU
// threads, on the device.
//
//===----------------------------------------------------------------------===//

#include "codegen/CodegenPasses.h"
#include "reference/StatusBits.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::thd {
#define GEN_PASS_DEF_THDLOWERTOLOOPS
#define GEN_PASS_DEF_THDLOWERTOGPU
#include "codegen/CodegenPasses.h.inc"
} // namespace mlir::thd

using namespace mlir;
using namespace mlir::thd;

namespace {
int64_t staticLength(Value value) {
  return cast<RankedTensorType>(value.getType()).getDimSize(0);
}
int64_t intAttr(Attribute attr) { return cast<IntegerAttr>(attr).getInt(); }

/// Where the element-wise code runs: loops on the host or GPU threads.
enum class Target { Loops, GPU };

/// Emits the element-wise computation of one pipeline function.
class PipelineLowering {
public:
  PipelineLowering(func::FuncOp pipeline, Target target, int64_t blockSize = 1,
                   int64_t maxBlocks = 0, int64_t rowsPerThread = 1)
      : pipeline(pipeline), b(pipeline.getContext()), loc(pipeline.getLoc()),
        target(target), blockSize(blockSize), maxBlocks(maxBlocks),
        rowsPerThread(rowsPerThread) {}

  LogicalResult run();

private:
  // Constants and conversions. Positions are `index`, offsets `i32`.
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
  Value remS(Value a, Value c) { return arith::RemSIOp::create(b, loc, a, c); }
  Value andI(Value a, Value c) { return arith::AndIOp::create(b, loc, a, c); }
  Value orI(Value a, Value c) { return arith::OrIOp::create(b, loc, a, c); }

  /// Buffers are naturally aligned (the runtime's contract): telling LLVM
  /// keeps 8-byte elements in one access instead of two 4-byte ones.
  static llvm::MaybeAlign alignOf(Value memref) {
    Type element = cast<MemRefType>(memref.getType()).getElementType();
    return llvm::Align(
        std::max<unsigned>(1, element.getIntOrFloatBitWidth() / 8));
  }

  /// A load from a kernel buffer, its index clamped into the buffer unless
  /// `inBounds`: the caller knows the index is inside (search probes and
  /// sequence indices below the clamped count), so the clamp is skipped on
  /// the hot path.
  Value load(Value memref, Value index, bool inBounds = false) {
    int64_t size = cast<MemRefType>(memref.getType()).getDimSize(0);
    Value at = inBounds ? index : clamp(index, 0, size - 1);
    return memref::LoadOp::create(b, loc, memref, ValueRange{at},
                                  /*nontemporal=*/false, alignOf(memref));
  }

  Value fillValue(TypedAttr fill, Type elementType);
  Value scalar(Value tensor);
  Value entry(Value array, Value i, bool inBounds = false);
  Value cuAt(Value array, Value i, bool inBounds = false);
  Value count(Value numSeqs, Value array);
  Value findSequence(Value cuPadded, Value n, Value pos, int64_t divisor);
  Value realLength(Value tensor);
  Value sliceSource(CpSliceOp op, Value r);
  Value row(Value tensor, Value r);
  Value paddingAt(Value cu, Value cuPadded, Value n, Value r);
  void validate(ValidateOp op);
  /// A loop over entries [1, end) whose iterations are spread over the
  /// threads of a block on the GPU (then combined with `combine`), or all
  /// run by one thread on the host. `body(i, acc)` returns the new acc.
  Value reduceEntries(Value end, Value init, gpu::AllReduceOperation combine,
                      function_ref<Value(Value, Value)> body);
  void tailMetadata(PadTailMetadataOp op);

  /// Scalars of one pad_tail_metadata op, computed before the loops.
  struct TailScalars {
    Value n, outCount;        // index
    Value globalTarget, tail; // i32: gT and d = gT - gA (>= 0)
  };
  DenseMap<Operation *, TailScalars> tails;

  /// The value a fused kernel yields for one of its results.
  static Value resolve(Value value) {
    if (auto fused = value.getDefiningOp<FusedOp>()) {
      auto yield = cast<YieldOp>(fused.getBody().front().getTerminator());
      return yield.getValues()[cast<OpResult>(value).getResultNumber()];
    }
    return value;
  }
  Block *createKernel(ArrayRef<Type> argTypes);

  func::FuncOp pipeline;
  Operation *kernel = nullptr;
  OpBuilder b;
  Location loc;
  Target target;
  int64_t blockSize;
  int64_t maxBlocks;
  int64_t rowsPerThread;
  IRMapping memrefOf;
  Operation *scalarAnchor = nullptr;
  DenseMap<Value, Value> scalars;
  DenseMap<std::pair<Value, Value>, Value> rows;
  /// Per element region: the sequence covering a position, and the source
  /// row of a CP slice, so that outputs sharing them search once.
  DenseMap<std::tuple<Value, Value, Value, int64_t>, Value> sequences;
  DenseMap<std::tuple<Value, Value, Value, int64_t, Value>, Value> sources;
  /// Sequence counts, computed with the scalars.
  DenseMap<std::pair<Value, int64_t>, Value> counts;
  /// On the GPU, small metadata arrays copied into shared memory once per
  /// block: every search and check reads them there, where the streaming
  /// token loads cannot evict them from the cache.
  DenseMap<Value, Value> staged;
  Value stagedArray(BlockArgument argument);
  LogicalResult status = success();
};

Value PipelineLowering::fillValue(TypedAttr fill, Type elementType) {
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    double value = 0;
    if (auto f = dyn_cast_or_null<FloatAttr>(fill))
      value = f.getValueAsDouble();
    else if (auto i = dyn_cast_or_null<IntegerAttr>(fill))
      value = double(i.getInt());
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, value));
  }
  int64_t value = 0;
  if (auto boolean = dyn_cast_or_null<BoolAttr>(fill))
    value = boolean.getValue();
  else if (auto i = dyn_cast_or_null<IntegerAttr>(fill))
    value = i.getInt();
  return arith::ConstantIntOp::create(b, loc, elementType, value);
}

/// A tensor<1xi32> value as an i32, computed once before every loop.
Value PipelineLowering::scalar(Value tensor) {
  tensor = resolve(tensor);
  if (Value cached = scalars.lookup(tensor))
    return cached;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(scalarAnchor);
  if (auto arg = dyn_cast<BlockArgument>(tensor)) {
    scalars[tensor] = load(memrefOf.lookup(arg), idx(0));
    return scalars[tensor];
  }
  Operation *def = tensor.getDefiningOp();
  TypeSwitch<Operation *>(def)
      .Case([&](ValidateOp op) { validate(op); })
      .Case([&](PadTailMetadataOp op) { tailMetadata(op); })
      .Case([&](MaxSeqlenOp op) {
        Value n = count(op.getNumSeqs(), op.getOffsets());
        scalars[tensor] = reduceEntries(
            add(n, idx(1)), i32(0), gpu::AllReduceOperation::MAXSI,
            [&](Value i, Value acc) -> Value {
              Value len = sub(cuAt(op.getOffsets(), i),
                              cuAt(op.getOffsets(), sub(i, idx(1))));
              return arith::MaxSIOp::create(b, loc, acc, len);
            });
      })
      .Default([&](Operation *op) {
        status = op->emitOpError("cannot be lowered as a scalar");
        scalars[tensor] = i32(0);
      });
  return scalars.lookup(tensor);
}

/// The meaningful sequence count of an array read with `numSeqs` (or all of
/// its entries), clamped into the array.
Value PipelineLowering::count(Value numSeqs, Value array) {
  int64_t last = staticLength(array) - 1;
  if (!numSeqs)
    return idx(last);
  auto key = std::make_pair(numSeqs, last);
  if (Value cached = counts.lookup(key))
    return cached;
  Value n = scalar(numSeqs);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(scalarAnchor);
  return counts[key] = clamp(toIndex(n), 0, last);
}

/// Entry 0 of a cumulative-offset array is 0 by definition (spec invariant).
Value PipelineLowering::cuAt(Value array, Value i, bool inBounds) {
  return select(cmp(arith::CmpIPredicate::eq, i, idx(0)), i32(0),
                entry(array, i, inBounds));
}

Value PipelineLowering::stagedArray(BlockArgument argument) {
  Value global = memrefOf.lookup(argument);
  auto type = cast<MemRefType>(global.getType());
  constexpr int64_t kMaxStagedBytes = 16 * 1024;
  if (target != Target::GPU ||
      type.getNumElements() * type.getElementTypeBitWidth() / 8 >
          kMaxStagedBytes)
    return global;
  if (Value copy = staged.lookup(argument))
    return copy;
  auto shared = MemRefType::get(
      type.getShape(), type.getElementType(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
  Value copy =
      cast<gpu::GPUFuncOp>(kernel).addWorkgroupAttribution(shared, loc);
  // All threads of the block copy, then wait: uniform code before the
  // anchor, ahead of every use.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(scalarAnchor);
  Value first = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  auto loop = scf::ForOp::create(b, loc, first, idx(type.getNumElements()),
                                 idx(blockSize));
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value i = loop.getInductionVar();
  memref::StoreOp::create(b, loc,
                          memref::LoadOp::create(b, loc, global, ValueRange{i},
                                                 false, alignOf(global)),
                          copy, ValueRange{i}, false, alignOf(copy));
  b.setInsertionPointAfter(loop);
  gpu::BarrierOp::create(b, loc);
  return staged[argument] = copy;
}

Value PipelineLowering::entry(Value array, Value i, bool inBounds) {
  array = resolve(array);
  if (auto arg = dyn_cast<BlockArgument>(array))
    return load(stagedArray(arg), i, inBounds);
  Operation *def = array.getDefiningOp();
  return TypeSwitch<Operation *, Value>(def)
      .Case([&](AlignLengthsOp op) {
        int64_t cp = intAttr(op.getCp()), tp = intAttr(op.getTp());
        int64_t g = (cp > 1 ? 2 * cp : 1) * (op.getSequenceParallel() ? tp : 1);
        Value v = entry(op.getValidLens(), i);
        return mul(divS(add(v, i32(g - 1)), i32(g)), i32(g));
      })
      .Case([&](GatherOp op) {
        int64_t ids = staticLength(op.getIds());
        Value n = op.getNumSeqs()
                      ? clamp(toIndex(scalar(op.getNumSeqs())), 0, ids)
                      : idx(ids);
        Value value = entry(op.getValues(), toIndex(entry(op.getIds(), i)));
        return select(cmp(arith::CmpIPredicate::slt, i, n), value, i32(0));
      })
      .Case([&](CuSeqlensOp op) {
        Value n = count(op.getNumSeqs(), op.getOffsets());
        Value upto = minIdx(i, n);
        auto loop = scf::ForOp::create(b, loc, idx(0), upto, idx(1),
                                       ValueRange{i32(0)});
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(loop.getBody());
        Value sum = add(loop.getRegionIterArgs()[0],
                        entry(op.getLengths(), loop.getInductionVar()));
        scf::YieldOp::create(b, loc, ValueRange{sum});
        return loop.getResult(0);
      })
      .Case([&](PadCuSeqlensOp op) {
        Value n = count(op.getNumSeqs(), op.getOffsets());
        return cuAt(op.getOffsets(), minIdx(i, n));
      })
      .Case([&](PadTailMetadataOp op) {
        // Entries 0..n are the input's, entry n+1 the dummy (if any), then
        // repeats of the last one.
        scalar(op.getNumSeqsOut());
        const TailScalars &t = tails[op];
        Value j = minIdx(i, t.outCount);
        bool padded = array == op.getCuSeqlensPaddedOut();
        Value source = padded ? op.getCuSeqlensPadded() : op.getCuSeqlens();
        Value original = cuAt(source, minIdx(j, t.n));
        Value isNew = cmp(arith::CmpIPredicate::ugt, j, t.n);
        switch (op.getPolicy()) {
        case TailPolicy::append_dummy_sequence: {
          Value dummyEnd = padded ? t.globalTarget
                                  : add(cuAt(op.getCuSeqlens(), t.n), t.tail);
          return select(isNew, dummyEnd, original);
        }
        case TailPolicy::extend_last: {
          if (!padded)
            return original;
          Value isLast = andI(cmp(arith::CmpIPredicate::eq, j, t.n),
                              cmp(arith::CmpIPredicate::sgt, t.n, idx(0)));
          return select(isLast, t.globalTarget, original);
        }
        case TailPolicy::none:
          return original;
        }
        llvm_unreachable("unknown tail policy");
      })
      .Default([&](Operation *op) {
        status = op->emitOpError("cannot be lowered as an offset array");
        return i32(0);
      });
}
} // namespace

namespace {
/// Largest s in [0, n-1] with cuPadded[s] / divisor <= pos (0 when n == 0):
/// the sequence that covers `pos`; positions past the end join the last one.
Value PipelineLowering::findSequence(Value cuPadded, Value n, Value pos,
                                     int64_t divisor) {
  cuPadded = resolve(cuPadded);
  auto key = std::make_tuple(cuPadded, n, pos, divisor);
  if (Value cached = sequences.lookup(key))
    return cached;
  Type indexType = b.getIndexType();
  auto loop = scf::WhileOp::create(b, loc, TypeRange{indexType, indexType},
                                   ValueRange{idx(1), add(n, idx(1))});
  {
    OpBuilder::InsertionGuard guard(b);
    Block *before = b.createBlock(&loop.getBefore(), {}, {indexType, indexType},
                                  {loc, loc});
    Value lo = before->getArgument(0), hi = before->getArgument(1);
    scf::ConditionOp::create(b, loc, cmp(arith::CmpIPredicate::slt, lo, hi),
                             ValueRange{lo, hi});
    Block *after =
        b.createBlock(&loop.getAfter(), {}, {indexType, indexType}, {loc, loc});
    lo = after->getArgument(0);
    hi = after->getArgument(1);
    Value mid = arith::ShRUIOp::create(b, loc, add(lo, hi), idx(1));
    Value start =
        toIndex(divS(entry(cuPadded, mid, /*inBounds=*/true), i32(divisor)));
    Value goRight = cmp(arith::CmpIPredicate::sle, start, pos);
    scf::YieldOp::create(b, loc,
                         ValueRange{select(goRight, add(mid, idx(1)), lo),
                                    select(goRight, hi, mid)});
  }
  Value s = sub(loop.getResult(0), idx(1));
  return sequences[key] = maxIdx(minIdx(s, sub(n, idx(1))), idx(0));
}

/// Whether row `r` of the buffer described by (cu, cuPadded, n) is padding.
Value PipelineLowering::paddingAt(Value cu, Value cuPadded, Value n, Value r) {
  // s <= n - 1 and n <= the last entry; s + 1 is inside unless the arrays
  // hold a single entry.
  Value s = findSequence(cuPadded, n, r, 1);
  bool nextInBounds = staticLength(cu) >= 2 && staticLength(cuPadded) >= 2;
  Value start = toIndex(cuAt(cuPadded, s, /*inBounds=*/true));
  Value next = add(s, idx(1));
  Value valid = maxIdx(toIndex(sub(cuAt(cu, next, nextInBounds),
                                   cuAt(cu, s, /*inBounds=*/true))),
                       idx(0));
  Value total = toIndex(cuAt(cuPadded, n, /*inBounds=*/true));
  Value isPad = cmp(arith::CmpIPredicate::sge, r, add(start, valid));
  isPad = orI(isPad, cmp(arith::CmpIPredicate::sge, r, total));
  return orI(isPad, cmp(arith::CmpIPredicate::eq, n, idx(0)));
}

/// The number of meaningful rows of a per-token value (a device value).
Value PipelineLowering::realLength(Value tensor) {
  tensor = resolve(tensor);
  int64_t capacity = staticLength(tensor);
  if (isa<BlockArgument>(tensor))
    return idx(capacity);
  auto totalOf = [&](Value cuPadded, Value numSeqs) {
    Value n = count(numSeqs, cuPadded);
    return minIdx(toIndex(cuAt(cuPadded, n)), idx(capacity));
  };
  Operation *def = tensor.getDefiningOp();
  return TypeSwitch<Operation *, Value>(def)
      .Case([&](PaddingMaskOp op) {
        return totalOf(op.getCuSeqlensPadded(), op.getNumSeqs());
      })
      .Case([&](PositionIdsOp op) {
        return totalOf(op.getCuSeqlensPadded(), op.getNumSeqs());
      })
      .Case([&](PackOp op) {
        return totalOf(op.getCuSeqlensPadded(), op.getNumSeqs());
      })
      .Case([&](SanitizeOp op) {
        return minIdx(realLength(op.getInput()), realLength(op.getMask()));
      })
      .Case([&](CpSliceOp op) {
        int64_t cp = intAttr(op.getCp());
        if (cp == 1)
          return realLength(op.getInput());
        Value n = count(op.getNumSeqs(), op.getCuSeqlensPadded());
        Value total = toIndex(cuAt(op.getCuSeqlensPadded(), n));
        return minIdx(
            arith::DivUIOp::create(b, loc, maxIdx(total, idx(0)), idx(cp)),
            idx(capacity));
      })
      .Case([&](PadTailOp op) -> Value {
        if (op.getTargetAttr())
          return idx(capacity);
        int64_t a = intAttr(op.getAlignmentAttr());
        Value rows = realLength(op.getInput());
        Value rounded =
            mul(arith::CeilDivUIOp::create(b, loc, rows, idx(a)), idx(a));
        return minIdx(rounded, idx(capacity));
      })
      .Default([&](Operation *) { return idx(capacity); });
}

/// The row of a CP slice's input that its row `r` holds. Slices of the same
/// buffer layout (offsets, rank, count, cp) share it.
Value PipelineLowering::sliceSource(CpSliceOp op, Value r) {
  int64_t cp = intAttr(op.getCp());
  Value cup = resolve(op.getCuSeqlensPadded());
  Value n = count(op.getNumSeqs(), cup);
  Value rankTensor = resolve(op.getCpRank());
  int64_t layout = op.getMode() == CpMode::contiguous ? -cp : cp;
  auto key = std::make_tuple(cup, rankTensor, n, layout, r);
  if (Value cached = sources.lookup(key))
    return cached;
  Value rank = clamp(toIndex(scalar(rankTensor)), 0, cp - 1);
  Value source;
  if (op.getMode() == CpMode::contiguous) {
    Value total = maxIdx(toIndex(cuAt(cup, n)), idx(0));
    Value share = arith::DivUIOp::create(b, loc, total, idx(cp));
    source = add(mul(rank, share), r);
  } else {
    // TE dual-chunk: chunk r and chunk 2cp-1-r of each sequence.
    Value s = findSequence(cup, n, r, cp);
    Value start = toIndex(cuAt(cup, s, /*inBounds=*/true));
    Value localStart = divS(start, idx(cp));
    Value localLen =
        sub(divS(toIndex(cuAt(cup, add(s, idx(1)),
                              /*inBounds=*/staticLength(cup) >= 2)),
                 idx(cp)),
            localStart);
    Value half =
        arith::DivUIOp::create(b, loc, maxIdx(localLen, idx(0)), idx(2));
    // TE's formula: k + start + half * (r, or 2cp-2-r in the second half);
    // rows past the last sequence continue it, as TE's do.
    Value k = sub(r, localStart);
    Value firstChunk = cmp(arith::CmpIPredicate::slt, k, half);
    Value chunk = select(firstChunk, rank, sub(idx(2 * cp - 2), rank));
    source = add(add(start, k), mul(chunk, half));
    // The source row lies in the same sequence s: a later search for it
    // (the padding mask's) is answered without searching.
    sequences[std::make_tuple(cup, n, source, int64_t(1))] = s;
  }
  return sources[key] = source;
}

/// Element `r` of a per-token value, computed through its defining chain.
Value PipelineLowering::row(Value tensor, Value r) {
  tensor = resolve(tensor);
  auto key = std::make_pair(tensor, r);
  if (Value cached = rows.lookup(key))
    return cached;
  Value result;
  if (auto arg = dyn_cast<BlockArgument>(tensor)) {
    result = load(memrefOf.lookup(arg), r);
  } else {
    Operation *def = tensor.getDefiningOp();
    result =
        TypeSwitch<Operation *, Value>(def)
            .Case([&](PaddingMaskOp op) {
              Value n = count(op.getNumSeqs(), op.getCuSeqlensPadded());
              return paddingAt(op.getCuSeqlens(), op.getCuSeqlensPadded(), n,
                               r);
            })
            .Case([&](SanitizeOp op) {
              Value inMask =
                  cmp(arith::CmpIPredicate::slt, r, realLength(op.getMask()));
              Value isPad = select(
                  inMask, row(op.getMask(), r),
                  arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1));
              Type element = getElementTypeOrSelf(op.getInput().getType());
              return select(isPad, fillValue(op.getFillAttr(), element),
                            row(op.getInput(), r));
            })
            .Case([&](CpSliceOp op) {
              int64_t cp = intAttr(op.getCp());
              if (cp == 1)
                return row(op.getInput(), r);
              return row(op.getInput(), sliceSource(op, r));
            })
            .Case([&](PadTailOp op) {
              Value inside =
                  cmp(arith::CmpIPredicate::slt, r, realLength(op.getInput()));
              Type element = getElementTypeOrSelf(op.getInput().getType());
              return select(inside, row(op.getInput(), r),
                            fillValue(op.getFillAttr(), element));
            })
            .Case([&](PositionIdsOp op) {
              Value cup = op.getCuSeqlensPadded();
              Value n = count(op.getNumSeqs(), cup);
              Value s = findSequence(cup, n, r, 1);
              Value k = sub(r, toIndex(cuAt(cup, s)));
              Type element =
                  getElementTypeOrSelf(op.getPositionIds().getType());
              Value position = arith::IndexCastOp::create(b, loc, element, k);
              Value isPad = paddingAt(op.getCuSeqlens(), cup, n, r);
              return select(isPad, fillValue({}, element), position);
            })
            .Case([&](PackOp op) {
              Value cup = op.getCuSeqlensPadded();
              Value n = count(op.getNumSeqs(), cup);
              Value s = findSequence(cup, n, r, 1);
              Value k = sub(r, toIndex(cuAt(cup, s)));
              Value id = toIndex(entry(op.getSampleIds(), s));
              Value offset = toIndex(entry(op.getSampleOffsets(), id));
              Value value = row(op.getPool(), add(offset, k));
              Value isPad = paddingAt(op.getCuSeqlens(), cup, n, r);
              Type element = getElementTypeOrSelf(op.getPool().getType());
              return select(isPad, fillValue(op.getPad(), element), value);
            })
            .Case([&](SeqIdxOp op) {
              // The sequence covering the row; rows past the last offset
              // belong to one more sequence (the tail), index n.
              Value cup = op.getCuSeqlensPadded();
              Value n = count(op.getNumSeqs(), cup);
              Value s = findSequence(cup, n, r, 1);
              Value total = toIndex(cuAt(cup, n));
              Value index =
                  select(cmp(arith::CmpIPredicate::sge, r, total), n, s);
              return toI32(index);
            })
            .Case([&](RopePositionsOp op) {
              // Spec S8: the position of a CP-local row in its global
              // sequence (chunk r, or chunk 2cp-1-r in the second half).
              int64_t cp = intAttr(op.getCp());
              Value cup = op.getCuSeqlensPadded();
              Value n = count(op.getNumSeqs(), cup);
              Value s = findSequence(cup, n, r, cp);
              Value localStart = divS(toIndex(cuAt(cup, s)), idx(cp));
              Value localLen =
                  sub(divS(toIndex(cuAt(cup, add(s, idx(1)))), idx(cp)),
                      localStart);
              Value k = sub(r, localStart);
              if (cp == 1)
                return toI32(k);
              Value rank = clamp(toIndex(scalar(op.getCpRank())), 0, cp - 1);
              Value half = divS(localLen, idx(2));
              Value first = add(mul(rank, half), k);
              Value second =
                  add(sub(mul(localLen, idx(cp)), mul(add(rank, idx(1)), half)),
                      sub(k, half));
              return toI32(select(cmp(arith::CmpIPredicate::slt, k, half),
                                  first, second));
            })
            .Default([&](Operation *op) {
              status = op->emitOpError("cannot be lowered per row");
              return fillValue({}, getElementTypeOrSelf(tensor.getType()));
            });
  }
  rows[key] = result;
  return result;
}

Value PipelineLowering::reduceEntries(Value end, Value init,
                                      gpu::AllReduceOperation combine,
                                      function_ref<Value(Value, Value)> body) {
  Value first = idx(1), step = idx(1);
  if (target == Target::GPU) {
    first = add(first, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
    step = idx(blockSize);
  }
  auto loop = scf::ForOp::create(b, loc, first, end, step, ValueRange{init});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    scf::YieldOp::create(
        b, loc,
        ValueRange{body(loop.getInductionVar(), loop.getRegionIterArgs()[0])});
  }
  Value result = loop.getResult(0);
  if (target == Target::GPU)
    result = gpu::AllReduceOp::create(
        b, loc, result.getType(), result,
        gpu::AllReduceOperationAttr::get(b.getContext(), combine),
        b.getUnitAttr());
  return result;
}

void PipelineLowering::validate(ValidateOp op) {
  Value cu = op.getCuSeqlens(), cup = op.getCuSeqlensPadded();
  int64_t last = staticLength(cu) - 1;
  int64_t cp = intAttr(op.getCp());
  int64_t multiple =
      cp == 1 ? 1 : (op.getMode() == CpMode::zigzag ? 2 * cp : cp);
  Value raw = op.getNumSeqs() ? scalar(op.getNumSeqs()) : i32(last);
  Value bits = select(
      orI(cmp(arith::CmpIPredicate::slt, raw, i32(0)),
          cmp(arith::CmpIPredicate::sgt, raw, i32(intAttr(op.getMaxSeqs())))),
      i32(thdc::reference::StatusNumSeqsOutOfRange), i32(0));
  Value n = clamp(toIndex(raw), 0, last);
  Value rank = scalar(op.getCpRank());
  Value badRank = orI(cmp(arith::CmpIPredicate::slt, rank, i32(0)),
                      cmp(arith::CmpIPredicate::sge, rank, i32(cp)));
  bits = orI(bits, select(badRank, i32(thdc::reference::StatusCpRankOutOfRange), i32(0)));
  Value badStart =
      orI(cmp(arith::CmpIPredicate::ne, entry(cu, idx(0)), i32(0)),
          cmp(arith::CmpIPredicate::ne, entry(cup, idx(0)), i32(0)));
  bits = orI(bits, select(badStart, i32(thdc::reference::StatusNotMonotonic), i32(0)));
  bits = orI(bits, select(cmp(arith::CmpIPredicate::sgt, entry(cup, n),
                              i32(intAttr(op.getMaxTokens()))),
                          i32(thdc::reference::StatusTotalExceedsCapacity), i32(0)));
  if (multiple > 1) {
    Value indivisible = cmp(arith::CmpIPredicate::ne,
                            remS(entry(cup, idx(0)), i32(multiple)), i32(0));
    bits = orI(bits, select(indivisible, i32(thdc::reference::StatusNotDivisibleBy2Cp), i32(0)));
  }
  Value statusBits = reduceEntries(
      add(n, idx(1)), bits, gpu::AllReduceOperation::OR,
      [&](Value i, Value acc) {
        Value prev = sub(i, idx(1));
        Value c0 = entry(cu, prev), c1 = entry(cu, i);
        Value p0 = entry(cup, prev), p1 = entry(cup, i);
        Value decreasing = orI(cmp(arith::CmpIPredicate::slt, c1, c0),
                               cmp(arith::CmpIPredicate::slt, p1, p0));
        acc = orI(acc, select(decreasing, i32(thdc::reference::StatusNotMonotonic), i32(0)));
        // Lengths in 64 bits: differences of arbitrary i32 offsets can wrap.
        auto wide = [&](Value v) {
          return arith::ExtSIOp::create(b, loc, b.getI64Type(), v).getResult();
        };
        Value longer = cmp(arith::CmpIPredicate::sgt, sub(wide(c1), wide(c0)),
                           sub(wide(p1), wide(p0)));
        acc = orI(acc, select(longer, i32(thdc::reference::StatusValidExceedsPadded), i32(0)));
        if (multiple > 1) {
          Value indivisible =
              cmp(arith::CmpIPredicate::ne, remS(p1, i32(multiple)), i32(0));
          acc = orI(acc, select(indivisible, i32(thdc::reference::StatusNotDivisibleBy2Cp), i32(0)));
        }
        if (Value ids = op.getSampleIds()) {
          // Sample prev: its id inside the pool's samples, its rows inside
          // the pool (in 64 bits: offset + length can wrap in 32).
          int64_t chosen = staticLength(ids);
          int64_t samples = staticLength(op.getSampleLengths());
          Value id = entry(ids, prev);
          Value badId = orI(cmp(arith::CmpIPredicate::slt, id, i32(0)),
                            cmp(arith::CmpIPredicate::sge, id, i32(samples)));
          Value offset = wide(entry(op.getSampleOffsets(), toIndex(id)));
          Value length = wide(entry(op.getSampleLengths(), toIndex(id)));
          Value end = add(offset, length);
          Value zero = arith::ConstantIntOp::create(b, loc, b.getI64Type(), 0);
          Value rows = arith::ConstantIntOp::create(
              b, loc, b.getI64Type(), intAttr(op.getPoolRowsAttr()));
          Value badRows =
              orI(orI(cmp(arith::CmpIPredicate::slt, offset, zero),
                      cmp(arith::CmpIPredicate::slt, length, zero)),
                  cmp(arith::CmpIPredicate::sgt, end, rows));
          Value counted = cmp(arith::CmpIPredicate::slt, prev, idx(chosen));
          acc = orI(acc, select(andI(counted, orI(badId, badRows)),
                                i32(thdc::reference::StatusSampleOutOfRange),
                                i32(0)));
        }
        return acc;
      });
  scalars[op.getStatus()] = statusBits;
  scalars[op.getCheckedNumSeqs()] =
      select(cmp(arith::CmpIPredicate::eq, statusBits, i32(0)), raw, i32(0));
}

void PipelineLowering::tailMetadata(PadTailMetadataOp op) {
  int64_t cp = intAttr(op.getCp());
  TailScalars t;
  t.n = count(op.getNumSeqs(), op.getCuSeqlens());
  Value gA = cuAt(op.getCuSeqlensPadded(), t.n);
  Value localTarget;
  if (op.getTargetAttr()) {
    localTarget = i32(intAttr(op.getTargetAttr()));
  } else {
    int64_t a = intAttr(op.getAlignmentAttr());
    Value local = divS(maxIdx(gA, i32(0)), i32(cp));
    localTarget = mul(divS(add(local, i32(a - 1)), i32(a)), i32(a));
  }
  t.globalTarget = mul(localTarget, i32(cp));
  t.tail = arith::MaxSIOp::create(b, loc, sub(t.globalTarget, gA), i32(0));
  Value hasTail = cmp(arith::CmpIPredicate::sgt, t.tail, i32(0));
  t.outCount = t.n;
  // With max_seqs the shapes are static and max_seqlen is gT: the input's
  // max_seqlen (a reduction over the offsets) is not needed.
  bool isStatic = bool(op.getMaxSeqsAttr());
  Value maxSeqlen = isStatic ? t.globalTarget : Value();
  switch (op.getPolicy()) {
  case TailPolicy::append_dummy_sequence:
    t.outCount = select(hasTail, add(t.n, idx(1)), t.n);
    if (!isStatic)
      maxSeqlen =
          arith::MaxSIOp::create(b, loc, scalar(op.getMaxSeqlen()), t.tail);
    break;
  case TailPolicy::extend_last:
    if (!isStatic) {
      Value oldMax = scalar(op.getMaxSeqlen());
      Value prev =
          cuAt(op.getCuSeqlensPadded(), maxIdx(sub(t.n, idx(1)), idx(0)));
      maxSeqlen = arith::MaxSIOp::create(
          b, loc, oldMax, select(hasTail, sub(t.globalTarget, prev), oldMax));
    }
    break;
  case TailPolicy::none:
    if (!isStatic)
      maxSeqlen = scalar(op.getMaxSeqlen());
    break;
  }
  if (isStatic)
    t.outCount = minIdx(t.outCount, idx(intAttr(op.getMaxSeqsAttr())));
  tails[op] = t;
  scalars[op.getMaxSeqlenOut()] = maxSeqlen;
  scalars[op.getNumSeqsOut()] = toI32(t.outCount);
}

Block *PipelineLowering::createKernel(ArrayRef<Type> argTypes) {
  unsigned numInputs = pipeline.getNumArguments();
  FunctionType type = b.getFunctionType(argTypes, {});
  FunctionOpInterface func;
  if (target == Target::Loops) {
    b.setInsertionPoint(pipeline);
    func = func::FuncOp::create(b, loc, pipeline.getName(), type);
    kernel = func;
    Block *body = cast<func::FuncOp>(kernel).addEntryBlock();
    b.setInsertionPointToStart(body);
    func::ReturnOp::create(b, loc);
  } else {
    auto module = pipeline->getParentOfType<ModuleOp>();
    auto kernels = module.lookupSymbol<gpu::GPUModuleOp>("thd_kernels");
    if (!kernels) {
      b.setInsertionPointToEnd(module.getBody());
      kernels = gpu::GPUModuleOp::create(b, loc, "thd_kernels");
      module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      b.getUnitAttr());
    }
    b.setInsertionPointToStart(kernels.getBody());
    auto gpuFunc = gpu::GPUFuncOp::create(b, loc, pipeline.getName(), type);
    gpuFunc->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    kernel = gpuFunc;
    func = gpuFunc;
    b.setInsertionPointToEnd(&gpuFunc.getBody().front());
    gpu::ReturnOp::create(b, loc);
  }
  // Buffers keep their names; capacities are now their static sizes.
  auto named = [&](DictionaryAttr attrs) -> NamedAttrList {
    NamedAttrList kept;
    if (attrs)
      if (Attribute name = attrs.get(THDDialect::kNameAttrName))
        kept.append(THDDialect::kNameAttrName, name);
    return kept;
  };
  for (unsigned i = 0; i < numInputs; ++i)
    func.setArgAttrs(i, named(pipeline.getArgAttrDict(i)).getAttrs());
  for (unsigned i = 0, e = pipeline.getNumResults(); i < e; ++i)
    func.setArgAttrs(numInputs + i,
                     named(pipeline.getResultAttrDict(i)).getAttrs());
  return &func.getFunctionBody().front();
}

LogicalResult PipelineLowering::run() {
  // Block size 0 picks one: large blocks when the outputs are long, so that
  // fewer blocks each stage and check the metadata (measured on an H200: at
  // 1M rows per rank 1024 threads are up to 15% faster than 256; at 32K rows
  // and below 256 is as fast or faster).
  if (blockSize == 0) {
    int64_t longest = 1;
    for (Type type : pipeline.getResultTypes())
      if (auto tensor = dyn_cast<RankedTensorType>(type))
        if (tensor.hasStaticShape() && tensor.getRank() == 1)
          longest = std::max(longest, tensor.getDimSize(0));
    blockSize = longest >= (int64_t(1) << 18) ? 1024 : 256;
  }
  // The kernel takes the pipeline's buffers, then one buffer per result.
  SmallVector<Type> argTypes;
  auto toMemRef = [&](Type type) -> Type {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() || tensor.getRank() != 1)
      return {};
    return MemRefType::get(tensor.getShape(), tensor.getElementType());
  };
  for (Type type : llvm::concat<const Type>(pipeline.getArgumentTypes(),
                                            pipeline.getResultTypes())) {
    Type memref = toMemRef(type);
    if (!memref)
      return pipeline.emitError()
             << "cannot lower a pipeline with the non-static type " << type
             << " (run thd-force-static-shapes first)";
    argTypes.push_back(memref);
  }
  unsigned numInputs = pipeline.getNumArguments();
  Block *body = createKernel(argTypes);
  for (unsigned i = 0; i < numInputs; ++i)
    memrefOf.map(pipeline.getArgument(i), body->getArgument(i));

  // Scalars go before the anchor, the element loops after it.
  b.setInsertionPointToStart(body);
  scalarAnchor = idx(0).getDefiningOp();
  b.setInsertionPoint(body->getTerminator());
  Value thread;
  if (target == Target::GPU)
    thread = gpu::GlobalIdOp::create(b, loc, gpu::Dimension::x);

  // Outputs of one length share one loop (or one guarded region on the GPU),
  // so that what they have in common (a search, a source row, the mask) is
  // computed once per element.
  auto ret = cast<func::ReturnOp>(pipeline.front().getTerminator());
  int64_t threads = 1;
  llvm::MapVector<int64_t, SmallVector<unsigned>> byLength;
  for (auto [i, returned] : llvm::enumerate(ret.getOperands())) {
    byLength[staticLength(returned)].push_back(unsigned(i));
    threads = std::max(threads, staticLength(returned));
  }
  int64_t perThread = target == Target::GPU ? rowsPerThread : 1;
  int64_t grid =
      (threads + blockSize * perThread - 1) / (blockSize * perThread);
  bool gridStride = target == Target::GPU && maxBlocks > 0 && grid > maxBlocks;
  if (gridStride)
    grid = maxBlocks;
  for (auto &[length, outputs] : byLength) {
    OpBuilder::InsertionGuard guard(b);
    rows.clear();
    sequences.clear();
    sources.clear();
    Value element;
    if (target == Target::Loops || gridStride) {
      Value first = gridStride ? thread : idx(0);
      Value step = idx(gridStride ? grid * blockSize : 1);
      auto loop = scf::ForOp::create(b, loc, first, idx(length), step);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      element = loop.getInductionVar();
    } else if (perThread > 1) {
      // A constant trip count: LLVM unrolls it, and the rows' loads overlap.
      auto loop = scf::ForOp::create(b, loc, idx(0), idx(perThread), idx(1));
      b.setInsertionPoint(loop.getBody()->getTerminator());
      element = add(thread, mul(loop.getInductionVar(), idx(grid * blockSize)));
      auto inside = scf::IfOp::create(
          b, loc, cmp(arith::CmpIPredicate::ult, element, idx(length)),
          /*withElseRegion=*/false);
      b.setInsertionPoint(inside.thenBlock()->getTerminator());
    } else {
      auto inside = scf::IfOp::create(
          b, loc, cmp(arith::CmpIPredicate::ult, thread, idx(length)),
          /*withElseRegion=*/false);
      b.setInsertionPoint(inside.thenBlock()->getTerminator());
      element = thread;
    }
    for (unsigned i : outputs) {
      Value value = resolve(ret.getOperand(i));
      Value out = body->getArgument(numInputs + i);
      Operation *def = value.getDefiningOp();
      bool isScalar = def && isa<ValidateOp, MaxSeqlenOp>(def);
      isScalar |= def && isa<PadTailMetadataOp>(def) &&
                  (value == def->getResult(2) || value == def->getResult(3));
      bool isArray = def &&
                     isa<GatherOp, CuSeqlensOp, AlignLengthsOp, PadCuSeqlensOp,
                         PadTailMetadataOp>(def) &&
                     !isScalar;
      Value stored = isScalar  ? scalar(value)
                     : isArray ? entry(value, element)
                               : row(value, element);
      memref::StoreOp::create(b, loc, stored, out, ValueRange{element},
                              /*nontemporal=*/false, alignOf(out));
    }
  }
  if (target == Target::GPU) {
    kernel->setAttr("thd.block", b.getDenseI64ArrayAttr({blockSize, 1, 1}));
    kernel->setAttr("thd.grid", b.getDenseI64ArrayAttr({grid, 1, 1}));
    cast<gpu::GPUFuncOp>(kernel).setKnownBlockSizeAttr(
        b.getDenseI32ArrayAttr({int32_t(blockSize), 1, 1}));
  }
  if (failed(status)) {
    kernel->erase();
    return failure();
  }
  pipeline.erase();
  return success();
}

/// The functions of `module` that hold thd steps.
/// The lowering reads every configuration attribute as an integer: an
/// expression left unbound (no thd-bind-params or thd-force-static-shapes
/// before it) is an error here, not a crash later.
LogicalResult requireBoundParams(ModuleOp module) {
  WalkResult walk = module.walk([](Operation *op) {
    for (NamedAttribute attr : op->getAttrs())
      if (auto expr = dyn_cast<ExprAttr>(attr.getValue())) {
        op->emitOpError()
            << "still holds the parameter expression \""
            << expr.getText() << "\" in '" << attr.getName().getValue()
            << "'; bind the parameters first (thd-bind-params or "
               "thd-force-static-shapes)";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

SmallVector<func::FuncOp> pipelinesOf(ModuleOp module) {
  SmallVector<func::FuncOp> pipelines;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() && func.walk([](Operation *op) {
                                    return isa<THDDialect>(op->getDialect())
                                               ? WalkResult::interrupt()
                                               : WalkResult::advance();
                                  })
                                  .wasInterrupted())
      pipelines.push_back(func);
  return pipelines;
}

struct LowerToLoopsPass
    : mlir::thd::impl::THDLowerToLoopsBase<LowerToLoopsPass> {
  void runOnOperation() override {
    if (failed(requireBoundParams(getOperation())))
      return signalPassFailure();
    for (func::FuncOp func : pipelinesOf(getOperation()))
      if (failed(PipelineLowering(func, Target::Loops).run()))
        return signalPassFailure();
  }
};

struct LowerToGPUPass : mlir::thd::impl::THDLowerToGPUBase<LowerToGPUPass> {
  using Base::Base;
  void runOnOperation() override {
    if (blockSize < 0 || blockSize > 1024) {
      getOperation().emitError()
          << "block-size must be in [1, 1024] (or 0: chosen from the "
             "output lengths), got "
          << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    // Bounded so that blocks * threads * rows stays far inside 32 bits.
    if (maxBlocks < 0 || maxBlocks > INT32_MAX || rowsPerThread < 1 ||
        rowsPerThread > 64) {
      getOperation().emitError()
          << "max-blocks must be in [0, 2147483647] and rows-per-thread in "
             "[1, 64], got "
          << static_cast<int64_t>(maxBlocks) << " and "
          << static_cast<int64_t>(rowsPerThread);
      return signalPassFailure();
    }
    if (failed(requireBoundParams(getOperation())))
      return signalPassFailure();
    for (func::FuncOp func : pipelinesOf(getOperation()))
      if (failed(PipelineLowering(func, Target::GPU, blockSize, maxBlocks,
                                  rowsPerThread)
                     .run()))
        return signalPassFailure();
  }
};
} // namespace
