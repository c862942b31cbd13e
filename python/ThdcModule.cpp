//===- ThdcModule.cpp - thdc's Python module (thdc._thdc) -----------------===//
//
// Binds the MLIR-free runtime (runtime/Executable.h) and, when the build has
// MLIR, the JIT (compiler/Jit.h) to Python. A call takes any DLPack arrays:
// torch tensors through the framework's C exchange table (no capsule, no
// Python call per tensor), everything else through nanobind's DLPack and
// buffer-protocol import. Every argument is checked against the bundle's
// signature (dtype, shape, contiguity, device) before anything is launched;
// with the outputs given, a call allocates nothing and never synchronises, so
// it can be captured in a CUDA graph. The submodules `planner` (the host-side
// microbatch planner, planner/Planner.h) and `reference` (the reference
// semantics, for tests) work on NumPy arrays.
//
//===----------------------------------------------------------------------===//

#include "planner/Planner.h"
#include "python/DLPackExchange.h"
#include "reference/Reference.h"
#include "runtime/CudaDriver.h"
#include "runtime/Executable.h"
#include "runtime/Gather.h"
#ifdef THDC_PYTHON_JIT
#include "compiler/InputFile.h"
#include "compiler/Jit.h"
#include "tools/ToolMains.h"
#endif

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace nb = nanobind;
using namespace thdc;
using namespace thdc::runtime;
namespace dl = thdc::python::dlpack;

namespace {

constexpr size_t kMaxArguments = 64;
static_assert(kMaxArguments >= kMaxBuffers,
              "a call holds one object per buffer of a manifest");

std::string quoted(const std::string &name) { return "'" + name + "'"; }

/// Expected DLPack dtype of a manifest element type (bundles are read
/// through readManifest, which admits only known types).
dl::DataType dtypeOf(const std::string &type) {
  const ElementTypeInfo *element = findElementType(type);
  if (!element)
    return {255, 0, 0};
  uint8_t code = element->kind == ElementTypeInfo::Kind::Bool    ? dl::kBool
                 : element->kind == ElementTypeInfo::Kind::Float ? dl::kFloat
                                                             : dl::kInt;
  return {code, uint8_t(8 * element->bytes), 1};
}

/// The NumPy / PyTorch spelling of a manifest element type.
const char *dtypeName(const std::string &type) {
  const ElementTypeInfo *element = findElementType(type);
  return element ? element->arrayName : "unknown";
}

std::string describeDtype(dl::DataType t) {
  const char *kind = t.code == dl::kInt     ? "int"
                     : t.code == dl::kUInt  ? "uint"
                     : t.code == dl::kFloat ? "float"
                     : t.code == dl::kBool  ? "bool"
                                            : "dtype code ";
  std::string text = kind;
  if (t.code == dl::kBool)
    return text;
  if (t.code > dl::kFloat)
    text += std::to_string(t.code) + " with ";
  text += std::to_string(t.bits);
  if (t.lanes != 1)
    text += "x" + std::to_string(t.lanes);
  return text;
}

std::string describeDevice(int32_t type, int32_t id) {
  switch (type) {
  case dl::kCPU:
    return "cpu";
  case dl::kCUDA:
    return "cuda:" + std::to_string(id);
  case dl::kCUDAHost:
    return "pinned host memory";
  case dl::kCUDAManaged:
    return "CUDA managed memory";
  default:
    return "a device of DLPack type " + std::to_string(type);
  }
}

/// An array argument, read through DLPack; the owner keeps nanobind's
/// import alive for the duration of the call.
struct ArrayView {
  void *data = nullptr;
  dl::Device device{0, 0};
  dl::DataType dtype{0, 0, 0};
  int32_t ndim = 0;
  std::array<int64_t, 8> shape{};
  std::array<int64_t, 8> strides{};
  bool hasStrides = false;
  const dl::ExchangeApi *api = nullptr; ///< set when read through a table
};

/// The exchange table of an array type, cached per type (a training step
/// sees one or two types).
const dl::ExchangeApi *exchangeApiOf(PyTypeObject *type) {
  static PyTypeObject *cachedTypes[4] = {nullptr, nullptr, nullptr, nullptr};
  static const dl::ExchangeApi *cachedApis[4] = {nullptr, nullptr, nullptr,
                                                  nullptr};
  for (int i = 0; i < 4; ++i)
    if (cachedTypes[i] == type)
      return cachedApis[i];
  const dl::ExchangeApi *api = nullptr;
  PyObject *capsule = PyObject_GetAttrString(reinterpret_cast<PyObject *>(type),
                                             dl::kExchangeApiAttribute);
  if (!capsule) {
    PyErr_Clear();
  } else {
    if (PyCapsule_IsValid(capsule, dl::kExchangeApiCapsule)) {
      auto *candidate = static_cast<const dl::ExchangeApi *>(
          PyCapsule_GetPointer(capsule, dl::kExchangeApiCapsule));
      if (candidate && candidate->header.version.major == 1 &&
          candidate->dltensorFromPyObjectNoSync &&
          candidate->currentWorkStream)
        api = candidate;
    }
    Py_DECREF(capsule);
  }
  for (int i = 0; i < 4; ++i)
    if (!cachedTypes[i]) {
      Py_INCREF(reinterpret_cast<PyObject *>(type));
      cachedTypes[i] = type;
      cachedApis[i] = api;
      break;
    }
  return api;
}

[[noreturn]] void raiseArgument(PyObject *kind, const std::string &text) {
  PyErr_SetString(kind, text.c_str());
  throw nb::python_error();
}

/// The type of `object` as Python code spells it ("float",
/// "numpy.ndarray"), for messages.
std::string typeName(nb::handle object) {
  nb::handle type = object.type();
  nb::object module = nb::getattr(type, "__module__", nb::none());
  std::string name = nb::type_name(type).c_str();
  if (!nb::isinstance<nb::str>(module))
    return name;
  std::string prefix = nb::borrow<nb::str>(module).c_str();
  return prefix == "builtins" || name.rfind(prefix + ".", 0) == 0
             ? name
             : prefix + "." + name;
}

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

/// `object` as an integer: a Python int or an object with __index__ (NumPy's
/// integers); a bool, a float, a string or anything else is a TypeError
/// naming `what` (nanobind's own casters take True as 1), a value outside
/// `range` a ValueError.
int64_t integerArgument(nb::handle object, const std::string &what,
                        IntegerRange range = kInt32Range) {
  if (PyBool_Check(object.ptr()) || !PyIndex_Check(object.ptr()))
    raiseArgument(PyExc_TypeError,
                  what + " must be an int; got " + typeName(object));
  nb::object index = nb::steal(PyNumber_Index(object.ptr()));
  if (!index.is_valid()) { // e.g. numpy.bool, whose __index__ raises
    PyErr_Clear();
    raiseArgument(PyExc_TypeError,
                  what + " must be an int; got " + typeName(object));
  }
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (value == -1 && PyErr_Occurred())
    throw nb::python_error();
  if (overflow || value < range.min || value > range.max)
    raiseArgument(PyExc_ValueError, what + " = " + nb::str(index).c_str() +
                                        " is outside the " + range.name +
                                        " range");
  return value;
}

/// An optional integer argument: None, or as integerArgument.
std::optional<int64_t> optionalIntegerArgument(nb::handle object,
                                               const std::string &what) {
  if (object.is_none())
    return std::nullopt;
  return integerArgument(object, what);
}

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
using IntArg = Unchecked<IntKind>;
/// An int or the name of a low-precision recipe (S1's `multiple`).
struct MultipleKind {
  static constexpr auto name = nb::detail::const_name("int | str");
};
using MultipleArg = Unchecked<MultipleKind>;
/// An int or None (signatures add "| None" for a default of None).
using OptionalIntArg = Unchecked<IntKind>;
using ArrayArg = Unchecked<ArrayKind>;
using LengthsArg = Unchecked<LengthsKind>;

} // namespace

namespace nanobind::detail {
template <typename Kind> struct type_caster<Unchecked<Kind>> {
  NB_TYPE_CASTER(Unchecked<Kind>, Kind::name)
  bool from_python(handle src, uint8_t, cleanup_list *) noexcept {
    value.object = src;
    return true;
  }
};
} // namespace nanobind::detail

namespace {

const char *dtypeNameOf(int64_t) { return "int64"; }
const char *dtypeNameOf(int32_t) { return "int32"; }
const char *dtypeNameOf(float) { return "float32"; }

std::string shapeText(const int64_t *shape, size_t ndim) {
  std::string text = "(";
  for (size_t d = 0; d < ndim; ++d)
    text += std::to_string(shape[d]) + (ndim == 1 ? "," : "") +
            (d + 1 < ndim ? ", " : "");
  return text + ")";
}

/// `object` as a 1-D host array (anything with DLPack or the buffer
/// protocol, imported without conversion); TypeError naming `what` for
/// anything else, ValueError for another rank or a device array.
nb::ndarray<nb::ro> hostArrayArgument(nb::handle object,
                                      const std::string &what,
                                      const char *expected) {
  nb::ndarray<nb::ro> array;
  if (!nb::try_cast(object, array, /*convert=*/false))
    raiseArgument(PyExc_TypeError, what + " must be a 1-D " + expected +
                                       " array (NumPy, or any array with "
                                       "DLPack on the CPU); got " +
                                       typeName(object));
  if (array.device_type() != nb::device::cpu::value)
    raiseArgument(PyExc_ValueError,
                  what + " must be in host memory; it is on " +
                      describeDevice(array.device_type(), array.device_id()));
  if (array.ndim() != 1)
    raiseArgument(PyExc_ValueError,
                  what + " must be 1-D; got shape " +
                      shapeText(array.shape_ptr(), array.ndim()));
  return array;
}

dl::DataType dlpackType(nb::dlpack::dtype t) {
  return {t.code, t.bits, t.lanes};
}

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
                                     const std::string &what) {
  nb::handle object = argument.object;
  // Strings and bytes are sequences (bytes even an array of uint8): refused.
  if (PyUnicode_Check(object.ptr()) || PyBytes_Check(object.ptr()) ||
      PyByteArray_Check(object.ptr()))
    raiseArgument(PyExc_TypeError, what +
                                       " must be a sequence of ints or a "
                                       "1-D integer array; got " +
                                       typeName(object));
  std::vector<int64_t> values;
  nb::ndarray<nb::ro> array;
  if (nb::try_cast(object, array, /*convert=*/false)) {
    array = hostArrayArgument(object, what, "integer");
    nb::dlpack::dtype t = array.dtype();
    bool isInteger =
        (t.code == uint8_t(nb::dlpack::dtype_code::Int) ||
         t.code == uint8_t(nb::dlpack::dtype_code::UInt)) &&
        t.lanes == 1 &&
        (t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64);
    if (!isInteger)
      raiseArgument(PyExc_TypeError,
                    what + " must be an array of integers; got dtype " +
                        describeDtype(dlpackType(t)));
    bool isSigned = t.code == uint8_t(nb::dlpack::dtype_code::Int);
    const char *data = static_cast<const char *>(array.data());
    const int64_t stride = array.stride(0) * (t.bits / 8);
    values.resize(array.shape(0));
    for (size_t i = 0; i < values.size(); ++i) {
      const char *element = data + int64_t(i) * stride;
      switch (t.bits) {
      case 8:
        values[i] = isSigned ? *reinterpret_cast<const int8_t *>(element)
                             : *reinterpret_cast<const uint8_t *>(element);
        break;
      case 16:
        values[i] = isSigned ? *reinterpret_cast<const int16_t *>(element)
                             : *reinterpret_cast<const uint16_t *>(element);
        break;
      case 32:
        values[i] = isSigned ? *reinterpret_cast<const int32_t *>(element)
                             : *reinterpret_cast<const uint32_t *>(element);
        break;
      default: {
        uint64_t bits = *reinterpret_cast<const uint64_t *>(element);
        if (!isSigned && bits > uint64_t(kInt32Range.max))
          raiseArgument(PyExc_ValueError, what + "[" + std::to_string(i) +
                                              "] = " + std::to_string(bits) +
                                              " is outside the int32 range");
        values[i] = int64_t(bits);
      }
      }
    }
  } else {
    if (!PySequence_Check(object.ptr()))
      raiseArgument(PyExc_TypeError,
                    what +
                        " must be a sequence of ints or a 1-D integer "
                        "array; got " +
                        typeName(object));
    nb::object items =
        nb::steal(PySequence_Fast(object.ptr(), "a sequence of ints"));
    if (!items.is_valid())
      throw nb::python_error();
    Py_ssize_t count = PySequence_Fast_GET_SIZE(items.ptr());
    PyObject **elements = PySequence_Fast_ITEMS(items.ptr());
    values.resize(size_t(count));
    for (Py_ssize_t i = 0; i < count; ++i)
      values[size_t(i)] = integerArgument(
          elements[i], what + "[" + std::to_string(i) + "]", kInt64Range);
  }
  std::vector<int32_t> lengths;
  lengths.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < kInt32Range.min || values[i] > kInt32Range.max)
      raiseArgument(PyExc_ValueError, what + "[" + std::to_string(i) +
                                          "] = " + std::to_string(values[i]) +
                                          " is outside the int32 range");
    lengths.push_back(int32_t(values[i]));
  }
  return lengths;
}

