//===- Buffer.h - host buffers of the reference interpreter -----*- C++ -*-===//
//
// The 1-D tensor values the reference interpreter (interpreter/Interpreter.h)
// takes, computes and returns, held on the host.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_INTERPRETER_BUFFER_H
#define THDC_INTERPRETER_BUFFER_H

#include "mlir/IR/Types.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace thdc::interpreter {

/// A 1-D tensor value on the host: `size()` elements of `elementType`, each
/// stored in `width()` bytes (i1 as one byte holding 0 or 1, bf16/f16 as
/// their 16-bit patterns).
///
/// `rows` is the tensor's length before shapes were made static: a value
/// whose length depends on the data (the `cu_seqlens_padded[n]` rows of a
/// padding mask, the `T / cp` rows of a CP slice) holds its first `rows`
/// elements, followed by the op's fill up to the static length. Ops that
/// read the value (sanitize, pad_tail) see only those rows, as the ODS
/// descriptions, written for dynamic shapes, say.
class Buffer {
public:
  Buffer() = default;
  /// A zero-filled buffer of `elements` values whose rows are all meaningful.
  Buffer(mlir::Type elementType, int64_t elements);

  /// Bytes per element: the bit width rounded up to whole bytes.
  static unsigned widthOf(mlir::Type elementType);

  mlir::Type getElementType() const { return elementType; }
  unsigned width() const { return elementWidth; }
  int64_t size() const { return elements; }
  int64_t getRows() const { return rows; }
  void setRows(int64_t meaningful) { rows = meaningful; }

  void *data() { return bytes.data(); }
  const void *data() const { return bytes.data(); }
  size_t byteSize() const { return bytes.size(); }

  /// Element `i` as T (whose size must be width()).
  template <typename T> T get(int64_t i) const {
    T value;
    std::memcpy(&value, bytes.data() + i * elementWidth, sizeof(T));
    return value;
  }
  /// Sets element `i` from a T (whose size must be width()).
  template <typename T> void set(int64_t i, T value) {
    std::memcpy(bytes.data() + i * elementWidth, &value, sizeof(T));
  }
  /// All elements as T (whose size must be width()).
  template <typename T> std::vector<T> values() const {
    std::vector<T> result(static_cast<size_t>(elements));
    if (elements)
      std::memcpy(result.data(), bytes.data(), bytes.size());
    return result;
  }
  /// Replaces the elements by the first size() of `values`, padded with the
  /// bit pattern `fill`; rows stays as set.
  template <typename T>
  void assign(const std::vector<T> &values, uint64_t fill);

private:
  mlir::Type elementType;
  unsigned elementWidth = 0;
  int64_t elements = 0;
  int64_t rows = 0;
  std::vector<uint8_t> bytes;
};

template <typename T>
void Buffer::assign(const std::vector<T> &values, uint64_t fill) {
  for (int64_t i = 0; i < elements; ++i) {
    if (size_t(i) < values.size())
      set<T>(i, values[size_t(i)]);
    else
      std::memcpy(bytes.data() + i * elementWidth, &fill, elementWidth);
  }
}

} // namespace thdc::interpreter

#endif // THDC_INTERPRETER_BUFFER_H
