// fib serve: the evaluation service and the web interface over a dataset (docs/serve.md).
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/dataset/keys.h"
#include "fib/serve/server.h"

#ifndef FIB_ABI_INCLUDE_DIR
#define FIB_ABI_INCLUDE_DIR ""
#endif

namespace fib::cli {

namespace {

struct ServeArgs {
  serve::ServeOptions options;
  std::string local;
  std::string devices = "cpu";
  std::optional<int> warmup, iterations, trials;
  std::optional<double> rtol, atol;
  std::size_t max_body_mb = 16;
  std::string signing_key;
};

std::atomic<bool> g_stop_requested{false};

void request_stop(int) { g_stop_requested = true; }

std::vector<std::string> split_devices(const std::string& list) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    if (end > at) out.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  if (out.empty())
    throw Error("--devices", "no device given", "e.g. --devices cpu or cuda:0,cuda:1");
  return out;
}

// The evaluation settings of every task, as `fib run` takes them.
void set_run_options(ServeArgs& a) {
  bench::RunOptions& o = a.options.run;
  o.cli.warmup_runs = a.warmup;
  o.cli.iterations = a.iterations;
  o.cli.num_trials = a.trials;
  o.cli.rtol = a.rtol;
  o.cli.atol = a.atol;
  o.worker_executable = worker_executable();
  if (const char* env = std::getenv("FIB_INCLUDE_DIR")) {
    o.abi_include_dir = env;
  } else {
    o.abi_include_dir = FIB_ABI_INCLUDE_DIR;
  }
  if (!std::filesystem::exists(o.abi_include_dir / "fib" / "solution.h")) {
    throw Error("fib/solution.h", "cannot find the solution ABI header",
                "set FIB_INCLUDE_DIR to the folder holding fib/solution.h (fib's include/)");
  }
  o.python_bridge_dir = FIB_PYTHON_BRIDGE_DIR;
  const std::filesystem::path key_path =
      a.signing_key.empty() ? default_signing_key_path() : std::filesystem::path(a.signing_key);
  bool created = false;
  o.signing_key = load_or_create_signing_key(key_path, &created);
  if (created) {
    std::cerr << fmt::format("fib serve: made a signing key at {} (key id {})\n", key_path.string(),
                             o.signing_key->public_key().key_id().substr(0, 16));
  }
}

void print_banner(const serve::Server& server, const serve::ServeOptions& o, int port) {
  const std::string base = fmt::format("http://{}:{}", o.host, port);
  std::cerr << fmt::format("fib serve: {} on {} (devices: {})\n", o.dataset.string(), base,
                           fmt::join(o.devices, ", "));
  if (server.token().empty()) {
    std::cerr << "fib serve: warning: --no-auth: anyone on this host can submit code to run\n";
  } else {
    const std::string where =
        server.token_path().empty() ? o.token_file.string() : server.token_path().string();
    std::cerr << fmt::format(
        "fib serve: token in {}\n"
        "  API:     curl -H \"Authorization: Bearer $(cat {})\" {}/definitions\n"
        "  Browser: {}/login?token={}\n",
        where, where, base, base, server.token());
  }
  if (server.web_dir().empty()) {
    std::cerr << "fib serve: warning: the web interface's files were not found (--web-dir); "
                 "/ui/ answers 404\n";
  }
}

int serve_cmd(ServeArgs& a) {
  a.options.dataset = dataset_path(a.local);
  a.options.devices = split_devices(a.devices);
  a.options.max_body_bytes = a.max_body_mb << 20;
  set_run_options(a);
  serve::Server server(a.options);
  const int port = server.bind();
  print_banner(server, a.options, port);
  struct sigaction action {};
  action.sa_handler = request_stop;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  std::atomic<bool> stopped{false};
  // The signal handler only sets a flag; this thread turns it into a stop.
  std::thread watcher([&] {
    while (!stopped && !g_stop_requested)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.stop();
  });
  server.listen();
  stopped = true;
  watcher.join();
  std::cerr << "fib serve: stopped\n";
  return kExitOk;
}

}  // namespace

void register_serve(CLI::App& app, Runner& run) {
  auto a = std::make_shared<ServeArgs>();
  serve::ServeOptions& o = a->options;
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve a dataset over HTTP: upstream's API, evaluation tasks, the web interface");
  cmd->add_option("--local", a->local, "Dataset folder (default: $FIB_DATASET_PATH)");
  cmd->add_option("--host", o.host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", o.port, "Port (default 8000; 0: any free port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--devices", a->devices,
                  "Evaluation devices, one queue each: cpu (default) or cuda:0,cuda:1,...");
  cmd->add_option("--token-file", o.token_file,
                  "File whose first line is the bearer token (default: the state folder's "
                  "token, made on first start)");
  cmd->add_option("--state", o.state_dir,
                  "State folder: task store, token (default: DIR/.fib-serve)");
  cmd->add_flag("--no-auth", o.no_auth, "No token (loopback only; for upstream's clients)");
  cmd->add_option("--baseline-author", o.baseline_author, "The leaderboard's baseline author");
  cmd->add_option("--web-dir", o.web_dir, "The web interface's folder (default: fib's web/)");
  cmd->add_option("--http-threads", o.http_threads,
                  "HTTP threads: keep-alive clients served at once (default 128)");
  cmd->add_option("--max-body-mb", a->max_body_mb, "Largest request body, MiB (default 16)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--warmup-runs", a->warmup, "Untimed calls before each trial (default 10)");
  cmd->add_option("--iterations", a->iterations, "Timed calls per trial, at most (default 50)");
  cmd->add_option("--num-trials", a->trials, "Trials per evaluation (default 3)");
  cmd->add_option("--rtol", a->rtol, "Relative tolerance (default 1e-2)");
  cmd->add_option("--atol", a->atol, "Absolute tolerance (default 1e-2)");
  cmd->add_option("--timeout", o.run.timeout_seconds,
                  "Seconds one (solution, workload) evaluation may take (default 300)");
  add_sandbox_option(cmd, o.run.sandbox,
                     "Workers (solutions' and references') in a bubblewrap sandbox: auto "
                     "(default), required, off");
  cmd->add_option("--threads", o.run.threads, "CPU threads per worker (default: all cores)");
  cmd->add_option("--build-cache", o.run.build_cache,
                  "Build cache folder (default: $FIB_CACHE_DIR or ~/.cache/fib/build)");
  cmd->add_option("--signing-key", a->signing_key,
                  "Ed25519 key the traces are signed with (default: as fib run)");
  cmd->callback([&run, a] { run = [a] { return serve_cmd(*a); }; });
}

}  // namespace fib::cli
