// `fib report summary|best|merge|fast-p`: flags to fib::report calls (docs/report.md).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/base/json.h"
#include "fib/dataset/files.h"
#include "fib/dataset/keys.h"
#include "fib/report/best.h"
#include "fib/report/datasets.h"
#include "fib/report/fast_p.h"
#include "fib/report/merge.h"
#include "fib/report/summary.h"

namespace fib::cli {

namespace {

namespace fs = std::filesystem;

// Which traces the rankings use (comparison.h's TrustPolicy).
struct TrustFlags {
  std::vector<std::string> trusted_keys;
  bool include_unverified = false;
};

struct SummaryFlags {
  std::vector<std::string> local;
  TrustFlags trust;
  std::string baseline_author = "baseline";
  bool json = false;
};

struct BestFlags {
  std::vector<std::string> local;
  TrustFlags trust;
  std::vector<std::string> definitions;
  std::string baseline_author = "baseline";
  bool json = false;
};

struct MergeFlags {
  std::vector<std::string> local;
  std::string output;
  bool force = false;
  bool json = false;
};

struct FastPFlags {
  std::vector<std::string> local;
  TrustFlags trust;
  std::string baseline_author = "baseline";
  std::vector<std::string> baseline_solutions;
  std::vector<double> p{0, 0.5, 1, 1.5, 2};
  std::string format = "table";
  std::string output;
  bool per_definition = false;
};

// The --dataset folders, or $FIB_DATASET_PATH when none is given.
std::vector<fs::path> to_paths(const std::vector<std::string>& v) {
  if (v.empty()) return {fs::path(dataset_path(""))};
  return {v.begin(), v.end()};
}

// Reading problems go to stderr so that stdout stays the report (and parseable with --json).
report::Datasets load(const std::vector<std::string>& local) {
  const std::vector<fs::path> roots = to_paths(local);
  report::Datasets datasets = report::Datasets::load(roots);
  const Diagnostics diag = datasets.diagnostics();
  if (!diag.empty()) {
    std::cerr << fmt::format("fib report: {} finding(s) while reading the dataset(s):\n{}",
                             diag.size(), report::render_diagnostics(diag));
  }
  return datasets;
}

void add_trust(CLI::App* sub, TrustFlags& trust) {
  sub->add_flag("--include-unverified", trust.include_unverified,
                "rank unverified traces too: unsigned ones (upstream's, the public dataset's) "
                "and those signed by a key not trusted (default: shown, not ranked)");
  sub->add_option("--trusted-keys", trust.trusted_keys,
                  "another trusted-keys file (repeatable); fib's own key and the keys in "
                  "$FIB_TRUSTED_KEYS or trusted-keys in fib's home are always trusted");
}

// Trusted keys that cannot be read are reported and left out: the traces they signed then
// show as unverified, which is the safe side.
report::TrustPolicy trust_policy(const TrustFlags& f) {
  Diagnostics diag;
  report::TrustPolicy policy;
  policy.trusted = default_trusted_keys(diag);
  for (const auto& file : f.trusted_keys) read_trusted_keys(file, policy.trusted, diag);
  policy.include_unverified = f.include_unverified;
  if (!diag.empty()) {
    std::cerr << fmt::format("fib report: {} finding(s) while reading the trusted keys:\n{}",
                             diag.size(), report::render_diagnostics(diag));
  }
  return policy;
}

void add_local(CLI::App* sub, std::vector<std::string>& local) {
  add_dataset_option(sub, local, "several are read as one, the first winning where two disagree");
}

void register_summary(CLI::App* report, Runner& run) {
  auto f = std::make_shared<SummaryFlags>();
  CLI::App* sub = report->add_subcommand(
      "summary", "Trace totals by status, counts per definition, and the author ranking");
  add_local(sub, f->local);
  sub->add_option("--baseline-author", f->baseline_author,
                  "author whose solutions are the baseline; definitions without one are ranked "
                  "against the reference latency, separately")
      ->capture_default_str();
  sub->add_flag("--json", f->json, "print the summary as JSON");
  add_trust(sub, f->trust);
  sub->callback([&run, f] {
    run = [f] {
      const report::Datasets datasets = load(f->local);
      const report::SummaryReport r =
          report::summarize(datasets.view(), {f->baseline_author, trust_policy(f->trust)});
      std::cout << (f->json ? dump_json_pretty(report::to_json(r)) : report::render_text(r));
      return kExitOk;
    };
  });
}

void register_best(CLI::App* report, Runner& run) {
  auto f = std::make_shared<BestFlags>();
  CLI::App* sub = report->add_subcommand(
      "best", fmt::format("The best passing solution per definition: {}", report::kBestRule));
  add_local(sub, f->local);
  sub->add_option("--definitions", f->definitions,
                  "only these definitions (space or comma separated; default: all with traces)")
      ->delimiter(',');
  sub->add_option("--baseline-author", f->baseline_author,
                  "author whose solutions speedups are measured against (else the reference)")
      ->capture_default_str();
  sub->add_flag("--json", f->json, "print the result as JSON");
  add_trust(sub, f->trust);
  sub->callback([&run, f] {
    run = [f] {
      const report::Datasets datasets = load(f->local);
      report::BestOptions options;
      options.trust = trust_policy(f->trust);
      options.definitions = f->definitions;
      options.baseline.author = f->baseline_author;
      const report::BestReport r = report::best_solutions(datasets.view(), options);
      std::cout << (f->json ? dump_json_pretty(report::to_json(r)) : report::render_text(r));
      return kExitOk;
    };
  });
}

void register_merge(CLI::App* report, Runner& run) {
  auto f = std::make_shared<MergeFlags>();
  CLI::App* sub = report->add_subcommand(
      "merge",
      "Merge datasets into a new folder in the canonical layout; exits 1 when a conflict or an "
      "unreadable record kept something out (the output is still written)");
  add_local(sub, f->local);
  sub->add_option("--output", f->output, "the folder to write (must be new or empty)")->required();
  sub->add_flag("--force", f->force,
                "write into a non-empty output folder (files at the same paths are replaced)");
  sub->add_flag("--json", f->json, "print the merge report as JSON");
  sub->callback([&run, f] {
    run = [f] {
      const std::vector<fs::path> inputs = to_paths(f->local);
      report::MergeOptions options;
      options.force = f->force;
      const report::MergeReport r = report::merge_datasets(inputs, f->output, options);
      std::cout << (f->json ? dump_json_pretty(report::to_json(r)) : report::render_text(r));
      return r.has_problems() ? kExitFindings : kExitOk;
    };
  });
}

void register_fast_p(CLI::App* report, Runner& run) {
  auto f = std::make_shared<FastPFlags>();
  CLI::App* sub = report->add_subcommand(
      "fast-p",
      "fast_p: % of workloads where a solution passed and is at least p times as fast as the "
      "baseline (or, where a definition has none, the reference latency in its traces)");
  add_local(sub, f->local);
  CLI::Option* author = sub->add_option("--baseline-author", f->baseline_author,
                                        "author whose solutions are the baseline")
                            ->capture_default_str();
  CLI::Option* solution =
      sub->add_option("--baseline-solution", f->baseline_solutions,
                      "baseline solution (repeatable); limits the report to its definition")
          ->delimiter(',');
  author->excludes(solution);
  sub->add_option("--p", f->p, "thresholds for the table and the JSON (comma separated)")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            double v = 0;
            if (CLI::detail::lexical_cast(text, v) && std::isfinite(v) && v >= 0) return {};
            return fmt::format("p must be a finite number >= 0, got '{}'", text);
          },
          "P>=0"))
      ->capture_default_str();
  sub->add_option("--format", f->format, "table (default), csv (the curve) or json (everything)")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  sub->add_option("--output", f->output, "write to this file instead of stdout");
  sub->add_flag("--per-definition", f->per_definition, "also one series per author and definition");
  add_trust(sub, f->trust);
  sub->callback([&run, f] {
    run = [f] {
      const report::Datasets datasets = load(f->local);
      report::FastPOptions options;
      options.trust = trust_policy(f->trust);
      options.baseline.author = f->baseline_author;
      options.baseline.solutions = f->baseline_solutions;
      options.p = f->p;
      options.per_definition = f->per_definition;
      const report::FastPReport r = report::fast_p(datasets.view(), options);
      std::string text;
      if (f->format == "csv") {
        text = report::render_csv(r);
      } else if (f->format == "json") {
        text = dump_json_pretty(report::to_json(r));
      } else {
        text = report::render_table(r);
      }
      if (f->output.empty()) {
        std::cout << text;
      } else {
        write_file_atomic(f->output, text);
        std::cerr << fmt::format("fib report fast-p: wrote {}\n", f->output);
      }
      return kExitOk;
    };
  });
}

}  // namespace

void register_report(CLI::App& app, Runner& run) {
  CLI::App* report = app.add_subcommand(
      "report", "Summaries, best solutions, fast_p curves and merges of datasets");
  report->require_subcommand(1);
  register_summary(report, run);
  register_best(report, run);
  register_merge(report, run);
  register_fast_p(report, run);
}

}  // namespace fib::cli
