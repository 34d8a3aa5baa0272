// The Python runtime on a GPU (GPU machine only; skipped visibly elsewhere): the example's Triton
// RMSNorm passes and its side-stream twin is caught by the window audit; PyTorch solutions run
// on device tensors in both calling styles; a torch extension (binding torch) builds with
// torch.utils.cpp_extension, passes, and one writing past its output is caught by the guards;
// the PyTorch reference of a definition without a native one judges on the lane's GPU.
#ifdef FIB_HAVE_CUDA

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "fib/bench/builder/python_runtime.h"
#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"
#include "support/gpu.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class GpuPython : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::copy_tree(kSource / "examples" / "dataset", tmp_.path() / "dataset");
  }

  RunResult run(const std::vector<std::string>& solutions) {
    RunOptions o;
    o.dataset = tmp_.path() / "dataset";
    o.worker_executable = FIB_EXE;
    o.abi_include_dir = kSource / "include";
    o.build_cache = tmp_.path() / "cache";
    o.seed = 13;
    o.timeout_seconds = 120;  // Triton compiles its kernel on the first call
    o.cli.warmup_runs = 2;
    o.cli.iterations = 12;
    o.cli.num_trials = 2;
    o.max_trial_seconds = 0.5;
    o.device = "cuda:0";
    o.definitions = {"rmsnorm_h2048"};
    o.solutions = solutions;
    return run_benchmark(o);
  }

  void add(const std::string& name, const std::string& language, const std::string& binding,
           const std::string& file, const std::string& source, bool dps = true) {
    Solution s;
    s.name = name;
    s.definition = "rmsnorm_h2048";
    s.author = "python-tests";
    s.spec.language = language;
    if (!binding.empty()) s.spec.binding = binding;
    s.spec.target_hardware = {"cuda"};
    s.spec.entry_point = file + "::run";
    if (!dps) s.spec.destination_passing_style = false;
    s.sources.push_back(SourceFile{file, source, {}});
    write_solution(tmp_.path() / "dataset", s, "rmsnorm");
  }

  TempDir tmp_;
};

std::map<std::string, std::vector<std::string>> statuses(const RunResult& r) {
  std::map<std::string, std::vector<std::string>> m;
  for (const Trace& t : r.traces) {
    m[*t.solution].push_back(std::string(status_name(t.evaluation->status)));
  }
  return m;
}

std::string log_of(const RunResult& r, const std::string& solution) {
  for (const Trace& t : r.traces) {
    if (*t.solution == solution) return t.evaluation->log;
  }
  return {};
}

std::vector<std::string> twice(const char* status) { return {status, status}; }

#define FIB_REQUIRE_PYTHON_TORCH(runtime)                                     \
  std::string fib_python_why;                                                 \
  const auto runtime = find_python("", PythonUse::kRuntime, &fib_python_why); \
  if (!runtime) GTEST_SKIP() << "no Python runtime: " << fib_python_why

TEST_F(GpuPython, TheTritonExamplePassesAndItsSideStreamTwinIsCaught) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_PYTHON_TORCH(runtime);
  if (runtime->triton.empty()) GTEST_SKIP() << "triton does not import: " << runtime->triton_error;
  const fib::testing::ExclusiveGpu gpu;
  const std::string p = "rmsnorm_h2048_";
  const RunResult r = run({p + "triton_kernel", p + "triton_side_stream"});
  const auto s = statuses(r);
  EXPECT_EQ(s.at(p + "triton_kernel"), twice("PASSED")) << log_of(r, p + "triton_kernel");
  EXPECT_EQ(s.at(p + "triton_side_stream"), twice("RUNTIME_ERROR"))
      << log_of(r, p + "triton_side_stream");
  EXPECT_NE(log_of(r, p + "triton_side_stream").find("window audit"), std::string::npos)
      << log_of(r, p + "triton_side_stream");
  for (const Trace& t : r.traces) {
    if (!t.passed()) continue;
    EXPECT_EQ(t.evaluation->performance->extra["method"], "cuda_events");
    EXPECT_LT(t.evaluation->performance->latency_ms, 5.0);
    EXPECT_FALSE(t.evaluation->environment.extra["window_audit"]["kernels"].empty());
  }
}

