// A `fib serve` process on loopback for the API and load tests: started on a free port, talked to
// with cpp-httplib's client, stopped gracefully or killed with SIGKILL.
#pragma once

#include <httplib.h>
#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fib/trace/json_reader.h"

namespace fib::testing {

// A dataset with one definition (rmsnorm_h2048, from examples/) and its first `workloads`
// workloads (the example has two), so an evaluation is one small CPU workload by default.
void make_rmsnorm_dataset(const std::filesystem::path& root, int workloads = 1);

// A correct CPU solution of rmsnorm_h2048 (tests/support/rmsnorm_solution_source.h), as the JSON
// POST /evaluate takes.
Json rmsnorm_solution_json(const std::string& name);

class ServeProcess {
 public:
  // Starts `fib serve --local DATASET --port 0 ARGS...` with FIB_HOME under `home` and waits
  // until it listens. Fails the test (throws) when it exits first.
  ServeProcess(const std::filesystem::path& dataset, const std::filesystem::path& home,
               std::vector<std::string> args = {});
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;  // owns a child process
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  // A client that sends the token (none with --no-auth); `with_token` false: one that does not.
  std::unique_ptr<httplib::Client> client(bool with_token = true) const;
  std::string token() const;
  std::string log() const;  // what the server wrote to stderr so far

  void kill_hard();  // SIGKILL, as a crash or an OOM kill would
  int wait();        // waits for the process to exit; its exit status

 private:
  std::filesystem::path dataset_, log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Runs `fib serve ARGS...` expecting it to refuse to start; its exit code and stderr.
std::pair<int, std::string> serve_refused(const std::vector<std::string>& args,
                                          const std::filesystem::path& home);

// Runs `fib serve ARGS...` to its end (e.g. `token add`): exit code, stdout, stderr.
struct FibOutput {
  int code = -1;
  std::string out, err;
};
FibOutput serve_command_output(const std::vector<std::string>& args,
                               const std::filesystem::path& home);

// The body of a response as JSON (a test failure when it is not JSON).
Json body_json(const httplib::Result& r);

}  // namespace fib::testing
