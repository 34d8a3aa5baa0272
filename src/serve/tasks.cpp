#include "serve/tasks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/rand.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <map>
#include <unordered_map>

#include "fib/base/device.h"
#include "fib/base/json.h"
#include "fib/base/timestamp.h"
#include "fib/bench/run/run.h"
#include "fib/dataset/layout.h"
#include "fib/trace/signature.h"

namespace fib::serve {

namespace fs = std::filesystem;

namespace {

// A random (version 4) UUID.
std::string make_task_id() {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof b) != 1) throw Error("task", "the system's random source failed");
  b[6] = static_cast<unsigned char>((b[6] & 0x0F) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3F) | 0x80);
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) hex += '-';
    hex += fmt::format("{:02x}", b[i]);
  }
  return hex;
}

// Queues take "cpu" or "cuda:N" (not parse_device's short "cuda": a queue names its device).
bool is_gpu_device(const std::string& device) {
  const auto d = parse_device(device);
  if (d && device != "cuda") return d->is_cuda();
  throw Error("--devices", fmt::format("unknown device '{}'", device),
              "expected cpu or cuda:N (a list: cuda:0,cuda:1)");
}

std::string task_of(const Trace& t) {
  if (!t.evaluation) return {};
  const Json& extra = t.evaluation->environment.extra;
  if (!extra.is_object()) return {};
  const auto it = extra.find(kTaskIdKey);
  return it != extra.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A task's traces in the order of its workloads (those found in the dataset come first).
Json in_workload_order(Json traces, const std::vector<std::string>& workloads) {
  Json ordered = Json::array();
  for (const std::string& uuid : workloads) {
    for (Json& t : traces) {
      if (!t.is_null() && t["workload"]["uuid"] == uuid) {
        ordered.push_back(std::move(t));
        t = Json();
        break;
      }
    }
  }
  return ordered;
}

// The hardware a queue's traces name; empty (nothing answers from earlier traces there) where
// the device cannot be asked now: its tasks fail saying why, as before.
std::string hardware_of(const std::string& device) {
  try {
    return bench::device_hardware(device);
  } catch (const std::exception&) {
    return {};
  }
}

std::uint64_t random_seed() {
  std::uint64_t seed = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&seed), sizeof seed) != 1) {
    throw Error("seed", "the system's random source failed");
  }
  return seed;
}

// The trace of a workload the run skipped after the solution timed out on `timed_out`'s: the
// same run's environment, less what was particular to that workload's evaluation.
Trace not_run_trace(const Trace& timed_out, const Workload& workload) {
  Trace t;
  t.definition = timed_out.definition;
  t.workload = workload;
  t.solution = timed_out.solution;
  Evaluation e;
  e.status = EvaluationStatus::kTimeout;
  e.environment = timed_out.evaluation->environment;
  Json& extra = e.environment.extra;
  for (const char* particular : {"signature", "distinct_input_sets", "inputs_made",
                                 "inputs_shared_by_checked_sets", "reference_cache"}) {
    extra.erase(particular);
  }
  extra[kNotRunKey] = Json{{"timed_out_on_workload", timed_out.workload.uuid}};
  e.timestamp = utc_timestamp();
  e.log = fmt::format("not run: timed out on workload {}", timed_out.workload.uuid);
  t.evaluation = std::move(e);
  return t;
}

}  // namespace

std::vector<const Trace*> traces_of_task(const TraceSet& set, const Task& task) {
  std::unordered_map<std::string, const Trace*> by_workload;
  for (const auto& r : set.traces(task.definition)) {
    const Trace& t = r.value;
    if (t.solution == task.solution && task_of(t) == task.id) {
      by_workload.emplace(t.workload.uuid, &t);
    }
  }
  std::vector<const Trace*> out;
  for (const std::string& uuid : task.workloads) {
    if (const auto it = by_workload.find(uuid); it != by_workload.end()) out.push_back(it->second);
  }
  return out;
}

TaskService::TaskService(ServeContext& context, const ServeOptions& options)
    : context_(context), options_(options), store_(options.state_dir / "tasks.sqlite3") {
  for (const std::string& device : options.devices) {
    auto q = std::make_unique<Queue>();
    q->device = device;
    q->gpu = is_gpu_device(device);
    q->hardware = hardware_of(device);
    queues_.push_back(std::move(q));
  }
  store_.requeue_running();
  for (const Task& t : store_.unfinished()) pending_.push_back(Queued{t.id, t.gpu});
  max_waiting_ =
      std::max(1u, (options.http_threads ? options.http_threads : kDefaultHttpThreads) / 2);
}

