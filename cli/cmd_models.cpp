// fib models: the bundled models (name, family, layers, parameters, definitions at the default
// serving setup); with a slug, that model's layer plan and definitions, or (--kernels) its
// kernel inventory: every definition with the engine kernels that compute it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>

#include "cli/commands.h"
#include "fib/base/json.h"
#include "fib/onboard/inventory.h"
#include "fib/onboard/model_registry.h"
#include "fib/onboard/onboard.h"

namespace fib::cli {

namespace {

struct ModelsArgs {
  std::string slug;
  bool json = false;
  bool kernels = false;
  bool mtp = false;
  std::string quantization;  // empty: the model's serving setup
};

struct Row {
  const onboard::BundledModel* model = nullptr;
  std::optional<onboard::OnboardResult> result;
  std::string error;
};

Row evaluate(const onboard::BundledModel& m) {
  Row row{&m, std::nullopt, {}};
  row.result = onboard::generate_bundled(m, &row.error);
  return row;
}

Json row_json(const Row& r) {
  Json j = Json::object();
  j["slug"] = r.model->slug;
  j["name"] = r.model->display_name;
  j["hf_repo"] = r.model->hf_repo;
  j["aliases"] = r.model->aliases;
  j["serving"] = Json{{"tp", r.model->tp}, {"ep", r.model->ep}};
  j["provenance"] = r.model->provenance;
  if (!r.result) {
    j["error"] = r.error;
    return j;
  }
  const auto& cfg = r.result->plan.config;
  const auto params = onboard::count_parameters(cfg);
  j["family"] = std::string(onboard::family_name(cfg.family));
  j["layers"] = cfg.num_layers;
  j["parameters"] = params.total;
  j["active_parameters"] = params.active;
  j["definitions"] = r.result->outcomes.size();
  return j;
}

int print_kernels(const Row& row, bool json) {
  const auto inventory = onboard::kernel_inventory(*row.result);
  if (json) {
    Json j = row_json(row);
    j["quantization"] = std::string(onboard::quantization_name(
        row.result->options.quantization.value_or(row.result->plan.config.quantization)));
    j["inventory"] = onboard::inventory_to_json(inventory);
    std::cout << dump_json_pretty(j);
    return kExitOk;
  }
  const auto& m = *row.model;
  std::cout << fmt::format("{} ({}): kernel inventory at tp {}; ep {}; linear layers {}\n\n",
                           m.display_name, m.slug, fmt::join(m.tp, ","), fmt::join(m.ep, ","),
                           onboard::quantization_name(row.result->options.quantization.value_or(
                               row.result->plan.config.quantization)));
  std::cout << onboard::render_inventory_text(inventory);
  return kExitOk;
}

int run_models(const ModelsArgs& a) {
  Diagnostics diag;
  const auto dir = onboard::models_dir();
  const auto models = onboard::load_bundled_models(dir, diag);
  if (diag.has_errors()) std::cerr << diag.to_string();
  if (!a.slug.empty()) {
    const auto* m = onboard::find_model(models, a.slug);
    if (!m) {
      std::cerr << fmt::format("fib models: unknown model '{}'; closest: {}\n", a.slug,
                               fmt::join(onboard::closest_models(models, a.slug), ", "));
      return kExitUsage;
    }
    onboard::BundledModel served = *m;
    served.mtp = a.mtp;
    if (!a.quantization.empty()) {
      const auto q = onboard::parse_quantization(a.quantization);
      if (!q) {
        std::cerr << fmt::format("fib models: --quantization '{}' is not one of {}\n",
                                 a.quantization, fmt::join(onboard::quantization_names(), ", "));
        return kExitUsage;
      }
      served.quantization = *q;
    }
    const Row row = evaluate(served);
    if (!row.result) {
      std::cerr << row.error;
      return kExitUsage;
    }
    if (a.kernels) return print_kernels(row, a.json);
    if (a.json) {
      Json j = row_json(row);
      j["plan"] = onboard::plan_to_json(row.result->plan);
      Json defs = Json::array();
      for (const auto& o : row.result->outcomes) defs.push_back(o.def.name);
      j["definition_names"] = std::move(defs);
      j["module_graph"] = onboard::module_graph_to_json(row.result->graph);
      std::cout << dump_json_pretty(j);
      return kExitOk;
    }
    std::cout << fmt::format("{} ({}), {}\nserving: tp {}; ep {}\nsource: {}\n\n", m->display_name,
                             m->slug, m->hf_repo, fmt::join(m->tp, ","), fmt::join(m->ep, ","),
                             m->provenance);
    std::cout << onboard::render_plan_text(row.result->plan);
    std::cout << fmt::format("\n{} definitions at the default serving setup:\n",
                             row.result->outcomes.size());
    for (const auto& o : row.result->outcomes)
      std::cout << fmt::format("  {}/{}\n", o.def.op_type, o.def.name);
    if (!row.result->unsupported.empty()) {
      std::cout << "unsupported parts:\n";
      for (const auto& u : row.result->unsupported) {
        std::cout << fmt::format("  [{}] {}: {}\n", severity_name(u.severity), u.component,
                                 u.reason);
      }
    }
    return kExitOk;
  }
  std::vector<Row> rows;
  for (const auto& m : models) rows.push_back(evaluate(m));
  if (a.json) {
    Json j = Json::array();
    for (const auto& r : rows) j.push_back(row_json(r));
    std::cout << dump_json_pretty(j);
    return kExitOk;
  }
  std::cout << fmt::format("{:<28} {:<14} {:>6} {:>18} {:>11}\n", "NAME", "FAMILY", "LAYERS",
                           "PARAMETERS", "DEFINITIONS");
  bool failed = false;
  for (const auto& r : rows) {
    if (!r.result) {
      std::cout << fmt::format("{:<28} error: {}", r.model->slug, r.error);
      failed = true;
      continue;
    }
    const auto& cfg = r.result->plan.config;
    const auto p = onboard::count_parameters(cfg);
    const std::string params = p.active != p.total
                                   ? fmt::format("{} ({} act)", onboard::format_count(p.total),
                                                 onboard::format_count(p.active))
                                   : onboard::format_count(p.total);
    std::cout << fmt::format("{:<28} {:<14} {:>6} {:>18} {:>11}\n", r.model->slug,
                             onboard::family_name(cfg.family), cfg.num_layers, params,
                             r.result->outcomes.size());
  }
  std::cout << fmt::format(
      "{} models in {} (definitions: default serving setup, page sizes 1 and 64, all "
      "stages)\n",
      rows.size(), dir.string());
  return failed ? kExitFindings : kExitOk;
}

}  // namespace

void register_models(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ModelsArgs>();
  CLI::App* cmd =
      app.add_subcommand("models", "List the bundled models, or show one model's layer plan");
  cmd->add_option("model", args->slug,
                  "A bundled model slug or alias: show its plan and definitions");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_flag("--kernels", args->kernels,
                "With a model: its kernel inventory (definitions, the engine kernels computing "
                "each per library and backend, calls per forward; the engine kernels it does "
                "not call)");
  cmd->add_flag("--mtp", args->mtp,
                "With a model: also its multi-token-prediction draft layers (speculative "
                "decoding)");
  cmd->add_option("--quantization", args->quantization,
                  "With a model: serve its linear layers as none, fp8-block, fp8-per-tensor or "
                  "w8a8-int8 (default: its serving setup)");
  cmd->callback([&run, args] { run = [args] { return run_models(*args); }; });
}

}  // namespace fib::cli
