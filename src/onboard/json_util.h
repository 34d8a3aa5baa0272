// Small JSON lookups for the onboard module, written as plain loops: GCC's -Wnull-dereference
// reports false positives inside nlohmann's find() and operator[] when inlined.
#pragma once

#include <string_view>

#include "fib/trace/json_reader.h"

namespace fib::onboard::detail {

// The member `key` of an object (null when absent, when its value is JSON null, or when `obj`
// is not an object).
inline const Json* member(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it.key() == key) return it.value().is_null() ? nullptr : &it.value();
  }
  return nullptr;
}

// The first element of an array, or null.
inline const Json* first_element(const Json& arr) {
  if (!arr.is_array()) return nullptr;
  for (auto it = arr.begin(); it != arr.end(); ++it) return &*it;
  return nullptr;
}

}  // namespace fib::onboard::detail
