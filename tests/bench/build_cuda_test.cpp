// build_solution for GPU solutions: a .cu solution compiles with nvcc for the architectures it is
// given and links the shared CUDA runtime; the key follows the architectures; nvcc's diagnostics
// reach the log; a C++ solution for a GPU target links the runtime without nvcc compiling
// anything; what is missing (architectures, nvcc) and what is unsupported is said exactly. These
// need nvcc but no GPU (nothing is run on a device); without nvcc they skip, saying so.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fib/bench/builder/build.h"
#include "fib/bench/builder/bwrap.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// A destination-passing CUDA solution: y = x + 1 over float32, launched on fib::stream().
constexpr const char* kAddOneCu = R"(#include <fib/solution.h>

namespace {

__global__ void add_one_kernel(const float* x, float* y, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}

void add_one(fib::TensorView x, fib::TensorView y) {
  const std::int64_t n = x.numel();
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  add_one_kernel<<<blocks, 256, 0, fib::stream()>>>(x.data_ptr<const float>(),
                                                     y.data_ptr<float>(), n);
}

}  // namespace

FIB_EXPORT_SOLUTION(run, add_one);
)";

// The same with a type error on line 5 (a double initializing a pointer).
constexpr const char* kTypeErrorCu = R"(#include <fib/solution.h>

__global__ void broken_kernel(float* y) {
  y[threadIdx.x] = 1.0f;
  float* wrong = 1.0;
  (void)wrong;
}

static void broken(fib::TensorView y) { broken_kernel<<<1, 32, 0, fib::stream()>>>(y.data_ptr<float>()); }
FIB_EXPORT_SOLUTION(run, broken);
)";

// A C++ solution for a GPU: calls the CUDA runtime (no device code of its own).
constexpr const char* kMemsetCpp = R"(#include <cuda_runtime.h>
#include <fib/solution.h>

static void zero(fib::TensorView x, fib::TensorView y) {
  (void)x;
  const cudaError_t e = cudaMemsetAsync(y.data(), 0, y.numel() * sizeof(float), fib::stream());
  if (e != cudaSuccess) throw fib::Error(cudaGetErrorString(e));
}
FIB_EXPORT_SOLUTION(run, zero);
)";

// A C++ solution calling cuBLAS (so libcublas becomes a dependency of its shared object).
constexpr const char* kCublasCpp = R"(#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fib/solution.h>

static void version(fib::TensorView y) {
  int v = 0;
  if (cublasGetVersion(nullptr, &v) != CUBLAS_STATUS_SUCCESS) throw fib::Error("cublas");
  (void)y;
}
FIB_EXPORT_SOLUTION(run, version);
)";

Solution make_solution(const std::string& language, const std::string& path, std::string content,
                       std::vector<std::string> hardware = {"NVIDIA_H100"}) {
  Solution s;
  s.name = "gpu_solution";
  s.definition = "add_one";
  s.author = "alice";
  s.spec.language = language;
  s.spec.binding = "fib";
  s.spec.target_hardware = std::move(hardware);
  s.spec.entry_point = path + "::run";
  s.sources.push_back(SourceFile{path, std::move(content), {}});
  return s;
}

Solution cu_solution(std::string content = kAddOneCu) {
  return make_solution("cuda", "kernel.cu", std::move(content));
}

BuildOptions options_in(const TempDir& tmp, std::vector<std::string> archs = {"90a"}) {
  BuildOptions o;
  o.cache_dir = tmp.path() / "cache";
  o.abi_include_dir = fs::path(FIB_SOURCE_DIR) / "include";
  o.timeout = std::chrono::seconds(300);
  o.cuda_architectures = std::move(archs);
  return o;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Why fib's own search finds no nvcc (empty when it finds one).
std::string nvcc_missing() {
  TempDir tmp;
  std::string unsupported, error;
  const auto tc = select_toolchain(cu_solution(), options_in(tmp), &unsupported, &error);
  return tc ? std::string() : error;
}

#define REQUIRE_NVCC()                                                          \
  do {                                                                          \
    if (const std::string why = nvcc_missing(); !why.empty()) {                 \
      GTEST_SKIP() << "nvcc not found: " << why << " (CUDA builds not tested)"; \
    }                                                                           \
  } while (false)

// An environment variable set for one scope, restored after it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;  // restores once
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::vector<std::string> lines_of(const std::string& cmd) {
  std::vector<std::string> out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  if (!p) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, p.get()) != nullptr) {
    std::string l(line);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
    out.push_back(l);
  }
  return out;
}

