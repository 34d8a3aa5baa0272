// Shared by the worker's request handlers (bench/worker/worker_common.h).
#include "bench/worker/worker_common.h"

#include <fmt/format.h>

#include <cstring>

#include "fib/bench/compare.h"
#include "fib/tensor/safetensors.h"
#include "fib/trace/diagnostics.h"

namespace fib::bench::detail {

Definition parse_definition(const Json& j) {
  Diagnostics diag;
  ReadContext ctx{"request.definition", &diag};
  auto d = definition_from_json(j, ctx);
  if (!d) throw Error("request", "the definition in the request does not parse");
  return *d;
}

AxisValues parse_axes(const Json& j) {
  AxisValues v;
  for (auto it = j.begin(); it != j.end(); ++it) v.emplace_back(it.key(), it->get<std::int64_t>());
  return v;
}

Schedule parse_schedule(const Json& j) {
  Schedule s;
  s.noise.min_samples = j.value("min_samples", std::size_t{10});
  s.noise.rel_precision = j.value("rel_precision", 0.005);
  s.fixed_iterations = j.value("fixed_iterations", false);
  s.flush_caches = j.value("flush_caches", true);
  for (const Json& t : j.at("trials")) {
    TrialPlan p;
    p.warmup = t.at("warmup").get<std::vector<int>>();
    p.timed = t.at("timed").get<std::vector<int>>();
    p.check_position = t.value("check_position", -1);
    p.check_output = t.value("check_output", std::string());
    p.max_seconds = t.value("max_seconds", 0.0);
    p.max_warmup_seconds = t.value("max_warmup_seconds", 0.0);
    s.trials.push_back(std::move(p));
  }
  if (const auto it = j.find("device_pool"); it != j.end()) {
    s.device_pool.first = it->at("first").get<int>();
    s.device_pool.count = it->at("count").get<int>();
    s.device_pool.seed = it->at("seed").get<std::uint64_t>();
    if (s.device_pool.first < 1 || s.device_pool.count < 0) {
      throw Error("request.schedule.device_pool",
                  fmt::format("first {} and count {}: expected first >= 1 and count >= 0",
                              s.device_pool.first, s.device_pool.count));
    }
  }
  return s;
}

Json failure_json(const Failure& f) {
  return Json{{"kind", f.kind}, {"message", f.message}, {"call", f.call}};
}

InputSets load_sets(WorkerState& st, const Json& j) {
  const std::string path = j.get<std::string>();
  if (path != st.sets_path || !st.sets) {
    st.sets.reset();
    auto sets = std::make_shared<const std::vector<InputSet>>(read_input_sets(path));
    if (sets->empty()) throw Error(path, "no input sets");
    st.sets = std::move(sets);
    st.sets_path = path;
  }
  return st.sets;
}

void write_checked_outputs(const std::string& path,
                           const std::vector<std::pair<std::string, Tensor>>& outputs) {
  SafetensorsWriteOptions scratch;
  scratch.durable = false;
  write_safetensors(path, outputs, {}, scratch);
}

void append_sampling_expectation(const Definition& def, const InputSet& in, const Json& eval_extra,
                                 std::vector<std::pair<std::string, Tensor>>* outputs) {
  if (def.op_type != "sampling") return;
  reference::Arguments args;
  args.tensors = in.tensors;
  args.scalars = in.scalars;
  ResolvedEval cfg;
  cfg.extra = eval_extra;
  SamplingExpectation e = sampling_expectation(def, args, cfg);
  outputs->emplace_back("__distribution", std::move(e.distribution));
  if (e.allowed.defined()) outputs->emplace_back("__allowed", std::move(e.allowed));
}

void write_stacked_draws(const std::string& path, const Definition& def,
                         const std::vector<std::vector<Tensor>>& per_output, int draws) {
  std::vector<std::pair<std::string, Tensor>> stacked;
  for (std::size_t i = 0; i < def.outputs.size(); ++i) {
    const Tensor& first = per_output[i].front();
    Shape s = {static_cast<std::int64_t>(draws)};
    for (std::int64_t d : first.shape()) s.push_back(d);
    Tensor t(first.dtype(), std::move(s));
    auto* dst = static_cast<std::byte*>(t.raw());
    for (const Tensor& x : per_output[i]) {
      if (x.nbytes() != first.nbytes()) continue;
      std::memcpy(dst, x.raw(), x.nbytes());
      dst += x.nbytes();
    }
    stacked.emplace_back(def.outputs[i].name, std::move(t));
  }
  write_safetensors(path, stacked);
}

}  // namespace fib::bench::detail
