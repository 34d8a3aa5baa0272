// Worker processes: where solutions (and, in a separate process, the native references) run.
// A worker is `fib worker` started by the orchestrator with a scrubbed environment, resource
// limits and its own process group; requests and replies travel over a private socket pair,
// while the worker's stdout/stderr go to a pipe the orchestrator drains and caps. A worker that
// crashes, hangs past its deadline or runs out of memory is killed and reported; the caller
// replaces it and goes on.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/builder/bwrap.h"  // find_bwrap
#include "fib/trace/json_reader.h"

namespace fib::bench {

namespace detail {
class MessageReader;
}

// A worker's sandbox (bubblewrap): its own user, pid, network, ipc, uts and mount namespaces, an
// unprivileged uid, and a file system of read-only paths, one writable folder and private /tmp,
// /dev/shm and /proc. The read-only paths are bound at the paths they have outside; the box at
// a neutral path (`box_inside`), so nothing inside names fib's scratch folder (a Box translates
// the paths it hands out).
struct SandboxSpec {
  std::filesystem::path bwrap;  // empty: no sandbox
  // Bound read-only: /usr, the loader's cache, the folders of the libraries fib and the
  // solutions load (tvm-ffi's, CUDA's, a Python prefix), the fib binary itself.
  std::vector<std::filesystem::path> read_only;
  // The worker's box, bound read-only: the evaluation's staged input-set file and library; its
  // `out` folder, bound read-write, is the one place the worker can write outside /tmp.
  std::filesystem::path box;
  std::filesystem::path box_inside = "/box";  // where the box is bound inside
  bool gpu = false;                           // bind the /dev/nvidia* nodes
  // fib runs as root: start bubblewrap as `uid` outside the namespaces too (where unprivileged
  // user namespaces are allowed), so the worker is no root outside and RLIMIT_NPROC holds.
  bool drop_to_uid = false;
  unsigned uid = 65534;  // inside the sandbox (and outside with drop_to_uid)
  bool enabled() const { return !bwrap.empty(); }
};

struct WorkerSpec {
  std::filesystem::path executable;      // fib-worker, or the fib binary (`fib worker`)
  std::string role = "solution";         // "solution" or "reference" (in messages)
  std::uint64_t memory_limit_bytes = 0;  // RLIMIT_AS; 0: no limit
  std::uint64_t data_limit_bytes = 0;    // RLIMIT_DATA (GPU workers); 0: no limit
  std::uint64_t max_processes = 0;       // RLIMIT_NPROC (threads count); 0: no limit
  std::uint64_t max_open_files = 0;      // RLIMIT_NOFILE; 0: inherited
  SandboxSpec sandbox;
  std::filesystem::path home;                // HOME and TMPDIR of the scrubbed environment
  unsigned threads = 0;                      // OMP_NUM_THREADS and friends; 0: all cores
  std::size_t output_cap_bytes = 64 * 1024;  // of the worker's output, this much head + tail
  std::chrono::milliseconds startup_timeout{30000};
};

// The command line that starts a worker: `fib worker --channel 3 --writable PATH...`, inside
// bubblewrap when the spec has a sandbox.
std::vector<std::string> worker_command(const WorkerSpec& spec);
// Where the worker may write under its Landlock ruleset (fib/bench/worker/hardening.h): in the
// sandbox its private /tmp, /dev/shm and /dev and the box's out/; unsandboxed its HOME (the
// run's scratch folder), /dev/shm and the device nodes code writes to.
std::vector<std::string> worker_writable_paths(const WorkerSpec& spec);
// `command` inside bubblewrap as `sandbox` describes it (its namespaces, uid, read-only paths,
// box and devices); the worker's and the PyTorch reference's command lines both come from here.
std::vector<std::string> sandbox_command(const SandboxSpec& sandbox,
                                         const std::vector<std::string>& command);

// The read-only paths a sandboxed worker needs: /usr (CUDA under /usr/local/cuda and tvm-ffi's
// package under /usr/local come with it), the loader's cache, the folders outside /usr of the
// shared libraries this process has mapped (fib's own, which the worker maps too), the fib
// binary, and `extra` (a Python prefix, a CUDA toolkit elsewhere); paths that do not exist and
// paths under another are left out.
std::vector<std::filesystem::path> sandbox_read_only_paths(
    const std::filesystem::path& executable, const std::vector<std::filesystem::path>& extra);

// The whole environment a worker starts with (nothing else is inherited): PATH, the locale,
// its role, HOME and TMPDIR, thread counts, the visible devices, and for solution workers eager
// CUDA module loading.
std::vector<std::string> worker_environment(const WorkerSpec& spec);

// What a worker printed on stdout/stderr: the first and last bytes, and how much there was.
struct CapturedOutput {
  std::string head, tail;
  std::uint64_t total_bytes = 0;
  std::string text() const;  // head, an elision marker when bytes were dropped, tail
};

class Worker {
 public:
  // Starts the worker and waits for its greeting; throws fib::Error when it cannot start.
  explicit Worker(WorkerSpec spec);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  enum class ReplyKind : std::uint8_t { kOk, kDied, kTimeout };
  struct Reply {
    ReplyKind kind = ReplyKind::kOk;
    Json body;             // kOk: the worker's reply
    std::string died_how;  // kDied: "killed by signal 11 (SIGSEGV: segmentation fault)", ...
    int signal = 0;        // kDied by a signal
  };
  // Sends `request` and waits for the reply until `deadline`. On a timeout the worker is
  // killed (it may be stuck in solution code); on death it is reaped. Either way the worker is
  // no longer alive() and must be replaced. A reply counts once the worker answers a greeting
  // after it with nothing in between (else the channel is broken: kDied, the worker killed), so
  // a reply a solution writes on the channel is never taken for the worker's.
  // `descriptor` (>= 0): passed to the worker right after the request, as one byte carrying it
  // (SCM_RIGHTS), for a request that says one follows (an evaluation's output arena).
  Reply call(const Json& request, std::chrono::steady_clock::time_point deadline,
             int descriptor = -1);