// The defined dynamic symbols of a shared object, read with nm (never loaded here).
std::set<std::string> exported_symbols(const fs::path& so) {
  std::set<std::string> out;
  for (const auto& l : lines_of("nm -D --defined-only '" + so.string() + "' 2>/dev/null")) {
    const auto space = l.rfind(' ');
    if (space != std::string::npos) out.insert(l.substr(space + 1));
  }
  return out;
}

// NEEDED and RUNPATH entries of a shared object's dynamic section, as "NEEDED libx.so.1".
std::set<std::string> dynamic_entries(const fs::path& so) {
  std::set<std::string> out;
  for (const auto& l : lines_of("readelf -d '" + so.string() + "' 2>/dev/null")) {
    for (const char* tag : {"(NEEDED)", "(RUNPATH)", "(RPATH)"}) {
      const auto at = l.find(tag);
      const auto open = l.find('['), close = l.rfind(']');
      if (at != std::string::npos && open != std::string::npos && close > open) {
        std::string name(tag + 1);
        name.pop_back();
        out.insert(name + " " + l.substr(open + 1, close - open - 1));
      }
    }
  }
  return out;
}

bool needs_library(const std::set<std::string>& entries, const std::string& prefix) {
  return std::any_of(entries.begin(), entries.end(),
                     [&](const std::string& e) { return e.rfind("NEEDED " + prefix, 0) == 0; });
}

// The folder holding libcudart.so, from the link flags ("-L<dir>").
std::string cuda_lib_dir(const std::vector<std::string>& link_flags) {
  for (const auto& f : link_flags) {
    if (f.rfind("-L", 0) == 0) return f.substr(2);
  }
  return {};
}

std::string key_of(const Solution& s, const BuildOptions& o) {
  std::string unsupported, error;
  const auto tc = select_toolchain(s, o, &unsupported, &error);
  EXPECT_TRUE(tc.has_value()) << unsupported << error;
  return tc ? build_key(s, *tc, "abi") : std::string();
}

// Upstream's target_hardware lists every hardware a solution is compatible with.
TEST(BuildCudaTarget, SolutionRunsOnTheCpuWhenItsHardwareListAllowsIt) {
  EXPECT_TRUE(solution_runs_on_cpu(make_solution("cpp", "k.cpp", "", {"cpu"})));
  EXPECT_TRUE(solution_runs_on_cpu(make_solution("cpp", "k.cpp", "", {})));
  EXPECT_TRUE(solution_runs_on_cpu(make_solution("python", "k.py", "", {"cpu", "cuda"})));
  EXPECT_TRUE(solution_runs_on_cpu(make_solution("cpp", "k.cpp", "", {"NVIDIA_H100", "CPU"})));
  EXPECT_FALSE(solution_runs_on_cpu(make_solution("cpp", "k.cpp", "", {"NVIDIA_H100"})));
  EXPECT_FALSE(solution_runs_on_cpu(make_solution("cuda", "k.cu", "", {"cpu"})));
}

TEST(BuildCudaTarget, SolutionTargetsGpuByLanguageOrHardware) {
  EXPECT_FALSE(solution_targets_gpu(make_solution("cpp", "k.cpp", "", {"cpu"})));
  EXPECT_FALSE(solution_targets_gpu(make_solution("cpp", "k.cpp", "", {"CPU"})));
  EXPECT_FALSE(solution_targets_gpu(make_solution("cpp", "k.cpp", "", {"Cpu", "cpu"})));
  EXPECT_FALSE(solution_targets_gpu(make_solution("cpp", "k.cpp", "", {})));
  EXPECT_TRUE(solution_targets_gpu(make_solution("cpp", "k.cpp", "", {"NVIDIA_H100"})));
  EXPECT_TRUE(solution_targets_gpu(make_solution("cpp", "k.cpp", "", {"cpu", "B200"})));
  EXPECT_TRUE(solution_targets_gpu(make_solution("cuda", "k.cu", "", {"NVIDIA_H100"})));
  // Language cuda is a GPU solution whatever its hardware list says.
  EXPECT_TRUE(solution_targets_gpu(make_solution("cuda", "k.cu", "", {"cpu"})));
  EXPECT_TRUE(solution_targets_gpu(make_solution("cuda", "k.cu", "", {})));
  EXPECT_TRUE(solution_targets_gpu(make_solution("triton", "k.py", "", {"NVIDIA_B200"})));
  EXPECT_FALSE(solution_targets_gpu(make_solution("python", "k.py", "", {"cpu"})));
}

