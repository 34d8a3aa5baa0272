// Upstream's read endpoints: definitions and workloads of the served dataset.
#pragma once

#include "fib/serve/server.h"
#include "serve/routes.h"

namespace fib::serve {

// "Definition not found: NAME (did you mean 'X'?)", or the names to choose from.
std::string definition_not_found(const TraceSet& set, std::string_view name);

void register_dataset_routes(RouteTable& routes, ServeContext& context);

}  // namespace fib::serve