/// Reads `object` as an array. `writable` asks nanobind's import for a
/// writable view (outputs); a framework exchange table gives writable views.
/// nanobind imports kept alive for the duration of a call (the objects
/// they come from are held by the call itself).
struct ArrayOwners {
  std::vector<nb::ndarray<>> writable;
  std::vector<nb::ndarray<nb::ro>> readOnly;
};

/// "input 'tokens'" / "output 'status'", for messages.
std::string roleOf(const BufferDesc &desc) {
  return (desc.isOutput ? "output " : "input ") + quoted(desc.name);
}

void readArray(nb::handle object, const BufferDesc &desc, ArrayView &view,
               ArrayOwners &owners) {
  bool writable = desc.isOutput;
  if (const dl::ExchangeApi *api = exchangeApiOf(Py_TYPE(object.ptr()))) {
    dl::Tensor tensor;
    if (api->dltensorFromPyObjectNoSync(object.ptr(), &tensor) != 0) {
      nb::python_error error;
      raiseArgument(PyExc_TypeError, roleOf(desc) +
                                         " cannot be read through DLPack: " +
                                         std::string(error.what()));
    }
    if (tensor.ndim < 0 || tensor.ndim > int32_t(view.shape.size()))
      raiseArgument(PyExc_ValueError,
                    roleOf(desc) + " has " + std::to_string(tensor.ndim) +
                        " dimensions; thdc takes 1-D arrays");
    view.data = static_cast<char *>(tensor.data) + tensor.byteOffset;
    view.device = tensor.device;
    view.dtype = tensor.dtype;
    view.ndim = tensor.ndim;
    for (int32_t d = 0; d < tensor.ndim; ++d) {
      view.shape[d] = tensor.shape[d];
      if (tensor.strides)
        view.strides[d] = tensor.strides[d];
    }
    view.hasStrides = tensor.strides != nullptr;
    view.api = api;
    return;
  }
  auto fill = [&](const auto &nd) {
    if (nd.ndim() > view.shape.size())
      raiseArgument(PyExc_ValueError,
                    roleOf(desc) + " has " + std::to_string(nd.ndim()) +
                        " dimensions; thdc takes 1-D arrays");
    view.data = const_cast<void *>(static_cast<const void *>(nd.data()));
    view.device = {nd.device_type(), nd.device_id()};
    nb::dlpack::dtype t = nd.dtype();
    view.dtype = {t.code, t.bits, t.lanes};
    view.ndim = int32_t(nd.ndim());
    for (size_t d = 0; d < nd.ndim(); ++d) {
      view.shape[d] = int64_t(nd.shape(d));
      view.strides[d] = nd.stride(d);
    }
    view.hasStrides = true;
  };
  bool imported = false;
  if (writable) {
    nb::ndarray<> nd;
    if ((imported = nb::try_cast(object, nd))) {
      fill(nd);
      owners.writable.push_back(std::move(nd));
    }
  } else {
    nb::ndarray<nb::ro> nd;
    if ((imported = nb::try_cast(object, nd))) {
      fill(nd);
      owners.readOnly.push_back(std::move(nd));
    }
  }
  if (!imported)
    raiseArgument(PyExc_TypeError,
                  roleOf(desc) +
                      " must be an array with DLPack support (torch, "
                      "CuPy, NumPy, JAX)" +
                      std::string(writable ? " and writable" : "") + "; got " +
                      typeName(object));
}

/// Checks `view` against `desc`: dtype, a 1-D shape of desc.elements
/// (leading dimensions of 1 are accepted: a [1, T] batch row; a 0-d array
/// stands for one element), contiguity.
void checkArray(const ArrayView &view, const BufferDesc &desc) {
  dl::DataType want = dtypeOf(desc.type);
  if (view.dtype.code != want.code || view.dtype.bits != want.bits ||
      view.dtype.lanes != want.lanes)
    raiseArgument(PyExc_TypeError, roleOf(desc) + " must have dtype " +
                                       dtypeName(desc.type) + "; got " +
                                       describeDtype(view.dtype));
  bool leadingOnes = true;
  for (int32_t d = 0; d + 1 < view.ndim; ++d)
    leadingOnes = leadingOnes && view.shape[d] == 1;
  const int64_t count = view.ndim == 0 ? 1 : view.shape[view.ndim - 1];
  if (!leadingOnes || count != desc.elements)
    raiseArgument(PyExc_ValueError,
                  roleOf(desc) + " must have shape (" +
                      std::to_string(desc.elements) +
                      ",) (leading dimensions of 1 are accepted); got " +
                      shapeText(view.shape.data(), size_t(view.ndim)));
  if (view.ndim > 0 && count > 1 && view.hasStrides &&
      view.strides[view.ndim - 1] != 1)
    raiseArgument(PyExc_ValueError,
                  roleOf(desc) + " must be contiguous; its stride is " +
                      std::to_string(view.strides[view.ndim - 1]) +
                      " elements (call .contiguous() or pass a copy)");
}

Backend parseBackend(const std::string &name) {
  if (name == "auto")
    return Backend::Auto;
  if (name == "cuda")
    return Backend::Cuda;
  if (name == "host" || name == "cpu")
    return Backend::Host;
  throw nb::value_error(("backend must be 'auto', 'cuda' or 'host'; got '" +
                         name + "'")
                            .c_str());
}

/// Whether `object` is a CuPy array (its type's module is cupy's).
bool isCupyArray(PyObject *object) {
  nb::object module = nb::getattr(
      nb::handle(reinterpret_cast<PyObject *>(Py_TYPE(object))), "__module__",
      nb::none());
  if (!nb::isinstance<nb::str>(module))
    return false;
  std::string_view name = nb::borrow<nb::str>(module).c_str();
  return name == "cupy" || name.substr(0, 5) == "cupy.";
}

/// Stream handles: pointers, as non-negative ints.
constexpr IntegerRange kHandleRange{0, std::numeric_limits<int64_t>::max(),
                                    "non-negative int64"};

bool isIndexLike(nb::handle object) {
  return PyIndex_Check(object.ptr()) && !PyBool_Check(object.ptr());
}

[[noreturn]] void raiseBadStream(nb::handle stream) {
  raiseArgument(PyExc_TypeError,
                "stream must be an int handle, a torch.cuda.Stream, a cupy "
                "Stream or an object with __cuda_stream__; got " +
                    typeName(stream));
}

/// Checks the form of a stream argument where it is not used (the host
/// code): what streamHandle would accept.
void checkStreamArgument(nb::handle stream) {
  if (isIndexLike(stream))
    integerArgument(stream, "stream", kHandleRange);
  else if (!nb::hasattr(stream, "__cuda_stream__") &&
           !nb::hasattr(stream, "cuda_stream") && !nb::hasattr(stream, "ptr"))
    raiseBadStream(stream);
}

/// A stream argument: an int handle, an object with `cuda_stream`
/// (torch.cuda.Stream) or `ptr` (cupy), or the `__cuda_stream__` protocol.
void *streamHandle(nb::handle stream) {
  auto handle = [](nb::handle value, const char *what) {
    return reinterpret_cast<void *>(
        uintptr_t(integerArgument(value, what, kHandleRange)));
  };
  if (isIndexLike(stream))
    return handle(stream, "stream");
  if (nb::hasattr(stream, "__cuda_stream__")) {
    nb::object pair = stream.attr("__cuda_stream__")();
    if (!PyTuple_Check(pair.ptr()) || PyTuple_GET_SIZE(pair.ptr()) != 2)
      raiseArgument(PyExc_TypeError,
                    "stream.__cuda_stream__() must return a (version, "
                    "handle) tuple; got " +
                        typeName(pair));
    return handle(PyTuple_GET_ITEM(pair.ptr(), 1),
                  "stream.__cuda_stream__()[1]");
  }
  if (nb::hasattr(stream, "cuda_stream"))
    return handle(stream.attr("cuda_stream"), "stream.cuda_stream");
  if (nb::hasattr(stream, "ptr"))
    return handle(stream.attr("ptr"), "stream.ptr");
  raiseBadStream(stream);
}

/// Whether `object` is an array (a framework's tensor, anything with
/// DLPack or the buffer protocol) rather than a container of arrays.
bool isArrayObject(nb::handle object) {
  return exchangeApiOf(Py_TYPE(object.ptr())) ||
         PyObject_CheckBuffer(object.ptr()) ||
         nb::hasattr(object, "__dlpack__");
}

/// "numpy.ndarray of shape (9, 8) and dtype int64", for messages.
std::string describeArrayObject(nb::handle object) {
  std::string text = typeName(object);
  nb::ndarray<nb::ro> array;
  if (nb::try_cast(object, array, /*convert=*/false))
    text += " of shape " + shapeText(array.shape_ptr(), array.ndim()) +
            " and dtype " + describeDtype(dlpackType(array.dtype()));
  else
    PyErr_Clear();
  return text;
}

