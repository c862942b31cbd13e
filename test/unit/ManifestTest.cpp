//===- ManifestTest.cpp - the manifest and its JSON reader and writer -----===//
//
// The writer's exact layout (lit tests edit manifests line by line), a full
// manifest written and read back equal, and every malformed manifest the
// reader rejects, each with an error that names the field.
//
//===----------------------------------------------------------------------===//

#include "runtime/Json.h"
#include "runtime/Manifest.h"

#include "gtest/gtest.h"

#include <cctype>
#include <climits>
#include <ostream>
#include <string>

using namespace thdc::runtime;

namespace {

TEST(JsonWriter, LayoutMatchesTwoSpaceIndent) {
  json::Writer w;
  w.object([&] {
    w.attribute("a", int64_t(1));
    w.attributeObject("empty", [] {});
    w.attributeArray("none", [] {});
    w.attributeArray("list", [&] {
      w.value(int64_t(-2));
      w.value("x");
      w.value(true);
      w.object([&] { w.attribute("k", "v"); });
    });
  });
  EXPECT_EQ(w.text(), "{\n"
                      "  \"a\": 1,\n"
                      "  \"empty\": {},\n"
                      "  \"none\": [],\n"
                      "  \"list\": [\n"
                      "    -2,\n"
                      "    \"x\",\n"
                      "    true,\n"
                      "    {\n"
                      "      \"k\": \"v\"\n"
                      "    }\n"
                      "  ]\n"
                      "}");
}

TEST(JsonWriter, EscapesAndReadsBack) {
  std::string nasty = "q\"b\\n\nt\tc\x01\x7f" "end";
  EXPECT_EQ(json::quote(nasty),
            "\"q\\\"b\\\\n\\nt\\tc\\u0001\\u007fend\"");
  json::Writer w;
  w.object([&] { w.attribute(nasty, nasty); });
  Result<json::Value> read = json::parse(w.text());
  ASSERT_TRUE(read) << read.status().message();
  const json::Value *value = read->get(nasty);
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(value->string, nasty);
}

TEST(JsonWriter, Int64ExtremesReadBackExact) {
  json::Writer w;
  w.array([&] {
    w.value(INT64_MIN);
    w.value(INT64_MAX);
  });
  Result<json::Value> read = json::parse(w.text());
  ASSERT_TRUE(read) << read.status().message();
  ASSERT_EQ(read->array.size(), 2u);
  EXPECT_EQ(read->array[0].integer, INT64_MIN);
  EXPECT_EQ(read->array[1].integer, INT64_MAX);
}

Manifest fullManifest() {
  Manifest m;
  m.thdcVersion = "9.8.7";
  m.entry = "step";
  m.params = {{"C", 32768}, {"CP", 2}, {"NEG", -5}};
  m.buffers = {{"tokens", "i64", 16, false},
               {"cu_seqlens", "i32", 5, false},
               {"loss_mask", "f32", 16, true},
               {"padding_mask", "i1", 16, true}};
  m.kernelName = "step";
  m.ptxFile = "step.ptx";
  m.cubinFile = "step.cubin";
  m.chip = "sm_90";
  m.grid[0] = 7;
  m.grid[1] = 2;
  m.block[0] = 256;
  m.hostLibrary = "step.host.so";
  m.hostSymbol = "step_packed";
  m.fileHashes = {{"step.ptx", std::string(64, 'a')},
                  {"step.cubin", std::string(64, 'c')},
                  {"step.host.so", std::string(64, 'b')}};
  return m;
}

void expectEqual(const Manifest &a, const Manifest &b) {
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.thdcVersion, b.thdcVersion);
  EXPECT_EQ(a.entry, b.entry);
  EXPECT_EQ(a.params, b.params);
  ASSERT_EQ(a.buffers.size(), b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    EXPECT_EQ(a.buffers[i].name, b.buffers[i].name);
    EXPECT_EQ(a.buffers[i].type, b.buffers[i].type);
    EXPECT_EQ(a.buffers[i].elements, b.buffers[i].elements);
    EXPECT_EQ(a.buffers[i].isOutput, b.buffers[i].isOutput);
  }
  EXPECT_EQ(a.kernelName, b.kernelName);
  EXPECT_EQ(a.ptxFile, b.ptxFile);
  EXPECT_EQ(a.cubinFile, b.cubinFile);
  EXPECT_EQ(a.chip, b.chip);
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(a.grid[d], b.grid[d]);
    EXPECT_EQ(a.block[d], b.block[d]);
  }
  EXPECT_EQ(a.hostLibrary, b.hostLibrary);
  EXPECT_EQ(a.hostSymbol, b.hostSymbol);
  EXPECT_EQ(a.fileHashes, b.fileHashes);
}

