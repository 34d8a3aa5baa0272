#include "serve/site_api.h"

#include <fmt/format.h>
#include <httplib.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <mutex>
#include <optional>

#include "fib/base/diagnostics.h"
#include "fib/base/json.h"
#include "fib/dataset/keys.h"
#include "fib/reference/reference.h"
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

// The solution series of the site's fast_p (compact_fast_p) that belong to one definition.
Json fast_p_of(const Json& all, const std::string& definition) {
  Json series = Json::array();
  for (const auto& s : all["series"]) {
    if (s["kind"] == "solution" && s["definition"] == definition) series.push_back(s);
  }
  Json basis = nullptr;
  for (const auto& d : all["definitions"]) {
    if (d["definition"] == definition) basis = d;
  }
  return Json{{"p", all["p"]}, {"p_max", all["p_max"]}, {"basis", basis}, {"series", series}};
}

double significant(double x, int digits) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double scale =
      std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::abs(x)))));
  return std::round(x * scale) / scale;
}

}  // namespace

Json curve_steps(const std::vector<double>& grid, const std::vector<double>& curve,
                 std::size_t max_points) {
  std::vector<std::size_t> at;
  const std::size_t n = std::min(grid.size(), curve.size());
  for (std::size_t k = 0; k < n; ++k) {
    if (k == 0 || curve[k] != curve[k - 1]) at.push_back(k);
  }
  // The last point carries the final level to the grid's end.
  if (n > 0 && at.back() != n - 1) at.push_back(n - 1);
  if (max_points >= 2 && at.size() > max_points) {
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < max_points; ++i)
      kept.push_back(at[i * (at.size() - 1) / (max_points - 1)]);
    at = std::move(kept);
  }
  Json p = Json::array();
  Json fast_p = Json::array();
  for (const std::size_t k : at) {
    p.push_back(significant(grid[k], kCurveDigits));
    fast_p.push_back(std::round(curve[k] * 1000) / 1000);
  }
  return Json{{"p", std::move(p)}, {"fast_p", std::move(fast_p)}};
}

Json compact_fast_p(const Json& report, bool with_solutions) {
  Json out = report;
  const std::vector<double> grid = report.value("grid", std::vector<double>{});
  out.erase("grid");
  out["p_max"] = grid.empty() ? 1.0 : grid.back();
  Json series = Json::array();
  for (const auto& s : report["series"]) {
    if (!with_solutions && s["kind"] == "solution") continue;
    Json c = s;
    c.erase("curve");
    c["steps"] = curve_steps(grid, s["curve"].get<std::vector<double>>(), kMaxCurvePoints);
    series.push_back(std::move(c));
  }
  out["series"] = std::move(series);
  return out;
}

namespace {}  // namespace

SiteApi::SiteApi(SiteSource source)
    : source_(std::move(source)),
      models_(std::make_unique<ModelCache>()),
      reports_(std::make_unique<ReportCache>()),
      trace_ids_(std::make_unique<TraceIdCache>()) {}

SiteApi::~SiteApi() = default;

std::shared_ptr<const SiteApi::Reports> SiteApi::reports(
    const std::shared_ptr<const TraceSet>& set) const {
  std::lock_guard lock(reports_->mutex);
  if (reports_->reports && reports_->of.lock() == set) return reports_->reports;
  report::FastPOptions o;
  o.baseline = baseline_of(source_);
  o.trust = source_.trust;
  o.per_definition = true;
  const Json fast_p = report::to_json(report::fast_p(*set, o));
  auto r = std::make_shared<Reports>();
  r->leaderboard["baseline_author"] = source_.baseline_author;
  r->leaderboard["summary"] =
      report::to_json(report::summarize(*set, {source_.baseline_author, source_.trust}));
  r->leaderboard["fast_p"] = compact_fast_p(fast_p, false);
  r->fast_p = compact_fast_p(fast_p, true);
  reports_->of = set;
  reports_->reports = r;
  return r;
}

Json SiteApi::leaderboard() const { return reports(snapshot(source_))->leaderboard; }

Json SiteApi::kernel(const std::string& name) const {
  const auto set = snapshot(source_);
  const auto& traces = traces_of(*set, name);
  Json j;
  j["name"] = name;
  const Definition* def = set->definition(name);
  j["definition"] = def ? to_json(*def) : Json(nullptr);
  j["models"] = def ? Json(def->tag_values("model:")) : Json::array();
  // What `fib run --reference auto` (and fib serve) checks solutions against: fib's native
  // reference kernel where the op type has one, else the definition's PyTorch reference.
  std::string why_not_native;
  const reference::Kernel* native = def ? reference::find_kernel(*def, &why_not_native) : nullptr;
  j["native_reference"] = native ? Json(std::string(native->id())) : Json(nullptr);
  j["workloads"] = workloads_json(*set, name);
  j["solutions"] = solutions_json(*set, name);
  report::BestOptions b;
  b.definitions = {name};
  b.baseline = baseline_of(source_);
  b.trust = source_.trust;
  const Json best = report::to_json(report::best_solutions(*set, b));
  j["best_rule"] = report::kBestRule;
  j["ranking"] = best["definitions"].empty() ? Json(nullptr) : best["definitions"][0];
  j["fast_p"] = fast_p_of(reports(set)->fast_p, name);
  j["trace_count"] = traces.size();  // the page reads them a page at a time (traces())
  return j;
}

