// The worker's side (`fib worker`): loads solution libraries, runs the call schedule the
// orchestrator sends (warmup, timed calls with one checked call hidden among them, sampling
// draws), and reports raw facts: latency samples, the outputs of checked calls (written to
// files the orchestrator compares against the reference, which never enters this process),
// and contract violations (a guard region overwritten, an input modified, an error returned).
// The same loop runs the native references in a separate worker that never loads a solution.
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "bench/worker/input_sets.h"
#include "bench/worker/protocol.h"
#include "bench/worker/worker_common.h"
#include "fib/bench/compare.h"
#include "fib/bench/timing.h"
#include "fib/bench/worker.h"
#include "fib/reference/reference.h"
#include "fib/tensor/safetensors.h"
#include "fib/trace/definition.h"
#include "fib/trace/diagnostics.h"

namespace fib::bench {

namespace {
using Clock = std::chrono::steady_clock;
using namespace detail;
constexpr std::size_t kGuardBytes = 256;
constexpr unsigned char kGuardByte = 0xFD;

// ---- Guarded, poisoned buffers ------------------------------------------------------------
// Output storage with guard regions before and after, refilled with a changing poison pattern
// before every call: an element the solution does not write keeps the poison (NaN for floats,
// a sentinel for integers), a byte written past either end breaks a guard.
class GuardedBuffer {
 public:
  GuardedBuffer(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
    std::uint64_t numel = 1;
    for (auto d : shape_) numel *= static_cast<std::uint64_t>(d);
    numel_ = static_cast<std::int64_t>(numel);
    bytes_ = static_cast<std::size_t>(dtype_storage_bytes(dtype_, numel).value_or(0));
    const std::size_t total = bytes_ + 2 * kGuardBytes + kTensorAlignment;
    storage_ = std::make_unique<std::byte[]>(total);
    auto base = reinterpret_cast<std::uintptr_t>(storage_.get()) + kGuardBytes;
    base = (base + kTensorAlignment - 1) & ~(kTensorAlignment - 1);
    data_ = reinterpret_cast<std::byte*>(base);
    std::memset(data_ - kGuardBytes, kGuardByte, kGuardBytes);
    std::memset(data_ + bytes_, kGuardByte, kGuardBytes);
  }
  std::byte* data() { return data_; }
  std::size_t bytes() const { return bytes_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }

  // Fills the buffer with the poison of call `k`; returns the integer sentinel used (0 for
  // float formats, whose poison is NaN).
  std::int64_t poison(std::uint64_t k) {
    const Poison p = poison_for(dtype_, k);
    fill(&p.pattern, static_cast<std::size_t>(p.width));
    return p.sentinel;
  }

  // Offset of the first corrupted guard byte relative to the start of the data (negative:
  // before it), or nullopt when both guards are intact.
  std::optional<std::int64_t> guard_violation() const {
    for (std::size_t i = 0; i < kGuardBytes; ++i) {
      if (static_cast<unsigned char>(data_[bytes_ + i]) != kGuardByte) {
        return static_cast<std::int64_t>(bytes_ + i);
      }
    }
    for (std::size_t i = kGuardBytes; i > 0; --i) {
      if (static_cast<unsigned char>(data_[-static_cast<std::ptrdiff_t>(i)]) != kGuardByte) {
        return -static_cast<std::int64_t>(i);
      }
    }
    return std::nullopt;
  }

  Tensor to_tensor() const {
    Tensor t(dtype_, shape_);
    if (bytes_ > 0) std::memcpy(t.raw(), data_, bytes_);
    return t;
  }

  fib_tensor view() { return contiguous_view(data_, dtype_, shape_); }

 private:
  void fill(const void* pattern, std::size_t width) {
    if (bytes_ == 0) return;
    std::memcpy(data_, pattern, std::min(width, bytes_));
    std::size_t done = std::min(width, bytes_);
    while (done < bytes_) {  // doubling copies: a memset-speed fill for multi-byte patterns
      const std::size_t n = std::min(done, bytes_ - done);
      std::memcpy(data_ + done, data_, n);
      done += n;
    }
  }

