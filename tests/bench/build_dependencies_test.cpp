// A solution's `dependencies` as upstream names them (cublas, cudnn, cutlass, optionally pinned
// to a version) become include and link flags: each library is found beside the CUDA toolkit,
// in its own variable's folder or the system's, its libraries are linked, and one that is not on
// the machine (or not at the version pinned) makes the solution unsupported with a message naming
// the dependency. These need the CUDA toolkit but no GPU; without it they skip, saying so.
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

#include "bench/builder/dependencies.h"
#include "fib/bench/builder/build.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

Solution make_solution(const std::string& language, const std::string& path, std::string content,
                       std::vector<std::string> dependencies) {
  Solution s;
  s.name = "with_dependencies";
  s.definition = "add_one";
  s.author = "alice";
  s.spec.language = language;
  s.spec.binding = "fib";
  s.spec.target_hardware = {"NVIDIA_H100"};
  s.spec.entry_point = path + "::run";
  s.spec.dependencies = std::move(dependencies);
  s.sources.push_back(SourceFile{path, std::move(content), {}});
  return s;
}

BuildOptions options_in(const TempDir& tmp) {
  BuildOptions o;
  o.cache_dir = tmp.path() / "cache";
  o.abi_include_dir = fs::path(FIB_SOURCE_DIR) / "include";
  o.timeout = std::chrono::seconds(300);
  o.cuda_architectures = {"90a"};
  return o;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The NEEDED entries of a shared object's dynamic section.
std::set<std::string> needed_libraries(const fs::path& so) {
  std::set<std::string> out;
  const std::string cmd = "readelf -d '" + so.string() + "' 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  char line[4096];
  while (p && std::fgets(line, sizeof line, p.get()) != nullptr) {
    const std::string l(line);
    const auto open = l.find('['), close = l.rfind(']');
    if (l.find("(NEEDED)") != std::string::npos && open != std::string::npos && close > open) {
      out.insert(l.substr(open + 1, close - open - 1));
    }
  }
  return out;
}

bool needs(const std::set<std::string>& needed, const std::string& prefix) {
  return std::any_of(needed.begin(), needed.end(),
                     [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
}

// Why fib finds no CUDA toolkit (empty when it finds one).
std::string toolkit_missing() {
  TempDir tmp;
  std::string unsupported, error;
  const auto tc = select_toolchain(make_solution("cpp", "main.cpp", "", {}), options_in(tmp),
                                   &unsupported, &error);
  return tc ? std::string() : error;
}

#define REQUIRE_TOOLKIT()                                                              \
  do {                                                                                 \
    if (const std::string why = toolkit_missing(); !why.empty()) {                     \
      GTEST_SKIP() << "no CUDA toolkit: " << why << " (dependency builds not tested)"; \
    }                                                                                  \
  } while (false)

// An environment variable set (or unset, for nullptr) for one scope, restored after it.
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

// No CUTLASS variable set: the search sees only the machine's own folders.
struct NoCutlassVariables {
  ScopedEnv fib{"FIB_CUTLASS_DIR", nullptr}, home{"CUTLASS_HOME", nullptr},
      dir{"CUTLASS_DIR", nullptr};
};

TEST(BuildDependencies, NamesAsUpstreamWritesThem) {
  for (const char* name : {"cublas", "CUBLAS", "cudnn", "cutlass", "CUTLASS_3_7", "cutlass-3.5.1",
                           "cudnn9", "cudnn >= 9.1", "cutlass==3.7"}) {
    EXPECT_TRUE(detail::names_cuda_library(name)) << name;
  }
  for (const char* name :
       {"torch", "triton >= 2.3", "cublaslt", "cutlass_x", "cudnn>=", "", "nccl"}) {
    EXPECT_FALSE(detail::names_cuda_library(name)) << name;
  }
}

// A solution calling cuBLAS and cuBLASLt links both when it names cublas (upstream links the
// two for it); without the dependency cuBLASLt stays unresolved and the link fails.
TEST(BuildDependencies, CublasLinksCublasAndCublasLt) {
  REQUIRE_TOOLKIT();
  TempDir tmp;
  const char* source = R"(#include <cublasLt.h>
#include <cublas_v2.h>
#include <fib/solution.h>

static void versions(fib::TensorView y) {
  int v = 0;
  if (cublasGetVersion(nullptr, &v) != CUBLAS_STATUS_SUCCESS) throw fib::Error("cublas");
  if (cublasLtGetVersion() == 0) throw fib::Error("cublasLt");
  (void)y;
}
FIB_EXPORT_SOLUTION(run, versions);
)";
  const BuildResult r =
      build_solution(make_solution("cpp", "main.cpp", source, {"cublas"}), options_in(tmp));
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(has(r.link_flags, "-lcublasLt")) << r.log;
  const auto needed = needed_libraries(r.shared_object);
  EXPECT_TRUE(needs(needed, "libcublas.so.")) << ::testing::PrintToString(needed);
  EXPECT_TRUE(needs(needed, "libcublasLt.so.")) << ::testing::PrintToString(needed);
  EXPECT_TRUE(contains(r.toolchain + r.log, "cublas")) << r.toolchain;

  const BuildResult without =
      build_solution(make_solution("cpp", "main.cpp", source, {}), options_in(tmp));
  EXPECT_EQ(without.status, BuildStatus::kFailed) << without.log;
  EXPECT_TRUE(contains(without.log, "cublasLtGetVersion")) << without.log;
  EXPECT_NE(without.key, r.key);
}

// The driver API links as upstream links it for CUDA solutions (-lcuda), through the toolkit's
// stub, and becomes a dependency only of a solution that calls it.
TEST(BuildDependencies, DriverApiLinksWhereCalled) {
  REQUIRE_TOOLKIT();
  TempDir tmp;
  const BuildResult r = build_solution(make_solution("cpp", "main.cpp", R"(#include <cuda.h>
#include <fib/solution.h>

static void driver_version(fib::TensorView y) {
  int v = 0;
  if (cuDriverGetVersion(&v) != CUDA_SUCCESS) throw fib::Error("cuDriverGetVersion");
  (void)y;
}
FIB_EXPORT_SOLUTION(run, driver_version);
)",
                                                     {}),
                                       options_in(tmp));
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(has(r.link_flags, "-lcuda")) << r.log;
  EXPECT_TRUE(needs(needed_libraries(r.shared_object), "libcuda.so.1"));
  const BuildResult plain = build_solution(
      make_solution("cpp", "main.cpp",
                    "#include <fib/solution.h>\nstatic void nothing(fib::TensorView) {}\n"
                    "FIB_EXPORT_SOLUTION(run, nothing);\n",
                    {}),
      options_in(tmp));
  ASSERT_EQ(plain.status, BuildStatus::kBuilt) << plain.message << "\n" << plain.log;
  EXPECT_FALSE(needs(needed_libraries(plain.shared_object), "libcuda"));
}

// cuDNN, wherever this machine has it (beside the toolkit, or Debian's and Ubuntu's folders).
TEST(BuildDependencies, CudnnIsFoundAndLinked) {
  REQUIRE_TOOLKIT();
  TempDir tmp;
  const char* source = R"(#include <cudnn.h>
#include <fib/solution.h>

static void version(fib::TensorView y) {
  if (cudnnGetVersion() == 0) throw fib::Error("cudnn");
  (void)y;
}
FIB_EXPORT_SOLUTION(run, version);
)";
  std::string unsupported, error;
  const auto tc = select_toolchain(make_solution("cpp", "main.cpp", source, {"cudnn"}),
                                   options_in(tmp), &unsupported, &error);
  if (!tc && contains(unsupported, "found in none of")) {
    GTEST_SKIP() << "this machine has no cuDNN: " << unsupported;
  }
  ASSERT_TRUE(tc) << unsupported << error;
  EXPECT_TRUE(contains(tc->target, "cudnn ")) << tc->target;
  const BuildResult r =
      build_solution(make_solution("cpp", "main.cpp", source, {"cudnn"}), options_in(tmp));
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(needs(needed_libraries(r.shared_object), "libcudnn.so."));
  const BuildResult without =
      build_solution(make_solution("cpp", "main.cpp", source, {}), options_in(tmp));
  EXPECT_EQ(without.status, BuildStatus::kFailed) << without.log;

  // Pinned: the found major version passes; another is unsupported, naming both.
  const std::string found_major = tc->target.substr(tc->target.find("cudnn ") + 6, 1);
  std::string why;
  EXPECT_TRUE(select_toolchain(make_solution("cpp", "main.cpp", source, {"cudnn_" + found_major}),
                               options_in(tmp), &why, &error))
      << why;
  const BuildResult pinned =
      build_solution(make_solution("cpp", "main.cpp", source, {"CUDNN_1_2"}), options_in(tmp));
  EXPECT_EQ(pinned.status, BuildStatus::kUnsupported);
  EXPECT_TRUE(contains(pinned.message, "dependency 'CUDNN_1_2' asks for cuDNN 1.2; the one found"))
      << pinned.message;
}

