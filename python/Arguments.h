//===- Arguments.h - what the binding units read from Python ---*- C++ -*-===//
//
// The arguments of thdc's Python module, shared by its binding units:
// arrays read through the framework's DLPack exchange table or nanobind's
// import and checked against a buffer description, integers checked with a
// message naming the argument, streams in their several spellings, and the
// NumPy arrays the module returns. Every message names the argument and
// what it got.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_PYTHON_ARGUMENTS_H
#define THDC_PYTHON_ARGUMENTS_H

#include "python/DLPackExchange.h"
#include "runtime/Executable.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace thdc::python {

namespace nb = nanobind;
namespace dl = dlpack;

/// The most buffers one call holds (a manifest has at most kMaxBuffers).
constexpr size_t kMaxArguments = 64;
static_assert(kMaxArguments >= runtime::kMaxBuffers,
              "a call holds one object per buffer of a manifest");

/// `name` in single quotes, for messages.
std::string quoted(const std::string &name);

/// Expected DLPack dtype of a manifest element type (bundles are read
/// through readManifest, which admits only known types).
dl::DataType dtypeOf(const std::string &type);
/// The NumPy / PyTorch spelling of a manifest element type.
const char *dtypeName(const std::string &type);
/// "int64", "float32", "bool", for messages.
std::string describeDtype(dl::DataType t);
/// "cpu", "cuda:1", "pinned host memory", for messages.
std::string describeDevice(int32_t type, int32_t id);
bool sameType(dl::DataType a, dl::DataType b);

/// An array argument, read through DLPack; the owner keeps nanobind's
/// import alive for the duration of the call.
struct ArrayView {
  void *data = nullptr;
  dl::Device device{dl::kCPU, 0};
  dl::DataType dtype{0, 0, 0};
  int32_t ndim = 0;
  std::array<int64_t, 8> shape{};
  std::array<int64_t, 8> strides{};
  bool hasStrides = false;
  const dl::ExchangeApi *api = nullptr; ///< set when read through a table
};

/// The exchange table of an array type, cached per type (a training step
/// sees one or two types); null for a type without one.
const dl::ExchangeApi *exchangeApiOf(PyTypeObject *type);

/// Raises `kind` (PyExc_TypeError, ...) with `text`.
[[noreturn]] void raiseArgument(PyObject *kind, const std::string &text);

/// The type of `object` as Python code spells it ("float",
/// "numpy.ndarray"), for messages.
std::string typeName(nb::handle object);

/// The range an integer argument must fit, named in messages.
struct IntegerRange {
  int64_t min, max;
  const char *name;
};
constexpr IntegerRange kInt32Range{std::numeric_limits<int32_t>::min(),
                                   std::numeric_limits<int32_t>::max(),
                                   "int32"};
constexpr IntegerRange kInt64Range{std::numeric_limits<int64_t>::min(),
                                   std::numeric_limits<int64_t>::max(),
                                   "int64"};
/// Stream handles: pointers, as non-negative ints.
constexpr IntegerRange kHandleRange{0, std::numeric_limits<int64_t>::max(),
                                    "non-negative int64"};

/// `object` as an integer: a Python int or an object with __index__ (NumPy's
/// integers); a bool, a float, a string or anything else is a TypeError
/// naming `what` (nanobind's own casters take True as 1), a value outside
/// `range` a ValueError.
int64_t integerArgument(nb::handle object, const std::string &what,
                        IntegerRange range = kInt32Range);
/// An optional integer argument: None, or as integerArgument.
std::optional<int64_t> optionalIntegerArgument(nb::handle object,
                                               const std::string &what);

/// An argument received as the Python object it is and checked by the
/// function, so that a wrong value's TypeError names the argument
/// (nanobind's own message names only the function, and its integer caster
/// takes True as 1). `Kind::name` is what signatures show.
template <typename Kind> struct Unchecked { nb::handle object; };
struct IntKind {
  static constexpr auto name = nb::detail::const_name("int");
};
struct ArrayKind {
  static constexpr auto name = nb::detail::const_name("numpy.ndarray");
};
struct LengthsKind {
  static constexpr auto name =
      nb::detail::const_name("collections.abc.Sequence[int]");
};
/// An int or the name of a low-precision recipe (S1's `multiple`).
struct MultipleKind {
  static constexpr auto name = nb::detail::const_name("int | str");
};
using IntArg = Unchecked<IntKind>;
using MultipleArg = Unchecked<MultipleKind>;
/// An int or None (signatures add "| None" for a default of None).
using OptionalIntArg = Unchecked<IntKind>;
using ArrayArg = Unchecked<ArrayKind>;
using LengthsArg = Unchecked<LengthsKind>;

