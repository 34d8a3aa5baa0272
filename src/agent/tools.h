// The MCP tools' schemas, their argument check and the shapes of their results (tools.cpp).
#pragma once

#include <string>
#include <string_view>

#include "fib/trace/json_reader.h"

namespace fib::agent {

// A JSON-RPC error the server answers a request with.
struct RpcError {
  int code = 0;
  std::string message;
};

// Every tool: {name, title, description, inputSchema, outputSchema}.
Json tool_definitions();
// Throws RpcError(kInvalidParams) for an unknown tool, or arguments its inputSchema refuses (not
// an object, a required one missing, one of the wrong JSON type, one it does not declare).
void check_arguments(const std::string& tool, const Json& args);
// A tool's answer: the text for the model, the same as structuredContent for programs.
Json tool_result(std::string text, Json structured);
// A tool that ran and failed (a bad solution, an unknown definition): isError, with why.
Json tool_error(std::string_view message);

}  // namespace fib::agent
