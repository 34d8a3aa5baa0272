// Solution: an implementation of a definition (sources, language, entry point, build spec).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fib/trace/json_reader.h"

namespace fib {

struct SourceFile {
  std::string path;  // relative, no "..", unique within the solution
  std::string content;
  KeyOrder key_order;
};

struct BuildSpec {
  std::string language;  // python, triton, cpp, cuda, tilelang
  std::vector<std::string> target_hardware;
  std::string entry_point;  // "file::symbol"
  std::vector<std::string> dependencies;
  std::optional<bool> destination_passing_style;  // absent means true
  std::optional<std::string> binding;             // tvm-ffi, torch, fib
  KeyOrder key_order;

  bool dps() const { return destination_passing_style.value_or(true); }
  // The binding as given, else "tvm-ffi": upstream's default for languages cpp and cuda.
  std::string binding_or_default() const { return binding.value_or("tvm-ffi"); }
  std::string entry_file() const;    // part before "::"
  std::string entry_symbol() const;  // part after "::"
};

struct Solution {
  std::string name;
  std::string definition;
  std::string author;
  BuildSpec spec;
  std::vector<SourceFile> sources;
  std::optional<std::string> description;
  KeyOrder key_order;

  const SourceFile* source(std::string_view path) const;
};

inline constexpr std::string_view kSolutionLanguages[] = {"python", "triton", "cpp", "cuda",
                                                          "tilelang"};
inline constexpr std::string_view kSolutionBindings[] = {"tvm-ffi", "torch", "fib"};

// Whether a source path is safe to write under a build folder: relative, no "..", no empty
// or "." components, no backslashes or NUL. On failure *why says what is wrong.
bool is_safe_relative_path(std::string_view path, std::string* why);

// Parses and checks a solution: fields and types, language, entry point `file::symbol` whose
// file is among the sources, safe and unique source paths, non-empty contents.
std::optional<Solution> solution_from_json(const Json& j, const ReadContext& ctx);
Json to_json(const Solution& s);

}  // namespace fib
