// fib serve: the evaluation service and the web interface over a dataset (docs/serve.md).
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/bench/eval/eval_config.h"
#include "fib/dataset/keys.h"
#include "fib/dataset/layout.h"
#include "fib/serve/server.h"
#include "fib/serve/tokens.h"

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
  std::optional<std::string> config;
  std::string reference = "auto";
  std::uint64_t memory_limit_mb = 0;
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
  if (a.config) {
    // Every task reads it: a missing or broken file is an error at start, not a failed task
    // each time.
    if (!std::filesystem::is_regular_file(*a.config)) {
      throw Error(*a.config, "--config names no file", "give the eval config YAML's path");
    }
    bench::load_eval_config(*a.config);
    o.config = *a.config;
  }
  o.reference = bench::parse_reference_choice(a.reference);
  o.memory_limit_bytes = a.memory_limit_mb << 20;
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

// `fib serve token ...`: the token store of a server's state folder (the server need not run;
// a running one sees the change at its next request).
struct TokenArgs {
  std::string local;
  std::filesystem::path state_dir;
  std::string author, id;
  std::size_t max_queued = serve::kDefaultTokenMaxQueued;
  std::size_t max_body_mb = serve::kDefaultTokenMaxBodyBytes >> 20;
  std::shared_ptr<const ServeArgs> serve;  // `fib serve --local DIR token ...` names it there
};

std::filesystem::path token_state_dir(const TokenArgs& a) {
  if (!a.state_dir.empty()) return a.state_dir;
  if (!a.serve->options.state_dir.empty()) return a.serve->options.state_dir;
  const std::string local = a.local.empty() ? a.serve->local : a.local;
  return std::filesystem::path(dataset_path(local)) / ".fib-serve";
}

// The store, with its state folder made (its owner's only) when this is the first use.
std::unique_ptr<serve::TokenStore> open_tokens(const TokenArgs& a) {
  const std::filesystem::path dir = token_state_dir(a);
  if (std::filesystem::create_directories(dir)) {
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace);
  }
  return std::make_unique<serve::TokenStore>(serve::token_store_file(dir));
}

std::string when(double seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min);
}

int token_add(const TokenArgs& a) {
  if (serve::is_reserved_author(a.author, "")) {
    throw Error("--author", fmt::format("'{}' is reserved for the admin token", a.author),
                "the admin token (the state folder's `token`) submits as any author");
  }
  if (!layout::is_path_component(a.author)) {
    throw Error("--author", fmt::format("'{}' cannot name a folder", a.author),
                "an author names the folder of its solutions: one path component");
  }
  serve::TokenRecord record;
  record.author = a.author;
  record.max_queued = a.max_queued;
  record.max_body_bytes = a.max_body_mb << 20;
  const std::string token = open_tokens(a)->add(record);
  std::cerr << fmt::format(
      "fib serve: token {} for author {} (at most {} tasks queued, bodies up to {} MiB); it is "
      "shown once, fib keeps only its hash\n",
      record.id, record.author, record.max_queued, a.max_body_mb);
  std::cout << token << "\n";
  return kExitOk;
}

int token_list(const TokenArgs& a) {
  const std::vector<serve::TokenRecord> tokens = open_tokens(a)->list();
  if (tokens.empty()) {
    std::cerr << "fib serve: no tokens but the admin's (`fib serve token add --author NAME`)\n";
    return kExitOk;
  }
  std::cout << fmt::format("{:<12}  {:<20}  {:>6}  {:>8}  {:<17}  {}\n", "id", "author", "queued",
                           "body MiB", "created", "revoked");
  for (const serve::TokenRecord& r : tokens) {
    std::cout << fmt::format("{:<12}  {:<20}  {:>6}  {:>8}  {:<17}  {}\n", r.id, r.author,
                             r.max_queued, r.max_body_bytes >> 20, when(r.created),
                             r.revoked == 0 ? "-" : when(r.revoked));
  }
  return kExitOk;
}

int token_revoke(const TokenArgs& a) {
  const serve::TokenRecord r = open_tokens(a)->revoke(a.id);
  std::cerr << fmt::format("fib serve: revoked token {} of author {}\n", r.id, r.author);
  return kExitOk;
}

