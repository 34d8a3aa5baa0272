// fib serve's evaluation API against a real server: a task runs the solution through the engine
// of `fib run` and appends one signed trace per workload; bad requests get 400/404/422 bodies
// that say what is wrong; the task store survives a restart and resumes queued tasks.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include "serve_process.h"
#include "support/temp_dir.h"

namespace fib::testing {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kFastRun = {"--warmup-runs", "1", "--iterations", "2",
                                           "--num-trials",  "1", "--timeout",    "60"};

class ServeTasks : public ::testing::Test {
 protected:
  void SetUp() override { make_rmsnorm_dataset(dataset()); }
  fs::path dataset() const { return tmp_.path() / "dataset"; }
  std::unique_ptr<ServeProcess> start(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = kFastRun;
    args.insert(args.end(), {"--build-cache", (tmp_.path() / "cache").string()});
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<ServeProcess>(dataset(), tmp_.path() / "home", args);
  }
  static std::string submit(httplib::Client& c, const Json& request) {
    auto r = c.Post("/evaluate", request.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
    return body_json(r).value("task_id", "");
  }
  // The trace lines of the dataset, each as JSON.
  std::vector<Json> trace_lines() const {
    std::vector<Json> out;
    const fs::path file = dataset() / "traces" / "serve-test" / "rmsnorm" / "rmsnorm_h2048.jsonl";
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.push_back(Json::parse(line));
    }
    return out;
  }
  TempDir tmp_;
};

TEST_F(ServeTasks, EvaluateRunsTheSolutionAndAppendsOneSignedTrace) {
  auto server = start();
  auto c = server->client();
  auto r = c->Post("/evaluate", Json{{"solution", rmsnorm_solution_json("rms")}}.dump(),
                   "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json submitted = body_json(r);
  const std::string name = submitted["normalized_solution_name"];
  EXPECT_TRUE(std::regex_match(name, std::regex("rms_[0-9a-f]{8}"))) << name;
  EXPECT_TRUE(fs::exists(dataset() / "solutions" / "serve-test" / "rmsnorm" / "rmsnorm_h2048" /
                         (name + ".json")));
  const std::string id = submitted["task_id"];
  const Json task = body_json(c->Get(("/tasks/" + id + "?timeout=120").c_str()));
  ASSERT_EQ(task["status"], "completed") << task.dump(2) << server->log();
  EXPECT_EQ(task["solution"], name);
  EXPECT_EQ(task["definition"], "rmsnorm_h2048");
  EXPECT_TRUE(task["error"].is_null());
  ASSERT_EQ(task["traces"].size(), 1u);
  const Json& evaluation = task["traces"][0]["evaluation"];
  EXPECT_EQ(evaluation["status"], "PASSED") << evaluation["log"];
  EXPECT_EQ(evaluation["environment"]["extra"]["serve_task_id"], id);
  EXPECT_TRUE(evaluation["environment"]["extra"].contains("signature"));
  const std::vector<Json> lines = trace_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], task["traces"][0]);
  EXPECT_EQ(submitted["author"], "serve-test") << "the admin token submits as the solution says";
  // The same code again: the same name, one solution file, a second task answered from the
  // first one's trace (the same solution, definition, workload and settings), nothing run.
  const std::string again = submit(*c, Json{{"solution", rmsnorm_solution_json("rms")}});
  EXPECT_NE(again, id);
  const Json second = body_json(c->Get(("/tasks/" + again + "?timeout=120").c_str()));
  EXPECT_EQ(second["solution"], name);
  EXPECT_EQ(second["status"], "completed");
  EXPECT_EQ(second["traces"], task["traces"]);
  EXPECT_EQ(trace_lines().size(), 1u);
  const Json health = body_json(server->client(false)->Get("/health"));
  EXPECT_EQ(health["workers"], Json::parse(R"([{"device": "cpu", "healthy": true}])"));
  EXPECT_EQ(health["queue_size"], 0);
}

