// The FlashInfer-Trace dataset layout: where each kind of record lives under the root.
//
//   definitions/<op_type>/<definition>.json
//   workloads/<op_type>/<definition>.jsonl
//   solutions/<author>/<op_type>/<definition>/<solution>.json
//   traces/<author>/<op_type>/<definition>.jsonl
//   blob/workloads/<op_type>/<definition>/<definition>_<uuid>.safetensors
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace fib::layout {

std::filesystem::path definition_file(std::string_view op_type, std::string_view definition);
std::filesystem::path workloads_file(std::string_view op_type, std::string_view definition);
std::filesystem::path solution_file(std::string_view author, std::string_view op_type,
                                    std::string_view definition, std::string_view solution);
std::filesystem::path traces_file(std::string_view author, std::string_view op_type,
                                  std::string_view definition);
std::filesystem::path blob_file(std::string_view op_type, std::string_view definition,
                                std::string_view uuid);

// Whether a name can be used as one path component (no '/', not "." or "..", not empty).
bool is_path_component(std::string_view name);

}  // namespace fib::layout
