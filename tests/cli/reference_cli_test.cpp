// End to end: fib reference's --device, --time and --json on the bundled example (gemm at M = 8).
// The CUDA cases hold in every build: a build without the CUDA path refuses cuda devices, a CUDA
// build on a machine without a GPU (CI) says there is no CUDA device, and on a GPU machine the
// CUDA reference runs and agrees with the CPU one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "fib/tensor/safetensors.h"
#include "fib/trace/json_reader.h"
#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kDefinition = "gemm_n2048_k2048";
constexpr const char* kWorkload = "ef4086fe-aa45-4748-97a2-5b82af2b8cad";  // M = 8

// The example dataset (only read) and the workload's inputs, written once per test.
struct GemmInputs {
  TempDir dir;
  std::string dataset = (source_dir() / "examples/dataset").string();
  std::string inputs = (dir.path() / "in.safetensors").string();
  std::string output = (dir.path() / "out.safetensors").string();
  GemmInputs() {
    const auto r = run_fib({"inputs", "--dataset", dataset, "--definition", kDefinition,
                            "--workload", kWorkload, "--output", inputs, "--seed", "3"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  std::vector<std::string> reference(std::vector<std::string> extra) const {
    std::vector<std::string> args{"reference", "--dataset", dataset,    "--definition", kDefinition,
                                  "--inputs",  inputs,      "--output", output};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
};

double number(const std::string& s) { return std::stod(s); }

TEST(ReferenceCli, CpuTimePrintsMedianP10P90AndSampleCount) {
  GemmInputs g;
  const auto r = run_fib(
      g.reference({"--time", "--warmup", "1", "--iterations", "5", "--max-seconds", "600"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Five samples: the noise criterion needs ten, the time cap is far away.
  const std::regex line(
      "gemm_n2048_k2048: native reference gemm on cpu in [0-9]+\\.[0-9]{2} ms; wrote .*\n"
      "gemm_n2048_k2048: timed gemm on cpu: median ([0-9]+\\.[0-9]{4}) ms, p10 ([0-9]+\\.[0-9]{4}) "
      "ms, p90 ([0-9]+\\.[0-9]{4}) ms, 5 samples \\(steady_clock, warmup 1, stop: iterations\\)\n");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(r.out, m, line)) << r.out;
  const double median = number(m[1]), p10 = number(m[2]), p90 = number(m[3]);
  EXPECT_GT(p10, 0.0);
  EXPECT_LE(p10, median);
  EXPECT_LE(median, p90);
  // The outputs are written as without --time.
  const auto out = SafetensorsFile::open(g.output);
  EXPECT_EQ(out.read("C").shape(), (Shape{8, 2048}));
}

TEST(ReferenceCli, CpuJsonHasAxesAndSamples) {
  GemmInputs g;
  const auto r = run_fib(g.reference({"--time", "--json", "--iterations", "3", "--warmup", "2",
                                      "--max-seconds", "600", "--threads", "1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j.at("definition"), "gemm_n2048_k2048");
  EXPECT_EQ(j.at("kernel"), "gemm");
  EXPECT_EQ(j.at("device"), "cpu");
  EXPECT_EQ(j.at("axes"), Json({{"M", 8}}));
  EXPECT_EQ(j.at("output"), g.output);
  EXPECT_GT(j.at("run_ms").get<double>(), 0.0);
  const Json& t = j.at("timing");
  EXPECT_EQ(t.at("count"), 3);
  ASSERT_EQ(t.at("samples_ms").size(), 3u);
  EXPECT_LE(t.at("min_ms").get<double>(), t.at("median_ms").get<double>());
  EXPECT_LE(t.at("median_ms").get<double>(), t.at("max_ms").get<double>());
  EXPECT_EQ(t.at("method"), Json({{"clock", "steady_clock"},
                                  {"warmup", 2},
                                  {"threads", 1},
                                  {"stop", "iterations"},
                                  {"iterations", 3}}));
}

TEST(ReferenceCli, JsonWithoutTimeHasNoTiming) {
  GemmInputs g;
  const auto r = run_fib(g.reference({"--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j.at("kernel"), "gemm");
  EXPECT_FALSE(j.contains("timing"));
}

TEST(ReferenceCli, BadDeviceAndIterations) {
  GemmInputs g;
  auto r = run_fib(g.reference({"--device", "gpu"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fib: --device: error: unknown device 'gpu' (expected cpu, cuda or cuda:N)\n");
  r = run_fib(g.reference({"--device", "cuda:x"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "fib: --device: error: unknown device 'cuda:x' (expected cpu, cuda or cuda:N)\n");
  r = run_fib(g.reference({"--time", "--iterations", "0"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fib: --iterations: error: must be at least 1\n");
  r = run_fib(g.reference({"--time", "--mode", "nvtx"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "fib: --mode: error: unknown timing mode 'nvtx' (expected events, cupti or graph)\n");
}

TEST(ReferenceCli, CudaDeviceInEveryBuild) {
  GemmInputs g;
  const auto help = run_fib({"reference", "--help"});
  ASSERT_EQ(help.exit_code, 0);
  const bool cuda_build =
      help.out.find("cuda:N (the CUDA reference on GPU N)") != std::string::npos;
  const auto r = run_fib(g.reference({"--device", "cuda:0", "--time", "--iterations", "3"}));
  if (!cuda_build) {
    EXPECT_THAT(help.out, HasSubstr("cpu (cuda needs a CUDA build of fib)"));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err,
              "fib: --device: error: device 'cuda:0' is not available in this build (CUDA "
              "references need a CUDA build of fib; use --device cpu)\n");
    return;
  }
  if (r.exit_code != 0) {
    // A CUDA build without a usable GPU (CI): refused before anything is read, with the
    // runtime's reason.
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_THAT(r.err, StartsWith("fib: --device: error: no CUDA device for 'cuda:0': "));
    EXPECT_THAT(
        r.err,
        EndsWith(" (run on a machine with an NVIDIA GPU and driver, or use --device cpu)\n"));
    EXPECT_EQ(r.out, "");
    return;
  }
  // A GPU: the CUDA reference ran, was timed with the GPU timer, and agrees with the CPU one.
  EXPECT_THAT(r.out, HasSubstr("gemm_n2048_k2048: CUDA reference cuda:gemm on cuda:0 ("));
  EXPECT_THAT(r.out, HasSubstr("gemm_n2048_k2048: timed cuda:gemm on cuda:0: median "));
  EXPECT_THAT(r.out, HasSubstr(", 3 samples (cuda_events, L2 flush "));
  const Tensor gpu = SafetensorsFile::open(g.output).read("C");
  const std::string cpu_out = (g.dir.path() / "cpu.safetensors").string();
  const auto c = run_fib({"reference", "--dataset", g.dataset, "--definition", kDefinition,
                          "--inputs", g.inputs, "--output", cpu_out});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const Tensor cpu = SafetensorsFile::open(cpu_out).read("C");
  ASSERT_EQ(gpu.shape(), cpu.shape());
  // fp16 outputs, both summed in fp32 and rounded once: within two fp16 ulps (rtol 2e-3), with
  // atol for values that round near zero (tests/reference_cuda/gemm_test.cpp's tolerance).
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < gpu.numel(); ++i)
    off += std::abs(gpu.get(i) - cpu.get(i)) > 1e-2 + 2e-3 * std::abs(cpu.get(i)) ? 1 : 0;
  EXPECT_EQ(off, 0) << "of " << gpu.numel() << " outputs";
  // CUPTI mode lists the call's kernels.
  const auto k = run_fib(g.reference({"--device", "cuda:0", "--time", "--json", "--mode", "cupti",
                                      "--iterations", "3", "--warmup", "1"}));
  ASSERT_EQ(k.exit_code, 0) << k.err;
  const Json j = Json::parse(k.out);
  EXPECT_EQ(j.at("kernel"), "cuda:gemm");
  EXPECT_EQ(j.at("timing").at("method").at("mode"), "cupti");
  EXPECT_EQ(j.at("timing").at("count"), 3);
  ASSERT_FALSE(j.at("timing").at("kernels").empty());
  EXPECT_GT(j.at("timing").at("kernels").at(0).at("duration_ms").get<double>(), 0.0);
}

}  // namespace
}  // namespace fib::testing
