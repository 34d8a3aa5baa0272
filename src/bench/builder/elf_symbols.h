// Reading a shared object's symbol tables without loading it (loading would run its static
// constructors in the orchestrator).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace fib::bench::detail {

struct ElfSymbol {
  std::string name;
  bool defined = false;   // not SHN_UNDEF
  bool global = false;    // GLOBAL, WEAK or GNU_UNIQUE binding
  bool visible = false;   // DEFAULT or PROTECTED visibility
  bool function = false;  // STT_FUNC or STT_GNU_IFUNC
};

struct ElfSymbols {
  std::vector<ElfSymbol> dynamic;  // .dynsym: what the dynamic loader can find
  std::vector<ElfSymbol> all;      // .symtab (empty when stripped)

  // The defined, exported symbol `name` of the dynamic table, or null.
  const ElfSymbol* exported(const std::string& name) const;
  // Whether `name` is defined in the full table (exported or not).
  bool defines(const std::string& name) const;
};

// Reads the symbol tables of a 64-bit ELF file of the host's byte order. On failure returns
// nullopt and says why in *why.
std::optional<ElfSymbols> read_elf_symbols(const std::filesystem::path& path, std::string* why);

}  // namespace fib::bench::detail
