// Validating the real corpus: every file loads and validates, and exactly the inconsistencies
// listed in ../shared/corpus/README.md produce findings (warnings or errors) — each of them.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "fib/dataset/trace_set.h"
#include "fib/validate/validator.h"
#include "support/test_paths.h"

namespace fib::validate {
namespace {

struct Finding {
  std::string definition;
  std::string check;
  Severity level;
  std::string message;
};

std::vector<Finding> findings(const Report& r) {
  std::vector<Finding> out;
  for (const auto& d : r.definitions) {
    for (auto c : kAllChecks) {
      for (const auto& m : d.at(c).messages) {
        if (m.level != Severity::kInfo)
          out.push_back({d.name, std::string(check_name(c)), m.level, m.message});
      }
    }
  }
  for (const auto& m : r.dataset_messages.messages) {
    if (m.level != Severity::kInfo) out.push_back({"(dataset)", "dataset", m.level, m.message});
  }
  return out;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// One README item: which findings it explains, and how many it must produce.
struct Expected {
  std::string item;
  std::function<bool(const Finding&)> match;
  std::size_t count;
};

TEST(CorpusFindings, ExactlyTheReadmeInconsistencies) {
  FIB_REQUIRE_CORPUS(corpus);
  const TraceSet set = TraceSet::load(corpus);
  EXPECT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  const Report r = validate_dataset(set, Options{});
  ASSERT_EQ(r.definitions.size(), 136u);

  const std::vector<Expected> expected = {
      {"1: run() parameter order differs from inputs (Llama-4 MoE)",
       [](const Finding& f) {
         return f.level == Severity::kError && f.check == "definition" &&
                has(f.message, "different order than `inputs`") && has(f.message, "'routing_bias'");
       },
       4},
      {"2: kv_last_page_len shaped [len_indptr] vs [batch_size]",
       [](const Finding& f) {
         return f.level == Severity::kWarning &&
                has(f.message, "input 'kv_last_page_len' has shape");
       },
       8},
      {"3: causal rows with no key (kv_len < q_len)",
       [](const Finding& f) {
         return f.level == Severity::kWarning && f.check == "workload" &&
                has(f.message, "fewer keys than queries");
       },
       2},
      {"4: rmsnorm eps 1e-5 in the h4096 pair",
       [](const Finding& f) {
         return f.level == Severity::kWarning && has(f.message, "fixes EPS = 1e-5") &&
                (f.definition == "rmsnorm_h4096" || f.definition == "fused_add_rmsnorm_h4096");
       },
       2},
      {"6: trtllm fp4 MoE takes no fp4 tensors",
       [](const Finding& f) {
         return f.level == Severity::kWarning && f.definition.rfind("trtllm_fp4_", 0) == 0 &&
                has(f.message, "promises float4_e2m1 data");
       },
       10},
      {"7: tag prefix quant: instead of quantization:",
       [](const Finding& f) {
         return f.level == Severity::kWarning && has(f.message, "unknown tag prefix 'quant:'");
       },
       1},
      {"7: qwen3-next vs qwen3-next-80b-a3b",
       [](const Finding& f) {
         return has(f.message, "'model:qwen3-next' looks like a shorter spelling");
       },
       9},
      {"7: qwen3-235b vs qwen3-235b-a22b",
       [](const Finding& f) {
         return has(f.message, "'model:qwen3-235b' looks like a shorter spelling");
       },
       1},
      {"7: llama-4-scout vs llama-4-scout-17b-16e",
       [](const Finding& f) {
         return has(f.message, "'model:llama-4-scout' looks like a shorter spelling");
       },
       9},
      {"7: both ep:4 and ep:1",
       [](const Finding& f) {
         return has(f.message, "several expert-parallel sizes (ep:4, ep:1)");
       },
       2},
      {"8: MLA sm_scale 0.1352 vs the described 1/sqrt(192)",
       [](const Finding& f) {
         return f.definition.rfind("mla_paged_", 0) == 0 && has(f.message, "sm_scale = 0.135234") &&
                has(f.message, "1/sqrt(192) = 0.0721688");
       },
       2},
      {"8: num_pages = 0 workloads",
       [](const Finding& f) {
         return f.level == Severity::kError &&
                f.message == "axis 'num_pages' must be positive, found 0";
       },
       2},
  };

  std::map<std::string, std::size_t> seen;
  for (const auto& f : findings(r)) {
    bool explained = false;
    for (const auto& e : expected) {
      if (e.match(f)) {
        ++seen[e.item];
        explained = true;
        break;
      }
    }
    EXPECT_TRUE(explained) << "finding not explained by the corpus README: " << f.definition << " ["
                           << f.check << "] " << f.message;
  }
  for (const auto& e : expected) EXPECT_EQ(seen[e.item], e.count) << "README item " << e.item;

  // Every workload not named above validates.
  std::size_t workload_errors = 0;
  for (const auto& f : findings(r))
    workload_errors += f.check == "workload" && f.level == Severity::kError;
  EXPECT_EQ(workload_errors, 2u);
  EXPECT_TRUE(r.has_errors());
}

TEST(CorpusFindings, FilteringByOpTypeKeepsOnlyThoseDefinitions) {
  FIB_REQUIRE_CORPUS(corpus);
  const TraceSet set = TraceSet::load(corpus);
  Options opt;
  opt.op_types = {"gemm"};
  opt.definitions = {"rmsnorm_h128"};
  const Report r = validate_dataset(set, opt);
  EXPECT_EQ(r.definitions.size(), 25u);
  EXPECT_FALSE(r.has_errors());
  for (const auto& d : r.definitions)
    EXPECT_TRUE(d.op_type == "gemm" || d.name == "rmsnorm_h128") << d.name;
}

TEST(CorpusFindings, ReportJsonRoundTrips) {
  FIB_REQUIRE_CORPUS(corpus);
  const TraceSet set = TraceSet::load(corpus);
  const Report r = validate_dataset(set, Options{});
  const Json j = report_to_json(r);
  Diagnostics diag;
  ReadContext ctx{"report.json", &diag};
  auto back = report_from_json(j, ctx);
  ASSERT_TRUE(back) << diag.to_string();
  EXPECT_EQ(render_text(*back), render_text(r));
  // Definitions in error: the 4 Llama-4 MoE ones and the one holding both num_pages = 0 workloads.
  EXPECT_EQ(j["summary"]["error"], 5);
  EXPECT_EQ(j["definitions"]["gemm_n128_k2048"]["status"], "ok");
  EXPECT_TRUE(j["definitions"]["gemm_n128_k2048"]["benchmark"].is_null());
}

}  // namespace
}  // namespace fib::validate
