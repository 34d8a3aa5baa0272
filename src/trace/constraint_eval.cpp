// The constraint language's evaluator: values (scalars, tensors, shapes), Python's arithmetic
// and comparison rules, and the calls a constraint may make.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "fib/trace/constraint.h"
#include "trace/constraint_node.h"

namespace fib {

namespace {

using Node = ConstraintNode;

struct Unknown : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Val {
  enum class K { kScalar, kTensor, kShape } k = K::kScalar;
  Scalar s = std::int64_t{0};
  std::string tensor;               // kTensor: name
  std::vector<std::int64_t> fixed;  // kTensor: leading indices already applied
  std::vector<std::int64_t> dims;   // kTensor: full shape; kShape: the tuple
};

std::string val_str(const Val& v) {
  switch (v.k) {
    case Val::K::kScalar:
      return scalar_to_string(v.s);
    case Val::K::kShape: {
      std::string s = "(";
      for (std::size_t i = 0; i < v.dims.size(); ++i)
        s += (i ? ", " : "") + std::to_string(v.dims[i]);
      return s + (v.dims.size() == 1 ? ",)" : ")");
    }
    case Val::K::kTensor:
      return "tensor " + v.tensor;
  }
  return "?";
}

double as_double(const Scalar& s) {
  if (const auto* i = std::get_if<std::int64_t>(&s)) return static_cast<double>(*i);
  if (const auto* b = std::get_if<bool>(&s)) return *b ? 1.0 : 0.0;
  return std::get<double>(s);
}
bool is_intlike(const Scalar& s) { return !std::holds_alternative<double>(s); }
std::int64_t as_int(const Scalar& s) {
  if (const auto* i = std::get_if<std::int64_t>(&s)) return *i;
  if (const auto* b = std::get_if<bool>(&s)) return *b ? 1 : 0;
  const double d = std::get<double>(s);
  // [-2^63, 2^63): the doubles that convert to int64 (NaN fails both tests).
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
    throw EvalError(fmt::format("{} cannot be converted to a 64-bit integer", d));
  }
  return static_cast<std::int64_t>(d);
}
[[noreturn]] void overflow(const ConstraintNode& n) {
  throw EvalError(fmt::format("integer overflow (beyond 64 bits) in '{}'", n.src));
}
bool truthy(const Scalar& s) { return as_double(s) != 0.0; }

class Evaluator {
 public:
  explicit Evaluator(const ConstraintEnv& env) : env_(env) {}

  Val eval(const Node& n) {
    switch (n.kind) {
      case Node::Kind::kInt:
        return scalar(n.ival);
      case Node::Kind::kFloat:
        return scalar(n.fval);
      case Node::Kind::kBool:
        return scalar(n.bval);
      case Node::Kind::kName: {
        if (auto a = env_.axis(n.name)) return scalar(*a);
        if (auto v = env_.scalar(n.name)) return scalar(*v);
        if (env_.is_tensor(n.name)) {
          auto shape = env_.tensor_shape(n.name);
          if (!shape) throw Unknown(fmt::format("the shape of '{}' is not known", n.name));
          Val v;
          v.k = Val::K::kTensor;
          v.tensor = n.name;
          v.dims = *shape;
          return v;
        }
        throw EvalError(fmt::format("unknown name '{}'", n.name));
      }
      case Node::Kind::kNeg: {
        Scalar s = need_scalar(eval(*n.kids[0]), n);
        if (is_intlike(s)) {
          if (as_int(s) == std::numeric_limits<std::int64_t>::min()) overflow(n);
          return scalar(-as_int(s));
        }
        return scalar(-as_double(s));
      }
      case Node::Kind::kPos:
        return scalar(need_scalar(eval(*n.kids[0]), n));
      // A boolean node that comes out true makes any comparison that failed inside it (under
      // `not`, or on the losing side of `or`) irrelevant: it must not be reported later as the
      // reason the whole expression is violated.
      case Node::Kind::kNot:
        return settle(!truthy(need_scalar(eval(*n.kids[0]), n)));
      case Node::Kind::kAnd: {
        Scalar l = need_scalar(eval(*n.kids[0]), n);
        if (!truthy(l)) return scalar(l);
        return settle(need_scalar(eval(*n.kids[1]), n));
      }
      case Node::Kind::kOr: {
        Scalar l = need_scalar(eval(*n.kids[0]), n);
        if (truthy(l)) return settle(l);
        return settle(need_scalar(eval(*n.kids[1]), n));
      }
      case Node::Kind::kBinary:
        return scalar(binary(n));
      case Node::Kind::kCompare:
        return settle(compare(n));
      case Node::Kind::kIndex:
        return index(n);
      case Node::Kind::kAttr:
        return attr(n);
      case Node::Kind::kCall:
        return call(n);
      case Node::Kind::kMethod:
        return method(n);
    }
    throw EvalError("bad expression");
  }

