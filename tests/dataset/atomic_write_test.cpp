// write_file_atomic: replaces content, creates parent folders, leaves no temporary files, and
// keeps the old content when the write fails.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/dataset/files.h"
#include "support/temp_dir.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Names of the entries of a folder (not recursive), sorted.
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(WriteFileAtomic, CreatesParentsAndReplacesContent) {
  TempDir tmp;
  const fs::path file = tmp.path() / "definitions" / "gemm" / "d.json";
  write_file_atomic(file, "first version, rather long\n");
  EXPECT_EQ(tmp.read("definitions/gemm/d.json"), "first version, rather long\n");
  write_file_atomic(file, "second\n");  // shorter: nothing of the old content may remain
  EXPECT_EQ(tmp.read("definitions/gemm/d.json"), "second\n");
  write_file_atomic(file, "");
  EXPECT_TRUE(fs::is_regular_file(file));
  EXPECT_EQ(fs::file_size(file), 0u);
  // Binary content, NUL bytes included, goes through unchanged.
  const std::string binary("a\0b\xff\n", 5);
  write_file_atomic(file, binary);
  EXPECT_EQ(tmp.read("definitions/gemm/d.json"), binary);
  EXPECT_EQ(entries(file.parent_path()), std::vector<std::string>{"d.json"});
  EXPECT_EQ((fs::status(file).permissions() & fs::perms::owner_read), fs::perms::owner_read);
}

TEST(WriteFileAtomic, LeavesNoTemporaryFilesBehind) {
  TempDir tmp;
  for (int i = 0; i < 20; ++i) {
    write_file_atomic(tmp.path() / "a.json", std::string(static_cast<std::size_t>(i) * 100, 'x'));
    write_file_atomic(tmp.path() / "b.json", std::to_string(i));
  }
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"a.json", "b.json"}));
  EXPECT_EQ(tmp.read("b.json"), "19");
}

TEST(WriteFileAtomic, ReadersSeeTheOldOrTheNewFileNeverAMix) {
  TempDir tmp;
  const fs::path file = tmp.path() / "f.txt";
  const std::string a(200000, 'a');
  const std::string b(100000, 'b');
  write_file_atomic(file, a);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0}, reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      const std::string got = tmp.read("f.txt");
      if (got != a && got != b) ++bad;
      ++reads;
    }
  });
  for (int i = 0; i < 60; ++i) write_file_atomic(file, i % 2 ? a : b);
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0) << "of " << reads.load() << " reads";
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(entries(tmp.path()), std::vector<std::string>{"f.txt"});
}

TEST(WriteFileAtomic, FailedWriteKeepsOldContentAndRemovesTheTemporaryFile) {
  // The file-size limit makes write() fail with EFBIG part-way, even for root. It is set in a
  // child process so the test program keeps its own limits.
  TempDir tmp;
  const fs::path file = tmp.write("data/f.json", "old content\n");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(10);
    try {
      write_file_atomic(file, std::string(64 * 1024, 'n'));
    } catch (const Error& e) {
      const std::string what = e.what();
      const bool ok = what.find(": error: write failed: File too large") != std::string::npos &&
                      what.find("/.f.json.tmp.") != std::string::npos;
      ::_exit(ok ? 0 : 11);
    } catch (...) {
      ::_exit(12);
    }
    ::_exit(13);  // no exception
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: setrlimit failed, 11: wrong message, 12: not a fib::Error, 13: no error";
  EXPECT_EQ(tmp.read("data/f.json"), "old content\n");
  EXPECT_EQ(entries(tmp.path() / "data"), std::vector<std::string>{"f.json"});
}

TEST(WriteFileAtomic, TargetThatIsAFolderFailsWithoutLeftovers) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "out" / "f.json" / "inside");
  const fs::path file = tmp.path() / "out" / "f.json";
  try {
    write_file_atomic(file, "new");
    FAIL() << "replacing a folder did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), file.string() + ": error: cannot replace: Is a directory");
  }
  EXPECT_TRUE(fs::is_directory(tmp.path() / "out" / "f.json" / "inside"));
  EXPECT_EQ(entries(tmp.path() / "out"), std::vector<std::string>{"f.json"});
}

TEST(WriteFileAtomic, ParentThatIsAFileFails) {
  TempDir tmp;
  tmp.write("blocker", "i am a file");
  const fs::path file = tmp.path() / "blocker" / "sub" / "f.json";
  try {
    write_file_atomic(file, "new");
    FAIL() << "writing below a file did not throw";
  } catch (const Error& e) {
    const Diagnostic& d = e.diagnostics().items().at(0);
    EXPECT_EQ(d.file, (tmp.path() / "blocker" / "sub").string());
    EXPECT_TRUE(d.message.starts_with("cannot create folder: ")) << d.message;
  }
  EXPECT_EQ(tmp.read("blocker"), "i am a file");
}

TEST(WriteFileAtomic, ReadOnlyFolderFailsAndKeepsOldContent) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "SKIPPED: running as root, which ignores folder permissions, so a read-only "
                    "folder cannot make the write fail (the file-size-limit test covers a failed "
                    "write instead)";
  }
  TempDir tmp;
  const fs::path file = tmp.write("ro/f.json", "old\n");
  fs::permissions(tmp.path() / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  try {
    write_file_atomic(file, "new\n");
    ADD_FAILURE() << "write into a read-only folder did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/ro/.f.json.tmp."), std::string::npos) << what;
    EXPECT_NE(what.find(": error: cannot create: Permission denied"), std::string::npos) << what;
  }
  fs::permissions(tmp.path() / "ro", fs::perms::owner_all);
  EXPECT_EQ(tmp.read("ro/f.json"), "old\n");
  EXPECT_EQ(entries(tmp.path() / "ro"), std::vector<std::string>{"f.json"});
}

}  // namespace
}  // namespace fib