TEST(BuildCudaTarget, ArchitectureForComputeCapability) {
  EXPECT_EQ(cuda_architecture_for(9, 0), "90a");
  EXPECT_EQ(cuda_architecture_for(10, 0), "100a");
  EXPECT_EQ(cuda_architecture_for(12, 0), "120a");
  EXPECT_EQ(cuda_architecture_for(8, 0), "80");
  EXPECT_EQ(cuda_architecture_for(8, 6), "86");
  EXPECT_EQ(cuda_architecture_for(8, 9), "89");
  EXPECT_EQ(cuda_architecture_for(7, 5), "75");
  EXPECT_EQ(cuda_architecture_for(10, 3), "103");
  EXPECT_EQ(cuda_architecture_for(12, 1), "121");
}

TEST(BuildCudaUnsupported, OtherBindingsAndLanguagesAreSkippedBeforeLookingForNvcc) {
  TempDir tmp;
  BuildOptions o = options_in(tmp, {});
  o.nvcc = "/nonexistent/nvcc";  // never looked for: support is decided first
  o.cxx = "/nonexistent/c++";
  o.python = "/nonexistent/python3";  // binding torch and triton run in the Python runtime
  Solution torch = cu_solution();
  torch.spec.binding = "torch";
  const BuildResult t = build_solution(torch, o);
  EXPECT_EQ(t.status, BuildStatus::kUnsupported);
  EXPECT_EQ(t.message,
            "unsupported here: binding 'torch' needs a python3 with PyTorch (--python, "
            "$FIB_PYTHON): python '/nonexistent/python3' was not found");
  Solution triton = make_solution("triton", "kernel.py", "");
  const BuildResult r = build_solution(triton, o);
  EXPECT_EQ(r.status, BuildStatus::kUnsupported);
  EXPECT_EQ(r.message,
            "unsupported here: language 'triton' needs a python3 with PyTorch (--python, "
            "$FIB_PYTHON): python '/nonexistent/python3' was not found");
  EXPECT_FALSE(fs::exists(o.cache_dir));
}

TEST(BuildCudaFailure, MissingArchitecturesSayWhatIsMissingAndHowToGiveThem) {
  TempDir tmp;
  ScopedEnv no_arch("FIB_CUDA_ARCH", nullptr);
  BuildOptions o = options_in(tmp, {});
  o.nvcc = "/nonexistent/nvcc";  // the architectures are checked first
  const BuildResult r = build_solution(cu_solution(), o);
  EXPECT_EQ(r.status, BuildStatus::kFailed);  // not unsupported: this machine lacks a setting
  EXPECT_EQ(r.message,
            "no CUDA architecture to build for: BuildOptions::cuda_architectures is empty and "
            "$FIB_CUDA_ARCH is not set (fib run takes it from the device of --device cuda:N; "
            "elsewhere set FIB_CUDA_ARCH, e.g. FIB_CUDA_ARCH=90a for H100/H200 or 100a for "
            "B200)");
  EXPECT_TRUE(r.key.empty());
  EXPECT_FALSE(fs::exists(o.cache_dir));

  BuildOptions bad = o;
  bad.cuda_architectures = {"90a", "9.0"};
  EXPECT_EQ(build_solution(cu_solution(), bad).message,
            "BuildOptions::cuda_architectures: '9.0' is not a CUDA architecture (expected nvcc's "
            "name without sm_, such as 80, 90a or 100a)");
  {
    ScopedEnv env("FIB_CUDA_ARCH", "hopper");
    EXPECT_EQ(build_solution(cu_solution(), o).message,
              "$FIB_CUDA_ARCH: 'hopper' is not a CUDA architecture (expected nvcc's name without "
              "sm_, such as 80, 90a or 100a)");
  }
  // A C++ solution for a GPU has no device code: it needs no architecture (here it fails on
  // the missing nvcc, whose toolkit it links against).
  const BuildResult cpp = build_solution(make_solution("cpp", "kernel.cpp", kMemsetCpp), o);
  EXPECT_EQ(cpp.status, BuildStatus::kFailed);
  EXPECT_TRUE(contains(cpp.message,
                       "nvcc (from BuildOptions::nvcc): compiler "
                       "'/nonexistent/nvcc' is not an executable file"))
      << cpp.message;
}

