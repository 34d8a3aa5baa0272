// The red team of the trust boundary: solutions that attack fib from inside its worker (forge
// traces in the dataset, read the reference's outputs, write on the worker channel, keep a cache
// in /dev/shm, leave a process behind, reach the network). Each attack is shown to work with
// `--sandbox off` and to fail with the sandbox; the channel attacks fail either way.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "bench/red_team_attacks.h"
#include "fib/bench/builder/python_runtime.h"
#include "fib/bench/launch/worker_process.h"
#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"
#include "support/rmsnorm_solution_source.h"
#include "support/temp_dir.h"
#ifdef FIB_HAVE_CUDA
#include "support/gpu.h"
#endif

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

// A correct RMSNorm (the example's rmsnorm_h2048) the attacks wrap: they pass unless contained.
// The headers the attacks use come first.
const std::string kRmsnorm = std::string(R"(
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
)") + testing::kRmsnormSolutionSource;

bool sandbox_available() { return !find_bwrap().empty(); }

#define SKIP_WITHOUT_SANDBOX()                                                                \
  if (!sandbox_available()) {                                                                 \
    GTEST_SKIP() << "bubblewrap is not installed (scripts/install-deps.sh installs it); the " \
                    "sandbox's red team cannot run";                                          \
  }

class Sandbox : public ::testing::Test {
 protected:
  void SetUp() override { testing::copy_tree(kSource / "examples" / "dataset", dataset()); }
  fs::path dataset() const { return tmp_.path() / "dataset"; }
  void add(const std::string& name, const std::string& body) {
    Solution s;
    s.name = name;
    s.definition = "rmsnorm_h2048";
    s.author = "attacks";
    s.spec.language = "cpp";
    s.spec.binding = "fib";
    s.spec.target_hardware = {"cpu"};
    s.spec.entry_point = "kernel.cpp::run";
    s.sources.push_back(SourceFile{"kernel.cpp", std::string(kRmsnorm) + body, {}});
    write_solution(dataset(), s, "rmsnorm");
  }
  RunOptions options(SandboxMode mode, std::vector<std::string> solutions) const {
    RunOptions o;
    o.dataset = dataset();
    // Unsandboxed, the worker's own hardening (Landlock's writes, the seccomp filter) would still
    // stop most attacks here: the attacks are shown working with no protection at all.
    o.worker_executable = mode == SandboxMode::kOff ? FIB_UNHARDENED_WORKER_EXE : FIB_EXE;
    o.abi_include_dir = kSource / "include";
    o.build_cache = tmp_.path() / "cache";
    o.seed = 11;
    o.timeout_seconds = 20;
    o.cli.warmup_runs = 1;
    o.cli.iterations = 3;
    o.cli.num_trials = 1;
    o.max_trial_seconds = 0.2;
    o.definitions = {"rmsnorm_h2048"};
    o.solutions = std::move(solutions);
    o.sandbox = mode;
    o.python_bridge_dir = kSource / "python" / "fib_bridge";
    return o;
  }
  static std::vector<std::string> statuses(const RunResult& r, const std::string& solution) {
    std::vector<std::string> v;
    for (const Trace& t : r.traces) {
      if (*t.solution == solution) v.emplace_back(status_name(t.evaluation->status));
    }
    return v;
  }
  static std::string logs(const RunResult& r, const std::string& solution) {
    std::string all;
    for (const Trace& t : r.traces) {
      if (*t.solution == solution) all += t.evaluation->log + "\n";
    }
    return all;
  }
  // Everything under the dataset's traces/ folder, as text.
  std::string all_traces() const {
    std::string text;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dataset() / "traces", ec)) {
      if (e.is_regular_file()) text += TempDir::read_file(e.path());
    }
    return text;
  }
  TempDir tmp_;
};

