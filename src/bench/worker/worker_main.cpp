// The worker's side (`fib worker`): loads solution libraries, runs the call schedule the
// orchestrator sends (warmup, timed calls, sampling draws), and reports raw facts: latency
// samples, the outputs of the timed calls (on the CPU, every timed call's in the orchestrator's
// output arena, from which the orchestrator draws the checked call once this process is
// stopped; on a GPU, one checked call drawn here after the calls return, written to a file),
// compared against the reference's, which never enters this process, and contract violations (a
// guard region overwritten, an input modified, an error returned). The same loop runs the
// native references in a separate worker that never loads a solution.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "cpu_targets.h"
#include "fib/bench/protocol/framing.h"
#include "fib/bench/protocol/messages.h"
#include "fib/bench/timing/timing.h"
#include "fib/bench/worker/hardening.h"
#include "fib/bench/worker/worker_main.h"
#include "fib/reference/reference.h"
#include "host_memory.h"
#include "worker_common.h"

namespace fib::bench {

namespace {
using Clock = std::chrono::steady_clock;
using namespace detail;
using protocol::CheckedCall;
using protocol::TrialResult;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Where a CPU solution's timed calls leave their outputs: the orchestrator's arena, one slot per
// timed call (protocol::OutputArena), filled after each call's checks, outside its timed region.
class ArenaWriter {
 public:
  ArenaWriter(const HostSolutionTarget& target, const protocol::OutputArena& spec, int fd)
      : target_(target), spec_(spec), mapping_(fd, spec.bytes) {}

  void leave(const TrialPlan& plan, std::size_t position, TrialResult* out) const {
    const std::uint64_t slot = static_cast<std::uint64_t>(plan.first_slot) + position;
    if ((slot + 1) * spec_.slot_bytes > mapping_.bytes()) {
      throw Error("output arena", fmt::format("slot {} lies beyond the arena", slot));
    }
    target_.leave_outputs(mapping_.data() + slot * spec_.slot_bytes, spec_.output_offsets,
                          static_cast<int>(position), &out->misshapen);
  }

 private:
  const HostSolutionTarget& target_;
  const protocol::OutputArena& spec_;
  ArenaMapping mapping_;
};

// The CPU schedule: each call timed on the host clock between prepare and verify.
class CpuSchedule {
 public:
  // `keep_outputs`: a folder where the outputs of the first call on each input set are written
  // (a reference's, for checked calls drawn later); empty: none. `arena`: where every timed
  // call's outputs go (a solution's; the orchestrator draws the checked call); null: none.
  CpuSchedule(Target& target, const Schedule& s, std::string keep_outputs = {},
              const ArenaWriter* arena = nullptr)
      : target_(target), s_(s), keep_outputs_(std::move(keep_outputs)), arena_(arena) {}

  // Every trial, until a call fails (*failure set; the trials before it are returned).
  std::vector<TrialResult> run(std::optional<Failure>* failure) {
    std::vector<TrialResult> trials;
    for (const TrialPlan& plan : s_.trials) {
      TrialResult t;
      if (!run_trial(plan, &t)) {
        *failure = failure_;
        break;
      }
      trials.push_back(std::move(t));
    }
    return trials;
  }

 private:
  // `poison`: the poison index of the call's outputs; the call's number when none is given.
  bool one_call(int set, double* ms, bool flush, std::optional<std::uint64_t> poison = {}) {
    target_.prepare(set, poison.value_or(call_), flush && s_.flush_caches);
    Failure f;
    const auto t0 = Clock::now();
    const bool ok = target_.call(call_, &f);
    const auto t1 = Clock::now();
    if (!ok || !target_.verify(call_, &f)) {
      failure_ = f;
      return false;
    }
    *ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    ++call_;
    if (!keep_outputs_.empty() && kept_bytes_ < kKeptOutputsBudget &&
        kept_sets_.insert(set).second) {
      const auto outputs = target_.outputs();
      for (const auto& [name, t] : outputs) kept_bytes_ += t.nbytes();
      write_checked_outputs(keep_outputs_ + fmt::format("/reference-set{}.safetensors", set),
                            outputs);
    }
    return true;
  }