TaskService::~TaskService() { stop(); }

void TaskService::start() {
  for (auto& q : queues_) {
    Queue* queue = q.get();
    q->thread = std::thread([this, queue] { serve_queue(*queue); });
  }
  const unsigned builders =
      options_.run.build_jobs == 1 ? 0 : std::max(1u, std::thread::hardware_concurrency() / 2);
  for (unsigned i = 0; i < builders; ++i) prebuilders_.emplace_back([this] { prebuild_loop(); });
}

void TaskService::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  finished_.notify_all();
  prebuild_work_.notify_all();
  for (auto& q : queues_) {
    if (q->thread.joinable()) q->thread.join();
  }
  for (auto& t : prebuilders_) t.join();
  prebuilders_.clear();
}

bool TaskService::has_cpu_queue() const {
  return std::any_of(queues_.begin(), queues_.end(), [](const auto& q) { return !q->gpu; });
}

bool TaskService::has_gpu_queue() const {
  return std::any_of(queues_.begin(), queues_.end(), [](const auto& q) { return q->gpu; });
}

// The solution file is what the task's traces name; the same code submitted again has the same
// name and content, so an existing file is left as it is.
void TaskService::write_solution_file(const Submission& s) {
  std::lock_guard<std::mutex> lock(solution_files_mu_);
  const fs::path path =
      context_.dataset_root() /
      layout::solution_file(s.solution.author, s.op_type, s.solution.definition, s.solution.name);
  if (!fs::exists(path)) write_solution(context_.dataset_root(), s.solution, s.op_type);
  // Also when the file was there already but the snapshot has not caught up with it: the task's
  // run reads the snapshot.
  context_.add_own_solution(s.solution, path);
}

std::optional<std::string> TaskService::submit(const Submission& s, const Identity& sender) {
  Task t;
  t.id = make_task_id();
  t.definition = s.solution.definition;
  t.solution = s.solution.name;
  t.workloads = s.workloads;
  t.gpu = s.gpu;
  t.token = sender.token_id;
  {
    // A quota's check and its task's insert are one step (two requests of a token at once
    // cannot both take its last place); unlimited senders need no such step.
    std::unique_lock<std::mutex> quota(submit_mu_, std::defer_lock);
    if (sender.max_queued != 0) {
      quota.lock();
      if (store_.unfinished_of(sender.token_id) >= sender.max_queued) return std::nullopt;
    }
    write_solution_file(s);
    store_.insert(t);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(Queued{t.id, t.gpu});
    if (!prebuilders_.empty()) prebuild_queue_.push_back(Queued{t.id, t.gpu});
  }
  work_.notify_all();
  prebuild_work_.notify_one();
  return t.id;
}

void TaskService::prebuild_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    auto next = prebuild_queue_.end();
    // Where a CPU queue times, no compiler runs beside it.
    const bool host_free_of_timing = !has_cpu_queue();
    prebuild_work_.wait(lock, [&] {
      next = prebuild_queue_.begin();
      return stopping_ ||
             (next != prebuild_queue_.end() && (host_free_of_timing || cpu_evaluating_ == 0));
    });
    if (stopping_) return;
    const Queued q = *next;
    prebuild_queue_.erase(next);
    // A task a queue took already builds in its own run.
    const bool waiting = std::any_of(pending_.begin(), pending_.end(),
                                     [&](const Queued& p) { return p.id == q.id; });
    if (!waiting) continue;
    ++prebuilds_running_;
    lock.unlock();
    prebuild(q.id);
    lock.lock();
    --prebuilds_running_;
    work_.notify_all();
  }
}

bool TaskService::builds_pending() const {
  return prebuilds_running_ > 0 || !prebuild_queue_.empty();
}

