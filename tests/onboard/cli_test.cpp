// `fib onboard` and `fib models` end to end, through the fib executable of this build tree
// (skipped visibly when it has not been built).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <filesystem>

#include "fib/base/json.h"
#include "support/temp_dir.h"

namespace fib::onboard {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

struct Run {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

fs::path fib_exe() { return fs::path(FIB_BINARY_DIR) / "cli" / "fib"; }

Run run_fib(const std::string& args) {
  const std::string cmd = fib_exe().string() + " " + args + " 2>&1";
  Run r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

#define FIB_REQUIRE_EXE()     \
  if (!fs::exists(fib_exe())) \
  GTEST_SKIP() << "SKIPPED: " << fib_exe() << " is not built (build the fib target)"

TEST(OnboardCli, ModelsListsEveryBundledModel) {
  FIB_REQUIRE_EXE();
  const auto r = run_fib("models");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(
      r.output,
      HasSubstr(
          "NAME                         FAMILY         LAYERS         PARAMETERS DEFINITIONS"));
  EXPECT_THAT(r.output,
              HasSubstr("deepseek-v3                  deepseek_v3        61   671B (37.6B act)"));
  EXPECT_THAT(
      r.output,
      HasSubstr(
          "llama-3.1-8b                 llama              32              8.03B          23"));
  const auto one = run_fib("models qwen3-next");
  EXPECT_EQ(one.exit_code, 0) << one.output;
  EXPECT_THAT(one.output, HasSubstr("layer type linear_attention"));
  EXPECT_THAT(one.output, HasSubstr("gdn/gdn_decode_qk16_v32_d128_k_last"));
}

TEST(OnboardCli, QuantizationComesFromTheConfigOrTheFlag) {
  FIB_REQUIRE_EXE();
  const auto ds = run_fib("models deepseek-v3");
  EXPECT_EQ(ds.exit_code, 0) << ds.output;
  EXPECT_THAT(ds.output, HasSubstr("gemm_fp8/gemm_fp8_nt_groupwise_n2112_k7168"));
  EXPECT_THAT(ds.output, HasSubstr("quantization/per_token_group_quant_fp8_k7168_g128"));
  ::fib::testing::TempDir dir;
  const auto none = run_fib("onboard --model deepseek-v3 --quantization none --dry-run --dataset " +
                            dir.path().string());
  EXPECT_EQ(none.exit_code, 0) << none.output;
  EXPECT_THAT(none.output, HasSubstr("linear layers none"));
  EXPECT_THAT(none.output, Not(HasSubstr("gemm_fp8_nt_groupwise")));
  const auto bad = run_fib(
      "onboard --model deepseek-v3 --quantization fp8-blocks --dry-run "
      "--dataset " +
      dir.path().string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("fib onboard: unknown --quantization 'fp8-blocks'"));
  EXPECT_THAT(bad.output, HasSubstr("fp8-block"));
}

TEST(OnboardCli, UnknownModelListsTheClosest) {
  FIB_REQUIRE_EXE();
  ::fib::testing::TempDir dir;
  const auto r = run_fib("onboard --model llama-3-8b --dataset " + dir.path().string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output,
              HasSubstr("fib onboard: unknown model 'llama-3-8b'; closest: llama-3.1-8b"));
  EXPECT_THAT(r.output, HasSubstr("): deepseek-r1, deepseek-v2-lite"));
}

TEST(OnboardCli, OnboardsFromAConfigFileWithReportAndGraph) {
  FIB_REQUIRE_EXE();
  ::fib::testing::TempDir dir;
  const auto config =
      dir.write("config.json", R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "hidden_size": 2048, "num_hidden_layers": 28, "vocab_size": 151936, "num_attention_heads": 16,
    "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 6144, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000, "tie_word_embeddings": true})");
  const auto ds = dir.path() / "dataset";
  const auto r = run_fib("onboard --config " + config.string() +
                         " --model-name qwen3-1.7b --tp 1,2 --dataset " + ds.string() +
                         " --report " + (dir.path() / "report.json").string() + " --graph " +
                         (dir.path() / "graph.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // 22 GEMM, norm, attention, RoPE and sampling kernels, the embedding, the SiLU-and-mul, SGLang's
  // min-p sampler and top-k / top-p renormalization, TP 2's all-reduce and logits all-gather, and
  // the paged KV append per page size and KV heads per rank.
  EXPECT_THAT(r.output, HasSubstr("33 definitions: 33 created"));
  EXPECT_THAT(r.output, HasSubstr("\n  page_append/append_paged_kv_cache_kv4_d128_ps64\n"));
  EXPECT_THAT(r.output, HasSubstr("\n  embedding/embedding_v151936_h2048\n"));
  EXPECT_THAT(r.output, HasSubstr("\n  activation/silu_and_mul_h12288\n"));
  EXPECT_THAT(r.output, HasSubstr("\n  gemm/gemm_n151936_k2048\n"));
  EXPECT_THAT(r.output, HasSubstr("gqa_paged/gqa_paged_decode_h8_kv4_d128_ps64"));
  EXPECT_TRUE(fs::exists(ds / "definitions/rmsnorm/rmsnorm_h128.json"));
  Diagnostics diag;
  const auto report = read_json_file((dir.path() / "report.json").string(), diag);
  ASSERT_TRUE(report) << diag.to_string();
  EXPECT_EQ((*report)["model"]["slug"], "qwen3-1.7b");
  const auto graph = read_json_file((dir.path() / "graph.json").string(), diag);
  ASSERT_TRUE(graph) << diag.to_string();
  EXPECT_EQ((*graph)["modules"]["layers"]["count"], 28);
}

TEST(OnboardCli, UsageErrors) {
  FIB_REQUIRE_EXE();
  EXPECT_THAT(run_fib("onboard --dataset /tmp/x").output,
              HasSubstr("give exactly one of --config"));
  const auto stage = run_fib("onboard --model qwen3-8b --stages prefil --dataset /tmp/x --dry-run");
  EXPECT_EQ(stage.exit_code, 2);
  EXPECT_THAT(stage.output, HasSubstr("unknown stage 'prefil' (did you mean 'prefill'?)"));
  const auto op = run_fib("onboard --model qwen3-8b --op-types gem --dataset /tmp/x --dry-run");
  EXPECT_THAT(op.output, HasSubstr("unknown op type 'gem' (did you mean 'gemm'?)"));
  const auto cfg =
      run_fib("onboard --config /nonexistent/config.json --model-name x --dataset /tmp/x");
  EXPECT_EQ(cfg.exit_code, 2);
  EXPECT_THAT(cfg.output, HasSubstr("/nonexistent/config.json"));
}

}  // namespace
}  // namespace fib::onboard
