//===- ThdcModule.cpp - thdc's Python module (thdc._thdc) -----------------===//
//
// Binds the MLIR-free runtime (runtime/Executable.h) and, when the build has
// MLIR, the JIT (jit/Jit.h) to Python. A call takes any DLPack arrays:
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
#ifdef THDC_PYTHON_JIT
#include "jit/Jit.h"
#endif

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

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

/// Reads `object` as an array. `writable` asks nanobind's import for a
/// writable view (outputs); a framework exchange table gives writable views.
/// nanobind imports kept alive for the duration of a call.
struct ArrayOwners {
  std::vector<nb::ndarray<>> writable;
  std::vector<nb::ndarray<nb::ro>> readOnly;
  std::vector<nb::object> objects;
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
    if (tensor.ndim > int32_t(view.shape.size()))
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
                  roleOf(desc) + " must be an array with DLPack support (torch, "
                         "CuPy, NumPy, JAX)" +
                      std::string(writable ? " and writable" : "") +
                      "; got " + nb::type_name(object.type()).c_str());
}

/// Checks `view` against `desc`: dtype, element count in a 1-D (or
/// [1, n]-like) shape, contiguity.
void checkArray(const ArrayView &view, const BufferDesc &desc) {
  dl::DataType want = dtypeOf(desc.type);
  if (view.dtype.code != want.code || view.dtype.bits != want.bits ||
      view.dtype.lanes != want.lanes)
    raiseArgument(PyExc_TypeError, roleOf(desc) + " must have dtype " +
                                       dtypeName(desc.type) + "; got " +
                                       describeDtype(view.dtype));
  int64_t count = 1;
  int longAxis = -1;
  for (int32_t d = 0; d < view.ndim; ++d) {
    count *= view.shape[d];
    if (view.shape[d] != 1) {
      if (longAxis >= 0)
        longAxis = -2;
      else if (longAxis == -1)
        longAxis = d;
    }
  }
  auto shapeText = [&] {
    std::string text = "(";
    for (int32_t d = 0; d < view.ndim; ++d)
      text += std::to_string(view.shape[d]) + (view.ndim == 1 ? "," : "") +
              (d + 1 < view.ndim ? ", " : "");
    return text + ")";
  };
  if (count != desc.elements || longAxis == -2)
    raiseArgument(PyExc_ValueError,
                  roleOf(desc) + " must have shape (" +
                      std::to_string(desc.elements) +
                      ",) (leading dimensions of 1 are accepted); got " +
                      shapeText());
  if (longAxis >= 0 && view.hasStrides && view.strides[longAxis] != 1)
    raiseArgument(PyExc_ValueError,
                  roleOf(desc) + " must be contiguous; its stride is " +
                      std::to_string(view.strides[longAxis]) +
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

/// A stream argument: an int handle, an object with `cuda_stream`
/// (torch.cuda.Stream) or `ptr` (cupy), or the `__cuda_stream__` protocol.
void *streamHandle(nb::handle stream) {
  if (PyLong_Check(stream.ptr()))
    return reinterpret_cast<void *>(nb::cast<uintptr_t>(stream));
  if (nb::hasattr(stream, "__cuda_stream__")) {
    nb::object pair = stream.attr("__cuda_stream__")();
    return reinterpret_cast<void *>(nb::cast<uintptr_t>(pair[1]));
  }
  if (nb::hasattr(stream, "cuda_stream"))
    return reinterpret_cast<void *>(
        nb::cast<uintptr_t>(stream.attr("cuda_stream")));
  if (nb::hasattr(stream, "ptr"))
    return reinterpret_cast<void *>(nb::cast<uintptr_t>(stream.attr("ptr")));
  throw nb::type_error(
      "stream must be an int handle, a torch.cuda.Stream, a cupy Stream or "
      "an object with __cuda_stream__");
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
    std::array<PyObject *, kMaxArguments> objects{};
    nb::handle stream = nb::none(), outArg = nb::none(), deviceArg = nb::none();

    if (args.size() > inputs_.size())
      raiseArgument(PyExc_TypeError,
                    m.entry + "() takes " + std::to_string(inputs_.size()) +
                        " inputs; got " + std::to_string(args.size()) +
                        " positional arguments");
    for (size_t i = 0; i < args.size(); ++i)
      objects[inputs_[i]] = args[i].ptr();
    PyObject *key = nullptr, *value = nullptr;
    Py_ssize_t position = 0;
    while (PyDict_Next(kwargs.ptr(), &position, &key, &value)) {
      const char *name = PyUnicode_AsUTF8(key);
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
      if (objects[found])
        raiseArgument(PyExc_TypeError, m.entry +
                                           "() got input '" + name +
                                           "' both by position and by name");
      objects[found] = value;
    }
    for (int index : inputs_)
      if (!objects[index])
        raiseArgument(PyExc_TypeError, m.entry + "() is missing input " +
                                           quoted(m.buffers[index].name) +
                                           inputNamesHint());

    bool allocate = outArg.is_none();
    if (!allocate) {
      if (PyDict_Check(outArg.ptr())) {
        size_t matched = 0;
        for (int index : outputs_) {
          PyObject *given = PyDict_GetItemString(outArg.ptr(),
                                                 m.buffers[index].name.c_str());
          if (!given)
            raiseArgument(PyExc_TypeError,
                          m.entry + "(): out= is missing output " +
                              quoted(m.buffers[index].name) +
                              outputNamesHint());
          objects[index] = given;
          ++matched;
        }
        if (size_t(PyDict_Size(outArg.ptr())) != matched)
          raiseArgument(PyExc_TypeError,
                        m.entry + "(): out= names an unknown output" +
                            outputNamesHint());
      } else {
        if (!PySequence_Check(outArg.ptr()) ||
            size_t(nb::len(outArg)) != outputs_.size())
          raiseArgument(PyExc_TypeError,
                        m.entry + "(): out= must be a dict by name or a "
                                  "sequence of " +
                            std::to_string(outputs_.size()) + " arrays" +
                            outputNamesHint());
        for (size_t i = 0; i < outputs_.size(); ++i) {
          PyObject *item = PySequence_GetItem(outArg.ptr(), Py_ssize_t(i));
          Py_DECREF(item); // the sequence keeps it alive
          objects[outputs_[i]] = item;
        }
      }
    }

    // The device of the launch: an explicit ordinal, else the current one.
    bool onGpu = executable_->backend() == Backend::Cuda;
    int device = -1;
    if (onGpu) {
      const CudaDriver &cu = **CudaDriver::get();
      int requested = deviceArg.is_none() ? -1 : nb::cast<int>(deviceArg);
      Result<int> resolved = cu.resolveDevice(requested);
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
      if (allocator.is_none())
        raiseArgument(PyExc_RuntimeError, "no output allocator is set");
      nb::handle like =
          inputs_.empty() ? nb::handle(Py_None) : nb::handle(objects[inputs_[0]]);
      for (int index : outputs_) {
        const BufferDesc &desc = m.buffers[index];
        nb::object array =
            allocator(like, dtypeName(desc.type), desc.elements,
                      onGpu ? int(dl::kCUDA) : int(dl::kCPU), device);
        objects[index] = array.ptr();
        owners.objects.push_back(std::move(array));
      }
    }
    for (int index : outputs_)
      check(index);

    void *launchStream = nullptr;
    if (onGpu) {
      if (!stream.is_none()) {
        launchStream = streamHandle(stream);
      } else if (inputs_.empty()) {
        // No array to take a framework's stream from: the default stream.
      } else if (const dl::ExchangeApi *api = views[inputs_[0]].api) {
        if (api->currentWorkStream(dl::kCUDA, device, &launchStream) != 0)
          throw nb::python_error();
      } else if (isCupyArray(objects[inputs_[0]])) {
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
    for (size_t i = 0; i < outputs_.size(); ++i) {
      Py_INCREF(objects[outputs_[i]]);
      PyTuple_SET_ITEM(result, Py_ssize_t(i), objects[outputs_[i]]);
    }
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
                                   const std::string &cacheDir, int device) {
  LoadOptions options;
  options.backend = parseBackend(backend);
  options.cacheDir = cacheDir;
  options.device = device;
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

template <typename T>
using HostArray = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <typename T> std::vector<T> toVector(const HostArray<T> &array) {
  return std::vector<T>(array.data(), array.data() + array.shape(0));
}

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

nb::dict referenceGraphStep(HostArray<int64_t> tokens,
                            HostArray<int64_t> labels,
                            HostArray<int64_t> positionIds,
                            HostArray<float> lossMask,
                            HostArray<int32_t> cuSeqlens,
                            HostArray<int32_t> cuSeqlensPadded,
                            int32_t numSeqs, int32_t cpRank, int64_t C,
                            int64_t cp, int64_t N) {
  // megatronGraphStep aborts on broken preconditions: check them here.
  if (C < 1 || cp < 1 || N < 1 || (cp > 1 && C % 2) ||
      C * cp > int64_t(INT32_MAX))
    throw nb::value_error("graph_step needs C >= 1, cp >= 1, N >= 1, C even "
                          "when cp > 1 and C*cp within int32");
  for (size_t size : {tokens.shape(0), labels.shape(0), positionIds.shape(0),
                      lossMask.shape(0)})
    if (int64_t(size) != C * cp)
      throw nb::value_error("graph_step: data arrays need C*cp rows");
  if (int64_t(cuSeqlens.shape(0)) != N + 1 ||
      int64_t(cuSeqlensPadded.shape(0)) != N + 1)
    throw nb::value_error("graph_step: cu arrays need N+1 entries");
  reference::GraphStepInput input;
  input.tokens = toVector(tokens);
  input.labels = toVector(labels);
  input.positionIds = toVector(positionIds);
  input.lossMask = toVector(lossMask);
  input.cuSeqlens = toVector(cuSeqlens);
  input.cuSeqlensPadded = toVector(cuSeqlensPadded);
  input.numSeqs = numSeqs;
  input.cpRank = cpRank;
  reference::GraphStepOutput out;
  {
    nb::gil_scoped_release release;
    out = reference::megatronGraphStep(input, C, cp, N);
  }
  return stepOutputs(out);
}

nb::object referenceSeqIdx(HostArray<int32_t> cuSeqlens, int64_t totalTokens) {
  reference::Expected<std::vector<int32_t>> result =
      reference::seqIdx(toVector(cuSeqlens), totalTokens);
  if (!result)
    throw nb::value_error(result.error().c_str());
  return toNumpy(*result);
}

nb::dict referencePackMicrobatch(
    HostArray<int64_t> tokenPool, HostArray<int64_t> labelPool,
    HostArray<float> lossMaskPool, HostArray<int32_t> sampleOffsets,
    HostArray<int32_t> sampleLengths, HostArray<int32_t> sampleIds,
    int32_t numSeqs, int32_t cpRank, int64_t C, int64_t cp, int64_t N) {
  reference::PackStepInput input;
  input.tokenPool = toVector(tokenPool);
  input.labelPool = toVector(labelPool);
  input.lossMaskPool = toVector(lossMaskPool);
  input.sampleOffsets = toVector(sampleOffsets);
  input.sampleLengths = toVector(sampleLengths);
  input.sampleIds = toVector(sampleIds);
  input.numSeqs = numSeqs;
  input.cpRank = cpRank;
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

/// Lengths from Python (a sequence or an array of integers) as int32, or a
/// ValueError naming the first one outside int32.
std::vector<int32_t> lengthsArgument(const std::vector<int64_t> &values,
                                     const char *what) {
  std::vector<int32_t> lengths;
  lengths.reserve(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < std::numeric_limits<int32_t>::min() ||
        values[i] > std::numeric_limits<int32_t>::max())
      throw nb::value_error((std::string(what) + "[" + std::to_string(i) +
                             "] = " + std::to_string(values[i]) +
                             " is outside the int32 range")
                                .c_str());
    lengths.push_back(int32_t(values[i]));
  }
  return lengths;
}

template <typename T> T valueOrRaise(planner::Result<T> result) {
  if (!result)
    throw nb::value_error(result.status().message().c_str());
  return std::move(*result);
}

planner::PlannerConfig plannerConfig(int64_t C, int64_t cp, int64_t dp,
                                     std::optional<int64_t> maxPackedSequences,
                                     bool alignmentSet, bool dummyTail,
                                     std::optional<int64_t> vppGroup) {
  planner::PlannerConfig config;
  config.maxSeqlenPerRank = C;
  config.cp = cp;
  config.dp = dp;
  config.maxPackedSequences = maxPackedSequences;
  config.alignmentSet = alignmentSet;
  config.dummyTail = dummyTail;
  config.vppGroup = vppGroup;
  return config;
}

planner::MicrobatchPlan plannerPlan(const std::vector<int64_t> &paddedLengths,
                                    int64_t C, int64_t cp, int64_t dp,
                                    std::optional<int64_t> maxPackedSequences,
                                    bool alignmentSet, bool dummyTail,
                                    std::optional<int64_t> vppGroup,
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
                                  int64_t rank, int64_t N) {
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

nb::object plannerAlignLengths(const std::vector<int64_t> &validLengths,
                               int64_t cp, int64_t tp, bool sequenceParallel,
                               int64_t dp, bool dynamicCp) {
  if (cp < 1 || tp < 1 || dp < 1)
    throw nb::value_error(
        ("align_lengths needs cp, tp, dp >= 1 (cp = " + std::to_string(cp) +
         ", tp = " + std::to_string(tp) + ", dp = " + std::to_string(dp) + ")")
            .c_str());
  reference::Expected<std::vector<int32_t>> padded = reference::alignLengths(
      lengthsArgument(validLengths, "valid_lengths"),
      reference::padGranularity(cp, tp, sequenceParallel, dp, dynamicCp));
  if (!padded)
    throw nb::value_error(padded.error().c_str());
  return toNumpy(*padded);
}

const char *algorithmName(planner::PlanAlgorithm algorithm) {
  return algorithm == planner::PlanAlgorithm::NextFit ? "next_fit"
                                                      : "first_fit_decreasing";
}

} // namespace

NB_MODULE(_thdc, m) {
  m.doc() = "thdc's runtime (and JIT, where built with MLIR) for Python";

  nb::class_<Kernel>(m, "Kernel")
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
          [](const Kernel &k, int device) {
            Status status = k.executable().prepare(device);
            if (!status)
              throw std::runtime_error(status.message());
          },
          nb::arg("device") = -1,
          "Loads the module on a device now (else on its first launch).")
      .def("launch_pointers", &Kernel::launchPointers, nb::arg("pointers"),
           nb::arg("stream") = 0, nb::arg("device") = -1,
           "Launches on raw addresses, one per buffer in signature order; "
           "nothing is checked.");

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
  m.attr("has_jit") = true;
#else
  m.attr("has_jit") = false;
#endif
  m.def(
      "describe_status",
      [](int32_t status) { return thdc::reference::describeStatus(status); },
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
                nb::arg("cp_rank"), nb::arg("C"), nb::arg("cp"), nb::arg("N"));
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
               nb::arg("dynamic_cp") = false,
               "S1: the padded lengths p = round_up(v, G), G = (2*cp if cp > 1 "
               "else 1; 2*cp*dp with dynamic CP) * (tp under sequence "
               "parallelism), as an int32 array.");
  planning.def(
      "pad_granularity",
      [](int64_t cp, int64_t tp, bool sequenceParallel, int64_t dp,
         bool dynamicCp) {
        return reference::padGranularity(cp, tp, sequenceParallel, dp,
                                         dynamicCp);
      },
      nb::arg("cp"), nb::arg("tp") = 1, nb::arg("sequence_parallel") = false,
      nb::arg("dp") = 1, nb::arg("dynamic_cp") = false,
      "S1: the alignment granularity G.");
  planning.def(
      "max_microbatches",
      [](int64_t globalBatchSize, int64_t maxSeqlen, int64_t C, int64_t cp,
         int64_t dp, std::optional<int64_t> maxPackedSequences,
         bool alignmentSet, bool dummyTail, std::optional<int64_t> vppGroup) {
        return valueOrRaise(planner::microbatchUpperBound(
            plannerConfig(C, cp, dp, maxPackedSequences, alignmentSet,
                          dummyTail, vppGroup),
            globalBatchSize, maxSeqlen));
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
      [](int64_t numMicrobatches, int64_t upperBound, bool useRuntimeCount) {
        return reference::graphCaptureCount(numMicrobatches, upperBound,
                                            useRuntimeCount);
      },
      nb::arg("num_microbatches"), nb::arg("upper_bound"),
      nb::arg("use_runtime_count") = false,
      "S12: max(num_microbatches, upper_bound), or num_microbatches alone "
      "when the runtime count must be used.");
}
