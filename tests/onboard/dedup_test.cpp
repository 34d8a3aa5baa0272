// Deduplication against a dataset: the identity rule, shared kernels gaining tags (atomically),
// conflicts under versioned names, dry runs, and onboarding corpus models into a corpus copy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <set>

#include "fib/base/json.h"
#include "fib/dataset/layout.h"
#include "fib/onboard/dedup.h"
#include "onboard_test_util.h"
#include "support/temp_dir.h"

namespace fib::onboard {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
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
  y.name = "another_name";                     // nor does the name
  y.tags = {"model:b", "status:verified"};
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
  EXPECT_EQ(first.count(Action::kCreate), 23u);
  EXPECT_TRUE(fs::exists(root / layout::definition_file("gemm", "gemm_n6144_k4096")));
  const auto loaded = TraceSet::load(root);
  EXPECT_EQ(loaded.definitions().size(), 23u);
  EXPECT_FALSE(loaded.load_diagnostics().has_errors()) << loaded.load_diagnostics().to_string();
  const auto before = snapshot(root);
  const auto second = onboard(request("llama-3.1-8b"), root, false);
  EXPECT_EQ(second.count(Action::kSkip), 23u);
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

const Definition* stored(const TraceSet& set, std::string_view name) {
  return set.definition(name);
}

// The literal rule: a definition with the generated interface is the same kernel whatever its
// name, description and tags. It gains the new model's tags; nothing is created under the
// generated name, and the module graph lists the dataset's name.
TEST(Dedup, SameKernelUnderAnotherNameIsSharedNotCreated) {
  ::fib::testing::TempDir dir;
  Definition mine = generate_definition(GqaPagedKernel{Stage::kDecode, {32, 8, 128, 32, 8, 1}, 1},
                                        GenContext{"someone", "Someone"});
  mine.name = "my_decode_kernel";
  mine.description = "Someone's decode kernel.";
  mine.tags = {"status:verified", "model:someone", "tp:1"};
  write_definition(dir.path(), mine);
  const auto r = onboard(request("llama-3.1-8b"), dir.path(), false);
  const auto* o = r.find("gqa_paged_decode_h32_kv8_d128_ps1");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->action, Action::kShare);
  EXPECT_EQ(o->existing, "my_decode_kernel");
  EXPECT_THAT(o->tags_added, ElementsAre("model:llama-3.1-8b"));
  EXPECT_THAT(o->shared_with, ElementsAre("someone"));
  EXPECT_NE(o->reference_check, ReferenceCheck::kNotCompared);
  EXPECT_FALSE(fs::exists(
      dir.path() / layout::definition_file("gqa_paged", "gqa_paged_decode_h32_kv8_d128_ps1")));
  const TraceSet set = TraceSet::load(dir.path());
  ASSERT_NE(stored(set, "my_decode_kernel"), nullptr);
  EXPECT_THAT(stored(set, "my_decode_kernel")->tags, Contains("model:llama-3.1-8b"));
  EXPECT_EQ(stored(set, "my_decode_kernel")->description, "Someone's decode kernel.");
  EXPECT_EQ(stored(set, "gqa_paged_decode_h32_kv8_d128_ps1"), nullptr);
  bool listed = false;
  for (const auto& n : r.graph.nodes) {
    for (const auto& d : n.definitions) listed = listed || d == "my_decode_kernel";
  }
  EXPECT_TRUE(listed);
  EXPECT_THAT(render_report_text(r),
              HasSubstr("gqa_paged/gqa_paged_decode_h32_kv8_d128_ps1  +model:llama-3.1-8b  (also "
                        "someone)  = my_decode_kernel"));
  const Json j = report_to_json(r);
  bool in_json = false;
  for (const auto& d : j["definitions"]) {
    in_json = in_json || (d["name"] == "gqa_paged_decode_h32_kv8_d128_ps1" &&
                          d["existing"] == "my_decode_kernel" && d["action"] == "shared");
  }
  EXPECT_TRUE(in_json);
  // Again: skipped as the same kernel, nothing written.
  const auto before = snapshot(dir.path());
  const auto again = onboard(request("llama-3.1-8b"), dir.path(), false);
  EXPECT_EQ(again.find("gqa_paged_decode_h32_kv8_d128_ps1")->action, Action::kSkip);
  EXPECT_EQ(again.find("gqa_paged_decode_h32_kv8_d128_ps1")->existing, "my_decode_kernel");
  EXPECT_THAT(render_report_text(again),
              HasSubstr("gqa_paged/gqa_paged_decode_h32_kv8_d128_ps1  = my_decode_kernel"));
  EXPECT_EQ(snapshot(dir.path()), before);
}