// (a) The solution finds the dataset on its parent's command line (`fib run --local DIR`) and
// appends a forged PASSED trace to it.
TEST_F(Sandbox, AForgedTraceCannotReachTheDataset) {
  SKIP_WITHOUT_SANDBOX();
  add("forges_traces", std::string(testing::kForgeTraceAttack) + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  static bool done = false;
  if (!done) { forge(); done = true; }
  rms(x, w, y);
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  // Unsandboxed, the worker's Landlock rules would still keep the dataset unwritten: the
  // attack is shown working by a copy of fib whose fib-worker (which fib runs where it stands
  // beside it) is the test build's unhardened worker.
  const fs::path unhardened = tmp_.path() / "unhardened-bin";
  fs::create_directories(unhardened);
  fs::copy_file(FIB_EXE, unhardened / "fib");
  fs::copy_file(FIB_UNHARDENED_WORKER_EXE, unhardened / "fib-worker");
  const auto run_cli = [&](const std::string& mode) {
    const std::string cmd = fmt::format(
        "{} run --local {} --solutions forges_traces --definitions rmsnorm_h2048 --seed 3 "
        "--warmup-runs 1 --iterations 3 --num-trials 1 --build-cache {} --sandbox {} > {} 2>&1",
        mode == "off" ? (unhardened / "fib").string() : std::string(FIB_EXE), dataset().string(),
        (tmp_.path() / "cache").string(), mode, (tmp_.path() / ("log-" + mode)).string());
    return std::system(cmd.c_str());
  };
  ASSERT_EQ(run_cli("required"), 0) << tmp_.read("log-required");
  EXPECT_EQ(all_traces().find("FORGED-BY-SOLUTION"), std::string::npos);
  ASSERT_EQ(run_cli("off"), 0) << tmp_.read("log-off");
  EXPECT_NE(all_traces().find("FORGED-BY-SOLUTION"), std::string::npos)
      << "unsandboxed, the attack reaches the dataset (else this test shows nothing)";
}

// (b) The solution looks for the reference's outputs in fib's scratch folder (HOME points into it
// unsandboxed; /dev/shm holds every run's) and reads them.
TEST_F(Sandbox, TheReferenceOutputsAreOutOfReach) {
  SKIP_WITHOUT_SANDBOX();
  add("reads_reference", std::string(testing::kReadReferencesAttack) + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  static bool done = false;
  if (!done) {
    done = true;
    int n = read_references("/dev/shm", 3);
    if (const char* home = std::getenv("HOME")) n += read_references(home, 2);
    std::printf("references read: %d\n", n);
    std::fflush(stdout);
  }
  rms(x, w, y);
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  const RunResult on = run_benchmark(options(SandboxMode::kRequired, {"reads_reference"}));
  EXPECT_EQ(logs(on, "reads_reference").find("READ REFERENCE"), std::string::npos)
      << logs(on, "reads_reference");
  EXPECT_NE(logs(on, "reads_reference").find("references read: 0"), std::string::npos);
  const RunResult off = run_benchmark(options(SandboxMode::kOff, {"reads_reference"}));
  EXPECT_NE(logs(off, "reads_reference").find("READ REFERENCE"), std::string::npos)
      << logs(off, "reads_reference");
}

// (b') The solution knows where the reference cache lies (the default is no secret) and lists
// it: the sandbox has no such folder; unsandboxed, the same code finds its entries.
TEST_F(Sandbox, TheReferenceCacheIsOutOfReach) {
  SKIP_WITHOUT_SANDBOX();
  const fs::path cache = tmp_.path() / "references";
  add("lists_reference_cache", fmt::format(R"(
#include <dirent.h>
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {{
  static bool done = false;
  if (!done) {{
    done = true;
    int n = -1;
    if (DIR* d = opendir("{}")) {{
      n = 0;
      while (readdir(d)) ++n;
      closedir(d);
    }}
    std::printf("reference cache entries: %d\n", n);
    std::fflush(stdout);
  }}
  rms(x, w, y);
}}
FIB_EXPORT_SOLUTION(run, run_);
)",
                                           cache.string()));
  const auto run = [&](SandboxMode mode) {
    RunOptions o = options(mode, {"lists_reference_cache"});
    o.reference_cache = ReferenceCacheChoice::in(cache);
    return run_benchmark(o);
  };
  const RunResult on = run(SandboxMode::kRequired);
  EXPECT_GT(on.reference_cache.stores, 0u);
  EXPECT_NE(logs(on, "lists_reference_cache").find("reference cache entries: -1"),
            std::string::npos)
      << logs(on, "lists_reference_cache");
  const RunResult off = run(SandboxMode::kOff);
  EXPECT_EQ(logs(off, "lists_reference_cache").find("reference cache entries: -1"),
            std::string::npos)
      << "unsandboxed, the folder is there to see (else this test shows nothing)";
}

// (c) The solution writes a reply of its own on the worker channel (fd 3), then garbage; another
// closes the channel. Each is a RUNTIME_ERROR, a fresh worker takes the next solution, and the
// run goes on. The channel's protection holds with or without the sandbox.
TEST_F(Sandbox, ABrokenChannelCostsOnlyItsEvaluation) {
  // The worker moves its channel to a descriptor of its own; it is the process's one socket.
  const std::string find_channel = testing::kFindChannelAttack;
  add("a_forges_reply", find_channel + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x, w, y);
  const int fd = channel();
  const std::string reply = "{\"ok\":true,\"trials\":[]}";
  char header[8];
  unsigned long long n = reply.size();
  for (char& c : header) { c = (char)(n & 0xff); n >>= 8; }
  (void)!write(fd, header, 8);
  (void)!write(fd, reply.data(), reply.size());
  (void)!write(fd, "garbage garbage garbage", 23);
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  // Only a well-formed reply: the worker's own follows it, so the forged one is not believed.
  add("a_forges_reply_only", find_channel + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x, w, y);
  const std::string reply = "{\"ok\":true,\"trials\":[]}";
  char header[8];
  unsigned long long n = reply.size();
  for (char& c : header) { c = (char)(n & 0xff); n >>= 8; }
  std::string message(header, 8);
  message += reply;
  (void)!write(channel(), message.data(), message.size());
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  add("b_closes_channel", find_channel + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x, w, y);
  close(channel());
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  add("c_honest", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)");
  for (const SandboxMode mode : {SandboxMode::kOff, SandboxMode::kAuto}) {
    RunOptions o =
        options(mode, {"a_forges_reply", "a_forges_reply_only", "b_closes_channel", "c_honest"});
    // The hardened worker's filter refuses to close its channel (Hardening.* shows the filter):
    // what is pinned here is fib's handling of a channel that breaks all the same.
    o.worker_executable = FIB_UNHARDENED_WORKER_EXE;
    const RunResult r = run_benchmark(o);
    using V = std::vector<std::string>;
    EXPECT_EQ(statuses(r, "a_forges_reply"), V(2, "RUNTIME_ERROR")) << logs(r, "a_forges_reply");
    EXPECT_NE(logs(r, "a_forges_reply").find("broken channel"), std::string::npos)
        << logs(r, "a_forges_reply");
    EXPECT_EQ(statuses(r, "a_forges_reply_only"), V(2, "RUNTIME_ERROR"))
        << logs(r, "a_forges_reply_only");
    EXPECT_NE(logs(r, "a_forges_reply_only").find("broken channel"), std::string::npos)
        << logs(r, "a_forges_reply_only");
    EXPECT_EQ(statuses(r, "b_closes_channel"), V(2, "RUNTIME_ERROR"))
        << logs(r, "b_closes_channel");
    EXPECT_EQ(statuses(r, "c_honest"), V(2, "PASSED")) << logs(r, "c_honest");
    EXPECT_GE(r.workers.starts, 6u) << "a fresh worker after each broken channel";
  }
  // The run ended normally: its scratch folder (named by this process's pid) is gone.
  std::error_code ec;
  const std::string mine = fmt::format("fib-run-{}-", ::getpid());
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
    EXPECT_NE(e.path().filename().string().rfind(mine, 0), 0u) << e.path();
  }
}

