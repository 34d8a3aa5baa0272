// run_coordinator and run_rank_worker (fib/bench/run/ranks.h). A work item is one
// (definition, workload) with every solution still to evaluate on it: its reference runs once,
// on one rank, and a solution's build is made once per host because every rank of a host shares
// the build cache (builds are content-addressed and safe across processes).

#include "fib/bench/run/ranks.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <random>
#include <set>
#include <span>
#include <thread>

#include "fib/base/diagnostics.h"
#include "fib/dataset/trace_set.h"
#include "plan.h"
#include "records.h"
#include "summary.h"

namespace fib::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What an item costs, roughly: its evaluations times the product of its workload's variable
// axes (the size of its tensors). Largest first, so that the run does not end waiting on one
// slow item started last.
double item_cost(const detail::WorkItem& item) {
  double size = 1;
  for (const auto& [name, value] : item.workload->workload.axes) {
    size *= static_cast<double>(std::max<std::int64_t>(value, 1));
  }
  return size * static_cast<double>(item.pending.size());
}

Json item_json(const detail::WorkItem& item, std::size_t id, std::uint64_t seed) {
  Json names = Json::array();
  for (const Solution* s : item.pending) names.push_back(s->name);
  return Json{{"id", id},
              {"definition", item.def->name},
              {"workload", item.workload->workload.uuid},
              {"solutions", names},
              {"seed", seed}};
}

struct RankState {
  std::string host;
  bool alive = true;
  bool idle = false;
  std::optional<std::size_t> item;  // in flight
  Clock::time_point heard = Clock::now();
};

class Coordinator {
 public:
  Coordinator(const RunOptions& o, const RunCallbacks& cb, RankLink& link, const RankSettings& s)
      : o_(o), cb_(cb), link_(link), settings_(s), set_(TraceSet::load(o.dataset)) {}

  RunResult run(bool* all_alive);

 private:
  void message(const std::string& m) {
    result_.messages.push_back(m);
    if (cb_.on_message) cb_.on_message(m);
  }
  void plan();
  void handle(const RankMessage& m);
  void take_result(int rank, const Json& j);
  void warn_shared_cores(const std::string& host);
  void record(std::vector<Trace> traces);
  void hand_out(int rank);
  void find_lost();
  bool finished() const { return done_ == plan_.items.size(); }
  bool any_alive() const {
    return std::any_of(ranks_.begin() + 1, ranks_.end(), [](const auto& r) { return r.alive; });
  }

  const RunOptions& o_;
  const RunCallbacks& cb_;
  RankLink& link_;
  const RankSettings& settings_;
  TraceSet set_;
  RunResult result_;
  detail::Plan plan_;
  std::uint64_t seed_ = 0;
  std::deque<std::size_t> queue_;  // items not yet handed out, largest first
  std::vector<RankState> ranks_;
  std::size_t done_ = 0;  // items whose result came back
  std::map<std::string, int> skipped_;
  std::map<std::string, int> ranks_on_host_;  // evaluating ranks per host
};