/// How a compile was served, for `Kernel.compile_info`.
struct CompileRecord {
  std::string source; ///< "bundle", "compiled", "memory-cache", "disk-cache"
  double micros = 0, compileMicros = 0, loadMicros = 0;
  std::string key, cacheNote;
};

/// A loaded pipeline, callable from Python.
class Kernel {
public:
  explicit Kernel(std::shared_ptr<Executable> executable)
      : executable_(std::move(executable)) {
    const Manifest &m = executable_->manifest();
    for (size_t i = 0; i < m.buffers.size(); ++i)
      (m.buffers[i].isOutput ? outputs_ : inputs_).push_back(int(i));
  }

  const Manifest &manifest() const { return executable_->manifest(); }
  const Executable &executable() const { return *executable_; }
  CompileRecord record;
  nb::object resultType = nb::none();
  nb::object allocator = nb::none();

  nb::list signature() const {
    nb::list list;
    for (const BufferDesc &b : manifest().buffers)
      list.append(nb::make_tuple(b.name, dtypeName(b.type),
                                 nb::make_tuple(b.elements),
                                 b.isOutput ? "output" : "input"));
    return list;
  }

  nb::object call(nb::args args, nb::kwargs kwargs) {
    const Manifest &m = manifest();
    // Owned references: every object the call reads stays alive until it
    // returns, whatever Python code runs meanwhile (a sequence's
    // __getitem__, a producer's __dlpack__, the allocator).
    std::array<nb::object, kMaxArguments> objects;
    nb::handle stream = nb::none(), outArg = nb::none(), deviceArg = nb::none();

    if (args.size() > inputs_.size())
      raiseArgument(PyExc_TypeError,
                    m.entry + "() takes " + std::to_string(inputs_.size()) +
                        " inputs; got " + std::to_string(args.size()) +
                        " positional arguments");
    for (size_t i = 0; i < args.size(); ++i)
      objects[inputs_[i]] = nb::borrow(args[i]);
    PyObject *key = nullptr, *value = nullptr;
    Py_ssize_t position = 0;
    while (PyDict_Next(kwargs.ptr(), &position, &key, &value)) {
      const char *name = PyUnicode_AsUTF8(key);
      if (!name)
        throw nb::python_error();
      if (std::strcmp(name, "stream") == 0) {
        stream = value;
        continue;
      }
      if (std::strcmp(name, "out") == 0) {
        outArg = value;
        continue;
      }
      if (std::strcmp(name, "device") == 0) {
        deviceArg = value;
        continue;
      }
      int found = -1;
      for (int index : inputs_)
        if (m.buffers[index].name == name)
          found = index;
      if (found < 0)
        raiseArgument(PyExc_TypeError, m.entry +
                                           "() got an unexpected argument '" +
                                           name + "'" + inputNamesHint());
      if (objects[found].is_valid())
        raiseArgument(PyExc_TypeError, m.entry +
                                           "() got input '" + name +
                                           "' both by position and by name");
      objects[found] = nb::borrow(value);
    }
    for (int index : inputs_)
      if (!objects[index].is_valid())
        raiseArgument(PyExc_TypeError, m.entry + "() is missing input " +
                                           quoted(m.buffers[index].name) +
                                           inputNamesHint());

    // device= and stream= are checked on every backend (the host code
    // ignores their values), so that a call is refused or accepted alike.
    const std::optional<int64_t> requestedDevice =
        optionalIntegerArgument(deviceArg, "device");

    bool allocate = outArg.is_none();
    if (!allocate)
      readOutArgument(outArg, objects);

    // The device of the launch: an explicit ordinal, else the current one.
    bool onGpu = executable_->backend() == Backend::Cuda;
    int device = -1;
    if (onGpu) {
      const CudaDriver &cu = **CudaDriver::get();
      Result<int> resolved =
          cu.resolveDevice(requestedDevice ? int(*requestedDevice) : -1);
      if (!resolved)
        raiseArgument(PyExc_ValueError, resolved.status().message());
      device = *resolved;
    }

    ArrayOwners owners;
    std::array<ArrayView, kMaxArguments> views;
    std::array<void *, kMaxArguments> pointers{};
    auto check = [&](int index) {
      const BufferDesc &desc = m.buffers[index];
      readArray(objects[index], desc, views[index], owners);
      checkArray(views[index], desc);
      const ArrayView &view = views[index];
      if (onGpu) {
        if (view.device.type != dl::kCUDA &&
            view.device.type != dl::kCUDAManaged)
          raiseArgument(PyExc_ValueError,
                        roleOf(desc) + " is in " +
                            describeDevice(view.device.type, view.device.id) +
                            ", but the kernel runs on cuda:" +
                            std::to_string(device) + "; move it to the GPU");
        if (view.device.id != device)
          raiseArgument(
              PyExc_ValueError,
              roleOf(desc) + " is on " +
                  describeDevice(view.device.type, view.device.id) +
                  ", but the launch is on cuda:" + std::to_string(device) +
                  (deviceArg.is_none()
                       ? " (the current device; select it with "
                         "torch.cuda.set_device or pass device=)"
                       : " (device=)"));
      } else if (view.device.type != dl::kCPU &&
                 view.device.type != dl::kCUDAHost) {
        raiseArgument(PyExc_ValueError,
                      roleOf(desc) + " is on " +
                          describeDevice(view.device.type, view.device.id) +
                          ", but this kernel runs on the host CPU (no GPU "
                          "was found when it was loaded)");
      }
      pointers[index] = view.data;
    };
    for (int index : inputs_)
      check(index);

    if (allocate) {
      // Held for the loop: an allocator that replaces itself must not free
      // the callable that is running.
      nb::object allocateOutput = allocator;
      if (allocateOutput.is_none())
        raiseArgument(PyExc_RuntimeError, "no output allocator is set");
      nb::handle like =
          inputs_.empty() ? nb::handle(Py_None) : objects[inputs_[0]];
      for (int index : outputs_) {
        const BufferDesc &desc = m.buffers[index];
        objects[index] =
            allocateOutput(like, dtypeName(desc.type), desc.elements,
                           onGpu ? int(dl::kCUDA) : int(dl::kCPU), device);
      }
    }
    for (int index : outputs_)
      check(index);

    void *launchStream = nullptr;
    if (!onGpu && !stream.is_none())
      checkStreamArgument(stream);
    if (onGpu) {
      if (!stream.is_none()) {
        launchStream = streamHandle(stream);
      } else if (inputs_.empty()) {
        // No array to take a framework's stream from: the default stream.
      } else if (const dl::ExchangeApi *api = views[inputs_[0]].api) {
        if (api->currentWorkStream(dl::kCUDA, device, &launchStream) != 0)
          throw nb::python_error();
      } else if (isCupyArray(objects[inputs_[0]].ptr())) {
        // CuPy's current stream, as the CUDA array interface intends.
        launchStream = streamHandle(
            nb::module_::import_("cupy.cuda").attr("get_current_stream")());
      }
    }

    Status launched;
    if (onGpu) {
      launched = executable_->launch(pointers.data(), launchStream, device);
    } else {
      nb::gil_scoped_release release;
      launched = executable_->launch(pointers.data(), nullptr, -1);
    }
    if (!launched)
      raiseArgument(PyExc_RuntimeError, launched.message());

    // The named tuple is made directly (its type is a tuple subclass): its
    // Python-level __new__ would cost more than the rest of the call.
    PyObject *result =
        resultType.is_none()
            ? PyTuple_New(Py_ssize_t(outputs_.size()))
            : reinterpret_cast<PyTypeObject *>(resultType.ptr())
                  ->tp_alloc(reinterpret_cast<PyTypeObject *>(resultType.ptr()),
                             Py_ssize_t(outputs_.size()));
    if (!result)
      throw nb::python_error();
    for (size_t i = 0; i < outputs_.size(); ++i)
      PyTuple_SET_ITEM(result, Py_ssize_t(i),
                       objects[outputs_[i]].inc_ref().ptr());
    return nb::steal(result);
  }

  /// Launches on raw pointers (inputs then outputs, manifest order).
  void launchPointers(const std::vector<uintptr_t> &addresses, uintptr_t stream,
                      int device) const {
    if (addresses.size() != manifest().buffers.size())
      throw nb::value_error(("launch_pointers takes " +
                             std::to_string(manifest().buffers.size()) +
                             " pointers; got " +
                             std::to_string(addresses.size()))
                                .c_str());
    std::vector<void *> pointers;
    for (uintptr_t address : addresses)
      pointers.push_back(reinterpret_cast<void *>(address));
    Status launched = executable_->launch(
        pointers.data(), reinterpret_cast<void *>(stream), device);
    if (!launched)
      throw std::runtime_error(launched.message());
  }

private:
  /// Reads out= (a dict by output name, or a sequence with one array per
  /// output) into `objects`, as owned references.
  void readOutArgument(nb::handle outArg,
                       std::array<nb::object, kMaxArguments> &objects) const {
    const Manifest &m = manifest();
    const std::string expected =
        m.entry + "(): out= must be a dict by name or a sequence of " +
        std::to_string(outputs_.size()) + " arrays";
    if (PyDict_Check(outArg.ptr())) {
      PyObject *key = nullptr, *value = nullptr;
      Py_ssize_t position = 0;
      while (PyDict_Next(outArg.ptr(), &position, &key, &value))
        if (!PyUnicode_Check(key))
          raiseArgument(PyExc_TypeError,
                        m.entry +
                            "(): out= keys must be output names "
                            "(str); got a key of type " +
                            typeName(key) + outputNamesHint());
      size_t matched = 0;
      for (int index : outputs_) {
        PyObject *given =
            PyDict_GetItemString(outArg.ptr(), m.buffers[index].name.c_str());
        if (!given)
          raiseArgument(PyExc_TypeError,
                        m.entry + "(): out= is missing output " +
                            quoted(m.buffers[index].name) + outputNamesHint());
        objects[index] = nb::borrow(given);
        ++matched;
      }
      if (size_t(PyDict_Size(outArg.ptr())) != matched)
        raiseArgument(PyExc_TypeError, m.entry +
                                           "(): out= names an unknown output" +
                                           outputNamesHint());
      return;
    }
    if (!PyList_Check(outArg.ptr()) && !PyTuple_Check(outArg.ptr())) {
      // An array is a sequence too (of rows, made anew on each access):
      // refused as a whole rather than split into outputs.
      if (isArrayObject(outArg))
        raiseArgument(PyExc_TypeError,
                      expected + ", one per output; got a single " +
                          describeArrayObject(outArg) + outputNamesHint());
      if (!PySequence_Check(outArg.ptr()) || PyUnicode_Check(outArg.ptr()) ||
          PyBytes_Check(outArg.ptr()))
        raiseArgument(PyExc_TypeError, expected + "; got " + typeName(outArg) +
                                           outputNamesHint());
    }
    Py_ssize_t length = PySequence_Size(outArg.ptr());
    if (length < 0)
      throw nb::python_error();
    if (size_t(length) != outputs_.size())
      raiseArgument(PyExc_TypeError, expected + "; got " +
                                         std::to_string(length) +
                                         outputNamesHint());
    for (size_t i = 0; i < outputs_.size(); ++i) {
      // A new reference: a lazy sequence may have made the item just now.
      PyObject *item = PySequence_GetItem(outArg.ptr(), Py_ssize_t(i));
      if (!item)
        throw nb::python_error();
      objects[outputs_[i]] = nb::steal(item);
    }
  }