// The task's build, as its run would make it (RunOptions::build_only); a build that fails moves
// the task to the front of its queue. A failure of the engine itself is left to the run.
void TaskService::prebuild(const std::string& id) {
  const std::optional<Task> task = store_.get(id);
  if (!task) return;
  const auto queue = std::find_if(queues_.begin(), queues_.end(),
                                  [&](const auto& q) { return q->gpu == task->gpu; });
  if (queue == queues_.end()) return;
  bench::RunOptions o = options_.run;
  o.dataset = context_.dataset_root();
  o.loaded_dataset = context_.traces();
  o.device = (*queue)->device;
  o.definitions = {task->definition};
  o.solutions = {task->solution};
  o.workloads = task->workloads;
  o.resume = false;
  o.save_traces = false;
  o.build_only = true;
  o.build_jobs = 1;
  bench::RunResult r;
  try {
    r = bench::run_benchmark(o, {});
  } catch (const std::exception&) {
    return;
  }
  if (r.counts.builds_failed == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it =
      std::find_if(pending_.begin(), pending_.end(), [&](const Queued& q) { return q.id == id; });
  if (it == pending_.end()) return;
  const Queued q = *it;
  pending_.erase(it);
  pending_.push_front(q);
}

std::optional<TaskService::Queued> TaskService::next_task(const Queue& queue) {
  std::unique_lock<std::mutex> lock(mu_);
  auto mine = pending_.end();
  work_.wait(lock, [&] {
    mine = std::find_if(pending_.begin(), pending_.end(),
                        [&](const Queued& q) { return q.gpu == queue.gpu; });
    return stopping_ || (mine != pending_.end() && (queue.gpu || !builds_pending()));
  });
  if (stopping_) return std::nullopt;
  Queued q = *mine;
  pending_.erase(mine);
  cpu_evaluating_ += queue.gpu ? 0 : 1;
  return q;
}

void TaskService::serve_queue(Queue& queue) {
  while (std::optional<Queued> q = next_task(queue)) {
    if (std::optional<Task> task = store_.get(q->id)) evaluate(queue, *task);
    if (queue.gpu) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --cpu_evaluating_;
    }
    prebuild_work_.notify_all();
  }
}

void TaskService::evaluate(Queue& queue, const Task& task) {
  store_.set_running(task.id, queue.device);
  // Workloads with a trace of this task were evaluated before a restart: not again.
  const std::shared_ptr<const TraceSet> set = context_.traces();
  Json traces = Json::array();
  std::vector<std::string> remaining = task.workloads;
  for (const Trace* t : traces_of_task(*set, task)) {
    traces.push_back(to_json(*t));
    std::erase(remaining, t->workload.uuid);
  }
  const Record<Solution>* solution = set->solution(task.solution);
  const Definition* definition = set->definition(task.definition);
  if (!solution || !definition) {
    finish(task.id, TaskStatus::kFailed, traces,
           fmt::format("the dataset no longer has its {}",
                       solution ? "definition " + task.definition : "solution " + task.solution));
    return;
  }
  const std::string key = evaluation_key(solution->value, *definition, options_.run, queue.device);
  if (!options_.reevaluate) take_earlier_answers(queue, task, key, remaining, traces);
  std::vector<std::string> messages;
  // The traces this task appended, published in the dataset snapshot before the task counts
  // as finished: a client that saw it finish reads them at once.
  std::vector<Trace> appended;
  if (!remaining.empty()) {
    try {
      run_workloads(task, key, remaining, queue, traces, messages, appended);
      write_not_run_traces(remaining, traces, appended);
      queue.healthy = true;
    } catch (const std::exception& e) {
      // The engine could not run at all here (a device, the sandbox, the build setup): the
      // task fails with why, and /health shows the queue unhealthy until a run succeeds.
      queue.healthy = false;
      context_.add_own_traces(appended);
      finish(task.id, TaskStatus::kFailed, in_workload_order(std::move(traces), task.workloads),
             e.what());
      return;
    }
  }
  context_.add_own_traces(appended);
  traces = in_workload_order(std::move(traces), task.workloads);
  if (traces.size() == task.workloads.size()) {
    finish(task.id, TaskStatus::kCompleted, traces, "");
  } else {
    finish(task.id, TaskStatus::kFailed, traces,
           fmt::format("{} of {} workloads evaluated: {}", traces.size(), task.workloads.size(),
                       messages.empty() ? "no reason given"
                                        : fmt::format("{}", fmt::join(messages, "; "))));
  }
}