TEST_F(GpuPython, TorchSolutionsAndExtensionsRunOnDeviceTensors) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_PYTHON_TORCH(runtime);
  const fib::testing::ExclusiveGpu gpu;
  const fs::path examples = kSource / "examples" / "solutions" / "rmsnorm_h2048";
  add("torch_dps", "python", "", "python_torch.py", read(examples / "python_torch.py"));
  add("torch_value", "python", "", "python_value_returning.py",
      read(examples / "python_value_returning.py"), /*dps=*/false);
  add("torch_mutates", "python", "", "python_mutates_inputs.py",
      read(examples / "python_mutates_inputs.py"));
  const std::string extension = R"(
#include <torch/extension.h>
void run(torch::Tensor x, torch::Tensor w, torch::Tensor y) {
  auto f = x.to(torch::kFloat32);
  auto inv = torch::rsqrt(f.pow(2).mean(-1, true) + 1e-5);
  y.copy_(f * inv * w.to(torch::kFloat32));
  if (PAST_END) {
    auto bytes = torch::from_blob(static_cast<char*>(y.data_ptr()) + y.nbytes(), {2},
                                  y.options().dtype(torch::kUInt8));
    bytes.fill_(0x7F);
  }
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
)";
  add("extension", "cuda", "torch", "rms.cu", "#define PAST_END 0\n" + extension);
  add("extension_past_end", "cuda", "torch", "rms.cu", "#define PAST_END 1\n" + extension);
  const RunResult r =
      run({"torch_dps", "torch_value", "torch_mutates", "extension", "extension_past_end"});
  const auto s = statuses(r);
  EXPECT_EQ(s.at("torch_dps"), twice("PASSED")) << log_of(r, "torch_dps");
  EXPECT_EQ(s.at("torch_value"), twice("PASSED")) << log_of(r, "torch_value");
  EXPECT_EQ(s.at("torch_mutates"), twice("RUNTIME_ERROR")) << log_of(r, "torch_mutates");
  EXPECT_NE(log_of(r, "torch_mutates").find("modified its input 'hidden_states'"),
            std::string::npos)
      << log_of(r, "torch_mutates");
  EXPECT_EQ(s.at("extension"), twice("PASSED")) << log_of(r, "extension");
  EXPECT_EQ(s.at("extension_past_end"), twice("RUNTIME_ERROR")) << log_of(r, "extension_past_end");
  EXPECT_NE(log_of(r, "extension_past_end").find("wrote past the end of output 'output'"),
            std::string::npos)
      << log_of(r, "extension_past_end");
}

// SiLU-and-mul in CUDA (fib's ABI); `body` is the entry point's body (x, y, tokens, d in scope;
// `c` the call's number in this worker) and calls launch() or not.
std::string silu_and_mul_solution(const std::string& body) {
  return R"(
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include "fib/solution.h"
__global__ void silu_and_mul(const __nv_bfloat16* x, __nv_bfloat16* y, std::int64_t tokens,
                             std::int64_t d) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * d) return;
  const std::int64_t t = i / d, c = i % d;
  const float gate = __bfloat162float(x[t * 2 * d + c]);
  const float up = __bfloat162float(x[t * 2 * d + d + c]);
  y[i] = __float2bfloat16_rn(gate / (1.0f + expf(-gate)) * up);
}
static unsigned long long calls_made = 0;
static void launch(const __nv_bfloat16* x, __nv_bfloat16* y, std::int64_t tokens, std::int64_t d) {
  silu_and_mul<<<static_cast<unsigned>((tokens * d + 255) / 256), 256, 0, fib::stream()>>>(
      x, y, tokens, d);
}
static void run_(fib::TensorView xv, fib::TensorView yv) {
  const auto* x = xv.data_ptr<const __nv_bfloat16>();
  auto* y = yv.data_ptr<__nv_bfloat16>();
  const std::int64_t tokens = xv.size(0), d = yv.size(1);
  const unsigned long long c = calls_made++;
  (void)c;
)" + body +
         R"(
}
FIB_EXPORT_SOLUTION(run, run_);
)";
}

