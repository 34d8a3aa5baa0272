// Fidelity: for every model tagged in ../shared/corpus, onboarding from its config reproduces
// every corpus definition tagged with it - same name, axes (kinds and const values), input and
// output names, order, shapes and dtypes. Where the corpus itself is inconsistent, the match is
// through a declared legacy interface, and the test lists each such case by name.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "fib/dataset/trace_set.h"
#include "fib/onboard/dedup.h"
#include "fib/onboard/model_registry.h"
#include "fib/onboard/onboard.h"
#include "support/test_paths.h"

namespace fib::onboard {
namespace {

namespace fs = std::filesystem;

// Corpus definitions whose interface differs from the current convention, and why. Each must
// match one of the generator's legacy interfaces (and nothing else may need one).
const std::map<std::string, std::string>& documented_inconsistencies() {
  static const std::map<std::string, std::string> kList = {
      {"gqa_paged_prefill_causal_h16_kv1_d128_ps64",
       "kv_last_page_len shaped [len_indptr], no batch_size axis"},
      {"gqa_paged_prefill_causal_h24_kv4_d128_ps64",
       "kv_last_page_len shaped [len_indptr], no batch_size axis"},
      {"gqa_paged_prefill_causal_h24_kv8_d128_ps64",
       "kv_last_page_len shaped [len_indptr], no batch_size axis"},
      {"gqa_paged_prefill_causal_h32_kv16_d128_ps64",
       "kv_last_page_len shaped [len_indptr], no batch_size axis"},
      {"moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
       "no top_k axis (top_k lives in the reference)"},
  };
  return kList;
}

struct ModelFidelity {
  std::string slug;
  std::set<std::string> tags;  // corpus spellings that resolved to this model
  std::vector<const Definition*> corpus;
  std::set<int> tp, ep;
  bool quantized = false;
};

std::set<int> tag_ints(const Definition& d, std::string_view prefix) {
  std::set<int> out;
  for (const auto& v : d.tag_values(prefix)) out.insert(std::stoi(v));
  return out;
}

class Fidelity : public ::testing::Test {
 protected:
  void SetUp() override {
    Diagnostics diag;
    models_ = load_bundled_models(testing::source_dir() / "models", diag);
    ASSERT_FALSE(diag.has_errors()) << diag.to_string();
  }
  std::vector<BundledModel> models_;
};

TEST_F(Fidelity, EveryCorpusModelReproducesItsDefinitions) {
  FIB_REQUIRE_CORPUS(corpus);
  const TraceSet set = TraceSet::load(corpus);
  std::map<std::string, ModelFidelity> by_model;
  std::vector<std::string> unresolved;
  for (const auto& rec : set.definitions()) {
    const Definition& d = rec.value;
    for (const auto& tag : d.tag_values("model:")) {
      const BundledModel* m = find_model(models_, tag);
      if (!m) {
        unresolved.push_back(fmt::format("{} (on {})", tag, d.name));
        continue;
      }
      auto& f = by_model[m->slug];
      f.slug = m->slug;
      f.tags.insert(tag);
      if (std::find(f.corpus.begin(), f.corpus.end(), &d) == f.corpus.end()) f.corpus.push_back(&d);
      for (int t : tag_ints(d, "tp:")) f.tp.insert(t);
      for (int e : tag_ints(d, "ep:")) f.ep.insert(e);
      f.quantized = f.quantized || d.name.rfind("trtllm_", 0) == 0;
    }
  }
  EXPECT_TRUE(unresolved.empty()) << "corpus model tags with no bundled model: "
                                  << ::testing::PrintToString(unresolved);

  std::size_t total = 0, exact = 0, legacy = 0;
  std::string table;
  std::set<std::string> used_inconsistencies;
  for (auto& [slug, f] : by_model) {
    const BundledModel* m = find_model(models_, slug);
    ASSERT_NE(m, nullptr);
    Diagnostics diag;
    const ReadContext ctx{m->path.string(), &diag};
    auto cfg = normalize_config(m->config, ctx);
    ASSERT_TRUE(cfg) << diag.to_string();
    OnboardRequest req;
    req.config = *cfg;
    req.slug = slug;
    req.display_name = m->display_name;
    // The serving setups the corpus was captured at, read from its tags.
    req.options.tp.assign(f.tp.begin(), f.tp.end());
    req.options.ep.assign(f.ep.begin(), f.ep.end());
    if (req.options.tp.empty()) req.options.tp = m->tp;
    if (req.options.ep.empty()) req.options.ep = m->ep;
    req.options.include_quantized = f.quantized;
    const OnboardResult r = generate(req);
    EXPECT_FALSE(r.has_errors()) << slug << ": " << r.diagnostics.to_string();

    std::size_t model_exact = 0, model_legacy = 0;
    std::vector<std::string> failures;
    for (const Definition* c : f.corpus) {
      ++total;
      const DefinitionOutcome* o = r.find(c->name);
      if (!o) {
        failures.push_back(fmt::format("{}: not generated", c->name));
        continue;
      }
      std::string diff;
      if (same_kernel(o->def, *c, &diff)) {
        ++model_exact;
        continue;
      }
      bool matched = false;
      for (const auto& l : legacy_interfaces(o->def)) matched = matched || same_kernel(l.def, *c);
      if (matched && documented_inconsistencies().count(c->name)) {
        ++model_legacy;
        used_inconsistencies.insert(c->name);
        continue;
      }
      failures.push_back(fmt::format("{}: {}", c->name, diff));
    }
    exact += model_exact;
    legacy += model_legacy;
    table += fmt::format(
        "  {:<26} tags {:<40} {:>3} corpus definitions: {:>3} exact, {} via documented legacy "
        "interface; generated {}\n",
        slug, fmt::format("{}", fmt::join(f.tags, ",")), f.corpus.size(), model_exact, model_legacy,
        r.outcomes.size());
    EXPECT_TRUE(failures.empty()) << slug << ":\n  "
                                  << fmt::format("{}", fmt::join(failures, "\n  "));
  }
  for (const auto& [name, why] : documented_inconsistencies()) {
    EXPECT_TRUE(used_inconsistencies.count(name))
        << name << " is documented as inconsistent but matched exactly or "
        << "was not checked";
  }
  std::cout << fmt::format(
      "fidelity: {} (model, definition) pairs, {} exact, {} through a documented corpus "
      "inconsistency\n{}",
      total, exact, legacy, table);
  EXPECT_EQ(exact + legacy, total);
}

}  // namespace
}  // namespace fib::onboard
