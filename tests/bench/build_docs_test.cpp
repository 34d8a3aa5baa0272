// The complete examples of docs/solutions.md (every ```cpp block that exports an entry) build
// with fib's build, export their entry and report the parameter kinds the guide describes.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fib/bench/builder/build.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

struct Example {
  std::string file;  // from the first line, "// <file>: ..."
  std::string code;
};

std::vector<Example> cpp_examples(const std::string& markdown) {
  std::vector<Example> out;
  const std::string open = "```cpp\n", close = "```\n";
  for (std::size_t at = markdown.find(open); at != std::string::npos;
       at = markdown.find(open, at)) {
    const std::size_t begin = at + open.size();
    const std::size_t end = markdown.find(close, begin);
    if (end == std::string::npos) break;
    Example e{"", markdown.substr(begin, end - begin)};
    at = end + close.size();
    if (e.code.find("FIB_EXPORT_SOLUTION(") == std::string::npos) continue;
    if (e.code.rfind("// ", 0) == 0) e.file = e.code.substr(3, e.code.find(':') - 3);
    out.push_back(std::move(e));
  }
  return out;
}

TEST(BuildDocs, SolutionGuideExamplesBuildAndExportTheirSignatures) {
  const std::string guide = TempDir::read_file(fs::path(FIB_SOURCE_DIR) / "docs" / "solutions.md");
  ASSERT_FALSE(guide.empty());
  const std::vector<Example> examples = cpp_examples(guide);
  // The parameter kinds each example's entry reports (FIB_EXPORT_SOLUTION's signature string).
  const std::map<std::string, std::string> expected = {{"rmsnorm.cpp", "TTT>"},
                                                       {"gemm.cpp", "TT>T"},
                                                       {"min_max.cpp", "T>TT"},
                                                       {"scaled_add.cpp", "TOfT>"}};
  ASSERT_EQ(examples.size(), expected.size());
  TempDir tmp;
  BuildOptions o;
  o.cache_dir = tmp.path() / "cache";
  o.abi_include_dir = fs::path(FIB_SOURCE_DIR) / "include";
  for (const Example& e : examples) {
    SCOPED_TRACE(e.file);
    ASSERT_EQ(expected.count(e.file), 1u);
    Solution s;
    s.name = e.file;
    s.definition = "docs";
    s.author = "docs";
    s.spec.language = "cpp";
    s.spec.binding = "fib";
    s.spec.entry_point = e.file + "::run";
    s.sources.push_back(SourceFile{e.file, e.code, {}});
    const BuildResult r = build_solution(s, o);
    ASSERT_EQ(r.status, BuildStatus::kBuilt) << r.message << "\n" << r.log;
    // The guide's own code, so loading it into the test is safe.
    void* so = ::dlopen(r.shared_object.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(so, nullptr) << ::dlerror();
    using SignatureFn = const char* (*)();
    auto signature = reinterpret_cast<SignatureFn>(::dlsym(so, "run__fib_signature"));
    ASSERT_NE(signature, nullptr);
    EXPECT_EQ(std::string(signature()), expected.at(e.file));
    EXPECT_NE(::dlsym(so, "run"), nullptr);
    ::dlclose(so);
  }
}

}  // namespace
}  // namespace fib::bench
