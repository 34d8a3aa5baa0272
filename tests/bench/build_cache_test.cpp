// build_solution: a C++ solution compiles into a cached shared object that exports its entry;
// the cache key follows the content (not the name); failures are cached with the compiler's
// diagnostics; unsafe paths and unsupported languages are refused; a hanging compiler is
// killed; concurrent builders of one key compile once. Compiler invocations are counted with a
// wrapper script standing in for $CXX.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fib/bench/builder/build.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// A destination-passing solution: y = x + 1 over float32.
constexpr const char* kGoodKernel = R"(#include <fib/solution.h>

static void add_one(fib::TensorView x, fib::TensorView y) {
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  for (std::int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] + 1.0f;
}
FIB_EXPORT_SOLUTION(run, add_one);
)";

Solution make_solution(std::string content, std::string entry = "kernel.cpp::run") {
  Solution s;
  s.name = "add_one_v1";
  s.definition = "add_one";
  s.author = "alice";
  s.spec.language = "cpp";
  s.spec.binding = "fib";
  s.spec.target_hardware = {"cpu"};
  s.spec.entry_point = std::move(entry);
  s.sources.push_back(SourceFile{"kernel.cpp", std::move(content), {}});
  return s;
}

BuildOptions options_in(const TempDir& tmp) {
  BuildOptions o;
  o.cache_dir = tmp.path() / "cache";
  o.abi_include_dir = fs::path(FIB_SOURCE_DIR) / "include";
  o.timeout = std::chrono::seconds(120);
  return o;
}

// A wrapper for the C++ compiler that records each compile and link in calls.log, runs
// `before` (shell) before each compile, then runs the real compiler.
fs::path fake_cxx(const TempDir& tmp, const std::string& before = "") {
  const std::string log = "'" + (tmp.path() / "calls.log").string() + "'";
  const std::string script =
      "#!/bin/sh\n"
      "case \" $* \" in\n"
      "  *\" -c \"*) echo compile >> " +
      log + (before.empty() ? "" : "; " + before) +
      " ;;\n"
      "  *\" -shared \"*) echo link >> " +
      log +
      " ;;\n"
      "esac\n"
      "exec c++ \"$@\"\n";
  const fs::path path = tmp.write("bin/fake-c++", script);
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
  return path;
}

int count_calls(const TempDir& tmp, const std::string& what) {
  std::ifstream in(tmp.path() / "calls.log");
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line == what ? 1 : 0;
  return n;
}

