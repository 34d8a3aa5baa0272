// The worker messages' one to_json and one from_json each (fib/bench/protocol/messages.h).
#include "fib/bench/protocol/messages.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

namespace fib::bench::protocol {

namespace {

// Reads one JSON object strictly: every key it holds must be read (an unknown key is an error),
// required keys must be there, and every value must have the type asked for.
class Reader {
 public:
  Reader(const Json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) throw ProtocolError(where_, "expected an object");
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  ~Reader() = default;

  bool has(const char* key) {
    read_.insert(key);
    return j_.contains(key) && !j_.at(key).is_null();
  }
  const Json& at(const char* key) {
    read_.insert(key);
    if (!j_.contains(key)) throw ProtocolError(where_, fmt::format("'{}' is missing", key));
    return j_.at(key);
  }
  template <class T>
  T get(const char* key) {
    return as<T>(at(key), key);
  }
  template <class T>
  T get(const char* key, T fallback) {
    return has(key) ? as<T>(j_.at(key), key) : fallback;
  }
  std::string where(const std::string& key) const { return where_ + "." + key; }
  // Every key read: the rest are not part of the message.
  void finish() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!read_.contains(it.key())) {
        throw ProtocolError(where_, fmt::format("unexpected key '{}'", it.key()));
      }
    }
  }

 private:
  template <class T>
  T as(const Json& v, const char* key) const {
    try {
      return v.get<T>();
    } catch (const Json::exception& e) {
      throw ProtocolError(where(key), e.what());
    }
  }

  const Json& j_;
  std::string where_;
  std::set<std::string, std::less<>> read_;
};

Json axes_json(const AxisValues& axes) {
  Json j = Json::object();
  for (const auto& [k, v] : axes) j[k] = v;
  return j;
}

AxisValues axes_from(const Json& j, const std::string& where) {
  if (!j.is_object()) throw ProtocolError(where, "expected an object of axis values");
  AxisValues v;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it->is_number_integer()) throw ProtocolError(where + "." + it.key(), "not an integer");
    v.emplace_back(it.key(), it->get<std::int64_t>());
  }
  return v;
}

Definition definition_from(const Json& j, const std::string& where) {
  Diagnostics diag;
  ReadContext ctx{where, &diag};
  auto d = definition_from_json(j, ctx);
  if (!d) throw ProtocolError(where, "the definition in the request does not parse");
  return *d;
}

SolutionRef solution_from(const Json& j, const std::string& where) {
  Reader r(j, where);
  SolutionRef s;
  s.library = r.get<std::string>("library");
  s.symbol = r.get<std::string>("symbol");
  s.dps = r.get("dps", true);
  s.binding = r.get("binding", std::string("fib"));
  s.python = r.get("python", Json());
  r.finish();
  return s;
}

SamplingRequest sampling_from(const Json& j, const std::string& where) {
  Reader r(j, where);
  SamplingRequest s;
  s.set = r.get<int>("set");
  s.draws = r.get<int>("draws");
  s.output = r.get<std::string>("output");
  r.finish();
  return s;
}

DevicePool device_pool_from(const Json& j, const std::string& where) {
  Reader r(j, where);
  DevicePool p;
  p.first = r.get<int>("first");
  p.count = r.get<int>("count");
  p.seed = r.get<std::uint64_t>("seed");
  r.finish();
  if (p.first < 1 || p.count < 0) {
    throw ProtocolError(where, fmt::format("first {} and count {}: expected first >= 1 and "
                                           "count >= 0",
                                           p.first, p.count));
  }
  return p;
}

template <class T>
std::vector<T> list_from(const Json& j, const std::string& where) {
  if (!j.is_array()) throw ProtocolError(where, "expected an array");
  std::vector<T> out;
  for (const Json& x : j) out.push_back(from_json<T>(x));
  return out;
}

template <class T>
Json list_json(const std::vector<T>& v) {
  Json j = Json::array();
  for (const T& x : v) j.push_back(to_json(x));
  return j;
}

}  // namespace