// With no CUTLASS on the machine, a solution naming it is unsupported (nothing is compiled) and
// the message names the dependency and how to point fib at a CUTLASS.
TEST(BuildDependencies, MissingCutlassIsNamed) {
  REQUIRE_TOOLKIT();
  NoCutlassVariables no_variables;
  TempDir tmp;
  const BuildResult r = build_solution(
      make_solution("cpp", "main.cpp", "#include <cutlass/cutlass.h>\n", {"cutlass"}),
      options_in(tmp));
  if (r.status == BuildStatus::kBuilt) GTEST_SKIP() << "this machine has CUTLASS: " << r.toolchain;
  EXPECT_EQ(r.status, BuildStatus::kUnsupported) << r.log;
  EXPECT_TRUE(contains(r.message,
                       "unsupported: dependency 'cutlass' needs CUTLASS "
                       "(cutlass/cutlass.h), found in none of"))
      << r.message;
  EXPECT_TRUE(contains(r.message,
                       "set FIB_CUTLASS_DIR to the folder holding "
                       "include/cutlass/cutlass.h"))
      << r.message;
}

// CUTLASS from $FIB_CUTLASS_DIR (a header-only library: its include folder and tools/util's),
// pinned as upstream's docs pin it ("CUTLASS_3_7"); nvcc gets the folders too. The folder is a
// test fixture with CUTLASS's layout and version header, not CUTLASS.
TEST(BuildDependencies, CutlassFromItsVariableWithVersionPins) {
  REQUIRE_TOOLKIT();
  NoCutlassVariables no_variables;
  TempDir tmp;
  tmp.write("cutlass/include/cutlass/version.h",
            "#pragma once\n#define CUTLASS_MAJOR 3\n#define CUTLASS_MINOR 7\n"
            "#define CUTLASS_PATCH 1\n");
  tmp.write("cutlass/include/cutlass/cutlass.h",
            "#pragma once\n#include \"cutlass/version.h\"\n"
            "namespace cutlass { constexpr int fixture_tile = 128; }\n");
  tmp.write("cutlass/tools/util/include/cutlass/util/fixture_util.h",
            "#pragma once\nnamespace cutlass { constexpr int fixture_util = 1; }\n");
  const std::string root = (tmp.path() / "cutlass").string();
  ScopedEnv cutlass_dir("FIB_CUTLASS_DIR", root.c_str());
  const char* source = R"(#include <cutlass/cutlass.h>
#include <cutlass/util/fixture_util.h>
#include <fib/solution.h>
static_assert(CUTLASS_MAJOR == 3 && cutlass::fixture_tile == 128 && cutlass::fixture_util == 1);

__global__ void fill(float* y) { y[threadIdx.x] = cutlass::fixture_tile; }

static void run_fill(fib::TensorView y) { fill<<<1, 1, 0, fib::stream()>>>(y.data_ptr<float>()); }
FIB_EXPORT_SOLUTION(run, run_fill);
)";
  const BuildResult r =
      build_solution(make_solution("cuda", "kernel.cu", source, {"CUTLASS_3_7"}), options_in(tmp));
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(has(r.flags, "-I" + root + "/include")) << r.log;
  EXPECT_TRUE(has(r.flags, "-I" + root + "/tools/util/include")) << r.log;
  EXPECT_TRUE(contains(r.toolchain + r.log, "cutlass")) << r.log;

  std::string why, error;
  const auto at_least = select_toolchain(make_solution("cpp", "main.cpp", source, {"cutlass>=3.5"}),
                                         options_in(tmp), &why, &error);
  ASSERT_TRUE(at_least) << why << error;
  EXPECT_TRUE(contains(at_least->target, "cutlass 3.7.1 (" + root + "/include)"))
      << at_least->target;
  for (const char* pin : {"CUTLASS_3_8", "cutlass>=4", "cutlass_2"}) {
    why.clear();
    EXPECT_FALSE(select_toolchain(make_solution("cpp", "main.cpp", source, {pin}), options_in(tmp),
                                  &why, &error))
        << pin;
    EXPECT_TRUE(contains(why, std::string("dependency '") + pin + "' asks for CUTLASS ")) << why;
    EXPECT_TRUE(contains(why, "is 3.7.1")) << why;
  }
}