// The defined dynamic symbols of a shared object, read with nm (never loaded here).
std::set<std::string> exported_symbols(const fs::path& so) {
  std::set<std::string> out;
  const std::string cmd = "nm -D --defined-only '" + so.string() + "' 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  if (!p) return out;
  char line[1024];
  while (std::fgets(line, sizeof line, p.get()) != nullptr) {
    std::string l(line);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
    const auto space = l.rfind(' ');
    if (space != std::string::npos) out.insert(l.substr(space + 1));
  }
  return out;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string key_of(const Solution& s, const BuildOptions& o, const std::string& abi = "abi") {
  std::string unsupported, error;
  const auto tc = select_toolchain(s, o, &unsupported, &error);
  EXPECT_TRUE(tc.has_value()) << unsupported << error;
  return tc ? build_key(s, *tc, abi) : std::string();
}

TEST(BuildCache, CompilesAnExportingSharedObjectIntoTheCacheLayout) {
  TempDir tmp;
  const BuildOptions o = options_in(tmp);
  const BuildResult r = build_solution(make_solution(kGoodKernel), o);
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.from_cache);
  ASSERT_EQ(r.key.size(), 32u);
  EXPECT_EQ(r.key.find_first_not_of("0123456789abcdef"), std::string::npos);
  const fs::path entry = o.cache_dir / r.key.substr(0, 2) / r.key;
  EXPECT_EQ(r.directory, entry);
  EXPECT_EQ(r.shared_object, entry / "solution.so");
  ASSERT_TRUE(fs::is_regular_file(r.shared_object));
  EXPECT_EQ(TempDir::read_file(entry / "src" / "kernel.cpp"), kGoodKernel);
  EXPECT_EQ(TempDir::read_file(entry / "include" / "fib" / "solution.h"),
            TempDir::read_file(o.abi_include_dir / "fib" / "solution.h"));
  EXPECT_EQ(TempDir::read_file(entry / "build.log"), r.log);
  EXPECT_FALSE(fs::exists(entry / "obj"));
  const std::string meta = TempDir::read_file(entry / "meta.json");
  EXPECT_TRUE(contains(meta, "\"status\": \"built\"")) << meta;
  EXPECT_TRUE(contains(meta, "\"entry_point\": \"kernel.cpp::run\"")) << meta;
  // Nothing is left in the temporary build folder.
  EXPECT_TRUE(fs::is_empty(o.cache_dir / "tmp"));

  const auto symbols = exported_symbols(r.shared_object);
  EXPECT_TRUE(symbols.count("run")) << r.shared_object;
  EXPECT_TRUE(symbols.count("run__fib_signature"));
  EXPECT_FALSE(symbols.count("_ZL7add_oneN3fib10TensorViewES0_"));  // hidden by default

  // The log holds the commands as run (relative paths) and the flags are reported.
  EXPECT_TRUE(contains(r.log, "-c kernel.cpp -o ../obj/kernel.cpp.o")) << r.log;
  EXPECT_TRUE(contains(r.log, "-shared -o ../solution.so")) << r.log;
  for (const char* f : {"-std=c++17", "-O3", "-march=native", "-fPIC", "-I../include", "-I."}) {
    EXPECT_NE(std::find(r.flags.begin(), r.flags.end(), f), r.flags.end()) << f;
  }
  EXPECT_NE(std::find(r.link_flags.begin(), r.link_flags.end(), "-Wl,--no-undefined"),
            r.link_flags.end());
  EXPECT_TRUE(contains(r.toolchain, "host-cpp")) << r.toolchain;
}

TEST(BuildCache, SecondBuildIsCachedAndRunsNoCompiler) {
  TempDir tmp;
  BuildOptions o = options_in(tmp);
  o.cxx = fake_cxx(tmp).string();
  const Solution s = make_solution(kGoodKernel);
  const BuildResult first = build_solution(s, o);
  ASSERT_EQ(first.status, BuildStatus::kBuilt) << first.log;
  EXPECT_EQ(count_calls(tmp, "compile"), 1);
  EXPECT_EQ(count_calls(tmp, "link"), 1);
  const auto mtime = fs::last_write_time(first.shared_object);

  const BuildResult second = build_solution(s, o);
  EXPECT_EQ(second.status, BuildStatus::kCached);
  EXPECT_TRUE(second.ok());
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(second.shared_object, first.shared_object);
  EXPECT_EQ(second.log, first.log);
  EXPECT_EQ(second.flags, first.flags);
  EXPECT_EQ(count_calls(tmp, "compile"), 1);
  EXPECT_EQ(count_calls(tmp, "link"), 1);
  EXPECT_EQ(fs::last_write_time(second.shared_object), mtime);
  EXPECT_LT(second.seconds, 1.0);

  // A renamed solution by another author with the same code is the same entry.
  Solution renamed = s;
  renamed.name = "something_else";
  renamed.author = "bob";
  renamed.description = "another description";
  EXPECT_EQ(build_solution(renamed, o).status, BuildStatus::kCached);
  EXPECT_EQ(count_calls(tmp, "compile"), 1);

  // force rebuilds and replaces the entry; what a killed builder left behind is cleaned.
  const fs::path leftover = o.cache_dir / "tmp" / (first.key + "-4242-0-0");
  fs::create_directories(leftover / "src");
  o.force = true;
  const BuildResult forced = build_solution(s, o);
  EXPECT_EQ(forced.status, BuildStatus::kBuilt) << forced.log;
  EXPECT_EQ(forced.key, first.key);
  EXPECT_EQ(count_calls(tmp, "compile"), 2);
  EXPECT_TRUE(fs::is_regular_file(forced.shared_object));
  EXPECT_TRUE(fs::is_empty(o.cache_dir / "tmp"));
  EXPECT_TRUE(exported_symbols(forced.shared_object).count("run"));
}