void TaskService::take_earlier_answers(const Queue& queue, const Task& task, const std::string& key,
                                       std::vector<std::string>& remaining, Json& traces) {
  if (remaining.empty() || !options_.run.signing_key) return;
  const AnswerRule rule{.solution = task.solution,
                        .key = key,
                        .signer = options_.run.signing_key->public_key().key_id(),
                        .hardware = queue.hardware};
  const std::shared_ptr<const TraceSet> set = context_.traces();
  for (const auto& [uuid, trace] : earlier_answers(*set, task.definition, remaining, rule)) {
    traces.push_back(to_json(*trace));
    std::erase(remaining, uuid);
  }
}

void TaskService::run_workloads(const Task& task, const std::string& key,
                                const std::vector<std::string>& remaining, Queue& queue,
                                Json& traces, std::vector<std::string>& messages,
                                std::vector<Trace>& appended) {
  bench::RunOptions o = options_.run;
  o.dataset = context_.dataset_root();
  // The snapshot, not the folder loaded again per task: its signed lines cost 0.45 ms each.
  o.loaded_dataset = context_.traces();
  o.device = queue.device;
  o.definitions = {task.definition};
  o.solutions = {task.solution};
  o.workloads = remaining;
  o.resume = false;
  o.save_traces = true;
  // A fresh seed per task, which the submitter neither chooses nor sees before its traces.
  o.seed = random_seed();
  o.environment_extra = Json{{kTaskIdKey, task.id}, {kEvaluationKeyKey, key}};
  bench::RunCallbacks cb;
  cb.on_message = [&](const std::string& m) { messages.push_back(m); };
  cb.on_evaluation = [&](const bench::EvaluationEvent& e) {
    context_.note_own_append(*e.trace);
    appended.push_back(*e.trace);
  };
  const bench::RunResult r = bench::run_benchmark(o, cb);
  for (const Trace& t : r.traces) traces.push_back(to_json(t));
}

void TaskService::write_not_run_traces(std::vector<std::string> remaining, Json& traces,
                                       std::vector<Trace>& appended) {
  const auto timed_out = std::find_if(appended.begin(), appended.end(), [&](const Trace& t) {
    return t.evaluation && t.evaluation->status == EvaluationStatus::kTimeout;
  });
  if (timed_out == appended.end()) return;
  for (const Json& t : traces) std::erase(remaining, t["workload"]["uuid"].get<std::string>());
  if (remaining.empty()) return;
  const std::shared_ptr<const TraceSet> set = context_.traces();
  std::vector<Trace> not_run;
  for (const std::string& uuid : remaining) {
    const Record<Trace>* w = set->workload(uuid);
    if (!w) continue;
    not_run.push_back(not_run_trace(*timed_out, w->value.workload));
    if (options_.run.signing_key) sign_trace(not_run.back(), *options_.run.signing_key);
  }
  TraceSet writable = *set;
  append_traces(writable, not_run);
  for (const Trace& t : not_run) {
    context_.note_own_append(t);
    appended.push_back(t);
    traces.push_back(to_json(t));
  }
}

void TaskService::finish(const std::string& id, TaskStatus status, const Json& traces,
                         const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    store_.finish(id, status, traces, error);
  }
  finished_.notify_all();
  std::map<std::string, int> statuses;
  for (const Json& t : traces) ++statuses[t["evaluation"]["status"].get<std::string>()];
  std::string line = fmt::format("fib serve: task {} {}", id, task_status_name(status));
  for (const auto& [name, n] : statuses) line += fmt::format(" {} {}", n, name);
  if (!error.empty()) line += ": " + error;
  std::cerr << line + "\n";
}

void TaskService::wait(const std::vector<std::string>& ids, double timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds));
  std::unique_lock<std::mutex> lock(mu_);
  if (waiting_ >= max_waiting_) return;
  ++waiting_;
  finished_.wait_until(lock, deadline, [&] {
    if (stopping_) return true;
    return std::all_of(ids.begin(), ids.end(), [&](const std::string& id) {
      const std::optional<Task> t = store_.get(id);
      return !t || task_finished(t->status);
    });
  });
  --waiting_;
}

Json TaskService::health() const {
  Json workers = Json::array();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& q : queues_)
    workers.push_back(Json{{"device", q->device}, {"healthy", q->healthy.load()}});
  return Json{{"status", "ok"}, {"workers", workers}, {"queue_size", pending_.size()}};
}

}  // namespace fib::serve
