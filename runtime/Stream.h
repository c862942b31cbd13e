//===- Stream.h - create, wait for and destroy a stream ---------*- C++ -*-===//
//
// A stream of the runtime's own, for programs that have none (a training
// process launches on its framework's stream). On the host backend there is
// no stream: null, and waiting for it returns at once.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_STREAM_H
#define THDC_RUNTIME_STREAM_H

#include "runtime/Backend.h"
#include "runtime/Status.h"

namespace thdc::runtime {

/// Creates / destroys / waits for a stream on the GPU (null on the host), on
/// `device` (-1: the current device, else 0).
Result<void *> createStream(Backend backend, int device = -1);
Status synchronizeStream(Backend backend, void *stream, int device = -1);
void destroyStream(Backend backend, void *stream, int device = -1);

} // namespace thdc::runtime

#endif // THDC_RUNTIME_STREAM_H
