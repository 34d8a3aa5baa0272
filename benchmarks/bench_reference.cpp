// Native CPU references against the PyTorch CPU references (docs/benchmarks.md, "Native CPU
// references vs PyTorch CPU"): one corpus definition per op family, at realistic sizes a CPU can
// afford, the same inputs on both sides.
//
// Native: BM_Native/<family> calls fib::reference::run() (the public entry point, with its input
// checks) on `FIB_BENCH_THREADS` threads (default 1). PyTorch: at start-up every family's inputs
// are written to safetensors and python/fib_bridge/run_reference.py runs them all in one process
// in its timing mode (torch.set_num_threads(FIB_BENCH_THREADS); one warm-up call, then
// FIB_BENCH_TORCH_REPEAT calls, default 5): only the reference's run(...) is timed, not importing
// torch, reading inputs or writing outputs. BM_PyTorch/<family> reports that median as its
// (manual) time. The program ends with a table of both medians and their ratio, and checks that
// the two sides computed the same outputs (max abs difference; sampling draws from different
// random streams and is not compared).
//
// Environment: FIB_CORPUS (default ../shared/corpus), FIB_TORCH_PYTHON (default /usr/bin/python3),
// FIB_BENCH_THREADS, FIB_BENCH_TORCH_REPEAT, FIB_BENCH_NO_TORCH=1 (native only),
// FIB_BENCH_FAMILIES=gemm,rope,... (only those; inputs of the others are not even made).
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/reference/reference.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/safetensors.h"
#include "fib/trace/json_reader.h"

namespace {

namespace fs = std::filesystem;
using fib::Definition;
using fib::Json;
using fib::Tensor;

fs::path corpus_dir() {
  if (const char* c = std::getenv("FIB_CORPUS"); c != nullptr && *c != '\0') return c;
  return fs::path(FIB_BENCH_SHARED_DIR) / "corpus";
}

unsigned env_unsigned(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  return v && *v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : fallback;
}

// One benchmarked call: a corpus definition (optionally with fewer experts, see below), its var
// axes, and the inputs materialized for them.
struct Family {
  std::string label;
  std::string op_type;
  std::string definition;
  fib::AxisValues var_axes;
  std::map<std::string, std::int64_t> scaled_axes;  // const axes changed
  std::map<std::string, std::string>
      scaled_constants;  // `NAME = value` lines of the reference changed
  Definition def;
  fib::reference::Arguments args;
  std::vector<double> native_s, native_cpu_s;  // every timed native call: wall, process CPU
  std::optional<double> torch_median_s, torch_median_cpu_s;
  std::string torch_note;
  std::string parity;
};

// The definition with some const axes and reference constants changed (only the MoE family
// uses it: 16 of 128 experts keep its weights in memory; hidden and intermediate sizes stay).
Definition scaled(const Definition& def, const std::map<std::string, std::int64_t>& axes,
                  const std::map<std::string, std::string>& constants) {
  if (axes.empty() && constants.empty()) return def;
  Json j = fib::to_json(def);
  for (const auto& [name, value] : axes) j["axes"][name]["value"] = value;
  static const std::regex kAssign(
      R"(^(\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)[-+0-9.eE_]+\s*(#.*)?$)");
  std::istringstream in(def.reference);
  std::string line, code;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, kAssign) && constants.count(m[2].str())) {
      const std::string name = m[2].str();
      line = m[1].str() + name + m[3].str() + constants.at(name);
    }
    code += line + "\n";
  }
  j["reference"] = code;
  fib::Diagnostics diag;
  fib::ReadContext ctx{def.name, &diag};
  auto d = fib::definition_from_json(j, ctx);
  if (!d) throw fib::Error(def.name, diag.to_string());
  return *d;
}

