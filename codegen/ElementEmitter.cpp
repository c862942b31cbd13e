//===- ElementEmitter.cpp - a pipeline's outputs, element by element ------===//
//
// Every result of a pipeline is computed element by element, pulling each
// element through the chain of thd steps that defines it: the row of a tail-
// padded CP slice of a sanitised token is one load, one sequence lookup (a
// cursor, else a binary search) and a few selects, with no intermediate
// buffer. This is the fusion that makes a
// microbatch one kernel; the same element code runs in loops on the CPU and,
// mapped onto GPU threads, on the device.
//
//===----------------------------------------------------------------------===//

#include "codegen/ElementEmitter.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::thd;

#include "codegen/ElementLowering.cpp.inc"

llvm::MaybeAlign ElementEmitter::alignOf(Value memref) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  return llvm::Align(
      std::max<unsigned>(1, element.getIntOrFloatBitWidth() / 8));
}

Value ElementEmitter::load(Value memref, Value index, bool inBounds) {
  int64_t size = cast<MemRefType>(memref.getType()).getDimSize(0);
  Value at = inBounds ? index : clamp(index, 0, size - 1);
  return memref::LoadOp::create(b, loc, memref, ValueRange{at},
                                /*nontemporal=*/false, alignOf(memref));
}

void ElementEmitter::storeElements(ArrayRef<Value> values, Value out,
                                   ArrayRef<Value> elements) {
  auto scalarStores = [&] {
    for (auto [value, element] : llvm::zip_equal(values, elements))
      memref::StoreOp::create(b, loc, value, out, ValueRange{element},
                              /*nontemporal=*/false, alignOf(out));
  };
  Type elementType = cast<MemRefType>(out.getType()).getElementType();
  unsigned bits = elementType.getIntOrFloatBitWidth();
  // i1 is a byte an element in a buffer but a bit in a vector: stored one
  // byte at a time.
  if (values.size() == 1 || bits % 8 != 0)
    return scalarStores();
  int64_t bytes = int64_t(values.size()) * bits / 8;
  Value &aligned = alignedOutputs[{out, bytes}];
  if (!aligned) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(scalarAnchor);
    Value address = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, out);
    aligned = cmp(arith::CmpIPredicate::eq,
                  arith::RemUIOp::create(b, loc, address, idx(bytes)), idx(0));
  }
  auto ifAligned = scf::IfOp::create(b, loc, aligned, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifAligned.thenBlock()->getTerminator());
  auto vectorType = VectorType::get({int64_t(values.size())}, elementType);
  Value vector = vector::FromElementsOp::create(b, loc, vectorType, values);
  vector::StoreOp::create(b, loc, vector, out, ValueRange{elements.front()},
                          /*nontemporal=*/false, llvm::MaybeAlign(bytes));
  b.setInsertionPoint(ifAligned.elseBlock()->getTerminator());
  scalarStores();
}

Value ElementEmitter::fillValue(TypedAttr fill, Type elementType) {
  return arith::ConstantOp::create(b, loc, fillConstant(fill, elementType));
}

Value ElementEmitter::resolve(Value value) {
  if (auto fused = value.getDefiningOp<FusedOp>())
    return fused.getYieldedValues()[cast<OpResult>(value).getResultNumber()];
  return value;
}

ElementLoweringOpInterface ElementEmitter::loweringOf(Value value,
                                                      StringRef role) {
  Operation *def = value.getDefiningOp();
  auto lowering = dyn_cast<ElementLoweringOpInterface>(def);
  if (!lowering) {
    def->emitOpError() << "cannot be lowered " << role
                       << ": it has no element lowering";
    fail();
  }
  return lowering;
}

Operation *KernelTarget::argumentLoadPoint(ElementEmitter &emitter) {
  return emitter.hoistPoint();
}

