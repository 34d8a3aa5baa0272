// The CPU worker's targets (bench/worker/cpu_targets.h).
#include "bench/worker/cpu_targets.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "fib/bench/timing.h"

namespace fib::bench::detail {

namespace {
using Clock = std::chrono::steady_clock;
constexpr std::size_t kGuardBytes = 256;
constexpr unsigned char kGuardByte = 0xFD;

// ---- Guarded, poisoned host buffers --------------------------------------------------------
// Guard regions before and after the data; the poison changes from call to call: an element the
// solution does not write keeps the poison (NaN for floats, a sentinel for integers), a byte
// written past either end breaks a guard.
class HostBuffer : public OutputBuffer {
 public:
  HostBuffer(DType dtype, const Shape& shape) : OutputBuffer(dtype, shape, FIB_DEVICE_CPU, 0) {
    const std::size_t total = bytes() + 2 * kGuardBytes + kTensorAlignment;
    storage_ = std::make_unique<std::byte[]>(total);
    auto base = reinterpret_cast<std::uintptr_t>(storage_.get()) + kGuardBytes;
    base = (base + kTensorAlignment - 1) & ~(kTensorAlignment - 1);
    set_data(reinterpret_cast<std::byte*>(base));
    std::memset(data() - kGuardBytes, kGuardByte, kGuardBytes);
    std::memset(data() + bytes(), kGuardByte, kGuardBytes);
  }

  void poison(std::uint64_t k) override {
    const Poison p = poison_for(dtype(), k);
    fill(&p.pattern, static_cast<std::size_t>(p.width));
  }

  // Offset of the first corrupted guard byte relative to the start of the data (negative:
  // before it), or nullopt when both guards are intact.
  std::optional<std::int64_t> guard_violation() const {
    const std::byte* d = data();
    for (std::size_t i = 0; i < kGuardBytes; ++i) {
      if (static_cast<unsigned char>(d[bytes() + i]) != kGuardByte) {
        return static_cast<std::int64_t>(bytes() + i);
      }
    }
    for (std::size_t i = kGuardBytes; i > 0; --i) {
      if (static_cast<unsigned char>(d[-static_cast<std::ptrdiff_t>(i)]) != kGuardByte) {
        return -static_cast<std::int64_t>(i);
      }
    }
    return std::nullopt;
  }

 private:
  void fill(const void* pattern, std::size_t width) {
    const std::size_t n = bytes();
    if (n == 0) return;
    std::memcpy(data(), pattern, std::min(width, n));
    std::size_t done = std::min(width, n);
    while (done < n) {  // doubling copies: a memset-speed fill for multi-byte patterns
      const std::size_t step = std::min(done, n - done);
      std::memcpy(data() + done, data(), step);
      done += step;
    }
  }

