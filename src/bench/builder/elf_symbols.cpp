#include "elf_symbols.h"

#include <elf.h>
#include <cstring>
#include <fstream>
#include <vector>

namespace fib::bench::detail {

namespace {

// Reads byte ranges of a file. Only the headers and the symbol and string tables are read: a
// CUDA solution's shared object carries its device code (a fat binary, possibly hundreds of
// megabytes) in sections the check never needs.
class ElfFile {
 public:
  explicit ElfFile(const std::filesystem::path& path) : in_(path, std::ios::binary) {
    if (in_) {
      in_.seekg(0, std::ios::end);
      size_ = static_cast<std::uint64_t>(in_.tellg());
    }
  }
  bool is_open() const { return static_cast<bool>(in_); }

  // Copies `count` bytes at `offset` into `out`, or fails when they lie outside the file.
  bool read(std::uint64_t offset, std::uint64_t count, void* out) {
    if (offset > size_ || size_ - offset < count) return false;
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(count));
    return static_cast<std::uint64_t>(in_.gcount()) == count;
  }
  template <typename T>
  bool read(std::uint64_t offset, T* out) {
    return read(offset, sizeof(T), out);
  }
  bool read(std::uint64_t offset, std::uint64_t count, std::string* out) {
    if (offset > size_ || size_ - offset < count) return false;
    out->resize(static_cast<std::size_t>(count));
    return count == 0 || read(offset, count, out->data());
  }

 private:
  std::ifstream in_;
  std::uint64_t size_ = 0;
};

bool read_table(ElfFile& file, const std::vector<Elf64_Shdr>& sections, const Elf64_Shdr& table,
                std::vector<ElfSymbol>* out, std::string* why) {
  if (table.sh_link >= sections.size()) {
    *why = "a symbol table links to a missing string table";
    return false;
  }
  const Elf64_Shdr& strtab = sections[table.sh_link];
  std::string strings;
  if (!file.read(strtab.sh_offset, strtab.sh_size, &strings)) {
    *why = "a string table lies outside the file";
    return false;
  }
  const std::uint64_t entsize = table.sh_entsize == 0 ? sizeof(Elf64_Sym) : table.sh_entsize;
  if (entsize < sizeof(Elf64_Sym)) {
    *why = "symbol entries are too small";
    return false;
  }
  const std::uint64_t count = table.sh_size / entsize;
  std::string entries;
  if (!file.read(table.sh_offset, count * entsize, &entries)) {
    *why = "a symbol table lies outside the file";
    return false;
  }
  for (std::uint64_t i = 1; i < count; ++i) {  // entry 0 is the null symbol
    Elf64_Sym sym{};
    std::memcpy(&sym, entries.data() + i * entsize, sizeof sym);
    if (sym.st_name >= strings.size()) continue;
    const char* base = strings.data() + sym.st_name;
    const std::size_t max = strings.size() - sym.st_name;
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
  ElfFile file(path);
  if (!file.is_open()) {
    *why = "cannot open " + path.string();
    return std::nullopt;
  }
  Elf64_Ehdr eh{};
  if (!file.read(0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
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
  if (eh.e_shoff == 0) {
    *why = "the file has no section headers";
    return std::nullopt;
  }
  if (eh.e_shentsize < sizeof(Elf64_Shdr)) {
    *why = "section headers are too small";
    return std::nullopt;
  }
  // 65280 sections or more: e_shnum is 0 and section 0's sh_size holds the count.
  std::uint64_t count = eh.e_shnum;
  if (count == 0) {
    Elf64_Shdr first{};
    if (!file.read(eh.e_shoff, &first)) {
      *why = "section headers lie outside the file";
      return std::nullopt;
    }
    count = first.sh_size;
  }
  std::vector<Elf64_Shdr> sections;
  for (std::uint64_t i = 0; i < count; ++i) {
    Elf64_Shdr sh{};
    if (!file.read(eh.e_shoff + i * eh.e_shentsize, &sh)) {
      *why = "section headers lie outside the file";
      return std::nullopt;
    }
    sections.push_back(sh);
  }
  ElfSymbols out;
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB) {
      auto* table = sh.sh_type == SHT_DYNSYM ? &out.dynamic : &out.all;
      if (!read_table(file, sections, sh, table, why)) return std::nullopt;
    }
  }
  return out;
}

}  // namespace fib::bench::detail
