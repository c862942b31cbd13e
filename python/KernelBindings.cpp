//===- KernelBindings.cpp - the Kernel: a loaded pipeline, callable -------===//
//
// thdc._thdc.Kernel: a loaded pipeline (a bundle, or the JIT's), called with
// any DLPack arrays. Every argument is checked against the bundle's
// signature (dtype, shape, contiguity, device) before anything is launched;
// with the outputs given, a call allocates nothing and never synchronises,
// so it can be captured in a CUDA graph. Also thdc._thdc.load, and the
// runtime's own graph capture on raw addresses (RuntimeGraph).
//
//===----------------------------------------------------------------------===//

#include "python/Arguments.h"
#include "python/Bindings.h"
#include "reference/StatusBits.h"
#include "runtime/CudaDriver.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstring>

using namespace thdc;
using namespace thdc::python;
using namespace thdc::runtime;

namespace {

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
  /// resultType's tp_alloc, read once (PyType_GetSlot: the limited API).
  allocfunc resultAlloc = nullptr;
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
      const char *name = PyUnicode_AsUTF8AndSize(key, nullptr);
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
        raiseArgument(PyExc_TypeError, m.entry + "() got input '" + name +
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
        if (view.device.device_type != dl::kCUDA &&
            view.device.device_type != dl::kCUDAManaged)
          raiseArgument(PyExc_ValueError,
                        roleOf(desc) + " is in " +
                            describeDevice(view.device.device_type,
                                           view.device.device_id) +
                            ", but the kernel runs on cuda:" +
                            std::to_string(device) + "; move it to the GPU");
        if (view.device.device_id != device)
          raiseArgument(
              PyExc_ValueError,
              roleOf(desc) + " is on " +
                  describeDevice(view.device.device_type,
                                 view.device.device_id) +
                  ", but the launch is on cuda:" + std::to_string(device) +
                  (deviceArg.is_none()
                       ? " (the current device; select it with "
                         "torch.cuda.set_device or pass device=)"
                       : " (device=)"));
      } else if (view.device.device_type != dl::kCPU &&
                 view.device.device_type != dl::kCUDAHost) {
        raiseArgument(
            PyExc_ValueError,
            roleOf(desc) + " is on " +
                describeDevice(view.device.device_type, view.device.device_id) +
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
        if (api->current_work_stream(dl::kCUDA, device, &launchStream) != 0)
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
            : resultAlloc(reinterpret_cast<PyTypeObject *>(resultType.ptr()),
                          Py_ssize_t(outputs_.size()));
    if (!result)
      throw nb::python_error();
    for (size_t i = 0; i < outputs_.size(); ++i)
      PyTuple_SetItem(result, Py_ssize_t(i),
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
} // namespace

nb::object thdc::python::makeKernel(std::shared_ptr<Executable> executable,
                                    CompileRecord record) {
  auto kernel = std::make_shared<Kernel>(std::move(executable));
  kernel->record = std::move(record);
  return nb::cast(std::move(kernel));
}

void thdc::python::populateKernelBindings(nb::module_ &m) {
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
                 !PyType_IsSubtype(reinterpret_cast<PyTypeObject *>(type.ptr()),
                                   &PyTuple_Type))
               throw nb::type_error("the result type must subclass tuple");
             k.resultAlloc = reinterpret_cast<allocfunc>(PyType_GetSlot(
                 reinterpret_cast<PyTypeObject *>(type.ptr()), Py_tp_alloc));
             if (!k.resultAlloc)
               throw nb::type_error("the result type has no tp_alloc");
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

  nb::class_<RuntimeGraph>(m, "RuntimeGraph")
      .def("replay", &RuntimeGraph::replay, nb::arg("stream"));
  m.def(
      "capture_pointers",
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
  m.def("cuda_available", [] { return bool(CudaDriver::get()); });
  m.def("current_device", [] {
    Result<const CudaDriver *> cu = CudaDriver::get();
    return cu ? (*cu)->currentDevice() : -1;
  });
}