  bool run_trial(const TrialPlan& plan, TrialResult* out) {
    for (int set : plan.warmup) {
      double ms = 0;
      // Warmup calls are not timed, so their caches need no flushing.
      if (!one_call(set, &ms, /*flush=*/false)) return false;
      out->warmup_ms += ms;
      ++out->warmup_calls;
      if (plan.max_warmup_seconds > 0 && out->warmup_ms >= 1000 * plan.max_warmup_seconds) break;
    }
    out->stopped_by = "iterations";
    std::vector<std::pair<std::string, Tensor>> kept;  // the checked call's outputs so far
    const auto start = Clock::now();
    const std::size_t must_reach = std::max<std::size_t>(
        s_.noise.min_samples, static_cast<std::size_t>(plan.check_position + 1));
    const bool in_arena = arena_ != nullptr && plan.first_slot >= 0;
    for (std::size_t i = 0; i < plan.timed.size(); ++i) {
      double ms = 0;
      const auto poison = in_arena ? std::optional(plan.poison_base + i) : std::nullopt;
      if (!one_call(plan.timed[i], &ms, /*flush=*/true, poison)) return false;
      out->samples_ms.push_back(ms);
      if (in_arena) arena_->leave(plan, i, out);
      if (!plan.check_output.empty() && checked_call_kept(plan.check_position, i)) {
        kept = target_.outputs();
        out->checked = CheckedCall{call_ - 1, target_.poison(), static_cast<int>(i)};
      }
      if (s_.fixed_iterations || out->samples_ms.size() < must_reach) continue;
      if (precise_enough(out->samples_ms, s_.noise)) {
        out->stopped_by = "noise";
        break;
      }
      if (plan.max_seconds > 0 &&
          std::chrono::duration<double>(Clock::now() - start).count() > plan.max_seconds) {
        out->stopped_by = "time_cap";
        break;
      }
    }
    if (out->checked) write_checked_outputs(plan.check_output, kept);
    return true;
  }

