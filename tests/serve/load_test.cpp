// The load test of fib serve: 200 concurrent evaluate requests of one CPU solution (evaluated by
// every task: --reevaluate), the server killed with SIGKILL while it works through them, then
// restarted. Every task must end with one final result and the dataset must hold exactly one
// trace line per (task, workload): nothing lost, nothing evaluated twice.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "serve_process.h"
#include "support/temp_dir.h"

namespace fib::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kTasks = 200;
constexpr int kClients = 50;

// Submits kTasks evaluations from kClients threads at once; the task ids in submission order.
std::vector<std::string> submit_concurrently(const ServeProcess& server) {
  std::vector<std::string> ids(kTasks);
  const std::string body = Json{{"solution", rmsnorm_solution_json("rms")}}.dump();
  std::vector<std::thread> clients;
  for (int k = 0; k < kClients; ++k) {
    clients.emplace_back([&, k] {
      auto c = server.client();
      for (int i = k; i < kTasks; i += kClients) {
        auto r = c->Post("/evaluate", body, "application/json");
        if (r && r->status == 200) {
          ids[i] = Json::parse(r->body)["task_id"];
        } else {
          ids[i] = "failed: " +
                   (r ? fmt::format("{} {}", r->status, r->body) : httplib::to_string(r.error()));
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  return ids;
}

std::size_t finished_count(httplib::Client& c, const std::vector<std::string>& ids) {
  auto r = c.Post("/tasks/batch", Json{{"task_ids", ids}}.dump(), "application/json");
  if (!r || r->status != 200) return 0;
  std::size_t n = 0;
  for (const Json& t : Json::parse(r->body))
    n += t["status"] == "completed" || t["status"] == "failed";
  return n;
}

// Trace lines per task id (lines that do not parse are counted under "").
std::map<std::string, int> trace_lines_per_task(const fs::path& dataset) {
  std::map<std::string, int> per_task;
  std::ifstream in(dataset / "traces" / "serve-test" / "rmsnorm" / "rmsnorm_h2048.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      ++per_task[Json::parse(line)["evaluation"]["environment"]["extra"]["serve_task_id"]];
    } catch (const std::exception&) {
      ++per_task[""];
    }
  }
  return per_task;
}

TEST(ServeLoad, ConcurrentEvaluationsSurviveAKillAndARestart) {
  TempDir tmp;
  const fs::path dataset = tmp.path() / "dataset";
  make_rmsnorm_dataset(dataset);
  // Two CPU queues and no sandbox keep the 200 evaluations short on a 2-core machine; what is
  // tested is the service (queueing, the store, the dataset), not the timing.
  const std::vector<std::string> args = {
      "--devices",     "cpu,cpu", "--sandbox",     "off",
      "--warmup-runs", "1",       "--iterations",  "2",
      "--num-trials",  "1",       "--build-cache", (tmp.path() / "cache").string(),
      "--reevaluate"};
  auto server = std::make_unique<ServeProcess>(dataset, tmp.path() / "home", args);
  const std::vector<std::string> ids = submit_concurrently(*server);
  for (const std::string& id : ids) ASSERT_EQ(id.rfind("failed", 0), std::string::npos) << id;
  ASSERT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());

  auto c = server->client();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::size_t before_kill = 0;
  while ((before_kill = finished_count(*c, ids)) < 10 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(before_kill, 10u) << server->log();
  server->kill_hard();
  ASSERT_LT(trace_lines_per_task(dataset).size(), ids.size())
      << "everything finished before the kill";

  server = std::make_unique<ServeProcess>(dataset, tmp.path() / "home", args);
  c = server->client();
  c->set_read_timeout(660, 0);  // the server waits up to 600 s: on a loaded machine it may
  auto r =
      c->Post("/tasks/batch", Json{{"task_ids", ids}, {"timeout", 600}}.dump(), "application/json");
  ASSERT_TRUE(r && r->status == 200) << server->log();
  // Every task has its one trace. On a loaded machine the timer cross-check may flag an
  // evaluation (a worker descheduled looks like a slow clock: RUNTIME_ERROR), so the statuses
  // are not all PASSED; that the solution really ran is shown by those that are.
  int passed = 0;
  for (const Json& t : Json::parse(r->body)) {
    ASSERT_EQ(t["status"], "completed") << t.dump(2) << server->log();
    ASSERT_EQ(t["traces"].size(), 1u) << t.dump(2);
    const Json& evaluation = t["traces"][0]["evaluation"];
    EXPECT_EQ(evaluation["environment"]["extra"]["serve_task_id"], t["task_id"]);
    passed += evaluation["status"] == "PASSED";
  }
  EXPECT_GT(passed, 0);
  // A SIGKILL can cut a trace line that spans pages mid-write; readers skip such a line and its
  // workload was evaluated again, so only whole lines count.
  std::map<std::string, int> lines = trace_lines_per_task(dataset);
  lines.erase("");
  EXPECT_EQ(lines.size(), ids.size());
  for (const std::string& id : ids) EXPECT_EQ(lines.count(id) ? lines.at(id) : 0, 1) << id;
}

}  // namespace
}  // namespace fib::testing
