//===- DLPackExchange.h - the DLPack ABI the module reads -------*- C++ -*-===//
//
// The parts of the DLPack ABI (dlpack.h, version 1.2+) that the module reads
// directly: the DLTensor a producer fills in, and the C exchange table that
// frameworks publish as `type(t).__dlpack_c_exchange_api__` (a PyCapsule
// named "dlpack_exchange_api"). Through that table a torch.Tensor is read
// without creating a capsule or calling into Python, and the framework's
// current stream is queried from C, which is what keeps a call with 17
// tensors within a few microseconds. Layouts follow the DLPack header; they
// are part of its stable ABI.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_PYTHON_DLPACKEXCHANGE_H
#define THDC_PYTHON_DLPACKEXCHANGE_H

#include <cstdint>

namespace thdc::python::dlpack {

enum DeviceType : int32_t {
  kCPU = 1,
  kCUDA = 2,
  kCUDAHost = 3,
  kCUDAManaged = 13,
};

enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBool = 6 };

struct Device {
  int32_t type;
  int32_t id;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void *data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t *shape;
  int64_t *strides; ///< in elements; null means compact row-major
  uint64_t byteOffset;
};

struct Version {
  uint32_t major;
  uint32_t minor;
};

struct ExchangeApiHeader {
  Version version;
  ExchangeApiHeader *previous;
};

/// DLPackExchangeAPI. Only the entries thdc calls are typed.
struct ExchangeApi {
  ExchangeApiHeader header;
  void *managedTensorAllocator;
  void *managedTensorFromPyObjectNoSync;
  void *managedTensorToPyObjectNoSync;
  /// Fills `out` for `pyObject`; 0 on success, -1 with a Python error set.
  int (*dltensorFromPyObjectNoSync)(void *pyObject, Tensor *out);
  /// The framework's current stream of a device; 0 on success.
  int (*currentWorkStream)(int32_t deviceType, int32_t deviceId,
                           void **outStream);
};

/// Name of the capsule holding an ExchangeApi.
inline constexpr const char *kExchangeApiCapsule = "dlpack_exchange_api";
/// Attribute of the array type that holds that capsule.
inline constexpr const char *kExchangeApiAttribute =
    "__dlpack_c_exchange_api__";

} // namespace thdc::python::dlpack

#endif // THDC_PYTHON_DLPACKEXCHANGE_H
