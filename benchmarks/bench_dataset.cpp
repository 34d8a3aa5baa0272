// Dataset benchmarks: loading (and validating) the shared corpus and a synthetic dataset of
// 100,000 evaluation traces, and adding one task's traces to a loaded set (what `fib serve`
// does per task). Targets (docs/benchmarks.md): corpus load + validate < 100 ms; 100k traces
// load < 1 s with peak memory < 1 GB.
//
// Times are wall-clock (loading is multi-threaded); the process CPU time is reported beside
// them. Each benchmark reports the input size and the process's peak RSS (getrusage
// ru_maxrss, reset through /proc/self/clear_refs before the benchmark where the kernel allows,
// so it is the peak of this benchmark; run one benchmark per process to be sure, as
// scripts/bench.sh does).
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "synthetic_dataset.h"
#ifdef FIB_BENCH_HAVE_VALIDATE
#include "fib/validate/validator.h"
#endif

namespace {

namespace fs = std::filesystem;

fs::path corpus_dir() {
  if (const char* c = std::getenv("FIB_CORPUS"); c != nullptr && *c != '\0') return c;
  return fs::path(FIB_BENCH_SHARED_DIR) / "corpus";
}

// Makes ru_maxrss start again from the current RSS (Linux >= 4.0; ignored where refused).
void reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}
double peak_rss_mb() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
}
double current_rss_mb() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

