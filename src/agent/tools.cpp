// The MCP tools of `fib mcp`: their JSON schemas and what each does (include/fib/agent/mcp.h).
#include "tools.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "fib/agent/feedback.h"
#include "fib/agent/mcp.h"
#include "fib/agent/prompt.h"
#include "fib/base/diagnostics.h"
#include "fib/trace/suggest.h"

namespace fib::agent {

namespace {

// The schemas, as the tools/list answer gives them. outputSchema describes structuredContent.
constexpr std::string_view kTools = R"json([
{"name": "list_definitions",
 "title": "List kernel definitions",
 "description": "The kernel definitions of the dataset, with their op type, description and how many workloads and solutions each has.",
 "inputSchema": {"type": "object", "additionalProperties": false,
   "properties": {"op_type": {"type": "string", "description": "Only definitions of this op type (gemm, rmsnorm, ...)"}}},
 "outputSchema": {"type": "object", "required": ["definitions"],
   "properties": {"definitions": {"type": "array", "items": {"type": "object",
     "required": ["name", "op_type", "workloads", "solutions"],
     "properties": {"name": {"type": "string"}, "op_type": {"type": "string"},
       "description": {"type": ["string", "null"]}, "workloads": {"type": "integer"},
       "solutions": {"type": "integer"}}}}}}},
{"name": "definition_prompt",
 "title": "A definition as a prompt",
 "description": "What a kernel must compute: its description, axes, inputs and outputs with shapes and dtypes, constraints, the workloads it is judged on, the tolerances, and its Python reference.",
 "inputSchema": {"type": "object", "additionalProperties": false, "required": ["definition"],
   "properties": {"definition": {"type": "string", "description": "The definition's name"}}},
 "outputSchema": {"type": "object",
   "required": ["definition", "op_type", "axes", "inputs", "outputs", "constraints", "reference", "workloads", "judged", "prompt"],
   "properties": {"definition": {"type": "string"}, "op_type": {"type": "string"},
     "description": {"type": ["string", "null"]}, "tags": {"type": "array", "items": {"type": "string"}},
     "axes": {"type": "array"}, "inputs": {"type": "array"}, "outputs": {"type": "array"},
     "constraints": {"type": "array", "items": {"type": "string"}}, "reference": {"type": "string"},
     "workloads": {"type": "array"}, "judged": {"type": "object"}, "prompt": {"type": "string"}}}},
{"name": "evaluate",
 "title": "Evaluate a solution",
 "description": "Builds a solution (a FlashInfer-Trace solution record) and runs it on its definition's workloads with fresh inputs, as fib run does, without writing to the dataset. Answers each workload's status, latency and feedback: the wrong elements with their indices, the error distribution, NaN/Inf counts, the compiler's diagnostics with file and line.",
 "inputSchema": {"type": "object", "additionalProperties": false, "required": ["solution"],
   "properties": {
     "solution": {"type": "object", "description": "A solution record: {name, definition, author, spec: {language, target_hardware, entry_point, ...}, sources: [{path, content}]}"},
     "workloads": {"type": "array", "items": {"type": "string"}, "description": "Workload uuids of the definition; all of them when left out"},
     "timeout_seconds": {"type": "number", "description": "Per workload (default: the server's)"}}},
 "outputSchema": {"type": "object", "required": ["definition", "solution", "statuses", "verdicts", "messages"],
   "properties": {"definition": {"type": "string"}, "solution": {"type": "string"},
     "statuses": {"type": "object", "additionalProperties": {"type": "integer"}},
     "verdicts": {"type": "array", "items": {"type": "object", "required": ["workload", "status", "log"]}},
     "messages": {"type": "array", "items": {"type": "string"}}}}},
{"name": "get_trace",
 "title": "Get traces of a solution",
 "description": "The full trace records of a solution, newest first: those of this session's evaluations, then the dataset's.",
 "inputSchema": {"type": "object", "additionalProperties": false, "required": ["solution"],
   "properties": {"solution": {"type": "string", "description": "The solution's name"},
     "workload": {"type": "string", "description": "A workload uuid, or a prefix of one"},
     "limit": {"type": "integer", "description": "At most this many traces (default 5)"}}},
 "outputSchema": {"type": "object", "required": ["traces"],
   "properties": {"traces": {"type": "array", "items": {"type": "object"}}}}}
])json";

// The evaluations of a session that get_trace can still find.
constexpr std::size_t kSessionTraces = 256;

// How much of one trace's log the text answer shows; structuredContent has all of it.
constexpr std::size_t kTextLogBytes = 4000;

const Json& tools() {
  static const Json t = Json::parse(kTools);
  return t;
}

const Json* find_tool(const std::string& name) {
  for (const Json& t : tools()) {
    if (t["name"] == name) return &t;
  }
  return nullptr;
}

bool has_type(const Json& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  return true;
}

