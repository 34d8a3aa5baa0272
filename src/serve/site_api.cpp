#include "serve/site_api.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <iostream>
#include <mutex>
#include <optional>

#include "fib/base/diagnostics.h"
#include "fib/base/json.h"
#include "fib/dataset/keys.h"
#include "fib/report/best.h"
#include "fib/report/fast_p.h"
#include "fib/report/summary.h"
#include "fib/serve/server.h"
#include "fib/serve/tokens.h"
#include "serve/auth.h"
#include "serve/routes.h"
#include "serve/site_caches.h"

namespace fib::serve {

namespace {

constexpr std::size_t kTraceIdLength = 24;
constexpr const char* kLogForItsAuthorOnly = "(the log is shown to the solution's author only)";

std::shared_ptr<const TraceSet> snapshot(const SiteSource& s) {
  auto set = s.dataset();
  if (!set) throw Error("dataset", "the server has no dataset loaded");
  return set;
}

report::BaselineChoice baseline_of(const SiteSource& s) {
  report::BaselineChoice b;
  b.author = s.baseline_author;
  return b;
}

// The fields the pages list for each trace; the viewer fetches the whole record.
Json brief_trace(const TraceSet& set, const Trace& t, const std::string& id,
                 const report::TrustPolicy& trust) {
  Json j;
  j["id"] = id;
  j["solution"] = t.solution.value_or("");
  const auto* sol = t.solution ? set.solution(*t.solution) : nullptr;
  j["author"] = sol ? Json(sol->value.author) : Json(nullptr);
  j["workload"] = t.workload.uuid;
  Json axes = Json::object();
  for (const auto& [name, value] : t.workload.axes) axes[name] = value;
  j["axes"] = std::move(axes);
  j["verified"] = trust.verified(t);
  if (!t.evaluation) return j;
  const Evaluation& e = *t.evaluation;
  j["status"] = status_name(e.status);
  j["hardware"] = e.environment.hardware;
  j["timestamp"] = e.timestamp;
  if (e.performance) {
    j["latency_ms"] = e.performance->latency_ms;
    j["reference_latency_ms"] = e.performance->reference_latency_ms;
    j["speedup_factor"] = e.performance->speedup_factor;
  }
  if (e.correctness) {
    j["max_absolute_error"] = Json(e.correctness->max_absolute_error);
    j["max_relative_error"] = Json(e.correctness->max_relative_error);
  }
  return j;
}

const RecordList<Trace>& traces_of(const TraceSet& set, const std::string& definition) {
  const auto names = report::definition_names(set);
  if (std::find(names.begin(), names.end(), definition) == names.end())
    throw NotFound("definition", fmt::format("no definition '{}' in the dataset", definition));
  return set.traces(definition);
}

Json workloads_json(const TraceSet& set, const std::string& definition) {
  Json out = Json::array();
  for (const auto& w : set.workloads(definition)) {
    Json axes = Json::object();
    for (const auto& [name, value] : w.value.workload.axes) axes[name] = value;
    out.push_back(Json{{"uuid", w.value.workload.uuid}, {"axes", std::move(axes)}});
  }
  return out;
}

Json solutions_json(const TraceSet& set, const std::string& definition) {
  Json out = Json::array();
  for (const auto& s : set.solutions(definition)) {
    Json j = to_json(s.value);
    j.erase("sources");  // the trace viewer shows them
    out.push_back(std::move(j));
  }
  return out;
}

// The solution series of the dataset's fast_p report that belong to one definition.
Json fast_p_of(const Json& all, const std::string& definition) {
  Json series = Json::array();
  for (const auto& s : all["series"]) {
    if (s["kind"] == "solution" && s["definition"] == definition) series.push_back(s);
  }
  Json basis = nullptr;
  for (const auto& d : all["definitions"]) {
    if (d["definition"] == definition) basis = d;
  }
  return Json{{"p", all["p"]}, {"grid", all["grid"]}, {"basis", basis}, {"series", series}};
}

}  // namespace

SiteApi::SiteApi(SiteSource source)
    : source_(std::move(source)),
      models_(std::make_unique<ModelCache>()),
      reports_(std::make_unique<ReportCache>()),
      trace_ids_(std::make_unique<TraceIdCache>()) {}

SiteApi::~SiteApi() = default;

std::shared_ptr<const Json> SiteApi::reports(const std::shared_ptr<const TraceSet>& set) const {
  std::lock_guard lock(reports_->mutex);
  if (reports_->leaderboard && reports_->of.lock() == set) return reports_->leaderboard;
  report::FastPOptions o;
  o.baseline = baseline_of(source_);
  o.trust = source_.trust;
  o.per_definition = true;
  auto j = std::make_shared<Json>();
  (*j)["baseline_author"] = source_.baseline_author;
  (*j)["summary"] =
      report::to_json(report::summarize(*set, {source_.baseline_author, source_.trust}));
  (*j)["fast_p"] = report::to_json(report::fast_p(*set, o));
  reports_->of = set;
  reports_->leaderboard = j;
  return j;
}

Json SiteApi::leaderboard() const { return *reports(snapshot(source_)); }

Json SiteApi::kernel(const std::string& name) const {
  const auto set = snapshot(source_);
  const auto& traces = traces_of(*set, name);
  Json j;
  j["name"] = name;
  const Definition* def = set->definition(name);
  j["definition"] = def ? to_json(*def) : Json(nullptr);
  j["models"] = def ? Json(def->tag_values("model:")) : Json::array();
  j["workloads"] = workloads_json(*set, name);
  j["solutions"] = solutions_json(*set, name);
  report::BestOptions b;
  b.definitions = {name};
  b.baseline = baseline_of(source_);
  b.trust = source_.trust;
  const Json best = report::to_json(report::best_solutions(*set, b));
  j["best_rule"] = report::kBestRule;
  j["ranking"] = best["definitions"].empty() ? Json(nullptr) : best["definitions"][0];
  j["fast_p"] = fast_p_of((*reports(set))["fast_p"], name);
  const std::vector<std::string> ids = trace_ids_->ids(set, name);
  Json brief = Json::array();
  for (std::size_t i = 0; i < traces.size(); ++i) {
    brief.push_back(brief_trace(*set, traces[i].value, ids[i], source_.trust));
  }
  j["traces"] = std::move(brief);
  return j;
}

Json SiteApi::traces(const std::string& definition, const std::string& solution) const {
  const auto set = snapshot(source_);
  const auto& traces = traces_of(*set, definition);
  const std::vector<std::string> ids = trace_ids_->ids(set, definition);
  Json list = Json::array();
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const Trace& t = traces[i].value;
    if (!solution.empty() && t.solution.value_or("") != solution) continue;
    list.push_back(brief_trace(*set, t, ids[i], source_.trust));
  }
  return Json{{"definition", definition}, {"traces", std::move(list)}};
}

