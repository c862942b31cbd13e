//===- GatherBindings.cpp - the gather and the microbatch loader
//------------===//
//
// thdc._thdc.InputGather, which states the microbatch load contract of
// thdc.megatron.InputLoader once and loads a microbatch in one gather.
//
//===----------------------------------------------------------------------===//

#include "python/Arguments.h"
#include "python/Bindings.h"
#include "runtime/Gather.h"

#include <nanobind/stl/string.h>

#include <algorithm>

using namespace thdc;
using namespace thdc::python;
using namespace thdc::runtime;

namespace {

/// thdc._thdc.InputGather: the microbatch load contract of
/// thdc.megatron.InputLoader, stated here once, and the load itself in one
/// call. The contract: every data tensor the stage reads is a torch.Tensor
/// [T] or [1, T] (micro-batch size 1, as sequence packing has it) with the
/// same T rows, at most its buffer's; the cu arrays are [E] or [1, E] with
/// the same E entries, at most their buffers'; num_seqs is left out (E - 1,
/// which needs E < N+1), an int within int32, or a tensor of at least one
/// element (its first is the count); no floating-point value goes into an
/// integer buffer. The buffers' own lengths bound every copy (they were made
/// from the kernel's verified signature). T goes to the kernel as num_rows,
/// which empties a microbatch whose offsets claim more rows (rows_not_given),
/// and the cu entries after the E given are made -1 (copied from
/// `unset`, a buffer of -1s), so that a num_seqs claiming more sequences
/// reads a decreasing offset (not_monotonic) rather than an earlier
/// microbatch's, and what an emptied microbatch counts as dropped depends on
/// what was given alone.
///
/// Every check runs before anything is copied; a broken contract raises
/// TypeError or ValueError naming the argument. Then one gather copies every
/// tensor of its buffer's dtype, contiguous, on the buffers' device, and
/// copies the -1 entries and stores num_rows and num_seqs, on the framework's current
/// stream (read through the DLPack exchange table). A tensor that needs a
/// conversion (another dtype, device or layout, a subclass) is left to the
/// caller, which copies it with Tensor.copy_: the call returns the indices
/// of those arguments, or None when the gather did everything.
class InputGather {
public:
  /// A load's arguments (tokens, labels, loss_mask, position_ids,
  /// cu_seqlens, cu_seqlens_padded, num_seqs), as InputLoader.load takes
  /// them; the first six are the tensor targets.
  static constexpr size_t kTargets = 6;
  static constexpr size_t kNumSeqsArgument = 6;
  static constexpr const char *kArgumentNames[] = {
      "tokens",       "labels",     "loss_mask",
      "position_ids", "cu_seqlens", "cu_seqlens_padded",
      "num_seqs"};
  /// One microbatch's gather: a segment per target, a copy of -1s after
  /// each of the two cu arrays, one store each for num_rows and num_seqs.
  using Segments = std::array<GatherSegment, kTargets + 4>;
  using Arguments = std::array<PyObject *, kTargets + 1>;

