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

std::optional<std::string> window_escape(std::vector<KernelRecord> records,
                                         std::vector<CallKernel>* kernels, std::size_t* windows) {
  std::stable_sort(records.begin(), records.end(),
                   [](const KernelRecord& a, const KernelRecord& b) {
                     return a.correlation_id < b.correlation_id;
                   });
  // One window: the opening marker, the call's kernels (by launch order), the closing kernel.
  struct Window {
    const KernelRecord* open = nullptr;
    const KernelRecord* close = nullptr;
    std::vector<const KernelRecord*> calls;
  };
  std::vector<Window> all;
  bool inside = false;
  for (const KernelRecord& r : records) {
    if (r.name == kMarkerKernelName) {
      all.emplace_back();
      all.back().open = &r;
      inside = true;
    } else if (r.name == kWindowEndKernelName) {
      if (inside) all.back().close = &r;
      inside = false;
    } else if (inside && !is_internal_kernel(r.name)) {
      all.back().calls.push_back(&r);
    }
  }
  if (windows) *windows = all.size();
  auto us = [](std::uint64_t a, std::uint64_t b) { return static_cast<double>(a - b) * 1e-3; };
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Window& w = all[i];
    if (kernels && i == 0) {
      kernels->clear();
      for (const KernelRecord* k : w.calls) {
        kernels->push_back({k->name, k->stream_id,
                            static_cast<double>(static_cast<std::int64_t>(k->start_ns) -
                                                static_cast<std::int64_t>(w.open->end_ns)) *
                                1e-6,
                            static_cast<double>(k->end_ns - k->start_ns) * 1e-6});
      }
    }
    for (const KernelRecord* k : w.calls) {
      if (k->start_ns < w.open->end_ns) {
        return fmt::format(
            "kernel {} (stream {}) of call {} started {:.1f} us before the call's window opened "
            "on the harness's stream (work not ordered after the stream fib gave the call)",
            k->name, k->stream_id, i + 1, us(w.open->end_ns, k->start_ns));
      }
      if (w.close != nullptr && k->end_ns > w.close->start_ns) {
        return fmt::format(
            "kernel {} (stream {}) of call {} ended {:.1f} us after the call's window closed on "
            "the harness's stream (work left running on a side stream, not joined back)",
            k->name, k->stream_id, i + 1, us(k->end_ns, w.close->start_ns));
      }
    }
  }
  return std::nullopt;
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
