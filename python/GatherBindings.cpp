//===- GatherBindings.cpp - the gather and the microbatch loader ----------===//
//
// thdc._thdc.Gather, the runtime's one-launch gather (runtime/Gather.h).
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
    Py_ssize_t size = PyList_Size(segments.ptr());
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
      PyObject *item = PyList_GetItem(segments.ptr(), i);
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
      else if (api_->current_work_stream(dl::kCUDA, device_, &launchStream) !=
               0)
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

} // namespace

int thdc::python::gatherDevice(nb::handle gather) {
  Gather *cast = nullptr;
  if (!nb::try_cast(gather, cast) || !cast)
    raiseArgument(PyExc_TypeError, "gather must be a thdc._thdc.Gather; got " +
                                       typeName(gather));
  return cast->device();
}

void thdc::python::populateGatherBindings(nb::module_ &m) {
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
}