// The cuBLAS solution that tools/upstream/upstream-side-by-side.sh runs beside upstream's example
// (tvm-ffi binding, dependencies ["cublas"]) builds as that script packs it.
TEST(BuildDependencies, SideBySideCublasSolutionBuildsWithTvmFfi) {
#ifndef FIB_HAVE_TVM_FFI
  GTEST_SKIP() << "fib was built without tvm-ffi (scripts/install-deps.sh installs it)";
#else
  REQUIRE_TOOLKIT();
  TempDir tmp;
  Solution s = make_solution(
      "cuda", "gemm_cublas.cu",
      TempDir::read_file(fs::path(FIB_SOURCE_DIR) / "tools/upstream/side_by_side/gemm_cublas.cu"),
      {"cublas"});
  s.spec.binding = "tvm-ffi";
  s.spec.entry_point = "gemm_cublas.cu::gemm";
  const BuildResult r = build_solution(s, options_in(tmp));
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  const auto needed = needed_libraries(r.shared_object);
  EXPECT_TRUE(needs(needed, "libcublas.so.")) << ::testing::PrintToString(needed);
  EXPECT_TRUE(needs(needed, "libtvm_ffi")) << ::testing::PrintToString(needed);
#endif
}

}  // namespace
}  // namespace fib::bench