TEST(BuildCudaFailure, MissingNvccIsAnErrorSayingWhereFibLookedAndHowToPointIt) {
  TempDir tmp;
  BuildOptions o = options_in(tmp);
  o.nvcc = "/nonexistent/nvcc";
  const BuildResult named = build_solution(cu_solution(), o);
  EXPECT_EQ(named.status, BuildStatus::kFailed);
  EXPECT_EQ(named.message,
            "nvcc (from BuildOptions::nvcc): compiler '/nonexistent/nvcc' is not an executable "
            "file (point fib at nvcc with $FIB_NVCC or $CUDACXX, or put it on PATH)");
  o.nvcc.clear();
  {
    ScopedEnv env("FIB_NVCC", "/nonexistent/bin/nvcc");
    const BuildResult r = build_solution(cu_solution(), o);
    EXPECT_EQ(r.status, BuildStatus::kFailed);
    EXPECT_TRUE(contains(r.message, "nvcc (from $FIB_NVCC): compiler '/nonexistent/bin/nvcc'"))
        << r.message;
  }
  {
    ScopedEnv fib_nvcc("FIB_NVCC", nullptr);
    ScopedEnv env("CUDACXX", "no-such-nvcc");  // a name is searched on PATH
    const BuildResult r = build_solution(cu_solution(), o);
    EXPECT_TRUE(contains(r.message,
                         "nvcc (from $CUDACXX): compiler 'no-such-nvcc' is not found "
                         "on PATH"))
        << r.message;
  }
}

TEST(BuildCuda, KernelBuildsWithNvccExportsItsEntryAndIsCached) {
  REQUIRE_NVCC();
  TempDir tmp;
  const BuildOptions o = options_in(tmp);
  const Solution s = cu_solution();
  const BuildResult r = build_solution(s, o);
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  ASSERT_TRUE(fs::is_regular_file(r.shared_object));
  const auto symbols = exported_symbols(r.shared_object);
  EXPECT_TRUE(symbols.count("run")) << r.shared_object;
  EXPECT_TRUE(symbols.count("run__fib_signature"));
  EXPECT_TRUE(symbols.count("run__fib_abi_version"));
  EXPECT_TRUE(contains(r.log, "# entry symbol 'run' is exported")) << r.log;

  // nvcc compiles the .cu for the architecture given, with the C++ compiler as its host
  // compiler; the C++ compiler links the shared runtime, and cuBLAS only when used.
  EXPECT_TRUE(contains(r.toolchain, "cuda (cuda: Cuda compilation tools, release ")) << r.toolchain;
  EXPECT_TRUE(contains(r.log, "# target sm_90a (nvcc); host ")) << r.log;
  EXPECT_TRUE(contains(r.log, "-gencode=arch=compute_90a,code=sm_90a")) << r.log;
  EXPECT_TRUE(contains(r.log, "-c kernel.cu -o ../obj/kernel.cu.o")) << r.log;
  EXPECT_TRUE(contains(r.log, "nvcc -ccbin /")) << r.log;
  for (const char* f :
       {"-ccbin", "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a",
        "-Xcompiler=-fPIC,-fvisibility=hidden", "-I../include", "-I.", "-lineinfo"}) {
    EXPECT_TRUE(has(r.flags, f)) << f;  // the flags reported are nvcc's: it compiles the entry
  }
  const std::string lib = cuda_lib_dir(r.link_flags);
  ASSERT_FALSE(lib.empty());
  EXPECT_TRUE(fs::exists(fs::path(lib) / "libcudart.so")) << lib;
  const std::vector<std::string> cuda_link = {"-L" + lib, "-Wl,-rpath," + lib,
                                              "-lcudart", "-Wl,--as-needed",
                                              "-lcublas", "-Wl,--no-as-needed"};
  const auto at =
      std::search(r.link_flags.begin(), r.link_flags.end(), cuda_link.begin(), cuda_link.end());
  EXPECT_NE(at, r.link_flags.end());
  EXPECT_TRUE(has(r.link_flags, "-Wl,--no-undefined"));
  const auto dynamic = dynamic_entries(r.shared_object);
  EXPECT_TRUE(needs_library(dynamic, "libcudart.so.")) << ::testing::PrintToString(dynamic);
  EXPECT_FALSE(needs_library(dynamic, "libcublas"));  // not called: dropped by --as-needed
  EXPECT_TRUE(dynamic.count("RUNPATH " + lib) || dynamic.count("RPATH " + lib))
      << ::testing::PrintToString(dynamic);
  const std::string meta = TempDir::read_file(r.directory / "meta.json");
  EXPECT_TRUE(contains(meta, "\"id\": \"cuda\"")) << meta;
  EXPECT_TRUE(contains(meta, "\"-gencode=arch=compute_90a,code=sm_90a\"")) << meta;

  const BuildResult again = build_solution(s, o);
  EXPECT_EQ(again.status, BuildStatus::kCached);
  EXPECT_EQ(again.key, r.key);
  EXPECT_EQ(again.shared_object, r.shared_object);
  EXPECT_EQ(again.flags, r.flags);
  EXPECT_EQ(again.log, r.log);
  EXPECT_LT(again.seconds, 1.0);
}

