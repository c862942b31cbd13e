// The driver including the folders below it: no violation.
#include "codegen/CodegenPasses.h"
#include "compiler/Compiler.h"
#include "runtime/Manifest.h"
