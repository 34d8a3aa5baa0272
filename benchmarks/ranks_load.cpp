// How many items and traces a second rank 0 sustains (fib run over MPI ranks, docs/mpi.md):
// rank 0's real loop (plan, hand-out, parse, sign, append) against simulated ranks that answer
// every item at once with one trace per solution, so that nothing but rank 0 and the trace
// writer is measured. Usage: ranks_load DATASET TRACE_JSONL RANKS WORKLOADS
//   DATASET      a copy of examples/dataset (its traces/ removed); the workloads are added to it
//   TRACE_JSONL  a file whose first line is a trace of one of DATASET's rmsnorm_h2048 solutions
#include <fmt/format.h>

#include <chrono>
#include <deque>
#include <fstream>
#include <iostream>

#include "fib/bench/run/ranks.h"
#include "fib/dataset/keys.h"
#include "fib/dataset/trace_set.h"
#include "fib/trace/signature.h"

namespace {

using fib::bench::RankMessage;
using fib::bench::RankTag;

class InstantRanks : public fib::bench::RankLink {
 public:
  InstantRanks(int size, fib::Json trace) : size_(size), trace_(std::move(trace)) {
    for (int r = 1; r < size; ++r) inbox_.push_back({r, RankTag::kReady, R"({"host":"sim"})"});
  }
  int rank() const override { return 0; }
  int size() const override { return size_; }
  void send(int to, RankTag tag, const std::string& payload) override {
    if (tag != RankTag::kItem) return;
    const fib::Json item = fib::Json::parse(payload);
    fib::Json traces = fib::Json::array();
    for (const auto& s : item.at("solutions")) {
      fib::Json t = trace_;
      t["solution"] = s;
      t["workload"]["uuid"] = item.at("workload");
      traces.push_back(std::move(t));
    }
    fib::Json result{{"id", item.at("id")},
                     {"traces", traces},
                     {"messages", fib::Json::array()},
                     {"reference_failures", 0},
                     {"skipped", fib::Json::object()}};
    inbox_.push_back({to, RankTag::kResult, result.dump()});
  }
  std::optional<RankMessage> poll() override {
    if (inbox_.empty()) return std::nullopt;
    RankMessage m = std::move(inbox_.front());
    inbox_.pop_front();
    return m;
  }

 private:
  int size_;
  fib::Json trace_;
  std::deque<RankMessage> inbox_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: ranks_load DATASET TRACE_JSONL RANKS WORKLOADS\n";
    return 2;
  }
  const std::filesystem::path dataset = argv[1];
  std::ifstream in(argv[2]);
  std::string line;
  std::getline(in, line);
  fib::Json trace = fib::Json::parse(line);
  trace["evaluation"]["environment"]["extra"].erase("signature");  // the copies are re-signed
  {
    fib::TraceSet set = fib::TraceSet::load(dataset);
    const fib::Trace& first = set.workloads("rmsnorm_h2048").front().value;
    std::vector<fib::Trace> more;
    for (int i = 0; i < std::stoi(argv[4]); ++i) {
      fib::Trace w = first;
      w.workload.uuid = fmt::format("00000000-0000-4000-8000-{:012}", i);
      more.push_back(std::move(w));
    }
    fib::append_workloads(set, more);
  }
  fib::bench::RunOptions o;
  o.dataset = dataset;
  o.definitions = {"rmsnorm_h2048"};
  o.seed = 1;
  o.signing_key = fib::load_or_create_signing_key(dataset / "key.pem", nullptr);
  InstantRanks link(std::stoi(argv[3]), trace);
  bool all_alive = false;
  const auto t0 = std::chrono::steady_clock::now();
  const fib::bench::RunResult r =
      fib::bench::run_coordinator(o, {}, link, fib::bench::RankSettings{}, &all_alive);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double items = static_cast<double>(std::stoi(argv[4]) + 2);
  std::cout << fmt::format(
      "ranks {} items {:.0f} traces {} in {:.2f} s: {:.0f} items/s, {:.0f} traces/s\n",
      link.size() - 1, items, r.traces.size(), s, items / s,
      static_cast<double>(r.traces.size()) / s);
  return 0;
}
