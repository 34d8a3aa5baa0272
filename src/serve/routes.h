// The route table of fib serve and the JSON answers every route gives. Route groups (dataset,
// tasks, the web interface's) register through a RouteTable, so that GET / and the OpenAPI test
// see every route the server has.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/serve/server.h"
#include "fib/trace/json_reader.h"

namespace fib::serve {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

class RouteTable {
 public:
  RouteTable(httplib::Server& http, std::vector<RouteInfo>& listed)
      : http_(http), listed_(listed) {}

  // `path` may hold {placeholders}, each matching one path segment; the handler reads them as
  // path_param(request, 1), (request, 2), ... in order.
  void get(std::string_view path, std::string description, Handler handler);
  void post(std::string_view path, std::string description, Handler handler);

  httplib::Server& http() { return http_; }

 private:
  void add(std::string_view method, std::string_view path, std::string description);

  httplib::Server& http_;
  std::vector<RouteInfo>& listed_;
};

// The regular expression a route path with {placeholders} is matched by.
std::string route_pattern(std::string_view path);
// The i-th {placeholder} of the matched route (1-based), URL-decoded.
std::string path_param(const httplib::Request& req, std::size_t i);

void send_json(httplib::Response& res, const Json& body, int status = 200);
// An error as upstream's clients read it: {"detail": "..."}.
void send_error(httplib::Response& res, int status, std::string_view detail);
// A request body that is not what the endpoint takes: {"detail": ..., "errors": [{path,
// message, hint}]} with fib's JSON-path diagnostics.
void send_diagnostics(httplib::Response& res, int status, std::string_view detail,
                      const Diagnostics& diagnostics);

// The request body as JSON, or an answer of 400 (not JSON) and nullopt.
std::optional<Json> read_json_body(const httplib::Request& req, httplib::Response& res);

}  // namespace fib::serve
