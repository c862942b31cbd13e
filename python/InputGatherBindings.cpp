//===- InputGatherBindings.cpp - the microbatch loader's binding ----------===//
//
// thdc._thdc.InputGather: the microbatch load contract of
// thdc.megatron.InputLoader (runtime/InputLoad.h) over the framework's
// tensors, and the load in one gather.
//
//===----------------------------------------------------------------------===//

#include "python/Arguments.h"
#include "python/Bindings.h"
#include "runtime/Gather.h"
#include "runtime/InputLoad.h"

#include <nanobind/stl/string.h>

#include <algorithm>
#include <exception>
#include <utility>

using namespace thdc;
using namespace thdc::python;
using namespace thdc::runtime;

namespace {

/// thdc._thdc.InputGather: the microbatch load contract of
/// thdc.megatron.InputLoader (runtime/InputLoad.h states it) over the
/// framework's tensors, and the load itself in one call. This unit reads
/// the tensors through the DLPack exchange table (or, for a subclass,
/// through Python) into the contract's descriptions, and raises what
/// planLoad refuses as TypeError or ValueError naming the argument. The
/// gather runs on the framework's current stream; a tensor that needs a
/// conversion is left to the caller, which copies it with Tensor.copy_:
/// the call returns the indices of those arguments, or None.
class InputGather {
public:
  using Arguments = std::array<PyObject *, kLoadTensors + 1>;

  InputGather(nb::handle gather, nb::handle targets, nb::handle numSeqs,
              nb::handle numRows, nb::handle unset, std::string stage,
              bool perTensor)
      : device_(gatherDevice(gather)), stage_(std::move(stage)) {
    tensorType_ = nb::borrow(
        nb::handle(reinterpret_cast<PyObject *>(Py_TYPE(numSeqs.ptr()))));
    api_ = exchangeApiOf(Py_TYPE(numSeqs.ptr()));
    if (!api_)
      raiseArgument(PyExc_TypeError,
                    "num_seqs must be a buffer of a framework with a DLPack "
                    "exchange table (torch >= 2.10); got " +
                        typeName(numSeqs));
    contract_.perTensor = perTensor;
    contract_.numSeqs = buffer(numSeqs, "num_seqs");
    if (!numRows.is_none())
      contract_.numRows = buffer(numRows, "num_rows");
    if (!PyTuple_Check(targets.ptr()))
      raiseArgument(PyExc_TypeError,
                    "targets must be a tuple of (argument, buffer, is_data); "
                    "got " +
                        typeName(targets));
    nb::tuple items = nb::borrow<nb::tuple>(targets);
    for (size_t i = 0; i < items.size(); ++i) {
      nb::handle item = items[i];
      std::string what = "targets[" + std::to_string(i) + "]";
      if (!PyTuple_Check(item.ptr()) || nb::len(item) != 3)
        raiseArgument(PyExc_TypeError, what +
                                           " must be a tuple (argument, "
                                           "buffer, is_data); got " +
                                           typeName(item));
      nb::tuple fields = nb::borrow<nb::tuple>(item);
      LoadTarget target;
      int64_t argument = integerArgument(fields[0], what + "[0]", kInt32Range);
      if (argument < 0 || size_t(argument) >= kLoadTensors)
        raiseArgument(PyExc_ValueError,
                      what + "[0] must be an argument index in [0, 6); got " +
                          std::to_string(argument));
      target.argument = size_t(argument);
      target.buffer = buffer(fields[1], what + "[1]");
      target.isData = PyObject_IsTrue(fields[2].ptr()) == 1;
      contract_.targets.push_back(target);
    }
    contract_.unset = buffer(unset, "unset");
    bool typeError = false;
    if (Status checked = contract_.check(&typeError); !checked)
      raiseArgument(typeError ? PyExc_TypeError : PyExc_ValueError,
                    checked.message());
  }

  /// Checks the load, gathers what needs no conversion, and returns the
  /// indices of the arguments left to copy (None: none).
  nb::object call(const Arguments &arguments) const {
    LoadPlan plan = this->plan(arguments);
    if (plan.count) {
      Status done;
      if (device_ < 0) {
        done = gatherOnHost(plan.segments.data(), plan.count);
      } else {
        void *stream = nullptr;
        if (api_->current_work_stream(dl::kCUDA, device_, &stream) != 0)
          throw nb::python_error();
        done = launchGather(plan.segments.data(), plan.count, stream, device_);
      }
      if (!done)
        raiseArgument(PyExc_RuntimeError, done.message());
    }
    return indices(plan.rest);
  }

