// Makes the inputs of the golden float8 parity cases (tests/data/golden_fp8/) and what the GPU
// machine needs to compute their PyTorch outputs. Not a test: its cases are DISABLED_ and it is
// not registered with CTest. tools/golden/fp8_golden.sh runs it:
//
//   fp8_golden_tool --gtest_also_run_disabled_tests --gtest_filter='Fp8Golden.DISABLED_Write'
//
// writes, for every case, tests/data/golden_fp8/<case>.inputs.safetensors and the manifest
// (tests/data/golden_fp8/manifest.json), and into the git-ignored scratch folder
// $FIB_GOLDEN_SCRATCH (default .fp8-golden-scratch/) the scaled definitions' JSON and the bridge's
// job lists (jobs-cpu.jsonl, jobs-cuda.jsonl; paths relative to the repository root, where the
// device command runs). The scratch folder travels to the device with `carry` and is never
// committed: definition text stays in the corpus.
//
// Fp8Golden.DISABLED_PreflightWithLocalTorch runs the MoE cases through the local PyTorch first
// (1.13 on Debian: float8 inputs go as their exact float32 values, which the references upcast to
// anyway), to catch routing ties or bad scales before device time is spent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>

#include "fib/tensor/inputs.h"
#include "reference/golden_fp8.h"
#include "reference/python_reference.h"

