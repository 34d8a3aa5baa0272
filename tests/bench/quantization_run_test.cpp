// fib run end to end on the CPU for the fp8 quantization op type, against its native reference:
// tvm-ffi C++ solutions of per_token_group_quant_fp8 that divide by the scale (the reference's
// way) or multiply by its reciprocal pass; one that truncates toward zero instead of rounding
// to nearest stays within one e4m3 unit per element but fails the family's aggregate bound.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"
#include "fib/onboard/generators.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr const char* kDefinition = "per_token_group_quant_fp8_k256_g128";

// `scale_op` quantizes x with the group's scale s; `truncate` picks the e4m3 code toward zero.
std::string solution_source(const std::string& scale_op, bool truncate) {
  std::string s = R"(
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
using tvm::ffi::TensorView;
static float bf(std::uint16_t b) { std::uint32_t u = std::uint32_t(b) << 16; float v; std::memcpy(&v, &u, 4); return v; }
static float e4m3(int c) {
  const int e = (c >> 3) & 15, m = c & 7;
  return e ? std::ldexp(1.0f + m / 8.0f, e - 7) : std::ldexp(m / 8.0f, -6);
}
static std::uint8_t encode(float v) {
  const float a = std::fabs(v);
  int c = 0;
  while (c < 126 && e4m3(c + 1) <= a) ++c;
  if (!TRUNCATE && c < 126) {
    const float lo = a - e4m3(c), hi = e4m3(c + 1) - a;
    if (hi < lo || (hi == lo && (c & 1))) ++c;
  }
  return std::uint8_t((v < 0 ? 0x80 : 0) | c);
}
static void run_(TensorView in, TensorView q, TensorView s) {
  const auto* x = static_cast<const std::uint16_t*>(in.data_ptr());
  auto* qp = static_cast<std::uint8_t*>(q.data_ptr());
  auto* sp = static_cast<float*>(s.data_ptr());
  const std::int64_t rows = in.size(0), k = in.size(1), g = 128;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < k / g; ++j) {
      const std::uint16_t* xs = x + r * k + j * g;
      float amax = 0;
      for (std::int64_t i = 0; i < g; ++i) amax = std::max(amax, std::fabs(bf(xs[i])));
      const float sc = std::max(amax, 1e-10f) / 448.0f;
      for (std::int64_t i = 0; i < g; ++i) {
        const float xs_f = bf(xs[i]);
        qp[r * k + j * g + i] = encode(std::clamp(SCALE_OP, -448.0f, 448.0f));
      }
      sp[r * (k / g) + j] = sc;
    }
  }
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_);
)";
  s.replace(s.find("TRUNCATE"), 8, truncate ? "true" : "false");
  s.replace(s.find("SCALE_OP"), 8, scale_op);
  return s;
}

class QuantizationRun : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef FIB_HAVE_TVM_FFI
    GTEST_SKIP() << "fib was built without tvm-ffi (scripts/install-deps.sh installs it)";
#endif
    const fs::path root = tmp_.path() / "dataset";
    const Definition def = onboard::generate_definition(
        onboard::QuantizationKernel{onboard::QuantKind::kPerTokenGroupFp8, 256, 128, ""},
        onboard::GenContext{"test", "Test"});
    ASSERT_EQ(def.name, kDefinition);
    write_definition(root, def);
    fs::create_directories(root / "workloads" / "quantization");
    std::ofstream w(root / "workloads" / "quantization" / (def.name + ".jsonl"));
    int n = 0;
    for (int m : {3, 40}) {
      w << R"({"definition":")" << def.name << R"(","solution":null,"workload":{"uuid":"q-)" << n++
        << R"(","axes":{"M":)" << m
        << R"(},"inputs":{"input":{"type":"random"}}},"evaluation":null})"
        << "\n";
    }
  }
  void add(const std::string& name, const std::string& scale_op, bool truncate) {
    Solution s;
    s.name = name;
    s.definition = kDefinition;
    s.author = "quant";
    s.spec.language = "cpp";
    s.spec.target_hardware = {"cpu"};
    s.spec.entry_point = "kernel.cc::run";
    s.sources.push_back(SourceFile{"kernel.cc", solution_source(scale_op, truncate), {}});
    write_solution(tmp_.path() / "dataset", s, "quantization");
  }
  RunResult run() {
    RunOptions o;
    o.dataset = tmp_.path() / "dataset";
    o.worker_executable = FIB_EXE;
    o.abi_include_dir = fs::path(FIB_SOURCE_DIR) / "include";
    o.build_cache = tmp_.path() / "cache";
    o.seed = 7;
    o.timeout_seconds = 60;
    o.cli.warmup_runs = 1;
    o.cli.iterations = 2;
    o.cli.num_trials = 2;
    o.definitions = {kDefinition};
    return run_benchmark(o);
  }
  TempDir tmp_;
};

TEST_F(QuantizationRun, RoundingToNearestPassesAndTruncatingFailsTheAggregateBound) {
  add("divides", "xs_f / sc", false);
  add("reciprocal", "xs_f * (1.0f / sc)", false);
  add("truncates", "xs_f / sc", true);
  const RunResult r = run();
  std::map<std::string, std::vector<EvaluationStatus>> by;
  std::map<std::string, std::string> log;
  for (const Trace& t : r.traces) {
    by[*t.solution].push_back(t.evaluation->status);
    log[*t.solution] = t.evaluation->log;
  }
  const std::vector<EvaluationStatus> passed(2, EvaluationStatus::kPassed),
      wrong(2, EvaluationStatus::kIncorrectNumerical);
  EXPECT_EQ(by["divides"], passed) << log["divides"];
  EXPECT_EQ(by["reciprocal"], passed) << log["reciprocal"];
  EXPECT_EQ(by["truncates"], wrong) << log["truncates"];
  EXPECT_NE(log["truncates"].find("exceeded"), std::string::npos) << log["truncates"];
}

}  // namespace
}  // namespace fib::bench
