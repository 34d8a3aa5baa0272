// Running a compiler as a child process: its own process group, stdin from /dev/null, stdout
// and stderr captured together (capped), and a deadline after which the whole group is killed.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace fib::bench::detail {

struct ProcessResult {
  bool started = false;     // false: the program could not be started (see error)
  std::string error;        // why it did not start
  int exit_code = -1;       // the exit status when it exited normally
  int signal = 0;           // the signal that ended it, if one did
  bool timed_out = false;   // killed at the deadline
  std::string output;       // stdout and stderr, interleaved as written, at most max_output bytes
  std::size_t dropped = 0;  // output bytes beyond max_output, read and discarded
  double seconds = 0;

  bool succeeded() const { return started && !timed_out && signal == 0 && exit_code == 0; }
};

// Runs argv (argv[0] an absolute path to an executable) in `cwd` with the current environment.
// Thread-safe: descriptors are close-on-exec, so concurrent children inherit none of another's.
ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                          std::chrono::steady_clock::time_point deadline, std::size_t max_output);

// A command line as a shell would need it typed (words with special characters single-quoted).
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace fib::bench::detail