  DType dtype_;
  Shape shape_;
  std::int64_t numel_ = 0;
  std::size_t bytes_ = 0;
  std::unique_ptr<std::byte[]> storage_;
  std::byte* data_ = nullptr;
};

// One callable thing (a solution or a reference) under the schedule.
class Target {
 public:
  virtual ~Target() = default;
  // Prepares call buffers for input set `set` (copy, poison, flush) outside the timed region.
  virtual void prepare(int set, std::uint64_t call, bool flush) = 0;
  // The timed call. Returns false with *failure filled on an error.
  virtual bool call(std::uint64_t call, Failure* failure) = 0;
  // Checks after the call (guards, inputs), outside the timed region.
  virtual bool verify(std::uint64_t call, Failure* failure) = 0;
  // The outputs of the last call (for checked calls and sampling draws).
  virtual std::vector<std::pair<std::string, Tensor>> outputs() = 0;
  // Integer poison sentinels of the last call, by output (for "never written" messages).
  virtual Json poison() const { return Json::object(); }
};

Json run_schedule(Target& target, const Schedule& s, std::optional<Failure>* failure) {
  Json trials = Json::array();
  std::uint64_t call = 0;
  auto one_call = [&](int set, double* ms, bool flush) -> bool {
    target.prepare(set, call, flush && s.flush_caches);
    Failure f;
    const auto t0 = Clock::now();
    const bool ok = target.call(call, &f);
    const auto t1 = Clock::now();
    if (ok && !target.verify(call, &f)) {
      *failure = f;
      return false;
    }
    if (!ok) {
      *failure = f;
      return false;
    }
    if (ms) *ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    ++call;
    return true;
  };
  for (const TrialPlan& plan : s.trials) {
    double warmup_ms = 0;
    int warmup_calls = 0;
    for (int set : plan.warmup) {
      double ms = 0;
      // Warmup calls are not timed, so their caches need no flushing.
      if (!one_call(set, &ms, /*flush=*/false)) return trials;
      warmup_ms += ms;
      ++warmup_calls;
      if (plan.max_warmup_seconds > 0 && warmup_ms >= 1000 * plan.max_warmup_seconds) break;
    }
    std::vector<double> samples;
    std::string stopped_by = "iterations";
    Json checked = nullptr;
    const auto start = Clock::now();
    const std::size_t must_reach = std::max<std::size_t>(
        s.noise.min_samples, static_cast<std::size_t>(plan.check_position + 1));
    for (std::size_t i = 0; i < plan.timed.size(); ++i) {
      double ms = 0;
      if (!one_call(plan.timed[i], &ms, /*flush=*/true)) return trials;
      samples.push_back(ms);
      if (static_cast<int>(i) == plan.check_position && !plan.check_output.empty()) {
        write_checked_outputs(plan.check_output, target.outputs());
        checked =
            Json{{"call", call - 1}, {"file", plan.check_output}, {"poison", target.poison()}};
      }
      if (s.fixed_iterations || samples.size() < must_reach) continue;
      if (precise_enough(samples, s.noise)) {
        stopped_by = "noise";
        break;
      }
      if (plan.max_seconds > 0 &&
          std::chrono::duration<double>(Clock::now() - start).count() > plan.max_seconds) {
        stopped_by = "time_cap";
        break;
      }
    }
    trials.push_back(Json{{"samples_ms", samples},
                          {"warmup_ms", warmup_ms},
                          {"warmup_calls", warmup_calls},
                          {"stopped_by", stopped_by},
                          {"checked", checked}});
  }
  return trials;
}

// Whether cycling through the input sets evicts each from the caches before it comes round
// again: the pool is at least 4x the last-level cache this core reaches. Then inputs need no
// per-call flush (a flush costs about 20 us per MiB of inputs).
bool pool_evicts_itself(const std::vector<detail::InputSet>& sets) {
  std::size_t pool_bytes = 0;
  for (const auto& set : sets) {
    for (const auto& [name, t] : set.tensors) pool_bytes += t.nbytes();
  }
  return pool_bytes >= 4 * last_level_cache_bytes();
}

// ---- Inputs are read-only ---------------------------------------------------------------------
// A solution gets its inputs in place, in a read-only mapping, so writing one faults. The
// SIGSEGV handler (on its own stack, async-signal-safe: fixed arrays and write(2) only) looks
// the faulting address up among the current call's inputs, names the input on stderr — the
// orchestrator puts that line at the front of the verdict — and lets the signal end the worker.
class InputGuard {
 public:
  static void install() {
    static bool installed = false;
    if (installed) return;
    installed = true;
    static std::vector<char> alt(1 << 16);
    stack_t ss{};
    ss.ss_sp = alt.data();
    ss.ss_size = alt.size();
    ::sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_sigaction = &InputGuard::on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;  // one look, then the default action
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, nullptr);
    ::sigaction(SIGBUS, &sa, nullptr);
  }

