// The MCP server's protocol in-process: the lifecycle, JSON-RPC errors, the tool schemas and
// their argument checks, and the definition as a prompt, over the bundled example dataset.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "fib/agent/mcp.h"
#include "fib/agent/prompt.h"
#include "support/test_paths.h"

namespace fib::agent {
namespace {

McpServer server() {
  McpOptions o;
  o.dataset = testing::source_dir() / "examples" / "dataset";
  return McpServer(std::move(o));
}

Json request(int id, const std::string& method, Json params = Json::object()) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

Json initialized(McpServer& s) {
  return *s.handle(request(1, "initialize",
                           Json{{"protocolVersion", "2025-06-18"},
                                {"capabilities", Json::object()},
                                {"clientInfo", Json{{"name", "test"}, {"version", "1"}}}}));
}

TEST(Mcp, InitializeAnswersTheVersionAndTheToolsCapability) {
  McpServer s = server();
  const Json r = initialized(s);
  EXPECT_EQ(r["id"], 1);
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(r["result"]["capabilities"].dump(), "{\"tools\":{\"listChanged\":false}}");
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "fib");
  // An older version the server speaks is answered in kind, an unknown one with the latest.
  EXPECT_EQ(
      (*s.handle(request(2, "initialize",
                         Json{{"protocolVersion", "2024-11-05"}})))["result"]["protocolVersion"],
      "2024-11-05");
  EXPECT_EQ(
      (*s.handle(request(3, "initialize",
                         Json{{"protocolVersion", "1999-01-01"}})))["result"]["protocolVersion"],
      "2025-06-18");
  // Notifications get no answer; ping an empty result.
  EXPECT_FALSE(s.handle(Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}));
  EXPECT_EQ(s.handle(request(4, "ping"))->dump(), "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}");
}

TEST(Mcp, JsonRpcErrors) {
  McpServer s = server();
  EXPECT_EQ((*s.handle_line("{not json"))["error"]["code"], kParseError);
  EXPECT_TRUE((*s.handle_line("{not json"))["id"].is_null());
  EXPECT_EQ((*s.handle_line("[]"))["error"]["code"], kInvalidRequest);
  EXPECT_EQ((*s.handle(Json{{"jsonrpc", "1.0"}, {"id", 1}, {"method", "ping"}}))["error"]["code"],
            kInvalidRequest);
  EXPECT_EQ((*s.handle(Json{
                {"jsonrpc", "2.0"}, {"id", Json::array()}, {"method", "ping"}}))["error"]["code"],
            kInvalidRequest);
  // Tools before initialize.
  const Json early = *s.handle(request(2, "tools/list"));
  EXPECT_EQ(early["error"]["code"], kInvalidRequest);
  EXPECT_EQ(early["error"]["message"], "the session is not initialized: send initialize first");
  initialized(s);
  const Json unknown = *s.handle(request(3, "resources/list"));
  EXPECT_EQ(unknown.dump(),
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32601,\"message\":\"method not "
            "found: resources/list\"}}");
  EXPECT_EQ((*s.handle(request(4, "initialize", Json::object())))["error"]["code"], kInvalidParams);
  const Json tool = *s.handle(request(5, "tools/call", Json{{"name", "evaluat"}}));
  EXPECT_EQ(tool["error"]["code"], kInvalidParams);
  EXPECT_EQ(tool["error"]["message"], "unknown tool 'evaluat' (did you mean 'evaluate'?)");
  const Json missing = *s.handle(
      request(6, "tools/call", Json{{"name", "definition_prompt"}, {"arguments", Json::object()}}));
  EXPECT_EQ(missing["error"]["message"], "definition_prompt: missing argument 'definition'");
  const Json typed = *s.handle(
      request(7, "tools/call",
              Json{{"name", "definition_prompt"}, {"arguments", Json{{"definition", 3}}}}));
  EXPECT_EQ(typed["error"]["message"],
            "definition_prompt: argument 'definition' must be of type string, found number");
  const Json extra = *s.handle(
      request(8, "tools/call",
              Json{{"name", "list_definitions"}, {"arguments", Json{{"op_typ", "gemm"}}}}));
  EXPECT_EQ(extra["error"]["message"],
            "list_definitions: unknown argument 'op_typ' (did you mean 'op_type'?)");
  // A client's response to the server is not answered.
  EXPECT_FALSE(s.handle(Json{{"jsonrpc", "2.0"}, {"id", 9}, {"result", Json::object()}}));
}