TEST(BuildKey, FollowsContentFlagsAndToolchainButNotNames) {
  TempDir tmp;
  const BuildOptions o = options_in(tmp);
  const Solution s = make_solution(kGoodKernel);
  const std::string key = key_of(s, o);
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key_of(s, o), key);

  Solution named = s;
  named.name = "other";
  named.author = "bob";
  named.definition = "other_definition";
  named.description = "a description";
  named.spec.destination_passing_style = false;  // a calling convention, not machine code
  EXPECT_EQ(key_of(named, o), key);
#ifdef FIB_HAVE_TVM_FFI
  Solution no_binding = s;
  no_binding.spec.binding.reset();  // absent means tvm-ffi, upstream's default
  Solution tvm_ffi = s;
  tvm_ffi.spec.binding = "tvm-ffi";
  EXPECT_EQ(key_of(no_binding, o), key_of(tvm_ffi, o));
  EXPECT_NE(key_of(tvm_ffi, o), key);  // the binding is in the key
#endif

  Solution content = s;
  content.sources[0].content += "\n";
  EXPECT_NE(key_of(content, o), key);
  Solution path = s;
  path.sources[0].path = "main.cpp";
  path.spec.entry_point = "main.cpp::run";
  EXPECT_NE(key_of(path, o), key);
  Solution entry = s;
  entry.spec.entry_point = "kernel.cpp::run2";
  EXPECT_NE(key_of(entry, o), key);
  Solution extra = s;
  extra.sources.push_back(SourceFile{"util.h", "", {}});
  EXPECT_NE(key_of(extra, o), key);
  EXPECT_NE(key_of(s, o, "another abi"), key);

  // Boundaries are unambiguous: moving bytes between a path and a content changes the key.
  Solution a = s, b = s;
  a.sources.push_back(SourceFile{"x.h", "yz", {}});
  b.sources.push_back(SourceFile{"x.hy", "z", {}});
  EXPECT_NE(key_of(a, o), key_of(b, o));

  BuildOptions flags = o;
  flags.extra_flags = {"-DFAST=1"};
  EXPECT_NE(key_of(s, flags), key);
  BuildOptions ldflags = o;
  ldflags.extra_ldflags = {"-lrt"};
  EXPECT_NE(key_of(s, ldflags), key);
  BuildOptions compiler = o;
  compiler.cxx = fake_cxx(tmp).string();
  EXPECT_NE(key_of(s, compiler), key);
  // The cache folder is where, not what.
  BuildOptions elsewhere = o;
  elsewhere.cache_dir = tmp.path() / "other-cache";
  EXPECT_EQ(key_of(s, elsewhere), key);
}

TEST(BuildCache, CompilesCSourcesAndNestedFilesAndOnlyWritesHeaders) {
  TempDir tmp;
  BuildOptions o = options_in(tmp);
  o.cxx = fake_cxx(tmp).string();
  Solution s = make_solution(R"(#include <fib/solution.h>
#include "util/scale.h"

static void twice(fib::TensorView x, fib::TensorView y) {
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    y.data_ptr<float>()[i] = scale(x.data_ptr<float>()[i]);
  }
}
FIB_EXPORT_SOLUTION(run, twice);
)");
  s.sources.push_back(SourceFile{"util/scale.h", "extern \"C\" float scale(float);\n", {}});
  s.sources.push_back(SourceFile{"util/scale.c", "float scale(float v) { return 2 * v; }\n", {}});
  s.sources.push_back(SourceFile{"README.md", "notes\n", {}});
  s.sources.push_back(SourceFile{"-fdump-everything.cpp", "int helper() { return 1; }\n", {}});
  const BuildResult r = build_solution(s, o);
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_EQ(count_calls(tmp, "compile"), 2);  // the C file goes to the C compiler
  // A file named like an option is passed as a path.
  EXPECT_TRUE(contains(r.log, "-c ./-fdump-everything.cpp -o ../obj/-fdump-everything.cpp.o"))
      << r.log;
  EXPECT_TRUE(contains(r.log, "-std=c11")) << r.log;
  EXPECT_TRUE(contains(r.log, "-c util/scale.c -o ../obj/util/scale.c.o")) << r.log;
  EXPECT_FALSE(contains(r.log, "-c util/scale.h"));
  EXPECT_TRUE(contains(r.log, "README.md: written, not compiled")) << r.log;
  EXPECT_TRUE(fs::is_regular_file(r.directory / "src" / "util" / "scale.h"));
  EXPECT_TRUE(exported_symbols(r.shared_object).count("run"));
  EXPECT_TRUE(contains(r.toolchain, "; c: ")) << r.toolchain;
}

