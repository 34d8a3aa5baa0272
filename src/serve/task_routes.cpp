#include "serve/task_routes.h"

#include <fmt/format.h>
#include <httplib.h>

#include <charconv>

#include "serve/site_api.h"

namespace fib::serve {

namespace {

constexpr double kMaxWaitSeconds = 3600;
constexpr std::size_t kMaxBatch = 10000;

// The body was read whole (up to the server's --max-body-mb) before this check: answering 413
// with it unread would reset the connection under a client still sending, which then sees no
// answer at all.
bool within_token_body_limit(const Identity& sender, const httplib::Request& req,
                             httplib::Response& res) {
  if (sender.max_body_bytes == 0 || req.body.size() <= sender.max_body_bytes) return true;
  send_error(
      res, 413,
      fmt::format("Request body too large: this token's limit is {} bytes", sender.max_body_bytes));
  return false;
}

void evaluate(const TaskRouteContext& rc, const httplib::Request& req, httplib::Response& res) {
  const std::optional<Identity> sender = rc.auth->identify(req);
  if (!sender) return send_error(res, 401, "Missing or wrong token");
  if (!within_token_body_limit(*sender, req, res)) return;
  const std::optional<Json> body = read_json_body(req, res);
  if (!body) return;
  Rejection rejection;
  const SubmissionRules rules{.cpu_devices = rc.tasks->has_cpu_queue(),
                              .gpu_devices = rc.tasks->has_gpu_queue(),
                              .sender = *sender,
                              .baseline_author = rc.baseline_author};
  const std::optional<Submission> s =
      parse_submission(*body, *rc.context->traces(), rules, rejection);
  if (!s) {
    if (rejection.diagnostics.empty()) return send_error(res, rejection.status, rejection.detail);
    return send_diagnostics(res, rejection.status, rejection.detail, rejection.diagnostics);
  }
  const std::optional<std::string> id = rc.tasks->submit(*s, *sender);
  if (!id) {
    return send_error(res, 429,
                      fmt::format("This token has {} tasks pending or running, its limit: submit "
                                  "again once one has finished",
                                  sender->max_queued));
  }
  send_json(res, Json{{"task_id", *id},
                      {"normalized_solution_name", s->solution.name},
                      {"author", s->solution.author}});
}

// A wait in seconds, 0..3600, or nullopt after answering 422.
std::optional<double> read_timeout(const Json& value, httplib::Response& res) {
  if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > kMaxWaitSeconds) {
    send_error(res, 422,
               fmt::format("timeout must be a number of seconds from 0 to {}, found {}",
                           kMaxWaitSeconds, json_preview(value)));
    return std::nullopt;
  }
  return value.get<double>();
}

std::optional<double> timeout_param(const httplib::Request& req, httplib::Response& res) {
  if (!req.has_param("timeout")) return 0.0;
  const std::string text = req.get_param_value("timeout");
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return read_timeout(Json(text), res);
  }
  return read_timeout(Json(value), res);
}

// Whether `who` may see the task: the admin sees every task, a token its own.
bool visible_to(const Task& t, const Identity& who) { return who.admin || t.token == who.token_id; }

// The tasks' current answers; nullopt after a 404 naming the first unknown id (another token's
// task is unknown to a token).
std::optional<Json> task_answers(TaskService& tasks, const std::vector<std::string>& ids,
                                 const Identity& who, httplib::Response& res) {
  Json out = Json::array();
  for (const std::string& id : ids) {
    const std::optional<Task> t = tasks.get(id);
    if (!t || !visible_to(*t, who)) {
      send_error(res, 404, fmt::format("Task not found: {}", id));
      return std::nullopt;
    }
    out.push_back(task_response(*t));
  }
  return out;
}

void get_task(const TaskRouteContext& rc, const httplib::Request& req, httplib::Response& res) {
  TaskService& tasks = *rc.tasks;
  const std::optional<Identity> who = rc.auth->identify(req);
  if (!who) return send_error(res, 401, "Missing or wrong token");
  const std::string id = path_param(req, 1);
  const std::optional<double> timeout = timeout_param(req, res);
  if (!timeout) return;
  const std::optional<Task> task = tasks.get(id);
  if (!task || !visible_to(*task, *who)) {
    return send_error(res, 404, fmt::format("Task not found: {}", id));
  }
  if (*timeout > 0) tasks.wait({id}, *timeout);
  if (const std::optional<Json> answers = task_answers(tasks, {id}, *who, res)) {
    send_json(res, (*answers)[0]);
  }
}

// {task_ids: [...], timeout: seconds}, or nullopt after a 422.
std::optional<std::pair<std::vector<std::string>, double>> read_batch(const Json& body,
                                                                      httplib::Response& res) {
  const Json* ids = body.contains("task_ids") ? &body.at("task_ids") : nullptr;
  bool all_strings = ids != nullptr && ids->is_array();
  for (std::size_t i = 0; all_strings && i < ids->size(); ++i) all_strings = (*ids)[i].is_string();
  if (!all_strings) {
    send_error(res, 422, "task_ids must be a list of task ids");
    return std::nullopt;
  }
  if (ids->size() > kMaxBatch) {
    send_error(res, 422, fmt::format("at most {} task ids in one batch", kMaxBatch));
    return std::nullopt;
  }
  const std::optional<double> timeout =
      body.contains("timeout") ? read_timeout(body.at("timeout"), res) : 0.0;
  if (!timeout) return std::nullopt;
  return std::make_pair(ids->get<std::vector<std::string>>(), *timeout);
}