namespace fib::testing::golden {
namespace {

namespace fs = std::filesystem;

// One case as the generator sees it: the manifest entry plus how to draw its inputs.
struct Spec {
  GoldenCase c;
  std::int64_t local_expert_offset = -1;  // -1: the definition has none
  std::vector<std::int64_t> seq_lens;     // dsa indexer: the rows' lengths
};

Spec moe(std::string name, std::string definition, std::map<std::string, std::int64_t> axes,
         std::map<std::string, std::string> constants, std::uint64_t seed,
         std::int64_t offset = -1) {
  Spec s;
  s.c.name = std::move(name);
  s.c.definition = std::move(definition);
  s.c.op_type = "moe";
  s.c.scaled_axes = std::move(axes);
  s.c.scaled_constants = std::move(constants);
  s.c.var_axes = {{"seq_len", 16}};
  s.c.seed = seed;
  s.local_expert_offset = offset;
  return s;
}

Spec indexer(std::string name, std::map<std::string, std::int64_t> axes,
             std::map<std::string, std::string> constants, AxisValues var, std::uint64_t seed,
             std::vector<std::int64_t> seq_lens) {
  Spec s;
  s.c.name = std::move(name);
  s.c.definition = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64";
  s.c.op_type = "dsa_paged";
  s.c.scaled_axes = std::move(axes);
  s.c.scaled_constants = std::move(constants);
  s.c.var_axes = std::move(var);
  s.c.seed = seed;
  s.seq_lens = std::move(seq_lens);
  return s;
}

// Block-scaled geometry: hidden h, intermediate i, block b (the references' BLOCK constant; the
// native kernel reads block sizes off the scale tensors).
std::map<std::string, std::int64_t> block_axes(std::int64_t h, std::int64_t i, std::int64_t b) {
  return {{"hidden_size", h},
          {"intermediate_size", i},
          {"gemm1_out_size", 2 * i},
          {"num_hidden_blocks", h / b},
          {"num_intermediate_blocks", i / b},
          {"num_gemm1_out_blocks", 2 * i / b}};
}

std::vector<Spec> specs() {
  std::vector<Spec> v;
  const auto with = [](std::map<std::string, std::int64_t> a,
                       std::map<std::string, std::int64_t> more) {
    a.insert(more.begin(), more.end());
    return a;
  };
  const auto str = [](std::int64_t x) { return std::to_string(x); };
  // DeepSeek-V3 geometry: 32 global experts in 8 groups of 4 (top-4 groups, top-8), 8 local ones
  // at offset 8; hidden 128 and intermediate 64 in blocks of 32.
  v.push_back(moe("moe_fp8_ds_ng8_kg4",
                  "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
                  with(block_axes(128, 64, 32), {{"num_experts", 32}, {"num_local_experts", 8}}),
                  {{"H", "128"}, {"I", "64"}, {"BLOCK", "32"}}, 101, 8));
  // Kimi-K2 geometry, every expert local (offset 0): 32 experts, direct top-8.
  v.push_back(moe("moe_fp8_ds_ng1_e384",
                  "moe_fp8_block_scale_ds_routing_topk8_ng1_kg1_e384_h7168_i2048",
                  with(block_axes(64, 32, 16), {{"num_experts", 32}, {"num_local_experts", 32}}),
                  {{"E_global", "32"}, {"H", "64"}, {"I", "32"}, {"BLOCK", "16"}}, 102, 0));
  // Its EP=8 slice: 8 of 64 experts local, at offset 40.
  v.push_back(moe("moe_fp8_ds_ng1_e48",
                  "moe_fp8_block_scale_ds_routing_topk8_ng1_kg1_e48_h7168_i2048",
                  with(block_axes(128, 64, 32), {{"num_experts", 64}, {"num_local_experts", 8}}),
                  {{"E_global", "64"}, {"H", "128"}, {"I", "64"}, {"BLOCK", "32"}}, 103, 40));
  // Renormalize routing, 16 experts.
  const auto renorm = [&](std::string name, std::string def, std::int64_t h, std::int64_t i,
                          std::int64_t b, std::uint64_t seed) {
    return moe(std::move(name), std::move(def),
               with(block_axes(h, i, b), {{"num_local_experts", 16}}),
               {{"E", "16"}, {"H", str(h)}, {"I", str(i)}, {"BLOCK", str(b)}}, seed);
  };
  v.push_back(renorm("moe_fp8_renorm_topk10", "moe_fp8_block_scale_renorm_topk10_e128_h2048_i512",
                     64, 32, 16, 104));
  v.push_back(renorm("moe_fp8_renorm_topk8_i768",
                     "moe_fp8_block_scale_renorm_topk8_e128_h2048_i768", 64, 48, 16, 105));
  v.push_back(renorm("moe_fp8_renorm_topk8_h4096",
                     "moe_fp8_block_scale_renorm_topk8_e128_h4096_i1536", 128, 32, 16, 106));
  // Per-tensor scales (Llama-4 top-1 and Renormalize top-8).
  const auto per_tensor = [&](std::string name, std::string def, std::int64_t e, std::int64_t h,
                              std::int64_t i, std::uint64_t seed) {
    return moe(std::move(name), std::move(def),
               {{"num_experts", e},
                {"hidden_size", h},
                {"intermediate_size", i},
                {"gemm1_out_size", 2 * i}},
               {{"E", str(e)}, {"H", str(h)}, {"I", str(i)}}, seed);
  };
  v.push_back(per_tensor("trtllm_fp8_topk8",
                         "trtllm_fp8_per_tensor_scale_moe_topk8_e128_h2048_i768", 16, 64, 48, 107));
  v.push_back(per_tensor("trtllm_fp8_topk1_e128",
                         "trtllm_fp8_per_tensor_scale_moe_topk1_e128_h5120_i8192", 8, 128, 64,
                         108));
  v.push_back(per_tensor("trtllm_fp8_topk1_e16",
                         "trtllm_fp8_per_tensor_scale_moe_topk1_e16_h5120_i8192", 4, 128, 128,
                         109));
  // The DSA top-k indexer: at its real geometry (64 heads of 128, pages of 64, top-2048) with a
  // row longer than top-k and one shorter, and scaled to top-64 with rows longer, shorter, empty
  // and exactly top-k long.
  v.push_back(indexer("dsa_indexer_topk2048", {}, {},
                      {{"batch_size", 2}, {"max_num_pages", 33}, {"num_pages", 33}}, 110,
                      {2100, 700}));
  v.push_back(indexer("dsa_indexer_topk64", {{"topk", 64}}, {{"topk", "64"}},
                      {{"batch_size", 4}, {"max_num_pages", 3}, {"num_pages", 10}}, 111,
                      {150, 40, 0, 64}));
  return v;
}

fs::path scratch_dir() {
  const char* env = std::getenv("FIB_GOLDEN_SCRATCH");
  return env && *env ? fs::path(env) : source_dir() / ".fp8-golden-scratch";
}

// The structure-aware inputs of the definition's family, then what a parity case needs on top:
// distinct bf16 routing logits (a tie at the k-th place would make torch.topk's choice
// implementation-defined), the case's expert offset, and the indexer's row lengths.
reference::Arguments make_inputs(const Definition& def, const Spec& s) {
  Workload w;
  w.uuid = s.c.name;
  w.axes = s.c.var_axes;
  MaterializeOptions opt;
  opt.seed = s.c.seed;
  const MaterializedInputs m = materialize_inputs(def, w, opt);
  reference::Arguments args;
  args.tensors.insert(m.tensors.begin(), m.tensors.end());
  args.scalars.insert(m.scalars.begin(), m.scalars.end());
  std::mt19937_64 rng(s.c.seed);
  if (auto it = args.tensors.find("routing_logits");
      it != args.tensors.end() && it->second.dtype() == DType::kBFloat16) {
    Tensor& l = it->second;
    const std::int64_t t = l.dim(0), e = l.dim(1);
    std::vector<int> perm(static_cast<std::size_t>(e));
    for (std::int64_t i = 0; i < t; ++i) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (std::int64_t j = 0; j < e; ++j)
        l.set(i * e + j, -4.0 + 8.0 * perm[static_cast<std::size_t>(j)] / static_cast<double>(e));
    }
  }
  if (s.local_expert_offset >= 0) {
    args.scalars.insert_or_assign("local_expert_offset", Scalar{s.local_expert_offset});
    args.scalars.insert_or_assign("routed_scaling_factor", Scalar{2.5});
  }
  if (!s.seq_lens.empty()) {
    Tensor& lens = args.tensors.at("seq_lens");
    for (std::size_t b = 0; b < s.seq_lens.size(); ++b)
      lens.set(static_cast<std::int64_t>(b), static_cast<double>(s.seq_lens[b]));
  }
  return args;
}

TEST(Fp8Golden, DISABLED_Write) {
  FIB_REQUIRE_CORPUS(corpus);
  const fs::path out = golden_dir(), scratch = scratch_dir();
  fs::create_directories(out);
  fs::create_directories(scratch / "out");
  const fs::path root = source_dir();
  const auto rel = [&root](const fs::path& p) { return fs::relative(p, root).generic_string(); };
  Json manifest = Json::object();
  manifest["about"] =
      "Golden float8 parity cases: inputs made by tests/tools/fp8_golden_gen.cpp, outputs of each "
      "corpus definition's own PyTorch reference (rebuilt from ../shared/corpus with the scaling "
      "below) computed on the GPU machine by tools/golden/fp8_golden.sh, checked by "
      "tests/reference/fp8_golden_test.cpp.";
  manifest["cases"] = Json::array();
  std::string jobs_cpu, jobs_cuda;
  std::uintmax_t total = 0;
  for (const Spec& s : specs()) {
    const Definition def = golden_definition(corpus, s.c);
    std::string why;
    ASSERT_NE(reference::find_kernel(def, &why), nullptr) << s.c.name << ": " << why;
    const reference::Arguments args = make_inputs(def, s);
    // The native kernel must accept the inputs (shapes, index ranges) before they travel.
    const reference::Outputs native = reference::run(def, s.c.var_axes, args);
    write_arguments(s.c.inputs_path(), args);
    const fs::path def_path = scratch / (s.c.name + ".json");
    std::ofstream(def_path) << dump_json_pretty(to_json(def));
    for (const std::string device : {"cpu", "cuda"}) {
      Json job = Json::object();
      job["definition"] = rel(def_path);
      job["inputs"] = rel(s.c.inputs_path());
      job["outputs"] = rel(scratch / "out" / s.c.outputs_path(device).filename());
      job["seed"] = 0;
      (device == std::string("cpu") ? jobs_cpu : jobs_cuda) += job.dump() + "\n";
    }
    Json entry = case_to_json(s.c);
    entry["inputs"] = s.c.inputs_path().filename().string();
    entry["outputs"] = {{"cpu", s.c.outputs_path("cpu").filename().string()},
                        {"cuda", s.c.outputs_path("cuda").filename().string()}};
    manifest["cases"].push_back(entry);
    const auto bytes = fs::file_size(s.c.inputs_path());
    total += bytes;
    std::printf("  %-28s %-62s %8ju bytes\n", s.c.name.c_str(), def.name.c_str(), bytes);
  }
  std::ofstream(out / "manifest.json") << dump_json_pretty(manifest);
  std::ofstream(scratch / "jobs-cpu.jsonl") << jobs_cpu;
  std::ofstream(scratch / "jobs-cuda.jsonl") << jobs_cuda;
  std::printf("  inputs: %ju bytes in all; scratch: %s\n", total, scratch.string().c_str());
}

Tensor as_float32_if_fp8(const Tensor& t) {
  return t.dtype() == DType::kFloat8E4M3FN || t.dtype() == DType::kFloat8E5M2 ? to_float32(t) : t;
}

TEST(Fp8Golden, DISABLED_PreflightWithLocalTorch) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  PythonReferenceBatch batch;
  struct Job {
    std::string name;
    reference::Outputs native;
    std::size_t id;
  };
  std::vector<Job> jobs;
  for (const Spec& s : specs()) {
    if (s.c.op_type != "moe") continue;  // the indexer's reference needs float8 dtypes
    const Definition def = golden_definition(corpus, s.c);
    reference::Arguments args = read_arguments(s.c.inputs_path());
    reference::Outputs native = reference::run(def, s.c.var_axes, args);
    for (auto& [n, t] : args.tensors) t = as_float32_if_fp8(t);
    jobs.push_back({s.c.name, std::move(native), batch.add(def, args)});
  }
  batch.run();
  for (const Job& j : jobs) {
    const Tensor& mine = j.native.at("output");
    const Tensor theirs = batch.outputs(j.id).at("output");
    double norm = 0;
    for (std::int64_t i = 0; i < theirs.numel(); ++i) norm += std::fabs(theirs.get(i));
    const auto close = tensors_close(mine, theirs, 1e-4, 1.0 / 128);
    EXPECT_TRUE(close) << j.name;
    std::printf("  %-28s mean |out| %.3g, %s\n", j.name.c_str(),
                norm / static_cast<double>(theirs.numel()), close.message());
  }
}

}  // namespace
}  // namespace fib::testing::golden
