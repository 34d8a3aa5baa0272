// Reference parity: for every corpus definition that onboarding its corpus models reproduces (the
// models it is tagged with, at the serving setups its tags name, as in fidelity_test.cpp), the
// generated PyTorch `reference` computes what the corpus reference computes. Both run through the
// local PyTorch (Debian's python3-torch 1.13 in CI) in one Python process, on the same
// structure-aware random inputs (fib's workload and input synthesis, so indices, page tables,
// causal lengths and routing ids are valid), with the same torch seed, and every output is
// compared. Any mismatch fails with the definition, the output and its first differing element.
//
// What is not compared here, each listed by name with its reason in the test output:
// - definitions with float8 tensors when the local torch has no float8 dtypes (torch < 2.1, as
//   Debian's 1.13). Under a newer torch the same test compares them too (FIB_TORCH_PYTHON);
//   docs/onboarding.md ("Reference parity") records that run on the GPU machine.
// - definitions whose inputs stay above kSkipAbove after scaling (none at the time of writing).
//
// Sizes: one mixed workload of at most 12 tokens (fewer where state pools would be large) and
// KV of at most 150 tokens. Definitions whose inputs exceed kScaleAbove at their real const sizes
// (MoE weights, large GEMMs) are compared at smaller sizes through scaled_definition(), applied
// the same way to both definitions: the const axes and the size constants each reference
// hard-codes (the corpus's `H`/`I`, the generated `hidden_size`/`intermediate_size`); both
// references' size asserts are dropped. Expert counts, top_k and routing groups keep their real
// values.
//
// Tolerances: both references upcast to fp32, compute in fp32 and round once, so floating-point
// outputs agree to about one rounding of the output dtype: atol 1e-2, rtol 8e-3 (one bfloat16 ulp
// is 2^-8 = 3.9e-3 relative; summation order may differ). Integer outputs (sampled token ids,
// top-k indices) must be equal.
//
// Sampling: both references filter each row (top-k, top-p) and draw exactly one
// torch.multinomial sample per row, in row order, after the same torch.manual_seed, so equal
// filtering gives equal tokens and the tokens are compared exactly. (A filtering difference shows
// only when the draw lands on the mass that differs; the single seed is not a distribution test.)
//
// Known, intended difference, handled explicitly: a causal query row that sees no key (kv_len <
// q_len) gets output 0 and lse -inf from the generated references and from the corpus's
// loop-style references, but NaN output from its vectorized ones. A NaN output row of the corpus
// is accepted against a zero row of the generated reference only where both lse values are
// -inf; such rows are counted in the output.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "fib/dataset/trace_set.h"
#include "fib/onboard/model_registry.h"
#include "fib/onboard/onboard.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/workload_synth.h"
#include "reference/python_reference.h"
#include "reference/reference_test_util.h"
#include "support/test_paths.h"

