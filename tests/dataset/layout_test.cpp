// The dataset layout: canonical relative paths of each record kind.
#include <gtest/gtest.h>

#include <filesystem>

#include "fib/dataset/layout.h"

namespace fib {
namespace {

namespace fs = std::filesystem;

TEST(Layout, RecordPaths) {
  EXPECT_EQ(layout::definition_file("gemm", "gemm_n128_k2048").string(),
            "definitions/gemm/gemm_n128_k2048.json");
  EXPECT_EQ(layout::workloads_file("rmsnorm", "rmsnorm_h128").string(),
            "workloads/rmsnorm/rmsnorm_h128.jsonl");
  EXPECT_EQ(layout::solution_file("alice", "gemm", "gemm_n128_k2048", "fast_v2").string(),
            "solutions/alice/gemm/gemm_n128_k2048/fast_v2.json");
  EXPECT_EQ(layout::traces_file("alice", "moe", "moe_x").string(), "traces/alice/moe/moe_x.jsonl");
  EXPECT_TRUE(layout::definition_file("a", "b").is_relative());
}

TEST(Layout, BlobFileStripsDashesFromTheUuid) {
  EXPECT_EQ(layout::blob_file("moe", "moe_fp8", "5b074f60-cf5d-449d-b937-5e6ff0fa89b6").string(),
            "blob/workloads/moe/moe_fp8/moe_fp8_5b074f60cf5d449db9375e6ff0fa89b6.safetensors");
  // A uuid already without dashes (as in the corpus) maps to the same name.
  EXPECT_EQ(layout::blob_file("moe", "moe_fp8", "5b074f60cf5d449db9375e6ff0fa89b6"),
            layout::blob_file("moe", "moe_fp8", "5b074f60-cf5d-449d-b937-5e6ff0fa89b6"));
}

TEST(Layout, PathComponents) {
  EXPECT_TRUE(layout::is_path_component("gemm_n128_k2048"));
  EXPECT_TRUE(layout::is_path_component("a.b"));
  EXPECT_TRUE(layout::is_path_component("..."));
  EXPECT_FALSE(layout::is_path_component(""));
  EXPECT_FALSE(layout::is_path_component("."));
  EXPECT_FALSE(layout::is_path_component(".."));
  EXPECT_FALSE(layout::is_path_component("a/b"));
  EXPECT_FALSE(layout::is_path_component("/a"));
  EXPECT_FALSE(layout::is_path_component("a\\b"));
  EXPECT_FALSE(layout::is_path_component(std::string_view("a\0b", 3)));
}

}  // namespace
}  // namespace fib
