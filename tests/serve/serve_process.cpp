#include "serve_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include "support/rmsnorm_solution_source.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {

namespace fs = std::filesystem;

void make_rmsnorm_dataset(const fs::path& root, int workloads) {
  const fs::path examples = source_dir() / "examples" / "dataset";
  fs::create_directories(root / "definitions" / "rmsnorm");
  fs::copy_file(examples / "definitions" / "rmsnorm" / "rmsnorm_h2048.json",
                root / "definitions" / "rmsnorm" / "rmsnorm_h2048.json");
  std::ifstream in(examples / "workloads" / "rmsnorm" / "rmsnorm_h2048.jsonl");
  fs::create_directories(root / "workloads" / "rmsnorm");
  std::ofstream out(root / "workloads" / "rmsnorm" / "rmsnorm_h2048.jsonl");
  std::string line;
  for (int i = 0; i < workloads && std::getline(in, line); ++i) out << line << "\n";
}

Json rmsnorm_solution_json(const std::string& name) {
  const std::string code = std::string(kRmsnormSolutionSource) + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)";
  return Json{{"name", name},
              {"definition", "rmsnorm_h2048"},
              {"author", "serve-test"},
              {"spec",
               {{"language", "cpp"},
                {"target_hardware", {"cpu"}},
                {"entry_point", "kernel.cpp::run"},
                {"binding", "fib"}}},
              {"sources", {{{"path", "kernel.cpp"}, {"content", code}}}}};
}

namespace {

std::vector<std::string> serve_command(const std::vector<std::string>& args, const fs::path& home) {
  std::vector<std::string> argv = {
      "env",   "-u",   "FIB_SIGNING_KEY", "-u", "FIB_TRUSTED_KEYS", "FIB_HOME=" + home.string(),
      FIB_EXE, "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

pid_t spawn(const std::vector<std::string>& argv, const fs::path& log) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(fd, 2);
  ::dup2(fd, 1);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());
  ::_exit(127);
}

}  // namespace

ServeProcess::ServeProcess(const fs::path& dataset, const fs::path& home,
                           std::vector<std::string> args)
    : dataset_(dataset), log_(home / fmt::format("serve-{}.log", ::time(nullptr))) {
  // Debian's cpp-httplib sends without MSG_NOSIGNAL: a server closing on a request still being
  // sent must fail that request, not kill the test.
  ::signal(SIGPIPE, SIG_IGN);
  fs::create_directories(home);
  for (int i = 0; fs::exists(log_); ++i) log_ = home / fmt::format("serve-{}.log", i);
  std::vector<std::string> all = {"--local", dataset.string(), "--port", "0"};
  all.insert(all.end(), args.begin(), args.end());
  pid_ = spawn(serve_command(all, home), log_);
  const std::regex listening(R"(on http://[^:]+:(\d+))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    const std::string text = log();
    if (std::regex_search(text, m, listening)) {
      port_ = std::stoi(m[1]);
      return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("fib serve exited before listening:\n" + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("fib serve did not listen within 60 s:\n" + log());
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

std::string ServeProcess::token() const {
  return TempDir::read_file(dataset_ / ".fib-serve" / "token").substr(0, 64);
}

std::unique_ptr<httplib::Client> ServeProcess::client(bool with_token) const {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
  c->set_read_timeout(120, 0);
  if (with_token && fs::exists(dataset_ / ".fib-serve" / "token")) {
    c->set_bearer_token_auth(token());
  }
  return c;
}

std::string ServeProcess::log() const { return TempDir::read_file(log_); }

void ServeProcess::kill_hard() {
  ::kill(pid_, SIGKILL);
  wait();
}

int ServeProcess::wait() {
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::pair<int, std::string> serve_refused(const std::vector<std::string>& args,
                                          const fs::path& home) {
  const fs::path log = home / "refused.log";
  fs::create_directories(home);
  const pid_t pid = spawn(serve_command(args, home), log);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
          TempDir::read_file(log)};
}

FibOutput serve_command_output(const std::vector<std::string>& args, const fs::path& home) {
  fs::create_directories(home);
  const fs::path out = home / "command.out", err = home / "command.err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(o, 1);
    ::dup2(e, 2);
    const std::vector<std::string> argv = serve_command(args, home);
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    ::execvp(cargv[0], cargv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), TempDir::read_file(out),
          TempDir::read_file(err)};
}

Json body_json(const httplib::Result& r) {
  if (!r) {
    ADD_FAILURE() << "no response: " << httplib::to_string(r.error());
    return Json();
  }
  try {
    return Json::parse(r->body);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "): " << r->body.substr(0, 300);
    return Json();
  }
}

}  // namespace fib::testing
