// The CPU worker's targets (bench/worker/cpu_targets.h).
#include "cpu_targets.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "fib/bench/timing/timing.h"
#include "host_memory.h"

namespace fib::bench::detail {

namespace {
using Clock = std::chrono::steady_clock;

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

std::string modified_input_message(const std::string& name) {
  return fmt::format(
      "the solution modified its input '{}' (its bytes changed: inputs are read-only, and "
      "making their mapping writable does not make changing them allowed)",
      name);
}

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

// ---- A solution under test --------------------------------------------------------------------
// Inputs are passed in place: views into the read-only mapping of the input-set file, a
// different set (and address) on every call while the pool lasts. Nothing is copied per call,
// a write to an input faults (the handler of host_memory.h names it), one through a mapping the
// solution made writable changes the input's checksum, and the sets' order in the file is
// shuffled, so
// a set's address does not reveal the checked call. Cold caches: once the whole pool is several
// times the last-level cache, cycling through it evicts each set before it comes round again;
// a smaller pool is flushed line by line.
HostSolutionTarget::HostSolutionTarget(const Definition& def, const AxisValues& var, InputSets sets,
                                       CallBackend& backend, bool dps)
    : sets_(std::move(sets)),
      call_(def, var, backend, dps, &make_host_buffer, /*poison_ahead=*/false),
      flush_inputs_(!pool_evicts_itself(*sets_)),
      checksums_(*sets_) {}

void HostSolutionTarget::prepare(int set, std::uint64_t call, bool flush) {
  const InputSet& in = sets_->at(static_cast<std::size_t>(set));
  set_ = static_cast<std::size_t>(set);
  watch_inputs(in);
  const auto flush0 = Clock::now();
  if (flush && flush_inputs_) {
    for (const auto& [name, t] : in.tensors) flush_from_cache(t.raw(), t.nbytes());
  }
  call_.begin(call);
  // Every buffer of this target is a HostBuffer (make_host_buffer); the fault handler names them.
  for (const GuardedBuffer& g : call_.guarded()) {
    static_cast<const HostBuffer*>(g.buffer)->set_name(g.name);
  }
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
  if (auto name = checksums_.modified(*sets_, set_)) {
    *failure = Failure{"input_modified", modified_input_message(*name), call};
    return false;
  }
  return true;
}

bool HostSolutionTarget::verify_all_inputs(std::uint64_t call, Failure* failure) {
  if (auto changed = checksums_.modified_any(*sets_)) {
    *failure = Failure{"input_modified", modified_input_message(changed->second), call};
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

void HostSolutionTarget::leave_outputs(std::byte* slot, const std::vector<std::uint64_t>& offsets,
                                       int position,
                                       std::vector<protocol::MisshapenOutput>* misshapen) const {
  const Definition& def = call_.definition();
  for (std::size_t o = 0; o < def.outputs.size(); ++o) {
    const ProducedOutput p = call_.produced(o);
    if (p.dtype != def.outputs[o].dtype || p.shape != call_.output_shapes()[o]) {
      misshapen->push_back({position, def.outputs[o].name, std::string(dtype_name(p.dtype)),
                            std::vector<std::int64_t>(p.shape.begin(), p.shape.end())});
      continue;
    }
    if (p.bytes > 0) std::memcpy(slot + offsets.at(o), p.data, p.bytes);
  }
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
