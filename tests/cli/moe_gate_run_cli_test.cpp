// End to end on the CPU: `fib onboard` plans DeepSeek-V3's MoE gate (moe_fused_gate) and
// moe_align_block_size, `fib workloads synth` sizes them, and `fib run` judges a correct and a
// wrong PyTorch solution of each against fib's native references, through the op families'
// canonical comparisons (a correct solution writes its own order; a wrong one fails).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/dataset/trace_set.h"
#include "python_solutions.h"
#include "reference/python_reference.h"
#include "run_fib.h"
#include "support/temp_dir.h"

namespace fib::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr const char* kGate = "moe_fused_gate_e256_k8_ng8_kg4";
constexpr const char* kAlign = "moe_align_block_size_e32_k8_bs64";

// The fused gate with ids in selection order (sgl-kernel's), not the reference's ascending
// order; `wrong` drops the correction bias from the selection.
std::string gate_source(bool wrong) {
  return std::string(R"(import torch


@torch.no_grad()
def run(input, bias, routed_scaling_factor):
    t, e = input.shape
    s = torch.sigmoid(input.float())
    b = s + )") +
         (wrong ? "0 * " : "") + R"(bias.float()
    g = b.view(t, 8, e // 8).topk(2, dim=-1).values.sum(-1)
    keep = torch.zeros_like(g).scatter_(1, g.topk(4, dim=-1).indices, 1.0)
    b = b.masked_fill(keep.repeat_interleave(e // 8, dim=1) == 0, float("-inf"))
    ids = b.topk(8, dim=-1).indices
    w = s.gather(1, ids)
    w = w / w.sum(-1, keepdim=True) * routed_scaling_factor
    return w, ids.to(torch.int32)
)";
}

// Each expert's entries in descending order (the reference's are ascending); `wrong` forgets
// to pad an expert's run to the block.
std::string align_source(bool wrong) {
  return std::string(R"(import torch


@torch.no_grad()
def run(topk_ids):
    flat = topk_ids.reshape(-1).long()
    numel, e, bs = flat.numel(), 32, 64
    total = numel + e * (bs - 1)
    ids = torch.full((total,), numel, dtype=torch.int32)
    experts = torch.full(((total + bs - 1) // bs,), -1, dtype=torch.int32)
    pos = 0
    for x in range(e):
        m = torch.nonzero(flat == x).flatten().flip(0)
        ids[pos:pos + m.numel()] = m.to(torch.int32)
        n = (m.numel() + bs - 1) // bs
        experts[pos // bs:pos // bs + n] = x
        pos += )") +
         (wrong ? "m.numel()" : "n * bs") + R"(
    return ids, experts, torch.tensor([pos], dtype=torch.int32)
)";
}

TEST(MoeGateRun, CorrectAndWrongSolutionsOfTheGateAndTheAlign) {
  FIB_REQUIRE_TORCH(python);
  TempDir dir;
  const fs::path root = dir.path() / "dataset";
  fs::create_directories(root);
  const CommandResult onboard =
      run_fib({"onboard", "--model", "deepseek-v3", "--tp", "8", "--ep", "8", "--op-types",
               "moe_routing,moe_align", "--dataset", root.string(), "--quiet"});
  ASSERT_EQ(onboard.exit_code, 0) << onboard.out << onboard.err;
  for (const char* def : {kGate, kAlign}) {
    const CommandResult w = run_fib({"workloads", "synth", "--dataset", root.string(),
                                     "--definition", def, "--count", "2", "--max-tokens", "64"});
    ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  }
  write_python_solution(root, "moe_routing", kGate, "gate_ok", gate_source(false));
  write_python_solution(root, "moe_routing", kGate, "gate_no_bias", gate_source(true));
  write_python_solution(root, "moe_align", kAlign, "align_ok", align_source(false));
  write_python_solution(root, "moe_align", kAlign, "align_unpadded", align_source(true));
  const CommandResult r =
      run_fib({"run", "--local", root.string(), "--definitions", std::string(kGate) + "," + kAlign,
               "--warmup-runs", "0", "--iterations", "1", "--num-trials", "2", "--timeout", "60",
               "--seed", "3", "--build-cache", (dir.path() / "cache").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(solution_statuses(root, kGate),
            (std::map<std::string, std::string>{{"gate_ok", "PASSED"},
                                                {"gate_no_bias", "INCORRECT_NUMERICAL"}}))
      << r.out;
  EXPECT_EQ(solution_statuses(root, kAlign),
            (std::map<std::string, std::string>{{"align_ok", "PASSED"},
                                                {"align_unpadded", "INCORRECT_NUMERICAL"}}))
      << r.out;
}

}  // namespace
}  // namespace fib::testing
