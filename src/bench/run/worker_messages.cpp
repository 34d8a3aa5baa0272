#include "bench/run/worker_messages.h"

#include <fmt/format.h>

namespace fib::bench::detail {

namespace fs = std::filesystem;

namespace {

Json axes_json(const Workload& w) {
  Json axes = Json::object();
  for (const auto& [k, v] : w.axes) axes[k] = v;
  return axes;
}

std::vector<TrialReport> read_trials(const Json& trials) {
  std::vector<TrialReport> out;
  for (const Json& tr : trials) {
    TrialReport t;
    t.samples_ms = tr.at("samples_ms").get<std::vector<double>>();
    t.warmup_ms = tr.value("warmup_ms", 0.0);
    t.warmup_calls = tr.value("warmup_calls", 0);
    t.stopped_by = tr.value("stopped_by", std::string());
    const Json checked = tr.value("checked", Json());
    if (!checked.is_null()) {
      t.checked_file = checked.at("file").get<std::string>();
      t.checked_poison = checked.value("poison", Json::object());
    }
    t.gpu = tr.value("gpu", Json());
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Json make_schedule(const std::vector<TrialCalls>& trials, int min_samples, const RunOptions& o,
                   const std::optional<DevicePool>& device_pool) {
  Json trials_json = Json::array();
  for (const TrialCalls& t : trials) {
    trials_json.push_back(Json{{"warmup", t.warmup},
                               {"timed", t.timed},
                               {"check_position", t.check_position},
                               {"max_seconds", o.max_trial_seconds},
                               {"max_warmup_seconds", o.max_warmup_seconds}});
  }
  Json schedule{{"trials", trials_json},
                {"min_samples", min_samples},
                {"rel_precision", 0.005},
                {"fixed_iterations", o.fixed_iterations},
                {"flush_caches", true}};
  if (device_pool) {
    schedule["device_pool"] = Json{
        {"first", device_pool->first}, {"count", device_pool->count}, {"seed", device_pool->seed}};
  }
  return schedule;
}

Json with_check_outputs(Json schedule, const fs::path& dir, const std::string& who) {
  for (std::size_t t = 0; t < schedule["trials"].size(); ++t) {
    schedule["trials"][t]["check_output"] =
        (dir / fmt::format("{}-trial{}.safetensors", who, t)).string();
  }
  return schedule;
}

std::vector<std::string> check_output_files(const Json& schedule) {
  std::vector<std::string> files;
  for (const Json& t : schedule.at("trials")) files.push_back(t.at("check_output"));
  return files;
}

Json make_reference_request(const ReferenceRequest& r) {
  return Json{{"cmd", "reference"},
              {"definition", to_json(r.def)},
              {"var_axes", axes_json(r.workload)},
              {"sets", r.inputs_file},
              {"seeds", r.set_seeds},
              {"threads", r.threads},
              {"eval_extra", r.eval_extra},
              {"schedule", r.schedule},
              {"device", r.device}};
}

ReferenceReply read_reference_reply(const Json& body) {
  ReferenceReply reply;
  reply.ok = body.value("ok", false);
  if (!reply.ok) {
    reply.error = body.value("error", std::string("failed"));
    return reply;
  }
  reply.kernel = body.value("kernel", std::string());
  reply.trials = read_trials(body.at("trials"));
  return reply;
}

Json make_evaluate_request(const EvaluateRequest& r) {
  Json req{{"cmd", "evaluate"},
           {"definition", to_json(r.def)},
           {"var_axes", axes_json(r.workload)},
           {"solution", Json{{"library", r.build.shared_object.string()},
                             {"symbol", r.solution.spec.entry_symbol()},
                             {"dps", r.solution.spec.dps()}}},
           {"sets", r.inputs_file},
           {"schedule", r.schedule},
           {"device", r.device},
           {"gpu_timing", Json{{"timer", r.gpu_timer}}}};
  if (r.sampling_output) {
    req["sampling"] = Json{{"set", 0}, {"draws", r.sampling_draws}, {"output", *r.sampling_output}};
  }
  return req;
}

EvaluateReply read_evaluate_reply(const Json& body) {
  EvaluateReply reply;
  if (body.contains("load_error")) {
    reply.load_error = body["load_error"].get<std::string>();
    return reply;
  }
  reply.ok = body.value("ok", false);
  if (!reply.ok) {
    reply.error = body.value("error", std::string());
    return reply;
  }
  reply.signature = body.value("signature", std::string());
  reply.load_inputs_ms = body.value("load_inputs_ms", 0.0);
  reply.schedule_ms = body.value("schedule_ms", 0.0);
  reply.cache_flush_ms = body.value("cache_flush_ms", 0.0);
  reply.trials = read_trials(body.at("trials"));
  if (body.contains("window_audit")) reply.window_audit = body["window_audit"];
  if (body.contains("failure")) {
    const Json& f = body["failure"];
    reply.failure =
        EvaluateReply::CallFailure{f.value("call", 0), f.value("message", std::string())};
  }
  reply.fatal = body.value("fatal", false);
  reply.worker_phases_ms = body.value("worker_phases_ms", Json::object());
  return reply;
}

}  // namespace fib::bench::detail
