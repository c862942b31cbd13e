//===- LowerToGPU.cpp - thd pipelines to one GPU kernel each --------------===//
//
// The GPU target of the element lowering: the kernel is a gpu.func in the
// gpu.module `thd_kernels`. Block b computes tile b of every output (blocks
// loop over tiles when max-blocks caps the grid): `block-size *
// rows-per-thread` consecutive elements, each warp a span of them, its lanes
// a warp apart, so that a lane meets the rows in order and its sequence
// cursor moves forward. Every block computes the scalars, reading small
// metadata arrays from a copy in shared memory, and spreads reductions over
// its threads.
//
//===----------------------------------------------------------------------===//

#include "codegen/CodegenPasses.h"
#include "codegen/ElementEmitter.h"
#include "dialect/THDDialect.h"

namespace mlir::thd {
#define GEN_PASS_DEF_THDLOWERTOGPU
#include "codegen/CodegenPasses.h.inc"
} // namespace mlir::thd

using namespace mlir;
using namespace mlir::thd;

namespace {
class GPUTarget : public KernelTarget {
public:
  GPUTarget(int64_t blockSize, int64_t maxBlocks, int64_t rowsPerThread,
            int64_t smCount, int64_t vectorOption)
      : blockSize(blockSize), maxBlocks(maxBlocks),
        rowsPerThread(rowsPerThread), smCount(smCount),
        vectorOption(vectorOption) {}

  /// Threads a multiprocessor keeps resident (sm_80 and sm_90; fewer on some
  /// chips, where a wave is then a little longer than one).
  static constexpr int64_t kThreadsPerMultiprocessor = 2048;
  /// The most rows per thread chosen (more is an option): past one wave,
  /// more rows per thread in fewer blocks is slower, since a thread has one
  /// row's loads in flight at a time; two rows let the cursor answer the
  /// second row without a search (docs/launch-geometry.md).
  static constexpr int64_t kMaxChosenRowsPerThread = 2;

  /// Outputs this long or longer are computed two elements a step by
  /// default (and their blocks are large, below).
  static constexpr int64_t kLongOutput = int64_t(1) << 18;

  /// Two consecutive elements a step, stored with one 16-byte (i64), 8-byte
  /// (i32, f32) access, on long outputs of even length: a warp's store then
  /// covers 512 bytes instead of 256, measured faster from 2^18 rows on
  /// (docs/launch-geometry.md). The option forces one or two on every
  /// output of even length.
  int64_t vectorWidth(int64_t length) override {
    if (length % 2 != 0 || vectorOption == 1)
      return 1;
    return vectorOption == 2 || length >= kLongOutput ? 2 : 1;
  }

  Block *createKernel(func::FuncOp pipeline, ArrayRef<Type> argTypes) override {
    // Block size 0 picks one: large blocks when the outputs are long, so that
    // fewer blocks each stage and check the metadata (measured on an H200: at
    // 1M rows per rank 1024 threads are up to 15% faster than 256; at 32K
    // rows and below 256 is as fast or faster).
    if (blockSize == 0)
      blockSize = longestOutput >= kLongOutput ? 1024 : 256;
    Location loc = pipeline.getLoc();
    auto module = pipeline->getParentOfType<ModuleOp>();
    OpBuilder b(module.getContext());
    auto kernels = module.lookupSymbol<gpu::GPUModuleOp>("thd_kernels");
    if (!kernels) {
      b.setInsertionPointToEnd(module.getBody());
      kernels = gpu::GPUModuleOp::create(b, loc, "thd_kernels");
      module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      b.getUnitAttr());
    }
    b.setInsertionPointToStart(kernels.getBody());
    kernel = gpu::GPUFuncOp::create(b, loc, pipeline.getName(),
                                    b.getFunctionType(argTypes, {}));
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    b.setInsertionPointToEnd(&kernel.getBody().front());
    gpu::ReturnOp::create(b, loc);
    return &kernel.getBody().front();
  }