CLI::App* register_token_commands(CLI::App& serve, Runner& run,
                                  std::shared_ptr<const ServeArgs> serve_args) {
  auto a = std::make_shared<TokenArgs>();
  a->serve = std::move(serve_args);
  CLI::App* token = serve.add_subcommand(
      "token",
      "Authors' tokens: add (printed once), list, revoke; stored hashed in the state folder");
  token->require_subcommand(1);
  auto location = [&a](CLI::App* cmd) {
    cmd->add_option("--local", a->local, "Dataset folder (default: $FIB_DATASET_PATH)");
    cmd->add_option("--state", a->state_dir, "State folder (default: DIR/.fib-serve)");
  };
  CLI::App* add = token->add_subcommand("add", "Make a token for an author; prints it once");
  location(add);
  add->add_option("--author", a->author, "The author every submission of the token is made as")
      ->required();
  add->add_option("--max-queued", a->max_queued,
                  fmt::format("Tasks pending or running at once (default {}; 0: no limit)",
                              serve::kDefaultTokenMaxQueued));
  add->add_option("--max-body-mb", a->max_body_mb,
                  fmt::format("Largest request body, MiB (default {}; the server's --max-body-mb "
                              "bounds it too)",
                              serve::kDefaultTokenMaxBodyBytes >> 20))
      ->check(CLI::Range(1, 1024));
  add->callback([&run, a] { run = [a] { return token_add(*a); }; });
  CLI::App* list = token->add_subcommand("list", "The tokens: id, author, limits, when revoked");
  location(list);
  list->callback([&run, a] { run = [a] { return token_list(*a); }; });
  CLI::App* revoke =
      token->add_subcommand("revoke", "Revoke a token (at once, also for a running server)");
  location(revoke);
  revoke->add_option("id", a->id, "The token's id, or its first 4 characters or more")->required();
  revoke->callback([&run, a] { run = [a] { return token_revoke(*a); }; });
  return token;
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
  o.run.timeout_seconds = serve::kDefaultEvaluationTimeoutSeconds;
  cmd->add_option("--timeout", o.run.timeout_seconds,
                  fmt::format("Seconds one (solution, workload) evaluation may take (default {})",
                              serve::kDefaultEvaluationTimeoutSeconds))
      ->check(CLI::Range(1.0, 86400.0));
  cmd->add_option("--config", a->config, "Eval config YAML (tolerances per op type/definition)");
  cmd->add_option("--reference", a->reference,
                  "What checks the solutions: native, python or auto (default: native where it "
                  "exists, else python)");
  cmd->add_option("--memory-limit-mb", a->memory_limit_mb,
                  "Memory limit per worker: its address space on the CPU (default: half of the "
                  "RAM), its data (RLIMIT_DATA) on CUDA devices (default: none)");
  cmd->add_option("--python", o.run.python,
                  "The python3 (with PyTorch) that runs Python, Triton and torch-extension "
                  "solutions (default: $FIB_PYTHON, else the first python3 that imports torch)");
  add_sandbox_option(cmd, o.run.sandbox,
                     "Workers (solutions' and references') in a bubblewrap sandbox: auto "
                     "(default), required, off");
  cmd->add_option("--threads", o.run.threads, "CPU threads per worker (default: all cores)");
  cmd->add_option("--build-cache", o.run.build_cache,
                  "Build cache folder (default: $FIB_CACHE_DIR or ~/.cache/fib/build)");
  cmd->add_option("--build-jobs", o.run.build_jobs,
                  "Submissions built while they wait in their queue (default 0: on half the "
                  "cores, and one that does not compile answers first; 1: each built when its "
                  "queue runs it)");
  cmd->add_option("--signing-key", a->signing_key,
                  "Ed25519 key the traces are signed with (default: as fib run)");
  cmd->add_flag("--reevaluate", o.reevaluate,
                "Run every task, even one this server's traces of the same solution and settings "
                "could answer");
  CLI::App* token = register_token_commands(*cmd, run, a);
  cmd->callback([&run, a, token] {
    if (token->parsed()) return;  // `fib serve token ...` set what runs
    run = [a] { return serve_cmd(*a); };
  });
}

}  // namespace fib::cli