// Descriptions and tags do not count: the same name and interface with other words is merged,
// with nothing to report about the math (the reference text is the same).
TEST(Dedup, DescriptionsAndTagsDoNotCount) {
  ::fib::testing::TempDir dir;
  Definition other = generate_definition(GemmKernel{6144, 4096, "attn.qkv_proj", 0},
                                         GenContext{"someone", "Someone"});
  other.description = "Another description entirely.";
  other.tags = {"status:reference", "model:someone", "fi_api:torch.matmul"};
  write_definition(dir.path(), other);
  const auto r = onboard(request("llama-3.1-8b"), dir.path(), false);
  const auto* o = r.find("gemm_n6144_k4096");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->action, Action::kShare);
  EXPECT_EQ(o->existing, "gemm_n6144_k4096");
  EXPECT_EQ(o->reference_check, ReferenceCheck::kSameText);
  EXPECT_TRUE(o->notes.empty());
  EXPECT_THAT(render_report_text(r), Not(HasSubstr("information:")));
}

// A reference written differently that computes the same thing is the same kernel; the report
// says the text differs and that fib's native references agree.
TEST(Dedup, DifferentReferenceTextWithTheSameMathIsMergedWithInformation) {
  ::fib::testing::TempDir dir;
  Definition other =
      generate_definition(RmsNormKernel{4096, 1e-5, false, false, ""}, GenContext{"x", "X"});
  other.reference =
      "import torch\n\nEPS = 1e-05\n\n\ndef run(hidden_states, weight):\n"
      "    x = hidden_states.float()\n"
      "    y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + EPS)\n"
      "    return (y * weight.float()).to(torch.bfloat16)\n";
  write_definition(dir.path(), other);
  const auto r = onboard(request("llama-3.1-8b"), dir.path(), false);
  const auto* o = r.find("rmsnorm_h4096");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->action, Action::kShare);
  EXPECT_EQ(o->reference_check, ReferenceCheck::kSameOutputs);
  EXPECT_EQ(o->max_abs_diff, 0.0);
  EXPECT_THAT(o->check_detail, HasSubstr("batch_size="));
  const auto text = render_report_text(r);
  EXPECT_THAT(text, HasSubstr("information: reference texts that differ"));
  EXPECT_THAT(text, HasSubstr("rmsnorm/rmsnorm_h4096: same outputs from fib's native references "
                              "(max |diff| 0 on batch_size="));
  const Json j = report_to_json(r);
  EXPECT_EQ(j["summary"]["reference_text_differs"], 1);
  for (const auto& d : j["definitions"]) {
    if (d["name"] == "rmsnorm_h4096") {
      EXPECT_EQ(d["reference_check"]["result"], "same_outputs");
    }
  }
  // The stored text is kept; only the tags changed.
  EXPECT_EQ(TraceSet::load(dir.path()).definition("rmsnorm_h4096")->reference, other.reference);
}

// NeoX and GPT-J RoPE have identical interfaces and different math: the native references tell
// them apart, so the new kernel is kept under its own name and reported as an interface twin.
TEST(Dedup, GptjAndNeoxRopeAreInterfaceTwinsBothKept) {
  ::fib::testing::TempDir dir;
  const Definition gptj =
      generate_definition(RopeKernel{128, 128, RopeStyle::kGptj}, GenContext{"x", "X"});
  write_definition(dir.path(), gptj);
  const auto r = onboard(request("llama-3.1-8b"), dir.path(), false);
  const auto* o = r.find("rope_with_cos_sin_cache_neox_style_d128_rd128");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->action, Action::kTwin);
  EXPECT_EQ(o->def.name, "rope_with_cos_sin_cache_neox_style_d128_rd128");
  ASSERT_EQ(o->twins.size(), 1u);
  EXPECT_EQ(o->twins[0].name, "rope_with_cos_sin_cache_gptj_style_d128_rd128");
  EXPECT_GT(o->twins[0].max_abs_diff, 0.5);
  EXPECT_TRUE(o->existing.empty());
  EXPECT_TRUE(o->tags_added.empty());
  const TraceSet set = TraceSet::load(dir.path());
  ASSERT_NE(stored(set, "rope_with_cos_sin_cache_neox_style_d128_rd128"), nullptr);
  EXPECT_EQ(stored(set, "rope_with_cos_sin_cache_gptj_style_d128_rd128")->tags, gptj.tags);
  const auto text = render_report_text(r);
  EXPECT_THAT(text, HasSubstr("1 interface twin(s)"));
  EXPECT_THAT(text, HasSubstr("interface twins (an existing definition has the same interface"));
  EXPECT_THAT(text, HasSubstr("rope/rope_with_cos_sin_cache_neox_style_d128_rd128  ~ "
                              "rope_with_cos_sin_cache_gptj_style_d128_rd128 (max |diff| "));
  const Json j = report_to_json(r);
  EXPECT_EQ(j["summary"]["twins"], 1);
  for (const auto& d : j["definitions"]) {
    if (d["name"] != "rope_with_cos_sin_cache_neox_style_d128_rd128") continue;
    EXPECT_EQ(d["action"], "twin");
    EXPECT_EQ(d["interface_twins"][0]["name"], "rope_with_cos_sin_cache_gptj_style_d128_rd128");
    EXPECT_EQ(d["interface_twins"][0]["output"], "q_out");
  }
  // Both are in the dataset now: the next run finds each under its own name.
  const auto again = onboard(request("llama-3.1-8b"), dir.path(), true);
  EXPECT_EQ(again.find("rope_with_cos_sin_cache_neox_style_d128_rd128")->action, Action::kSkip);
  EXPECT_EQ(again.find("rope_with_cos_sin_cache_neox_style_d128_rd128")->existing,
            "rope_with_cos_sin_cache_neox_style_d128_rd128");
}

