#include "serve/task_store.h"

#include <fmt/format.h>

#include <chrono>

#include "fib/base/diagnostics.h"
#include "serve/sqlite_statement.h"

namespace fib::serve {

namespace {

constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS tasks (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  status TEXT NOT NULL,
  definition TEXT NOT NULL,
  solution TEXT NOT NULL,
  workloads TEXT NOT NULL,
  gpu INTEGER NOT NULL,
  device TEXT NOT NULL DEFAULT '',
  traces TEXT NOT NULL DEFAULT '[]',
  error TEXT NOT NULL DEFAULT '',
  created REAL NOT NULL,
  updated REAL NOT NULL,
  token TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks(status, seq);
)";
// Stores made before tasks named their token get the column (their tasks: the admin's, '').
constexpr const char* kAddTokenColumn =
    "ALTER TABLE tasks ADD COLUMN token TEXT NOT NULL DEFAULT ''";

constexpr const char* kColumns =
    "id, status, definition, solution, workloads, gpu, device, traces, error, created, updated, "
    "token";
// The same row without its traces (lists of many tasks).
// A summary's traces are stubs that hold only each trace's evaluation status (for a listing's
// outcome counts): a listing of a thousand tasks then parses no trace whole.
constexpr const char* kSummaryColumns =
    "id, status, definition, solution, workloads, gpu, device, "
    "(SELECT json_group_array(json_object('evaluation', json_object('status', "
    "json_extract(value, '$.evaluation.status')))) FROM json_each(tasks.traces)), "
    "error, created, updated, token";

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Task read_task(const Statement& s) {
  Task t;
  t.id = s.text(0);
  const std::optional<TaskStatus> status = parse_task_status(s.text(1));
  if (!status) throw Error("task store", fmt::format("unknown task status '{}'", s.text(1)));
  t.status = *status;
  t.definition = s.text(2);
  t.solution = s.text(3);
  t.workloads = Json::parse(s.text(4)).get<std::vector<std::string>>();
  t.gpu = s.integer(5) != 0;
  t.device = s.text(6);
  t.traces = Json::parse(s.text(7));
  t.error = s.text(8);
  t.created = s.real(9);
  t.updated = s.real(10);
  t.token = s.text(11);
  return t;
}

}  // namespace

std::string_view task_status_name(TaskStatus s) {
  switch (s) {
    case TaskStatus::kPending:
      return "pending";
    case TaskStatus::kRunning:
      return "running";
    case TaskStatus::kCompleted:
      return "completed";
    case TaskStatus::kFailed:
      return "failed";
  }
  return "unknown";
}

std::optional<TaskStatus> parse_task_status(std::string_view s) {
  for (TaskStatus t : kTaskStatuses) {
    if (task_status_name(t) == s) return t;
  }
  return std::nullopt;
}

bool task_finished(TaskStatus s) { return s == TaskStatus::kCompleted || s == TaskStatus::kFailed; }

TaskStore::TaskStore(const std::filesystem::path& file) {
  if (sqlite3_open_v2(file.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw Error(file.string(), fmt::format("cannot open the task store: {}", why));
  }
  sqlite3_busy_timeout(db_, 10000);
  try {
    // WAL: a committed task survives the process being killed at any point; readers (long
    // polls) never block the queues' writes.
    exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
    exec(kSchema);
    if (!has_token_column()) exec(kAddTokenColumn);
  } catch (const Error& e) {
    sqlite3_close(db_);
    throw Error(file.string(), fmt::format("not a usable task store: {}", e.what()),
                "move it away to start with an empty one");
  }
}

TaskStore::~TaskStore() { sqlite3_close(db_); }

void TaskStore::exec(const char* sql) const {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string why = message ? message : "unknown error";
    sqlite3_free(message);
    throw Error("task store", why);
  }
}

void TaskStore::insert(const Task& t) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_,
              fmt::format("INSERT INTO tasks ({}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", kColumns));
  s.bind(1, t.id)
      .bind(2, task_status_name(t.status))
      .bind(3, t.definition)
      .bind(4, t.solution)
      .bind(5, Json(t.workloads).dump())
      .bind(6, t.gpu ? 1 : 0)
      .bind(7, t.device)
      .bind(8, t.traces.dump())
      .bind(9, t.error)
      .bind(10, t.created ? t.created : now_seconds())
      .bind(11, now_seconds())
      .bind(12, t.token);
  s.step();
}

bool TaskStore::has_token_column() const {
  Statement s(db_, "SELECT COUNT(*) FROM pragma_table_info('tasks') WHERE name = 'token'");
  return s.step() && s.integer(0) > 0;
}

std::size_t TaskStore::unfinished_of(const std::string& token) const {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_,
              "SELECT COUNT(*) FROM tasks WHERE token = ? AND status IN ('pending', 'running')");
  s.bind(1, token);
  return s.step() ? static_cast<std::size_t>(s.integer(0)) : 0;
}

std::optional<Task> TaskStore::get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, fmt::format("SELECT {} FROM tasks WHERE id = ?", kColumns));
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_task(s);
}

void TaskStore::set_running(const std::string& id, const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, "UPDATE tasks SET status = 'running', device = ?, updated = ? WHERE id = ?");
  s.bind(1, device).bind(2, now_seconds()).bind(3, id);
  s.step();
}

void TaskStore::finish(const std::string& id, TaskStatus status, const Json& traces,
                       const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, "UPDATE tasks SET status = ?, traces = ?, error = ?, updated = ? WHERE id = ?");
  s.bind(1, task_status_name(status))
      .bind(2, traces.dump(-1, ' ', false, Json::error_handler_t::replace))
      .bind(3, error)
      .bind(4, now_seconds())
      .bind(5, id);
  s.step();
}

std::vector<Task> TaskStore::unfinished() const {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, fmt::format("SELECT {} FROM tasks WHERE status IN ('pending', 'running') "
                               "ORDER BY seq",
                               kColumns));
  std::vector<Task> out;
  while (s.step()) out.push_back(read_task(s));
  return out;
}

void TaskStore::requeue_running() {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_,
              "UPDATE tasks SET status = 'pending', device = '', updated = ? "
              "WHERE status = 'running'");
  s.bind(1, now_seconds());
  s.step();
}

std::vector<Task> TaskStore::recent(std::size_t limit, std::optional<TaskStatus> status,
                                    const std::optional<std::string>& token) const {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_,
              fmt::format("SELECT {} FROM tasks WHERE {} AND {} ORDER BY seq DESC LIMIT ?",
                          kSummaryColumns, status ? "status = ?" : "1", token ? "token = ?" : "1"));
  int next = 1;
  if (status) s.bind(next++, task_status_name(*status));
  if (token) s.bind(next++, *token);
  s.bind(next, static_cast<int>(limit));
  std::vector<Task> out;
  while (s.step()) out.push_back(read_task(s));
  return out;
}

std::size_t TaskStore::count(TaskStatus status, const std::optional<std::string>& token) const {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, fmt::format("SELECT COUNT(*) FROM tasks WHERE status = ? AND {}",
                               token ? "token = ?" : "1"));
  s.bind(1, task_status_name(status));
  if (token) s.bind(2, *token);
  return s.step() ? static_cast<std::size_t>(s.integer(0)) : 0;
}

}  // namespace fib::serve
