// The MCP server of `fib mcp` (include/fib/agent/mcp.h): JSON-RPC 2.0 framing, the lifecycle
// (initialize, notifications/initialized, ping) and tools/list, tools/call. The tools themselves
// are in tools.cpp.
#include "fib/agent/mcp.h"

#include <fmt/format.h>

#include <istream>
#include <ostream>

#include "fib/base/diagnostics.h"
#include "fib/version.h"
#include "tools.h"

namespace fib::agent {

namespace {

Json rpc_error(const Json& id, int code, std::string message) {
  return Json{{"jsonrpc", "2.0"},
              {"id", id},
              {"error", Json{{"code", code}, {"message", std::move(message)}}}};
}

Json rpc_result(const Json& id, Json result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

bool valid_id(const Json& id) { return id.is_string() || id.is_number_integer(); }

bool supported_version(std::string_view v) {
  if (v == kMcpProtocolVersion) return true;
  for (std::string_view old : kMcpOlderVersions) {
    if (v == old) return true;
  }
  return false;
}

}  // namespace

McpServer::McpServer(McpOptions options)
    : options_(std::move(options)),
      set_(std::make_shared<const TraceSet>(TraceSet::load(options_.dataset))),
      prompt_eval_(PromptEval::of(options_.run)) {}

Json McpServer::tool_list() { return tool_definitions(); }

Json McpServer::initialize(const Json& params) {
  if (!params.is_object() || !params.contains("protocolVersion") ||
      !params["protocolVersion"].is_string()) {
    throw RpcError{kInvalidParams, "initialize needs params.protocolVersion (a string)"};
  }
  // A version the server speaks is answered in kind; any other gets the server's latest, and
  // the client decides whether to go on (the protocol's version negotiation).
  const std::string asked = params["protocolVersion"].get<std::string>();
  initialized_ = true;
  return Json{
      {"protocolVersion", supported_version(asked) ? asked : std::string(kMcpProtocolVersion)},
      {"capabilities", Json{{"tools", Json{{"listChanged", false}}}}},
      {"serverInfo", Json{{"name", "fib"},
                          {"title", "fib (FlashInfer-Bench)"},
                          {"version", std::string(kVersion)}}},
      {"instructions",
       fmt::format("fib evaluates kernel solutions against the definitions of the dataset {} on "
                   "device {}. Start with list_definitions, read a definition with "
                   "definition_prompt, then evaluate a solution record; each failing workload "
                   "comes with feedback (wrong elements, error distribution, compiler "
                   "diagnostics). Profiling and sanitizing tools are not offered: they need a "
                   "GPU with Nsight Compute and compute-sanitizer.",
                   options_.dataset.string(), options_.run.device)}};
}

Json McpServer::call_tool(const Json& params) {
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
    throw RpcError{kInvalidParams, "tools/call needs params.name (a string)"};
  }
  const std::string name = params["name"].get<std::string>();
  const Json args = params.contains("arguments") ? params["arguments"] : Json::object();
  check_arguments(name, args);
  try {
    if (name == "list_definitions") return list_definitions(args);
    if (name == "definition_prompt") return definition_prompt(args);
    if (name == "evaluate") return evaluate(args);
    return get_trace(args);
  } catch (const Error& e) {
    return tool_error(e.what());
  }
}

std::optional<Json> McpServer::handle(const Json& message) {
  if (!message.is_object()) {
    // Batches are not part of the protocol since 2025-06-18.
    return rpc_error(nullptr, kInvalidRequest, "a message is one JSON-RPC object (no batches)");
  }
  const bool has_id = message.contains("id");
  const Json id = has_id ? message["id"] : Json(nullptr);
  if (has_id && !valid_id(id)) {
    return rpc_error(nullptr, kInvalidRequest, "the id must be a string or an integer");
  }
  if (!message.contains("method")) {
    if (message.contains("result") || message.contains("error")) return std::nullopt;
    return rpc_error(id, kInvalidRequest, "a request needs a method");
  }
  if (message.value("jsonrpc", "") != "2.0" || !message["method"].is_string()) {
    return rpc_error(id, kInvalidRequest, "not a JSON-RPC 2.0 request (jsonrpc \"2.0\", method)");
  }
  const std::string method = message["method"].get<std::string>();
  const Json params = message.contains("params") ? message["params"] : Json::object();
  if (!has_id) return std::nullopt;  // notifications: initialized, cancelled, ... need no answer
  try {
    if (method == "initialize") return rpc_result(id, initialize(params));
    if (method == "ping") return rpc_result(id, Json::object());
    if (method != "tools/list" && method != "tools/call") {
      return rpc_error(id, kMethodNotFound, fmt::format("method not found: {}", method));
    }
    if (!initialized_) {
      return rpc_error(id, kInvalidRequest,
                       "the session is not initialized: send initialize first");
    }
    if (method == "tools/list") return rpc_result(id, Json{{"tools", tool_list()}});
    return rpc_result(id, call_tool(params));
  } catch (const RpcError& e) {
    return rpc_error(id, e.code, e.message);
  } catch (const std::exception& e) {
    return rpc_error(id, kInternalError, fmt::format("internal error: {}", e.what()));
  }
}

std::optional<Json> McpServer::handle_line(std::string_view line) {
  Json message;
  try {
    message = Json::parse(line);
  } catch (const Json::parse_error& e) {
    return rpc_error(nullptr, kParseError, fmt::format("parse error: {}", e.what()));
  }
  return handle(message);
}

void McpServer::serve(std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (const auto reply = handle_line(line)) {
      // dump() escapes newlines inside strings, so a message stays on one line.
      out << reply->dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
      out.flush();
    }
  }
}

}  // namespace fib::agent
