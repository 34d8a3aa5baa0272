// End to end on the CPU for the op types that complete DeepSeek-V3's forward and have no other
// `fib run` test: the MLA weight absorption's batched GEMM (bmm), the collectives (comm) and the
// renormalizing and min-p samplers. `fib onboard` plans them, `fib workloads synth` sizes them,
// and `fib run` judges a correct solution (computed another way than the reference) and a
// wrong one of each, once against the definitions' PyTorch references and once against fib's
// native ones (a sampler only against the native one: its PyTorch reference gives draws, not
// the distribution the judge needs).
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

namespace fs = std::filesystem;

struct Case {
  std::string op_type, definition, name, source;
};

// Each definition's correct and wrong solution (PyTorch, on the CPU).
std::vector<Case> cases() {
  const std::string header = "import torch\n\n\n@torch.no_grad()\n";
  return {
      // einsum over fp32, not bmm; the wrong one reads B transposed back to front in K.
      {"bmm", "bmm_bf16_b16_n512_k128", "bmm_einsum",
       header + "def run(A, B):\n    return torch.einsum('bmk,bkn->bmn', A.float(), "
                "B.float()).to(A.dtype)\n"},
      {"bmm", "bmm_bf16_b16_n512_k128", "bmm_k_reversed",
       header + "def run(A, B):\n    return torch.bmm(A.float(), B.flip(1).float()).to(A.dtype)\n"},
      // A rank-by-rank running sum; the wrong one forgets the last rank.
      {"comm", "all_reduce_h7168", "all_reduce_ring",
       header + "def run(input):\n    acc = torch.zeros(input.shape[1:], dtype=torch.float32)\n"
                "    for r in range(input.shape[0]):\n        acc += input[r].float()\n"
                "    return acc.to(input.dtype)\n"},
      {"comm", "all_reduce_h7168", "all_reduce_drops_a_rank",
       header + "def run(input):\n    return input[:-1].float().sum(0).to(input.dtype)\n"},
      {"comm", "all_to_all_h7168", "all_to_all_permute",
       header + "def run(input):\n    return input.permute(1, 0, 2, 3).contiguous()\n"},
      {"comm", "all_to_all_h7168", "all_to_all_identity",
       header + "def run(input):\n    return input.clone()\n"},
      // topk + scatter instead of a sort; the wrong one keeps k + 1 tokens.
      {"sampling", "top_k_renorm_probs_v129280", "top_k_renorm_scatter",
       header + "def run(probs, top_k):\n    out = torch.empty_like(probs)\n"
                "    for i in range(probs.shape[0]):\n        k = int(top_k[i])\n        row = "
                "probs[i]\n"
                "        if 0 < k < row.numel():\n            v, idx = row.topk(k)\n"
                "            row = torch.zeros_like(row).scatter_(0, idx, v)\n"
                "        out[i] = row / row.sum()\n    return out\n"},
      {"sampling", "top_k_renorm_probs_v129280", "top_k_renorm_one_more",
       header + "def run(probs, top_k):\n    out = torch.empty_like(probs)\n"
                "    for i in range(probs.shape[0]):\n        k = int(top_k[i]) + 1\n        row = "
                "probs[i]\n"
                "        if 0 < k < row.numel():\n            v, idx = row.topk(k)\n"
                "            row = torch.zeros_like(row).scatter_(0, idx, v)\n"
                "        out[i] = row / row.sum()\n    return out\n"},
      // min-p draws from the kept tokens; the wrong one draws from the whole row.
      {"sampling", "min_p_sampling_from_probs_v129280", "min_p_masked",
       header + "def run(probs, min_p):\n"
                "    keep = probs >= min_p[:, None] * probs.max(dim=1, keepdim=True).values\n"
                "    return torch.multinomial(probs * keep, 1).squeeze(1)\n"},
      {"sampling", "min_p_sampling_from_probs_v129280", "min_p_ignores_min_p",
       header + "def run(probs, min_p):\n    return torch.multinomial(probs, 1).squeeze(1)\n"},
  };
}

// Each case's solution's status.
std::map<std::string, std::string> statuses(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const Case& c : cases()) {
    const auto all = solution_statuses(root, c.definition);
    if (const auto it = all.find(c.name); it != all.end()) out[c.name] = it->second;
  }
  return out;
}

const std::map<std::string, std::string> kExpected = {
    {"bmm_einsum", "PASSED"},           {"bmm_k_reversed", "INCORRECT_NUMERICAL"},
    {"all_reduce_ring", "PASSED"},      {"all_reduce_drops_a_rank", "INCORRECT_NUMERICAL"},
    {"all_to_all_permute", "PASSED"},   {"all_to_all_identity", "INCORRECT_NUMERICAL"},
    {"top_k_renorm_scatter", "PASSED"}, {"top_k_renorm_one_more", "INCORRECT_NUMERICAL"},
    {"min_p_masked", "PASSED"},         {"min_p_ignores_min_p", "INCORRECT_NUMERICAL"},
};

class ForwardOpsRun : public ::testing::TestWithParam<const char*> {};

TEST_P(ForwardOpsRun, CorrectAndWrongSolutionsOfBmmCommAndTheNewSamplers) {
  FIB_REQUIRE_TORCH(python);
  TempDir dir;
  const fs::path root = dir.path() / "dataset";
  fs::create_directories(root);
  const CommandResult onboard =
      run_fib({"onboard", "--model", "deepseek-v3", "--tp", "8", "--ep", "8", "--op-types",
               "bmm,comm,sampling", "--dataset", root.string(), "--quiet"});
  ASSERT_EQ(onboard.exit_code, 0) << onboard.out << onboard.err;
  const bool python_reference = std::string(GetParam()) == "python";
  auto judged = [&](const Case& c) { return !python_reference || !c.name.starts_with("min_p"); };
  std::vector<std::string> definitions;
  for (const Case& c : cases()) {
    if (!judged(c) || (!definitions.empty() && definitions.back() == c.definition)) continue;
    definitions.push_back(c.definition);
    const CommandResult w =
        run_fib({"workloads", "synth", "--dataset", root.string(), "--definition", c.definition,
                 "--count", "2", "--max-tokens", "16"});
    ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  }
  std::string names;
  for (const Case& c : cases())
    write_python_solution(root, c.op_type, c.definition, c.name, c.source);
  for (const auto& d : definitions) names += (names.empty() ? "" : ",") + d;
  const CommandResult r = run_fib({"run",
                                   "--local",
                                   root.string(),
                                   "--definitions",
                                   names,
                                   "--reference",
                                   GetParam(),
                                   "--warmup-runs",
                                   "0",
                                   "--iterations",
                                   "1",
                                   "--num-trials",
                                   "2",
                                   "--timeout",
                                   "120",
                                   "--seed",
                                   "5",
                                   "--python",
                                   python,
                                   "--build-cache",
                                   (dir.path() / "cache").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::map<std::string, std::string> expected;
  for (const Case& c : cases())
    if (judged(c)) expected[c.name] = kExpected.at(c.name);
  EXPECT_EQ(statuses(root), expected) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(References, ForwardOpsRun, ::testing::Values("python", "native"));

}  // namespace
}  // namespace fib::testing