void Coordinator::plan() {
  const bool gpu = o_.device != "cpu";
  result_.counts.broken_records =
      detail::check_records(set_, o_, [this](const std::string& m) { message(m); });
  plan_ = detail::plan_run(set_, o_, gpu, [this](const std::string& m) { message(m); });
  result_.counts.resumed = plan_.resumed;
  result_.counts.reference_failures += plan_.reference_failures;
  std::vector<std::size_t> order(plan_.items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [this](std::size_t a, std::size_t b) {
    return item_cost(plan_.items[a]) > item_cost(plan_.items[b]);
  });
  queue_.assign(order.begin(), order.end());
  if (o_.seed) {
    seed_ = *o_.seed;
  } else {
    std::random_device rd;
    seed_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
  result_.environment.seed = seed_;
  result_.environment.gpu = gpu;
}

RunResult Coordinator::run(bool* all_alive) {
  const auto wall0 = Clock::now();
  plan();
  if (cb_.on_start) cb_.on_start(plan_.evaluations);
  ranks_.resize(static_cast<std::size_t>(link_.size()));
  ranks_[0].alive = false;  // rank 0 only coordinates
  while (!finished()) {
    if (!any_alive()) {
      throw Error(o_.dataset.string(),
                  fmt::format("every evaluating rank was lost with {} of {} items left",
                              plan_.items.size() - done_, plan_.items.size()),
                  "the traces written so far are kept; `fib run --resume` completes the run");
    }
    if (std::optional<RankMessage> m = link_.poll()) {
      handle(*m);
      continue;
    }
    find_lost();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  bool alive = true;
  std::set<std::string> hosts;
  for (std::size_t r = 1; r < ranks_.size(); ++r) alive &= ranks_[r].alive;
  for (std::size_t r = 1; r < ranks_.size(); ++r) {
    if (ranks_[r].alive)
      link_.send(static_cast<int>(r), RankTag::kStop, Json{{"finalize", alive}}.dump());
    result_.environment.devices.push_back(
        fmt::format("rank {} on {}: {}", r, ranks_[r].host, o_.device));
  }
  *all_alive = alive;
  result_.timing.wall_seconds = seconds_since(wall0);
  result_.summary = detail::summarize_run(result_.traces, set_, skipped_);
  return std::move(result_);
}

void Coordinator::handle(const RankMessage& m) {
  if (m.source <= 0 || m.source >= static_cast<int>(ranks_.size())) return;
  RankState& r = ranks_[static_cast<std::size_t>(m.source)];
  if (!r.alive) return;  // declared lost: its item went elsewhere
  r.heard = Clock::now();
  const Json j = Json::parse(m.payload);
  switch (m.tag) {
    case RankTag::kReady:
      r.host = j.value("host", "");
      warn_shared_cores(r.host);
      hand_out(m.source);
      break;
    case RankTag::kResult:
      take_result(m.source, j);
      hand_out(m.source);
      break;
    default:
      break;  // heartbeats only refresh `heard`
  }
}

// CPU lanes time on the host's cores: a second evaluating rank on the host disturbs them.
void Coordinator::warn_shared_cores(const std::string& host) {
  if (o_.device != "cpu" || ++ranks_on_host_[host] != 2) return;
  message(fmt::format(
      "warning: several ranks evaluate on the CPU of {}: their timings share its cores (one "
      "rank per host: mpirun --map-by ppr:1:node, or srun --ntasks-per-node=1; docs/mpi.md)",
      host));
}

void Coordinator::take_result(int rank, const Json& j) {
  RankState& r = ranks_[static_cast<std::size_t>(rank)];
  r.item.reset();
  ++done_;
  for (const Json& m : j.at("messages"))
    message(fmt::format("rank {}: {}", rank, m.get<std::string>()));
  result_.counts.reference_failures += j.at("reference_failures").get<std::size_t>();
  for (const auto& [name, n] : j.at("skipped").items()) skipped_[name] += n.get<int>();
  Diagnostics diag;
  std::vector<Trace> traces;
  for (const Json& t : j.at("traces")) {
    ReadContext ctx{fmt::format("rank {}", rank), &diag};
    std::optional<Trace> trace = trace_from_json(t, ctx);
    if (!trace) {
      message(fmt::format("warning: rank {} sent a trace fib cannot read: {}", rank,
                          diag.empty() ? std::string("?") : diag.to_string()));
      continue;
    }
    traces.push_back(std::move(*trace));
  }
  record(std::move(traces));
}

// Signed and appended here, once: the dataset has one writer however many ranks evaluate. An
// item's traces go in one append per file (one lock, one write).
void Coordinator::record(std::vector<Trace> traces) {
  if (o_.signing_key) {
    for (Trace& t : traces) sign_trace(t, *o_.signing_key);
  }
  if (o_.save_traces) append_traces(set_, traces);
  for (Trace& t : traces) {
    ++result_.counts.evaluations;
    result_.traces.push_back(std::move(t));
    if (!cb_.on_evaluation) continue;
    const Trace& back = result_.traces.back();
    EvaluationEvent e;
    e.done = result_.traces.size();
    e.total = plan_.evaluations;
    e.trace = &back;
    e.definition = back.definition;
    e.solution = back.solution.value_or("");
    e.workload = back.workload.uuid;
    cb_.on_evaluation(e);
  }
}

void Coordinator::hand_out(int rank) {
  RankState& r = ranks_[static_cast<std::size_t>(rank)];
  if (queue_.empty()) {
    r.idle = true;
    return;
  }
  const std::size_t k = queue_.front();
  queue_.pop_front();
  r.idle = false;
  r.item = k;
  link_.send(rank, RankTag::kItem, item_json(plan_.items[k], k, seed_).dump());
}

// A rank silent past the deadline is lost: its item goes back to the front of the queue and to
// an idle rank, if there is one.
void Coordinator::find_lost() {
  const auto now = Clock::now();
  for (std::size_t i = 1; i < ranks_.size(); ++i) {
    RankState& r = ranks_[i];
    if (!r.alive ||
        std::chrono::duration<double>(now - r.heard).count() < settings_.lost_after_seconds) {
      continue;
    }
    r.alive = false;
    std::string lost = "no item in flight";
    if (r.item) {
      const detail::WorkItem& item = plan_.items[*r.item];
      lost = fmt::format("its item ({} workload {}) goes to another rank", item.def->name,
                         item.workload->workload.uuid.substr(0, 8));
      queue_.push_front(*r.item);
      r.item.reset();
    }
    message(fmt::format("warning: rank {} on {} not heard from for {:.0f} s: lost; {}", i, r.host,
                        settings_.lost_after_seconds, lost));
  }
  for (std::size_t i = 1; i < ranks_.size() && !queue_.empty(); ++i) {
    if (ranks_[i].alive && ranks_[i].idle) hand_out(static_cast<int>(i));
  }
}

// One item on this rank: the run restricted to its definition, workload and solutions, writing
// nothing and signing nothing (rank 0 does both).
Json evaluate_item(const RunOptions& base, const std::shared_ptr<const TraceSet>& set,
                   const Json& item) {
  RunOptions o = base;
  o.loaded_dataset = set;
  o.definitions = {item.at("definition").get<std::string>()};
  o.workloads = {item.at("workload").get<std::string>()};
  o.solutions = item.at("solutions").get<std::vector<std::string>>();
  o.seed = item.at("seed").get<std::uint64_t>();
  o.resume = false;
  o.save_traces = false;
  o.signing_key.reset();
  const RunResult r = run_benchmark(o);
  Json traces = Json::array();
  for (const Trace& t : r.traces) traces.push_back(to_json(t));
  Json skipped = Json::object();
  for (const DefinitionSummary& d : r.summary) {
    for (const SolutionSummary& s : d.solutions) {
      if (s.skipped > 0) skipped[s.solution] = s.skipped;
    }
  }
  return Json{{"id", item.at("id")},
              {"traces", traces},
              {"messages", r.messages},
              {"reference_failures", r.counts.reference_failures},
              {"skipped", skipped}};
}

}  // namespace

RunResult run_coordinator(const RunOptions& options, const RunCallbacks& callbacks, RankLink& link,
                          const RankSettings& settings, bool* all_ranks_alive) {
  return Coordinator(options, callbacks, link, settings).run(all_ranks_alive);
}

// The evaluation runs on a thread of its own; this one makes every MPI call (heartbeats while
// the item runs, its result when done).
bool run_rank_worker(const RunOptions& options, RankLink& link, const RankSettings& settings) {
  auto set = std::make_shared<const TraceSet>(TraceSet::load(options.dataset).without_traces());
  link.send(0, RankTag::kReady, Json{{"host", settings.host}, {"pid", ::getpid()}}.dump());
  auto beat = Clock::now();
  std::optional<std::future<Json>> running;
  std::optional<Json> item;
  while (true) {
    if (seconds_since(beat) >= settings.heartbeat_seconds) {
      link.send(0, RankTag::kHeartbeat, "{}");
      beat = Clock::now();
    }
    if (running && running->wait_for(std::chrono::milliseconds(0)) == std::future_status::ready) {
      Json result;
      try {
        result = running->get();
      } catch (const std::exception& e) {
        // The item's evaluations are lost; rank 0 says so, and --resume runs them.
        result = Json{{"id", item->at("id")},
                      {"traces", Json::array()},
                      {"messages", {fmt::format("error: {}", e.what())}},
                      {"reference_failures", 1},
                      {"skipped", Json::object()}};
      }
      running.reset();
      link.send(0, RankTag::kResult, result.dump());
      continue;
    }
    std::optional<RankMessage> m = link.poll();
    if (!m) {
      std::this_thread::sleep_for(std::chrono::milliseconds(running ? 20 : 1));
      continue;
    }
    if (m->tag == RankTag::kStop) return Json::parse(m->payload).value("finalize", true);
    if (m->tag != RankTag::kItem) continue;
    item = Json::parse(m->payload);
    running = std::async(std::launch::async,
                         [&options, set, it = *item] { return evaluate_item(options, set, it); });
  }
}

}  // namespace fib::bench