// A twin stored under the generated name: the new kernel gets a versioned name, never merged.
TEST(Dedup, TwinUnderTheGeneratedNameGetsAVersionedName) {
  ::fib::testing::TempDir dir;
  Definition gptj =
      generate_definition(RopeKernel{128, 128, RopeStyle::kGptj}, GenContext{"x", "X"});
  gptj.name = "rope_with_cos_sin_cache_neox_style_d128_rd128";  // misnamed: the text is GPT-J
  write_definition(dir.path(), gptj);
  const auto r = onboard(request("llama-3.1-8b"), dir.path(), false);
  const auto* o = r.find("rope_with_cos_sin_cache_neox_style_d128_rd128_v2");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->action, Action::kTwin);
  EXPECT_EQ(o->generated_name, "rope_with_cos_sin_cache_neox_style_d128_rd128");
  ASSERT_FALSE(o->notes.empty());
  EXPECT_THAT(o->notes.back(), HasSubstr("is taken by its interface twin"));
  EXPECT_TRUE(
      fs::exists(dir.path() / layout::definition_file(
                                  "rope", "rope_with_cos_sin_cache_neox_style_d128_rd128_v2")));
}

// No native reference runs one of the two: the identity rule alone decides (merged), and the
// report says the math was not compared.
TEST(Dedup, MathThatCannotBeComparedFollowsTheIdentityRule) {
  ::fib::testing::TempDir dir;
  const auto generated = generate(request("gpt-oss-20b"));
  const DefinitionOutcome* moe = nullptr;
  for (const auto& o : generated.outcomes) {
    if (o.def.op_type == "moe") moe = &o;
  }
  ASSERT_NE(moe, nullptr);
  Definition other = moe->def;
  // Constants the native reference does not know: it cannot run this text.
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"SWIGLU_LIMIT", "CLAMP"}, {"SWIGLU_ALPHA", "SLOPE"}}) {
    for (auto at = other.reference.find(from); at != std::string::npos;
         at = other.reference.find(from, at + to.size())) {
      other.reference.replace(at, from.size(), to);
    }
  }
  other.tags = {"model:someone"};
  write_definition(dir.path(), other);
  const auto r = onboard(request("gpt-oss-20b"), dir.path(), false);
  const auto* o = r.find(moe->def.name);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->action, Action::kShare);
  EXPECT_EQ(o->reference_check, ReferenceCheck::kNotCompared);
  EXPECT_THAT(o->check_detail, HasSubstr("no native reference runs"));
  EXPECT_THAT(render_report_text(r),
              HasSubstr("the math could not be compared (no native reference runs"));
  EXPECT_EQ(report_to_json(r)["summary"]["math_not_compared"], 1);
}

// Two generated names of one kernel in the same run: the second is the first (the literal rule
// holds within a run too), and the first carries both uses' tags.
TEST(Dedup, OneKernelUnderTwoGeneratedNamesIsCreatedOnce) {
  auto r = generate(request("llama-3.1-8b"));
  const auto* norm = r.find("rmsnorm_h4096");
  ASSERT_NE(norm, nullptr);
  DefinitionOutcome copy = *norm;
  copy.generated_name = "rmsnorm_h4096_again";
  copy.def.name = copy.generated_name;
  copy.def.tags = {"status:unverified", "model:other"};
  r.outcomes.push_back(copy);
  deduplicate(r, nullptr);
  const auto* second = r.find("rmsnorm_h4096_again");
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->action, Action::kSkip);
  EXPECT_EQ(second->existing, "rmsnorm_h4096");
  EXPECT_EQ(r.find("rmsnorm_h4096")->action, Action::kCreate);
  EXPECT_THAT(r.find("rmsnorm_h4096")->def.tags, Contains("model:other"));
}