// (d) The solution keeps its results in /dev/shm, keyed on its inputs, across two runs with the
// same seed (whose inputs are the same): unsandboxed, the second run hits.
TEST_F(Sandbox, DevShmIsPrivateToEachWorker) {
  SKIP_WITHOUT_SANDBOX();
  const std::string tag = fmt::format("fib-test-cache-{}", ::getpid());
  add("caches_in_shm", fmt::format(R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {{
  unsigned long long h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(x.data());
  for (int i = 0; i < 4096; ++i) h = (h ^ b[i]) * 1099511628211ull;
  const std::string path = "/dev/shm/{}-" + std::to_string(h);
  if (FILE* f = std::fopen(path.c_str(), "rb")) {{ std::printf("CACHE HIT\n"); std::fclose(f); }}
  else if (FILE* f = std::fopen(path.c_str(), "wb")) {{ std::fputs("cached", f); std::fclose(f); }}
  std::fflush(stdout);
  rms(x, w, y);
}}
FIB_EXPORT_SOLUTION(run, run_);
)",
                                   tag));
  const auto cleanup = [&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
      if (e.path().filename().string().rfind(tag, 0) == 0) fs::remove(e.path(), ec);
    }
  };
  cleanup();
  for (int i = 0; i < 2; ++i) {
    const RunResult r = run_benchmark(options(SandboxMode::kRequired, {"caches_in_shm"}));
    EXPECT_EQ(logs(r, "caches_in_shm").find("CACHE HIT"), std::string::npos) << "run " << i;
  }
  std::string second;
  for (int i = 0; i < 2; ++i) {
    second = logs(run_benchmark(options(SandboxMode::kOff, {"caches_in_shm"})), "caches_in_shm");
  }
  cleanup();
  EXPECT_NE(second.find("CACHE HIT"), std::string::npos)
      << "unsandboxed, the second run hits (else this test shows nothing): " << second;
}