  static void watch(const detail::InputSet& in) {
    count_ = 0;
    int n = 0;
    for (const auto& [name, t] : in.tensors) {
      if (n == kMaxRanges) break;
      Range& r = ranges_[n++];
      r.begin = reinterpret_cast<std::uintptr_t>(t.raw());
      r.end = r.begin + t.nbytes();
      const std::size_t len = std::min(name.size(), sizeof r.name - 1);
      std::memcpy(r.name, name.data(), len);
      r.name[len] = '\0';
    }
    count_ = n;
  }

 private:
  struct Range {  // static storage: zero-initialized
    std::uintptr_t begin, end;
    char name[128];
  };
  static constexpr int kMaxRanges = 64;
  static inline Range ranges_[kMaxRanges];
  static inline volatile sig_atomic_t count_ = 0;

  static void put(const char* s) { (void)!::write(2, s, std::strlen(s)); }
  static void put_number(std::uintptr_t v) {
    char buf[24];
    int i = sizeof buf;
    buf[--i] = '\0';
    do {
      buf[--i] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v > 0 && i > 0);
    put(buf + i);
  }

  static void on_fault(int, siginfo_t* info, void*) {
    const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
    for (int i = 0; i < count_; ++i) {
      const Range& r = ranges_[i];
      if (addr >= r.begin && addr < r.end) {
        put("\nfib: the solution modified its input '");
        put(r.name);
        put("' (a write to byte ");
        put_number(addr - r.begin);
        put(" of ");
        put_number(r.end - r.begin);
        put("; inputs are read-only)\n");
        break;
      }
    }
    // Returning re-runs the faulting access under the default action: the worker dies of the
    // signal, as any crash does.
  }
};

// ---- A solution under test --------------------------------------------------------------------

class SolutionTarget : public Target {
 public:
  SolutionTarget(const Definition& def, const AxisValues& var, InputSets sets,
                 const LoadedLibrary& lib, bool dps)
      : def_(def), sets_(std::move(sets)), lib_(lib), dps_(dps) {
    const auto bound = def.bind_axes(var);
    if (!bound) throw Error("request", "the workload does not bind every var axis");
    // Inputs are passed in place: views into the read-only mapping of the input-set file, a
    // different set (and address) on every call while the pool lasts. Nothing is copied per
    // call, a write to an input faults (see InputGuard), and the sets' order in the file is
    // shuffled, so a set's address does not reveal the checked call.
    // Cold caches: once the whole pool is several times the last-level cache, cycling through
    // it evicts each set before it comes round again; a smaller pool is flushed line by line.
    flush_inputs_ = !pool_evicts_itself(*sets_);
    if (dps_) {
      for (const auto& spec : def.outputs) {
        const auto shape = def.concrete_shape(spec, *bound);
        if (!shape) throw Error("request", fmt::format("cannot size output '{}'", spec.name));
        dps_outputs_.emplace_back(spec.dtype, *shape);
      }
    }
    allocator_.context = this;
    allocator_.allocate = &SolutionTarget::allocate_thunk;
  }

