#include "serve/routes.h"

#include <httplib.h>

#include "fib/base/json.h"
#include "fib/trace/json_reader.h"

namespace fib::serve {

std::string route_pattern(std::string_view path) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '{') {
      const std::size_t close = path.find('}', i);
      out += "([^/]+)";
      i = close;
    } else if (std::string_view(".+*?()[]|^$\\").find(path[i]) != std::string_view::npos) {
      out += '\\';
      out += path[i];
    } else {
      out += path[i];
    }
  }
  return out;
}

void RouteTable::add(std::string_view method, std::string_view path, std::string description) {
  listed_.push_back(RouteInfo{std::string(method), std::string(path), std::move(description)});
}

void RouteTable::get(std::string_view path, std::string description, Handler handler) {
  add("GET", path, std::move(description));
  http_.Get(route_pattern(path), std::move(handler));
}

// POST bodies are read raw, whatever their declared type: httplib would parse a
// form-urlencoded body (curl's default for -d and --data-binary) into parameters, and answers
// 413 for one over its compiled-in 8 KiB, while every route here takes JSON.
void RouteTable::post(std::string_view path, std::string description, Handler handler) {
  add("POST", path, std::move(description));
  http_.Post(route_pattern(path), [handler = std::move(handler)](
                                      const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader) {
    if (req.is_multipart_form_data()) {
      res.set_header("Connection", "close");  // its body is left unread
      return send_error(res, 415,
                        "multipart/form-data is not taken: send the JSON document itself as the "
                        "body (curl: -H 'Content-Type: application/json' --data-binary @file)");
    }
    httplib::Request with_body = req;
    const bool read = reader([&](const char* data, std::size_t n) {
      with_body.body.append(data, n);
      return true;
    });
    if (!read) {
      // Over --max-body-mb (httplib set 413), or cut short; the error handler writes the body.
      if (res.status != 413) res.status = 400;
      return;
    }
    handler(with_body, res);
  });
}

// httplib decodes the path before matching, so the captured segments are decoded already.
std::string path_param(const httplib::Request& req, std::size_t i) {
  return i < req.matches.size() ? req.matches[i].str() : std::string();
}

// With the charset named, Debian's cpp-httplib leaves the body uncompressed: it compresses only
// an exact "application/json", and at Brotli's highest level, which costs more than it saves on
// loopback and on the small answers of this API.
void send_json(httplib::Response& res, const Json& body, int status) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace),
                  "application/json; charset=utf-8");
}

void send_error(httplib::Response& res, int status, std::string_view detail) {
  send_json(res, Json{{"detail", detail}}, status);
}

void send_diagnostics(httplib::Response& res, int status, std::string_view detail,
                      const Diagnostics& diagnostics) {
  Json errors = Json::array();
  for (const Diagnostic& d : diagnostics) {
    if (d.severity != Severity::kError) continue;
    Json e{{"path", d.path}, {"message", d.message}};
    if (!d.hint.empty()) e["hint"] = d.hint;
    errors.push_back(std::move(e));
  }
  send_json(res, Json{{"detail", detail}, {"errors", std::move(errors)}}, status);
}

std::optional<Json> read_json_body(const httplib::Request& req, httplib::Response& res) {
  Diagnostics diag;
  std::optional<Json> body = parse_json(req.body, "request body", diag);
  if (!body) {
    send_diagnostics(res, 400, "the request body is not JSON", diag);
    return std::nullopt;
  }
  if (!body->is_object()) {
    send_error(res, 400, "the request body must be a JSON object, found " + json_preview(*body));
    return std::nullopt;
  }
  return body;
}

}  // namespace fib::serve
