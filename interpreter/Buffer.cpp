//===- Buffer.cpp - host buffers of the reference interpreter -------------===//

#include "interpreter/Buffer.h"

#include <algorithm>

using namespace mlir;

namespace thdc::interpreter {

unsigned Buffer::widthOf(Type elementType) {
  return std::max<unsigned>(1, (elementType.getIntOrFloatBitWidth() + 7) / 8);
}

Buffer::Buffer(Type elementType, int64_t elements)
    : elementType(elementType), elementWidth(widthOf(elementType)),
      elements(elements), rows(elements),
      bytes(size_t(elements) * widthOf(elementType), 0) {}

} // namespace thdc::interpreter
