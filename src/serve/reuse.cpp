#include "serve/reuse.h"

#include <fstream>
#include <sstream>

#include "fib/base/json.h"
#include "fib/serve/tokens.h"
#include "fib/version.h"

namespace fib::serve {

namespace {

template <typename T>
Json optional_json(const std::optional<T>& v) {
  return v ? Json(*v) : Json();
}

Json eval_settings_json(const bench::EvalSettings& e) {
  return Json{{"warmup_runs", optional_json(e.warmup_runs)},
              {"iterations", optional_json(e.iterations)},
              {"num_trials", optional_json(e.num_trials)},
              {"rtol", optional_json(e.rtol)},
              {"atol", optional_json(e.atol)},
              {"required_matched_ratio", optional_json(e.required_matched_ratio)},
              {"max_nmse", optional_json(e.max_nmse)},
              {"extra", e.extra}};
}

std::string file_content(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The run options that change what an evaluation measures or decides.
Json evaluation_settings_json(const bench::RunOptions& o) {
  return Json{{"cli", eval_settings_json(o.cli)},
              {"config", o.config ? Json(file_content(*o.config)) : Json()},
              {"timeout_seconds", o.timeout_seconds},
              {"isolated", o.isolated},
              {"sandbox", static_cast<int>(o.sandbox)},
              {"memory_limit_bytes", o.memory_limit_bytes},
              {"threads", o.threads},
              {"fixed_iterations", o.fixed_iterations},
              {"max_trial_seconds", o.max_trial_seconds},
              {"max_warmup_seconds", o.max_warmup_seconds},
              {"reference", std::string(bench::option_name(o.reference))},
              {"gpu_timer", std::string(bench::option_name(o.gpu_timer))},
              {"inputs_on", std::string(bench::option_name(o.inputs_on))},
              {"python", o.python}};
}

const Json* extra_value(const Trace& t, const char* key) {
  if (!t.evaluation || !t.evaluation->environment.extra.is_object()) return nullptr;
  const Json& extra = t.evaluation->environment.extra;
  const auto it = extra.find(key);
  return it == extra.end() ? nullptr : &*it;
}

bool answers(const Trace& t, const AnswerRule& rule) {
  if (t.solution != rule.solution || t.signer.empty() || t.signer != rule.signer) return false;
  if (t.evaluation->environment.hardware != rule.hardware) return false;
  const Json* key = extra_value(t, kEvaluationKeyKey);
  const Json* defences = extra_value(t, "defences");
  return key && *key == rule.key && defences && *defences == kDefenceVersion &&
         !extra_value(t, kNotRunKey);
}

}  // namespace

std::string evaluation_key(const Solution& solution, const Definition& definition,
                           const bench::RunOptions& options, const std::string& device) {
  const Json key{{"solution", to_json(solution)},
                 {"definition", to_json(definition)},
                 {"settings", evaluation_settings_json(options)},
                 {"fib", std::string(kVersion)},
                 {"defences", kDefenceVersion},
                 {"device_kind", device.rfind("cuda", 0) == 0 ? "cuda" : device}};
  return sha256_hex(dump_json_line(key));
}

std::map<std::string, const Trace*> earlier_answers(const TraceSet& set,
                                                    const std::string& definition,
                                                    const std::vector<std::string>& workloads,
                                                    const AnswerRule& rule) {
  std::map<std::string, const Trace*> out;
  if (rule.hardware.empty() || rule.signer.empty()) return out;
  std::map<std::string, std::string> wanted;  // uuid -> the workload record as it is now
  for (const std::string& uuid : workloads) {
    if (const Record<Trace>* w = set.workload(uuid)) {
      wanted[uuid] = dump_json_line(to_json(w->value.workload));
    }
  }
  for (const auto& r : set.traces(definition)) {
    const Trace& t = r.value;
    const auto w = wanted.find(t.workload.uuid);
    if (w == wanted.end() || !answers(t, rule)) continue;
    if (dump_json_line(to_json(t.workload)) == w->second) out[t.workload.uuid] = &t;
  }
  return out;
}

}  // namespace fib::serve