std::string text_of(const Json& verdict) {
  std::string line = fmt::format("workload {} ({}): {}", verdict["workload"].get<std::string>(),
                                 verdict["axes"].dump(), verdict["status"].get<std::string>());
  if (verdict.contains("latency_ms")) {
    line += fmt::format(", {:.4g} ms, {:.3g}x the reference", verdict["latency_ms"].get<double>(),
                        verdict["speedup_factor"].get<double>());
  }
  std::string log = verdict["log"].get<std::string>();
  if (log.size() > kTextLogBytes) {
    log = log.substr(0, kTextLogBytes) +
          fmt::format("\n... ({} more bytes in structuredContent)", log.size() - kTextLogBytes);
  }
  return line + "\n" + log + "\n";
}

}  // namespace

Json tool_definitions() { return tools(); }

void check_arguments(const std::string& tool, const Json& args) {
  const Json* t = find_tool(tool);
  if (t == nullptr) {
    std::vector<std::string> names;
    for (const Json& x : tools()) names.push_back(x["name"].get<std::string>());
    throw RpcError{kInvalidParams,
                   fmt::format("unknown tool '{}' ({})", tool, suggest(tool, names))};
  }
  if (!args.is_object()) throw RpcError{kInvalidParams, "arguments must be an object"};
  const Json& schema = (*t)["inputSchema"];
  const Json& props = schema["properties"];
  for (const Json& r : schema.value("required", Json::array())) {
    if (!args.contains(r.get<std::string>())) {
      throw RpcError{kInvalidParams,
                     fmt::format("{}: missing argument '{}'", tool, r.get<std::string>())};
    }
  }
  for (auto it = args.begin(); it != args.end(); ++it) {
    if (!props.contains(it.key())) {
      throw RpcError{
          kInvalidParams,
          fmt::format("{}: unknown argument '{}' ({})", tool, it.key(), suggest(it.key(), [&] {
                        std::vector<std::string> n;
                        for (auto p = props.begin(); p != props.end(); ++p) n.push_back(p.key());
                        return n;
                      }()))};
    }
    const std::string type = props[it.key()]["type"].get<std::string>();
    if (!has_type(it.value(), type)) {
      throw RpcError{kInvalidParams, fmt::format("{}: argument '{}' must be of type {}, found {}",
                                                 tool, it.key(), type, it.value().type_name())};
    }
  }
}

Json tool_result(std::string text, Json structured) {
  return Json{{"content", Json::array({Json{{"type", "text"}, {"text", std::move(text)}}})},
              {"structuredContent", std::move(structured)},
              {"isError", false}};
}

Json tool_error(std::string_view message) {
  return Json{{"content", Json::array({Json{{"type", "text"}, {"text", std::string(message)}}})},
              {"isError", true}};
}

// ---- The tools ---------------------------------------------------------------------------

namespace {

std::vector<std::string> definition_names(const TraceSet& set) {
  std::vector<std::string> names;
  for (const auto& d : set.definitions()) names.push_back(d.value.name);
  return names;
}

const Definition& known_definition(const TraceSet& set, const std::string& name) {
  const Definition* d = set.definition(name);
  if (d == nullptr) {
    throw Error(name, fmt::format("no definition '{}' in the dataset ({})", name,
                                  suggest(name, definition_names(set))));
  }
  return *d;
}

Solution read_solution(const Json& j) {
  Diagnostics diag;
  const ReadContext ctx{"solution", &diag};
  std::optional<Solution> s = solution_from_json(j, ctx);
  if (!s || diag.has_errors()) {
    std::string why = "the solution record is not valid:";
    for (const Diagnostic& d : diag) why += "\n  " + d.to_string();
    throw Error("solution", why);
  }
  return std::move(*s);
}

std::vector<std::string> chosen_workloads(const TraceSet& set, const Definition& def,
                                          const Json& args) {
  std::vector<std::string> all;
  for (const auto& w : set.workloads(def.name)) all.push_back(w.value.workload.uuid);
  if (all.empty()) throw Error(def.name, fmt::format("{} has no workloads to run", def.name));
  if (!args.contains("workloads")) return {};
  std::vector<std::string> chosen, unknown;
  for (const Json& u : args["workloads"]) {
    const std::string uuid = u.is_string() ? u.get<std::string>() : u.dump();
    (std::find(all.begin(), all.end(), uuid) == all.end() ? unknown : chosen).push_back(uuid);
  }
  if (!unknown.empty()) {
    throw Error(def.name, fmt::format("not workloads of {}: {} (it has {})", def.name,
                                      fmt::join(unknown, ", "), fmt::join(all, ", ")));
  }
  if (chosen.empty()) throw Error(def.name, "workloads is empty");
  return chosen;
}

}  // namespace

