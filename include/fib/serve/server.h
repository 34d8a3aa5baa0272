// fib serve: an HTTP service over a dataset (docs/serve.md). It answers upstream's endpoints
// (definitions, workloads, evaluation tasks) with compatible JSON, behind a bearer token, and
// serves the web interface's static files under /ui/.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fib/bench/run.h"
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
  // The evaluation settings every task runs with (warmup, iterations, signing key, sandbox,
  // worker executable...): `fib run`'s options; dataset, device and the allow-lists are set per
  // task.
  bench::RunOptions run;
};

// The dataset as the routes see it: a loaded TraceSet shared as an immutable snapshot. A
// snapshot is replaced (not modified) when the dataset changes, so a handler that holds one
// reads it without a lock while evaluations append traces.
class ServeContext {
 public:
  ServeContext(std::filesystem::path dataset, std::string baseline_author,
               std::filesystem::path state_dir);

  const std::filesystem::path& dataset_root() const { return dataset_; }
  const std::string& baseline_author() const { return baseline_author_; }
  const std::filesystem::path& state_dir() const { return state_dir_; }

  // The current dataset. Reloads it first when it was marked changed, or when its files changed
  // on disk (checked at most once a second: another `fib run` may append traces).
  std::shared_ptr<const TraceSet> traces();
  // Says the dataset changed (a trace or solution was written); the next traces() reloads.
  void mark_changed() { changed_ = true; }

 private:
  std::uint64_t fingerprint() const;

  std::filesystem::path dataset_;
  std::string baseline_author_;
  std::filesystem::path state_dir_;
  std::mutex mu_;
  std::shared_ptr<const TraceSet> snapshot_;
  std::uint64_t snapshot_fingerprint_ = 0;
  std::chrono::steady_clock::time_point checked_;
  std::atomic<bool> changed_{false};
};

// The web interface's folder: ServeOptions::web_dir, else $FIB_WEB_DIR, else the source tree's
// web/, else <prefix>/share/fib/web beside the installed binary. Empty when none exists; throws
// fib::Error when the flag or $FIB_WEB_DIR names no folder.
std::filesystem::path find_web_dir(const std::filesystem::path& flag);

class RouteTable;
class TaskService;

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
  // The token clients send; empty with no_auth.
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
  Json health() const;

  ServeOptions options_;
  std::unique_ptr<ServeContext> context_;
  std::unique_ptr<TaskService> tasks_;
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
