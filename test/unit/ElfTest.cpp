//===- ElfTest.cpp - a symbol's initial bytes out of a cubin --------------===//
//
// runtime/Elf.h on a cubin that ptxas assembles at test time from a small
// PTX holding the two symbols the runtime reads (the buffer table and the
// entry name, initialised as in the kernels thdc writes), then on that
// cubin damaged in each way the reader must catch.

#include "runtime/Elf.h"
#include "runtime/Manifest.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace thdc::runtime;

namespace {
constexpr int64_t kTable[] = {kBufferTableMagic, 1, 2, -3};
constexpr char kEntry[] = "step";

/// The PTX: two initialised globals (like codegen's) and one kernel.
std::string symbolsPtx() {
  std::ostringstream ptx;
  ptx << ".version 8.0\n.target sm_90\n.address_size 64\n\n"
      << ".visible .global .align 8 .b64 " << kBufferTableSymbol << "[4] = {";
  for (size_t i = 0; i < 4; ++i)
    ptx << (i ? ", " : "") << kTable[i];
  ptx << "};\n.visible .global .align 1 .b8 " << kNameTableSymbol << "[5] = {";
  for (size_t i = 0; i < sizeof(kEntry); ++i)
    ptx << (i ? ", " : "") << int(kEntry[i]);
  ptx << "};\n\n.visible .entry step(.param .u64 p)\n{\n  ret;\n}\n";
  return ptx.str();
}

/// The cubin ptxas makes of symbolsPtx() (empty without ptxas).
const std::string &cubin() {
  static const std::string *bytes = [] {
    auto *made = new std::string();
    std::string ptxas = THDC_TEST_PTXAS;
    if (ptxas.empty() || access(ptxas.c_str(), X_OK) != 0)
      return made;
    std::string base =
        ::testing::TempDir() + "thdc_elf_test_" + std::to_string(getpid());
    std::ofstream(base + ".ptx") << symbolsPtx();
    std::string command =
        ptxas + " -arch=sm_90 " + base + ".ptx -o " + base + ".cubin 2>&1";
    if (std::system(command.c_str()) == 0) {
      std::ifstream in(base + ".cubin", std::ios::binary);
      made->assign(std::istreambuf_iterator<char>(in), {});
    }
    std::remove((base + ".ptx").c_str());
    std::remove((base + ".cubin").c_str());
    return made;
  }();
  return *bytes;
}

#define REQUIRE_CUBIN()                                                        \
  if (cubin().empty())                                                         \
  GTEST_SKIP() << "no ptxas (looked for it next to the CUDA toolkit)"

template <typename T> T get(const std::string &image, uint64_t offset) {
  T value;
  std::memcpy(&value, image.data() + offset, sizeof(T));
  return value;
}
template <typename T> void put(std::string &image, uint64_t offset, T value) {
  std::memcpy(image.data() + offset, &value, sizeof(T));
}

/// Where the cubin's structures are, found independently of the reader.
struct Layout {
  Elf64_Ehdr header;
  uint64_t symtabHeader = 0; ///< offset of the symbol table's header
  uint64_t tableSymbol = 0;  ///< offset of the buffer table's Elf64_Sym
  uint64_t holderHeader = 0; ///< offset of its section's header
  /// The end of the last byte the reader needs: the section table, the
  /// symbol and string tables, the buffer table's section.
  uint64_t needed = 0;
};

Layout layoutOf(const std::string &image) {
  Layout layout;
  layout.header = get<Elf64_Ehdr>(image, 0);
  auto sectionAt = [&](uint64_t i) {
    return layout.header.e_shoff + i * sizeof(Elf64_Shdr);
  };
  for (uint64_t i = 0; i < layout.header.e_shnum; ++i)
    if (get<Elf64_Shdr>(image, sectionAt(i)).sh_type == SHT_SYMTAB)
      layout.symtabHeader = sectionAt(i);
  auto symtab = get<Elf64_Shdr>(image, layout.symtabHeader);
  auto strtab = get<Elf64_Shdr>(image, sectionAt(symtab.sh_link));
  auto extend = [&](uint64_t end) {
    layout.needed = std::max(layout.needed, end);
  };
  extend(sectionAt(layout.header.e_shnum));
  extend(symtab.sh_offset + symtab.sh_size);
  extend(strtab.sh_offset + strtab.sh_size);
  for (uint64_t at = symtab.sh_offset; at < symtab.sh_offset + symtab.sh_size;
       at += sizeof(Elf64_Sym)) {
    auto symbol = get<Elf64_Sym>(image, at);
    if (std::strcmp(image.data() + strtab.sh_offset + symbol.st_name,
                    kBufferTableSymbol) == 0) {
      layout.tableSymbol = at;
      layout.holderHeader = sectionAt(symbol.st_shndx);
      auto holder = get<Elf64_Shdr>(image, layout.holderHeader);
      extend(holder.sh_offset + holder.sh_size);
    }
  }
  return layout;
}

/// Expects `image` to be refused with a message containing `expected`.
void expectRefused(const std::string &image, const char *expected) {
  Result<std::optional<std::string>> read =
      readElfSymbolBytes(image, kBufferTableSymbol);
  ASSERT_FALSE(read.ok()) << "read " << (*read ? (*read)->size() : 0)
                          << " bytes from a damaged image";
  EXPECT_NE(read.status().message().find(expected), std::string::npos)
      << read.status().message();
  EXPECT_NE(read.status().message().find(kBufferTableSymbol), std::string::npos)
      << read.status().message();
}
} // namespace

