#include "fib/bench/reference_stage/reference_check.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "fib/base/device.h"
#include "fib/bench/eval/compare.h"
#include "fib/bench/eval/op_family.h"
#include "fib/bench/reference_stage/python_reference.h"
#include "fib/reference/reference.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/random.h"
#include "fib/tensor/workload_synth.h"

#ifdef FIB_HAVE_CUDA
#include "fib/cuda/runtime.h"
#include "fib/reference_cuda/reference_cuda.h"
#endif

namespace fib::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Inputs held in memory (with the native outputs) before the PyTorch side runs them: each batch
// is one Python process, which imports torch once.
constexpr std::uint64_t kBatchBytes = 512ull << 20;
constexpr std::uint64_t kUnknownBytes = std::numeric_limits<std::uint64_t>::max();

// --device: "cpu", "cuda" or "cuda:N".
Device parse_device_option(const std::string& device) {
  if (const std::optional<Device> d = parse_device(device)) return *d;
  throw Error("--device", fmt::format("unknown device '{}'", device),
              "expected cpu, cuda or cuda:N");
}

void require_device(int ordinal) {
  if (ordinal < 0) return;
#ifdef FIB_HAVE_CUDA
  std::string why;
  const int n = cuda::device_count(&why);
  if (ordinal >= n) {
    throw Error("--device",
                n == 0 ? fmt::format("no CUDA device: {}", why)
                       : fmt::format("no CUDA device {} ({} visible)", ordinal, n),
                "run on a machine with an NVIDIA GPU, or use --device cpu");
  }
#else
  throw Error("--device", "CUDA devices need a CUDA build of fib", "use --device cpu");
#endif
}

std::uint64_t input_bytes(const Definition& def, const Workload& w) {
  const auto bound = def.bind_axes(w.axes);
  if (!bound) return kUnknownBytes;
  std::uint64_t bytes = 0;
  for (const auto& spec : def.inputs) {
    if (spec.is_scalar() || (spec.is_optional() && w.input(spec.name) == nullptr)) continue;
    const auto shape = def.concrete_shape(spec, *bound);
    if (!shape) return kUnknownBytes;
    std::uint64_t n = 1;
    for (auto d : *shape) n *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
    bytes += dtype_storage_bytes(spec.dtype, n).value_or(0);
  }
  return bytes;
}

struct Candidate {
  Workload workload;
  bool synthesized = false;
  std::uint64_t bytes = 0;
};

std::vector<Candidate> synthesized(const Definition& def, const ReferenceCheckOptions& o) {
  SynthOptions so;
  so.count = o.synthesized;
  so.seed = Rng::derive(o.seed, def.name);
  so.max_tokens = 16;
  so.max_kv_len = 256;
  std::vector<Candidate> out;
  for (Workload& w : synthesize_workloads(def, so)) out.push_back({std::move(w), true, 0});
  return out;
}

// The smallest first, up to max_workloads, leaving out (and counting) those above the cap.
std::vector<Candidate> within_caps(std::vector<Candidate> all, const Definition& def,
                                   const ReferenceCheckOptions& o, ReferenceCheckRow& row) {
  for (Candidate& c : all) c.bytes = input_bytes(def, c.workload);
  std::stable_sort(all.begin(), all.end(),
                   [](const Candidate& a, const Candidate& b) { return a.bytes < b.bytes; });
  std::vector<Candidate> chosen;
  int too_large = 0;
  for (Candidate& c : all) {
    if (c.bytes > o.max_input_bytes) {
      ++too_large;
    } else if (o.max_workloads == 0 || chosen.size() < o.max_workloads) {
      chosen.push_back(std::move(c));
    }
  }
  if (too_large > 0) {
    row.left_out += too_large;
    row.left_out_reason += fmt::format(
        "{}{} {}workload(s) with inputs above {} MiB", row.left_out_reason.empty() ? "" : "; ",
        too_large, all.front().synthesized ? "synthesized " : "", o.max_input_bytes >> 20);
  }
  return chosen;
}

// The workloads to compare: the definition's own or, where it has none (or none within the
// caps), synthesized ones, small enough to run on a CPU in moments.
std::vector<Candidate> candidates(const TraceSet& set, const Definition& def,
                                  const ReferenceCheckOptions& o, ReferenceCheckRow& row) {
  std::vector<Candidate> own;
  for (const auto& r : set.workloads(def.name)) own.push_back({r.value.workload, false, 0});
  std::vector<Candidate> chosen =
      own.empty() ? std::vector<Candidate>{} : within_caps(std::move(own), def, o, row);
  if (chosen.empty()) chosen = within_caps(synthesized(def, o), def, o, row);
  return chosen;
}

