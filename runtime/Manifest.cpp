//===- Manifest.cpp - a bundle's manifest.json, defined once --------------===//

#include "runtime/Manifest.h"
#include "runtime/Cache.h"
#include "runtime/Json.h"
#include "runtime/Sha256.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <sys/stat.h>

using namespace thdc::runtime;

namespace {
/// A file name inside the bundle folder: no folders, no parent.
bool isPlainFileName(const std::string &name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos;
}
} // namespace

const ElementTypeInfo *thdc::runtime::findElementType(const std::string &name) {
  using Kind = ElementTypeInfo::Kind;
  static const ElementTypeInfo types[] = {
      {"i1", "bool", Kind::Bool, 1, 1},      {"i8", "int8", Kind::Int, 1, 2},
      {"i16", "int16", Kind::Int, 2, 3},     {"i32", "int32", Kind::Int, 4, 4},
      {"i64", "int64", Kind::Int, 8, 5},     {"f32", "float32", Kind::Float, 4, 6},
      {"f64", "float64", Kind::Float, 8, 7}};
  for (const ElementTypeInfo &type : types)
    if (name == type.name)
      return &type;
  return nullptr;
}

size_t BufferDesc::bytes() const {
  const ElementTypeInfo *element = findElementType(type);
  return element ? size_t(elements) * element->bytes : 0;
}

std::vector<int64_t>
thdc::runtime::encodeBufferTable(const std::vector<BufferDesc> &buffers,
                                 const unsigned grid[3],
                                 const unsigned block[3]) {
  std::vector<int64_t> table(bufferTableEntries(buffers.size()), 0);
  table[kBufferTableMagicIndex] = kBufferTableMagic;
  table[kBufferTableCountIndex] = int64_t(buffers.size());
  for (int d = 0; d < 3; ++d) {
    table[kBufferTableGridIndex + d] = grid[d];
    table[kBufferTableBlockIndex + d] = block[d];
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    const ElementTypeInfo *type = findElementType(buffers[i].type);
    table[kBufferTableFirstBuffer + 2 * i] = buffers[i].elements;
    table[kBufferTableFirstBuffer + 2 * i + 1] =
        (type ? type->code : 0) |
        (buffers[i].isOutput ? kBufferTableOutputBit : 0);
  }
  return table;
}

