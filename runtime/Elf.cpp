//===- Elf.cpp - read an initialised symbol out of an ELF64 image ---------===//

#include "runtime/Elf.h"

#include <fmt/format.h>

#include <cstring>
#include <elf.h>

using namespace thdc::runtime;

namespace {
/// Whether [offset, offset + size) lies within [0, total), without
/// overflowing.
bool within(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

/// Copies a header out of the image (which need not be aligned); the caller
/// has checked that it lies within.
template <typename T> T copyOut(std::string_view image, uint64_t offset) {
  T value;
  std::memcpy(&value, image.data() + offset, sizeof(T));
  return value;
}
} // namespace

Result<std::optional<std::string>>
thdc::runtime::readElfSymbolBytes(std::string_view image,
                                  std::string_view name) {
  auto bad = [&](const std::string &why) {
    return Status::error(
        fmt::format("cannot read '{}' from the ELF image ({} bytes): {}", name,
                    image.size(), why));
  };
  static_assert(sizeof(Elf64_Ehdr) == 64 && sizeof(Elf64_Shdr) == 64 &&
                    sizeof(Elf64_Sym) == 24,
                "ELF64 layouts");
  uint64_t size = image.size();
  if (size < sizeof(Elf64_Ehdr) || std::memcmp(image.data(), ELFMAG, SELFMAG))
    return bad("not an ELF file");
  auto header = copyOut<Elf64_Ehdr>(image, 0);
  if (header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB)
    return bad("not a little-endian 64-bit ELF file");
  if (header.e_shnum == 0 || header.e_shentsize != sizeof(Elf64_Shdr))
    return bad(fmt::format("no section table of the expected layout ({} "
                           "sections of {} bytes)",
                           header.e_shnum, header.e_shentsize));
  uint64_t sectionCount = header.e_shnum;
  if (!within(header.e_shoff, sectionCount * sizeof(Elf64_Shdr), size))
    return bad(fmt::format("its section table (at {}, {} sections) lies past "
                           "its end",
                           header.e_shoff, sectionCount));
  auto section = [&](uint64_t index) {
    return copyOut<Elf64_Shdr>(image,
                               header.e_shoff + index * sizeof(Elf64_Shdr));
  };
  auto contentsWithin = [&](const Elf64_Shdr &s) {
    return s.sh_type == SHT_NOBITS || within(s.sh_offset, s.sh_size, size);
  };

  uint64_t symtabIndex = 0;
  for (uint64_t i = 1; i < sectionCount && !symtabIndex; ++i)
    if (section(i).sh_type == SHT_SYMTAB)
      symtabIndex = i;
  if (!symtabIndex)
    return bad("it has no symbol table");
  Elf64_Shdr symtab = section(symtabIndex);
  if (symtab.sh_entsize != sizeof(Elf64_Sym) || !contentsWithin(symtab))
    return bad(fmt::format("its symbol table (section {}) is malformed or lies "
                           "past its end",
                           symtabIndex));
  if (symtab.sh_link == 0 || symtab.sh_link >= sectionCount)
    return bad(fmt::format("its symbol table names string table {} of {} "
                           "sections",
                           symtab.sh_link, sectionCount));
  Elf64_Shdr strtab = section(symtab.sh_link);
  if (strtab.sh_type != SHT_STRTAB || !contentsWithin(strtab))
    return bad(fmt::format("its string table (section {}) is malformed or lies "
                           "past its end",
                           symtab.sh_link));
  std::string_view strings(image.data() + strtab.sh_offset, strtab.sh_size);

  uint64_t symbolCount = symtab.sh_size / sizeof(Elf64_Sym);
  for (uint64_t i = 1; i < symbolCount; ++i) {
    auto symbol =
        copyOut<Elf64_Sym>(image, symtab.sh_offset + i * sizeof(Elf64_Sym));
    if (symbol.st_name >= strings.size())
      continue;
    std::string_view rest = strings.substr(symbol.st_name);
    size_t end = rest.find('\0');
    if (end == std::string_view::npos || rest.substr(0, end) != name)
      continue;
    if (symbol.st_shndx == SHN_UNDEF || symbol.st_shndx >= SHN_LORESERVE ||
        symbol.st_shndx >= sectionCount)
      return bad(fmt::format("the symbol is not defined in a section "
                             "(section index {})",
                             symbol.st_shndx));
    Elf64_Shdr holder = section(symbol.st_shndx);
    if (holder.sh_type == SHT_NOBITS)
      return bad(fmt::format("the symbol is in section {}, which has no "
                             "initial contents",
                             symbol.st_shndx));
    if (!contentsWithin(holder))
      return bad(fmt::format("section {} lies past its end", symbol.st_shndx));
    // In a relocatable file a symbol's value is its offset in the section;
    // elsewhere its address (cubins place every section at address 0).
    uint64_t base = header.e_type == ET_REL ? 0 : holder.sh_addr;
    if (symbol.st_value < base ||
        !within(symbol.st_value - base, symbol.st_size, holder.sh_size))
      return bad(fmt::format("the symbol's {} bytes at {} lie outside its "
                             "section ({} bytes at address {})",
                             symbol.st_size, symbol.st_value, holder.sh_size,
                             holder.sh_addr));
    return std::optional<std::string>(image.substr(
        holder.sh_offset + symbol.st_value - base, symbol.st_size));
  }
  return std::optional<std::string>();
}
