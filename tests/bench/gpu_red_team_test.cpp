// The red team of the trust boundary on GPU lanes (`--device cuda:0`, GPU machine only; skipped
// visibly elsewhere): CUDA solutions whose host code attacks fib from inside the GPU worker, as
// the CPU red team's do (tests/bench/sandbox_test.cpp, run_trust_test.cpp; the payloads are
// shared, tests/bench/red_team_attacks.h), around an honest RMSNorm kernel. Each test shows the
// attack working where the protection is off (`--sandbox off`, where that is the protection) and
// the status it gets with it on. Covered elsewhere on the GPU: a write far past an output and
// computing only the calls guessed to be checked (gpu_trust_test.cpp); a plain write of a
// device input, side streams, output caches and value-returning cheats (gpu_run_test.cpp).
#ifdef FIB_HAVE_CUDA

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "bench/red_team_attacks.h"
#include "fib/bench/builder/build.h"
#include "fib/bench/launch/worker_process.h"
#include "fib/bench/run/run.h"
#include "fib/bench/run/test_hooks.h"
#include "fib/dataset/trace_set.h"
#include "support/gpu.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

// The headers every attack's host code may use, then its payload, then a correct RMSNorm kernel
// (tests/bench/gpu_trust_test.cpp's) and the entry point, whose `body` has the views (xv, wv,
// yv), their device pointers (x, w, y) and sizes (rows, hidden) in scope and calls launch() or
// not.
std::string gpu_solution(const std::string& attack, const std::string& body) {
  return std::string(R"(
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>
#include "fib/solution.h"
)") + attack +
         R"(
__global__ void rms_rows(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                         std::int64_t rows, std::int64_t hidden) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float ss = 0.0f;
  for (std::int64_t c = 0; c < hidden; ++c) {
    const float v = __bfloat162float(x[r * hidden + c]);
    ss += v * v;
  }
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(hidden) + 1e-5f);
  for (std::int64_t c = 0; c < hidden; ++c)
    y[r * hidden + c] = __float2bfloat16_rn(__bfloat162float(x[r * hidden + c]) * inv *
                                            __bfloat162float(w[c]));
}
static void launch(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                   std::int64_t rows, std::int64_t hidden) {
  rms_rows<<<static_cast<unsigned>((rows + 127) / 128), 128, 0, fib::stream()>>>(x, w, y, rows,
                                                                               hidden);
}
static void run_(fib::TensorView xv, fib::TensorView wv, fib::TensorView yv) {
  const auto* x = xv.data_ptr<const __nv_bfloat16>();
  const auto* w = wv.data_ptr<const __nv_bfloat16>();
  auto* y = yv.data_ptr<__nv_bfloat16>();
  const std::int64_t rows = xv.size(0), hidden = xv.size(1);
  (void)x, (void)w, (void)y, (void)rows, (void)hidden;
)" + body +
         R"(
}
FIB_EXPORT_SOLUTION(run, run_);
)";
}

const char* kHonest = "  launch(x, w, y, rows, hidden);\n";

// ---- The attacks ------------------------------------------------------------------------------

std::string forges_traces() {
  return gpu_solution(testing::kForgeTraceAttack, R"(
  static bool done = false;
  if (!done) { forge(); done = true; }
  launch(x, w, y, rows, hidden);
)");
}

std::string reads_reference() {
  return gpu_solution(testing::kReadReferencesAttack, R"(
  static bool done = false;
  if (!done) {
    done = true;
    int n = read_references("/dev/shm", 3);
    if (const char* home = std::getenv("HOME")) n += read_references(home, 2);
    std::printf("references read: %d\n", n);
    std::fflush(stdout);
  }
  launch(x, w, y, rows, hidden);
)");
}

std::string lists_reference_cache(const fs::path& cache) {
  return gpu_solution(
      fmt::format("#include <dirent.h>\nstatic const char* kCache = \"{}\";\n", cache.string()),
      R"(
  static bool done = false;
  if (!done) {
    done = true;
    int n = -1;
    if (DIR* d = opendir(kCache)) {
      n = 0;
      while (readdir(d)) ++n;
      closedir(d);
    }
    std::printf("reference cache entries: %d\n", n);
    std::fflush(stdout);
  }
  launch(x, w, y, rows, hidden);
)");
}