  std::string inputNamesHint() const {
    std::string text = " (inputs:";
    for (int index : inputs_)
      text += " " + manifest().buffers[index].name;
    return text + ")";
  }
  std::string outputNamesHint() const {
    std::string text = " (outputs:";
    for (int index : outputs_)
      text += " " + manifest().buffers[index].name;
    return text + ")";
  }

  std::shared_ptr<Executable> executable_;
  std::vector<int> inputs_, outputs_;
};

std::shared_ptr<Kernel> loadBundle(const std::string &bundle,
                                   const std::string &backend,
                                   const std::string &cacheDir, IntArg device) {
  LoadOptions options;
  options.backend = parseBackend(backend);
  options.cacheDir = cacheDir;
  options.device = int(integerArgument(device.object, "device"));
  Result<std::unique_ptr<Executable>> loaded =
      Executable::load(bundle, options);
  if (!loaded)
    throw std::runtime_error(loaded.status().message());
  auto kernel =
      std::make_shared<Kernel>(std::shared_ptr<Executable>(std::move(*loaded)));
  kernel->record.source = "bundle";
  kernel->record.loadMicros = kernel->executable().loadInfo().loadMicros;
  return kernel;
}

#ifdef THDC_PYTHON_JIT
/// One JIT per (backend, cache folder), shared by every compile call.
Jit &jitFor(const std::string &backend, const std::string &cacheDir,
            const std::string &chip) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Jit>> jits;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Jit> &jit = jits[backend + "\n" + cacheDir + "\n" + chip];
  if (!jit) {
    JitOptions options;
    options.backend = parseBackend(backend);
    options.cacheDir = cacheDir;
    options.chip = chip;
    jit = std::make_unique<Jit>(options);
  }
  return *jit;
}

/// A kernel of the JIT's, with how the compile call was served.
std::shared_ptr<Kernel> jitKernel(std::shared_ptr<Executable> executable,
                                  const CompileInfo &info) {
  auto kernel = std::make_shared<Kernel>(std::move(executable));
  static const char *sources[] = {"compiled", "memory-cache", "disk-cache"};
  kernel->record.source = sources[int(info.source)];
  kernel->record.micros = info.micros;
  kernel->record.compileMicros = info.compileMicros;
  kernel->record.loadMicros = info.loadMicros;
  kernel->record.key = info.key;
  kernel->record.cacheNote = info.cacheNote;
  return kernel;
}

std::shared_ptr<Kernel> compileText(const std::string &text,
                                    const std::map<std::string, int64_t> &params,
                                    const std::string &backend,
                                    const std::string &cacheDir,
                                    const std::string &sourceName,
                                    const std::string &chip) {
  CompileInfo info;
  Jit &jit = jitFor(backend, cacheDir, chip);
  Result<std::shared_ptr<Executable>> compiled = [&] {
    nb::gil_scoped_release release;
    return jit.compile(text, params, &info, sourceName);
  }();
  if (!compiled)
    throw std::runtime_error(compiled.status().message());
  return jitKernel(*compiled, info);
}

/// compile()'s memory-cache hit, or None where compile() would compile or
/// load a module (which a CUDA graph capture cannot hold).
nb::object cachedText(const std::string &text,
                      const std::map<std::string, int64_t> &params,
                      const std::string &backend, const std::string &cacheDir,
                      const std::string &chip) {
  CompileInfo info;
  std::shared_ptr<Executable> hit =
      jitFor(backend, cacheDir, chip).cached(text, params, &info);
  return hit ? nb::cast(jitKernel(hit, info)) : nb::none();
}
#endif

/// A launch captured by the runtime (CapturedLaunch) on raw addresses: the
/// C++ graph path, for comparisons with a capture made by a framework.
class RuntimeGraph {
public:
  RuntimeGraph(std::shared_ptr<Kernel> kernel,
               const std::vector<uintptr_t> &addresses, uintptr_t stream,
               int device)
      : kernel_(std::move(kernel)) {
    if (addresses.size() != kernel_->manifest().buffers.size())
      throw nb::value_error("capture_pointers takes one address per buffer");
    for (uintptr_t address : addresses)
      pointers_.push_back(reinterpret_cast<void *>(address));
    Result<CapturedLaunch> captured =
        CapturedLaunch::capture(kernel_->executable(), pointers_.data(),
                                reinterpret_cast<void *>(stream), device);
    if (!captured)
      throw std::runtime_error(captured.status().message());
    launch_ = std::make_unique<CapturedLaunch>(std::move(*captured));
  }
  void replay(uintptr_t stream) const {
    Status status = launch_->replay(reinterpret_cast<void *>(stream));
    if (!status)
      throw std::runtime_error(status.message());
  }

private:
  std::shared_ptr<Kernel> kernel_;
  std::vector<void *> pointers_;
  std::unique_ptr<CapturedLaunch> launch_;
};

//===----------------------------------------------------------------------===//
// The reference semantics, for tests
//===----------------------------------------------------------------------===//

template <typename T> nb::object toNumpy(const std::vector<T> &values) {
  auto *copy = new std::vector<T>(values);
  nb::capsule owner(copy, [](void *p) noexcept {
    delete static_cast<std::vector<T> *>(p);
  });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(
      copy->data(), {copy->size()}, owner));
}

/// A reference step's outputs (the graph step's or the pack step's) as a
/// dict of NumPy arrays by output name.
nb::dict stepOutputs(const reference::GraphStepOutput &out) {
  nb::dict result;
  result["tokens"] = toNumpy(out.tokens);
  result["labels"] = toNumpy(out.labels);
  result["position_ids"] = toNumpy(out.positionIds);
  result["loss_mask"] = toNumpy(out.lossMask);
  result["padding_mask"] = toNumpy(out.paddingMask);
  result["cu_seqlens_padded"] = toNumpy(out.cuSeqlensPadded);
  result["cu_seqlens"] = toNumpy(out.cuSeqlens);
  result["max_seqlen"] = out.maxSeqlen;
  result["status"] = out.status;
  return result;
}

/// The sizes C, cp and N of a reference step: each within int32 and C*cp
/// too (checked before any product or allocation: the steps abort, or
/// allocate C*cp rows, on sizes that wrap).
struct StepSizes {
  int64_t C, cp, N;
};
StepSizes stepSizes(const char *function, IntArg C, IntArg cp, IntArg N) {
  StepSizes sizes{integerArgument(C.object, "C"),
                  integerArgument(cp.object, "cp"),
                  integerArgument(N.object, "N")};
  if (sizes.C >= 1 && sizes.cp >= 1 && sizes.C * sizes.cp > kInt32Range.max)
    throw nb::value_error(
        (std::string(function) + ": C*cp = " + std::to_string(sizes.C) + "*" +
         std::to_string(sizes.cp) + " = " + std::to_string(sizes.C * sizes.cp) +
         " is outside the int32 range")
            .c_str());
  return sizes;
}

nb::dict referenceGraphStep(ArrayArg tokens, ArrayArg labels,
                            ArrayArg positionIds, ArrayArg lossMask,
                            ArrayArg cuSeqlens, ArrayArg cuSeqlensPadded,
                            IntArg numSeqs, IntArg cpRank, IntArg C_,
                            IntArg cp_, IntArg N_, nb::handle rowsGiven) {
  const auto [C, cp, N] = stepSizes("graph_step", C_, cp_, N_);
  reference::GraphStepInput input;
  input.tokens = hostVector<int64_t>(tokens, "tokens");
  input.labels = hostVector<int64_t>(labels, "labels");
  input.positionIds = hostVector<int64_t>(positionIds, "position_ids");
  input.lossMask = hostVector<float>(lossMask, "loss_mask");
  input.cuSeqlens = hostVector<int32_t>(cuSeqlens, "cu_seqlens");
  input.cuSeqlensPadded =
      hostVector<int32_t>(cuSeqlensPadded, "cu_seqlens_padded");
  input.numSeqs = int32_t(integerArgument(numSeqs.object, "num_seqs"));
  input.cpRank = int32_t(integerArgument(cpRank.object, "cp_rank"));
  if (!rowsGiven.is_none())
    input.rowsGiven = integerArgument(rowsGiven, "rows_given", kInt64Range);
  // megatronGraphStep aborts on broken preconditions: the reference states
  // them once, and they become a ValueError here.
  if (std::optional<std::string> problem =
          reference::graphStepPreconditionError(input, C, cp, N))
    throw nb::value_error(("graph_step: " + *problem).c_str());
  reference::GraphStepOutput out;
  {
    nb::gil_scoped_release release;
    out = reference::megatronGraphStep(input, C, cp, N);
  }
  return stepOutputs(out);
}

nb::object referenceSeqIdx(ArrayArg cuSeqlensArg, IntArg totalTokensArg) {
  std::vector<int32_t> cuSeqlens =
      hostVector<int32_t>(cuSeqlensArg, "cu_seqlens");
  const int64_t totalTokens =
      integerArgument(totalTokensArg.object, "total_tokens");
  // seqIdx writes a row per token it covers and checks the count after:
  // count first, so that offsets spanning billions of rows are refused
  // before they are allocated.
  int64_t covered = 0, previous = cuSeqlens.empty() ? 0 : cuSeqlens[0];
  for (size_t i = 1; i <= cuSeqlens.size() && !cuSeqlens.empty(); ++i) {
    int64_t bound = i < cuSeqlens.size() ? cuSeqlens[i] : totalTokens;
    covered += std::max<int64_t>(0, bound - previous);
    previous = bound;
  }
  if (!cuSeqlens.empty() && covered != totalTokens)
    throw nb::value_error(("seq_idx: cu_seqlens with total_tokens = " +
                           std::to_string(totalTokens) + " covers " +
                           std::to_string(covered) + " rows instead of " +
                           std::to_string(totalTokens))
                              .c_str());
  reference::Expected<std::vector<int32_t>> result =
      reference::seqIdx(cuSeqlens, totalTokens);
  if (!result)
    throw nb::value_error(result.error().c_str());
  return toNumpy(*result);
}

