// Server: options checked, token settled, routes registered group by group, then served.
#include "fib/serve/server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "fib/version.h"
#include "serve/auth.h"
#include "serve/dataset_routes.h"
#include "serve/openapi.h"
#include "serve/routes.h"
#include "serve/site_api.h"
#include "serve/task_routes.h"
#include "serve/tasks.h"

namespace fib::serve {

namespace fs = std::filesystem;

namespace {

bool accepts_html(const httplib::Request& req) {
  return req.get_header_value("Accept").find("text/html") != std::string::npos;
}

// What a browser gets instead of 401 JSON: a form that sends the token to /login (which sets
// the cookie), with why it is shown.
void send_login_page(httplib::Response& res, const std::string& why) {
  res.status = 401;
  res.set_content(fmt::format(R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Log in · fib</title>
<style>body{{font-family:system-ui,sans-serif;max-width:520px;margin:60px auto;padding:0 20px}}
input,button{{font-size:15px;padding:6px 10px;margin:4px 0}}</style></head>
<body><main class="page" style="max-width:520px">
<h1>fib serve</h1><p class="subtitle">{}</p>
<form method="get" action="/login" class="panel" id="login-form">
<p>The token is in the file <code>fib serve</code> printed at its start (<code>--token-file</code>),
or an author's token from <code>fib serve token add</code>.</p>
<input type="password" name="token" autocomplete="current-password" size="40" placeholder="token" required autofocus>
<button type="submit">Log in</button></form></main></body></html>
)",
                              why),
                  "text/html; charset=utf-8");
}

std::string error_detail(const httplib::Request& req, int status, std::size_t max_body) {
  switch (status) {
    case 400:
      return "Bad request: malformed HTTP, or a POST without Content-Length (curl: -d '')";
    case 404:
      return fmt::format("Not found: {} {} (GET / lists the endpoints)", req.method, req.path);
    case 405:
      return fmt::format("Method not allowed: {} {}", req.method, req.path);
    case 413:
      return fmt::format("Request body too large: the limit is {} bytes", max_body);
    case 414:
      return "Request URI too long";
    default:
      return fmt::format("HTTP error {}", status);
  }
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr addr{};
  return ::inet_pton(AF_INET, host.c_str(), &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
}

Server::Server(ServeOptions options) : options_(std::move(options)) {
  const bool loopback = is_loopback_host(options_.host);
  if (options_.no_auth && !loopback) {
    throw Error("--no-auth",
                fmt::format("--no-auth needs a loopback --host, not {}", options_.host),
                "anyone who can reach the port could run code on this machine; use a token");
  }
  if (options_.state_dir.empty()) options_.state_dir = options_.dataset / ".fib-serve";
  // The state folder holds the token and every submitted solution's results: its owner's only.
  if (fs::create_directories(options_.state_dir)) {
    fs::permissions(options_.state_dir, fs::perms::owner_all, fs::perm_options::replace);
  }
  std::unique_ptr<TokenStore> tokens;
  if (!options_.no_auth) {
    if (!options_.token_file.empty()) {
      token_ = read_token_file(options_.token_file);
    } else {
      token_path_ = options_.state_dir / "token";
      bool created = false;
      token_ = load_or_create_token(token_path_, &created);
    }
    tokens = std::make_unique<TokenStore>(token_store_file(options_.state_dir));
  }
  auth_ = std::make_unique<Authenticator>(token_, std::move(tokens));
  web_dir_ = find_web_dir(options_.web_dir);
  context_ = std::make_unique<ServeContext>(options_.dataset, options_.baseline_author,
                                            options_.state_dir);
  tasks_ = std::make_unique<TaskService>(*context_, options_);
  http_ = std::make_unique<httplib::Server>();
  register_routes();
}

Server::~Server() {
  stop();
  tasks_->stop();
}

void Server::install_handlers() {
  const unsigned threads = options_.http_threads ? options_.http_threads : kDefaultHttpThreads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  // httplib closes a keep-alive connection after 5 requests by default: a client polling tasks
  // or a browser loading the site would reconnect all the time.
  http_->set_keep_alive_max_count(1000);
  const std::size_t max_body = options_.max_body_bytes;
  http_->set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) send_error(res, res.status, error_detail(req, res.status, max_body));
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          send_error(res, 500, fmt::format("Internal error: {}", e.what()));
        } catch (...) {
          send_error(res, 500, "Internal error");
        }
      });
  // Everything but /health and /login needs the token: the API, the site's files, GET /.
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path != "/health" && req.path != "/login" && !admitted(req, res)) {
      return httplib::Server::HandlerResponse::Handled;
    }
    // The static-file handler, which runs before the routes, would serve the site's index at
    // /ui, where its relative links resolve against /.
    if (req.path == "/ui") {
      res.set_redirect("/ui/", 301);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

// Before the body is read: a request without a known token gets 401. A token's own body limit is
// checked by the routes that take a body, on what they read.
bool Server::admitted(const httplib::Request& req, httplib::Response& res) const {
  const std::optional<Identity> who = auth_->identify(req);
  if (!who) {
    if (accepts_html(req) && req.method == "GET") {
      send_login_page(res, "Log in to see the leaderboard, kernels, traces and tasks.");
      return false;
    }
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, 401,
               "Missing or wrong token: send 'Authorization: Bearer <token>', or open "
               "/login?token=<token> in a browser");
    return false;
  }
  return true;
}

