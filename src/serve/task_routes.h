// Upstream's evaluation endpoints: POST /evaluate, GET /tasks/{task_id} (a long poll), POST
// /tasks/batch.
#pragma once

#include "fib/serve/server.h"
#include "serve/routes.h"
#include "serve/tasks.h"

namespace fib::serve {

// Upstream's TaskResponse: {task_id, status, definition, solution, traces, error}, traces and
// error null when there are none; fib adds the device it ran on.
Json task_response(const Task& task);

void register_task_routes(RouteTable& routes, ServeContext& context, TaskService& tasks);

}  // namespace fib::serve