// A reply of its own on the worker channel, then garbage.
std::string forges_reply() {
  return gpu_solution(testing::kFindChannelAttack, R"(
  launch(x, w, y, rows, hidden);
  const int fd = channel();
  const std::string reply = "{\"ok\":true,\"trials\":[]}";
  char header[8];
  unsigned long long n = reply.size();
  for (char& c : header) { c = (char)(n & 0xff); n >>= 8; }
  (void)!write(fd, header, 8);
  (void)!write(fd, reply.data(), reply.size());
  (void)!write(fd, "garbage garbage garbage", 23);
)");
}

// Only a well-formed reply: the worker's own follows it, so the forged one is not believed.
std::string forges_reply_only() {
  return gpu_solution(testing::kFindChannelAttack, R"(
  launch(x, w, y, rows, hidden);
  const std::string reply = "{\"ok\":true,\"trials\":[]}";
  char header[8];
  unsigned long long n = reply.size();
  for (char& c : header) { c = (char)(n & 0xff); n >>= 8; }
  std::string message(header, 8);
  message += reply;
  (void)!write(channel(), message.data(), message.size());
)");
}

std::string closes_channel() {
  return gpu_solution(testing::kFindChannelAttack, R"(
  launch(x, w, y, rows, hidden);
  close(channel());
)");
}

// A mark in /dev/shm per workload (the same seed makes the same inputs: a cache keyed on the
// workload would serve every call), written by the first process to see it: "CACHE HIT" when
// another process (an earlier run's worker) left it.
std::string caches_in_shm(const std::string& tag) {
  return gpu_solution(fmt::format(R"(
static const std::string& me() {{
  static const std::string id = std::to_string(getpid()) + "-" +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  return id;
}}
static const char* kTag = "{}";
)",
                                  tag),
                      R"(
  const std::string path = std::string("/dev/shm/") + kTag + "-" + std::to_string(rows);
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[128] = {0};
    (void)!std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    if (me() != buf) std::printf("CACHE HIT\n");
  } else if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fputs(me().c_str(), f);
    std::fclose(f);
  }
  std::fflush(stdout);
  launch(x, w, y, rows, hidden);
)");
}

// A setsid'd grandchild named `marker` that holds the worker channel, then a crash.
std::string leaves_a_grandchild(const std::string& marker) {
  return gpu_solution(R"(
#include <sys/prctl.h>
#include <sys/wait.h>
static int* volatile g_nowhere = nullptr;
)",
                      fmt::format(R"(
  launch(x, w, y, rows, hidden);
  const pid_t child = fork();
  if (child == 0) {{
    setsid();
    if (fork() == 0) {{
      prctl(PR_SET_NAME, "{}");
      sleep(60);
      _exit(0);
    }}
    _exit(0);
  }}
  waitpid(child, nullptr, 0);
  usleep(100000);
  *g_nowhere = 1;  // volatile: the compiler cannot see the bug
)",
                                  marker));
}

// Every call spins 50 ms of real time on the host after launching (the blocking kernel holds
// the stream meanwhile, so the events time only the kernel).
std::string spins(bool slow_clock) {
  return gpu_solution(
      std::string(testing::kSpinAttack) + testing::kSlowClockAttack,
      std::string(slow_clock ? "  slow_the_workers_clock();\n"
                               "  static bool told = false;\n"
                               "  if (!told) { told = true; std::printf(\"SLOW CLOCK %s\\n\", "
                               "real_now ? \"INSTALLED\" : \"NOT INSTALLED\"); "
                               "std::fflush(stdout); }\n"
                             : "") +
          R"(
  launch(x, w, y, rows, hidden);
  spin_25ms();
  spin_25ms();
)");
}