reference::Outputs run_native(const Definition& def, const Workload& w,
                              const reference::Arguments& args, const ReferenceCheckOptions& o,
                              int ordinal, std::uint64_t seed) {
#ifdef FIB_HAVE_CUDA
  if (ordinal >= 0) {
    cuda::set_device(ordinal);
    cuda::Stream stream;
    reference_cuda::DeviceArguments dargs;
    for (const auto& [name, t] : args.tensors)
      dargs.tensors.emplace(name, cuda::to_device(t, stream.get()));
    dargs.scalars = args.scalars;
    const reference_cuda::DeviceOutputs dout =
        reference_cuda::run(def, w.axes, dargs, stream.get(), seed);
    stream.synchronize();
    reference::Outputs out;
    for (const auto& [name, t] : dout) out.emplace(name, cuda::to_host(t, stream.get()));
    return out;
  }
#else
  (void)ordinal;
#endif
  return reference::run(def, w.axes, args, o.threads, seed);
}

std::string native_id(const Definition& def, int ordinal, std::string* why) {
#ifdef FIB_HAVE_CUDA
  if (ordinal >= 0) {
    const reference_cuda::Kernel* k = reference_cuda::find_kernel(def, why);
    return k != nullptr ? "cuda:" + std::string(k->id()) : std::string();
  }
#else
  (void)ordinal;
#endif
  const reference::Kernel* k = reference::find_kernel(def, why);
  return k != nullptr ? std::string(k->id()) : std::string();
}

// Native against PyTorch under the policy fib run judges solutions by: the native outputs stand
// as the expected ones. Sampling references draw: the PyTorch draws must lie in the support of
// the native reference's distribution (one draw per row tests nothing more).
CallVerdict compare_references(const Definition& def, const reference::Arguments& args,
                               const reference::Outputs& native, const reference::Outputs& python) {
  static const EvalConfigFile builtin = builtin_eval_config();
  const EvalPolicy policy = policy_for(def);
  const OutputEvals evals = resolve_eval_outputs(builtin, nullptr, EvalSettings{}, def);
  if (policy.kind == PolicyKind::kSampling) {
    const std::string& name = def.outputs.front().name;
    const SamplingExpectation e = sampling_expectation(def, args, evals.at(name));
    return check_sampling(def, evals.at(name), e, python.at(name));
  }
  CompareOptions opt;
  std::optional<RowScorer> scorer;
  if (policy.kind == PolicyKind::kTopkSet) {
    if (const auto make = op_family(def).row_scorer) scorer = make(def, args);
    if (scorer) opt.scorer = &*scorer;
  }
  return compare_outputs(def, policy, evals, native, python, opt);
}

std::string first_lines(const std::string& text, int n) {
  std::size_t end = 0;
  for (int i = 0; i < n && end != std::string::npos; ++i) {
    end = text.find('\n', end == 0 ? 0 : end + 1);
  }
  std::string s = end == std::string::npos ? text : text.substr(0, end);
  std::replace(s.begin(), s.end(), '\n', ';');
  return s;
}

std::string last_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

// The run over the definitions: native outputs computed as inputs are made, PyTorch ones in
// batches, each workload compared once both are there, each row handed on once complete.
class Checker {
 public:
  Checker(const TraceSet& set, const ReferenceCheckOptions& o, PythonRuntime python,
          const std::function<void(const ReferenceCheckRow&)>& on_row)
      : set_(set), o_(o), python_(std::move(python)), on_row_(on_row) {
    std::string dir = (fs::temp_directory_path() / "fib-reference-check-XXXXXX").string();
    if (::mkdtemp(dir.data()) == nullptr) throw Error(dir, "cannot create a scratch folder");
    work_dir_ = dir;
  }
  ~Checker() {
    std::error_code ec;
    fs::remove_all(work_dir_, ec);
  }
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  std::vector<ReferenceCheckRow> run(const std::vector<const Definition*>& defs);

 private:
  struct Pending {
    std::size_t row = 0;
    const Definition* def = nullptr;
    std::string uuid;
    reference::Arguments args;
    reference::Outputs native;
    std::uint64_t seed = 0;
    std::uint64_t bytes = 0;
  };

  void prepare(std::size_t row, const Definition& def);
  void prepare_workload(std::size_t row, const Definition& def, const Candidate& c);
  void flush();
  void judge(const Pending& p, const PythonReferenceResult& r, const fs::path& file);
  void finish(std::size_t row);

