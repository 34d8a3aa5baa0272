// Deduplication against a dataset: the identity rule, shared kernels gaining tags (atomically),
// conflicts under versioned names, dry runs, and onboarding corpus models into a corpus copy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "fib/dataset/layout.h"
#include "fib/onboard/dedup.h"
#include "fib/trace/json_file.h"
#include "onboard_test_util.h"
#include "support/temp_dir.h"

namespace fib::onboard {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::request;
namespace fs = std::filesystem;

// path -> content of every file under root.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  if (!fs::exists(root)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    Diagnostics diag;
    out[fs::relative(e.path(), root).string()] =
        read_text_file(e.path().string(), diag).value_or("");
  }
  return out;
}

TEST(Identity, OnlyTheInterfaceCounts) {
  const GenContext a{"a", "A"}, b{"b", "B"};
  Definition x = generate_definition(GqaPagedKernel{Stage::kDecode, {32, 8, 128, 32, 8, 1}, 1}, a);
  Definition y = generate_definition(GqaPagedKernel{Stage::kDecode, {32, 8, 128, 32, 8, 1}, 1}, b);
  y.description = "something else";
  y.reference = "def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):\n    pass\n";
  std::reverse(y.axes.begin(), y.axes.end());  // axis order carries no meaning
  EXPECT_TRUE(same_kernel(x, y));
  EXPECT_EQ(interface_fingerprint(x), interface_fingerprint(y));
  std::string why;
  y.inputs[0].dtype = DType::kFloat16;
  EXPECT_FALSE(same_kernel(x, y, &why));
  EXPECT_EQ(why, "input 'q' dtype bfloat16 vs float16");
  y = x;
  std::swap(y.inputs[1], y.inputs[2]);
  EXPECT_FALSE(same_kernel(x, y, &why));
  EXPECT_THAT(why, HasSubstr("names or order differ"));
  y = x;
  y.axes[1].value = 16;
  EXPECT_FALSE(same_kernel(x, y, &why));
  EXPECT_THAT(why, HasSubstr("const 32 vs const 16"));
}

TEST(Dedup, NewDatasetIsCreatedAndASecondRunIsANoOp) {
  ::fib::testing::TempDir dir;
  const fs::path root = dir.path() / "fresh";
  const auto first = onboard(request("llama-3.1-8b"), root, false);
  EXPECT_EQ(first.count(Action::kCreate), 16u);
  EXPECT_TRUE(fs::exists(root / layout::definition_file("gemm", "gemm_n6144_k4096")));
  const auto loaded = TraceSet::load(root);
  EXPECT_EQ(loaded.definitions().size(), 16u);
  EXPECT_FALSE(loaded.load_diagnostics().has_errors()) << loaded.load_diagnostics().to_string();
  const auto before = snapshot(root);
  const auto second = onboard(request("llama-3.1-8b"), root, false);
  EXPECT_EQ(second.count(Action::kSkip), 16u);
  EXPECT_EQ(snapshot(root), before);
}

TEST(Dedup, SharedKernelsGainTheNewModelTags) {
  ::fib::testing::TempDir dir;
  onboard(request("llama-3.1-8b"), dir.path(), false);
  // Mistral 7B has Llama 3.1 8B's attention and MLP shapes but its own vocabulary.
  const auto r = onboard(request("mistral-7b-v0.3"), dir.path(), false);
  const auto* attn = r.find("gqa_paged_decode_h32_kv8_d128_ps1");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->action, Action::kShare);
  EXPECT_THAT(attn->tags_added, ElementsAre("model:mistral-7b-v0.3"));
  EXPECT_THAT(attn->shared_with, ElementsAre("llama-3.1-8b"));
  EXPECT_EQ(r.find("top_k_sampling_from_probs_v32768")->action, Action::kCreate);
  const Definition stored = load_definition(
      (dir.path() / layout::definition_file("gqa_paged", "gqa_paged_decode_h32_kv8_d128_ps1"))
          .string());
  EXPECT_THAT(stored.tags, Contains("model:llama-3.1-8b"));
  EXPECT_THAT(stored.tags, Contains("model:mistral-7b-v0.3"));
  EXPECT_EQ(r.count(Action::kConflict), 0u);
  // The module graph lists the dataset's definition names.
  bool listed = false;
  for (const auto& n : r.graph.nodes) {
    for (const auto& d : n.definitions) listed = listed || d == "gqa_paged_decode_h32_kv8_d128_ps1";
  }
  EXPECT_TRUE(listed);
}

