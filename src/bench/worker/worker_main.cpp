// The worker's side (`fib worker`): loads solution libraries, runs the call schedule the
// orchestrator sends (warmup, timed calls with one checked call hidden among them, sampling
// draws), and reports raw facts: latency samples, the outputs of checked calls (written to
// files the orchestrator compares against the reference, which never enters this process),
// and contract violations (a guard region overwritten, an input modified, an error returned).
// The same loop runs the native references in a separate worker that never loads a solution.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <optional>

#include "bench/worker/cpu_targets.h"
#include "bench/worker/protocol.h"
#include "bench/worker/worker_common.h"
#include "fib/bench/timing.h"
#include "fib/bench/worker.h"
#include "fib/reference/reference.h"

namespace fib::bench {

namespace {
using Clock = std::chrono::steady_clock;
using namespace detail;

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

Json handle_evaluate(WorkerState& st, const Json& req) {
  const Definition def = parse_definition(req.at("definition"));
  const AxisValues var = parse_axes(req.at("var_axes"));
  const Json& sol = req.at("solution");
  std::string error;
  const SolutionLibrary lib = load_library(st.libraries, sol.at("library").get<std::string>(),
                                           sol.at("symbol").get<std::string>(), &error);
  if (lib.entry == nullptr) return Json{{"ok", false}, {"load_error", error}};
  FibAbiBackend backend(lib);
  install_input_fault_handler();
  const auto load_t0 = Clock::now();
  HostSolutionTarget target(def, var, load_sets(st, req.at("sets")), backend,
                            sol.value("dps", true));
  Json reply{{"ok", true}, {"signature", lib.signature}};
  reply["load_inputs_ms"] =
      std::chrono::duration<double, std::milli>(Clock::now() - load_t0).count();
  const Schedule schedule = parse_schedule(req.at("schedule"));
  std::optional<Failure> failure;
  const auto schedule_t0 = Clock::now();
  reply["trials"] = run_schedule(target, schedule, &failure);
  reply["schedule_ms"] =
      std::chrono::duration<double, std::milli>(Clock::now() - schedule_t0).count();
  reply["cache_flush_ms"] = target.cache_flush_ms();
  if (!failure && req.contains("sampling")) {
    // Many draws on one input set: the distribution check needs them.
    const Json& sp = req["sampling"];
    const int draws = sp.at("draws").get<int>();
    std::vector<std::vector<Tensor>> per_output(def.outputs.size());
    Failure f;
    std::uint64_t call = std::uint64_t{1} << 30;
    if (!draw_samples(target, sp.at("set").get<int>(), draws, &call, &per_output, &f)) {
      failure = f;
    } else if (draws > 0) {
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
  HostReferenceTarget target(def, var, std::move(sets), req.value("threads", 0u), std::move(seeds),
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