  /// What call() would do, launching nothing: the flat segments of its
  /// gather (four ints each, as Gather takes them) and the indices it
  /// would leave to copy (None: none).
  nb::tuple segments(const Arguments &arguments) const {
    LoadPlan plan = this->plan(arguments);
    nb::list flat;
    for (size_t i = 0; i < plan.count; ++i) {
      const GatherSegment &s = plan.segments[i];
      flat.append(int64_t(s.source));
      flat.append(int64_t(s.destination));
      flat.append(int64_t(s.bytes));
      flat.append(int64_t(s.value));
    }
    return nb::make_tuple(flat, indices(plan.rest));
  }

  nb::handle tensorType() const { return tensorType_; }
  void clear() { tensorType_ = nb::none(); }

private:
  static ElementType elementType(dl::DataType t) {
    return {t.code, t.bits, t.lanes};
  }

  /// A static buffer: a contiguous tensor of the framework on the gather's
  /// device.
  LoadBuffer buffer(nb::handle object, const std::string &what) const {
    if (Py_TYPE(object.ptr()) !=
        reinterpret_cast<PyTypeObject *>(tensorType_.ptr()))
      raiseArgument(PyExc_TypeError, what + " must be a " +
                                         nb::type_name(tensorType_).c_str() +
                                         "; got " + typeName(object));
    dl::Tensor tensor;
    if (api_->dltensor_from_py_object_no_sync(object.ptr(), &tensor) != 0)
      throw nb::python_error();
    if (!onDevice(tensor))
      raiseArgument(PyExc_ValueError,
                    what + " is on " +
                        describeDevice(tensor.device.device_type,
                                       tensor.device.device_id) +
                        ", not the gather's device");
    if (!contiguous(tensor))
      raiseArgument(PyExc_ValueError, what + " must be contiguous");
    return {uint64_t(reinterpret_cast<uintptr_t>(tensor.data)) +
                tensor.byte_offset,
            elementType(tensor.dtype), elementCount(tensor)};
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
    return device_ < 0 ? tensor.device.device_type == dl::kCPU
                       : tensor.device.device_type == dl::kCUDA &&
                             tensor.device.device_id == device_;
  }