TEST(Elf, ReadsTheInitialBytesOfBothSymbolsFromACubin) {
  REQUIRE_CUBIN();
  Result<std::optional<std::string>> table =
      readElfSymbolBytes(cubin(), kBufferTableSymbol);
  ASSERT_TRUE(table.ok()) << table.status().message();
  ASSERT_TRUE(table->has_value());
  ASSERT_EQ((*table)->size(), sizeof(kTable));
  EXPECT_EQ(std::memcmp((*table)->data(), kTable, sizeof(kTable)), 0);

  Result<std::optional<std::string>> entry =
      readElfSymbolBytes(cubin(), kNameTableSymbol);
  ASSERT_TRUE(entry.ok()) << entry.status().message();
  ASSERT_TRUE(entry->has_value());
  EXPECT_EQ(**entry, std::string(kEntry, sizeof(kEntry)));
}

TEST(Elf, AMissingSymbolIsNoneNotAnError) {
  REQUIRE_CUBIN();
  for (const char *name : {"thdc_buffer_tabl", "thdc_buffer_table_", "nope"}) {
    Result<std::optional<std::string>> read = readElfSymbolBytes(cubin(), name);
    ASSERT_TRUE(read.ok()) << read.status().message();
    EXPECT_FALSE(read->has_value()) << name;
  }
}

TEST(Elf, EveryTruncationOfWhatItReadsIsRefused) {
  REQUIRE_CUBIN();
  const Layout layout = layoutOf(cubin());
  ASSERT_GT(layout.needed, 0u);
  ASSERT_LE(layout.needed, cubin().size());
  for (size_t size = 0; size <= cubin().size(); ++size) {
    // A copy of exactly `size` bytes, so that a read past it is past the
    // allocation (caught by sanitizers, not hidden by the whole cubin).
    std::string prefix = cubin().substr(0, size);
    Result<std::optional<std::string>> read =
        readElfSymbolBytes(prefix, kBufferTableSymbol);
    if (size < layout.needed) {
      ASSERT_FALSE(read.ok()) << "a prefix of " << size << " of "
                              << cubin().size() << " bytes was read";
      continue;
    }
    // What follows (program headers) is not needed to read the symbol.
    ASSERT_TRUE(read.ok() && read->has_value())
        << size << ": " << read.status().message();
    EXPECT_EQ(**read, std::string(reinterpret_cast<const char *>(kTable),
                                  sizeof(kTable)));
  }
}