  std::string failed_detail;  // the comparison that came out false

 private:
  static Val scalar(Scalar s) {
    Val v;
    v.s = s;
    return v;
  }
  static Val scalar(std::int64_t i) { return scalar(Scalar{i}); }
  static Val scalar(double d) { return scalar(Scalar{d}); }
  static Val scalar(bool b) { return scalar(Scalar{b}); }
  Val settle(Scalar s) {
    if (truthy(s)) failed_detail.clear();
    return scalar(s);
  }

  Scalar need_scalar(const Val& v, const Node& n) {
    if (v.k == Val::K::kScalar) return v.s;
    if (v.k == Val::K::kTensor && v.fixed.size() == v.dims.size()) return element(v);
    throw EvalError(fmt::format("'{}' is {}, not a number", n.src, val_str(v)));
  }

  Scalar element(const Val& v) {
    auto e = env_.tensor_element(v.tensor, v.fixed);
    if (!e) throw Unknown(fmt::format("the contents of '{}' are not at hand", v.tensor));
    return *e;
  }

  Scalar binary(const Node& n) {
    const Scalar l = need_scalar(eval(*n.kids[0]), *n.kids[0]);
    const Scalar r = need_scalar(eval(*n.kids[1]), *n.kids[1]);
    const std::string& op = n.name;
    const bool ints = is_intlike(l) && is_intlike(r);
    if (op == "/") {
      if (as_double(r) == 0.0) throw EvalError(fmt::format("division by zero in '{}'", n.src));
      return as_double(l) / as_double(r);
    }
    if (op == "//" || op == "%") {
      if (as_double(r) == 0.0) throw EvalError(fmt::format("division by zero in '{}'", n.src));
      if (ints) {
        const std::int64_t a = as_int(l), b = as_int(r);
        if (a == std::numeric_limits<std::int64_t>::min() && b == -1) {
          if (op == "%") return std::int64_t{0};
          overflow(n);
        }
        std::int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {  // Python floors toward negative infinity
          q -= 1;
          m += b;
        }
        return op == "//" ? Scalar{q} : Scalar{m};
      }
      const double a = as_double(l), b = as_double(r);
      const double q = std::floor(a / b);
      return op == "//" ? Scalar{q} : Scalar{a - q * b};
    }
    if (op == "**") {
      if (ints && as_int(r) >= 0) {
        // Square and multiply: O(log exponent), and an overflow of base*base means the result
        // overflows too (|base| >= 2 there, and a higher exponent bit is still to come).
        std::int64_t result = 1, base = as_int(l), e = as_int(r);
        while (e > 0) {
          if ((e & 1) && __builtin_mul_overflow(result, base, &result)) overflow(n);
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow(n);
        }
        return result;
      }
      return std::pow(as_double(l), as_double(r));
    }
    if (ints) {
      const std::int64_t a = as_int(l), b = as_int(r);
      std::int64_t out = 0;
      bool over = false;
      if (op == "+") {
        over = __builtin_add_overflow(a, b, &out);
      } else if (op == "-") {
        over = __builtin_sub_overflow(a, b, &out);
      } else if (op == "*") {
        over = __builtin_mul_overflow(a, b, &out);
      } else {
        throw EvalError(fmt::format("unknown operator '{}'", op));
      }
      if (over) overflow(n);
      return out;
    } else {
      const double a = as_double(l), b = as_double(r);
      if (op == "+") return a + b;
      if (op == "-") return a - b;
      if (op == "*") return a * b;
    }
    throw EvalError(fmt::format("unknown operator '{}'", op));
  }

