// Blob resolution inside the dataset root (locate_blob) and Git LFS pointer detection.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fib/dataset/blob.h"
#include "support/temp_dir.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr char kOid[] = "sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";

std::string pointer_text(std::string_view size = "12345") {
  return std::string("version https://git-lfs.github.com/spec/v1\noid ") + kOid + "\nsize " +
         std::string(size) + "\n";
}

// A dataset root in its own folder, so "outside the root" has somewhere to point.
struct BlobTree {
  TempDir tmp;
  fs::path root = tmp.path() / "ds";
  BlobTree() {
    tmp.write("ds/blob/workloads/gemm/d/d_abc.safetensors", std::string(2000, '\x01'));
    tmp.write("ds/blob/small.bin", "tiny but real");
    tmp.write("outside/secret.safetensors", "secret");
    tmp.write("ds2/neighbour.bin", "next door");
  }
};

TEST(ParseLfsPointer, RecognizesAPointer) {
  const auto p = parse_lfs_pointer(pointer_text());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->oid, kOid);
  EXPECT_EQ(p->size, 12345u);
  // Without the final newline, and with the spec's optional extension lines.
  const auto q = parse_lfs_pointer(
      "version https://git-lfs.github.com/spec/v1\next-0-foo sha256:00\noid sha256:ab\nsize 0");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->oid, "sha256:ab");
  EXPECT_EQ(q->size, 0u);
  const auto big = parse_lfs_pointer(pointer_text("18446744073709551615"));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->size, 18446744073709551615u);
}

TEST(ParseLfsPointer, RejectsEverythingElse) {
  EXPECT_FALSE(parse_lfs_pointer(""));
  EXPECT_FALSE(parse_lfs_pointer("version https://git-lfs.github.com/spec/v1\n"));
  // Missing size, missing oid, empty oid.
  EXPECT_FALSE(parse_lfs_pointer(std::string("version https://git-lfs.github.com/spec/v1\noid ") +
                                 kOid + "\n"));
  EXPECT_FALSE(parse_lfs_pointer("version https://git-lfs.github.com/spec/v1\nsize 10\n"));
  EXPECT_FALSE(parse_lfs_pointer("version https://git-lfs.github.com/spec/v1\noid \nsize 10\n"));
  // Sizes that are not a plain decimal number, or overflow 64 bits.
  EXPECT_FALSE(parse_lfs_pointer(pointer_text("")));
  EXPECT_FALSE(parse_lfs_pointer(pointer_text("12a")));
  EXPECT_FALSE(parse_lfs_pointer(pointer_text("-5")));
  EXPECT_FALSE(parse_lfs_pointer(pointer_text(" 5")));
  EXPECT_FALSE(parse_lfs_pointer(pointer_text("18446744073709551616")));
  EXPECT_FALSE(parse_lfs_pointer(pointer_text("99999999999999999999999999")));
  // The version line must come first and be exact.
  std::string leading_newline = "\n";
  leading_newline += pointer_text();
  EXPECT_FALSE(parse_lfs_pointer(leading_newline));
  EXPECT_FALSE(parse_lfs_pointer(std::string("oid ") + kOid +
                                 "\nsize 1\nversion https://git-lfs.github.com/spec/v1\n"));
  EXPECT_FALSE(parse_lfs_pointer("version https://example.com/spec/v1\noid sha256:ab\nsize 1\n"));
  // Too long to be a pointer (the spec caps them well below 1024 bytes).
  EXPECT_FALSE(parse_lfs_pointer(pointer_text() + std::string(1100, ' ')));
  // A real safetensors file.
  EXPECT_FALSE(parse_lfs_pointer(std::string("\x02\0\0\0\0\0\0\0{}", 10)));
}

TEST(LocateBlob, ResolvesDotSlashPathsInsideTheRoot) {
  BlobTree t;
  const auto loc = locate_blob(t.root, "./blob/workloads/gemm/d/d_abc.safetensors");
  EXPECT_EQ(loc.state, BlobState::kOk) << loc.message;
  EXPECT_EQ(loc.message, "");
  EXPECT_FALSE(loc.lfs);
  EXPECT_EQ(loc.path, fs::canonical(t.root / "blob/workloads/gemm/d/d_abc.safetensors"));
  EXPECT_TRUE(loc.path.is_absolute());
  // Without "./", with "././", with a trailing slash on the root, with a relative root.
  EXPECT_EQ(locate_blob(t.root, "blob/small.bin").path, fs::canonical(t.root / "blob/small.bin"));
  EXPECT_EQ(locate_blob(t.root, "././blob/small.bin").state, BlobState::kOk);
  const auto slash = locate_blob(t.root.string() + "/", "./blob/small.bin");
  EXPECT_EQ(slash.state, BlobState::kOk) << slash.message;
  EXPECT_EQ(slash.path, fs::canonical(t.root / "blob/small.bin"));
  const fs::path cwd = fs::current_path();
  fs::current_path(t.tmp.path());
  const auto rel = locate_blob("ds", "./blob/small.bin");
  fs::current_path(cwd);
  EXPECT_EQ(rel.state, BlobState::kOk) << rel.message;
  EXPECT_EQ(rel.path, fs::canonical(t.root / "blob/small.bin"));
}

