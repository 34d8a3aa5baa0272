#include "serve/dataset_routes.h"

#include <fmt/format.h>
#include <httplib.h>

#include "fib/agent/prompt.h"
#include "fib/trace/suggest.h"

namespace fib::serve {

std::string definition_not_found(const TraceSet& set, std::string_view name) {
  std::vector<std::string> names;
  for (const auto& d : set.definitions()) names.push_back(d.value.name);
  return fmt::format("Definition not found: {} ({})", name, suggest(name, names));
}

namespace {

// The definition a route names, or a 404 that suggests a near name.
const Definition* find_definition(const TraceSet& set, const std::string& name,
                                  httplib::Response& res) {
  if (const Definition* d = set.definition(name)) return d;
  send_error(res, 404, definition_not_found(set, name));
  return nullptr;
}

void list_definitions(ServeContext& context, httplib::Response& res) {
  const auto set = context.traces();
  Json out = Json::array();
  for (const auto& d : set->definitions()) {
    out.push_back(Json{{"name", d.value.name},
                       {"description", d.value.description ? Json(*d.value.description) : Json()}});
  }
  send_json(res, out);
}

void get_definition(ServeContext& context, const httplib::Request& req, httplib::Response& res) {
  const auto set = context.traces();
  if (const Definition* d = find_definition(*set, path_param(req, 1), res))
    send_json(res, to_json(*d));
}

// The definition as a prompt for a kernel-writing agent (the same as `fib mcp`'s
// definition_prompt tool): its parts as JSON and, in "prompt", as Markdown.
void get_definition_prompt(ServeContext& context, const agent::PromptEval& eval,
                           const httplib::Request& req, httplib::Response& res) {
  const auto set = context.traces();
  const Definition* d = find_definition(*set, path_param(req, 1), res);
  if (!d) return;
  Json p = agent::definition_prompt_json(*set, *d, eval);
  p["prompt"] = agent::definition_prompt_text(p);
  send_json(res, p);
}

void list_workloads(ServeContext& context, const httplib::Request& req, httplib::Response& res) {
  const auto set = context.traces();
  const Definition* d = find_definition(*set, path_param(req, 1), res);
  if (!d) return;
  Json out = Json::array();
  for (const auto& w : set->workloads(d->name)) out.push_back(to_json(w.value.workload));
  send_json(res, out);
}

void get_workload(ServeContext& context, const httplib::Request& req, httplib::Response& res) {
  const auto set = context.traces();
  const std::string uuid = path_param(req, 1);
  if (const Record<Trace>* w = set->workload(uuid)) {
    send_json(res, to_json(w->value.workload));
  } else {
    send_error(res, 404, fmt::format("Workload not found: {}", uuid));
  }
}

}  // namespace

void register_dataset_routes(RouteTable& routes, ServeContext& context,
                             const bench::RunOptions& run) {
  ServeContext* c = &context;
  const auto eval = std::make_shared<const agent::PromptEval>(agent::PromptEval::of(run));
  routes.get("/definitions", "List all loaded definitions",
             [c](const httplib::Request&, httplib::Response& res) { list_definitions(*c, res); });
  routes.get(
      "/definitions/{name}", "Get a definition by name",
      [c](const httplib::Request& req, httplib::Response& res) { get_definition(*c, req, res); });
  routes.get("/definitions/{name}/prompt",
             "Get a definition as a prompt for a kernel-writing agent",
             [c, eval](const httplib::Request& req, httplib::Response& res) {
               get_definition_prompt(*c, *eval, req, res);
             });
  routes.get(
      "/definitions/{name}/workloads", "List workloads for a definition",
      [c](const httplib::Request& req, httplib::Response& res) { list_workloads(*c, req, res); });
  routes.get(
      "/workloads/{uuid}", "Get a workload by UUID",
      [c](const httplib::Request& req, httplib::Response& res) { get_workload(*c, req, res); });
}

}  // namespace fib::serve
