// End to end: `fib run` signs its traces with a key it makes on first use (mode 0600, in fib's
// home, never in the dataset); a forged line appended to the traces (claiming fib's signature)
// is an error for `fib validate` and ignored by `fib report`; an unsigned upstream-style line
// is shown but not ranked unless --include-unverified; another user's fib trusts these traces
// once told the key (`fib key trust`); `report merge` copies the signed lines byte for byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/dataset/files.h"
#include "fib/dataset/trace_set.h"
#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

constexpr const char* kDefinition = "rmsnorm_h2048";

// The one traces file under root/traces.
fs::path traces_file(const fs::path& root) {
  std::vector<fs::path> found;
  for (const auto& e : fs::recursive_directory_iterator(root / "traces")) {
    if (e.is_regular_file()) found.push_back(e.path());
  }
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? fs::path() : found.front();
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> out;
  const std::string text = TempDir::read_file(file);
  for (const auto& l : split_jsonl(text)) out.emplace_back(l.text);
  return out;
}

void append_line(const fs::path& file, const std::string& line) {
  append_jsonl(file, std::span<const std::string>(&line, 1));
}

// The fastest latency `fib report best --json` ranks on a workload.
double best_latency(const CommandResult& r, const std::string& uuid) {
  const Json j = Json::parse(r.out);
  for (const auto& w : j["definitions"][0]["per_workload"]) {
    if (w["uuid"] == uuid) return w["latency_ms"].get<double>();
  }
  ADD_FAILURE() << "no ranked trace on workload " << uuid << ":\n" << r.out;
  return 0;
}

class SignedTracesCli : public ::testing::Test {
 protected:
  void SetUp() override {
    copy_tree(source_dir() / "examples/dataset", root);
    const CommandResult r = run_fib(
        {"run",           "--local",     root.string(),         "--definitions",
         kDefinition,     "--solutions", "rmsnorm_h2048_naive", "rmsnorm_h2048_fast",
         "--warmup-runs", "1",           "--iterations",        "3",
         "--num-trials",  "1",           "--max-trial-seconds", "0.2",
         "--seed",        "5",           "--build-cache",       (dir.path() / "cache").string()},
        env);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr("made a signing key at " + (home / "signing-key.pem").string()));
    const CommandResult key = run_fib({"key", "show", "--json"}, env);
    ASSERT_EQ(key.exit_code, 0) << key.err;
    key_id = Json::parse(key.out)["key_id"].get<std::string>();
    public_line = Json::parse(key.out)["public_key"].get<std::string>();
  }

  CommandResult best(const std::vector<std::string>& extra = {},
                     const std::vector<std::string>& with_env = {}) {
    std::vector<std::string> args = {"report", "best", "--local", root.string(), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = run_fib(args, with_env.empty() ? env : with_env);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r;
  }

  TempDir dir;
  fs::path root = dir.path() / "dataset";
  fs::path home = dir.path() / "home";
  std::vector<std::string> env = {"FIB_HOME=" + home.string()};
  std::string key_id, public_line;
};

