// `fib mcp`: a Model Context Protocol server over stdio (JSON-RPC 2.0, one message per line)
// whose tools let an agent framework call fib directly: list_definitions, definition_prompt,
// evaluate (a solution on a definition's workloads, answering verdicts and feedback) and
// get_trace. docs/mcp.md has the tools' schemas and an example session.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/agent/prompt.h"
#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"
#include "fib/trace/json_reader.h"

namespace fib::agent {

// The protocol revision this server speaks; it also accepts the older ones below from a client
// that asks for them.
inline constexpr std::string_view kMcpProtocolVersion = "2025-06-18";
inline constexpr std::string_view kMcpOlderVersions[] = {"2025-03-26", "2024-11-05"};

// JSON-RPC 2.0's error codes.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

struct McpOptions {
  std::filesystem::path dataset;
  // What every evaluation starts from (worker, ABI header, sandbox, device, build cache, eval
  // settings); evaluate fills in the dataset, the definition, the solution and the workloads.
  bench::RunOptions run;
};

class McpServer {
 public:
  // Loads the dataset; throws fib::Error when it cannot be loaded.
  explicit McpServer(McpOptions options);

  // One message: the response, or nullopt for a notification (or a client's response).
  std::optional<Json> handle(const Json& message);
  // One line of the stream: a parse error answers as JSON-RPC says (id null).
  std::optional<Json> handle_line(std::string_view line);
  // Reads lines from `in` until it ends, writing each response as one line to `out`, flushed.
  void serve(std::istream& in, std::ostream& out);

  // The tools as tools/list gives them: {name, title, description, inputSchema, outputSchema}.
  static Json tool_list();

 private:
  Json initialize(const Json& params);
  Json call_tool(const Json& params);
  Json list_definitions(const Json& args) const;
  Json definition_prompt(const Json& args) const;
  Json evaluate(const Json& args);
  Json get_trace(const Json& args) const;

  McpOptions options_;
  std::shared_ptr<const TraceSet> set_;
  PromptEval prompt_eval_;  // the tolerances evaluations run under, for definition_prompt
  std::vector<Trace> session_traces_;  // evaluations of this session, oldest first
  bool initialized_ = false;
};

}  // namespace fib::agent
