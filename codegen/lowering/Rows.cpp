//===- Rows.cpp - steps that compute per-token buffers --------------------===//
//
// Row `r` of a per-token buffer: packing from a pool (S4), the padding mask
// (S5), sanitised rows (S6), a rank's CP slice and every rank's gathered
// rows back in sequence order (S7), position ids, RoPE positions and the
// sequence index of a row (S8), and tail padding (S10).
// Sections are those of docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#include "codegen/lowering/StepLowering.h"

using namespace mlir;
using namespace mlir::thd;

namespace {
/// Rows [0, cuPadded[n]) are meaningful, within the buffer's capacity.
Value totalRows(ElementEmitter &e, Value cuPadded, Value numSeqs,
                OpResult result) {
  Value n = e.count(numSeqs, cuPadded);
  return e.minIdx(e.toIndex(e.cuAt(cuPadded, n)),
                  e.idx(e.staticLength(result)));
}

/// Every row of a buffer that is as long as its static length.
Value allRows(ElementEmitter &e, OpResult result) {
  return e.idx(e.staticLength(result));
}

/// Row `r`'s offset inside the sequence that covers it.
Value offsetInSequence(ElementEmitter &e, Value cuPadded, Value s, Value r) {
  return e.sub(r, e.toIndex(e.cuAt(cuPadded, s)));
}
} // namespace

Value mlir::thd::lowerElement(PaddingMaskOp op, ElementEmitter &e, OpResult,
                              Value r) {
  Value n = e.count(op.getNumSeqs(), op.getCuSeqlensPadded());
  return e.paddingAt(op.getCuSeqlens(), op.getCuSeqlensPadded(), n, r);
}
Value mlir::thd::lowerRowCount(PaddingMaskOp op, ElementEmitter &e,
                               OpResult result) {
  return totalRows(e, op.getCuSeqlensPadded(), op.getNumSeqs(), result);
}

Value mlir::thd::lowerElement(PositionIdsOp op, ElementEmitter &e, OpResult,
                              Value r) {
  Value cup = op.getCuSeqlensPadded();
  Value n = e.count(op.getNumSeqs(), cup);
  Value s = e.findSequence(cup, n, r, 1);
  Value k = offsetInSequence(e, cup, s, r);
  Type element = getElementTypeOrSelf(op.getPositionIds().getType());
  Value position = arith::IndexCastOp::create(e.b, e.loc, element, k);
  Value isPad = e.paddingAt(op.getCuSeqlens(), cup, n, r);
  return e.select(isPad, e.fillValue({}, element), position);
}
Value mlir::thd::lowerRowCount(PositionIdsOp op, ElementEmitter &e,
                               OpResult result) {
  return totalRows(e, op.getCuSeqlensPadded(), op.getNumSeqs(), result);
}

Value mlir::thd::lowerElement(PackOp op, ElementEmitter &e, OpResult, Value r) {
  Value cup = op.getCuSeqlensPadded();
  Value n = e.count(op.getNumSeqs(), cup);
  Value s = e.findSequence(cup, n, r, 1);
  Value k = offsetInSequence(e, cup, s, r);
  Value id = e.toIndex(e.entry(op.getSampleIds(), s));
  Value offset = e.toIndex(e.entry(op.getSampleOffsets(), id));
  Value value = e.row(op.getPool(), e.add(offset, k));
  Value isPad = e.paddingAt(op.getCuSeqlens(), cup, n, r);
  Type element = getElementTypeOrSelf(op.getPool().getType());
  return e.select(isPad, e.fillValue(op.getPad(), element), value);
}
Value mlir::thd::lowerRowCount(PackOp op, ElementEmitter &e, OpResult result) {
  return totalRows(e, op.getCuSeqlensPadded(), op.getNumSeqs(), result);
}

Value mlir::thd::lowerElement(SanitizeOp op, ElementEmitter &e, OpResult,
                              Value r) {
  Value inMask = e.cmp(arith::CmpIPredicate::slt, r, e.rowCount(op.getMask()));
  Value isPad =
      e.select(inMask, e.row(op.getMask(), r),
               arith::ConstantIntOp::create(e.b, e.loc, e.b.getI1Type(), 1));
  Type element = getElementTypeOrSelf(op.getInput().getType());
  return e.select(isPad, e.fillValue(op.getFillAttr(), element),
                  e.row(op.getInput(), r));
}
Value mlir::thd::lowerRowCount(SanitizeOp op, ElementEmitter &e, OpResult) {
  return e.minIdx(e.rowCount(op.getInput()), e.rowCount(op.getMask()));
}

