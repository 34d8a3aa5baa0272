// Input materialization and workload synthesis: every synthesized input set satisfies its
// definition's constraints and structure (valid offsets, distinct page ids in range, causal
// rows with keys, probability rows summing to one), reproducibly from a seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "fib/base/json.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/numeric.h"
#include "fib/tensor/random.h"
#include "fib/tensor/safetensors.h"
#include "fib/tensor/workload_synth.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/trace.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib {
namespace {

namespace fs = std::filesystem;

std::vector<Definition> corpus_definitions(const fs::path& corpus) {
  std::vector<Definition> out;
  for (const auto& e : fs::recursive_directory_iterator(corpus / "definitions")) {
    if (e.path().extension() == ".json") out.push_back(load_definition(e.path().string()));
  }
  std::sort(out.begin(), out.end(),
            [](const Definition& a, const Definition& b) { return a.name < b.name; });
  return out;
}

std::vector<std::int64_t> ints(const Tensor& t) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<std::int64_t>(t.get(i)));
  return v;
}

std::int64_t input_bytes(const Definition& d, const AxisValues& bound) {
  std::int64_t total = 0;
  for (const auto& s : d.inputs) {
    if (auto shape = d.concrete_shape(s, bound))
      total += static_cast<std::int64_t>(
          *dtype_storage_bytes(s.dtype, static_cast<std::uint64_t>(shape_numel(*shape))));
  }
  return total;
}

// Structure every family's inputs must have, beyond the definition's constraints.
void expect_structure(const Definition& d, const AxisValues& bound, const MaterializedInputs& in,
                      const std::string& where) {
  auto ax = [&](const char* n) { return axis_value(bound, n); };
  const auto& t = in.tensors;
  if (t.count("kv_indices") && ax("num_pages")) {
    const auto v = ints(t.at("kv_indices"));
    for (auto x : v) {
      ASSERT_GE(x, 0) << where;
      ASSERT_LT(x, *ax("num_pages")) << where;
    }
    if (static_cast<std::int64_t>(v.size()) <= *ax("num_pages")) {
      EXPECT_EQ(std::set<std::int64_t>(v.begin(), v.end()).size(), v.size())
          << where << ": page ids repeat";
    }
  }
  for (const char* indptr : {"kv_indptr", "qo_indptr", "cu_seqlens"}) {
    if (!t.count(indptr)) continue;
    const auto v = ints(t.at(indptr));
    EXPECT_EQ(v.front(), 0) << where << " " << indptr;
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end())) << where << " " << indptr;
  }
  if (t.count("kv_last_page_len")) {
    const std::int64_t ps = ax("page_size").value_or(1);
    for (auto x : ints(t.at("kv_last_page_len"))) {
      EXPECT_GE(x, 1) << where;
      EXPECT_LE(x, ps) << where;
    }
  }
  if (t.count("probs")) {
    const Tensor& p = t.at("probs");
    for (std::int64_t r = 0; r < p.dim(0); ++r) {
      double sum = 0;
      for (std::int64_t i = 0; i < p.dim(1); ++i) sum += p.get(r * p.dim(1) + i);
      EXPECT_NEAR(sum, 1.0, 1e-3) << where;
    }
  }
  if (t.count("top_k") && ax("vocab_size")) {
    for (auto k : ints(t.at("top_k"))) {
      EXPECT_GE(k, 1);
      EXPECT_LE(k, *ax("vocab_size"));
    }
  }
  if (t.count("sparse_indices")) {
    const Tensor& s = t.at("sparse_indices");
    const std::int64_t slots = *ax("num_pages") * ax("page_size").value_or(1);
    for (std::int64_t r = 0; r < s.dim(0); ++r) {
      std::set<std::int64_t> seen;
      bool padding = false;
      for (std::int64_t i = 0; i < s.dim(1); ++i) {
        const auto x = static_cast<std::int64_t>(s.get(r * s.dim(1) + i));
        if (x == -1) {
          padding = true;
          continue;
        }
        EXPECT_FALSE(padding) << where << ": -1 padding only at the end of a row";
        EXPECT_LT(x, slots);
        EXPECT_TRUE(seen.insert(x).second) << where << ": repeated slot";
      }
      EXPECT_FALSE(seen.empty()) << where;
    }
  }
  if (t.count("topk_ids")) {
    const Tensor& s = t.at("topk_ids");
    const std::int64_t experts = ax("num_experts").value_or(0);
    for (std::int64_t r = 0; r < s.dim(0); ++r) {
      std::set<std::int64_t> ids;
      for (std::int64_t i = 0; i < s.dim(1); ++i) {
        const auto packed =
            static_cast<std::uint32_t>(static_cast<std::int32_t>(s.get(r * s.dim(1) + i)));
        ids.insert(packed >> 16);
        EXPECT_LT(static_cast<std::int64_t>(packed >> 16), experts);
      }
      EXPECT_EQ(static_cast<std::int64_t>(ids.size()), s.dim(1))
          << where << ": experts repeat in a row";
    }
  }
  // Causal prefill: no sequence has more queries than keys when the axes allow it.
  if (t.count("qo_indptr") && t.count("kv_indptr") && d.name.find("causal") != std::string::npos) {
    const auto q = ints(t.at("qo_indptr")), k = ints(t.at("kv_indptr"));
    const std::int64_t ps = ax("page_size").value_or(1);
    const bool paged = t.count("kv_indices") > 0;
    std::int64_t total_keys = 0;
    std::vector<std::int64_t> keys;
    for (std::size_t b = 0; b + 1 < k.size(); ++b) {
      std::int64_t kv = k[b + 1] - k[b];
      if (paged && kv > 0) {
        const std::int64_t last =
            t.count("kv_last_page_len")
                ? static_cast<std::int64_t>(
                      t.at("kv_last_page_len").get(static_cast<std::int64_t>(b)))
                : ps;
        kv = (kv - 1) * ps + last;
      }
      keys.push_back(kv);
      total_keys += kv;
    }
    if (q.back() <= total_keys) {
      for (std::size_t b = 0; b + 1 < q.size(); ++b) {
        if (keys[b] > 0) {
          EXPECT_LE(q[b + 1] - q[b], keys[b])
              << where << ": sequence " << b << " has rows with no key";
        }
      }
    }
  }
}