// A CUDA solution as upstream writes them (no binding: tvm-ffi; launched on tvm-ffi's
// environment stream) compiles with nvcc against tvm-ffi's headers and links libtvm_ffi.
TEST(BuildCuda, TvmFfiKernelBuildsAgainstTvmFfi) {
#ifndef FIB_HAVE_TVM_FFI
  GTEST_SKIP() << "fib was built without tvm-ffi (scripts/install-deps.sh installs it)";
#else
  REQUIRE_NVCC();
  TempDir tmp;
  Solution s = cu_solution(R"(
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
__global__ void add_one_kernel(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
void add_one(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  auto stream = static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  const int64_t n = x.numel();
  add_one_kernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(x.data_ptr()),
                                                       static_cast<float*>(y.data_ptr()), n);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, add_one);
)");
  s.spec.binding.reset();
  const BuildResult r = build_solution(s, options_in(tmp));
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(exported_symbols(r.shared_object).count("__tvm_ffi_run")) << r.log;
  EXPECT_TRUE(contains(r.log, std::string("-I") + FIB_TVM_FFI_INCLUDE_DIR)) << r.log;
  EXPECT_TRUE(has(r.link_flags, "-ltvm_ffi"));
  EXPECT_TRUE(has(r.link_flags, "-lcudart"));
#endif
}