TEST(BuildFailure, SyntaxErrorReportsFileAndLineAndIsCached) {
  TempDir tmp;
  BuildOptions o = options_in(tmp);
  o.cxx = fake_cxx(tmp).string();
  const Solution s = make_solution(R"(#include <fib/solution.h>

static void broken(fib::TensorView x) {
  int y = x.numel() +;
}
FIB_EXPORT_SOLUTION(run, broken);
)");
  const BuildResult r = build_solution(s, o);
  ASSERT_EQ(r.status, BuildStatus::kFailed);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.from_cache);
  EXPECT_TRUE(contains(r.log, "kernel.cpp:4:")) << r.log;
  EXPECT_TRUE(contains(r.log, "error")) << r.log;
  EXPECT_TRUE(contains(r.log, "$ " + o.cxx)) << r.log;  // the command as run
  EXPECT_TRUE(contains(r.message, "compiling kernel.cpp failed: kernel.cpp:4:")) << r.message;
  EXPECT_FALSE(contains(r.log, "-shared"));  // no link after a failed compile
  EXPECT_TRUE(r.shared_object.empty());
  const std::string meta = TempDir::read_file(r.directory / "meta.json");
  EXPECT_TRUE(contains(meta, "\"status\": \"failed\"")) << meta;
  EXPECT_FALSE(fs::exists(r.directory / "obj"));
  EXPECT_EQ(count_calls(tmp, "compile"), 1);

  const BuildResult again = build_solution(s, o);
  EXPECT_EQ(again.status, BuildStatus::kFailed);
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.message, r.message);
  EXPECT_EQ(again.log, r.log);
  EXPECT_EQ(count_calls(tmp, "compile"), 1);  // the cached failure compiled nothing
}

TEST(BuildFailure, MissingExportNamesTheEntryPoint) {
  TempDir tmp;
  const BuildOptions o = options_in(tmp);
  const BuildResult r = build_solution(make_solution(R"(#include <fib/solution.h>

void add_one(fib::TensorView x, fib::TensorView y) { (void)x; (void)y; }
FIB_EXPORT_SOLUTION(solve, add_one);
)"),
                                       o);
  ASSERT_EQ(r.status, BuildStatus::kFailed) << r.log;
  EXPECT_EQ(r.message,
            "entry point 'kernel.cpp::run': symbol 'run' is not exported by the shared object "
            "(did you forget FIB_EXPORT_SOLUTION(run, ...)?)");
  EXPECT_TRUE(contains(r.log, r.message));
  EXPECT_TRUE(fs::is_regular_file(r.directory / "meta.json"));  // cached like a compile error

  // Defined by hand without the macro: hidden by -fvisibility=hidden, and said so.
  const BuildResult hidden =
      build_solution(make_solution("extern \"C\" int run(void*) { return 0; }\n"), o);
  ASSERT_EQ(hidden.status, BuildStatus::kFailed) << hidden.log;
  EXPECT_TRUE(contains(hidden.message, "is not exported")) << hidden.message;
  EXPECT_TRUE(contains(hidden.message, "defined but hidden")) << hidden.message;

  // Exported, but a variable rather than a function.
  const BuildResult variable = build_solution(
      make_solution("extern \"C\" __attribute__((visibility(\"default\"))) int run = 0;\n"), o);
  ASSERT_EQ(variable.status, BuildStatus::kFailed) << variable.log;
  EXPECT_TRUE(contains(variable.message, "is exported but is not a function")) << variable.message;
}

TEST(BuildFailure, UnresolvedSymbolsFailTheLink) {
  TempDir tmp;
  const BuildResult r = build_solution(make_solution(R"(#include <fib/solution.h>

float helper_defined_nowhere(float);
static void f(fib::TensorView x) { x.data_ptr<float>()[0] = helper_defined_nowhere(1.0f); }
FIB_EXPORT_SOLUTION(run, f);
)"),
                                       options_in(tmp));
  ASSERT_EQ(r.status, BuildStatus::kFailed) << r.log;
  EXPECT_TRUE(contains(r.message, "linking failed")) << r.message;
  EXPECT_TRUE(contains(r.message, "undefined reference")) << r.message;
  EXPECT_TRUE(contains(r.log, "helper_defined_nowhere")) << r.log;
}

