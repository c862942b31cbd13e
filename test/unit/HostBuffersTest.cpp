//===- HostBuffersTest.cpp - host buffers and their JSON form -------------===//

#include "tools/thd-run/HostBuffers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

using namespace thdc::runtime;

namespace {

/// The error readInputs reports for `json`; fails the test if it succeeds.
std::string readError(llvm::StringRef json, llvm::ArrayRef<BufferDesc> specs) {
  Result<std::vector<HostBuffer>> buffers = readInputs(json, specs);
  if (buffers) {
    ADD_FAILURE() << "expected an error reading " << json.str();
    return "";
  }
  return buffers.status().message();
}

/// The buffers readInputs returns for `json`; fails the test on an error.
std::vector<HostBuffer> readOk(llvm::StringRef json,
                               llvm::ArrayRef<BufferDesc> specs) {
  Result<std::vector<HostBuffer>> buffers = readInputs(json, specs);
  if (!buffers) {
    ADD_FAILURE() << "reading " << json.str() << ": "
                  << buffers.status().message();
    return {};
  }
  return std::move(*buffers);
}

/// The elements of `buffer` as T.
template <typename T> std::vector<T> elementsOf(const HostBuffer &buffer) {
  const T *begin = buffer.as<T>();
  return std::vector<T>(begin, begin + buffer.desc().elements);
}

/// Reads a single input `x` of `type` holding the one element `element`.
std::string readOneError(ElementType type, llvm::StringRef element) {
  return readError("{\"x\": [" + element.str() + "]}",
                   {{"x", toString(type).str(), 1}});
}

bool sameBytes(const HostBuffer &a, const HostBuffer &b) {
  return a.desc().name == b.desc().name && a.desc().type == b.desc().type &&
         a.desc().elements == b.desc().elements && a.bytes() == b.bytes() &&
         std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

const BufferDesc kTokens{"tokens", "i64", 16};

} // namespace

//===----------------------------------------------------------------------===//
// Element types and buffers
//===----------------------------------------------------------------------===//

TEST(HostBuffers, ElementTypeNamesRoundTrip) {
  const std::pair<ElementType, const char *> expected[] = {
      {ElementType::I1, "i1"},   {ElementType::I8, "i8"},
      {ElementType::I32, "i32"}, {ElementType::I64, "i64"},
      {ElementType::F32, "f32"}, {ElementType::F64, "f64"}};
  for (auto [type, name] : expected) {
    EXPECT_EQ(toString(type), name);
    EXPECT_EQ(parseElementType(name), type) << name;
  }
  EXPECT_EQ(parseElementType("i16"), std::nullopt);
  EXPECT_EQ(parseElementType("I32"), std::nullopt);
  EXPECT_EQ(parseElementType("bf16"), std::nullopt);
  EXPECT_EQ(parseElementType(""), std::nullopt);
}

TEST(HostBuffers, ByteWidths) {
  EXPECT_EQ(byteWidth(ElementType::I1), 1u);
  EXPECT_EQ(byteWidth(ElementType::I8), 1u);
  EXPECT_EQ(byteWidth(ElementType::I32), 4u);
  EXPECT_EQ(byteWidth(ElementType::I64), 8u);
  EXPECT_EQ(byteWidth(ElementType::F32), 4u);
  EXPECT_EQ(byteWidth(ElementType::F64), 8u);
}

TEST(HostBuffers, StorageIsAlignedAndZeroed) {
  for (int64_t elements : {0, 1, 3, 17, 1000}) {
    HostBuffer buffer({"cu_seqlens", "i32", elements});
    EXPECT_EQ(buffer.bytes(), static_cast<size_t>(elements) * 4);
    ASSERT_NE(buffer.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % 64, 0u);
    const int32_t *values = buffer.as<int32_t>();
    for (int64_t i = 0; i < elements; ++i)
      EXPECT_EQ(values[i], 0) << "element " << i;
  }
}

TEST(HostBuffers, MovingKeepsTheStorage) {
  HostBuffer buffer({"loss_mask", "f64", 4});
  buffer.as<double>()[2] = 0.5;
  const void *storage = buffer.data();
  HostBuffer moved = std::move(buffer);
  EXPECT_EQ(moved.data(), storage);
  EXPECT_EQ(moved.desc().name, "loss_mask");
  EXPECT_EQ(moved.bytes(), 32u);
  EXPECT_EQ(moved.as<double>()[2], 0.5);
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST(HostBuffers, ReadsAndWritesEveryElementType) {
  const BufferDesc specs[] = {
      {"padding_mask", "i1", 4}, {"bytes", "i8", 3},
      {"cu_seqlens", "i32", 3},  {"tokens", "i64", 3},
      {"loss_mask", "f32", 3},   {"scale", "f64", 3}};
  std::vector<HostBuffer> buffers =
      readOk(R"({"padding_mask": [0, 1, true, false],
                 "bytes": [-128, 0, 127],
                 "cu_seqlens": [0, -2147483648, 2147483647],
                 "tokens": [11, -12, 4000000000],
                 "loss_mask": [1.0, 0.5, -3],
                 "scale": [0.1, -2.5e-300, 7]})",
             specs);
  ASSERT_EQ(buffers.size(), 6u);
  EXPECT_EQ(elementsOf<uint8_t>(buffers[0]),
            (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(elementsOf<int8_t>(buffers[1]),
            (std::vector<int8_t>{-128, 0, 127}));
  EXPECT_EQ(elementsOf<int32_t>(buffers[2]),
            (std::vector<int32_t>{0, std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(elementsOf<int64_t>(buffers[3]),
            (std::vector<int64_t>{11, -12, 4000000000}));
  EXPECT_EQ(elementsOf<float>(buffers[4]),
            (std::vector<float>{1.0f, 0.5f, -3.0f}));
  EXPECT_EQ(elementsOf<double>(buffers[5]),
            (std::vector<double>{0.1, -2.5e-300, 7.0}));

  std::string written = writeOutputs(buffers);
  EXPECT_EQ(written, "{\"padding_mask\":[0,1,1,0],\"bytes\":[-128,0,127],"
                     "\"cu_seqlens\":[0,-2147483648,2147483647],"
                     "\"tokens\":[11,-12,4000000000],"
                     "\"loss_mask\":[1.0,0.5,-3.0],"
                     "\"scale\":[0.1,-2.5e-300,7.0]}");
  std::vector<HostBuffer> reread = readOk(written, specs);
  ASSERT_EQ(reread.size(), buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i)
    EXPECT_TRUE(sameBytes(reread[i], buffers[i])) << specs[i].name;
}

TEST(HostBuffers, PrettyOutputPutsOneArgumentPerLine) {
  const BufferDesc specs[] = {{"num_seqs", "i32", 1},
                              {"loss_mask", "f32", 2},
                              {"empty", "i64", 0}};
  std::vector<HostBuffer> buffers = readOk(
      R"({"num_seqs": [3], "loss_mask": [1, 0.25], "empty": []})", specs);
  EXPECT_EQ(writeOutputs(buffers, /*pretty=*/true),
            "{\n"
            "  \"num_seqs\": [3],\n"
            "  \"loss_mask\": [1.0, 0.25],\n"
            "  \"empty\": []\n"
            "}");
  EXPECT_EQ(writeOutputs({}, /*pretty=*/true), "{}");
  EXPECT_EQ(writeOutputs({}), "{}");
}

TEST(HostBuffers, KeyOrderDoesNotMatter) {
  const BufferDesc specs[] = {{"tokens", "i64", 2},
                              {"labels", "i64", 2},
                              {"loss_mask", "f32", 2}};
  std::vector<HostBuffer> inSpecOrder = readOk(
      R"({"tokens": [1, 2], "labels": [3, 4], "loss_mask": [0.5, 1]})", specs);
  std::vector<HostBuffer> reversed = readOk(
      R"({"loss_mask": [0.5, 1], "labels": [3, 4], "tokens": [1, 2]})", specs);
  ASSERT_EQ(inSpecOrder.size(), 3u);
  ASSERT_EQ(reversed.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(reversed[i].desc().name, specs[i].name);
    EXPECT_TRUE(sameBytes(reversed[i], inSpecOrder[i])) << specs[i].name;
  }
  EXPECT_EQ(elementsOf<int64_t>(reversed[1]), (std::vector<int64_t>{3, 4}));
  // Outputs follow buffer order, not the order of any input.
  EXPECT_EQ(writeOutputs(reversed),
            R"({"tokens":[1,2],"labels":[3,4],"loss_mask":[0.5,1.0]})");
}

TEST(HostBuffers, ZeroElementInputsAreEmptyArrays) {
  const BufferDesc specs[] = {{"dummy", "f32", 0},
                              {"num_seqs", "i32", 1}};
  std::vector<HostBuffer> buffers =
      readOk(R"({"dummy": [], "num_seqs": [5]})", specs);
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[0].bytes(), 0u);
  EXPECT_EQ(buffers[1].as<int32_t>()[0], 5);
  EXPECT_EQ(writeOutputs(buffers), R"({"dummy":[],"num_seqs":[5]})");
  EXPECT_EQ(readError(R"({"dummy": [0], "num_seqs": [5]})", specs),
            "input 'dummy' has 1 value; expected 0");
}

TEST(HostBuffers, NoInputsReadsEmptyObject) {
  Result<std::vector<HostBuffer>> buffers = readInputs("{}", {});
  ASSERT_TRUE(static_cast<bool>(buffers)) << buffers.status().message();
  EXPECT_TRUE(buffers->empty());
  EXPECT_EQ(readError(R"({"tokens": []})", {}),
            "unknown input 'tokens'; the pipeline takes: no inputs");
}

TEST(HostBuffers, BooleansAcceptLiteralsAndWriteZeroOrOne) {
  const BufferDesc mask{"padding_mask", "i1", 6};
  std::vector<HostBuffer> buffers =
      readOk(R"({"padding_mask": [true, false, 1, 0, 1.0, 0e5]})", {mask});
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(elementsOf<uint8_t>(buffers[0]),
            (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));
  // Any non-zero byte a pipeline leaves in an i1 buffer reads as true.
  buffers[0].as<uint8_t>()[1] = 0xff;
  EXPECT_EQ(writeOutputs(buffers), R"({"padding_mask":[1,1,1,0,1,0]})");
}

TEST(HostBuffers, NegativeNumbers) {
  const BufferDesc specs[] = {{"shift", "i8", 2},
                              {"offsets", "i32", 2},
                              {"positions", "i64", 2},
                              {"bias", "f32", 2},
                              {"logits", "f64", 2}};
  std::vector<HostBuffer> buffers =
      readOk(R"({"shift": [-1, -100], "offsets": [-7, -65536],
                 "positions": [-1, -5000000000], "bias": [-0.75, -2],
                 "logits": [-1e-3, -0.0]})",
             specs);
  ASSERT_EQ(buffers.size(), 5u);
  EXPECT_EQ(elementsOf<int8_t>(buffers[0]), (std::vector<int8_t>{-1, -100}));
  EXPECT_EQ(elementsOf<int32_t>(buffers[1]),
            (std::vector<int32_t>{-7, -65536}));
  EXPECT_EQ(elementsOf<int64_t>(buffers[2]),
            (std::vector<int64_t>{-1, -5000000000}));
  EXPECT_EQ(elementsOf<float>(buffers[3]), (std::vector<float>{-0.75f, -2}));
  EXPECT_EQ(buffers[4].as<double>()[0], -1e-3);
  EXPECT_TRUE(std::signbit(buffers[4].as<double>()[1]));
  EXPECT_EQ(writeOutputs(buffers),
            R"({"shift":[-1,-100],"offsets":[-7,-65536],)"
            R"("positions":[-1,-5000000000],"bias":[-0.75,-2.0],)"
            R"("logits":[-0.001,-0.0]})");
}

TEST(HostBuffers, Int64ExtremesAreExact) {
  const BufferDesc spec{"ids", "i64", 4};
  std::vector<HostBuffer> buffers =
      readOk(R"({"ids": [-9223372036854775808, 9223372036854775807,
                         -9223372036854775807, 9223372036854775806]})",
             {spec});
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(elementsOf<int64_t>(buffers[0]),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min() + 1,
                                  std::numeric_limits<int64_t>::max() - 1}));
  std::string written = writeOutputs(buffers);
  EXPECT_EQ(written, R"({"ids":[-9223372036854775808,9223372036854775807,)"
                     R"(-9223372036854775807,9223372036854775806]})");
  std::vector<HostBuffer> reread = readOk(written, {spec});
  ASSERT_EQ(reread.size(), 1u);
  EXPECT_TRUE(sameBytes(reread[0], buffers[0]));
}