Json SiteApi::traces(const std::string& definition, const std::string& solution,
                     const TracePage& page) const {
  const auto set = snapshot(source_);
  const auto& traces = traces_of(*set, definition);
  // Only the page's ids are computed (0.1 ms each), not the definition's thousands.
  const std::size_t first = (page.number - 1) * page.size;
  std::size_t total = 0;
  Json list = Json::array();
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const Trace& t = traces[i].value;
    if (!solution.empty() && t.solution.value_or("") != solution) continue;
    if (total >= first && total < first + page.size) {
      list.push_back(brief_trace(*set, t, trace_id(t), source_.trust));
    }
    ++total;
  }
  return Json{{"definition", definition},
              {"page", page.number},
              {"page_size", page.size},
              {"total", total},
              {"traces", std::move(list)}};
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

bool accepts_gzip(const httplib::Request& req) {
  return req.get_header_value("Accept-Encoding").find("gzip") != std::string::npos;
}

}  // namespace

// zlib's default level: a few milliseconds for the leaderboard, where the HTTP library's own
// compression (Brotli at its highest quality) takes half a second.
std::string gzip(const std::string& text) {
  z_stream z{};
  constexpr int kGzipWindow = 15 + 16;  // 16: a gzip header and trailer instead of zlib's
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    throw Error("gzip", "zlib could not start a stream");
  }
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int done = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (done != Z_STREAM_END) throw Error("gzip", "zlib could not compress an answer");
  return out;
}

namespace {

// The pages' JSON is sent with a charset, which keeps the HTTP library from compressing it
// itself; it is gzipped here for a client that accepts gzip.
void send_page_json(const httplib::Request& req, httplib::Response& res, const Json& body) {
  res.status = 200;
  std::string text = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (accepts_gzip(req)) {
    res.set_header("Content-Encoding", "gzip");
    text = gzip(text);
  }
  res.set_header("Vary", "Accept-Encoding");
  res.set_content(text, "application/json; charset=utf-8");
}

// A name the dataset or the bundled models do not hold is a 404; anything else a 500.
template <typename F>
Handler json_route(F make) {
  return [make](const httplib::Request& req, httplib::Response& res) {
    try {
      send_page_json(req, res, make(req));
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

std::optional<std::size_t> positive_param(const httplib::Request& req, const char* name,
                                          std::size_t otherwise) {
  if (!req.has_param(name)) return otherwise;
  const std::string text = req.get_param_value(name);
  if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), ::isdigit)) {
    return std::nullopt;
  }
  const std::size_t n = std::stoul(text);
  if (n == 0) return std::nullopt;
  return n;
}

std::optional<TracePage> page_of(const httplib::Request& req) {
  const TracePage defaults;
  const auto number = positive_param(req, "page", defaults.number);
  const auto size = positive_param(req, "page_size", defaults.size);
  if (!number || !size || *size > kMaxTracePageSize) return std::nullopt;
  return TracePage{*number, *size};
}

// One trace as a line of a traces/*.jsonl file, to download: the text the server holds, which the
// page cannot remake (a browser's numbers lose a 64-bit seed's low digits).
void send_trace_line(const SiteApi& api, const std::string& definition, const std::string& id,
                     const std::optional<std::string>& viewer, httplib::Response& res) {
  try {
    res.set_content(dump_json_line(api.trace(definition, id, viewer)["trace"]) + "\n",
                    "application/x-ndjson");
    res.set_header("Content-Disposition",
                   fmt::format("attachment; filename=\"{}-{}.jsonl\"", definition, id));
  } catch (const NotFound& e) {
    send_error(res, 404, e.what());
  }
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
    const std::optional<TracePage> page = page_of(req);
    if (!page) {
      return send_error(res, 400,
                        fmt::format("page must be a number from 1, page_size one from 1 to {}",
                                    kMaxTracePageSize));
    }
    return json_route(
        [&](const httplib::Request&) { return api.traces(definition, solution, *page); })(req, res);
  }
  const std::string id = req.get_param_value("id");
  if (!is_trace_id(id)) {
    return send_error(res, 400, fmt::format("id must be {} lowercase hex digits", kTraceIdLength));
  }
  const std::optional<Identity> who = auth.identify(req);
  if (!who) return send_error(res, 401, "Missing or wrong token");
  const std::optional<std::string> viewer =
      who->admin ? std::nullopt : std::optional<std::string>(who->author);
  if (req.get_param_value("format") == "jsonl")
    return send_trace_line(api, definition, id, viewer, res);
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
             "A definition's traces in brief, a page at a time "
             "(?definition=D[&solution=S][&page=N][&page_size=M]), or one in full "
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