Operation *ElementEmitter::hoistPoint() {
  // Scalar code is emitted lazily, when a step first asks for a scalar,
  // and it may itself ask for another one from inside a region of its own:
  // chunk_count sums every sequence's chunks in a loop whose body reads the
  // entries of a pad_tail_metadata op, whose scalars are then computed for
  // the first time. Placed before the anchor, they would follow that loop
  // and not dominate its body. Scalars depend on no element, so they may go
  // as early as needed: before the kernel-level op being built, which every
  // later use follows. (A request from the element code, after the anchor,
  // or from straight-line scalar code at the anchor gets the anchor.)
  Block *body = scalarAnchor->getBlock();
  Block *block = b.getInsertionBlock();
  Operation *at = nullptr;
  if (block == body) {
    if (b.getInsertionPoint() != body->end())
      at = &*b.getInsertionPoint();
  } else if (block && block->getParentOp()) {
    at = body->findAncestorOpInBlock(*block->getParentOp());
  }
  if (at && at->isBeforeInBlock(scalarAnchor))
    return at;
  return scalarAnchor;
}

Value ElementEmitter::scalar(Value tensor) {
  tensor = resolve(tensor);
  if (Value cached = scalars.lookup(tensor))
    return cached;
  OpBuilder::InsertionGuard guard(b);
  if (auto arg = dyn_cast<BlockArgument>(tensor)) {
    b.setInsertionPoint(target.argumentLoadPoint(*this));
    return scalars[tensor] = load(memrefOf.lookup(arg), idx(0));
  }
  b.setInsertionPoint(hoistPoint());
  Value value;
  if (auto lowering = loweringOf(tensor, "as a scalar"))
    value = lowering.emitElement(*this, cast<OpResult>(tensor), Value());
  // A step that defines several scalars at once has recorded them all.
  if (Value defined = scalars.lookup(tensor))
    return defined;
  return scalars[tensor] = value ? value : i32(0);
}

Value ElementEmitter::entry(Value array, Value i, bool inBounds) {
  array = resolve(array);
  if (auto arg = dyn_cast<BlockArgument>(array))
    return load(target.readableArray(*this, memrefOf.lookup(arg)), i, inBounds);
  if (auto lowering = loweringOf(array, "as an offset array"))
    if (Value value = lowering.emitElement(*this, cast<OpResult>(array), i))
      return value;
  return i32(0);
}

Value ElementEmitter::cuAt(Value array, Value i, bool inBounds) {
  return select(cmp(arith::CmpIPredicate::eq, i, idx(0)), i32(0),
                entry(array, i, inBounds));
}

Value ElementEmitter::row(Value tensor, Value r) {
  tensor = resolve(tensor);
  auto key = std::make_pair(tensor, r);
  if (Value cached = rows.lookup(key))
    return cached;
  Value result;
  if (auto arg = dyn_cast<BlockArgument>(tensor)) {
    result = load(memrefOf.lookup(arg), r);
  } else {
    if (auto lowering = loweringOf(tensor, "per row"))
      result = lowering.emitElement(*this, cast<OpResult>(tensor), r);
    if (!result)
      result = fillValue({}, getElementTypeOrSelf(tensor.getType()));
  }
  return rows[key] = result;
}

Value ElementEmitter::rowCount(Value tensor) {
  tensor = resolve(tensor);
  if (isa<BlockArgument>(tensor))
    return idx(staticLength(tensor));
  if (auto lowering = loweringOf(tensor, "as a row count"))
    if (Value value = lowering.emitRowCount(*this, cast<OpResult>(tensor)))
      return value;
  return idx(staticLength(tensor));
}

Value ElementEmitter::count(Value numSeqs, Value array) {
  int64_t last = staticLength(array) - 1;
  if (!numSeqs)
    return idx(last);
  auto key = std::make_pair(numSeqs, last);
  if (Value cached = counts.lookup(key))
    return cached;
  Value n = scalar(numSeqs);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(hoistPoint());
  return counts[key] = clamp(toIndex(n), 0, last);
}

Value ElementEmitter::sequenceStart(Value cuPadded, Value s, int64_t divisor,
                                    bool inBounds) {
  Value start = entry(cuPadded, s, inBounds);
  return toIndex(divisor == 1 ? start : divS(start, i32(divisor)));
}