void get_batch(const TaskRouteContext& rc, const httplib::Request& req, httplib::Response& res) {
  TaskService& tasks = *rc.tasks;
  const std::optional<Identity> who = rc.auth->identify(req);
  if (!who) return send_error(res, 401, "Missing or wrong token");
  if (!within_token_body_limit(*who, req, res)) return;
  const std::optional<Json> body = read_json_body(req, res);
  if (!body) return;
  const auto batch = read_batch(*body, res);
  if (!batch || !task_answers(tasks, batch->first, *who, res)) return;
  if (batch->second > 0) tasks.wait(batch->first, batch->second);
  if (const std::optional<Json> answers = task_answers(tasks, batch->first, *who, res)) {
    send_json(res, *answers);
  }
}

constexpr std::size_t kMaxListed = 1000;

// GET /tasks?status=&limit=: the newest tasks without their traces, and how many of each status
// (a token's own only; the admin's: every task).
// How a task's traces came out, without the traces: {"PASSED": 3, "INCORRECT_NUMERICAL": 1}.
// Empty until it has traces; "completed" alone says nothing about correctness.
Json outcome_counts(const Json& traces) {
  Json counts = Json::object();
  for (const Json& trace : traces) {
    const Json status = trace.value("/evaluation/status"_json_pointer, Json());
    if (!status.is_string()) continue;
    Json& n = counts[status.get<std::string>()];
    n = n.is_null() ? 1 : n.get<int>() + 1;
  }
  return counts;
}

void list_tasks(const TaskRouteContext& rc, const httplib::Request& req, httplib::Response& res) {
  TaskService& tasks = *rc.tasks;
  const std::optional<Identity> who = rc.auth->identify(req);
  if (!who) return send_error(res, 401, "Missing or wrong token");
  const std::optional<std::string> token =
      who->admin ? std::nullopt : std::optional<std::string>(who->token_id);
  std::optional<TaskStatus> status;
  if (req.has_param("status")) {
    status = parse_task_status(req.get_param_value("status"));
    if (!status) {
      return send_error(res, 422, "status must be pending, running, completed or failed");
    }
  }
  std::size_t limit = 50;
  if (req.has_param("limit")) {
    const std::string text = req.get_param_value("limit");
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (ec != std::errc() || end != text.data() + text.size() || limit < 1 || limit > kMaxListed) {
      return send_error(res, 422, fmt::format("limit must be an integer from 1 to {}", kMaxListed));
    }
  }
  Json listed = Json::array();
  for (const Task& t : tasks.store().recent(limit, status, token)) {
    Json j = task_response(t);
    j.erase("traces");
    j.erase("trace_ids");
    j["workload_uuids"] = t.workloads;
    j["outcome"] = outcome_counts(t.traces);
    j["created"] = t.created;
    j["updated"] = t.updated;
    listed.push_back(std::move(j));
  }
  Json counts = Json::object();
  for (TaskStatus s : kTaskStatuses)
    counts[std::string(task_status_name(s))] = tasks.store().count(s, token);
  send_json(res, Json{{"tasks", listed}, {"counts", counts}});
}

}  // namespace

Json task_response(const Task& t) {
  Json j{{"task_id", t.id},
         {"status", task_status_name(t.status)},
         {"definition", t.definition},
         {"solution", t.solution},
         {"traces", t.traces.empty() ? Json() : t.traces},
         {"error", t.error.empty() ? Json() : Json(t.error)}};
  if (!t.device.empty()) j["device"] = t.device;
  // fib's addition: each trace's stable id, for links to /api/traces and the trace page.
  Json ids = Json::array();
  for (const Json& trace : t.traces) ids.push_back(trace_id(trace));
  j["trace_ids"] = std::move(ids);
  return j;
}

void register_task_routes(RouteTable& routes, const TaskRouteContext& rc) {
  routes.post(
      "/evaluate", "Submit a solution for evaluation",
      [rc](const httplib::Request& req, httplib::Response& res) { evaluate(rc, req, res); });
  routes.get(
      "/tasks", "The newest tasks, without traces (?status=, ?limit= up to 1000)",
      [rc](const httplib::Request& req, httplib::Response& res) { list_tasks(rc, req, res); });
  routes.get("/tasks/{task_id}", "Get task status and results (?timeout= waits up to 3600 s)",
             [rc](const httplib::Request& req, httplib::Response& res) { get_task(rc, req, res); });
  routes.post(
      "/tasks/batch", "Batch get multiple tasks",
      [rc](const httplib::Request& req, httplib::Response& res) { get_batch(rc, req, res); });
}

}  // namespace fib::serve
