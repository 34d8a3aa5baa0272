// check_definition_reference: a top-level run() whose parameters are exactly the inputs, in
// input order; every rule with a failing example, and the corpus's known order mismatches.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "support/test_paths.h"
#include "trace_test_util.h"

namespace fib {
namespace {

using trace_test::json;
using trace_test::kFile;
using trace_test::OnlyError;

bool check(const Definition& d, Diagnostics& diag) {
  ReadContext ctx{std::string(kFile), &diag};
  return check_definition_reference(d, ctx);
}

Definition paged_with_reference(const std::string& reference) {
  Json j = trace_test::paged_definition_json();
  j["reference"] = reference;
  return trace_test::must_parse_definition(j);
}

constexpr const char* kPagedRunHint =
    "define `def run(q, k_cache, kv_indptr, kv_indices, alibi_slopes, sm_scale, window_left, "
    "causal):` at column 0";

TEST(CheckDefinitionReference, MatchingRunPasses) {
  Diagnostics diag;
  EXPECT_TRUE(check(trace_test::paged_definition(), diag));
  EXPECT_TRUE(diag.empty()) << diag.to_string();
}

TEST(CheckDefinitionReference, MultiLineAnnotatedRunPasses) {
  const Definition d = paged_with_reference(
      "import torch\n"
      "\n"
      "def helper(x, y):\n"
      "    return x\n"
      "\n"
      "@torch.no_grad()\n"
      "def run(\n"
      "    q: torch.Tensor,  # [batch_size, num_qo_heads, head_dim]\n"
      "    k_cache: torch.Tensor,\n"
      "    kv_indptr: torch.Tensor,\n"
      "    kv_indices: torch.Tensor,\n"
      "    alibi_slopes: Optional[torch.Tensor] = None,\n"
      "    sm_scale: float = 1.0,\n"
      "    window_left: int = -1,\n"
      "    causal: bool = False,\n"
      ") -> Tuple[torch.Tensor, torch.Tensor]:\n"
      "    return helper(q, k_cache)\n");
  Diagnostics diag;
  EXPECT_TRUE(check(d, diag));
  EXPECT_TRUE(diag.empty()) << diag.to_string();
}

TEST(CheckDefinitionReference, NoRunAtAll) {
  Diagnostics diag;
  EXPECT_FALSE(check(paged_with_reference("import torch\n\ndef main(q):\n    return q\n"), diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.reference", "reference has no top-level function 'run'", kPagedRunHint}));
}

TEST(CheckDefinitionReference, RunOnlyAsAMethodIsNotTopLevel) {
  Diagnostics diag;
  EXPECT_FALSE(check(paged_with_reference("import torch\n"
                                          "\n"
                                          "class Impl:\n"
                                          "    def run(self, q, k_cache):\n"
                                          "        return q\n"),
                     diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.reference", "reference has no top-level function 'run'", kPagedRunHint}));
}

TEST(CheckDefinitionReference, RunOnlyNestedInAnotherFunctionIsNotTopLevel) {
  Diagnostics diag;
  EXPECT_FALSE(check(paged_with_reference("def outer():\n"
                                          "    def run(q, k_cache):\n"
                                          "        return q\n"
                                          "    return run\n"),
                     diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.reference", "reference has no top-level function 'run'", kPagedRunHint}));
}

TEST(CheckDefinitionReference, RunOnlyInsideADocstringDoesNotCount) {
  Diagnostics diag;
  EXPECT_FALSE(check(paged_with_reference("\"\"\"Usage:\n"
                                          "\n"
                                          "def run(q, k_cache, kv_indptr, kv_indices):\n"
                                          "    ...\n"
                                          "\"\"\"\n"
                                          "\n"
                                          "def _run(q):\n"
                                          "    return q\n"),
                     diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.reference", "reference has no top-level function 'run'", kPagedRunHint}));
}

TEST(CheckDefinitionReference, ParameterThatIsNotAnInput) {
  Diagnostics diag;
  EXPECT_FALSE(
      check(paged_with_reference("import torch\n\n"
                                 "def run(q, k_cache, kv_indptr, kv_indices, alibi_slopes, "
                                 "sm_scale, window_left, causal, scale):\n"
                                 "    return q\n"),
            diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.reference", "run() parameter 'scale' (line 3) is not an input of the definition",
             "did you mean 'sm_scale'?"}));
}

TEST(CheckDefinitionReference, InputThatIsNotAParameter) {
  Diagnostics diag;
  EXPECT_FALSE(check(paged_with_reference("def run(q, k_cache, kv_indptr, kv_indices, "
                                          "alibi_slopes, sm_scale, window_left):\n"
                                          "    return q\n"),
                     diag));
  EXPECT_TRUE(OnlyError(diag, {"$.reference", "input 'causal' is not a parameter of run() (line 1)",
                               "expected one of: q, k_cache, kv_indptr, kv_indices, alibi_slopes, "
                               "sm_scale, window_left"}));
}

TEST(CheckDefinitionReference, RenamedParameterGivesBothFindingsWithSuggestions) {
  Diagnostics diag;
  EXPECT_FALSE(check(paged_with_reference("def run(q, k_cache, kv_indptr, kv_indices, "
                                          "alibi_slopes, sm_scale, window_left, is_causal):\n"
                                          "    return q\n"),
                     diag));
  ASSERT_EQ(diag.size(), 2u) << diag.to_string();
  EXPECT_TRUE(trace_test::HasError(
      diag,
      {"$.reference", "run() parameter 'is_causal' (line 1) is not an input of the definition",
       "did you mean 'causal'?"}));
  EXPECT_TRUE(trace_test::HasError(
      diag, {"$.reference", "input 'causal' is not a parameter of run() (line 1)",
             "did you mean 'is_causal'?"}));
}

TEST(CheckDefinitionReference, KeywordCatchAllCoversMissingInputs) {
  Diagnostics diag;
  EXPECT_TRUE(check(paged_with_reference("def run(q, k_cache, **kwargs):\n    return q\n"), diag));
  EXPECT_TRUE(diag.empty()) << diag.to_string();
}

TEST(CheckDefinitionReference, UnclosedParameterList) {
  Diagnostics diag;
  EXPECT_FALSE(check(paged_with_reference("def run(q, k_cache,\n    kv_indptr\n"), diag));
  EXPECT_TRUE(OnlyError(diag, {"$.reference",
                               "cannot read the parameters of run(): the parameter list of 'def "
                               "run' is not closed"}));
}

TEST(CheckDefinitionReference, RunWithoutParentheses) {
  Diagnostics diag;
  EXPECT_FALSE(check(paged_with_reference("def run:\n    pass\n"), diag));
  EXPECT_TRUE(OnlyError(diag, {"$.reference",
                               "cannot read the parameters of run(): 'def run' is not followed by "
                               "'('"}));
}

// Modelled on the corpus's Llama-4 MoE definitions: run() takes routing_bias second while
// `inputs` lists it last.
constexpr std::string_view kLlama4MoeDefinition = R"({
  "name": "trtllm_fp8_per_tensor_scale_moe_topk1_e16_h5120_i8192",
  "op_type": "moe",
  "axes": {
    "seq_len": {"type": "var"},
    "num_experts": {"type": "const", "value": 16},
    "hidden_size": {"type": "const", "value": 5120},
    "intermediate_size": {"type": "const", "value": 8192},
    "gemm1_out_size": {"type": "const", "value": 16384}
  },
  "constraints": [
    "gemm1_weights.shape[1] == 2 * intermediate_size",
    "gemm2_weights.shape[1] == hidden_size",
    "gemm2_weights.shape[2] == intermediate_size"
  ],
  "inputs": {
    "routing_logits": {"shape": ["seq_len", "num_experts"], "dtype": "bfloat16"},
    "hidden_states": {"shape": ["seq_len", "hidden_size"], "dtype": "float8_e4m3fn"},
    "gemm1_weights": {"shape": ["num_experts", "gemm1_out_size", "hidden_size"], "dtype": "float8_e4m3fn"},
    "output1_scales_scalar": {"shape": ["num_experts"], "dtype": "float32"},
    "output1_scales_gate_scalar": {"shape": ["num_experts"], "dtype": "float32"},
    "gemm2_weights": {"shape": ["num_experts", "hidden_size", "intermediate_size"], "dtype": "float8_e4m3fn"},
    "output2_scales_scalar": {"shape": ["num_experts"], "dtype": "float32"},
    "routing_bias": {"shape": ["num_experts"], "dtype": "bfloat16"}
  },
  "outputs": {"output": {"shape": ["seq_len", "hidden_size"], "dtype": "bfloat16"}},
  "reference": "import torch\n\n\n@torch.no_grad()\ndef run(\n    routing_logits: torch.Tensor,\n    routing_bias: torch.Tensor,\n    hidden_states: torch.Tensor,\n    gemm1_weights: torch.Tensor,\n    output1_scales_scalar: torch.Tensor,\n    output1_scales_gate_scalar: torch.Tensor,\n    gemm2_weights: torch.Tensor,\n    output2_scales_scalar: torch.Tensor,\n):\n    \"\"\"\n    Llama4 routing: sigmoid(logits) -> Top-1.\n    \"\"\"\n    return routing_logits\n"
})";

TEST(CheckDefinitionReference, OrderMismatchLikeTheLlama4MoeDefinitions) {
  const Definition d = trace_test::must_parse_definition(json(kLlama4MoeDefinition));
  Diagnostics diag;
  EXPECT_FALSE(check(d, diag));
  const std::string run_order =
      "run(routing_logits, routing_bias, hidden_states, gemm1_weights, output1_scales_scalar, "
      "output1_scales_gate_scalar, gemm2_weights, output2_scales_scalar)";
  const std::string input_order =
      "inputs [routing_logits, hidden_states, gemm1_weights, output1_scales_scalar, "
      "output1_scales_gate_scalar, gemm2_weights, output2_scales_scalar, routing_bias]";
  EXPECT_TRUE(OnlyError(
      diag, {"$.reference",
             "run() takes its parameters in a different order than `inputs` lists them: parameter "
             "2 is 'routing_bias' but input 2 is 'hidden_states' (" +
                 run_order + " vs " + input_order +
                 "); a caller that passes inputs positionally, as upstream FlashInfer-Bench does, "
                 "binds the wrong tensors",
             "reorder `inputs` to match run(), or run()'s parameters to match `inputs`"}));
  ASSERT_EQ(diag.size(), 1u);
  EXPECT_PRED_FORMAT2(trace_test::Contains, diag.items()[0].message, run_order);
  EXPECT_PRED_FORMAT2(trace_test::Contains, diag.items()[0].message, input_order);
}

TEST(CheckDefinitionReference, OrderMismatchInTheLastPlace) {
  const Definition d = paged_with_reference(
      "def run(q, k_cache, kv_indptr, kv_indices, alibi_slopes, sm_scale, causal, window_left):\n"
      "    return q\n");
  Diagnostics diag;
  EXPECT_FALSE(check(d, diag));
  ASSERT_EQ(diag.size(), 1u) << diag.to_string();
  EXPECT_PRED_FORMAT2(trace_test::Contains, diag.items()[0].message,
                      "parameter 7 is 'causal' but input 7 is 'window_left'");
}

// The corpus has exactly four definitions whose run() order differs from `inputs` (see the
// corpus README, known inconsistency 1); every other definition passes.
TEST(CheckDefinitionReference, CorpusHasExactlyTheFourLlama4OrderMismatches) {
  FIB_REQUIRE_CORPUS(corpus);
  std::vector<std::string> failing;
  int count = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(corpus / "definitions")) {
    if (e.path().extension() != ".json") continue;
    ++count;
    const Definition d = load_definition(e.path().string());
    Diagnostics diag;
    if (!check(d, diag)) {
      failing.push_back(d.name);
      ASSERT_EQ(diag.size(), 1u) << diag.to_string();
      EXPECT_PRED_FORMAT2(trace_test::Contains, diag.items()[0].message,
                          "parameter 2 is 'routing_bias' but input 2 is 'hidden_states'");
    } else {
      EXPECT_TRUE(diag.empty()) << d.name << ": " << diag.to_string();
    }
  }
  std::sort(failing.begin(), failing.end());
  EXPECT_EQ(count, 136);
  EXPECT_EQ(failing, (std::vector<std::string>{
                         "trtllm_fp4_block_scale_moe_topk1_e128_h5120_i8192",
                         "trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192",
                         "trtllm_fp8_per_tensor_scale_moe_topk1_e128_h5120_i8192",
                         "trtllm_fp8_per_tensor_scale_moe_topk1_e16_h5120_i8192",
                     }));
}

}  // namespace
}  // namespace fib