namespace {
constexpr char kNameTableHeader[] = "thdc-names 1";

/// A name as one word of the name table: printable ASCII but for space and
/// backslash as is, every other byte as \xx.
std::string escapeName(const std::string &name) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : name) {
    if (c > ' ' && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      out += '\\';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

bool unescapeName(std::string_view word, std::string &out) {
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  out.clear();
  for (size_t i = 0; i < word.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(word[i]);
    if (c != '\\') {
      if (c <= ' ' || c >= 0x7f)
        return false;
      out += word[i];
      continue;
    }
    if (word.size() - i < 3)
      return false;
    int high = hex(word[i + 1]), low = hex(word[i + 2]);
    if (high < 0 || low < 0)
      return false;
    out += char(high * 16 + low);
    i += 2;
  }
  return true;
}
} // namespace

std::string
thdc::runtime::encodeNameTable(const std::string &entry,
                               const std::map<std::string, int64_t> &params,
                               const std::vector<BufferDesc> &buffers) {
  std::string text = std::string(kNameTableHeader) + "\nentry " +
                     escapeName(entry) + "\n";
  for (const auto &[name, value] : params)
    text += "param " + escapeName(name) + " " + std::to_string(value) + "\n";
  for (const BufferDesc &buffer : buffers)
    text += "buffer " + escapeName(buffer.name) + "\n";
  return text;
}

Result<NameTable> thdc::runtime::decodeNameTable(std::string_view bytes) {
  size_t end = bytes.find('\0');
  if (end == std::string_view::npos)
    return Status::error("its name table does not end (damaged)");
  std::string_view text = bytes.substr(0, end);
  NameTable table;
  bool header = false, entry = false;
  size_t line = 0;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    if (newline == std::string_view::npos)
      return Status::error("its name table's last line does not end (damaged)");
    std::string_view words = text.substr(0, newline);
    text.remove_prefix(newline + 1);
    ++line;
    auto bad = [&] {
      return Status::error(fmt::format(
          "its name table is malformed at line {} (damaged, or written by "
          "another thdc)",
          line));
    };
    if (!header) {
      if (words != kNameTableHeader)
        return bad();
      header = true;
      continue;
    }
    size_t space = words.find(' ');
    if (space == std::string_view::npos)
      return bad();
    std::string_view kind = words.substr(0, space), rest = words.substr(space + 1);
    std::string name;
    if (kind == "entry" && !entry) {
      if (!unescapeName(rest, table.entry) || table.entry.empty())
        return bad();
      entry = true;
    } else if (kind == "param" && entry && table.buffers.empty()) {
      size_t split = rest.find(' ');
      if (split == std::string_view::npos ||
          !unescapeName(rest.substr(0, split), name) || name.empty() ||
          table.params.count(name))
        return bad();
      std::string_view digits = rest.substr(split + 1);
      bool negative = !digits.empty() && digits[0] == '-';
      if (negative)
        digits.remove_prefix(1);
      // Any int64: the magnitude up to 2^63 (INT64_MIN's), checked before
      // each step so that it cannot wrap.
      const uint64_t limit = uint64_t(INT64_MAX) + (negative ? 1 : 0);
      uint64_t magnitude = 0;
      if (digits.empty())
        return bad();
      for (char c : digits) {
        if (c < '0' || c > '9' || magnitude > (limit - uint64_t(c - '0')) / 10)
          return bad();
        magnitude = magnitude * 10 + uint64_t(c - '0');
      }
      table.params[name] = negative ? int64_t(0 - magnitude) : int64_t(magnitude);
    } else if (kind == "buffer" && entry) {
      if (!unescapeName(rest, name) || name.empty())
        return bad();
      table.buffers.push_back(std::move(name));
    } else {
      return bad();
    }
  }
  if (!header || !entry)
    return Status::error("its name table is incomplete (damaged)");
  return table;
}

