#include "fib/base/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "fib/base/diagnostics.h"
#include "support/temp_dir.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using fib::testing::TempDir;

std::size_t entries(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(BaseFiles, WriteAllWritesEveryByteToAFileAndASocket) {
  TempDir tmp;
  const fs::path p = tmp.path() / "out.bin";
  const std::string big(3 << 20, 'x');
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  write_all(fd, big, p.string());
  write_all(fd, "tail", 4, p.string());
  ::close(fd);
  EXPECT_EQ(TempDir::read_file(p), big + "tail");

  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  write_all(sv[0], std::string_view("hello"), "socket");
  char buf[5];
  ASSERT_EQ(::read(sv[1], buf, sizeof buf), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  // A peer that has gone is an error naming what was written to, not a SIGPIPE.
  ::close(sv[1]);
  try {
    write_all(sv[0], std::string_view("again"), "worker channel");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker channel: error: write failed"), std::string::npos)
        << e.what();
  }
  ::close(sv[0]);
}

TEST(BaseFiles, AtomicWriteReplacesAndLeavesNoTemporaryFile) {
  TempDir tmp;
  const fs::path p = tmp.path() / "a" / "b" / "file.json";
  write_file_atomic(p, std::string_view("one"));
  EXPECT_EQ(TempDir::read_file(p), "one");
  write_file_atomic(p, std::string_view("two"), {.durable = false, .mode = 0600});
  EXPECT_EQ(TempDir::read_file(p), "two");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  write_file_atomic(p, [](int fd, const fs::path& t) {
    write_all(fd, std::string_view("thr"), t.string());
    write_all(fd, std::string_view("ee"), t.string());
  });
  EXPECT_EQ(TempDir::read_file(p), "three");
  EXPECT_EQ(entries(p.parent_path()), 1u);
}

TEST(BaseFiles, AFailedAtomicWriteKeepsTheOldFile) {
  TempDir tmp;
  const fs::path p = tmp.path() / "file.txt";
  write_file_atomic(p, std::string_view("old"));
  EXPECT_THROW(
      write_file_atomic(p, [](int, const fs::path&) { throw std::runtime_error("writer failed"); }),
      std::runtime_error);
  EXPECT_EQ(TempDir::read_file(p), "old");
  EXPECT_EQ(entries(tmp.path()), 1u);
  // A folder in the way of the parent folder: an error naming it.
  tmp.write("blocker", "x");
  try {
    write_file_atomic(tmp.path() / "blocker" / "f", std::string_view("x"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create folder"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fib
