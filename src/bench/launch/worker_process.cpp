// The orchestrator's side of a worker: spawn with a scrubbed environment and limits, talk over
// the private channel with deadlines, capture and cap the worker's output, kill and reap.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fib/base/diagnostics.h"
#include "fib/bench/launch/worker_process.h"
#include "fib/bench/protocol/framing.h"
#include "fib/bench/protocol/messages.h"

namespace fib::bench {

namespace {
using Clock = std::chrono::steady_clock;

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// The limits a worker starts under, set between fork and exec (setrlimit is async-signal-safe).
struct ChildLimits {
  rlim_t address_space, data, processes, open_files;
};

void apply_limits(const ChildLimits& l) {
  const struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  const std::pair<int, rlim_t> wanted[] = {{RLIMIT_AS, l.address_space},
                                           {RLIMIT_DATA, l.data},
                                           {RLIMIT_NPROC, l.processes},
                                           {RLIMIT_NOFILE, l.open_files}};
  for (const auto& [resource, value] : wanted) {
    if (value == 0) continue;
    const struct rlimit r = {value, value};
    ::setrlimit(resource, &r);
  }
}

const char* signal_label(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV: segmentation fault";
    case SIGBUS:
      return "SIGBUS: bus error";
    case SIGABRT:
      return "SIGABRT: aborted";
    case SIGFPE:
      return "SIGFPE: arithmetic exception";
    case SIGILL:
      return "SIGILL: illegal instruction";
    case SIGKILL:
      return "SIGKILL: killed (by fib at a deadline, or by the kernel's OOM killer)";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU: CPU time limit";
    case SIGXFSZ:
      return "SIGXFSZ: file size limit";
    case SIGPIPE:
      return "SIGPIPE: broken pipe";
    case SIGTRAP:
      return "SIGTRAP: trap";
    default:
      return "signal";
  }
}
// One process's line of /proc/<pid>/stat (or of its main thread's, /proc/<pid>/task/<pid>/stat,
// which the kernel makes without summing every thread: enough for the parent): its parent and
// the CPU ticks of its threads (utime, stime) and of the children it reaped (cutime, cstime).
struct ProcStat {
  pid_t pid = 0, ppid = 0;
  unsigned long long ticks = 0;
};

std::optional<ProcStat> read_proc_stat(const char* path, pid_t pid) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // The command name (in parentheses) may hold spaces and parentheses: fields follow the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return std::nullopt;
  char state = 0;
  long long ppid = 0;
  unsigned long long utime = 0, stime = 0;
  long long cutime = 0, cstime = 0;
  const int got =
      std::sscanf(p + 1, " %c %lld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &state,
                  &ppid, &utime, &stime, &cutime, &cstime);
  if (got != 6) return std::nullopt;
  return ProcStat{pid, static_cast<pid_t>(ppid),
                  utime + stime + static_cast<unsigned long long>(std::max(0LL, cutime + cstime))};
}

// Every process below `root` (and `root`), from one pass over /proc.
std::vector<pid_t> process_tree(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parents;  // (pid, ppid)
  if (DIR* d = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      char path[sizeof e->d_name * 2 + 16];
      std::snprintf(path, sizeof path, "/proc/%s/task/%s/stat", e->d_name, e->d_name);
      const auto pid = static_cast<pid_t>(std::atoll(e->d_name));
      if (auto st = read_proc_stat(path, pid)) parents.emplace_back(st->pid, st->ppid);
    }
    ::closedir(d);
  }
  std::vector<pid_t> tree = {root};
  for (std::size_t i = 0; i < tree.size(); ++i) {
    for (const auto& [pid, ppid] : parents) {
      if (ppid == tree[i]) tree.push_back(pid);
    }
  }
  return tree;
}
}  // namespace