Json SiteApi::trace(const std::string& definition, const std::string& id,
                    const std::optional<std::string>& viewer) const {
  const auto set = snapshot(source_);
  const auto& traces = traces_of(*set, definition);
  const std::vector<std::string> ids = trace_ids_->ids(set, definition);
  const auto at = std::find(ids.begin(), ids.end(), id);
  if (at == ids.end()) {
    throw NotFound("trace", fmt::format("definition '{}' has no trace {}", definition, id));
  }
  const auto& found = traces[static_cast<std::size_t>(at - ids.begin())];
  const Trace& t = found.value;
  Json j;
  j["definition"] = definition;
  j["id"] = id;
  j["source"] = set->where(found.source);
  j["verified"] = source_.trust.verified(t);
  j["signer"] = t.signer;
  j["trace"] = to_json(t);
  const auto* sol = t.solution ? set->solution(*t.solution) : nullptr;
  if (viewer && (!sol || sol->value.author != *viewer) && j["trace"].contains("evaluation")) {
    j["trace"]["evaluation"]["log"] = kLogForItsAuthorOnly;
  }
  j["solution"] = sol ? to_json(sol->value) : Json(nullptr);
  const auto* w = set->workload(t.workload.uuid);
  j["workload"] = w ? to_json(w->value.workload) : Json(nullptr);
  return j;
}

namespace {

// The pages' JSON is sent with a charset, which keeps the HTTP library from compressing it on
// the fly: its Brotli runs at the highest quality, half a second for the leaderboard's 300 kB,
// while sending it whole over loopback takes milliseconds.
void send_page_json(httplib::Response& res, const Json& body) {
  res.status = 200;
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace),
                  "application/json; charset=utf-8");
}

// A name the dataset or the bundled models do not hold is a 404; anything else a 500.
template <typename F>
Handler json_route(F make) {
  return [make](const httplib::Request& req, httplib::Response& res) {
    try {
      send_page_json(res, make(req));
    } catch (const NotFound& e) {
      send_error(res, 404, e.what());
    } catch (const std::exception& e) {
      send_error(res, 500, e.what());
    }
  };
}

