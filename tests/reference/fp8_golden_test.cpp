// Golden float8 parity: the native kernels against PyTorch 2.11 outputs stored in
// tests/data/golden_fp8/ (see golden_fp8.h), for every corpus definition with float8 inputs, so
// CI checks them without a GPU or a float8-capable PyTorch. Each case's definition is rebuilt from
// ../shared/corpus with the scaling in the manifest; the test skips visibly without the corpus.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "fib/tensor/numeric.h"
#include "golden_fp8.h"

namespace fib::testing::golden {
namespace {

namespace fs = std::filesystem;

const char* const kDevices[] = {"cpu", "cuda"};

Json read_manifest() {
  Diagnostics diag;
  auto j = read_json_file((golden_dir() / "manifest.json").string(), diag);
  if (!j) throw Error("manifest.json", diag.to_string());
  return *j;
}

std::vector<GoldenCase> manifest_cases() {
  std::vector<GoldenCase> cases;
  const Json manifest = read_manifest();
  for (const auto& j : manifest.at("cases")) cases.push_back(case_from_json(j));
  return cases;
}

bool has_float8_input(const Definition& def) {
  return std::any_of(def.inputs.begin(), def.inputs.end(), [](const TensorSpec& s) {
    return s.dtype == DType::kFloat8E4M3FN || s.dtype == DType::kFloat8E5M2;
  });
}

// Every corpus definition with a float8 input has a case, and every case records where and with
// what its outputs were made.
TEST(Fp8Golden, CoversEveryFloat8DefinitionOfTheCorpus) {
  FIB_REQUIRE_CORPUS(corpus);
  std::set<std::string> covered;
  for (const auto& c : manifest_cases()) {
    covered.insert(c.definition);
    EXPECT_EQ(c.torch_version.rfind("2.11", 0), 0u) << c.name << ": torch " << c.torch_version;
    EXPECT_FALSE(c.device.empty()) << c.name << ": no device";
    EXPECT_FALSE(c.date.empty()) << c.name << ": no date";
    EXPECT_TRUE(fs::exists(c.inputs_path())) << c.inputs_path();
    for (const char* d : kDevices) EXPECT_TRUE(fs::exists(c.outputs_path(d))) << c.outputs_path(d);
  }
  int n = 0;
  for (const auto& family : fs::directory_iterator(corpus / "definitions")) {
    for (const auto& e : fs::directory_iterator(family.path())) {
      const Definition def = load_definition(e.path().string());
      if (!has_float8_input(def)) continue;
      ++n;
      EXPECT_TRUE(covered.count(def.name)) << def.name << " has no golden case";
    }
  }
  EXPECT_EQ(n, 10);  // 9 MoE definitions and the DSA top-k indexer
}

// The golden files stay small (they live in the repository).
TEST(Fp8Golden, FilesAreSmall) {
  std::uintmax_t total = 0;
  for (const auto& e : fs::directory_iterator(golden_dir())) {
    const auto bytes = fs::file_size(e.path());
    EXPECT_LT(bytes, 300u * 1024) << e.path();
    total += bytes;
  }
  EXPECT_LT(total, 3u * 1024 * 1024);
  std::printf("  [golden_fp8: %ju bytes]\n", total);
}

// --- MoE -------------------------------------------------------------------------------------

// Tolerances for the bf16 MoE output. Both sides dequantize identically (fp8 -> fp32 is exact;
// times the fp32 scale, one rounding), accumulate in fp32 and round once to bf16; they differ
// only in fp32 summation order (BLAS/cuBLAS blocking vs eight partial sums), a relative error of
// a few 1e-7 of the summed terms' magnitude. That moves a bf16 result only where its fp32 value
// lies next to a rounding boundary, and then by one bf16 ulp: at most 2^-7 of the value (rtol).
// atol covers results that are small from cancellation, where the fp32 differences (terms of
// order one, ~1e-6) are many of the tiny value's ulps; it is 1/100 of the outputs' typical size.
constexpr double kMoeAtol = 1e-4;
constexpr double kMoeRtol = 1.0 / 128;

void check_moe(const GoldenCase& c, const Tensor& native, const Tensor& golden,
               const char* device) {
  const auto close = tensors_close(native, golden, kMoeAtol, kMoeRtol);
  EXPECT_TRUE(close) << c.name << " (" << c.definition << ") vs PyTorch on " << device;
  std::int64_t differ = 0;
  double mean = 0, worst_rel = 0;
  for (std::int64_t i = 0; i < golden.numel(); ++i) {
    const double a = native.get(i), e = golden.get(i);
    differ += a != e;
    mean += std::fabs(e);
    if (e != 0) worst_rel = std::max(worst_rel, std::fabs(a - e) / std::fabs(e));
  }
  mean /= static_cast<double>(golden.numel());
  // Guards against a vacuous pass (an output of zeros matches zeros).
  EXPECT_GT(mean, 1e-2) << c.name << ": the golden output is trivially small";
  std::printf(
      "  [%-26s %-5s %s; %ld of %ld elements differ, worst relative %.2g, mean |out| %.3g]\n",
      c.name.c_str(), device, close.message(), static_cast<long>(differ),
      static_cast<long>(golden.numel()), worst_rel, mean);
}

// --- DSA top-k indexer -----------------------------------------------------------------------

// Scores of every position of row b, from the stored inputs: K dequantized in fp32 as the
// reference does (fp8 * scale), the rest in double.
std::vector<double> indexer_scores(const reference::Arguments& args, std::int64_t b) {
  const Tensor& q = args.tensor("q_index_fp8");
  const Tensor& cache = args.tensor("k_index_cache_fp8");
  const Tensor& w = args.tensor("weights");
  const Tensor& table = args.tensor("block_table");
  const std::int64_t heads = q.dim(1), dim = q.dim(2), ps = cache.dim(1), row = cache.dim(3);
  const auto len = static_cast<std::int64_t>(args.tensor("seq_lens").get(b));
  const auto* bytes = reinterpret_cast<const unsigned char*>(cache.bytes().data());
  std::vector<double> s(static_cast<std::size_t>(len));
  for (std::int64_t l = 0; l < len; ++l) {
    const auto page = static_cast<std::int64_t>(table.get(b * table.dim(1) + l / ps));
    const unsigned char* p = bytes + page * ps * row;
    float scale;
    std::memcpy(&scale, p + ps * dim + 4 * (l % ps), 4);
    double total = 0;
    for (std::int64_t h = 0; h < heads; ++h) {
      double dot = 0;
      for (std::int64_t e = 0; e < dim; ++e) {
        const float k = numeric::fp8_e4m3fn_to_float(p[(l % ps) * dim + e]) * scale;
        dot += q.get((b * heads + h) * dim + e) * static_cast<double>(k);
      }
      total += std::max(0.0, dot) * w.get(b * heads + h);
    }
    s[static_cast<std::size_t>(l)] = total;
  }
  return s;
}

// The position in row b's sequence of a global token (page * page_size + offset), or -1.
std::int64_t position_of(const reference::Arguments& args, std::int64_t b, std::int64_t token,
                         std::int64_t len) {
  const Tensor& table = args.tensor("block_table");
  const std::int64_t ps = args.tensor("k_index_cache_fp8").dim(1);
  for (std::int64_t p = 0; p * ps < len; ++p) {
    if (static_cast<std::int64_t>(table.get(b * table.dim(1) + p)) == token / ps) {
      const std::int64_t l = p * ps + token % ps;
      return l < len ? l : -1;
    }
  }
  return -1;
}

// The order of equal or nearly equal scores is not the kernel's to keep (torch.topk leaves ties
// unspecified, and fp32 summation order moves scores by ~1e-7 relative), so rows are compared by
// score: slot i of both must hold a distinct token of the sequence whose score matches within
// 1e-5 of the row's largest score (64 heads x 128 fp32 terms differ from double by ~1e-6 of it).
// Slots past min(topk, len) must be -1 in both.
constexpr double kIndexerScoreTol = 1e-5;

void check_indexer(const GoldenCase& c, const reference::Arguments& args, const Tensor& native,
                   const Tensor& golden, const char* device) {
  ASSERT_EQ(native.shape(), golden.shape());
  const std::int64_t batch = golden.dim(0), topk = golden.dim(1);
  std::int64_t identical = 0;
  double worst = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto len = static_cast<std::int64_t>(args.tensor("seq_lens").get(b));
    const std::vector<double> s = indexer_scores(args, b);
    const double scale = s.empty() ? 1.0 : std::max(1.0, *std::max_element(s.begin(), s.end()));
    std::set<std::int64_t> seen_native, seen_golden;
    for (std::int64_t i = 0; i < topk; ++i) {
      const auto tn = static_cast<std::int64_t>(native.get(b * topk + i));
      const auto tg = static_cast<std::int64_t>(golden.get(b * topk + i));
      identical += tn == tg;
      if (i >= std::min(topk, len)) {
        ASSERT_EQ(tn, -1) << c.name << " row " << b << " slot " << i;
        ASSERT_EQ(tg, -1) << c.name << " row " << b << " slot " << i << " (golden)";
        continue;
      }
      const std::int64_t ln = position_of(args, b, tn, len), lg = position_of(args, b, tg, len);
      ASSERT_GE(ln, 0) << c.name << " row " << b << " slot " << i << ": native token " << tn
                       << " is not in the sequence";
      ASSERT_GE(lg, 0) << c.name << " row " << b << " slot " << i << ": golden token " << tg;
      ASSERT_TRUE(seen_native.insert(ln).second)
          << c.name << " row " << b << ": token " << tn << " twice";
      ASSERT_TRUE(seen_golden.insert(lg).second)
          << c.name << " row " << b << ": golden token " << tg << " twice";
      const double d =
          std::fabs(s[static_cast<std::size_t>(ln)] - s[static_cast<std::size_t>(lg)]) / scale;
      worst = std::max(worst, d);
      ASSERT_LE(d, kIndexerScoreTol)
          << c.name << " vs PyTorch on " << device << ", row " << b << " slot " << i
          << ": native token " << tn << " scores " << s[static_cast<std::size_t>(ln)]
          << ", golden token " << tg << " scores " << s[static_cast<std::size_t>(lg)];
    }
  }
  std::printf(
      "  [%-26s %-5s %ld of %ld indices identical, worst score gap %.2g of the row's best]\n",
      c.name.c_str(), device, static_cast<long>(identical), static_cast<long>(golden.numel()),
      worst);
}

// --- the cases -------------------------------------------------------------------------------

class Fp8GoldenCase : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8GoldenCase, NativeMatchesPyTorch211) {
  FIB_REQUIRE_CORPUS(corpus);
  const auto cases = manifest_cases();
  const auto it = std::find_if(cases.begin(), cases.end(),
                               [](const GoldenCase& c) { return c.name == GetParam(); });
  ASSERT_NE(it, cases.end()) << GetParam() << " is not in the manifest";
  const GoldenCase& c = *it;
  const Definition def = golden_definition(corpus, c);
  const reference::Arguments args = read_arguments(c.inputs_path());
  const reference::Outputs native = reference::run(def, c.var_axes, args);
  for (const char* device : kDevices) {
    const auto file = SafetensorsFile::open(c.outputs_path(device));
    for (const auto& spec : def.outputs) {
      const Tensor golden = file.read(spec.name);
      if (c.op_type == "moe") {
        check_moe(c, native.at(spec.name), golden, device);
      } else {
        check_indexer(c, args, native.at(spec.name), golden, device);
      }
    }
  }
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  try {
    for (const auto& c : manifest_cases()) names.push_back(c.name);
  } catch (const std::exception&) {
    names.push_back("manifest_unreadable");  // fails visibly in the test body
  }
  return names;
}

std::string param_name(const ::testing::TestParamInfo<std::string>& p) { return p.param; }

INSTANTIATE_TEST_SUITE_P(Golden, Fp8GoldenCase, ::testing::ValuesIn(case_names()), param_name);

}  // namespace
}  // namespace fib::testing::golden
