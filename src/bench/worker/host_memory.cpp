// The CPU worker's memory discipline (bench/worker/host_memory.h).
#include "host_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "fib/base/diagnostics.h"

namespace fib::bench::detail {

namespace {
constexpr unsigned char kGuardByte = 0xFD;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
std::size_t page_bytes() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

// ---- What a faulting write hit -----------------------------------------------------------------
// The handler runs on its own stack and is async-signal-safe: it reads fixed arrays filled
// outside it and writes with write(2). It names what the address belongs to on stderr (the
// orchestrator puts that line at the front of the verdict) and lets the signal end the worker.
struct Range {                // static storage: zero-initialized
  std::uintptr_t begin, end;  // the input's bytes, or the output's whole mapping
  std::uintptr_t data, data_end;
  bool used;
  char name[128];
};
constexpr int kMaxInputs = 64;
constexpr int kMaxOutputs = 256;
Range g_inputs[kMaxInputs];
volatile sig_atomic_t g_input_count = 0;
Range g_outputs[kMaxOutputs];

void copy_name(char (&dst)[128], const std::string& name) {
  const std::size_t len = std::min(name.size(), sizeof dst - 1);
  std::memcpy(dst, name.data(), len);
  dst[len] = '\0';
}

void put(const char* s) { (void)!::write(2, s, std::strlen(s)); }
void put_number(std::uintptr_t v) {
  char buf[24];
  int i = sizeof buf;
  buf[--i] = '\0';
  do {
    buf[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && i > 0);
  put(buf + i);
}

void name_output_fault(const Range& r, std::uintptr_t addr) {
  if (addr >= r.data_end) {
    put("\nfib: the solution wrote past the end of ");
    put(r.name);
    put(" (byte ");
    put_number(addr - r.data);
    put(" of a ");
    put_number(r.data_end - r.data);
    put("-byte buffer, in the inaccessible pages after it)\n");
  } else {
    put("\nfib: the solution wrote before the start of ");
    put(r.name);
    put(" (");
    put_number(r.data - addr);
    put(" bytes before it, in the inaccessible pages there)\n");
  }
}

void on_fault(int, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (int i = 0; i < g_input_count; ++i) {
    const Range& r = g_inputs[i];
    if (addr >= r.begin && addr < r.end) {
      put("\nfib: the solution modified its input '");
      put(r.name);
      put("' (a write to byte ");
      put_number(addr - r.begin);
      put(" of ");
      put_number(r.end - r.begin);
      put("; inputs are read-only)\n");
      return;
    }
  }
  for (const Range& r : g_outputs) {
    if (r.used && addr >= r.begin && addr < r.end) {
      name_output_fault(r, addr);
      return;
    }
  }
  // Returning re-runs the faulting access under the default action: the worker dies of the
  // signal, as any crash does.
}

int register_output(std::uintptr_t begin, std::uintptr_t end, std::uintptr_t data,
                    std::uintptr_t data_end) {
  for (int i = 0; i < kMaxOutputs; ++i) {
    Range& r = g_outputs[i];
    if (r.used) continue;
    r.begin = begin;
    r.end = end;
    r.data = data;
    r.data_end = data_end;
    copy_name(r.name, "a buffer fib::allocate handed out");
    r.used = true;
    return i;
  }
  return -1;  // more live buffers than slots: a fault there is a plain crash
}

Range* output_range(std::uintptr_t data) {
  for (Range& r : g_outputs) {
    if (r.used && r.data == data) return &r;
  }
  return nullptr;
}

// ---- Retired buffers ----------------------------------------------------------------------------
// Kept mapped (writable zero pages, nothing resident until written) so that their addresses are
// not given out again while a late writer may still hold them; the oldest go once they exceed
// the quarantine.
class Quarantine {
 public:
  void retire(std::byte* p, std::size_t n) {
    void* m = ::mmap(p, n, PROT_READ | PROT_WRITE,
                     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      ::munmap(p, n);
      return;
    }
    held_.emplace_back(p, n);
    bytes_ += n;
    while (bytes_ > HostBuffer::kQuarantineBytes && held_.size() > 1) {
      ::munmap(held_.front().first, held_.front().second);
      bytes_ -= held_.front().second;
      held_.pop_front();
    }
  }

 private:
  std::deque<std::pair<std::byte*, std::size_t>> held_;
  std::size_t bytes_ = 0;
};
Quarantine g_quarantine;

}  // namespace

// ---- Output buffers ---------------------------------------------------------------------------
HostBuffer::HostBuffer(DType dtype, const Shape& shape)
    : OutputBuffer(dtype, shape, FIB_DEVICE_CPU, 0) {
  const std::size_t page = page_bytes();
  const std::size_t rounded = round_up(bytes(), kTensorAlignment);
  body_bytes_ = round_up(rounded + 2 * kGuardBytes, page);
  const std::size_t guard = kGuardPages * page;
  map_bytes_ = body_bytes_ + 2 * guard;
  void* m =
      ::mmap(nullptr, map_bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  map_ = static_cast<std::byte*>(m);
  body_ = map_ + guard;
  if (::mprotect(body_, body_bytes_, PROT_READ | PROT_WRITE) != 0) {
    ::munmap(map_, map_bytes_);
    throw std::bad_alloc();
  }
  // The data ends kGuardBytes (plus the rounding) before the first inaccessible page.
  set_data(body_ + body_bytes_ - kGuardBytes - rounded);
  std::memset(body_, kGuardByte, static_cast<std::size_t>(data() - body_));
  std::memset(data() + bytes(), kGuardByte,
              static_cast<std::size_t>(body_ + body_bytes_ - (data() + bytes())));
  register_output(
      reinterpret_cast<std::uintptr_t>(map_), reinterpret_cast<std::uintptr_t>(map_ + map_bytes_),
      reinterpret_cast<std::uintptr_t>(data()), reinterpret_cast<std::uintptr_t>(data() + bytes()));
}

HostBuffer::~HostBuffer() {
  if (Range* r = output_range(reinterpret_cast<std::uintptr_t>(data()))) r->used = false;
  g_quarantine.retire(map_, map_bytes_);
}

void HostBuffer::set_name(const std::string& name) const {
  if (Range* r = output_range(reinterpret_cast<std::uintptr_t>(data()))) copy_name(r->name, name);
}

void HostBuffer::poison(std::uint64_t k) {
  const Poison p = poison_for(dtype(), k);
  const std::size_t n = bytes();
  if (n == 0) return;
  const auto width = static_cast<std::size_t>(p.width);
  std::memcpy(data(), &p.pattern, std::min(width, n));
  std::size_t done = std::min(width, n);
  while (done < n) {  // doubling copies: a memset-speed fill for multi-byte patterns
    const std::size_t step = std::min(done, n - done);
    std::memcpy(data() + done, data(), step);
    done += step;
  }
}

std::optional<std::int64_t> HostBuffer::guard_violation() const {
  const std::byte* end = body_ + body_bytes_;
  for (const std::byte* p = data() + bytes(); p < end; ++p) {
    if (static_cast<unsigned char>(*p) != kGuardByte) return p - data();
  }
  for (const std::byte* p = body_; p < data(); ++p) {
    if (static_cast<unsigned char>(*p) != kGuardByte) return p - data();
  }
  return std::nullopt;
}

std::unique_ptr<OutputBuffer> make_host_buffer(DType dtype, const Shape& shape) {
  return std::make_unique<HostBuffer>(dtype, shape);
}

// ---- The output arena -------------------------------------------------------------------------
ArenaMapping::ArenaMapping(int fd, std::size_t bytes) : bytes_(bytes) {
  const std::size_t page = page_bytes();
  const std::size_t guard = HostBuffer::kGuardPages * page;
  const std::size_t body = round_up(std::max<std::size_t>(bytes, 1), page);
  map_bytes_ = body + 2 * guard;
  void* m =
      ::mmap(nullptr, map_bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    ::close(fd);
    throw Error("output arena", "cannot reserve its address space");
  }
  map_ = static_cast<std::byte*>(m);
  void* d = bytes == 0 ? map_ + guard
                       : ::mmap(map_ + guard, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                                fd, 0);
  ::close(fd);
  if (d == MAP_FAILED) {
    ::munmap(map_, map_bytes_);
    throw Error("output arena", "cannot map the orchestrator's arena");
  }
  data_ = static_cast<std::byte*>(d);
}

ArenaMapping::~ArenaMapping() { g_quarantine.retire(map_, map_bytes_); }

// ---- The fault handler ------------------------------------------------------------------------
void install_fault_handler() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  static std::vector<char> alt(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = &on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;  // one look, then the default action
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGSEGV, &sa, nullptr);
  ::sigaction(SIGBUS, &sa, nullptr);
}

void watch_inputs(const InputSet& in) {
  g_input_count = 0;
  int n = 0;
  for (const auto& [name, t] : in.tensors) {
    if (n == kMaxInputs) break;
    Range& r = g_inputs[n++];
    r.begin = reinterpret_cast<std::uintptr_t>(t.raw());
    r.end = r.begin + t.nbytes();
    copy_name(r.name, name);
  }
  g_input_count = n;
}

// ---- Input checksums --------------------------------------------------------------------------
// Hashes the chunks of a list of byte ranges on its threads and the caller's: input_sum of each
// range, the same value a serial input_sum gives. The caller never waits for a helper that has
// not started: a chunk is claimed (generation and index in one atomic word, so a helper waking
// late cannot claim from a later job, nor look at a job before it is published) and the caller
// waits only for claimed chunks to finish.
class ChunkHasher {
 public:
  struct Range {
    const void* data;
    std::size_t bytes;
  };

