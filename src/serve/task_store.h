// The persistent task store of fib serve: one SQLite database in the state folder. A task is
// written before its id is returned, and its final result when it ends, so a restart (even after
// SIGKILL) finds every task a client was told about.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/trace/json_reader.h"

namespace fib::serve {

// Upstream's task states. "completed" says nothing about correctness: each trace's evaluation
// status does.
enum class TaskStatus : std::uint8_t { kPending, kRunning, kCompleted, kFailed };
std::string_view task_status_name(TaskStatus s);  // "pending", "running", ...
std::optional<TaskStatus> parse_task_status(std::string_view s);
inline constexpr TaskStatus kTaskStatuses[] = {TaskStatus::kPending, TaskStatus::kRunning,
                                               TaskStatus::kCompleted, TaskStatus::kFailed};
bool task_finished(TaskStatus s);

struct Task {
  std::string id;
  TaskStatus status = TaskStatus::kPending;
  std::string definition;
  std::string solution;                // its normalized name
  std::vector<std::string> workloads;  // the uuids it evaluates, in order
  bool gpu = false;                    // whether it runs on a CUDA queue
  std::string device;                  // where it ran (or runs); empty while pending
  Json traces = Json::array();         // the final traces (to_json), once finished
  std::string error;                   // why it failed
  double created = 0, updated = 0;     // seconds since the epoch
  std::string token;                   // the id of the token that submitted it ('': the admin's)
};

class TaskStore {
 public:
  // Opens (creating) the database. Throws fib::Error when it cannot be opened or is not one.
  explicit TaskStore(const std::filesystem::path& file);
  ~TaskStore();
  TaskStore(const TaskStore&) = delete;  // owns the connection
  TaskStore& operator=(const TaskStore&) = delete;

  void insert(const Task& task);
  std::optional<Task> get(const std::string& id) const;
  void set_running(const std::string& id, const std::string& device);
  void finish(const std::string& id, TaskStatus status, const Json& traces,
              const std::string& error);
  // Pending and running tasks, oldest first: the work a restart resumes.
  std::vector<Task> unfinished() const;
  // Marks the tasks an earlier server left running as pending again (they wait for a queue).
  void requeue_running();
  // The newest tasks first, at most `limit`, of one status and one token when given; each trace
  // stands as {"evaluation": {"status": S}} only.
  std::vector<Task> recent(std::size_t limit, std::optional<TaskStatus> status,
                           const std::optional<std::string>& token = std::nullopt) const;
  std::size_t count(TaskStatus status,
                    const std::optional<std::string>& token = std::nullopt) const;
  // The pending and running tasks a token submitted (its queue quota).
  std::size_t unfinished_of(const std::string& token) const;

 private:
  void exec(const char* sql) const;
  bool has_token_column() const;

  sqlite3* db_ = nullptr;
  mutable std::mutex mu_;
};

}  // namespace fib::serve