Status thdc::runtime::checkBufferTable(const Manifest &m, const int64_t *table,
                                       size_t entries, std::string_view names,
                                       const char *what, bool checkGeometry) {
  const std::vector<BufferDesc> &buffers = m.buffers;
  if (entries < kBufferTableFirstBuffer ||
      table[kBufferTableMagicIndex] != kBufferTableMagic)
    return Status::error(
        fmt::format("the {} has no buffer table of this runtime's format "
                    "(written by another thdc, or damaged); compile it "
                    "again",
                    what));
  int64_t count = table[kBufferTableCountIndex];
  if (count != int64_t(buffers.size()) ||
      entries != bufferTableEntries(buffers.size()))
    return Status::error(fmt::format("{} lists {} buffers, but the {} takes {}",
                                     kManifestFile, buffers.size(), what,
                                     count));
  Result<NameTable> stated = decodeNameTable(names);
  if (!stated)
    return Status::error(fmt::format("the {}: {}; compile it again", what,
                                     stated.status().message()));
  const std::string &entry = stated->entry;
  if (stated->buffers.size() != buffers.size())
    return Status::error(
        fmt::format("the {} names {} buffers but takes {} (damaged); "
                    "compile it again",
                    what, stated->buffers.size(), buffers.size()));
  if (entry != m.entry)
    return Status::error(
        fmt::format("{} names the entry '{}', but the {} is '{}'",
                    kManifestFile, m.entry, what, entry));
  if (m.kernelName != entry)
    return Status::error(
        fmt::format("{} names the kernel '{}', but the {} is '{}'",
                    kManifestFile, m.kernelName, what, entry));
  if (!m.hostLibrary.empty() && m.hostSymbol != entry + kPackedSuffix)
    return Status::error(
        fmt::format("{} names the host symbol '{}', but the {} enters at "
                    "'{}{}'",
                    kManifestFile, m.hostSymbol, what, entry, kPackedSuffix));
  if (checkGeometry)
    for (int d = 0; d < 3; ++d)
      if (table[kBufferTableGridIndex + d] != m.grid[d] ||
          table[kBufferTableBlockIndex + d] != m.block[d])
        return Status::error(fmt::format(
            "{} launches grid [{}, {}, {}] x block [{}, {}, {}], but the {} "
            "was compiled for grid [{}, {}, {}] x block [{}, {}, {}]",
            kManifestFile, m.grid[0], m.grid[1], m.grid[2], m.block[0],
            m.block[1], m.block[2], what, table[kBufferTableGridIndex],
            table[kBufferTableGridIndex + 1], table[kBufferTableGridIndex + 2],
            table[kBufferTableBlockIndex], table[kBufferTableBlockIndex + 1],
            table[kBufferTableBlockIndex + 2]));
  for (const auto &[name, value] : stated->params) {
    auto given = m.params.find(name);
    if (given == m.params.end())
      return Status::error(
          fmt::format("{} gives no value for the parameter '{}', but the "
                      "{} was compiled with {} = {}",
                      kManifestFile, name, what, name, value));
    if (given->second != value)
      return Status::error(
          fmt::format("{}: params.{} is {}, but the {} was compiled with "
                      "{} = {}",
                      kManifestFile, name, given->second, what, name, value));
  }
  for (const auto &[name, value] : m.params)
    if (!stated->params.count(name))
      return Status::error(
          fmt::format("{}: params.{} = {} is not a parameter the {} was "
                      "compiled with",
                      kManifestFile, name, value, what));
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name != stated->buffers[i])
      return Status::error(fmt::format(
          "{}: buffer {} is named '{}', but the {}'s buffer {} "
          "is '{}'",
          kManifestFile, i, buffers[i].name, what, i, stated->buffers[i]));
  for (size_t i = 0; i < buffers.size(); ++i) {
    const BufferDesc &buffer = buffers[i];
    int64_t elements = table[kBufferTableFirstBuffer + 2 * i];
    int64_t descriptor = table[kBufferTableFirstBuffer + 2 * i + 1];
    const ElementTypeInfo *type = findElementType(buffer.type);
    bool output = descriptor & kBufferTableOutputBit;
    if (elements != buffer.elements)
      return Status::error(fmt::format(
          "{}: buffer '{}' has {} elements, but the {} was compiled for {}",
          kManifestFile, buffer.name, buffer.elements, what, elements));
    if (!type || type->code != (descriptor & ~kBufferTableOutputBit))
      return Status::error(
          fmt::format("{}: buffer '{}' has the type '{}', but the {} was "
                      "compiled for another (type code {})",
                      kManifestFile, buffer.name, buffer.type, what,
                      descriptor & ~kBufferTableOutputBit));
    if (output != buffer.isOutput)
      return Status::error(fmt::format(
          "{}: buffer '{}' is an {}, but the {} was compiled "
          "with it as an {}",
          kManifestFile, buffer.name, buffer.isOutput ? "output" : "input",
          what, output ? "output" : "input"));
  }
  return Status();
}

int Manifest::find(const std::string &name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name)
      return int(i);
  return -1;
}

Result<std::string> thdc::runtime::manifestHashOf(std::string_view text,
                                                  const std::string &path) {
  // "<hex>", or sha256sum's "<hex>  manifest.json" ("<hex> *manifest.json"
  // in binary mode), with one line ending.
  auto isSpace = [](char c) { return c == ' ' || c == '\t'; };
  if (!text.empty() && text.back() == '\n')
    text.remove_suffix(1);
  if (!text.empty() && text.back() == '\r')
    text.remove_suffix(1);
  size_t end = 0;
  while (end < text.size() && !isSpace(text[end]))
    ++end;
  std::string hash(text.substr(0, end));
  std::string_view rest = text.substr(end);
  while (!rest.empty() && isSpace(rest.front()))
    rest.remove_prefix(1);
  if (!rest.empty() && rest.front() == '*')
    rest.remove_prefix(1);
  bool hex = hash.size() == 64 &&
             std::all_of(hash.begin(), hash.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
             });
  if (!hex || !(rest.empty() || rest == kManifestFile))
    return Status::error(fmt::format(
        "{} holds no SHA-256 of {} (64 lowercase hex digits, alone or as "
        "sha256sum writes them: '<hash>  {}')",
        path, kManifestFile, kManifestFile));
  return hash;
}

