#include "fib/bench/reference_stage/reference_stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include "fib/bench/eval/op_family.h"
#include "fib/bench/launch/box.h"
#include "fib/bench/protocol/requests.h"
#include "python_reference_run.h"

namespace fib::bench::detail {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The files a reference worker keeps its outputs on each set it calls in (keep_outputs), named
// as the worker names them (worker_main.cpp).
std::vector<std::string> kept_output_files(const protocol::ReferenceRequest& r) {
  std::set<int> sets;
  for (const protocol::TrialPlan& plan : r.schedule.trials) {
    sets.insert(plan.warmup.begin(), plan.warmup.end());
    sets.insert(plan.timed.begin(), plan.timed.end());
  }
  std::vector<std::string> files;
  for (const int set : sets) {
    files.push_back(
        (fs::path(r.keep_outputs) / fmt::format("reference-set{}.safetensors", set)).string());
  }
  return files;
}

}  // namespace

int checked_set(const PreparedInputs& p, int trial) {
  const protocol::TrialPlan& plan = p.schedule.trials.at(static_cast<std::size_t>(trial));
  return plan.timed.at(static_cast<std::size_t>(plan.check_position));
}

ReferenceStage::ReferenceStage(ReferenceSetup setup) : setup_(std::move(setup)) {}

ReferenceStage::~ReferenceStage() = default;

void ReferenceStage::stop() { worker_.reset(); }

Worker& ReferenceStage::worker() {
  if (!worker_ || !worker_->alive() || !worker_->channel_idle()) {
    worker_.reset();  // the old one (and its sandbox) is gone before a new one starts
    worker_ = std::make_unique<Worker>(setup_.worker);
  }
  return *worker_;
}

ReferenceRun ReferenceStage::run(const Definition& def, const Workload& w, ReferenceKind kind,
                                 PreparedInputs& p) {
  ReferenceCache* cache = setup_.cache;
  std::string key;
  if (cache != nullptr) {
    const PythonRuntime* python = setup_.python;
    p.reference_identity = reference_identity(
        def, w, kind, setup_.device, python ? python->executable + " torch " + python->torch : "",
        p.eval.extra);
    key = reference_run_key(p, setup_.hardware, setup_.gpu_timer);
    ReferenceRun cached;
    if (restore_reference_run(*cache, key, p, &cached)) {
      cached.cache = "hit";
      return cached;
    }
  }
  ReferenceRun run =
      kind == ReferenceKind::kPython ? run_python_reference(setup_, def, p) : run_native(def, w, p);
  if (cache != nullptr && run.ok) {
    save_reference_run(*cache, key, p, run);
    run.cache = "miss";
  }
  return run;
}

protocol::ReferenceRequest ReferenceStage::request(const Definition& def, const Workload& w,
                                                   const PreparedInputs& p,
                                                   protocol::Schedule schedule) const {
  return make_reference_request(ReferenceCall{.def = def,
                                              .workload = w,
                                              .inputs_file = p.inputs_file,
                                              .set_seeds = p.set_seeds,
                                              .threads = setup_.threads,
                                              .eval_extra = p.eval.extra,
                                              .schedule = std::move(schedule),
                                              .device = setup_.device.to_string()});
}

ReferenceRun ReferenceStage::run_native(const Definition& def, const Workload& w,
                                        PreparedInputs& p) {
  protocol::ReferenceRequest req =
      request(def, w, p, with_check_outputs(p.schedule, p.dir, "reference"));
  // On the CPU, the reference keeps its outputs on every set it calls, where outputs_on_sets
  // finds them: the sets of checked calls drawn later cost nothing more. Not where the judge
  // needs the reference's extras (sampling), which a call does not write.
  if (setup_.device.is_cpu() && op_family(def).reference_extras == nullptr) {
    req.keep_outputs = p.dir.string();
  }
  ReferenceRun run;
  const auto reply = call(req, &run.error);
  if (!reply) return run;
  run.ok = true;
  run.kernel = reply->kernel;
  run.timing = timing_from_trials(reply->trials);
  p.reference_outputs = check_output_files(req.schedule);
  return run;
}

// One request to the reference worker; its reply, or nullopt with *error set (a worker that
// answered with a failure is killed, so the next request gets a fresh one).
std::optional<protocol::ReferenceReply> ReferenceStage::call(
    const protocol::ReferenceRequest& request, std::string* error) {
  // Sandboxed, the worker sees the input-set file staged in its box and writes the outputs (its
  // checked calls' and those it keeps) in the box's out/, from where they are moved to where the
  // request put them.
  Box box(setup_.worker.sandbox.box, setup_.worker.sandbox.box_inside);
  protocol::ReferenceRequest sent = request;
  Worker::Reply r;
  try {
    sent.sets = box.stage(request.sets).inputs;
    sent.schedule = box.outputs_in_box(request.schedule);
    if (!request.keep_outputs.empty()) {
      sent.keep_outputs = box.outputs_folder(request.keep_outputs);
      for (const std::string& file : kept_output_files(request)) box.output(file);
    }
    r = worker().call(
        to_json(sent),
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(std::max(60.0, setup_.timeout_seconds))));
    if (const std::string unsound = box.take_outputs(); !unsound.empty()) {
      throw Error("the reference worker", unsound);
    }
  } catch (const Error& e) {
    if (worker_) worker_->kill();
    *error = e.what();
    return std::nullopt;
  }
  if (r.kind != Worker::ReplyKind::kOk) {
    *error = r.kind == Worker::ReplyKind::kTimeout ? "the reference timed out"
                                                   : "the reference worker " + r.died_how;
    return std::nullopt;
  }
  protocol::ReferenceReply reply;
  try {
    reply = read_reply(sent, r.body);
  } catch (const protocol::ProtocolError& e) {
    reply.ok = false;
    reply.error = fmt::format("the reference worker's reply is not one fib can take: {}", e.what());
  }
  if (!reply.ok) {
    if (worker_) worker_->kill();  // a fresh one for the next workload
    *error = reply.error.empty() ? "failed" : reply.error;
    return std::nullopt;
  }
  return reply;
}

std::optional<std::vector<std::string>> ReferenceStage::outputs_on_sets(
    const Definition& def, const Workload& w, const PreparedInputs& p, const std::vector<int>& sets,
    std::string* error) {
  ReferenceCache* cache = p.reference_identity.empty() ? nullptr : setup_.cache;
  std::vector<std::string> files;
  std::vector<int> missing;
  std::vector<std::string> missing_files;
  for (int set : sets) {
    std::string file;
    for (int t = 0; t < p.trials && file.empty(); ++t) {
      if (checked_set(p, t) == set) file = p.reference_outputs.at(static_cast<std::size_t>(t));
    }
    if (file.empty()) {
      file = (p.dir / fmt::format("reference-set{}.safetensors", set)).string();
      if (!fs::exists(file) && cache != nullptr) cache->fetch_file(reference_set_key(p, set), file);
      if (!fs::exists(file) && std::find(missing.begin(), missing.end(), set) == missing.end()) {
        missing.push_back(set);
        missing_files.push_back(file);
      }
    }
    files.push_back(std::move(file));
  }
  if (missing.empty()) return files;
  if (!call(request(def, w, p, one_call_per_set(missing, missing_files, p.schedule.device_pool)),
            error)) {
    return std::nullopt;
  }
  if (cache != nullptr) {
    for (std::size_t i = 0; i < missing.size(); ++i) {
      cache->store_file(reference_set_key(p, missing[i]), missing_files[i]);
    }
  }
  return files;
}

}  // namespace fib::bench::detail