// Makes the worker's host copy of its input sets (the read-only mapping of the input-set file,
// found in /proc/self/maps) writable and sets every element to 1.0, then writes its device
// weight, which makes the worker upload the sets again for the next evaluation.
std::string corrupts_inputs() {
  return gpu_solution(R"(
#include <sys/mman.h>
static void corrupt_host_inputs() {
  static std::uintptr_t done = 0;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("inputs") == std::string::npos ||
        line.find(".safetensors") == std::string::npos) continue;
    const std::uintptr_t begin = std::strtoull(line.c_str(), nullptr, 16);
    const std::uintptr_t end = std::strtoull(line.c_str() + line.find('-') + 1, nullptr, 16);
    if (begin == done || mprotect(reinterpret_cast<void*>(begin), end - begin,
                                  PROT_READ | PROT_WRITE) != 0) continue;
    std::uint64_t n = 0;
    std::memcpy(&n, reinterpret_cast<const void*>(begin), 8);
    auto* p = reinterpret_cast<unsigned char*>(begin);
    for (std::uintptr_t i = 8 + n; i + 1 < end - begin; i += 2) { p[i] = 0x80; p[i + 1] = 0x3f; }
    done = begin;
    std::printf("CORRUPTED THE HOST INPUTS\n");
    std::fflush(stdout);
  }
}
__global__ void fill_ones(__nv_bfloat16* p, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = __float2bfloat16_rn(1.0f);
}
)",
                      R"(
  corrupt_host_inputs();
  fill_ones<<<static_cast<unsigned>((hidden + 255) / 256), 256, 0, fib::stream()>>>(
      const_cast<__nv_bfloat16*>(w), hidden);
  launch(x, w, y, rows, hidden);
)");
}

// A detached host thread that keeps filling the first output it was given with NaN, on a
// stream of its own, long after its evaluation ended (until its context fails).
std::string late_writer() {
  return gpu_solution(R"(
__global__ void nan_fill(__nv_bfloat16* p, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = __float2bfloat16_rn(__int_as_float(0x7fc00000));
}
static void start_late_writer(__nv_bfloat16* out, std::int64_t n) {
  std::thread([out, n] {
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return;
    for (;;) {
      nan_fill<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(out, n);
      if (cudaStreamSynchronize(s) != cudaSuccess) return;
      usleep(1000);
    }
  }).detach();
}
)",
                      R"(
  launch(x, w, y, rows, hidden);
  static bool started = false;
  if (!started) {
    started = true;
    start_late_writer(y, rows * hidden);
  }
)");
}

// ---- The fixture ------------------------------------------------------------------------------

bool sandbox_available() { return !find_bwrap().empty(); }

#define SKIP_WITHOUT_SANDBOX()                                                            \
  if (!sandbox_available()) {                                                             \
    GTEST_SKIP() << "bubblewrap is not installed (the GPU machine carries it in "         \
                    ".device-debs; scripts/device/gpu-check.sh); the sandbox's red team " \
                    "cannot run";                                                         \
  }

Solution cuda_solution(const std::string& name, const std::string& code) {
  Solution s;
  s.name = name;
  s.definition = "rmsnorm_h2048";
  s.author = "attacks";
  s.spec.language = "cuda";
  s.spec.binding = "fib";
  s.spec.target_hardware = {"cuda"};
  s.spec.entry_point = "kernel.cu::run";
  s.sources.push_back(SourceFile{"kernel.cu", code, {}});
  return s;
}