using testing::processes_named;

// (e) The solution leaves a setsid'd grandchild that holds the worker channel, then crashes.
// Unsandboxed, the channel stays open (the crash becomes a TIMEOUT) and the grandchild outlives
// the run; sandboxed, the crash is a RUNTIME_ERROR and nothing is left.
TEST_F(Sandbox, NoProcessOutlivesTheWorker) {
  SKIP_WITHOUT_SANDBOX();
  const std::string marker = fmt::format("fibgc{}", ::getpid() % 1000000);
  add("leaves_a_grandchild", fmt::format(R"(
#include <sys/prctl.h>
#include <sys/wait.h>
static int* volatile g_nowhere = nullptr;
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {{
  rms(x, w, y);
  const pid_t child = fork();
  if (child == 0) {{
    setsid();
    if (fork() == 0) {{
      prctl(PR_SET_NAME, "{}");
      sleep(40);
      _exit(0);
    }}
    _exit(0);
  }}
  waitpid(child, nullptr, 0);
  usleep(100000);
  *g_nowhere = 1;  // volatile: the compiler cannot see the bug
}}
FIB_EXPORT_SOLUTION(run, run_);
)",
                                         marker));
  RunOptions on = options(SandboxMode::kRequired, {"leaves_a_grandchild"});
  on.timeout_seconds = 5;
  const RunResult r = run_benchmark(on);
  EXPECT_EQ(statuses(r, "leaves_a_grandchild"), std::vector<std::string>(2, "RUNTIME_ERROR"))
      << logs(r, "leaves_a_grandchild");
  EXPECT_NE(logs(r, "leaves_a_grandchild").find("SIGSEGV"), std::string::npos);
  // The namespace's processes die with its init, which the kernel tears down asynchronously.
  for (int i = 0; i < 100 && !processes_named(marker).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(processes_named(marker).empty());

  RunOptions off = options(SandboxMode::kOff, {"leaves_a_grandchild"});
  off.timeout_seconds = 3;
  const RunResult o = run_benchmark(off);
  const std::vector<int> left = processes_named(marker);
  for (int p : left) ::kill(p, SIGKILL);  // what this test's attack started
  EXPECT_EQ(statuses(o, "leaves_a_grandchild"), std::vector<std::string>{"TIMEOUT"})
      << "unsandboxed, the grandchild holds the channel (else this test shows nothing)";
  EXPECT_FALSE(left.empty()) << "unsandboxed, the grandchild outlives fib";
}