TEST(Inputs, EveryCorpusWorkloadGetsValidIndexStructure) {
  FIB_REQUIRE_CORPUS(corpus);
  std::size_t checked = 0, refused = 0;
  for (const auto& d : corpus_definitions(corpus)) {
    const fs::path file = corpus / "workloads" / d.op_type / (d.name + ".jsonl");
    if (!fs::exists(file)) continue;
    Diagnostics diag;
    const std::string text = *read_text_file(file.string(), diag);
    std::size_t pos = 0;
    while (pos < text.size()) {
      const std::size_t nl = text.find('\n', pos);
      const std::string line = text.substr(pos, nl - pos);
      pos = nl == std::string::npos ? text.size() : nl + 1;
      if (line.empty()) continue;
      ReadContext ctx{file.string(), &diag};
      const auto t = trace_from_json(Json::parse(line), ctx);
      ASSERT_TRUE(t);
      MaterializeOptions opt;
      opt.seed = 7;
      opt.dataset_root = corpus;
      opt.integers_only = true;  // full-size workloads: check the index structure only
      const auto bound = *d.bind_axes(t->workload.axes);
      try {
        const auto in = materialize_inputs(d, t->workload, opt);
        const auto problems = check_input_constraints(d, t->workload, in);
        EXPECT_TRUE(problems.empty())
            << d.name << " " << t->workload.uuid << ": " << problems.front();
        expect_structure(d, bound, in, d.name + " " + t->workload.uuid);
        ++checked;
      } catch (const Error& e) {
        // The two corpus workloads with num_pages = 0 and non-empty KV indices.
        EXPECT_EQ(axis_value(bound, "num_pages"), 0) << e.what();
        EXPECT_NE(std::string(e.what()).find("page indices into an empty cache (num_pages = 0)"),
                  std::string::npos);
        ++refused;
      }
    }
  }
  EXPECT_EQ(checked, 661u);
  EXPECT_EQ(refused, 2u);
}

