#include "synthetic_dataset.h"

#include <stdlib.h>

#include <fmt/format.h>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "fib/base/json.h"
#include "fib/dataset/layout.h"

namespace fib::bench {

namespace fs = std::filesystem;

namespace {

enum class Op { kGqaPaged, kRmsNorm, kGemm, kSampling };

struct DefPlan {
  Op op;
  std::string name;
  std::string op_type;
  std::int64_t p1 = 0;  // gqa: qo heads; rmsnorm: hidden; gemm: N; sampling: vocab
  std::int64_t p2 = 0;  // gqa: kv heads; gemm: K
};

std::vector<DefPlan> plan_definitions(std::size_t count) {
  static constexpr std::array<std::array<std::int64_t, 2>, 6> kGqa = {
      {{32, 4}, {32, 8}, {64, 8}, {16, 2}, {8, 1}, {40, 8}}};
  static constexpr std::array<std::int64_t, 5> kNorm = {2048, 4096, 5120, 7168, 8192};
  static constexpr std::array<std::array<std::int64_t, 2>, 5> kGemm = {
      {{4096, 4096}, {6144, 4096}, {2048, 5376}, {28672, 4096}, {128, 2048}}};
  static constexpr std::array<std::int64_t, 4> kVocab = {32000, 128256, 151936, 129280};
  std::vector<DefPlan> base;
  for (auto [h, kv] : kGqa) {
    base.push_back({Op::kGqaPaged, fmt::format("gqa_paged_decode_h{}_kv{}_d128_ps1", h, kv),
                    "gqa_paged", h, kv});
  }
  for (auto h : kNorm)
    base.push_back({Op::kRmsNorm, fmt::format("rmsnorm_h{}", h), "rmsnorm", h, 0});
  for (auto [n, k] : kGemm)
    base.push_back({Op::kGemm, fmt::format("gemm_n{}_k{}", n, k), "gemm", n, k});
  for (auto v : kVocab) {
    base.push_back(
        {Op::kSampling, fmt::format("top_k_sampling_from_probs_v{}", v), "sampling", v, 0});
  }
  std::vector<DefPlan> out;
  for (std::size_t i = 0; i < count; ++i) {
    DefPlan p = base[i % base.size()];
    if (i >= base.size()) p.name += fmt::format("_r{}", i / base.size());
    out.push_back(std::move(p));
  }
  return out;
}

Json axis_var(const char* description = nullptr) {
  Json a = {{"type", "var"}};
  if (description) a["description"] = description;
  return a;
}
Json axis_const(std::int64_t v) { return {{"type", "const"}, {"value", v}}; }
Json spec(std::vector<std::string> shape, const char* dtype, const char* description = nullptr) {
  Json s = Json::object();
  s["shape"] = std::move(shape);
  s["dtype"] = dtype;
  if (description) s["description"] = description;
  return s;
}

Json definition_json(const DefPlan& p) {
  Json d = Json::object();
  d["name"] = p.name;
  switch (p.op) {
    case Op::kGqaPaged: {
      d["description"] =
          "Batched Grouped Query Attention decode with a paged KV cache (synthetic).";
      d["op_type"] = p.op_type;
      d["tags"] = {"stage:decode", "status:verified", "model:synthetic-8b", "tp:1"};
      d["axes"] = {{"batch_size", axis_var("Total number of query tokens.")},
                   {"num_qo_heads", axis_const(p.p1)},
                   {"num_kv_heads", axis_const(p.p2)},
                   {"head_dim", axis_const(128)},
                   {"num_pages", axis_var()},
                   {"page_size", axis_const(1)},
                   {"len_indptr", axis_var("Length of kv_indptr array.")},
                   {"num_kv_indices", axis_var("Total number of KV page indices.")}};
      d["constraints"] = {"len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"};
      d["inputs"] = {
          {"q", spec({"batch_size", "num_qo_heads", "head_dim"}, "bfloat16")},
          {"k_cache", spec({"num_pages", "page_size", "num_kv_heads", "head_dim"}, "bfloat16")},
          {"v_cache", spec({"num_pages", "page_size", "num_kv_heads", "head_dim"}, "bfloat16")},
          {"kv_indptr", spec({"len_indptr"}, "int32", "KV page offsets for each sequence.")},
          {"kv_indices", spec({"num_kv_indices"}, "int32", "Page IDs for KV cache lookups.")},
          {"sm_scale",
           {{"shape", nullptr}, {"dtype", "float32"}, {"description", "Softmax scale."}}}};
      d["outputs"] = {
          {"output", spec({"batch_size", "num_qo_heads", "head_dim"}, "bfloat16")},
          {"lse", spec({"batch_size", "num_qo_heads"}, "float32", "Base-2 log-sum-exp.")}};
      d["reference"] = fmt::format(
          "import torch\nimport math\n\n\n@torch.no_grad()\ndef run(q, k_cache, v_cache, "
          "kv_indptr, "
          "kv_indices, sm_scale):\n    batch_size, num_qo_heads, head_dim = q.shape\n    assert "
          "num_qo_heads == {}\n    output = torch.zeros_like(q)\n    lse = torch.full((batch_size, "
          "num_qo_heads), -float(\"inf\"), dtype=torch.float32, device=q.device)\n    return "
          "output, "
          "lse\n",
          p.p1);
      break;
    }
    case Op::kRmsNorm:
      d["description"] = "Root mean square normalization (synthetic).";
      d["op_type"] = p.op_type;
      d["tags"] = {"status:verified", "model:synthetic-8b"};
      d["axes"] = {{"batch_size", axis_var()}, {"hidden_size", axis_const(p.p1)}};
      d["inputs"] = {{"hidden_states", spec({"batch_size", "hidden_size"}, "bfloat16")},
                     {"weight", spec({"hidden_size"}, "bfloat16")}};
      d["outputs"] = {{"output", spec({"batch_size", "hidden_size"}, "bfloat16")}};
      d["reference"] =
          "import torch\n\n\ndef run(hidden_states, weight):\n    x = "
          "hidden_states.to(torch.float32)\n"
          "    inv = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
          "    return (x * inv * weight.to(torch.float32)).to(hidden_states.dtype)\n";
      break;
    case Op::kGemm:
      d["description"] = "General matrix multiply C = A @ B.T (synthetic).";
      d["op_type"] = p.op_type;
      d["tags"] = {"status:verified", "model:synthetic-8b"};
      d["axes"] = {{"M", axis_var()}, {"N", axis_const(p.p1)}, {"K", axis_const(p.p2)}};
      d["inputs"] = {{"A", spec({"M", "K"}, "float16")}, {"B", spec({"N", "K"}, "float16")}};
      d["outputs"] = {{"C", spec({"M", "N"}, "float16")}};
      d["reference"] = "import torch\n\n\ndef run(A, B):\n    return torch.matmul(A, B.T)\n";
      break;
    case Op::kSampling:
      d["description"] = "Top-k sampling from probabilities (synthetic).";
      d["op_type"] = p.op_type;
      d["tags"] = {"status:verified", "model:synthetic-8b"};
      d["axes"] = {{"batch_size", axis_var()}, {"vocab_size", axis_const(p.p1)}};
      d["inputs"] = {{"probs", spec({"batch_size", "vocab_size"}, "float32")},
                     {"top_k", spec({"batch_size"}, "int32")}};
      d["outputs"] = {{"samples", spec({"batch_size"}, "int64")}};
      d["reference"] =
          "import torch\n\n\ndef run(probs, top_k):\n    return torch.multinomial(probs, "
          "1).squeeze(-1)\n";
      break;
  }
  return d;
}

std::string make_uuid(std::mt19937_64& rng) {
  const std::uint64_t a = rng(), b = rng();
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xFFFF, a & 0xFFF,
                     0x8000 | ((b >> 48) & 0x3FFF), b & 0xFFFFFFFFFFFFULL);
}

// A safetensors file of int32 tensors.
struct I32Tensor {
  std::string name;
  std::vector<std::int32_t> values;
};
std::uint64_t write_safetensors(const fs::path& path, const std::vector<I32Tensor>& tensors) {
  Json header = Json::object();
  std::uint64_t pos = 0;
  for (const auto& t : tensors) {
    const std::uint64_t n = t.values.size() * 4;
    header[t.name] = {
        {"dtype", "I32"}, {"shape", {t.values.size()}}, {"data_offsets", {pos, pos + n}}};
    pos += n;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h += ' ';
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t len = h.size();
  char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<char>((len >> (8 * i)) & 0xFF);
  out.write(len_bytes, 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : tensors) {
    for (std::int32_t v : t.values) {
      char b[4];
      for (int i = 0; i < 4; ++i)
        b[i] = static_cast<char>((static_cast<std::uint32_t>(v) >> (8 * i)) & 0xFF);
      out.write(b, 4);
    }
  }
  if (!out) throw std::runtime_error("cannot write " + path.string());
  return 8 + len + pos;
}

struct WorkloadOut {
  std::string uuid;
  std::string json;  // the workload object, one line
};

// One workload of a definition; writes its blob when it has one.
WorkloadOut make_workload(const DefPlan& p, const fs::path& root, std::mt19937_64& rng,
                          SyntheticStats& stats) {
  WorkloadOut w;
  w.uuid = make_uuid(rng);
  Json axes = Json::object();
  Json inputs = Json::object();
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const fs::path blob_rel = layout::blob_file(p.op_type, p.name, w.uuid);
  const std::string blob_path = "./" + blob_rel.generic_string();
  auto st_input = [&](const char* key) {
    return Json{{"type", "safetensors"}, {"path", blob_path}, {"tensor_key", key}};
  };
  const Json random = {{"type", "random"}};
  switch (p.op) {
    case Op::kGqaPaged: {
      const std::int64_t bs = uniform(1, 64);
      std::vector<std::int32_t> indptr{0};
      for (std::int64_t b = 0; b < bs; ++b)
        indptr.push_back(indptr.back() + static_cast<std::int32_t>(uniform(1, 256)));
      const std::int64_t total = indptr.back();
      const std::int64_t pages = total + uniform(0, 4096);
      std::vector<std::int32_t> indices(static_cast<std::size_t>(total));
      for (auto& x : indices) x = static_cast<std::int32_t>(uniform(0, pages - 1));
      axes["batch_size"] = bs;
      axes["num_pages"] = pages;
      axes["len_indptr"] = bs + 1;
      axes["num_kv_indices"] = total;
      inputs["q"] = random;
      inputs["k_cache"] = random;
      inputs["v_cache"] = random;
      inputs["kv_indptr"] = st_input("kv_indptr");
      inputs["kv_indices"] = st_input("kv_indices");
      inputs["sm_scale"] = {{"type", "scalar"}, {"value", 0.08838834764831845}};
      stats.blob_bytes += write_safetensors(
          root / blob_rel, {{"kv_indptr", std::move(indptr)}, {"kv_indices", std::move(indices)}});
      ++stats.blobs;
      break;
    }
    case Op::kRmsNorm:
      axes["batch_size"] = uniform(1, 8192);
      inputs["hidden_states"] = random;
      inputs["weight"] = random;
      break;
    case Op::kGemm:
      axes["M"] = uniform(1, 16384);
      inputs["A"] = random;
      inputs["B"] = random;
      break;
    case Op::kSampling: {
      const std::int64_t bs = uniform(1, 256);
      std::vector<std::int32_t> topk(static_cast<std::size_t>(bs));
      for (auto& x : topk) x = static_cast<std::int32_t>(uniform(1, 1000));
      axes["batch_size"] = bs;
      inputs["probs"] = random;
      inputs["top_k"] = st_input("top_k");
      stats.blob_bytes += write_safetensors(root / blob_rel, {{"top_k", std::move(topk)}});
      ++stats.blobs;
      break;
    }
  }
  Json wj = Json::object();
  wj["uuid"] = w.uuid;
  wj["axes"] = std::move(axes);
  wj["inputs"] = std::move(inputs);
  w.json = dump_json_line(wj);
  return w;
}

struct SolutionPlan {
  std::string name;
  std::string author;
  std::string language;
};

std::vector<SolutionPlan> plan_solutions(const DefPlan& p, std::size_t count) {
  static constexpr const char* kAuthors[] = {"baseline", "flashinfer", "alice", "bob",
                                             "triton-lab"};
  static constexpr const char* kLanguages[] = {"cuda", "triton", "python", "cpp"};
  std::vector<SolutionPlan> out;
  for (std::size_t i = 0; i < count; ++i) {
    // One baseline per definition, the rest spread over four authors.
    const char* author = i == 0 ? kAuthors[0] : kAuthors[1 + (i - 1) % 4];
    const char* lang = i == 0 ? "python" : kLanguages[i % 4];
    out.push_back({fmt::format("{}_{}_{}_v{}", p.name, author, lang, i), author, lang});
  }
  return out;
}

Json solution_json(const DefPlan& p, const SolutionPlan& s) {
  const bool py = s.language == "python" || s.language == "triton";
  const std::string file = py ? "kernel.py" : s.language == "cuda" ? "kernel.cu" : "kernel.cpp";
  std::string body;
  for (int i = 0; i < 60; ++i) {
    body += py ? fmt::format(
                     "    acc_{0} = tl.load(ptr + offs + {0}) * scale  # unrolled step {0}\n", i)
               : fmt::format(
                     "  acc[{0}] = __ldg(ptr + offs + {0}) * scale;  // unrolled step {0}\n", i);
  }
  const std::string content =
      py ? "import torch\n\n\ndef run(*args):\n" + body + "    return args[0]\n"
         : "#include <cuda_runtime.h>\n\nextern \"C\" void run() {\n" + body + "}\n";
  Json j = Json::object();
  j["name"] = s.name;
  j["definition"] = p.name;
  j["author"] = s.author;
  j["spec"] = {{"language", s.language},
               {"target_hardware", {"NVIDIA H100", "NVIDIA B200"}},
               {"entry_point", file + "::run"},
               {"dependencies", py ? Json{"torch"} : Json::array()},
               {"destination_passing_style", !py}};
  j["sources"] = Json::array({Json{{"path", file}, {"content", content}},
                              Json{{"path", "README.md"}, {"content", "Synthetic solution.\n"}}});
  j["description"] = fmt::format("{} kernel by {} (synthetic)", s.language, s.author);
  return j;
}

std::string evaluation_line(std::mt19937_64& rng, bool always_pass, std::size_t rep) {
  static constexpr const char* kHardware[] = {"NVIDIA H100 80GB HBM3", "NVIDIA B200", "NVIDIA H200",
                                              "NVIDIA A100-SXM4-80GB", "NVIDIA L40S"};
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double r = u(rng);
  const char* status = always_pass || r < 0.85 ? "PASSED"
                       : r < 0.92              ? "INCORRECT_NUMERICAL"
                       : r < 0.95              ? "RUNTIME_ERROR"
                       : r < 0.98              ? "COMPILE_ERROR"
                                               : "TIMEOUT";
  const std::string st = status;
  Json ev = Json::object();
  ev["status"] = status;
  ev["environment"] = {
      {"hardware", kHardware[rep % 5]},
      {"libs",
       {{"torch", "2.8.0+cu128"}, {"cuda", "12.8"}, {"triton", "3.4.0"}, {"flashinfer", "0.3.1"}}},
      {"extra",
       {{"host", fmt::format("gpu-node-{:02}", rep % 16)},
        {"compiler", "nvcc 12.8.93"},
        {"timer", "cuda_events"},
        {"sm_clock_mhz", 1980}}}};
  ev["timestamp"] = fmt::format("2025-09-{:02}T{:02}:{:02}:{:02}.{:06}Z", 1 + rep % 28, rng() % 24,
                                rng() % 60, rng() % 60, rng() % 1000000);
  if (st == "PASSED") {
    ev["log"] = "";
  } else if (st == "COMPILE_ERROR") {
    ev["log"] =
        "kernel.cu(41): error: identifier \"__ldg_bf16\" is undefined\n"
        "kernel.cu(57): error: no instance of overloaded function \"atomicAdd\" matches the "
        "argument "
        "list\n2 errors detected in the compilation of \"kernel.cu\".\n";
  } else if (st == "RUNTIME_ERROR") {
    ev["log"] = "CUDA error: an illegal memory access was encountered (cudaErrorIllegalAddress)\n";
  } else if (st == "TIMEOUT") {
    ev["log"] = "timed out after 300 s";
  } else {
    ev["log"] = "max relative error 0.41 exceeds rtol 0.01 at output[3, 17, 5]";
  }
  if (st == "PASSED" || st == "INCORRECT_NUMERICAL") {
    ev["correctness"] = {{"max_relative_error", st == "PASSED" ? u(rng) * 1e-3 : 0.41 + u(rng)},
                         {"max_absolute_error", u(rng) * 1e-2},
                         {"extra", {{"matched_ratio", st == "PASSED" ? 1.0 : 0.97}}}};
  }
  if (st == "PASSED") {
    const double lat = 0.005 + u(rng) * 2.0;
    const double ref = lat * (0.5 + u(rng) * 20.0);
    ev["performance"] = {{"latency_ms", lat},
                         {"reference_latency_ms", ref},
                         {"speedup_factor", ref / lat},
                         {"extra",
                          {{"min_ms", lat * 0.95},
                           {"p10_ms", lat * 0.97},
                           {"p90_ms", lat * 1.04},
                           {"samples", 100}}}};
  }
  return dump_json_line(ev);
}

void write_text(const fs::path& path, const std::string& text, SyntheticStats& stats) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
  ++stats.record_files;
  stats.record_bytes += text.size();
}

}  // namespace

