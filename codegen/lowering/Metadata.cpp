//===- Metadata.cpp - steps that compute scalars and tail metadata --------===//
//
// Values computed once per kernel: the longest sequence (S4, S13), the fault
// bits and checked count of a microbatch, what an invalid microbatch loses,
// the tail metadata of a padded microbatch (S10) and the chunk metadata of
// linear attention (S15), whose arrays are then read entry by entry.
// Sections are those of docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#include "codegen/lowering/StepLowering.h"
#include "reference/StatusBits.h"

#include <limits>

using namespace mlir;
using namespace mlir::thd;
namespace reference = thdc::reference;

namespace {
/// Both scalars of a validate op.
void validate(ValidateOp op, ElementEmitter &e) {
  Value cu = op.getCuSeqlens(), cup = op.getCuSeqlensPadded();
  int64_t last = e.staticLength(cu) - 1;
  int64_t cp = e.intAttr(op.getCp());
  // Zigzag cuts every sequence into 2*cp chunks; contiguous CP cuts only
  // the padded buffer, whose max_tokens rows the verifier checked.
  int64_t multiple = cp > 1 && op.getMode() == CpMode::zigzag ? 2 * cp : 1;
  int64_t maxSeqs = e.intAttr(op.getMaxSeqs());
  Value maxTokens = e.i32(e.intAttr(op.getMaxTokens()));
  Value raw = op.getNumSeqs() ? e.scalar(op.getNumSeqs()) : e.i32(last);
  Value n = e.clamp(e.toIndex(raw), 0, last);
  // reference::numSeqsStatus: with tail_slot, max_seqs sequences leave no
  // slot for the dummy over a tail, so they need a total of max_tokens.
  Value badCount =
      e.orI(e.cmp(arith::CmpIPredicate::slt, raw, e.i32(0)),
            e.cmp(arith::CmpIPredicate::sgt, raw, e.i32(maxSeqs)));
  if (op.getTailSlot())
    badCount = e.orI(
        badCount,
        e.andI(e.cmp(arith::CmpIPredicate::eq, raw, e.i32(maxSeqs)),
               e.cmp(arith::CmpIPredicate::slt, e.entry(cup, n), maxTokens)));
  Value bits = e.select(badCount, e.i32(reference::StatusNumSeqsOutOfRange),
                        e.i32(0));
  Value rank = e.scalar(op.getCpRank());
  Value badRank = e.orI(e.cmp(arith::CmpIPredicate::slt, rank, e.i32(0)),
                        e.cmp(arith::CmpIPredicate::sge, rank, e.i32(cp)));
  bits = e.orI(bits, e.select(badRank, e.i32(reference::StatusCpRankOutOfRange),
                              e.i32(0)));
  Value badStart =
      e.orI(e.cmp(arith::CmpIPredicate::ne, e.entry(cu, e.idx(0)), e.i32(0)),
            e.cmp(arith::CmpIPredicate::ne, e.entry(cup, e.idx(0)), e.i32(0)));
  bits = e.orI(
      bits, e.select(badStart, e.i32(reference::StatusNotMonotonic), e.i32(0)));
  bits = e.orI(bits, e.select(e.cmp(arith::CmpIPredicate::sgt, e.entry(cup, n),
                                    maxTokens),
                              e.i32(reference::StatusTotalExceedsCapacity),
                              e.i32(0)));
  if (Value rows = op.getRows()) {
    // reference::rowsStatus: the rows the offsets claim against those given.
    Value given = e.scalar(rows);
    Value missing =
        e.orI(e.cmp(arith::CmpIPredicate::slt, given, e.i32(0)),
              e.cmp(arith::CmpIPredicate::sgt, e.entry(cup, n), given));
    bits = e.orI(bits, e.select(missing, e.i32(reference::StatusRowsNotGiven),
                                e.i32(0)));
  }
  if (multiple > 1) {
    Value indivisible =
        e.cmp(arith::CmpIPredicate::ne,
              e.remS(e.entry(cup, e.idx(0)), e.i32(multiple)), e.i32(0));
    bits = e.orI(bits,
                 e.select(indivisible,
                          e.i32(reference::StatusNotDivisibleBy2Cp), e.i32(0)));
  }
  Value statusBits = e.reduceEntries(
      e.add(n, e.idx(1)), bits, gpu::AllReduceOperation::OR,
      [&](Value i, Value acc) {
        Value prev = e.sub(i, e.idx(1));
        Value c0 = e.entry(cu, prev), c1 = e.entry(cu, i);
        Value p0 = e.entry(cup, prev), p1 = e.entry(cup, i);
        Value decreasing = e.orI(e.cmp(arith::CmpIPredicate::slt, c1, c0),
                                 e.cmp(arith::CmpIPredicate::slt, p1, p0));
        acc = e.orI(acc,
                    e.select(decreasing, e.i32(reference::StatusNotMonotonic),
                             e.i32(0)));
        // Lengths in 64 bits: differences of arbitrary i32 offsets can wrap.
        auto wide = [&](Value v) {
          return arith::ExtSIOp::create(e.b, e.loc, e.b.getI64Type(), v)
              .getResult();
        };
        Value longer =
            e.cmp(arith::CmpIPredicate::sgt, e.sub(wide(c1), wide(c0)),
                  e.sub(wide(p1), wide(p0)));
        acc = e.orI(acc,
                    e.select(longer, e.i32(reference::StatusValidExceedsPadded),
                             e.i32(0)));
        if (multiple > 1) {
          Value indivisible = e.cmp(arith::CmpIPredicate::ne,
                                    e.remS(p1, e.i32(multiple)), e.i32(0));
          acc = e.orI(acc, e.select(indivisible,
                                    e.i32(reference::StatusNotDivisibleBy2Cp),
                                    e.i32(0)));
        }
        if (Value ids = op.getSampleIds()) {
          // Sample prev: its id inside the pool's samples, its rows inside
          // the pool (in 64 bits: offset + length can wrap in 32).
          int64_t chosen = e.staticLength(ids);
          int64_t samples = e.staticLength(op.getSampleLengths());
          Value id = e.entry(ids, prev);
          Value badId =
              e.orI(e.cmp(arith::CmpIPredicate::slt, id, e.i32(0)),
                    e.cmp(arith::CmpIPredicate::sge, id, e.i32(samples)));
          Value offset = wide(e.entry(op.getSampleOffsets(), e.toIndex(id)));
          Value length = wide(e.entry(op.getSampleLengths(), e.toIndex(id)));
          Value end = e.add(offset, length);
          Value zero =
              arith::ConstantIntOp::create(e.b, e.loc, e.b.getI64Type(), 0);
          Value rows = arith::ConstantIntOp::create(
              e.b, e.loc, e.b.getI64Type(), e.intAttr(op.getPoolRowsAttr()));
          Value badRows =
              e.orI(e.orI(e.cmp(arith::CmpIPredicate::slt, offset, zero),
                          e.cmp(arith::CmpIPredicate::slt, length, zero)),
                    e.cmp(arith::CmpIPredicate::sgt, end, rows));
          Value counted = e.cmp(arith::CmpIPredicate::slt, prev, e.idx(chosen));
          acc = e.orI(acc, e.select(e.andI(counted, e.orI(badId, badRows)),
                                    e.i32(reference::StatusSampleOutOfRange),
                                    e.i32(0)));
        }
        return acc;
      });
  e.defineScalar(op.getStatus(), statusBits);
  e.defineScalar(op.getCheckedNumSeqs(),
                 e.select(e.cmp(arith::CmpIPredicate::eq, statusBits, e.i32(0)),
                          raw, e.i32(0)));
}

/// Both scalars of a dropped op (reference::droppedCounts).
void dropped(DroppedOp op, ElementEmitter &e) {
  Value cu = op.getCuSeqlens();
  int64_t last = e.staticLength(cu) - 1;
  Value invalid =
      e.cmp(arith::CmpIPredicate::ne, e.scalar(op.getStatus()), e.i32(0));
  Value n = e.clamp(e.toIndex(e.scalar(op.getNumSeqs())), 0, last);
  Value tokens = arith::MaxSIOp::create(
      e.b, e.loc, e.entry(cu, n, /*inBounds=*/true), e.i32(0));
  e.defineScalar(op.getDroppedSeqs(), e.select(invalid, e.toI32(n), e.i32(0)));
  e.defineScalar(op.getDroppedTokens(), e.select(invalid, tokens, e.i32(0)));
}

/// The scalars of one pad_tail_metadata op, computed before the loops and
/// kept in the emitter's step values.
struct TailScalars {
  Value n, outCount;        // index
  Value globalTarget, tail; // i32: gT and d = gT - gA (>= 0)
};

TailScalars tailScalars(PadTailMetadataOp op, ElementEmitter &e) {
  const SmallVector<Value, 4> &v = e.stepValues[op];
  return {v[0], v[1], v[2], v[3]};
}

/// Every scalar of a pad_tail_metadata op.
void tailMetadata(PadTailMetadataOp op, ElementEmitter &e) {
  int64_t cp = e.intAttr(op.getCp());
  TailScalars t;
  t.n = e.count(op.getNumSeqs(), op.getCuSeqlens());
  Value gA = e.cuAt(op.getCuSeqlensPadded(), t.n);
  Value localTarget;
  if (op.getTargetAttr()) {
    localTarget = e.i32(e.intAttr(op.getTargetAttr()));
  } else {
    int64_t a = e.intAttr(op.getAlignmentAttr());
    Value local = e.divS(e.maxIdx(gA, e.i32(0)), e.i32(cp));
    localTarget = e.mul(e.divS(e.add(local, e.i32(a - 1)), e.i32(a)), e.i32(a));
  }
  t.globalTarget = e.mul(localTarget, e.i32(cp));
  t.tail =
      arith::MaxSIOp::create(e.b, e.loc, e.sub(t.globalTarget, gA), e.i32(0));
  Value hasTail = e.cmp(arith::CmpIPredicate::sgt, t.tail, e.i32(0));
  t.outCount = t.n;
  // With max_seqs the shapes are static and max_seqlen is gT: the input's
  // max_seqlen (a reduction over the offsets) is not needed.
  bool isStatic = bool(op.getMaxSeqsAttr());
  Value maxSeqlen = isStatic ? t.globalTarget : Value();
  switch (op.getPolicy()) {
  case TailPolicy::append_dummy_sequence:
    t.outCount = e.select(hasTail, e.add(t.n, e.idx(1)), t.n);
    if (!isStatic)
      maxSeqlen = arith::MaxSIOp::create(e.b, e.loc,
                                         e.scalar(op.getMaxSeqlen()), t.tail);
    break;
  case TailPolicy::extend_last:
    if (!isStatic) {
      Value oldMax = e.scalar(op.getMaxSeqlen());
      Value prev = e.cuAt(op.getCuSeqlensPadded(),
                          e.maxIdx(e.sub(t.n, e.idx(1)), e.idx(0)));
      maxSeqlen = arith::MaxSIOp::create(
          e.b, e.loc, oldMax,
          e.select(hasTail, e.sub(t.globalTarget, prev), oldMax));
    }
    break;
  case TailPolicy::none:
    if (!isStatic)
      maxSeqlen = e.scalar(op.getMaxSeqlen());
    break;
  case TailPolicy::split_dummy_sequences: {
    // k = min(ceil(d / L), N - n) dummies when d > 0 (the verifier requires
    // max_seqs, so max_seqlen is the static gT).
    Value length = e.i32(e.intAttr(op.getDummyLengthAttr()));
    Value pieces = e.add(e.divS(e.sub(t.tail, e.i32(1)), length), e.i32(1));
    Value spare = e.sub(e.idx(e.intAttr(op.getMaxSeqsAttr())), t.n);
    Value count = e.minIdx(e.toIndex(pieces), e.maxIdx(spare, e.idx(0)));
    t.outCount = e.select(hasTail, e.add(t.n, count), t.n);
    break;
  }
  }
  if (isStatic)
    t.outCount = e.minIdx(t.outCount, e.idx(e.intAttr(op.getMaxSeqsAttr())));
  e.stepValues[op] = {t.n, t.outCount, t.globalTarget, t.tail};
  e.defineScalar(op.getMaxSeqlenOut(), maxSeqlen);
  e.defineScalar(op.getNumSeqsOut(), e.toI32(t.outCount));
}
} // namespace