std::string command_of(const Json& request) {
  if (!request.is_object()) return {};
  const auto it = request.find("cmd");
  return it != request.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Json hello_request() { return Json{{"cmd", "hello"}}; }

Json load_request(const SolutionRef& solution) {
  return Json{{"cmd", "load"},
              {"solution", Json{{"library", solution.library},
                                {"symbol", solution.symbol},
                                {"dps", solution.dps},
                                {"binding", solution.binding},
                                {"python", solution.python}}}};
}

SolutionRef load_request_solution(const Json& request) {
  Reader r(request, "load request");
  r.get<std::string>("cmd");
  const SolutionRef s = solution_from(r.get<Json>("solution"), "load request: solution");
  r.finish();
  return s;
}

Json error_reply(const std::string& message, bool oom) {
  Json j{{"ok", false}, {"error", message}};
  if (oom) j["oom"] = true;
  return j;
}

// ---- Schedules ------------------------------------------------------------------------------
Json to_json(const TrialPlan& m) {
  Json j{{"warmup", m.warmup},
         {"timed", m.timed},
         {"check_position", m.check_position},
         {"max_seconds", m.max_seconds},
         {"max_warmup_seconds", m.max_warmup_seconds}};
  if (!m.check_output.empty()) j["check_output"] = m.check_output;
  if (m.first_slot >= 0) {
    j["first_slot"] = m.first_slot;
    j["poison_base"] = m.poison_base;
  }
  return j;
}

template <>
TrialPlan from_json<TrialPlan>(const Json& j) {
  Reader r(j, "schedule.trials[]");
  TrialPlan p;
  p.warmup = r.get<std::vector<int>>("warmup");
  p.timed = r.get<std::vector<int>>("timed");
  p.check_position = r.get("check_position", -1);
  p.check_output = r.get("check_output", std::string());
  p.max_seconds = r.get("max_seconds", 0.0);
  p.max_warmup_seconds = r.get("max_warmup_seconds", 0.0);
  p.first_slot = r.get("first_slot", -1);
  p.poison_base = r.get("poison_base", std::uint64_t{0});
  r.finish();
  return p;
}

Json to_json(const OutputArena& m) {
  return Json{
      {"bytes", m.bytes}, {"slot_bytes", m.slot_bytes}, {"output_offsets", m.output_offsets}};
}

template <>
OutputArena from_json<OutputArena>(const Json& j) {
  Reader r(j, "request.arena");
  OutputArena a;
  a.bytes = r.get<std::uint64_t>("bytes");
  a.slot_bytes = r.get<std::uint64_t>("slot_bytes");
  a.output_offsets = r.get<std::vector<std::uint64_t>>("output_offsets");
  r.finish();
  return a;
}

Json to_json(const Schedule& m) {
  Json j{{"trials", list_json(m.trials)},
         {"min_samples", m.noise.min_samples},
         {"rel_precision", m.noise.rel_precision},
         {"fixed_iterations", m.fixed_iterations},
         {"flush_caches", m.flush_caches}};
  if (m.device_pool.count > 0 || m.device_pool.first > 0) {
    j["device_pool"] = Json{{"first", m.device_pool.first},
                            {"count", m.device_pool.count},
                            {"seed", m.device_pool.seed}};
  }
  return j;
}

template <>
Schedule from_json<Schedule>(const Json& j) {
  Reader r(j, "schedule");
  Schedule s;
  s.noise.min_samples = r.get("min_samples", std::size_t{10});
  s.noise.rel_precision = r.get("rel_precision", 0.005);
  s.fixed_iterations = r.get("fixed_iterations", false);
  s.flush_caches = r.get("flush_caches", true);
  s.trials = list_from<TrialPlan>(r.at("trials"), r.where("trials"));
  if (r.has("device_pool")) {
    s.device_pool = device_pool_from(r.at("device_pool"), r.where("device_pool"));
  }
  r.finish();
  return s;
}

// ---- Requests -------------------------------------------------------------------------------
Json to_json(const EvaluateRequest& m) {
  Json j{{"cmd", "evaluate"},
         {"definition", to_json(m.definition)},
         {"var_axes", axes_json(m.var_axes)},
         {"solution", Json{{"library", m.solution.library},
                           {"symbol", m.solution.symbol},
                           {"dps", m.solution.dps},
                           {"binding", m.solution.binding},
                           {"python", m.solution.python}}},
         {"sets", m.sets},
         {"schedule", to_json(m.schedule)},
         {"device", m.device},
         {"gpu_timing", Json{{"timer", m.gpu_timer}}}};
  if (m.sampling) {
    j["sampling"] = Json{
        {"set", m.sampling->set}, {"draws", m.sampling->draws}, {"output", m.sampling->output}};
  }
  if (m.arena) j["arena"] = to_json(*m.arena);
  return j;
}

template <>
EvaluateRequest from_json<EvaluateRequest>(const Json& j) {
  Reader r(j, "request");
  EvaluateRequest m;
  (void)r.get<std::string>("cmd");
  m.definition = definition_from(r.at("definition"), r.where("definition"));
  m.var_axes = axes_from(r.at("var_axes"), r.where("var_axes"));
  m.solution = solution_from(r.at("solution"), r.where("solution"));
  m.sets = r.get<std::string>("sets");
  m.schedule = from_json<Schedule>(r.at("schedule"));
  m.device = r.get("device", std::string("cpu"));
  if (r.has("gpu_timing")) {
    Reader t(r.at("gpu_timing"), r.where("gpu_timing"));
    m.gpu_timer = t.get("timer", std::string("events"));
    t.finish();
  }
  if (r.has("sampling")) m.sampling = sampling_from(r.at("sampling"), r.where("sampling"));
  if (r.has("arena")) m.arena = from_json<OutputArena>(r.at("arena"));
  r.finish();
  return m;
}

Json to_json(const ReferenceRequest& m) {
  return Json{{"cmd", "reference"},
              {"definition", to_json(m.definition)},
              {"var_axes", axes_json(m.var_axes)},
              {"sets", m.sets},
              {"seeds", m.seeds},
              {"threads", m.threads},
              {"eval_extra", m.eval_extra},
              {"schedule", to_json(m.schedule)},
              {"device", m.device},
              {"keep_outputs", m.keep_outputs}};
}

template <>
ReferenceRequest from_json<ReferenceRequest>(const Json& j) {
  Reader r(j, "request");
  ReferenceRequest m;
  (void)r.get<std::string>("cmd");
  m.definition = definition_from(r.at("definition"), r.where("definition"));
  m.var_axes = axes_from(r.at("var_axes"), r.where("var_axes"));
  m.sets = r.get<std::string>("sets");
  m.seeds = r.get<std::vector<std::uint64_t>>("seeds");
  m.threads = r.get("threads", 0u);
  m.eval_extra = r.get("eval_extra", Json::object());
  m.schedule = from_json<Schedule>(r.at("schedule"));
  m.device = r.get("device", std::string("cpu"));
  m.keep_outputs = r.get("keep_outputs", std::string());
  r.finish();
  return m;
}

// ---- Replies --------------------------------------------------------------------------------
Json to_json(const Failure& m) {
  return Json{{"kind", m.kind}, {"message", m.message}, {"call", m.call}};
}

template <>
Failure from_json<Failure>(const Json& j) {
  Reader r(j, "reply.failure");
  Failure f;
  f.kind = r.get<std::string>("kind");
  f.message = r.get<std::string>("message");
  f.call = r.get("call", std::uint64_t{0});
  r.finish();
  return f;
}

Json to_json(const CheckedCall& m) {
  return Json{{"call", m.call}, {"position", m.position}, {"poison", m.poison}};
}

template <>
CheckedCall from_json<CheckedCall>(const Json& j) {
  Reader r(j, "reply.trials[].checked");
  CheckedCall c;
  c.call = r.get("call", std::uint64_t{0});
  c.position = r.get("position", -1);
  c.poison = r.get("poison", std::map<std::string, std::int64_t>());
  r.finish();
  return c;
}

Json to_json(const MisshapenOutput& m) {
  return Json{
      {"position", m.position}, {"output", m.output}, {"dtype", m.dtype}, {"shape", m.shape}};
}

template <>
MisshapenOutput from_json<MisshapenOutput>(const Json& j) {
  Reader r(j, "reply.trials[].misshapen[]");
  MisshapenOutput m;
  m.position = r.get<int>("position");
  m.output = r.get<std::string>("output");
  m.dtype = r.get<std::string>("dtype");
  m.shape = r.get<std::vector<std::int64_t>>("shape");
  r.finish();
  return m;
}

Json to_json(const TrialResult& m) {
  Json j{{"samples_ms", m.samples_ms},
         {"warmup_ms", m.warmup_ms},
         {"warmup_calls", m.warmup_calls},
         {"stopped_by", m.stopped_by},
         {"checked", m.checked ? to_json(*m.checked) : Json()}};
  if (!m.gpu.is_null()) j["gpu"] = m.gpu;
  if (!m.misshapen.empty()) j["misshapen"] = list_json(m.misshapen);
  return j;
}

template <>
TrialResult from_json<TrialResult>(const Json& j) {
  Reader r(j, "reply.trials[]");
  TrialResult t;
  t.samples_ms = r.get<std::vector<double>>("samples_ms");
  t.warmup_ms = r.get("warmup_ms", 0.0);
  t.warmup_calls = r.get("warmup_calls", 0);
  t.stopped_by = r.get("stopped_by", std::string());
  if (r.has("checked")) t.checked = from_json<CheckedCall>(r.at("checked"));
  if (r.has("gpu")) t.gpu = r.at("gpu");
  if (r.has("misshapen")) {
    t.misshapen = list_from<MisshapenOutput>(r.at("misshapen"), r.where("misshapen"));
  }
  r.finish();
  return t;
}

Json to_json(const EvaluateReply& m) {
  Json j{{"ok", m.ok}};
  if (!m.load_error.empty()) j["load_error"] = m.load_error;
  if (!m.error.empty()) j["error"] = m.error;
  if (m.oom) j["oom"] = true;
  if (m.worker_ms) j["worker_ms"] = *m.worker_ms;
  if (!m.ok) return j;
  j["signature"] = m.signature;
  j["load_inputs_ms"] = m.load_inputs_ms;
  j["schedule_ms"] = m.schedule_ms;
  j["cache_flush_ms"] = m.cache_flush_ms;
  j["trials"] = list_json(m.trials);
  if (m.failure) j["failure"] = to_json(*m.failure);
  if (m.fatal) j["fatal"] = true;
  if (!m.window_audit.is_null()) j["window_audit"] = m.window_audit;
  if (!m.worker_phases_ms.is_null()) j["worker_phases_ms"] = m.worker_phases_ms;
  if (!m.gpu.is_null()) j["gpu"] = m.gpu;
  if (m.sampling_draws > 0) j["sampling"] = Json{{"draws", m.sampling_draws}};
  return j;
}

template <>
EvaluateReply from_json<EvaluateReply>(const Json& j) {
  Reader r(j, "reply");
  EvaluateReply m;
  m.ok = r.get<bool>("ok");
  m.load_error = r.get("load_error", std::string());
  m.error = r.get("error", std::string());
  m.oom = r.get("oom", false);
  m.signature = r.get("signature", std::string());
  m.load_inputs_ms = r.get("load_inputs_ms", 0.0);
  m.schedule_ms = r.get("schedule_ms", 0.0);
  m.cache_flush_ms = r.get("cache_flush_ms", 0.0);
  if (r.has("worker_ms")) m.worker_ms = r.get<double>("worker_ms");
  if (r.has("trials")) m.trials = list_from<TrialResult>(r.at("trials"), r.where("trials"));
  if (r.has("failure")) m.failure = from_json<Failure>(r.at("failure"));
  m.fatal = r.get("fatal", false);
  if (r.has("window_audit")) m.window_audit = r.at("window_audit");
  if (r.has("worker_phases_ms")) m.worker_phases_ms = r.at("worker_phases_ms");
  if (r.has("gpu")) m.gpu = r.at("gpu");
  if (r.has("sampling")) {
    Reader s(r.at("sampling"), r.where("sampling"));
    m.sampling_draws = s.get<int>("draws");
    s.finish();
  }
  r.finish();
  return m;
}

Json to_json(const ReferenceReply& m) {
  Json j{{"ok", m.ok},
         {"kernel", m.kernel},
         {"load_inputs_ms", m.load_inputs_ms},
         {"trials", list_json(m.trials)}};
  if (!m.error.empty()) j["error"] = m.error;
  if (m.oom) j["oom"] = true;
  return j;
}

template <>
ReferenceReply from_json<ReferenceReply>(const Json& j) {
  Reader r(j, "reply");
  ReferenceReply m;
  m.ok = r.get<bool>("ok");
  m.error = r.get("error", std::string());
  m.oom = r.get("oom", false);
  m.kernel = r.get("kernel", std::string());
  m.load_inputs_ms = r.get("load_inputs_ms", 0.0);
  if (r.has("trials")) m.trials = list_from<TrialResult>(r.at("trials"), r.where("trials"));
  r.finish();
  return m;
}

Json to_json(const HelloReply& m) {
  Json j{{"ok", true}, {"pid", m.pid}, {"abi", m.abi}};
  if (!m.hardening.is_null()) j["hardening"] = m.hardening;
  return j;
}

template <>
HelloReply from_json<HelloReply>(const Json& j) {
  Reader r(j, "reply");
  HelloReply m;
  if (!r.get<bool>("ok")) throw ProtocolError("reply", "the worker did not greet");
  m.pid = r.get<std::int64_t>("pid");
  m.abi = r.get<unsigned>("abi");
  m.hardening = r.get<Json>("hardening", Json());
  r.finish();
  return m;
}

// ---- Replies against their requests ---------------------------------------------------------
namespace {

// A value-returning output the worker reports as misshapen: one of the definition's outputs, on
// a timed call made, with a dtype fib knows and a size fib can hold (the orchestrator makes a
// tensor of it to judge).
std::string check_misshapen(const Definition& def, const TrialResult& trial, std::size_t t) {
  constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 30;
  if (trial.misshapen.size() > trial.samples_ms.size() * def.outputs.size()) {
    return fmt::format("trial {} reports more misshapen outputs than it made", t);
  }
  for (const MisshapenOutput& m : trial.misshapen) {
    const bool known = std::any_of(def.outputs.begin(), def.outputs.end(),
                                   [&](const auto& o) { return o.name == m.output; });
    const auto dtype = parse_dtype(m.dtype);
    std::uint64_t numel = 1;
    bool sane = dtype.has_value() && m.shape.size() <= 8;
    for (std::int64_t d : m.shape) {
      sane = sane && d >= 0 && (d == 0 || numel <= kMaxBytes / static_cast<std::uint64_t>(d));
      if (sane) numel *= static_cast<std::uint64_t>(d);
    }
    const auto bytes = sane ? dtype_storage_bytes(*dtype, numel) : std::nullopt;
    if (!known || m.position < 0 ||
        static_cast<std::size_t>(m.position) >= trial.samples_ms.size() || !bytes ||
        *bytes > kMaxBytes) {
      return fmt::format("trial {} reports a misshapen output fib cannot take ('{}', position {})",
                         t, m.output, m.position);
    }
  }
  return {};
}

// With an arena the orchestrator draws the checked call among the timed calls the worker made:
// no fewer than the noise criterion asks for before any stop (the worker cannot narrow the draw
// by claiming fewer), no more than planned.
std::string check_arena_trials(const EvaluateRequest& request,
                               const std::vector<TrialResult>& trials) {
  const Schedule& s = request.schedule;
  for (std::size_t t = 0; t < trials.size(); ++t) {
    const std::size_t planned = s.trials[t].timed.size();
    const std::size_t made = trials[t].samples_ms.size();
    const std::size_t least = std::min(s.noise.min_samples, planned);
    if (trials[t].checked) {
      return fmt::format("trial {} reports a checked call: the orchestrator draws it", t);
    }
    if (made < least || made > planned) {
      return fmt::format("trial {} reports {} timed calls ({} to {} planned)", t, made, least,
                         planned);
    }
    if (std::string m = check_misshapen(request.definition, trials[t], t); !m.empty()) return m;
  }
  return {};
}

std::string check_trials(const Schedule& s, const std::vector<TrialResult>& trials) {
  if (trials.size() > s.trials.size()) {
    return fmt::format("{} trials in the reply, {} asked for", trials.size(), s.trials.size());
  }
  for (std::size_t t = 0; t < trials.size(); ++t) {
    if (!trials[t].misshapen.empty() && s.trials[t].first_slot < 0) {
      return fmt::format("trial {} reports misshapen outputs without an arena", t);
    }
    if (!trials[t].checked) continue;
    if (s.trials[t].check_output.empty()) {
      return fmt::format("trial {} reports a checked call the request did not ask for", t);
    }
    if (s.trials[t].check_position >= 0) continue;  // a position the request named
    const int position = trials[t].checked->position;
    const std::size_t made = trials[t].samples_ms.size();
    if (position < 0 || static_cast<std::size_t>(position) >= made ||
        static_cast<std::size_t>(position) >= s.trials[t].timed.size()) {
      return fmt::format("trial {} reports a checked call at position {} of its {} timed calls", t,
                         position, made);
    }
  }
  return {};
}

}  // namespace

std::string check_reply(const EvaluateRequest& request, const EvaluateReply& reply) {
  if (std::string m = check_trials(request.schedule, reply.trials); !m.empty()) return m;
  if (request.arena) {
    if (std::string m = check_arena_trials(request, reply.trials); !m.empty()) return m;
  }
  if (reply.sampling_draws > 0 &&
      (!request.sampling || reply.sampling_draws != request.sampling->draws)) {
    return fmt::format("{} sampling draws in the reply, {} asked for", reply.sampling_draws,
                       request.sampling ? request.sampling->draws : 0);
  }
  return {};
}

std::string check_reply(const ReferenceRequest& request, const ReferenceReply& reply) {
  return check_trials(request.schedule, reply.trials);
}

}  // namespace fib::bench::protocol