TEST(HostBuffers, IntegralNumbersWithFractionOrExponentAreIntegers) {
  const BufferDesc spec{"cu_seqlens", "i32", 4};
  std::vector<HostBuffer> buffers =
      readOk(R"({"cu_seqlens": [2.0, 1e3, -4.0, 2147483647.0]})", {spec});
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(elementsOf<int32_t>(buffers[0]),
            (std::vector<int32_t>{2, 1000, -4, 2147483647}));
}

TEST(HostBuffers, FloatsRoundTripBitForBit) {
  const std::vector<float> floats = {
      0.1f, 1.0f / 3.0f, -0.0f, 16777217.0f, std::numeric_limits<float>::min(),
      std::numeric_limits<float>::denorm_min(),
      std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
      std::numeric_limits<float>::epsilon(),
      // Its shortest form, 7.038531e-26, read
      // as a double rounds to the next float.
      0x1.5c87fap-84f};
  const std::vector<double> doubles = {
      0.1,
      1.0 / 3.0,
      -0.0,
      9007199254740993.0,
      std::numeric_limits<double>::min(),
      std::numeric_limits<double>::denorm_min(),
      std::numeric_limits<double>::max(),
      -std::numeric_limits<double>::max(),
      std::numeric_limits<double>::epsilon()};
  const BufferDesc specs[] = {
      {"f32", "f32", static_cast<int64_t>(floats.size())},
      {"f64", "f64", static_cast<int64_t>(doubles.size())}};
  std::vector<HostBuffer> buffers;
  buffers.emplace_back(specs[0]);
  buffers.emplace_back(specs[1]);
  std::memcpy(buffers[0].data(), floats.data(), buffers[0].bytes());
  std::memcpy(buffers[1].data(), doubles.data(), buffers[1].bytes());
  std::string written = writeOutputs(buffers);
  EXPECT_EQ(written,
            "{\"f32\":[0.1,0.33333334,-0.0,16777216.0,1.1754944e-38,1e-45,"
            "3.4028235e+38,-3.4028235e+38,1.1920929e-07,"
            "7.038530691851209e-26],"
            "\"f64\":[0.1,0.3333333333333333,-0.0,9007199254740992.0,"
            "2.2250738585072014e-308,5e-324,1.7976931348623157e+308,"
            "-1.7976931348623157e+308,2.220446049250313e-16]}");
  std::vector<HostBuffer> reread = readOk(written, specs);
  ASSERT_EQ(reread.size(), 2u);
  EXPECT_TRUE(sameBytes(reread[0], buffers[0]));
  EXPECT_TRUE(sameBytes(reread[1], buffers[1]));
}

