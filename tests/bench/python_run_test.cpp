// The Python runtime end to end: the bundled example's Python solutions of rmsnorm_h2048 (the
// red team's included) run on CPU tensors in the python3 that has PyTorch, under the same
// checks as native solutions, and a torch extension (binding torch) built with
// torch.utils.cpp_extension; what cannot run says why. Skipped visibly where no python3 imports
// torch. Triton on a GPU: tests/bench/gpu_python_run_test.cpp.
#include <gtest/gtest.h>

#include <map>

#include "fib/bench/builder/python_runtime.h"
#include "fib/bench/run/run.h"
#include "fib/bench/run/test_hooks.h"
#include "fib/dataset/trace_set.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

#define FIB_REQUIRE_PYTHON_TORCH()                                                                 \
  do {                                                                                             \
    std::string why;                                                                               \
    if (!find_python("", PythonUse::kRuntime, &why)) GTEST_SKIP() << "no Python runtime: " << why; \
  } while (0)

class RunPython : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::copy_tree(kSource / "examples" / "dataset", tmp_.path() / "dataset");
  }

  RunResult run(const std::vector<std::string>& solutions, const std::string& python = {},
                double timeout_seconds = 60) {
    RunOptions o;
    o.dataset = tmp_.path() / "dataset";
    o.worker_executable = FIB_EXE;
    o.abi_include_dir = kSource / "include";
    o.build_cache = tmp_.path() / "cache";
    o.seed = 5;
    o.timeout_seconds = timeout_seconds;
    o.cli.warmup_runs = 1;
    o.cli.iterations = 4;
    o.cli.num_trials = 2;
    o.max_trial_seconds = 0.5;
    o.definitions = {"rmsnorm_h2048"};
    o.solutions = solutions;
    o.python = python;
    return run_benchmark(o);
  }

  // Adds rmsnorm_h2048 solution `name` of `language` with main.py's `source`.
  void add(const std::string& name, const std::string& language, const std::string& source,
           bool dps = true) {
    Solution s;
    s.name = name;
    s.definition = "rmsnorm_h2048";
    s.author = "python-tests";
    s.spec.language = language;
    s.spec.target_hardware = {"cpu"};
    s.spec.entry_point = "main.py::run";
    if (!dps) s.spec.destination_passing_style = false;
    s.sources.push_back(SourceFile{"main.py", source, {}});
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

TEST_F(RunPython, TheExamplesPythonSolutionsPassAndItsRedTeamIsCaught) {
  FIB_REQUIRE_PYTHON_TORCH();
  const std::string p = "rmsnorm_h2048_";
  const RunResult r =
      run({p + "python_torch", p + "python_value_returning", p + "python_wrong_result",
           p + "python_raises", p + "python_caches_results", p + "python_mutates_inputs",
           p + "python_writes_past_end"});
  const auto s = statuses(r);
  EXPECT_EQ(s.at(p + "python_torch"), twice("PASSED")) << log_of(r, p + "python_torch");
  EXPECT_EQ(s.at(p + "python_value_returning"), twice("PASSED"))
      << log_of(r, p + "python_value_returning");
  EXPECT_EQ(s.at(p + "python_wrong_result"), twice("INCORRECT_NUMERICAL"));
  EXPECT_EQ(s.at(p + "python_caches_results"), twice("INCORRECT_NUMERICAL"))
      << log_of(r, p + "python_caches_results");
  EXPECT_EQ(s.at(p + "python_raises"), twice("RUNTIME_ERROR"));
  const std::string raised = log_of(r, p + "python_raises");
  EXPECT_NE(raised.find("Traceback (most recent call last)"), std::string::npos) << raised;
  EXPECT_NE(raised.find("ValueError: rmsnorm_h2048 python_raises: hidden_size 2048"),
            std::string::npos)
      << raised;
  EXPECT_EQ(s.at(p + "python_mutates_inputs"), twice("RUNTIME_ERROR"));
  EXPECT_NE(log_of(r, p + "python_mutates_inputs").find("modified its input 'hidden_states'"),
            std::string::npos)
      << log_of(r, p + "python_mutates_inputs");
  EXPECT_EQ(s.at(p + "python_writes_past_end"), twice("RUNTIME_ERROR"));
  EXPECT_NE(log_of(r, p + "python_writes_past_end").find("wrote past the end of output 'output'"),
            std::string::npos)
      << log_of(r, p + "python_writes_past_end");
  // Timed by fib, in the worker: the traces carry fib's samples and the runtime used.
  for (const Trace& t : r.traces) {
    if (!t.passed()) continue;
    EXPECT_GT(t.evaluation->performance->latency_ms, 0);
    EXPECT_EQ(t.evaluation->performance->extra["solution"]["samples_ms"].size(), 2u);
  }
}

TEST_F(RunPython, WrongReturnsAndImportErrorsSayWhat) {
  FIB_REQUIRE_PYTHON_TORCH();
  add("returns_a_list_of_ints", "python", "def run(x, w):\n    return [1]\n", /*dps=*/false);
  add("returns_two", "python", "def run(x, w):\n    return x, x\n", /*dps=*/false);
  add("wrong_dtype", "python", "import torch\ndef run(x, w):\n    return x.float()\n",
      /*dps=*/false);
  add("syntax_error", "python", "def run(x, w, y):\n    return (\n");
  add("no_entry", "python", "def other(x, w, y):\n    pass\n");
  const RunResult r =
      run({"returns_a_list_of_ints", "returns_two", "wrong_dtype", "syntax_error", "no_entry"});
  const auto s = statuses(r);
  EXPECT_EQ(s.at("returns_a_list_of_ints"), twice("RUNTIME_ERROR"));
  EXPECT_NE(log_of(r, "returns_a_list_of_ints").find("result #1 is a int"), std::string::npos)
      << log_of(r, "returns_a_list_of_ints");
  EXPECT_EQ(s.at("returns_two"), twice("RUNTIME_ERROR"));
  EXPECT_NE(log_of(r, "returns_two")
                .find("the solution returned 2 tensors; the definition has 1 outputs"),
            std::string::npos)
      << log_of(r, "returns_two");
  EXPECT_EQ(s.at("wrong_dtype"), twice("INCORRECT_DTYPE")) << log_of(r, "wrong_dtype");
  EXPECT_EQ(s.at("syntax_error"), twice("COMPILE_ERROR"));
  EXPECT_NE(log_of(r, "syntax_error").find("SyntaxError"), std::string::npos)
      << log_of(r, "syntax_error");
  EXPECT_EQ(s.at("no_entry"), twice("COMPILE_ERROR"));
  EXPECT_NE(log_of(r, "no_entry").find("main.py defines no function 'run'"), std::string::npos)
      << log_of(r, "no_entry");
}

// An honest RMSNorm in PyTorch (destination-passing), for the red team's victims below.
const char* kHonestRms = R"(import torch
@torch.no_grad()
def run(x, w, y):
    f = x.to(torch.float32)
    y.copy_(f * torch.rsqrt(f.pow(2).mean(dim=-1, keepdim=True) + 1e-5) * w.to(torch.float32))
)";

