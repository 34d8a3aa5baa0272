// The definition as a prompt (include/fib/agent/prompt.h).
#include "fib/agent/prompt.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fib/bench/eval/compare.h"
#include "fib/bench/eval/eval_config.h"

namespace fib::agent {

namespace {

// A workload list long enough to show the range of sizes, short enough for a prompt.
constexpr std::size_t kPromptWorkloads = 16;

Json tensor_json(const TensorSpec& t) {
  Json j{{"name", t.name},
         {"shape", t.shape ? Json(*t.shape) : Json(nullptr)},
         {"dtype", std::string(dtype_name(t.dtype))}};
  if (t.description) j["description"] = *t.description;
  if (t.is_optional()) j["optional"] = true;
  return j;
}

Json axes_json(const Definition& def) {
  Json axes = Json::array();
  for (const Axis& a : def.axes) {
    Json j{{"name", a.name}, {"kind", a.kind == AxisKind::kConst ? "const" : "var"}};
    if (a.value) j["value"] = *a.value;
    if (a.description) j["description"] = *a.description;
    axes.push_back(std::move(j));
  }
  return axes;
}

Json workloads_json(const TraceSet& set, const Definition& def) {
  Json out = Json::array();
  for (const auto& w : set.workloads(def.name)) {
    if (out.size() == kPromptWorkloads) break;
    Json axes = Json::object();
    for (const auto& [name, value] : w.value.workload.axes) axes[name] = value;
    out.push_back(Json{{"uuid", w.value.workload.uuid}, {"axes", axes}});
  }
  return out;
}

Json judged_json(const Definition& def, const PromptEval& eval) {
  const bench::EvalConfigFile builtin = bench::builtin_eval_config();
  const auto evals = bench::resolve_eval_outputs(builtin, eval.user.get(), eval.cli, def);
  Json outputs = Json::object();
  for (const auto& [name, e] : evals) {
    Json j{{"atol", e.atol}, {"rtol", e.rtol}, {"max_nmse", e.max_nmse}};
    if (e.required_matched_ratio) j["required_matched_ratio"] = *e.required_matched_ratio;
    outputs[name] = j;
  }
  return Json{{"policy", std::string(bench::policy_name(bench::policy_for(def).kind))},
              {"outputs", outputs}};
}

std::string tensor_line(const Json& t) {
  std::string shape =
      t["shape"].is_null()
          ? "scalar"
          : fmt::format("[{}]", fmt::join(t["shape"].get<std::vector<std::string>>(), ", "));
  std::string line = fmt::format("- `{}`: {} {}", t["name"].get<std::string>(),
                                 t["dtype"].get<std::string>(), shape);
  if (t.contains("optional")) line += " (optional: may be None)";
  if (t.contains("description")) line += " — " + t["description"].get<std::string>();
  return line + "\n";
}

}  // namespace

PromptEval PromptEval::of(const bench::RunOptions& o) {
  PromptEval e;
  if (o.config)
    e.user = std::make_shared<const bench::EvalConfigFile>(bench::load_eval_config(*o.config));
  e.cli = o.cli;
  return e;
}

Json definition_prompt_json(const TraceSet& set, const Definition& def, const PromptEval& eval) {
  Json inputs = Json::array(), outputs = Json::array();
  for (const auto& t : def.inputs) inputs.push_back(tensor_json(t));
  for (const auto& t : def.outputs) outputs.push_back(tensor_json(t));
  return Json{{"definition", def.name},
              {"op_type", def.op_type},
              {"description", def.description ? Json(*def.description) : Json(nullptr)},
              {"tags", def.tags},
              {"axes", axes_json(def)},
              {"inputs", inputs},
              {"outputs", outputs},
              {"constraints", def.constraints},
              {"reference", def.reference},
              {"workloads", workloads_json(set, def)},
              {"judged", judged_json(def, eval)}};
}

std::string definition_prompt_text(const Json& p) {
  std::string out =
      fmt::format("# Kernel definition `{}` (op_type `{}`)\n\n", p["definition"].get<std::string>(),
                  p["op_type"].get<std::string>());
  if (p["description"].is_string()) out += p["description"].get<std::string>() + "\n\n";
  if (!p["tags"].empty())
    out += fmt::format("Tags: {}\n\n", fmt::join(p["tags"].get<std::vector<std::string>>(), ", "));
  out += "## Axes\n\n";
  for (const Json& a : p["axes"]) {
    out +=
        fmt::format("- `{}`: {}", a["name"].get<std::string>(),
                    a.contains("value") ? fmt::format("constant {}", a["value"].get<std::int64_t>())
                                        : std::string("variable (set per workload)"));
    if (a.contains("description")) out += " — " + a["description"].get<std::string>();
    out += "\n";
  }
  out += "\n## Inputs\n\n";
  for (const Json& t : p["inputs"]) out += tensor_line(t);
  out += "\n## Outputs\n\n";
  for (const Json& t : p["outputs"]) out += tensor_line(t);
  if (!p["constraints"].empty()) {
    out += "\n## Constraints (hold for every workload)\n\n";
    for (const Json& c : p["constraints"]) out += fmt::format("- `{}`\n", c.get<std::string>());
  }
  out += "\n## Workloads\n\n";
  if (p["workloads"].empty()) out += "None in this dataset.\n";
  for (const Json& w : p["workloads"]) {
    std::vector<std::string> axes;
    for (auto it = w["axes"].begin(); it != w["axes"].end(); ++it)
      axes.push_back(fmt::format("{}={}", it.key(), it.value().get<std::int64_t>()));
    out += fmt::format("- `{}`: {}\n", w["uuid"].get<std::string>(), fmt::join(axes, ", "));
  }
  const Json& j = p["judged"];
  out += fmt::format(
      "\n## How a solution is judged\n\nPolicy `{}`; fresh random inputs per "
      "checked call. An element fails when it is outside both atol and rtol.\n\n",
      j["policy"].get<std::string>());
  for (auto it = j["outputs"].begin(); it != j["outputs"].end(); ++it) {
    out += fmt::format("- `{}`: atol {}, rtol {}, max NMSE {}", it.key(), it.value()["atol"].dump(),
                       it.value()["rtol"].dump(), it.value()["max_nmse"].dump());
    if (it.value().contains("required_matched_ratio"))
      out += fmt::format(", matched ratio >= {}", it.value()["required_matched_ratio"].dump());
    out += "\n";
  }
  out += fmt::format(
      "\n## Reference (Python; `run` takes the inputs in order)\n\n```python\n{}\n```\n",
      p["reference"].get<std::string>());
  return out;
}

}  // namespace fib::agent