Json McpServer::list_definitions(const Json& args) const {
  const std::string op_type = args.value("op_type", "");
  Json defs = Json::array();
  std::string text;
  for (const auto& r : set_->definitions()) {
    const Definition& d = r.value;
    if (!op_type.empty() && d.op_type != op_type) continue;
    const std::size_t workloads = set_->workloads(d.name).size();
    const std::size_t solutions = set_->solutions(d.name).size();
    defs.push_back(Json{{"name", d.name},
                        {"op_type", d.op_type},
                        {"description", d.description ? Json(*d.description) : Json(nullptr)},
                        {"workloads", workloads},
                        {"solutions", solutions}});
    text += fmt::format("{} ({}): {} workloads, {} solutions\n", d.name, d.op_type, workloads,
                        solutions);
  }
  if (defs.empty()) text = "no definitions" + (op_type.empty() ? "" : " of op type " + op_type);
  return tool_result(text, Json{{"definitions", defs}});
}

Json McpServer::definition_prompt(const Json& args) const {
  const Definition& def = known_definition(*set_, args["definition"].get<std::string>());
  Json p = definition_prompt_json(*set_, def, prompt_eval_);
  std::string text = definition_prompt_text(p);
  p["prompt"] = text;
  return tool_result(std::move(text), std::move(p));
}

Json McpServer::evaluate(const Json& args) {
  Solution s = read_solution(args["solution"]);
  const Definition& def = known_definition(*set_, s.definition);
  if (set_->solution(s.name) != nullptr) {
    throw Error(s.name, fmt::format("the dataset already has a solution named '{}': give this "
                                    "one another name",
                                    s.name));
  }
  bench::RunOptions o = options_.run;
  o.dataset = options_.dataset;
  o.workloads = chosen_workloads(*set_, def, args);
  TraceSet with_solution = *set_;
  with_solution.add_solution(s);
  o.loaded_dataset = std::make_shared<const TraceSet>(std::move(with_solution));
  o.definitions = {def.name};
  o.solutions = {s.name};
  o.resume = false;
  o.save_traces = false;  // the agent's drafts stay out of the dataset
  o.seed.reset();         // fresh inputs every call, from a seed the solution never sees
  if (args.contains("timeout_seconds")) {
    o.timeout_seconds = std::clamp(args["timeout_seconds"].get<double>(), 1.0, 3600.0);
  }
  Json messages = Json::array();
  bench::RunCallbacks cb;
  cb.on_message = [&](const std::string& m) { messages.push_back(m); };
  const bench::RunResult r = bench::run_benchmark(o, cb);
  Json verdicts = Json::array();
  std::map<std::string, int> statuses;
  std::string text;
  for (const Trace& t : r.traces) {
    Json v = trace_feedback(t);
    ++statuses[v["status"].get<std::string>()];
    text += text_of(v);
    verdicts.push_back(std::move(v));
    session_traces_.push_back(t);
  }
  // A long session keeps its newest traces only (a build log alone can be a megabyte).
  if (session_traces_.size() > kSessionTraces) {
    session_traces_.erase(session_traces_.begin(),
                          session_traces_.end() - static_cast<std::ptrdiff_t>(kSessionTraces));
  }
  std::string counts;
  for (const auto& [status, n] : statuses) counts += fmt::format(" {} {}", n, status);
  text = fmt::format("{} on {}:{}\n", s.name, def.name, counts.empty() ? " nothing ran" : counts) +
         text;
  for (const Json& m : messages) text += m.get<std::string>() + "\n";
  return tool_result(text, Json{{"definition", def.name},
                                {"solution", s.name},
                                {"statuses", statuses},
                                {"verdicts", verdicts},
                                {"messages", messages}});
}

Json McpServer::get_trace(const Json& args) const {
  const std::string solution = args["solution"].get<std::string>();
  const std::string workload = args.value("workload", "");
  const auto limit = static_cast<std::size_t>(std::max<std::int64_t>(1, args.value("limit", 5)));
  std::vector<const Trace*> found;
  auto take = [&](const Trace& t) {
    if (found.size() >= limit || !t.solution || *t.solution != solution) return;
    if (t.workload.uuid.compare(0, workload.size(), workload) != 0) return;
    found.push_back(&t);
  };
  for (auto it = session_traces_.rbegin(); it != session_traces_.rend(); ++it) take(*it);
  const std::vector<const Trace*> stored = set_->traces_of_solution(solution);
  for (auto it = stored.rbegin(); it != stored.rend(); ++it) take(**it);
  if (found.empty()) {
    throw Error(solution,
                fmt::format("no trace of solution '{}'{} in this session or the dataset", solution,
                            workload.empty() ? "" : " on workload " + workload));
  }
  Json traces = Json::array();
  std::string text;
  for (const Trace* t : found) {
    traces.push_back(to_json(*t));
    text += text_of(trace_feedback(*t));
  }
  return tool_result(text, Json{{"traces", traces}});
}

}  // namespace fib::agent
