//===- LowerToLoops.cpp - thd pipelines to loops on the host --------------===//
//
// The host target of the element lowering: the kernel is a function of the
// same name over memrefs, and the outputs of each length are one loop.
//
//===----------------------------------------------------------------------===//

#include "codegen/CodegenPasses.h"
#include "codegen/ElementEmitter.h"

namespace mlir::thd {
#define GEN_PASS_DEF_THDLOWERTOLOOPS
#include "codegen/CodegenPasses.h.inc"
} // namespace mlir::thd

using namespace mlir;
using namespace mlir::thd;

namespace {
class LoopsTarget : public KernelTarget {
public:
  Block *createKernel(func::FuncOp pipeline, ArrayRef<Type> argTypes) override {
    OpBuilder b(pipeline);
    auto func = func::FuncOp::create(b, pipeline.getLoc(), pipeline.getName(),
                                     b.getFunctionType(argTypes, {}));
    Block *body = func.addEntryBlock();
    b.setInsertionPointToStart(body);
    func::ReturnOp::create(b, pipeline.getLoc());
    return body;
  }

  Value beginElements(ElementEmitter &e, int64_t length) override {
    auto loop =
        scf::ForOp::create(e.b, e.loc, e.idx(0), e.idx(length), e.idx(1));
    e.b.setInsertionPoint(loop.getBody()->getTerminator());
    return loop.getInductionVar();
  }

  Value privateCell(ElementEmitter &e) override {
    OpBuilder::InsertionGuard guard(e.b);
    e.b.setInsertionPointToStart(e.scalarAnchor->getBlock());
    return memref::AllocaOp::create(
        e.b, e.loc, MemRefType::get({1}, e.b.getIndexType()));
  }
};

struct LowerToLoopsPass
    : mlir::thd::impl::THDLowerToLoopsBase<LowerToLoopsPass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerElementLoweringModels(registry);
  }
  void runOnOperation() override {
    if (failed(lowerPipelines(getOperation(),
                              [] { return std::make_unique<LoopsTarget>(); })))
      signalPassFailure();
  }
};
} // namespace
