// `fib apply table` and `fib apply export DIR`: the solutions to substitute at run time, chosen
// from a dataset's trusted traces (docs/apply.md).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/apply/cache.h"
#include "fib/apply/export.h"
#include "fib/base/files.h"
#include "fib/bench/builder/build.h"

namespace fib::cli {

namespace {

namespace fs = std::filesystem;

struct ApplyArgs {
  std::string dataset;
  std::vector<std::string> trusted_keys;
  std::string max_abs_error = "none", max_rel_error = "none", max_nmse = "1e-3";
  bool allow_failed = false, no_fallback = false, no_cache = false, json = false;
  std::string build_cache, cache_dir, out, dir;
};

std::optional<double> limit(const std::string& text, const std::string& flag) {
  if (text == "none") return std::nullopt;
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw Error(flag, fmt::format("'{}' is not a limit", text),
              "give a non-negative number, or none for no limit");
}

// A trusted-keys file, or every file of a folder of them (hidden ones left out).
void read_trusted(const std::string& path, TrustedKeys& keys, Diagnostics& diag) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw Error(path, "no such trusted-keys file or folder",
                "give a file of 'ed25519 <base64> [comment]' lines, or a folder of them");
  }
  if (!fs::is_directory(path, ec)) return read_trusted_keys(path, keys, diag);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(path)) {
    if (e.is_regular_file() && !e.path().filename().string().starts_with(".")) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) read_trusted_keys(f, keys, diag);
}

apply::ApplyOptions options_of(const ApplyArgs& a) {
  apply::ApplyOptions o;
  o.max_abs_error = limit(a.max_abs_error, "--max-abs-error");
  o.max_rel_error = limit(a.max_rel_error, "--max-rel-error");
  o.max_nmse = limit(a.max_nmse, "--max-nmse");
  o.allow_failed_solutions = a.allow_failed;
  o.fallback = !a.no_fallback;
  Diagnostics diag;
  o.trusted = default_trusted_keys(diag);
  for (const auto& k : a.trusted_keys) read_trusted(k, o.trusted, diag);
  if (!diag.empty()) std::cerr << diag.to_string() << "\n";
  o.build_cache = a.build_cache.empty() ? bench::default_cache_dir() : fs::path(a.build_cache);
  return o;
}

apply::ApplyTable table_of(const ApplyArgs& a, const apply::ApplyOptions& o) {
  const fs::path dataset = dataset_path(a.dataset);
  Diagnostics diag;
  apply::ApplyTable table;
  if (a.no_cache) {
    const TraceSet set = TraceSet::load(dataset);
    diag.append(set.load_diagnostics());
    table = apply::build_table(set, o);
    table.dataset_digest = apply::dataset_digest(dataset, o);
  } else {
    const fs::path cache =
        a.cache_dir.empty() ? apply::default_table_cache_dir() : fs::path(a.cache_dir);
    apply::CachedTable c = apply::load_or_build(dataset, o, cache, diag);
    std::cerr << fmt::format("apply table {} {}\n", c.from_cache ? "from the cache" : "made",
                             c.file.string());
    table = std::move(c.table);
  }
  if (!diag.empty()) {
    std::cerr << fmt::format("{} record(s) of the dataset not loaded:\n{}\n", diag.size(),
                             diag.to_string());
  }
  return table;
}

int run_table(const ApplyArgs& a) {
  const apply::ApplyTable table = table_of(a, options_of(a));
  const std::string json = dump_json_pretty(apply::to_json(table));
  if (!a.out.empty()) {
    write_file_atomic(a.out, json);
    std::cout << apply::render_text(table) << fmt::format("table written to {}\n", a.out);
  } else {
    std::cout << (a.json ? json : apply::render_text(table));
  }
  return kExitOk;
}

int run_export(const ApplyArgs& a) {
  ApplyArgs with_fallback = a;
  with_fallback.no_fallback = false;  // the export is each definition's choice over all axes
  const apply::ApplyTable table = table_of(with_fallback, options_of(with_fallback));
  const TraceSet set = TraceSet::load(dataset_path(a.dataset));
  const apply::ExportResult r = apply::export_trace_apply(table, set, a.dir);
  std::cout << apply::render_text(table);
  std::cout << fmt::format(
      "exported {} definition(s), one solution each, to {} ({} files)\n"
      "  FLASHINFER_TRACE_APPLY=1 FLASHINFER_TRACE_PATH={} <your engine>\n",
      r.definitions, a.dir, r.files.size(), fs::absolute(a.dir).string());
  return kExitOk;
}

void add_common(CLI::App* cmd, ApplyArgs& a) {
  add_dataset_option(cmd, a.dataset);
  cmd->add_option("--trusted-keys", a.trusted_keys,
                  "a trusted-keys file, or a folder of them (repeatable); fib's own key and "
                  "$FIB_TRUSTED_KEYS or trusted-keys in fib's home are trusted too");
  cmd->add_option("--max-abs-error", a.max_abs_error,
                  "leave out PASSED traces whose max absolute error is over this (default none)");
  cmd->add_option("--max-rel-error", a.max_rel_error,
                  "leave out PASSED traces whose max relative error is over this (default none)");
  cmd->add_option("--max-nmse", a.max_nmse,
                  "leave out PASSED traces whose recorded NMSE is over this (default 1e-3; none: "
                  "no limit)");
  cmd->add_flag("--allow-failed-solutions", a.allow_failed,
                "choose a solution with non-PASSED traces on axes where it has none (default: "
                "never on that definition)");
  cmd->add_option("--build-cache", a.build_cache,
                  "fib's build cache, where built solutions are found (default: $FIB_CACHE_DIR, "
                  "else ~/.cache/fib/build)");
  cmd->add_option("--cache-dir", a.cache_dir,
                  "where tables are cached (default: $FIB_APPLY_CACHE_DIR, else "
                  "~/.cache/fib/apply)");
  cmd->add_flag("--no-cache", a.no_cache, "build the table without reading or writing the cache");
}

}  // namespace

void register_apply(CLI::App& app, Runner& run) {
  CLI::App* apply = app.add_subcommand(
      "apply", "The solutions to substitute in an engine, from a dataset's trusted traces");
  apply->require_subcommand(1);

  auto t = std::make_shared<ApplyArgs>();
  CLI::App* table = apply->add_subcommand(
      "table",
      "Print or write the apply table: the fastest passing solution per definition and "
      "axes, and what was skipped and why");
  add_common(table, *t);
  table->add_option("--out", t->out, "write the table's JSON here (docs/apply.md)");
  table->add_flag("--json", t->json, "print the table's JSON instead of the summary");
  table->add_flag("--no-fallback", t->no_fallback,
                  "no per-definition choice for axes not in the table");
  table->callback([&run, t] { run = [t] { return run_table(*t); }; });

  auto e = std::make_shared<ApplyArgs>();
  CLI::App* exp = apply->add_subcommand(
      "export",
      "Write each definition's best solution over all axes in the layout FlashInfer's "
      "Trace Apply reads (FLASHINFER_TRACE_PATH)");
  exp->add_option("DIR", e->dir,
                  "the folder to write (replaced whole when it is an earlier "
                  "export)")
      ->required();
  add_common(exp, *e);
  exp->callback([&run, e] { run = [e] { return run_export(*e); }; });
}

}  // namespace fib::cli
