//===- HostBuffers.h - Typed host buffers and their JSON form ---*- C++ -*-===//
//
// The host side of running a pipeline on the CPU: `thd-run` reads the
// pipeline's inputs from a JSON object mapping argument names to flat arrays,
//
//   {"tokens": [11, 12, 13], "loss_mask": [1.0, 0.5], "padding_mask": [0, 1]}
//
// into typed, 64-byte aligned host buffers, and writes the results back in the
// same form. Every value is validated against the argument's element type and
// element count, and every error names the argument (and the element) so that
// a user knows what to change in the input file.
//
// This library has no MLIR dependency; it uses only LLVM Support (its JSON
// parser). Errors are the runtime's Status / Result (runtime/Status.h). It is
// linked by thd-run, its unit test and its fuzzer.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TOOLS_THDRUN_HOSTBUFFERS_H
#define THDC_TOOLS_THDRUN_HOSTBUFFERS_H

#include "runtime/Manifest.h"
#include "runtime/Status.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace thdc {
namespace runtime {

/// The element types thd-run exchanges as JSON (a subset of the runtime's
/// runtime::findElementType table).
enum class ElementType { I1, I8, I32, I64, F32, F64 };

/// The MLIR spelling of `type`: "i1", "i8", "i32", "i64", "f32" or "f64".
llvm::StringRef toString(ElementType type);

/// Parses the MLIR spelling of an element type (the inverse of toString);
/// returns std::nullopt for any other text.
std::optional<ElementType> parseElementType(llvm::StringRef text);

/// Bytes per element in a host buffer. An i1 element is stored as one byte
/// holding 0 or 1.
size_t byteWidth(ElementType type);

/// A host buffer for one pipeline buffer (runtime::BufferDesc: the name,
/// which is the key in the JSON object, the element type and the element
/// count) holding `desc().elements` values packed without padding. The
/// storage is aligned to `kAlignment` bytes and zero-initialised. Buffers
/// are movable but not copyable.
class HostBuffer {
public:
  /// The alignment of `data()`, in bytes.
  static constexpr size_t kAlignment = 64;

  /// Allocates a zero-filled buffer for `desc`, whose type must be one that
  /// parseElementType accepts and whose element count is not negative.
  explicit HostBuffer(BufferDesc desc);

  /// The name, element type and element count of this buffer.
  const BufferDesc &desc() const { return bufferDesc; }
  /// The element type of desc().type.
  ElementType type() const { return elementType; }

  /// The first byte of the storage; aligned to kAlignment and never null, even
  /// for a buffer of no elements.
  void *data() { return storage.get(); }
  /// The first byte of the storage; aligned to kAlignment and never null.
  const void *data() const { return storage.get(); }

  /// The size of the elements in bytes: spec().elements * byteWidth(type).
  size_t bytes() const { return byteCount; }

  /// The elements viewed as T, whose size must equal the element width (use
  /// uint8_t or int8_t for i1 and i8).
  template <typename T> T *as() {
    assert(sizeof(T) == byteWidth(elementType) &&
           "element width does not match the buffer's element type");
    return static_cast<T *>(data());
  }
  /// The elements viewed as const T; see the non-const overload.
  template <typename T> const T *as() const {
    assert(sizeof(T) == byteWidth(elementType) &&
           "element width does not match the buffer's element type");
    return static_cast<const T *>(data());
  }

private:
  struct AlignedDelete {
    void operator()(std::byte *bytes) const;
  };

  BufferDesc bufferDesc;
  ElementType elementType;
  size_t byteCount;
  std::unique_ptr<std::byte[], AlignedDelete> storage;
};

/// Reads the pipeline inputs described by `specs` from `jsonText`, a JSON
/// object mapping each argument name to a flat array of exactly
/// `spec.elements` values. Returns one buffer per spec, in spec order; the
/// order of the keys in the object does not matter. A spec whose element
/// type thd-run cannot exchange (see ElementType) is an error naming it.
///
/// Accepted values:
///   - i8, i32, i64: integers in the type's range. A number written with a
///     fraction or exponent is accepted when its value is integral (2.0, 1e3);
///     such numbers are parsed as doubles first, so beyond 2^53 write integers
///     without a fraction or exponent to keep them exact.
///   - i1: 0, 1, true or false (integral forms as above, e.g. 1.0).
///   - f32, f64: any number; f32 values are rounded to the nearest float. The
///     strings "NaN", "Infinity" and "-Infinity" denote the non-finite values,
///     as written by writeOutputs.
///
/// Errors (the first found, in this order): invalid JSON; a top level that is
/// not an object; duplicate names in `specs`; an unknown key (the smallest
/// such key when there are several); then, spec by spec, a missing argument,
/// a value that is not an array, an array of the wrong length, and the first
/// bad element, e.g.
///   input 'tokens'[3] is 1.5; expected an integer
///   input 'cu_seqlens'[2] = 3000000000 does not fit i32
/// When a key appears twice in the object, the last value is used (this is
/// how llvm::json parses objects).
Result<std::vector<HostBuffer>> readInputs(llvm::StringRef jsonText,
                                           llvm::ArrayRef<BufferDesc> specs);

/// Writes `buffers` as a JSON object mapping each spec name to a flat array,
/// with keys in buffer order; the result is accepted by readInputs given the
/// same specs. i1 elements are written as 0 or 1. Floats are written in the
/// shortest form that reads back to the same f32 or f64 value, always with a
/// fraction or exponent (2.0, not 2); NaN and infinities, which JSON numbers
/// cannot express, are written as the strings "NaN", "Infinity" and
/// "-Infinity". Without `pretty` the text has no whitespace; with it, each
/// argument is on its own line, indented by two spaces, with its array on that
/// line.
std::string writeOutputs(llvm::ArrayRef<HostBuffer> buffers,
                         bool pretty = false);

} // namespace runtime
} // namespace thdc

#endif // THDC_TOOLS_THDRUN_HOSTBUFFERS_H