TEST(Manifest, FullManifestRoundTrips) {
  Manifest written = fullManifest();
  std::string text = renderManifest(written);
  Result<Manifest> read = parseManifest(text, "manifest.json");
  ASSERT_TRUE(read) << read.status().message();
  expectEqual(*read, written);
  // Rendering what was read gives the same text.
  EXPECT_EQ(renderManifest(*read), text);
}

TEST(Manifest, CubinIsOptionalAndNeedsItsChip) {
  Manifest m = fullManifest();
  m.cubinFile.clear();
  m.fileHashes.erase("step.cubin");
  Result<Manifest> read = parseManifest(renderManifest(m), "manifest.json");
  ASSERT_TRUE(read) << read.status().message();
  EXPECT_EQ(read->cubinFile, "");
  EXPECT_EQ(renderManifest(m).find("cubin"), std::string::npos);

  // A manifest edited by `edit` is refused with `message`.
  auto expectRefused = [](void (*edit)(Manifest &), const char *message) {
    Manifest edited = fullManifest();
    edit(edited);
    Result<Manifest> refused =
        parseManifest(renderManifest(edited), "manifest.json");
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.status().message().find(message), std::string::npos)
        << refused.status().message();
  };
  expectRefused([](Manifest &e) { e.chip.clear(); },
                "a kernel with a \"cubin\" needs the \"chip\"");
  expectRefused([](Manifest &e) { e.cubinFile = "../elsewhere.cubin"; },
                "the kernel's \"cubin\" must be a file name inside");
}

TEST(Manifest, WithoutHostCodeRoundTrips) {
  Manifest written = fullManifest();
  written.hostLibrary.clear();
  written.hostSymbol.clear();
  written.params.clear();
  std::string text = renderManifest(written);
  EXPECT_EQ(text.find("\"host\""), std::string::npos);
  EXPECT_NE(text.find("\"params\": {},"), std::string::npos);
  Result<Manifest> read = parseManifest(text, "manifest.json");
  ASSERT_TRUE(read) << read.status().message();
  expectEqual(*read, written);
}

TEST(Manifest, RenderedLayout) {
  Manifest m;
  m.thdcVersion = "1.0";
  m.entry = "f";
  m.params = {{"C", 8}};
  m.buffers = {{"x", "i32", 4, false}};
  m.kernelName = "f";
  m.ptxFile = "f.ptx";
  m.chip = "sm_80";
  m.block[0] = 32;
  m.fileHashes = {{"f.ptx", std::string(64, '0')}};
  EXPECT_EQ(renderManifest(m), "{\n"
                               "  \"format\": " +
                                   std::to_string(kBundleFormatVersion) +
                                   ",\n"
                                   "  \"thdc_version\": \"1.0\",\n"
                                   "  \"entry\": \"f\",\n"
                                   "  \"params\": {\n"
                                   "    \"C\": 8\n"
                                   "  },\n"
                                   "  \"buffers\": [\n"
                                   "    {\n"
                                   "      \"name\": \"x\",\n"
                                   "      \"direction\": \"input\",\n"
                                   "      \"type\": \"i32\",\n"
                                   "      \"elements\": 4\n"
                                   "    }\n"
                                   "  ],\n"
                                   "  \"kernel\": {\n"
                                   "    \"name\": \"f\",\n"
                                   "    \"ptx\": \"f.ptx\",\n"
                                   "    \"chip\": \"sm_80\",\n"
                                   "    \"grid\": [\n"
                                   "      1,\n"
                                   "      1,\n"
                                   "      1\n"
                                   "    ],\n"
                                   "    \"block\": [\n"
                                   "      32,\n"
                                   "      1,\n"
                                   "      1\n"
                                   "    ]\n"
                                   "  },\n"
                                   "  \"sha256\": {\n"
                                   "    \"f.ptx\": \"" +
                                   std::string(64, '0') +
                                   "\"\n"
                                   "  }\n"
                                   "}\n");
}

/// A malformed manifest: `from` replaced by `to` in the full manifest's
/// text, and a piece of the error that names the field.
struct Malformed {
  const char *what, *from, *to, *error;
};
/// How gtest prints a case (its listing): what it breaks.
void PrintTo(const Malformed &c, std::ostream *os) { *os << c.what; }

class ManifestRejects : public testing::TestWithParam<Malformed> {};

