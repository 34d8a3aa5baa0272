// End to end: `fib solution pack`, and the bundled example (examples/dataset and the solutions
// in examples/solutions it packs) staying reproducible from scripts/make-example-dataset.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/dataset/trace_set.h"
#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

const char* const kKernel = R"(#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
void rmsnorm(tvm::ffi::TensorView x, tvm::ffi::TensorView w, tvm::ffi::TensorView y) {}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
)";

// A copy of the example dataset without its solutions, and a folder of sources to pack.
struct PackFixture {
  TempDir dir;
  fs::path root = dir.path() / "dataset";
  PackFixture() {
    copy_tree(source_dir() / "examples/dataset", root);
    fs::remove_all(root / "solutions");
  }
  std::string src(const std::string& rel, std::string_view content = kKernel) const {
    return dir.write("src/" + rel, content).string();
  }
  std::vector<std::string> pack(const std::vector<std::string>& extra) const {
    std::vector<std::string> args = {
        "solution",      "pack",   "--dataset", root.string(), "--definition",
        "rmsnorm_h2048", "--name", "mine",      "--author",    "me"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  fs::path stored() const { return root / "solutions/me/rmsnorm/rmsnorm_h2048/mine.json"; }
};

TEST(SolutionPack, WritesTheCanonicalFileThatValidates) {
  PackFixture f;
  const std::string kernel = f.src("kernel.cpp");
  const auto r = run_fib(f.pack({"--entry", "kernel.cpp::run", kernel}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + f.stored().string() +
                       ": solution 'mine' of rmsnorm_h2048 by me (1 source: kernel.cpp; entry "
                       "kernel.cpp::run; destination-passing)\n");
  const std::string expected = std::string(R"({
  "name": "mine",
  "definition": "rmsnorm_h2048",
  "author": "me",
  "spec": {
    "language": "cpp",
    "target_hardware": [
      "cpu"
    ],
    "entry_point": "kernel.cpp::run",
    "binding": "tvm-ffi"
  },
  "sources": [
    {
      "path": "kernel.cpp",
      "content": )") + Json(std::string(kKernel)).dump() +
                               "\n    }\n  ]\n}\n";
  EXPECT_EQ(TempDir::read_file(f.stored()), expected);
  const auto v = run_fib({"validate", "--dataset", f.root.string(), "--checks",
                          "layout,definition,workload,solution"});
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_THAT(v.out, HasSubstr("0 errors, 0 warnings"));
  // Packing again replaces the file with the same bytes.
  const auto again = run_fib(f.pack({"--entry", "kernel.cpp::run", kernel}));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("replaced " + f.stored().string()));
  EXPECT_EQ(TempDir::read_file(f.stored()), expected);
}

TEST(SolutionPack, ValueReturningDescriptionHardwareAndOutputFile) {
  PackFixture f;
  const std::string kernel = f.src("kernel.cpp");
  const fs::path out = f.dir.path() / "out/mine.json";
  const auto r =
      run_fib(f.pack({"--entry", "kernel.cpp::run", "--value-returning", "--description", "a test",
                      "--target-hardware", "cpu,x86_64", "--output", out.string(), kernel}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(f.root / "solutions"));
  const Json j = Json::parse(TempDir::read_file(out));
  EXPECT_EQ(j["spec"]["destination_passing_style"], false);
  EXPECT_EQ(j["spec"]["target_hardware"], Json::array({"cpu", "x86_64"}));
  EXPECT_EQ(j["description"], "a test");
  EXPECT_THAT(r.out, HasSubstr("value-returning"));
}

// cpp and cuda solutions are written with binding tvm-ffi (upstream's default, which its models
// accept); fib's own ABI is the opt-in --binding fib; other languages get no binding.
TEST(SolutionPack, BindingDefaultsToTvmFfiAndFibIsOptIn) {
  PackFixture f;
  const std::string kernel = f.src("kernel.cu");
  const fs::path out = f.dir.path() / "out.json";
  auto binding_of = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--output", out.string()});
    const auto r = run_fib(f.pack(extra));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Json::parse(TempDir::read_file(out))["spec"].value("binding", Json("(none)"));
  };
  EXPECT_EQ(binding_of({"--entry", "kernel.cu::run", "--language", "cuda", kernel}), "tvm-ffi");
  EXPECT_EQ(
      binding_of({"--entry", "kernel.cu::run", "--language", "cuda", "--binding", "fib", kernel}),
      "fib");
  EXPECT_EQ(
      binding_of({"--entry", "kernel.cu::run", "--language", "cuda", "--binding", "torch", kernel}),
      "torch");
  const std::string script = f.src("main.py", "def run(x, w):\n    return x\n");
  EXPECT_EQ(binding_of({"--entry", "main.py::run", "--language", "python", script,
                        "--target-hardware", "cpu"}),
            "(none)");
}

TEST(SolutionPack, SourcesKeepTheirPathsBelowTheirCommonFolder) {
  PackFixture f;
  const std::string kernel = f.src("lib/a/kernel.cpp");
  const std::string header = f.src("lib/b/util.h", "#pragma once\n");
  // The entry file may be named by its path on disk: it is stored as a/kernel.cpp.
  const auto r = run_fib(f.pack({"--entry", kernel + "::run", kernel, header}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(TempDir::read_file(f.stored()));
  EXPECT_EQ(j["spec"]["entry_point"], "a/kernel.cpp::run");
  ASSERT_EQ(j["sources"].size(), 2u);
  EXPECT_EQ(j["sources"][0]["path"], "a/kernel.cpp");
  EXPECT_EQ(j["sources"][1]["path"], "b/util.h");
  EXPECT_EQ(j["sources"][1]["content"], "#pragma once\n");
}

TEST(SolutionPack, UnknownDefinitionSuggests) {
  PackFixture f;
  auto args = f.pack({"--entry", "kernel.cpp::run", f.src("kernel.cpp")});
  args[5] = "rmsnorm_h2049";
  const auto r = run_fib(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fib: " + f.root.string() +
                       ": error: no definition named 'rmsnorm_h2049' (did you mean "
                       "'rmsnorm_h2048'?)\n");
  EXPECT_FALSE(fs::exists(f.root / "solutions"));
}

TEST(SolutionPack, EntryFileMustBeOneOfTheSources) {
  PackFixture f;
  const auto r = run_fib(f.pack({"--entry", "kernal.cpp::run", f.src("kernel.cpp")}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "fib: --entry: error: entry file 'kernal.cpp' is not among the sources (did you mean "
            "'kernel.cpp'?)\n");
  EXPECT_FALSE(fs::exists(f.root / "solutions"));
}

TEST(SolutionPack, BadEntryPointsAreRefused) {
  PackFixture f;
  const std::string kernel = f.src("kernel.cpp");
  auto r = run_fib(f.pack({"--entry", "kernel.cpp", kernel}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "fib: --entry: error: 'kernel.cpp' is not of the form FILE::SYMBOL (e.g. --entry "
            "kernel.cpp::run)\n");
  r = run_fib(f.pack({"--entry", "kernel.cpp::run-it", kernel}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("entry symbol 'run-it' is not an identifier"));
}

TEST(SolutionPack, UnusableSourcesAreNamed) {
  PackFixture f;
  const std::string missing = (f.dir.path() / "src/nope.cpp").string();
  auto r = run_fib(f.pack({"--entry", "nope.cpp::run", missing}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fib: " + missing + ": error: no such source file\n");

  const std::string empty = f.src("empty.cpp", "");
  r = run_fib(f.pack({"--entry", "empty.cpp::run", empty}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fib: " + empty +
                       ": error: source file is empty (a solution's sources must have content)\n");

  const std::string binary = f.src("blob.cpp", std::string("ok\xff\xfe", 4));
  r = run_fib(f.pack({"--entry", "blob.cpp::run", binary}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(binary + ": error: not UTF-8 text (invalid byte at offset 2)"));

  const std::string kernel = f.src("kernel.cpp");
  r = run_fib(f.pack({"--entry", "kernel.cpp::run", (f.dir.path() / "src").string()}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("error: is a folder, not a source file"));

  r = run_fib(f.pack({"--entry", "kernel.cpp::run", kernel, kernel}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fib: " + kernel + ": error: source file given twice\n");
  EXPECT_FALSE(fs::exists(f.root / "solutions"));
}

TEST(SolutionPack, BadNamesLanguagesAndBindings) {
  PackFixture f;
  const std::string kernel = f.src("kernel.cpp");
  auto args = f.pack({"--entry", "kernel.cpp::run", kernel});
  args[7] = "../escape";
  auto r = run_fib(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("--name: error: '../escape' cannot be used as a file or folder name"));
  r = run_fib(f.pack({"--entry", "kernel.cpp::run", "--language", "cxx", kernel}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--language: error: unknown language 'cxx'"));
  r = run_fib(f.pack({"--entry", "kernel.cpp::run", "--binding", "tvm_ffi", kernel}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("--binding: error: unknown binding 'tvm_ffi' (did you mean 'tvm-ffi'?)"));
  r = run_fib({"solution", "pack", "--dataset", f.root.string(), "--definition", "rmsnorm_h2048",
               "--name", "x", "--author", "me", kernel});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--entry is required"));
}

TEST(SolutionPack, NameTakenByAnotherSolutionIsRefused) {
  PackFixture f;
  const std::string kernel = f.src("kernel.cpp");
  ASSERT_EQ(run_fib(f.pack({"--entry", "kernel.cpp::run", kernel})).exit_code, 0);
  auto args = f.pack({"--entry", "kernel.cpp::run", kernel});
  args[9] = "someone-else";
  const auto r = run_fib(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fib: " + f.stored().string() +
                       ": error: the dataset already has a solution named 'mine' (author 'me', "
                       "definition 'rmsnorm_h2048') (solution names are unique within a dataset; "
                       "choose another --name)\n");
  EXPECT_FALSE(fs::exists(f.root / "solutions/someone-else"));
}

// ---- The bundled example --------------------------------------------------------------------

std::map<std::string, std::string> files_under(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file())
      out[e.path().lexically_relative(root).generic_string()] = TempDir::read_file(e.path());
  }
  return out;
}

// Every committed example solution is what `fib solution pack` makes of its source today, byte
// for byte (so editing a .cpp without re-running scripts/make-example-dataset.sh fails here).
TEST(ExampleDataset, CommittedSolutionsArePackedFromExamplesSolutions) {
  const fs::path example = source_dir() / "examples/dataset";
  const fs::path sources = source_dir() / "examples/solutions";
  const TraceSet set = TraceSet::load(example);
  ASSERT_FALSE(set.load_diagnostics().has_errors()) << set.load_diagnostics().to_string();
  TempDir tmp;
  std::set<std::string> packed;
  for (const auto& d : set.definitions()) {
    for (const auto& rec : set.solutions(d.value.name)) {
      const Solution& s = rec.value;
      SCOPED_TRACE(s.name);
      ASSERT_EQ(s.sources.size(), 1u);
      const fs::path src = sources / s.definition / s.sources[0].path;
      packed.insert(fs::relative(src, sources).generic_string());
      std::string hardware;
      for (const auto& h : s.spec.target_hardware) hardware += (hardware.empty() ? "" : ",") + h;
      std::vector<std::string> args = {
          "solution",          "pack",          "--dataset", example.string(),
          "--definition",      s.definition,    "--name",    s.name,
          "--author",          s.author,        "--entry",   s.spec.entry_point,
          "--language",        s.spec.language, "--binding", s.spec.binding.value_or(""),
          "--target-hardware", hardware,        "--output",  (tmp.path() / "s.json").string()};
      if (!s.spec.dps()) args.push_back("--value-returning");
      if (s.description) {
        args.push_back("--description");
        args.push_back(*s.description);
      }
      args.push_back(src.string());
      const auto r = run_fib(args);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(TempDir::read_file(tmp.path() / "s.json"),
                TempDir::read_file(example / set.files()[rec.source.file].path))
          << src << " and its packed solution differ: run scripts/make-example-dataset.sh";
    }
  }
  // And every example source is packed: C++ ones as language cpp for the CPU, CUDA ones as
  // language cuda with the pack's default target hardware, Python ones as language python for
  // the CPU (triton_* as language triton for a GPU), with no binding.
  std::set<std::string> on_disk;
  for (const auto& [rel, content] : files_under(sources)) {
    const auto ext = fs::path(rel).extension();
    if (ext == ".cpp" || ext == ".cu" || ext == ".py") on_disk.insert(rel);
  }
  EXPECT_EQ(packed, on_disk);
  EXPECT_EQ(packed.size(), 47u);
  std::size_t cuda = 0, python = 0;
  for (const auto& d : set.definitions()) {
    for (const auto& rec : set.solutions(d.value.name)) {
      const Solution& s = rec.value;
      SCOPED_TRACE(s.name);
      const fs::path file = s.sources[0].path;
      if (file.extension() == ".py") {
        const bool triton = file.stem().string().rfind("triton", 0) == 0;
        EXPECT_EQ(s.spec.language, triton ? "triton" : "python");
        EXPECT_EQ(s.spec.target_hardware, std::vector<std::string>{triton ? "cuda" : "cpu"});
        EXPECT_EQ(s.spec.binding, std::nullopt);
        ++python;
        continue;
      }
      const bool is_cu = fs::path(s.sources[0].path).extension() == ".cu";
      EXPECT_EQ(s.spec.language, is_cu ? "cuda" : "cpp");
      EXPECT_EQ(s.spec.target_hardware, std::vector<std::string>{is_cu ? "cuda" : "cpu"});
      // All against tvm-ffi, as upstream writes solutions: nothing fib ships uses fib's own ABI.
      EXPECT_EQ(s.spec.binding, std::optional<std::string>("tvm-ffi"));
      cuda += is_cu;
    }
  }
  EXPECT_EQ(cuda, 18u);
  EXPECT_EQ(python, 9u);
}

// scripts/make-example-dataset.sh rebuilds examples/dataset exactly from fib's commands.
TEST(ExampleDataset, ScriptRegeneratesItByteForByte) {
  TempDir tmp;
  const fs::path out = tmp.path() / "dataset";
  const std::string cmd = "FIB='" + std::string(FIB_EXE) + "' bash '" +
                          (source_dir() / "scripts/make-example-dataset.sh").string() + "' '" +
                          out.string() + "' >'" + (tmp.path() / "log").string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << TempDir::read_file(tmp.path() / "log");
  const auto made = files_under(out);
  const auto committed = files_under(source_dir() / "examples/dataset");
  std::vector<std::string> made_names, committed_names;
  for (const auto& [k, v] : made) made_names.push_back(k);
  for (const auto& [k, v] : committed) committed_names.push_back(k);
  ASSERT_EQ(made_names, committed_names);
  for (const auto& [rel, content] : made) {
    EXPECT_EQ(content, committed.at(rel)) << rel << " differs from what the script makes";
  }
}

TEST(ExampleDataset, Validates) {
  const auto r = run_fib({"validate", "--dataset", (source_dir() / "examples/dataset").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("17 definitions: 17 ok, 0 warning, 0 error\n0 errors, 1 warning\n"));
  // The only warning, said once for the dataset: no solution by the baseline author.
  EXPECT_THAT(r.out, HasSubstr("no baseline solution (author 'baseline') for any of the 17 "
                               "definitions"));
  EXPECT_THAT(r.out, Not(HasSubstr("[warning] no baseline solution (author 'baseline')\n")));
}

// The compiler flags that build an example against tvm-ffi's headers and library (the
// apache-tvm-ffi package fib was built with).
#ifdef FIB_TVM_FFI_INCLUDE_DIR
const std::string kTvmFfiInclude = std::string("-isystem '") + FIB_TVM_FFI_INCLUDE_DIR + "'";
const std::string kTvmFfiLibrary = std::string(" -L '") + FIB_TVM_FFI_LIB_DIR + "' -ltvm_ffi";
#endif

// Every C++ example builds against tvm-ffi with the flags of the documentation, warning-free,
// except compile_error, which must not build (where fib was built with tvm-ffi).
TEST(ExampleSolutions, BuildAgainstTvmFfi) {
#ifndef FIB_TVM_FFI_INCLUDE_DIR
  GTEST_SKIP() << "SKIPPED: fib was built without tvm-ffi (scripts/install-deps.sh installs it)";
#else
  if (std::system("command -v c++ >/dev/null 2>&1") != 0) GTEST_SKIP() << "SKIPPED: no c++";
  TempDir tmp;
  const fs::path sources = source_dir() / "examples/solutions";
  int built = 0;
  for (const auto& [rel, content] : files_under(sources)) {
    if (fs::path(rel).extension() != ".cpp") continue;
    SCOPED_TRACE(rel);
    const fs::path log = tmp.path() / "log";
    const std::string cmd =
        "c++ -std=c++17 -O2 -fPIC -shared -Wall -Wextra -Werror "
        "-Wl,--no-undefined " +
        kTvmFfiInclude + " '" + (sources / rel).string() + "' -o '" +
        (tmp.path() / "s.so").string() + "'" + kTvmFfiLibrary + " >'" + log.string() + "' 2>&1";
    const int status = std::system(cmd.c_str());
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (fs::path(rel).stem() == "compile_error") {
      EXPECT_FALSE(ok);
      EXPECT_THAT(TempDir::read_file(log), HasSubstr("cannot convert"));
    } else {
      EXPECT_TRUE(ok) << TempDir::read_file(log);
      ++built;
    }
  }
  EXPECT_EQ(built, 19);
#endif
}

#ifdef FIB_TVM_FFI_INCLUDE_DIR
// nvcc for the CUDA examples: $CUDACXX, else nvcc on PATH, else the toolkit's usual place; empty
// when there is none.
std::string find_nvcc() {
  if (const char* env = std::getenv("CUDACXX"); env != nullptr && *env != '\0') return env;
  if (std::system("command -v nvcc >/dev/null 2>&1") == 0) return "nvcc";
  if (fs::exists("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return "";
}
#endif

// Every CUDA example builds against tvm-ffi with nvcc for Hopper (sm_90a, what fib builds for an
// H100 or H200), its host code warning-free, except compile_error_cuda, whose device code has a
// type error. Compiling needs no GPU, only the toolkit.
TEST(ExampleSolutions, CudaSourcesBuildWithNvcc) {
#ifndef FIB_TVM_FFI_INCLUDE_DIR
  GTEST_SKIP() << "SKIPPED: fib was built without tvm-ffi (scripts/install-deps.sh installs it)";
#else
  const std::string nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "SKIPPED: no nvcc (set CUDACXX or put nvcc on PATH)";
  TempDir tmp;
  const fs::path sources = source_dir() / "examples/solutions";
  int built = 0;
  for (const auto& [rel, content] : files_under(sources)) {
    if (fs::path(rel).extension() != ".cu") continue;
    SCOPED_TRACE(rel);
    const fs::path log = tmp.path() / "log";
    const std::string cmd = "'" + nvcc +
                            "' -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a "
                            "-Xcompiler=-fPIC,-Wall,-Wextra,-Werror -shared " +
                            kTvmFfiInclude + " '" + (sources / rel).string() + "' -o '" +
                            (tmp.path() / "s.so").string() + "'" + kTvmFfiLibrary + " >'" +
                            log.string() + "' 2>&1";
    const int status = std::system(cmd.c_str());
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (fs::path(rel).stem() == "compile_error_cuda") {
      EXPECT_FALSE(ok);
      EXPECT_THAT(TempDir::read_file(log),
                  HasSubstr("compile_error_cuda.cu(36): error: a value of type \"__nv_bfloat16 "
                            "*\" cannot be used to initialize an entity of type \"float *\""));
    } else {
      EXPECT_TRUE(ok) << TempDir::read_file(log);
      // Warnings from nvcc itself (device code) would not fail the build: none is allowed.
      EXPECT_THAT(TempDir::read_file(log), ::testing::Not(HasSubstr("warning")));
      ++built;
    }
  }
  EXPECT_EQ(built, 17);
#endif
}

}  // namespace
}  // namespace fib::testing