Value mlir::thd::lowerElement(MaxSeqlenOp op, ElementEmitter &e, OpResult,
                              Value) {
  // reference::maxSeqlenFromCu: the largest difference of consecutive
  // entries, at least 0, saturated at int32 max. Each difference is taken in
  // 64 bits (two i32 offsets can be 2^32 - 1 apart) and clamped into
  // [0, int32 max] before the i32 maximum, which gives the same value.
  Type i64 = e.b.getI64Type();
  auto wide = [&](Value v) {
    return arith::ExtSIOp::create(e.b, e.loc, i64, v).getResult();
  };
  Value zero = arith::ConstantIntOp::create(e.b, e.loc, i64, 0);
  Value int32Max = arith::ConstantIntOp::create(
      e.b, e.loc, i64, std::numeric_limits<int32_t>::max());
  Value n = e.count(op.getNumSeqs(), op.getOffsets());
  return e.reduceEntries(
      e.add(n, e.idx(1)), e.i32(0), gpu::AllReduceOperation::MAXSI,
      [&](Value i, Value acc) -> Value {
        Value len = e.sub(wide(e.cuAt(op.getOffsets(), i)),
                          wide(e.cuAt(op.getOffsets(), e.sub(i, e.idx(1)))));
        Value clamped = arith::MinSIOp::create(
            e.b, e.loc, arith::MaxSIOp::create(e.b, e.loc, len, zero),
            int32Max);
        return arith::MaxSIOp::create(
            e.b, e.loc, acc,
            arith::TruncIOp::create(e.b, e.loc, e.b.getI32Type(), clamped));
      });
}
Value mlir::thd::lowerRowCount(MaxSeqlenOp op, ElementEmitter &e, OpResult) {
  return noRowCount(op, e);
}