namespace fib::onboard {
namespace {

namespace ft = ::fib::testing;

constexpr double kAtol = 1e-2;
constexpr double kRtol = 8e-3;
// Inputs above this (bytes, at the synthesized workload) are compared at scaled sizes.
constexpr std::uint64_t kScaleAbove = 16ull << 20;
// Inputs above this even after scaling are skipped (with the reason printed).
constexpr std::uint64_t kSkipAbove = 64ull << 20;
constexpr std::uint64_t kSeed = 20240611;

// One corpus definition and the distinct generated definitions of that name (models may
// generate it with different descriptions; the reference texts are what matters here).
struct Reproduced {
  const Definition* corpus = nullptr;
  std::vector<std::pair<std::string, Definition>> generated;  // (models, definition)
};

// Onboards every corpus-tagged model at the serving setups its tags name (as the fidelity test
// does) and pairs each corpus definition with what the models it is tagged with generate under
// its name. (Another model may generate the same name with other constants, e.g. a different
// rmsnorm eps; that is a different model's kernel, not this definition's reference.)
std::map<std::string, Reproduced> reproduce(const TraceSet& set,
                                            const std::vector<BundledModel>& models) {
  struct Setup {
    std::vector<const Definition*> corpus;
    std::set<int> tp, ep;
    bool quantized = false;
  };
  std::map<std::string, Setup> setups;
  for (const auto& rec : set.definitions()) {
    const Definition& d = rec.value;
    for (const auto& tag : d.tag_values("model:")) {
      const BundledModel* m = find_model(models, tag);
      if (!m) continue;  // the fidelity test reports unresolved tags
      auto& s = setups[m->slug];
      if (std::find(s.corpus.begin(), s.corpus.end(), &d) == s.corpus.end()) s.corpus.push_back(&d);
      for (const auto& v : d.tag_values("tp:")) s.tp.insert(std::stoi(v));
      for (const auto& v : d.tag_values("ep:")) s.ep.insert(std::stoi(v));
      s.quantized = s.quantized || d.name.rfind("trtllm_", 0) == 0;
    }
  }
  std::map<std::string, Reproduced> out;
  for (const auto& [slug, s] : setups) {
    const BundledModel* m = find_model(models, slug);
    Diagnostics diag;
    const ReadContext ctx{m->path.string(), &diag};
    auto cfg = normalize_config(m->config, ctx);
    EXPECT_TRUE(cfg) << diag.to_string();
    if (!cfg) continue;
    OnboardRequest req;
    req.config = *cfg;
    req.slug = slug;
    req.display_name = m->display_name;
    req.options.tp.assign(s.tp.begin(), s.tp.end());
    req.options.ep.assign(s.ep.begin(), s.ep.end());
    if (req.options.tp.empty()) req.options.tp = m->tp;
    if (req.options.ep.empty()) req.options.ep = m->ep;
    req.options.include_quantized = s.quantized;
    const OnboardResult r = generate(req);
    for (const Definition* c : s.corpus) {
      const DefinitionOutcome* o = r.find(c->name);
      if (!o) continue;  // the fidelity test fails on it
      auto& rep = out[c->name];
      rep.corpus = c;
      bool known = false;
      for (auto& [who, g] : rep.generated) {
        if (g.reference == o->def.reference) {
          who += "," + slug;
          known = true;
        }
      }
      if (!known) rep.generated.emplace_back(slug, o->def);
    }
  }
  return out;
}

bool is_float8(DType t) { return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2; }

// The first input or output of `def` with a float8 or float4 dtype, if any.
std::optional<DType> low_precision_dtype(const Definition& def) {
  for (const auto* list : {&def.inputs, &def.outputs}) {
    for (const auto& t : *list) {
      if (is_float8(t.dtype) || t.dtype == DType::kFloat4E2M1) return t.dtype;
    }
  }
  return std::nullopt;
}

bool torch_has_float8(const std::string& python) {
  const std::string cmd = python +
                          " -c 'import sys, torch; sys.exit(0 if hasattr(torch, "
                          "\"float8_e4m3fn\") else 1)' >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Bytes of every input of `def` under the workload's axes (without allocating them).
std::uint64_t input_bytes(const Definition& def, const Workload& w) {
  const auto bound = def.bind_axes(w.axes);
  if (!bound) return 0;
  std::uint64_t total = 0;
  for (const auto& t : def.inputs) {
    if (t.is_scalar()) continue;
    const auto shape = def.concrete_shape(t, *bound);
    if (!shape) continue;
    std::uint64_t n = 1;
    for (auto d : *shape) n *= static_cast<std::uint64_t>(d);
    total += dtype_storage_bytes(t.dtype, n).value_or(0);
  }
  return total;
}

// A small mixed workload; fewer tokens when the inputs would exceed kScaleAbove (state pools
// and MTP buffers grow with the batch).
Workload synthesize(const Definition& def) {
  Workload w;
  for (const std::int64_t tokens : {12, 4, 2}) {
    SynthOptions o;
    o.preset = WorkloadPreset::kMixed;
    o.count = 1;
    o.seed = kSeed;
    o.max_tokens = tokens;
    o.max_kv_len = 150;  // a few 64-token pages
    w = synthesize_workloads(def, o).at(0);
    if (input_bytes(def, w) <= kScaleAbove) break;
  }
  return w;
}

std::int64_t const_axis(const Definition& d, const std::string& name) {
  const Axis* a = d.axis(name);
  return a && a->value ? *a->value : 0;
}

// Smaller sizes for a corpus definition and its generated twin: the const axes to change and, by
// reference, the size constants the corpus and the generated reference hard-code. nullopt when
// the family has no rule.
struct Scaling {
  std::map<std::string, std::int64_t> axes;
  std::map<std::string, std::string> corpus_constants, generated_constants;
  std::string summary;
};

std::optional<Scaling> scaling_for(const Definition& corpus) {
  Scaling s;
  if (corpus.op_type == "gemm") {
    // C = A @ B.T: halve the larger of N and K until the weight is small; neither reference
    // hard-codes N or K except in asserts.
    std::int64_t n = const_axis(corpus, "N"), k = const_axis(corpus, "K");
    while (n * k > (2ll << 20)) {
      if (n >= k && n % 2 == 0)
        n /= 2;
      else if (k % 2 == 0)
        k /= 2;
      else
        break;
    }
    s.axes = {{"N", n}, {"K", k}};
    s.summary = fmt::format("N={} K={}", n, k);
    return s;
  }
  if (corpus.op_type == "moe") {
    // Hidden and intermediate sizes shrink; expert counts, top_k and routing groups stay, so the
    // routing is the real one. Block-scaled definitions keep several 128-blocks per dimension.
    const bool blocks = corpus.axis("num_hidden_blocks") != nullptr;
    const std::int64_t h = blocks ? 256 : 128, i = blocks ? 128 : 64;
    s.axes = {{"hidden_size", h}, {"intermediate_size", i}};
    if (corpus.axis("gemm1_out_size")) s.axes["gemm1_out_size"] = 2 * i;
    if (blocks) {
      s.axes["num_hidden_blocks"] = h / 128;
      s.axes["num_intermediate_blocks"] = i / 128;
      if (corpus.axis("num_gemm1_out_blocks")) s.axes["num_gemm1_out_blocks"] = 2 * i / 128;
    }
    s.corpus_constants = {{"H", std::to_string(h)}, {"I", std::to_string(i)}};
    s.generated_constants = {{"hidden_size", std::to_string(h)},
                             {"intermediate_size", std::to_string(i)}};
    s.summary = fmt::format("hidden_size={} intermediate_size={}", h, i);
    return s;
  }
  return std::nullopt;
}

// Tolerances of an output: one bf16 rounding for floating point, none for integers (token ids,
// indices), where a relative tolerance would let large ids differ.
struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance_for(DType t) {
  return dtype_is_float(t) ? Tolerance{kAtol, kRtol} : Tolerance{0.0, 0.0};
}

// The first element outside tolerance, as a multi-index ("[3, 1, 17]"), or "" when none.
std::string first_mismatch(const Tensor& actual, const Tensor& expected, Tolerance tol) {
  if (actual.shape() != expected.shape()) return "";
  for (std::int64_t i = 0; i < actual.numel(); ++i) {
    const double a = actual.get(i), e = expected.get(i);
    bool ok;
    if (std::isnan(a) || std::isnan(e))
      ok = std::isnan(a) && std::isnan(e);
    else if (std::isinf(a) || std::isinf(e))
      ok = a == e;
    else
      ok = std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
    if (ok) continue;
    std::vector<std::int64_t> idx(actual.rank());
    std::int64_t rest = i;
    for (std::size_t d = actual.rank(); d-- > 0;) {
      idx[d] = rest % actual.dim(d);
      rest /= actual.dim(d);
    }
    return fmt::format("[{}] (generated {} vs corpus {})", fmt::join(idx, ", "), a, e);
  }
  return "";
}

// Causal rows that see no key: NaN output in a vectorized corpus reference, 0 in the generated
// one, lse -inf in both. Replaces such corpus rows by zeros; returns how many there were.
std::int64_t accept_fully_masked_rows(reference::Outputs& corpus, const reference::Outputs& gen) {
  auto co = corpus.find("output");
  auto cl = corpus.find("lse");
  auto go = gen.find("output");
  auto gl = gen.find("lse");
  if (co == corpus.end() || cl == corpus.end() || go == gen.end() || gl == gen.end()) return 0;
  Tensor& out = co->second;
  const Tensor& lse = cl->second;
  if (out.rank() != 3 || lse.rank() != 2 || out.dim(0) != lse.dim(0) || out.dim(1) != lse.dim(1) ||
      go->second.shape() != out.shape() || gl->second.shape() != lse.shape())
    return 0;
  const std::int64_t width = out.dim(2);
  std::int64_t rows = 0;
  Tensor fixed;
  for (std::int64_t r = 0; r < lse.numel(); ++r) {
    if (!(std::isinf(lse.get(r)) && lse.get(r) < 0 && gl->second.get(r) == lse.get(r))) continue;
    bool nan_row = true, zero_row = true;
    for (std::int64_t j = 0; j < width; ++j) {
      nan_row = nan_row && std::isnan(out.get(r * width + j));
      zero_row = zero_row && go->second.get(r * width + j) == 0.0;
    }
    if (!nan_row || !zero_row) continue;
    if (!fixed.defined()) fixed = out.clone();
    for (std::int64_t j = 0; j < width; ++j) fixed.set(r * width + j, 0.0);
    ++rows;
  }
  if (fixed.defined()) out = fixed;
  return rows;
}

struct Job {
  std::string name;
  std::string models;  // the models whose generated reference this is
  std::string scaled;  // "" or the scaled sizes
  std::size_t corpus_id = 0, generated_id = 0;
  std::vector<std::string> outputs;
};

TEST(ReferenceParity, GeneratedReferencesMatchCorpusReferences) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  const auto start = std::chrono::steady_clock::now();
  const bool float8 = torch_has_float8(python);
  const std::string version = ft::torch_version(python);

  Diagnostics diag;
  const auto models = load_bundled_models(ft::source_dir() / "models", diag);
  ASSERT_FALSE(diag.has_errors()) << diag.to_string();
  const TraceSet set = TraceSet::load(corpus);
  const auto reproduced = reproduce(set, models);
  ASSERT_FALSE(reproduced.empty());

  ft::PythonReferenceBatch batch;
  std::vector<Job> jobs;
  std::map<std::string, std::string> skipped;  // name -> reason
  for (const auto& [name, rep] : reproduced) {
    SCOPED_TRACE(name);
    const Definition& c = *rep.corpus;
    if (const auto low = low_precision_dtype(c); low && (!is_float8(*low) || !float8)) {
      skipped[name] =
          is_float8(*low)
              ? fmt::format(
                    "{} tensors: torch {} has no float8 dtypes (compared on the GPU machine, see "
                    "docs/onboarding.md, Reference parity)",
                    dtype_name(*low), version)
              : fmt::format("{} tensors: the Python bridge has no float4 dtype", dtype_name(*low));
      continue;
    }
    Definition corpus_def = c;
    std::vector<Definition> generated;
    for (const auto& [who, g] : rep.generated) generated.push_back(g);
    std::string scaled;
    reference::Arguments args;
    try {
      Workload w = synthesize(corpus_def);
      if (input_bytes(corpus_def, w) > kScaleAbove) {
        if (const auto s = scaling_for(c)) {
          corpus_def = ft::scaled_definition(c, s->axes, s->corpus_constants);
          for (auto& g : generated) g = ft::scaled_definition(g, s->axes, s->generated_constants);
          w = synthesize(corpus_def);
          scaled = s->summary;
        }
      }
      if (const auto bytes = input_bytes(corpus_def, w); bytes > kSkipAbove) {
        skipped[name] = fmt::format(
            "inputs of {} MiB{}", bytes >> 20,
            scaled.empty() ? " and no scaling rule for its family" : " even at " + scaled);
        continue;
      }
      MaterializeOptions mo;
      mo.seed = kSeed;
      MaterializedInputs in = materialize_inputs(corpus_def, w, mo);
      args.tensors = std::move(in.tensors);
      args.scalars = std::move(in.scalars);
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": no inputs could be synthesized: " << e.what();
      continue;
    }
    const std::size_t corpus_id = batch.add(corpus_def, args, kSeed);
    for (std::size_t v = 0; v < generated.size(); ++v) {
      const Definition& g = generated[v];
      // The documented legacy interface (kv_last_page_len shaped [len_indptr] instead of
      // [batch_size]): the generated reference gets the first batch_size entries, the only
      // ones the corpus reference reads.
      reference::Arguments gargs = args;
      for (const auto& spec : g.inputs) {
        const TensorSpec* cs = c.input(spec.name);
        if (!cs || spec.is_scalar() || cs->shape == spec.shape) continue;
        ASSERT_EQ(spec.name, "kv_last_page_len") << "interfaces differ in " << spec.name;
        const Tensor& full = args.tensors.at(spec.name);
        Tensor prefix(full.dtype(), {full.numel() - 1});
        for (std::int64_t i = 0; i < prefix.numel(); ++i) prefix.set(i, full.get(i));
        gargs.tensors[spec.name] = prefix;
      }
      Job job{name, rep.generated[v].first, scaled, corpus_id, batch.add(g, gargs, kSeed), {}};
      for (const auto& o : c.outputs) job.outputs.push_back(o.name);
      jobs.push_back(std::move(job));
    }
  }

  batch.run();

  std::map<std::string, int> variants;  // generated references per corpus definition
  for (const auto& job : jobs) ++variants[job.name];
  std::set<std::string> compared;
  std::int64_t masked_rows = 0;
  std::string table;
  for (const auto& job : jobs) {
    SCOPED_TRACE(job.name);
    reference::Outputs want, got;
    try {
      want = batch.outputs(job.corpus_id);
    } catch (const std::exception& e) {
      ADD_FAILURE() << job.name << ": the corpus reference failed: " << e.what();
      continue;
    }
    try {
      got = batch.outputs(job.generated_id);
    } catch (const std::exception& e) {
      ADD_FAILURE() << job.name << " (generated for " << job.models
                    << "): the generated reference failed: " << e.what();
      continue;
    }
    const std::int64_t masked = accept_fully_masked_rows(want, got);
    masked_rows += masked;
    std::string errors;
    for (const auto& o : job.outputs) {
      const auto w = want.find(o);
      const auto g = got.find(o);
      if (w == want.end() || g == got.end()) {
        ADD_FAILURE() << job.name << ": output " << o << " missing";
        continue;
      }
      const Tolerance tol = tolerance_for(w->second.dtype());
      const auto close = ft::tensors_close(g->second, w->second, tol.atol, tol.rtol);
      EXPECT_TRUE(close) << job.name << " (generated for " << job.models << "), output " << o
                         << (job.scaled.empty() ? "" : " at " + job.scaled)
                         << ": first difference at " << first_mismatch(g->second, w->second, tol)
                         << "; " << close.message();
      errors += fmt::format(" {}: {}", o, close ? close.message() : "MISMATCH");
    }
    compared.insert(job.name);
    table += fmt::format("  {:<62}{}{}{}{}\n", job.name,
                         variants[job.name] > 1 ? " (as generated for " + job.models + ")" : "",
                         job.scaled.empty() ? "" : " [scaled: " + job.scaled + "]", errors,
                         masked ? fmt::format(" ({} fully masked rows: NaN vs 0)", masked) : "");
  }

  std::string skips;
  for (const auto& [name, why] : skipped) skips += fmt::format("  {:<62} {}\n", name, why);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format(
      "reference parity (torch {}, atol {}, rtol {}): {} corpus definitions reproduced by "
      "onboarding; {} compared ({} reference pairs), {} skipped; {} fully masked causal rows "
      "accepted as NaN vs 0; {:.1f} s\ncompared:\n{}skipped:\n{}",
      version, kAtol, kRtol, reproduced.size(), compared.size(), jobs.size(), skipped.size(),
      masked_rows, seconds, table, skips.empty() ? "  (none)\n" : skips);
  EXPECT_EQ(compared.size() + skipped.size(), reproduced.size());
}

}  // namespace
}  // namespace fib::onboard
