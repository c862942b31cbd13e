//===- LowerToGPU.cpp - thd pipelines to one GPU kernel each --------------===//
//
// The GPU target of the element lowering: the kernel is a gpu.func in the
// gpu.module `thd_kernels`; thread t computes element t of every output that
// long (several a grid stride apart with rows-per-thread or max-blocks);
// every block computes the scalars, reading small metadata arrays from a
// copy in shared memory, and spreads reductions over its threads.
//
//===----------------------------------------------------------------------===//

#include "codegen/CodegenPasses.h"
#include "codegen/ElementEmitter.h"

namespace mlir::thd {
#define GEN_PASS_DEF_THDLOWERTOGPU
#include "codegen/CodegenPasses.h.inc"
} // namespace mlir::thd

using namespace mlir;
using namespace mlir::thd;

namespace {
class GPUTarget : public KernelTarget {
public:
  GPUTarget(int64_t blockSize, int64_t maxBlocks, int64_t rowsPerThread)
      : blockSize(blockSize), maxBlocks(maxBlocks),
        rowsPerThread(rowsPerThread) {}

  Block *createKernel(func::FuncOp pipeline, ArrayRef<Type> argTypes) override {
    // Block size 0 picks one: large blocks when the outputs are long, so that
    // fewer blocks each stage and check the metadata (measured on an H200: at
    // 1M rows per rank 1024 threads are up to 15% faster than 256; at 32K
    // rows and below 256 is as fast or faster).
    if (blockSize == 0)
      blockSize = longestOutput >= (int64_t(1) << 18) ? 1024 : 256;
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
    thread = gpu::GlobalIdOp::create(e.b, e.loc, gpu::Dimension::x);
    int64_t perThread = rowsPerThread;
    grid =
        (longestOutput + blockSize * perThread - 1) / (blockSize * perThread);
    gridStride = maxBlocks > 0 && grid > maxBlocks;
    if (gridStride)
      grid = maxBlocks;
  }

  Value beginElements(ElementEmitter &e, int64_t length) override {
    OpBuilder &b = e.b;
    if (gridStride) {
      auto loop = scf::ForOp::create(b, e.loc, thread, e.idx(length),
                                     e.idx(grid * blockSize));
      b.setInsertionPoint(loop.getBody()->getTerminator());
      return loop.getInductionVar();
    }
    Value element = thread;
    if (rowsPerThread > 1) {
      // A constant trip count: LLVM unrolls it, and the rows' loads overlap.
      auto loop = scf::ForOp::create(b, e.loc, e.idx(0), e.idx(rowsPerThread),
                                     e.idx(1));
      b.setInsertionPoint(loop.getBody()->getTerminator());
      element =
          e.add(thread, e.mul(loop.getInductionVar(), e.idx(grid * blockSize)));
    }
    auto inside = scf::IfOp::create(
        b, e.loc, e.cmp(arith::CmpIPredicate::ult, element, e.idx(length)),
        /*withElseRegion=*/false);
    b.setInsertionPoint(inside.thenBlock()->getTerminator());
    return element;
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
    // All threads of the block copy, then wait: uniform code before the
    // anchor, ahead of every use.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(e.scalarAnchor);
    Value first = gpu::ThreadIdOp::create(b, e.loc, gpu::Dimension::x);
    auto loop = scf::ForOp::create(
        b, e.loc, first, e.idx(type.getNumElements()), e.idx(blockSize));
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value i = loop.getInductionVar();
    memref::StoreOp::create(
        b, e.loc,
        memref::LoadOp::create(b, e.loc, global, ValueRange{i}, false,
                               ElementEmitter::alignOf(global)),
        copy, ValueRange{i}, false, ElementEmitter::alignOf(copy));
    b.setInsertionPointAfter(loop);
    gpu::BarrierOp::create(b, e.loc);
    return staged[global] = copy;
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

  LogicalResult finish(ElementEmitter &e) override {
    OpBuilder &b = e.b;
    kernel->setAttr("thd.block", b.getDenseI64ArrayAttr({blockSize, 1, 1}));
    kernel->setAttr("thd.grid", b.getDenseI64ArrayAttr({grid, 1, 1}));
    kernel.setKnownBlockSizeAttr(
        b.getDenseI32ArrayAttr({int32_t(blockSize), 1, 1}));
    return success();
  }

private:
  int64_t blockSize, maxBlocks, rowsPerThread;
  int64_t grid = 1;
  bool gridStride = false;
  gpu::GPUFuncOp kernel;
  Value thread;
  DenseMap<Value, Value> staged;
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
    if (maxBlocks < 0 || maxBlocks > INT32_MAX || rowsPerThread < 1 ||
        rowsPerThread > 64) {
      getOperation().emitError()
          << "max-blocks must be in [0, 2147483647] and rows-per-thread in "
             "[1, 64], got "
          << static_cast<int64_t>(maxBlocks) << " and "
          << static_cast<int64_t>(rowsPerThread);
      return signalPassFailure();
    }
    if (failed(lowerPipelines(getOperation(), [&] {
          return std::make_unique<GPUTarget>(blockSize, maxBlocks,
                                             rowsPerThread);
        })))
      signalPassFailure();
  }
};
} // namespace