// Solution "a_patches_call" replaces the harness's `call` with one that sleeps 30 ms first, and
// "b_patches_torch" replaces torch.Tensor.copy_ with one that halves what it copies; both are
// evaluated before "c_honest" on every workload. Returns c_honest's traces.
std::vector<const Trace*> victim_traces(const RunResult& r) {
  std::vector<const Trace*> victims;
  for (const Trace& t : r.traces) {
    if (*t.solution == "c_honest") victims.push_back(&t);
  }
  return victims;
}

class RunPythonProcesses : public RunPython {
 protected:
  void add_attackers() {
    add("a_patches_call", "python", R"(import sys, time
harness = sys.modules["_fib_harness"]
_call = harness.call
def call(*args):
    time.sleep(0.03)
    return _call(*args)
harness.call = call
def run(x, w, y):
    pass
)");
    add("b_patches_torch", "python", R"(import torch
_copy = torch.Tensor.copy_
torch.Tensor.copy_ = lambda self, src, *a, **k: _copy(self, src * 0.5, *a, **k)
def run(x, w, y):
    pass
)");
    add("c_honest", "python", kHonestRms);
  }
  void TearDown() override { test_hooks::share_solution_workers(false); }
};

TEST_F(RunPythonProcesses, PatchesToTheHarnessOrTorchReachTheNextSolutionOnlyInASharedWorker) {
  FIB_REQUIRE_PYTHON_TORCH();
  add_attackers();
  // The protection off: one worker for every solution of the lane, as before. The honest
  // solution runs in an interpreter the attackers patched: its calls slept, its output halved.
  test_hooks::share_solution_workers(true);
  const RunResult shared = run({"a_patches_call", "b_patches_torch", "c_honest"});
  const std::vector<const Trace*> hit = victim_traces(shared);
  ASSERT_EQ(hit.size(), 2u);
  for (const Trace* t : hit) {
    EXPECT_EQ(t->evaluation->status, EvaluationStatus::kIncorrectNumerical) << t->evaluation->log;
  }
  // On: a worker per solution. Its verdicts and latencies are its own.
  test_hooks::share_solution_workers(false);
  const RunResult own = run({"a_patches_call", "b_patches_torch", "c_honest"});
  const std::vector<const Trace*> safe = victim_traces(own);
  ASSERT_EQ(safe.size(), 2u);
  for (const Trace* t : safe) {
    ASSERT_EQ(t->evaluation->status, EvaluationStatus::kPassed) << t->evaluation->log;
    // An RMSNorm of at most a few thousand rows takes well under the 30 ms the patch adds.
    EXPECT_LT(t->evaluation->performance->latency_ms, 30.0);
  }
}