  /// `object` as the contract sees it; TypeError naming `name` for an
  /// object that is not a tensor of the framework.
  LoadTensor read(PyObject *object, const char *name) const {
    LoadTensor given;
    given.given = true;
    dl::Tensor tensor;
    if (Py_TYPE(object) ==
            reinterpret_cast<PyTypeObject *>(tensorType_.ptr()) &&
        api_->dltensor_from_py_object_no_sync(object, &tensor) == 0) {
      given.direct = true;
      given.ndim = tensor.ndim;
      given.elements = elementCount(tensor);
      given.type = elementType(tensor.dtype);
      given.isFloat = tensor.dtype.code != dl::kInt &&
                      tensor.dtype.code != dl::kUInt &&
                      tensor.dtype.code != dl::kBool;
      given.data = uint64_t(reinterpret_cast<uintptr_t>(tensor.data)) +
                   tensor.byte_offset;
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

  /// str(object.attr(attribute)), for messages.
  static std::string spelled(PyObject *object, const char *attribute) {
    nb::object value = nb::handle(object).attr(attribute);
    if (std::string(attribute) == "shape") {
      nb::object tuple = nb::steal(PySequence_Tuple(value.ptr()));
      if (!tuple.is_valid())
        throw nb::python_error();
      value = tuple;
    }
    return nb::str(value).c_str();
  }

  static std::string torchSpelling(ElementType type) {
    if (type.code == dl::kInt && type.bits == 64)
      return "torch.int64";
    if (type.code == dl::kInt && type.bits == 32)
      return "torch.int32";
    return describeDtype(dl::DataType{type.code, type.bits, type.lanes});
  }

  nb::object indices(uint32_t rest) const {
    if (!rest)
      return nb::none();
    nb::list list;
    for (size_t i = 0; i <= kLoadNumSeqs; ++i)
      if (rest & (1u << i))
        list.append(i);
    return nb::tuple(list);
  }

  /// The load's plan (runtime/InputLoad.h), raising where the contract is
  /// broken.
  LoadPlan plan(const Arguments &arguments) const {
    // Presence before types, the cu arrays before the data tensors, as
    // planLoad checks them; an int num_seqs after every tensor's rules.
    for (bool data : {false, true})
      for (const LoadTarget &target : contract_.targets)
        if (target.isData == data && arguments[target.argument] == Py_None)
          fail({LoadFault::Missing, target.argument}, arguments);
    std::array<LoadTensor, kLoadTensors> tensors;
    for (bool data : {false, true})
      for (const LoadTarget &target : contract_.targets)
        if (target.isData == data)
          tensors[target.argument] = read(arguments[target.argument],
                                          kLoadArgumentNames[target.argument]);
    PyObject *numSeqs = arguments[kLoadNumSeqs];
    LoadCount count;
    std::exception_ptr countError;
    if (numSeqs == Py_None) {
      count.kind = LoadCount::Kind::Absent;
    } else if (Py_TYPE(numSeqs) ==
                   reinterpret_cast<PyTypeObject *>(tensorType_.ptr()) ||
               PyObject_IsInstance(numSeqs, tensorType_.ptr()) == 1) {
      count.kind = LoadCount::Kind::Tensor;
      count.tensor = read(numSeqs, "num_seqs");
    } else {
      count.kind = LoadCount::Kind::Value;
      try {
        count.value = integerArgument(numSeqs, "num_seqs", kInt32Range);
      } catch (...) {
        countError = std::current_exception();
      }
    }
    LoadPlan plan;
    LoadError error = planLoad(contract_, tensors, count, plan);
    if (error.fault != LoadFault::None)
      fail(error, arguments);
    if (countError)
      std::rethrow_exception(countError);
    return plan;
  }

  [[noreturn]] void fail(const LoadError &error,
                         const Arguments &arguments) const {
    LoadSpelling spelling;
    spelling.stage = stage_;
    PyObject *object = arguments[error.argument];
    if (error.fault == LoadFault::BadShape)
      spelling.shape = spelled(object, "shape");
    if (error.fault == LoadFault::Truncation) {
      spelling.type = spelled(object, "dtype");
      ElementType buffer = contract_.numSeqs.type;
      for (const LoadTarget &target : contract_.targets)
        if (target.argument == error.argument)
          buffer = target.buffer.type;
      spelling.bufferType = torchSpelling(buffer);
    }
    raiseArgument(error.isTypeError() ? PyExc_TypeError : PyExc_ValueError,
                  describeLoadError(error, spelling));
  }

  int device_ = -1; ///< -1: the host
  const dl::ExchangeApi *api_ = nullptr;
  std::string stage_;
  /// The buffers' Python type: an argument of exactly this type is read
  /// through api_ (a subclass is copied by the caller).
  nb::object tensorType_;
  InputLoadContract contract_;
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

/// nb::handle, once per index of a pack.
template <size_t> using Handle = nb::handle;

/// Binds `Method` as `name`, taking the load's arguments in order, by the
/// names kLoadArgumentNames gives them, each of which may be None.
template <auto Method, size_t... I>
void defLoadMethod(nb::class_<InputGather> &inputGather, const char *name,
                   const char *doc, std::index_sequence<I...>) {
  inputGather.def(
      name,
      [](const InputGather &self, Handle<I>... arguments) {
        return (self.*Method)(InputGather::Arguments{arguments.ptr()...});
      },
      nb::arg(kLoadArgumentNames[I]).none()..., doc);
}

} // namespace

void thdc::python::populateInputGatherBindings(nb::module_ &m) {
  // The load's arguments by name, in order (runtime/InputLoad.h), for the
  // Python side to read rather than restate.
  nb::list arguments;
  for (const char *name : kLoadArgumentNames)
    arguments.append(nb::str(name));
  nb::class_<InputGather> inputGather(m, "InputGather",
                                      nb::type_slots(inputGatherSlots));
  inputGather.attr("ARGUMENTS") = nb::tuple(arguments);
  inputGather.def(
      nb::init<nb::handle, nb::handle, nb::handle, nb::handle, nb::handle,
               std::string, bool>(),
      nb::arg("gather"), nb::arg("targets"), nb::arg("num_seqs"),
      nb::arg("num_rows").none(), nb::arg("unset"), nb::kw_only(),
      nb::arg("stage") = "", nb::arg("per_tensor") = false,
      "The microbatch load contract over static buffers, and the load "
      "in one gather: targets is a tuple of (argument index, buffer, "
      "is_data) in the order the segments are laid out (argument "
      "indices: tokens, labels, loss_mask, position_ids, cu_seqlens, "
      "cu_seqlens_padded); num_seqs the count's buffer; num_rows the "
      "buffer that receives the data tensors' rows (None without data "
      "targets); unset a buffer of -1s (the cu arrays' dtype, at least "
      "their entries) copied after the given entries; stage names the "
      "stage in messages; per_tensor leaves every tensor to the caller's "
      "copy. Each buffer's own length bounds what is copied into it.");
  const auto loadArguments = std::make_index_sequence<kLoadTensors + 1>();
  defLoadMethod<&InputGather::call>(
      inputGather, "__call__",
      "Checks the microbatch (TypeError or ValueError, before anything "
      "is copied), gathers every tensor that needs no conversion and "
      "the stores on the framework's current stream, and returns the "
      "argument indices left to a converting copy, or None.",
      loadArguments);
  defLoadMethod<&InputGather::segments>(
      inputGather, "segments",
      "(flat segments, indices left to copy) of a call, checked as a "
      "call is; launches nothing.",
      loadArguments);
}