  void prepare(int set, std::uint64_t call, bool flush) override {
    current_set_ = set;
    const InputSet& in = sets_->at(static_cast<std::size_t>(set));
    InputGuard::watch(in);
    const auto flush0 = Clock::now();
    if (flush && flush_inputs_) {
      for (const auto& [name, t] : in.tensors) flush_from_cache(t.raw(), t.nbytes());
    }
    poison_.clear();
    for (std::size_t i = 0; i < dps_outputs_.size(); ++i) {
      const std::int64_t sentinel = dps_outputs_[i].poison(call);
      if (dtype_is_integer(dps_outputs_[i].dtype()) || dps_outputs_[i].dtype() == DType::kBool ||
          dps_outputs_[i].dtype() == DType::kFloat4E2M1) {
        poison_[def_.outputs[i].name] = sentinel;
      }
      if (flush) flush_from_cache(dps_outputs_[i].data(), dps_outputs_[i].bytes());
    }
    vr_used_ = 0;
    call_index_ = call;
    build_args(in);
    if (flush) flush_fence();
    if (flush)
      flush_ms_ += std::chrono::duration<double, std::milli>(Clock::now() - flush0).count();
  }
  double cache_flush_ms() const { return flush_ms_; }

  bool call(std::uint64_t, Failure* failure) override {
    error_[0] = '\0';
    fib_call c{};
    c.abi_version = FIB_SOLUTION_ABI_VERSION;
    c.destination_passing = dps_ ? 1 : 0;
    c.args = args_.data();
    c.num_args = static_cast<std::int32_t>(args_.size());
    results_.assign(def_.outputs.size() + 1, fib_tensor{});
    c.results = results_.data();
    c.num_results = static_cast<std::int32_t>(results_.size());
    c.allocator = &allocator_;
    c.error = error_;
    c.error_capacity = sizeof error_;
    const int rc = lib_.entry(&c);
    if (rc != 0) {
      failure->kind = "error";
      failure->message = error_[0] ? std::string(error_) : fmt::format("returned {}", rc);
      return false;
    }
    return true;
  }

  bool verify(std::uint64_t call, Failure* failure) override {
    failure->call = call;
    for (std::size_t i = 0; i < dps_outputs_.size(); ++i) {
      if (auto off = dps_outputs_[i].guard_violation()) {
        failure->kind = "guard";
        failure->message = guard_message(def_.outputs[i].name, dps_outputs_[i], *off);
        return false;
      }
    }
    for (std::size_t i = 0; i < vr_used_; ++i) {
      if (auto off = vr_buffers_[i]->guard_violation()) {
        failure->kind = "guard";
        failure->message =
            guard_message(fmt::format("allocation #{}", i + 1), *vr_buffers_[i], *off);
        return false;
      }
    }
    if (!dps_) return check_results(failure);
    return true;
  }

  std::vector<std::pair<std::string, Tensor>> outputs() override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (std::size_t i = 0; i < def_.outputs.size(); ++i) {
      if (dps_) {
        out.emplace_back(def_.outputs[i].name, dps_outputs_[i].to_tensor());
      } else {
        out.emplace_back(def_.outputs[i].name, result_tensor(results_[i]));
      }
    }
    return out;
  }

  Json poison() const override {
    Json j = Json::object();
    for (const auto& [k, v] : poison_) j[k] = v;
    return j;
  }

 private:
  static std::string guard_message(const std::string& what, const GuardedBuffer& b,
                                   std::int64_t off) {
    if (off < 0) {
      return fmt::format("the solution wrote before the start of {} ({} bytes before it)", what,
                         -off);
    }
    return fmt::format("the solution wrote past the end of {} (byte {} of a {}-byte buffer)", what,
                       off, b.bytes());
  }

