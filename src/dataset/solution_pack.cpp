#include "fib/dataset/solution_pack.h"

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>

#include "fib/base/files.h"
#include "fib/base/json.h"
#include "fib/dataset/layout.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/suggest.h"

namespace fib {

namespace fs = std::filesystem;

std::size_t invalid_utf8_offset(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    std::uint32_t min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      min = 0x10000;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    std::uint32_t cp = c & (0x7F >> len);
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

namespace {

bool is_identifier(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// The deepest folder holding every path (all absolute and normalized).
fs::path common_folder(const std::vector<fs::path>& files) {
  fs::path common = files.front().parent_path();
  for (const auto& f : files) {
    const fs::path dir = f.parent_path();
    fs::path shared;
    auto a = common.begin(), b = dir.begin();
    for (; a != common.end() && b != dir.end() && *a == *b; ++a, ++b) shared /= *a;
    common = shared;
  }
  return common;
}

void check_name(const std::string& flag, const std::string& value) {
  if (!layout::is_path_component(value) || value.find('\\') != std::string::npos) {
    throw Error(flag, fmt::format("'{}' cannot be used as a file or folder name", value),
                "use letters, digits, '_', '-' or '.', without '/'");
  }
}

// Reads the sources and names them relative to their common folder.
std::vector<SourceFile> read_sources(const std::vector<std::string>& args,
                                     std::vector<fs::path>* absolute) {
  for (const auto& arg : args) {
    std::error_code ec;
    const fs::path abs = fs::absolute(arg, ec).lexically_normal();
    const auto st = fs::status(abs, ec);
    if (!fs::exists(st)) throw Error(arg, "no such source file");
    if (fs::is_directory(st))
      throw Error(arg, "is a folder, not a source file", "list the files to pack one by one");
    for (std::size_t i = 0; i < absolute->size(); ++i) {
      if ((*absolute)[i] == abs) throw Error(arg, "source file given twice");
    }
    absolute->push_back(abs);
  }
  const fs::path common = common_folder(*absolute);
  std::vector<SourceFile> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    Diagnostics diag;
    auto text = read_text_file((*absolute)[i].string(), diag);
    if (!text) {
      // Name the file as the user spelled it.
      Diagnostics renamed;
      for (auto d : diag) {
        d.file = args[i];
        renamed.add(std::move(d));
      }
      throw Error(std::move(renamed));
    }
    if (text->empty())
      throw Error(args[i], "source file is empty", "a solution's sources must have content");
    if (const auto bad = invalid_utf8_offset(*text); bad != std::string::npos) {
      throw Error(args[i], fmt::format("not UTF-8 text (invalid byte at offset {})", bad),
                  "sources are stored as JSON strings; binary files cannot be packed");
    }
    SourceFile src;
    src.path = (*absolute)[i].lexically_relative(common).generic_string();
    std::string why;
    if (!is_safe_relative_path(src.path, &why)) {
      throw Error(args[i], fmt::format("cannot be stored as '{}': {}", src.path, why));
    }
    src.content = std::move(*text);
    out.push_back(std::move(src));
  }
  return out;
}

// The stored path of the entry file: FILE may be a stored path or a path to one of the sources.
std::string entry_source(const std::string& file, const std::vector<SourceFile>& sources,
                         const std::vector<fs::path>& absolute) {
  std::vector<std::string> paths;
  for (const auto& s : sources) {
    if (s.path == file) return s.path;
    paths.push_back(s.path);
  }
  std::error_code ec;
  const fs::path abs = fs::absolute(file, ec).lexically_normal();
  for (std::size_t i = 0; i < absolute.size(); ++i) {
    if (absolute[i] == abs) return sources[i].path;
  }
  throw Error("--entry", fmt::format("entry file '{}' is not among the sources", file),
              suggest(file, paths));
}

}  // namespace

Solution pack_solution(const SolutionPackRequest& a) {
  check_name("--name", a.name);
  check_name("--author", a.author);
  bool known = false;
  for (auto l : kSolutionLanguages) known = known || l == a.language;
  if (!known) {
    throw Error("--language", fmt::format("unknown language '{}'", a.language),
                suggest(a.language, kSolutionLanguages));
  }
  Solution s;
  s.name = a.name;
  s.definition = a.definition;
  s.author = a.author;
  s.spec.language = a.language;
  // cpp and cuda solutions are tvm-ffi ones unless told otherwise, written out so the record says
  // how it is called: upstream's default, and a value its models accept. fib's own ABI
  // (fib/solution.h) is the opt-in --binding fib, which upstream's models reject.
  if (!a.binding.empty()) {
    known = false;
    for (auto b : kSolutionBindings) known = known || b == a.binding;
    if (!known) {
      throw Error("--binding", fmt::format("unknown binding '{}'", a.binding),
                  suggest(a.binding, kSolutionBindings));
    }
    s.spec.binding = a.binding;
  } else if (a.language == "cpp" || a.language == "cuda") {
    s.spec.binding = "tvm-ffi";
  }
  for (const auto& h : a.target_hardware) {
    if (h.empty()) throw Error("--target-hardware", "empty hardware name");
    s.spec.target_hardware.push_back(h);
  }
  if (s.spec.target_hardware.empty()) {
    if (a.language == "cpp") {
      s.spec.target_hardware = {"cpu"};
    } else if (a.language == "python") {
      throw Error("--target-hardware", "a python solution needs its target hardware",
                  "e.g. --target-hardware cpu or --target-hardware cuda");
    } else {
      s.spec.target_hardware = {"cuda"};
    }
  }
  if (a.value_returning) s.spec.destination_passing_style = false;
  if (a.description) s.description = *a.description;

  const auto sep = a.entry.find("::");
  if (sep == std::string::npos || sep == 0 || a.entry.find("::", sep + 2) != std::string::npos) {
    throw Error("--entry", fmt::format("'{}' is not of the form FILE::SYMBOL", a.entry),
                "e.g. --entry kernel.cpp::run");
  }
  const std::string symbol = a.entry.substr(sep + 2);
  if (!is_identifier(symbol)) {
    throw Error("--entry", fmt::format("entry symbol '{}' is not an identifier", symbol),
                "the symbol is the name the solution exports, e.g. run");
  }
  std::vector<fs::path> absolute;
  s.sources = read_sources(a.sources, &absolute);
  s.spec.entry_point = entry_source(a.entry.substr(0, sep), s.sources, absolute) + "::" + symbol;
  return s;
}

std::optional<StoredSolution> store_packed_solution(const TraceSet& set, const Definition& def,
                                                    const Solution& s, const std::string& output,
                                                    Diagnostics& findings) {
  // What is written must read back as the same solution (the loader's checks, not ours).
  const Json j = to_json(s);
  std::string text = dump_json_pretty(j);
  {
    Diagnostics diag;
    ReadContext ctx{"packed solution", &diag};
    if (!solution_from_json(j, ctx)) {
      findings.append(diag);
      return std::nullopt;
    }
  }
  if (text.size() > kMaxJsonFileBytes) {
    throw Error(s.name,
                fmt::format("the packed solution is {} bytes, more than the {} byte limit of a "
                            "solution file",
                            text.size(), kMaxJsonFileBytes));
  }
  StoredSolution stored;
  if (!output.empty()) {
    stored.replaced = fs::exists(output);
    write_file_atomic(output, text);
    stored.path = output;
    return stored;
  }
  const fs::path rel = layout::solution_file(s.author, def.op_type, s.definition, s.name);
  if (const auto* existing = set.solution(s.name)) {
    const fs::path at = set.files()[existing->source.file].path;
    if (at != rel) {
      throw Error(
          (set.root() / at).string(),
          fmt::format("the dataset already has a solution named '{}' (author '{}', definition "
                      "'{}')",
                      s.name, existing->value.author, existing->value.definition),
          "solution names are unique within a dataset; choose another --name");
    }
    stored.replaced = true;
  }
  write_solution(set.root(), s, def.op_type);
  stored.path = (set.root() / rel).string();
  return stored;
}

}  // namespace fib
