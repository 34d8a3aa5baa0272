#include "serve/submission.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fib/base/json.h"
#include "fib/bench/builder/build.h"
#include "fib/dataset/layout.h"
#include "fib/trace/json_reader.h"
#include "serve/dataset_routes.h"

namespace fib::serve {

namespace {

constexpr std::string_view kRequestFields[] = {"solution", "workload_uuids"};

// Solution diagnostics have paths from the solution's root; the client sent it under "solution".
Diagnostics under_solution(const Diagnostics& diag) {
  Diagnostics out;
  for (Diagnostic d : diag) {
    if (d.path.rfind('$', 0) == 0) d.path = "$.solution" + d.path.substr(1);
    out.add(std::move(d));
  }
  return out;
}

bool reject(Rejection& r, int status, std::string detail) {
  r.status = status;
  r.detail = std::move(detail);
  return false;
}

// A token's submissions are its author's; only the admin names the author, reserved ones too.
bool set_author(Solution& s, const SubmissionRules& rules, Rejection& r) {
  if (!rules.sender.admin) s.author = rules.sender.author;
  if (!rules.sender.admin && is_reserved_author(s.author, rules.baseline_author)) {
    return reject(r, 403,
                  fmt::format("The author '{}' is reserved: only the server's admin token submits "
                              "as it",
                              s.author));
  }
  return true;
}

std::optional<Solution> read_solution(const Json& j, Rejection& r) {
  Diagnostics diag;
  const ReadContext ctx{"request", &diag};
  std::optional<Solution> s = solution_from_json(j, ctx);
  if (!s || diag.has_errors()) {
    r.diagnostics = under_solution(diag);
    reject(r, 422, "The solution is not valid");
    return std::nullopt;
  }
  for (const auto* name : {&s->author, &s->name}) {
    if (!layout::is_path_component(*name)) {
      reject(r, 422,
             fmt::format("The solution's {} '{}' cannot name a folder or file",
                         name == &s->author ? "author" : "name", *name));
      return std::nullopt;
    }
  }
  return s;
}

bool read_workloads(const Json* j, const TraceSet& set, const Definition& def, Submission& out,
                    Rejection& r) {
  if (j == nullptr || j->is_null()) {
    for (const auto& w : set.workloads(def.name)) out.workloads.push_back(w.value.workload.uuid);
    if (out.workloads.empty()) {
      return reject(r, 400, fmt::format("Definition {} has no workloads to evaluate", def.name));
    }
    return true;
  }
  Diagnostics diag;
  const ReadContext ctx{"request", &diag};
  auto uuids = read_string_list(*j, JsonPath().key("workload_uuids"), ctx);
  if (!uuids) {
    r.diagnostics = diag;
    return reject(r, 422, "workload_uuids must be a list of workload uuids");
  }
  std::vector<std::string> unknown;
  for (const std::string& uuid : *uuids) {
    const Record<Trace>* w = set.workload(uuid);
    if (!w || w->value.definition != def.name) unknown.push_back(uuid);
    if (std::find(out.workloads.begin(), out.workloads.end(), uuid) == out.workloads.end()) {
      out.workloads.push_back(uuid);
    }
  }
  if (!unknown.empty()) {
    return reject(r, 400,
                  fmt::format("Workloads not found for definition {}: {}", def.name,
                              fmt::join(unknown, ", ")));
  }
  if (out.workloads.empty()) return reject(r, 400, "workload_uuids is empty");
  return true;
}

// A solution for a kind of device the server has no queue of would never run.
bool runnable_here(const Submission& s, bool cpu_devices, bool gpu_devices, Rejection& r) {
  if (s.gpu && !gpu_devices) {
    return reject(r, 422,
                  "The solution targets a GPU, and this server evaluates on the CPU only "
                  "(start it with --devices cuda:0,...)");
  }
  if (!s.gpu && !cpu_devices) {
    return reject(r, 422,
                  "The solution targets the CPU (target_hardware cpu), and this server evaluates "
                  "on CUDA devices only (add cpu to --devices)");
  }
  return true;
}

}  // namespace

std::string solution_hash8(const Solution& s) {
  Solution content = s;
  content.name.clear();
  return sha256_hex(dump_json_line(to_json(content))).substr(0, 8);
}

std::optional<Submission> parse_submission(const Json& body, const TraceSet& set,
                                           const SubmissionRules& rules, Rejection& rejection) {
  Diagnostics diag;
  const ReadContext ctx{"request", &diag};
  const Json* f[std::size(kRequestFields)] = {};
  if (!read_object(body, JsonPath(), ctx, kRequestFields, f, nullptr) ||
      !require_field(f[0], "solution", JsonPath(), ctx) || diag.has_errors()) {
    rejection.diagnostics = diag;
    reject(rejection, 422, "The request is not {solution, workload_uuids?}");
    return std::nullopt;
  }
  // A token's author is set before the solution is checked: its own author field may be
  // anything, even absent or not a folder name.
  Json solution = *f[0];
  if (!rules.sender.admin && solution.is_object()) solution["author"] = rules.sender.author;
  std::optional<Solution> s = read_solution(solution, rejection);
  if (!s || !set_author(*s, rules, rejection)) return std::nullopt;
  const Definition* def = set.definition(s->definition);
  if (!def) {
    reject(rejection, 400, definition_not_found(set, s->definition));
    return std::nullopt;
  }
  Submission out;
  out.op_type = def->op_type;
  if (!read_workloads(f[1], set, *def, out, rejection)) return std::nullopt;
  s->name = fmt::format("{}_{}", s->name, solution_hash8(*s));
  // A portable solution (target_hardware ["cpu", "cuda"]) goes to a GPU queue where the server
  // has one, and to a CPU queue otherwise, as `fib run` runs it on either lane.
  out.gpu =
      bench::solution_targets_gpu(*s) && (rules.gpu_devices || !bench::solution_runs_on_cpu(*s));
  out.solution = std::move(*s);
  if (!runnable_here(out, rules.cpu_devices, rules.gpu_devices, rejection)) return std::nullopt;
  return out;
}

}  // namespace fib::serve