  bool compare(const Node& n) {
    Scalar left = need_scalar(eval(*n.kids[0]), *n.kids[0]);
    for (std::size_t i = 0; i < n.ops.size(); ++i) {
      Scalar right = need_scalar(eval(*n.kids[i + 1]), *n.kids[i + 1]);
      const std::string& op = n.ops[i];
      bool ok;
      if (is_intlike(left) && is_intlike(right)) {
        const std::int64_t a = as_int(left), b = as_int(right);
        ok = op == "=="   ? a == b
             : op == "!=" ? a != b
             : op == "<"  ? a < b
             : op == "<=" ? a <= b
             : op == ">"  ? a > b
                          : a >= b;
      } else {
        const double a = as_double(left), b = as_double(right);
        ok = op == "=="   ? a == b
             : op == "!=" ? a != b
             : op == "<"  ? a < b
             : op == "<=" ? a <= b
             : op == ">"  ? a > b
                          : a >= b;
      }
      if (!ok) {
        failed_detail = fmt::format("{} ({}) {} {} ({})", n.kids[i]->src, scalar_to_string(left),
                                    op, n.kids[i + 1]->src, scalar_to_string(right));
        return false;
      }
      left = right;
    }
    return true;
  }

  static std::int64_t wrap(std::int64_t i, std::int64_t size, const Node& n) {
    const std::int64_t j = i < 0 ? i + size : i;
    if (j < 0 || j >= size) {
      throw EvalError(fmt::format("index {} is out of range for size {} in '{}'", i, size, n.src));
    }
    return j;
  }

  Val index(const Node& n) {
    Val base = eval(*n.kids[0]);
    const Scalar idx = need_scalar(eval(*n.kids[1]), *n.kids[1]);
    if (!is_intlike(idx)) throw EvalError(fmt::format("index in '{}' is not an integer", n.src));
    const std::int64_t i = as_int(idx);
    if (base.k == Val::K::kShape) {
      return scalar(base.dims[static_cast<std::size_t>(
          wrap(i, static_cast<std::int64_t>(base.dims.size()), n))]);
    }
    if (base.k == Val::K::kTensor) {
      if (base.fixed.size() >= base.dims.size()) {
        throw EvalError(
            fmt::format("too many indices for tensor '{}' in '{}'", base.tensor, n.src));
      }
      base.fixed.push_back(wrap(i, base.dims[base.fixed.size()], n));
      return base;
    }
    throw EvalError(fmt::format("'{}' cannot be indexed", n.kids[0]->src));
  }

  Val attr(const Node& n) {
    Val base = eval(*n.kids[0]);
    if (n.name == "shape" && base.k == Val::K::kTensor) {
      Val v;
      v.k = Val::K::kShape;
      v.dims.assign(base.dims.begin() + static_cast<std::ptrdiff_t>(base.fixed.size()),
                    base.dims.end());
      return v;
    }
    if (n.name == "ndim" && base.k == Val::K::kTensor) {
      return scalar(static_cast<std::int64_t>(base.dims.size() - base.fixed.size()));
    }
    throw EvalError(fmt::format("unsupported attribute '.{}' in '{}'", n.name, n.src));
  }

