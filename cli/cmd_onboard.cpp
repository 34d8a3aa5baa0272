// fib onboard: derive every kernel definition a model runs from its config.json (or a bundled
// model) and a serving setup, deduplicated into a dataset; report as text and JSON.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "cli/commands.h"
#include "fib/base/json.h"
#include "fib/dataset/files.h"
#include "fib/onboard/generators.h"
#include "fib/onboard/model_registry.h"
#include "fib/onboard/onboard.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/suggest.h"

namespace fib::cli {

namespace {

struct OnboardArgs {
  std::string config;
  std::string model;
  std::string model_name;
  std::string display_name;
  std::vector<int> tp;
  std::vector<int> ep;
  std::vector<std::int64_t> page_sizes;
  std::vector<std::string> stages;
  bool include_quantized = false;
  bool mtp = false;
  std::vector<std::string> op_types;
  std::string gemm_shapes = "dataset";
  std::string quantization;  // empty: the model config's quantization_config
  std::string dataset;
  bool dry_run = false;
  std::string report;
  std::string graph;
  bool quiet = false;
};

// Loads the bundled models or explains where it looked.
std::vector<onboard::BundledModel> bundled_models() {
  Diagnostics diag;
  auto models = onboard::load_bundled_models(onboard::models_dir(), diag);
  if (diag.has_errors()) std::cerr << diag.to_string();
  return models;
}

std::string unknown_model_message(const std::vector<onboard::BundledModel>& models,
                                  const std::string& name) {
  const auto close = onboard::closest_models(models, name);
  std::vector<std::string> slugs;
  for (const auto& m : models) slugs.push_back(m.slug);
  std::string msg = fmt::format("fib onboard: unknown model '{}'", name);
  if (!close.empty()) msg += fmt::format("; closest: {}", fmt::join(close, ", "));
  msg += fmt::format(
      "\nbundled models ({}): {}\n(use --config PATH/config.json for any other model of a "
      "supported "
      "family; `fib models` lists them with details)\n",
      slugs.size(), fmt::join(slugs, ", "));
  return msg;
}

int run_onboard(const OnboardArgs& a) {
  const auto start = std::chrono::steady_clock::now();
  if (a.config.empty() == a.model.empty()) {
    std::cerr << "fib onboard: give exactly one of --config PATH/config.json or --model SLUG\n";
    return kExitUsage;
  }
  onboard::OnboardRequest req;
  std::vector<int> default_tp = {1}, default_ep = {1};
  std::optional<onboard::Quantization> default_quantization;
  if (!a.model.empty()) {
    const auto models = bundled_models();
    const auto* m = onboard::find_model(models, a.model);
    if (!m) {
      std::cerr << unknown_model_message(models, a.model);
      return kExitUsage;
    }
    Diagnostics diag;
    const ReadContext ctx{m->path.string() + ":config", &diag};
    auto cfg = onboard::normalize_config(m->config, ctx);
    if (!cfg || diag.has_errors()) {
      std::cerr << diag.to_string();
      return kExitUsage;
    }
    req.config = std::move(*cfg);
    req.slug = a.model_name.empty() ? m->slug : a.model_name;
    req.display_name = a.display_name.empty() ? m->display_name : a.display_name;
    req.source = m->path.string();
    default_tp = m->tp;
    default_ep = m->ep;
    default_quantization = m->quantization;
  } else {
    if (a.model_name.empty()) {
      std::cerr << "fib onboard: --model-name SLUG is required with --config (it becomes the "
                   "model: tag)\n";
      return kExitUsage;
    }
    req.config = onboard::load_model_config(a.config);
    req.slug = a.model_name;
    req.display_name = a.display_name.empty() ? a.model_name : a.display_name;
    req.source = a.config;
  }
  if (req.slug.empty() || req.slug.find_first_of(" \t,:/") != std::string::npos) {
    std::cerr << fmt::format(
        "fib onboard: --model-name '{}' must be a slug (no spaces, commas, colons or slashes)\n",
        req.slug);
    return kExitUsage;
  }

  auto& o = req.options;
  o.tp = a.tp.empty() ? default_tp : a.tp;
  o.ep = a.ep.empty() ? default_ep : a.ep;
  for (int v : o.tp) {
    if (v <= 0) {
      std::cerr << fmt::format("fib onboard: --tp values must be positive, found {}\n", v);
      return kExitUsage;
    }
  }
  for (int v : o.ep) {
    if (v <= 0) {
      std::cerr << fmt::format("fib onboard: --ep values must be positive, found {}\n", v);
      return kExitUsage;
    }
  }
  if (!a.page_sizes.empty()) o.page_sizes = a.page_sizes;
  for (auto p : o.page_sizes) {
    if (p <= 0) {
      std::cerr << fmt::format("fib onboard: --page-sizes values must be positive, found {}\n", p);
      return kExitUsage;
    }
  }
  if (!a.stages.empty()) {
    o.stages.clear();
    for (const auto& s : a.stages) {
      auto st = onboard::parse_stage(s);
      if (!st) {
        static constexpr std::string_view kStages[] = {"prefill", "decode", "mtp"};
        std::cerr << fmt::format("fib onboard: unknown stage '{}' ({})\n", s, suggest(s, kStages));
        return kExitUsage;
      }
      if (std::find(o.stages.begin(), o.stages.end(), *st) == o.stages.end())
        o.stages.push_back(*st);
    }
  }
  o.include_quantized = a.include_quantized;
  o.mtp = a.mtp;
  const auto known = onboard::generated_op_types();
  for (const auto& t : a.op_types) {
    if (std::find(known.begin(), known.end(), t) == known.end()) {
      std::cerr << fmt::format("fib onboard: unknown op type '{}' ({})\n", t, suggest(t, known));
      return kExitUsage;
    }
  }
  o.op_types = a.op_types;
  auto shapes = onboard::parse_gemm_shapes(a.gemm_shapes);
  if (!shapes) {
    static constexpr std::string_view kShapes[] = {"dataset", "per-rank"};
    std::cerr << fmt::format("fib onboard: unknown --gemm-shapes '{}' ({})\n", a.gemm_shapes,
                             suggest(a.gemm_shapes, kShapes));
    return kExitUsage;
  }
  o.gemm_shapes = *shapes;
  o.quantization = default_quantization;
  if (!a.quantization.empty()) {
    auto q = onboard::parse_quantization(a.quantization);
    if (!q) {
      std::cerr << fmt::format("fib onboard: unknown --quantization '{}' ({})\n", a.quantization,
                               suggest(a.quantization, onboard::quantization_names()));
      return kExitUsage;
    }
    o.quantization = *q;
  }

  const auto result = onboard::onboard(req, a.dataset, a.dry_run);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!a.quiet) std::cout << onboard::render_report_text(result);
  std::cout << fmt::format("{} in {:.1f} ms\n", a.dry_run ? "planned" : "done", ms);
  if (!a.report.empty()) {
    write_file_atomic(a.report, dump_json_pretty(onboard::report_to_json(result)));
    std::cerr << fmt::format("fib onboard: wrote {}\n", a.report);
  }
  if (!a.graph.empty()) {
    write_file_atomic(a.graph, dump_json_pretty(onboard::module_graph_to_json(result.graph)));
    std::cerr << fmt::format("fib onboard: wrote {}\n", a.graph);
  }
  return result.has_errors() ? kExitFindings : kExitOk;
}

}  // namespace

