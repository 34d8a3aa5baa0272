// Upstream's read endpoints: definitions and workloads of the served dataset.
#pragma once

#include "fib/bench/run/run.h"
#include "fib/serve/server.h"
#include "serve/routes.h"

namespace fib::serve {

// `run` is what every task evaluates with: the definition's prompt gives its tolerances.
void register_dataset_routes(RouteTable& routes, ServeContext& context,
                             const bench::RunOptions& run);

}  // namespace fib::serve