  void build_args(const InputSet& in) {
    args_.clear();
    for (const auto& spec : def_.inputs) {
      fib_value v{};
      if (spec.is_scalar()) {
        v = scalar_value(spec, in.scalars);
      } else {
        auto it = in.tensors.find(spec.name);
        if (it == in.tensors.end()) {
          v.kind = FIB_VALUE_ABSENT;
        } else {
          v.kind = FIB_VALUE_TENSOR;
          // The mapping is read-only; the ABI's pointer type is not, as C has no other.
          v.tensor = contiguous_view(const_cast<void*>(it->second.raw()), it->second.dtype(),
                                     it->second.shape());
        }
      }
      args_.push_back(v);
    }
    for (auto& b : dps_outputs_) {
      fib_value v{};
      v.kind = FIB_VALUE_TENSOR;
      v.tensor = b.view();
      args_.push_back(v);
    }
  }

  static int allocate_thunk(void* ctx, std::int32_t dtype, const std::int64_t* shape,
                            std::int32_t ndim, fib_tensor* out) {
    return static_cast<SolutionTarget*>(ctx)->allocate(dtype, shape, ndim, out);
  }

  int allocate(std::int32_t dtype, const std::int64_t* shape, std::int32_t ndim, fib_tensor* out) {
    if (dtype < 0 || dtype > FIB_DTYPE_BOOL || ndim < 0 || ndim > FIB_MAX_RANK) return 1;
    Shape s(shape, shape + ndim);
    for (auto d : s) {
      if (d < 0) return 1;
    }
    const auto dt = static_cast<DType>(dtype);
    // Reuse the buffer at the same position of the previous call when it fits, so addresses
    // repeat from call to call; it is poisoned again either way.
    if (vr_used_ < vr_buffers_.size() && vr_buffers_[vr_used_]->dtype() == dt &&
        vr_buffers_[vr_used_]->shape() == s) {
    } else {
      auto b = std::make_unique<GuardedBuffer>(dt, s);
      if (vr_used_ < vr_buffers_.size()) {
        vr_buffers_[vr_used_] = std::move(b);
      } else {
        vr_buffers_.push_back(std::move(b));
      }
    }
    GuardedBuffer& b = *vr_buffers_[vr_used_++];
    b.poison(call_index_);
    *out = b.view();
    return 0;
  }

  bool check_results(Failure* failure) {
    for (std::size_t i = 0; i < def_.outputs.size(); ++i) {
      const fib_tensor& r = results_[i];
      bool ours = false;
      for (std::size_t k = 0; k < vr_used_; ++k) ours |= r.data == vr_buffers_[k]->data();
      if (!ours) {
        failure->kind = "results";
        failure->message = fmt::format(
            "output '{}' (result #{}) was not allocated with fib::allocate during this call",
            def_.outputs[i].name, i + 1);
        return false;
      }
    }
    return true;
  }

  Tensor result_tensor(const fib_tensor& r) const {
    const auto dt = static_cast<DType>(r.dtype);
    Shape s(r.shape, r.shape + r.ndim);
    Tensor t(dt, s);
    if (t.nbytes() > 0) std::memcpy(t.raw(), r.data, t.nbytes());
    return t;
  }

  const Definition& def_;
  InputSets sets_;
  LoadedLibrary lib_;
  bool dps_;
  bool flush_inputs_ = true;
  double flush_ms_ = 0;  // time in cache flushes (with the output poisoning between them)
  std::vector<GuardedBuffer> dps_outputs_;
  std::vector<std::unique_ptr<GuardedBuffer>> vr_buffers_;
  std::size_t vr_used_ = 0;
  std::vector<fib_value> args_;
  std::vector<fib_tensor> results_;
  fib_allocator allocator_{};
  std::map<std::string, std::int64_t> poison_;
  std::uint64_t call_index_ = 0;
  int current_set_ = 0;
  char error_[4096] = {};
};

