// fib serve's identities and what a service owes its submitters: tokens that belong to authors
// (`fib serve token add/list/revoke`, stored hashed), reserved authors for the admin only,
// per-token limits, a fresh seed per task, identical submissions answered from earlier traces,
// raw JSON bodies whatever their declared type, one trace per (task, workload) after a hang, and
// `fib run`'s evaluation flags.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <thread>

#include "serve_process.h"
#include "support/temp_dir.h"

namespace fib::testing {
namespace {

namespace fs = std::filesystem;

// The timeout is the service's default (60 s) unless a test gives one.
const std::vector<std::string> kFastRun = {"--warmup-runs", "1", "--iterations", "2",
                                           "--num-trials",  "1"};

// A solution that never returns from its call.
Json hanging_solution_json(const std::string& name) {
  Json s = rmsnorm_solution_json(name);
  s["sources"][0]["content"] = R"(
#include <chrono>
#include <thread>
#include "fib/solution.h"
static void run_(fib::TensorView, fib::TensorView, fib::TensorView) {
  std::this_thread::sleep_for(std::chrono::hours(1));
}
FIB_EXPORT_SOLUTION(run, run_);
)";
  return s;
}

class ServeIdentity : public ::testing::Test {
 protected:
  void SetUp() override { make_rmsnorm_dataset(dataset()); }
  fs::path dataset() const { return tmp_.path() / "dataset"; }
  fs::path home() const { return tmp_.path() / "home"; }
  std::unique_ptr<ServeProcess> start(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = kFastRun;
    args.insert(args.end(), {"--build-cache", (tmp_.path() / "cache").string()});
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<ServeProcess>(dataset(), home(), args);
  }
  // `fib serve token ARGS... --local DATASET`.
  FibOutput token(std::vector<std::string> args) const {
    args.insert(args.begin(), "token");
    args.insert(args.end(), {"--local", dataset().string()});
    return serve_command_output(args, home());
  }
  // A new token of `author` (made while a server may run: it counts at once).
  std::string add_token(const std::string& author, std::vector<std::string> limits = {}) const {
    std::vector<std::string> args = {"add", "--author", author};
    args.insert(args.end(), limits.begin(), limits.end());
    const FibOutput r = token(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  static std::unique_ptr<httplib::Client> client_of(const ServeProcess& server,
                                                    const std::string& token) {
    auto c = server.client(false);
    c->set_bearer_token_auth(token);
    return c;
  }
  static Json wait_task(httplib::Client& c, const std::string& id) {
    return body_json(c.Get(("/tasks/" + id + "?timeout=300").c_str()));
  }
  std::vector<Json> trace_lines(const std::string& author) const {
    std::vector<Json> out;
    std::ifstream in(dataset() / "traces" / author / "rmsnorm" / "rmsnorm_h2048.jsonl");
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.push_back(Json::parse(line));
    }
    return out;
  }
  TempDir tmp_;
};

TEST_F(ServeIdentity, TokensAreAddedListedRevokedAndStoredHashed) {
  const std::string alice = add_token("alice", {"--max-queued", "3"});
  EXPECT_TRUE(std::regex_match(alice, std::regex("[0-9a-f]{64}"))) << alice;
  const FibOutput list = token({"list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("alice"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find(alice), std::string::npos) << "a listing never shows a token";
  const std::string store =
      TempDir::read_file(dataset() / ".fib-serve" / "tokens.sqlite3") +
      (fs::exists(dataset() / ".fib-serve" / "tokens.sqlite3-wal")
           ? TempDir::read_file(dataset() / ".fib-serve" / "tokens.sqlite3-wal")
           : std::string());
  EXPECT_EQ(store.find(alice), std::string::npos) << "the store keeps the token in clear";
  EXPECT_EQ(fs::status(dataset() / ".fib-serve").permissions() &
                (fs::perms::group_all | fs::perms::others_all),
            fs::perms::none);

  auto server = start();
  auto c = client_of(*server, alice);
  EXPECT_EQ(c->Get("/definitions")->status, 200);
  auto login = server->client(false)->Get(("/login?token=" + alice).c_str());
  ASSERT_TRUE(login);
  EXPECT_EQ(login->status, 303);
  EXPECT_NE(login->get_header_value("Set-Cookie").find("fib_token=" + alice), std::string::npos);

  const std::string id =
      std::regex_replace(list.out, std::regex(R"([\s\S]*\n([0-9a-f]{12})\s+alice[\s\S]*)"), "$1");
  ASSERT_EQ(id.size(), 12u) << list.out;
  const FibOutput revoked = token({"revoke", id.substr(0, 6)});
  EXPECT_EQ(revoked.code, 0) << revoked.err;
  EXPECT_EQ(c->Get("/definitions")->status, 401) << "a revoked token counts at once";
  EXPECT_EQ(token({"revoke", id}).code, 2) << "revoked already";
  EXPECT_EQ(token({"add", "--author", "baseline"}).code, 2);
  EXPECT_NE(token({"add", "--author", "baseline"}).err.find("reserved"), std::string::npos);
  EXPECT_EQ(token({"add", "--author", "../x"}).code, 2);
}

// A token's submissions are its author's, whatever the solution says; the admin token names
// the author; reserved authors (baseline, the --baseline-author) are the admin's only.
TEST_F(ServeIdentity, ASubmissionsAuthorIsItsTokensAndReservedAuthorsAreTheAdmins) {
  auto server = start({"--baseline-author", "carol"});
  const std::string alice = add_token("alice");
  const std::string carol = add_token("carol");
  auto c = client_of(*server, alice);
  Json claimed = rmsnorm_solution_json("rms");
  claimed["author"] = "baseline";
  auto r = c->Post("/evaluate", Json{{"solution", claimed}}.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json answer = body_json(r);
  EXPECT_EQ(answer["author"], "alice");
  const std::string name = answer["normalized_solution_name"];
  EXPECT_TRUE(fs::exists(dataset() / "solutions" / "alice" / "rmsnorm" / "rmsnorm_h2048" /
                         (name + ".json")));
  EXPECT_FALSE(fs::exists(dataset() / "solutions" / "baseline"));
  const Json task = wait_task(*c, answer["task_id"]);
  ASSERT_EQ(task["status"], "completed") << task.dump(2) << server->log();
  EXPECT_EQ(trace_lines("alice").size(), 1u);

  auto reserved = client_of(*server, carol)
                      ->Post("/evaluate", Json{{"solution", rmsnorm_solution_json("rms")}}.dump(),
                             "application/json");
  ASSERT_TRUE(reserved);
  EXPECT_EQ(reserved->status, 403);
  EXPECT_EQ(body_json(reserved)["detail"],
            "The author 'carol' is reserved: only the server's admin token submits as it");

  auto admin =
      server->client()->Post("/evaluate", Json{{"solution", claimed}}.dump(), "application/json");
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin->status, 200) << admin->body;
  EXPECT_EQ(body_json(admin)["author"], "baseline");
}

// A token sees its own tasks only, and other authors' traces without their logs (a build's or a
// run's output); the admin sees everything.
TEST_F(ServeIdentity, ATokenSeesItsOwnTasksAndOnlyItsOwnTracesLogs) {
  auto server = start();
  const std::string alice = add_token("alice");
  const std::string bob = add_token("bob");
  auto a = client_of(*server, alice);
  auto b = client_of(*server, bob);
  const std::string id =
      body_json(a->Post("/evaluate", Json{{"solution", rmsnorm_solution_json("rms")}}.dump(),
                        "application/json"))["task_id"];
  const Json task = wait_task(*a, id);
  ASSERT_EQ(task["status"], "completed") << task.dump(2);
  auto hidden = b->Get(("/tasks/" + id).c_str());
  ASSERT_TRUE(hidden);
  EXPECT_EQ(hidden->status, 404);
  EXPECT_EQ(b->Post("/tasks/batch", Json{{"task_ids", {id}}}.dump(), "application/json")->status,
            404);
  EXPECT_EQ(body_json(b->Get("/tasks"))["tasks"].size(), 0u);
  EXPECT_EQ(body_json(b->Get("/tasks"))["counts"]["completed"], 0);
  EXPECT_EQ(body_json(a->Get("/tasks"))["tasks"].size(), 1u);
  EXPECT_EQ(body_json(server->client()->Get("/tasks"))["tasks"].size(), 1u);

  const std::string path =
      "/api/traces?definition=rmsnorm_h2048&id=" + task["trace_ids"][0].get<std::string>();
  const std::string log = task["traces"][0]["evaluation"]["log"];
  EXPECT_EQ(body_json(a->Get(path.c_str()))["trace"]["evaluation"]["log"], log);
  EXPECT_EQ(body_json(server->client()->Get(path.c_str()))["trace"]["evaluation"]["log"], log);
  EXPECT_EQ(body_json(b->Get(path.c_str()))["trace"]["evaluation"]["log"],
            "(the log is shown to the solution's author only)");
}

TEST_F(ServeIdentity, ATokenHasItsOwnQueueAndBodyLimits) {
  auto server = start();
  const std::string alice = add_token("alice", {"--max-queued", "1", "--max-body-mb", "1"});
  auto c = client_of(*server, alice);
  const std::string body = Json{{"solution", rmsnorm_solution_json("rms")}}.dump();
  auto first = c->Post("/evaluate", body, "application/json");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200) << first->body;
  auto second = c->Post("/evaluate", body, "application/json");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 429);
  EXPECT_EQ(body_json(second)["detail"],
            "This token has 1 tasks pending or running, its limit: submit again once one has "
            "finished");
  EXPECT_EQ(server->client()->Post("/evaluate", body, "application/json")->status, 200)
      << "the admin has no queue limit";
  EXPECT_EQ(wait_task(*c, body_json(first)["task_id"])["status"], "completed");
  EXPECT_EQ(c->Post("/evaluate", body, "application/json")->status, 200);

  const std::string large = Json{{"padding", std::string(std::size_t{3} << 19, 'x')}}.dump();
  auto too_large = c->Post("/evaluate", large, "application/json");
  ASSERT_TRUE(too_large);
  EXPECT_EQ(too_large->status, 413);
  EXPECT_EQ(body_json(too_large)["detail"],
            "Request body too large: this token's limit is 1048576 bytes");
  auto admin = server->client()->Post("/evaluate", large, "application/json");
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin->status, 422) << "read as JSON under the server's limit: " << admin->body;
}

// Every task draws its own seed, recorded in its traces as `fib run` records seeds; a request
// cannot give one.
TEST_F(ServeIdentity, EachTaskGetsAFreshSeedTheSubmitterCannotChoose) {
  auto server = start({"--reevaluate"});
  auto c = server->client();
  const Json request{{"solution", rmsnorm_solution_json("rms")}};
  std::set<std::uint64_t> seeds;
  for (int i = 0; i < 2; ++i) {
    const Json answer = body_json(c->Post("/evaluate", request.dump(), "application/json"));
    const Json task = wait_task(*c, answer["task_id"]);
    ASSERT_EQ(task["status"], "completed") << task.dump(2);
    seeds.insert(
        task["traces"][0]["evaluation"]["environment"]["extra"]["seed"].get<std::uint64_t>());
  }
  EXPECT_EQ(seeds.size(), 2u);
  Json with_seed = request;
  with_seed["seed"] = 1;
  auto r = c->Post("/evaluate", with_seed.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 422);
}

// An identical submission is answered from the trace of the first; other settings (here the
// relative tolerance) make a different evaluation, which runs. The answering trace carries the
// current defence version and the evaluation key.
TEST_F(ServeIdentity, AnIdenticalSubmissionIsAnsweredOnlyFromTracesOfTheSameEvaluation) {
  auto server = start();
  auto c = server->client();
  const std::string body = Json{{"solution", rmsnorm_solution_json("rms")}}.dump();
  const Json first =
      wait_task(*c, body_json(c->Post("/evaluate", body, "application/json"))["task_id"]);
  ASSERT_EQ(first["status"], "completed") << first.dump(2);
  const Json& extra = first["traces"][0]["evaluation"]["environment"]["extra"];
  EXPECT_TRUE(extra["defences"].is_number_integer());
  EXPECT_EQ(extra["serve_evaluation_key"].get<std::string>().size(), 64u);
  const Json again =
      wait_task(*c, body_json(c->Post("/evaluate", body, "application/json"))["task_id"]);
  EXPECT_EQ(again["traces"], first["traces"]);
  EXPECT_EQ(trace_lines("serve-test").size(), 1u);
  ASSERT_EQ(c->Post("/shutdown", "", "application/json")->status, 200);
  ASSERT_EQ(server->wait(), 0);

  server = start({"--rtol", "0.5"});
  c = server->client();
  const Json other =
      wait_task(*c, body_json(c->Post("/evaluate", body, "application/json"))["task_id"]);
  ASSERT_EQ(other["status"], "completed") << other.dump(2);
  EXPECT_NE(other["traces"], first["traces"]);
  EXPECT_EQ(trace_lines("serve-test").size(), 2u);
}

// curl's -d and --data-binary send form-urlencoded; a client may send no type at all. Either
// way the body is the JSON document, at any size under the limit (here > 64 KiB); multipart is
// refused saying what to send. The unknown workload makes each a 400 that shows the JSON was read.
TEST_F(ServeIdentity, AJsonBodyIsReadWhateverItsDeclaredType) {
  auto server = start();
  auto c = server->client();
  Json request{{"solution", rmsnorm_solution_json("rms")}, {"workload_uuids", {"nope"}}};
  request["solution"]["sources"][0]["content"] =
      request["solution"]["sources"][0]["content"].get<std::string>() + "\n// " +
      std::string(70 << 10, 'x') + "\n";
  const std::string body = request.dump();
  ASSERT_GT(body.size(), 64u << 10);
  for (const char* type : {"application/x-www-form-urlencoded", "", "text/plain"}) {
    auto r = c->Post("/evaluate", body, type);
    ASSERT_TRUE(r) << type;
    EXPECT_EQ(r->status, 400) << type << ": " << r->body;
    EXPECT_EQ(body_json(r)["detail"], "Workloads not found for definition rmsnorm_h2048: nope")
        << type;
  }
  httplib::MultipartFormDataItems items = {{"solution", body, "solution.json", "application/json"}};
  auto multipart = c->Post("/evaluate", items);
  ASSERT_TRUE(multipart);
  EXPECT_EQ(multipart->status, 415);
  EXPECT_NE(body_json(multipart)["detail"].get<std::string>().find("--data-binary"),
            std::string::npos);
}

// A solution that hangs on the first of two workloads: the task completes with one trace per
// workload, the first TIMEOUT, the second TIMEOUT "not run", and no command-line advice.
TEST_F(ServeIdentity, AHangGivesEveryWorkloadItsOwnTrace) {
  fs::remove_all(dataset());
  make_rmsnorm_dataset(dataset(), 2);
  auto server = start({"--timeout", "3"});
  auto c = server->client();
  const Json answer = body_json(c->Post(
      "/evaluate", Json{{"solution", hanging_solution_json("hang")}}.dump(), "application/json"));
  const Json task = wait_task(*c, answer["task_id"]);
  ASSERT_EQ(task["status"], "completed") << task.dump(2) << server->log();
  EXPECT_TRUE(task["error"].is_null());
  ASSERT_EQ(task["traces"].size(), 2u) << task.dump(2);
  const Json& hung = task["traces"][0];
  const Json& after = task["traces"][1];
  EXPECT_EQ(hung["evaluation"]["status"], "TIMEOUT");
  EXPECT_EQ(after["evaluation"]["status"], "TIMEOUT");
  EXPECT_EQ(after["evaluation"]["log"],
            "not run: timed out on workload " + hung["workload"]["uuid"].get<std::string>());
  EXPECT_NE(after["workload"]["uuid"], hung["workload"]["uuid"]);
  EXPECT_EQ(after["evaluation"]["environment"]["extra"]["serve_task_id"], task["task_id"]);
  EXPECT_TRUE(after["evaluation"]["environment"]["extra"].contains("signature"));
  EXPECT_EQ(task.dump().find("--resume"), std::string::npos);
  EXPECT_EQ(trace_lines("serve-test").size(), 2u);
  ASSERT_EQ(task["trace_ids"].size(), 2u);
  const Json shown = body_json(
      c->Get(("/api/traces?definition=rmsnorm_h2048&id=" + task["trace_ids"][1].get<std::string>())
                 .c_str()));
  EXPECT_EQ(shown["trace"], after);
}

// `fib run`'s evaluation flags that make sense for a service: checked at start, applied to
// every task, and a service's timeout by default.
TEST_F(ServeIdentity, ServeTakesRunsEvaluationFlags) {
  const std::string ds = dataset().string();
  const FibOutput help = serve_command_output({"--help"}, home());
  for (const char* flag : {"--config", "--python", "--reference", "--memory-limit-mb"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag << "\n" << help.out;
  }
  EXPECT_NE(help.out.find("(default 60)"), std::string::npos) << help.out;
  auto [code, err] = serve_refused({"--local", ds, "--config", "/no/such.yaml"}, home());
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("--config names no file"), std::string::npos) << err;
  auto [code2, err2] = serve_refused({"--local", ds, "--reference", "nosuch"}, home());
  EXPECT_EQ(code2, 2) << err2;
  const fs::path config = tmp_.path() / "eval.yaml";
  std::ofstream(config) << "rtoll: 0.05\n";
  auto [code3, err3] = serve_refused({"--local", ds, "--config", config.string()}, home());
  EXPECT_EQ(code3, 2);
  EXPECT_NE(err3.find("unknown key 'rtoll'"), std::string::npos) << err3;

  // The config's two trials (not given on the command line here) make two checked calls.
  std::ofstream(config) << "num_trials: 2\nwarmup_runs: 1\niterations: 2\n";
  ServeProcess server(dataset(), home(),
                      {"--build-cache", (tmp_.path() / "cache").string(), "--config",
                       config.string(), "--reference", "native", "--memory-limit-mb", "4096"});
  auto c = server.client();
  const Json task = wait_task(
      *c, body_json(c->Post("/evaluate", Json{{"solution", rmsnorm_solution_json("rms")}}.dump(),
                            "application/json"))["task_id"]);
  ASSERT_EQ(task["status"], "completed") << task.dump(2) << server.log();
  const Json& evaluation = task["traces"][0]["evaluation"];
  EXPECT_EQ(evaluation["status"], "PASSED") << evaluation["log"];
  EXPECT_NE(evaluation["log"].get<std::string>().find("passed 2 checked calls"), std::string::npos)
      << evaluation["log"];
  EXPECT_EQ(evaluation["environment"]["extra"]["reference"].get<std::string>().rfind("native", 0),
            0u);
}

}  // namespace
}  // namespace fib::testing