  std::unique_ptr<std::byte[]> storage_;
};

std::unique_ptr<OutputBuffer> make_host_buffer(DType dtype, const Shape& shape) {
  return std::make_unique<HostBuffer>(dtype, shape);
}

// Whether cycling through the input sets evicts each from the caches before it comes round
// again: the pool is at least 4x the last-level cache this core reaches. Then inputs need no
// per-call flush (a flush costs about 20 us per MiB of inputs).
bool pool_evicts_itself(const std::vector<InputSet>& sets) {
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

  static void watch(const InputSet& in) {
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

// The set's inputs in place: the mapping is read-only; the ABI's pointer type is not, as C has
// no other.
InputViews host_views(const InputSet& in) {
  InputViews v;
  for (const auto& [name, t] : in.tensors) {
    v.tensors.emplace(name, contiguous_view(const_cast<void*>(t.raw()), t.dtype(), t.shape()));
  }
  v.scalars = &in.scalars;
  return v;
}

}  // namespace

void install_input_fault_handler() { InputGuard::install(); }

// ---- A solution under test --------------------------------------------------------------------
// Inputs are passed in place: views into the read-only mapping of the input-set file, a
// different set (and address) on every call while the pool lasts. Nothing is copied per call,
// a write to an input faults (see InputGuard), and the sets' order in the file is shuffled, so
// a set's address does not reveal the checked call. Cold caches: once the whole pool is several
// times the last-level cache, cycling through it evicts each set before it comes round again;
// a smaller pool is flushed line by line.
HostSolutionTarget::HostSolutionTarget(const Definition& def, const AxisValues& var, InputSets sets,
                                       CallBackend& backend, bool dps)
    : sets_(std::move(sets)),
      call_(def, var, backend, dps, &make_host_buffer, /*poison_ahead=*/false),
      flush_inputs_(!pool_evicts_itself(*sets_)) {}

void HostSolutionTarget::prepare(int set, std::uint64_t call, bool flush) {
  const InputSet& in = sets_->at(static_cast<std::size_t>(set));
  InputGuard::watch(in);
  const auto flush0 = Clock::now();
  if (flush && flush_inputs_) {
    for (const auto& [name, t] : in.tensors) flush_from_cache(t.raw(), t.nbytes());
  }
  call_.begin(call);
  if (flush) {
    for (const GuardedBuffer& g : call_.guarded())
      flush_from_cache(g.buffer->data(), g.buffer->bytes());
  }
  args_ = build_arguments(call_.definition(), host_views(in), call_.output_views());
  if (flush) {
    flush_fence();
    flush_ms_ += std::chrono::duration<double, std::milli>(Clock::now() - flush0).count();
  }
}

bool HostSolutionTarget::call(std::uint64_t call, Failure* failure) {
  if (auto error = call_.invoke(args_, nullptr)) {
    *failure = Failure{"error", std::move(*error), call};
    return false;
  }
  return true;
}

bool HostSolutionTarget::verify(std::uint64_t call, Failure* failure) {
  call_.end();
  for (const GuardedBuffer& g : call_.guarded()) {
    // Every buffer of this target is a HostBuffer (make_host_buffer).
    if (auto off = static_cast<const HostBuffer*>(g.buffer)->guard_violation()) {
      *failure = Failure{"guard", guard_message(g, *off), call};
      return false;
    }
  }
  if (auto m = call_.foreign_result()) {
    *failure = Failure{"results", std::move(*m), call};
    return false;
  }
  return true;
}

std::vector<std::pair<std::string, Tensor>> HostSolutionTarget::outputs() {
  std::vector<std::pair<std::string, Tensor>> out;
  const Definition& def = call_.definition();
  for (std::size_t o = 0; o < def.outputs.size(); ++o) {
    const ProducedOutput p = call_.produced(o);
    Tensor t(p.dtype, p.shape);
    if (t.nbytes() > 0) std::memcpy(t.raw(), p.data, t.nbytes());
    out.emplace_back(def.outputs[o].name, std::move(t));
  }
  return out;
}

// ---- A native reference ---------------------------------------------------------------------
HostReferenceTarget::HostReferenceTarget(const Definition& def, const AxisValues& var,
                                         InputSets sets, unsigned threads,
                                         std::vector<std::uint64_t> seeds, Json sampling_extra)
    : def_(def),
      var_(var),
      sets_(std::move(sets)),
      threads_(threads),
      seeds_(std::move(seeds)),
      sampling_extra_(std::move(sampling_extra)),
      flush_inputs_(!pool_evicts_itself(*sets_)) {}  // the same discipline as the solution's

void HostReferenceTarget::prepare(int set, std::uint64_t, bool flush) {
  set_ = set;
  if (!flush || !flush_inputs_) return;
  for (const auto& [name, t] : sets_->at(static_cast<std::size_t>(set)).tensors) {
    flush_from_cache(t.raw(), t.nbytes());
  }
  flush_fence();
}

bool HostReferenceTarget::call(std::uint64_t, Failure* failure) {
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

std::vector<std::pair<std::string, Tensor>> HostReferenceTarget::outputs() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& spec : def_.outputs) out.emplace_back(spec.name, out_.at(spec.name));
  append_set_reference_extras(def_, sets_->at(static_cast<std::size_t>(set_)), sampling_extra_,
                              &out);
  return out;
}

}  // namespace fib::bench::detail