namespace {
/// The row of a CP slice's input that its row `r` holds. Slices of the same
/// buffer layout (offsets, rank, count, cp) share it.
Value sliceSource(CpSliceOp op, ElementEmitter &e, Value r) {
  int64_t cp = e.intAttr(op.getCp());
  Value cup = ElementEmitter::resolve(op.getCuSeqlensPadded());
  Value n = e.count(op.getNumSeqs(), cup);
  Value rankTensor = ElementEmitter::resolve(op.getCpRank());
  int64_t layout = op.getMode() == CpMode::contiguous ? -cp : cp;
  auto key = std::make_tuple(cup, rankTensor, n, layout, r);
  if (Value cached = e.elementCache.lookup(key))
    return cached;
  Value rank = e.clamp(e.toIndex(e.scalar(rankTensor)), 0, cp - 1);
  Value source;
  if (op.getMode() == CpMode::contiguous) {
    Value total = e.maxIdx(e.toIndex(e.cuAt(cup, n)), e.idx(0));
    Value share = e.divU(total, e.idx(cp));
    source = e.add(e.mul(rank, share), r);
  } else {
    // TE dual-chunk: chunk r and chunk 2cp-1-r of each sequence.
    Value s = e.findSequence(cup, n, r, cp);
    Value start = e.toIndex(e.cuAt(cup, s, /*inBounds=*/true));
    Value localStart = e.divS(start, e.idx(cp));
    Value localLen =
        e.sub(e.divS(e.toIndex(e.cuAt(cup, e.add(s, e.idx(1)),
                                      /*inBounds=*/e.staticLength(cup) >= 2)),
                     e.idx(cp)),
              localStart);
    Value half = e.divU(e.maxIdx(localLen, e.idx(0)), e.idx(2));
    // TE's formula: k + start + half * (r, or 2cp-2-r in the second half);
    // rows past the last sequence continue it, as TE's do.
    Value k = e.sub(r, localStart);
    Value firstChunk = e.cmp(arith::CmpIPredicate::slt, k, half);
    Value chunk = e.select(firstChunk, rank, e.sub(e.idx(2 * cp - 2), rank));
    source = e.add(e.add(start, k), e.mul(chunk, half));
    // The source row lies in the same sequence s: a later search for it
    // (the padding mask's) is answered without searching.
    e.knowSequence(cup, n, source, 1, s);
  }
  return e.elementCache[key] = source;
}
} // namespace

Value mlir::thd::lowerElement(CpSliceOp op, ElementEmitter &e, OpResult,
                              Value r) {
  if (e.intAttr(op.getCp()) == 1)
    return e.row(op.getInput(), r);
  return e.row(op.getInput(), sliceSource(op, e, r));
}
Value mlir::thd::lowerRowCount(CpSliceOp op, ElementEmitter &e,
                               OpResult result) {
  int64_t cp = e.intAttr(op.getCp());
  if (cp == 1)
    return e.rowCount(op.getInput());
  Value n = e.count(op.getNumSeqs(), op.getCuSeqlensPadded());
  Value total = e.toIndex(e.cuAt(op.getCuSeqlensPadded(), n));
  return e.minIdx(e.divU(e.maxIdx(total, e.idx(0)), e.idx(cp)),
                  e.idx(e.staticLength(result)));
}

namespace {
/// The row of a CP unslice's gathered input that its row `g` holds. Unslices
/// of the same layout (offsets, count, cp, rows per rank, mode) share it.
Value unsliceSource(CpUnsliceOp op, ElementEmitter &e, Value g) {
  using P = arith::CmpIPredicate;
  int64_t cp = e.intAttr(op.getCp());
  int64_t perRank = e.intAttr(op.getRowsPerRank());
  Value cup = ElementEmitter::resolve(op.getCuSeqlensPadded());
  Value n = e.count(op.getNumSeqs(), cup);
  // Both factors fit 31 bits (the verifier), and no rank operand: the key
  // differs from every cp_slice's.
  int64_t layout = (perRank << 32) | (cp << 1) |
                   (op.getMode() == CpMode::contiguous ? 1 : 0);
  auto key = std::make_tuple(cup, Value(), n, layout, g);
  if (Value cached = e.elementCache.lookup(key))
    return cached;
  Value total = e.clamp(e.toIndex(e.cuAt(cup, n)), 0, cp * perRank);
  Value localTotal = e.divU(total, e.idx(cp));
  // The tail: rank r's rows past localTotal, rank after rank. There is a
  // tail row only when total < cp * perRank, so localTotal < perRank.
  Value past = e.maxIdx(e.sub(g, total), e.idx(0));
  Value tailWidth = e.maxIdx(e.sub(e.idx(perRank), localTotal), e.idx(1));
  Value tailRank = e.divU(past, tailWidth);
  Value tailSource = e.add(e.add(e.mul(tailRank, e.idx(perRank)), localTotal),
                           e.sub(past, e.mul(tailRank, tailWidth)));
  Value rank, local;
  if (op.getMode() == CpMode::contiguous) {
    Value share = e.maxIdx(localTotal, e.idx(1));
    rank = e.minIdx(e.divU(g, share), e.idx(cp - 1));
    local = e.sub(g, e.mul(rank, share));
  } else {
    // TE dual-chunk: chunk c of the sequence is on rank c, or 2cp-1-c in
    // the second half.
    Value s = e.findSequence(cup, n, g, 1);
    Value start = e.toIndex(e.cuAt(cup, s, /*inBounds=*/true));
    Value end = e.toIndex(e.cuAt(cup, e.add(s, e.idx(1)),
                                 /*inBounds=*/e.staticLength(cup) >= 2));
    Value chunkLen =
        e.maxIdx(e.divS(e.sub(end, start), e.idx(2 * cp)), e.idx(1));
    Value k = e.sub(g, start);
    Value chunk = e.divS(k, chunkLen);
    Value firstHalf = e.cmp(P::slt, chunk, e.idx(cp));
    rank = e.select(firstHalf, chunk, e.sub(e.idx(2 * cp - 1), chunk));
    rank = e.clamp(rank, 0, cp - 1);
    local = e.add(e.add(e.divS(start, e.idx(cp)), e.remS(k, chunkLen)),
                  e.select(firstHalf, e.idx(0), chunkLen));
  }
  Value sequenceSource =
      e.clamp(e.add(e.mul(rank, e.idx(perRank)), local), 0, cp * perRank - 1);
  Value source = e.select(e.cmp(P::slt, g, total), sequenceSource, tailSource);
  return e.elementCache[key] = source;
}
} // namespace