TEST_F(RunPythonProcesses, ASharedWorkerMakesTheNextSolutionSlowerByThePatch) {
  FIB_REQUIRE_PYTHON_TORCH();
  // Only the harness patch: in a shared worker every call of the honest solution sleeps 30 ms.
  add("a_patches_call", "python", R"(import sys, time
harness = sys.modules["_fib_harness"]
_call = harness.call
def call(*args):
    time.sleep(0.03)
    return _call(*args)
harness.call = call
def run(x, w, y):
    pass
)");
  add("c_honest", "python", kHonestRms);
  test_hooks::share_solution_workers(true);
  const RunResult shared = run({"a_patches_call", "c_honest"});
  for (const Trace* t : victim_traces(shared)) {
    ASSERT_EQ(t->evaluation->status, EvaluationStatus::kPassed) << t->evaluation->log;
    EXPECT_GE(t->evaluation->performance->latency_ms, 30.0);
  }
  test_hooks::share_solution_workers(false);
  const RunResult own = run({"a_patches_call", "c_honest"});
  ASSERT_EQ(victim_traces(own).size(), 2u);
  for (const Trace* t : victim_traces(own)) {
    ASSERT_EQ(t->evaluation->status, EvaluationStatus::kPassed) << t->evaluation->log;
    EXPECT_LT(t->evaluation->performance->latency_ms, 30.0);
  }
}

TEST_F(RunPython, ATensorSubclassLyingAboutItsDtypeIsRejected) {
  FIB_REQUIRE_PYTHON_TORCH();
  // Float32 data that says it is bfloat16: copied with a silent conversion, it would pass.
  const char* liar = R"(import torch
class Liar(torch.Tensor):
    @property
    def dtype(self):
        return torch.bfloat16
@torch.no_grad()
def run(x, w):
    f = x.to(torch.float32)
    y = f * torch.rsqrt(f.pow(2).mean(dim=-1, keepdim=True) + 1e-5) * w.to(torch.float32)
    return y.as_subclass(Liar)
)";
  add("subclass_liar", "python", liar, /*dps=*/false);
  // The same lie told by patching torch.Tensor itself: fib reads the storage's own dtype.
  add("patched_dtype", "python", R"(import torch
torch.Tensor.dtype = property(lambda self: torch.bfloat16)
@torch.no_grad()
def run(x, w):
    f = x.to(torch.float32)
    return f * torch.rsqrt(f.pow(2).mean(dim=-1, keepdim=True) + 1e-5) * w.to(torch.float32)
)",
      /*dps=*/false);
  const RunResult r = run({"subclass_liar", "patched_dtype"});
  const auto s = statuses(r);
  EXPECT_EQ(s.at("subclass_liar"), twice("RUNTIME_ERROR")) << log_of(r, "subclass_liar");
  EXPECT_NE(log_of(r, "subclass_liar")
                .find("result #1 is a Liar, a subclass of torch.Tensor; fib takes "
                      "exactly torch.Tensor"),
            std::string::npos)
      << log_of(r, "subclass_liar");
  EXPECT_EQ(s.at("patched_dtype"), twice("INCORRECT_DTYPE")) << log_of(r, "patched_dtype");
}

TEST_F(RunPython, StartingTheRuntimeIsNotTimedOutAsTheSolutionsCalls) {
  FIB_REQUIRE_PYTHON_TORCH();
  // Starting the interpreter, importing torch and this module take longer than the timeout,
  // which is for the solution's calls; a call that takes longer is still timed out.
  add("slow_import", "python",
      "import time\ntime.sleep(4)\ndef run(x, w, y):\n    y.copy_(x * 0)\n");
  add("slow_call", "python", "import time\ndef run(x, w, y):\n    time.sleep(30)\n");
  const RunResult r = run({"slow_import", "slow_call"}, {}, /*timeout_seconds=*/3);
  const auto s = statuses(r);
  EXPECT_EQ(s.at("slow_import"), twice("INCORRECT_NUMERICAL")) << log_of(r, "slow_import");
  EXPECT_EQ(s.at("slow_call"), std::vector<std::string>{"TIMEOUT"}) << log_of(r, "slow_call");
}

