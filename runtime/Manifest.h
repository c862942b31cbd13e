//===- Manifest.h - a bundle's manifest.json, defined once -----*- C++ -*-===//
//
// The one definition of what a bundle's manifest records and of its text:
// the compiler fills a Manifest and writes it with renderManifest
// (codegen/Bundle.cpp); the runtime reads it back with parseManifest. Both
// sides therefore agree on the format version, the field names and the
// buffer description, which the compiler's pipeline signature
// (codegen/Compiler.h) and thd-run's host buffers also use.
//
// manifest.json:
//   format        kBundleFormatVersion
//   thdc_version  the compiler that wrote it
//   entry         the pipeline function (and kernel) name
//   params        the parameter values compiled in, by name
//   buffers       [{name, direction, type, elements}], inputs then outputs,
//                 in kernel parameter order
//   kernel        {name, ptx, chip, grid[3], block[3]}
//   host          {library, symbol}, when the bundle has host code
//   sha256        the hash of each file above, by file name
//
// The reader is the runtime's own (runtime/Json.h, no exceptions): a damaged
// manifest is an error that names the field, never a thrown exception or an
// abort inside a training process.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_MANIFEST_H
#define THDC_RUNTIME_MANIFEST_H

#include "runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace thdc::runtime {

/// The manifest format this code writes and reads; bump on incompatible
/// changes.
constexpr int kBundleFormatVersion = 1;

/// The names a bundle's files and its host code's symbols are given, derived
/// from the pipeline's entry name. The compiler names them so
/// (codegen/Bundle.cpp, codegen/Compiler.cpp); the runtime finds the manifest
/// and the host code's buffer table by them. The manifest records the other
/// names, so a reader never guesses those.
/// The manifest, in the bundle folder.
inline constexpr char kManifestFile[] = "manifest.json";
/// `<entry>.ptx`: the kernel's PTX.
inline constexpr char kPtxFileSuffix[] = ".ptx";
/// `<entry>.cubin`: the kernel assembled for the manifest's chip (optional).
inline constexpr char kCubinFileSuffix[] = ".cubin";
/// `<entry>.host.so`: the pipeline compiled for the host CPU.
inline constexpr char kHostLibrarySuffix[] = ".host.so";
/// `void <entry>_packed(void **buffers)`: the host entry that takes all
/// buffers as one array (the manifest's host symbol).
inline constexpr char kPackedSuffix[] = "_packed";
/// `const int64_t <entry>_buffer_elements[]`, in the host code and in the
/// kernel's module: the number of buffers, then each buffer's element count
/// in kernel parameter order (checked against the manifest at load).
inline constexpr char kBufferElementsSuffix[] = "_buffer_elements";

/// Most buffers a bundle may have (kernel parameters are passed through a
/// fixed array: no allocation at launch).
constexpr size_t kMaxBuffers = 64;

/// Largest element count a manifest may declare: 2^40 elements, far above
/// what 32-bit offsets address and far below a byte count that overflows.
constexpr int64_t kMaxElements = int64_t(1) << 40;

/// An element type a bundle's buffers may have, as the manifest spells it
/// ("i32"), as array libraries spell it ("int32"), and its storage (i1 is
/// one byte per element).
struct ElementTypeInfo {
  enum class Kind { Int, Float, Bool };
  const char *name;
  const char *arrayName;
  Kind kind;
  unsigned bytes;
};

/// The element type called `name` in a manifest, or null.
const ElementTypeInfo *findElementType(const std::string &name);

/// One buffer of a compiled pipeline (one kernel parameter): what the
/// compiler's signature, the manifest, the runtime and thd-run's host
/// buffers all describe it by.
struct BufferDesc {
  std::string name;     ///< thd.name, or argN / resultN
  std::string type;     ///< "i1", "i8", "i16", "i32", "i64", "f32", "f64"
  int64_t elements = 0; ///< static length
  bool isOutput = false;
  /// Size in bytes (i1 is one byte per element; 0 for an unknown type).
  size_t bytes() const;
};

/// The contents of a bundle's manifest.json.
struct Manifest {
  int format = kBundleFormatVersion;
  std::string thdcVersion, entry;
  std::map<std::string, int64_t> params;
  std::vector<BufferDesc> buffers; ///< inputs, then outputs
  std::string kernelName, ptxFile, chip;
  /// The kernel assembled for `chip` (loaded as is on a GPU of that chip,
  /// the PTX elsewhere); empty when the bundle has none.
  std::string cubinFile;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  std::string hostLibrary, hostSymbol; ///< empty when the bundle has none
  /// SHA-256 (hex) of the bundle's files by name; checked before a file is
  /// used. Bundles written before hashes were recorded have none.
  std::map<std::string, std::string> fileHashes;

  /// The index of the buffer called `name`, or -1.
  int find(const std::string &name) const;
};

/// The manifest as JSON text (two-space indent, one member per line, a
/// final newline); parseManifest reads it back equal.
std::string renderManifest(const Manifest &manifest);

/// Reads and checks `bundleDir`/manifest.json: known element types, element
/// counts whose byte sizes cannot overflow, files named inside the bundle
/// folder, a launch geometry the GPU accepts.
Result<Manifest> readManifest(const std::string &bundleDir);

/// The same checks on manifest text; `path` names it in messages, and each
/// message names the offending field.
Result<Manifest> parseManifest(const std::string &text,
                               const std::string &path);

} // namespace thdc::runtime

#endif // THDC_RUNTIME_MANIFEST_H
