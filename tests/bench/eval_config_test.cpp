// Eval config: built-in defaults, the order of the layers (dtype < op_type < definition < top
// level < command line), key-wise `extra` merging, integer outputs staying exact, and the
// YAML reader's messages (unknown keys with suggestions, wrong types, negative tolerances).
#include "fib/bench/eval/eval_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "support/temp_dir.h"

namespace fib::bench {
namespace {

TensorSpec output(const std::string& name, DType dtype) {
  TensorSpec s;
  s.name = name;
  s.shape = std::vector<std::string>{"n"};
  s.dtype = dtype;
  return s;
}

Definition def(const std::string& name, const std::string& op_type,
               std::vector<TensorSpec> outputs) {
  Definition d;
  d.name = name;
  d.op_type = op_type;
  d.outputs = std::move(outputs);
  return d;
}

const Definition kRmsnorm = def("rmsnorm_h4096", "rmsnorm", {output("output", DType::kBFloat16)});

// The message of the fib::Error that parsing `yaml` throws.
std::string parse_error(const std::string& yaml) {
  try {
    parse_eval_config(yaml, "eval.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(EvalConfig, BuiltinDefaults) {
  const ResolvedEval r = resolve_eval(builtin_eval_config(), nullptr, {}, kRmsnorm, "output");
  EXPECT_EQ(r.warmup_runs, 10);
  EXPECT_EQ(r.iterations, 50);
  EXPECT_EQ(r.num_trials, 3);
  EXPECT_EQ(r.rtol, 1e-2);
  EXPECT_EQ(r.atol, 1e-2);
  EXPECT_FALSE(r.required_matched_ratio.has_value());
  EXPECT_EQ(r.max_nmse, 1e-2);
  EXPECT_TRUE(r.extra.empty());
  EXPECT_EQ(r.sources,
            "warmup_runs=10 (default); iterations=50 (default); num_trials=3 (default); "
            "rtol=0.01 (default); atol=0.01 (default); max_nmse=0.01 (default)");
}

TEST(EvalConfig, BuiltinOpTypeLayers) {
  const EvalConfigFile b = builtin_eval_config();
  const ResolvedEval moe = resolve_eval(
      b, nullptr, {}, def("moe_x", "moe", {output("output", DType::kBFloat16)}), "output");
  EXPECT_EQ(moe.required_matched_ratio, 0.95);
  EXPECT_EQ(moe.max_nmse, 0.1);
  EXPECT_EQ(moe.rtol, 1e-2);

  const ResolvedEval s =
      resolve_eval(b, nullptr, {}, def("top_p_sampling_from_probs_v128256", "sampling", {}), "");
  EXPECT_EQ(s.extra_int("sampling_validation_trials", 0), 100);
  EXPECT_EQ(s.extra_number("sampling_tvd_threshold", 0), 0.2);
  EXPECT_EQ(s.extra_int("sampling_draws_per_row", 0), 100000);
  EXPECT_EQ(s.extra_number("sampling_chi2_alpha", 0), 1e-6);
  EXPECT_EQ(s.extra_number("sampling_top_p_epsilon", 0), 1e-3);
  EXPECT_EQ(s.extra_number("absent", 7.5), 7.5);

  // quantization: one e4m3 unit per element, both outputs, and a tight aggregate bound.
  const Definition quant =
      def("q", "quantization",
          {output("output_q", DType::kFloat8E4M3FN), output("output_s", DType::kFloat32)});
  for (const char* out : {"output_q", "output_s"}) {
    const ResolvedEval q = resolve_eval(b, nullptr, {}, quant, out);
    EXPECT_EQ(q.rtol, 0.125) << out;
    EXPECT_EQ(q.atol, 0x1p-9) << out;
    EXPECT_EQ(q.max_nmse, 1e-4) << out;
  }

  const ResolvedEval fp8 =
      resolve_eval(b, nullptr, {}, def("x", "gemm", {output("y", DType::kFloat8E4M3FN)}), "y");
  EXPECT_EQ(fp8.rtol, 0.125);
  EXPECT_EQ(fp8.atol, 1e-2);
}

TEST(EvalConfig, IntegerOutputsStayExactUnderFloatTolerances) {
  const Definition d = def("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", "dsa_paged",
                           {output("topk_indices", DType::kInt32)});
  const EvalConfigFile user = parse_eval_config(
      "atol: 0.5\ndefinition_config:\n  dsa_topk_indexer_fp8_h64_d128_topk2048_ps64: {rtol: 0.2}\n",
      "eval.yaml");
  EvalSettings cli;
  cli.atol = 0.25;
  const ResolvedEval r = resolve_eval(builtin_eval_config(), &user, cli, d, "topk_indices");
  EXPECT_EQ(r.rtol, 0);
  EXPECT_EQ(r.atol, 0);
  EXPECT_EQ(r.sources,
            "warmup_runs=10 (default); iterations=50 (default); num_trials=3 (default); "
            "rtol=0 (built-in dtype_config.int32); atol=0 (built-in dtype_config.int32); "
            "max_nmse=0.01 (default); extra.topk_score_rtol=0.01 (built-in "
            "op_type_config.dsa_paged); extra.topk_score_atol=1e-06 (built-in "
            "op_type_config.dsa_paged); int32 output 'topk_indices' compares exactly unless "
            "dtype_config says otherwise, so these do not apply: rtol from "
            "definition_config.dsa_topk_indexer_fp8_h64_d128_topk2048_ps64 in eval.yaml, atol "
            "from the top level in eval.yaml, atol from command line");

  // dtype_config is where an integer tolerance is set.
  const EvalConfigFile loose = parse_eval_config("dtype_config: {int32: {atol: 1}}\n", "e.yaml");
  EXPECT_EQ(resolve_eval(builtin_eval_config(), &loose, {}, d, "topk_indices").atol, 1);
}

// Each layer overrides the one below it: dtype < op_type < definition < top level < CLI.
TEST(EvalConfig, EachLayerOverridesTheOneBelow) {
  const std::string dtype = "dtype_config: {bfloat16: {atol: 1}}\n";
  const std::string op = "op_type_config: {rmsnorm: {atol: 2}}\n";
  const std::string defn = "definition_config: {rmsnorm_h4096: {atol: 3}}\n";
  const std::string top = "atol: 4\n";
  const EvalConfigFile b = builtin_eval_config();
  auto atol = [&](const std::string& yaml, std::optional<double> cli_atol) {
    const EvalConfigFile u = parse_eval_config(yaml, "eval.yaml");
    EvalSettings cli;
    cli.atol = cli_atol;
    const ResolvedEval r = resolve_eval(b, &u, cli, kRmsnorm, "output");
    return std::make_pair(r.atol, r.sources);
  };
  EXPECT_EQ(atol("", std::nullopt).first, 0.01);
  EXPECT_EQ(atol(dtype, std::nullopt).first, 1);
  EXPECT_EQ(atol(dtype + op, std::nullopt).first, 2);
  EXPECT_EQ(atol(dtype + op + defn, std::nullopt).first, 3);
  EXPECT_EQ(atol(top + dtype + op + defn, std::nullopt).first, 4);
  const auto [value, sources] = atol(top + dtype + op + defn, 5);
  EXPECT_EQ(value, 5);
  EXPECT_NE(sources.find("atol=5 (command line)"), std::string::npos) << sources;
  // The top level beats the definition layer even when written first (upstream PR #411).
  EXPECT_NE(atol(top + defn, std::nullopt).second.find("atol=4 (the top level in eval.yaml)"),
            std::string::npos);
  // Layers of other definitions / op types / dtypes do not apply.
  EXPECT_EQ(atol("definition_config: {rmsnorm_h2048: {atol: 3}}\n"
                 "op_type_config: {gemm: {atol: 2}}\ndtype_config: {float16: {atol: 1}}\n",
                 std::nullopt)
                .first,
            0.01);
}

TEST(EvalConfig, CliBeatsEverything) {
  const EvalConfigFile u = parse_eval_config(
      "warmup_runs: 3\niterations: 7\ndefinition_config:\n  rmsnorm_h4096: {num_trials: 9, "
      "rtol: 0.5}\n",
      "eval.yaml");
  EvalSettings cli;
  cli.warmup_runs = 1;
  cli.num_trials = 2;
  cli.rtol = 0.125;
  const ResolvedEval r = resolve_eval(builtin_eval_config(), &u, cli, kRmsnorm, "output");
  EXPECT_EQ(r.warmup_runs, 1);
  EXPECT_EQ(r.iterations, 7);
  EXPECT_EQ(r.num_trials, 2);
  EXPECT_EQ(r.rtol, 0.125);
}

TEST(EvalConfig, ExtraMergesKeyByKey) {
  const EvalConfigFile u = parse_eval_config(
      "op_type_config:\n  sampling: {extra: {sampling_tvd_threshold: 0.3}}\n"
      "definition_config:\n  top_k_sampling_from_probs_v128256:\n"
      "    extra: {sampling_validation_trials: 5}\n",
      "eval.yaml");
  const Definition d = def("top_k_sampling_from_probs_v128256", "sampling", {});
  EvalSettings cli;
  cli.extra["sampling_draws_per_row"] = 1000;
  const ResolvedEval r = resolve_eval(builtin_eval_config(), &u, cli, d, "");
  EXPECT_EQ(r.extra.dump(),
            "{\"sampling_validation_trials\":5,\"sampling_tvd_threshold\":0.3,"
            "\"sampling_draws_per_row\":1000,\"sampling_chi2_alpha\":1e-06,"
            "\"sampling_top_p_epsilon\":0.001}");
}

TEST(EvalConfig, ReadsUpstreamBundledFile) {
  // flashinfer_bench/bench/eval_config.yaml, as shipped.
  const EvalConfigFile u = parse_eval_config(
      "# Per op_type / per definition eval config overrides.\n"
      "op_type_config:\n  moe:\n    required_matched_ratio: 0.95\n  lowbit:\n"
      "    required_matched_ratio: 0.95\n  sampling:\n    extra:\n"
      "      sampling_validation_trials: 100\n      sampling_tvd_threshold: 0.2\n",
      "eval_config.yaml");
  ASSERT_EQ(u.op_type.size(), 3u);
  EXPECT_EQ(u.op_type.at("lowbit").required_matched_ratio, 0.95);
  EXPECT_EQ(u.op_type.at("sampling").extra.dump(),
            "{\"sampling_validation_trials\":100,\"sampling_tvd_threshold\":0.2}");
  EXPECT_TRUE(u.top.empty());
  // Upstream's deprecated top-level spelling lands in extra; null means unset.
  const EvalConfigFile old =
      parse_eval_config("sampling_tvd_threshold: 0.25\nrtol: null\n", "old.yaml");
  EXPECT_EQ(old.top.extra.dump(), "{\"sampling_tvd_threshold\":0.25}");
  EXPECT_FALSE(old.top.rtol.has_value());
  EXPECT_TRUE(parse_eval_config("", "empty.yaml").top.empty());
  EXPECT_TRUE(parse_eval_config("# only a comment\n", "c.yaml").op_type.empty());
}

TEST(EvalConfig, UnknownKeysNameFileLineAndPathWithSuggestion) {
  EXPECT_EQ(parse_error("rtoll: 0.1\n"),
            "eval.yaml:1: $.rtoll: error: unknown key 'rtoll' (did you mean 'rtol'?)");
  EXPECT_EQ(parse_error("op_type_config:\n  moe:\n    requird_matched_ratio: 0.9\n"),
            "eval.yaml:3: $.op_type_config.moe.requird_matched_ratio: error: unknown key "
            "'requird_matched_ratio' (did you mean 'required_matched_ratio'?)");
  EXPECT_EQ(parse_error("op_type_config:\n  sampling:\n    extra: {sampling_tvd_treshold: 0.1}\n"),
            "eval.yaml:3: $.op_type_config.sampling.extra.sampling_tvd_treshold: error: unknown "
            "extra key 'sampling_tvd_treshold' (did you mean 'sampling_tvd_threshold'?)");
  EXPECT_EQ(parse_error("dtype_config:\n  in32: {atol: 0}\n"),
            "eval.yaml:2: $.dtype_config.in32: error: unknown dtype 'in32' (did you mean "
            "'int32'?)");
  EXPECT_EQ(parse_error("dtype_config:\n  int32: {warmup_runs: 0}\n"),
            "eval.yaml:2: $.dtype_config.int32.warmup_runs: error: 'warmup_runs' cannot be set "
            "per dtype (dtype_config holds rtol, atol, required_matched_ratio and max_nmse)");
  EXPECT_EQ(parse_error("timeout_seconds: 10\n"),
            "eval.yaml:1: $.timeout_seconds: error: unknown key 'timeout_seconds' (expected one "
            "of: warmup_runs, iterations, num_trials, rtol, atol, required_matched_ratio, "
            "max_nmse, extra, sampling_validation_trials, sampling_tvd_threshold, dtype_config, "
            "op_type_config, ...)");
}

TEST(EvalConfig, WrongTypesAndRanges) {
  EXPECT_EQ(parse_error("iterations: ten\n"),
            "eval.yaml:1: $.iterations: error: expected an integer, found string ten");
  EXPECT_EQ(parse_error("iterations: 2.5\n"),
            "eval.yaml:1: $.iterations: error: expected an integer, found number 2.5");
  EXPECT_EQ(parse_error("rtol: '0.1'\n"),
            "eval.yaml:1: $.rtol: error: expected a number, found string \"0.1\"");
  EXPECT_EQ(parse_error("rtol: true\n"),
            "eval.yaml:1: $.rtol: error: expected a number, found boolean true");
  EXPECT_EQ(parse_error("atol: [1]\n"),
            "eval.yaml:1: $.atol: error: expected a number, found a list");
  EXPECT_EQ(parse_error("definition_config:\n  x:\n    atol: -0.1\n"),
            "eval.yaml:3: $.definition_config.x.atol: error: negative tolerance: atol must be >= "
            "0, found -0.1");
  EXPECT_EQ(parse_error("op_type_config: {moe: {required_matched_ratio: 1.5}}\n"),
            "eval.yaml:1: $.op_type_config.moe.required_matched_ratio: error: "
            "required_matched_ratio must be in (0, 1], found 1.5");
  EXPECT_EQ(parse_error("num_trials: 0\n"),
            "eval.yaml:1: $.num_trials: error: num_trials must be >= 1, found 0");
  EXPECT_EQ(parse_error("rtol: .nan\n"),
            "eval.yaml:1: $.rtol: error: rtol must be >= 0, found .nan");
  EXPECT_EQ(parse_error("op_type_config: 5\n"),
            "eval.yaml:1: $.op_type_config: error: expected a mapping, found integer 5");
  EXPECT_EQ(parse_error("extra: {sampling_chi2_alpha: 1}\n"),
            "eval.yaml:1: $.extra.sampling_chi2_alpha: error: sampling_chi2_alpha must be in (0, "
            "1), found 1");
  EXPECT_EQ(parse_error("rtol: 0.1\nrtol: 0.2\n"),
            "eval.yaml:2: $.rtol: error: duplicate key 'rtol'");
  EXPECT_EQ(parse_error("- 1\n- 2\n"), "eval.yaml:1: $: error: expected a mapping, found a list");
  // .inf disables a bound and is accepted.
  EXPECT_EQ(parse_eval_config("max_nmse: .inf\n", "e.yaml").top.max_nmse,
            std::numeric_limits<double>::infinity());
}

TEST(EvalConfig, ReportsEveryProblemAtOnce) {
  try {
    parse_eval_config("rtol: -1\natol: x\nwarmup: 3\n", "eval.yaml");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    ASSERT_EQ(e.diagnostics().size(), 3u);
    EXPECT_EQ(e.diagnostics().items()[2].to_string(),
              "eval.yaml:3: $.warmup: error: unknown key 'warmup' (did you mean 'warmup_runs'?)");
  }
}

TEST(EvalConfig, SyntaxErrorsAndFiles) {
  EXPECT_EQ(parse_error("a: [1,\n b"),
            "eval.yaml:2: error: invalid YAML: end of sequence flow not found");
  testing::TempDir dir;
  const auto path = dir.write("eval.yaml", "iterations: 20\n");
  EXPECT_EQ(load_eval_config(path).top.iterations, 20);
  EXPECT_EQ(load_eval_config(path).origin, path.string());
  try {
    load_eval_config(dir.path() / "missing.yaml");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir.path() / "missing.yaml").string() + ": error: cannot read the eval config");
  }
}

TEST(EvalConfig, CommandLineLayerIsChecked) {
  EvalSettings cli;
  cli.rtol = -0.5;
  cli.iterations = 0;
  cli.extra["sampling_draws"] = 5;
  try {
    check_eval_settings(cli, "command line");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "command line: iterations: error: iterations must be >= 1, found 0\n"
              "command line: rtol: error: negative tolerance: rtol must be >= 0, found -0.5\n"
              "command line: extra.sampling_draws: error: unknown extra key 'sampling_draws' (did "
              "you mean 'sampling_draws_per_row'?)");
  }
  EvalSettings ok;
  ok.rtol = 0;
  EXPECT_NO_THROW(check_eval_settings(ok, "command line"));
}

TEST(EvalConfig, NamesNobodyHasAreWarnings) {
  const EvalConfigFile u = parse_eval_config(
      "op_type_config: {mo: {rtol: 0.1}}\ndefinition_config: {rmsnorm_h4069: {rtol: 0.1}}\n",
      "eval.yaml");
  const std::vector<std::string> ops = {"moe", "rmsnorm"};
  const std::vector<std::string> defs = {"rmsnorm_h4096"};
  const Diagnostics d = check_eval_config_names(u, ops, defs);
  EXPECT_EQ(d.to_string(),
            "eval.yaml: $.op_type_config.mo: warning: no definition has op_type 'mo'; this layer "
            "applies to nothing (did you mean 'moe'?)\n"
            "eval.yaml: $.definition_config.rmsnorm_h4069: warning: no definition is named "
            "'rmsnorm_h4069'; this layer applies to nothing (did you mean 'rmsnorm_h4096'?)\n");
  EXPECT_FALSE(d.has_errors());
}

TEST(EvalConfig, UnknownOutputAndJson) {
  EXPECT_THROW(resolve_eval(builtin_eval_config(), nullptr, {}, kRmsnorm, "outptu"), Error);
  const auto all = resolve_eval_outputs(
      builtin_eval_config(), nullptr, {},
      def("x", "gqa_paged", {output("output", DType::kBFloat16), output("lse", DType::kFloat32)}));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(to_json(all.at("lse")).dump(),
            "{\"warmup_runs\":10,\"iterations\":50,\"num_trials\":3,\"rtol\":0.01,\"atol\":0.01,"
            "\"required_matched_ratio\":null,\"max_nmse\":0.01,\"extra\":{}}");
}

}  // namespace
}  // namespace fib::bench