SyntheticStats write_synthetic_dataset(const fs::path& root, const SyntheticSpec& spec) {
  SyntheticStats stats;
  std::mt19937_64 rng(spec.seed);
  const auto defs = plan_definitions(spec.definitions);
  const std::size_t pairs =
      spec.definitions * spec.solutions_per_definition * spec.workloads_per_definition;
  const std::size_t reps = pairs == 0 ? 0 : (spec.traces + pairs - 1) / pairs;
  std::size_t traces_left = spec.traces;
  for (const auto& p : defs) {
    write_text(root / layout::definition_file(p.op_type, p.name),
               dump_json_pretty(definition_json(p)), stats);
    ++stats.definitions;
    std::vector<WorkloadOut> workloads;
    std::string wl_file;
    for (std::size_t i = 0; i < spec.workloads_per_definition; ++i) {
      workloads.push_back(make_workload(p, root, rng, stats));
      wl_file +=
          fmt::format(R"({{"definition":"{}","solution":null,"workload":{},"evaluation":null}})",
                      p.name, workloads.back().json);
      wl_file += '\n';
    }
    write_text(root / layout::workloads_file(p.op_type, p.name), wl_file, stats);
    stats.workloads += workloads.size();
    const auto sols = plan_solutions(p, spec.solutions_per_definition);
    // Traces by author: each author's file for this definition holds all their solutions' traces.
    std::vector<std::string> authors;
    for (const auto& s : sols) {
      write_text(root / layout::solution_file(s.author, p.op_type, p.name, s.name),
                 dump_json_pretty(solution_json(p, s)), stats);
      ++stats.solutions;
      bool seen = false;
      for (const auto& a : authors) seen = seen || a == s.author;
      if (!seen) authors.push_back(s.author);
    }
    for (const auto& author : authors) {
      std::string text;
      for (const auto& s : sols) {
        if (s.author != author) continue;
        for (std::size_t rep = 0; rep < reps; ++rep) {
          for (const auto& w : workloads) {
            if (traces_left == 0) break;
            --traces_left;
            text += fmt::format(
                R"({{"definition":"{}","workload":{},"solution":"{}","evaluation":{}}})", p.name,
                w.json, s.name, evaluation_line(rng, author == "baseline", rep));
            text += '\n';
            ++stats.traces;
          }
        }
      }
      if (!text.empty())
        write_text(root / layout::traces_file(author, p.op_type, p.name), text, stats);
    }
  }
  return stats;
}