/// Each case's test name from its `what` ("short hash" -> short_hash), so
/// that ctest's names are stable and `ctest -R` can pick one.
std::string malformedName(const testing::TestParamInfo<Malformed> &info) {
  std::string name = info.param.what;
  for (char &c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return name;
}

TEST_P(ManifestRejects, NamingTheField) {
  const Malformed &c = GetParam();
  std::string text = renderManifest(fullManifest());
  size_t at = text.find(c.from);
  ASSERT_NE(at, std::string::npos) << c.from;
  text.replace(at, std::string(c.from).size(), c.to);
  Result<Manifest> read = parseManifest(text, "bundle/manifest.json");
  ASSERT_FALSE(read) << c.what << " was accepted";
  EXPECT_EQ(read.status().message().rfind("bundle/manifest.json: ", 0), 0u)
      << read.status().message();
  EXPECT_NE(read.status().message().find(c.error), std::string::npos)
      << c.what << ": " << read.status().message();
}

std::string bundleFormat(int delta) {
  return "\"format\": " + std::to_string(kBundleFormatVersion + delta);
}
const std::string kFormat = bundleFormat(0), kNextFormat = bundleFormat(1);
const std::string kNextFormatError =
    "bundle format " + std::to_string(kBundleFormatVersion + 1) +
    " is not supported by this runtime (it reads format " +
    std::to_string(kBundleFormatVersion) + ")";

INSTANTIATE_TEST_SUITE_P(
    Manifest, ManifestRejects,
    testing::Values(
        Malformed{"not JSON", "{", "[{", "JSON error at line"},
        Malformed{"no format", "\"format\"", "\"formats\"",
                  "missing \"format\""},
        Malformed{"newer format", kFormat.c_str(), kNextFormat.c_str(),
                  kNextFormatError.c_str()},
        Malformed{"string format", kFormat.c_str(), "\"format\": \"1\"",
                  "missing \"format\""},
        Malformed{"no entry", "\"entry\": \"step\"", "\"entry\": 3",
                  "missing \"entry\""},
        Malformed{"empty entry", "\"entry\": \"step\"", "\"entry\": \"\"",
                  "missing \"entry\""},
        Malformed{"params not an object", "\"params\": {",
                  "\"params\": [], \"x\": {", "\"params\" must map"},
        Malformed{"param not an integer", "\"CP\": 2", "\"CP\": \"2\"",
                  "parameter 'CP' in \"params\" is not an integer"},
        Malformed{"no buffers", "\"buffers\"", "\"buffer\"",
                  "missing \"buffers\""},
        Malformed{"buffer without name", "\"name\": \"tokens\"",
                  "\"nam\": \"tokens\"",
                  "buffer 0 needs a name, a type, a direction and an element "
                  "count"},
        Malformed{"buffer without type", "\"type\": \"i64\"",
                  "\"typ\": \"i64\"", "buffer 0 needs a name, a type"},
        Malformed{"buffer without direction", "\"direction\": \"input\"",
                  "\"dir\": \"input\"", "buffer 0 needs a name, a type, a "
                                        "direction"},
        Malformed{"buffer with float count", "\"elements\": 16",
                  "\"elements\": 16.5", "and an element count"},
        Malformed{"unknown type", "\"type\": \"i64\"", "\"type\": \"i7\"",
                  "buffer 'tokens' has the unknown type 'i7'"},
        Malformed{"zero elements", "\"elements\": 16", "\"elements\": 0",
                  "buffer 'tokens' has 0 elements"},
        Malformed{"too many elements", "\"elements\": 16",
                  "\"elements\": 1099511627777",
                  "buffer 'tokens' has 1099511627777 elements; a bundle's "
                  "buffers hold 1 to 2^40"},
        Malformed{"odd direction", "\"direction\": \"input\"",
                  "\"direction\": \"inout\"",
                  "buffer 'tokens' has the direction 'inout'"},
        Malformed{"no kernel", "\"kernel\"", "\"kernels\"",
                  "missing \"kernel\""},
        Malformed{"kernel without name", "\"name\": \"step\"",
                  "\"name\": 1", "\"kernel\" needs a \"name\""},
        Malformed{"kernel without ptx", "\"ptx\": \"step.ptx\"",
                  "\"ptx\": null", "\"kernel\" needs a \"ptx\" file"},
        Malformed{"ptx outside the bundle", "\"ptx\": \"step.ptx\"",
                  "\"ptx\": \"../step.ptx\"",
                  "the kernel file '../step.ptx' must be a file name inside "
                  "the bundle folder"},
        Malformed{"grid of two", "\"grid\": [\n      7,",
                  "\"grid\": [\n", "kernel \"grid\" must have 3 sizes"},
        Malformed{"zero grid", "\"grid\": [\n      7,",
                  "\"grid\": [\n      0,",
                  "kernel \"grid\" sizes must be 1 to 2147483647"},
        Malformed{"huge block", "256", "2048",
                  "kernel \"block\" sizes must be 1 to 1024"},
        Malformed{"block over 1024 threads", "\"block\": [\n      256,\n      1",
                  "\"block\": [\n      256,\n      8",
                  "a kernel block has at most 1024 threads"},
        Malformed{"host library outside", "\"library\": \"step.host.so\"",
                  "\"library\": \"/tmp/x.so\"",
                  "\"host\" needs a library file inside the bundle folder"},
        Malformed{"host without symbol", "\"symbol\": \"step_packed\"",
                  "\"symbol\": \"\"", "\"host\" needs a library file inside "
                                      "the bundle folder and a symbol"},
        Malformed{"hashes not an object", "\"sha256\": {",
                  "\"sha256\": [], \"y\": {",
                  "\"sha256\" must map file names to hashes"},
        Malformed{"short hash", "\"step.ptx\": \"aaaa", "\"step.ptx\": \"a",
                  "the hash of 'step.ptx' is not a SHA-256"}),
    malformedName);

TEST(Manifest, TooManyBuffersAreRejected) {
  Manifest m = fullManifest();
  m.buffers.assign(kMaxBuffers + 1, BufferDesc{"b", "i32", 1, false});
  Result<Manifest> read = parseManifest(renderManifest(m), "manifest.json");
  ASSERT_FALSE(read);
  EXPECT_EQ(read.status().message(), "manifest.json: more than 64 buffers");
}

TEST(Manifest, BufferBytes) {
  EXPECT_EQ((BufferDesc{"m", "i1", 10, true}).bytes(), 10u);
  EXPECT_EQ((BufferDesc{"t", "i64", 10, false}).bytes(), 80u);
  EXPECT_EQ((BufferDesc{"h", "i16", 3, false}).bytes(), 6u);
  EXPECT_EQ((BufferDesc{"u", "u32", 3, false}).bytes(), 0u);
}

} // namespace

