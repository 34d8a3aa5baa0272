#include "fib/bench/builder/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>

extern char** environ;  // NOLINT: POSIX

namespace fib::bench::detail {

namespace {

using Clock = std::chrono::steady_clock;

// Owns the attributes and file actions of one posix_spawn call.
class SpawnSetup {
 public:
  SpawnSetup() {
    ::posix_spawn_file_actions_init(&actions_);
    ::posix_spawnattr_init(&attr_);
  }
  ~SpawnSetup() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attr_);
  }
  SpawnSetup(const SpawnSetup&) = delete;  // wraps C handles that are destroyed exactly once
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  posix_spawn_file_actions_t* actions() { return &actions_; }
  posix_spawnattr_t* attr() { return &attr_; }

 private:
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void record_status(int status, ProcessResult& r) {
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                          Clock::time_point deadline, std::size_t max_output) {
  ProcessResult r;
  const auto t0 = Clock::now();
  if (argv.empty()) {
    r.error = "empty command";
    return r;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  SpawnSetup setup;
  int rc = ::posix_spawn_file_actions_addopen(setup.actions(), 0, "/dev/null", O_RDONLY, 0);
  if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(setup.actions(), fds[1], 1);
  if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(setup.actions(), fds[1], 2);
  if (rc == 0 && !cwd.empty()) {
    rc = ::posix_spawn_file_actions_addchdir_np(setup.actions(), cwd.c_str());
  }
  // Its own process group, so a timeout kills the compiler driver and what it started; the
  // signals the parent may block or ignore are restored to their defaults.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
  if (rc == 0) rc = ::posix_spawnattr_setpgroup(setup.attr(), 0);
  if (rc == 0) rc = ::posix_spawnattr_setsigmask(setup.attr(), &none);
  if (rc == 0) rc = ::posix_spawnattr_setsigdefault(setup.attr(), &defaults);
  if (rc == 0) {
    rc = ::posix_spawnattr_setflags(
        setup.attr(), POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (rc == 0)
    rc = ::posix_spawn(&pid, argv[0].c_str(), setup.actions(), setup.attr(), args.data(), environ);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    r.error = argv[0] + ": " + std::strerror(rc);
    return r;
  }
  r.started = true;

  int read_fd = fds[0];
  bool reaped = false;
  // Once the child has exited, output still held open by a stray grandchild gets this long.
  Clock::time_point drain_until = Clock::time_point::max();
  char buf[65536];
  while (true) {
    if (!reaped) {
      int status = 0;
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid || (w < 0 && errno == ECHILD)) {
        reaped = true;
        if (w == pid) {
          record_status(status, r);
        } else {  // reaped by someone else: SIGCHLD is ignored in this process
          r.error = "the exit status was lost (SIGCHLD is ignored)";
        }
        drain_until = std::min(deadline, Clock::now() + std::chrono::seconds(2));
      }
    }
    if (reaped && read_fd < 0) break;
    const auto now = Clock::now();
    if (now >= deadline || (reaped && now >= drain_until)) {
      if (!reaped) {
        // The group leader is not reaped yet, so its pid (the group id) cannot have been reused.
        ::kill(-pid, SIGKILL);
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        r.timed_out = true;
        r.exit_code = -1;
        r.signal = 0;
      }
      break;
    }
    if (read_fd < 0) {
      // Output closed but the child still runs: poll for its exit.
      ::usleep(2000);
      continue;
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::min(reaped ? drain_until : deadline, now + std::chrono::milliseconds(50)) - now);
    pollfd p{read_fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(1, wait.count())));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    const ssize_t got = ::read(read_fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      ::close(read_fd);
      read_fd = -1;
      continue;
    }
    if (got == 0) {
      ::close(read_fd);
      read_fd = -1;
      continue;
    }
    const auto len = static_cast<std::size_t>(got);
    const std::size_t room = max_output > r.output.size() ? max_output - r.output.size() : 0;
    r.output.append(buf, std::min(room, len));
    r.dropped += len - std::min(room, len);
  }
  if (read_fd >= 0) ::close(read_fd);
  r.seconds = seconds_since(t0);
  return r;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) ||
             (c != '\0' && std::strchr("-_./=+:,@%^", c) != nullptr);
    });
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

}  // namespace fib::bench::detail
