// The evaluation side of fib serve: the task store, one queue thread per device, and the waits
// of long polls. Each task runs through bench::run_benchmark (the engine of `fib run`: build
// cache, sandboxed workers, signed traces appended to the dataset), restricted to the task's
// solution and workloads, with the task id in every trace's environment.extra.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fib/serve/server.h"
#include "serve/reuse.h"
#include "serve/submission.h"
#include "serve/task_store.h"

namespace fib::serve {

// The key of environment.extra that names the task a trace belongs to.
inline constexpr const char* kTaskIdKey = "serve_task_id";

class TaskService {
 public:
  // Opens the store and queues the tasks an earlier server left unfinished (their workloads
  // that already have a trace of the task are not evaluated again).
  TaskService(ServeContext& context, const ServeOptions& options);
  ~TaskService();
  TaskService(const TaskService&) = delete;  // owns threads
  TaskService& operator=(const TaskService&) = delete;

  // Starts one queue thread per device.
  void start();
  // Stops taking tasks and waits for the running ones; the queued ones stay pending in the store.
  void stop();

  bool has_cpu_queue() const;
  bool has_gpu_queue() const;

  // Writes the solution into the dataset, stores the task and queues it; returns its id, or
  // nullopt when the sender has as many tasks pending or running as its token allows.
  std::optional<std::string> submit(const Submission& submission, const Identity& sender);
  std::optional<Task> get(const std::string& id) const { return store_.get(id); }
  const TaskStore& store() const { return store_; }
  // Waits until every task is finished, the timeout passes or the service stops; returns at
  // once when half of the HTTP threads are waiting already.
  void wait(const std::vector<std::string>& ids, double timeout_seconds);

  Json health() const;

 private:
  struct Queued {
    std::string id;
    bool gpu = false;
  };
  struct Queue {
    std::string device;
    std::string hardware;  // as its traces name it
    bool gpu = false;
    std::thread thread;
    std::atomic<bool> healthy{true};  // false after the engine itself failed (not a solution)
  };

  void serve_queue(Queue& queue);
  std::optional<Queued> next_task(const Queue& queue);
  void evaluate(Queue& queue, const Task& task);
  // Runs the task's `remaining` workloads; their traces go to `traces`, what the run said to
  // `messages`. Throws what the engine throws.
  void run_workloads(const Task& task, const std::string& key,
                     const std::vector<std::string>& remaining, Queue& queue, Json& traces,
                     std::vector<std::string>& messages, std::vector<Trace>& appended);
  // Earlier traces that answer for the task's workloads (reuse.h), moved from `remaining` to
  // `traces`.
  void take_earlier_answers(const Queue& queue, const Task& task, const std::string& key,
                            std::vector<std::string>& remaining, Json& traces);
  // A trace for each workload of `remaining` the run skipped because the solution timed out on
  // an earlier one: TIMEOUT, "not run", signed and appended like the others.
  void write_not_run_traces(std::vector<std::string> remaining, Json& traces,
                            std::vector<Trace>& appended);
  void finish(const std::string& id, TaskStatus status, const Json& traces,
              const std::string& error);
  void write_solution_file(const Submission& s);
  // Builds of submitted tasks, made on host threads while the tasks wait in their queues (the
  // build cache keeps them for the evaluation); a task whose build fails goes to the front of
  // its queue, since it answers without running. On a server with CPU queues no compiler runs
  // beside a CPU timed call: a build waits for the CPU evaluation in progress, and the CPU queues
  // take their next task once the builds waiting or running are done.
  void prebuild_loop();
  void prebuild(const std::string& id);
  bool builds_pending() const;  // with mu_ held

  ServeContext& context_;
  const ServeOptions& options_;
  TaskStore store_;
  std::vector<std::unique_ptr<Queue>> queues_;
  mutable std::mutex mu_;
  std::condition_variable work_;      // a task was queued, or stopping
  std::condition_variable finished_;  // a task finished, or stopping
  std::deque<Queued> pending_;
  bool stopping_ = false;
  std::size_t waiting_ = 0, max_waiting_ = 1;  // long polls now, and at most
  std::deque<Queued> prebuild_queue_;          // guarded by mu_, as the counts below
  std::size_t prebuilds_running_ = 0;
  std::size_t cpu_evaluating_ = 0;
  std::condition_variable prebuild_work_;
  std::vector<std::thread> prebuilders_;
  std::mutex solution_files_mu_;
  std::mutex submit_mu_;  // a token's quota check and its task's insert, together
};

// The traces of the dataset that belong to a task, one per workload (the first recorded).
std::vector<const Trace*> traces_of_task(const TraceSet& set, const Task& task);

}  // namespace fib::serve