  Val method(const Node& n) {
    Val base = eval(*n.kids[0]);
    if (n.name == "item") {
      if (base.k == Val::K::kScalar) return base;
      if (base.k == Val::K::kTensor) {
        std::int64_t remaining = 1;
        for (std::size_t d = base.fixed.size(); d < base.dims.size(); ++d) {
          if (__builtin_mul_overflow(remaining, base.dims[d], &remaining)) overflow(n);
        }
        if (remaining != 1) {
          throw EvalError(
              fmt::format("'{}' has {} elements; .item() needs exactly one", n.src, remaining));
        }
        while (base.fixed.size() < base.dims.size()) base.fixed.push_back(0);
        return scalar(element(base));
      }
    }
    if (base.k == Val::K::kTensor) {
      std::vector<std::int64_t> rest(
          base.dims.begin() + static_cast<std::ptrdiff_t>(base.fixed.size()), base.dims.end());
      if (n.name == "numel") {
        std::int64_t p = 1;
        for (auto d : rest) {
          if (__builtin_mul_overflow(p, d, &p)) overflow(n);
        }
        return scalar(p);
      }
      if (n.name == "dim") return scalar(static_cast<std::int64_t>(rest.size()));
      if (n.name == "size") {
        if (n.kids.size() < 2) {
          Val v;
          v.k = Val::K::kShape;
          v.dims = rest;
          return v;
        }
        const std::int64_t i = as_int(need_scalar(eval(*n.kids[1]), *n.kids[1]));
        return scalar(
            rest[static_cast<std::size_t>(wrap(i, static_cast<std::int64_t>(rest.size()), n))]);
      }
    }
    throw EvalError(fmt::format("unsupported method '.{}()' in '{}'", n.name, n.src));
  }

  Val call(const Node& n) {
    if (n.name == "len") {
      if (n.kids.size() != 1) throw EvalError("len() takes one argument");
      Val v = eval(*n.kids[0]);
      if (v.k == Val::K::kShape) return scalar(static_cast<std::int64_t>(v.dims.size()));
      if (v.k == Val::K::kTensor && v.fixed.size() < v.dims.size())
        return scalar(v.dims[v.fixed.size()]);
      throw EvalError(fmt::format("len() of a number in '{}'", n.src));
    }
    if (n.name == "min" || n.name == "max") {
      if (n.kids.empty()) throw EvalError(fmt::format("{}() needs arguments", n.name));
      Scalar best = need_scalar(eval(*n.kids[0]), *n.kids[0]);
      for (std::size_t i = 1; i < n.kids.size(); ++i) {
        Scalar x = need_scalar(eval(*n.kids[i]), *n.kids[i]);
        const bool less = as_double(x) < as_double(best);
        if ((n.name == "min") == less && as_double(x) != as_double(best)) best = x;
      }
      return scalar(best);
    }
    if (n.name == "abs" || n.name == "int" || n.name == "float") {
      if (n.kids.size() != 1) throw EvalError(fmt::format("{}() takes one argument", n.name));
      Scalar x = need_scalar(eval(*n.kids[0]), *n.kids[0]);
      if (n.name == "int") return scalar(as_int(x));
      if (n.name == "float") return scalar(as_double(x));
      if (is_intlike(x)) {
        if (as_int(x) == std::numeric_limits<std::int64_t>::min()) overflow(n);
        return scalar(std::abs(as_int(x)));
      }
      return scalar(std::fabs(as_double(x)));
    }
    throw EvalError(fmt::format("unknown function '{}'", n.name));
  }

  const ConstraintEnv& env_;
};

}  // namespace

ConstraintResult Constraint::evaluate(const ConstraintEnv& env) const {
  Evaluator ev(env);
  try {
    Val v = ev.eval(*root_);
    Scalar s;
    if (v.k == Val::K::kScalar) {
      s = v.s;
    } else {
      return {Verdict::kError, fmt::format("'{}' is not a boolean expression", text_)};
    }
    if (truthy(s)) return {Verdict::kHolds, {}};
    return {Verdict::kViolated, ev.failed_detail.empty() ? text_ : ev.failed_detail};
  } catch (const Unknown& e) {
    return {Verdict::kUnknown, e.what()};
  } catch (const EvalError& e) {
    return {Verdict::kError, e.what()};
  }
}

}  // namespace fib