  ChunkHasher() {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned t = 1; t < std::min(cores, 8u); ++t) threads_.emplace_back([this] { serve(); });
  }
  ~ChunkHasher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  std::vector<InputSum> sums(const std::vector<Range>& ranges) {
    chunks_.clear();
    std::vector<std::size_t> first(ranges.size() + 1, 0);
    for (std::size_t r = 0; r < ranges.size(); ++r) {
      const auto* p = static_cast<const std::byte*>(ranges[r].data);
      const std::size_t n = ranges[r].bytes;
      first[r] = chunks_.size();
      if (n <= kInputSumChunk) chunks_.push_back({p, n});
      for (std::size_t at = 0; n > kInputSumChunk && at < n; at += kInputSumChunk) {
        chunks_.push_back({p + at, std::min(kInputSumChunk, n - at)});
      }
    }
    first[ranges.size()] = chunks_.size();
    digests_.assign(chunks_.size(), InputSum{});
    run_chunks();
    std::vector<InputSum> out;
    for (std::size_t r = 0; r < ranges.size(); ++r) {
      out.push_back(ranges[r].bytes <= kInputSumChunk
                        ? digests_[first[r]]
                        : combine_chunk_sums(&digests_[first[r]], first[r + 1] - first[r]));
    }
    return out;
  }

