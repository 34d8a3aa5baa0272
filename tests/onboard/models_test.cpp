// The bundled models: enough of them, all normalizable, architecture fields only, written by us
// (never byte copies of ../shared/models), found by slug or alias, with close-match suggestions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "onboard_test_util.h"
#include "support/temp_dir.h"

namespace fib::onboard {
namespace {

using testing::bundled;
using testing::config_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Models, AtLeastTwentyAndAllNormalize) {
  EXPECT_GE(bundled().size(), 20u);
  std::set<std::string> families;
  for (const auto& m : bundled()) {
    Diagnostics diag;
    const ReadContext ctx{m.path.string(), &diag};
    auto cfg = normalize_config(m.config, ctx);
    ASSERT_TRUE(cfg) << m.slug << ": " << diag.to_string();
    EXPECT_FALSE(diag.has_errors()) << m.slug;
    EXPECT_FALSE(m.display_name.empty()) << m.slug;
    EXPECT_FALSE(m.provenance.empty()) << m.slug;
    families.insert(std::string(family_name(cfg->family)));
  }
  // Every supported family has at least one bundled model.
  for (const auto& f : family_names())
    EXPECT_TRUE(families.count(f)) << "no bundled model of family " << f;
}

TEST(Models, ArchitectureFieldsOnlyAndNotCopies) {
  static const std::set<std::string> kNotArchitecture = {"bos_token_id",
                                                         "eos_token_id",
                                                         "pad_token_id",
                                                         "torch_dtype",
                                                         "transformers_version",
                                                         "initializer_range",
                                                         "use_cache",
                                                         "quantization_config",
                                                         "auto_map",
                                                         "_name_or_path",
                                                         "attention_dropout",
                                                         "router_aux_loss_coef",
                                                         "output_router_logits",
                                                         "vision_config"};
  for (const auto& m : bundled()) {
    for (auto it = m.config.begin(); it != m.config.end(); ++it) {
      EXPECT_FALSE(kNotArchitecture.count(it.key()))
          << m.slug << " carries non-architecture field " << it.key();
    }
  }
  const auto shared = ::fib::testing::shared_dir();
  if (!shared || !fs::is_directory(*shared / "models"))
    GTEST_SKIP() << "SKIPPED: ../shared/models is absent";
  std::set<std::string> shared_bytes;
  for (const auto& e : fs::directory_iterator(*shared / "models"))
    shared_bytes.insert(slurp(e.path()));
  for (const auto& m : bundled())
    EXPECT_FALSE(shared_bytes.count(slurp(m.path))) << m.slug << " is a byte copy";
}

TEST(Models, FindBySlugOrAliasIgnoringCase) {
  ASSERT_NE(find_model(bundled(), "Llama-3.1-8B"), nullptr);
  EXPECT_EQ(find_model(bundled(), "qwen3-235b")->slug, "qwen3-235b-a22b");
  EXPECT_EQ(find_model(bundled(), "llama-4-scout")->slug, "llama-4-scout-17b-16e");
  EXPECT_EQ(find_model(bundled(), "phi-4-14b")->slug, "phi-4");
  EXPECT_EQ(find_model(bundled(), "no-such-model"), nullptr);
}

TEST(Models, ClosestMatchesForAnUnknownName) {
  const auto close = closest_models(bundled(), "llama-3-8b");
  ASSERT_FALSE(close.empty());
  EXPECT_EQ(close.front(), "llama-3.1-8b");
  EXPECT_THAT(closest_models(bundled(), "deepseek-v3.1"), ::testing::Contains("deepseek-v3"));
}

TEST(Models, ModelsDirHonorsTheEnvironment) {
  ::fib::testing::TempDir dir;
  ::setenv("FIB_MODELS_DIR", dir.path().c_str(), 1);
  EXPECT_EQ(models_dir(), dir.path());
  ::setenv("FIB_MODELS_DIR", "/nonexistent/fib-models", 1);
  try {
    (void)models_dir();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/fib-models"));
    EXPECT_THAT(e.what(), HasSubstr("FIB_MODELS_DIR does not name a folder"));
  }
  ::unsetenv("FIB_MODELS_DIR");
  EXPECT_TRUE(fs::is_directory(models_dir()));
}

TEST(Models, MalformedModelFileIsReportedAndSkipped) {
  ::fib::testing::TempDir dir;
  dir.write("good.json", R"({"name": "Good", "config": {"model_type": "llama"}})");
  dir.write("bad.json", R"({"name": "Bad", "serving": {"tp": [0]}, "confgi": {}})");
  Diagnostics diag;
  const auto models = load_bundled_models(dir.path(), diag);
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].slug, "good");
  EXPECT_THAT(diag.to_string(), HasSubstr("unknown field 'confgi'"));
  EXPECT_THAT(diag.to_string(), HasSubstr("expected a parallel size in 1..1024, found 0"));
}

TEST(Models, ParameterCountsMatchTheModelCards) {
  auto near = [](std::int64_t got, double want, double tolerance) {
    return std::abs(static_cast<double>(got) - want) <= want * tolerance;
  };
  const auto llama = count_parameters(config_of("llama-3.1-8b"));
  EXPECT_TRUE(near(llama.total, 8.03e9, 0.01)) << llama.total;
  EXPECT_EQ(llama.total, llama.active);
  const auto ds = count_parameters(config_of("deepseek-v3"));
  EXPECT_TRUE(near(ds.total, 671e9, 0.01)) << ds.total;
  EXPECT_TRUE(near(ds.active, 37e9, 0.03)) << ds.active;
  const auto qwen = count_parameters(config_of("qwen3-30b-a3b"));
  EXPECT_TRUE(near(qwen.total, 30.5e9, 0.01)) << qwen.total;
  EXPECT_TRUE(near(qwen.active, 3.3e9, 0.03)) << qwen.active;
  EXPECT_EQ(format_count(8'030'261'248), "8.03B");
  EXPECT_EQ(format_count(1'030'000'000'000), "1.03T");
}

}  // namespace
}  // namespace fib::onboard