TEST(Elf, GarbageIsRefused) {
  std::mt19937 random(7);
  for (size_t size : {0, 1, 63, 64, 65, 4096}) {
    std::string bytes(size, '\0');
    for (char &byte : bytes)
      byte = char(random());
    Result<std::optional<std::string>> read =
        readElfSymbolBytes(bytes, kBufferTableSymbol);
    ASSERT_FALSE(read.ok()) << size << " random bytes were read";
    EXPECT_NE(read.status().message().find("not an ELF file"),
              std::string::npos)
        << read.status().message();
  }
  // ELF's magic, then garbage: a 64-bit little-endian header of nonsense.
  std::string bytes(4096, '\0');
  for (int round = 0; round < 200; ++round) {
    for (char &byte : bytes)
      byte = char(random());
    std::memcpy(bytes.data(), ELFMAG, SELFMAG);
    bytes[EI_CLASS] = ELFCLASS64;
    bytes[EI_DATA] = ELFDATA2LSB;
    Result<std::optional<std::string>> read =
        readElfSymbolBytes(bytes, kBufferTableSymbol);
    ASSERT_FALSE(read.ok() && read->has_value())
        << "round " << round << ": a symbol was read from garbage";
  }
}

TEST(Elf, AnotherElfClassIsRefused) {
  REQUIRE_CUBIN();
  std::string image = cubin();
  image[EI_CLASS] = ELFCLASS32;
  expectRefused(image, "not a little-endian 64-bit ELF file");
}

TEST(Elf, OffsetsPastTheEndAreRefused) {
  REQUIRE_CUBIN();
  const Layout layout = layoutOf(cubin());
  ASSERT_NE(layout.tableSymbol, 0u);
  const uint64_t huge = ~uint64_t(0) - 8;
  // The cubin with `value` written at `offset`, refused with `message`.
  auto refusedWith = [](auto value, uint64_t offset, const char *message) {
    std::string image = cubin();
    put<decltype(value)>(image, offset, value);
    expectRefused(image, message);
  };
  refusedWith(uint64_t(cubin().size() - 64), offsetof(Elf64_Ehdr, e_shoff),
              "section table");
  refusedWith(uint16_t(0xffff), offsetof(Elf64_Ehdr, e_shnum),
              "section table");
  refusedWith(huge, layout.symtabHeader + offsetof(Elf64_Shdr, sh_size),
              "symbol table");
  refusedWith(uint32_t(layout.header.e_shnum),
              layout.symtabHeader + offsetof(Elf64_Shdr, sh_link),
              "string table");
  refusedWith(huge, layout.holderHeader + offsetof(Elf64_Shdr, sh_offset),
              "lies past its end");
  refusedWith(huge, layout.tableSymbol + offsetof(Elf64_Sym, st_value),
              "outside its section");
  // An offset + size that overflows 64 bits.
  refusedWith(huge, layout.tableSymbol + offsetof(Elf64_Sym, st_size),
              "outside its section");
  refusedWith(uint16_t(layout.header.e_shnum),
              layout.tableSymbol + offsetof(Elf64_Sym, st_shndx),
              "not defined in a section");
}

TEST(Elf, ASymbolWithoutInitialBytesIsRefused) {
  REQUIRE_CUBIN();
  const Layout layout = layoutOf(cubin());
  ASSERT_NE(layout.holderHeader, 0u);
  std::string image = cubin();
  put<uint32_t>(image, layout.holderHeader + offsetof(Elf64_Shdr, sh_type),
                SHT_NOBITS);
  expectRefused(image, "no initial contents");
  image = cubin();
  put<uint16_t>(image, layout.tableSymbol + offsetof(Elf64_Sym, st_shndx),
                SHN_UNDEF);
  expectRefused(image, "not defined in a section");
}
