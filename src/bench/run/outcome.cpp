#include "outcome.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "environment.h"
#include "fib/base/timestamp.h"
#include "fib/bench/builder/compiler_messages.h"
#include "fib/tensor/inputs.h"
#include "fib/trace/solution_digest.h"
#include "fib/version.h"

namespace fib::bench::detail {

std::string short_uuid(const std::string& uuid) { return uuid.substr(0, 8); }

void add_compiler_messages(Outcome& outcome, const Solution& s, const BuildResult& b) {
  std::vector<std::string> sources;
  for (const auto& src : s.sources) sources.push_back(src.path);
  const CompilerMessages m = parse_compiler_messages(b.log, sources);
  if (m.messages.empty()) return;
  outcome.environment["compiler_diagnostics"] = to_json(m);
  outcome.log = fmt::format("{}\ncompiler diagnostics ({} errors, {} warnings):\n{}build log:\n{}",
                            b.message, m.errors, m.warnings, render_compiler_messages(m), b.log);
}

Trace make_trace(const TraceContext& context, const Lane& lane, const Definition& def,
                 const Workload& w, const Solution& s, Outcome outcome) {
  Trace t;
  t.definition = def.name;
  t.workload = w;
  t.solution = s.name;
  Evaluation e;
  e.status = outcome.status;
  e.environment.hardware = lane.hardware;
  e.environment.libs = {{"fib", std::string(kVersion)}};
  // A PyTorch reference checked the outputs: its torch is one of the evaluation's libraries.
  if (const auto rt = outcome.environment.find("reference_runtime");
      rt != outcome.environment.end() && rt->contains("torch")) {
    e.environment.libs.emplace_back("torch", rt->at("torch").get<std::string>());
  }
  Json extra = context.host;
  extra["device"] = lane.device.to_string();
  if (!lane.device_json.is_null()) extra["gpu"] = lane.device_json;
  extra["seed"] = context.seed;
  extra["input_synthesis"] = kInputSynthesisVersion;  // which inputs the seed gave
  extra["defences"] = kDefenceVersion;                // which harness defences held
  extra["worker"] = context.isolated ? "isolated" : "persistent";
  extra["isolation"] = context.isolation;
  // Signed with the rest: which solution record was measured (docs/apply.md).
  extra[std::string(kSolutionDigestField)] = solution_digest(s);
  for (auto it = outcome.environment.begin(); it != outcome.environment.end(); ++it) {
    extra[it.key()] = *it;
  }
  e.environment.extra = extra;
  e.timestamp = utc_timestamp();
  e.log = std::move(outcome.log);
  e.correctness = std::move(outcome.correctness);
  e.performance = std::move(outcome.performance);
  t.evaluation = std::move(e);
  return t;
}

}  // namespace fib::bench::detail