/// "(9, 8)", for messages.
std::string shapeText(const int64_t *shape, size_t ndim);

/// `object` as a 1-D host array (anything with DLPack or the buffer
/// protocol, imported without conversion); TypeError naming `what` for
/// anything else, ValueError for another rank or a device array.
nb::ndarray<nb::ro> hostArrayArgument(nb::handle object,
                                      const std::string &what,
                                      const char *expected);

dl::DataType dlpackType(nb::dlpack::dtype t);

inline const char *dtypeNameOf(int64_t) { return "int64"; }
inline const char *dtypeNameOf(int32_t) { return "int32"; }
inline const char *dtypeNameOf(float) { return "float32"; }

/// A 1-D host array of exactly T's dtype, copied: an array of another dtype
/// is a TypeError (never a conversion, which would truncate floats).
template <typename T>
std::vector<T> hostVector(ArrayArg argument, const std::string &what) {
  nb::ndarray<nb::ro> array =
      hostArrayArgument(argument.object, what, dtypeNameOf(T()));
  if (array.dtype() != nb::dtype<T>())
    raiseArgument(PyExc_TypeError,
                  what + " must have dtype " + dtypeNameOf(T()) + "; got " +
                      describeDtype(dlpackType(array.dtype())));
  std::vector<T> values(array.shape(0));
  const T *data = static_cast<const T *>(array.data());
  const int64_t stride = array.stride(0);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = data[int64_t(i) * stride];
  return values;
}

/// Lengths from Python as int32: a 1-D integer array, or a sequence of ints
/// (bools, floats and strings are TypeErrors); a ValueError names the first
/// value outside int32.
std::vector<int32_t> lengthsArgument(LengthsArg argument,
                                     const std::string &what);

/// nanobind imports kept alive for the duration of a call (the objects
/// they come from are held by the call itself).
struct ArrayOwners {
  std::vector<nb::ndarray<>> writable;
  std::vector<nb::ndarray<nb::ro>> readOnly;
};

/// "input 'tokens'" / "output 'status'", for messages.
std::string roleOf(const runtime::BufferDesc &desc);

/// Reads `object` as an array into `view`: through its type's exchange
/// table, else nanobind's import (writable for an output), kept alive in
/// `owners`. TypeError for an object that is no array.
void readArray(nb::handle object, const runtime::BufferDesc &desc,
               ArrayView &view, ArrayOwners &owners);

/// Checks `view` against `desc`: dtype, a 1-D shape of desc.elements
/// (leading dimensions of 1 are accepted: a [1, T] batch row; a 0-d array
/// stands for one element), contiguity.
void checkArray(const ArrayView &view, const runtime::BufferDesc &desc);

/// "auto", "cuda", "host" (or "cpu") as a Backend; ValueError otherwise.
runtime::Backend parseBackend(const std::string &name);

/// Whether `object` is a CuPy array (its type's module is cupy's).
bool isCupyArray(PyObject *object);

/// Checks the form of a stream argument where it is not used (the host
/// code): what streamHandle would accept.
void checkStreamArgument(nb::handle stream);

/// A stream argument: an int handle, an object with `cuda_stream`
/// (torch.cuda.Stream) or `ptr` (cupy), or the `__cuda_stream__` protocol.
void *streamHandle(nb::handle stream);

/// Whether `object` is an array (a framework's tensor, anything with
/// DLPack or the buffer protocol) rather than a container of arrays.
bool isArrayObject(nb::handle object);

/// "numpy.ndarray of shape (9, 8) and dtype int64", for messages.
std::string describeArrayObject(nb::handle object);

/// `values` as a new 1-D NumPy array that owns a copy of them.
template <typename T> nb::object toNumpy(const std::vector<T> &values) {
  auto *copy = new std::vector<T>(values);
  nb::capsule owner(
      copy, [](void *p) noexcept { delete static_cast<std::vector<T> *>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(
      copy->data(), {copy->size()}, owner));
}

} // namespace thdc::python

namespace nanobind::detail {
template <typename Kind> struct type_caster<thdc::python::Unchecked<Kind>> {
  NB_TYPE_CASTER(thdc::python::Unchecked<Kind>, Kind::name)
  bool from_python(handle src, uint8_t, cleanup_list *) noexcept {
    value.object = src;
    return true;
  }
};
} // namespace nanobind::detail

#endif // THDC_PYTHON_ARGUMENTS_H