class GpuRedTeam : public ::testing::Test {
 protected:
  void SetUp() override { testing::copy_tree(kSource / "examples" / "dataset", dataset()); }
  fs::path dataset() const { return tmp_.path() / "dataset"; }
  void add(const std::string& name, const std::string& code) {
    write_solution(dataset(), cuda_solution(name, code), "rmsnorm");
  }
  RunOptions options(SandboxMode mode, std::vector<std::string> solutions) const {
    RunOptions o;
    o.dataset = dataset();
    o.worker_executable = FIB_EXE;
    o.abi_include_dir = kSource / "include";
    o.build_cache = tmp_.path() / "cache";
    o.seed = 11;
    o.timeout_seconds = 60;
    o.cli.warmup_runs = 1;
    o.cli.iterations = 3;
    o.cli.num_trials = 1;
    o.max_trial_seconds = 0.2;
    o.device = "cuda:0";
    o.definitions = {"rmsnorm_h2048"};
    o.solutions = std::move(solutions);
    o.sandbox = mode;
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
  static const Trace* trace_of(const RunResult& r, const std::string& solution, int k = 0) {
    for (const Trace& t : r.traces) {
      if (*t.solution == solution && k-- == 0) return &t;
    }
    return nullptr;
  }
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

using V = std::vector<std::string>;

// Every attack compiles for the GPU (nvcc, sm_90a): checked wherever nvcc is, GPU or not, so
// that the tests below run their attacks, not a compile error, the first time they meet a GPU.
TEST(GpuRedTeamBuild, EveryAttackCompiles) {
  const TempDir tmp;
  BuildOptions o;
  o.cache_dir = tmp.path() / "cache";
  o.abi_include_dir = kSource / "include";
  o.timeout = std::chrono::seconds(600);
  o.cuda_architectures = {"90a"};
  std::string unsupported, error;
  if (!select_toolchain(cuda_solution("probe", gpu_solution("", kHonest)), o, &unsupported,
                        &error)) {
    GTEST_SKIP() << "nvcc not found: " << error << " (the GPU red team's builds not tested)";
  }
  const std::vector<std::pair<std::string, std::string>> attacks = {
      {"forges_traces", forges_traces()},
      {"reads_reference", reads_reference()},
      {"lists_reference_cache", lists_reference_cache("/nonexistent/references")},
      {"forges_reply", forges_reply()},
      {"forges_reply_only", forges_reply_only()},
      {"closes_channel", closes_channel()},
      {"caches_in_shm", caches_in_shm("fib-test-cache")},
      {"leaves_a_grandchild", leaves_a_grandchild("fibgc")},
      {"slow_clock", spins(true)},
      {"honest_spin", spins(false)},
      {"corrupts_inputs", corrupts_inputs()},
      {"late_writer", late_writer()},
      {"honest", gpu_solution("", kHonest)}};
  for (const auto& [name, code] : attacks) {
    const BuildResult r = build_solution(cuda_solution(name, code), o);
    EXPECT_TRUE(r.ok()) << name << ": " << r.message << "\n" << r.log;
  }
}

// The solution finds the dataset on its parent's command line (`fib run --local DIR`) and
// appends a forged PASSED trace to it: unsandboxed it lands; sandboxed the dataset is not there.
TEST_F(GpuRedTeam, AForgedTraceCannotReachTheDataset) {
  FIB_REQUIRE_GPU();
  SKIP_WITHOUT_SANDBOX();
  const fib::testing::ExclusiveGpu gpu;
  add("forges_traces", forges_traces());
  const auto run_cli = [&](const std::string& mode) {
    const std::string cmd = fmt::format(
        "{} run --local {} --solutions forges_traces --definitions rmsnorm_h2048 --device cuda:0 "
        "--seed 3 --warmup-runs 1 --iterations 3 --num-trials 1 --build-cache {} --sandbox {} "
        "> {} 2>&1",
        FIB_EXE, dataset().string(), (tmp_.path() / "cache").string(), mode,
        (tmp_.path() / ("log-" + mode)).string());
    return std::system(cmd.c_str());
  };
  ASSERT_EQ(run_cli("required"), 0) << tmp_.read("log-required");
  EXPECT_EQ(all_traces().find("FORGED-BY-SOLUTION"), std::string::npos);
  EXPECT_NE(tmp_.read("log-required").find("PASSED"), std::string::npos)
      << tmp_.read("log-required");
  ASSERT_EQ(run_cli("off"), 0) << tmp_.read("log-off");
  EXPECT_NE(all_traces().find("FORGED-BY-SOLUTION"), std::string::npos)
      << "unsandboxed, the attack reaches the dataset (else this test shows nothing)";
}

// The solution looks for the reference's outputs in fib's scratch folder (HOME points into it
// unsandboxed; /dev/shm holds every run's) and reads them.
TEST_F(GpuRedTeam, TheReferenceOutputsAreOutOfReach) {
  FIB_REQUIRE_GPU();
  SKIP_WITHOUT_SANDBOX();
  const fib::testing::ExclusiveGpu gpu;
  add("reads_reference", reads_reference());
  const RunResult on = run_benchmark(options(SandboxMode::kRequired, {"reads_reference"}));
  EXPECT_EQ(statuses(on, "reads_reference"), V(2, "PASSED")) << logs(on, "reads_reference");
  EXPECT_EQ(logs(on, "reads_reference").find("READ REFERENCE"), std::string::npos)
      << logs(on, "reads_reference");
  EXPECT_NE(logs(on, "reads_reference").find("references read: 0"), std::string::npos);
  const RunResult off = run_benchmark(options(SandboxMode::kOff, {"reads_reference"}));
  EXPECT_NE(logs(off, "reads_reference").find("READ REFERENCE"), std::string::npos)
      << "unsandboxed, the reference's outputs are there to read (else this test shows "
         "nothing): "
      << logs(off, "reads_reference");
}

// The solution lists the reference cache (its default place is no secret): the sandbox has no
// such folder; unsandboxed, the same code finds its entries.
TEST_F(GpuRedTeam, TheReferenceCacheIsOutOfReach) {
  FIB_REQUIRE_GPU();
  SKIP_WITHOUT_SANDBOX();
  const fib::testing::ExclusiveGpu gpu;
  const fs::path cache = tmp_.path() / "references";
  add("lists_reference_cache", lists_reference_cache(cache));
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

// The solution writes a reply of its own on the worker channel (then garbage, or nothing
// more); another closes the channel. Each is a RUNTIME_ERROR, a fresh GPU worker takes the next
// solution, and the run goes on (fib is not killed by SIGPIPE). The channel's protection holds
// with or without the sandbox.
TEST_F(GpuRedTeam, ABrokenChannelCostsOnlyItsEvaluation) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;
  add("a_forges_reply", forges_reply());
  add("a_forges_reply_only", forges_reply_only());
  add("b_closes_channel", closes_channel());
  add("c_honest", gpu_solution("", kHonest));
  for (const SandboxMode mode : {SandboxMode::kOff, SandboxMode::kAuto}) {
    const RunResult r = run_benchmark(
        options(mode, {"a_forges_reply", "a_forges_reply_only", "b_closes_channel", "c_honest"}));
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

// The solution keeps a mark per workload in /dev/shm across two runs with the same seed (whose
// inputs are the same): unsandboxed, the second run's worker finds the first's; sandboxed, each
// worker has a /dev/shm of its own.
TEST_F(GpuRedTeam, DevShmIsPrivateToEachWorker) {
  FIB_REQUIRE_GPU();
  SKIP_WITHOUT_SANDBOX();
  const fib::testing::ExclusiveGpu gpu;
  const std::string tag = fmt::format("fib-test-gpu-cache-{}", ::getpid());
  add("caches_in_shm", caches_in_shm(tag));
  const auto cleanup = [&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
      if (e.path().filename().string().rfind(tag, 0) == 0) fs::remove(e.path(), ec);
    }
  };
  cleanup();
  for (int i = 0; i < 2; ++i) {
    const RunResult r = run_benchmark(options(SandboxMode::kRequired, {"caches_in_shm"}));
    EXPECT_EQ(statuses(r, "caches_in_shm"), V(2, "PASSED")) << logs(r, "caches_in_shm");
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

// The solution leaves a setsid'd grandchild that holds the worker channel, then crashes.
// Unsandboxed, the channel stays open (the crash becomes a TIMEOUT) and the grandchild outlives
// the run; sandboxed, the crash is a RUNTIME_ERROR and nothing is left.
TEST_F(GpuRedTeam, NoProcessOutlivesTheWorker) {
  FIB_REQUIRE_GPU();
  SKIP_WITHOUT_SANDBOX();
  const fib::testing::ExclusiveGpu gpu;
  const std::string marker = fmt::format("fibgg{}", ::getpid() % 1000000);
  add("leaves_a_grandchild", leaves_a_grandchild(marker));
  RunOptions on = options(SandboxMode::kRequired, {"leaves_a_grandchild"});
  on.timeout_seconds = 30;
  const RunResult r = run_benchmark(on);
  EXPECT_EQ(statuses(r, "leaves_a_grandchild"), V(2, "RUNTIME_ERROR"))
      << logs(r, "leaves_a_grandchild");
  EXPECT_NE(logs(r, "leaves_a_grandchild").find("SIGSEGV"), std::string::npos)
      << logs(r, "leaves_a_grandchild");
  // The namespace's processes die with its init, which the kernel tears down asynchronously.
  for (int i = 0; i < 100 && !testing::processes_named(marker).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(testing::processes_named(marker).empty());

  RunOptions off = options(SandboxMode::kOff, {"leaves_a_grandchild"});
  off.timeout_seconds = 10;
  const RunResult o = run_benchmark(off);
  const std::vector<int> left = testing::processes_named(marker);
  for (int p : left) ::kill(p, SIGKILL);  // what this test's attack started
  EXPECT_EQ(statuses(o, "leaves_a_grandchild"), V{"TIMEOUT"})
      << "unsandboxed, the grandchild holds the channel (else this test shows nothing): "
      << logs(o, "leaves_a_grandchild");
  EXPECT_FALSE(left.empty()) << "unsandboxed, the grandchild outlives fib";
}

// The solution rewrites the GPU worker's steady_clock::now through its GOT (60x slow), which
// the worker's span from request to reply is measured with. Where the rewrite takes, the span
// it reports falls far below what fib observed, and the evaluation is a TIMER_MISMATCH, never
// ranked; where it does not, the evaluation passes with its honest latency (kernel times come
// from CUDA events, which this clock does not touch; what fib cannot promise about them is in
// docs/run.md's threat model). The solution says which in its log.
TEST_F(GpuRedTeam, AClockRewrittenThroughTheWorkersGotIsFlaggedAndNotRanked) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;
  add("honest_spin", spins(false));
  add("slow_clock", spins(true));
  // At least 1 warmup call, 3 trials of 12 and one audited call after the clock is installed:
  // 38 calls of 50 ms, far more than the cross-check allows unaccounted for even behind a
  // CUDA context's start of several seconds (which the worker reports at the real rate). A
  // trial's 12 calls (600 ms) are queued within the blocking kernel's 1 s.
  RunOptions o = options(SandboxMode::kAuto, {"honest_spin", "slow_clock"});
  o.cli.iterations = 12;
  o.cli.num_trials = 3;
  o.fixed_iterations = true;
  o.max_trial_seconds = 5;
  const RunResult r = run_benchmark(o);
  ASSERT_EQ(r.traces.size(), 4u);
  for (int k = 0; k < 2; ++k) {
    const Trace* honest = trace_of(r, "honest_spin", k);
    ASSERT_NE(honest, nullptr);
    EXPECT_EQ(honest->evaluation->status, EvaluationStatus::kPassed) << honest->evaluation->log;
    const Json& hc = honest->evaluation->environment.extra["timer_check"];
    EXPECT_TRUE(hc["checked"].get<bool>()) << hc.dump();
    EXPECT_LT(hc["unaccounted_ms"].get<double>(), hc["allowed_ms"].get<double>()) << hc.dump();

    const Trace* cheat = trace_of(r, "slow_clock", k);
    ASSERT_NE(cheat, nullptr);
    const Json& cc = cheat->evaluation->environment.extra["timer_check"];
    if (cheat->evaluation->status == EvaluationStatus::kPassed) {
      // The slow clock did not shorten the worker's span (the cross-check agrees), and the
      // kernel times come from CUDA events, which it cannot touch: the attack gained nothing.
      EXPECT_LT(cc["unaccounted_ms"].get<double>(), cc["allowed_ms"].get<double>()) << cc.dump();
      EXPECT_GE(cheat->evaluation->performance->latency_ms,
                0.8 * honest->evaluation->performance->latency_ms);
      // Whether the rewrite took in this worker is a fact of the host worth seeing in the log.
      const bool installed =
          cheat->evaluation->log.find("SLOW CLOCK INSTALLED") != std::string::npos;
      std::printf("slow_clock PASSED with its honest latency; its rewrite %s\n",
                  installed ? "took (and did not shorten the span)" : "did not take");
      continue;
    }
    EXPECT_EQ(cheat->evaluation->status, EvaluationStatus::kRuntimeError) << cheat->evaluation->log;
    EXPECT_NE(cheat->evaluation->log.find("TIMER_MISMATCH"), std::string::npos)
        << cheat->evaluation->log;
    // The attack worked on what the worker reports: most of the 50 ms spins are missing from
    // its span, as the orchestrator's own observation shows.
    EXPECT_NE(cheat->evaluation->log.find("SLOW CLOCK INSTALLED"), std::string::npos);
    EXPECT_GT(cc["observed_ms"].get<double>() - cc["worker_ms"].get<double>(), 0.8 * 36 * 50)
        << cc.dump();
  }
}

// The GPU lane's inputs are device tensors, hashed after every call (a plain write of one:
// GpuRun's mutates_inputs_cuda). With host-made inputs the worker also holds the sets on the
// host (a read-only mapping of the input-set file, from which it uploads them): this solution
// makes that mapping writable and changes it, then writes its device weight so that the sets
// are made again. With device-made inputs the file holds the fills' specs, made again from the
// file. Either way it is a RUNTIME_ERROR, and the honest solution evaluated next in the same
// worker gets the inputs as they were.
TEST_F(GpuRedTeam, InputsChangedOnTheHostAndDeviceDoNotReachTheNextSolution) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;
  add("a_corrupts_inputs", corrupts_inputs());
  add("b_honest", gpu_solution("", kHonest));
  for (const std::string inputs_on : {"host", "device"}) {
    SCOPED_TRACE("inputs made on the " + inputs_on);
    RunOptions o = options(SandboxMode::kAuto, {"a_corrupts_inputs", "b_honest"});
    o.inputs_on = parse_inputs_on(inputs_on);
    const RunResult r = run_benchmark(o);
    ASSERT_EQ(r.traces.size(), 4u);
    for (int k = 0; k < 2; ++k) {
      const Trace* cheat = trace_of(r, "a_corrupts_inputs", k);
      ASSERT_NE(cheat, nullptr);
      EXPECT_EQ(cheat->evaluation->status, EvaluationStatus::kRuntimeError)
          << cheat->evaluation->log;
      EXPECT_NE(cheat->evaluation->log.find("modified its input 'weight'"), std::string::npos)
          << cheat->evaluation->log;
      // Host-made inputs: the attack reached the worker's host copy (else this shows nothing).
      if (inputs_on == "host") {
        EXPECT_NE(cheat->evaluation->log.find("CORRUPTED THE HOST INPUTS"), std::string::npos)
            << cheat->evaluation->log;
      }
      const Trace* honest = trace_of(r, "b_honest", k);
      ASSERT_NE(honest, nullptr);
      EXPECT_EQ(honest->evaluation->status, EvaluationStatus::kPassed) << honest->evaluation->log;
    }
  }
}

// A detached host thread keeps writing NaN into the first output its solution was given, on a
// stream of its own, after its evaluation ended. That output's addresses stay reserved (never
// handed to the next solution), so in a persistent worker the late write faults instead of
// reaching the next solution's outputs: the next solution is PASSED, or fails naming the
// illegal address (the sticky error its context met), never with a wrong result. With
// --isolated the writer dies with its worker and the next solutions pass.
TEST_F(GpuRedTeam, ALateWriterCannotReachTheNextSolutionsOutputs) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;
  add("a_late_writer", late_writer());
  add("b_honest", gpu_solution("", kHonest));
  add("c_honest", gpu_solution("", kHonest));
  RunOptions o = options(SandboxMode::kAuto, {"a_late_writer", "b_honest", "c_honest"});
  // Each solution in a worker of its own: the writer's kernel faults in its own worker only.
  const RunResult own = run_benchmark(o);
  int judged = 0;
  for (const Trace& t : own.traces) {
    if (*t.solution == "a_late_writer") continue;
    ++judged;
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kPassed)
        << *t.solution << ": " << t.evaluation->log;
  }
  EXPECT_EQ(judged, 4);
  // One worker shared by the lane's solutions (test builds only): the sticky error lands in
  // whatever evaluation comes next, which fails naming it, never with a wrong result.
  test_hooks::share_solution_workers(true);
  const RunResult shared = run_benchmark(o);
  test_hooks::share_solution_workers(false);
  judged = 0;
  for (const Trace& t : shared.traces) {
    if (*t.solution == "a_late_writer") continue;
    ++judged;
    const Evaluation& e = *t.evaluation;
    if (e.environment.extra.contains("output_guard") &&
        e.environment.extra["output_guard"] == "guard bytes") {
      continue;  // no reserved addresses on this driver: nothing is promised
    }
    // "illegal address" / cudaErrorIllegalAddress, whatever step met the sticky error.
    const bool faulted = e.log.find("llegal") != std::string::npos;
    EXPECT_TRUE(e.status == EvaluationStatus::kPassed || faulted)
        << *t.solution << ": " << status_name(e.status) << " " << e.log;
  }
  EXPECT_EQ(judged, 4);
  o.isolated = true;
  const RunResult isolated = run_benchmark(o);
  judged = 0;
  for (const Trace& t : isolated.traces) {
    if (*t.solution == "a_late_writer") continue;
    ++judged;
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kPassed)
        << *t.solution << ": " << t.evaluation->log;
  }
  EXPECT_EQ(judged, 4);
}

}  // namespace
}  // namespace fib::bench

#endif  // FIB_HAVE_CUDA