  Target& target_;
  const Schedule& s_;
  // Large outputs (a long prefill's) are kept only up to this, as the input pool is bounded.
  static constexpr std::uint64_t kKeptOutputsBudget = 256ull << 20;
  std::string keep_outputs_;
  std::set<int> kept_sets_;
  std::uint64_t kept_bytes_ = 0;
  std::uint64_t call_ = 0;
  Failure failure_;
  const ArenaWriter* arena_;
};

// The descriptor that follows a request on the channel: one byte carrying it (SCM_RIGHTS).
int receive_descriptor(int channel) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = ::recvmsg(channel, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  const cmsghdr* c = n == 1 ? CMSG_FIRSTHDR(&msg) : nullptr;
  if (c == nullptr || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
    throw Error("worker", "the request's output arena did not come with it");
  }
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

protocol::EvaluateReply handle_evaluate(WorkerState& st, const protocol::EvaluateRequest& req) {
  const Definition& def = req.definition;
  protocol::EvaluateReply reply;
  SolutionLibrary lib;
  const std::unique_ptr<CallBackend> opened =
      open_backend(st.libraries, req.solution.library, req.solution.symbol, req.solution.binding,
                   req.solution.python, &lib, &reply.load_error);
  if (opened == nullptr) {
    reply.ok = false;
    return reply;
  }
  CallBackend& backend = *opened;
  reply.signature = lib.signature;
  install_fault_handler();
  // A fresh mapping of the inputs for every solution: one that made the last one writable and
  // changed it leaves nothing behind for the next.
  st.sets.reset();
  const auto load_t0 = Clock::now();
  HostSolutionTarget target(def, req.var_axes, load_sets(st, req.sets), backend, req.solution.dps);
  reply.load_inputs_ms = ms_since(load_t0);
  std::optional<ArenaWriter> arena;
  if (req.arena) arena.emplace(target, *req.arena, std::exchange(st.arena_fd, -1));
  const auto schedule_t0 = Clock::now();
  reply.trials =
      CpuSchedule(target, req.schedule, {}, arena ? &*arena : nullptr).run(&reply.failure);
  reply.schedule_ms = ms_since(schedule_t0);
  reply.cache_flush_ms = target.cache_flush_ms();
  if (!reply.failure && req.sampling) {
    // Many draws on one input set: the distribution check needs them.
    const protocol::SamplingRequest& sp = *req.sampling;
    std::vector<std::vector<Tensor>> per_output(def.outputs.size());
    Failure f;
    std::uint64_t call = std::uint64_t{1} << 30;
    if (!draw_samples(target, sp.set, sp.draws, &call, &per_output, &f)) {
      reply.failure = f;
    } else if (sp.draws > 0) {
      write_stacked_draws(sp.output, def, per_output, sp.draws);
      reply.sampling_draws = sp.draws;
    }
  }
  Failure f;
  if (!reply.failure && !target.verify_all_inputs(0, &f)) reply.failure = f;
  return reply;
}

protocol::ReferenceReply handle_reference(WorkerState& st, const protocol::ReferenceRequest& req) {
  protocol::ReferenceReply reply;
  const reference::Kernel* k = reference::find_kernel(req.definition, &reply.error);
  if (k == nullptr) {
    reply.ok = false;
    return reply;
  }
  reply.kernel = std::string(k->id());
  HostReferenceTarget target(req.definition, req.var_axes, load_sets(st, req.sets), req.threads,
                             req.seeds, req.eval_extra);
  std::optional<Failure> failure;
  reply.trials = CpuSchedule(target, req.schedule, req.keep_outputs).run(&failure);
  if (failure) {
    reply.ok = false;
    reply.error = failure->message;
  }
  return reply;
}

// Whether a request is for a CUDA device ("cuda:N"); CPU otherwise.
bool on_gpu(const std::string& device) { return device.rfind("cuda", 0) == 0; }

Json evaluate(WorkerState& st, const Json& j) {
  const auto req = protocol::from_json<protocol::EvaluateRequest>(j);
  if (req.arena) st.arena_fd = receive_descriptor(st.channel);
  if (!on_gpu(req.device)) return to_json(handle_evaluate(st, req));
#ifdef FIB_HAVE_CUDA
  return to_json(gpu_evaluate(st, req));
#else
  return protocol::error_reply("this fib was built without the CUDA path");
#endif
}

Json reference(WorkerState& st, const Json& j) {
  const auto req = protocol::from_json<protocol::ReferenceRequest>(j);
  if (!on_gpu(req.device)) return to_json(handle_reference(st, req));
#ifdef FIB_HAVE_CUDA
  return to_json(gpu_reference(st, req));
#else
  return protocol::error_reply("this fib was built without the CUDA path");
#endif
}

// Opens a solution ahead of its evaluations (protocol::load_request); the evaluation's own
// open_backend then finds it open.
Json load(WorkerState& st, const Json& j) {
  const protocol::SolutionRef ref = protocol::load_request_solution(j);
  SolutionLibrary lib;
  std::string error;
  if (open_backend(st.libraries, ref.library, ref.symbol, ref.binding, ref.python, &lib, &error) ==
      nullptr) {
    return protocol::error_reply(error);
  }
  return Json{{"ok", true}};
}

Json handle(WorkerState& st, const Json& req) {
  const std::string cmd = protocol::command_of(req);
  if (cmd == "hello") {
    return to_json(protocol::HelloReply{::getpid(), FIB_SOLUTION_ABI_VERSION, st.hardening});
  }
  if (cmd == "load") return load(st, req);
  if (cmd == "evaluate") return evaluate(st, req);
  if (cmd == "reference") return reference(st, req);
  return protocol::error_reply(fmt::format("unknown command '{}'", cmd));
}
}  // namespace

int worker_main(int channel_fd, WorkerHardening hardening) {
  // Move the channel away from the low descriptors a solution might guess or clobber.
  const int fd = ::fcntl(channel_fd, F_DUPFD_CLOEXEC, 512 + (::getpid() % 256));
  if (fd < 0) return 3;
  ::close(channel_fd);
  ::signal(SIGPIPE, SIG_IGN);
  detail::WorkerState state;
  state.channel = fd;
  hardening.channel_fd = fd;
  state.hardening = install_worker_hardening(hardening);
  std::string text;
  while (detail::read_message(fd, &text) == detail::ReadResult::kMessage) {
    const Json req = Json::parse(text, nullptr, false);
    if (req.is_discarded()) return 4;
    if (protocol::command_of(req) == "exit") return 0;
    const auto received = Clock::now();
    Json reply;
    try {
      reply = handle(state, req);
    } catch (const std::bad_alloc&) {
      reply = protocol::error_reply("out of memory in the worker", /*oom=*/true);
    } catch (const std::exception& e) {
      reply = protocol::error_reply(e.what());
    }
    if (state.arena_fd >= 0) ::close(std::exchange(state.arena_fd, -1));  // one never mapped
    // The span the orchestrator holds against its own observation (a clock rewritten by the
    // solution shrinks it with the calls' samples).
    if (protocol::command_of(req) == "evaluate" && reply.is_object()) {
      reply["worker_ms"] = ms_since(received);
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