// (f) The solution connects to a port this test listens on.
TEST_F(Sandbox, TheNetworkIsOutOfReach) {
  SKIP_WITHOUT_SANDBOX();
  const int server = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(server, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(server, 8), 0);
  socklen_t len = sizeof addr;
  ::getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len);
  add("phones_home", fmt::format(R"(
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {{
  static bool done = false;
  if (!done) {{
    done = true;
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{{}};
    a.sin_family = AF_INET;
    a.sin_port = htons({});
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::printf(connect(s, (sockaddr*)&a, sizeof a) == 0 ? "NET CONNECTED\n" : "NET FAILED\n");
    std::fflush(stdout);
    close(s);
  }}
  rms(x, w, y);
}}
FIB_EXPORT_SOLUTION(run, run_);
)",
                                 ntohs(addr.sin_port)));
  const RunResult on = run_benchmark(options(SandboxMode::kRequired, {"phones_home"}));
  const RunResult off = run_benchmark(options(SandboxMode::kOff, {"phones_home"}));
  ::close(server);
  EXPECT_NE(logs(on, "phones_home").find("NET FAILED"), std::string::npos)
      << logs(on, "phones_home");
  EXPECT_EQ(logs(on, "phones_home").find("NET CONNECTED"), std::string::npos);
  EXPECT_NE(logs(off, "phones_home").find("NET CONNECTED"), std::string::npos)
      << logs(off, "phones_home");
}

// Every trace says how its solution was isolated; `--sandbox off` says so too.
TEST_F(Sandbox, TracesRecordTheIsolationLevel) {
  add("honest", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)");
  const RunResult off = run_benchmark(options(SandboxMode::kOff, {"honest"}));
  ASSERT_FALSE(off.traces.empty());
  EXPECT_EQ(off.traces[0].evaluation->environment.extra["isolation"]["level"], "none");
  EXPECT_EQ(off.traces[0].evaluation->environment.extra["isolation"]["why"], "--sandbox off");
  if (!sandbox_available()) GTEST_SKIP() << "bubblewrap is not installed";
  const RunResult on = run_benchmark(options(SandboxMode::kRequired, {"honest"}));
  ASSERT_FALSE(on.traces.empty());
  for (const Trace& t : on.traces) {
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kPassed) << t.evaluation->log;
    const Json& iso = t.evaluation->environment.extra["isolation"];
    EXPECT_EQ(iso["level"], "sandbox");
    EXPECT_EQ(iso["uid"], 65534);
  }
  // The dataset still loads: the record is one more environment.extra entry.
  EXPECT_NO_THROW(TraceSet::load(dataset()));
}