std::vector<Family> families() {
  std::vector<Family> f;
  const auto add = [&f](std::string label, std::string op, std::string def, fib::AxisValues var) {
    Family x;
    x.label = std::move(label);
    x.op_type = std::move(op);
    x.definition = std::move(def);
    x.var_axes = std::move(var);
    f.push_back(std::move(x));
  };
  add("gemm", "gemm", "gemm_n4096_k4096", {{"M", 64}});
  add("rmsnorm", "rmsnorm", "rmsnorm_h4096", {{"batch_size", 512}});
  add("fused_add_rmsnorm", "rmsnorm", "fused_add_rmsnorm_h4096", {{"batch_size", 512}});
  add("gqa_paged_decode", "gqa_paged", "gqa_paged_decode_h32_kv8_d128_ps64",
      {{"batch_size", 32}, {"num_pages", 600}, {"len_indptr", 33}, {"num_kv_indices", 512}});
  add("gqa_paged_prefill", "gqa_paged", "gqa_paged_prefill_causal_h32_kv8_d128_ps64",
      {{"len_indptr", 5},
       {"total_q", 512},
       {"num_kv_indices", 40},
       {"num_pages", 64},
       {"batch_size", 4}});
  add("gqa_ragged", "gqa_ragged", "gqa_ragged_prefill_causal_h32_kv8_d128",
      {{"len_indptr", 5}, {"total_q", 512}, {"total_kv", 2048}});
  add("mla_paged_decode", "mla_paged", "mla_paged_decode_h16_ckv512_kpe64_ps64",
      {{"batch_size", 32}, {"num_pages", 600}, {"len_indptr", 33}, {"num_kv_indices", 512}});
  add("mla_ragged", "mla_ragged", "mla_ragged_prefill_causal_h16_qk192_vo128",
      {{"total_q", 512}, {"total_kv", 2048}, {"len_indptr", 5}});
  add("dsa_sparse_attention", "dsa_paged", "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
      {{"num_tokens", 32}, {"num_pages", 64}});
  add("gdn_decode", "gdn", "gdn_decode_qk16_v32_d128_k_last", {{"batch_size", 32}});
  add("gdn_prefill", "gdn", "gdn_prefill_qk16_v32_d128_k_last",
      {{"total_seq_len", 512}, {"num_seqs", 4}, {"len_cu_seqlens", 5}});
  add("mamba_ssu", "mamba_ssu", "mamba_ssu_decode_h128_d64_s128_ng8",
      {{"batch_size", 32}, {"state_cache_size", 48}});
  add("moe", "moe", "trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768", {{"seq_len", 32}});
  f.back().scaled_axes = {{"num_experts", 16}};
  f.back().scaled_constants = {{"E", "16"}};
  add("rope", "rope", "rope_with_cos_sin_cache_neox_style_d128_rd64",
      {{"num_tokens", 1024}, {"num_qo_heads", 32}, {"num_kv_heads", 8}, {"max_seq_len", 4096}});
  add("sampling", "sampling", "top_k_top_p_sampling_from_probs_v128256", {{"batch_size", 16}});
  return f;
}

std::vector<Family>& all() {
  static std::vector<Family> f;
  return f;
}

unsigned threads() { return env_unsigned("FIB_BENCH_THREADS", 1); }

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Max |a - b| over every output, or a note where they cannot be compared.
std::string compare(const fib::reference::Outputs& native, const fs::path& torch_file,
                    bool random_draws) {
  if (random_draws) return "not compared (random draws)";
  auto file = fib::SafetensorsFile::open(torch_file);
  double worst = 0, scale = 0;
  for (const auto& [name, t] : native) {
    const Tensor theirs = file.read(name);
    if (theirs.numel() != t.numel()) return "output " + name + ": sizes differ";
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      const double a = t.get(i), b = theirs.get(i);
      if (std::isinf(a) && a == b) continue;  // lse of empty rows
      if (std::isnan(a) != std::isnan(b)) return "output " + name + ": NaN differs";
      if (std::isnan(a)) continue;
      worst = std::max(worst, std::fabs(a - b));
      scale = std::max(scale, std::fabs(b));
    }
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "max abs diff %.3g (max |out| %.3g)", worst, scale);
  return buf;
}

int shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// Writes every family's definition and inputs, runs the bridge once in timing mode, reads the
// medians and compares outputs.
void time_pytorch(const fs::path& dir) {
  const char* py_env = std::getenv("FIB_TORCH_PYTHON");
  const std::string python = py_env && *py_env ? py_env : "/usr/bin/python3";
  const unsigned repeat = std::max(1u, env_unsigned("FIB_BENCH_TORCH_REPEAT", 5));
  std::string jobs;
  for (std::size_t i = 0; i < all().size(); ++i) {
    const Family& f = all()[i];
    const std::string base = (dir / ("job" + std::to_string(i))).string();
    std::ofstream(base + ".json") << fib::dump_json_pretty(fib::to_json(f.def));
    std::vector<std::pair<std::string, Tensor>> tensors(f.args.tensors.begin(),
                                                        f.args.tensors.end());
    std::map<std::string, std::string> meta;
    for (const auto& [name, value] : f.args.scalars) {
      Json v;
      std::visit([&v](auto x) { v = x; }, value);
      meta["fib.scalar." + name] = v.dump();
    }
    fib::write_safetensors(base + ".in.safetensors", tensors, meta);
    Json job = {{"definition", base + ".json"},
                {"inputs", base + ".in.safetensors"},
                {"outputs", base + ".out.safetensors"},
                {"seed", 0},
                {"repeat", repeat},
                {"threads", threads()}};
    jobs += job.dump() + "\n";
  }
  std::ofstream(dir / "jobs.jsonl") << jobs;
  const std::string script =
      (fs::path(FIB_BENCH_SOURCE_DIR) / "python/fib_bridge/run_reference.py").string();
  std::fprintf(stderr, "running the PyTorch references (%s, %u timed runs each)...\n",
               python.c_str(), repeat);
  shell(python + " " + script + " --batch " + (dir / "jobs.jsonl").string() + " 2>" +
        (dir / "stderr").string());
  for (std::size_t i = 0; i < all().size(); ++i) {
    Family& f = all()[i];
    const std::string base = (dir / ("job" + std::to_string(i))).string();
    if (fs::exists(base + ".out.safetensors.error")) {
      std::ifstream in(base + ".out.safetensors.error");
      std::stringstream ss;
      ss << in.rdbuf();
      f.torch_note =
          "PyTorch failed: " + ss.str().substr(ss.str().rfind('\n', ss.str().size() - 2) + 1);
      continue;
    }
    std::ifstream in(base + ".out.safetensors.timing.json");
    const Json t = Json::parse(in);
    f.torch_median_s = t.at("median_s").get<double>();
    f.torch_median_cpu_s = t.at("median_cpu_s").get<double>();
    if (t.value("upcast_float16", false))
      f.torch_note = "float16 upcast to float32 (torch 1.13 has no CPU Half matmul)";
    f.torch_note = (f.torch_note.empty() ? "" : f.torch_note + "; ") + "torch " +
                   t.at("torch_version").get<std::string>() + ", " +
                   std::to_string(t.at("threads").get<int>()) + " thread(s)";
    const auto native = fib::reference::run(f.def, f.var_axes, f.args, threads());
    f.parity = compare(native, base + ".out.safetensors", f.op_type == "sampling");
  }
}

double cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void BM_Native(benchmark::State& state, Family* f) {
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const double start_cpu = cpu_seconds();
    auto out = fib::reference::run(f->def, f->var_axes, f->args, threads());
    benchmark::DoNotOptimize(out);
    f->native_cpu_s.push_back(cpu_seconds() - start_cpu);
    f->native_s.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.counters["threads"] = threads();
}

void BM_PyTorch(benchmark::State& state, Family* f) {
  if (!f->torch_median_s) {
    state.SkipWithError(f->torch_note.empty() ? "PyTorch not run" : f->torch_note.c_str());
    for (auto _ : state) {
    }
    return;
  }
  for (auto _ : state) state.SetIterationTime(*f->torch_median_s);
  state.SetLabel("median of the bridge's timed runs");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const fs::path corpus = corpus_dir();
  if (!fs::is_directory(corpus / "definitions")) {
    std::fprintf(stderr, "no corpus at %s (set FIB_CORPUS)\n", corpus.string().c_str());
    return 1;
  }
  const char* only = std::getenv("FIB_BENCH_FAMILIES");
  for (Family f : families()) {
    if (only && *only &&
        ("," + std::string(only) + ",").find("," + f.label + ",") == std::string::npos)
      continue;
    const Definition full = fib::load_definition(
        (corpus / "definitions" / f.op_type / (f.definition + ".json")).string());
    f.def = scaled(full, f.scaled_axes, f.scaled_constants);
    fib::Workload w;
    w.uuid = f.label;
    w.axes = f.var_axes;
    fib::MaterializeOptions opt;
    opt.seed = 1;
    const auto m = fib::materialize_inputs(f.def, w, opt);
    f.args.tensors.insert(m.tensors.begin(), m.tensors.end());
    f.args.scalars.insert(m.scalars.begin(), m.scalars.end());
    all().push_back(std::move(f));
  }
  const fs::path dir =
      fs::temp_directory_path() / ("fib-bench-reference-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  if (env_unsigned("FIB_BENCH_NO_TORCH", 0) == 0) time_pytorch(dir);
  fs::remove_all(dir);
  for (Family& f : all()) {
    benchmark::RegisterBenchmark(("BM_Native/" + f.label).c_str(), BM_Native, &f)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(1.0);
    benchmark::RegisterBenchmark(("BM_PyTorch/" + f.label).c_str(), BM_PyTorch, &f)
        ->Unit(benchmark::kMillisecond)
        ->UseManualTime()
        ->Iterations(1);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // Process CPU time is the primary measure: on a shared machine wall time also counts the time
  // other processes hold the cores (both sides run on the same number of threads).
  std::printf("\n%-22s %-52s %10s %10s %7s %10s %10s %7s  %s\n", "family", "definition", "native",
              "pytorch", "ratio", "native", "pytorch", "ratio", "outputs (native vs PyTorch)");
  std::printf("%-22s %-52s %29s %29s\n", "", "", "(CPU ms, median)", "(wall ms, median)");
  for (const Family& f : all()) {
    if (f.native_s.empty()) continue;
    const double n = median(f.native_cpu_s) * 1e3, nw = median(f.native_s) * 1e3;
    const double t = f.torch_median_cpu_s ? *f.torch_median_cpu_s * 1e3 : std::nan("");
    const double tw = f.torch_median_s ? *f.torch_median_s * 1e3 : std::nan("");
    std::printf("%-22s %-52s %10.3f %10.3f %7.2f %10.3f %10.3f %7.2f  %s\n", f.label.c_str(),
                f.def.name.c_str(), n, t, n / t, nw, tw, nw / tw, f.parity.c_str());
  }
  std::printf("(ratio = native / PyTorch median; < 1 is native faster. %u thread(s) each side.)\n",
              threads());
  for (const Family& f : all()) {
    if (!f.torch_note.empty()) std::printf("  %s: %s\n", f.label.c_str(), f.torch_note.c_str());
  }
  return 0;
}
