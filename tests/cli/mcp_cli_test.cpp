// A scripted MCP client session against `fib mcp` started as a child process on a tiny dataset
// (the example's rmsnorm_h2048 and its two workloads): initialize, tools/list, the definition as
// a prompt, evaluate with a correct, a wrong and a non-compiling solution, and get_trace, each
// answer checked.
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/trace/solution.h"
#include "support/rmsnorm_solution_source.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWorkload = "055ba258-f953-4e5c-bc34-1290cd76979e";  // batch_size 1

// `fib mcp` with its stdin and stdout on pipes; stderr goes to a file.
class McpChild {
 public:
  McpChild(const std::vector<std::string>& args, const fs::path& stderr_file) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      const int err = ::open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (err >= 0) ::dup2(err, 2);
      std::vector<char*> argv;
      std::string exe = FIB_EXE;
      argv.push_back(exe.data());
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(exe.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~McpChild() {
    close_input();
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (from_ >= 0) ::close(from_);
  }
  McpChild(const McpChild&) = delete;  // owns a child process reaped exactly once
  McpChild& operator=(const McpChild&) = delete;

  void send(const Json& message) {
    const std::string line = message.dump() + "\n";
    ASSERT_EQ(::write(to_, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }
  // The next line the server writes (empty at end of stream or after 120 s).
  Json receive() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        const std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return Json::parse(line);
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{from_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
      char chunk[65536];
      const ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n <= 0) return {};
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  Json call(int id, const std::string& method, Json params) {
    send(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
    return receive();
  }
  void close_input() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  int wait_exit() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  bool reaped_ = false;
  std::string buffer_;
};

Json solution(const std::string& name, const std::string& body) {
  Solution s;
  s.name = name;
  s.definition = "rmsnorm_h2048";
  s.author = "agent";
  s.spec.language = "cpp";
  s.spec.binding = "fib";
  s.spec.target_hardware = {"cpu"};
  s.spec.entry_point = "kernel.cpp::run";
  s.sources.push_back(
      SourceFile{"kernel.cpp", std::string(testing::kRmsnormSolutionSource) + body, {}});
  return to_json(s);
}

Json evaluate(McpChild& c, int id, const Json& sol) {
  return c.call(id, "tools/call",
                Json{{"name", "evaluate"},
                     {"arguments", Json{{"solution", sol}, {"workloads", Json{kWorkload}}}}});
}

TEST(McpSession, ScriptedClientSession) {
  testing::TempDir tmp;
  const fs::path examples = testing::source_dir() / "examples" / "dataset";
  const fs::path dataset = tmp.path() / "dataset";
  for (const char* f :
       {"definitions/rmsnorm/rmsnorm_h2048.json", "workloads/rmsnorm/rmsnorm_h2048.jsonl"}) {
    fs::create_directories((dataset / f).parent_path());
    fs::copy_file(examples / f, dataset / f);
  }
  McpChild c(
      {"mcp", "--dataset", dataset.string(), "--build-cache", (tmp.path() / "cache").string(),
       "--warmup-runs", "1", "--iterations", "3", "--num-trials", "1", "--timeout", "60"},
      tmp.path() / "stderr.txt");

  const Json init = c.call(1, "initialize",
                           Json{{"protocolVersion", "2025-06-18"},
                                {"capabilities", Json::object()},
                                {"clientInfo", Json{{"name", "script"}, {"version", "1"}}}});
  ASSERT_FALSE(init.is_null()) << tmp.read("stderr.txt");
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-06-18");
  c.send(Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});

  const Json list = c.call(2, "tools/list", Json::object());
  std::vector<std::string> names;
  for (const Json& t : list["result"]["tools"]) names.push_back(t["name"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"list_definitions", "definition_prompt", "evaluate",
                                             "get_trace"}));

  const Json prompt = c.call(
      3, "tools/call",
      Json{{"name", "definition_prompt"}, {"arguments", Json{{"definition", "rmsnorm_h2048"}}}});
  EXPECT_EQ(prompt["result"]["isError"], false);
  EXPECT_EQ(prompt["result"]["structuredContent"]["definition"], "rmsnorm_h2048");
  EXPECT_EQ(prompt["result"]["structuredContent"]["outputs"][0]["shape"],
            (Json{"batch_size", "hidden_size"}));
  EXPECT_EQ(prompt["result"]["content"][0]["text"].get<std::string>().substr(0, 37),
            "# Kernel definition `rmsnorm_h2048` (");

  const Json good = evaluate(c, 4, solution("agent_good", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)"));
  const Json& g = good["result"]["structuredContent"];
  EXPECT_EQ(g["statuses"].dump(), "{\"PASSED\":1}") << good.dump();
  EXPECT_EQ(g["verdicts"][0]["workload"], kWorkload);
  EXPECT_GT(g["verdicts"][0]["latency_ms"].get<double>(), 0);

  // One element of row 0 written wrong: the feedback names it.
  const Json wrong = evaluate(c, 5, solution("agent_wrong", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x, w, y);
  y.data_ptr<std::uint16_t>()[5] = fib::float_to_bf16(1000.0f);
}
FIB_EXPORT_SOLUTION(run, run_);
)"));
  const Json& w = wrong["result"]["structuredContent"];
  EXPECT_EQ(w["statuses"].dump(), "{\"INCORRECT_NUMERICAL\":1}") << wrong.dump();
  const Json& fb = w["verdicts"][0]["correctness"];
  EXPECT_EQ(fb["mismatches"], 1);
  EXPECT_EQ(fb["numel"], 2048);
  EXPECT_EQ(fb["worst_mismatch"]["index"], (Json{0, 5}));
  EXPECT_EQ(fb["worst_mismatch"]["got"], 1000.0);
  EXPECT_EQ(fb["first_mismatch"]["index"], (Json{0, 5}));
  EXPECT_EQ(fb["mismatch_samples"].size(), 1u);
  EXPECT_EQ(fb["error_distribution"]["beyond_tolerance"][">100x"], 1);
  EXPECT_EQ(fb["nonfinite"].dump(),
            "{\"output\":{\"nan\":0,\"inf\":0},\"reference\":{\"nan\":0,\"inf\":0}}");

  // A compile error: the diagnostics name the solution's file and the line.
  const std::string broken_body = "\nstatic void run_(fib::TensorView x) { undefined_call(x); }\n";
  const Json broken = evaluate(c, 6, solution("agent_broken", broken_body));
  const Json& b = broken["result"]["structuredContent"];
  EXPECT_EQ(b["statuses"].dump(), "{\"COMPILE_ERROR\":1}") << broken.dump();
  const std::string source = std::string(testing::kRmsnormSolutionSource) + broken_body;
  const int line = static_cast<int>(std::count(source.begin(), source.end(), '\n'));
  const Json& first = b["verdicts"][0]["compiler_diagnostics"]["messages"][0];
  EXPECT_EQ(first["file"], "kernel.cpp");
  EXPECT_EQ(first["origin"], "solution");
  EXPECT_EQ(first["line"], line);
  EXPECT_EQ(first["severity"], "error");
  EXPECT_NE(first["message"].get<std::string>().find("undefined_call"), std::string::npos);

  const Json traces =
      c.call(7, "tools/call",
             Json{{"name", "get_trace"}, {"arguments", Json{{"solution", "agent_wrong"}}}});
  const Json& t = traces["result"]["structuredContent"]["traces"];
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0]["evaluation"]["status"], "INCORRECT_NUMERICAL");
  EXPECT_EQ(t[0]["workload"]["uuid"], kWorkload);

  // Evaluations stay out of the dataset; the server ends with its input.
  EXPECT_FALSE(fs::exists(dataset / "traces"));
  EXPECT_FALSE(fs::exists(dataset / "solutions"));
  c.close_input();
  EXPECT_EQ(c.wait_exit(), 0);
}

}  // namespace
}  // namespace fib
