// fib serve's read API, authentication and error bodies, against a real server on loopback.
#include <gtest/gtest.h>

#include <fstream>

#include "serve_process.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

namespace fs = std::filesystem;

class ServeApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    copy_tree(source_dir() / "examples" / "dataset", tmp_->path() / "dataset");
    tmp_->write("web/index.html", "<!doctype html><title>fib</title>");
    server_ =
        new ServeProcess(tmp_->path() / "dataset", tmp_->path() / "home",
                         {"--web-dir", (tmp_->path() / "web").string(), "--max-body-mb", "1"});
  }
  static void TearDownTestSuite() {
    delete server_;
    delete tmp_;
  }
  static TempDir* tmp_;
  static ServeProcess* server_;
};
TempDir* ServeApi::tmp_ = nullptr;
ServeProcess* ServeApi::server_ = nullptr;

TEST_F(ServeApi, HealthNeedsNoToken) {
  auto r = server_->client(false)->Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const Json j = body_json(r);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_TRUE(j["workers"].is_array());
  EXPECT_TRUE(j["queue_size"].is_number_integer());
}

TEST_F(ServeApi, EverythingElseNeedsTheToken) {
  auto anonymous = server_->client(false);
  for (const char* path : {"/", "/definitions", "/definitions/rmsnorm_h2048", "/ui/", "/tasks/x"}) {
    auto r = anonymous->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_NE(body_json(r)["detail"].get<std::string>().find("token"), std::string::npos);
  }
  auto r = anonymous->Post("/evaluate", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  anonymous->set_bearer_token_auth(std::string(64, 'a'));
  EXPECT_EQ(anonymous->Get("/definitions")->status, 401);
}

TEST_F(ServeApi, TokenFileIsPrivate) {
  const auto mode = fs::status(tmp_->path() / "dataset" / ".fib-serve" / "token").permissions();
  EXPECT_EQ(mode & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
  EXPECT_NE(server_->log().find("/login?token=" + server_->token()), std::string::npos);
}

TEST_F(ServeApi, LoginSetsTheCookieAndTheCookieAuthenticates) {
  auto anonymous = server_->client(false);
  auto bad = anonymous->Get("/login?token=wrong");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 401);
  auto r = anonymous->Get(("/login?token=" + server_->token()).c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 303);
  EXPECT_EQ(r->get_header_value("Location"), "/ui/");
  const std::string cookie = r->get_header_value("Set-Cookie");
  EXPECT_NE(cookie.find("fib_token=" + server_->token()), std::string::npos);
  EXPECT_NE(cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(cookie.find("SameSite=Strict"), std::string::npos);
  auto page = anonymous->Get("/ui/", {{"Cookie", "fib_token=" + server_->token()}});
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<title>fib</title>"), std::string::npos);
}

TEST_F(ServeApi, RootListsEndpointsOrSendsBrowsersToTheSite) {
  auto c = server_->client();
  const Json info = body_json(c->Get("/"));
  std::set<std::string> listed;
  for (const Json& e : info["endpoints"]) {
    listed.insert(e["method"].get<std::string>() + " " + e["path"].get<std::string>());
  }
  for (const char* route :
       {"GET /definitions", "GET /definitions/{name}", "GET /definitions/{name}/prompt",
        "GET /definitions/{name}/workloads", "GET /workloads/{uuid}", "GET /health"}) {
    EXPECT_TRUE(listed.count(route)) << route;
  }
  auto r = c->Get("/", {{"Accept", "text/html,application/xhtml+xml"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 303);
  EXPECT_EQ(r->get_header_value("Location"), "/ui/");
  auto ui = c->Get("/ui");
  ASSERT_TRUE(ui);
  EXPECT_EQ(ui->status, 301);
}

TEST_F(ServeApi, DefinitionsAndWorkloadsAreUpstreamsJson) {
  auto c = server_->client();
  const Json defs = body_json(c->Get("/definitions"));
  ASSERT_TRUE(defs.is_array());
  const auto rms = std::find_if(defs.begin(), defs.end(),
                                [](const Json& d) { return d["name"] == "rmsnorm_h2048"; });
  ASSERT_NE(rms, defs.end());
  EXPECT_TRUE((*rms)["description"].is_string());
  const Json def = body_json(c->Get("/definitions/rmsnorm_h2048"));
  EXPECT_EQ(def["op_type"], "rmsnorm");
  EXPECT_TRUE(def["inputs"].contains("hidden_states"));
  const Json workloads = body_json(c->Get("/definitions/rmsnorm_h2048/workloads"));
  ASSERT_EQ(workloads.size(), 2u);
  const std::string uuid = workloads[0]["uuid"];
  const Json one = body_json(c->Get(("/workloads/" + uuid).c_str()));
  EXPECT_EQ(one, workloads[0]);
}

// The definition as a prompt, as fib mcp's definition_prompt gives it (docs/mcp.md).
TEST_F(ServeApi, DefinitionPromptForAgents) {
  auto c = server_->client();
  const Json p = body_json(c->Get("/definitions/rmsnorm_h2048/prompt"));
  EXPECT_EQ(p["definition"], "rmsnorm_h2048");
  EXPECT_EQ(p["outputs"][0].dump(),
            "{\"name\":\"output\",\"shape\":[\"batch_size\",\"hidden_size\"],\"dtype\":"
            "\"bfloat16\",\"description\":\"Normalized rows.\"}");
  EXPECT_EQ(p["judged"]["policy"], "elementwise");
  EXPECT_EQ(p["workloads"].size(), 2u);
  EXPECT_EQ(p["prompt"].get<std::string>().substr(0, 37), "# Kernel definition `rmsnorm_h2048` (");
  auto missing = c->Get("/definitions/rmsnorm_h204/prompt");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(ServeApi, NotFoundBodiesSayWhat) {
  auto c = server_->client();
  auto def = c->Get("/definitions/rmsnorm_h204");
  ASSERT_TRUE(def);
  EXPECT_EQ(def->status, 404);
  EXPECT_EQ(body_json(def)["detail"],
            "Definition not found: rmsnorm_h204 (did you mean 'rmsnorm_h2048'?)");
  auto w = c->Get("/definitions/nope/workloads");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->status, 404);
  auto uuid = c->Get("/workloads/00000000-0000-0000-0000-000000000000");
  ASSERT_TRUE(uuid);
  EXPECT_EQ(uuid->status, 404);
  EXPECT_NE(body_json(uuid)["detail"].get<std::string>().find("Workload not found"),
            std::string::npos);
  auto route = c->Get("/no/such/route");
  ASSERT_TRUE(route);
  EXPECT_EQ(route->status, 404);
  EXPECT_EQ(body_json(route)["detail"],
            "Not found: GET /no/such/route (GET / lists the endpoints)");
  auto file = c->Get("/ui/missing.js");
  ASSERT_TRUE(file);
  EXPECT_EQ(file->status, 404);
}

TEST_F(ServeApi, BodiesOverTheLimitAre413) {
  auto r = server_->client()->Post("/evaluate", std::string(2 << 20, ' '), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(body_json(r)["detail"], "Request body too large: the limit is 1048576 bytes");
}

// GET / lists every route the server registered (route groups register through one table);
// each must be in the OpenAPI document, and the document must describe no route that is not.
TEST_F(ServeApi, OpenApiDocumentsEveryRoute) {
  auto c = server_->client();
  auto r = c->Get("/openapi.json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  const Json doc = body_json(r);
  EXPECT_EQ(doc["openapi"].get<std::string>().substr(0, 2), "3.");
  std::set<std::string> documented, registered;
  for (const auto& [path, methods] : doc["paths"].items()) {
    for (const auto& [method, op] : methods.items()) {
      std::string upper = method;
      for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      documented.insert(upper + " " + path);
    }
  }
  const Json info = body_json(c->Get("/"));
  for (const Json& e : info["endpoints"]) {
    registered.insert(e["method"].get<std::string>() + " " + e["path"].get<std::string>());
  }
  EXPECT_GE(registered.size(), 12u);
  for (const std::string& route : registered) {
    EXPECT_TRUE(documented.count(route)) << route << " is not in docs/openapi.json";
  }
  // The site's files are served by a mount, not a route, when the web folder exists.
  documented.erase("GET /ui/{path}");
  for (const std::string& route : documented) {
    EXPECT_TRUE(registered.count(route)) << route << " is documented but not served";
  }
}

TEST(ServeOptions, NoAuthOnlyOnLoopbackAndNoOpenBindWithoutAToken) {
  TempDir tmp;
  make_rmsnorm_dataset(tmp.path() / "dataset");
  const std::string dataset = (tmp.path() / "dataset").string();
  auto [code, err] =
      serve_refused({"--local", dataset, "--host", "0.0.0.0", "--no-auth"}, tmp.path() / "home");
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("--no-auth needs a loopback --host, not 0.0.0.0"), std::string::npos) << err;
  tmp.write("open-token", "short\n");
  fs::permissions(tmp.path() / "open-token", fs::perms::owner_read | fs::perms::others_read);
  auto [code2, err2] =
      serve_refused({"--local", dataset, "--token-file", (tmp.path() / "open-token").string()},
                    tmp.path() / "home");
  EXPECT_EQ(code2, 2);
  EXPECT_NE(err2.find("lets other users read it"), std::string::npos) << err2;
}

TEST(ServeOptions, ASecondServerOnAPortInUseIsRefused) {
  TempDir tmp;
  make_rmsnorm_dataset(tmp.path() / "dataset");
  ServeProcess first(tmp.path() / "dataset", tmp.path() / "home");
  auto [code, err] = serve_refused(
      {"--local", (tmp.path() / "dataset").string(), "--port", std::to_string(first.port())},
      tmp.path() / "home");
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("cannot listen there"), std::string::npos) << err;
}

TEST(ServeOptions, NoAuthOnLoopbackWarnsAndAnswersWithoutToken) {
  TempDir tmp;
  make_rmsnorm_dataset(tmp.path() / "dataset");
  ServeProcess server(tmp.path() / "dataset", tmp.path() / "home", {"--no-auth"});
  EXPECT_NE(server.log().find("warning: --no-auth"), std::string::npos);
  auto r = server.client(false)->Get("/definitions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(body_json(r).size(), 1u);
}

}  // namespace
}  // namespace fib::testing