// A build reads a file fib's user can read (a stand-in for fib's signing key, outside the
// sandbox): one solution `.incbin`s it into its shared object and prints it when called (its
// output lands in its trace's log), another `#include`s it (the compiler quotes it in its error).
// Unsandboxed, both leak it into the trace; with the build sandbox each is a COMPILE_ERROR that
// never shows it.
TEST_F(Sandbox, ABuildCannotReadAFileOutsideTheSandbox) {
  SKIP_WITHOUT_SANDBOX();
  const fs::path key = tmp_.path() / "config" / "fib" / "signing-key.pem";
  fs::create_directories(key.parent_path());
  const std::string secret = "FIB_SECRET_7d1e0c95";
  std::ofstream(key) << secret << "\n";
  add("incbins_the_key", fmt::format(R"(
__asm__(".section .rodata\n.global fib_stolen\nfib_stolen:\n.incbin \"{}\"\n.byte 0\n.previous\n");
extern "C" const char fib_stolen[];
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {{
  static bool said = false;
  if (!said) {{
    std::fputs(fib_stolen, stdout);
    std::fflush(stdout);
    said = true;
  }}
  rms(x, w, y);
}}
FIB_EXPORT_SOLUTION(run, run_);
)",
                                     key.string()));
  add("includes_the_key", fmt::format(R"(
static const int stolen[] = {{
#include "{}"
}};
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {{ rms(x, w, y); }}
FIB_EXPORT_SOLUTION(run, run_);
)",
                                      key.string()));
  const std::vector<std::string> names = {"incbins_the_key", "includes_the_key"};
  const RunResult open = run_benchmark(options(SandboxMode::kOff, names));
  EXPECT_EQ(statuses(open, "incbins_the_key"), (std::vector<std::string>{"PASSED", "PASSED"}));
  EXPECT_EQ(statuses(open, "includes_the_key"),
            (std::vector<std::string>{"COMPILE_ERROR", "COMPILE_ERROR"}));
  for (const std::string& name : names) {
    EXPECT_NE(logs(open, name).find(secret), std::string::npos) << name << logs(open, name);
  }
  const RunResult closed = run_benchmark(options(SandboxMode::kRequired, names));
  for (const std::string& name : names) {
    EXPECT_EQ(statuses(closed, name), (std::vector<std::string>{"COMPILE_ERROR", "COMPILE_ERROR"}))
        << logs(closed, name);
    EXPECT_EQ(logs(closed, name).find(secret), std::string::npos) << name << logs(closed, name);
    EXPECT_NE(logs(closed, name).find("compilers run in a bubblewrap sandbox"), std::string::npos)
        << logs(closed, name);
    for (const Trace& t : closed.traces) {
      EXPECT_EQ(t.evaluation->environment.extra["build"]["sandbox"], "bubblewrap");
    }
  }
  EXPECT_NE(logs(closed, "includes_the_key").find("No such file or directory"), std::string::npos)
      << logs(closed, "includes_the_key");
}

// Where the sandbox cannot be made (here: a "bubblewrap" that cannot start anything),
// `--sandbox required` is an error, and `auto` runs unsandboxed, says so loudly and records it.
TEST_F(Sandbox, ASandboxThatCannotBeMadeIsAnErrorOrALoudWarning) {
  add("honest", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)");
  ::setenv("FIB_BWRAP", "/bin/false", 1);
  EXPECT_THROW(run_benchmark(options(SandboxMode::kRequired, {"honest"})), Error);
  std::vector<std::string> said;
  RunCallbacks cb;
  cb.on_message = [&](const std::string& m) { said.push_back(m); };
  const RunResult r = run_benchmark(options(SandboxMode::kAuto, {"honest"}), cb);
  ::unsetenv("FIB_BWRAP");
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said.front().find("WARNING: solutions run and build UNSANDBOXED"), std::string::npos)
      << said.front();
  ASSERT_EQ(r.traces.size(), 2u);
  for (const Trace& t : r.traces) {
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kPassed) << t.evaluation->log;
    EXPECT_EQ(t.evaluation->environment.extra["isolation"]["level"], "none");
    EXPECT_TRUE(t.evaluation->environment.extra["isolation"].contains("why"));
  }
}