Result<Manifest> thdc::runtime::readManifest(const std::string &bundleDir,
                                             bool requireHash,
                                             bool requirePrivate) {
  std::string path = joinPath(bundleDir, kManifestFile);
  Result<std::string> text = readWholeFile(path, requirePrivate);
  if (!text)
    return Status::error(text.status().message() +
                         " (is it a bundle written by thdc?)");
  std::string hashPath = joinPath(bundleDir, kManifestHashFile);
  struct stat info;
  if (requireHash || lstat(hashPath.c_str(), &info) == 0) {
    // The hash alone, or sha256sum's line for manifest.json; nothing that
    // could be more is read.
    Result<std::string> hash =
        readWholeFile(hashPath, requirePrivate, kMaxManifestHashBytes);
    if (!hash)
      return hash.status();
    Result<std::string> expected = manifestHashOf(*hash, hashPath);
    if (!expected)
      return expected.status();
    if (*expected != sha256Hex(*text))
      return Status::error(fmt::format(
          "{} does not match the hash in {} (damaged or edited); refusing to "
          "load it",
          path, kManifestHashFile));
  }
  return parseManifest(*text, path);
}

Result<Manifest> thdc::runtime::parseManifest(const std::string &text,
                                              const std::string &path) {
  Result<json::Value> root = json::parse(text);
  if (!root)
    return Status::error(fmt::format("{}: {}", path, root.status().message()));
  auto bad = [&](const std::string &what) {
    return Status::error(fmt::format("{}: {}", path, what));
  };
  using Kind = json::Value::Kind;
  auto string = [&](const json::Value *v, std::string &out) {
    if (!v || v->kind != Kind::String)
      return false;
    out = v->string;
    return true;
  };
  Manifest m;
  const json::Value *format = root->get("format");
  if (!format || format->kind != Kind::Integer)
    return bad("missing \"format\" (an integer)");
  if (format->integer != kBundleFormatVersion)
    return bad(fmt::format("bundle format {} is not supported by this runtime "
                           "(it reads format {})",
                           format->integer, kBundleFormatVersion));
  m.format = kBundleFormatVersion;
  string(root->get("thdc_version"), m.thdcVersion);
  if (!string(root->get("entry"), m.entry) || m.entry.empty())
    return bad("missing \"entry\" (the pipeline's name)");
  if (const json::Value *params = root->get("params")) {
    if (params->kind != Kind::Object)
      return bad("\"params\" must map parameter names to integers");
    for (const auto &[name, value] : params->object) {
      if (value.kind != Kind::Integer)
        return bad(fmt::format("parameter '{}' in \"params\" is not an integer",
                               name));
      m.params[name] = value.integer;
    }
  }
  const json::Value *buffers = root->get("buffers");
  if (!buffers || buffers->kind != Kind::Array || buffers->array.empty())
    return bad("missing \"buffers\" (a non-empty array)");
  if (buffers->array.size() > kMaxBuffers)
    return bad(fmt::format("more than {} buffers", kMaxBuffers));
  for (const json::Value &entry : buffers->array) {
    BufferDesc buffer;
    std::string direction;
    const json::Value *elements = entry.get("elements");
    if (!string(entry.get("name"), buffer.name) ||
        !string(entry.get("type"), buffer.type) ||
        !string(entry.get("direction"), direction) || !elements ||
        elements->kind != Kind::Integer)
      return bad(fmt::format(
          "buffer {} needs a name, a type, a direction and an element count",
          m.buffers.size()));
    if (!findElementType(buffer.type))
      return bad(fmt::format("buffer '{}' has the unknown type '{}'",
                             buffer.name, buffer.type));
    if (elements->integer < 1 || elements->integer > kMaxElements)
      return bad(fmt::format(
          "buffer '{}' has {} elements; a bundle's buffers hold 1 to 2^40",
          buffer.name, elements->integer));
    if (direction != "input" && direction != "output")
      return bad(
          fmt::format("buffer '{}' has the direction '{}' (input or output)",
                      buffer.name, direction));
    buffer.elements = elements->integer;
    buffer.isOutput = direction == "output";
    m.buffers.push_back(buffer);
  }
  const json::Value *kernel = root->get("kernel");
  if (!kernel || kernel->kind != Kind::Object)
    return bad("missing \"kernel\"");
  if (!string(kernel->get("name"), m.kernelName) || m.kernelName.empty())
    return bad("\"kernel\" needs a \"name\"");
  if (!string(kernel->get("ptx"), m.ptxFile))
    return bad("\"kernel\" needs a \"ptx\" file");
  string(kernel->get("chip"), m.chip);
  if (!isPlainFileName(m.ptxFile))
    return bad(fmt::format(
        "the kernel file '{}' must be a file name inside the bundle folder",
        m.ptxFile));
  if (const json::Value *cubin = kernel->get("cubin")) {
    if (!string(cubin, m.cubinFile) || !isPlainFileName(m.cubinFile))
      return bad("the kernel's \"cubin\" must be a file name inside the "
                 "bundle folder");
    if (m.chip.empty())
      return bad("a kernel with a \"cubin\" needs the \"chip\" it was "
                 "assembled for");
  }
  for (const char *key : {"grid", "block"}) {
    const json::Value *dims = kernel->get(key);
    if (!dims || dims->kind != Kind::Array || dims->array.size() != 3)
      return bad(fmt::format("kernel \"{}\" must have 3 sizes", key));
    int64_t limit = std::string(key) == "grid" ? INT32_MAX : 1024;
    for (int d = 0; d < 3; ++d) {
      const json::Value &size = dims->array[d];
      if (size.kind != Kind::Integer || size.integer < 1 ||
          size.integer > limit)
        return bad(
            fmt::format("kernel \"{}\" sizes must be 1 to {}", key, limit));
      (std::string(key) == "grid" ? m.grid : m.block)[d] =
          unsigned(size.integer);
    }
  }
  if (int64_t(m.block[0]) * m.block[1] * m.block[2] > 1024)
    return bad("a kernel block has at most 1024 threads");
  if (const json::Value *host = root->get("host")) {
    if (!string(host->get("library"), m.hostLibrary) ||
        !string(host->get("symbol"), m.hostSymbol) ||
        !isPlainFileName(m.hostLibrary) || m.hostSymbol.empty())
      return bad("\"host\" needs a library file inside the bundle folder "
                 "and a symbol");
  }
  if (const json::Value *hashes = root->get("sha256")) {
    if (hashes->kind != Kind::Object)
      return bad("\"sha256\" must map file names to hashes");
    for (const auto &[file, hash] : hashes->object) {
      if (hash.kind != Kind::String || hash.string.size() != 64)
        return bad(fmt::format("the hash of '{}' is not a SHA-256", file));
      m.fileHashes[file] = hash.string;
    }
  }
  return m;
}