TEST_F(RunPython, WithoutAPythonRuntimeASolutionSaysWhyAndIsNoCompileError) {
  add("python_ok", "python", "def run(x, w, y):\n    y.copy_(x)\n");
  const RunResult r = run({"python_ok"}, "/nonexistent/python3");
  const auto s = statuses(r);
  EXPECT_EQ(s.at("python_ok"), twice("RUNTIME_ERROR"));
  EXPECT_NE(log_of(r, "python_ok")
                .find("unsupported here: language 'python' needs a python3 with PyTorch "
                      "(--python, $FIB_PYTHON): python '/nonexistent/python3' was not found"),
            std::string::npos)
      << log_of(r, "python_ok");
}

TEST_F(RunPython, TritonWithoutTritonSaysSo) {
  FIB_REQUIRE_PYTHON_TORCH();
  std::string why;
  if (!find_python("", PythonUse::kRuntime, &why)->triton.empty()) {
    GTEST_SKIP() << "triton imports here (tests/bench/gpu_python_run_test.cpp runs it)";
  }
  add("triton_on_cpu", "triton", "import triton\ndef run(x, w, y):\n    pass\n");
  const RunResult r = run({"triton_on_cpu"});
  EXPECT_EQ(statuses(r).at("triton_on_cpu"), twice("RUNTIME_ERROR"));
  EXPECT_NE(log_of(r, "triton_on_cpu")
                .find("unsupported here: language 'triton' needs the triton package, which "
                      "python "),
            std::string::npos)
      << log_of(r, "triton_on_cpu");
}

TEST_F(RunPython, ATorchExtensionWritingPastItsOutputIsCaught) {
  FIB_REQUIRE_PYTHON_TORCH();
  // A correct RMSNorm through libtorch, then two bytes past the output's end.
  Solution s;
  s.name = "extension_past_end";
  s.definition = "rmsnorm_h2048";
  s.author = "python-tests";
  s.spec.language = "cpp";
  s.spec.binding = "torch";
  s.spec.target_hardware = {"cpu"};
  s.spec.entry_point = "rms.cpp::run";
  s.sources.push_back(SourceFile{"rms.cpp",
                                 R"(
#include <torch/extension.h>
#include <cstring>
void run(torch::Tensor x, torch::Tensor w, torch::Tensor y) {
  auto f = x.to(torch::kFloat32);
  y.copy_(f * torch::rsqrt(f.pow(2).mean(-1, true) + 1e-5) * w.to(torch::kFloat32));
  std::memset(static_cast<char*>(y.data_ptr()) + y.nbytes(), 0x7F, 2);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
)",
                                 {}});
  write_solution(tmp_.path() / "dataset", s, "rmsnorm");
  const RunResult r = run({"extension_past_end"});
  const std::string log = log_of(r, "extension_past_end");
  if (log.find("torch/extension.h: No such file") != std::string::npos) {
    GTEST_SKIP() << "this torch has no extension headers (Debian: libtorch-dev)";
  }
  EXPECT_EQ(statuses(r).at("extension_past_end"), twice("RUNTIME_ERROR")) << log;
  EXPECT_NE(log.find("wrote past the end of output 'output'"), std::string::npos) << log;
}

TEST(PythonRuntime, AGivenPythonWithoutTorchIsRefusedWithTheReason) {
  std::string why;
  EXPECT_FALSE(find_python("/bin/true", PythonUse::kRuntime, &why));
  EXPECT_NE(why.find("/bin/true did not describe itself"), std::string::npos) << why;
  const PythonRuntime p{"/usr/bin/python3",
                        "3.11.2",
                        "/usr/lib/libpython3.11.so.1.0",
                        "/usr",
                        {"/a", "/b"},
                        "1.13.0",
                        "",
                        "",
                        "ModuleNotFoundError",
                        ""};
  const PythonRuntime q = python_runtime_from_json(to_json(p));
  EXPECT_EQ(q.library, p.library);
  EXPECT_EQ(q.path, p.path);
  EXPECT_EQ(q.triton_error, "ModuleNotFoundError");
  EXPECT_EQ(q.describe(), "python 3.11.2 (/usr/bin/python3), torch 1.13.0");
}

}  // namespace
}  // namespace fib::bench
