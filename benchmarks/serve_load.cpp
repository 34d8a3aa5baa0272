// A load client for fib serve's read endpoints: N concurrent keep-alive clients on loopback for
// a fixed time, each cycling through GET /definitions, /definitions/{name},
// /definitions/{name}/workloads, /workloads/{uuid} and /health. Prints one JSON object: requests
// per second and the latency percentiles, overall and per endpoint (docs/benchmarks.md;
// scripts/serve-bench.sh starts the server and runs this).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Args {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string token;
  int clients = 100;
  double seconds = 10;
};

struct Sample {
  std::size_t path = 0;
  double ms = 0;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--host")
      a.host = value;
    else if (flag == "--port")
      a.port = std::stoi(value);
    else if (flag == "--clients")
      a.clients = std::stoi(value);
    else if (flag == "--seconds")
      a.seconds = std::stod(value);
    else if (flag == "--token-file")
      std::getline(std::ifstream(value), a.token);
    else
      throw std::runtime_error("unknown flag " + flag);
  }
  return a;
}

std::unique_ptr<httplib::Client> connect(const Args& a) {
  auto c = std::make_unique<httplib::Client>(a.host, a.port);
  c->set_keep_alive(true);
  // A read that waits on the server shows as its latency, not as an error after httplib's 5 s.
  c->set_read_timeout(std::chrono::seconds(120));
  c->set_tcp_nodelay(true);
  if (!a.token.empty()) c->set_bearer_token_auth(a.token);
  return c;
}

// The endpoints, with a definition and a workload of the served dataset filled in.
std::vector<std::string> endpoints(const Args& a) {
  auto c = connect(a);
  auto defs = c->Get("/definitions");
  if (!defs || defs->status != 200) throw std::runtime_error("GET /definitions failed");
  const std::string name = json::parse(defs->body).at(0).at("name");
  auto workloads = c->Get(("/definitions/" + name + "/workloads").c_str());
  if (!workloads || workloads->status != 200) throw std::runtime_error("GET workloads failed");
  const std::string uuid = json::parse(workloads->body).at(0).at("uuid");
  return {"/definitions", "/definitions/" + name, "/definitions/" + name + "/workloads",
          "/workloads/" + uuid, "/health"};
}

double percentile(std::vector<double>& ms, double p) {
  if (ms.empty()) return 0;
  const auto k = static_cast<std::size_t>(p * static_cast<double>(ms.size() - 1));
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(k), ms.end());
  return ms[k];
}

json stats(std::vector<double> ms, double seconds) {
  return json{{"requests", ms.size()},
              {"per_second", static_cast<double>(ms.size()) / seconds},
              {"p50_ms", percentile(ms, 0.50)},
              {"p90_ms", percentile(ms, 0.90)},
              {"p99_ms", percentile(ms, 0.99)},
              {"max_ms", ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end())}};
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  const std::vector<std::string> paths = endpoints(a);
  std::vector<std::vector<Sample>> samples(static_cast<std::size_t>(a.clients));
  std::atomic<std::size_t> errors{0};
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(a.seconds));
  std::vector<std::thread> threads;
  for (int k = 0; k < a.clients; ++k) {
    threads.emplace_back([&, k] {
      auto c = connect(a);
      auto& mine = samples[static_cast<std::size_t>(k)];
      for (std::size_t i = static_cast<std::size_t>(k); Clock::now() < end; ++i) {
        const std::size_t p = i % paths.size();
        const auto t0 = Clock::now();
        auto r = c->Get(paths[p].c_str());
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (!r || r->status != 200)
          ++errors;
        else
          mine.push_back(Sample{p, ms});
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<double> all;
  std::map<std::string, std::vector<double>> by_path;
  for (const auto& client : samples) {
    for (const Sample& s : client) {
      all.push_back(s.ms);
      by_path[paths[s.path]].push_back(s.ms);
    }
  }
  json out = stats(all, a.seconds);
  // A client the server does not serve (no free HTTP thread for its connection) stalls while
  // the others go on: the fewest requests of one client shows that.
  const auto [fewest, most] =
      std::minmax_element(samples.begin(), samples.end(),
                          [](const auto& x, const auto& y) { return x.size() < y.size(); });
  out["client_requests_min"] = fewest->size();
  out["client_requests_max"] = most->size();
  out["clients"] = a.clients;
  out["seconds"] = a.seconds;
  out["errors"] = errors.load();
  for (auto& [path, ms] : by_path) out["endpoints"][path] = stats(ms, a.seconds);
  std::cout << out.dump(2) << "\n";
  return errors.load() == 0 ? 0 : 1;
}