TEST(Inputs, SynthesizedWorkloadsFitEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  std::size_t full = 0, structural = 0;
  for (const auto& d : corpus_definitions(corpus)) {
    for (auto preset : {WorkloadPreset::kDecode, WorkloadPreset::kPrefill}) {
      SynthOptions so;
      so.preset = preset;
      so.count = 2;
      so.seed = 11;
      so.max_tokens = 64;
      so.max_kv_len = 256;
      const auto ws = synthesize_workloads(d, so);
      ASSERT_EQ(ws.size(), 2u);
      for (const auto& w : ws) {
        Diagnostics diag;
        ReadContext ctx{d.name, &diag};
        ASSERT_TRUE(check_workload(d, w, JsonPath(), ctx)) << d.name << ": " << diag.to_string();
        const auto bound = *d.bind_axes(w.axes);
        MaterializeOptions opt;
        opt.seed = 3;
        // Big weights (MoE, large GEMMs) are checked structurally to keep the test short; their
        // full materialization is the same code path.
        opt.integers_only = input_bytes(d, bound) > (std::int64_t{24} << 20);
        const auto in = materialize_inputs(d, w, opt);
        const auto problems = check_input_constraints(d, w, in);
        EXPECT_TRUE(problems.empty()) << d.name << ": " << problems.front();
        expect_structure(d, bound, in, d.name);
        if (!opt.integers_only) {
          for (const auto& spec : d.inputs) {
            if (spec.is_scalar()) {
              EXPECT_TRUE(in.scalars.count(spec.name)) << d.name << " " << spec.name;
              continue;
            }
            if (spec.is_optional() && !in.tensors.count(spec.name)) continue;
            ASSERT_TRUE(in.tensors.count(spec.name)) << d.name << " " << spec.name;
            EXPECT_EQ(in.tensors.at(spec.name).dtype(), spec.dtype);
            EXPECT_EQ(in.tensors.at(spec.name).shape(), *d.concrete_shape(spec, bound));
          }
          ++full;
        } else {
          ++structural;
        }
      }
    }
  }
  EXPECT_EQ(full + structural, 136u * 4);
  EXPECT_GT(full, 300u);
}

Definition paged_prefill() {
  const char* text = R"J({"name": "p", "op_type": "gqa_paged",
    "axes": {"num_qo_heads": {"type": "const", "value": 2}, "num_kv_heads": {"type": "const", "value": 1},
             "head_dim": {"type": "const", "value": 4}, "page_size": {"type": "const", "value": 4},
             "len_indptr": {"type": "var"}, "total_q": {"type": "var"}, "num_kv_indices": {"type": "var"},
             "num_pages": {"type": "var"}},
    "constraints": ["total_q == qo_indptr[-1].item()", "num_kv_indices == kv_indptr[-1].item()"],
    "inputs": {"q": {"shape": ["total_q", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
               "k_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
               "qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
               "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
               "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
               "kv_last_page_len": {"shape": ["len_indptr"], "dtype": "int32"},
               "sm_scale": {"shape": null, "dtype": "float32", "description": "Default is 1/sqrt(4)."}},
    "outputs": {"o": {"shape": ["total_q", "num_qo_heads", "head_dim"], "dtype": "bfloat16"}},
    "reference": "def run(q, k_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):\n    return q\n"})J";
  Diagnostics diag;
  ReadContext ctx{"p", &diag};
  return *definition_from_json(Json::parse(text), ctx);
}

Workload paged_workload(std::int64_t batch, std::int64_t total_q, std::int64_t nnz,
                        std::int64_t pages) {
  Workload w;
  w.uuid = "w";
  w.axes = {{"len_indptr", batch + 1},
            {"total_q", total_q},
            {"num_kv_indices", nnz},
            {"num_pages", pages}};
  for (const char* n :
       {"q", "k_cache", "qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len"}) {
    WorkloadInput in;
    in.name = n;
    w.inputs.push_back(in);
  }
  return w;
}

TEST(Inputs, SameSeedSameBytesOtherSeedOtherValues) {
  const Definition d = paged_prefill();
  const Workload w = paged_workload(3, 20, 12, 40);
  MaterializeOptions a, b;
  a.seed = b.seed = 5;
  const auto x = materialize_inputs(d, w, a), y = materialize_inputs(d, w, b);
  for (const auto& [name, t] : x.tensors) EXPECT_TRUE(t.same_bytes(y.tensors.at(name))) << name;
  b.seed = 6;
  const auto z = materialize_inputs(d, w, b);
  EXPECT_FALSE(x.tensors.at("kv_indices").same_bytes(z.tensors.at("kv_indices")));
  EXPECT_FALSE(x.tensors.at("q").same_bytes(z.tensors.at("q")));
  EXPECT_EQ(x.origins.at("kv_indices"), InputOrigin::kSynthesized);
  EXPECT_EQ(x.origins.at("q"), InputOrigin::kRandom);
  EXPECT_EQ(x.origins.at("sm_scale"), InputOrigin::kSynthesized);
  EXPECT_DOUBLE_EQ(std::get<double>(x.scalars.at("sm_scale")), 0.5);
  ASSERT_EQ(x.notes.size(), 1u);
  EXPECT_EQ(x.notes[0],
            "sm_scale: scalar not given; set to 0.5 (the 1/sqrt(d) its description states)");
}