// ---- A native reference ---------------------------------------------------------------------
class ReferenceTarget : public Target {
 public:
  ReferenceTarget(const Definition& def, const AxisValues& var, InputSets sets, unsigned threads,
                  std::vector<std::uint64_t> seeds, Json sampling_extra)
      : def_(def),
        var_(var),
        sets_(std::move(sets)),
        threads_(threads),
        seeds_(std::move(seeds)),
        sampling_extra_(std::move(sampling_extra)) {
    flush_inputs_ = !pool_evicts_itself(*sets_);  // the same discipline as the solution's
  }

  void prepare(int set, std::uint64_t, bool flush) override {
    set_ = set;
    if (!flush || !flush_inputs_) return;
    for (const auto& [name, t] : sets_->at(static_cast<std::size_t>(set)).tensors) {
      flush_from_cache(t.raw(), t.nbytes());
    }
    flush_fence();
  }
  bool call(std::uint64_t, Failure* failure) override {
    const InputSet& in = sets_->at(static_cast<std::size_t>(set_));
    reference::Arguments args;
    args.tensors = in.tensors;
    args.scalars = in.scalars;
    try {
      out_ = reference::run(def_, var_, args, threads_, seeds_.at(static_cast<std::size_t>(set_)));
    } catch (const std::exception& e) {
      failure->kind = "error";
      failure->message = e.what();
      return false;
    }
    return true;
  }
  bool verify(std::uint64_t, Failure*) override { return true; }
  std::vector<std::pair<std::string, Tensor>> outputs() override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& spec : def_.outputs) out.emplace_back(spec.name, out_.at(spec.name));
    append_sampling_expectation(def_, sets_->at(static_cast<std::size_t>(set_)), sampling_extra_,
                                &out);
    return out;
  }

 private:
  const Definition& def_;
  AxisValues var_;
  InputSets sets_;
  unsigned threads_;
  std::vector<std::uint64_t> seeds_;
  Json sampling_extra_;
  bool flush_inputs_ = true;
  int set_ = 0;
  reference::Outputs out_;
};

Json handle_evaluate(WorkerState& st, const Json& req) {
  const Definition def = parse_definition(req.at("definition"));
  const AxisValues var = parse_axes(req.at("var_axes"));
  const Json& sol = req.at("solution");
  std::string error;
  const LoadedLibrary lib = load_library(st, sol.at("library").get<std::string>(),
                                         sol.at("symbol").get<std::string>(), &error);
  if (lib.entry == nullptr) return Json{{"ok", false}, {"load_error", error}};
  const Json reply_base = Json{{"ok", true}, {"signature", lib.signature}};
  InputGuard::install();
  const auto load_t0 = Clock::now();
  SolutionTarget target(def, var, load_sets(st, req.at("sets")), lib, sol.value("dps", true));
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_t0).count();
  const Schedule schedule = parse_schedule(req.at("schedule"));
  std::optional<Failure> failure;
  Json reply = reply_base;
  reply["load_inputs_ms"] = load_ms;
  const auto schedule_t0 = Clock::now();
  reply["trials"] = run_schedule(target, schedule, &failure);
  reply["schedule_ms"] =
      std::chrono::duration<double, std::milli>(Clock::now() - schedule_t0).count();
  reply["cache_flush_ms"] = target.cache_flush_ms();
  if (!failure && req.contains("sampling")) {
    // Many draws on one input set: the distribution check needs them.
    const Json& sp = req["sampling"];
    const int set = sp.at("set").get<int>();
    const int draws = sp.at("draws").get<int>();
    std::vector<std::vector<Tensor>> per_output(def.outputs.size());
    std::uint64_t call = 1u << 30;
    for (int d = 0; d < draws && !failure; ++d, ++call) {
      target.prepare(set, call, false);
      Failure f;
      if (!target.call(call, &f) || !target.verify(call, &f)) {
        failure = f;
        break;
      }
      auto outs = target.outputs();
      for (std::size_t i = 0; i < outs.size(); ++i) per_output[i].push_back(outs[i].second);
    }
    if (!failure && draws > 0) {
      write_stacked_draws(sp.at("output").get<std::string>(), def, per_output, draws);
      reply["sampling"] = Json{{"file", sp.at("output")}, {"draws", draws}};
    }
  }
  if (failure) reply["failure"] = failure_json(*failure);
  return reply;
}