Value mlir::thd::lowerElement(ValidateOp op, ElementEmitter &e, OpResult,
                              Value) {
  validate(op, e);
  return Value(); // both scalars are defined
}
Value mlir::thd::lowerRowCount(ValidateOp op, ElementEmitter &e, OpResult) {
  return noRowCount(op, e);
}

Value mlir::thd::lowerElement(DroppedOp op, ElementEmitter &e, OpResult,
                              Value) {
  dropped(op, e);
  return Value(); // both scalars are defined
}
Value mlir::thd::lowerRowCount(DroppedOp op, ElementEmitter &e, OpResult) {
  return noRowCount(op, e);
}

Value mlir::thd::lowerElement(PadTailMetadataOp op, ElementEmitter &e,
                              OpResult result, Value i) {
  if (!i) {
    tailMetadata(op, e);
    return Value(); // both scalars are defined
  }
  // Entries 0..n are the input's, entry n+1 the dummy (if any), then
  // repeats of the last one.
  e.scalar(op.getNumSeqsOut());
  TailScalars t = tailScalars(op, e);
  Value j = e.minIdx(i, t.outCount);
  bool padded = result == op.getCuSeqlensPaddedOut();
  Value source = padded ? op.getCuSeqlensPadded() : op.getCuSeqlens();
  Value original = e.cuAt(source, e.minIdx(j, t.n));
  Value isNew = e.cmp(arith::CmpIPredicate::ugt, j, t.n);
  switch (op.getPolicy()) {
  case TailPolicy::append_dummy_sequence: {
    Value dummyEnd =
        padded ? t.globalTarget : e.add(e.cuAt(op.getCuSeqlens(), t.n), t.tail);
    return e.select(isNew, dummyEnd, original);
  }
  case TailPolicy::extend_last: {
    if (!padded)
      return original;
    Value isLast = e.andI(e.cmp(arith::CmpIPredicate::eq, j, t.n),
                          e.cmp(arith::CmpIPredicate::sgt, t.n, e.idx(0)));
    return e.select(isLast, t.globalTarget, original);
  }
  case TailPolicy::none:
    return original;
  case TailPolicy::split_dummy_sequences: {
    // Dummy t = j - n ends at gA + t*L, the last one (j = outCount) at gT;
    // a valid entry moves with its padded one.
    Value gA = e.cuAt(op.getCuSeqlensPadded(), t.n);
    Value length = e.i32(e.intAttr(op.getDummyLengthAttr()));
    Value t32 = e.toI32(e.sub(j, t.n));
    Value isLast = e.cmp(arith::CmpIPredicate::eq, j, t.outCount);
    Value paddedEnd =
        e.select(isLast, t.globalTarget, e.add(gA, e.mul(t32, length)));
    Value end = padded ? paddedEnd
                       : e.add(e.cuAt(op.getCuSeqlens(), t.n),
                               e.sub(paddedEnd, gA));
    return e.select(isNew, end, original);
  }
  }
  llvm_unreachable("unknown tail policy");
}
Value mlir::thd::lowerRowCount(PadTailMetadataOp op, ElementEmitter &e,
                               OpResult) {
  return noRowCount(op, e);
}

