// A model's kernel inventory (`fib models SLUG --kernels`): every definition onboarding plans
// for it, with the engine kernels that implement it per library and backend and how often one
// forward pass calls it; and the engine kernels of the same catalogue that this model at this
// serving setup never calls, each with the configuration that does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fib/onboard/onboard.h"
#include "fib/trace/json_reader.h"

namespace fib::onboard {

// One kernel of an inference library, and the definitions it computes: those of `op_type` whose
// names start with `name_prefix`.
struct EngineKernel {
  std::string_view kernel;       // "cutlass_mla_decode"
  std::string_view library;      // "sgl-kernel", "flashinfer", "triton (SGLang)", ...
  std::string_view backend;      // the serving path that calls it: "cutlass_mla", "flashinfer"
  std::string_view op_type;      // "" when fib has no op type for it yet
  std::string_view name_prefix;  // "mla_paged_decode"
  std::string_view runs_when;    // the configuration that calls it, for models that do not
};

// The catalogue, grouped by op_type in op_types.def order.
const std::vector<EngineKernel>& engine_kernels();

// The category a kernel table shows for an op type ("Attention", "MoE", ...).
std::string_view kernel_category(std::string_view op_type);

struct InventoryRow {
  std::string definition;
  std::string op_type;
  std::string category;
  std::vector<const EngineKernel*> kernels;
  std::int64_t calls_per_forward = 0;  // summed over the modules that use it (every stage)
  std::vector<std::string> modules;    // module keys of the graph, in graph order
};

struct NotCalled {
  const EngineKernel* kernel = nullptr;
  std::string reason;
};

struct KernelInventory {
  std::vector<InventoryRow> rows;     // by category, then definition name
  std::vector<NotCalled> not_called;  // catalogue order
};

KernelInventory kernel_inventory(const OnboardResult& result);
Json inventory_to_json(const KernelInventory& inventory);
std::string render_inventory_text(const KernelInventory& inventory);

}  // namespace fib::onboard
