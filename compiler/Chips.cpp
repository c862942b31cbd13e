//===- Chips.cpp - the GPU architectures thdc compiles for ----------------===//

#include "compiler/Chips.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"

using namespace mlir;

namespace {
/// The chips thdc compiles for and the PTX ISA version it emits for each: the
/// oldest that the chip needs (from the PTX ISA's table of targets), and
/// never older than 8.0, what sm_75 to sm_90 have always been given. The
/// `a` (architecture-specific) and `f` (family) variants need what their
/// base chip needs, or the version that introduced them.
struct ChipPtx {
  llvm::StringLiteral chip;
  unsigned ptx; // 80 = PTX ISA 8.0
  /// Multiprocessors of the chip's usual data-centre part (its largest
  /// where there is none), for the launch geometry when the device is not
  /// known: T4, A100, A10, Orin, L40S, H100/H200 SXM, B200, GB10's sibling,
  /// B300, Thor, RTX PRO 6000, GB10.
  int64_t sms;
};
constexpr ChipPtx kChips[] = {
    {"sm_75", 80, 40},    {"sm_80", 80, 108},  {"sm_86", 80, 72},
    {"sm_87", 80, 16},    {"sm_89", 80, 142},  {"sm_90", 80, 132},
    {"sm_90a", 80, 132},  {"sm_100", 86, 148}, {"sm_100a", 86, 148},
    {"sm_100f", 88, 148}, {"sm_101", 86, 20},  {"sm_101a", 86, 20},
    {"sm_101f", 88, 20},  {"sm_103", 88, 148}, {"sm_103a", 88, 148},
    {"sm_103f", 88, 148}, {"sm_110", 90, 20},  {"sm_110a", 90, 20},
    {"sm_110f", 90, 20},  {"sm_120", 87, 188}, {"sm_120a", 87, 188},
    {"sm_120f", 88, 188}, {"sm_121", 88, 48},  {"sm_121a", 88, 48},
    {"sm_121f", 88, 48},
};
} // namespace

std::optional<unsigned> thdc::ptxVersionFor(llvm::StringRef chip) {
  for (const ChipPtx &entry : kChips)
    if (entry.chip == chip)
      return entry.ptx;
  return std::nullopt;
}

int64_t thdc::defaultSmCount(llvm::StringRef chip) {
  for (const ChipPtx &entry : kChips)
    if (entry.chip == chip)
      return entry.sms;
  return 132;
}

LogicalResult thdc::checkGpuChip(Operation *anchor, llvm::StringRef chip) {
  // A chip without an entry is a diagnostic here, not a fatal error in the
  // NVPTX back end (which would end a process using the JIT).
  if (ptxVersionFor(chip))
    return success();
  std::string known;
  for (const ChipPtx &entry : kChips)
    known += (known.empty() ? "" : ", ") + entry.chip.str();
  return anchor->emitError() << "unsupported GPU architecture '" << chip
                             << "' (thdc compiles for " << known << ")";
}