TEST_F(GpuPython, ThePyTorchReferenceRunsOnTheLanesGpuAndAnyTimedCallMayBeChecked) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_PYTHON_TORCH(runtime);
  const fib::testing::ExclusiveGpu gpu;
  // silu_and_mul_h16384's PyTorch reference (--reference python) judges, on the lane's GPU, on
  // every set a timed call may use (made on the device, remade on the host for it). Each worker is
  // fresh (--isolated), so `c` counts from the first warmup call: 2 warmup calls, then 3 trials of
  // 40 timed calls, then the window audit's, computed. The cheat passes only if every trial's draw
  // lands on its first or last call, (2/40)^3.
  const auto add_silu = [&](const std::string& name, const std::string& body) {
    Solution s;
    s.name = name;
    s.definition = "silu_and_mul_h16384";
    s.author = "python-tests";
    s.spec.language = "cuda";
    s.spec.binding = "fib";
    s.spec.target_hardware = {"cuda"};
    s.spec.entry_point = "kernel.cu::run";
    s.sources.push_back(SourceFile{"kernel.cu", silu_and_mul_solution(body), {}});
    write_solution(tmp_.path() / "dataset", s, "activation");
  };
  add_silu("every_call", "  launch(x, y, tokens, d);\n");
  add_silu("first_and_last_only", R"(
  const long long in_trial = c < 2 ? -1 : static_cast<long long>(c - 2) % 40;
  if (c < 2 || c >= 2 + 3 * 40 || in_trial == 0 || in_trial == 39) launch(x, y, tokens, d);
)");
  RunOptions o;
  o.dataset = tmp_.path() / "dataset";
  o.worker_executable = FIB_EXE;
  o.abi_include_dir = kSource / "include";
  o.build_cache = tmp_.path() / "cache";
  o.seed = 17;
  o.timeout_seconds = 120;
  o.cli.warmup_runs = 2;
  o.cli.iterations = 40;
  o.cli.num_trials = 3;
  o.fixed_iterations = true;
  o.max_trial_seconds = 2;
  o.isolated = true;
  o.device = "cuda:0";
  o.python = runtime->executable;
  o.python_bridge_dir = kSource / "python" / "fib_bridge";
  o.reference = ReferenceChoice::kPython;
  o.definitions = {"silu_and_mul_h16384"};
  o.solutions = {"every_call", "first_and_last_only"};
  const RunResult r = run_benchmark(o);
  std::string messages;
  for (const std::string& m : r.messages) messages += m + "\n";
  ASSERT_EQ(r.counts.reference_failures, 0u) << messages;
  const auto s = statuses(r);
  ASSERT_TRUE(s.contains("every_call") && s.contains("first_and_last_only")) << messages;
  ASSERT_EQ(s.at("every_call"), twice("PASSED")) << log_of(r, "every_call");
  for (const std::string& status : s.at("first_and_last_only")) {
    EXPECT_NE(status, "PASSED") << log_of(r, "first_and_last_only");
  }
  for (const Trace& t : r.traces) {
    const Json& env = t.evaluation->environment.extra;
    EXPECT_EQ(env["reference"], "python");
    // Where the reference's outputs were computed, as the bridge reports it.
    EXPECT_EQ(env["reference_runtime"]["device"], "cuda:0") << env.dump();
  }
}

}  // namespace
}  // namespace fib::bench

#endif  // FIB_HAVE_CUDA