// The same tvm-ffi CUDA kernel built with nvcc in the build sandbox (what `fib run` does): nvcc,
// its host compiler and tvm-ffi's headers and library are all there, and the key is not the
// unsandboxed build's.
TEST(BuildCuda, ATvmFfiKernelBuildsInTheBuildSandbox) {
#ifndef FIB_HAVE_TVM_FFI
  GTEST_SKIP() << "fib was built without tvm-ffi (scripts/install-deps.sh installs it)";
#else
  REQUIRE_NVCC();
  if (find_bwrap().empty()) GTEST_SKIP() << "bubblewrap is not installed";
  TempDir tmp;
  Solution s = cu_solution(R"(
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
__global__ void add_one_kernel(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
void add_one(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  const int64_t n = x.numel();
  add_one_kernel<<<(n + 255) / 256, 256>>>(static_cast<const float*>(x.data_ptr()),
                                           static_cast<float*>(y.data_ptr()), n);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, add_one);
)");
  s.spec.binding.reset();
  BuildOptions o = options_in(tmp);
  o.sandbox = BuildSandbox{find_bwrap(), {}};
  const BuildResult r = build_solution(s, o);
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(r.sandboxed);
  EXPECT_TRUE(contains(r.log, "compilers run in a bubblewrap sandbox")) << r.log;
  EXPECT_TRUE(exported_symbols(r.shared_object).count("__tvm_ffi_run")) << r.log;
  std::string unsupported, error;
  const auto tc = select_toolchain(s, o, &unsupported, &error);
  ASSERT_TRUE(tc) << error;
  EXPECT_NE(r.key, build_key(s, *tc, TempDir::read_file(o.abi_include_dir / "fib" / "solution.h")));
#endif
}

TEST(BuildCuda, KeyFollowsArchitecturesSourcesAndCompilers) {
  REQUIRE_NVCC();
  TempDir tmp;
  const Solution s = cu_solution();
  const std::string key = key_of(s, options_in(tmp, {"90a"}));
  ASSERT_EQ(key.size(), 32u);
  EXPECT_NE(key_of(s, options_in(tmp, {"80"})), key);
  EXPECT_NE(key_of(s, options_in(tmp, {"90"})), key);  // without Hopper's arch-specific features
  EXPECT_NE(key_of(s, options_in(tmp, {"80", "90a"})), key);
  // Order and repeats do not matter; "sm_" may be written.
  EXPECT_EQ(key_of(s, options_in(tmp, {"90a", "80"})), key_of(s, options_in(tmp, {"80", "90a"})));
  EXPECT_EQ(key_of(s, options_in(tmp, {"sm_90a", "90a"})), key);
  {
    ScopedEnv env("FIB_CUDA_ARCH", "90a");  // the fallback for an empty list
    EXPECT_EQ(key_of(s, options_in(tmp, {})), key);
  }
  {
    ScopedEnv env("FIB_CUDA_ARCH", "80");  // a list given wins over the environment
    EXPECT_EQ(key_of(s, options_in(tmp, {"90a"})), key);
  }
  Solution content = s;
  content.sources[0].content += "\n";
  EXPECT_NE(key_of(content, options_in(tmp)), key);
  BuildOptions flags = options_in(tmp);
  flags.extra_flags = {"-DFAST=1"};
  EXPECT_NE(key_of(s, flags), key);

  // nvcc's identity: the program as resolved and its release line.
  std::string unsupported, error;
  const auto tc = select_toolchain(s, options_in(tmp), &unsupported, &error);
  ASSERT_TRUE(tc) << error;
  EXPECT_EQ(tc->id, "cuda");
  const CompileStep* cu = tc->step_for("kernel.cu");
  ASSERT_NE(cu, nullptr);
  EXPECT_EQ(cu->name, "cuda");
  EXPECT_TRUE(contains(cu->compiler.version, "release ")) << cu->compiler.version;
  EXPECT_EQ(cu->compiler.resolved.filename(), "nvcc");
  const std::string identity = tc->identity();
  EXPECT_TRUE(contains(identity, "compiler.cuda ")) << identity;
  EXPECT_TRUE(contains(identity, cu->compiler.resolved.string() + " | " + cu->compiler.version))
      << identity;
  EXPECT_TRUE(contains(identity, "flag.cuda -gencode=arch=compute_90a,code=sm_90a")) << identity;
  EXPECT_TRUE(contains(identity, "flag.link -lcudart")) << identity;
  // -ccbin names the C++ compiler that is in the key as the linker and the host-file compiler
  // (by the path it was found at; its resolved path and version are in the key too).
  const auto ccbin = std::find(cu->flags.begin(), cu->flags.end(), "-ccbin");
  ASSERT_NE(ccbin, cu->flags.end());
  ASSERT_NE(ccbin + 1, cu->flags.end());
  EXPECT_EQ(*(ccbin + 1), tc->linker.command.front());
  EXPECT_TRUE(contains(identity, "linker " + tc->linker.command.front() + " | " +
                                     tc->linker.resolved.string() + " | "))
      << identity;
  EXPECT_EQ(tc->step_for("host.cpp")->compiler.resolved, tc->linker.resolved);

  // Another nvcc (a wrapper in a toolkit elsewhere) is another key.
  const fs::path real_root = cu->compiler.resolved.parent_path().parent_path();
  const fs::path wrapper = tmp.write(
      "toolkit/bin/nvcc", "#!/bin/sh\nexec '" + cu->compiler.resolved.string() + "' \"$@\"\n");
  fs::permissions(wrapper, fs::perms::owner_all, fs::perm_options::add);
  BuildOptions other_nvcc = options_in(tmp);
  other_nvcc.nvcc = wrapper.string();
  // Its bin/.. is no toolkit yet: said, with where it looked.
  EXPECT_FALSE(select_toolchain(s, other_nvcc, &unsupported, &error).has_value());
  EXPECT_EQ(error, "the CUDA toolkit of nvcc " + fs::canonical(wrapper).string() +
                       " (from BuildOptions::nvcc) is incomplete: no include/cuda_runtime.h "
                       "under " +
                       fs::canonical(wrapper).parent_path().parent_path().string() +
                       " (point fib at the nvcc of a complete toolkit with $FIB_NVCC)");
  fs::create_directory_symlink(real_root / "include", tmp.path() / "toolkit" / "include");
  fs::create_directory_symlink(real_root / "lib64", tmp.path() / "toolkit" / "lib64");
  const std::string other_key = key_of(s, other_nvcc);
  EXPECT_EQ(other_key.size(), 32u);
  EXPECT_NE(other_key, key);
}

TEST(BuildCuda, SeveralArchitecturesAreOneGencodeEach) {
  REQUIRE_NVCC();
  TempDir tmp;
  std::string unsupported, error;
  const auto tc =
      select_toolchain(cu_solution(), options_in(tmp, {"90a", "80", "100a"}), &unsupported, &error);
  ASSERT_TRUE(tc) << error;
  EXPECT_EQ(tc->target.substr(0, tc->target.find(';')), "sm_80, sm_90a, sm_100a (nvcc)");
  std::vector<std::string> gencodes;
  for (const auto& f : tc->step_for("kernel.cu")->flags) {
    if (f.rfind("-gencode=", 0) == 0) gencodes.push_back(f);
  }
  EXPECT_EQ(gencodes, (std::vector<std::string>{"-gencode=arch=compute_80,code=sm_80",
                                                "-gencode=arch=compute_90a,code=sm_90a",
                                                "-gencode=arch=compute_100a,code=sm_100a"}));
  // Host files of a CUDA solution: the C++ compiler with the host flags and the CUDA headers.
  const CompileStep* cpp = tc->step_for("host.cpp");
  ASSERT_NE(cpp, nullptr);
  EXPECT_EQ(cpp->name, "c++");
  EXPECT_TRUE(has(cpp->flags, "-march=native"));
  EXPECT_TRUE(std::any_of(cpp->flags.begin(), cpp->flags.end(), [](const std::string& f) {
    return f.rfind("-I/", 0) == 0 && fs::exists(fs::path(f.substr(2)) / "cuda_runtime.h");
  })) << ::testing::PrintToString(cpp->flags);

  // nvcc's -ccbin takes one program, so a launcher command cannot be its host compiler.
  BuildOptions launcher = options_in(tmp);
  launcher.cxx = "env c++";
  EXPECT_FALSE(select_toolchain(cu_solution(), launcher, &unsupported, &error).has_value());
  EXPECT_EQ(error,
            "C++ compiler 'env c++' is a command of several words, but nvcc's host compiler "
            "(-ccbin) is one program (set CXX to the compiler's path for CUDA builds)");
}

TEST(BuildCudaFailure, TypeErrorFailsWithNvccsMessageAndIsCached) {
  REQUIRE_NVCC();
  TempDir tmp;
  const BuildOptions o = options_in(tmp);
  const BuildResult r = build_solution(cu_solution(kTypeErrorCu), o);
  ASSERT_EQ(r.status, BuildStatus::kFailed) << r.log;
  // nvcc's front end says `file(line): error: ...`.
  EXPECT_TRUE(contains(r.message, "compiling kernel.cu failed: kernel.cu(5): error: "))
      << r.message;
  EXPECT_TRUE(contains(r.message, "\"double\"")) << r.message;
  EXPECT_TRUE(contains(r.log, "kernel.cu(5): error: ")) << r.log;
  EXPECT_FALSE(contains(r.log, "-shared"));  // no link after a failed compile
  const BuildResult again = build_solution(cu_solution(kTypeErrorCu), o);
  EXPECT_EQ(again.status, BuildStatus::kFailed);
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.message, r.message);
}