  void begin(ElementEmitter &e) override {
    OpBuilder &b = e.b;
    // Rows per thread 0 picks one step a thread when one wave of resident
    // blocks covers the most steps or when a step is two elements, else two
    // (docs/launch-geometry.md has the measurements): the second row of a
    // thread is found by the cursor without a search, which a two-element
    // step already gives.
    // The most steps of any output (a step is vectorWidth elements).
    int64_t steps = 1;
    for (int64_t length : outputLengths)
      steps = std::max(steps, length / vectorWidth(length));
    if (rowsPerThread == 0) {
      int64_t wave = smCount * std::max<int64_t>(
                                   1, kThreadsPerMultiprocessor / blockSize) *
                     blockSize;
      rowsPerThread = vectorWidth(longestOutput) > 1
                          ? 1
                          : std::clamp<int64_t>((steps + wave - 1) / wave, 1,
                                                kMaxChosenRowsPerThread);
    }
    // A group is a warp (or the whole block when the block is not a number
    // of warps); it owns a span of `group * rowsPerThread` consecutive
    // elements of the block's tile, its lanes `group` elements apart, so that
    // accesses are coalesced and each lane walks forward through the
    // sequences (findSequence's cursor).
    group = blockSize % 32 == 0 ? 32 : blockSize;
    tileSize = blockSize * rowsPerThread;
    grid = (steps + tileSize - 1) / tileSize;
    gridStride = maxBlocks > 0 && grid > maxBlocks;
    if (gridStride)
      grid = maxBlocks;
    {
      // The staging copies and the loads of one-element inputs go before
      // this barrier, at the kernel's entry; it is dropped if nothing is
      // staged.
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&kernel.getBody().front());
      stagingBarrier = gpu::BarrierOp::create(b, e.loc);
    }
    Value tid = gpu::ThreadIdOp::create(b, e.loc, gpu::Dimension::x);
    Value lane = arith::RemUIOp::create(b, e.loc, tid, e.idx(group));
    Value groupIndex = e.divU(tid, e.idx(group));
    inTile = e.add(e.mul(groupIndex, e.idx(group * rowsPerThread)), lane);
  }

  Value beginElements(ElementEmitter &e, int64_t length) override {
    OpBuilder &b = e.b;
    int64_t width = vectorWidth(length);
    int64_t steps = length / width;
    Value tile = gpu::BlockIdOp::create(b, e.loc, gpu::Dimension::x);
    if (gridStride) {
      int64_t tiles = (steps + tileSize - 1) / tileSize;
      auto loop = scf::ForOp::create(b, e.loc, tile, e.idx(tiles), e.idx(grid));
      b.setInsertionPoint(loop.getBody()->getTerminator());
      tile = loop.getInductionVar();
    }
    Value element = e.add(e.mul(tile, e.idx(tileSize)), inTile);
    if (rowsPerThread > 1) {
      // A constant trip count: LLVM unrolls it.
      auto loop = scf::ForOp::create(b, e.loc, e.idx(0), e.idx(rowsPerThread),
                                     e.idx(1));
      b.setInsertionPoint(loop.getBody()->getTerminator());
      element = e.add(element, e.mul(loop.getInductionVar(), e.idx(group)));
    }
    auto inside = scf::IfOp::create(
        b, e.loc, e.cmp(arith::CmpIPredicate::ult, element, e.idx(steps)),
        /*withElseRegion=*/false);
    b.setInsertionPoint(inside.thenBlock()->getTerminator());
    return width == 1 ? element : e.mul(element, e.idx(width));
  }

  /// Small metadata arrays are copied into shared memory once per block:
  /// every search and check reads them there, where the streaming token
  /// loads cannot evict them from the cache.
  Value readableArray(ElementEmitter &e, Value global) override {
    auto type = cast<MemRefType>(global.getType());
    constexpr int64_t kMaxStagedBytes = 16 * 1024;
    if (type.getNumElements() * type.getElementTypeBitWidth() / 8 >
        kMaxStagedBytes)
      return global;
    if (Value copy = staged.lookup(global))
      return copy;
    OpBuilder &b = e.b;
    auto shared = MemRefType::get(
        type.getShape(), type.getElementType(), MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(b.getContext(),
                                   gpu::AddressSpace::Workgroup));
    Value copy = kernel.addWorkgroupAttribution(shared, e.loc);
    // All threads of the block copy at the kernel's entry, where nothing
    // else has run (the copy reads only a kernel argument), and one barrier
    // after every copy makes them visible to a first read from anywhere in
    // the kernel. Each thread's loads of every staged array come before its
    // first store to shared memory, so that they are all in flight together
    // instead of one array's round trip after another's.
    OpBuilder::InsertionGuard guard(b);
    int64_t n = type.getNumElements();
    llvm::MaybeAlign align = ElementEmitter::alignOf(global);
    SmallVector<std::pair<Value, Value>> loaded; // (index, value)
    b.setInsertionPoint(firstStagingStore ? firstStagingStore : stagingBarrier);
    Value tid = gpu::ThreadIdOp::create(b, e.loc, gpu::Dimension::x);
    for (int64_t k = 0; k * blockSize < n; ++k) {
      Value i = e.add(tid, e.idx(k * blockSize));
      // The last round's index is clamped for the load, its store guarded.
      Value at = (k + 1) * blockSize > n ? e.minIdx(i, e.idx(n - 1)) : i;
      loaded.emplace_back(i,
                          memref::LoadOp::create(b, e.loc, global,
                                                 ValueRange{at}, false, align));
    }
    b.setInsertionPoint(stagingBarrier);
    for (auto [k, entry] : llvm::enumerate(loaded)) {
      auto [i, value] = entry;
      OpBuilder::InsertionGuard inner(b);
      if (int64_t(k + 1) * blockSize > n) {
        auto inside = scf::IfOp::create(
            b, e.loc, e.cmp(arith::CmpIPredicate::ult, i, e.idx(n)),
            /*withElseRegion=*/false);
        b.setInsertionPoint(inside.thenBlock()->getTerminator());
      }
      auto store =
          memref::StoreOp::create(b, e.loc, value, copy, ValueRange{i}, false,
                                  ElementEmitter::alignOf(copy));
      if (!firstStagingStore)
        firstStagingStore = b.getInsertionBlock() == stagingBarrier->getBlock()
                                ? store.getOperation()
                                : b.getInsertionBlock()->getParentOp();
    }
    return staged[global] = copy;
  }

  Value privateCell(ElementEmitter &e) override {
    return kernel.addPrivateAttribution(
        MemRefType::get({1}, e.b.getIndexType(), MemRefLayoutAttrInterface(),
                        gpu::AddressSpaceAttr::get(
                            e.b.getContext(), gpu::AddressSpace::Private)),
        e.loc);
  }

  std::pair<Value, Value> entryLoopStart(ElementEmitter &e, Value first,
                                         Value step) override {
    return {
        e.add(first, gpu::ThreadIdOp::create(e.b, e.loc, gpu::Dimension::x)),
        e.idx(blockSize)};
  }

  Value combinePartials(ElementEmitter &e, Value partial,
                        gpu::AllReduceOperation combine) override {
    return gpu::AllReduceOp::create(
        e.b, e.loc, partial.getType(), partial,
        gpu::AllReduceOperationAttr::get(e.b.getContext(), combine),
        e.b.getUnitAttr());
  }

  Operation *argumentLoadPoint(ElementEmitter &e) override {
    return stagingBarrier;
  }

  LogicalResult finish(ElementEmitter &e) override {
    OpBuilder &b = e.b;
    if (staged.empty())
      stagingBarrier->erase();
    kernel->setAttr(THDDialect::kBlockAttrName,
                    b.getDenseI64ArrayAttr({blockSize, 1, 1}));
    kernel->setAttr(THDDialect::kGridAttrName,
                    b.getDenseI64ArrayAttr({grid, 1, 1}));
    kernel.setKnownBlockSizeAttr(
        b.getDenseI32ArrayAttr({int32_t(blockSize), 1, 1}));
    return success();
  }