TEST(BuildFailure, UnsafeOrInvalidSourcesAreRefusedBeforeAnyCompile) {
  TempDir tmp;
  BuildOptions o = options_in(tmp);
  o.cxx = fake_cxx(tmp).string();
  for (const char* path : {"../evil.cpp", "/tmp/evil.cpp", "a/./b.cpp", "a//b.cpp"}) {
    Solution s = make_solution(kGoodKernel);
    s.sources.push_back(SourceFile{path, "int x;\n", {}});
    const BuildResult r = build_solution(s, o);
    EXPECT_EQ(r.status, BuildStatus::kFailed) << path;
    EXPECT_TRUE(contains(r.message, "unsafe source path")) << r.message;
    EXPECT_TRUE(r.key.empty());
  }
  Solution dup = make_solution(kGoodKernel);
  dup.sources.push_back(dup.sources[0]);
  EXPECT_TRUE(contains(build_solution(dup, o).message, "duplicate source path"));
  Solution clash = make_solution(kGoodKernel);
  clash.sources.push_back(SourceFile{"kernel.cpp/x.h", "", {}});
  EXPECT_TRUE(contains(build_solution(clash, o).message, "both a file and the folder"));
  const BuildResult no_file = build_solution(make_solution(kGoodKernel, "main.cpp::run"), o);
  EXPECT_TRUE(contains(no_file.message, "file 'main.cpp' is not among the sources"))
      << no_file.message;
  const BuildResult bad_symbol = build_solution(make_solution(kGoodKernel, "kernel.cpp::a-b"), o);
  EXPECT_TRUE(contains(bad_symbol.message, "is not a C identifier")) << bad_symbol.message;
  Solution headers_only = make_solution(kGoodKernel, "kernel.h::run");
  headers_only.sources[0].path = "kernel.h";
  EXPECT_TRUE(contains(build_solution(headers_only, o).message, "no source to compile"));
  BuildOptions no_abi = o;
  no_abi.abi_include_dir = tmp.path() / "nowhere";
  EXPECT_TRUE(contains(build_solution(make_solution(kGoodKernel), no_abi).message,
                       "cannot read the ABI header"));

  EXPECT_EQ(count_calls(tmp, "compile"), 0);
  EXPECT_FALSE(fs::exists(o.cache_dir));  // nothing was written anywhere
  EXPECT_FALSE(fs::exists(tmp.path() / "evil.cpp"));
}

TEST(BuildUnsupported, OtherLanguagesAndBindingsAreSkippedNotFailed) {
  TempDir tmp;
  BuildOptions o = options_in(tmp);
  o.cxx = "/nonexistent/c++";         // never looked for: support is decided first
  o.python = "/nonexistent/python3";  // python, triton, tilelang and torch need a Python runtime
  // (cuda is built: tests/bench/build_cuda_test.cpp)
  for (const char* language : {"python", "triton", "tilelang"}) {
    Solution s = make_solution(kGoodKernel);
    s.spec.language = language;
    const BuildResult r = build_solution(s, o);
    EXPECT_EQ(r.status, BuildStatus::kUnsupported) << language;
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.message, std::string("language '") + language + "'")) << r.message;
  }
  Solution torch = make_solution(kGoodKernel);
  torch.spec.binding = "torch";
  const BuildResult r = build_solution(torch, o);
  EXPECT_EQ(r.status, BuildStatus::kUnsupported);
  EXPECT_TRUE(contains(r.message, "binding 'torch'")) << r.message;
  EXPECT_TRUE(contains(r.message, "needs a python3 with PyTorch")) << r.message;
  EXPECT_FALSE(fs::exists(o.cache_dir));
  EXPECT_STREQ(to_string(BuildStatus::kUnsupported), "unsupported");

  // A supported solution with a missing compiler fails (it is not unsupported).
  const BuildResult missing = build_solution(make_solution(kGoodKernel), o);
  EXPECT_EQ(missing.status, BuildStatus::kFailed);
  EXPECT_TRUE(contains(missing.message, "/nonexistent/c++")) << missing.message;
}

