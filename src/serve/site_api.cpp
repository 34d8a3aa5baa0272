#include "serve/site_api.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <charconv>

#include "fib/report/best.h"
#include "fib/report/fast_p.h"
#include "fib/report/summary.h"
#include "fib/trace/diagnostics.h"
#include "fib/trace/json_file.h"

namespace fib::serve {

namespace {

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
Json brief_trace(const TraceSet& set, const Trace& t, std::size_t index,
                 const report::TrustPolicy& trust) {
  Json j;
  j["index"] = index;
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

const std::vector<Record<Trace>>& traces_of(const TraceSet& set, const std::string& definition) {
  const auto names = report::definition_names(set);
  if (std::find(names.begin(), names.end(), definition) == names.end())
    throw Error("definition", fmt::format("no definition '{}' in the dataset", definition));
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

// The solution series of fast_p that belong to one definition.
Json fast_p_of(const TraceSet& set, const SiteSource& source, const std::string& definition) {
  report::FastPOptions o;
  o.baseline = baseline_of(source);
  o.trust = source.trust;
  const Json all = report::to_json(report::fast_p(set, o));
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

Json SiteApi::leaderboard() const {
  const auto set = snapshot(source_);
  report::FastPOptions o;
  o.baseline = baseline_of(source_);
  o.trust = source_.trust;
  Json j;
  j["baseline_author"] = source_.baseline_author;
  j["summary"] = report::to_json(report::summarize(*set, {source_.baseline_author, source_.trust}));
  j["fast_p"] = report::to_json(report::fast_p(*set, o));
  return j;
}

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
  j["fast_p"] = fast_p_of(*set, source_, name);
  Json brief = Json::array();
  for (std::size_t i = 0; i < traces.size(); ++i)
    brief.push_back(brief_trace(*set, traces[i].value, i, source_.trust));
  j["traces"] = std::move(brief);
  return j;
}

Json SiteApi::traces(const std::string& definition, const std::string& solution) const {
  const auto set = snapshot(source_);
  const auto& traces = traces_of(*set, definition);
  Json list = Json::array();
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const Trace& t = traces[i].value;
    if (!solution.empty() && t.solution.value_or("") != solution) continue;
    list.push_back(brief_trace(*set, t, i, source_.trust));
  }
  return Json{{"definition", definition}, {"traces", std::move(list)}};
}

Json SiteApi::trace(const std::string& definition, std::size_t index) const {
  const auto set = snapshot(source_);
  const auto& traces = traces_of(*set, definition);
  if (index >= traces.size()) {
    throw Error("trace", fmt::format("definition '{}' has {} traces; there is no trace {}",
                                     definition, traces.size(), index));
  }
  const Trace& t = traces[index].value;
  Json j;
  j["definition"] = definition;
  j["index"] = index;
  j["source"] = set->where(traces[index].source);
  j["verified"] = source_.trust.verified(t);
  j["signer"] = t.signer;
  j["trace"] = to_json(t);
  const auto* sol = t.solution ? set->solution(*t.solution) : nullptr;
  j["solution"] = sol ? to_json(sol->value) : Json(nullptr);
  const auto* w = set->workload(t.workload.uuid);
  j["workload"] = w ? to_json(w->value.workload) : Json(nullptr);
  return j;
}

namespace {

// With a charset the library does not compress the body on the fly: its Brotli runs at the
// highest quality, which costs far more than sending a few kilobytes over loopback.
constexpr const char* kJsonType = "application/json; charset=utf-8";

void send_json(httplib::Response& res, const Json& j, int status = 200) {
  res.status = status;
  res.set_content(dump_json_line(j), kJsonType);
}

// A name the dataset or the bundled models do not hold is a 404; anything else a 500.
template <typename F>
httplib::Server::Handler json_route(F make) {
  return [make](const httplib::Request& req, httplib::Response& res) {
    try {
      send_json(res, make(req));
    } catch (const Error& e) {
      send_json(res, Json{{"error", e.what()}}, 404);
    } catch (const std::exception& e) {
      send_json(res, Json{{"error", e.what()}}, 500);
    }
  };
}

std::size_t parse_index(const std::string& s) {
  std::size_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size())
    throw std::invalid_argument(fmt::format("index '{}' is not a non-negative integer", s));
  return v;
}

}  // namespace

void register_site_routes(httplib::Server& server, std::shared_ptr<const SiteApi> api) {
  server.Get("/api/leaderboard",
             json_route([api](const httplib::Request&) { return api->leaderboard(); }));
  server.Get("/api/models", json_route([api](const httplib::Request&) { return api->models(); }));
  server.Get(R"(/api/models/([^/]+))",
             json_route([api](const httplib::Request& r) { return api->model(r.matches[1]); }));
  server.Get(R"(/api/kernels/([^/]+))",
             json_route([api](const httplib::Request& r) { return api->kernel(r.matches[1]); }));
  server.Get("/api/traces", [api](const httplib::Request& req, httplib::Response& res) {
    const std::string definition = req.get_param_value("definition");
    if (definition.empty()) {
      send_json(res, Json{{"error", "give ?definition=NAME"}}, 400);
      return;
    }
    std::size_t index = 0;
    if (req.has_param("index")) {
      try {
        index = parse_index(req.get_param_value("index"));
      } catch (const std::invalid_argument& e) {
        send_json(res, Json{{"error", e.what()}}, 400);
        return;
      }
    }
    json_route([&](const httplib::Request&) {
      return req.has_param("index") ? api->trace(definition, index)
                                    : api->traces(definition, req.get_param_value("solution"));
    })(req, res);
  });
  // Scripts are served uncompressed (see kJsonType: Brotli at the highest quality takes
  // seconds on highlight.js's 850 kB) and the Debian libraries are cached by the browser.
  server.set_file_extension_and_mimetype_mapping("js", "application/javascript; charset=utf-8");
  const auto js = api->source().javascript_dir;
  if (std::filesystem::is_directory(js)) {
    server.set_mount_point("/vendor", js.string(), {{"Cache-Control", "public, max-age=86400"}});
  }
}

}  // namespace fib::serve