namespace {

struct TempDataset {
  SharedSynthetic data;
  bool keep = false;
  ~TempDataset() {
    if (keep || data.root.empty()) return;
    std::error_code ec;
    fs::remove_all(data.root, ec);
  }
};

void generate_into(TempDataset& t) {
  const char* keep = std::getenv("FIB_BENCH_KEEP");
  t.keep = keep != nullptr && *keep != '\0' && std::string(keep) != "0";
  std::string tmpl = (fs::temp_directory_path() / "fib-bench-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  t.data.root = tmpl;
  SyntheticSpec spec;
  if (const char* n = std::getenv("FIB_BENCH_TRACES")) spec.traces = std::strtoull(n, nullptr, 10);
  const auto start = std::chrono::steady_clock::now();
  t.data.stats = write_synthetic_dataset(t.data.root, spec);
  t.data.generate_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr,
               "synthetic dataset: %s: %zu definitions, %zu workloads, %zu solutions, %zu traces, "
               "%zu record files (%.1f MB), %zu blobs (%.1f MB), generated in %.1f s%s\n",
               t.data.root.c_str(), t.data.stats.definitions, t.data.stats.workloads,
               t.data.stats.solutions, t.data.stats.traces, t.data.stats.record_files,
               static_cast<double>(t.data.stats.record_bytes) / 1e6, t.data.stats.blobs,
               static_cast<double>(t.data.stats.blob_bytes) / 1e6, t.data.generate_seconds,
               t.keep ? " (kept: FIB_BENCH_KEEP)" : "");
}

}  // namespace

const SharedSynthetic& shared_synthetic_dataset() {
  static TempDataset holder;  // removes the folder at exit
  static const bool ready = (generate_into(holder), true);
  (void)ready;
  return holder.data;
}

}  // namespace fib::bench
