#include "bench/build/elf_symbols.h"

#include <elf.h>
#include <cstring>
#include <fstream>
#include <sstream>

namespace fib::bench::detail {

namespace {

// Copies a T out of `data` at `offset`, or fails when it does not fit.
template <typename T>
bool read_at(const std::string& data, std::uint64_t offset, T* out) {
  if (offset > data.size() || data.size() - offset < sizeof(T)) return false;
  std::memcpy(out, data.data() + offset, sizeof(T));
  return true;
}

bool read_table(const std::string& data, const Elf64_Ehdr& eh, const Elf64_Shdr& table,
                std::vector<ElfSymbol>* out, std::string* why) {
  Elf64_Shdr strtab{};
  if (table.sh_link >= eh.e_shnum ||
      !read_at(data, eh.e_shoff + std::uint64_t{table.sh_link} * eh.e_shentsize, &strtab)) {
    *why = "a symbol table links to a missing string table";
    return false;
  }
  if (strtab.sh_offset > data.size() || data.size() - strtab.sh_offset < strtab.sh_size) {
    *why = "a string table lies outside the file";
    return false;
  }
  const std::uint64_t entsize = table.sh_entsize == 0 ? sizeof(Elf64_Sym) : table.sh_entsize;
  if (entsize < sizeof(Elf64_Sym)) {
    *why = "symbol entries are too small";
    return false;
  }
  const std::uint64_t count = table.sh_size / entsize;
  for (std::uint64_t i = 1; i < count; ++i) {  // entry 0 is the null symbol
    Elf64_Sym sym{};
    if (!read_at(data, table.sh_offset + i * entsize, &sym)) {
      *why = "a symbol table lies outside the file";
      return false;
    }
    if (sym.st_name >= strtab.sh_size) continue;
    const char* base = data.data() + strtab.sh_offset + sym.st_name;
    const std::size_t max = static_cast<std::size_t>(strtab.sh_size - sym.st_name);
    ElfSymbol s;
    s.name.assign(base, strnlen(base, max));
    s.defined = sym.st_shndx != SHN_UNDEF;
    const unsigned bind = sym.st_info >> 4u;  // ELF64_ST_BIND, without its C cast
    s.global = bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE;
    const unsigned vis = sym.st_other & 3u;  // ELF64_ST_VISIBILITY
    s.visible = vis == STV_DEFAULT || vis == STV_PROTECTED;
    const unsigned type = sym.st_info & 0xfu;  // ELF64_ST_TYPE
    s.function = type == STT_FUNC || type == STT_GNU_IFUNC;
    out->push_back(std::move(s));
  }
  return true;
}

}  // namespace

const ElfSymbol* ElfSymbols::exported(const std::string& name) const {
  for (const auto& s : dynamic) {
    if (s.name == name && s.defined && s.global && s.visible) return &s;
  }
  return nullptr;
}

bool ElfSymbols::defines(const std::string& name) const {
  for (const auto* table : {&dynamic, &all}) {
    for (const auto& s : *table) {
      if (s.name == name && s.defined) return true;
    }
  }
  return false;
}

std::optional<ElfSymbols> read_elf_symbols(const std::filesystem::path& path, std::string* why) {
  std::string ignored;
  if (why == nullptr) why = &ignored;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = "cannot open " + path.string();
    return std::nullopt;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string data = std::move(buffer).str();
  Elf64_Ehdr eh{};
  if (!read_at(data, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    *why = "not an ELF file";
    return std::nullopt;
  }
  const unsigned char host_order = [] {
    const std::uint16_t one = 1;
    unsigned char first;
    std::memcpy(&first, &one, 1);
    return first == 1 ? ELFDATA2LSB : ELFDATA2MSB;
  }();
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != host_order) {
    *why = "not a 64-bit ELF file of this machine's byte order";
    return std::nullopt;
  }
  if (eh.e_shentsize < sizeof(Elf64_Shdr)) {
    *why = "section headers are too small";
    return std::nullopt;
  }
  ElfSymbols out;
  for (std::uint64_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh{};
    if (!read_at(data, eh.e_shoff + i * eh.e_shentsize, &sh)) {
      *why = "section headers lie outside the file";
      return std::nullopt;
    }
    if (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB) {
      auto* table = sh.sh_type == SHT_DYNSYM ? &out.dynamic : &out.all;
      if (!read_table(data, eh, sh, table, why)) return std::nullopt;
    }
  }
  return out;
}

}  // namespace fib::bench::detail
