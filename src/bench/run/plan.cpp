#include "plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "fib/bench/eval/op_family.h"
#include "fib/reference/reference.h"
#ifdef FIB_HAVE_CUDA
#include "fib/reference_cuda/reference_cuda.h"
#endif

namespace fib::bench::detail {

namespace {

using Message = std::function<void(const std::string&)>;
using Finished = std::set<std::tuple<std::string, std::string, std::string>>;

bool selected(const std::vector<std::string>& allow, const std::string& name) {
  return allow.empty() || std::find(allow.begin(), allow.end(), name) != allow.end();
}

// Finished (definition, workload, solution) triples for --resume.
Finished finished_evaluations(const TraceSet& set) {
  Finished finished;
  for (const auto& d : set.definitions()) {
    for (const auto& t : set.traces(d.value.name)) {
      if (t.value.solution) {
        finished.emplace(d.value.name, t.value.workload.uuid, *t.value.solution);
      }
    }
  }
  return finished;
}

// The definition's selected solutions that can run here.
std::vector<const Solution*> runnable_solutions(const TraceSet& set, const Definition& def,
                                                const RunOptions& o, bool gpu,
                                                const Message& message) {
  std::vector<const Solution*> solutions;
  for (const auto& sr : set.solutions(def.name)) {
    const Solution& s = sr.value;
    if (!selected(o.solutions, s.name)) continue;
    // A solution of a language or binding fib cannot build stays in the plan: each of its
    // evaluations records why it did not run (build_solution says it is unsupported).
    // A solution runs where its code runs: GPU solutions get device pointers and a stream,
    // CPU ones host memory.
    if (gpu ? !solution_targets_gpu(s) : !solution_runs_on_cpu(s)) {
      message(fmt::format(
          "warning: skipping solution {} ({}): {}", s.name, def.name,
          gpu ? "it targets only the CPU (target_hardware cpu); run it with --device cpu"
              : "it targets only GPUs (its language or target_hardware); run it with --device "
                "cuda:0 (or a list of devices)"));
      continue;
    }
    solutions.push_back(&s);
  }
  return solutions;
}

bool has_native_reference(const Definition& def, bool gpu, std::string* why) {
#ifdef FIB_HAVE_CUDA
  if (gpu) return reference_cuda::find_kernel(def, why) != nullptr;
#else
  (void)gpu;
#endif
  return reference::find_kernel(def, why) != nullptr;
}

// The interpreter of PyTorch references, looked for once per run, when first needed.
class PythonLookup {
 public:
  explicit PythonLookup(const RunOptions& o) : o_(o) {}
  const std::optional<PythonRuntime>& get(std::string* why) {
    if (!done_) {
      python_ = find_python(o_.python, PythonUse::kReference, &why_);
      done_ = true;
    }
    *why = why_;
    return python_;
  }

 private:
  const RunOptions& o_;
  bool done_ = false;
  std::optional<PythonRuntime> python_;
  std::string why_;
};

// Whether the definition's PyTorch reference can check its solutions here; `why` when not.
bool python_reference_usable(const Definition& def, PythonLookup& python, std::string* why) {
  if (def.reference.empty()) {
    *why = "it has no PyTorch reference";
    return false;
  }
  if (samples_draws(def)) {
    // The judge holds draws against the distribution the native reference computes; a PyTorch
    // sampling reference gives one draw, not the distribution.
    *why =
        "the PyTorch reference of a sampling op type gives draws, not the distribution the "
        "judge needs";
    return false;
  }
  return python.get(why).has_value();
}

// The reference that checks the definition's solutions under --reference, or nullopt with the
// warning that says why none does.
std::optional<ReferenceKind> choose_reference(const Definition& def, const RunOptions& o, bool gpu,
                                              PythonLookup& python, std::string* warning) {
  std::string why_native, why_python;
  const bool native =
      o.reference != ReferenceChoice::kPython && has_native_reference(def, gpu, &why_native);
  if (native) return ReferenceKind::kNative;
  const std::string where = gpu ? " on CUDA" : "";
  if (o.reference == ReferenceChoice::kNative) {
    *warning = fmt::format(
        "warning: {} has no native reference{} ({}); its solutions are not evaluated (--reference "
        "native; --reference auto would use its PyTorch reference)",
        def.name, where, why_native);
    return std::nullopt;
  }
  if (python_reference_usable(def, python, &why_python)) return ReferenceKind::kPython;
  *warning = o.reference == ReferenceChoice::kPython
                 ? fmt::format(
                       "warning: {}: its PyTorch reference cannot check it: {}; its solutions "
                       "are not evaluated (--reference python)",
                       def.name, why_python)
                 : fmt::format(
                       "warning: {} has no native reference{} ({}) and its PyTorch reference "
                       "cannot check it ({}); its solutions are not evaluated",
                       def.name, where, why_native, why_python);
  return std::nullopt;
}

}  // namespace

Plan plan_run(const TraceSet& set, const RunOptions& o, bool gpu, const Message& message) {
  const Finished finished = o.resume ? finished_evaluations(set) : Finished{};
  Plan plan;
  PythonLookup python(o);
  for (const auto& d : set.definitions()) {
    const Definition& def = d.value;
    if (!selected(o.definitions, def.name)) continue;
    const std::vector<const Solution*> solutions = runnable_solutions(set, def, o, gpu, message);
    if (solutions.empty()) continue;
    std::string warning;
    const std::optional<ReferenceKind> reference = choose_reference(def, o, gpu, python, &warning);
    if (!reference) {
      message(warning);
      ++plan.reference_failures;
      continue;
    }
    if (*reference == ReferenceKind::kPython) {
      std::string unused;
      plan.python = python.get(&unused);
    }
    for (const auto& wr : set.workloads(def.name)) {
      if (!selected(o.workloads, wr.value.workload.uuid)) continue;
      WorkItem item{&def, &wr.value, {}, *reference};
      for (const Solution* s : solutions) {
        if (finished.count({def.name, wr.value.workload.uuid, s->name})) {
          ++plan.resumed;
        } else {
          item.pending.push_back(s);
          ++plan.evaluations;
        }
      }
      if (!item.pending.empty()) plan.items.push_back(std::move(item));
    }
  }
  return plan;
}

}  // namespace fib::bench::detail