TEST(LocateBlob, SymlinkThatStaysInsideTheRootIsFollowed) {
  BlobTree t;
  fs::create_symlink("../small.bin", t.root / "blob" / "workloads" / "alias.bin");
  const auto loc = locate_blob(t.root, "./blob/workloads/alias.bin");
  EXPECT_EQ(loc.state, BlobState::kOk) << loc.message;
  EXPECT_EQ(loc.path, fs::canonical(t.root / "blob/small.bin"));
}

TEST(LocateBlob, AbsolutePathIsRefused) {
  BlobTree t;
  const std::string abs = (t.root / "blob/small.bin").string();
  const auto loc = locate_blob(t.root, abs);
  EXPECT_EQ(loc.state, BlobState::kUnsafePath);
  EXPECT_EQ(loc.message, "blob path '" + abs + "' must be relative to the dataset root");
  EXPECT_EQ(locate_blob(t.root, "").state, BlobState::kUnsafePath);
  EXPECT_EQ(locate_blob(t.root, "./").message,
            "blob path './' must be relative to the dataset root");
  EXPECT_EQ(locate_blob(t.root, ".//etc/passwd").state, BlobState::kUnsafePath);
}

TEST(LocateBlob, DotDotIsRefusedEvenWhenItWouldStayInside) {
  BlobTree t;
  const auto out = locate_blob(t.root, "./blob/../../outside/secret.safetensors");
  EXPECT_EQ(out.state, BlobState::kUnsafePath);
  EXPECT_EQ(
      out.message,
      "blob path './blob/../../outside/secret.safetensors' climbs out of the dataset with '..'");
  EXPECT_EQ(locate_blob(t.root, "blob/workloads/../small.bin").state, BlobState::kUnsafePath);
  EXPECT_EQ(locate_blob(t.root, "..").state, BlobState::kUnsafePath);
  // ".." inside a name is not a parent reference.
  t.tmp.write("ds/blob/a..b", "dots");
  EXPECT_EQ(locate_blob(t.root, "./blob/a..b").state, BlobState::kOk);
}

TEST(LocateBlob, SymlinkEscapingTheRootIsRefused) {
  BlobTree t;
  fs::create_symlink(t.tmp.path() / "outside" / "secret.safetensors", t.root / "blob" / "esc");
  const auto loc = locate_blob(t.root, "./blob/esc");
  EXPECT_EQ(loc.state, BlobState::kOutsideRoot);
  const fs::path real = fs::canonical(t.tmp.path() / "outside" / "secret.safetensors");
  EXPECT_EQ(loc.message,
            "blob './blob/esc' resolves to " + real.string() + ", outside the dataset root");
  // A folder link, and a neighbour whose name merely starts with the root's name.
  fs::create_directory_symlink("../../outside", t.root / "blob" / "out_dir");
  EXPECT_EQ(locate_blob(t.root, "blob/out_dir/secret.safetensors").state, BlobState::kOutsideRoot);
  fs::create_directory_symlink("../../ds2", t.root / "blob" / "neighbour");
  EXPECT_EQ(locate_blob(t.root, "blob/neighbour/neighbour.bin").state, BlobState::kOutsideRoot);
}

TEST(LocateBlob, MissingFileAndFolderAreReported) {
  BlobTree t;
  const auto missing = locate_blob(t.root, "./blob/workloads/gemm/d/none.safetensors");
  EXPECT_EQ(missing.state, BlobState::kMissing);
  EXPECT_EQ(missing.message, "blob file './blob/workloads/gemm/d/none.safetensors' does not exist");
  EXPECT_EQ(locate_blob(t.root, "no/such/folder/x.safetensors").state, BlobState::kMissing);
  fs::create_symlink("nowhere.bin", t.root / "blob" / "dangling");
  EXPECT_EQ(locate_blob(t.root, "blob/dangling").state, BlobState::kMissing);

  const auto dir = locate_blob(t.root, "./blob/workloads");
  EXPECT_EQ(dir.state, BlobState::kNotAFile);
  EXPECT_EQ(dir.message, "blob './blob/workloads' is not a regular file");
}

TEST(LocateBlob, GitLfsPointerIsReportedWithThePullCommand) {
  BlobTree t;
  t.tmp.write("ds/blob/workloads/gemm/d/d_ptr.safetensors", pointer_text("2097152"));
  const auto loc = locate_blob(t.root, "./blob/workloads/gemm/d/d_ptr.safetensors");
  EXPECT_EQ(loc.state, BlobState::kLfsPointer);
  ASSERT_TRUE(loc.lfs);
  EXPECT_EQ(loc.lfs->oid, kOid);
  EXPECT_EQ(loc.lfs->size, 2097152u);
  EXPECT_EQ(loc.message,
            std::string("blob './blob/workloads/gemm/d/d_ptr.safetensors' is a Git LFS pointer (") +
                kOid +
                ", 2097152 bytes), not the data; run `git lfs pull --include "
                "\"blob/workloads/gemm/d/d_ptr.safetensors\"` in the dataset root");
  EXPECT_EQ(loc.path, fs::canonical(t.root / "blob/workloads/gemm/d/d_ptr.safetensors"));
  // A small file that is not a pointer is data.
  EXPECT_EQ(locate_blob(t.root, "blob/small.bin").state, BlobState::kOk);
}

}  // namespace
}  // namespace fib