TEST(BuildCuda, CppForAGpuCompilesWithTheHostCompilerAndLinksTheRuntime) {
  REQUIRE_NVCC();
  TempDir tmp;
  ScopedEnv no_arch("FIB_CUDA_ARCH", nullptr);
  const BuildOptions o = options_in(tmp, {});  // no device code: no architecture needed
  const Solution s = make_solution("cpp", "kernel.cpp", kMemsetCpp);
  const BuildResult r = build_solution(s, o);
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(contains(r.toolchain, "host-cpp-cuda (c++: ")) << r.toolchain;
  EXPECT_FALSE(contains(r.toolchain, "cuda:")) << r.toolchain;  // nvcc compiles nothing
  EXPECT_TRUE(contains(r.log, "; CUDA toolkit /")) << r.log;    // the target names the toolkit
  EXPECT_TRUE(has(r.flags, "-march=native"));
  const std::string lib = cuda_lib_dir(r.link_flags);
  ASSERT_FALSE(lib.empty());
  EXPECT_TRUE(has(r.link_flags, "-lcudart"));
  EXPECT_TRUE(exported_symbols(r.shared_object).count("run"));
  const auto dynamic = dynamic_entries(r.shared_object);
  EXPECT_TRUE(needs_library(dynamic, "libcudart.so.")) << ::testing::PrintToString(dynamic);
  EXPECT_FALSE(needs_library(dynamic, "libcublas"));
  // The architectures do not change a C++ solution's key (nothing is compiled for them).
  EXPECT_EQ(key_of(s, options_in(tmp, {"80"})), key_of(s, o));
  // The same solution for the CPU is another toolchain, so another key.
  Solution cpu = s;
  cpu.spec.target_hardware = {"cpu"};
  EXPECT_NE(key_of(cpu, o), r.key);

  // Calling cuBLAS makes it a dependency of the shared object.
  const BuildResult blas = build_solution(make_solution("cpp", "kernel.cpp", kCublasCpp), o);
  ASSERT_EQ(blas.status, BuildStatus::kBuilt) << blas.message << "\n" << blas.log;
  EXPECT_TRUE(needs_library(dynamic_entries(blas.shared_object), "libcublas.so."));
}