  const TraceSet& set_;
  const ReferenceCheckOptions& o_;
  PythonRuntime python_;
  const std::function<void(const ReferenceCheckRow&)>& on_row_;
  fs::path work_dir_;
  Device device_;
  int ordinal_ = -1;  // device_'s CUDA ordinal, -1 on the CPU
  std::vector<ReferenceCheckRow> rows_;
  std::vector<int> outstanding_;  // per row: workloads waiting for the PyTorch side
  std::vector<bool> prepared_;    // per row: every workload made and run natively
  std::vector<Pending> pending_;
  std::uint64_t pending_bytes_ = 0;
};

std::vector<ReferenceCheckRow> Checker::run(const std::vector<const Definition*>& defs) {
  device_ = parse_device_option(o_.device);
  ordinal_ = device_.is_cpu() ? -1 : device_.ordinal;
  require_device(ordinal_);
  rows_.resize(defs.size());
  outstanding_.assign(defs.size(), 0);
  prepared_.assign(defs.size(), false);
  for (std::size_t i = 0; i < defs.size(); ++i) {
    prepare(i, *defs[i]);
    prepared_[i] = true;
    if (outstanding_[i] == 0) finish(i);
    if (pending_bytes_ >= kBatchBytes) flush();
  }
  flush();
  return std::move(rows_);
}

void Checker::prepare(std::size_t row, const Definition& def) {
  ReferenceCheckRow& r = rows_[row];
  r.definition = def.name;
  r.op_type = def.op_type;
  std::string why;
  r.native = native_id(def, ordinal_, &why);
  if (r.native.empty()) {
    r.reason = "no native reference: " + why;
    return;
  }
  if (def.reference.empty()) {
    r.reason = "no PyTorch reference";
    return;
  }
  std::vector<Candidate> chosen;
  try {
    chosen = candidates(set_, def, o_, r);
  } catch (const Error& e) {
    r.reason = fmt::format("no workloads to compare: {}", e.what());
    return;
  }
  for (const Candidate& c : chosen) {
    if (r.verdict == CheckVerdict::kError) break;
    prepare_workload(row, def, c);
  }
}

void Checker::prepare_workload(std::size_t row, const Definition& def, const Candidate& c) {
  ReferenceCheckRow& r = rows_[row];
  Pending p;
  p.row = row;
  p.def = &def;
  p.uuid = c.workload.uuid;
  p.seed = Rng::derive(o_.seed, def.name + "/" + c.workload.uuid);
  try {
    MaterializeOptions mo;
    mo.seed = p.seed;
    mo.dataset_root = o_.dataset_root;
    MaterializedInputs in = materialize_inputs(def, c.workload, mo);
    p.args.tensors = std::move(in.tensors);
    p.args.scalars = std::move(in.scalars);
  } catch (const Error& e) {
    ++r.left_out;
    r.left_out_reason = fmt::format("workload {}: inputs cannot be made: {}",
                                    c.workload.uuid.substr(0, 8), first_lines(e.what(), 1));
    return;
  }
  try {
    p.native = run_native(def, c.workload, p.args, o_, ordinal_, p.seed);
  } catch (const Error& e) {
    r.verdict = CheckVerdict::kError;
    r.reason = fmt::format("the native reference failed on workload {}: {}",
                           c.workload.uuid.substr(0, 8), first_lines(e.what(), 2));
    return;
  }
  r.synthesized += c.synthesized ? 1 : 0;
  p.bytes = c.bytes;
  pending_bytes_ += c.bytes;
  ++outstanding_[row];
  pending_.push_back(std::move(p));
}

void Checker::flush() {
  if (pending_.empty()) return;
  std::vector<PythonReferenceJob> jobs;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    jobs.push_back(
        PythonReferenceJob{.def = pending_[i].def,
                           .args = pending_[i].args,
                           .outputs = work_dir_ / fmt::format("python-{}.safetensors", i),
                           .seed = pending_[i].seed});
  }
  const PythonReferenceSettings settings{
      .python = python_,
      .bridge_dir = o_.python_bridge_dir,
      .work_dir = work_dir_,
      .device = device_.to_string(),
      .threads = o_.threads,
      .deadline = Clock::now() + std::chrono::hours(4),
      // Unsandboxed: the check runs the references of the definitions its user names, as a
      // development tool (docs/run.md, "The sandbox").
      .sandbox = {}};
  const std::vector<PythonReferenceResult> results = run_python_references(settings, jobs);
  std::vector<Pending> batch = std::move(pending_);
  pending_.clear();
  pending_bytes_ = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    judge(batch[i], results[i], jobs[i].outputs);
    std::error_code ec;
    fs::remove(jobs[i].outputs, ec);
    if (--outstanding_[batch[i].row] == 0 && prepared_[batch[i].row]) finish(batch[i].row);
  }
}

