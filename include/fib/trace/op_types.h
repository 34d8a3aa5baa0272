// The op types fib knows (op_types.def, the one list every registry expands) by name, and the
// macros a registry expands the list's yes/no columns with.
#pragma once

#include <algorithm>
#include <iterator>
#include <string_view>

// FIB_OP_WHEN(column, code...): the code where the column says yes; FIB_OP_UNLESS where it says
// no. The column is the literal token yes or no, as op_types.def writes it.
#define FIB_OP_WHEN(column, ...) FIB_OP_WHEN_##column(__VA_ARGS__)
#define FIB_OP_WHEN_yes(...) __VA_ARGS__
#define FIB_OP_WHEN_no(...)
#define FIB_OP_UNLESS(column, ...) FIB_OP_UNLESS_##column(__VA_ARGS__)
#define FIB_OP_UNLESS_yes(...)
#define FIB_OP_UNLESS_no(...) __VA_ARGS__

namespace fib {

// Every op type of op_types.def, in its order (op_type order).
inline constexpr std::string_view kOpTypes[] = {
#define FIB_OP_TYPE(op, ...) #op,
#include "fib/trace/op_types.def"
};
static_assert(std::is_sorted(std::begin(kOpTypes), std::end(kOpTypes)),
              "op_types.def lists the op types in op_type order");

// Whether op_types.def lists `op_type`.
constexpr bool is_op_type(std::string_view op_type) {
  return std::find(std::begin(kOpTypes), std::end(kOpTypes), op_type) != std::end(kOpTypes);
}

}  // namespace fib
