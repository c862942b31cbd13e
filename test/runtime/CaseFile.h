//===- CaseFile.h - recorded cases of a pipeline and its reference outputs ===//
//
// A case file holds randomized cases of one pipeline at one set of
// parameters, each with the outputs the reference interpreter computed for
// it: the differential harness (test/unit/InterpreterDifferentialTest.cpp)
// writes them while it compares the compiled host code with the interpreter,
// and thdc-runtime-check replays them through a bundle of the same pipeline
// on a machine without MLIR, on the GPU.
//
// Layout (little-endian):
//   "THDCASE1"                     8 bytes
//   u32 buffer count B, u32 case count K
//   B times: u32 name length, the name, u8 is-output, u64 byte size
//   K times, B times: the buffer's bytes (inputs as given, outputs as the
//                     reference computed them; an i1 is one byte)
// Buffers are in the pipeline's signature order (inputs, then outputs),
// which is the order of its bundle's manifest.
//
// Plain C++17, header only.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TEST_RUNTIME_CASEFILE_H
#define THDC_TEST_RUNTIME_CASEFILE_H

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace thdc::testing {

struct CaseFile {
  struct Buffer {
    std::string name;
    bool isOutput = false;
    uint64_t bytes = 0;
  };
  std::vector<Buffer> buffers;
  /// cases[k][b]: the bytes of buffer b in case k.
  std::vector<std::vector<std::vector<uint8_t>>> cases;
};

namespace casefile_detail {
constexpr char kMagic[8] = {'T', 'H', 'D', 'C', 'A', 'S', 'E', '1'};

template <typename T> void put(std::ofstream &out, T value) {
  out.write(reinterpret_cast<const char *>(&value), sizeof(T));
}
template <typename T> bool get(std::ifstream &in, T &value) {
  return bool(in.read(reinterpret_cast<char *>(&value), sizeof(T)));
}
} // namespace casefile_detail

/// Writes `file` to `path`; false with `error` set on failure (including a
/// case whose buffers do not have the declared sizes).
inline bool writeCaseFile(const std::string &path, const CaseFile &file,
                          std::string &error) {
  using namespace casefile_detail;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    error = "cannot write " + path;
    return false;
  }
  out.write(kMagic, sizeof(kMagic));
  put<uint32_t>(out, uint32_t(file.buffers.size()));
  put<uint32_t>(out, uint32_t(file.cases.size()));
  for (const CaseFile::Buffer &buffer : file.buffers) {
    put<uint32_t>(out, uint32_t(buffer.name.size()));
    out.write(buffer.name.data(), std::streamsize(buffer.name.size()));
    put<uint8_t>(out, buffer.isOutput ? 1 : 0);
    put<uint64_t>(out, buffer.bytes);
  }
  for (size_t k = 0; k < file.cases.size(); ++k) {
    if (file.cases[k].size() != file.buffers.size()) {
      error = path + ": case " + std::to_string(k) + " has " +
              std::to_string(file.cases[k].size()) + " buffers, not " +
              std::to_string(file.buffers.size());
      return false;
    }
    for (size_t b = 0; b < file.buffers.size(); ++b) {
      if (file.cases[k][b].size() != file.buffers[b].bytes) {
        error = path + ": case " + std::to_string(k) + ", buffer '" +
                file.buffers[b].name + "' has " +
                std::to_string(file.cases[k][b].size()) + " bytes, not " +
                std::to_string(file.buffers[b].bytes);
        return false;
      }
      out.write(reinterpret_cast<const char *>(file.cases[k][b].data()),
                std::streamsize(file.cases[k][b].size()));
    }
  }
  if (!out) {
    error = "writing " + path + " failed";
    return false;
  }
  return true;
}

/// Reads a case file; false with `error` set when it cannot be read or is
/// not one (bad magic, truncated, a buffer above 1 GiB).
inline bool readCaseFile(const std::string &path, CaseFile &file,
                         std::string &error) {
  using namespace casefile_detail;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read " + path;
    return false;
  }
  auto truncated = [&] {
    error = path + " is truncated";
    return false;
  };
  char magic[sizeof(kMagic)];
  if (!in.read(magic, sizeof(magic)) ||
      std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    error = path + " is not a case file (no THDCASE1 header)";
    return false;
  }
  uint32_t buffers = 0, cases = 0;
  if (!get(in, buffers) || !get(in, cases))
    return truncated();
  file = CaseFile();
  for (uint32_t b = 0; b < buffers; ++b) {
    CaseFile::Buffer buffer;
    uint32_t length = 0;
    uint8_t isOutput = 0;
    if (!get(in, length) || length > 4096)
      return truncated();
    buffer.name.resize(length);
    if (!in.read(buffer.name.data(), length) || !get(in, isOutput) ||
        !get(in, buffer.bytes))
      return truncated();
    if (buffer.bytes > (uint64_t(1) << 30)) {
      error = path + ": buffer '" + buffer.name + "' declares " +
              std::to_string(buffer.bytes) + " bytes";
      return false;
    }
    buffer.isOutput = isOutput != 0;
    file.buffers.push_back(std::move(buffer));
  }
  for (uint32_t k = 0; k < cases; ++k) {
    std::vector<std::vector<uint8_t>> data;
    for (const CaseFile::Buffer &buffer : file.buffers) {
      std::vector<uint8_t> bytes(size_t(buffer.bytes));
      if (!in.read(reinterpret_cast<char *>(bytes.data()),
                   std::streamsize(bytes.size())))
        return truncated();
      data.push_back(std::move(bytes));
    }
    file.cases.push_back(std::move(data));
  }
  return true;
}

} // namespace thdc::testing

#endif // THDC_TEST_RUNTIME_CASEFILE_H