private:
  int64_t blockSize, maxBlocks, rowsPerThread, smCount, vectorOption;
  int64_t group = 32, tileSize = 1, grid = 1;
  bool gridStride = false;
  gpu::GPUFuncOp kernel;
  /// The thread's first element in its block's tile.
  Value inTile;
  DenseMap<Value, Value> staged;
  /// The barrier after the staging copies, at the kernel's entry, and the
  /// first store of those copies (every copy's loads go before it).
  Operation *stagingBarrier = nullptr;
  Operation *firstStagingStore = nullptr;
};

struct LowerToGPUPass : mlir::thd::impl::THDLowerToGPUBase<LowerToGPUPass> {
  using Base::Base;
  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerElementLoweringModels(registry);
  }
  void runOnOperation() override {
    if (blockSize < 0 || blockSize > 1024) {
      getOperation().emitError()
          << "block-size must be in [1, 1024] (or 0: chosen from the "
             "output lengths), got "
          << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    // Bounded so that blocks * threads * rows stays far inside 32 bits.
    if (maxBlocks < 0 || maxBlocks > INT32_MAX || rowsPerThread < 0 ||
        rowsPerThread > 64) {
      getOperation().emitError()
          << "max-blocks must be in [0, 2147483647] and rows-per-thread in "
             "[1, 64] (or 0: chosen), got "
          << static_cast<int64_t>(maxBlocks) << " and "
          << static_cast<int64_t>(rowsPerThread);
      return signalPassFailure();
    }
    if (vectorWidth < 0 || vectorWidth > 2) {
      getOperation().emitError()
          << "vector-width must be 1 or 2 (or 0: chosen from the output "
             "lengths), got "
          << static_cast<int64_t>(vectorWidth);
      return signalPassFailure();
    }
    if (smCount < 1 || smCount > 4096) {
      getOperation().emitError() << "sm-count must be in [1, 4096], got "
                                 << static_cast<int64_t>(smCount);
      return signalPassFailure();
    }
    if (failed(lowerPipelines(getOperation(), [&] {
          return std::make_unique<GPUTarget>(
              blockSize, maxBlocks, rowsPerThread, smCount, vectorWidth);
        })))
      signalPassFailure();
  }
};
} // namespace