namespace {
/// NT, the rows of a linear_chunks op's chunk_indices; its 2 * NT entries
/// fit i32 (the verifier), so a sum of two values <= NT does too.
int64_t chunkRows(LinearChunksOp op) {
  return ElementEmitter::staticLength(op.getChunkIndices()) / 2;
}

/// min(ceil(max(cu[i+1] - cu[i], 0) / BT), NT) as i64: the chunks of
/// sequence i (index) of a linear_chunks op that can be listed (a
/// decreasing entry gives none). On offsets that thd.validate accepts the
/// cap is never reached. On others two i32 entries can be up to 2^32 - 1
/// apart, so the length is taken in 64 bits, and N counts can sum past
/// int32: capped at NT, a count and a running sum capped at NT add up to
/// at most 2 * NT, inside i32, and which chunks are listed (only the first
/// NT) does not change.
// Every op is emitted by a statement of its own, never two in the
// arguments of one call, whose order C++ leaves to the compiler: the IR
// is then the same from every build.
Value chunksOf(LinearChunksOp op, ElementEmitter &e, Value i) {
  OpBuilder &b = e.b;
  Type i64 = b.getI64Type();
  Value cu = op.getCuSeqlensPadded();
  Value begin32 = e.cuAt(cu, i);
  Value begin = arith::ExtSIOp::create(b, e.loc, i64, begin32);
  Value next = e.add(i, e.idx(1));
  Value end32 = e.cuAt(cu, next);
  Value end = arith::ExtSIOp::create(b, e.loc, i64, end32);
  Value length = e.sub(end, begin);
  Value zero = arith::ConstantIntOp::create(b, e.loc, i64, 0);
  Value positive = arith::MaxSIOp::create(b, e.loc, length, zero);
  Value chunkSize =
      arith::ConstantIntOp::create(b, e.loc, i64, e.intAttr(op.getChunkSize()));
  Value chunks = arith::CeilDivSIOp::create(b, e.loc, positive, chunkSize);
  Value rows = arith::ConstantIntOp::create(b, e.loc, i64, chunkRows(op));
  return arith::MinSIOp::create(b, e.loc, chunks, rows);
}

/// chunksOf as i32, for the sums that stay within 2 * NT.
Value chunksOf32(LinearChunksOp op, ElementEmitter &e, Value i) {
  Value chunks = chunksOf(op, e, i);
  return arith::TruncIOp::create(e.b, e.loc, e.b.getI32Type(), chunks);
}
} // namespace