nb::dict referencePackMicrobatch(ArrayArg tokenPool, ArrayArg labelPool,
                                 ArrayArg lossMaskPool, ArrayArg sampleOffsets,
                                 ArrayArg sampleLengths, ArrayArg sampleIds,
                                 IntArg numSeqs, IntArg cpRank, IntArg C_,
                                 IntArg cp_, IntArg N_) {
  const auto [C, cp, N] = stepSizes("pack_microbatch", C_, cp_, N_);
  reference::PackStepInput input;
  input.tokenPool = hostVector<int64_t>(tokenPool, "token_pool");
  input.labelPool = hostVector<int64_t>(labelPool, "label_pool");
  input.lossMaskPool = hostVector<float>(lossMaskPool, "loss_mask_pool");
  input.sampleOffsets = hostVector<int32_t>(sampleOffsets, "sample_offsets");
  input.sampleLengths = hostVector<int32_t>(sampleLengths, "sample_lengths");
  input.sampleIds = hostVector<int32_t>(sampleIds, "sample_ids");
  input.numSeqs = int32_t(integerArgument(numSeqs.object, "num_seqs"));
  input.cpRank = int32_t(integerArgument(cpRank.object, "cp_rank"));
  reference::Expected<reference::PackStepOutput> out = [&] {
    nb::gil_scoped_release release;
    return reference::packMicrobatchStep(input, C, cp, N);
  }();
  if (!out)
    throw nb::value_error(("pack_microbatch: " + out.error()).c_str());
  return stepOutputs(*out);
}

//===----------------------------------------------------------------------===//
// The microbatch planner
//===----------------------------------------------------------------------===//

template <typename T> T valueOrRaise(planner::Result<T> result) {
  if (!result)
    throw nb::value_error(result.status().message().c_str());
  return std::move(*result);
}

/// The planner's settings from Python: every size an int within int32, so
/// that no product the planner forms (C*cp, dp*vpp_group, ...) can wrap.
planner::PlannerConfig plannerConfig(IntArg C, IntArg cp, IntArg dp,
                                     OptionalIntArg maxPackedSequences,
                                     bool alignmentSet, bool dummyTail,
                                     OptionalIntArg vppGroup) {
  planner::PlannerConfig config;
  config.maxSeqlenPerRank = integerArgument(C.object, "C");
  config.cp = integerArgument(cp.object, "cp");
  config.dp = integerArgument(dp.object, "dp");
  config.maxPackedSequences = optionalIntegerArgument(maxPackedSequences.object,
                                                      "max_packed_sequences");
  config.alignmentSet = alignmentSet;
  config.dummyTail = dummyTail;
  config.vppGroup = optionalIntegerArgument(vppGroup.object, "vpp_group");
  return config;
}

planner::MicrobatchPlan plannerPlan(LengthsArg paddedLengths, IntArg C,
                                    IntArg cp, IntArg dp,
                                    OptionalIntArg maxPackedSequences,
                                    bool alignmentSet, bool dummyTail,
                                    OptionalIntArg vppGroup,
                                    const std::string &algorithm) {
  const std::vector<int32_t> lengths =
      lengthsArgument(paddedLengths, "padded_lengths");
  const planner::PlannerConfig config = plannerConfig(
      C, cp, dp, maxPackedSequences, alignmentSet, dummyTail, vppGroup);
  if (algorithm == "next_fit")
    return valueOrRaise(planner::nextFitPlan(lengths, config));
  if (algorithm == "balanced")
    return valueOrRaise(planner::balancedPlan(lengths, config));
  if (algorithm == "first_fit_decreasing")
    return valueOrRaise(planner::firstFitDecreasingPlan(lengths, config));
  throw nb::value_error(("algorithm must be 'next_fit', 'balanced' or "
                         "'first_fit_decreasing'; got '" +
                         algorithm + "'")
                            .c_str());
}

nb::tuple plannerMicrobatchInputs(const planner::MicrobatchPlan &plan,
                                  IntArg rankArg, IntArg NArg) {
  const int64_t rank = integerArgument(rankArg.object, "rank");
  const int64_t N = integerArgument(NArg.object, "N");
  // sample_ids holds N-1 ids per microbatch: refuse an N whose array could
  // not be indexed with int32 (or allocated) before the planner sizes it.
  const int64_t entries =
      int64_t(plan.groups.size()) * std::max<int64_t>(N - 1, 0);
  if (entries > kInt32Range.max)
    throw nb::value_error(
        ("microbatch_inputs: N = " + std::to_string(N) + " gives sample_ids " +
         std::to_string(plan.groups.size()) + " x " + std::to_string(N - 1) +
         " = " + std::to_string(entries) +
         " entries, more than the int32 range; N is the pipeline's sequence "
         "capacity per microbatch")
            .c_str());
  planner::MicrobatchInputs inputs =
      valueOrRaise(planner::microbatchInputs(plan, rank, N));
  auto *ids = new std::vector<int32_t>(std::move(inputs.sampleIds));
  nb::capsule owner(ids, [](void *p) noexcept {
    delete static_cast<std::vector<int32_t> *>(p);
  });
  nb::object sampleIds = nb::cast(nb::ndarray<nb::numpy, int32_t, nb::ndim<2>>(
      ids->data(),
      {std::size_t(inputs.numMicrobatches()), std::size_t(inputs.slots)},
      owner));
  return nb::make_tuple(sampleIds, toNumpy(inputs.numSeqs));
}

/// S1's `multiple` m: an int (>= 1, checked by the reference) or the name of
/// a low-precision recipe (reference::lowPrecisionMultiples).
int64_t multipleArgument(const char *function, MultipleArg multipleArg) {
  nb::handle object = multipleArg.object;
  if (nb::isinstance<nb::str>(object)) {
    reference::Expected<int64_t> multiple =
        reference::lowPrecisionMultiple(nb::borrow<nb::str>(object).c_str());
    if (!multiple)
      raiseArgument(PyExc_ValueError,
                    std::string(function) + ": " + multiple.error());
    return *multiple;
  }
  if (PyBool_Check(object.ptr()) || !PyIndex_Check(object.ptr()))
    raiseArgument(PyExc_TypeError,
                  std::string(function) +
                      ": multiple must be an int or a low-precision recipe "
                      "name; got " +
                      typeName(object));
  return integerArgument(object, "multiple");
}

/// S1's granularity G from Python's cp, tp, dp and multiple, through
/// reference::padGranularity (which refuses values below 1 and an overflow),
/// within int32 (the range of the padded lengths).
int64_t padGranularityArgument(const char *function, IntArg cpArg, IntArg tpArg,
                               bool sequenceParallel, IntArg dpArg,
                               bool dynamicCp, MultipleArg multipleArg) {
  const int64_t cp = integerArgument(cpArg.object, "cp");
  const int64_t tp = integerArgument(tpArg.object, "tp");
  const int64_t dp = integerArgument(dpArg.object, "dp");
  const int64_t multiple = multipleArgument(function, multipleArg);
  reference::Expected<int64_t> granularity = reference::padGranularity(
      cp, tp, sequenceParallel, dp, dynamicCp, multiple);
  if (!granularity)
    raiseArgument(PyExc_ValueError,
                  std::string(function) + ": " + granularity.error());
  if (*granularity > kInt32Range.max)
    raiseArgument(
        PyExc_ValueError,
        std::string(function) + ": the alignment granularity G = " +
            std::to_string(*granularity) + " for cp = " + std::to_string(cp) +
            ", tp = " + std::to_string(tp) + ", dp = " + std::to_string(dp) +
            ", multiple = " + std::to_string(multiple) +
            " is outside the int32 range");
  return *granularity;
}

nb::object plannerAlignLengths(LengthsArg validLengths, IntArg cp, IntArg tp,
                               bool sequenceParallel, IntArg dp, bool dynamicCp,
                               MultipleArg multiple) {
  const int64_t granularity = padGranularityArgument(
      "align_lengths", cp, tp, sequenceParallel, dp, dynamicCp, multiple);
  reference::Expected<std::vector<int32_t>> padded = reference::alignLengths(
      lengthsArgument(validLengths, "valid_lengths"), granularity);
  if (!padded)
    throw nb::value_error(padded.error().c_str());
  return toNumpy(*padded);
}

const char *algorithmName(planner::PlanAlgorithm algorithm) {
  return algorithm == planner::PlanAlgorithm::NextFit ? "next_fit"
                                                      : "first_fit_decreasing";
}

/// The Python objects a Kernel holds (its allocator, its result type), shown
/// to the garbage collector: a cycle through them (an allocator that refers
/// to its kernel; thdc._allocate's module globals holding a registry of
/// kernels) is then collected, where it would otherwise outlive the
/// interpreter and show as nanobind's leak warnings at exit.
int kernelTraverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self))
    return 0;
  Kernel *kernel = nb::inst_ptr<Kernel>(self);
  Py_VISIT(kernel->allocator.ptr());
  Py_VISIT(kernel->resultType.ptr());
  return 0;
}

int kernelClear(PyObject *self) {
  if (!nb::inst_ready(self))
    return 0;
  Kernel *kernel = nb::inst_ptr<Kernel>(self);
  kernel->allocator = nb::none();
  kernel->resultType = nb::none();
  return 0;
}

PyType_Slot kernelSlots[] = {{Py_tp_traverse, (void *)kernelTraverse},
                             {Py_tp_clear, (void *)kernelClear},
                             {0, nullptr}};

/// thdc._thdc.Gather: the runtime's one-launch gather (runtime/Gather.h) on
/// a GPU, or its host form. The call takes a flat list of ints, four per
/// segment (source, destination, bytes, value: GatherSegment), so that a
/// caller pays for plain ints only; nothing but the segments' form is
/// checked (as launch_pointers). Without a stream it launches on the
/// framework's current stream of the device, read through the DLPack
/// exchange table of `like`'s type.
class Gather {
public:
  Gather(nb::handle device, nb::handle like) {
    if (!device.is_none()) {
      device_ = int(integerArgument(device, "device"));
      if (device_ < 0)
        raiseArgument(PyExc_ValueError,
                      "device must be a CUDA ordinal >= 0, or None for the "
                      "host; got " +
                          std::to_string(device_));
      if (!like.is_none())
        api_ = exchangeApiOf(Py_TYPE(like.ptr()));
      if (Status prepared = prepareGather(device_); !prepared)
        raiseArgument(PyExc_RuntimeError, prepared.message());
    }
  }