Json handle_reference(WorkerState& st, const Json& req) {
  const Definition def = parse_definition(req.at("definition"));
  const AxisValues var = parse_axes(req.at("var_axes"));
  std::string why;
  const reference::Kernel* k = reference::find_kernel(def, &why);
  if (k == nullptr) return Json{{"ok", false}, {"error", why}};
  InputSets sets = load_sets(st, req.at("sets"));
  std::vector<std::uint64_t> seeds = req.at("seeds").get<std::vector<std::uint64_t>>();
  ReferenceTarget target(def, var, std::move(sets), req.value("threads", 0u), std::move(seeds),
                         req.value("eval_extra", Json::object()));
  std::optional<Failure> failure;
  Json reply{{"ok", true}, {"kernel", std::string(k->id())}};
  reply["trials"] = run_schedule(target, parse_schedule(req.at("schedule")), &failure);
  if (failure) {
    reply["ok"] = false;
    reply["error"] = failure->message;
  }
  return reply;
}

// Whether a request is for a CUDA device ("device": "cuda:N"); CPU otherwise.
bool on_gpu(const Json& req) {
  return req.value("device", std::string("cpu")).rfind("cuda", 0) == 0;
}

Json handle(WorkerState& st, const Json& req) {
  const std::string cmd = req.value("cmd", std::string());
  if (cmd == "hello")
    return Json{{"ok", true}, {"pid", ::getpid()}, {"abi", FIB_SOLUTION_ABI_VERSION}};
  if ((cmd == "evaluate" || cmd == "reference") && on_gpu(req)) {
#ifdef FIB_HAVE_CUDA
    return cmd == "evaluate" ? gpu_evaluate(st, req) : gpu_reference(st, req);
#else
    return Json{{"ok", false}, {"error", "this fib was built without the CUDA path"}};
#endif
  }
  if (cmd == "evaluate") return handle_evaluate(st, req);
  if (cmd == "reference") return handle_reference(st, req);
  return Json{{"ok", false}, {"error", fmt::format("unknown command '{}'", cmd)}};
}
}  // namespace

int worker_main(int channel_fd) {
  // Move the channel away from the low descriptors a solution might guess or clobber.
  const int fd = ::fcntl(channel_fd, F_DUPFD_CLOEXEC, 512 + (::getpid() % 256));
  if (fd < 0) return 3;
  ::close(channel_fd);
  ::signal(SIGPIPE, SIG_IGN);
  detail::WorkerState state;
  std::string text;
  while (detail::read_message(fd, &text) == detail::ReadResult::kMessage) {
    const Json req = Json::parse(text, nullptr, false);
    if (req.is_discarded()) return 4;
    if (req.value("cmd", std::string()) == "exit") return 0;
    Json reply;
    try {
      reply = handle(state, req);
    } catch (const std::bad_alloc&) {
      reply = Json{{"ok", false}, {"error", "out of memory in the worker"}, {"oom", true}};
    } catch (const std::exception& e) {
      reply = Json{{"ok", false}, {"error", e.what()}};
    }
    try {
      detail::write_message(fd, reply.dump());
    } catch (const std::exception&) {
      return 5;
    }
    // After a sticky CUDA error the context is unusable: the orchestrator starts a new worker.
    if (state.exit_after_reply) return 6;
  }
  return 0;
}

}  // namespace fib::bench
