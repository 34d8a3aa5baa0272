// Upstream's read endpoints: definitions and workloads of the served dataset.
#pragma once

#include "fib/bench/run/run.h"
#include "fib/serve/server.h"
#include "serve/routes.h"

namespace fib::serve {

// "Definition not found: NAME (did you mean 'X'?)", or the names to choose from.
std::string definition_not_found(const TraceSet& set, std::string_view name);

// `run` is what every task evaluates with: the definition's prompt gives its tolerances.
void register_dataset_routes(RouteTable& routes, ServeContext& context,
                             const bench::RunOptions& run);

}  // namespace fib::serve