Value ElementEmitter::searchSequence(Value cuPadded, Value n, Value pos,
                                     int64_t divisor) {
  Type indexType = b.getIndexType();
  auto loop = scf::WhileOp::create(b, loc, TypeRange{indexType, indexType},
                                   ValueRange{idx(1), add(n, idx(1))});
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
  Value start = sequenceStart(cuPadded, mid, divisor, /*inBounds=*/true);
  Value goRight = cmp(arith::CmpIPredicate::sle, start, pos);
  scf::YieldOp::create(b, loc,
                       ValueRange{select(goRight, add(mid, idx(1)), lo),
                                  select(goRight, hi, mid)});
  b.setInsertionPointAfter(loop);
  return sub(loop.getResult(0), idx(1));
}

Value ElementEmitter::findSequence(Value cuPadded, Value n, Value pos,
                                   int64_t divisor) {
  cuPadded = resolve(cuPadded);
  auto key = std::make_tuple(cuPadded, n, pos, divisor);
  if (Value cached = sequences.lookup(key))
    return cached;

  // The cursor starts at sequence 0, before every element loop.
  Value &cell = cursors[std::make_tuple(cuPadded, n, divisor)];
  if (!cell) {
    // Before any search that reads it, element code or not.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(hoistPoint());
    cell = target.privateCell(*this);
    memref::StoreOp::create(b, loc, idx(0), cell, ValueRange{idx(0)});
  }
  using P = arith::CmpIPredicate;
  auto startOf = [&](Value s) { return sequenceStart(cuPadded, s, divisor); };
  // s answers pos when (s == 0 or start(s) <= pos) and (s is the last
  // sequence or start(s + 1) > pos). The hint is an earlier answer, so in
  // [0, max(n - 1, 0)].
  Value last = sub(n, idx(1));
  Value hint = memref::LoadOp::create(b, loc, cell, ValueRange{idx(0)});
  Value next = add(hint, idx(1));
  Value hintEnd = startOf(next);
  Value inHint =
      andI(orI(cmp(P::eq, hint, idx(0)), cmp(P::sle, startOf(hint), pos)),
           orI(cmp(P::sge, hint, last), cmp(P::sgt, hintEnd, pos)));
  Value inNext = andI(andI(cmp(P::slt, hint, last), cmp(P::sle, hintEnd, pos)),
                      orI(cmp(P::sge, next, last),
                          cmp(P::sgt, startOf(add(hint, idx(2))), pos)));
  auto found = scf::IfOp::create(b, loc, TypeRange{b.getIndexType()},
                                 orI(inHint, inNext), /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(found.thenBlock());
    scf::YieldOp::create(b, loc, ValueRange{select(inHint, hint, next)});
    b.setInsertionPointToStart(found.elseBlock());
    Value s = searchSequence(cuPadded, n, pos, divisor);
    scf::YieldOp::create(b, loc,
                         ValueRange{maxIdx(minIdx(s, last), idx(0))});
  }
  Value s = found.getResult(0);
  memref::StoreOp::create(b, loc, s, cell, ValueRange{idx(0)});
  return sequences[key] = s;
}

Value ElementEmitter::paddingAt(Value cu, Value cuPadded, Value n, Value r) {
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

Value ElementEmitter::reduceEntries(Value end, Value init,
                                    gpu::AllReduceOperation combine,
                                    function_ref<Value(Value, Value)> body) {
  auto [first, step] = target.entryLoopStart(*this, idx(1), idx(1));
  auto loop = scf::ForOp::create(b, loc, first, end, step, ValueRange{init});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    scf::YieldOp::create(
        b, loc,
        ValueRange{body(loop.getInductionVar(), loop.getRegionIterArgs()[0])});
  }
  return target.combinePartials(*this, loop.getResult(0), combine);
}