TEST(HostBuffers, RandomFloatsRoundTripBitForBit) {
  constexpr int64_t kCount = 20000;
  const BufferDesc specs[] = {{"f32", "f32", kCount},
                              {"f64", "f64", kCount}};
  std::vector<HostBuffer> buffers;
  buffers.emplace_back(specs[0]);
  buffers.emplace_back(specs[1]);
  std::mt19937_64 random(4359);
  for (int64_t i = 0; i < kCount; ++i) {
    // Random bit patterns cover every exponent; NaNs are tested separately.
    float f;
    double d;
    do {
      uint32_t bits = static_cast<uint32_t>(random());
      std::memcpy(&f, &bits, sizeof(f));
    } while (std::isnan(f));
    do {
      uint64_t bits = random();
      std::memcpy(&d, &bits, sizeof(d));
    } while (std::isnan(d));
    buffers[0].as<float>()[i] = f;
    buffers[1].as<double>()[i] = d;
  }
  std::vector<HostBuffer> reread = readOk(writeOutputs(buffers), specs);
  ASSERT_EQ(reread.size(), 2u);
  EXPECT_TRUE(sameBytes(reread[0], buffers[0]));
  EXPECT_TRUE(sameBytes(reread[1], buffers[1]));
}

TEST(HostBuffers, NonFiniteFloatsAreWrittenAsStrings) {
  const BufferDesc specs[] = {{"f32", "f32", 3},
                              {"f64", "f64", 3}};
  std::vector<HostBuffer> buffers;
  buffers.emplace_back(specs[0]);
  buffers.emplace_back(specs[1]);
  float *floats = buffers[0].as<float>();
  floats[0] = std::numeric_limits<float>::quiet_NaN();
  floats[1] = std::numeric_limits<float>::infinity();
  floats[2] = -std::numeric_limits<float>::infinity();
  double *doubles = buffers[1].as<double>();
  doubles[0] = -std::numeric_limits<double>::quiet_NaN();
  doubles[1] = std::numeric_limits<double>::infinity();
  doubles[2] = -std::numeric_limits<double>::infinity();
  std::string written = writeOutputs(buffers);
  EXPECT_EQ(written, R"({"f32":["NaN","Infinity","-Infinity"],)"
                     R"("f64":["NaN","Infinity","-Infinity"]})");
  std::vector<HostBuffer> reread = readOk(written, specs);
  ASSERT_EQ(reread.size(), 2u);
  EXPECT_TRUE(std::isnan(reread[0].as<float>()[0]));
  EXPECT_EQ(reread[0].as<float>()[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(reread[0].as<float>()[2], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(reread[1].as<double>()[0]));
  EXPECT_EQ(reread[1].as<double>()[1], std::numeric_limits<double>::infinity());
  EXPECT_EQ(reread[1].as<double>()[2],
            -std::numeric_limits<double>::infinity());
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(HostBuffersErrors, InvalidJson) {
  EXPECT_EQ(readError("{\"tokens\": [1, 2,]}", {kTokens}),
            "invalid JSON input: [1:18, byte=18]: Invalid JSON value");
  EXPECT_EQ(readError("{\n  \"tokens\": [1, 2\n}", {kTokens}),
            "invalid JSON input: [3:1, byte=21]: Expected , or ] after array "
            "element");
  EXPECT_EQ(readError("", {kTokens}),
            "invalid JSON input: [1:0, byte=0]: Unexpected EOF");
}

TEST(HostBuffersErrors, TopLevelMustBeAnObject) {
  const std::string expected =
      "JSON input must be an object mapping argument names to arrays";
  EXPECT_EQ(readError("[1, 2, 3]", {kTokens}), expected);
  EXPECT_EQ(readError("null", {kTokens}), expected);
  EXPECT_EQ(readError("\"tokens\"", {}), expected);
}

TEST(HostBuffersErrors, MissingInput) {
  const BufferDesc specs[] = {kTokens, {"num_seqs", "i32", 1}};
  EXPECT_EQ(readError(R"({"num_seqs": [1]})", specs),
            "missing input 'tokens' (expected 16 values of type i64)");
  EXPECT_EQ(
      readError(R"({"tokens": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]})", specs),
      "missing input 'num_seqs' (expected 1 value of type i32)");
}

TEST(HostBuffersErrors, AnInputGivenTwiceIsRefused) {
  // llvm::json keeps one of the two silently.
  const BufferDesc specs[] = {{"num_seqs", "i32", 1}};
  EXPECT_EQ(readError(R"({"num_seqs": [1], "num_seqs" : [2]})", specs),
            "the input 'num_seqs' is given twice; give each argument once");
  // Spelt with an escape, it is the same name.
  EXPECT_EQ(readError(R"({"num_seqs": [1], "num_seq\u0073": [2]})", specs),
            "the input 'num_seqs' is given twice; give each argument once");
  // The same name in a string value or in a nested object is no repeat.
  EXPECT_EQ(readError(R"({"num_seqs": [1], "x": {"num_seqs": 1}})", specs),
            "unknown input 'x'; the pipeline takes: num_seqs");
}

TEST(HostBuffersErrors, UnknownInputListsTheSignatureInOrder) {
  const BufferDesc specs[] = {kTokens,
                              {"labels", "i64", 16},
                              {"loss_mask", "f32", 16},
                              {"padding_mask", "i1", 16}};
  EXPECT_EQ(readError(R"({"tokenz": [1]})", specs),
            "unknown input 'tokenz'; the pipeline takes: tokens, labels, "
            "loss_mask, padding_mask");
  // Several unknown keys: the smallest is reported, whatever the text order.
  EXPECT_EQ(readError(R"({"zeta": 1, "beta": 2, "gamma": 3})", specs),
            "unknown input 'beta'; the pipeline takes: tokens, labels, "
            "loss_mask, padding_mask");
  EXPECT_EQ(readError(R"({"gamma": 3, "zeta": 1, "beta": 2})", specs),
            "unknown input 'beta'; the pipeline takes: tokens, labels, "
            "loss_mask, padding_mask");
}

TEST(HostBuffersErrors, InputMustBeAnArray) {
  EXPECT_EQ(readError(R"({"tokens": 7})", {kTokens}),
            "input 'tokens' must be an array of 16 i64 values");
  EXPECT_EQ(readError(R"({"tokens": {"values": []}})", {kTokens}),
            "input 'tokens' must be an array of 16 i64 values");
  EXPECT_EQ(
      readError(R"({"num_seqs": "3"})", {{"num_seqs", "i32", 1}}),
      "input 'num_seqs' must be an array of 1 i32 value");
}

TEST(HostBuffersErrors, WrongLength) {
  EXPECT_EQ(
      readError(R"({"tokens": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]})", {kTokens}),
      "input 'tokens' has 15 values; expected 16");
  EXPECT_EQ(readError(R"({"tokens": []})", {kTokens}),
            "input 'tokens' has 0 values; expected 16");
  EXPECT_EQ(
      readError(R"({"num_seqs": [1, 2]})", {{"num_seqs", "i32", 1}}),
      "input 'num_seqs' has 2 values; expected 1");
}

TEST(HostBuffersErrors, WrongIntegerElements) {
  EXPECT_EQ(readError(R"({"tokens": [0,1,2,1.5,0,0,0,0,0,0,0,0,0,0,0,0]})",
                      {kTokens}),
            "input 'tokens'[3] is 1.5; expected an integer");
  EXPECT_EQ(readOneError(ElementType::I64, "-0.25"),
            "input 'x'[0] is -0.25; expected an integer");
  EXPECT_EQ(readOneError(ElementType::I32, "\"x\""),
            "input 'x'[0] is \"x\"; expected an integer");
  EXPECT_EQ(readOneError(ElementType::I8, "true"),
            "input 'x'[0] is true; expected an integer");
  EXPECT_EQ(readOneError(ElementType::I64, "null"),
            "input 'x'[0] is null; expected an integer");
  EXPECT_EQ(readOneError(ElementType::I64, "[1]"),
            "input 'x'[0] is an array; expected an integer");
  EXPECT_EQ(readOneError(ElementType::I64, "{}"),
            "input 'x'[0] is an object; expected an integer");
}

TEST(HostBuffersErrors, WrongFloatElements) {
  EXPECT_EQ(readOneError(ElementType::F32, "\"x\""),
            "input 'x'[0] is \"x\"; expected a number");
  EXPECT_EQ(readOneError(ElementType::F64, "false"),
            "input 'x'[0] is false; expected a number");
  EXPECT_EQ(readOneError(ElementType::F64, "\"nan\""),
            "input 'x'[0] is \"nan\"; expected a number");
  EXPECT_EQ(readOneError(ElementType::F32, "[0.5]"),
            "input 'x'[0] is an array; expected a number");
  EXPECT_EQ(readOneError(ElementType::F32,
                         "\"a string far too long to be quoted in full\""),
            "input 'x'[0] is \"a string far too long to be quoted i...; "
            "expected a number");
}

TEST(HostBuffersErrors, WrongBooleanElements) {
  const std::string suffix = "; expected 0, 1, true or false";
  EXPECT_EQ(readOneError(ElementType::I1, "2"), "input 'x'[0] is 2" + suffix);
  EXPECT_EQ(readOneError(ElementType::I1, "-1"), "input 'x'[0] is -1" + suffix);
  EXPECT_EQ(readOneError(ElementType::I1, "0.5"),
            "input 'x'[0] is 0.5" + suffix);
  EXPECT_EQ(readOneError(ElementType::I1, "\"true\""),
            "input 'x'[0] is \"true\"" + suffix);
  EXPECT_EQ(readOneError(ElementType::I1, "null"),
            "input 'x'[0] is null" + suffix);
}

TEST(HostBuffersErrors, IntegersOutOfRange) {
  EXPECT_EQ(readError(R"({"cu_seqlens": [0, 5, 3000000000]})",
                      {{"cu_seqlens", "i32", 3}}),
            "input 'cu_seqlens'[2] = 3000000000 does not fit i32");
  EXPECT_EQ(readOneError(ElementType::I32, "-2147483649"),
            "input 'x'[0] = -2147483649 does not fit i32");
  EXPECT_EQ(readOneError(ElementType::I32, "3e9"),
            "input 'x'[0] = 3e+09 does not fit i32");
  EXPECT_EQ(readOneError(ElementType::I8, "128"),
            "input 'x'[0] = 128 does not fit i8");
  EXPECT_EQ(readOneError(ElementType::I8, "-129"),
            "input 'x'[0] = -129 does not fit i8");
  EXPECT_EQ(readOneError(ElementType::I64, "9223372036854775808"),
            "input 'x'[0] = 9223372036854775808 does not fit i64");
  EXPECT_EQ(readOneError(ElementType::I64, "18446744073709551615"),
            "input 'x'[0] = 18446744073709551615 does not fit i64");
  // 2^63 written as a double: the guard against getAsInteger's off-by-one.
  EXPECT_EQ(readOneError(ElementType::I64, "9.223372036854775808e18"),
            "input 'x'[0] = 9223372036854775808 does not fit i64");
  EXPECT_EQ(readOneError(ElementType::I64, "-1e19"),
            "input 'x'[0] = -1e+19 does not fit i64");
  EXPECT_EQ(readOneError(ElementType::I32, "1e400"),
            "input 'x'[0] is a number beyond the double range; it does not "
            "fit i32");
}

TEST(HostBuffersErrors, FloatsOutOfRange) {
  EXPECT_EQ(readOneError(ElementType::F32, "1e39"),
            "input 'x'[0] = 1e+39 does not fit f32");
  EXPECT_EQ(readOneError(ElementType::F32, "-3.5e38"),
            "input 'x'[0] = -3.5e+38 does not fit f32");
  // The midpoint between FLT_MAX and 2^128 rounds to infinity; just below it
  // rounds to FLT_MAX.
  EXPECT_EQ(readOneError(ElementType::F32, "3.4028235677973366e38"),
            "input 'x'[0] = 3.4028235677973366e+38 does not fit f32");
  std::vector<HostBuffer> largest =
      readOk(R"({"x": [3.4028235677973362e38, -3.4028235e38]})",
             {{"x", "f32", 2}});
  ASSERT_EQ(largest.size(), 1u);
  EXPECT_EQ(largest[0].as<float>()[0], std::numeric_limits<float>::max());
  EXPECT_EQ(largest[0].as<float>()[1], -std::numeric_limits<float>::max());
  EXPECT_EQ(readOneError(ElementType::F64, "-1e400"),
            "input 'x'[0] is a number beyond the double range; it does not "
            "fit f64");
}

TEST(HostBuffersErrors, DuplicateArgumentNames) {
  EXPECT_EQ(readError(R"({"tokens": []})", {{"tokens", "i64", 0},
                                            {"tokens", "i32", 0}}),
            "the pipeline declares argument 'tokens' twice");
}

TEST(HostBuffersErrors, ElementTypeThdRunCannotExchange) {
  EXPECT_EQ(readError(R"({"half": [1]})", {{"half", "i16", 1}}),
            "argument 'half' has the element type 'i16', which thd-run "
            "cannot exchange");
}

TEST(HostBuffersErrors, FirstErrorInSpecOrderAfterUnknownKeys) {
  const BufferDesc specs[] = {{"tokens", "i64", 2},
                              {"labels", "i64", 2},
                              {"loss_mask", "f32", 2}};
  // Unknown keys are reported before anything else.
  EXPECT_EQ(readError(R"({"loss_mask": [1], "tokens": ["a", 1], "lables": []})",
                      specs),
            "unknown input 'lables'; the pipeline takes: tokens, labels, "
            "loss_mask");
  // Then the first spec with a problem, whatever the key order in the text.
  EXPECT_EQ(
      readError(R"({"loss_mask": [1], "tokens": [1, 2], "labels": [1, 2.5]})",
                specs),
      "input 'labels'[1] is 2.5; expected an integer");
  EXPECT_EQ(readError(R"({"loss_mask": [1], "tokens": [1, 2]})", specs),
            "missing input 'labels' (expected 2 values of type i64)");
  // Within an array, the first bad element.
  EXPECT_EQ(readError(R"({"tokens": [1.5, "b"], "labels": [1, 2],
                          "loss_mask": [1, 2]})",
                      specs),
            "input 'tokens'[0] is 1.5; expected an integer");
}