  InputGather(nb::handle gather, nb::handle targets, nb::handle numSeqs,
              nb::handle numRows, nb::handle unset, std::string stage,
              bool perTensor)
      : device_(gatherDevice(gather)), stage_(std::move(stage)),
        perTensor_(perTensor) {
    tensorType_ = nb::borrow(
        nb::handle(reinterpret_cast<PyObject *>(Py_TYPE(numSeqs.ptr()))));
    api_ = exchangeApiOf(Py_TYPE(numSeqs.ptr()));
    if (!api_)
      raiseArgument(PyExc_TypeError,
                    "num_seqs must be a buffer of a framework with a DLPack "
                    "exchange table (torch >= 2.10); got " +
                        typeName(numSeqs));
    numSeqs_ = buffer(numSeqs, "num_seqs");
    if (!sameType(numSeqs_.dtype, kInt32) || numSeqs_.elements != 1)
      raiseArgument(PyExc_TypeError, "num_seqs must be one int32 element");
    if (!numRows.is_none()) {
      numRows_ = buffer(numRows, "num_rows");
      if (!sameType(numRows_.dtype, kInt32) || numRows_.elements != 1)
        raiseArgument(PyExc_TypeError, "num_rows must be one int32 element");
    }
    if (!PyTuple_Check(targets.ptr()))
      raiseArgument(PyExc_TypeError,
                    "targets must be a tuple of (argument, buffer, is_data); "
                    "got " +
                        typeName(targets));
    nb::tuple items = nb::borrow<nb::tuple>(targets);
    if (items.size() < 1 || items.size() > kTargets)
      raiseArgument(PyExc_ValueError, "targets holds 1 to 6 buffers; got " +
                                          std::to_string(items.size()));
    for (size_t i = 0; i < items.size(); ++i) {
      nb::handle item = items[i];
      std::string what = "targets[" + std::to_string(i) + "]";
      if (!PyTuple_Check(item.ptr()) || nb::len(item) != 3)
        raiseArgument(PyExc_TypeError, what +
                                           " must be a tuple (argument, "
                                           "buffer, is_data); got " +
                                           typeName(item));
      nb::tuple fields = nb::borrow<nb::tuple>(item);
      Target target;
      int64_t argument = integerArgument(fields[0], what + "[0]", kInt32Range);
      if (argument < 0 || size_t(argument) >= kTargets)
        raiseArgument(PyExc_ValueError,
                      what + "[0] must be an argument index in [0, 6); got " +
                          std::to_string(argument));
      target.argument = int(argument);
      target.buffer = buffer(fields[1], what + "[1]");
      target.isData = PyObject_IsTrue(fields[2].ptr()) == 1;
      targets_.push_back(target);
    }
    if (numRows.is_none() !=
        std::none_of(targets_.begin(), targets_.end(),
                     [](const Target &t) { return t.isData; }))
      raiseArgument(PyExc_ValueError,
                    "num_rows goes with the data targets: the kernel bounds "
                    "the rows it reads by it");
    unset_ = buffer(unset, "unset");
    for (const Target &target : targets_)
      if (!target.isData &&
          (!sameType(unset_.dtype, target.buffer.dtype) ||
           unset_.elements < target.buffer.elements))
        raiseArgument(PyExc_TypeError,
                      "unset must be a buffer of -1s of the cu arrays' dtype "
                      "and at least their entries");
  }

  /// Checks the load, gathers what needs no conversion, and returns the
  /// indices of the arguments left to copy (None: none).
  nb::object call(nb::handle tokens, nb::handle labels, nb::handle lossMask,
                  nb::handle positionIds, nb::handle cuSeqlens,
                  nb::handle cuSeqlensPadded, nb::handle numSeqs) const {
    Segments segments;
    size_t count = 0;
    uint32_t rest =
        plan({tokens.ptr(), labels.ptr(), lossMask.ptr(), positionIds.ptr(),
              cuSeqlens.ptr(), cuSeqlensPadded.ptr(), numSeqs.ptr()},
             segments, count);
    if (count) {
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
    }
    return indices(rest);
  }