TEST(Dedup, DryRunWritesNothing) {
  ::fib::testing::TempDir dir;
  onboard(request("llama-3.1-8b"), dir.path(), false);
  const auto before = snapshot(dir.path());
  const auto r = onboard(request("qwen3-8b"), dir.path(), true);
  EXPECT_TRUE(r.dry_run);
  EXPECT_GT(r.count(Action::kCreate), 0u);
  EXPECT_EQ(snapshot(dir.path()), before);
  const auto fresh = dir.path() / "never-created";
  onboard(request("qwen3-8b"), fresh, true);
  EXPECT_FALSE(fs::exists(fresh));
}

TEST(Dedup, SameNameDifferentInterfaceIsAVersionedConflict) {
  ::fib::testing::TempDir dir;
  Definition clash =
      generate_definition(GemmKernel{6144, 4096, "", 0}, GenContext{"someone", "Someone"});
  clash.inputs[1].shape = std::vector<std::string>{"K", "N"};  // B stored column-major
  clash.reference = "import torch\n\ndef run(A, B):\n    return A @ B\n";
  write_definition(dir.path(), clash);
  const auto before = dir.read(layout::definition_file("gemm", "gemm_n6144_k4096").string());
  const auto r = onboard(request("llama-3.1-8b"), dir.path(), false);
  const auto* o = r.find("gemm_n6144_k4096");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->action, Action::kConflict);
  EXPECT_EQ(o->def.name, "gemm_n6144_k4096_v2");
  EXPECT_THAT(o->notes.front(), HasSubstr("input 'B' shape [N, K] vs [K, N]"));
  EXPECT_TRUE(fs::exists(dir.path() / layout::definition_file("gemm", "gemm_n6144_k4096_v2")));
  EXPECT_EQ(dir.read(layout::definition_file("gemm", "gemm_n6144_k4096").string()), before);
  const auto text = render_report_text(r);
  EXPECT_THAT(text, HasSubstr("conflicts (same name, different interface"));
  EXPECT_THAT(text, HasSubstr("gemm/gemm_n6144_k4096_v2"));
}

TEST(Dedup, SameInterfaceUnderAnotherNameIsReportedNotMerged) {
  // NeoX and GPT-J RoPE share an interface; only the name tells them apart.
  ::fib::testing::TempDir dir;
  write_definition(dir.path(), generate_definition(RopeKernel{128, 128, RopeStyle::kGptj},
                                                   GenContext{"x", "X"}));
  const auto r = onboard(request("llama-3.1-8b"), dir.path(), false);
  const auto* o = r.find("rope_with_cos_sin_cache_neox_style_d128_rd128");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->action, Action::kCreate);
  ASSERT_FALSE(o->notes.empty());
  EXPECT_THAT(o->notes.front(), HasSubstr("same interface under another name, "
                                          "'rope_with_cos_sin_cache_gptj_style_d128_rd128'"));
  EXPECT_TRUE(
      fs::exists(dir.path() /
                 layout::definition_file("rope", "rope_with_cos_sin_cache_neox_style_d128_rd128")));
}