TEST(Mcp, ToolsListGivesEveryToolWithSchemas) {
  McpServer s = server();
  initialized(s);
  const Json tools = (*s.handle(request(2, "tools/list")))["result"]["tools"];
  std::vector<std::string> names;
  for (const Json& t : tools) {
    names.push_back(t["name"].get<std::string>());
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
    EXPECT_EQ(t["outputSchema"]["type"], "object") << t["name"];
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"list_definitions", "definition_prompt", "evaluate",
                                             "get_trace"}));
}

TEST(Mcp, ToolErrorsAreResultsTheAgentCanRead) {
  McpServer s = server();
  initialized(s);
  const Json r = *s.handle(request(
      2, "tools/call",
      Json{{"name", "definition_prompt"}, {"arguments", Json{{"definition", "rmsnorm_h248"}}}}));
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_EQ(r["result"]["content"][0]["text"],
            "rmsnorm_h248: error: no definition 'rmsnorm_h248' in the dataset (did you mean "
            "'rmsnorm_h2048'?)");
  const Json bad = *s.handle(
      request(3, "tools/call",
              Json{{"name", "evaluate"}, {"arguments", Json{{"solution", Json{{"name", "x"}}}}}}));
  EXPECT_EQ(bad["result"]["isError"], true);
  EXPECT_NE(bad["result"]["content"][0]["text"].get<std::string>().find(
                "the solution record is not valid"),
            std::string::npos);
}

TEST(Mcp, ListDefinitionsFiltersByOpType) {
  McpServer s = server();
  initialized(s);
  const Json r = *s.handle(
      request(2, "tools/call",
              Json{{"name", "list_definitions"}, {"arguments", Json{{"op_type", "rmsnorm"}}}}));
  const Json& defs = r["result"]["structuredContent"]["definitions"];
  ASSERT_EQ(defs.size(), 2u);
  EXPECT_EQ(defs[0]["name"], "fused_add_rmsnorm_h2048");
  EXPECT_EQ(defs[1]["name"], "rmsnorm_h2048");
  EXPECT_EQ(defs[1]["workloads"], 2);
}

TEST(Mcp, DefinitionPromptHasShapesConstraintsJudgementAndReference) {
  const TraceSet set = TraceSet::load(testing::source_dir() / "examples" / "dataset");
  const Json p = definition_prompt_json(set, *set.definition("rmsnorm_h2048"));
  EXPECT_EQ(p["inputs"][0].dump(),
            "{\"name\":\"hidden_states\",\"shape\":[\"batch_size\",\"hidden_size\"],\"dtype\":"
            "\"bfloat16\",\"description\":\"Input rows.\"}");
  EXPECT_EQ(p["axes"][1].dump(),
            "{\"name\":\"hidden_size\",\"kind\":\"const\",\"value\":2048,\"description\":"
            "\"Normalized dimension.\"}");
  EXPECT_EQ(p["judged"].dump(),
            "{\"policy\":\"elementwise\",\"outputs\":{\"output\":{\"atol\":0.01,\"rtol\":0.01,"
            "\"max_nmse\":0.01}}}");
  EXPECT_EQ(p["workloads"][1].dump(),
            "{\"uuid\":\"3eb5f652-b831-4914-b557-71cb5f66fe7e\",\"axes\":{\"batch_size\":8}}");
  // The tolerances are those evaluations run under: a server's flags change them.
  PromptEval loose;
  loose.cli.atol = 0.5;
  EXPECT_EQ(definition_prompt_json(set, *set.definition("rmsnorm_h2048"),
                                   loose)["judged"]["outputs"]["output"]["atol"],
            0.5);
  const std::string text = definition_prompt_text(p);
  EXPECT_EQ(text.substr(0, 52), "# Kernel definition `rmsnorm_h2048` (op_type `rmsnor");
  for (const char* part :
       {"- `hidden_size`: constant 2048 — Normalized dimension.\n",
        "- `hidden_states`: bfloat16 [batch_size, hidden_size] — Input rows.\n",
        "- `output`: atol 0.01, rtol 0.01, max NMSE 0.01\n",
        "- `3eb5f652-b831-4914-b557-71cb5f66fe7e`: batch_size=8\n", "```python\nimport torch\n"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  }
}

}  // namespace
}  // namespace fib::agent