  // Stops every process descending from the one fib started (bubblewrap's outer process when
  // sandboxed), with SIGSTOP, and returns once all of them are seen stopped, twice in a row,
  // with no new process and no CPU time run in between: from then on nothing in the worker's
  // tree runs until resume_tree(). Empty when it holds; else why not (within `limit`; the
  // caller kills the worker). Unsandboxed, a process that left the tree (reparented away from
  // it) is not found.
  std::string stop_tree(std::chrono::milliseconds limit);
  // Resumes what stop_tree stopped (SIGCONT).
  void resume_tree();

  // The worker's output since the last call of this function.
  CapturedOutput take_output();
  bool alive() const { return pid_ > 0; }
  // Nothing waits on the channel: between requests, a worker that wrote something (or closed
  // it) cannot be trusted with the next request.
  bool channel_idle() const;
  pid_t pid() const { return pid_; }
  const WorkerSpec& spec() const { return spec_; }
  // The worker's first greeting: its pid, ABI and the hardening it installed.
  const Json& greeting() const { return greeting_; }

  // The CPU time (user + system, ms) the kernel has accounted to the worker's process tree:
  // every process descended from the one fib started (bubblewrap's, in the sandbox), their
  // living and ended threads and the children they reaped. Read by fib, never reported by the
  // worker. nullopt once the worker is gone. The tree's members are found with a scan of /proc
  // when `discover` (or never yet), else those found last are read: a process started since
  // then counts from the next discovery on, with all the CPU time it has spent.
  std::optional<double> tree_cpu_ms(bool discover = false) const;
  // The tree's CPU time when the caller last marked it (after taking a reply: mark_cpu), and
  // when: what the worker did while it waited for the next request is measured from there.
  // Marked outside the span a caller times a request by, as a scan of /proc takes milliseconds.
  struct CpuMark {
    double cpu_ms = 0;
    std::chrono::steady_clock::time_point at;
  };
  const std::optional<CpuMark>& last_reply_cpu() const { return last_reply_cpu_; }
  void mark_cpu(bool discover);
  // How many CPUs the worker may run on (its affinity mask).
  int allowed_cpus() const;
  // The solution the worker last evaluated (set by the caller): work it does while idle is that
  // solution's.
  const std::string& last_solution() const { return last_solution_; }
  void set_last_solution(std::string name) { last_solution_ = std::move(name); }
  // Kills the worker's process group and reaps it (idempotent).
  void kill();

 private:
  void drain_output();
  std::string reap(int* signal);
  // One request and the message that answers it; call() adds the check that the worker's loop
  // sent it.
  Reply exchange(const Json& request, std::chrono::steady_clock::time_point deadline,
                 int descriptor = -1);
  Reply take_reply(detail::MessageReader& reader);
  ssize_t peek_channel() const;
  bool channel_has_data() const;

  WorkerSpec spec_;
  pid_t pid_ = -1;
  int channel_ = -1;
  int output_ = -1;
  CapturedOutput captured_;
  std::vector<pid_t> stopped_;  // by stop_tree, until resume_tree
  Json greeting_;
  std::optional<CpuMark> last_reply_cpu_;
  std::string last_solution_;
  mutable std::vector<pid_t> tree_;  // the process tree's members, as last found
};

// Describes a wait status: "exited with status 3", "killed by signal 9 (SIGKILL)".
std::string describe_wait_status(int status);

}  // namespace fib::bench
