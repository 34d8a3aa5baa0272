#include "python_reference_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "fib/bench/inputs/device_pool.h"
#include "fib/bench/inputs/input_set_file.h"
#include "fib/bench/protocol/requests.h"
#include "fib/bench/reference_stage/python_reference.h"
#include "fib/bench/reference_stage/reference_stage.h"
#include "fib/tensor/safetensors.h"

namespace fib::bench::detail {

namespace {

// Timed calls per trial: enough for a median, few enough that a slow PyTorch reference does not
// dominate the run.
constexpr int kMaxTimedCalls = 10;

// Rewrites the outputs file when an output had to be converted to its declared dtype, so the
// judge compares like with like.
void conform_outputs(const Definition& def, const std::string& file) {
  std::vector<std::string> notes;
  reference::Outputs out = read_python_outputs(def, file, &notes);
  if (notes.empty()) return;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& spec : def.outputs) tensors.emplace_back(spec.name, out.at(spec.name));
  write_safetensors(file, tensors, {{"fib.definition", def.name}, {"fib.reference", "python"}});
}

}  // namespace

ReferenceRun run_python_reference(const ReferenceSetup& setup, const Definition& def,
                                  PreparedInputs& p) {
  const PythonRuntime& python = *setup.python;
  ReferenceRun run;
  run.kind = ReferenceKind::kPython;
  run.runtime = Json{{"python", python.executable},
                     {"torch", python.torch},
                     {"device", setup.device.to_string()},
                     {"clock", "python time.perf_counter"}};
  const protocol::Schedule schedule = with_check_outputs(p.schedule, p.dir, "reference");
  const std::vector<std::string> files = check_output_files(schedule);
  const int repeat = std::clamp(p.eval.iterations, 1, kMaxTimedCalls);
  std::vector<PythonReferenceJob> jobs;
  // Job i is input set i: trial t's checked call runs on set t (prepare.cpp's plan_trials).
  for (int t = 0; t < p.trials; ++t) {
    jobs.push_back(PythonReferenceJob{.def = &def,
                                      .args = read_input_set(p.inputs_file, t),
                                      .outputs = files.at(static_cast<std::size_t>(t)),
                                      .seed = p.set_seeds.at(static_cast<std::size_t>(t)),
                                      .repeat = repeat});
  }
  // A solution's checked call may be drawn on any timed call's set: the reference's outputs on
  // every such set are made now, once, where ReferenceStage::outputs_on_sets finds them. On GPU
  // lanes those sets are made on the device; the same sets are made here on the host.
  const protocol::DevicePool& pool = p.schedule.device_pool;
  std::set<int> timed_sets;
  for (const protocol::TrialPlan& plan : p.schedule.trials) {
    for (int set : plan.timed) {
      if (set >= p.trials) timed_sets.insert(set);
    }
  }
  for (int set : timed_sets) {
    jobs.push_back(PythonReferenceJob{
        .def = &def,
        .args = input_set_on_host(p.inputs_file, set, pool.count > 0 ? pool.first : 0, pool.seed),
        .outputs = (p.dir / fmt::format("reference-set{}.safetensors", set)).string(),
        .seed = p.set_seeds.at(static_cast<std::size_t>(set)),
        .repeat = 1});
  }
  PythonReferenceSettings settings{
      .python = python,
      .bridge_dir = setup.bridge_dir,
      .work_dir = p.dir / "python-reference",
      .device = setup.device.to_string(),
      .threads = setup.threads,
      .deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(std::max(120.0, setup.timeout_seconds))),
      .sandbox = setup.python_sandbox};
  const std::vector<PythonReferenceResult> results = run_python_references(settings, jobs);
  std::vector<protocol::TrialResult> trials;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok) {
      run.error =
          fmt::format("the PyTorch reference failed on input set {}: {}", i, results[i].error);
      return run;
    }
    try {
      conform_outputs(def, jobs[i].outputs);
    } catch (const Error& e) {
      run.error = e.what();
      return run;
    }
    if (i >= static_cast<std::size_t>(p.trials)) continue;  // an extra set: outputs only
    // The device the bridge reports its outputs on, not the one it was asked for.
    if (!results[i].device.empty()) run.runtime["device"] = results[i].device;
    protocol::TrialResult tr;
    tr.samples_ms = results[i].runs_ms;
    tr.warmup_calls = 2;  // the call whose outputs are saved, and one more
    tr.stopped_by = "iterations";
    trials.push_back(std::move(tr));
  }
  run.ok = true;
  run.timing = timing_from_trials(trials);
  p.reference_outputs = files;
  return run;
}

}  // namespace fib::bench::detail
