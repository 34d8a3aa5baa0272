#include "fib/dataset/layout.h"

#include <string>

namespace fib::layout {

namespace fs = std::filesystem;

namespace {
std::string s(std::string_view v) { return std::string(v); }
std::string uuid_hex(std::string_view uuid) {
  std::string out;
  for (char c : uuid) {
    if (c != '-') out += c;
  }
  return out;
}
}  // namespace

fs::path definition_file(std::string_view op_type, std::string_view definition) {
  return fs::path("definitions") / s(op_type) / (s(definition) + ".json");
}
fs::path workloads_file(std::string_view op_type, std::string_view definition) {
  return fs::path("workloads") / s(op_type) / (s(definition) + ".jsonl");
}
fs::path solution_file(std::string_view author, std::string_view op_type,
                       std::string_view definition, std::string_view solution) {
  return fs::path("solutions") / s(author) / s(op_type) / s(definition) / (s(solution) + ".json");
}
fs::path traces_file(std::string_view author, std::string_view op_type,
                     std::string_view definition) {
  return fs::path("traces") / s(author) / s(op_type) / (s(definition) + ".jsonl");
}
fs::path blob_file(std::string_view op_type, std::string_view definition, std::string_view uuid) {
  return fs::path("blob") / "workloads" / s(op_type) / s(definition) /
         (s(definition) + "_" + uuid_hex(uuid) + ".safetensors");
}

bool is_path_component(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\\') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

}  // namespace fib::layout