//===----------------------------------------------------------------------===//
// The name table the code states (kNameTableSymbol)
//===----------------------------------------------------------------------===//

namespace {
std::vector<BufferDesc> namedBuffers(std::vector<std::string> names) {
  std::vector<BufferDesc> buffers;
  for (std::string &name : names) {
    BufferDesc buffer;
    buffer.name = std::move(name);
    buffer.type = "i32";
    buffer.elements = 4;
    buffers.push_back(buffer);
  }
  return buffers;
}
} // namespace

TEST(NameTable, ReadsBackWhatWasWritten) {
  std::map<std::string, int64_t> params = {
      {"C", 8}, {"N", -6}, {"a b", 1}, {"big", INT64_MAX}, {"small", INT64_MIN}};
  std::string text = encodeNameTable(
      "step", params, namedBuffers({"tokens", "with space", "back\\slash", "\n"}));
  EXPECT_EQ(text, "thdc-names 1\nentry step\nparam C 8\nparam N -6\n"
                  "param a\\20b 1\nparam big 9223372036854775807\n"
                  "param small -9223372036854775808\nbuffer tokens\n"
                  "buffer with\\20space\nbuffer back\\5cslash\nbuffer \\0a\n");
  Result<NameTable> table = decodeNameTable(text + '\0' + "ignored");
  ASSERT_TRUE(table) << table.status().message();
  EXPECT_EQ(table->entry, "step");
  EXPECT_EQ(table->params, params);
  EXPECT_EQ(table->buffers, (std::vector<std::string>{"tokens", "with space",
                                                      "back\\slash", "\n"}));
}

TEST(NameTable, MalformedTablesAreErrorsNeverReadsPastTheBytes) {
  std::string good = encodeNameTable("step", {{"N", 6}}, namedBuffers({"a"}));
  // Without its NUL the table does not end inside the symbol's bytes.
  EXPECT_FALSE(decodeNameTable(good));
  const char *bad[] = {
      "",                                        // no header
      "thdc-names 2\nentry step\n",               // another layout
      "thdc-names 1\n",                           // no entry
      "thdc-names 1\nentry step",                 // a line that does not end
      "thdc-names 1\nentry step\nentry two\n",    // two entries
      "thdc-names 1\nbuffer a\nentry step\n",     // a buffer before the entry
      "thdc-names 1\nentry step\nparam N\n",      // a parameter without value
      "thdc-names 1\nentry step\nparam N 6x\n",   // not a number
      "thdc-names 1\nentry step\nparam N 9223372036854775808\n", // past int64
      "thdc-names 1\nentry step\nparam N -9223372036854775809\n",
      "thdc-names 1\nentry step\nparam N -\n",
      "thdc-names 1\nentry step\nparam N 6\nparam N 7\n", // given twice
      "thdc-names 1\nentry step\nbuffer a\nparam N 6\n",  // params first
      "thdc-names 1\nentry step\nbuffer a\\4\n",    // a cut escape
      "thdc-names 1\nentry step\nbuffer a\\zz\n",   // not hex
      "thdc-names 1\nentry step\nbuffer \n",        // an empty name
      "thdc-names 1\nentry st\tep\n",              // a raw control byte
      "thdc-names 1\nentry step\nother x\n",       // an unknown line
  };
  for (const char *text : bad)
    EXPECT_FALSE(decodeNameTable(std::string(text) + '\0')) << text;
}