Value mlir::thd::lowerElement(CpUnsliceOp op, ElementEmitter &e, OpResult,
                              Value g) {
  if (e.intAttr(op.getCp()) == 1)
    return e.row(op.getInput(), g);
  return e.row(op.getInput(), unsliceSource(op, e, g));
}
Value mlir::thd::lowerRowCount(CpUnsliceOp, ElementEmitter &e,
                               OpResult result) {
  return allRows(e, result);
}

Value mlir::thd::lowerElement(PadTailOp op, ElementEmitter &e, OpResult,
                              Value r) {
  Value inside = e.cmp(arith::CmpIPredicate::slt, r, e.rowCount(op.getInput()));
  Type element = getElementTypeOrSelf(op.getInput().getType());
  return e.select(inside, e.row(op.getInput(), r),
                  e.fillValue(op.getFillAttr(), element));
}
Value mlir::thd::lowerRowCount(PadTailOp op, ElementEmitter &e,
                               OpResult result) {
  if (op.getTargetAttr())
    return allRows(e, result);
  int64_t a = e.intAttr(op.getAlignmentAttr());
  Value rows = e.rowCount(op.getInput());
  Value rounded =
      e.mul(arith::CeilDivUIOp::create(e.b, e.loc, rows, e.idx(a)), e.idx(a));
  return e.minIdx(rounded, e.idx(e.staticLength(result)));
}

Value mlir::thd::lowerElement(SeqIdxOp op, ElementEmitter &e, OpResult,
                              Value r) {
  // The sequence covering the row; rows past the last offset belong to one
  // more sequence (the tail), index n.
  Value cup = op.getCuSeqlensPadded();
  Value n = e.count(op.getNumSeqs(), cup);
  Value s = e.findSequence(cup, n, r, 1);
  Value total = e.toIndex(e.cuAt(cup, n));
  Value index = e.select(e.cmp(arith::CmpIPredicate::sge, r, total), n, s);
  return e.toI32(index);
}
Value mlir::thd::lowerRowCount(SeqIdxOp, ElementEmitter &e, OpResult result) {
  return allRows(e, result);
}

Value mlir::thd::lowerElement(RopePositionsOp op, ElementEmitter &e, OpResult,
                              Value r) {
  // S8: the position of a CP-local row in its global sequence (chunk r, or
  // chunk 2cp-1-r in the second half), then the table row it reads.
  int64_t cp = e.intAttr(op.getCp());
  int64_t tableRows = e.intAttr(op.getTableRows());
  Value cup = op.getCuSeqlensPadded();
  Value n = e.count(op.getNumSeqs(), cup);
  Value s = e.findSequence(cup, n, r, cp);
  Value start = e.toIndex(e.cuAt(cup, s));
  Value localStart = e.divS(start, e.idx(cp));
  Value localLen =
      e.sub(e.divS(e.toIndex(e.cuAt(cup, e.add(s, e.idx(1)))), e.idx(cp)),
            localStart);
  Value k = e.sub(r, localStart);
  Value position = k;
  if (cp > 1) {
    Value rank = e.clamp(e.toIndex(e.scalar(op.getCpRank())), 0, cp - 1);
    Value half = e.divS(localLen, e.idx(2));
    Value first = e.add(e.mul(rank, half), k);
    Value second = e.add(
        e.sub(e.mul(localLen, e.idx(cp)), e.mul(e.add(rank, e.idx(1)), half)),
        e.sub(k, half));
    position =
        e.select(e.cmp(arith::CmpIPredicate::slt, k, half), first, second);
  }
  // A table longer than max_seqlen is indexed by the row's place in the
  // packed buffer: the sequence's start is added. Clamped into the table.
  Value maxSeqlen = e.toIndex(e.scalar(op.getMaxSeqlen()));
  Value absolute =
      e.cmp(arith::CmpIPredicate::sgt, e.idx(tableRows), maxSeqlen);
  position = e.select(absolute, e.add(position, start), position);
  return e.toI32(e.clamp(position, 0, tableRows - 1));
}
Value mlir::thd::lowerRowCount(RopePositionsOp, ElementEmitter &e,
                               OpResult result) {
  return allRows(e, result);
}