Value mlir::thd::lowerElement(LinearChunksOp op, ElementEmitter &e,
                              OpResult result, Value at) {
  int64_t n = e.staticLength(op.getCuSeqlensPadded()) - 1;
  // chunk_offsets and chunk_count count the listed chunks: the running sums
  // capped at NT (S15's sums wherever thd.validate accepts the offsets).
  if (!at) {
    // chunk_count = chunk_offsets[N], summed over every sequence at once.
    // The partial sums (of up to N counts, each <= NT) are 64-bit: a
    // thread's, and those of a block's threads combined, can pass int32.
    OpBuilder &b = e.b;
    Type i64 = b.getI64Type();
    Value init = arith::ConstantIntOp::create(b, e.loc, i64, 0);
    Value total =
        e.reduceEntries(e.idx(n + 1), init, gpu::AllReduceOperation::ADD,
                        [&](Value i, Value acc) {
                          Value chunks = chunksOf(op, e, e.sub(i, e.idx(1)));
                          return e.add(acc, chunks);
                        });
    Value cap = arith::ConstantIntOp::create(b, e.loc, i64, chunkRows(op));
    Value listed = arith::MinSIOp::create(b, e.loc, total, cap);
    return arith::TruncIOp::create(b, e.loc, b.getI32Type(), listed);
  }
  if (result == op.getChunkOffsets()) {
    // The chunks of the sequences before entry `at`, capped at NT as they
    // are summed: a sum and a count are each <= NT, so no step wraps.
    OpBuilder &b = e.b;
    Value lower = e.idx(0);
    Value upper = e.minIdx(at, e.idx(n));
    Value step = e.idx(1);
    Value init = e.i32(0);
    auto loop = scf::ForOp::create(b, e.loc, lower, upper, step,
                                   ValueRange{init});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value chunks = chunksOf32(op, e, loop.getInductionVar());
    Value sum = e.add(loop.getRegionIterArgs()[0], chunks);
    Value rows = e.i32(chunkRows(op));
    Value capped = arith::MinSIOp::create(b, e.loc, sum, rows);
    scf::YieldOp::create(b, e.loc, ValueRange{capped});
    return loop.getResult(0);
  }
  // Entry `at` of chunk_indices is half `at % 2` of row r = at / 2, in the
  // sequence s whose chunks hold pos = min(r, chunk_count): one walk over
  // the sequences before it, summing their chunks (the chunk offsets are
  // not materialised, so a search over them would sum them anew for every
  // probe). Rows past the chunks walk to chunk_count itself: the walk stops
  // at the last sequence, chunk_count - chunk_offsets[N-1] into it, which
  // is the sentinel.
  Value r = e.divU(at, e.idx(2));
  Value count = e.toIndex(e.scalar(op.getChunkCount()));
  Value pos = e.toI32(e.minIdx(r, count));
  Value last = e.idx(n - 1);
  OpBuilder &b = e.b;
  Type indexType = b.getIndexType(), i32Type = b.getI32Type();
  Value startSeq = e.idx(0);
  Value startChunk = e.i32(0);
  // The walk carries (s, first chunk of s); the condition passes on the
  // first chunk after s as well, so the step sums each sequence's chunks
  // once.
  auto walk =
      scf::WhileOp::create(b, e.loc, TypeRange{indexType, i32Type, i32Type},
                           ValueRange{startSeq, startChunk});
  {
    OpBuilder::InsertionGuard guard(b);
    Block *before = b.createBlock(&walk.getBefore(), {},
                                  {indexType, i32Type}, {e.loc, e.loc});
    Value s = before->getArgument(0), first = before->getArgument(1);
    // first <= pos < NT and chunks <= NT: the sum stays inside i32.
    Value chunks = chunksOf32(op, e, s);
    Value end = e.add(first, chunks);
    Value notLast = e.cmp(arith::CmpIPredicate::slt, s, last);
    Value past = e.cmp(arith::CmpIPredicate::sle, end, pos);
    Value more = e.andI(notLast, past);
    scf::ConditionOp::create(b, e.loc, more, ValueRange{s, first, end});
    Block *after = b.createBlock(&walk.getAfter(), {},
                                 {indexType, i32Type, i32Type},
                                 {e.loc, e.loc, e.loc});
    Value nextSeq = e.add(after->getArgument(0), e.idx(1));
    scf::YieldOp::create(b, e.loc,
                         ValueRange{nextSeq, after->getArgument(2)});
  }
  Value s = walk.getResult(0);
  Value t = e.sub(pos, walk.getResult(1));
  Value half = arith::RemUIOp::create(e.b, e.loc, at, e.idx(2));
  Value zero = e.idx(0);
  Value first = e.cmp(arith::CmpIPredicate::eq, half, zero);
  Value s32 = e.toI32(s);
  return e.select(first, s32, t);
}
Value mlir::thd::lowerRowCount(LinearChunksOp op, ElementEmitter &e,
                               OpResult) {
  return noRowCount(op, e);
}
