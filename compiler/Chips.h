//===- Chips.h - the GPU architectures thdc compiles for --------*- C++ -*-===//
//
// The table of GPU architectures the compiler emits PTX for: each chip's PTX
// ISA version and the multiprocessors of its usual part. Below both the pass
// pipelines (compiler/Pipelines.h) and the targets (compiler/Targets.h).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_CHIPS_H
#define THDC_COMPILER_CHIPS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LogicalResult.h"

#include <cstdint>
#include <optional>

namespace mlir {
class Operation;
} // namespace mlir

namespace thdc {

/// The multiprocessor count of the usual data-centre part of `chip` (H100
/// and H200 for sm_90), for a launch geometry chosen without the device; 132
/// for a chip without an entry.
int64_t defaultSmCount(llvm::StringRef chip);

/// The PTX ISA version thdc emits for `chip` (80 for PTX 8.0), or none when
/// it does not compile for that chip.
std::optional<unsigned> ptxVersionFor(llvm::StringRef chip);

/// Fails with a diagnostic on `anchor` unless `chip` is an architecture
/// this compiler emits PTX for (sm_75 to sm_121f; see ptxVersionFor).
mlir::LogicalResult checkGpuChip(mlir::Operation *anchor, llvm::StringRef chip);

} // namespace thdc

#endif // THDC_COMPILER_CHIPS_H