  void call(nb::handle segments, nb::handle stream) const {
    if (!PyList_Check(segments.ptr()))
      raiseArgument(PyExc_TypeError, "segments must be a list of ints; got " +
                                         typeName(segments));
    Py_ssize_t size = PyList_GET_SIZE(segments.ptr());
    if (size % 4)
      raiseArgument(PyExc_ValueError,
                    "segments holds 4 ints per segment (source, destination, "
                    "bytes, value); got " +
                        std::to_string(size) + " ints");
    std::array<GatherSegment, 2 * kGatherSegments> local;
    std::vector<GatherSegment> many;
    GatherSegment *parsed = local.data();
    if (size_t(size / 4) > local.size()) {
      many.resize(size_t(size / 4));
      parsed = many.data();
    }
    for (Py_ssize_t i = 0; i < size; ++i) {
      PyObject *item = PyList_GET_ITEM(segments.ptr(), i);
      long long value = PyLong_Check(item) ? PyLong_AsLongLong(item) : -1;
      if (!PyLong_Check(item) || (value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        raiseArgument(PyExc_TypeError,
                      "segments[" + std::to_string(i) +
                          "] must be an int in the int64 range; got " +
                          typeName(item));
      }
      GatherSegment &segment = parsed[i / 4];
      uint64_t *field[] = {&segment.source, &segment.destination,
                           &segment.bytes, &segment.value};
      *field[i % 4] = uint64_t(value);
    }
    size_t count = size_t(size / 4);
    Status done;
    if (device_ < 0) {
      if (!stream.is_none())
        checkStreamArgument(stream);
      done = gatherOnHost(parsed, count);
    } else {
      void *launchStream = nullptr;
      if (!stream.is_none())
        launchStream = streamHandle(stream);
      else if (!api_)
        raiseArgument(PyExc_ValueError,
                      "this Gather has no framework to take the current "
                      "stream from: pass stream=");
      else if (api_->currentWorkStream(dl::kCUDA, device_, &launchStream) != 0)
        throw nb::python_error();
      done = launchGather(parsed, count, launchStream, device_);
    }
    if (!done)
      raiseArgument(PyExc_RuntimeError, done.message());
  }

  bool followsCurrentStream() const { return api_ != nullptr; }
  int device() const { return device_; }

private:
  int device_ = -1; ///< -1: the host
  const dl::ExchangeApi *api_ = nullptr;
};

/// thdc._thdc.InputGather: the whole of thdc.megatron.InputLoader.load for
/// the common microbatch, in one call: every argument a torch.Tensor of the
/// buffers' own type, contiguous, on the gather's device, of its buffer's
/// dtype and within its capacity, and num_seqs left out, an int32 int, or
/// such a tensor. Each tensor is read through the framework's DLPack
/// exchange table (no Python attribute call per tensor), the segments are
/// built here and launched as one gather on the framework's current stream.
/// Anything else is refused before anything is copied (the call returns
/// False), and the caller takes its general path, which checks and reports
/// errors. The buffers are read once, at construction: their addresses,
/// dtypes and sizes.
class InputGather {
public:
  /// A load's tensor arguments (tokens, labels, loss_mask, position_ids,
  /// cu_seqlens, cu_seqlens_padded), as InputLoader.load takes them.
  static constexpr size_t kArguments = 6;
  /// One microbatch's gather: a segment per argument, a store after each
  /// of the two cu arrays, one each for num_rows and num_seqs.
  using Segments = std::array<GatherSegment, kArguments + 4>;

  InputGather(const Gather &gather, nb::handle targets, nb::handle numSeqs,
              nb::handle numRows)
      : device_(gather.device()) {
    tensorType_ = nb::borrow(
        nb::handle(reinterpret_cast<PyObject *>(Py_TYPE(numSeqs.ptr()))));
    api_ = exchangeApiOf(Py_TYPE(numSeqs.ptr()));
    if (!api_)
      raiseArgument(PyExc_TypeError,
                    "num_seqs must be a buffer of a framework with a DLPack "
                    "exchange table (torch >= 2.10); got " +
                        typeName(numSeqs));
    numSeqs_ = buffer(numSeqs, "num_seqs");
    if (!numRows.is_none()) {
      numRows_ = buffer(numRows, "num_rows");
      if (!sameType(numRows_.dtype, kInt32) || numRows_.elements != 1)
        raiseArgument(PyExc_TypeError,
                      "num_rows must be one int32 element");
    }
    if (!PyTuple_Check(targets.ptr()))
      raiseArgument(PyExc_TypeError,
                    "targets must be a tuple of (argument, buffer, is_data); "
                    "got " +
                        typeName(targets));
    Py_ssize_t count = PyTuple_GET_SIZE(targets.ptr());
    if (count < 1 || size_t(count) > kArguments)
      raiseArgument(PyExc_ValueError, "targets holds 1 to 6 buffers; got " +
                                          std::to_string(count));
    for (Py_ssize_t i = 0; i < count; ++i) {
      nb::handle item = PyTuple_GET_ITEM(targets.ptr(), i);
      std::string what = "targets[" + std::to_string(i) + "]";
      if (!PyTuple_Check(item.ptr()) || PyTuple_GET_SIZE(item.ptr()) != 3)
        raiseArgument(PyExc_TypeError, what +
                                           " must be a tuple (argument, "
                                           "buffer, is_data); got " +
                                           typeName(item));
      Target target;
      int64_t argument = integerArgument(PyTuple_GET_ITEM(item.ptr(), 0),
                                         what + "[0]", kInt32Range);
      if (argument < 0 || size_t(argument) >= kArguments)
        raiseArgument(PyExc_ValueError,
                      what + "[0] must be an argument index in [0, 6); got " +
                          std::to_string(argument));
      target.argument = int(argument);
      target.buffer = buffer(PyTuple_GET_ITEM(item.ptr(), 1), what + "[1]");
      target.isData = PyObject_IsTrue(PyTuple_GET_ITEM(item.ptr(), 2)) == 1;
      targets_.push_back(target);
    }
    if (numRows.is_none() !=
        std::none_of(targets_.begin(), targets_.end(),
                     [](const Target &t) { return t.isData; }))
      raiseArgument(PyExc_ValueError,
                    "num_rows goes with the data targets: the kernel bounds "
                    "the rows it reads by it");
  }

  /// Loads the microbatch with one gather, or returns false having done
  /// nothing.
  bool call(nb::handle tokens, nb::handle labels, nb::handle lossMask,
            nb::handle positionIds, nb::handle cuSeqlens,
            nb::handle cuSeqlensPadded, nb::handle numSeqs) const {
    Segments segments;
    size_t count = 0;
    if (!plan({tokens.ptr(), labels.ptr(), lossMask.ptr(), positionIds.ptr(),
               cuSeqlens.ptr(), cuSeqlensPadded.ptr()},
              numSeqs.ptr(), segments, count))
      return false;
    Status done;
    if (device_ < 0) {
      done = gatherOnHost(segments.data(), count);
    } else {
      void *stream = nullptr;
      if (api_->currentWorkStream(dl::kCUDA, device_, &stream) != 0)
        throw nb::python_error();
      done = launchGather(segments.data(), count, stream, device_);
    }
    if (!done)
      raiseArgument(PyExc_RuntimeError, done.message());
    return true;
  }

  /// The flat segments (four ints each, as Gather takes them) that call()
  /// would launch, or None where it would refuse; launches nothing.
  nb::object segments(nb::handle tokens, nb::handle labels, nb::handle lossMask,
                      nb::handle positionIds, nb::handle cuSeqlens,
                      nb::handle cuSeqlensPadded, nb::handle numSeqs) const {
    Segments segments;
    size_t count = 0;
    if (!plan({tokens.ptr(), labels.ptr(), lossMask.ptr(), positionIds.ptr(),
               cuSeqlens.ptr(), cuSeqlensPadded.ptr()},
              numSeqs.ptr(), segments, count))
      return nb::none();
    nb::list flat;
    for (size_t i = 0; i < count; ++i) {
      const GatherSegment &s = segments[i];
      flat.append(int64_t(s.source));
      flat.append(int64_t(s.destination));
      flat.append(int64_t(s.bytes));
      flat.append(int64_t(s.value));
    }
    return flat;
  }

  nb::handle tensorType() const { return tensorType_; }
  void clear() { tensorType_ = nb::none(); }

private:
  /// A static input buffer: where it is, its element type and size, and
  /// its element count, which bounds what a load copies into it (the
  /// buffer was made from the kernel's verified signature; no other count
  /// is trusted).
  struct Buffer {
    uint64_t address = 0;
    dl::DataType dtype{};
    uint64_t elementBytes = 0;
    int64_t elements = 0;
  };
  static constexpr dl::DataType kInt32{dl::kInt, 32, 1};
  struct Target {
    int argument = 0;
    Buffer buffer;
    bool isData = false;
  };

  /// A static buffer: a contiguous tensor of the framework on the gather's
  /// device.
  Buffer buffer(nb::handle object, const std::string &what) const {
    if (Py_TYPE(object.ptr()) !=
        reinterpret_cast<PyTypeObject *>(tensorType_.ptr()))
      raiseArgument(PyExc_TypeError, what + " must be a " +
                                         nb::type_name(tensorType_).c_str() +
                                         "; got " + typeName(object));
    dl::Tensor tensor;
    if (api_->dltensorFromPyObjectNoSync(object.ptr(), &tensor) != 0)
      throw nb::python_error();
    if (!onDevice(tensor))
      raiseArgument(PyExc_ValueError,
                    what + " is on " +
                        describeDevice(tensor.device.type, tensor.device.id) +
                        ", not the gather's device");
    if (!contiguous(tensor))
      raiseArgument(PyExc_ValueError, what + " must be contiguous");
    return {uint64_t(reinterpret_cast<uintptr_t>(tensor.data)) +
                tensor.byteOffset,
            tensor.dtype, uint64_t(tensor.dtype.bits) / 8 * tensor.dtype.lanes,
            elementCount(tensor)};
  }

  static int64_t elementCount(const dl::Tensor &tensor) {
    int64_t elements = 1;
    for (int32_t d = 0; d < tensor.ndim; ++d)
      elements *= tensor.shape[d];
    return elements;
  }

  /// A packed microbatch's tensor is [T] or [1, T]: micro-batch size 1, as
  /// sequence packing has it. A [2, T] tensor is not two microbatches.
  static bool packedShape(const dl::Tensor &tensor) {
    return tensor.ndim == 1 || (tensor.ndim == 2 && tensor.shape[0] == 1);
  }

  static bool contiguous(const dl::Tensor &tensor) {
    if (!tensor.strides)
      return true;
    int64_t expected = 1;
    for (int32_t d = tensor.ndim - 1; d >= 0; --d) {
      if (tensor.shape[d] == 1)
        continue;
      if (tensor.strides[d] != expected)
        return false;
      expected *= tensor.shape[d];
    }
    return true;
  }

  static bool sameType(dl::DataType a, dl::DataType b) {
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
  }

  /// Reads `object` when it is a tensor of the buffers' type on the
  /// gather's device; its element count in `elements`.
  bool read(PyObject *object, dl::Tensor &tensor, int64_t &elements) const {
    if (Py_TYPE(object) != reinterpret_cast<PyTypeObject *>(tensorType_.ptr()))
      return false;
    if (api_->dltensorFromPyObjectNoSync(object, &tensor) != 0) {
      PyErr_Clear();
      return false;
    }
    elements = elementCount(tensor);
    return true;
  }

  bool onDevice(const dl::Tensor &tensor) const {
    return device_ < 0
               ? tensor.device.type == dl::kCPU
               : tensor.device.type == dl::kCUDA && tensor.device.id == device_;
  }

