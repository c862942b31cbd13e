//===- Backend.h - where an executable runs ---------------------*- C++ -*-===//
//
// The GPU through the CUDA driver, or the bundle's host code on the CPU:
// named by Executable's options and reports, Buffers, CapturedLaunch and the
// stream helpers.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_BACKEND_H
#define THDC_RUNTIME_BACKEND_H

namespace thdc::runtime {

/// Where an executable runs.
enum class Backend { Auto, Cuda, Host };

} // namespace thdc::runtime

#endif // THDC_RUNTIME_BACKEND_H
