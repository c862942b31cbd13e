//===- Manifest.h - a bundle's manifest.json, defined once -----*- C++ -*-===//
//
// The one definition of what a bundle's manifest records and of its text:
// the compiler fills a Manifest and writes it with renderManifest
// (compiler/Bundle.cpp); the runtime reads it back with parseManifest. Both
// sides therefore agree on the format version, the field names and the
// buffer description, which the compiler's pipeline signature
// (compiler/Compiler.h) and thd-run's host buffers also use.
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
// Beside it, manifest.json.sha256 holds the manifest's own hash; in the
// compiled code (kernel module and host library), kBufferTableSymbol and
// kNameTableSymbol state what the code touches and what it was compiled
// for, and the runtime refuses a manifest that disagrees with them
// (checkBufferTable).
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
#include <string_view>
#include <vector>

namespace thdc::runtime {

/// The manifest format this code writes and reads; bump on incompatible
/// changes. 2: the code states its buffers' types and directions and its
/// entry name under fixed symbols (kBufferTableSymbol), and the manifest's
/// own hash is kept beside it (kManifestHashFile). 3: the code also states
/// its parameter values and buffer names (kNameTableSymbol).
constexpr int kBundleFormatVersion = 3;

/// The names a bundle's files and its host code's symbols are given, derived
/// from the pipeline's entry name. The compiler names them so
/// (compiler/Bundle.cpp, compiler/Targets.cpp); the runtime finds the manifest
/// and the host code's buffer table by them. The manifest records the other
/// names, so a reader never guesses those.
/// The manifest, in the bundle folder.
inline constexpr char kManifestFile[] = "manifest.json";
/// The SHA-256 (hex) of manifest.json, in the bundle folder: the manifest is
/// checked like the files it hashes (required where hashes are).
inline constexpr char kManifestHashFile[] = "manifest.json.sha256";
/// `<entry>.ptx`: the kernel's PTX.
inline constexpr char kPtxFileSuffix[] = ".ptx";
/// `<entry>.cubin`: the kernel assembled for the manifest's chip (optional).
inline constexpr char kCubinFileSuffix[] = ".cubin";
/// `<entry>.host.so`: the pipeline compiled for the host CPU.
inline constexpr char kHostLibrarySuffix[] = ".host.so";
/// `void <entry>_packed(void **buffers)`: the host entry that takes all
/// buffers as one array (the manifest's host symbol).
inline constexpr char kPackedSuffix[] = "_packed";
/// The code's own statement of what it touches (the buffer table), under
/// this fixed name in the kernel's module and in the host code: a constant
/// int64 array, laid out as kBufferTable* below. The runtime refuses code
/// without one and a manifest that disagrees with it, so that no edit of the
/// manifest can make the code read or write memory it was not compiled for.
inline constexpr char kBufferTableSymbol[] = "thdc_buffer_table";
/// The code's statement of its names, beside the buffer table: a
/// NUL-terminated text (encodeNameTable) under this fixed name, giving the
/// pipeline's entry, the parameter values the code was compiled with and
/// each buffer's name in kernel parameter order. The manifest's entry,
/// kernel name and host symbol must be derived from that entry, and its
/// params and buffer names must be these: a manifest edited to claim
/// other parameters (which callers size their buffers and bounds by) or
/// with two buffers' names swapped is refused, by name.
inline constexpr char kNameTableSymbol[] = "thdc_name_table";

/// The buffer table's layout. Its first entry tells a table from other
/// data and changes when the layout does.
constexpr int64_t kBufferTableMagic = 0x7468646362740002; // "thdcbt" v2
enum BufferTableIndex : size_t {
  kBufferTableMagicIndex = 0,
  kBufferTableCountIndex = 1, ///< the number of buffers, n
  kBufferTableGridIndex = 2,  ///< grid[3], then block[3]; zeros in host code
  kBufferTableBlockIndex = 5,
  kBufferTableFirstBuffer = 8, ///< then n pairs (elements, descriptor)
};
/// A buffer's descriptor in the table: its element type's code, plus
/// kBufferTableOutputBit for an output.
constexpr int64_t kBufferTableOutputBit = int64_t(1) << 8;

/// Most buffers a bundle may have (kernel parameters are passed through a
/// fixed array: no allocation at launch).
constexpr size_t kMaxBuffers = 64;

/// The number of int64 entries of a table of `buffers` buffers.
constexpr size_t bufferTableEntries(size_t buffers) {
  return kBufferTableFirstBuffer + 2 * buffers;
}

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
  int64_t code; ///< in the buffer table (1 to 7; never changes for a type)
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

/// The buffer table (see kBufferTableSymbol) of `buffers` compiled with
/// the launch geometry `grid` x `block` (zeros for host code).
std::vector<int64_t> encodeBufferTable(const std::vector<BufferDesc> &buffers,
                                       const unsigned grid[3],
                                       const unsigned block[3]);

/// The name table (see kNameTableSymbol) of a pipeline, without its final
/// NUL: the line "thdc-names 1", then "entry E", one "param NAME VALUE"
/// line per parameter (by name) and one "buffer NAME" line per buffer (in
/// order); in names, bytes outside printable ASCII, spaces and backslashes
/// are written as \xx (two hex digits).
std::string encodeNameTable(const std::string &entry,
                            const std::map<std::string, int64_t> &params,
                            const std::vector<BufferDesc> &buffers);

/// A name table read back (decodeNameTable).
struct NameTable {
  std::string entry;
  std::map<std::string, int64_t> params;
  std::vector<std::string> buffers;
};

/// Reads the name table in `bytes` (up to its first NUL, which must be
/// there); an error naming what is malformed. Never reads past `bytes`.
Result<NameTable> decodeNameTable(std::string_view bytes);

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

/// Compares the buffer table and the name table that a bundle's code
/// states (`table` of `entries` int64 values; `names`, the bytes of the
/// name table's symbol) with `manifest`; `what` names the code ("kernel",
/// "host code"), and `checkGeometry` compares the launch geometry too (the
/// kernel's table). An error naming the first difference, or success when
/// the manifest describes the code.
Status checkBufferTable(const Manifest &manifest, const int64_t *table,
                        size_t entries, std::string_view names,
                        const char *what, bool checkGeometry);

/// The manifest as JSON text (two-space indent, one member per line, a
/// final newline); parseManifest reads it back equal.
std::string renderManifest(const Manifest &manifest);

/// Largest manifest.json.sha256 read: the hash and sha256sum's file name
/// with room to spare; a larger file is refused before it is read.
constexpr size_t kMaxManifestHashBytes = 4096;

/// The hash that a manifest.json.sha256 holds (`text`, read from `path`):
/// 64 lowercase hex digits alone, or sha256sum's line "<hash>  manifest.json"
/// (or "<hash> *manifest.json"), with an optional line ending; anything else
/// is an error naming `path`.
Result<std::string> manifestHashOf(std::string_view text,
                                   const std::string &path);

/// Reads and checks `bundleDir`/manifest.json: known element types, element
/// counts whose byte sizes cannot overflow, files named inside the bundle
/// folder, a launch geometry the GPU accepts. The manifest must match the
/// hash in kManifestHashFile when that file is there, and with
/// `requireHash` it must be there. With `requirePrivate` both files must
/// belong to this user and be writable by nobody else (readWholeFile).
Result<Manifest> readManifest(const std::string &bundleDir,
                              bool requireHash = false,
                              bool requirePrivate = false);

/// The same checks on manifest text; `path` names it in messages, and each
/// message names the offending field.
Result<Manifest> parseManifest(const std::string &text,
                               const std::string &path);

} // namespace thdc::runtime

#endif // THDC_RUNTIME_MANIFEST_H