  /// The segments of one load, in InputLoader's order (the targets, then
  /// num_seqs); false where any argument needs the general path.
  bool plan(const std::array<PyObject *, kArguments> &arguments,
            PyObject *numSeqs, Segments &segments, size_t &count) const {
    // Every data tensor has the microbatch's rows and every cu array its
    // entries, each within its own buffer; the rows go to the kernel
    // (num_rows), which empties a microbatch whose offsets claim more.
    int64_t rows = -1, entries = -1, capacityEntries = 0;
    for (const Target &target : targets_) {
      dl::Tensor tensor;
      int64_t elements = 0;
      if (!read(arguments[size_t(target.argument)], tensor, elements) ||
          !packedShape(tensor) || elements > target.buffer.elements)
        return false;
      int64_t &same = target.isData ? rows : entries;
      if (same >= 0 && elements != same)
        return false;
      same = elements;
      if (!target.isData)
        capacityEntries = target.buffer.elements;
      if (!elements)
        continue;
      if (!tensor.data || !sameType(tensor.dtype, target.buffer.dtype) ||
          !onDevice(tensor) || !contiguous(tensor))
        return false;
      segments[count++] = {uint64_t(reinterpret_cast<uintptr_t>(tensor.data)) +
                               tensor.byteOffset,
                           target.buffer.address,
                           uint64_t(elements) * target.buffer.elementBytes, 0};
    }
    // The entry after the given ones, where an earlier microbatch's may
    // be, is made -1: a num_seqs that claims more sequences than the
    // arrays give then reads a decreasing offset (not_monotonic) instead of
    // an earlier microbatch's boundaries.
    if (entries >= 0 && entries < capacityEntries)
      for (const Target &target : targets_)
        if (!target.isData)
          segments[count++] = {0,
                               target.buffer.address +
                                   uint64_t(entries) * target.buffer.elementBytes,
                               target.buffer.elementBytes, ~uint64_t(0)};
    if (rows >= 0) {
      if (!numRows_.address)
        return false;
      segments[count++] = {0, numRows_.address, 4, uint64_t(rows)};
    }
    if (numSeqs == Py_None || PyLong_CheckExact(numSeqs)) {
      int64_t value = 0;
      if (numSeqs == Py_None) {
        if (entries < 0 || entries == capacityEntries)
          return false;
        value = entries - 1;
      } else {
        int overflow = 0;
        long long given = PyLong_AsLongLongAndOverflow(numSeqs, &overflow);
        if (overflow || (given == -1 && PyErr_Occurred())) {
          PyErr_Clear();
          return false;
        }
        value = given;
      }
      if (!sameType(numSeqs_.dtype, kInt32) ||
          value < std::numeric_limits<int32_t>::min() ||
          value > std::numeric_limits<int32_t>::max())
        return false;
      segments[count++] = {0, numSeqs_.address, 4, uint64_t(value)};
      return true;
    }
    dl::Tensor tensor;
    int64_t elements = 0;
    if (!read(numSeqs, tensor, elements) || !elements || !tensor.data ||
        !sameType(tensor.dtype, numSeqs_.dtype) || !onDevice(tensor))
      return false;
    segments[count++] = {uint64_t(reinterpret_cast<uintptr_t>(tensor.data)) +
                             tensor.byteOffset,
                         numSeqs_.address, numSeqs_.elementBytes, 0};
    return true;
  }

  int device_ = -1; ///< -1: the host
  const dl::ExchangeApi *api_ = nullptr;
  /// The buffers' Python type: an argument of exactly this type is read
  /// through api_ (a subclass takes the general path).
  nb::object tensorType_;
  std::vector<Target> targets_;
  Buffer numSeqs_, numRows_;
};

int inputGatherTraverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self))
    return 0;
  Py_VISIT(nb::inst_ptr<InputGather>(self)->tensorType().ptr());
  return 0;
}

int inputGatherClear(PyObject *self) {
  if (nb::inst_ready(self))
    nb::inst_ptr<InputGather>(self)->clear();
  return 0;
}

PyType_Slot inputGatherSlots[] = {{Py_tp_traverse, (void *)inputGatherTraverse},
                                  {Py_tp_clear, (void *)inputGatherClear},
                                  {0, nullptr}};
} // namespace

