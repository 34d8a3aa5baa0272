// CUPTI kernel records split into iterations, and the kernel-set rule (include/fib/cuda/timing.h).
// Pure logic: no CUDA call here, so it is tested without a GPU.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "fib/cuda/timing.h"

namespace fib::cuda {

bool is_internal_kernel(std::string_view name) { return name.starts_with(kInternalKernelPrefix); }

double IterationKernels::span_ms() const {
  if (kernels.empty()) return 0;
  std::uint64_t first = kernels.front().start_ns, last = kernels.front().end_ns;
  for (const KernelRecord& k : kernels) {
    first = std::min(first, k.start_ns);
    last = std::max(last, k.end_ns);
  }
  return static_cast<double>(last - first) * 1e-6;
}

double IterationKernels::sum_ms() const {
  std::uint64_t total = 0;
  for (const KernelRecord& k : kernels) total += k.end_ns > k.start_ns ? k.end_ns - k.start_ns : 0;
  return static_cast<double>(total) * 1e-6;
}

std::vector<IterationKernels> split_iterations(std::vector<KernelRecord> records) {
  // Correlation ids are assigned when the launching API call is made, from one counter, so
  // sorting by them restores launch order across streams; the marker launched before each call
  // bounds that call's launches.
  std::stable_sort(records.begin(), records.end(),
                   [](const KernelRecord& a, const KernelRecord& b) {
                     return a.correlation_id < b.correlation_id;
                   });
  std::vector<IterationKernels> out;
  for (KernelRecord& r : records) {
    if (r.name == kMarkerKernelName) {
      out.emplace_back();
    } else if (!is_internal_kernel(r.name) && !out.empty()) {
      out.back().kernels.push_back(std::move(r));
    }
  }
  return out;
}

namespace {
std::map<std::string, std::size_t> kernel_counts(const IterationKernels& it) {
  std::map<std::string, std::size_t> counts;
  for (const KernelRecord& k : it.kernels) ++counts[k.name];
  return counts;
}
}  // namespace

std::string kernel_set_text(const IterationKernels& it) {
  std::string s = "{";
  bool first = true;
  for (const auto& [name, count] : kernel_counts(it)) {
    if (!first) s += ",";
    first = false;
    s += name;
    if (count > 1) s += fmt::format(" x{}", count);
  }
  return s + "}";
}

std::optional<std::string> kernel_set_mismatch(std::span<const IterationKernels> iterations,
                                               std::size_t first_number) {
  if (iterations.empty()) return std::nullopt;
  const auto reference = kernel_counts(iterations.front());
  for (std::size_t i = 1; i < iterations.size(); ++i) {
    if (kernel_counts(iterations[i]) != reference) {
      return fmt::format("iteration {} launched {} but iteration {} launched {}", first_number + i,
                         kernel_set_text(iterations[i]), first_number,
                         kernel_set_text(iterations.front()));
    }
  }
  return std::nullopt;
}

}  // namespace fib::cuda