std::optional<double> Worker::tree_cpu_ms(bool discover) const {
  if (pid_ <= 0) return std::nullopt;
  if (discover || tree_.empty()) tree_ = process_tree(pid_);
  unsigned long long ticks = 0;
  bool found = false;
  for (const pid_t pid : tree_) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    if (auto st = read_proc_stat(path, pid)) {
      ticks += st->ticks;
      found = found || pid == pid_;
    }
  }
  if (!found) return std::nullopt;
  return 1000.0 * static_cast<double>(ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

void Worker::mark_cpu(bool discover) {
  if (const auto cpu = tree_cpu_ms(discover)) last_reply_cpu_ = CpuMark{*cpu, Clock::now()};
}

int Worker::allowed_cpus() const {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pid_ <= 0 || ::sched_getaffinity(pid_, sizeof set, &set) != 0) {
    return static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  }
  return std::max(1, CPU_COUNT(&set));
}

std::vector<std::string> worker_environment(const WorkerSpec& spec) {
  // Only what a compiled kernel legitimately needs: no LD_PRELOAD / LD_LIBRARY_PATH, no
  // credentials, no user configuration that could change the code that runs.
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                                  "LC_ALL=C.UTF-8", "FIB_WORKER_ROLE=" + spec.role};
  if (spec.sandbox.enabled()) {
    // The sandbox's private tmpfs: nothing written there outlives the worker.
    env.push_back("HOME=/tmp");
    env.push_back("TMPDIR=/tmp");
  } else if (!spec.home.empty()) {
    env.push_back("HOME=" + spec.home.string());
    env.push_back("TMPDIR=" + spec.home.string());
  }
  if (spec.threads > 0) {
    for (const char* k : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
      env.push_back(fmt::format("{}={}", k, spec.threads));
    }
  }
  for (const char* keep : {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}) {
    if (const char* v = std::getenv(keep)) env.push_back(fmt::format("{}={}", keep, v));
  }
  // A solution worker loads every kernel of a module with the module: with lazy loading (CUDA's
  // default), a kernel's first launch can wait for the device to go idle, which it never does
  // behind the timer's blocking kernel, and a solution may first launch a kernel in a timed
  // call. The reference worker keeps lazy loading. fib's references launch the same kernels in
  // every call of a workload, first in the warmup, which runs without the blocking kernel. The
  // MoE reference, whose per-expert GEMMs vary with the routing, synchronizes in every call and
  // is timed without the blocking kernel. Eager loading made the reference's first cuBLAS call
  // load all of cuBLAS: 2.6 s of a 35 s run on an H100, against 0.2 s lazily
  // (docs/benchmarks.md, "fib run on a GPU").
  if (spec.role != "reference") env.push_back("CUDA_MODULE_LOADING=EAGER");
  return env;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("killed by signal {} ({})", sig, signal_label(sig));
  }
  return fmt::format("ended with wait status {}", status);
}

std::string CapturedOutput::text() const {
  if (total_bytes <= head.size() + tail.size()) return head + tail;
  return fmt::format("{}\n[... {} bytes of output dropped ...]\n{}", head,
                     total_bytes - head.size() - tail.size(), tail);
}