void Checker::judge(const Pending& p, const PythonReferenceResult& result, const fs::path& file) {
  ReferenceCheckRow& r = rows_[p.row];
  const std::string workload = p.uuid.substr(0, 8);
  if (!result.ok) {
    if (result.error.find("is not supported by this PyTorch") != std::string::npos) {
      ++r.left_out;  // float8 before torch 2.1: the comparison needs a newer torch
      const std::string line = last_line(result.error);
      const auto at = line.find("dtype ");
      const std::string code = at == std::string::npos
                                   ? "a dtype"
                                   : line.substr(at + 6, line.find(' ', at + 6) - at - 6);
      r.left_out_reason =
          fmt::format("torch {} has no {} (float8 needs torch >= 2.1)", python_.torch, code);
      return;
    }
    r.verdict = CheckVerdict::kError;
    r.reason = fmt::format("the PyTorch reference failed on workload {}: {}", workload,
                           last_line(result.error));
    return;
  }
  CallVerdict v;
  try {
    v = compare_references(*p.def, p.args, p.native, read_python_outputs(*p.def, file));
  } catch (const Error& e) {
    r.verdict = CheckVerdict::kError;
    r.reason = fmt::format("workload {}: {}", workload, first_lines(e.what(), 2));
    return;
  }
  ++r.workloads;
  // A sampling verdict's errors measure draws against a distribution, not two outputs.
  r.draws = policy_for(*p.def).kind == PolicyKind::kSampling;
  if (!r.draws) {
    r.max_abs_error = std::max(r.max_abs_error, v.max_abs_error);
    r.max_rel_error = std::max(r.max_rel_error, v.max_rel_error);
  }
  if (r.verdict == CheckVerdict::kError) return;
  if (v.passed()) {
    if (r.verdict == CheckVerdict::kSkipped) r.verdict = CheckVerdict::kAgree;
    return;
  }
  if (r.disagreeing++ == 0) {
    // NaN where the native reference has a number: how much of the disagreement it is.
    std::string counts;
    if (v.extra.contains("nan") && v.extra.contains("mismatches")) {
      counts = fmt::format(" ({} mismatches, {} of them NaN in PyTorch's output)",
                           v.extra.at("mismatches").dump(), v.extra.at("nan").dump());
    }
    r.reason = fmt::format("workload {}: {}{}: {}", workload, status_name(v.status), counts,
                           first_lines(v.log, 2));
  }
  r.verdict = CheckVerdict::kDisagree;
}

void Checker::finish(std::size_t row) {
  ReferenceCheckRow& r = rows_[row];
  if (r.verdict == CheckVerdict::kDisagree && r.workloads > 1) {
    r.reason = fmt::format("{} of {} workloads; {}", r.disagreeing, r.workloads, r.reason);
  }
  if (on_row_) on_row_(r);
}

}  // namespace

std::string_view check_verdict_name(CheckVerdict v) {
  switch (v) {
    case CheckVerdict::kAgree:
      return "agree";
    case CheckVerdict::kDisagree:
      return "DISAGREE";
    case CheckVerdict::kError:
      return "ERROR";
    case CheckVerdict::kSkipped:
      return "skipped";
  }
  return "?";
}

bool ReferenceCheckResult::all_agree() const {
  return std::none_of(rows.begin(), rows.end(), [](const ReferenceCheckRow& r) {
    return r.verdict == CheckVerdict::kDisagree || r.verdict == CheckVerdict::kError;
  });
}

ReferenceCheckResult check_references(const TraceSet& set,
                                      const std::vector<const Definition*>& defs,
                                      const ReferenceCheckOptions& options,
                                      const std::function<void(const ReferenceCheckRow&)>& on_row) {
  const auto t0 = Clock::now();
  std::string why;
  const std::optional<PythonRuntime> python =
      find_python(options.python, PythonUse::kReference, &why);
  if (!python) throw Error("python3", why);
  ReferenceCheckResult result;
  result.python = python->executable;
  result.torch_version = python->torch;
  ReferenceCheckOptions o = options;
  o.python_bridge_dir = python_bridge_dir(options.python_bridge_dir);
  Checker checker(set, o, *python, on_row);
  result.rows = checker.run(defs);
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return result;
}

}  // namespace fib::bench