// The references run in the sandbox too, each in a box of its own: the native reference worker
// (fib's code only) and a definition's PyTorch `reference` (code from the dataset). A bubblewrap
// that logs its command lines shows each one started through it.
TEST_F(Sandbox, TheReferencesRunInTheSandboxInBoxesOfTheirOwn) {
  SKIP_WITHOUT_SANDBOX();
  add("honest", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)");
  // The wrapper runs as the sandbox's uid where fib drops to it: its folder and log are open.
  const TempDir bin;
  fs::permissions(bin.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  const fs::path log = bin.write("commands.log", "");
  fs::permissions(log, fs::perms::all & ~(fs::perms::owner_exec | fs::perms::group_exec |
                                          fs::perms::others_exec));
  const fs::path wrapper =
      bin.write("bwrap", fmt::format("#!/bin/sh\nprintf '%s\\n' \"$*\" >> {}\nexec {} \"$@\"\n",
                                     log.string(), find_bwrap().string()));
  fs::permissions(wrapper, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  std::string why;
  const bool torch = find_python("", PythonUse::kReference, &why).has_value();
  RunOptions o = options(SandboxMode::kRequired, {"honest"});
  if (torch) {
    // silu_and_mul_h16384 with its silu spelled out (g * sigmoid(g), the same math), which fib's
    // native activation reference does not read: its PyTorch reference judges.
    const fs::path file = dataset() / "definitions" / "activation" / "silu_and_mul_h16384.json";
    std::string text = TempDir::read_file(file);
    const std::string silu = "F.silu(x[..., :d])";
    ASSERT_NE(text.find(silu), std::string::npos);
    text.replace(text.find(silu), silu.size(), "x[..., :d] * torch.sigmoid(x[..., :d])");
    std::ofstream(file) << text;
    o.definitions.push_back("silu_and_mul_h16384");
    o.solutions.push_back("silu_and_mul_h16384_tvm_ffi");
  }
  ::setenv("FIB_BWRAP", wrapper.c_str(), 1);
  const RunResult r = run_benchmark(o);
  ::unsetenv("FIB_BWRAP");
  ASSERT_EQ(r.traces.size(), torch ? 4u : 2u);
  for (const Trace& t : r.traces) {
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kPassed) << t.evaluation->log;
  }
  std::istringstream lines(TempDir::read_file(log));
  bool reference_worker = false, python_reference = false;
  for (std::string line; std::getline(lines, line);) {
    const bool worker = line.find(" worker --channel 3") != std::string::npos;
    if (worker && line.find("/box-reference-0 ") != std::string::npos) reference_worker = true;
    if (line.find("run_reference.py --batch") != std::string::npos &&
        line.find("/box-python-reference-0 ") != std::string::npos) {
      python_reference = true;
      // Nothing of the run's other files: no solution's box, no dataset.
      EXPECT_EQ(line.find("/box-solution-"), std::string::npos) << line;
      EXPECT_EQ(line.find(dataset().string()), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(reference_worker) << TempDir::read_file(log);
  if (!torch) GTEST_SKIP() << "the PyTorch reference's part needs a python3 with torch: " << why;
  EXPECT_TRUE(python_reference) << TempDir::read_file(log);
}

// A definition's PyTorch `reference` is code from the dataset: one that writes a forged trace
// into the dataset (whose path it was written with) does so with `--sandbox off`, and cannot in
// the sandbox, where it still computes the outputs that judge the solutions.
TEST_F(Sandbox, AHostilePyTorchReferenceCannotReachTheDataset) {
  SKIP_WITHOUT_SANDBOX();
  std::string why;
  if (!find_python("", PythonUse::kReference, &why)) {
    GTEST_SKIP() << "needs a python3 with torch: " << why;
  }
  const fs::path definition = dataset() / "definitions" / "activation" / "silu_and_mul_h16384.json";
  Json def = Json::parse(TempDir::read_file(definition));
  const fs::path forged = dataset() / "traces" / "forged_by_the_reference.jsonl";
  fs::create_directories(forged.parent_path());
  def["reference"] = fmt::format(R"(
try:
    with open({}, "a") as f:
        f.write("forged\n")
except OSError:
    pass
)",
                                 Json(forged.string()).dump()) +
                     def["reference"].get<std::string>();
  {
    std::ofstream out(definition);
    out << def.dump(2);
  }
  RunOptions o = options(SandboxMode::kOff, {"silu_and_mul_h16384_tvm_ffi"});
  o.definitions = {"silu_and_mul_h16384"};
  o.reference = ReferenceChoice::kPython;
  const RunResult off = run_benchmark(o);
  ASSERT_EQ(off.traces.size(), 2u);
  EXPECT_TRUE(fs::exists(forged)) << "the attack does not work unsandboxed: nothing is shown";
  fs::remove(forged);
  o.sandbox = SandboxMode::kRequired;
  const RunResult on = run_benchmark(o);
  ASSERT_EQ(on.traces.size(), 2u);
  for (const Trace& t : on.traces) {
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kPassed) << t.evaluation->log;
    EXPECT_EQ(t.evaluation->environment.extra["reference"], "python");
  }
  EXPECT_FALSE(fs::exists(forged));
}

// The command line alone: every namespace, the uid, the process tree tied to the worker, the box
// read-only at the neutral /box with only its out/ folder writable, and nothing of the run's
// other files.
TEST(SandboxCommand, BindsOnlyWhatTheWorkerNeeds) {
  WorkerSpec spec;
  spec.executable = "/opt/fib/bin/fib";
  spec.sandbox.bwrap = "/usr/bin/bwrap";
  spec.sandbox.read_only = {"/usr", "/opt/fib/bin/fib"};
  spec.sandbox.box = "/dev/shm/fib-run-1-ab/box-solution-0";
  const std::vector<std::string> a = worker_command(spec);
  const auto has = [&](std::initializer_list<std::string> seq) {
    return std::search(a.begin(), a.end(), seq.begin(), seq.end()) != a.end();
  };
  for (const char* ns : {"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
                         "--unshare-uts", "--die-with-parent", "--new-session"}) {
    EXPECT_TRUE(has({ns})) << ns;
  }
  EXPECT_TRUE(has({"--uid", "65534"}));
  EXPECT_TRUE(has({"--tmpfs", "/dev/shm"}));
  EXPECT_TRUE(has({"--ro-bind", "/opt/fib/bin/fib", "/opt/fib/bin/fib"}));
  EXPECT_TRUE(has({"--ro-bind", spec.sandbox.box.string(), "/box"}));
  EXPECT_TRUE(has({"--bind", (spec.sandbox.box / "out").string(), "/box/out"}));
  for (const std::string& arg : a) {
    // Only the bind's source names the box's real folder; no path inside does.
    EXPECT_FALSE(arg.find("fib-run-1-ab") != std::string::npos &&
                 arg != spec.sandbox.box.string() && arg != (spec.sandbox.box / "out").string())
        << arg;
  }
  std::size_t writable = 0;
  for (const std::string& arg : a) writable += arg == "--bind" || arg == "--bind-try";
  EXPECT_EQ(writable, 1u) << "the box's out/ is the only writable bind";
  EXPECT_TRUE(has({"--", "/opt/fib/bin/fib", "worker", "--channel", "3"}));
  EXPECT_FALSE(has({"--dev-bind"})) << "GPU nodes only for GPU workers";
  // Inside, HOME and TMPDIR are the sandbox's private /tmp.
  const std::vector<std::string> env = worker_environment(spec);
  EXPECT_NE(std::find(env.begin(), env.end(), "HOME=/tmp"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "TMPDIR=/tmp"), env.end());
}

#ifdef FIB_HAVE_CUDA
// On a GPU (skipped visibly elsewhere): the example's CUDA solutions run in the sandbox with the
// /dev/nvidia* nodes bound and a data-segment limit (RLIMIT_DATA, which CUDA's reserved address
// space does not count against), pass, and a crash costs one worker.
class GpuSandbox : public Sandbox {};

TEST_F(GpuSandbox, CudaSolutionsPassInTheSandbox) {
  FIB_REQUIRE_GPU();
  SKIP_WITHOUT_SANDBOX();
  const fib::testing::ExclusiveGpu gpu;
  const std::string p = "rmsnorm_h2048_";
  RunOptions o =
      options(SandboxMode::kRequired, {p + "naive_cuda", p + "crashes_cuda", p + "tuned_cuda"});
  o.device = "cuda:0";
  o.memory_limit_bytes = 32ull << 30;
  const RunResult r = run_benchmark(o);
  using V = std::vector<std::string>;
  EXPECT_EQ(statuses(r, p + "naive_cuda"), V(2, "PASSED")) << logs(r, p + "naive_cuda");
  EXPECT_EQ(statuses(r, p + "tuned_cuda"), V(2, "PASSED")) << logs(r, p + "tuned_cuda");
  EXPECT_EQ(statuses(r, p + "crashes_cuda"), V(2, "RUNTIME_ERROR"));
  for (const Trace& t : r.traces) {
    const Json& iso = t.evaluation->environment.extra["isolation"];
    EXPECT_EQ(iso["level"], "sandbox");
    EXPECT_EQ(iso["gpu_devices"], true);
    EXPECT_EQ(iso["limits"]["data_bytes"], 32ull << 30);
  }
}
#endif

}  // namespace
}  // namespace fib::bench
