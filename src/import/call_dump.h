// One call folder of a FlashInfer level-10 dump: its metadata.jsonl and its input tensors,
// named by the API's parameters.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/base/json.h"
#include "fib/tensor/tensor.h"

namespace fib::import {

struct Call {
  std::string folder;         // the call folder's name
  std::string function_name;  // "rmsnorm", "BatchDecodeWithPagedKVCacheWrapper.run"
  std::optional<std::int64_t> self_id;
  std::int64_t process_id = 0;
  // Tensors by parameter name; an element of a tuple argument is "<param>__<i>".
  std::map<std::string, Tensor> tensors;
  // The names of the tensor arguments in call order (tuples' elements left out).
  std::vector<std::string> tensor_order;
  // Numbers and booleans among the arguments, and the defaults of parameters not passed.
  std::map<std::string, Json> scalars;
};

// The parameter names and default values of a Python signature as FlashInfer records it
// ("(self, q: torch.Tensor, eps: float = 1e-06, *, out=None)"); defaults that are not numbers or
// booleans are left out.
struct Parameter {
  std::string name;
  std::optional<Json> default_value;
};
std::vector<Parameter> parse_signature(std::string_view signature);

struct CallReadOptions {
  // Where pt_to_safetensors put the tensors of the .pt dumps: <folder>.safetensors, or
  // <folder>.error saying why not.
  std::filesystem::path converted;
};
// Reads a call folder; nullopt after reporting to `diag` (against `folder`'s name) when its
// metadata or tensors are malformed.
std::optional<Call> read_call(const std::filesystem::path& folder, const CallReadOptions& options,
                              Diagnostics& diag);

// Converts each `folders`' inputs.pt (a torch.save'd dict of tensors) under `dump_dir` into
// `out`/<folder>.safetensors, or says why not in `out`/<folder>.error: torch.load(weights_only=
// True) in one Python child inside bubblewrap (no network, no view of the file system but /usr,
// the dump read-only and `out`). Throws fib::Error when the child cannot run.
void pt_to_safetensors(const std::filesystem::path& dump_dir,
                       const std::vector<std::string>& folders, const std::filesystem::path& out,
                       const std::string& python, const std::string& bwrap);

}  // namespace fib::import