bool is_trace_id(const std::string& s) {
  return s.size() == kTraceIdLength && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(c) && !std::isupper(c);
         });
}

void get_traces(const SiteApi& api, const Authenticator& auth, const httplib::Request& req,
                httplib::Response& res) {
  const std::string definition = req.get_param_value("definition");
  if (definition.empty()) return send_error(res, 400, "give ?definition=NAME");
  if (req.has_param("index")) {
    // Positions change meaning when traces are added before them: traces are named by id.
    return send_error(res, 400, "traces are named by id (?definition=D&id=ID), not by index");
  }
  if (!req.has_param("id")) {
    const std::string solution = req.get_param_value("solution");
    return json_route([&](const httplib::Request&) { return api.traces(definition, solution); })(
        req, res);
  }
  const std::string id = req.get_param_value("id");
  if (!is_trace_id(id)) {
    return send_error(res, 400, fmt::format("id must be {} lowercase hex digits", kTraceIdLength));
  }
  const std::optional<Identity> who = auth.identify(req);
  if (!who) return send_error(res, 401, "Missing or wrong token");
  const std::optional<std::string> viewer =
      who->admin ? std::nullopt : std::optional<std::string>(who->author);
  json_route([&](const httplib::Request&) { return api.trace(definition, id, viewer); })(req, res);
}

}  // namespace

std::string trace_id(const Json& record) {
  return sha256_hex(dump_json_line(record)).substr(0, kTraceIdLength);
}

std::string trace_id(const Trace& trace) { return trace_id(to_json(trace)); }

std::vector<std::string> SiteApi::TraceIdCache::ids(const std::shared_ptr<const TraceSet>& set,
                                                    const std::string& definition) {
  std::lock_guard lock(mutex);
  OfDefinition& cached = definitions[definition];
  std::unordered_map<const Trace*, std::string> next;
  std::vector<std::string> out;
  for (const auto& r : set->traces(definition)) {
    const auto it = cached.ids.find(&r.value);
    std::string id = it != cached.ids.end() ? it->second : trace_id(r.value);
    next.emplace(&r.value, id);
    out.push_back(std::move(id));
  }
  cached.set = set;  // the old snapshot (and its records) goes only now
  cached.ids = std::move(next);
  return out;
}

report::TrustPolicy report_trust_policy() {
  report::TrustPolicy policy;
  Diagnostics diag;
  policy.trusted = default_trusted_keys(diag);
  policy.include_unverified = false;
  if (!diag.empty()) {
    std::cerr << fmt::format("fib serve: {} finding(s) while reading the trusted keys:\n{}",
                             diag.size(), diag.to_string());
  }
  return policy;
}

void register_site_routes(RouteTable& routes, ServeContext& context, const Authenticator& auth) {
  SiteSource source;
  ServeContext* c = &context;
  source.dataset = [c] { return c->traces(); };
  if (!context.baseline_author().empty()) source.baseline_author = context.baseline_author();
  source.trust = report_trust_policy();
  auto api = std::make_shared<const SiteApi>(std::move(source));

  routes.get("/api/leaderboard", "The leaderboard: `fib report summary` and `fast-p` as JSON",
             json_route([api](const httplib::Request&) { return api->leaderboard(); }));
  routes.get("/api/models", "Bundled and onboarded models",
             json_route([api](const httplib::Request&) { return api->models(); }));
  routes.get("/api/models/{id}", "A model's module tree and definitions",
             json_route([api](const httplib::Request& r) { return api->model(path_param(r, 1)); }));
  routes.get(
      "/api/kernels/{name}", "A definition with its workloads, ranked solutions, fast_p and traces",
      json_route([api](const httplib::Request& r) { return api->kernel(path_param(r, 1)); }));
  routes.get("/api/traces",
             "A definition's traces in brief (?definition=D[&solution=S]), or one in full "
             "(?definition=D&id=ID)",
             [api, a = &auth](const httplib::Request& req, httplib::Response& res) {
               get_traces(*api, *a, req, res);
             });

  // Scripts are served without on-the-fly compression (see send_page_json: seconds for
  // highlight.js's 850 kB), and the Debian libraries are cached.
  httplib::Server& http = routes.http();
  http.set_file_extension_and_mimetype_mapping("js", "application/javascript; charset=utf-8");
  const auto js = api->source().javascript_dir;
  if (std::filesystem::is_directory(js)) {
    http.set_mount_point("/vendor", js.string(), {{"Cache-Control", "public, max-age=86400"}});
  }
}

}  // namespace fib::serve