Worker::Worker(WorkerSpec spec) : spec_(std::move(spec)) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    throw Error("worker", fmt::format("socketpair failed: {}", std::strerror(errno)));
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    throw Error("worker", fmt::format("pipe failed: {}", std::strerror(errno)));
  }
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed.
  const std::string exe = spec_.executable.string();
  std::vector<std::string> args = worker_command(spec_);
  std::vector<std::string> env = worker_environment(spec_);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const ChildLimits limits{spec_.memory_limit_bytes, spec_.data_limit_bytes, spec_.max_processes,
                           spec_.max_open_files};
  const bool drop = spec_.sandbox.enabled() && spec_.sandbox.drop_to_uid;
  const uid_t uid = spec_.sandbox.uid;
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {sv[0], sv[1], out[0], out[1], devnull}) ::close(fd);
    throw Error("worker", fmt::format("fork failed: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::dup2(sv[1], 3);
    ::close_range(4, ~0u, 0);
    ::signal(SIGPIPE, SIG_DFL);  // fib ignores it; exec would pass that on
    apply_limits(limits);
    if (drop && (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0)) {
      ::_exit(126);
    }
    if (drop) ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a change of uid clears it
    if (::getppid() != parent) ::_exit(127);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so kill(-pid) works whoever runs first
  pid_ = pid;
  ::close(sv[1]);
  ::close(out[1]);
  if (devnull >= 0) ::close(devnull);
  channel_ = sv[0];
  output_ = out[0];
  set_nonblocking(channel_);
  set_nonblocking(output_);

  const Reply hello = call(protocol::hello_request(), Clock::now() + spec_.startup_timeout);
  greeting_ = hello.body;
  if (hello.kind != ReplyKind::kOk) {
    const std::string why =
        hello.kind == ReplyKind::kTimeout ? "did not answer in time" : hello.died_how;
    throw Error("worker",
                fmt::format("the {} worker ({}) could not start: {}", spec_.role, exe, why),
                take_output().text());
  }
}

Worker::~Worker() {
  kill();
  if (channel_ >= 0) ::close(channel_);
  if (output_ >= 0) ::close(output_);
}

void Worker::kill() {
  stopped_.clear();
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  drain_output();
  pid_ = -1;
}

std::string Worker::reap(int* sig) {
  int status = 0;
  pid_t r;
  // The channel is closed, but the worker may live on (a solution can close the channel and go
  // on): it gets a moment to end by itself, so that its own status is the one reported.
  const auto grace = Clock::now() + std::chrono::milliseconds(500);
  while ((r = ::waitpid(pid_, &status, WNOHANG)) == 0 && Clock::now() < grace) {
    ::usleep(2000);
  }
  if (r == 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
  }
  while (r <= 0 && (r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  ::kill(-pid_, SIGKILL);  // threads or children the solution left behind
  pid_ = -1;
  drain_output();
  // Bubblewrap exits with 128 + the signal that killed the worker.
  if (spec_.sandbox.enabled() && WIFEXITED(status) && WEXITSTATUS(status) > 128) {
    *sig = WEXITSTATUS(status) - 128;
    return r < 0 ? std::string("vanished")
                 : fmt::format("killed by signal {} ({})", *sig, signal_label(*sig));
  }
  *sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return r < 0 ? std::string("vanished") : describe_wait_status(status);
}

void Worker::drain_output() {
  if (output_ < 0) return;
  char chunk[65536];
  const std::size_t half = spec_.output_cap_bytes / 2;
  for (;;) {
    const ssize_t r = ::read(output_, chunk, sizeof chunk);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return;
    }
    const auto n = static_cast<std::size_t>(r);
    captured_.total_bytes += n;
    std::size_t used = 0;
    if (captured_.head.size() < half) {
      used = std::min(n, half - captured_.head.size());
      captured_.head.append(chunk, used);
    }
    if (used < n) {
      captured_.tail.append(chunk + used, n - used);
      if (captured_.tail.size() > 2 * half) {
        captured_.tail.erase(0, captured_.tail.size() - half);
      }
    }
  }
}

CapturedOutput Worker::take_output() {
  drain_output();
  const std::size_t half = spec_.output_cap_bytes / 2;
  if (captured_.tail.size() > half) captured_.tail.erase(0, captured_.tail.size() - half);
  CapturedOutput out = std::move(captured_);
  captured_ = CapturedOutput{};
  return out;
}

// Peeks at the channel without blocking: >0 bytes waiting, 0 closed, -1 (errno) nothing.
ssize_t Worker::peek_channel() const {
  char byte;
  return ::recv(channel_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
}

bool Worker::channel_idle() const {
  if (channel_ < 0) return false;
  const ssize_t n = peek_channel();
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

bool Worker::channel_has_data() const { return channel_ >= 0 && peek_channel() > 0; }

Worker::Reply Worker::call(const Json& request, Clock::time_point deadline, int descriptor) {
  Reply reply = exchange(request, deadline, descriptor);
  if (reply.kind != ReplyKind::kOk || protocol::command_of(request) == "hello") return reply;
  // The reply is believed once the worker's loop is seen waiting for the next request: it
  // answers a greeting, and nothing else comes first. A reply a solution wrote from inside its
  // call is followed by the worker's own; one written before its process ended, by nothing.
  const Reply echo = exchange(protocol::hello_request(), deadline);
  const bool answered =
      echo.kind == ReplyKind::kOk && echo.body.contains("pid") && !echo.body.contains("trials");
  // A worker that ends after its reply says so in it (a sticky CUDA error).
  const bool ended_as_announced =
      echo.kind == ReplyKind::kDied && echo.signal == 0 && reply.body.value("fatal", false);
  if (answered || ended_as_announced) return reply;
  kill();
  if (echo.kind == ReplyKind::kTimeout) return echo;
  reply.kind = ReplyKind::kDied;
  reply.died_how =
      echo.kind == ReplyKind::kDied && echo.died_how.find("broken") == std::string::npos
          ? fmt::format("ended after a reply it did not announce ({}; a broken channel)",
                        echo.died_how)
          : "wrote more than one reply (a broken channel)";
  return reply;
}

namespace {
// One byte carrying `descriptor` (SCM_RIGHTS) on the blocking channel; throws fib::Error.
void send_descriptor(int channel, int descriptor) {
  char byte = 'F';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &descriptor, sizeof descriptor);
  ssize_t n;
  while ((n = ::sendmsg(channel, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (n != 1) throw Error("worker", "cannot pass a descriptor to the worker");
}
}  // namespace

Worker::Reply Worker::exchange(const Json& request, Clock::time_point deadline, int descriptor) {
  Reply reply;
  if (pid_ <= 0) {
    reply.kind = ReplyKind::kDied;
    reply.died_how = "not running";
    return reply;
  }
  try {
    // The channel is non-blocking; requests are small, but write in a loop that waits.
    const std::string text = request.dump();
    int flags = ::fcntl(channel_, F_GETFL);
    ::fcntl(channel_, F_SETFL, flags & ~O_NONBLOCK);
    detail::write_message(channel_, text);
    if (descriptor >= 0) send_descriptor(channel_, descriptor);
    ::fcntl(channel_, F_SETFL, flags);
  } catch (const Error&) {
    reply.kind = ReplyKind::kDied;
    reply.died_how = reap(&reply.signal);
    return reply;
  }
  detail::MessageReader reader;
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) {
      kill();
      reply.kind = ReplyKind::kTimeout;
      return reply;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    pollfd fds[2] = {{channel_, POLLIN, 0}, {output_, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count() + 1, 1000)));
    if (n < 0 && errno != EINTR) {
      kill();
      reply.kind = ReplyKind::kDied;
      reply.died_how = fmt::format("poll failed: {}", std::strerror(errno));
      return reply;
    }
    if (fds[1].revents != 0) drain_output();
    if (fds[0].revents == 0) continue;
    const detail::ReadResult r = reader.pump(channel_);
    if (r == detail::ReadResult::kMessage) return take_reply(reader);
    if (r == detail::ReadResult::kEof) {
      reply.kind = ReplyKind::kDied;
      reply.died_how = reap(&reply.signal);
      return reply;
    }
  }
}

Worker::Reply Worker::take_reply(detail::MessageReader& reader) {
  Reply reply;
  reply.body = Json::parse(reader.take(), nullptr, false);
  if (reply.body.is_discarded() || !reply.body.is_object()) {
    kill();
    reply.kind = ReplyKind::kDied;
    reply.died_how = "sent a malformed reply (a broken channel)";
  } else if (reader.pending() || channel_has_data()) {
    // One request, one reply: bytes beyond it were written by someone other than the worker's
    // loop (the solution, or a process it left), so the reply is not believed.
    kill();
    reply.kind = ReplyKind::kDied;
    reply.died_how = "wrote more than one reply (a broken channel)";
  }
  drain_output();
  return reply;
}

}  // namespace fib::bench