void Server::register_service_routes(RouteTable& routes) {
  routes.get("/", "Server info and endpoint discovery (browsers are sent to /ui/)",
             [this](const httplib::Request& req, httplib::Response& res) {
               if (accepts_html(req)) return res.set_redirect("/ui/", 303);
               Json endpoints = Json::array();
               for (const RouteInfo& r : routes_) {
                 endpoints.push_back(
                     Json{{"method", r.method}, {"path", r.path}, {"description", r.description}});
               }
               send_json(res, Json{{"name", "fib serve"},
                                   {"version", kVersion},
                                   {"docs", "/openapi.json"},
                                   {"endpoints", endpoints}});
             });
  routes.get("/openapi.json", "This API's OpenAPI document",
             [](const httplib::Request&, httplib::Response& res) {
               res.set_content(std::string(openapi_document()), "application/json");
             });
  routes.get("/health", "Server health and worker status (no token needed)",
             [this](const httplib::Request&, httplib::Response& res) { send_json(res, health()); });
  routes.get("/login", "Log a browser in: sets the token cookie and redirects to /ui/",
             [this](const httplib::Request& req, httplib::Response& res) { login(req, res); });
  routes.post("/shutdown",
              "Stop the server: running tasks finish, queued ones resume on the next start",
              [this](const httplib::Request&, httplib::Response& res) {
                send_json(res, Json{{"status", "shutting_down"}});
                stop();
              });
}

void Server::login(const httplib::Request& req, httplib::Response& res) {
  if (!token_.empty()) {
    const std::string given = req.get_param_value("token");
    if (!auth_->identify_token(given)) {
      if (accepts_html(req)) {
        return send_login_page(res, given.empty() ? "Log in with a token."
                                                  : "That token is not one this server knows.");
      }
      send_error(res, 401, "Missing or wrong token: open /login?token=<token>");
      return;
    }
    res.set_header("Set-Cookie", login_cookie(given));
  }
  res.set_redirect("/ui/", 303);
}

void Server::register_site_files(RouteTable& routes) {
  if (!web_dir_.empty()) {
    http_->set_mount_point("/ui/", web_dir_.string());
    return;
  }
  routes.get("/ui/{path}", "The web interface's files",
             [](const httplib::Request&, httplib::Response& res) {
               send_error(res, 404,
                          "The web interface's files were not found: start fib serve with "
                          "--web-dir (the web/ folder of a fib checkout) or set FIB_WEB_DIR");
             });
}

// The route groups, one by one. A group registers its routes through the RouteTable so that
// GET / lists them and the OpenAPI test checks them.
void Server::register_routes() {
  install_handlers();
  RouteTable routes(*http_, routes_);
  register_service_routes(routes);
  register_dataset_routes(routes, *context_, options_.run);
  register_task_routes(routes, TaskRouteContext{.context = context_.get(),
                                                .tasks = tasks_.get(),
                                                .auth = auth_.get(),
                                                .baseline_author = options_.baseline_author.empty()
                                                                       ? "baseline"
                                                                       : options_.baseline_author});
  // The web interface: its static files; the JSON endpoints only its pages read register after
  // them, as a group of their own (register_site_routes(routes, *context_)).
  register_site_files(routes);
  register_site_routes(routes, *context_, *auth_);
}

Json Server::health() const {
  Json h = tasks_->health();
  h["records_not_loaded"] = context_->traces()->load_diagnostics().count(Severity::kError);
  return h;
}

int Server::bind() {
  // Debian's cpp-httplib listens with a backlog of 5, compiled in: a burst of connections (200
  // agents submitting at once) overflows it and clients see resets. The listening socket is
  // captured here and given the system's backlog once bound. It also gets TCP_NODELAY, which
  // accepted connections inherit: httplib writes a response's headers and body separately, and
  // Nagle's algorithm would hold the body for the client's delayed ACK (40 ms a request). Not
  // httplib's default options: they add SO_REUSEPORT, with which a second server on the port
  // would bind too and take half of the connections.
  int listening = -1;
  http_->set_socket_options([&listening](int sock) {
    const int on = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    listening = sock;
  });
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
  } else {
    port_ = http_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    throw Error(fmt::format("{}:{}", options_.host, options_.port), "cannot listen there",
                "is another server using the port? choose one with --port");
  }
  if (::listen(listening, SOMAXCONN) != 0) {
    throw Error(fmt::format("{}:{}", options_.host, port_), "cannot listen there",
                std::strerror(errno));
  }
  return port_;
}

void Server::listen() {
  tasks_->start();
  http_->listen_after_bind();
  tasks_->stop();
}

void Server::stop() {
  if (http_) http_->stop();
}

}  // namespace fib::serve
