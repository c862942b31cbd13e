//===- Status.h - errors of the runtime ------------------------*- C++ -*-===//
//
// The runtime's errors are thdc::Status and thdc::Result, the one error type
// of the plain-C++ libraries (reference/Status.h); runtime::Status names the
// same type for the runtime's code and its users.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_STATUS_H
#define THDC_RUNTIME_STATUS_H

#include "reference/Status.h"

namespace thdc::runtime {
using thdc::Result;
using thdc::Status;
} // namespace thdc::runtime

#endif // THDC_RUNTIME_STATUS_H