// The dynamic section of a shared object as readelf prints it.
std::string dynamic_section(const fs::path& so) {
  std::string out;
  const std::string cmd = "readelf -d '" + so.string() + "' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
  if (!pipe) return out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  return out;
}

TEST(BuildTvmFfi, ASolutionWithoutBindingBuildsAgainstTheRealTvmFfiLibrary) {
#ifndef FIB_HAVE_TVM_FFI
  GTEST_SKIP() << "fib was built without tvm-ffi (scripts/install-deps.sh installs it)";
#else
  TempDir tmp;
  const BuildOptions o = options_in(tmp);
  Solution s = make_solution(R"(
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
void add_one(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i)
    static_cast<float*>(y.data_ptr())[i] = static_cast<const float*>(x.data_ptr())[i] + 1;
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, add_one);
)");
  s.spec.binding.reset();  // upstream's default: tvm-ffi
  const BuildResult r = build_solution(s, o);
  ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
  EXPECT_TRUE(contains(r.log, "# entry symbol '__tvm_ffi_run' is exported")) << r.log;
  EXPECT_NE(std::find(r.link_flags.begin(), r.link_flags.end(), "-ltvm_ffi"), r.link_flags.end());
  // Linked against libtvm_ffi itself, found through the RUNPATH without LD_LIBRARY_PATH.
  const std::string dynamic = dynamic_section(r.shared_object);
  EXPECT_TRUE(contains(dynamic, "(NEEDED)") && contains(dynamic, "[libtvm_ffi.so]")) << dynamic;
  EXPECT_TRUE(contains(dynamic, std::string("[") + FIB_TVM_FFI_LIB_DIR + "]")) << dynamic;

  // The fib ABI's macro does not export what tvm-ffi calls: the message names tvm-ffi's macro.
  Solution fib_macro = make_solution(kGoodKernel);
  fib_macro.spec.binding = "tvm-ffi";
  const BuildResult missing = build_solution(fib_macro, o);
  EXPECT_EQ(missing.status, BuildStatus::kFailed);
  EXPECT_TRUE(contains(missing.message, "symbol '__tvm_ffi_run' is not exported"))
      << missing.message;
  EXPECT_TRUE(contains(missing.message, "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, ...)"))
      << missing.message;
#endif
}

TEST(BuildTimeout, HangingCompilerIsKilledWithItsChildrenAndNotCached) {
  TempDir tmp;
  BuildOptions o = options_in(tmp);
  const fs::path pid_file = tmp.path() / "sleeper.pid";
  // The compile starts a child that would outlive a kill of the script alone.
  o.cxx = fake_cxx(tmp, "sleep 60 & echo $! > '" + pid_file.string() + "'; wait").string();
  o.timeout = std::chrono::milliseconds(1500);
  const auto t0 = std::chrono::steady_clock::now();
  const BuildResult r = build_solution(make_solution(kGoodKernel), o);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, BuildStatus::kFailed);
  EXPECT_TRUE(contains(r.message, "compiling kernel.cpp timed out after 1.5 s")) << r.message;
  EXPECT_TRUE(contains(r.log, "killed")) << r.log;
  EXPECT_LT(elapsed, 10.0);
  EXPECT_TRUE(r.directory.empty());  // a timeout is not cached: the next run tries again
  EXPECT_FALSE(fs::exists(o.cache_dir / r.key.substr(0, 2) / r.key));
  EXPECT_TRUE(fs::is_empty(o.cache_dir / "tmp"));

  // The sleeper was killed with the group: gone, or a zombie awaiting its new parent.
  const std::string pid = TempDir::read_file(pid_file);
  ASSERT_FALSE(pid.empty());
  const fs::path proc = "/proc/" + pid.substr(0, pid.find('\n')) + "/stat";
  std::string state = "?";
  for (int i = 0; i < 100; ++i) {
    const std::string stat = TempDir::read_file(proc);
    const auto close = stat.rfind(')');
    state = stat.empty() ? "gone" : close == std::string::npos ? "?" : stat.substr(close + 2, 1);
    if (state == "gone" || state == "Z") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(state == "gone" || state == "Z") << state;
}

