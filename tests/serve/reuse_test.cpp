// Which earlier traces answer an identical submission (serve/reuse.h): each rule, over the
// example dataset's rmsnorm_h2048 with traces made in memory.
#include <gtest/gtest.h>

#include "fib/version.h"
#include "serve/reuse.h"
#include "support/test_paths.h"

namespace fib::serve {
namespace {

constexpr const char* kSolution = "rmsnorm_h2048_fast";
constexpr const char* kKey = "k1";
constexpr const char* kSigner = "server-key";
constexpr const char* kHardware = "test-cpu";

struct Fixture {
  TraceSet set = TraceSet::load(fib::testing::source_dir() / "examples" / "dataset");
  std::vector<std::string> workloads;

  Fixture() {
    for (const auto& w : set.workloads("rmsnorm_h2048")) {
      workloads.push_back(w.value.workload.uuid);
    }
  }
  // A trace that answers for workload `i`, before `change` makes it not.
  Trace answering(std::size_t i) const {
    Trace t;
    t.definition = "rmsnorm_h2048";
    t.workload = set.workload(workloads.at(i))->value.workload;
    t.solution = kSolution;
    t.signer = kSigner;
    Evaluation e;
    e.status = EvaluationStatus::kPassed;
    e.environment.hardware = kHardware;
    e.environment.extra = Json{{kEvaluationKeyKey, kKey}, {"defences", kDefenceVersion}};
    t.evaluation = e;
    return t;
  }
  std::map<std::string, const Trace*> answers(const TraceSet& s) const {
    return earlier_answers(s, "rmsnorm_h2048", workloads,
                           AnswerRule{kSolution, kKey, kSigner, kHardware});
  }
};

TEST(ServeReuse, AnEarlierTraceAnswersOnlyWhenEveryRuleHolds) {
  Fixture f;
  ASSERT_EQ(f.workloads.size(), 2u);
  {
    TraceSet s = f.set;
    s.add_trace(f.answering(0));
    const auto found = f.answers(s);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_TRUE(found.contains(f.workloads[0]));
  }
  // Each change alone makes the trace answer for nothing.
  const std::vector<std::pair<std::string, std::function<void(Trace&)>>> changes = {
      {"an older defence version",
       [](Trace& t) { t.evaluation->environment.extra["defences"] = kDefenceVersion - 1; }},
      {"no defence version", [](Trace& t) { t.evaluation->environment.extra.erase("defences"); }},
      {"another evaluation key",
       [](Trace& t) { t.evaluation->environment.extra[kEvaluationKeyKey] = "k2"; }},
      {"unsigned", [](Trace& t) { t.signer.clear(); }},
      {"another signer", [](Trace& t) { t.signer = "someone-else"; }},
      {"other hardware", [](Trace& t) { t.evaluation->environment.hardware = "other-cpu"; }},
      {"another solution", [](Trace& t) { t.solution = "rmsnorm_h2048_naive"; }},
      {"not run", [](Trace& t) { t.evaluation->environment.extra[kNotRunKey] = Json::object(); }},
      {"another workload", [](Trace& t) { t.workload.uuid += "-changed"; }},
      {"the workload record changed since", [](Trace& t) { t.workload.axes.at(0).second += 1; }},
  };
  for (const auto& [what, change] : changes) {
    TraceSet s = f.set;
    Trace t = f.answering(0);
    change(t);
    s.add_trace(t);
    EXPECT_TRUE(f.answers(s).empty()) << what;
  }
}

TEST(ServeReuse, TheEvaluationKeyFollowsTheSolutionDefinitionAndSettings) {
  Fixture f;
  const Solution& s = f.set.solution(kSolution)->value;
  const Definition& d = *f.set.definition("rmsnorm_h2048");
  bench::RunOptions o;
  const std::string key = evaluation_key(s, d, o, "cpu");
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, evaluation_key(s, d, o, "cpu"));
  EXPECT_EQ(evaluation_key(s, d, o, "cuda:0"), evaluation_key(s, d, o, "cuda:1"))
      << "GPUs of one kind share a key; the hardware is matched trace by trace";
  EXPECT_NE(key, evaluation_key(s, d, o, "cuda:0"));
  Solution dps = s;
  dps.spec.destination_passing_style = !s.spec.dps();
  EXPECT_NE(key, evaluation_key(dps, d, o, "cpu"));
  Definition other = d;
  other.description = other.description.value_or("") + " ";
  EXPECT_NE(key, evaluation_key(s, other, o, "cpu"));
  bench::RunOptions trials = o;
  trials.cli.num_trials = 7;
  EXPECT_NE(key, evaluation_key(s, d, trials, "cpu"));
  bench::RunOptions timeout = o;
  timeout.timeout_seconds = 5;
  EXPECT_NE(key, evaluation_key(s, d, timeout, "cpu"));
}

}  // namespace
}  // namespace fib::serve