TEST(NameTable, AManifestThatDisagreesIsRefusedByName) {
  Manifest m;
  m.entry = m.kernelName = "step";
  m.params = {{"C", 8}, {"N", 6}};
  m.buffers = namedBuffers({"cu_seqlens", "cu_seqlens_padded"});
  m.buffers[1].isOutput = true;
  unsigned geometry[3] = {0, 0, 0};
  std::vector<int64_t> table = encodeBufferTable(m.buffers, geometry, geometry);
  auto mismatch = [&](const Manifest &manifest) {
    std::string names =
        encodeNameTable("step", {{"C", 8}, {"N", 6}},
                        namedBuffers({"cu_seqlens", "cu_seqlens_padded"})) +
        '\0';
    return checkBufferTable(manifest, table.data(), table.size(), names,
                            "host code", /*checkGeometry=*/false)
        .message();
  };
  EXPECT_EQ(mismatch(m), "");
  Manifest lying = m;
  lying.params["N"] = 100;
  EXPECT_EQ(mismatch(lying), "manifest.json: params.N is 100, but the host "
                             "code was compiled with N = 6");
  Manifest missing = m;
  missing.params.erase("C");
  EXPECT_EQ(mismatch(missing), "manifest.json gives no value for the parameter "
                               "'C', but the host code was compiled with C = 8");
  Manifest extra = m;
  extra.params["R"] = 16;
  EXPECT_EQ(mismatch(extra), "manifest.json: params.R = 16 is not a parameter "
                             "the host code was compiled with");
  Manifest swapped = m;
  std::swap(swapped.buffers[0].name, swapped.buffers[1].name);
  EXPECT_EQ(mismatch(swapped), "manifest.json: buffer 0 is named "
                               "'cu_seqlens_padded', but the host code's buffer "
                               "0 is 'cu_seqlens'");
  EXPECT_NE(checkBufferTable(m, table.data(), table.size(), "step", "host code",
                             false)
                .message()
                .find("name table does not end"),
            std::string::npos);
}

TEST(ManifestHash, TheHashAloneOrSha256sumsLine) {
  const std::string hex(64, 'a');
  for (const std::string &text :
       {hex, hex + "\n", hex + "\r\n", hex + "  manifest.json\n",
        hex + " *manifest.json\n", hex + "\tmanifest.json"}) {
    Result<std::string> hash = manifestHashOf(text, "manifest.json.sha256");
    ASSERT_TRUE(hash) << text << ": " << hash.status().message();
    EXPECT_EQ(*hash, hex);
  }
  for (const std::string &text :
       {std::string(""), std::string(63, 'a'), hex + "a", std::string(64, 'A'),
        std::string(64, 'g'), hex + "  other.json", hex + "  manifest.json extra",
        hex + "\n\n", " " + hex}) {
    Result<std::string> hash = manifestHashOf(text, "manifest.json.sha256");
    ASSERT_FALSE(hash) << text;
    EXPECT_EQ(hash.status().message(),
              "manifest.json.sha256 holds no SHA-256 of manifest.json (64 "
              "lowercase hex digits, alone or as sha256sum writes them: "
              "'<hash>  manifest.json')");
  }
}

TEST(JsonReader, AMemberGivenTwiceIsRefused) {
  // Two readers could take different ones: {"N": 6, "N": 100}.
  Result<json::Value> read = json::parse("{\"params\": {\"N\": 6, \"N\": 100}}");
  ASSERT_FALSE(read);
  EXPECT_NE(read.status().message().find("the member \"N\" is given twice"),
            std::string::npos)
      << read.status().message();
  EXPECT_TRUE(json::parse("{\"a\": {\"N\": 6}, \"b\": {\"N\": 6}}"));
}
