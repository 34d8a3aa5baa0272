// A CPU evaluation's output arena, the orchestrator's side (run/output_arena.h).
#include "output_arena.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fib/base/diagnostics.h"

namespace fib::bench::detail {

namespace {

constexpr std::uint64_t kAlignment = 64;

std::uint64_t round_up(std::uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

std::uint64_t output_bytes(DType dtype, const Shape& shape) {
  std::uint64_t numel = 1;
  for (auto d : shape) numel *= static_cast<std::uint64_t>(d);
  return dtype_storage_bytes(dtype, numel).value_or(0);
}

}  // namespace

PlannedArena plan_output_arena(const Definition& def, const std::vector<Shape>& shapes,
                               protocol::Schedule schedule, std::uint64_t poison_seed) {
  PlannedArena p;
  for (std::size_t o = 0; o < def.outputs.size(); ++o) {
    p.layout.output_offsets.push_back(p.layout.slot_bytes);
    p.layout.slot_bytes += round_up(output_bytes(def.outputs[o].dtype, shapes.at(o)));
  }
  p.layout.slot_bytes = std::max<std::uint64_t>(p.layout.slot_bytes, kAlignment);
  const std::uint64_t per_trial =
      std::max<std::uint64_t>(1, kArenaTrialBudget / p.layout.slot_bytes);
  std::uint64_t slots = 0;
  for (protocol::TrialPlan& plan : schedule.trials) {
    if (plan.timed.size() > per_trial) plan.timed.resize(per_trial);
    plan.first_slot = static_cast<int>(slots);
    // Far apart per trial, so no two timed calls of an evaluation share a poison pattern index.
    plan.poison_base = poison_seed + (slots << 20);
    plan.check_position = -1;
    plan.check_output.clear();
    slots += plan.timed.size();
  }
  p.layout.bytes = slots * p.layout.slot_bytes;
  p.schedule = std::move(schedule);
  return p;
}

std::uint64_t draw_checked_position(std::uint64_t n) {
  if (n == 0) throw Error("fib run", "no timed call to draw a checked call from");
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // no modulo bias
  for (;;) {
    std::uint64_t r = 0;
    auto* p = reinterpret_cast<unsigned char*>(&r);
    std::size_t got = 0;
    while (got < sizeof r) {
      const ssize_t k = ::getrandom(p + got, sizeof r - got, 0);
      if (k > 0) got += static_cast<std::size_t>(k);
      if (k < 0 && errno != EINTR) {
        throw Error("fib run", fmt::format("getrandom failed: {}", std::strerror(errno)));
      }
    }
    if (r < limit) return r % n;
  }
}

OutputArenaFile::OutputArenaFile(const protocol::OutputArena& layout) : layout_(layout) {
  fd_ = ::memfd_create("fib-output-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd_ < 0) {
    throw Error("output arena", fmt::format("memfd_create failed: {}", std::strerror(errno)));
  }
  if (::ftruncate(fd_, static_cast<off_t>(layout.bytes)) != 0 ||
      ::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw Error("output arena", fmt::format("cannot size and seal it: {}", why));
  }
}

OutputArenaFile::~OutputArenaFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::pair<std::string, Tensor>> OutputArenaFile::read_slot(
    const Definition& def, const std::vector<Shape>& shapes, std::uint64_t slot) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (std::size_t o = 0; o < def.outputs.size(); ++o) {
    Tensor t(def.outputs[o].dtype, shapes.at(o));
    auto* dst = static_cast<char*>(t.raw());
    std::size_t done = 0;
    const std::size_t n = t.nbytes();
    const auto at = static_cast<off_t>(slot * layout_.slot_bytes + layout_.output_offsets.at(o));
    while (done < n) {
      const ssize_t r = ::pread(fd_, dst + done, n - done, at + static_cast<off_t>(done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        throw Error("output arena", fmt::format("cannot read slot {}: {}", slot,
                                                r < 0 ? std::strerror(errno) : "short read"));
      }
      done += static_cast<std::size_t>(r);
    }
    out.emplace_back(def.outputs[o].name, std::move(t));
  }
  return out;
}

}  // namespace fib::bench::detail