void register_onboard(CLI::App& app, Runner& run) {
  auto args = std::make_shared<OnboardArgs>();
  CLI::App* cmd = app.add_subcommand("onboard",
                                     "Derive every kernel definition a model runs from its config "
                                     "and serving setup, into a dataset");
  cmd->add_option("--config", args->config, "A HuggingFace config.json");
  cmd->add_option("--model", args->model, "A bundled model slug or alias (see `fib models`)");
  cmd->add_option("--model-name", args->model_name,
                  "Slug for model: tags (required with --config; default: the bundled slug)");
  cmd->add_option("--display-name", args->display_name,
                  "Name used in descriptions (default: the model's name)");
  cmd->add_option("--tp", args->tp,
                  "Tensor-parallel sizes, e.g. 1,8 (default: the model's serving setup, or 1)")
      ->delimiter(',');
  cmd->add_option("--ep", args->ep,
                  "Expert-parallel sizes, e.g. 1,8 (default: the model's serving setup, or 1)")
      ->delimiter(',');
  cmd->add_option("--page-sizes", args->page_sizes, "KV-cache page sizes (default: 1,64)")
      ->delimiter(',');
  cmd->add_option("--stages", args->stages, "Stages: prefill,decode,mtp (default: all)")
      ->delimiter(',');
  cmd->add_flag(
      "--include-quantized", args->include_quantized,
      "Also emit the TRT-LLM FP4 block-scale, FP4 routed and FP8 per-tensor MoE variants");
  cmd->add_flag("--mtp", args->mtp,
                "Also the config's multi-token-prediction draft layers (num_nextn_predict_layers), "
                "as served with speculative decoding (SGLang's NEXTN/EAGLE)");
  cmd->add_option("--op-types", args->op_types,
                  "Only these op types (gemm, rmsnorm, gqa_paged, ...)")
      ->delimiter(',');
  cmd->add_option(
      "--gemm-shapes", args->gemm_shapes,
      "dataset: full projection shapes (default); per-rank: the shapes one GPU multiplies");
  cmd->add_option("--quantization", args->quantization,
                  "Linear layers: none (bf16), fp8-block, fp8-per-tensor or w8a8-int8 (default: "
                  "the model config's quantization_config, else none)");
  cmd->add_option("--dataset,--local", args->dataset,
                  "Dataset folder to deduplicate against and write into (--local: upstream's name)")
      ->required();
  cmd->add_flag("--dry-run", args->dry_run, "Write nothing; print what would happen");
  cmd->add_option("--report", args->report, "Also write the report as JSON to this file");
  cmd->add_option("--graph", args->graph,
                  "Also write the model's module graph (web UI schema) to this file");
  cmd->add_flag("--quiet", args->quiet, "Print only the summary line");
  cmd->callback([&run, args] { run = [args] { return run_onboard(*args); }; });
}

}  // namespace fib::cli
