//===- DLPackExchange.h - the DLPack ABI the module reads -------*- C++ -*-===//
//
// The module reads tensors through DLPack's own header (dlpack/dlpack.h,
// 1.3 or later; python/CMakeLists.txt says where it comes from): the
// DLTensor a producer fills in, and the C exchange table that frameworks
// publish as `type(t).__dlpack_c_exchange_api__` (a PyCapsule named
// "dlpack_exchange_api"). Through that table a torch.Tensor is read without
// creating a capsule or calling into Python, and the framework's current
// stream is queried from C, which is what keeps a call with 17 tensors
// within a few microseconds. This file only names what the module uses.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_PYTHON_DLPACKEXCHANGE_H
#define THDC_PYTHON_DLPACKEXCHANGE_H

#include <dlpack/dlpack.h>

#include <cstdint>

static_assert(DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION >= 3,
              "the module reads DLPack 1.x's C exchange API (1.3 or later)");

namespace thdc::python::dlpack {

using Tensor = ::DLTensor;
using DataType = ::DLDataType;
using Device = ::DLDevice;
using ExchangeApi = ::DLPackExchangeAPI;

inline constexpr ::DLDeviceType kCPU = ::kDLCPU;
inline constexpr ::DLDeviceType kCUDA = ::kDLCUDA;
inline constexpr ::DLDeviceType kCUDAHost = ::kDLCUDAHost;
inline constexpr ::DLDeviceType kCUDAManaged = ::kDLCUDAManaged;

inline constexpr uint8_t kInt = ::kDLInt;
inline constexpr uint8_t kUInt = ::kDLUInt;
inline constexpr uint8_t kFloat = ::kDLFloat;
inline constexpr uint8_t kBool = ::kDLBool;

/// Name of the capsule holding an ExchangeApi (dlpack.h's documentation of
/// DLPackExchangeAPI; the header declares no constant for it).
inline constexpr const char *kExchangeApiCapsule = "dlpack_exchange_api";
/// Attribute of the array type that holds that capsule.
inline constexpr const char *kExchangeApiAttribute =
    "__dlpack_c_exchange_api__";

} // namespace thdc::python::dlpack

#endif // THDC_PYTHON_DLPACKEXCHANGE_H