TEST(BuildCuda, CudaSolutionWithHostFilesLinksThemTogether) {
  REQUIRE_NVCC();
  TempDir tmp;
  Solution s = make_solution("cuda", "host.cpp", R"(#include <cuda_runtime.h>
#include <fib/solution.h>

#include "launch.cuh"

static void add_one(fib::TensorView x, fib::TensorView y) {
  launch_add_one(x.data_ptr<const float>(), y.data_ptr<float>(), x.numel(), fib::stream());
}
FIB_EXPORT_SOLUTION(run, add_one);
)");
  s.sources.push_back(SourceFile{"launch.cuh",
                                 R"(#pragma once
#include <cuda_runtime.h>
#include <cstdint>
void launch_add_one(const float* x, float* y, std::int64_t n, cudaStream_t stream);
)",
                                 {}});
  s.sources.push_back(SourceFile{"launch.cu",
                                 R"(#include "launch.cuh"

__global__ void add_one_kernel(const float* x, float* y, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}

void launch_add_one(const float* x, float* y, std::int64_t n, cudaStream_t stream) {
  add_one_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(x, y, n);
}
)",
                                 {}});
  const BuildResult r = build_solution(s, options_in(tmp));
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(contains(r.log, "-c host.cpp -o ../obj/host.cpp.o")) << r.log;
  EXPECT_TRUE(contains(r.log, "-c launch.cu -o ../obj/launch.cu.o")) << r.log;
  EXPECT_FALSE(contains(r.log, "-c launch.cuh")) << r.log;
  EXPECT_TRUE(contains(r.log, "-shared -o ../solution.so ../obj/host.cpp.o ../obj/launch.cu.o"))
      << r.log;
  // The entry's file is C++, so the flags reported are the C++ compiler's.
  EXPECT_TRUE(has(r.flags, "-march=native"));
  EXPECT_FALSE(has(r.flags, "-lineinfo"));
  const auto symbols = exported_symbols(r.shared_object);
  EXPECT_TRUE(symbols.count("run"));
  EXPECT_TRUE(std::none_of(symbols.begin(), symbols.end(), [](const std::string& name) {
    return contains(name, "launch_add_one");  // hidden by -fvisibility=hidden
  })) << ::testing::PrintToString(symbols);
}

// The CUDA example of docs/solutions.md (the ```cuda block) builds and reports its signature.
TEST(BuildCuda, SolutionGuideCudaExampleBuilds) {
  REQUIRE_NVCC();
  const std::string guide = TempDir::read_file(fs::path(FIB_SOURCE_DIR) / "docs" / "solutions.md");
  const std::string open = "```cuda\n";
  const std::size_t begin = guide.find(open);
  ASSERT_NE(begin, std::string::npos) << "docs/solutions.md has no ```cuda example";
  const std::size_t end = guide.find("```\n", begin + open.size());
  ASSERT_NE(end, std::string::npos);
  const std::string code = guide.substr(begin + open.size(), end - begin - open.size());
  ASSERT_EQ(code.rfind("// ", 0), 0u) << code;  // "// <file>: ..."
  const std::string file = code.substr(3, code.find(':') - 3);
  EXPECT_EQ(file, "rmsnorm.cu");
  TempDir tmp;
  Solution s = make_solution("cuda", file, code);
  const BuildResult r = build_solution(s, options_in(tmp));
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(exported_symbols(r.shared_object).count("run__fib_signature"));
  // Loading needs only libcudart (no GPU: nothing runs on a device); the guide's own code.
  void* so = ::dlopen(r.shared_object.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << ::dlerror();
  using SignatureFn = const char* (*)();
  auto signature = reinterpret_cast<SignatureFn>(::dlsym(so, "run__fib_signature"));
  ASSERT_NE(signature, nullptr);
  EXPECT_EQ(std::string(signature()), "TTT>");
  ::dlclose(so);
}

}  // namespace
}  // namespace fib::bench
