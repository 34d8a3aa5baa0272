// Helpers for reference tests: seeded random tensors, corpus definitions, and a closeness
// check that reports the first mismatch.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>

#include "fib/reference/reference.h"
#include "fib/tensor/tensor.h"
#include "fib/trace/definition.h"
#include "support/test_paths.h"

namespace fib::testing {

inline Tensor random_tensor(DType dtype, Shape shape, std::mt19937_64& rng, double lo = -1.0,
                            double hi = 1.0) {
  Tensor t(dtype, std::move(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

// Loads a corpus definition by op_type and name (the caller has checked the corpus exists).
inline Definition corpus_definition(const std::filesystem::path& corpus, const std::string& op_type,
                                    const std::string& name) {
  return load_definition((corpus / "definitions" / op_type / (name + ".json")).string());
}

// `def` with its JSON changed by `edit` and read back (the parse checked, so a bad edit fails
// the test with the reader's diagnostics): variants of a definition for tests.
inline Definition edited_definition(const Definition& def, const std::function<void(Json&)>& edit) {
  Json j = to_json(def);
  edit(j);
  Diagnostics diag;
  ReadContext ctx{def.name, &diag};
  auto d = definition_from_json(j, ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return d ? *d : def;
}

// A corpus definition with some const axes and reference constants (`NAME = value` lines)
// changed, and the reference's `assert` lines (which pin the original sizes) dropped: the
// definition's own math at sizes a parity test can afford. Fails the test when an axis or a
// constant is not there.
inline Definition scaled_definition(const Definition& def,
                                    const std::map<std::string, std::int64_t>& axes,
                                    const std::map<std::string, std::string>& constants = {}) {
  static const std::regex kAssign(
      R"(^(\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)[-+0-9.eE_]+\s*(#.*)?$)");
  static const std::regex kAssert(R"(^\s*assert\b.*$)");
  std::map<std::string, int> replaced;
  std::istringstream in(def.reference);
  std::string line, code;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // some references have CRLF endings
    if (std::regex_match(line, kAssert)) continue;
    std::smatch m;
    if (std::regex_match(line, m, kAssign) && constants.count(m[2].str())) {
      const std::string name = m[2].str();  // m points into `line`, which is replaced next
      line = m[1].str() + name + m[3].str() + constants.at(name);
      ++replaced[name];
    }
    code += line + "\n";
  }
  for (const auto& [name, value] : constants)
    EXPECT_TRUE(replaced.count(name)) << def.name << ": no constant " << name;
  return edited_definition(def, [&](Json& j) {
    j["name"] = def.name + "_scaled";
    for (const auto& [name, value] : axes) {
      EXPECT_TRUE(j["axes"].contains(name) && j["axes"][name].contains("value"))
          << def.name << ": no const axis " << name;
      j["axes"][name]["value"] = value;
    }
    j["reference"] = code;
  });
}

// Every element within atol + rtol * |expected| (NaN only where expected is NaN, equal infs).
inline ::testing::AssertionResult tensors_close(const Tensor& actual, const Tensor& expected,
                                                double atol, double rtol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shape " << shape_to_string(actual.shape()) << " vs "
                                         << shape_to_string(expected.shape());
  }
  if (actual.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(actual.dtype()) << " vs " << dtype_name(expected.dtype());
  }
  std::int64_t bad = 0, first = -1;
  double worst = 0;
  for (std::int64_t i = 0; i < actual.numel(); ++i) {
    const double a = actual.get(i), e = expected.get(i);
    bool ok;
    if (std::isnan(e) || std::isnan(a)) {
      ok = std::isnan(e) && std::isnan(a);
    } else if (std::isinf(e) || std::isinf(a)) {
      ok = a == e;
    } else {
      ok = std::fabs(a - e) <= atol + rtol * std::fabs(e);
      worst = std::max(worst, std::fabs(a - e));
    }
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess() << "max abs error " << worst;
  return ::testing::AssertionFailure()
         << bad << " of " << actual.numel() << " elements differ; first at flat index " << first
         << ": " << actual.get(first) << " vs " << expected.get(first)
         << " (max abs error of the others " << worst << ")";
}

}  // namespace fib::testing