 private:
  // The claim word: the job's generation, its chunk count and the next chunk to claim.
  static constexpr std::uint64_t kBits = 20, kMask = (std::uint64_t{1} << kBits) - 1;

  void run_chunks() {
    const std::size_t count = chunks_.size();
    if (count > kMask) throw Error("input checksums", "too many input chunks");
    const std::uint64_t gen = ++generation_ & ((std::uint64_t{1} << (64 - 2 * kBits)) - 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = 0;
      claim_.store(gen << (2 * kBits) | count << kBits, std::memory_order_release);
    }
    if (!threads_.empty() && count > 1) wake_.notify_all();
    work(gen);
    std::unique_lock<std::mutex> lock(mu_);
    finished_.wait(lock, [&] { return done_ == count; });
  }
  // Hashes chunks of job `gen` until none is left to claim.
  void work(std::uint64_t gen) {
    std::uint64_t word = claim_.load(std::memory_order_acquire);
    while (true) {
      if ((word >> (2 * kBits)) != gen) return;
      const std::size_t count = (word >> kBits) & kMask, i = word & kMask;
      if (i >= count) return;
      if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel)) continue;
      digests_[i] = chunk_sum(chunks_[i].data, chunks_[i].bytes);
      std::lock_guard<std::mutex> lock(mu_);
      if (++done_ == count) finished_.notify_one();
      word = claim_.load(std::memory_order_acquire);
    }
  }
  void serve() {
    std::uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] {
          return stop_ || (claim_.load(std::memory_order_acquire) >> (2 * kBits)) != seen;
        });
        if (stop_) return;
        seen = claim_.load(std::memory_order_acquire) >> (2 * kBits);
      }
      work(seen);
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_, finished_;
  bool stop_ = false;
  std::uint64_t generation_ = 0;  // the caller's count of jobs
  std::atomic<std::uint64_t> claim_{0};
  std::size_t done_ = 0;  // chunks of the current job hashed, under mu_
  std::vector<Range> chunks_;
  std::vector<InputSum> digests_;
};

namespace {
std::vector<ChunkHasher::Range> ranges_of(const InputSet& set) {
  std::vector<ChunkHasher::Range> r;
  for (const auto& [name, t] : set.tensors) r.push_back({t.raw(), t.nbytes()});
  return r;
}
}  // namespace

InputChecksums::InputChecksums(const std::vector<InputSet>& sets)
    : hasher_(std::make_unique<ChunkHasher>()) {
  sums_.reserve(sets.size());
  for (const InputSet& set : sets) {
    const bool given = std::all_of(set.tensors.begin(), set.tensors.end(),
                                   [&](const auto& t) { return set.sums.contains(t.first); });
    if (!given) {
      sums_.push_back(hasher_->sums(ranges_of(set)));
      continue;
    }
    std::vector<InputSum> per_tensor;
    for (const auto& [name, t] : set.tensors) per_tensor.push_back(set.sums.find(name)->second);
    sums_.push_back(std::move(per_tensor));
  }
}

InputChecksums::~InputChecksums() = default;

std::optional<std::string> InputChecksums::modified(const std::vector<InputSet>& sets,
                                                    std::size_t set) const {
  const std::vector<InputSum> now = hasher_->sums(ranges_of(sets.at(set)));
  std::size_t i = 0;
  for (const auto& [name, t] : sets.at(set).tensors) {
    if (now.at(i) != sums_.at(set).at(i)) return name;
    ++i;
  }
  return std::nullopt;
}

std::optional<std::pair<std::size_t, std::string>> InputChecksums::modified_any(
    const std::vector<InputSet>& sets) const {
  std::vector<ChunkHasher::Range> all;
  for (const InputSet& set : sets) {
    const auto r = ranges_of(set);
    all.insert(all.end(), r.begin(), r.end());
  }
  const std::vector<InputSum> now = hasher_->sums(all);
  std::size_t i = 0;
  for (std::size_t set = 0; set < sets.size(); ++set) {
    std::size_t k = 0;
    for (const auto& [name, t] : sets[set].tensors) {
      if (now.at(i++) != sums_.at(set).at(k++)) return std::make_pair(set, name);
    }
  }
  return std::nullopt;
}

}  // namespace fib::bench::detail
