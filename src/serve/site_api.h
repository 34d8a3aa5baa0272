// The web interface's own JSON (beyond upstream's endpoints) and the static files it is made of:
// the leaderboard (fib's report module, so its numbers are `fib report`'s), the bundled and
// onboarded models with their module trees, a page's worth of data per kernel, the traces, and
// the Debian JavaScript libraries the pages load (Chart.js, highlight.js) from
// /usr/share/javascript at /vendor/.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/dataset/trace_set.h"
#include "fib/report/comparison.h"
#include "fib/trace/json_reader.h"

namespace fib::serve {

class Authenticator;

class RouteTable;
class ServeContext;

struct SiteSource {
  // The dataset as it stands now (the server appends traces as evaluations finish).
  std::function<std::shared_ptr<const TraceSet>()> dataset;
  std::string baseline_author = "baseline";
  report::TrustPolicy trust;
  // Where the bundled models are; empty: onboard::models_dir().
  std::filesystem::path models_dir;
  // Where Debian's JavaScript libraries are installed.
  std::filesystem::path javascript_dir = "/usr/share/javascript";
};

// A name the dataset or the bundled models do not hold (the routes answer 404).
class NotFound : public Error {
 public:
  using Error::Error;
};

// One page of a definition's traces: `number` counts from 1.
struct TracePage {
  std::size_t number = 1;
  std::size_t size = 100;
};
constexpr std::size_t kMaxTracePageSize = 1000;

// A fast_p curve (`curve`, sampled on the report's `grid`) as the points where it steps:
// {p: [...], fast_p: [...]}, each point the first grid value at a new level (and the grid's
// last, which carries the final level), at most `max_points` of them (evenly chosen among the
// steps when there are more), p rounded to kCurveDigits significant digits and fast_p to
// 0.001. Drawn as a stepped line it is the report's curve, at a few hundred bytes where the
// grid has thousands of points.
constexpr std::size_t kMaxCurvePoints = 200;
constexpr int kCurveDigits = 4;
Json curve_steps(const std::vector<double>& grid, const std::vector<double>& curve,
                 std::size_t max_points);
// `fib report fast-p --format json` with each series' curve as its steps (`steps`, no `curve`)
// and `p_max` (the grid's end) in place of the grid; the solution series only when asked.
Json compact_fast_p(const Json& report, bool with_solutions);

// `text` gzipped (zlib's default level), as the routes send their JSON to a client that
// accepts gzip.
std::string gzip(const std::string& text);

// The JSON of each route, callable without a server (the routes only wrap these). Each throws
// NotFound for a name the dataset or the bundled models do not hold.
class SiteApi {
 public:
  explicit SiteApi(SiteSource source);
  ~SiteApi();
  SiteApi(const SiteApi&) = delete;
  SiteApi& operator=(const SiteApi&) = delete;

  // {baseline_author, summary: `fib report summary --json`, fast_p: `fib report fast-p
  // --per-definition --format json` without its solution series, curves as steps
  // (compact_fast_p)} with the server's baseline author and trust policy.
  Json leaderboard() const;
  // {bundled: [...], onboarded: [...]}: every bundled model (family, size, definitions at its
  // default serving setup, how many the dataset holds) and every model: tag of the dataset that
  // no bundled model answers to.
  Json models() const;
  // One model: its module tree (`fib onboard`'s module graph, deduplicated against the dataset
  // so each module names the dataset's definitions) and its definitions.
  Json model(const std::string& id) const;
  // One definition: the definition, its workloads, its solutions ranked (`fib report best`)
  // with their fast_p (compact_fast_p), how many traces it has, the models that run it, and
  // `native_reference`: the id of fib's native reference kernel that solutions are checked
  // against, or null where the definition's PyTorch reference is used.
  Json kernel(const std::string& name) const;
  // One page of the traces of a definition in brief (optionally of one solution), with the
  // total: {definition, page, page_size, total, traces}.
  Json traces(const std::string& definition, const std::string& solution,
              const TracePage& page = {}) const;
  // One trace in full, by its id (trace_id), with its solution (sources included) and workload.
  // With `viewer`, an author's token: the evaluation's log (a build's or a run's output, which
  // may show what the solution read) is left out of other authors' traces.
  Json trace(const std::string& definition, const std::string& id,
             const std::optional<std::string>& viewer = std::nullopt) const;

  const SiteSource& source() const { return source_; }

 private:
  struct ModelCache;
  struct ReportCache;
  struct TraceIdCache;
  // The leaderboard's JSON and the fast_p of every series (solutions included, for the kernel
  // pages) of one snapshot.
  struct Reports {
    Json leaderboard;
    Json fast_p;
  };
  // The reports of a snapshot, cached while it is the current one.
  std::shared_ptr<const Reports> reports(const std::shared_ptr<const TraceSet>& set) const;

  SiteSource source_;
  std::unique_ptr<ModelCache> models_;
  std::unique_ptr<ReportCache> reports_;
  std::unique_ptr<TraceIdCache> trace_ids_;
};

// A trace's stable id: the start (24 hex digits, 96 bits) of the SHA-256 of its line as fib
// writes it, so that a link names the same trace after a restart or a reload, whatever was
// added before it. `record` is the trace's JSON (to_json).
std::string trace_id(const Json& record);
std::string trace_id(const Trace& trace);

// The trust policy of `fib report`'s default: traces signed by fib's own key or a key of the
// trusted-keys files are ranked, others are shown only.
report::TrustPolicy report_trust_policy();

// Adds GET /api/leaderboard, /api/models, /api/models/{id}, /api/kernels/{name},
// /api/traces?definition=D[&solution=S], /api/traces?definition=D&id=ID and the /vendor/
// mount, over the server's dataset, with its baseline author and `fib report`'s trust policy
// (authentication is the server's, as for every other route; `auth` says whose a request is).
void register_site_routes(RouteTable& routes, ServeContext& context, const Authenticator& auth);

}  // namespace fib::serve
