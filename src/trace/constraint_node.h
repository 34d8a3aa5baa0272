// Internal to the constraint language: the parsed tree that constraint.cpp (tokenizer, parser)
// builds and constraint_eval.cpp evaluates.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fib/trace/constraint.h"

namespace fib {

struct ConstraintNode {
  enum class Kind {
    kInt,
    kFloat,
    kBool,
    kName,
    kNeg,
    kPos,
    kNot,
    kBinary,
    kCompare,
    kAnd,
    kOr,
    kIndex,
    kAttr,
    kCall,
    kMethod
  };
  Kind kind = Kind::kInt;
  std::int64_t ival = 0;
  double fval = 0;
  bool bval = false;
  std::string name;              // identifier, binary operator, attribute or function
  std::vector<std::string> ops;  // chained comparison operators
  std::vector<std::shared_ptr<const ConstraintNode>> kids;
  std::string src;  // source text, for messages
  int depth = 1;    // height of the tree below (bounded, see kMaxDepth in constraint.cpp)
};

}  // namespace fib
