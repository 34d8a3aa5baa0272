// read_safetensors_header on files: reads only the header (so huge data sections cost
// nothing), and reports missing files, folders and short or corrupt files.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fib/tensor/safetensors_header.h"
#include "safetensors_bytes.h"
#include "support/temp_dir.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(ReadSafetensorsHeader, ReadsAFileOnDisk) {
  TempDir tmp;
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"I32","shape":[4],"data_offsets":[24,40]}})";
  const fs::path file = tmp.write("x.safetensors", testing::safetensors_bytes(header, 40));
  Diagnostics diag;
  const auto h = read_safetensors_header(file.string(), diag);
  ASSERT_TRUE(h) << diag.to_string();
  EXPECT_TRUE(diag.empty());
  EXPECT_EQ(h->header_bytes, header.size());
  EXPECT_EQ(h->data_bytes, 40u);
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->tensors[1].name, "b");
  EXPECT_EQ(h->tensors[1].begin, 24u);
  EXPECT_EQ(h->metadata.size(), 1u);
}

TEST(ReadSafetensorsHeader, HugeDataSectionIsNotRead) {
  // A 64 GiB data section (a sparse file: it takes no disk space). Reading it, rather than
  // just the header, would take minutes and more memory than the machine has.
  TempDir tmp;
  constexpr std::uint64_t kData = std::uint64_t{64} << 30;
  const std::string header =
      R"({"big":{"dtype":"BF16","shape":[32768,1048576],"data_offsets":[0,68719476736]}})";
  const fs::path file = tmp.write("big.safetensors", testing::safetensors_bytes(header, 0));
  std::error_code ec;
  fs::resize_file(file, 8 + header.size() + kData, ec);
  if (ec)
    GTEST_SKIP() << "SKIPPED: this file system cannot hold a 64 GiB sparse file: " << ec.message();
  Diagnostics diag;
  const auto h = read_safetensors_header(file.string(), diag);
  ASSERT_TRUE(h) << diag.to_string();
  EXPECT_EQ(h->data_bytes, kData);
  ASSERT_EQ(h->tensors.size(), 1u);
  EXPECT_EQ(h->tensors[0].shape, (std::vector<std::int64_t>{32768, 1048576}));
  EXPECT_EQ(h->tensors[0].end, kData);
}

TEST(ReadSafetensorsHeader, MissingFile) {
  TempDir tmp;
  const std::string path = (tmp.path() / "none.safetensors").string();
  Diagnostics diag;
  EXPECT_FALSE(read_safetensors_header(path, diag));
  ASSERT_EQ(diag.size(), 1u);
  EXPECT_EQ(diag.items()[0].file, path);
  EXPECT_EQ(diag.items()[0].message, "file not found");
  EXPECT_EQ(diag.to_string(), path + ": error: file not found\n");
}

TEST(ReadSafetensorsHeader, FolderAndLinkLoopAreNotFiles) {
  TempDir tmp;
  Diagnostics diag;
  EXPECT_FALSE(read_safetensors_header(tmp.path().string(), diag));
  ASSERT_EQ(diag.size(), 1u);
  EXPECT_EQ(diag.items()[0].message, "not a regular file");

  fs::create_symlink("loop.safetensors", tmp.path() / "loop.safetensors");
  Diagnostics loop;
  EXPECT_FALSE(read_safetensors_header((tmp.path() / "loop.safetensors").string(), loop));
  ASSERT_EQ(loop.size(), 1u);
  EXPECT_EQ(loop.items()[0].message, "symbolic link loop");
}

TEST(ReadSafetensorsHeader, ShortAndCorruptFiles) {
  TempDir tmp;
  struct Case {
    std::string name, bytes, message;
  };
  const Case cases[] = {
      {"empty", "", "not a safetensors file: 0 bytes, shorter than the 8-byte header length"},
      {"short", "abc", "not a safetensors file: 3 bytes, shorter than the 8-byte header length"},
      {"past_end", testing::le64(64) + "{}",
       "header length 64 runs past the end of the 10-byte file"},
      {"over_limit", testing::le64(kMaxSafetensorsHeaderBytes + 1) + "{}",
       "header length 104857601 exceeds the 104857600 byte limit (corrupt or not a safetensors "
       "file)"},
      {"text", std::string("hello world, not a tensor file"),
       "header length 8031924123371070824 exceeds the 104857600 byte limit (corrupt or not a "
       "safetensors file)"},
      {"trailing", testing::safetensors_bytes("{}", 2),
       "the last 2 bytes of the data section belong to no tensor"},
  };
  for (const Case& c : cases) {
    const fs::path file = tmp.write(c.name, c.bytes);
    Diagnostics diag;
    EXPECT_FALSE(read_safetensors_header(file.string(), diag)) << c.name;
    ASSERT_EQ(diag.size(), 1u) << c.name << ": " << diag.to_string();
    EXPECT_EQ(diag.items()[0].file, file.string()) << c.name;
    EXPECT_EQ(diag.items()[0].message, c.message) << c.name;
  }
}

}  // namespace
}  // namespace fib