// Onboarding each corpus model into a copy of the corpus creates nothing for the kernels the
// corpus already has: every corpus definition tagged with the model is skipped or shared.
TEST(Dedup, CorpusModelsCreateNothingTheCorpusHas) {
  FIB_REQUIRE_CORPUS(corpus);
  ::fib::testing::TempDir dir;
  const fs::path copy = dir.path() / "corpus";
  ::fib::testing::copy_tree(corpus, copy);
  const TraceSet original = TraceSet::load(copy);
  std::map<std::string, std::set<const Definition*>> tagged;
  std::map<std::string, std::set<int>> tps, eps;
  std::set<std::string> quantized;
  for (const auto& rec : original.definitions()) {
    for (const auto& tag : rec.value.tag_values("model:")) {
      const auto* m = find_model(testing::bundled(), tag);
      ASSERT_NE(m, nullptr) << tag;
      tagged[m->slug].insert(&rec.value);
      for (const auto& t : rec.value.tag_values("tp:")) tps[m->slug].insert(std::stoi(t));
      for (const auto& e : rec.value.tag_values("ep:")) eps[m->slug].insert(std::stoi(e));
      if (rec.value.name.rfind("trtllm_", 0) == 0) quantized.insert(m->slug);
    }
  }
  std::size_t created = 0, checked = 0;
  for (const auto& [slug, defs] : tagged) {
    auto req = request(slug, std::vector<int>(tps[slug].begin(), tps[slug].end()),
                       std::vector<int>(eps[slug].begin(), eps[slug].end()));
    req.options.include_quantized = quantized.count(slug) > 0;
    const auto r = onboard(req, copy, false);
    EXPECT_EQ(r.count(Action::kConflict), 0u) << slug;
    for (const Definition* d : defs) {
      ++checked;
      bool covered = false;
      for (const auto& o : r.outcomes) {
        if (o.existing == d->name) {
          covered = true;
          EXPECT_TRUE(o.action == Action::kSkip || o.action == Action::kShare)
              << slug << " " << d->name;
        }
      }
      EXPECT_TRUE(covered) << slug << ": no outcome matched corpus definition " << d->name;
    }
    created += r.count(Action::kCreate);
  }
  EXPECT_EQ(checked, 177u);
  // The copy still loads cleanly, with the new definitions and the added tags.
  const TraceSet after = TraceSet::load(copy);
  EXPECT_EQ(after.definitions().size(), original.definitions().size() + created);
  EXPECT_EQ(after.load_diagnostics().count(Severity::kError),
            original.load_diagnostics().count(Severity::kError));
  EXPECT_THAT(after.definition("rmsnorm_h128")->tags, Contains("model:qwen3-8b"));
  // Tag updates rewrite only the tags: the reference text is untouched.
  EXPECT_EQ(after.definition("rmsnorm_h128")->reference,
            original.definition("rmsnorm_h128")->reference);
}

TEST(Report, JsonSummaryAndSections) {
  ::fib::testing::TempDir dir;
  const auto r = onboard(request("qwen3-next-80b-a3b", {2}, {4}), dir.path(), true);
  const Json j = report_to_json(r);
  EXPECT_EQ(j["model"]["slug"], "qwen3-next-80b-a3b");
  EXPECT_EQ(j["model"]["family"], "qwen3_next");
  EXPECT_EQ(j["summary"]["created"], r.outcomes.size());
  EXPECT_EQ(j["summary"]["conflicts"], 0);
  EXPECT_TRUE(j["dry_run"].get<bool>());
  EXPECT_GT(j["unsupported"].size(), 0u);
  EXPECT_EQ(j["module_graph"]["id"], "qwen3-next-80b-a3b");
  EXPECT_EQ(j["serving"]["tp"], Json::array({2}));
  const auto text = render_report_text(r);
  EXPECT_THAT(text, HasSubstr("would create:"));
  EXPECT_THAT(text, HasSubstr("unsupported parts (no generator; not in the definitions):"));
  EXPECT_THAT(text, HasSubstr("[warning] conv1d.linear_attention: causal_conv1d"));
}

}  // namespace
}  // namespace fib::onboard