// Bytes of the record files TraceSet::load reads (.json/.jsonl under the four top folders).
std::uint64_t record_bytes(const fs::path& root) {
  std::uint64_t total = 0;
  for (const char* top : {"definitions", "workloads", "solutions", "traces"}) {
    std::error_code ec;
    if (!fs::is_directory(root / top, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(root / top, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      const auto ext = it->path().extension();
      if (it->is_regular_file(ec) && (ext == ".json" || ext == ".jsonl"))
        total += it->file_size(ec);
    }
  }
  return total;
}

// Loads `root` state.iterations() times; the loaded set is destroyed outside the timing.
// `after` runs on each loaded set inside the timing (e.g. validation).
template <typename After>
void load_loop(benchmark::State& state, const fs::path& root, After after) {
  fib::LoadOptions options;
  options.threads = static_cast<unsigned>(state.range(0));  // 0: one per core
  // FIB_BENCH_THREADS stands in for "one per core" where the core count the library sees is not
  // the one the process may use (e.g. under taskset: hardware_concurrency() ignores affinity).
  if (const char* t = std::getenv("FIB_BENCH_THREADS"); options.threads == 0 && t != nullptr) {
    options.threads = static_cast<unsigned>(std::strtoul(t, nullptr, 10));
  }
  const std::uint64_t bytes = record_bytes(root);
  const double rss_before = current_rss_mb();
  reset_peak_rss();
  std::size_t definitions = 0, workloads = 0, solutions = 0, traces = 0, diagnostics = 0;
  for (auto _ : state) {
    std::optional<fib::TraceSet> set(fib::TraceSet::load(root, options));
    after(state, *set);
    definitions = set->definitions().size();
    workloads = set->workload_count();
    solutions = set->solution_count();
    traces = set->trace_count();
    diagnostics = set->load_diagnostics().size();
    benchmark::DoNotOptimize(set);
    state.PauseTiming();
    set.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["input_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["peak_rss_MB"] = peak_rss_mb();
  state.counters["rss_before_MB"] = rss_before;
  state.counters["definitions"] = static_cast<double>(definitions);
  state.counters["workloads"] = static_cast<double>(workloads);
  state.counters["solutions"] = static_cast<double>(solutions);
  state.counters["traces"] = static_cast<double>(traces);
  state.counters["load_diagnostics"] = static_cast<double>(diagnostics);
  state.counters["threads"] =
      options.threads != 0 ? options.threads : std::thread::hardware_concurrency();
}

void no_validation(benchmark::State&, const fib::TraceSet&) {}

void BM_LoadCorpus(benchmark::State& state) {
  const fs::path root = corpus_dir();
  if (!fs::is_directory(root)) {
    state.SkipWithError(("corpus not found at " + root.string() + " (set FIB_CORPUS)").c_str());
    return;
  }
  load_loop(state, root, no_validation);
}

const fs::path* synthetic_root(benchmark::State& state) {
  try {
    const auto& d = fib::bench::shared_synthetic_dataset();
    state.counters["generate_s"] = d.generate_seconds;
    return &d.root;
  } catch (const std::exception& e) {
    state.SkipWithError(
        (std::string("cannot generate the synthetic dataset: ") + e.what()).c_str());
    return nullptr;
  }
}

void BM_Load100kTraces(benchmark::State& state) {
  const fs::path* root = synthetic_root(state);
  if (root == nullptr) return;
  load_loop(state, *root, no_validation);
}

// One task's traces added to a loaded snapshot, as `fib serve` does after each evaluation: the
// last `state.range(0)` traces of the definition with the most traces, added again with
// TraceSet::with_traces (each goes through load()'s checks, a signature verified). The dataset is
// FIB_BENCH_DATASET (e.g. 20,000 signed lines, docs/benchmarks.md "fib serve") or else the
// synthetic one; the new snapshot is destroyed outside the timing.
void BM_WithTraces(benchmark::State& state) {
  fs::path root;
  if (const char* d = std::getenv("FIB_BENCH_DATASET"); d != nullptr && *d != '\0') {
    root = d;
  } else if (const fs::path* synthetic = synthetic_root(state)) {
    root = *synthetic;
  } else {
    return;
  }
  const fib::TraceSet set = fib::TraceSet::load(root);
  std::string largest;
  for (const auto& d : set.definitions()) {
    if (set.traces(d.value.name).size() > set.traces(largest).size()) largest = d.value.name;
  }
  const auto& list = set.traces(largest);
  const auto count = std::min<std::size_t>(static_cast<std::size_t>(state.range(0)), list.size());
  std::vector<fib::Trace> added;
  for (std::size_t i = list.size() - count; i < list.size(); ++i) added.push_back(list[i].value);
  std::size_t diagnostics = 0;
  for (auto _ : state) {
    fib::Diagnostics diag;
    std::optional<fib::TraceSet> grown(set.with_traces(added, diag));
    diagnostics = diag.size();
    benchmark::DoNotOptimize(grown);
    state.PauseTiming();
    grown.reset();
    state.ResumeTiming();
  }
  state.counters["traces"] = static_cast<double>(set.trace_count());
  state.counters["definition_traces"] = static_cast<double>(list.size());
  state.counters["added"] = static_cast<double>(added.size());
  state.counters["diagnostics"] = static_cast<double>(diagnostics);
}

#ifdef FIB_BENCH_HAVE_VALIDATE
// Validation with the default options (all checks, blobs read), counted per report.
void validate(benchmark::State& state, const fib::TraceSet& set) {
  const fib::validate::Report report =
      fib::validate::validate_dataset(set, fib::validate::Options{});
  benchmark::DoNotOptimize(report);
  state.counters["defs_ok"] = static_cast<double>(report.count(fib::validate::Status::kOk));
  state.counters["defs_warning"] =
      static_cast<double>(report.count(fib::validate::Status::kWarning));
  state.counters["defs_error"] = static_cast<double>(report.count(fib::validate::Status::kError));
}

void BM_LoadAndValidateCorpus(benchmark::State& state) {
  const fs::path root = corpus_dir();
  if (!fs::is_directory(root)) {
    state.SkipWithError(("corpus not found at " + root.string() + " (set FIB_CORPUS)").c_str());
    return;
  }
  load_loop(state, root, validate);
}

void BM_LoadAndValidate100kTraces(benchmark::State& state) {
  const fs::path* root = synthetic_root(state);
  if (root == nullptr) return;
  load_loop(state, *root, validate);
}
#endif

}  // namespace

// Argument: loader threads (0: one per core, the default; 1: serial, for the parallel speedup).
BENCHMARK(BM_LoadCorpus)
    ->ArgName("threads")
    ->Arg(0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_Load100kTraces)
    ->ArgName("threads")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
// Argument: traces added (one task's: a solution's evaluation of a few workloads).
BENCHMARK(BM_WithTraces)
    ->ArgName("added")
    ->Arg(4)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
#ifdef FIB_BENCH_HAVE_VALIDATE
BENCHMARK(BM_LoadAndValidateCorpus)
    ->ArgName("threads")
    ->Arg(0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_LoadAndValidate100kTraces)
    ->ArgName("threads")
    ->Arg(0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
#endif

BENCHMARK_MAIN();