NB_MODULE(_thdc, m) {
  m.doc() = "thdc's runtime (and JIT, where built with MLIR) for Python";

  nb::class_<Kernel>(m, "Kernel", nb::type_slots(kernelSlots))
      .def_prop_ro("entry", [](const Kernel &k) { return k.manifest().entry; })
      .def_prop_ro("params",
                   [](const Kernel &k) { return k.manifest().params; })
      .def_prop_ro("signature", &Kernel::signature,
                   "(name, dtype, shape, direction) per buffer, inputs then "
                   "outputs")
      .def_prop_ro("backend",
                   [](const Kernel &k) {
                     return k.executable().backend() == Backend::Cuda ? "cuda"
                                                                      : "host";
                   })
      .def_prop_ro(
          "device_name",
          [](const Kernel &k) { return k.executable().loadInfo().device; })
      .def_prop_ro("launch_geometry",
                   [](const Kernel &k) {
                     const Manifest &m = k.manifest();
                     return nb::make_tuple(
                         nb::make_tuple(m.grid[0], m.grid[1], m.grid[2]),
                         nb::make_tuple(m.block[0], m.block[1], m.block[2]));
                   })
      .def_prop_ro("compile_info",
                   [](const Kernel &k) {
                     nb::dict info;
                     info["source"] = k.record.source;
                     info["micros"] = k.record.micros;
                     info["compile_micros"] = k.record.compileMicros;
                     info["load_micros"] = k.record.loadMicros;
                     info["key"] = k.record.key;
                     info["cache_note"] = k.record.cacheNote;
                     return info;
                   })
      .def("_set_result_type",
           [](Kernel &k, nb::object type) {
             if (!PyType_Check(type.ptr()) ||
                 !PyType_IsSubtype(
                     reinterpret_cast<PyTypeObject *>(type.ptr()),
                     &PyTuple_Type))
               throw nb::type_error("the result type must subclass tuple");
             k.resultType = std::move(type);
           })
      .def("_set_allocator",
           [](Kernel &k, nb::object allocator) {
             k.allocator = std::move(allocator);
           })
      .def("__call__", &Kernel::call,
           "Runs the pipeline: inputs by position or name, outputs in out= "
           "(a sequence or a dict by name; allocated when omitted), on "
           "stream= (default: the framework's current stream) and device= "
           "(default: the current device).")
      .def(
          "prepare",
          [](const Kernel &k, IntArg device) {
            Status status = k.executable().prepare(
                int(integerArgument(device.object, "device")));
            if (!status)
              throw std::runtime_error(status.message());
          },
          nb::arg("device") = -1,
          "Loads the module on a device now (else on its first launch).")
      .def("launch_pointers", &Kernel::launchPointers, nb::arg("pointers"),
           nb::arg("stream") = 0, nb::arg("device") = -1,
           "Launches on raw addresses, one per buffer in signature order; "
           "nothing is checked.");

  nb::class_<Gather>(m, "Gather")
      .def(nb::init<nb::handle, nb::handle>(), nb::arg("device").none(),
           nb::arg("like").none() = nb::none(),
           "The runtime's one-launch gather on CUDA device `device` (loaded "
           "now), or its host form for device=None. `like`: an array of the "
           "framework whose current stream a call without stream= uses.")
      .def("__call__", &Gather::call, nb::arg("segments"),
           nb::arg("stream").none() = nb::none(),
           "Copies and stores: segments is a flat list of ints, four per "
           "segment: source address (0 for a store), destination address, "
           "bytes, value (a store writes its low `bytes` <= 8 bytes). One "
           "launch per 16 segments, on `stream` or the framework's current "
           "stream; no synchronisation.")
      .def_prop_ro("follows_current_stream", &Gather::followsCurrentStream)
      .def_prop_ro("device", &Gather::device);
  m.attr("GATHER_SEGMENTS_PER_LAUNCH") = kGatherSegments;
  nb::class_<InputGather>(m, "InputGather", nb::type_slots(inputGatherSlots))
      .def(nb::init<const Gather &, nb::handle, nb::handle, nb::handle>(),
           nb::arg("gather"), nb::arg("targets"), nb::arg("num_seqs"),
           nb::arg("num_rows").none(),
           "InputLoader's one-call path over static buffers: targets is a "
           "tuple of (argument index, buffer, is_data) in the order the "
           "segments are laid out (argument indices: tokens, labels, "
           "loss_mask, position_ids, cu_seqlens, cu_seqlens_padded); "
           "num_seqs the count's buffer; num_rows the buffer that receives "
           "the data tensors' rows (None without data targets). Each "
           "buffer's own length bounds what is copied into it.")
      .def("__call__", &InputGather::call, nb::arg("tokens").none(),
           nb::arg("labels").none(), nb::arg("loss_mask").none(),
           nb::arg("position_ids").none(), nb::arg("cu_seqlens").none(),
           nb::arg("cu_seqlens_padded").none(), nb::arg("num_seqs").none(),
           "Loads the microbatch with one gather on the framework's current "
           "stream and returns True, or returns False having done nothing "
           "(an argument the general path must take or refuse).")
      .def("segments", &InputGather::segments, nb::arg("tokens").none(),
           nb::arg("labels").none(), nb::arg("loss_mask").none(),
           nb::arg("position_ids").none(), nb::arg("cu_seqlens").none(),
           nb::arg("cu_seqlens_padded").none(), nb::arg("num_seqs").none(),
           "The flat segments a call would launch, or None where it would "
           "refuse; launches nothing.");
  nb::class_<RuntimeGraph>(m, "RuntimeGraph")
      .def("replay", &RuntimeGraph::replay, nb::arg("stream"));
  m.def("capture_pointers",
        [](std::shared_ptr<Kernel> kernel,
           const std::vector<uintptr_t> &addresses, uintptr_t stream,
           int device) {
          return std::make_unique<RuntimeGraph>(std::move(kernel), addresses,
                                                stream, device);
        },
        nb::arg("kernel"), nb::arg("pointers"), nb::arg("stream"),
        nb::arg("device") = -1,
        "Captures one launch on raw addresses with the runtime's own CUDA "
        "graph (the C++ path); nothing is checked.");
  m.def("load", &loadBundle, nb::arg("bundle"), nb::arg("backend") = "auto",
        nb::arg("cache_dir") = "", nb::arg("device") = -1);
#ifdef THDC_PYTHON_JIT
  m.def("compile", &compileText, nb::arg("text"), nb::arg("params"),
        nb::arg("backend") = "auto", nb::arg("cache_dir") = "",
        nb::arg("source_name") = "pipeline.mlir", nb::arg("chip") = "");
  m.def("compile_cached", &cachedText, nb::arg("text"), nb::arg("params"),
        nb::arg("backend") = "auto", nb::arg("cache_dir") = "",
        nb::arg("chip") = "",
        "compile()'s memory-cache hit, or None where compile() would "
        "compile or load a module.");
  m.def(
      "read_source",
      [](const std::string &path) {
        auto read = thdc::readInputFile(path, thdc::kMaxSourceBytes);
        if (!read) {
          std::string message;
          std::error_code code;
          llvm::handleAllErrors(read.takeError(),
                                [&](const llvm::ErrorInfoBase &error) {
                                  message = error.message();
                                  code = error.convertToErrorCode();
                                });
          // What open() would raise for the same path, else ValueError.
          PyObject *type =
              code == std::errc::no_such_file_or_directory
                  ? PyExc_FileNotFoundError
              : code == std::errc::permission_denied ||
                      code == std::errc::operation_not_permitted
                  ? PyExc_PermissionError
                  : PyExc_ValueError;
          PyErr_SetString(type, message.c_str());
          throw nb::python_error();
        }
        return std::string((*read)->getBuffer());
      },
      nb::arg("path"),
      "The text of the pipeline file `path`: a regular file (or a pipe) of "
      "at most 16 MiB; a device, a folder or anything larger raises "
      "ValueError naming it (compiler/InputFile.h).");
  m.attr("has_jit") = true;
  // The commands of an installed package (thdc/_tools.py): one call per
  // process, as each tool's main is.
  m.def(
      "tool_main",
      [](const std::string &name, std::vector<std::string> args) -> int {
        int (*main)(int, char **) = name == "thdc"      ? thdc::tools::thdcMain
                                    : name == "thd-opt" ? thdc::tools::thdOptMain
                                    : name == "thd-run" ? thdc::tools::thdRunMain
                                                        : nullptr;
        if (!main)
          throw nb::value_error(
              ("tool_main: no tool '" + name + "' (thdc, thd-opt, thd-run)")
                  .c_str());
        std::vector<char *> argv;
        for (std::string &arg : args)
          argv.push_back(arg.data());
        argv.push_back(nullptr);
        // The tools never call into Python.
        nb::gil_scoped_release released;
        int code = main(static_cast<int>(args.size()), argv.data());
        // Written now, while the caller's SIGPIPE disposition holds (the
        // commands set the default, thdc/_tools.py), not at the process's
        // exit, where Python has put back its own.
        llvm::outs().flush();
        return code;
      },
      nb::arg("name"), nb::arg("argv"),
      "Runs the command `name` (thdc, thd-opt or thd-run) on argv (argv[0] "
      "first) and returns its exit code. Once per process.");
#else
  m.attr("has_jit") = false;
#endif
  m.def(
      "describe_status",
      [](IntArg status) {
        return thdc::reference::describeStatus(
            int32_t(integerArgument(status.object, "status")));
      },
      nb::arg("status"),
      "The names of a thd.validate status word's bits, joined by '|' "
      "(\"ok\" for 0), as reference/StatusBits.h defines them.");
  m.def("cuda_available", [] { return bool(CudaDriver::get()); });
  m.def("current_device", [] {
    Result<const CudaDriver *> cu = CudaDriver::get();
    return cu ? (*cu)->currentDevice() : -1;
  });

  nb::module_ reference = m.def_submodule(
      "reference", "The reference semantics (plain C++), for tests");
  reference.def("graph_step", &referenceGraphStep, nb::arg("tokens"),
                nb::arg("labels"), nb::arg("position_ids"),
                nb::arg("loss_mask"), nb::arg("cu_seqlens"),
                nb::arg("cu_seqlens_padded"), nb::arg("num_seqs"),
                nb::arg("cp_rank"), nb::arg("C"), nb::arg("cp"), nb::arg("N"),
                nb::kw_only(), nb::arg("rows_given").none() = nb::none(),
                "One microbatch of the graph-mode step (megatron_graph_step.mlir's "
                "semantics) for CP rank cp_rank; rows_given: the rows of the data "
                "buffers the caller copied (the rows_not_given check), or None.");
  reference.def("seq_idx", &referenceSeqIdx, nb::arg("cu_seqlens"),
                nb::arg("total_tokens"));
  reference.def(
      "pack_microbatch", &referencePackMicrobatch, nb::arg("token_pool"),
      nb::arg("label_pool"), nb::arg("loss_mask_pool"),
      nb::arg("sample_offsets"), nb::arg("sample_lengths"),
      nb::arg("sample_ids"), nb::arg("num_seqs"), nb::arg("cp_rank"),
      nb::arg("C"), nb::arg("cp"), nb::arg("N"),
      "One microbatch of examples/pack_microbatch.mlir for CP rank cp_rank "
      "(reference::packMicrobatchStep): a dict of NumPy arrays by output "
      "name, max_seqlen and status as ints. ValueError for shapes the "
      "pipeline cannot have and data the reference steps refuse.");

  nb::module_ planning = m.def_submodule(
      "planner", "The host-side microbatch planner (planner/Planner.h): "
                 "docs/semantics.md S1, S2, S3 and S12");
  nb::class_<planner::MicrobatchPlan>(
      planning, "Plan",
      "A packing of one global batch into microbatches (S3): packs of "
      "sequence ids, and groups[m][j], the pack of microbatch m on DP x CP "
      "rank j = dp_index*cp + cp_index.")
      .def_ro("packs", &planner::MicrobatchPlan::packs,
              "the sequence ids of every pack, increasing within a pack")
      .def_ro("pack_tokens", &planner::MicrobatchPlan::packTokens,
              "the padded tokens of every pack (<= capacity)")
      .def_ro("groups", &planner::MicrobatchPlan::groups,
              "groups[m][j] = packs[m*dp + j//cp]")
      .def_ro("capacity", &planner::MicrobatchPlan::capacity,
              "the pack budget C*cp")
      .def_ro("max_real_seqs", &planner::MicrobatchPlan::maxRealSeqs,
              "the S2 cap K on sequences per pack (None: no cap)")
      .def_ro("dp", &planner::MicrobatchPlan::dp)
      .def_ro("cp", &planner::MicrobatchPlan::cp)
      .def_prop_ro("num_microbatches",
                   &planner::MicrobatchPlan::numMicrobatches)
      .def_prop_ro("algorithm",
                   [](const planner::MicrobatchPlan &p) {
                     return algorithmName(p.algorithm);
                   })
      .def("__len__", &planner::MicrobatchPlan::numMicrobatches)
      .def("__repr__", [](const planner::MicrobatchPlan &p) {
        return "Plan(" + std::to_string(p.numMicrobatches()) +
               " microbatches, " + std::to_string(p.packs.size()) +
               " packs, capacity " + std::to_string(p.capacity) + ", dp " +
               std::to_string(p.dp) + ", cp " + std::to_string(p.cp) + ", " +
               algorithmName(p.algorithm) + ")";
      });
  planning.def(
      "plan", &plannerPlan, nb::arg("padded_lengths"), nb::arg("C"),
      nb::arg("cp"), nb::arg("dp") = 1,
      nb::arg("max_packed_sequences") = nb::none(),
      nb::arg("alignment_set") = true, nb::arg("dummy_tail") = true,
      nb::arg("vpp_group") = nb::none(), nb::arg("algorithm") = "next_fit",
      "Packs the padded lengths (global sequence ids in DP order) into "
      "microbatches of at most C*cp tokens and, with "
      "max_packed_sequences N, at most K sequences (S2: N-1 with an "
      "alignment and the dummy tail, else N). algorithm: 'next_fit' "
      "(the reference framework's scheduler, S3), 'balanced' "
      "(first-fit decreasing unless next-fit needs fewer microbatches) "
      "or 'first_fit_decreasing'. ValueError with the planner's message "
      "on bad settings, a negative length or a sequence longer than "
      "C*cp.");
  planning.def(
      "microbatch_inputs", &plannerMicrobatchInputs, nb::arg("plan"),
      nb::arg("rank"), nb::arg("N"),
      "(sample_ids, num_seqs) of examples/pack_microbatch.mlir for DP x "
      "CP rank `rank` (cp_rank = rank % cp) and every microbatch: "
      "sample_ids an int32 array [num_microbatches, N-1] (each pack's "
      "ids, then zeros), num_seqs an int32 array [num_microbatches]. "
      "ValueError when a pack has more than N-1 sequences.");
  planning.def("align_lengths", &plannerAlignLengths, nb::arg("valid_lengths"),
               nb::arg("cp"), nb::arg("tp") = 1,
               nb::arg("sequence_parallel") = false, nb::arg("dp") = 1,
               nb::arg("dynamic_cp") = false, nb::arg("multiple") = 1,
               "S1: the padded lengths p = round_up(v, G) as an int32 array, "
               "G = pad_granularity(cp, tp, sequence_parallel, dp, "
               "dynamic_cp, multiple).");
  planning.def(
      "pad_granularity",
      [](IntArg cp, IntArg tp, bool sequenceParallel, IntArg dp, bool dynamicCp,
         MultipleArg multiple) {
        return padGranularityArgument("pad_granularity", cp, tp,
                                      sequenceParallel, dp, dynamicCp,
                                      multiple);
      },
      nb::arg("cp"), nb::arg("tp") = 1, nb::arg("sequence_parallel") = false,
      nb::arg("dp") = 1, nb::arg("dynamic_cp") = false, nb::arg("multiple") = 1,
      "S1: the alignment granularity G = tpPad * lcm(cpPad, share * m): "
      "cpPad = 2*cp if cp > 1 else 1 (2*cp*dp with dynamic CP), share = "
      "cpPad/2 if cpPad > 1 else 1 (the ranks a sequence is divided among), "
      "tpPad = tp under sequence parallelism else 1, and m = multiple, an "
      "int >= 1 or a recipe of LOW_PRECISION_MULTIPLES: every rank's share "
      "of every sequence is then a multiple of m. ValueError on values "
      "below 1, an unknown recipe, or a G outside int32.");
  {
    nb::dict multiples;
    for (const reference::LowPrecisionMultiple &entry :
         reference::lowPrecisionMultiples())
      multiples[entry.recipe] = entry.multiple;
    planning.attr("LOW_PRECISION_MULTIPLES") = multiples;
  }
  planning.def(
      "max_microbatches",
      [](IntArg globalBatchSize, IntArg maxSeqlen, IntArg C, IntArg cp,
         IntArg dp, OptionalIntArg maxPackedSequences, bool alignmentSet,
         bool dummyTail, OptionalIntArg vppGroup) {
        const planner::PlannerConfig config = plannerConfig(
            C, cp, dp, maxPackedSequences, alignmentSet, dummyTail, vppGroup);
        return valueOrRaise(planner::microbatchUpperBound(
            config,
            integerArgument(globalBatchSize.object, "global_batch_size"),
            integerArgument(maxSeqlen.object, "max_seqlen")));
      },
      nb::arg("global_batch_size"), nb::arg("max_seqlen"), nb::arg("C"),
      nb::arg("cp"), nb::arg("dp") = 1,
      nb::arg("max_packed_sequences") = nb::none(),
      nb::arg("alignment_set") = true, nb::arg("dummy_tail") = true,
      nb::arg("vpp_group") = nb::none(),
      "S12: the upper bound U on the microbatches of a global batch of "
      "global_batch_size sequences of padded length at most max_seqlen: "
      "how many graph slots (or static output buffers) to prepare. A "
      "next-fit plan never needs more, a balanced plan never more than "
      "next-fit.");
  planning.def(
      "graph_capture_count",
      [](IntArg numMicrobatches, IntArg upperBound, bool useRuntimeCount) {
        return reference::graphCaptureCount(
            integerArgument(numMicrobatches.object, "num_microbatches",
                            kInt64Range),
            integerArgument(upperBound.object, "upper_bound", kInt64Range),
            useRuntimeCount);
      },
      nb::arg("num_microbatches"), nb::arg("upper_bound"),
      nb::arg("use_runtime_count") = false,
      "S12: max(num_microbatches, upper_bound), or num_microbatches alone "
      "when the runtime count must be used.");
}