  /// What call() would do, launching nothing: the flat segments of its
  /// gather (four ints each, as Gather takes them) and the indices it
  /// would leave to copy (None: none).
  nb::tuple segments(nb::handle tokens, nb::handle labels, nb::handle lossMask,
                     nb::handle positionIds, nb::handle cuSeqlens,
                     nb::handle cuSeqlensPadded, nb::handle numSeqs) const {
    Segments segments;
    size_t count = 0;
    uint32_t rest =
        plan({tokens.ptr(), labels.ptr(), lossMask.ptr(), positionIds.ptr(),
              cuSeqlens.ptr(), cuSeqlensPadded.ptr(), numSeqs.ptr()},
             segments, count);
    nb::list flat;
    for (size_t i = 0; i < count; ++i) {
      const GatherSegment &s = segments[i];
      flat.append(int64_t(s.source));
      flat.append(int64_t(s.destination));
      flat.append(int64_t(s.bytes));
      flat.append(int64_t(s.value));
    }
    return nb::make_tuple(flat, indices(rest));
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
  /// A tensor argument as the contract sees it.
  struct Given {
    int64_t ndim = 0, elements = 0, shape0 = 0;
    bool isFloat = false; ///< floating-point or complex values
    /// Read through the exchange table, with these fields; else it is
    /// copied by the caller.
    bool direct = false;
    dl::DataType dtype{};
    uint64_t data = 0;
    bool onDevice = false, contiguous = false;
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

  bool onDevice(const dl::Tensor &tensor) const {
    return device_ < 0
               ? tensor.device.type == dl::kCPU
               : tensor.device.type == dl::kCUDA && tensor.device.id == device_;
  }

  /// `object` as the contract sees it; TypeError naming `name` for an
  /// object that is not a tensor of the framework.
  Given read(PyObject *object, const char *name) const {
    Given given;
    dl::Tensor tensor;
    if (Py_TYPE(object) ==
            reinterpret_cast<PyTypeObject *>(tensorType_.ptr()) &&
        api_->dltensorFromPyObjectNoSync(object, &tensor) == 0) {
      given.direct = true;
      given.ndim = tensor.ndim;
      given.elements = elementCount(tensor);
      given.dtype = tensor.dtype;
      given.isFloat = tensor.dtype.code != dl::kInt &&
                      tensor.dtype.code != dl::kUInt &&
                      tensor.dtype.code != dl::kBool;
      given.data = uint64_t(reinterpret_cast<uintptr_t>(tensor.data)) +
                   tensor.byteOffset;
      given.onDevice = onDevice(tensor);
      given.contiguous = contiguous(tensor);
      given.shape0 = tensor.ndim ? tensor.shape[0] : 0;
      return given;
    }
    PyErr_Clear();
    int instance = PyObject_IsInstance(object, tensorType_.ptr());
    if (instance < 0)
      throw nb::python_error();
    if (!instance)
      raiseArgument(PyExc_TypeError, std::string(name) + " must be a " +
                                         tensorTypeName() + "; got " +
                                         typeName(object));
    // A subclass, or a tensor the exchange table does not read: its shape
    // and dtype through Python, and a copy by the caller.
    nb::handle value(object);
    given.ndim = nb::cast<int64_t>(value.attr("dim")());
    given.elements = nb::cast<int64_t>(value.attr("numel")());
    given.shape0 = given.ndim ? nb::cast<int64_t>(value.attr("shape")[0]) : 0;
    nb::object dtype = value.attr("dtype");
    given.isFloat = nb::cast<bool>(dtype.attr("is_floating_point")) ||
                    nb::cast<bool>(dtype.attr("is_complex"));
    return given;
  }

  std::string tensorTypeName() const {
    nb::object module = nb::getattr(tensorType_, "__module__", nb::none());
    std::string name = nb::type_name(tensorType_).c_str();
    return nb::isinstance<nb::str>(module) &&
                   name.rfind(nb::borrow<nb::str>(module).c_str(), 0) != 0
               ? std::string(nb::borrow<nb::str>(module).c_str()) + "." + name
               : name;
  }

  /// The shape of `object` as Python prints it, for messages.
  static std::string shapeOf(PyObject *object) {
    nb::object shape = nb::handle(object).attr("shape");
    nb::object tuple = nb::steal(PySequence_Tuple(shape.ptr()));
    if (!tuple.is_valid())
      throw nb::python_error();
    return nb::str(tuple).c_str();
  }

  /// TypeError where copying `object` into `buffer` would truncate
  /// floating-point values (and make NaN an arbitrary integer).
  void refuseTruncation(PyObject *object, const char *name, const Given &given,
                        dl::DataType buffer) const {
    if (!given.isFloat || buffer.code == dl::kFloat || buffer.code == dl::kBool)
      return;
    nb::object dtype = nb::handle(object).attr("dtype");
    nb::object spelled = nb::steal(PyObject_Str(dtype.ptr()));
    const char *text = spelled.is_valid()
                           ? PyUnicode_AsUTF8AndSize(spelled.ptr(), nullptr)
                           : nullptr;
    if (!text)
      throw nb::python_error();
    std::string from = text;
    std::string to =
        buffer.code == dl::kInt && buffer.bits == 64   ? "torch.int64"
        : buffer.code == dl::kInt && buffer.bits == 32 ? "torch.int32"
                                                       : describeDtype(buffer);
    raiseArgument(PyExc_TypeError,
                  std::string(name) + " is " + from + ", but the step's " +
                      name + " holds " + to +
                      ": a floating-point value would be truncated (NaN to "
                      "an arbitrary integer); pass integers");
  }

  nb::object indices(uint32_t rest) const {
    if (!rest)
      return nb::none();
    nb::list list;
    for (size_t i = 0; i <= kNumSeqsArgument; ++i)
      if (rest & (1u << i))
        list.append(i);
    return nb::tuple(list);
  }

  /// Checks the load against the contract (raising where it is broken) and
  /// lays out its gather in `segments`: the targets in order, the -1
  /// entries, num_rows, num_seqs. Returns the arguments left to copy, one
  /// bit per argument index.
  uint32_t plan(const Arguments &arguments, Segments &segments,
                size_t &count) const {
    // Presence first, the cu arrays before the data tensors, as the
    // targets' types are checked.
    for (bool data : {false, true})
      for (const Target &target : targets_)
        if (target.isData == data && arguments[target.argument] == Py_None)
          raiseArgument(PyExc_TypeError, "stage '" + stage_ + "' reads " +
                                             kArgumentNames[target.argument] +
                                             "; it was not given");
    std::array<Given, kTargets> given;
    for (bool data : {false, true})
      for (const Target &target : targets_)
        if (target.isData == data)
          given[target.argument] =
              read(arguments[target.argument], kArgumentNames[target.argument]);

    int64_t rows = -1, entries = -1, capacityEntries = 0;
    const char *firstData = nullptr;
    for (const Target &target : targets_) {
      const char *name = kArgumentNames[target.argument];
      PyObject *object = arguments[target.argument];
      const Given &g = given[target.argument];
      if (!(g.ndim == 1 || (g.ndim == 2 && g.shape0 == 1)))
        raiseArgument(PyExc_ValueError,
                      std::string(name) + " has the shape " + shapeOf(object) +
                          (target.isData
                               ? "; a packed microbatch's tensors are [T] or "
                                 "[1, T] (micro-batch size 1, as sequence "
                                 "packing has it)"
                               : "; cu arrays are [E] or [1, E]"));
      const int64_t capacity = target.buffer.elements;
      if (target.isData) {
        if (g.elements > capacity)
          raiseArgument(
              PyExc_ValueError,
              std::string(name) + " has " + std::to_string(g.elements) +
                  " rows; the step holds C*cp = " + std::to_string(capacity));
        if (rows >= 0 && g.elements != rows)
          raiseArgument(PyExc_ValueError,
                        std::string(name) + " has " +
                            std::to_string(g.elements) + " rows but " +
                            firstData + " has " + std::to_string(rows) +
                            "; every data tensor of a microbatch has the "
                            "same rows");
        rows = g.elements;
        if (!firstData)
          firstData = name;
      } else {
        if (g.elements > capacity)
          raiseArgument(
              PyExc_ValueError,
              std::string(name) + " has " + std::to_string(g.elements) +
                  " entries; the step holds N+1 = " + std::to_string(capacity));
        if (entries >= 0 && g.elements != entries)
          raiseArgument(PyExc_ValueError,
                        "cu_seqlens and cu_seqlens_padded differ in length");
        entries = g.elements;
        capacityEntries = capacity;
      }
      if (g.elements)
        refuseTruncation(object, name, g, target.buffer.dtype);
    }

    // num_seqs: left out, an int, or a tensor.
    PyObject *numSeqs = arguments[kNumSeqsArgument];
    int64_t numSeqsValue = 0;
    Given numSeqsTensor;
    const bool numSeqsIsTensor =
        numSeqs != Py_None &&
        (Py_TYPE(numSeqs) ==
             reinterpret_cast<PyTypeObject *>(tensorType_.ptr()) ||
         PyObject_IsInstance(numSeqs, tensorType_.ptr()) == 1);
    if (numSeqs == Py_None) {
      if (entries == capacityEntries)
        raiseArgument(PyExc_ValueError,
                      "cu arrays of N+1 entries need num_seqs");
      numSeqsValue = entries - 1;
    } else if (numSeqsIsTensor) {
      numSeqsTensor = read(numSeqs, "num_seqs");
      if (!numSeqsTensor.elements)
        raiseArgument(PyExc_ValueError,
                      "num_seqs is an empty tensor; give the count as its "
                      "first element, or as an int");
      refuseTruncation(numSeqs, "num_seqs", numSeqsTensor, numSeqs_.dtype);
    } else {
      numSeqsValue = integerArgument(numSeqs, "num_seqs", kInt32Range);
    }

    // Every check passed: the gather, and what is left to copy.
    uint32_t rest = 0;
    count = 0;
    for (const Target &target : targets_) {
      const Given &g = given[target.argument];
      if (!g.elements)
        continue;
      if (perTensor_ || !g.direct || !g.data ||
          !sameType(g.dtype, target.buffer.dtype) || !g.onDevice ||
          !g.contiguous) {
        rest |= 1u << target.argument;
        continue;
      }
      segments[count++] = {g.data, target.buffer.address,
                           uint64_t(g.elements) * target.buffer.elementBytes,
                           0};
    }
    if (entries < capacityEntries)
      for (const Target &target : targets_)
        if (!target.isData)
          segments[count++] = {
              unset_.address,
              target.buffer.address +
                  uint64_t(entries) * target.buffer.elementBytes,
              uint64_t(capacityEntries - entries) * target.buffer.elementBytes,
              0};
    if (rows >= 0)
      segments[count++] = {0, numRows_.address, 4, uint64_t(rows)};
    if (!numSeqsIsTensor)
      segments[count++] = {0, numSeqs_.address, 4, uint64_t(numSeqsValue)};
    else if (perTensor_ || !numSeqsTensor.direct || !numSeqsTensor.data ||
             !sameType(numSeqsTensor.dtype, numSeqs_.dtype) ||
             !numSeqsTensor.onDevice)
      rest |= 1u << kNumSeqsArgument;
    else
      segments[count++] = {numSeqsTensor.data, numSeqs_.address,
                           numSeqs_.elementBytes, 0};
    return rest;
  }

  int device_ = -1; ///< -1: the host
  const dl::ExchangeApi *api_ = nullptr;
  std::string stage_;
  /// Every tensor left to the caller's copy (the per-tensor comparison).
  bool perTensor_ = false;
  /// The buffers' Python type: an argument of exactly this type is read
  /// through api_ (a subclass is copied by the caller).
  nb::object tensorType_;
  std::vector<Target> targets_;
  Buffer numSeqs_, numRows_, unset_;
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

void thdc::python::populateInputGatherBindings(nb::module_ &m) {
  nb::class_<InputGather>(m, "InputGather", nb::type_slots(inputGatherSlots))
      .def(nb::init<nb::handle, nb::handle, nb::handle, nb::handle, nb::handle,
                    std::string, bool>(),
           nb::arg("gather"), nb::arg("targets"), nb::arg("num_seqs"),
           nb::arg("num_rows").none(), nb::arg("unset"), nb::kw_only(),
           nb::arg("stage") = "",
           nb::arg("per_tensor") = false,
           "The microbatch load contract over static buffers, and the load "
           "in one gather: targets is a tuple of (argument index, buffer, "
           "is_data) in the order the segments are laid out (argument "
           "indices: tokens, labels, loss_mask, position_ids, cu_seqlens, "
           "cu_seqlens_padded); num_seqs the count's buffer; num_rows the "
           "buffer that receives the data tensors' rows (None without data "
           "targets); unset a buffer of -1s (the cu arrays' dtype, at least "
           "their entries) copied after the given entries; stage names the stage in messages; per_tensor leaves "
           "every tensor to the caller's copy. Each buffer's own length "
           "bounds what is copied into it.")
      .def("__call__", &InputGather::call, nb::arg("tokens").none(),
           nb::arg("labels").none(), nb::arg("loss_mask").none(),
           nb::arg("position_ids").none(), nb::arg("cu_seqlens").none(),
           nb::arg("cu_seqlens_padded").none(), nb::arg("num_seqs").none(),
           "Checks the microbatch (TypeError or ValueError, before anything "
           "is copied), gathers every tensor that needs no conversion and "
           "the stores on the framework's current stream, and returns the "
           "argument indices left to a converting copy, or None.")
      .def("segments", &InputGather::segments, nb::arg("tokens").none(),
           nb::arg("labels").none(), nb::arg("loss_mask").none(),
           nb::arg("position_ids").none(), nb::arg("cu_seqlens").none(),
           nb::arg("cu_seqlens_padded").none(), nb::arg("num_seqs").none(),
           "(flat segments, indices left to copy) of a call, checked as a "
           "call is; launches nothing.");
}
