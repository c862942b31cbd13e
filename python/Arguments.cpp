//===- Arguments.cpp - what the binding units read from Python ------------===//

#include "python/Arguments.h"

#include <cstring>
#include <string_view>

using namespace thdc::runtime;

namespace thdc::python {

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
          candidate->dltensor_from_py_object_no_sync &&
          candidate->current_work_stream)
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

/// `object` as an integer: a Python int or an object with __index__ (NumPy's
/// integers); a bool, a float, a string or anything else is a TypeError
/// naming `what` (nanobind's own casters take True as 1), a value outside
/// `range` a ValueError.
int64_t integerArgument(nb::handle object, const std::string &what,
                        IntegerRange range) {
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
    Py_ssize_t count = PySequence_Size(object.ptr());
    if (count < 0)
      throw nb::python_error();
    values.resize(size_t(count));
    for (Py_ssize_t i = 0; i < count; ++i) {
      // A new reference: a lazy sequence may make the item just now.
      nb::object item = nb::steal(PySequence_GetItem(object.ptr(), i));
      if (!item.is_valid())
        throw nb::python_error();
      values[size_t(i)] = integerArgument(
          item, what + "[" + std::to_string(i) + "]", kInt64Range);
    }
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

/// "input 'tokens'" / "output 'status'", for messages.
std::string roleOf(const BufferDesc &desc) {
  return (desc.isOutput ? "output " : "input ") + quoted(desc.name);
}

void readArray(nb::handle object, const BufferDesc &desc, ArrayView &view,
               ArrayOwners &owners) {
  bool writable = desc.isOutput;
  if (const dl::ExchangeApi *api = exchangeApiOf(Py_TYPE(object.ptr()))) {
    dl::Tensor tensor;
    if (api->dltensor_from_py_object_no_sync(object.ptr(), &tensor) != 0) {
      nb::python_error error;
      raiseArgument(PyExc_TypeError, roleOf(desc) +
                                         " cannot be read through DLPack: " +
                                         std::string(error.what()));
    }
    if (tensor.ndim < 0 || tensor.ndim > int32_t(view.shape.size()))
      raiseArgument(PyExc_ValueError, roleOf(desc) + " has " +
                                          std::to_string(tensor.ndim) +
                                          " dimensions; thdc takes 1-D arrays");
    view.data = static_cast<char *>(tensor.data) + tensor.byte_offset;
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
      raiseArgument(PyExc_ValueError, roleOf(desc) + " has " +
                                          std::to_string(nd.ndim()) +
                                          " dimensions; thdc takes 1-D arrays");
    view.data = const_cast<void *>(static_cast<const void *>(nd.data()));
    view.device = {static_cast<DLDeviceType>(nd.device_type()), nd.device_id()};
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
  throw nb::value_error(
      ("backend must be 'auto', 'cuda' or 'host'; got '" + name + "'").c_str());
}

/// Whether `object` is a CuPy array (its type's module is cupy's).
bool isCupyArray(PyObject *object) {
  nb::object module =
      nb::getattr(nb::handle(reinterpret_cast<PyObject *>(Py_TYPE(object))),
                  "__module__", nb::none());
  if (!nb::isinstance<nb::str>(module))
    return false;
  std::string_view name = nb::borrow<nb::str>(module).c_str();
  return name == "cupy" || name.substr(0, 5) == "cupy.";
}

static bool isIndexLike(nb::handle object) {
  return PyIndex_Check(object.ptr()) && !PyBool_Check(object.ptr());
}

[[noreturn]] static void raiseBadStream(nb::handle stream) {
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
    if (!PyTuple_Check(pair.ptr()) || PyTuple_Size(pair.ptr()) != 2)
      raiseArgument(PyExc_TypeError,
                    "stream.__cuda_stream__() must return a (version, "
                    "handle) tuple; got " +
                        typeName(pair));
    return handle(PyTuple_GetItem(pair.ptr(), 1),
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

bool sameType(dl::DataType a, dl::DataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

} // namespace thdc::python
