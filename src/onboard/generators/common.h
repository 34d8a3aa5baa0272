// What every generator shares: a builder that assembles a Definition and checks it the way a
// dataset reader would, placeholder substitution for reference templates, and common tags.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fib/onboard/generators.h"
#include "fib/onboard/kernel_spec.h"
#include "fib/trace/definition.h"

namespace fib::onboard::gen {

class Builder {
 public:
  Builder(std::string name, std::string op_type, std::string description);

  Builder& tag(std::string t);
  Builder& var(std::string name, std::string description = {});
  Builder& constant(std::string name, std::int64_t value, std::string description = {});
  Builder& input(std::string name, std::vector<std::string> shape, DType dtype,
                 std::string description = {}, bool optional = false);
  Builder& scalar(std::string name, DType dtype, std::string description = {});
  Builder& output(std::string name, std::vector<std::string> shape, DType dtype,
                  std::string description = {});
  Builder& constraint(std::string c);
  Builder& reference(std::string source);

  // Round-trips the definition through its JSON reader and checks the reference signature.
  // A failure is a bug in a generator, so it throws std::logic_error with the findings.
  Definition build();

 private:
  Definition d_;
};

// Replaces each @KEY@ in `tmpl` by its value. Every key must occur (a template and its caller
// must not drift apart silently), and no @KEY@ may be left over.
std::string fill(std::string_view tmpl,
                 std::initializer_list<std::pair<std::string_view, std::string>> values);

// A float as Python source ("1e-05", "0.5").
std::string py_float(double x);

// "model:<slug>" and the status every generated definition starts with.
std::string model_tag(const GenContext& ctx);
inline constexpr std::string_view kStatusTag = "status:unverified";

// "Derived by fib onboard from the <model> config" plus an optional detail ("TP=8").
std::string provenance(const GenContext& ctx, std::string_view detail = {});

// "(128/8=16)" style split annotation for axis descriptions; empty when tp == 1.
std::string split_note(std::int64_t full, int tp, std::int64_t per_rank);

}  // namespace fib::onboard::gen
