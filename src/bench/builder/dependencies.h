// The CUDA libraries a solution's `dependencies` name, as upstream FlashInfer-Bench names them
// ("cublas", "cudnn", "cutlass", in any case, optionally pinned to a version: "CUTLASS_3_7",
// "cudnn9", "cutlass>=3.5"): where each is on this machine and the compile and link flags it adds.
// Other dependencies (Python packages, tools) are left alone, as upstream leaves them.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fib::bench::detail {

struct DependencyFlags {
  std::vector<std::string> compile;  // for every compile step, nvcc's too: -I<headers>
  std::vector<std::string> link;     // -L, -Wl,-rpath and -l of the libraries
  std::vector<std::string> found;    // "cudnn 9.19.0 (/usr/include, /usr/lib)" per library
};

// Whether a dependency names one of the CUDA libraries above (with or without a version).
bool names_cuda_library(std::string_view dependency);

// The flags for the CUDA libraries among `dependencies`, each found in its own variable's folder
// ($FIB_CUDNN_DIR, $CUDNN_HOME; $FIB_CUTLASS_DIR, $CUTLASS_HOME, $CUTLASS_DIR), the CUDA
// toolkit's include and lib folders, or the system's. nullopt, with *missing naming the
// dependency, where it was looked for and how to point fib at it, when one is not found or has
// another version than the one pinned.
std::optional<DependencyFlags> cuda_library_flags(const std::vector<std::string>& dependencies,
                                                  const std::filesystem::path& toolkit_include,
                                                  const std::filesystem::path& toolkit_lib,
                                                  std::string* missing);

}  // namespace fib::bench::detail