TEST(Inputs, DeferredBulkFillsMakeTheSameBytes) {
  const Definition d = paged_prefill();
  const Workload w = paged_workload(3, 20, 12, 40);
  MaterializeOptions now, later;
  now.seed = later.seed = 5;
  later.defer_bulk_fills = true;
  const auto made = materialize_inputs(d, w, now), deferred = materialize_inputs(d, w, later);
  EXPECT_TRUE(made.deferred.empty());
  ASSERT_EQ(deferred.deferred.size(), 2u);
  for (const char* name : {"q", "k_cache"}) {
    EXPECT_EQ(deferred.tensors.count(name), 0u) << name;
    EXPECT_EQ(deferred.origins.at(name), InputOrigin::kRandom) << name;
    const BulkFill& f = deferred.deferred.at(name);
    EXPECT_EQ(f.key, Rng::derive(5, name));
    EXPECT_TRUE(make_bulk_fill(f).same_bytes(made.tensors.at(name))) << name;
  }
  // The structure is made on the host either way.
  for (const char* name : {"qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len"})
    EXPECT_TRUE(deferred.tensors.at(name).same_bytes(made.tensors.at(name))) << name;
  // Element 5 of q: N(0, 1) from group 1 of the stream Rng::derive(5, "q"), as bfloat16.
  float v[4];
  counter_random::float_group(counter_random::FillSpec{}, Rng::derive(5, "q"), 1, v);
  EXPECT_EQ(made.tensors.at("q").data<std::uint16_t>()[5], numeric::float_to_bf16(v[1]));
}

TEST(Inputs, MoreQueriesThanKeysIsNotedNotHidden) {
  const Definition d = paged_prefill();
  // 2 sequences with 2 pages (at most 8 keys) but 30 queries: some rows must see no key.
  const auto in = materialize_inputs(d, paged_workload(2, 30, 2, 4), {});
  EXPECT_TRUE(check_input_constraints(d, paged_workload(2, 30, 2, 4), in).empty());
  bool noted = false;
  for (const auto& n : in.notes)
    noted = noted || n.find("some causal rows see no key") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(Inputs, BlobsAreReadAndChecked) {
  const Definition d = paged_prefill();
  testing::TempDir dir;
  Tensor indptr(DType::kInt32, {3});
  const std::int32_t v[] = {0, 1, 5};
  std::copy(v, v + 3, indptr.data<std::int32_t>());
  write_safetensors(dir.path() / "blob/x.safetensors", {{"kv_indptr", indptr}});
  Workload w = paged_workload(2, 6, 5, 10);
  for (auto& in : w.inputs) {
    if (in.name == "kv_indptr") {
      in.kind = InputKind::kSafetensors;
      in.path = "./blob/x.safetensors";
      in.tensor_key = "kv_indptr";
    }
  }
  MaterializeOptions opt;
  opt.dataset_root = dir.path();
  const auto in = materialize_inputs(d, w, opt);
  EXPECT_EQ(in.origins.at("kv_indptr"), InputOrigin::kBlob);
  EXPECT_TRUE(in.tensors.at("kv_indptr").same_bytes(indptr));
  EXPECT_TRUE(check_input_constraints(d, w, in).empty());
  // The synthesized queries respect the blob's sequence sizes (1 and 4 pages of 4).
  const auto q = ints(in.tensors.at("qo_indptr"));
  EXPECT_EQ(q.back(), 6);

  Tensor wrong(DType::kInt64, {3});
  write_safetensors(dir.path() / "blob/x.safetensors", {{"kv_indptr", wrong}});
  try {
    materialize_inputs(d, w, opt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "./blob/x.safetensors: error: tensor 'kv_indptr' is int64 but p input 'kv_indptr' "
                 "is int32");
  }
  // A missing blob is synthesized, and said so.
  for (auto& in2 : w.inputs) {
    if (in2.name == "kv_indptr") in2.path = "./blob/missing.safetensors";
  }
  const auto s = materialize_inputs(d, w, opt);
  EXPECT_EQ(s.origins.at("kv_indptr"), InputOrigin::kSynthesized);
  EXPECT_EQ(s.notes[0],
            "kv_indptr: blob ./blob/missing.safetensors is not present; synthesized instead");
}

TEST(WorkloadSynth, UnknownAxisIsNamed) {
  Diagnostics diag;
  ReadContext ctx{"d", &diag};
  const auto d = definition_from_json(
      Json::parse(R"({"name": "x", "op_type": "t", "axes": {"frobs": {"type": "var"}},
    "inputs": {"a": {"shape": ["frobs"], "dtype": "float32"}}, "outputs": {"b": {"shape": ["frobs"], "dtype": "float32"}},
    "reference": "def run(a):\n    return a\n"})"),
      ctx);
  ASSERT_TRUE(d);
  try {
    synthesize_workloads(*d, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "x: error: cannot size var axis 'frobs': no synthesis rule for it (give the "
                 "workload's axes explicitly)");
  }
}

}  // namespace
}  // namespace fib
