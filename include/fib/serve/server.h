// fib serve: an HTTP service over a dataset (docs/serve.md). It answers upstream's endpoints
// (definitions, workloads, evaluation tasks) with compatible JSON, behind a bearer token, and
// serves the web interface's static files under /ui/.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace fib::serve {

// Keep-alive connections hold an HTTP thread each, and a long poll holds one while it waits: the
// pool is sized for 100 concurrent clients, well beyond the cores. At most half of it waits in
// long polls at once (a poll beyond that answers at once), so reads are always served.
inline constexpr unsigned kDefaultHttpThreads = 128;

// A service's evaluations time out sooner than `fib run`'s (300 s): a hung solution holds its
// device's only queue, and every task behind it waits (`fib serve --timeout`).
inline constexpr double kDefaultEvaluationTimeoutSeconds = 60;

struct ServeOptions {
  std::filesystem::path dataset;
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (Server::port() says which)
  // Evaluation devices, one queue each: "cpu", "cuda:0", ...
  std::vector<std::string> devices = {"cpu"};
  std::filesystem::path token_file;  // empty: the state folder's token, made on first start
  std::filesystem::path state_dir;   // empty: <dataset>/.fib-serve
  bool no_auth = false;              // loopback only
  std::string baseline_author;       // the leaderboard's baseline
  std::filesystem::path web_dir;     // empty: found like fib's other folders (find_web_dir)
  unsigned http_threads = 0;         // HTTP worker threads; 0: kDefaultHttpThreads
  std::size_t max_body_bytes = std::size_t{16} << 20;
  // Every task runs, even where this server's traces of the same solution, workload and settings
  // could answer it (docs/serve.md, "Identical submissions").
  bool reevaluate = false;
  // The evaluation settings every task runs with (warmup, iterations, signing key, sandbox,
  // worker executable...): `fib run`'s options; dataset, device and the allow-lists are set per
  // task.
  bench::RunOptions run;
};

// The dataset snapshot the routes read. A reader takes the current snapshot under a short lock
// and never waits for a load: the server's own writes (solution files, evaluation traces) are
// applied to a copy that replaces the snapshot, and changes made on disk by anything else (another
// `fib run` appending traces) are found by a watcher thread, which compares the files' sizes and
// times with what the snapshot and the server's own writes account for, once a second, and
// reloads the dataset while readers keep the old snapshot.
class ServeContext {
 public:
  ServeContext(std::filesystem::path dataset, std::string baseline_author,
               std::filesystem::path state_dir);
  ~ServeContext();                             // stops the watcher
  ServeContext(const ServeContext&) = delete;  // owns a thread
  ServeContext& operator=(const ServeContext&) = delete;

  const std::filesystem::path& dataset_root() const { return dataset_; }
  const std::string& baseline_author() const { return baseline_author_; }
  const std::filesystem::path& state_dir() const { return state_dir_; }

  // The current dataset snapshot; never modified, replaced when the dataset changes.
  std::shared_ptr<const TraceSet> traces() const;
  // Accounts for a trace the server has just appended to its traces file (bench::RunCallbacks::
  // on_evaluation), so that the watcher does not take the append for an external change.
  void note_own_append(const Trace& trace);
  // Publishes a snapshot with the server's own appended traces added (those the snapshot holds
  // already are not added twice); readers see them once this returns.
  void add_own_traces(std::span<const Trace> traces);
  // Publishes a snapshot with a solution the server has just written to `file` in the dataset
  // (nothing when the snapshot has it).
  void add_own_solution(const Solution& solution, const std::filesystem::path& file);

 private:
  struct FileStamp {
    std::uintmax_t size = 0;
    std::int64_t mtime = 0;
    bool any_mtime = false;  // the server appended to it: its time is not known
  };
  using DiskState = std::map<std::string, FileStamp>;  // by path relative to the dataset
  // The server's own writes while a reload runs, applied again to what it loaded.
  struct OwnWrites {
    std::vector<std::pair<std::string, std::uintmax_t>> appends;  // file, bytes
    std::vector<Trace> traces;
    std::vector<std::pair<std::string, FileStamp>> files;
    std::vector<Solution> solutions;
  };

  DiskState disk_state() const;
  bool matches_disk(const DiskState& disk);
  std::optional<FileStamp> stamp_of(const std::filesystem::path& file) const;
  void watch();
  void check_disk();
  void publish_reload(TraceSet loaded, DiskState scanned);

  std::filesystem::path dataset_;
  std::string baseline_author_;
  std::filesystem::path state_dir_;
  // Guards snapshot_, expected_ and since_scan_; held only to read or replace them.
  mutable std::mutex mu_;
  // One snapshot writer at a time (own writes, the publication of a reload); taken before mu_.
  std::mutex update_mu_;
  std::shared_ptr<const TraceSet> snapshot_;
  DiskState expected_;  // the files as the snapshot and the server's own writes leave them
  std::optional<OwnWrites> since_scan_;
  std::mutex watch_mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread watcher_;
};

// The web interface's folder: ServeOptions::web_dir, else $FIB_WEB_DIR, else the source tree's
// web/, else <prefix>/share/fib/web beside the installed binary. Empty when none exists; throws
// fib::Error when the flag or $FIB_WEB_DIR names no folder.
std::filesystem::path find_web_dir(const std::filesystem::path& flag);

class RouteTable;
class TaskService;
class Authenticator;

struct RouteInfo {
  std::string method;  // "GET", "POST"
  std::string path;    // "/definitions/{name}"
  std::string description;
};

// The server: routes, authentication, evaluation queues. listen() blocks until stop() (or
// POST /shutdown) and returns once queued work is saved for the next start.
class Server {
 public:
  // Checks the options (a non-loopback bind needs a token; --no-auth needs loopback), opens the
  // state folder and the task store, and loads the dataset. Throws fib::Error.
  explicit Server(ServeOptions options);
  ~Server();
  Server(const Server&) = delete;  // owns threads and a listening socket
  Server& operator=(const Server&) = delete;

  // Binds; returns the port (the chosen one when options.port is 0). Throws fib::Error.
  int bind();
  // Starts the evaluation queues and serves until stop(); then waits for the running tasks (the
  // queued ones stay in the store for the next start). bind() first.
  void listen();
  void stop();

  ServeContext& context() { return *context_; }
  // The admin token; empty with no_auth. Authors' tokens are in the state folder's token store
  // (`fib serve token add`).
  const std::string& token() const { return token_; }
  // Where a token made by fib was written (empty when it came from --token-file).
  const std::filesystem::path& token_path() const { return token_path_; }
  const std::filesystem::path& web_dir() const { return web_dir_; }
  // Every route registered, paths with {name} placeholders (GET /, the OpenAPI test).
  const std::vector<RouteInfo>& routes() const { return routes_; }

 private:
  void install_handlers();
  void register_routes();
  void register_service_routes(RouteTable& routes);
  void register_site_files(RouteTable& routes);
  void login(const httplib::Request& req, httplib::Response& res);
  bool admitted(const httplib::Request& req, httplib::Response& res) const;
  Json health() const;

  ServeOptions options_;
  std::unique_ptr<ServeContext> context_;
  std::unique_ptr<TaskService> tasks_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<httplib::Server> http_;
  std::string token_;
  std::filesystem::path token_path_;
  std::filesystem::path web_dir_;
  std::vector<RouteInfo> routes_;
  int port_ = 0;
};

// Whether a host name or address is the loopback interface (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

}  // namespace fib::serve