TEST(Dedup, DryRunWithSharesAndTwinsWritesNothing) {
  ::fib::testing::TempDir dir;
  write_definition(dir.path(), generate_definition(RopeKernel{128, 128, RopeStyle::kGptj},
                                                   GenContext{"x", "X"}));
  Definition mine = generate_definition(GemmKernel{6144, 4096, "", 0}, GenContext{"y", "Y"});
  mine.name = "qkv_gemm";
  write_definition(dir.path(), mine);
  const auto before = snapshot(dir.path());
  const auto r = onboard(request("llama-3.1-8b"), dir.path(), true);
  EXPECT_EQ(r.find("rope_with_cos_sin_cache_neox_style_d128_rd128")->action, Action::kTwin);
  EXPECT_EQ(r.find("gemm_n6144_k4096")->action, Action::kShare);
  EXPECT_EQ(snapshot(dir.path()), before);
  EXPECT_THAT(render_report_text(r), HasSubstr("dry run: nothing written"));
}

// Onboarding each corpus model into a copy of the corpus creates nothing for the kernels the
// corpus already has: every corpus definition tagged with the model is skipped or shared, and no
// created definition has the interface of an original corpus definition. The corpus's reference
// texts differ from the generated ones almost everywhere; the native references find the same
// math behind them. The one interface twin that appears is between two models' RoPE kernels
// (Llama-4's GPT-J pairs and the NeoX pairs another model created earlier in the loop).
TEST(Dedup, CorpusModelsCreateNothingTheCorpusHas) {
  FIB_REQUIRE_CORPUS(corpus);
  ::fib::testing::TempDir dir;
  const fs::path copy = dir.path() / "corpus";
  ::fib::testing::copy_tree(corpus, copy);
  const TraceSet original = TraceSet::load(copy);
  std::set<std::string> original_interfaces;
  for (const auto& rec : original.definitions())
    original_interfaces.insert(interface_fingerprint(rec.value));
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
  std::map<ReferenceCheck, std::size_t> checks;
  std::vector<std::string> twins, uncompared;
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
    for (const auto& o : r.outcomes) {
      ++checks[o.reference_check];
      if (o.reference_check == ReferenceCheck::kNotCompared)
        uncompared.push_back(o.def.name + ": " + o.check_detail);
      if (o.action == Action::kCreate) {
        EXPECT_FALSE(original_interfaces.count(interface_fingerprint(o.def)))
            << slug << ": created " << o.def.name << " with the interface of a corpus definition";
      }
      if (o.action != Action::kTwin) continue;
      ASSERT_EQ(o.twins.size(), 1u) << o.def.name;
      twins.push_back(fmt::format("{} ({}) ~ {} (max |diff| {:.3g})", o.def.name, slug,
                                  o.twins[0].name, o.twins[0].max_abs_diff));
      EXPECT_FALSE(original.definition(o.twins[0].name)) << "a twin of a corpus definition";
    }
    created += r.count(Action::kCreate) + r.count(Action::kTwin);
  }
  std::printf(
      "  [reference texts: %zu identical, %zu differ with the same native outputs, %zu "
      "not compared]\n",
      checks[ReferenceCheck::kSameText], checks[ReferenceCheck::kSameOutputs],
      checks[ReferenceCheck::kNotCompared]);
  for (const auto& u : uncompared) std::printf("  [not compared: %s]\n", u.c_str());
  for (const auto& t : twins) std::printf("  [interface twin: %s]\n", t.c_str());
  EXPECT_EQ(checked, 177u);
  EXPECT_GT(checks[ReferenceCheck::kSameOutputs], 100u);  // the twin guard did run
  // MiniMax-M2's ungrouped sigmoid gate and DeepSeek-V3's grouped one share an interface (the
  // groups are constants of the reference) but not their math.
  EXPECT_THAT(twins, ElementsAre(HasSubstr("rope_with_cos_sin_cache_gptj_style_d128_rd128 "
                                           "(llama-4-maverick-17b-128e) ~ "
                                           "rope_with_cos_sin_cache_neox_style_d128_rd128"),
                                 HasSubstr("moe_fused_gate_e256_k8_ng1_kg1 (minimax-m2) ~ "
                                           "moe_fused_gate_e256_k8_ng8_kg4")));
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
