// A runtime file that breaks the layering rule in each way the include
// check must catch (test/runtime/CMakeLists.txt expects it to fail).
#include "runtime/Status.h"
#include "reference/StatusBits.h"
#include "compiler/Compiler.h"
#include "llvm/Support/Error.h"
#include <mlir/IR/Builders.h>
#include <cuda.h>