std::string thdc::runtime::renderManifest(const Manifest &m) {
  json::Writer json;
  json.object([&] {
    json.attribute("format", int64_t(m.format));
    json.attribute("thdc_version", m.thdcVersion);
    json.attribute("entry", m.entry);
    // A std::map: sorted, so equal pipelines give equal manifests.
    json.attributeObject("params", [&] {
      for (const auto &[name, value] : m.params)
        json.attribute(name, value);
    });
    json.attributeArray("buffers", [&] {
      for (const BufferDesc &buffer : m.buffers)
        json.object([&] {
          json.attribute("name", buffer.name);
          json.attribute("direction", buffer.isOutput ? "output" : "input");
          json.attribute("type", buffer.type);
          json.attribute("elements", buffer.elements);
        });
    });
    json.attributeObject("kernel", [&] {
      json.attribute("name", m.kernelName);
      json.attribute("ptx", m.ptxFile);
      if (!m.cubinFile.empty())
        json.attribute("cubin", m.cubinFile);
      json.attribute("chip", m.chip);
      json.attributeArray("grid", [&] {
        for (unsigned d : m.grid)
          json.value(int64_t(d));
      });
      json.attributeArray("block", [&] {
        for (unsigned d : m.block)
          json.value(int64_t(d));
      });
    });
    if (!m.hostLibrary.empty())
      json.attributeObject("host", [&] {
        json.attribute("library", m.hostLibrary);
        json.attribute("symbol", m.hostSymbol);
      });
    json.attributeObject("sha256", [&] {
      for (const auto &[file, hash] : m.fileHashes)
        json.attribute(file, hash);
    });
  });
  return json.text() + "\n";
}
