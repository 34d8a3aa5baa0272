// Upstream's read endpoints: definitions and workloads of the served dataset.
#pragma once

#include "fib/serve/server.h"
#include "serve/routes.h"

namespace fib::serve {

void register_dataset_routes(RouteTable& routes, ServeContext& context);

}  // namespace fib::serve
