// Upstream's evaluation endpoints: POST /evaluate, GET /tasks/{task_id} (a long poll), POST
// /tasks/batch.
#pragma once

#include "fib/serve/server.h"
#include "serve/auth.h"
#include "serve/routes.h"
#include "serve/tasks.h"

namespace fib::serve {

// Upstream's TaskResponse: {task_id, status, definition, solution, traces, error}, traces and
// error null when there are none; fib adds the device it ran on.
Json task_response(const Task& task);

// What the task routes read: the dataset, the queues, who a request is, and the author only the
// admin submits as.
struct TaskRouteContext {
  ServeContext* context = nullptr;
  TaskService* tasks = nullptr;
  const Authenticator* auth = nullptr;
  std::string baseline_author;
};

void register_task_routes(RouteTable& routes, const TaskRouteContext& rc);

}  // namespace fib::serve