TEST_F(SignedTracesCli, RunSignsEveryTraceWithAPrivateKeyOutsideTheDataset) {
  struct stat st {};
  ASSERT_EQ(::stat((home / "signing-key.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    EXPECT_NE(e.path().extension(), ".pem") << "a key file in the dataset: " << e.path();
  }
  const TraceSet set = TraceSet::load(root);
  EXPECT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  ASSERT_EQ(set.traces(kDefinition).size(), 4u);
  for (const auto& r : set.traces(kDefinition)) EXPECT_EQ(r.value.signer, key_id);
  for (const auto& line : lines_of(traces_file(root))) {
    EXPECT_THAT(line, HasSubstr("\"signature\":{\"algorithm\":\"ed25519\",\"key_id\":\"" + key_id));
  }
  const CommandResult v = run_fib({"validate", "--dataset", root.string()}, env);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  // fib's own traces are verified: ranked with nothing left out.
  const Json j = Json::parse(best().out);
  EXPECT_EQ(j["definitions"][0]["unverified_traces"], 0);
  EXPECT_FALSE(j["definitions"][0]["best"].is_null());
}

TEST_F(SignedTracesCli, ForgedLineIsRejectedByValidateAndIgnoredByReport) {
  const fs::path file = traces_file(root);
  // What a solution could append: a copy of a signed trace with a 1000x better latency.
  Json forged = Json::parse(lines_of(file).back());
  const std::string uuid = forged["workload"]["uuid"];
  const double honest = best_latency(best(), uuid);
  forged["evaluation"]["performance"]["latency_ms"] = honest / 1000;
  append_line(file, dump_json_line(forged));

  const CommandResult v = run_fib({"validate", "--dataset", root.string()}, env);
  EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
  const std::string where = fs::relative(file, root).generic_string() + ":5";
  EXPECT_THAT(v.out, HasSubstr(where));
  EXPECT_THAT(v.out, HasSubstr("the signature does not verify"));

  const CommandResult r = best();
  EXPECT_THAT(r.err, HasSubstr(where));
  EXPECT_THAT(r.err, HasSubstr("the signature does not verify"));
  EXPECT_DOUBLE_EQ(best_latency(r, uuid), honest);
}

TEST_F(SignedTracesCli, UnsignedTracesAreShownButRankedOnlyWhenAskedFor) {
  const fs::path file = traces_file(root);
  // An upstream-style trace (no environment.extra, so no signature) claiming 1000x.
  Json upstream = Json::parse(lines_of(file).back());
  const std::string uuid = upstream["workload"]["uuid"];
  const double honest = best_latency(best(), uuid);
  upstream["evaluation"]["environment"].erase("extra");
  upstream["evaluation"]["performance"]["latency_ms"] = honest / 1000;
  append_line(file, dump_json_line(upstream));

  const CommandResult v = run_fib({"validate", "--dataset", root.string()}, env);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  const CommandResult ranked_default = best();
  EXPECT_DOUBLE_EQ(best_latency(ranked_default, uuid), honest);
  EXPECT_EQ(Json::parse(ranked_default.out)["definitions"][0]["unverified_traces"], 1);
  EXPECT_DOUBLE_EQ(best_latency(best({"--include-unverified"}), uuid), honest / 1000);

  const CommandResult summary = run_fib({"report", "summary", "--local", root.string()}, env);
  EXPECT_THAT(summary.out, HasSubstr("Traces: 5 "));
  EXPECT_THAT(summary.out, HasSubstr("1 unverified trace(s) counted in the totals, not ranked"));
}

TEST_F(SignedTracesCli, AnotherFibTrustsTheTracesOnceToldTheKey) {
  const std::vector<std::string> other = {"FIB_HOME=" + (dir.path() / "other-home").string()};
  const Json before = Json::parse(best({}, other).out);
  EXPECT_EQ(before["definitions"][0]["unverified_traces"], 4);
  EXPECT_TRUE(before["definitions"][0]["best"].is_null());
  EXPECT_FALSE(fs::exists(dir.path() / "other-home" / "signing-key.pem"))
      << "reading reports must not make a key";

  const CommandResult t = run_fib({"key", "trust", public_line}, other);
  EXPECT_EQ(t.exit_code, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("trusted key " + key_id));
  const Json after = Json::parse(best({}, other).out);
  EXPECT_EQ(after["definitions"][0]["unverified_traces"], 0);
  EXPECT_FALSE(after["definitions"][0]["best"].is_null());
}

TEST_F(SignedTracesCli, MergeKeepsTheSignedLinesByteForByte) {
  const fs::path file = traces_file(root);
  const std::vector<std::string> signed_lines = lines_of(file);
  Json forged = Json::parse(signed_lines.front());
  forged["evaluation"]["log"] = "forged";
  append_line(file, dump_json_line(forged));

  const fs::path out = dir.path() / "merged";
  const CommandResult m =
      run_fib({"report", "merge", "--local", root.string(), "--output", out.string()}, env);
  EXPECT_EQ(m.exit_code, 1) << "the forged line is a record that was not carried over\n" << m.out;
  EXPECT_EQ(lines_of(out / fs::relative(file, root)), signed_lines);
  const TraceSet merged = TraceSet::load(out);
  for (const auto& r : merged.traces(kDefinition)) EXPECT_EQ(r.value.signer, key_id);
}

}  // namespace
}  // namespace fib::testing