LogicalResult ElementEmitter::run() {
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
  auto ret = cast<func::ReturnOp>(pipeline.front().getTerminator());
  for (Value returned : ret.getOperands()) {
    target.longestOutput =
        std::max(target.longestOutput, staticLength(returned));
    target.outputLengths.push_back(staticLength(returned));
  }

  unsigned numInputs = pipeline.getNumArguments();
  Block *body = target.createKernel(pipeline, argTypes);
  kernel = body->getParentOp();
  // Buffers keep their names; capacities are now their static sizes. No two
  // buffers overlap (the runtime refuses a launch where they do), which
  // tells LLVM that a row's loads may all be issued before its stores.
  auto func = cast<FunctionOpInterface>(kernel);
  auto named = [&](DictionaryAttr attrs) -> NamedAttrList {
    NamedAttrList kept;
    if (attrs)
      if (Attribute name = attrs.get(THDDialect::kNameAttrName))
        kept.append(THDDialect::kNameAttrName, name);
    kept.append(LLVM::LLVMDialect::getNoAliasAttrName(), b.getUnitAttr());
    return kept;
  };
  for (unsigned i = 0; i < numInputs; ++i)
    func.setArgAttrs(i, named(pipeline.getArgAttrDict(i)).getAttrs());
  for (unsigned i = 0, e = pipeline.getNumResults(); i < e; ++i)
    func.setArgAttrs(numInputs + i,
                     named(pipeline.getResultAttrDict(i)).getAttrs());
  for (unsigned i = 0; i < numInputs; ++i)
    memrefOf.map(pipeline.getArgument(i), body->getArgument(i));

  // Scalars go before the anchor, the element code after it.
  b.setInsertionPointToStart(body);
  scalarAnchor = idx(0).getDefiningOp();
  b.setInsertionPoint(body->getTerminator());
  target.begin(*this);

  // Outputs of one length share one loop (or one guarded region on the GPU),
  // so that what they have in common (a search, a source row, the mask) is
  // computed once per element.
  llvm::MapVector<int64_t, SmallVector<unsigned>> byLength;
  for (auto [i, returned] : llvm::enumerate(ret.getOperands()))
    byLength[staticLength(returned)].push_back(unsigned(i));
  for (auto &[length, outputs] : byLength) {
    OpBuilder::InsertionGuard guard(b);
    rows.clear();
    sequences.clear();
    elementCache.clear();
    int64_t width = target.vectorWidth(length);
    Value first = target.beginElements(*this, length);
    SmallVector<Value, 2> elements = {first};
    for (int64_t k = 1; k < width; ++k)
      elements.push_back(add(first, idx(k)));
    // Every value first, then every store: the step's loads are all in
    // flight together instead of each waiting for the store before it.
    SmallVector<std::pair<SmallVector<Value, 2>, Value>> stores;
    for (unsigned i : outputs) {
      Value value = resolve(ret.getOperand(i));
      ResultKind kind = ResultKind::Rows;
      if (auto step = value.getDefiningOp<StepOpInterface>())
        kind = step.getResultKind(cast<OpResult>(value).getResultNumber());
      SmallVector<Value, 2> stored;
      for (Value element : elements) {
        switch (kind) {
        case ResultKind::Scalar:
          stored.push_back(scalar(value));
          break;
        case ResultKind::Entries:
          stored.push_back(entry(value, element));
          break;
        case ResultKind::Rows:
          stored.push_back(row(value, element));
          break;
        }
      }
      stores.emplace_back(std::move(stored), body->getArgument(numInputs + i));
    }
    for (auto &[stored, out] : stores)
      storeElements(stored, out, elements);
  }
  if (failed(target.finish(*this)))
    status = failure();
  if (failed(status)) {
    kernel->erase();
    return failure();
  }
  pipeline.erase();
  return success();
}

namespace {
/// The lowering reads every configuration attribute as an integer: an
/// expression left unbound (no thd-bind-params or thd-force-static-shapes
/// before it) is an error here, not a crash later.
LogicalResult requireBoundParams(ModuleOp module) {
  WalkResult walk = module.walk([](Operation *op) {
    for (NamedAttribute attr : op->getAttrs())
      if (auto expr = dyn_cast<ExprAttr>(attr.getValue())) {
        op->emitOpError() << "still holds the parameter expression \""
                          << expr.getText() << "\" in '"
                          << attr.getName().getValue()
                          << "'; bind the parameters first (thd-bind-params or "
                             "thd-force-static-shapes)";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// The functions of `module` that hold thd steps.
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
} // namespace

LogicalResult mlir::thd::lowerPipelines(
    ModuleOp module, function_ref<std::unique_ptr<KernelTarget>()> makeTarget) {
  if (failed(requireBoundParams(module)))
    return failure();
  for (func::FuncOp func : pipelinesOf(module)) {
    std::unique_ptr<KernelTarget> target = makeTarget();
    if (failed(ElementEmitter(func, *target).run()))
      return failure();
  }
  return success();
}
