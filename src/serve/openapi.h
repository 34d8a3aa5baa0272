// The OpenAPI document of fib serve (docs/openapi.json), served at /openapi.json.
#pragma once

#include <string_view>

namespace fib::serve {

std::string_view openapi_document();

}  // namespace fib::serve