TEST(BuildLog, HugeCompilerOutputIsCapped) {
  TempDir tmp;
  BuildOptions o = options_in(tmp);
  o.cxx = fake_cxx(tmp, "head -c 3000000 /dev/zero | tr '\\0' x; exit 1").string();
  const BuildResult r = build_solution(make_solution(kGoodKernel), o);
  EXPECT_EQ(r.status, BuildStatus::kFailed);
  EXPECT_LT(r.log.size(), (std::size_t{1} << 20) + 4096);
  EXPECT_TRUE(contains(r.log, "more bytes of output dropped")) << r.log.substr(0, 200);
  // What the submitter gets: the first and last 32 KiB, the commands at the start among them.
  EXPECT_LT(r.log.size(), std::size_t{64 * 1024 + 256});
  EXPECT_TRUE(contains(r.log,
                       "bytes of the build log left out (the first and last 32 KiB are "
                       "kept)"))
      << r.log.substr(0, 200);
  EXPECT_TRUE(contains(r.log.substr(0, 4096), "# fib build ")) << r.log.substr(0, 200);
  EXPECT_TRUE(contains(r.message, "exit status 1")) << r.message;
}

TEST(BuildConcurrency, TwoThreadsBuildingOneKeyCompileOnce) {
  TempDir tmp;
  BuildOptions o = options_in(tmp);
  o.cxx = fake_cxx(tmp, "sleep 0.5").string();
  const Solution s = make_solution(kGoodKernel);
  BuildResult results[2];
  std::thread a([&] { results[0] = build_solution(s, o); });
  std::thread b([&] { results[1] = build_solution(s, o); });
  a.join();
  b.join();
  ASSERT_TRUE(results[0].ok()) << results[0].log;
  ASSERT_TRUE(results[1].ok()) << results[1].log;
  EXPECT_EQ(results[0].shared_object, results[1].shared_object);
  std::multiset<BuildStatus> statuses = {results[0].status, results[1].status};
  EXPECT_EQ(statuses, (std::multiset<BuildStatus>{BuildStatus::kBuilt, BuildStatus::kCached}));
  EXPECT_EQ(count_calls(tmp, "compile"), 1);
}

TEST(BuildConcurrency, TwoProcessesBuildingOneKeyCompileOnce) {
  TempDir tmp;
  BuildOptions o = options_in(tmp);
  o.cxx = fake_cxx(tmp, "sleep 0.5").string();
  const Solution s = make_solution(kGoodKernel);
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const BuildResult r = build_solution(s, o);
      ::_exit(r.status == BuildStatus::kBuilt ? 10 : r.status == BuildStatus::kCached ? 11 : 12);
    }
    children.push_back(pid);
  }
  std::multiset<int> codes;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    codes.insert(WEXITSTATUS(status));
  }
  EXPECT_EQ(codes, (std::multiset<int>{10, 11}));
  EXPECT_EQ(count_calls(tmp, "compile"), 1);
  EXPECT_EQ(build_solution(s, o).status, BuildStatus::kCached);
}

TEST(BuildCacheDir, FollowsTheEnvironment) {
  const auto saved = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const auto fib = saved("FIB_CACHE_DIR"), xdg = saved("XDG_CACHE_HOME"), home = saved("HOME");
  ::setenv("FIB_CACHE_DIR", "/x/fib-cache", 1);
  ::setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  ::setenv("HOME", "/x/home", 1);
  EXPECT_EQ(default_cache_dir(), fs::path("/x/fib-cache"));
  ::unsetenv("FIB_CACHE_DIR");
  EXPECT_EQ(default_cache_dir(), fs::path("/x/xdg/fib/build"));
  ::setenv("XDG_CACHE_HOME", "relative", 1);  // not absolute: ignored, as the XDG spec says
  EXPECT_EQ(default_cache_dir(), fs::path("/x/home/.cache/fib/build"));
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_cache_dir(), fs::path("/x/home/.cache/fib/build"));
  const auto restore = [](const char* name, const std::optional<std::string>& v) {
    if (v) {
      ::setenv(name, v->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  };
  restore("FIB_CACHE_DIR", fib);
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
}

}  // namespace
}  // namespace fib::bench