// A task's traces are in the server's dataset snapshot before the task counts as finished: the
// read right after the long poll returns sees every one of them.
// A record that fails to load is said at start and at every reload (the server's log names the
// file; /health counts them), never dropped in silence.
TEST_F(ServeTasks, RecordsThatFailToLoadAreReportedAtStartAndOnReload) {
  fs::create_directories(dataset() / "solutions" / "rmsnorm");
  { std::ofstream(dataset() / "solutions" / "rmsnorm" / "broken.json") << "{\"name\": "; }
  auto server = start();
  auto c = server->client();
  EXPECT_EQ(body_json(c->Get("/health"))["records_not_loaded"], 1);
  EXPECT_NE(server->log().find("fib serve: 1 record(s) failed to load and are not served:"),
            std::string::npos)
      << server->log();
  EXPECT_NE(server->log().find("broken.json"), std::string::npos) << server->log();
  { std::ofstream(dataset() / "solutions" / "rmsnorm" / "also_broken.json") << "[1, 2"; }
  Json health;
  for (int i = 0; i < 300; ++i) {
    health = body_json(c->Get("/health"));
    if (health["records_not_loaded"] == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(health["records_not_loaded"], 2) << server->log();
  EXPECT_NE(server->log().find("fib serve: 2 record(s) failed to load"), std::string::npos)
      << server->log();
  EXPECT_NE(server->log().find("also_broken.json"), std::string::npos) << server->log();
}

TEST_F(ServeTasks, AFinishedTasksTracesAreReadAtOnce) {
  auto server = start({"--reevaluate"});
  auto c = server->client();
  for (std::size_t round = 1; round <= 3; ++round) {
    const std::string id = submit(*c, Json{{"solution", rmsnorm_solution_json("rms")}});
    const Json task = body_json(c->Get(("/tasks/" + id + "?timeout=120").c_str()));
    ASSERT_EQ(task["status"], "completed") << task.dump(2) << server->log();
    const Json listed = body_json(c->Get("/api/traces?definition=rmsnorm_h2048"));
    ASSERT_EQ(listed["traces"].size(), round) << listed.dump(2);
    EXPECT_EQ(listed["traces"].back()["solution"], task["solution"]);
  }
  EXPECT_EQ(trace_lines().size(), 3u);
}

TEST_F(ServeTasks, BadRequestsSayWhatIsWrong) {
  auto server = start();
  auto c = server->client();
  auto post = [&](const std::string& path, const std::string& body) {
    auto r = c->Post(path.c_str(), body, "application/json");
    EXPECT_TRUE(r);
    return std::make_pair(r ? r->status : 0, r ? body_json(r) : Json());
  };
  Json unknown_def = rmsnorm_solution_json("rms");
  unknown_def["definition"] = "rmsnorm_h4096";
  auto [s1, b1] = post("/evaluate", Json{{"solution", unknown_def}}.dump());
  EXPECT_EQ(s1, 400);
  EXPECT_EQ(b1["detail"], "Definition not found: rmsnorm_h4096 (did you mean 'rmsnorm_h2048'?)");
  auto [s2, b2] =
      post("/evaluate",
           Json{{"solution", rmsnorm_solution_json("rms")}, {"workload_uuids", {"nope"}}}.dump());
  EXPECT_EQ(s2, 400);
  EXPECT_EQ(b2["detail"], "Workloads not found for definition rmsnorm_h2048: nope");
  Json bad_spec = rmsnorm_solution_json("rms");
  bad_spec["spec"]["language"] = "fortran";
  bad_spec["spec"]["entry_point"] = "kernel.cpp";
  auto [s3, b3] = post("/evaluate", Json{{"solution", bad_spec}}.dump());
  EXPECT_EQ(s3, 422);
  EXPECT_EQ(b3["detail"], "The solution is not valid");
  std::set<std::string> paths;
  for (const Json& e : b3["errors"]) paths.insert(e["path"]);
  EXPECT_TRUE(paths.count("$.solution.spec.language")) << b3.dump(2);
  EXPECT_TRUE(paths.count("$.solution.spec.entry_point")) << b3.dump(2);
  auto [s4, b4] = post("/evaluate", Json{{"solutoin", rmsnorm_solution_json("rms")}}.dump());
  EXPECT_EQ(s4, 422);
  EXPECT_NE(b4.dump().find("did you mean 'solution'"), std::string::npos) << b4.dump(2);
  auto [s5, b5] = post("/evaluate", "{not json");
  EXPECT_EQ(s5, 400);
  EXPECT_EQ(b5["detail"], "the request body is not JSON");
  Json gpu = rmsnorm_solution_json("rms");
  gpu["spec"]["target_hardware"] = {"NVIDIA_H100"};
  gpu["spec"]["language"] = "cuda";
  auto [s6, b6] = post("/evaluate", Json{{"solution", gpu}}.dump());
  EXPECT_EQ(s6, 422);
  EXPECT_NE(b6["detail"].get<std::string>().find("targets a GPU"), std::string::npos);
  Json portable = rmsnorm_solution_json("portable");
  portable["spec"]["target_hardware"] = {"cpu", "NVIDIA_H100"};
  auto [s6b, b6b] = post("/evaluate", Json{{"solution", portable}}.dump());
  EXPECT_EQ(s6b, 200) << "a portable solution runs on this CPU-only server: " << b6b.dump();
  auto task = c->Get("/tasks/0000?timeout=1");
  ASSERT_TRUE(task);
  EXPECT_EQ(task->status, 404);
  EXPECT_EQ(body_json(task)["detail"], "Task not found: 0000");
  auto wait = c->Get("/tasks/0000?timeout=5000");
  ASSERT_TRUE(wait);
  EXPECT_EQ(wait->status, 422);
  auto [s7, b7] = post("/tasks/batch", R"({"task_ids": "x"})");
  EXPECT_EQ(s7, 422);
  auto [s8, b8] = post("/tasks/batch", R"({"task_ids": ["missing"], "timeout": 0})");
  EXPECT_EQ(s8, 404);
  EXPECT_EQ(b8["detail"], "Task not found: missing");
  EXPECT_TRUE(trace_lines().empty());
}

// --reevaluate: the same solution is evaluated by every task (else the queued ones would be
// answered from the first one's trace at once).
// Submissions are built while they wait (RunOptions::build_only on a host thread): one that
// does not compile goes to the front of its queue and answers first, with its COMPILE_ERROR,
// ahead of the correct ones submitted before it; on a CPU queue the builds are all done before
// the queue times anything.
TEST_F(ServeTasks, ASubmissionThatDoesNotCompileIsBuiltWhileQueuedAndAnswersFirst) {
  auto server = start({"--reevaluate"});
  auto c = server->client();
  auto variant = [](const std::string& name, const std::string& extra) {
    Json j = rmsnorm_solution_json(name);
    j["sources"][0]["content"] = j["sources"][0]["content"].get<std::string>() + extra;
    return j;
  };
  const std::string first = submit(*c, Json{{"solution", variant("first", "// first\n")}});
  const std::string second = submit(*c, Json{{"solution", variant("second", "// second\n")}});
  const std::string broken =
      submit(*c, Json{{"solution", variant("broken", "static int broken = ;\n")}});
  std::map<std::string, Json> done;
  for (const std::string& id : {first, second, broken}) {
    done[id] = body_json(c->Get(("/tasks/" + id + "?timeout=180").c_str()));
    ASSERT_EQ(done[id]["status"], "completed") << done[id].dump(2) << server->log();
  }
  EXPECT_EQ(done[broken]["traces"][0]["evaluation"]["status"], "COMPILE_ERROR");
  EXPECT_EQ(done[first]["traces"][0]["evaluation"]["status"], "PASSED");
  // When each finished, from the task list.
  std::map<std::string, double> finished;
  const Json listed = body_json(c->Get("/tasks"));
  for (const Json& t : listed["tasks"])
    finished[t["task_id"].get<std::string>()] = t["updated"].get<double>();
  ASSERT_EQ(finished.size(), 3u) << listed.dump(2);
  EXPECT_LT(finished[broken], finished[first]);
  EXPECT_LT(finished[first], finished[second]);
}

TEST_F(ServeTasks, RestartKeepsResultsAndResumesQueuedTasks) {
  auto server = start({"--reevaluate"});
  auto c = server->client();
  const Json request{{"solution", rmsnorm_solution_json("rms")}};
  const std::string first = submit(*c, request);
  const Json done = body_json(c->Get(("/tasks/" + first + "?timeout=120").c_str()));
  ASSERT_EQ(done["status"], "completed") << server->log();
  std::vector<std::string> queued;
  for (int i = 0; i < 4; ++i) queued.push_back(submit(*c, request));
  auto r = c->Post("/shutdown", "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(server->wait(), 0) << server->log();
  EXPECT_LT(trace_lines().size(), 5u) << "every task ran before the shutdown; none was queued";

  server = start({"--reevaluate"});
  c = server->client();
  EXPECT_EQ(body_json(c->Get(("/tasks/" + first).c_str())), done);
  auto batch = c->Post("/tasks/batch", Json{{"task_ids", queued}, {"timeout", 300}}.dump(),
                       "application/json");
  const Json answers = body_json(batch);
  ASSERT_EQ(answers.size(), queued.size());
  for (const Json& a : answers) {
    EXPECT_EQ(a["status"], "completed") << a.dump(2) << server->log();
    EXPECT_EQ(a["traces"].size(), 1u);
  }
  EXPECT_EQ(trace_lines().size(), 5u);

  const Json listed = body_json(c->Get("/tasks?limit=3"));
  EXPECT_EQ(listed["counts"], Json::parse(R"({"pending": 0, "running": 0, "completed": 5,
                                                "failed": 0})"));
  ASSERT_EQ(listed["tasks"].size(), 3u);
  EXPECT_EQ(listed["tasks"][0]["task_id"], queued.back()) << "newest first";
  EXPECT_FALSE(listed["tasks"][0].contains("traces"));
  EXPECT_EQ(listed["tasks"][0]["outcome"], Json::parse(R"({"PASSED": 1})"));
  EXPECT_EQ(body_json(c->Get("/tasks?status=failed"))["tasks"].size(), 0u);
  auto bad = c->Get("/tasks?status=done");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 422);
}

// A server killed after a trace was appended but before its task was finished in the store: the
// restart finds the trace (by the task id it carries) and finishes the task with it, evaluating
// nothing again. The store's row is set back to "running" to be that state exactly.
TEST_F(ServeTasks, ARestartTakesTracesAlreadyInTheDatasetInsteadOfEvaluatingAgain) {
  auto server = start();
  auto c = server->client();
  const std::string id = submit(*c, Json{{"solution", rmsnorm_solution_json("rms")}});
  const Json done = body_json(c->Get(("/tasks/" + id + "?timeout=120").c_str()));
  ASSERT_EQ(done["status"], "completed") << server->log();
  ASSERT_EQ(c->Post("/shutdown", "", "application/json")->status, 200);
  ASSERT_EQ(server->wait(), 0);

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dataset() / ".fib-serve" / "tasks.sqlite3").c_str(), &db), SQLITE_OK);
  const std::string sql =
      "UPDATE tasks SET status = 'running', traces = '[]' WHERE id = '" + id + "'";
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);

  server = start();
  c = server->client();
  const Json again = body_json(c->Get(("/tasks/" + id + "?timeout=120").c_str()));
  EXPECT_EQ(again["status"], "completed") << server->log();
  EXPECT_EQ(again["traces"], done["traces"]);
  EXPECT_EQ(trace_lines().size(), 1u);
}

}  // namespace
}  // namespace fib::testing
